//! Reading the parts of a JSON Schema the negotiators (and the handler rules built on
//! them) look at: object properties, `required` names and types.
//!
//! ```
//! use concord_negotiate::json_schema::{is_object_schema, properties, required, types};
//! use serde_json::json;
//!
//! let schema = json!({
//!     "type": "object",
//!     "properties": {"productId": {"type": "string"}, "price": {"type": ["number", "null"]}},
//!     "required": ["productId"]
//! });
//! assert!(is_object_schema(&schema));
//! let names: Vec<&str> = properties(&schema).into_iter().map(|(name, _)| name).collect();
//! assert_eq!(names, ["productId", "price"]);
//! assert_eq!(required(&schema), ["productId"]);
//! assert_eq!(types(&schema["properties"]["price"]), ["number", "null"]);
//! ```

use serde_json::{Map, Value};

use crate::complexity::{check_complexity, Limit, SchemaLimits, SchemaTooComplex};

/// How deep composite schemas (`allOf`/`oneOf`/`anyOf`) and local `$ref`s are followed.
const MAX_DEPTH: usize = 8;

/// The object properties of a schema, in document order: its `properties`, else those of
/// the object schemas it is composed of (`allOf`, `oneOf`, `anyOf`; the first mention of a
/// name wins). None when it lists none.
pub fn properties(schema: &Value) -> Vec<(&str, &Value)> {
    let mut found = Vec::new();
    collect_properties(schema, 0, &mut found);
    found
}

fn collect_properties<'s>(schema: &'s Value, depth: usize, found: &mut Vec<(&'s str, &'s Value)>) {
    if let Some(map) = schema.get("properties").and_then(Value::as_object) {
        for (name, sub) in map {
            if !found.iter().any(|(seen, _)| *seen == name.as_str()) {
                found.push((name.as_str(), sub));
            }
        }
    }
    if depth >= MAX_DEPTH {
        return;
    }
    for member in composed(schema) {
        collect_properties(member, depth + 1, found);
    }
}

/// The member schemas of `allOf`, `oneOf` and `anyOf`, in that order.
fn composed(schema: &Value) -> impl Iterator<Item = &Value> {
    ["allOf", "oneOf", "anyOf"]
        .into_iter()
        .filter_map(|keyword| schema.get(keyword).and_then(Value::as_array))
        .flatten()
}

/// The `required` names of a schema (strings only): its own, those of its `allOf`
/// members, and those every `oneOf` (or every `anyOf`) member requires.
pub fn required(schema: &Value) -> Vec<&str> {
    let mut names = Vec::new();
    collect_required(schema, 0, &mut names);
    names
}

fn collect_required<'s>(schema: &'s Value, depth: usize, names: &mut Vec<&'s str>) {
    let add = |name: &'s str, names: &mut Vec<&'s str>| {
        if !names.contains(&name) {
            names.push(name);
        }
    };
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        add(name, names);
    }
    if depth >= MAX_DEPTH {
        return;
    }
    for member in schema
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        collect_required(member, depth + 1, names);
    }
    for keyword in ["oneOf", "anyOf"] {
        let Some(members) = schema.get(keyword).and_then(Value::as_array) else {
            continue;
        };
        let each: Vec<Vec<&str>> = members
            .iter()
            .map(|member| {
                let mut inner = Vec::new();
                collect_required(member, depth + 1, &mut inner);
                inner
            })
            .collect();
        if let Some((first, rest)) = each.split_first() {
            for name in first {
                if rest.iter().all(|other| other.contains(name)) {
                    add(name, names);
                }
            }
        }
    }
}

/// Whether `name` is required by `schema`.
pub fn is_required(schema: &Value, name: &str) -> bool {
    required(schema).contains(&name)
}

/// Whether the schema lists object properties (so values are mapped field by field),
/// itself or through the schemas it is composed of.
pub fn has_properties(schema: &Value) -> bool {
    schema.get("properties").is_some_and(Value::is_object) || !properties(schema).is_empty()
}

/// Whether the schema describes an object: by `type` (`"object"`, or a list naming it),
/// or, without a `type`, by having properties.
pub fn is_object_schema(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(kind)) => kind == "object",
        Some(Value::Array(kinds)) => kinds.iter().any(|kind| kind == "object"),
        _ => has_properties(schema),
    }
}

/// The JSON type names a schema allows, as written in `type` (empty: any).
pub fn types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(kind)) => vec![kind.as_str()],
        Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Whether the schema allows `null` (by `type`, an `enum`/`const` of null, or an
/// `anyOf`/`oneOf` with a member that does).
pub fn allows_null(schema: &Value) -> bool {
    nullable_members(schema).is_some()
        || types(schema).contains(&"null")
        || schema.get("const") == Some(&Value::Null)
        || schema
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|values| values.contains(&Value::Null))
}

/// The members of `schema`'s `anyOf` (else `oneOf`) when one of them allows `null`: that
/// member's index and the list.
fn nullable_members(schema: &Value) -> Option<(usize, &Vec<Value>)> {
    ["anyOf", "oneOf"].into_iter().find_map(|keyword| {
        let members = schema.get(keyword)?.as_array()?;
        let null = members.iter().position(|member| {
            types(member) == ["null"] || member.get("const") == Some(&Value::Null)
        })?;
        Some((null, members))
    })
}

/// The schema of a nullable value when it is not null: the one other member of an
/// `anyOf`/`oneOf: [{…}, {"type": "null"}]`, else `schema` itself.
///
/// ```
/// use concord_negotiate::json_schema::non_null;
/// use serde_json::json;
///
/// let error = json!({"anyOf": [{"type": "object"}, {"type": "null"}]});
/// assert_eq!(non_null(&error), &json!({"type": "object"}));
/// assert_eq!(non_null(&json!({"type": "string"})), &json!({"type": "string"}));
/// ```
pub fn non_null(schema: &Value) -> &Value {
    match nullable_members(schema) {
        Some((null, members)) if members.len() == 2 => &members[1 - null],
        _ => schema,
    }
}

/// The schema of an array's items, when the schema describes an array with one item schema.
pub fn items(schema: &Value) -> Option<&Value> {
    schema
        .get("items")
        .filter(|items| types(schema).contains(&"array") && items.is_object())
}

/// Whether a value of schema `from` can stand where schema `to` is expected (no
/// conversion; an integer stands for a number, `null` is left to the value).
///
/// ```
/// use concord_negotiate::json_schema::compatible;
/// use serde_json::json;
///
/// assert!(compatible(&json!({"type": "integer"}), &json!({"type": "number"})));
/// assert!(!compatible(&json!({"type": "number"}), &json!({"type": "integer"})));
/// ```
pub fn compatible(from: &Value, to: &Value) -> bool {
    let (from, to) = (types(from), types(to));
    if from.is_empty() || to.is_empty() {
        return true;
    }
    from.iter()
        .filter(|kind| **kind != "null")
        .all(|kind| to.contains(kind) || (*kind == "integer" && to.contains(&"number")))
}

/// The value a schema fixes: its `const`, or an `enum` of exactly one value.
pub fn fixed_value(schema: &Value) -> Option<&Value> {
    schema.get("const").or_else(|| {
        schema
            .get("enum")
            .and_then(Value::as_array)
            .filter(|values| values.len() == 1)
            .and_then(|values| values.first())
    })
}

/// The value to write when nothing supplies one: the schema's `const`, else its `default`.
pub fn fallback(schema: &Value) -> Option<&Value> {
    fixed_value(schema).or_else(|| schema.get("default"))
}

/// The schema with its local references (`{"$ref": "#/$defs/Name"}`, `#/definitions/…`,
/// any `#/…` pointer into the document) replaced by what they point at, sibling keywords
/// kept beside it. References are followed to a depth of 8 (a recursive schema keeps its
/// `$ref` there); remote or unresolvable references stay as written. The definitions
/// themselves stay, so the schema validates exactly as before.
///
/// ```
/// use concord_negotiate::json_schema::{inline_refs, properties};
/// use serde_json::json;
///
/// let schema = json!({
///     "$ref": "#/$defs/Request",
///     "$defs": {"Request": {"type": "object", "properties": {"id": {"type": "string"}}}}
/// });
/// let inlined = inline_refs(&schema);
/// assert_eq!(properties(&inlined)[0].0, "id");
/// ```
pub fn inline_refs(schema: &Value) -> Value {
    let mut budget = Budget::new(INLINE_BUDGET);
    inline(schema, schema, 0, &mut budget)
}

/// How many values reference expansion may write in all: a hostile schema whose
/// definitions each reference the next many times would otherwise grow exponentially.
/// Past it, references stay as written (the schema still validates the same).
const INLINE_BUDGET: usize = 100_000;

/// [`inline_refs`] for a schema from a peer, within `limits`: the schema as written is
/// checked first ([`check_complexity`]), references are expanded only while the result
/// holds at most [`SchemaLimits::max_values`] values, and the result is checked again, so
/// an inlined schema is never over any limit (reference fan-out included).
///
/// ```
/// use concord_negotiate::complexity::{Limit, SchemaLimits};
/// use concord_negotiate::json_schema::inline_refs_within;
/// use serde_json::json;
///
/// let item = json!({"$ref": "#/$defs/Item"});
/// let schema = json!({
///     "properties": {"a": item, "b": item, "c": item, "d": item},
///     "$defs": {"Item": {"type": "object", "properties": {"x": {}, "y": {}, "z": {}}}}
/// });
/// assert!(inline_refs_within(&schema, &SchemaLimits::default()).is_ok());
/// let tight = SchemaLimits { max_values: 30, ..SchemaLimits::default() };
/// let error = inline_refs_within(&schema, &tight).unwrap_err();
/// assert_eq!(error.over, Limit::InlinedValues);
/// ```
///
/// # Errors
/// [`SchemaTooComplex`] naming the first limit found over.
pub fn inline_refs_within(
    schema: &Value,
    limits: &SchemaLimits,
) -> Result<Value, SchemaTooComplex> {
    check_complexity(schema, limits)?;
    let mut budget = Budget::new(limits.max_values);
    let inlined = inline(schema, schema, 0, &mut budget);
    if let Some(pointer) = budget.stopped_at {
        return Err(SchemaTooComplex::new(
            pointer,
            Limit::InlinedValues,
            limits.max_values.saturating_add(1),
            limits.max_values,
        ));
    }
    check_complexity(&inlined, limits).map_err(|mut error| {
        if error.over == Limit::Values {
            error.over = Limit::InlinedValues;
        }
        error
    })?;
    Ok(inlined)
}

/// How many JSON values `value` holds (itself included), counted without recursion.
fn values_in(value: &Value) -> usize {
    let mut count = 0;
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        count += 1;
        match value {
            Value::Object(map) => stack.extend(map.values()),
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    count
}

/// What reference expansion may still write, and the first reference it left as written
/// for want of budget.
struct Budget {
    left: usize,
    stopped_at: Option<String>,
}

impl Budget {
    fn new(left: usize) -> Self {
        Self {
            left,
            stopped_at: None,
        }
    }

    fn spend(&mut self, values: usize) {
        self.left = self.left.saturating_sub(values);
    }
}

/// Keywords whose values are data, not schemas: a `$ref` in them is a value.
const DATA_KEYWORDS: [&str; 4] = ["const", "enum", "default", "examples"];

/// The member `key` of a schema object with its references inlined, unless it is data.
fn inline_member(key: &str, sub: &Value, root: &Value, depth: usize, budget: &mut Budget) -> Value {
    if DATA_KEYWORDS.contains(&key) {
        budget.spend(values_in(sub));
        sub.clone()
    } else {
        inline(sub, root, depth, budget)
    }
}

fn inline(value: &Value, root: &Value, depth: usize, budget: &mut Budget) -> Value {
    budget.spend(1);
    match value {
        Value::Object(object) => {
            let local = object
                .get("$ref")
                .and_then(Value::as_str)
                .filter(|_| depth < MAX_DEPTH)
                .and_then(|reference| reference.strip_prefix('#'))
                .and_then(|pointer| Some((pointer, root.pointer(pointer)?)));
            if let Some((pointer, _)) = local.filter(|_| budget.left == 0) {
                budget.stopped_at.get_or_insert_with(|| pointer.to_owned());
            }
            let target = local.filter(|_| budget.left > 0).map(|(_, target)| target);
            match target {
                Some(target) => {
                    let mut merged = match inline(target, root, depth + 1, budget) {
                        Value::Object(map) => map,
                        other => return other,
                    };
                    // Definitions stay at the root only (`{"$ref": "#"}` would copy them).
                    merged.remove("$defs");
                    merged.remove("definitions");
                    for (key, sub) in object {
                        if key != "$ref" {
                            merged
                                .insert(key.clone(), inline_member(key, sub, root, depth, budget));
                        }
                    }
                    Value::Object(merged)
                }
                None => Value::Object(
                    object
                        .iter()
                        .map(|(key, sub)| {
                            let sub = if key == "$defs" || key == "definitions" {
                                budget.spend(values_in(sub));
                                sub.clone()
                            } else {
                                inline_member(key, sub, root, depth, budget)
                            };
                            (key.clone(), sub)
                        })
                        .collect::<Map<String, Value>>(),
                ),
            }
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| inline(item, root, depth, budget))
                .collect(),
        ),
        other => {
            // Long strings count by their size: a reference to a huge value is expanded
            // once or twice, not a hundred thousand times.
            if let Value::String(text) = other {
                budget.spend(text.len() / 16);
            }
            other.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn composed_schemas_list_their_members_properties() {
        let schema = json!({
            "oneOf": [
                {"type": "object", "properties": {"id": {}, "data": {}}, "required": ["id", "data"]},
                {"type": "object", "properties": {"id": {}, "error": {}}, "required": ["id", "error"]}
            ]
        });
        let names: Vec<&str> = properties(&schema)
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        assert_eq!(names, ["id", "data", "error"]);
        assert_eq!(required(&schema), ["id"]);
        let all = json!({"allOf": [{"required": ["a"]}, {"required": ["b"]}]});
        assert_eq!(required(&all), ["a", "b"]);
    }

    #[test]
    fn refs_are_inlined_and_cycles_stop() {
        let schema = json!({
            "type": "object",
            "properties": {"item": {"$ref": "#/$defs/Item", "description": "one"}},
            "$defs": {"Item": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Item"}}}}
        });
        let inlined = inline_refs(&schema);
        assert_eq!(inlined["properties"]["item"]["description"], "one");
        assert_eq!(inlined["properties"]["item"]["type"], "object");
        assert!(inlined
            .pointer("/properties/item/properties/next/properties/next")
            .is_some());
        assert_eq!(inlined["$defs"], schema["$defs"]);
        assert_eq!(
            inline_refs(&json!({"$ref": "https://x/y"})),
            json!({"$ref": "https://x/y"})
        );
    }

    /// Ten references to the next definition at each of eight levels: 10^8 copies.
    fn reference_bomb() -> Value {
        let mut defs = serde_json::Map::new();
        for level in 0..8 {
            let next = json!({"$ref": format!("#/$defs/d{}", level + 1)});
            let properties: serde_json::Map<String, Value> =
                (0..10).map(|i| (format!("p{i}"), next.clone())).collect();
            defs.insert(
                format!("d{level}"),
                json!({"type": "object", "properties": properties}),
            );
        }
        defs.insert("d8".into(), json!({"type": "string"}));
        json!({"$ref": "#/$defs/d0", "$defs": defs})
    }

    #[test]
    fn a_reference_bomb_stays_within_the_budget() {
        let schema = reference_bomb();
        let inlined = inline_refs(&schema);
        let size = inlined.to_string().len();
        assert!(size < 20_000_000, "{size} bytes");
        assert_eq!(inlined["type"], "object");
    }

    #[test]
    fn a_reference_bomb_within_limits_is_refused_while_it_expands() {
        let schema = reference_bomb();
        let limits = SchemaLimits::default();
        let error = inline_refs_within(&schema, &limits).unwrap_err();
        assert_eq!(error.over, Limit::InlinedValues);
        assert_eq!(error.limit, limits.max_values);
        assert!(error.pointer.starts_with("/$defs/d"), "{error}");
        // A recursive schema expands to the depth bound and stays within the limits.
        let recursive = json!({
            "type": "object",
            "properties": {"item": {"$ref": "#/$defs/Item"}},
            "$defs": {"Item": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Item"}}}}
        });
        assert_eq!(
            inline_refs_within(&recursive, &limits),
            Ok(inline_refs(&recursive))
        );
        // References left as written (remote, unresolvable) are not a budget overrun.
        let remote =
            json!({"properties": {"a": {"$ref": "https://x/y"}, "b": {"$ref": "#/nowhere"}}});
        assert_eq!(inline_refs_within(&remote, &limits), Ok(remote.clone()));
    }

    #[test]
    fn compatibility_allows_widening_only() {
        let integer = json!({"type": "integer"});
        let number = json!({"type": "number"});
        let string = json!({"type": "string"});
        assert!(compatible(&integer, &number));
        assert!(!compatible(&number, &integer));
        assert!(!compatible(&string, &number));
        assert!(compatible(&json!({}), &string));
        assert!(compatible(&json!({"type": ["string", "null"]}), &string));
    }

    #[test]
    fn fixed_values_and_fallbacks() {
        assert_eq!(
            fixed_value(&json!({"const": "REQUEST"})),
            Some(&json!("REQUEST"))
        );
        assert_eq!(fixed_value(&json!({"enum": ["a"]})), Some(&json!("a")));
        assert_eq!(fixed_value(&json!({"enum": ["a", "b"]})), None);
        assert_eq!(fallback(&json!({"default": 10})), Some(&json!(10)));
    }
}
