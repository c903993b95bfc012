//! Merging: deep merge, and the output methods that write a value at a path.

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

/// How a data message combines with the older messages of its identity, at
/// its `_outputPath` (or at the root when it has none).
///
/// A message without `_outputMethod` uses [`OutputMethod::Merge`] when it has
/// no `_outputPath` (plain data messages are patches), and
/// [`OutputMethod::Set`] when it has one (a call's result replaces what was at
/// its path: last write wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputMethod {
    /// Replace the value at the path.
    Set,
    /// Deep merge: objects merge key by key, recursively; arrays, scalars and
    /// `null` replace what was there.
    Merge,
    /// Shallow merge: the new object's keys replace the old object's keys
    /// whole (like `Object.assign`); a non-object replaces.
    Assign,
    /// Append the value, as one element, to the array at the path.
    Push,
    /// Append the elements of the value (an array) to the array at the path.
    Concat,
}

impl OutputMethod {
    /// The name written in `_outputMethod`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Set => "set",
            Self::Merge => "merge",
            Self::Assign => "assign",
            Self::Push => "push",
            Self::Concat => "concat",
        }
    }
}

impl fmt::Display for OutputMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not an output method name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown output method `{0}` (expected set, merge, assign, push or concat)")]
pub struct UnknownOutputMethod(pub String);

impl FromStr for OutputMethod {
    type Err = UnknownOutputMethod;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "set" => Ok(Self::Set),
            "merge" => Ok(Self::Merge),
            "assign" => Ok(Self::Assign),
            "push" => Ok(Self::Push),
            "concat" => Ok(Self::Concat),
            other => Err(UnknownOutputMethod(other.to_owned())),
        }
    }
}

/// Deep-merges `patch` into `target`: the merge rule of data messages.
///
/// Objects merge key by key, recursively (existing keys keep their place, new
/// keys are appended); arrays and scalars replace; `null` is a value like any
/// other, not a deletion.
///
/// ```
/// use serde_json::json;
///
/// let mut user = json!({"name": "John Doe", "tags": ["a"], "address": {"city": "Paris"}});
/// concord_context::deep_merge(&mut user, &json!({"age": 30, "tags": ["b"], "address": {"zip": null}}));
/// assert_eq!(user, json!({
///     "name": "John Doe", "tags": ["b"], "address": {"city": "Paris", "zip": null}, "age": 30
/// }));
/// ```
pub fn deep_merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                match target.get_mut(key) {
                    Some(existing) => deep_merge(existing, value),
                    None => {
                        target.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (target, patch) => *target = patch.clone(),
    }
}

/// Why a write could not be applied to the value merged so far.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Conflict {
    /// The path goes through a value that has no members.
    #[error("{at} is {found}, which has no member `{segment}`")]
    NotAContainer {
        /// The path up to the value.
        at: String,
        /// The JSON type found there.
        found: &'static str,
        /// The segment that could not be followed.
        segment: String,
    },
    /// The path names an array element that does not exist.
    #[error("{at} is an array of {len}, which has no element `{segment}`")]
    NoSuchElement {
        /// The path up to the array.
        at: String,
        /// Its length.
        len: usize,
        /// The segment that is not an index below `len`.
        segment: String,
    },
    /// `push` or `concat` onto something that is not an array.
    #[error("{method} needs an array at {at}, found {found}")]
    NotAnArray {
        /// The method.
        method: OutputMethod,
        /// The path written.
        at: String,
        /// The JSON type found there.
        found: &'static str,
    },
}

/// The JSON type of a value, as written in messages.
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `segment` as an index into an array of `len` elements, if it is one:
/// canonical decimal (no sign, no leading zero) and below `len`.
pub(crate) fn array_index(segment: &str, len: usize) -> Option<usize> {
    let canonical = !segment.is_empty()
        && segment.bytes().all(|b| b.is_ascii_digit())
        && (segment == "0" || !segment.starts_with('0'));
    if !canonical {
        return None;
    }
    segment.parse::<usize>().ok().filter(|&index| index < len)
}

/// Writes `value` with `method` at `path` inside `root` (`None`: nothing written yet).
///
/// Missing object keys along the path are created as objects. `describe(n)`
/// names the path cut to `n` segments, for conflict messages.
pub(crate) fn apply_write(
    root: &mut Option<Value>,
    path: &[String],
    method: OutputMethod,
    value: &Value,
    describe: &dyn Fn(usize) -> String,
) -> Result<(), Conflict> {
    let Some((last, parents)) = path.split_last() else {
        return match root {
            None => {
                *root = Some(written_into_nothing(method, value));
                Ok(())
            }
            Some(target) => write_in_place(method, target, value, || describe(0)),
        };
    };
    let mut node = root.get_or_insert_with(|| Value::Object(Map::new()));
    for (depth, segment) in parents.iter().enumerate() {
        node = match node {
            Value::Object(map) => map
                .entry(segment.clone())
                .or_insert_with(|| Value::Object(Map::new())),
            other => step_into(other, segment, depth, describe)?,
        };
    }
    let depth = parents.len();
    match node {
        Value::Object(map) => match map.get_mut(last) {
            Some(target) => write_in_place(method, target, value, || describe(depth + 1)),
            None => {
                map.insert(last.clone(), written_into_nothing(method, value));
                Ok(())
            }
        },
        other => {
            let target = step_into(other, last, depth, describe)?;
            write_in_place(method, target, value, || describe(depth + 1))
        }
    }
}

/// Follows `segment` into an array element; anything else is a conflict.
fn step_into<'v>(
    node: &'v mut Value,
    segment: &str,
    depth: usize,
    describe: &dyn Fn(usize) -> String,
) -> Result<&'v mut Value, Conflict> {
    match node {
        Value::Array(items) => {
            let len = items.len();
            match array_index(segment, len) {
                Some(index) => items.get_mut(index).ok_or(Conflict::NoSuchElement {
                    at: describe(depth),
                    len,
                    segment: segment.to_owned(),
                }),
                None => Err(Conflict::NoSuchElement {
                    at: describe(depth),
                    len,
                    segment: segment.to_owned(),
                }),
            }
        }
        other => Err(Conflict::NotAContainer {
            at: describe(depth),
            found: json_type(other),
            segment: segment.to_owned(),
        }),
    }
}

/// The value a write leaves where there was nothing.
fn written_into_nothing(method: OutputMethod, value: &Value) -> Value {
    match method {
        OutputMethod::Push => Value::Array(vec![value.clone()]),
        OutputMethod::Set | OutputMethod::Merge | OutputMethod::Assign | OutputMethod::Concat => {
            value.clone()
        }
    }
}

fn write_in_place(
    method: OutputMethod,
    target: &mut Value,
    value: &Value,
    at: impl Fn() -> String,
) -> Result<(), Conflict> {
    match method {
        OutputMethod::Set => *target = value.clone(),
        OutputMethod::Merge => deep_merge(target, value),
        OutputMethod::Assign => match (&mut *target, value) {
            (Value::Object(target), Value::Object(patch)) => {
                for (key, member) in patch {
                    target.insert(key.clone(), member.clone());
                }
            }
            (target, value) => *target = value.clone(),
        },
        OutputMethod::Push | OutputMethod::Concat => {
            let Value::Array(items) = target else {
                return Err(Conflict::NotAnArray {
                    method,
                    at: at(),
                    found: json_type(target),
                });
            };
            match (method, value) {
                (OutputMethod::Concat, Value::Array(more)) => items.extend(more.iter().cloned()),
                _ => items.push(value.clone()),
            }
        }
    }
    Ok(())
}

/// Why a path does not lead to a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// An object without the key at segment `depth`.
    NoKey { depth: usize },
    /// An array without that element at segment `depth`.
    NoElement { depth: usize, len: usize },
    /// A scalar or null where segment `depth` needs a container.
    NotAContainer { depth: usize, found: &'static str },
}

/// The value at `path` inside `root`.
pub(crate) fn lookup<'v>(root: &'v Value, path: &[String]) -> Result<&'v Value, Lookup> {
    let mut node = root;
    for (depth, segment) in path.iter().enumerate() {
        node = match node {
            Value::Object(map) => map.get(segment).ok_or(Lookup::NoKey { depth })?,
            Value::Array(items) => array_index(segment, items.len())
                .and_then(|index| items.get(index))
                .ok_or(Lookup::NoElement {
                    depth,
                    len: items.len(),
                })?,
            other => {
                return Err(Lookup::NotAContainer {
                    depth,
                    found: json_type(other),
                })
            }
        };
    }
    Ok(node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write(
        root: &mut Option<Value>,
        path: &[&str],
        method: OutputMethod,
        value: Value,
    ) -> Result<(), Conflict> {
        let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
        let describe = |n: usize| {
            format!(
                "†state{}",
                path[..n]
                    .iter()
                    .map(|s| format!(".{s}"))
                    .collect::<String>()
            )
        };
        apply_write(root, &path, method, &value, &describe)
    }

    #[test]
    fn deep_merge_keeps_order_replaces_arrays_and_keeps_null() {
        let mut target = json!({"a": {"x": 1, "y": [1, 2]}, "b": 2});
        deep_merge(&mut target, &json!({"a": {"y": [3], "z": null}, "c": 3}));
        assert_eq!(
            serde_json::to_string(&target).unwrap(),
            r#"{"a":{"x":1,"y":[3],"z":null},"b":2,"c":3}"#
        );
        deep_merge(&mut target, &json!({"a": null}));
        assert_eq!(target["a"], Value::Null);
        deep_merge(&mut target, &json!(7));
        assert_eq!(target, json!(7));
    }

    #[test]
    fn every_method_at_a_path() {
        let mut root = Some(json!({"user": {"name": "Alex", "tags": ["a"]}}));
        write(
            &mut root,
            &["user", "name"],
            OutputMethod::Set,
            json!("Sam"),
        )
        .unwrap();
        write(&mut root, &["user", "tags"], OutputMethod::Push, json!("b")).unwrap();
        write(
            &mut root,
            &["user", "tags"],
            OutputMethod::Concat,
            json!(["c", "d"]),
        )
        .unwrap();
        write(
            &mut root,
            &["user"],
            OutputMethod::Merge,
            json!({"address": {"city": "X"}}),
        )
        .unwrap();
        write(
            &mut root,
            &["user"],
            OutputMethod::Merge,
            json!({"address": {"zip": "1"}}),
        )
        .unwrap();
        write(
            &mut root,
            &["user"],
            OutputMethod::Assign,
            json!({"address": {"street": "S"}}),
        )
        .unwrap();
        write(&mut root, &["log"], OutputMethod::Push, json!(1)).unwrap();
        write(&mut root, &["new", "deep"], OutputMethod::Set, json!(true)).unwrap();
        write(
            &mut root,
            &["user", "tags", "0"],
            OutputMethod::Set,
            json!("A"),
        )
        .unwrap();
        assert_eq!(
            root.unwrap(),
            json!({
                "user": {"name": "Sam", "tags": ["A", "b", "c", "d"], "address": {"street": "S"}},
                "log": [1],
                "new": {"deep": true}
            })
        );
    }

    #[test]
    fn conflicts_name_the_path() {
        let mut root = Some(json!({"name": "Alex", "items": [1], "obj": {}}));
        let error = write(&mut root, &["name", "first"], OutputMethod::Set, json!(1)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "†state.name is a string, which has no member `first`"
        );
        let error = write(&mut root, &["items", "1"], OutputMethod::Set, json!(1)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "†state.items is an array of 1, which has no element `1`"
        );
        let error = write(&mut root, &["obj"], OutputMethod::Push, json!(1)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "push needs an array at †state.obj, found an object"
        );
        let error = write(&mut root, &["items", "01"], OutputMethod::Set, json!(1)).unwrap_err();
        assert!(matches!(error, Conflict::NoSuchElement { .. }));
    }

    #[test]
    fn writes_into_nothing() {
        let mut root = None;
        write(&mut root, &[], OutputMethod::Push, json!(1)).unwrap();
        assert_eq!(root, Some(json!([1])));
        let mut root = None;
        write(&mut root, &["a"], OutputMethod::Concat, json!([1, 2])).unwrap();
        assert_eq!(root, Some(json!({"a": [1, 2]})));
    }

    #[test]
    fn lookup_reports_where_it_stopped() {
        let root = json!({"a": {"b": [10, {"c": null}]}});
        assert_eq!(
            lookup(&root, &["a".into(), "b".into(), "1".into(), "c".into()]),
            Ok(&Value::Null)
        );
        assert_eq!(
            lookup(&root, &["a".into(), "x".into()]),
            Err(Lookup::NoKey { depth: 1 })
        );
        assert_eq!(
            lookup(&root, &["a".into(), "b".into(), "2".into()]),
            Err(Lookup::NoElement { depth: 2, len: 2 })
        );
        assert_eq!(
            lookup(&root, &["a".into(), "b".into(), "0".into(), "z".into()]),
            Err(Lookup::NotAContainer {
                depth: 3,
                found: "a number"
            })
        );
    }
}
