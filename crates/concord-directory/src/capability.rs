//! Capability search ("who can do this"): the keys a TD is indexed under, read from its
//! JSON (any TD, ours or a foreign one), and the queries over them.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// What a [`CapabilityKey`] names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum CapabilityKind {
    /// An action's name (`actions` member).
    Action,
    /// A property's name (`properties` member).
    Property,
    /// An event's name (`events` member).
    Event,
    /// A field of an action's `input` schema (its `properties`, at any depth).
    InputField,
    /// A field of an action's `output` schema.
    OutputField,
    /// A field of an action's `input` or `output` schema, either side (`field`): what
    /// every client (`concord find --field`, `Directory::search`) means by a field.
    Field,
    /// An `lmos:` term with a scalar value, as `term=value` (`lmos:vendor`'s
    /// `lmos:name=Acme` is `lmos:name=Acme`); a term with any value is also indexed bare.
    Lmos,
    /// A consensus protocol's URI (`concord:metaProtocol`'s `concord:consensusProtocols`).
    ConsensusUri,
    /// A consensus protocol's hash (`concord:protocolHash`, lowercase hex).
    ConsensusHash,
    /// The agent's DID (`concord:metaProtocol`'s `concord:did`).
    Did,
    /// A value of the TD's `@type` (`lmos:Agent`, `Thing`, …).
    Type,
}

impl CapabilityKind {
    /// Every kind.
    pub const ALL: [CapabilityKind; 11] = [
        CapabilityKind::Action,
        CapabilityKind::Property,
        CapabilityKind::Event,
        CapabilityKind::InputField,
        CapabilityKind::OutputField,
        CapabilityKind::Field,
        CapabilityKind::Lmos,
        CapabilityKind::ConsensusUri,
        CapabilityKind::ConsensusHash,
        CapabilityKind::Did,
        CapabilityKind::Type,
    ];

    /// Its stable name (a query parameter and a stored column): `action`, `property`,
    /// `event`, `input`, `output`, `field`, `lmos`, `consensus`, `consensus-hash`, `did`, `type`.
    pub fn name(self) -> &'static str {
        match self {
            CapabilityKind::Action => "action",
            CapabilityKind::Property => "property",
            CapabilityKind::Event => "event",
            CapabilityKind::InputField => "input",
            CapabilityKind::OutputField => "output",
            CapabilityKind::Field => "field",
            CapabilityKind::Lmos => "lmos",
            CapabilityKind::ConsensusUri => "consensus",
            CapabilityKind::ConsensusHash => "consensus-hash",
            CapabilityKind::Did => "did",
            CapabilityKind::Type => "type",
        }
    }

    /// The kind named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.name() == name)
    }
}

/// One index key: a kind and a value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct CapabilityKey {
    /// What it names.
    pub kind: CapabilityKind,
    /// The name or value.
    pub value: String,
}

impl CapabilityKey {
    /// A key.
    pub fn new(kind: CapabilityKind, value: impl Into<String>) -> Self {
        Self {
            kind,
            value: value.into(),
        }
    }
}

/// How deep [`keys_of`] follows a schema's nested `properties`.
const MAX_SCHEMA_DEPTH: usize = 8;

/// The most keys one TD is indexed under (a TD is bounded in size; this bounds the index
/// rows one registration writes).
pub const MAX_KEYS_PER_TD: usize = 512;

/// The keys a TD is indexed under, sorted, at most [`MAX_KEYS_PER_TD`].
pub fn keys_of(td: &Value) -> Vec<CapabilityKey> {
    let mut keys = BTreeSet::new();
    let Some(td) = td.as_object() else {
        return Vec::new();
    };
    for (member, kind) in [
        ("actions", CapabilityKind::Action),
        ("properties", CapabilityKind::Property),
        ("events", CapabilityKind::Event),
    ] {
        for name in td
            .get(member)
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(Map::keys)
        {
            keys.insert(CapabilityKey::new(kind, name.as_str()));
        }
    }
    for action in td
        .get("actions")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(Map::values)
    {
        for (member, kind) in [
            ("input", CapabilityKind::InputField),
            ("output", CapabilityKind::OutputField),
        ] {
            if let Some(schema) = action.get(member) {
                schema_fields(schema, kind, 0, &mut keys);
                schema_fields(schema, CapabilityKind::Field, 0, &mut keys);
            }
        }
    }
    match td.get("@type") {
        Some(Value::String(kind)) => {
            keys.insert(CapabilityKey::new(CapabilityKind::Type, kind.as_str()));
        }
        Some(Value::Array(kinds)) => {
            for kind in kinds.iter().filter_map(Value::as_str) {
                keys.insert(CapabilityKey::new(CapabilityKind::Type, kind));
            }
        }
        _ => {}
    }
    lmos_terms(td, 0, &mut keys);
    if let Some(meta) = td.get("concord:metaProtocol").and_then(Value::as_object) {
        if let Some(did) = meta.get("concord:did").and_then(Value::as_str) {
            keys.insert(CapabilityKey::new(CapabilityKind::Did, did));
        }
        for protocol in meta
            .get("concord:consensusProtocols")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(uri) = protocol.get("concord:uri").and_then(Value::as_str) {
                keys.insert(CapabilityKey::new(CapabilityKind::ConsensusUri, uri));
            }
            if let Some(hash) = protocol.get("concord:protocolHash").and_then(Value::as_str) {
                keys.insert(CapabilityKey::new(
                    CapabilityKind::ConsensusHash,
                    hash.to_ascii_lowercase(),
                ));
            }
        }
    }
    keys.into_iter().take(MAX_KEYS_PER_TD).collect()
}

/// Whether the JSON Schema `schema` names `field` among its `properties`, as [`keys_of`]
/// indexes an action's input and output fields: following `properties`, `items`, `allOf`,
/// `anyOf` and `oneOf` (not `examples`, `default` or other values), to a bounded depth.
/// The one meaning of "a schema has this field" for the directory and its clients.
pub fn schema_has_field(schema: &Value, field: &str) -> bool {
    let mut keys = BTreeSet::new();
    schema_fields(schema, CapabilityKind::Field, 0, &mut keys);
    keys.contains(&CapabilityKey::new(CapabilityKind::Field, field))
}

fn schema_fields(
    schema: &Value,
    kind: CapabilityKind,
    depth: usize,
    keys: &mut BTreeSet<CapabilityKey>,
) {
    if depth > MAX_SCHEMA_DEPTH {
        return;
    }
    let Some(schema) = schema.as_object() else {
        return;
    };
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, inner) in properties {
            keys.insert(CapabilityKey::new(kind, name.as_str()));
            schema_fields(inner, kind, depth + 1, keys);
        }
    }
    if let Some(items) = schema.get("items") {
        match items {
            Value::Array(items) => {
                for item in items {
                    schema_fields(item, kind, depth + 1, keys);
                }
            }
            item => schema_fields(item, kind, depth + 1, keys),
        }
    }
    for combinator in ["allOf", "anyOf", "oneOf"] {
        for inner in schema
            .get(combinator)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            schema_fields(inner, kind, depth + 1, keys);
        }
    }
}

fn lmos_terms(object: &Map<String, Value>, depth: usize, keys: &mut BTreeSet<CapabilityKey>) {
    if depth > MAX_SCHEMA_DEPTH {
        return;
    }
    for (term, value) in object {
        if !term.starts_with("lmos:") {
            continue;
        }
        keys.insert(CapabilityKey::new(CapabilityKind::Lmos, term.as_str()));
        match value {
            Value::Object(inner) => lmos_terms(inner, depth + 1, keys),
            Value::Array(items) => {
                for item in items {
                    match item {
                        Value::Object(inner) => lmos_terms(inner, depth + 1, keys),
                        scalar => insert_scalar(term, scalar, keys),
                    }
                }
            }
            scalar => insert_scalar(term, scalar, keys),
        }
    }
}

fn insert_scalar(term: &str, value: &Value, keys: &mut BTreeSet<CapabilityKey>) {
    let text = match value {
        Value::String(text) => text.clone(),
        Value::Number(number) => number.to_string(),
        Value::Bool(flag) => flag.to_string(),
        _ => return,
    };
    keys.insert(CapabilityKey::new(
        CapabilityKind::Lmos,
        format!("{term}={text}"),
    ));
}

/// A capability search: the TDs holding every key (an AND of terms).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CapabilityQuery {
    /// The terms, each one [`CapabilityKey`].
    pub terms: Vec<CapabilityKey>,
}

impl CapabilityQuery {
    /// An empty query (add terms with [`and`](Self::and)).
    pub fn new() -> Self {
        Self::default()
    }

    /// This query and one more term.
    pub fn and(mut self, kind: CapabilityKind, value: impl Into<String>) -> Self {
        self.terms.push(CapabilityKey::new(kind, value));
        self
    }
}

/// What a capability search found.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct CapabilityMatches {
    /// The enriched TDs, in code-point order of id.
    pub things: Vec<Value>,
    /// Whether more TDs match than the limit let through.
    pub truncated: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_field_is_read_from_the_schema_structure_only() {
        let schema = json!({
            "type": "object",
            "properties": {"order": {"type": "object", "properties": {"sku": {"type": "string"}}}},
            "items": {"properties": {"line": {}}},
            "anyOf": [{"properties": {"coupon": {}}}],
            "examples": [{"properties": {"fromAnExample": {}}}],
            "default": {"properties": {"fromADefault": {}}},
        });
        for field in ["order", "sku", "line", "coupon"] {
            assert!(schema_has_field(&schema, field), "{field}");
        }
        for field in ["fromAnExample", "fromADefault", "type"] {
            assert!(!schema_has_field(&schema, field), "{field}");
        }
        let td = json!({"actions": {"a": {
            "input": {"properties": {"in": {}}},
            "output": {"properties": {"out": {}}},
        }}});
        let keys = keys_of(&td);
        for (kind, value) in [
            (CapabilityKind::InputField, "in"),
            (CapabilityKind::OutputField, "out"),
            (CapabilityKind::Field, "in"),
            (CapabilityKind::Field, "out"),
        ] {
            assert!(keys.contains(&CapabilityKey::new(kind, value)), "{value}");
        }
    }
}
