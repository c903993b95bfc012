//! Differences between an expected and an actual JSON value, by JSON pointer.

use std::fmt;

use serde_json::Value;

use crate::mapping::escape;

/// One place where two JSON values differ.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Difference {
    /// JSON pointer (RFC 6901) of the place; `""` is the whole value.
    pub pointer: String,
    /// The expected value there (`None`: it should be absent).
    pub expected: Option<Value>,
    /// The actual value there (`None`: it is absent).
    pub actual: Option<Value>,
}

/// Longest rendering of one value in a difference line, in characters.
const SHOWN_CHARS: usize = 160;

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let place = if self.pointer.is_empty() {
            "(the whole value)"
        } else {
            &self.pointer
        };
        let show = |value: &Option<Value>| match value {
            Some(value) => shown(value),
            None => "absent".to_owned(),
        };
        write!(
            f,
            "{place}: expected {}, got {}",
            show(&self.expected),
            show(&self.actual)
        )
    }
}

/// Compact JSON of a value, cut at [`SHOWN_CHARS`] characters.
fn shown(value: &Value) -> String {
    cut(&value.to_string(), SHOWN_CHARS)
}

/// `text` cut at `chars` characters, with `…` where it was cut.
pub(crate) fn cut(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

/// Every difference between `expected` and `actual`, depth first in the expected value's
/// order, then fields only `actual` has. Numbers compare by value (`200` equals `200.0`);
/// object key order does not matter; arrays compare item by item.
///
/// ```
/// use concord_handlers::diff;
/// use serde_json::json;
///
/// let differences = diff(
///     &json!({"status": {"code": 404}, "productInfo": null}),
///     &json!({"status": {"code": 200.0}, "productInfo": {}, "extra": 1}),
/// );
/// let lines: Vec<String> = differences.iter().map(ToString::to_string).collect();
/// assert_eq!(lines, [
///     "/status/code: expected 404, got 200.0",
///     "/productInfo: expected null, got {}",
///     "/extra: expected absent, got 1",
/// ]);
/// ```
pub fn diff(expected: &Value, actual: &Value) -> Vec<Difference> {
    let mut differences = Vec::new();
    walk(expected, actual, &mut String::new(), &mut differences);
    differences
}

fn walk(expected: &Value, actual: &Value, pointer: &mut String, out: &mut Vec<Difference>) {
    match (expected, actual) {
        (Value::Object(want), Value::Object(have)) => {
            for (name, value) in want {
                with_segment(pointer, name, |pointer| match have.get(name) {
                    Some(other) => walk(value, other, pointer, out),
                    None => out.push(Difference {
                        pointer: pointer.clone(),
                        expected: Some(value.clone()),
                        actual: None,
                    }),
                });
            }
            for (name, value) in have.iter().filter(|(name, _)| !want.contains_key(*name)) {
                with_segment(pointer, name, |pointer| {
                    out.push(Difference {
                        pointer: pointer.clone(),
                        expected: None,
                        actual: Some(value.clone()),
                    })
                });
            }
        }
        (Value::Array(want), Value::Array(have)) => {
            for index in 0..want.len().max(have.len()) {
                with_segment(pointer, &index.to_string(), |pointer| {
                    match (want.get(index), have.get(index)) {
                        (Some(a), Some(b)) => walk(a, b, pointer, out),
                        (a, b) => out.push(Difference {
                            pointer: pointer.clone(),
                            expected: a.cloned(),
                            actual: b.cloned(),
                        }),
                    }
                });
            }
        }
        (Value::Number(a), Value::Number(b)) if same_number(a, b) => {}
        (a, b) if a == b => {}
        (a, b) => out.push(Difference {
            pointer: pointer.clone(),
            expected: Some(a.clone()),
            actual: Some(b.clone()),
        }),
    }
}

fn same_number(a: &serde_json::Number, b: &serde_json::Number) -> bool {
    match (a.as_i64(), b.as_i64(), a.as_u64(), b.as_u64()) {
        (Some(x), Some(y), _, _) => x == y,
        (_, _, Some(x), Some(y)) => x == y,
        _ => a.as_f64().zip(b.as_f64()).is_some_and(|(x, y)| x == y),
    }
}

fn with_segment(pointer: &mut String, segment: &str, f: impl FnOnce(&mut String)) {
    let length = pointer.len();
    pointer.push('/');
    pointer.push_str(&escape(segment));
    f(pointer);
    pointer.truncate(length);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equal_values_have_no_differences() {
        let value = json!({"a": [1, {"b": "c"}], "d": 1.5, "e": null});
        assert!(diff(&value, &value).is_empty());
        assert!(diff(&json!({"x": 1, "y": 2}), &json!({"y": 2, "x": 1.0})).is_empty());
    }

    #[test]
    fn arrays_and_escaped_pointers() {
        let differences = diff(&json!({"a/b": [1, 2]}), &json!({"a/b": [1]}));
        assert_eq!(differences.len(), 1);
        assert_eq!(
            differences[0].to_string(),
            "/a~1b/1: expected 2, got absent"
        );
        assert_eq!(
            diff(&json!(1), &json!("1"))[0].to_string(),
            "(the whole value): expected 1, got \"1\""
        );
    }

    #[test]
    fn long_values_are_cut() {
        let long = json!("x".repeat(500));
        let line = diff(&long, &json!(null))[0].to_string();
        assert!(line.chars().count() < 220, "{line}");
        assert!(line.contains('…'));
    }
}
