//! Field mapping between the wire's schema and ours: the one rule both the generated code
//! and the test-case runner follow.
//!
//! A value is mapped onto a **target** schema (ours when decoding, the wire's when
//! encoding):
//!
//! - target with `properties`: the result has the target's properties, in its order; each
//!   takes the source's field of the same name, else the first source field with the same
//!   style-independent key (`product_id` → `productId`), mapped onto the property's own
//!   schema. A property the source lacks is left out, unless the target requires it: then
//!   its `const` or `default` is written, and without one the value cannot be mapped.
//!   Source fields the target does not list are dropped.
//! - target describing an array of mapped items: each item is mapped.
//! - anything else (no schema, no properties, a scalar, `null`): the value as it is.

use concord_negotiate::naming::key;
use serde_json::{Map, Value};

use crate::schema::{fallback, has_properties, is_required, items, properties};

/// How to map a value onto a target schema.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Plan {
    /// The value as it is.
    Copy,
    /// An object: these fields, in this order.
    Fields(Vec<FieldPlan>),
    /// An array: each item mapped.
    Items(Box<Plan>),
}

/// One field of a [`Plan::Fields`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FieldPlan {
    /// The field's name in the target.
    pub name: String,
    /// Whether the target requires it.
    pub required: bool,
    /// What a required field takes when the source lacks it.
    pub fallback: Option<Value>,
    /// How its value is mapped.
    pub plan: Plan,
}

/// A required field the source does not carry and the target gives no value for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MissingField {
    /// JSON pointer of the field in the mapped value.
    pub pointer: String,
}

impl Plan {
    /// The plan for mapping onto `target` (`None`: copy).
    pub fn for_target(target: Option<&Value>) -> Plan {
        let Some(target) = target else {
            return Plan::Copy;
        };
        if has_properties(target) {
            return Plan::Fields(
                properties(target)
                    .into_iter()
                    .map(|(name, schema)| {
                        let required = is_required(target, name);
                        FieldPlan {
                            name: name.to_owned(),
                            required,
                            fallback: required.then(|| fallback(schema).cloned()).flatten(),
                            plan: Plan::for_target(Some(schema)),
                        }
                    })
                    .collect(),
            );
        }
        match items(target).map(|schema| Plan::for_target(Some(schema))) {
            Some(Plan::Copy) | None => Plan::Copy,
            Some(plan) => Plan::Items(Box::new(plan)),
        }
    }

    /// Maps `value` by this plan. `pointer` is where `value` sits, for errors.
    pub fn apply(&self, value: &Value, pointer: &str) -> Result<Value, MissingField> {
        match (self, value) {
            (Plan::Fields(fields), Value::Object(object)) => {
                let mut out = Map::new();
                for field in fields {
                    let at = format!("{pointer}/{}", escape(&field.name));
                    match find_source(object, &field.name) {
                        Some(source) => {
                            out.insert(field.name.clone(), field.plan.apply(source, &at)?);
                        }
                        None if field.required => match &field.fallback {
                            Some(fallback) => {
                                out.insert(field.name.clone(), fallback.clone());
                            }
                            None => return Err(MissingField { pointer: at }),
                        },
                        None => {}
                    }
                }
                Ok(Value::Object(out))
            }
            (Plan::Items(plan), Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(index, item)| plan.apply(item, &format!("{pointer}/{index}")))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            _ => Ok(value.clone()),
        }
    }

    /// Whether the plan copies the value unchanged.
    pub fn is_copy(&self) -> bool {
        matches!(self, Plan::Copy)
    }
}

/// The source field for target field `name`: the same name, else the first field with the
/// same style-independent key.
pub(crate) fn find_source<'v>(object: &'v Map<String, Value>, name: &str) -> Option<&'v Value> {
    object.get(name).or_else(|| {
        let wanted = key(name);
        object
            .iter()
            .find(|(field, _)| key(field) == wanted)
            .map(|(_, value)| value)
    })
}

pub(crate) use concord_negotiate::envelope::escape;
pub(crate) use concord_negotiate::fit::check_fit;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn product() -> Value {
        json!({
            "type": "object",
            "properties": {
                "product_id": {"type": "string"},
                "name": {"type": "string"},
                "limit": {"type": "integer", "default": 10},
                "tags": {"type": "array", "items": {"type": "object", "properties": {"tag_name": {"type": "string"}}}}
            },
            "required": ["product_id", "limit"]
        })
    }

    #[test]
    fn fields_match_by_name_then_by_key() {
        let plan = Plan::for_target(Some(&product()));
        let source = json!({"productId": "P1", "extra": 1, "tags": [{"tagName": "a", "x": 2}]});
        assert_eq!(
            plan.apply(&source, "").unwrap(),
            json!({"product_id": "P1", "limit": 10, "tags": [{"tag_name": "a"}]})
        );
        assert_eq!(
            plan.apply(&json!({"name": "n"}), "/input").unwrap_err(),
            MissingField {
                pointer: "/input/product_id".into()
            }
        );
        assert_eq!(plan.apply(&json!("text"), "").unwrap(), json!("text"));
        assert!(Plan::for_target(Some(&json!({"type": "string"}))).is_copy());
    }

    #[test]
    fn fit_names_the_field() {
        let wire = json!({"type": "object", "properties": {"productId": {"type": "string"}}});
        assert_eq!(check_fit(&wire, &product(), "the request"), Ok(()));
        let wrong = json!({"type": "object", "properties": {"productId": {"type": "integer"}}});
        assert_eq!(
            check_fit(&wrong, &product(), "the request"),
            Err("`productId` in the request has type integer but `product_id` needs string".into())
        );
        let lacking = json!({"type": "object", "properties": {"id": {"type": "string"}}});
        assert!(check_fit(&lacking, &product(), "the request")
            .unwrap_err()
            .contains("`product_id` is required"));
    }
}
