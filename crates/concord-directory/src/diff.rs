//! The RFC 7396 merge patch that takes one JSON value to another: the `diff` of a
//! `thing_updated` event after a `PUT` (the directory's TD declares its updates as
//! `application/merge-patch+json`). A `null` held inside the new value cannot be said by
//! a merge patch: it reads as a removal.

use serde_json::{Map, Value};

/// The merge patch `p` with `merge(old, p) == new`. Members removed become `null`;
/// objects are compared member by member; anything else changed is replaced whole.
/// A `null` inside `new` cannot be expressed by a merge patch: it reads as a removal.
pub fn merge_diff(old: &Value, new: &Value) -> Value {
    match (old, new) {
        (Value::Object(old), Value::Object(new)) => {
            let mut patch = Map::new();
            for key in old.keys() {
                if !new.contains_key(key) {
                    patch.insert(key.clone(), Value::Null);
                }
            }
            for (key, value) in new {
                match old.get(key) {
                    Some(previous) if previous == value => {}
                    Some(previous @ Value::Object(_)) if value.is_object() => {
                        patch.insert(key.clone(), merge_diff(previous, value));
                    }
                    _ => {
                        patch.insert(key.clone(), value.clone());
                    }
                }
            }
            Value::Object(patch)
        }
        _ => new.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_diff_applied_as_a_merge_patch_gives_the_new_value() {
        let old = json!({"id": "a", "title": "x", "gone": 1, "nested": {"keep": 1, "change": 2}});
        let new = json!({"id": "a", "title": "y", "nested": {"keep": 1, "change": 3, "add": [1]}});
        let patch = merge_diff(&old, &new);
        assert_eq!(
            patch,
            json!({"gone": null, "title": "y", "nested": {"change": 3, "add": [1]}})
        );
        let mut applied = old.clone();
        json_patch::merge(&mut applied, &patch);
        assert_eq!(applied, new);
    }
}
