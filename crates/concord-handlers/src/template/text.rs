//! JavaScript's text for JSON values, as a template module's helpers write it into its
//! error messages: `JSON.stringify(value)`, `String(number)`, and the module's `describe`.

use serde_json::{Number, Value};

/// `JSON.stringify(value)` for a value in the engine's form (see
/// [`concord_sandbox::round_trip`]): members in their order, numbers as JavaScript writes
/// them.
pub(super) fn stringify(value: &Value) -> String {
    let mut out = String::new();
    write_json(&mut out, value);
    out
}

fn write_json(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(flag) => out.push_str(if *flag { "true" } else { "false" }),
        Value::Number(number) => out.push_str(&number_text(number)),
        Value::String(text) => out.push_str(&quote(text)),
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_json(out, item);
            }
            out.push(']');
        }
        Value::Object(members) => {
            out.push('{');
            for (index, (key, item)) in members.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&quote(key));
                out.push(':');
                write_json(out, item);
            }
            out.push('}');
        }
    }
}

/// `JSON.stringify` of a string: serde_json escapes exactly the same characters, the same
/// way (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, other controls as lower-case `\u00xx`).
pub(super) fn quote(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// The length of `quote(text)`, without writing it.
pub(crate) fn quoted_len(text: &str) -> usize {
    2 + text.len()
        + text
            .bytes()
            .map(|byte| match byte {
                b'"' | b'\\' | b'\x08' | b'\x0c' | b'\n' | b'\r' | b'\t' => 1,
                0..=0x1f => 5,
                _ => 0,
            })
            .sum::<usize>()
}

/// The module's `describe(value)`: what a value was, for an error message (`None` is
/// `undefined`).
pub(super) fn describe(value: Option<&Value>) -> String {
    match value {
        None => "absent".to_owned(),
        Some(Value::Null) => "null".to_owned(),
        Some(Value::Array(_)) => "an array".to_owned(),
        Some(Value::String(text)) => quote_cut(text),
        Some(Value::Object(_)) => "an object".to_owned(),
        Some(Value::Bool(flag)) => flag.to_string(),
        Some(Value::Number(number)) => number_text(number),
    }
}

/// Longest string `describe` shows whole, in UTF-16 code units (JavaScript's `length`).
const SHOWN_UNITS: usize = 40;

/// `JSON.stringify(text.length > 40 ? text.slice(0, 40) + "…" : text)`, counting and cutting
/// in UTF-16 code units as JavaScript does: a cut through a surrogate pair leaves its high
/// half, which `JSON.stringify` writes as an escape.
fn quote_cut(text: &str) -> String {
    if text.encode_utf16().count() <= SHOWN_UNITS {
        return quote(text);
    }
    let mut units = 0;
    let mut end = 0;
    let mut half = None;
    for (at, character) in text.char_indices() {
        let width = character.len_utf16();
        if units + width > SHOWN_UNITS {
            if units < SHOWN_UNITS {
                let mut pair = [0u16; 2];
                character.encode_utf16(&mut pair);
                half = Some(pair[0]);
            }
            break;
        }
        units += width;
        end = at + character.len_utf8();
    }
    let mut quoted = quote(&text[..end]);
    quoted.pop();
    if let Some(high) = half {
        quoted.push_str(&format!("\\u{high:04x}"));
    }
    quoted.push_str("…\"");
    quoted
}

/// `String(number)` (and `JSON.stringify(number)`) for a number in the engine's form: the
/// double's shortest digits that read back the same, in decimal (`1299.99`,
/// `9223372036854776000`), or with an exponent (`1e+21`, `1.5e-7`) outside JavaScript's
/// decimal range.
pub(super) fn number_text(number: &Number) -> String {
    let float = number.as_f64().unwrap_or(f64::NAN);
    if !float.is_finite() {
        return "null".to_owned();
    }
    if float == 0.0 {
        return "0".to_owned();
    }
    // Rust's `{:e}` gives the shortest digits that read back the same: `d.ddde±x`.
    let scientific = format!("{:e}", float.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exponent: i64 = exponent.parse().unwrap_or(0);
    let sign = if float < 0.0 { "-" } else { "" };
    format!("{sign}{}", javascript_decimal(&digits, exponent + 1))
}

/// Number::toString's layout of the digits `digits` with the decimal point after `point`
/// of them (ECMA-262 §6.1.6.1.20, steps 6 to 12).
fn javascript_decimal(digits: &str, point: i64) -> String {
    let count = digits.len() as i64;
    if count <= point && point <= 21 {
        let zeros = "0".repeat((point - count) as usize);
        return format!("{digits}{zeros}");
    }
    if 0 < point && point <= 21 {
        let (whole, fraction) = digits.split_at(point as usize);
        return format!("{whole}.{fraction}");
    }
    if -6 < point && point <= 0 {
        return format!("0.{}{digits}", "0".repeat((-point) as usize));
    }
    let exponent = point - 1;
    let sign = if exponent < 0 { '-' } else { '+' };
    let (first, rest) = digits.split_at(1);
    if rest.is_empty() {
        format!("{first}e{sign}{}", exponent.abs())
    } else {
        format!("{first}.{rest}e{sign}{}", exponent.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_read_as_javascript_writes_them() {
        for (number, text) in [
            (json!(0), "0"),
            (json!(-12), "-12"),
            (json!(i64::MIN), "-9223372036854776000"),
            (json!(9_007_199_254_740_992u64), "9007199254740992"),
            (json!(1.5), "1.5"),
            (json!(1299.99), "1299.99"),
            (json!(0.000001), "0.000001"),
            (json!(1.5e-7), "1.5e-7"),
            (json!(1e21), "1e+21"),
            (json!(1.2345e22), "1.2345e+22"),
            (json!(123456789012345680000.0), "123456789012345680000"),
            (json!(-2.5e-300), "-2.5e-300"),
            (json!(0.1), "0.1"),
        ] {
            let Value::Number(number) = number else {
                unreachable!()
            };
            assert_eq!(number_text(&number), text);
        }
    }

    #[test]
    fn quoted_lengths_are_those_serde_json_writes() {
        for text in [
            "",
            "plain",
            "quote \" backslash \\ newline \n bell \u{7} del \u{7f} é😀",
        ] {
            assert_eq!(quoted_len(text), quote(text).len(), "{text:?}");
        }
    }

    #[test]
    fn describe_cuts_at_forty_utf16_units() {
        assert_eq!(describe(None), "absent");
        assert_eq!(describe(Some(&json!("a\"b"))), r#""a\"b""#);
        let long = "x".repeat(41);
        assert_eq!(
            describe(Some(&json!(long))),
            format!("\"{}…\"", "x".repeat(40))
        );
        // The 40th unit is the high half of 😀.
        let cut = format!("{}😀😀", "x".repeat(39));
        assert_eq!(
            describe(Some(&json!(cut))),
            format!("\"{}\\ud83d…\"", "x".repeat(39))
        );
        assert_eq!(
            stringify(&json!({"a": [1, 2.5, null, "é"]})),
            r#"{"a":[1,2.5,null,"é"]}"#
        );
    }
}
