//! The JSON layout of prompts: 2-space indentation, short leaves on one line.

use serde_json::{Map, Value};

/// Widest line, in characters, that a one-line object or array may make.
pub const PROMPT_JSON_WIDTH: usize = 80;

/// Formats `value` the way data and schemas appear in prompts.
///
/// The layout of the seed (chapter 005): 2-space indentation, keys in their
/// stored order, and the top-level value always expanded. A nested object or
/// array whose members are all scalars (or empty) is written on one line —
/// `{ "type": "string" }`, `["a", "b"]` — when that line, indentation, key
/// and trailing comma included, fits in [`PROMPT_JSON_WIDTH`] characters;
/// anything else is expanded one member per line.
///
/// Strings are escaped as by `serde_json`, and additionally U+0085, U+2028 and
/// U+2029 are written as `\u` escapes, so that no string can start a new line
/// of the prompt: a value can never break out of its block.
///
/// ```
/// use serde_json::json;
///
/// let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}});
/// assert_eq!(
///     concord_context::prompt_json(&schema),
///     "{\n  \"type\": \"object\",\n  \"properties\": {\n    \"name\": { \"type\": \"string\" }\n  }\n}"
/// );
/// ```
pub fn prompt_json(value: &Value) -> String {
    let mut out = String::new();
    if is_leaf(value) {
        write_leaf(&mut out, value);
    } else {
        write_expanded(&mut out, value, 0);
    }
    out
}

/// A value written the same way wherever it appears: scalars and empty containers.
fn is_leaf(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => true,
    }
}

fn write_leaf(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(number) => out.push_str(&number.to_string()),
        Value::String(text) => write_string(out, text),
        Value::Array(_) => out.push_str("[]"),
        Value::Object(_) => out.push_str("{}"),
    }
}

fn write_string(out: &mut String, text: &str) {
    out.push('"');
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            ch if (ch as u32) < 0x20 || matches!(ch, '\u{85}' | '\u{2028}' | '\u{2029}') => {
                out.push_str(&format!("\\u{:04x}", ch as u32));
            }
            ch => out.push(ch),
        }
    }
    out.push('"');
}

fn push_indent(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

fn write_expanded(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Object(map) => write_expanded_object(out, map, indent),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                out.push('\n');
                push_indent(out, indent + 2);
                let comma = i + 1 < items.len();
                write_member(out, item, indent + 2, indent + 2, comma);
                if comma {
                    out.push(',');
                }
            }
            out.push('\n');
            push_indent(out, indent);
            out.push(']');
        }
        leaf => write_leaf(out, leaf),
    }
}

fn write_expanded_object(out: &mut String, map: &Map<String, Value>, indent: usize) {
    out.push('{');
    for (i, (key, member)) in map.iter().enumerate() {
        out.push('\n');
        push_indent(out, indent + 2);
        let line_start = out.len();
        write_string(out, key);
        out.push_str(": ");
        let prefix = indent + 2 + out[line_start..].chars().count();
        let comma = i + 1 < map.len();
        write_member(out, member, indent + 2, prefix, comma);
        if comma {
            out.push(',');
        }
    }
    out.push('\n');
    push_indent(out, indent);
    out.push('}');
}

/// Writes a member whose line already holds `prefix` characters.
fn write_member(out: &mut String, member: &Value, indent: usize, prefix: usize, comma: bool) {
    if is_leaf(member) {
        write_leaf(out, member);
        return;
    }
    if let Some(line) = one_line(member) {
        if prefix + line.chars().count() + usize::from(comma) <= PROMPT_JSON_WIDTH {
            out.push_str(&line);
            return;
        }
    }
    write_expanded(out, member, indent);
}

/// The one-line form of a container whose members are all leaves.
fn one_line(value: &Value) -> Option<String> {
    let mut line = String::new();
    match value {
        Value::Object(map) => {
            if !map.values().all(is_leaf) {
                return None;
            }
            line.push_str("{ ");
            for (i, (key, member)) in map.iter().enumerate() {
                if i > 0 {
                    line.push_str(", ");
                }
                write_string(&mut line, key);
                line.push_str(": ");
                write_leaf(&mut line, member);
            }
            line.push_str(" }");
        }
        Value::Array(items) => {
            if !items.iter().all(is_leaf) {
                return None;
            }
            line.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    line.push_str(", ");
                }
                write_leaf(&mut line, item);
            }
            line.push(']');
        }
        _ => return None,
    }
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn top_level_expands_and_short_leaves_stay_on_one_line() {
        let value = json!({
            "name": "John Doe",
            "tags": ["a", "b"],
            "empty": {},
            "nested": {"deep": {"x": 1}},
            "long": {"description": "a description long enough to push this line past eighty columns"}
        });
        assert_eq!(
            prompt_json(&value),
            r#"{
  "name": "John Doe",
  "tags": ["a", "b"],
  "empty": {},
  "nested": {
    "deep": { "x": 1 }
  },
  "long": {
    "description": "a description long enough to push this line past eighty columns"
  }
}"#
        );
        assert_eq!(prompt_json(&json!([1, [2]])), "[\n  1,\n  [2]\n]");
        assert_eq!(prompt_json(&json!("x")), "\"x\"");
        assert_eq!(prompt_json(&json!({})), "{}");
    }

    #[test]
    fn width_limit_counts_indent_key_and_comma() {
        // 2 (indent) + 5 ("k": ) + line + comma
        let fits = format!("{{ \"s\": \"{}\" }}", "x".repeat(80 - 2 - 5 - 1 - 11));
        let value: Value = serde_json::from_str(&format!("{{\"k\": {fits}, \"z\": 1}}")).unwrap();
        assert!(prompt_json(&value).contains(&fits));
        let too_long = format!("{{ \"s\": \"{}\" }}", "x".repeat(80 - 2 - 5 - 11));
        let value: Value =
            serde_json::from_str(&format!("{{\"k\": {too_long}, \"z\": 1}}")).unwrap();
        assert!(!prompt_json(&value).contains(&too_long));
    }

    #[test]
    fn line_separators_are_escaped() {
        let text = prompt_json(&json!(["a\u{2028}b\u{2029}c\u{85}d\ne\u{1}"]));
        assert!(!text.contains(['\u{2028}', '\u{2029}', '\u{85}']));
        assert!(
            text.contains(r#""a\u2028b\u2029c\u0085d\ne\u0001""#),
            "{text}"
        );
    }

    proptest! {
        #[test]
        fn strings_escape_like_serde_json_and_parse_back(text in any::<String>()) {
            let mut ours = String::new();
            write_string(&mut ours, &text);
            let serde = serde_json::to_string(&text).unwrap()
                .replace('\u{85}', "\\u0085")
                .replace('\u{2028}', "\\u2028")
                .replace('\u{2029}', "\\u2029");
            prop_assert_eq!(&ours, &serde);
            prop_assert_eq!(serde_json::from_str::<String>(&ours).unwrap(), text);
        }
    }
}
