//! The two forms a handler module may take, and how an ES module becomes the script the
//! sandbox runs.
//!
//! A module is either a strict-mode **script** declaring the contract functions at top level,
//! or an **ES module** exporting them (`export function f`, `export const f = …`,
//! `export { f, g as h }`). An ES module is turned into a script of the same length in lines
//! and columns by blanking its `export` keywords and `export { … }` clauses, and the names it
//! exports under the contract's function names are remembered, so the factory returns exactly
//! those bindings. The script then goes through the same compile check, wrapper and bytecode
//! as any script: this rewrite decides which bindings are the contract functions, never what
//! code may run, so a module it misreads is at worst refused, never given more power.
//!
//! `import` in any form (a static import, `export … from`, `import()`, `import.meta`) is
//! refused with [`SandboxError::Import`]: a handler has no I/O and no other module to load.
//! `export default` and exported destructuring patterns are refused with a compile error that
//! says what to write instead.

use std::collections::HashMap;

use crate::contract::Function;
use crate::error::SandboxError;
use crate::source::line_and_column;

/// What the module text turned out to be.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// A strict-mode script: compiled as given.
    Script,
    /// An ES module, rewritten as a script.
    Module {
        /// The script: the source with its export syntax blanked (same lines and columns).
        script: String,
        /// The local binding exported under each contract function's name, in
        /// [`Function::ALL`] order; `None` for the names the module does not export.
        exports: [Option<String>; 4],
    },
}

/// Reads `source` as a script or an ES module; see the module documentation.
///
/// # Errors
/// [`SandboxError::Import`] for any `import`, [`SandboxError::Compile`] for an export form
/// the sandbox does not take.
pub(crate) fn read(source: &str) -> Result<Form, SandboxError> {
    let tokens = scan(source);
    let text = |token: &Token| &source[token.start..token.end];
    let is_dot = |index: Option<usize>| {
        index.is_some_and(|index: usize| {
            tokens[index].kind == Kind::Punct && text(&tokens[index]) == "."
        })
    };
    for (index, token) in tokens.iter().enumerate() {
        if token.kind == Kind::Word
            && text(token) == "import"
            && !is_dot(index.checked_sub(1))
            && tokens
                .get(index + 1)
                .is_none_or(|next| !(next.kind == Kind::Punct && text(next) == ":"))
        {
            return Err(import_error(source, token.start));
        }
    }
    let mut exported: HashMap<String, String> = HashMap::new();
    let mut blanks: Vec<(usize, usize)> = Vec::new();
    let mut index = 0;
    while index < tokens.len() {
        let token = &tokens[index];
        let is_export = token.kind == Kind::Word
            && token.depth == 0
            && text(token) == "export"
            && !is_dot(index.checked_sub(1));
        if !is_export {
            index += 1;
            continue;
        }
        let refuse = |message: &str| {
            let (line, column) = line_and_column(source, token.start);
            SandboxError::Compile {
                line,
                column,
                message: message.to_owned(),
            }
        };
        let word = |offset: usize| {
            tokens
                .get(index + offset)
                .filter(|token| token.kind == Kind::Word)
                .map(text)
        };
        let punct = |offset: usize| {
            tokens
                .get(index + offset)
                .filter(|token| token.kind == Kind::Punct)
                .map(text)
        };
        match (word(1), punct(1)) {
            (Some("default"), _) => {
                return Err(refuse(
                    "`export default` is not a contract export: export the functions by \
                     name (`export function encodeRequest(…)`)",
                ))
            }
            (_, Some("*")) => return Err(import_error(source, token.start)),
            (_, Some("{")) => {
                let (close, pairs) = export_clause(source, &tokens, index + 1)
                    .ok_or_else(|| refuse("malformed `export { … }` clause"))?;
                let from = tokens
                    .get(close + 1)
                    .is_some_and(|next| next.kind == Kind::Word && text(next) == "from");
                if from {
                    return Err(import_error(source, token.start));
                }
                for (local, name) in pairs {
                    exported.insert(name, local);
                }
                blanks.push((token.start, tokens[close].end));
                index = close + 1;
            }
            (Some("function" | "class"), _) | (Some("async"), _)
                if word(1) != Some("async") || word(2) == Some("function") =>
            {
                let after = if word(1) == Some("async") { 3 } else { 2 };
                let after = if punct(after) == Some("*") {
                    after + 1
                } else {
                    after
                };
                let name = word(after).ok_or_else(|| refuse("exported declaration has no name"))?;
                exported.insert(name.to_owned(), name.to_owned());
                blanks.push((token.start, token.end));
                index += after + 1;
            }
            (Some("const" | "let" | "var"), _) => {
                let (names, end) = declared_names(source, &tokens, index + 2)
                    .map_err(|message| refuse(&message))?;
                for name in names {
                    exported.insert(name.clone(), name);
                }
                blanks.push((token.start, token.end));
                index = end;
            }
            _ => {
                return Err(refuse(
                    "unsupported `export` form: use `export function f`, `export const f = …` \
                     or `export { f, g }`",
                ))
            }
        }
    }
    if blanks.is_empty() {
        return Ok(Form::Script);
    }
    let exports = Function::ALL.map(|function| exported.get(function.name()).cloned());
    if let Some(local) = exports.iter().flatten().find(|local| !is_identifier(local)) {
        return Err(SandboxError::Compile {
            line: 1,
            column: 1,
            message: format!(
                "exported binding {local:?} is not a plain identifier (letters, digits, `_`, `$`)"
            ),
        });
    }
    Ok(Form::Module {
        script: blank(source, &blanks),
        exports,
    })
}

/// Whether `name` is an identifier made of letters, digits, `_` and `$` (no escapes), so it
/// can be written into the factory's return list as it is.
fn is_identifier(name: &str) -> bool {
    let mut characters = name.chars();
    characters
        .next()
        .is_some_and(|first| first.is_alphabetic() || matches!(first, '_' | '$'))
        && characters.all(|character| character.is_alphanumeric() || matches!(character, '_' | '$'))
}

/// The error for an `import` (or `export … from`) at byte `offset`.
fn import_error(source: &str, offset: usize) -> SandboxError {
    let (line, column) = line_and_column(source, offset);
    SandboxError::Import { line, column }
}

/// Reads `export { a, b as c, d as "e" }` from the `{` at `open`: the index of the closing
/// `}` and the (local, exported) name pairs. `None` when it is not such a clause.
fn export_clause(
    source: &str,
    tokens: &[Token],
    open: usize,
) -> Option<(usize, Vec<(String, String)>)> {
    let text = |index: usize| {
        tokens
            .get(index)
            .map(|token| &source[token.start..token.end])
    };
    let name = |index: usize| {
        let token = tokens.get(index)?;
        let raw = &source[token.start..token.end];
        match token.kind {
            Kind::Word => Some(raw.to_owned()),
            Kind::Literal if raw.starts_with(['"', '\'']) && raw.len() >= 2 => {
                Some(raw[1..raw.len() - 1].to_owned())
            }
            _ => None,
        }
    };
    let mut pairs = Vec::new();
    let mut index = open + 1;
    loop {
        if text(index)? == "}" {
            return Some((index, pairs));
        }
        let local = name(index)?;
        index += 1;
        let exported = if text(index)? == "as" {
            index += 2;
            name(index - 1)?
        } else {
            local.clone()
        };
        pairs.push((local, exported));
        match text(index)? {
            "," => index += 1,
            "}" => return Some((index, pairs)),
            _ => return None,
        }
    }
}

/// Reads the names a `const`/`let`/`var` declaration starting at token `first` declares, and
/// the index of the token after it. Declarators are separated by top-level commas; the
/// declaration ends at a top-level `;`, or at a line break where automatic semicolon
/// insertion ends it (a word or literal after a token that ends an expression).
fn declared_names(
    source: &str,
    tokens: &[Token],
    first: usize,
) -> Result<(Vec<String>, usize), String> {
    let text = |token: &Token| &source[token.start..token.end];
    let mut names = Vec::new();
    let mut index = first;
    loop {
        match tokens.get(index) {
            Some(token) if token.kind == Kind::Word => names.push(text(token).to_owned()),
            Some(token) if matches!(text(token), "{" | "[") => {
                return Err(
                    "an exported destructuring pattern is not supported: declare \
                            the names, then `export { a, b }`"
                        .into(),
                )
            }
            _ => return Err("exported declaration has no name".into()),
        }
        index += 1;
        loop {
            let Some(token) = tokens.get(index) else {
                return Ok((names, index));
            };
            if token.depth == 0 {
                let ends_expression = tokens.get(index - 1).is_some_and(|previous| {
                    previous.kind != Kind::Punct || matches!(text(previous), ")" | "]" | "}")
                });
                if token.kind == Kind::Punct && text(token) == ";" {
                    return Ok((names, index + 1));
                }
                if token.newline_before && token.kind != Kind::Punct && ends_expression {
                    return Ok((names, index));
                }
                if token.kind == Kind::Punct && text(token) == "," {
                    index += 1;
                    break;
                }
            }
            index += 1;
        }
    }
}

/// `source` with each byte range replaced by spaces, one per character, line breaks kept.
fn blank(source: &str, ranges: &[(usize, usize)]) -> String {
    let mut script = String::with_capacity(source.len());
    let mut from = 0;
    for &(start, end) in ranges {
        script.push_str(&source[from..start]);
        for character in source[start..end].chars() {
            script.push(if is_line_break(character) {
                character
            } else {
                ' '
            });
        }
        from = end;
    }
    script.push_str(&source[from..]);
    script
}

fn is_line_break(character: char) -> bool {
    matches!(character, '\n' | '\r' | '\u{2028}' | '\u{2029}')
}

/// What a token is, as far as finding `import` and top-level `export` needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// An identifier or keyword.
    Word,
    /// One punctuation character.
    Punct,
    /// A string, number, template piece or regular expression.
    Literal,
}

#[derive(Debug, Clone, Copy)]
struct Token {
    kind: Kind,
    start: usize,
    end: usize,
    /// Bracket nesting (`{`, `(`, `[`, `${`) at the token's start.
    depth: usize,
    /// Whether a line break precedes it.
    newline_before: bool,
}

/// Words after which `/` starts a regular expression rather than a division.
const REGEX_AFTER: [&str; 15] = [
    "return",
    "typeof",
    "instanceof",
    "in",
    "of",
    "new",
    "delete",
    "void",
    "throw",
    "case",
    "do",
    "else",
    "yield",
    "await",
    "extends",
];

/// Splits `source` into tokens: enough of JavaScript's lexical grammar to skip comments,
/// strings, templates (with nested substitutions) and regular expressions and to know the
/// bracket depth. Never fails: text it cannot read ends up in some token, and the engine's
/// compile check reports real syntax errors.
fn scan(source: &str) -> Vec<Token> {
    let bytes = source.as_bytes();
    let mut tokens: Vec<Token> = Vec::new();
    // One entry per open bracket: `true` when it is a template's `${`.
    let mut brackets: Vec<bool> = Vec::new();
    let mut newline = false;
    let mut at = 0;
    let push = |tokens: &mut Vec<Token>, kind, start, end, depth, newline: &mut bool| {
        tokens.push(Token {
            kind,
            start,
            end,
            depth,
            newline_before: *newline,
        });
        *newline = false;
    };
    while at < bytes.len() {
        let byte = bytes[at];
        let depth = brackets.len();
        match byte {
            b'\n' | b'\r' => {
                newline = true;
                at += 1;
            }
            b' ' | b'\t' | 0x0b | 0x0c => at += 1,
            b'/' if bytes.get(at + 1) == Some(&b'/') => {
                while at < bytes.len() && bytes[at] != b'\n' && bytes[at] != b'\r' {
                    at += 1;
                }
            }
            b'/' if bytes.get(at + 1) == Some(&b'*') => {
                let end = source[at + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |offset| at + 2 + offset + 2);
                if source[at..end].contains(['\n', '\r']) {
                    newline = true;
                }
                at = end;
            }
            b'/' if regex_allowed(source, tokens.last()) => {
                let end = regex_end(bytes, at);
                push(&mut tokens, Kind::Literal, at, end, depth, &mut newline);
                at = end;
            }
            b'"' | b'\'' => {
                let mut end = at + 1;
                while end < bytes.len() && bytes[end] != byte && bytes[end] != b'\n' {
                    end += if bytes[end] == b'\\' { 2 } else { 1 };
                }
                let end = (end + 1).min(bytes.len());
                push(&mut tokens, Kind::Literal, at, end, depth, &mut newline);
                at = end;
            }
            b'`' => {
                let (end, opened) = template_end(bytes, at + 1);
                push(&mut tokens, Kind::Literal, at, end, depth, &mut newline);
                if opened {
                    brackets.push(true);
                }
                at = end;
            }
            b'}' if brackets.last() == Some(&true) => {
                brackets.pop();
                let (end, opened) = template_end(bytes, at + 1);
                push(&mut tokens, Kind::Literal, at, end, depth, &mut newline);
                if opened {
                    brackets.push(true);
                }
                at = end;
            }
            b'0'..=b'9' => {
                let end = word_end(source, at);
                push(&mut tokens, Kind::Literal, at, end, depth, &mut newline);
                at = end;
            }
            b'.' if bytes.get(at + 1).is_some_and(u8::is_ascii_digit) => {
                let end = word_end(source, at + 1);
                push(&mut tokens, Kind::Literal, at, end, depth, &mut newline);
                at = end;
            }
            _ if is_word_start(source, at) => {
                let end = word_end(source, at);
                push(&mut tokens, Kind::Word, at, end, depth, &mut newline);
                at = end;
            }
            _ if byte >= 0x80 => {
                // Non-ASCII whitespace (a word start was handled above).
                let character = source[at..].chars().next().unwrap_or(' ');
                if is_line_break(character) {
                    newline = true;
                }
                at += character.len_utf8();
            }
            _ => {
                let depth = match byte {
                    b'{' | b'(' | b'[' => {
                        brackets.push(false);
                        depth
                    }
                    b'}' | b')' | b']' => {
                        brackets.pop();
                        brackets.len()
                    }
                    _ => depth,
                };
                push(&mut tokens, Kind::Punct, at, at + 1, depth, &mut newline);
                at += 1;
            }
        }
    }
    tokens
}

/// Whether a `/` after `previous` starts a regular expression.
fn regex_allowed(source: &str, previous: Option<&Token>) -> bool {
    match previous {
        None => true,
        Some(token) => {
            let text = &source[token.start..token.end];
            match token.kind {
                Kind::Word => REGEX_AFTER.contains(&text),
                Kind::Literal => false,
                Kind::Punct => !matches!(text, ")" | "]"),
            }
        }
    }
}

/// End of the regular expression literal starting at the `/` at `start` (flags included).
fn regex_end(bytes: &[u8], start: usize) -> usize {
    let mut at = start + 1;
    let mut in_class = false;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 1,
            b'[' => in_class = true,
            b']' => in_class = false,
            b'/' if !in_class => {
                at += 1;
                while at < bytes.len() && (bytes[at].is_ascii_alphanumeric()) {
                    at += 1;
                }
                return at;
            }
            b'\n' | b'\r' => return at,
            _ => {}
        }
        at += 1;
    }
    bytes.len()
}

/// End of a template piece starting after its opening `` ` `` or `}`, and whether it ends
/// with a `${` (a substitution follows) rather than the closing `` ` ``.
fn template_end(bytes: &[u8], mut at: usize) -> (usize, bool) {
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'`' => return (at + 1, false),
            b'$' if bytes.get(at + 1) == Some(&b'{') => return (at + 2, true),
            _ => at += 1,
        }
    }
    (bytes.len(), false)
}

fn is_word_start(source: &str, at: usize) -> bool {
    match source[at..].chars().next() {
        Some(character) if character.is_ascii() => {
            character.is_ascii_alphabetic() || matches!(character, '_' | '$' | '\\')
        }
        Some(character) => !character.is_whitespace(),
        None => false,
    }
}

fn word_end(source: &str, start: usize) -> usize {
    source[start..]
        .char_indices()
        .find(|&(_, character)| {
            if character.is_ascii() {
                !(character.is_ascii_alphanumeric() || matches!(character, '_' | '$' | '\\'))
            } else {
                character.is_whitespace()
            }
        })
        .map_or(source.len(), |(offset, _)| start + offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(source: &str) -> (String, [Option<String>; 4]) {
        match read(source) {
            Ok(Form::Module { script, exports }) => (script, exports),
            other => panic!("{source}: {other:?}"),
        }
    }

    #[test]
    fn scripts_stay_scripts() {
        for source in [
            "function encodeRequest(i) { return i; }",
            "const s = 'export function x'; // export const y\n/* export {a} */",
            "const t = `export ${ {export: 1}.export } function`;",
            "const r = /export function f/; const o = {export: 1}; o.export;",
            "x.import(1); const o = { import: 2 };",
        ] {
            assert_eq!(read(source), Ok(Form::Script), "{source}");
        }
    }

    #[test]
    fn exports_are_blanked_and_named() {
        let source = "export function encodeRequest(i) { return i; }\n\
                      export async function decodeResponse(m) { return m; }";
        let (script, exports) = module(source);
        assert_eq!(script.len(), source.len());
        assert!(
            script.starts_with("       function encodeRequest"),
            "{script}"
        );
        assert_eq!(exports[0].as_deref(), Some("encodeRequest"));
        assert_eq!(exports[1].as_deref(), Some("decodeResponse"));
        assert_eq!(exports[2], None);

        let (script, exports) = module(
            "function a(m) { return m; }\nconst b = (r) => r;\nexport { a as decodeRequest,\n b as \"encodeResponse\" };",
        );
        assert!(
            script
                .lines()
                .skip(2)
                .all(|line| line.trim().is_empty() || line.trim() == ";"),
            "{script:?}"
        );
        assert_eq!(exports[2].as_deref(), Some("a"));
        assert_eq!(exports[3].as_deref(), Some("b"));

        let (_, exports) = module(
            "export const x = 1, encodeRequest = (i) => ({ a: [1, 2], b: i })\n\
             export let decodeResponse = function (m) { return m; }, y = 2;",
        );
        assert_eq!(exports[0].as_deref(), Some("encodeRequest"));
        assert_eq!(exports[1].as_deref(), Some("decodeResponse"));
    }

    #[test]
    fn imports_and_unsupported_exports_are_refused() {
        for (source, line, column) in [
            ("import * as std from 'std';", 1, 1),
            ("const a = 1;\n  import('os');", 2, 3),
            ("function f() { return import.meta; }", 1, 23),
            ("export * from 'x';", 1, 1),
            ("export { a } from 'x';", 1, 1),
        ] {
            assert_eq!(
                read(source),
                Err(SandboxError::Import { line, column }),
                "{source}"
            );
        }
        for (source, says) in [
            ("export default function f() {}", "export default"),
            ("export const { a, b } = c;", "destructuring"),
            ("export 1;", "unsupported `export` form"),
        ] {
            let error = read(source).unwrap_err().to_string();
            assert!(error.contains(says), "{source}: {error}");
        }
    }
}
