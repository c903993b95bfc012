//! The shape a JSONPath query must have for a directory search, checked on its text after
//! `serde_json_path` has parsed it (the parser keeps its syntax tree private):
//!
//! - a search evaluates the query on one TD at a time, each the only member of the root
//!   array, so that its time can be checked between TDs: a selector by position on the
//!   root (`$[0]`, `$[-1]`, `$[1:3]`, `$..[0]`) and an absolute query inside a filter
//!   (`$[?@.id == $[0].id]`) would see one TD instead of all, and are refused;
//! - at most `max_query_descendants` descendant segments (`..`);
//! - the regular expression of `match()` and `search()` is a string literal of at most
//!   `max_query_pattern_bytes` that compiles within [`PATTERN_PROGRAM_BYTES`], not a value
//!   read from a TD: each is compiled here, once, into the query's [`Patterns`], which the
//!   functions use while the query runs (`regex_functions`).

use crate::error::DirectoryError;
use crate::limits::DirectoryLimits;
use crate::regex_functions::{self, Patterns};

/// The most heap one compiled `match()` or `search()` pattern may take.
pub const PATTERN_PROGRAM_BYTES: usize = 256 * 1024;

/// What the checks found of a query's shape.
#[derive(Debug)]
pub(crate) struct Shape {
    /// The query is `$` alone: the root array itself.
    pub(crate) whole_root: bool,
    /// Its `match()` and `search()` patterns, compiled.
    pub(crate) patterns: Patterns,
}

/// Checks `query` (already parsed by `serde_json_path`, so well-formed) against the rules
/// above.
pub(crate) fn check(query: &str, limits: &DirectoryLimits) -> Result<Shape, DirectoryError> {
    let tokens = Tokens::of(query);
    let mut descendants = 0;
    let mut patterns = Patterns::default();
    for (at, token) in tokens.outside.iter().enumerate() {
        match token {
            Token::Root if at > 0 => {
                return Err(refused(
                    "an absolute query (`$`) inside a filter: a search evaluates the query on \
                     one TD at a time; use `@`",
                ))
            }
            Token::Descendant => descendants += 1,
            Token::Function(name) => {
                let pattern = pattern_argument(query, &tokens, at).ok_or_else(|| {
                    refused(&format!(
                        "the regular expression of `{name}()` must be a string literal"
                    ))
                })?;
                check_pattern(name, &pattern, limits, &mut patterns)?;
            }
            _ => {}
        }
    }
    if descendants > limits.max_query_descendants {
        return Err(refused(&format!(
            "{descendants} descendant segments (`..`); at most {} are searched",
            limits.max_query_descendants
        )));
    }
    if positional_root(query) {
        return Err(refused(
            "a selector by position on the root: the root is the directory's TDs, which a \
             search takes one at a time; select them with `*` or a filter",
        ));
    }
    Ok(Shape {
        whole_root: query.trim_end() == "$",
        patterns,
    })
}

fn refused(reason: &str) -> DirectoryError {
    DirectoryError::InvalidQuery {
        reason: format!("JSONPath search: {reason}"),
    }
}

/// What the scan of a query's text notes outside string literals.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    /// `$`.
    Root,
    /// `..`.
    Descendant,
    /// `match(` or `search(`: the byte after the parenthesis is in `Tokens::after`.
    Function(&'static str),
}

/// The tokens of a query outside its string literals, with the byte offset after each.
struct Tokens {
    outside: Vec<Token>,
    after: Vec<usize>,
}

impl Tokens {
    fn of(query: &str) -> Self {
        let bytes = query.as_bytes();
        let mut outside = Vec::new();
        let mut after = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            match bytes[at] {
                b'\'' | b'"' => at = string_end(bytes, at),
                b'$' => {
                    at += 1;
                    outside.push(Token::Root);
                    after.push(at);
                }
                b'.' if bytes.get(at + 1) == Some(&b'.') => {
                    at += 2;
                    outside.push(Token::Descendant);
                    after.push(at);
                }
                byte if byte.is_ascii_alphabetic() || byte == b'_' => {
                    let start = at;
                    while at < bytes.len()
                        && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'_')
                    {
                        at += 1;
                    }
                    let word = &query[start..at];
                    let name = match word {
                        "match" => Some("match"),
                        "search" => Some("search"),
                        _ => None,
                    };
                    let called = skip_blank(bytes, at);
                    let member = previous_non_blank(bytes, start) == Some(b'.');
                    if let Some(name) = name.filter(|_| !member && bytes.get(called) == Some(&b'('))
                    {
                        outside.push(Token::Function(name));
                        after.push(called + 1);
                        at = called + 1;
                    }
                }
                _ => at += 1,
            }
        }
        Self { outside, after }
    }
}

/// The offset after the string literal that opens at `start` (its quote), or the end.
fn string_end(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let mut at = start + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            byte if byte == quote => return at + 1,
            _ => at += 1,
        }
    }
    bytes.len()
}

fn skip_blank(bytes: &[u8], mut at: usize) -> usize {
    while bytes
        .get(at)
        .is_some_and(|byte| matches!(byte, b' ' | b'\t' | b'\n' | b'\r'))
    {
        at += 1;
    }
    at
}

fn previous_non_blank(bytes: &[u8], before: usize) -> Option<u8> {
    bytes[..before]
        .iter()
        .rev()
        .copied()
        .find(|byte| !matches!(byte, b' ' | b'\t' | b'\n' | b'\r'))
}

/// The second argument of the function whose token is `tokens.outside[at]`, when it is a
/// string literal: its value, escapes applied.
fn pattern_argument(query: &str, tokens: &Tokens, at: usize) -> Option<String> {
    let bytes = query.as_bytes();
    let mut offset = *tokens.after.get(at)?;
    // The first argument: up to the comma at depth 0.
    let mut depth = 0usize;
    loop {
        match bytes.get(offset)? {
            b'\'' | b'"' => offset = string_end(bytes, offset),
            b'(' | b'[' => {
                depth += 1;
                offset += 1;
            }
            b')' | b']' => {
                depth = depth.checked_sub(1)?;
                offset += 1;
            }
            b',' if depth == 0 => break,
            _ => offset += 1,
        }
    }
    let start = skip_blank(bytes, offset + 1);
    if !matches!(bytes.get(start), Some(b'\'' | b'"')) {
        return None;
    }
    let end = string_end(bytes, start);
    if bytes.get(skip_blank(bytes, end)) != Some(&b')') {
        return None;
    }
    unescape(query.get(start..end)?)
}

/// A JSONPath string literal (RFC 9535 §2.3.1.1, quotes included) as its value: the JSON
/// escapes, and `\'` in either quotes.
fn unescape(literal: &str) -> Option<String> {
    let inner = literal.get(1..literal.len().checked_sub(1)?)?;
    let mut json = String::with_capacity(inner.len() + 2);
    json.push('"');
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                '\'' => json.push('\''),
                escaped => {
                    json.push('\\');
                    json.push(escaped);
                }
            },
            '"' => json.push_str("\\\""),
            other => json.push(other),
        }
    }
    json.push('"');
    serde_json::from_str(&json).ok()
}

/// Checks a `match()`/`search()` pattern and compiles it as the function uses it, into
/// `patterns`.
fn check_pattern(
    name: &str,
    pattern: &str,
    limits: &DirectoryLimits,
    patterns: &mut Patterns,
) -> Result<(), DirectoryError> {
    if pattern.len() > limits.max_query_pattern_bytes {
        return Err(refused(&format!(
            "the regular expression of `{name}()` is {} bytes; at most {} are compiled",
            pattern.len(),
            limits.max_query_pattern_bytes
        )));
    }
    let source = regex_functions::source(name, pattern);
    patterns.compile(source).map_err(|error| {
        refused(&format!(
            "the regular expression of `{name}()` cannot be used: {error}"
        ))
    })
}

/// Whether the first segment after the root selects by position: an index or a slice in
/// `$[…]` or `$..[…]`.
fn positional_root(query: &str) -> bool {
    let bytes = query.as_bytes();
    let mut at = skip_blank(bytes, 1);
    if bytes.get(at) == Some(&b'.') && bytes.get(at + 1) == Some(&b'.') {
        at += 2;
    }
    if bytes.get(at) != Some(&b'[') {
        return false;
    }
    // Each selector of the bracket, split at commas at depth 0.
    let mut depth = 0usize;
    let mut selector_start = at + 1;
    at += 1;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'\'' | b'"' => {
                at = string_end(bytes, at);
                continue;
            }
            b'(' | b'[' => depth += 1,
            b')' => depth = depth.saturating_sub(1),
            b']' if depth == 0 => return by_position(bytes, selector_start),
            b']' => depth -= 1,
            b',' if depth == 0 => {
                if by_position(bytes, selector_start) {
                    return true;
                }
                selector_start = at + 1;
            }
            _ => {}
        }
        at += 1;
    }
    false
}

/// Whether the selector starting at `start` is an index or a slice.
fn by_position(bytes: &[u8], start: usize) -> bool {
    matches!(
        bytes.get(skip_blank(bytes, start)),
        Some(b'0'..=b'9' | b'-' | b':')
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(query: &str) -> Result<Shape, String> {
        serde_json_path::JsonPath::parse(query).expect("a well-formed query");
        check(query, &DirectoryLimits::default()).map_err(|error| error.to_string())
    }

    #[test]
    fn queries_over_each_td_pass() {
        for query in [
            "$[*]",
            "$[?@.title == 'Lamp']",
            "$[*].id",
            "$..actions.*",
            "$..properties..type",
            "$[?@.title == '$[0]' && @.id == \"..\"]",
            "$[?match(@.title, 'La.*')]",
            "$[?search(@.title, \"a\\\\d\")]",
            "$[?count(@..forms) > 1]",
            "$[*].forms[0]",
            "$.match",
            "$[?@.match == 1]",
        ] {
            assert_eq!(
                shape(query).map(|shape| shape.whole_root),
                Ok(false),
                "{query}"
            );
        }
        assert_eq!(shape("$").map(|shape| shape.whole_root), Ok(true));
    }

    #[test]
    fn positions_on_the_root_and_absolute_queries_in_filters_are_refused() {
        for query in [
            "$[0]", "$[-1]", "$[1:3]", "$[:2]", "$..[0]", "$[*, 0]", "$ [ 0 ]",
        ] {
            let refused = shape(query).unwrap_err();
            assert!(
                refused.contains("by position on the root"),
                "{query}: {refused}"
            );
        }
        let refused = shape("$[?@.id == $[0].id]").unwrap_err();
        assert!(refused.contains("absolute query"), "{refused}");
    }

    #[test]
    fn descendants_and_patterns_are_bounded() {
        let refused = shape("$..a..b..c").unwrap_err();
        assert!(refused.contains("3 descendant segments"), "{refused}");
        let refused = shape("$[?match(@.title, @.pattern)]").unwrap_err();
        assert!(refused.contains("must be a string literal"), "{refused}");
        let long = format!("$[?match(@.title, '{}')]", "a".repeat(129));
        let refused = shape(&long).unwrap_err();
        assert!(refused.contains("129 bytes"), "{refused}");
        let refused = shape("$[?search(@.title, '\\\\w{100}{100}')]").unwrap_err();
        assert!(refused.contains("cannot be used"), "{refused}");
        let refused = shape("$[?match(@.title, '(')]").unwrap_err();
        assert!(refused.contains("cannot be used"), "{refused}");
    }
}
