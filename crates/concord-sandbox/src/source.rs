//! How module source text becomes a factory function, and how engine positions map back to it.
//!
//! The module (a strict-mode script declaring top-level functions, or an ES module already
//! rewritten as one by [`crate::module`]) is first compiled on its own
//! as [`check_text`], which is where compile errors are reported, and then as [`factory_text`],
//! the body of a function that returns the contract functions. Because the source is a valid
//! script on its own, and both texts put it after the same number of characters on line 1, it
//! tokenizes identically in both: it cannot close the wrapper function early and run code
//! outside it.

use crate::contract::Function;
use crate::error::SandboxError;

/// File name the engine reports in handler stack frames.
pub(crate) const MODULE_FILE: &str = "handler.js";

/// Opens the factory function. Kept on line 1 so line numbers match the source.
const FACTORY_HEAD: &str = "(function(){\"use strict\";";
/// Same length as [`FACTORY_HEAD`] so columns on line 1 shift by the same amount.
const CHECK_HEAD: &str = "\"use strict\";            ";

const _: () = assert!(FACTORY_HEAD.len() == CHECK_HEAD.len());

/// Refuses what the engine must never see: NUL characters (the C parser stops at them) and
/// `BigInt` literals. `BigInt` is not available in handlers because its arithmetic runs in
/// native code the deadline cannot interrupt (converting a 2^20-bit value to decimal takes
/// seconds); the literal scan is deliberately coarse, so a string such as `"10n"` is refused
/// too.
pub(crate) fn check_characters(source: &str) -> Result<(), SandboxError> {
    let refuse = |offset: usize, message: &str| {
        let (line, column) = line_and_column(source, offset);
        Err(SandboxError::Compile {
            line,
            column,
            message: message.to_owned(),
        })
    };
    if let Some(offset) = source.find('\0') {
        return refuse(offset, "NUL character in source");
    }
    if let Some(offset) = bigint_literal(source) {
        return refuse(
            offset,
            "BigInt is not available in handler modules (its arithmetic cannot be interrupted)",
        );
    }
    Ok(())
}

/// Offset of the first text that reads as a `BigInt` literal (`10n`, `0xFFn`, `1_000n`), in code
/// or not: digits not preceded by an identifier character, followed by `n` and then by
/// something that cannot continue an identifier (any non-ASCII character counts as possibly
/// whitespace, so `10n` followed by a no-break space is found).
fn bigint_literal(source: &str) -> Option<usize> {
    let bytes = source.as_bytes();
    let is_word = |byte: u8| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'$';
    let mut index = 0;
    while index < bytes.len() {
        let starts_number =
            bytes[index].is_ascii_digit() && (index == 0 || !is_word(bytes[index - 1]));
        if !starts_number {
            index += 1;
            continue;
        }
        let start = index;
        let radix_prefix = bytes[index] == b'0'
            && matches!(
                bytes.get(index + 1),
                Some(b'x' | b'X' | b'o' | b'O' | b'b' | b'B')
            );
        index += if radix_prefix { 2 } else { 1 };
        while index < bytes.len()
            && (bytes[index].is_ascii_digit()
                || bytes[index] == b'_'
                || (radix_prefix && bytes[index].is_ascii_hexdigit()))
        {
            index += 1;
        }
        if bytes.get(index) == Some(&b'n')
            && !bytes.get(index + 1).is_some_and(|&next| is_word(next))
        {
            return Some(start);
        }
    }
    None
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_and_column(text: &str, offset: usize) -> (u32, u32) {
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(0, |last| last.chars().count())
        + 1;
    (
        u32::try_from(line).unwrap_or(u32::MAX),
        u32::try_from(column).unwrap_or(u32::MAX),
    )
}

/// The source as a standalone strict script (the compile check).
pub(crate) fn check_text(source: &str) -> String {
    let mut text = String::with_capacity(CHECK_HEAD.len() + source.len() + 1);
    text.push_str(CHECK_HEAD);
    text.push_str(source);
    text.push('\n');
    text
}

/// The source as the body of a factory function returning the four contract functions in
/// [`Function::ALL`] order. Evaluating this script yields the factory; calling the factory
/// instantiates a fresh top-level scope.
///
/// For a script (`exports` is `None`) each slot is the top-level function of that name, or
/// `undefined` when there is none (or it is not a function). For an ES module rewritten as a
/// script, each slot is the value of the local binding exported under that name, whatever it
/// is (so that an export that is not a function can be refused by name), or `undefined` when
/// the name is not exported.
pub(crate) fn factory_text(source: &str, exports: Option<&[Option<String>; 4]>) -> String {
    let mut text = String::with_capacity(FACTORY_HEAD.len() + source.len() + 256);
    text.push_str(FACTORY_HEAD);
    text.push_str(source);
    text.push_str("\n;return[");
    for (position, function) in Function::ALL.into_iter().enumerate() {
        if position > 0 {
            text.push(',');
        }
        match exports {
            None => {
                let name = function.name();
                text.push_str(&format!("typeof {name}===\"function\"?{name}:void 0"));
            }
            Some(exports) => match &exports[position] {
                Some(local) => text.push_str(local),
                None => text.push_str("void 0"),
            },
        }
    }
    text.push_str("];})");
    text
}

/// Maps an engine (line, column) in either wrapped text back to the module source.
pub(crate) fn source_position(line: u32, column: u32) -> (u32, u32) {
    if line == 1 {
        let head = u32::try_from(FACTORY_HEAD.len()).unwrap_or(0);
        (1, column.saturating_sub(head).max(1))
    } else {
        (line, column)
    }
}

/// Keeps the stack frames that point into the module, with positions mapped back to the
/// source; frames of the sandbox's own glue are dropped.
pub(crate) fn module_frames(stack: &str) -> String {
    let mut frames = String::new();
    for frame in stack.lines() {
        let frame = frame.trim();
        let Some(location_start) = frame.find(MODULE_FILE) else {
            continue;
        };
        let after = &frame[location_start + MODULE_FILE.len()..];
        let mapped = after
            .strip_prefix(':')
            .and_then(|rest| {
                let end = rest.find(|c: char| !c.is_ascii_digit() && c != ':')?;
                let (numbers, tail) = rest.split_at(end);
                let (line, column) = numbers.split_once(':')?;
                let (line, column) = source_position(line.parse().ok()?, column.parse().ok()?);
                Some(format!(
                    "{}{MODULE_FILE}:{line}:{column}{tail}",
                    &frame[..location_start]
                ))
            })
            .unwrap_or_else(|| frame.to_owned());
        frames.push_str("\n    ");
        frames.push_str(&mapped);
    }
    frames
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factory_returns_every_contract_function_in_order() {
        let text = factory_text("function encodeRequest(x) { return x; }", None);
        assert!(text.starts_with("(function(){\"use strict\";function encodeRequest"));
        let tail = text.split("\n;return[").nth(1).unwrap_or_default();
        let order: Vec<_> = Function::ALL
            .iter()
            .map(|f| tail.find(&format!("typeof {}", f.name())))
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{tail}");
    }

    #[test]
    fn bigint_literals_are_found_wherever_they_could_be_code() {
        for (text, found) in [
            ("return 10n;", Some(7)),
            ("x = 0xFFn", Some(4)),
            ("x = 1_000n + y", Some(4)),
            ("f(2n)", Some(2)),
            ("a=1n\u{a0}", Some(2)),
            ("s = '5n'", Some(5)),
            ("2nd place", None),
            ("const a1n = 1; b = $2n; c = x_3n", None),
            ("1.5 + n", None),
            ("10 n", None),
            ("0x1F + 0b101 + 1e5", None),
        ] {
            assert_eq!(bigint_literal(text), found, "{text}");
        }
        assert!(matches!(
            check_characters("let a = 1;\nlet b = 2n;"),
            Err(SandboxError::Compile {
                line: 2,
                column: 9,
                ..
            })
        ));
        assert!(matches!(
            check_characters("x\0"),
            Err(SandboxError::Compile {
                line: 1,
                column: 2,
                ..
            })
        ));
    }

    #[test]
    fn line_one_columns_are_shifted_back() {
        assert_eq!(source_position(1, 26), (1, 1));
        assert_eq!(source_position(1, 30), (1, 5));
        assert_eq!(source_position(3, 7), (3, 7));
    }

    #[test]
    fn only_module_frames_are_kept() {
        let stack = "    at encodeRequest (handler.js:1:40)\n    at helper (handler.js:4:9)\n    \
                     at invoke (<sandbox>:90:14)\n";
        assert_eq!(
            module_frames(stack),
            "\n    at encodeRequest (handler.js:1:15)\n    at helper (handler.js:4:9)"
        );
    }
}
