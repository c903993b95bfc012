//! An action's published object input, made into a request schema's keywords: the same
//! rules on the same members, with the envelope's members (`messageId`, `type`, `action`)
//! admitted by every subschema that applies to the request (the input's root, its
//! `allOf`/`anyOf`/`oneOf`, `not`, `if`/`then`/`else`, `dependentSchemas` and the local
//! `$ref`s among them, followed by copying their targets inline).
//!
//! The input itself is kept, unchanged, under `$defs/<reserved name>` of the request
//! schema, and every local reference (`#`, `#/$defs/…`, any `#/…` pointer) is rebased
//! there: a recursive `{"$ref": "#"}` still means the input, not the request.

use serde_json::{json, Map, Value};

use crate::complexity::SchemaLimits;
use crate::envelope::escape;
use crate::json_schema::inline_refs_within;

/// The `$defs` entry holding the published input (suffixed when the input uses it).
const RESERVED: &str = "concordPublishedInput";

/// How deep subschemas that apply to the request are followed.
const MAX_DEPTH: usize = 16;

/// How many `$ref` targets may be copied inline in all.
const MAX_INLINED: usize = 64;

/// Keywords whose values are data, not schemas: never rewritten.
const DATA_KEYWORDS: [&str; 4] = ["const", "enum", "default", "examples"];

/// Keywords of the published input that are about the input as a document: not carried.
const ANNOTATIONS: [&str; 7] = [
    "$schema",
    "$id",
    "title",
    "description",
    "examples",
    "default",
    "$comment",
];

/// Why a published input cannot be drafted with the envelope's members beside its own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DraftError {
    /// A keyword applying to the request could not be made to admit the envelope.
    #[error(
        "the input's `{keyword}` at `{pointer}` cannot admit the envelope's members: {reason}"
    )]
    Unadjustable {
        /// The keyword.
        keyword: String,
        /// JSON pointer of the subschema holding it, in the published input.
        pointer: String,
        /// Why.
        reason: &'static str,
    },
}

/// The request schema's keywords for the published object input `published`, with the
/// envelope's properties (`envelope`, their schemas) first: `properties`, `required`,
/// every other keyword of the input adjusted, and `$defs` holding the input.
///
/// # Errors
/// [`DraftError::Unadjustable`] for a `$dynamicRef`, a remote or unresolvable `$ref`, or a
/// recursion through references that apply to the request itself, and for a result over
/// the default [`SchemaLimits`].
pub(crate) fn request_keywords(
    published: &Map<String, Value>,
    envelope: &Map<String, Value>,
) -> Result<Map<String, Value>, DraftError> {
    let reserved = reserved_name(published);
    let base = format!("/$defs/{}", escape(&reserved));
    let mut copy = published.clone();
    for keyword in ["$schema", "$id"] {
        copy.remove(keyword);
    }
    let mut copy = Value::Object(copy);
    rebase(&mut copy, &base);
    let mut root = Map::new();
    for (keyword, value) in published {
        if !ANNOTATIONS.contains(&keyword.as_str())
            && !["type", "$defs", "definitions"].contains(&keyword.as_str())
        {
            root.insert(keyword.clone(), value.clone());
        }
    }
    let mut root = Value::Object(root);
    rebase(&mut root, &base);
    strip_anchors(&mut root);
    let mut adjuster = Adjuster {
        names: envelope.keys().cloned().collect(),
        copy: &copy,
        base: format!("#{base}"),
        inlined: 0,
    };
    adjuster.adjust(&mut root, "", 0)?;
    let Value::Object(mut root) = root else {
        return Ok(Map::new());
    };
    let mut properties = envelope.clone();
    if let Some(own) = root.get("properties").and_then(Value::as_object) {
        for (name, sub) in own {
            properties.insert(name.clone(), sub.clone());
        }
    }
    root.insert("properties".into(), Value::Object(properties));
    let mut required: Vec<Value> = envelope.keys().map(|name| json!(name)).collect();
    for name in root
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if !required.contains(name) {
            required.push(name.clone());
        }
    }
    root.insert("required".into(), Value::Array(required));
    root.insert("$defs".into(), json!({ reserved: copy }));
    // The document's reader inlines references within the default limits: the draft must
    // stay readable once they are.
    inline_refs_within(&Value::Object(root.clone()), &SchemaLimits::default()).map_err(
        |error| DraftError::Unadjustable {
            keyword: "$ref".into(),
            pointer: error.pointer,
            reason: "the references copied inline make the request schema too complex",
        },
    )?;
    Ok(root)
}

/// A `$defs` name the input does not use.
fn reserved_name(published: &Map<String, Value>) -> String {
    let used = |name: &str| {
        published
            .get("$defs")
            .and_then(Value::as_object)
            .is_some_and(|defs| defs.contains_key(name))
    };
    (0..)
        .map(|n| match n {
            0 => RESERVED.to_owned(),
            n => format!("{RESERVED}{n}"),
        })
        .find(|name| !used(name))
        .unwrap_or_else(|| RESERVED.to_owned())
}

/// Rewrites every local pointer `$ref` in `schema` (`#`, `#/…`) to point `prefix` deeper;
/// anchor references (`#name`), remote references and data keywords (`const`, `enum`,
/// `default`, `examples`) are left as they are.
pub(crate) fn rebase(schema: &mut Value, prefix: &str) {
    match schema {
        Value::Object(object) => {
            for (keyword, value) in object.iter_mut() {
                if DATA_KEYWORDS.contains(&keyword.as_str()) {
                    continue;
                }
                match value {
                    Value::String(reference) if keyword == "$ref" => {
                        if let Some(pointer) = reference.strip_prefix('#') {
                            if pointer.is_empty() || pointer.starts_with('/') {
                                *reference = format!("#{prefix}{pointer}");
                            }
                        }
                    }
                    other => rebase(other, prefix),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| rebase(item, prefix)),
        _ => {}
    }
}

/// Keywords whose values map names (of members, definitions) to schemas.
const NAME_MAPS: [&str; 5] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// Removes `$anchor` and `$dynamicAnchor` from `schema`, whose anchors the kept input
/// already defines (a name is defined once per document).
fn strip_anchors(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            object.remove("$anchor");
            object.remove("$dynamicAnchor");
            for (keyword, value) in object.iter_mut() {
                if DATA_KEYWORDS.contains(&keyword.as_str()) {
                    continue;
                }
                match value {
                    Value::Object(named) if NAME_MAPS.contains(&keyword.as_str()) => {
                        named.values_mut().for_each(strip_anchors);
                    }
                    other => strip_anchors(other),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_anchors),
        _ => {}
    }
}

/// `pattern` (unanchored, as JSON Schema reads it) made to match no envelope name:
/// `^(?!(?:messageId|type|action)$)[\s\S]*?(?:pattern)`.
fn excluding(pattern: &str, names: &[String]) -> String {
    let names: Vec<String> = names.iter().map(|name| regex_escape(name)).collect();
    format!("^(?!(?:{})$)[\\s\\S]*?(?:{pattern})", names.join("|"))
}

fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let escaped = !(c.is_ascii_alphanumeric() || c == '_');
            escaped.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

/// Adjusts the subschemas that apply to the request.
struct Adjuster<'c> {
    names: Vec<String>,
    copy: &'c Value,
    /// `#/$defs/<reserved>`: where every local reference points after rebasing.
    base: String,
    inlined: usize,
}

impl Adjuster<'_> {
    fn refuse(&self, keyword: &str, pointer: &str, reason: &'static str) -> DraftError {
        DraftError::Unadjustable {
            keyword: keyword.to_owned(),
            pointer: pointer.to_owned(),
            reason,
        }
    }

    /// Makes `schema`, which applies to the whole request at `pointer`, admit the
    /// envelope's members as the input would admit the rest.
    fn adjust(
        &mut self,
        schema: &mut Value,
        pointer: &str,
        depth: usize,
    ) -> Result<(), DraftError> {
        let Value::Object(object) = schema else {
            return Ok(());
        };
        if depth > MAX_DEPTH {
            return Err(self.refuse(
                "$ref",
                pointer,
                "its references recurse through the request itself",
            ));
        }
        if object.contains_key("$dynamicRef") {
            return Err(self.refuse(
                "$dynamicRef",
                pointer,
                "a dynamic reference is not followed",
            ));
        }
        if let Some(reference) = object.remove("$ref") {
            let target = self.target(&reference, pointer)?;
            match object
                .entry("allOf")
                .or_insert_with(|| Value::Array(Vec::new()))
            {
                Value::Array(members) => members.push(target),
                _ => return Err(self.refuse("allOf", pointer, "it is not an array")),
            }
        }
        let names = self.names.clone();
        let count = names.len() as u64;
        if depth > 0 {
            let closes = ["additionalProperties", "unevaluatedProperties"]
                .iter()
                .any(|keyword| {
                    object
                        .get(*keyword)
                        .is_some_and(|value| value != &json!(true))
                });
            if closes {
                let properties = object
                    .entry("properties")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(properties) = properties.as_object_mut() {
                    for name in &names {
                        properties.entry(name.clone()).or_insert(json!(true));
                    }
                }
            }
        }
        if let Some(patterns) = object
            .get_mut("patternProperties")
            .and_then(Value::as_object_mut)
        {
            let rewritten = std::mem::take(patterns)
                .into_iter()
                .map(|(pattern, sub)| (excluding(&pattern, &names), sub))
                .collect();
            *patterns = rewritten;
        }
        if let Some(rule) = object.remove("propertyNames") {
            object.insert(
                "propertyNames".into(),
                json!({"anyOf": [{"enum": names}, rule]}),
            );
        }
        for keyword in ["minProperties", "maxProperties"] {
            if let Some(bound) = object.get(keyword).and_then(Value::as_u64) {
                object.insert(keyword.into(), json!(bound.saturating_add(count)));
            }
        }
        for keyword in ["allOf", "anyOf", "oneOf"] {
            if let Some(members) = object.get_mut(keyword).and_then(Value::as_array_mut) {
                for (index, member) in members.iter_mut().enumerate() {
                    self.adjust(member, &format!("{pointer}/{keyword}/{index}"), depth + 1)?;
                }
            }
        }
        for keyword in ["not", "if", "then", "else"] {
            if let Some(sub) = object.get_mut(keyword) {
                self.adjust(sub, &format!("{pointer}/{keyword}"), depth + 1)?;
            }
        }
        if let Some(each) = object
            .get_mut("dependentSchemas")
            .and_then(Value::as_object_mut)
        {
            for (name, sub) in each.iter_mut() {
                let at = format!("{pointer}/dependentSchemas/{}", escape(name));
                self.adjust(sub, &at, depth + 1)?;
            }
        }
        Ok(())
    }

    /// A copy of what the (rebased) reference `reference` points at, its anchors removed.
    fn target(&mut self, reference: &Value, pointer: &str) -> Result<Value, DraftError> {
        self.inlined += 1;
        if self.inlined > MAX_INLINED {
            return Err(self.refuse("$ref", pointer, "too many references to copy inline"));
        }
        let Some(reference) = reference.as_str() else {
            return Err(self.refuse("$ref", pointer, "it is not a string"));
        };
        let found = if let Some(inner) = reference.strip_prefix(self.base.as_str()) {
            (inner.is_empty() || inner.starts_with('/'))
                .then(|| self.copy.pointer(&percent_decoded(inner)))
                .flatten()
        } else if let Some(anchor) = reference.strip_prefix('#') {
            find_anchor(self.copy, anchor)
        } else {
            return Err(self.refuse("$ref", pointer, "a remote reference is not followed"));
        };
        let Some(found) = found else {
            return Err(self.refuse("$ref", pointer, "it points at nothing in the input"));
        };
        let mut target = found.clone();
        strip_anchors(&mut target);
        if let Value::Object(object) = &mut target {
            object.remove("$defs");
            object.remove("definitions");
            object.remove("$id");
        }
        Ok(target)
    }
}

/// A URI fragment's `%XX` escapes decoded (ASCII only; anything else is left as is).
fn percent_decoded(fragment: &str) -> String {
    let bytes = fragment.as_bytes();
    let mut out = String::with_capacity(fragment.len());
    let mut index = 0;
    while index < bytes.len() {
        let decoded = (bytes[index] == b'%')
            .then(|| fragment.get(index + 1..index + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok())
            .filter(u8::is_ascii);
        match decoded {
            Some(byte) => {
                out.push(char::from(byte));
                index += 3;
            }
            None => {
                let rest = &fragment[index..];
                let Some(c) = rest.chars().next() else {
                    break;
                };
                out.push(c);
                index += c.len_utf8();
            }
        }
    }
    out
}

/// The subschema of `schema` defining `$anchor` (or `$dynamicAnchor`) `name`.
fn find_anchor<'s>(schema: &'s Value, name: &str) -> Option<&'s Value> {
    match schema {
        Value::Object(object) => {
            let defines = ["$anchor", "$dynamicAnchor"]
                .iter()
                .any(|keyword| object.get(*keyword).and_then(Value::as_str) == Some(name));
            if defines {
                return Some(schema);
            }
            object
                .iter()
                .filter(|(keyword, _)| !DATA_KEYWORDS.contains(&keyword.as_str()))
                .find_map(|(_, value)| find_anchor(value, name))
        }
        Value::Array(items) => items.iter().find_map(|item| find_anchor(item, name)),
        _ => None,
    }
}
