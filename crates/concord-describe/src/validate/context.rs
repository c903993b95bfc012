//! `@context`, `@type`, prefixes, the LMOS terms and the LMOS identifier spellings.

use serde_json::{Map, Value};

use super::{formats, Checker};
use crate::pointer::Path;
use crate::problem::ProblemKind;
use crate::vocab::{
    CONCORD_NAMESPACE, CONCORD_PREFIX, LMOS_NAMESPACE, LMOS_PREFIX, TD_1_0_CONTEXT, TD_1_1_CONTEXT,
    THING_MODEL_TYPE,
};

impl<'v> Checker<'v> {
    pub(super) fn context(&mut self, thing: &'v Map<String, Value>, at: &Path<'_>) {
        let at = at.key("@context");
        let Some(context) = thing.get("@context") else {
            self.report(
                ProblemKind::MissingTerm,
                &at,
                format!(
                    "`@context` is required: \"{TD_1_1_CONTEXT}\", or an array starting with it"
                ),
            );
            return;
        };
        match context {
            Value::String(uri) if uri == TD_1_1_CONTEXT => {}
            Value::String(uri) if uri == TD_1_0_CONTEXT => self.report(
                ProblemKind::InvalidContext,
                &at,
                format!("this is a TD 1.0 context; a TD 1.1 description needs \"{TD_1_1_CONTEXT}\""),
            ),
            Value::String(uri) => self.report(
                ProblemKind::InvalidContext,
                &at,
                format!("`@context` must be \"{TD_1_1_CONTEXT}\" or an array starting with it, found \"{uri}\""),
            ),
            Value::Array(entries) => self.context_array(entries, &at),
            other => self.wrong_type(&at, "`@context` to be a string or an array", other),
        }
    }

    fn context_array(&mut self, entries: &'v [Value], at: &Path<'_>) {
        let first = entries.first().and_then(Value::as_str);
        let second = entries.get(1).and_then(Value::as_str);
        // TD 1.1 first; or TD 1.0 directly followed by TD 1.1 (backward compatible form).
        let td_entries = match (first, second) {
            (Some(TD_1_1_CONTEXT), _) => 1,
            (Some(TD_1_0_CONTEXT), Some(TD_1_1_CONTEXT)) => 2,
            (Some(TD_1_0_CONTEXT), _) => {
                self.report(
                    ProblemKind::InvalidContext,
                    &at.index(0),
                    format!("this is a TD 1.0 context; a TD 1.1 description needs \"{TD_1_1_CONTEXT}\" first (or right after the TD 1.0 URI)"),
                );
                1
            }
            _ => {
                self.report(
                    ProblemKind::InvalidContext,
                    &at.index(0),
                    format!("the first `@context` entry must be \"{TD_1_1_CONTEXT}\""),
                );
                0
            }
        };
        for (i, entry) in entries.iter().enumerate().skip(td_entries) {
            let at = at.index(i);
            match entry {
                Value::String(uri) if uri == TD_1_0_CONTEXT || uri == TD_1_1_CONTEXT => self
                    .report(
                        ProblemKind::InvalidContext,
                        &at,
                        "the TD context URIs may appear only at the start of `@context`, once",
                    ),
                Value::String(uri) => {
                    if let Err(why) = formats::absolute_uri(uri) {
                        self.report(
                            ProblemKind::InvalidContext,
                            &at,
                            format!("context entry {why}"),
                        );
                    }
                }
                Value::Object(definitions) => self.context_definitions(definitions, &at),
                other => self.wrong_type(
                    &at,
                    "a context URI (string) or an object of prefix definitions",
                    other,
                ),
            }
        }
    }

    fn context_definitions(&mut self, definitions: &'v Map<String, Value>, at: &Path<'_>) {
        for (term, value) in definitions {
            let at = at.key(term);
            match (term.as_str(), value) {
                ("@language", Value::String(tag)) => {
                    if !formats::is_language_tag(tag) {
                        self.report(
                            ProblemKind::InvalidValue,
                            &at,
                            format!("`{tag}` is not a BCP 47 language tag"),
                        );
                    }
                }
                ("@direction", Value::String(direction)) => {
                    if direction != "ltr" && direction != "rtl" {
                        self.report(
                            ProblemKind::InvalidValue,
                            &at,
                            format!(
                                "`@direction` must be \"ltr\" or \"rtl\", found \"{direction}\""
                            ),
                        );
                    }
                }
                ("@language" | "@direction", Value::Null) => {}
                ("@language" | "@direction", other) => self.wrong_type(&at, "a string", other),
                (keyword, _) if keyword.starts_with('@') => {}
                (_, Value::String(iri)) => {
                    if let Err(why) = formats::absolute_uri(iri) {
                        self.report(
                            ProblemKind::InvalidContext,
                            &at,
                            format!("the IRI of `{term}` {why}"),
                        );
                    }
                }
                // An expanded term definition, or null (undefining a term).
                (_, Value::Object(_) | Value::Null) => {}
                (_, other) => {
                    self.wrong_type(&at, "an IRI (string) or a term definition (object)", other)
                }
            }
        }
    }

    /// `@type` of the Thing (also used for affordances, schemes and data schemas).
    pub(super) fn type_declaration(&mut self, object: &'v Map<String, Value>, at: &Path<'_>) {
        let types = self.strings(object, "@type", at);
        if types.contains(&THING_MODEL_TYPE) {
            self.report(
                ProblemKind::ThingModel,
                &at.key("@type"),
                "`tm:ThingModel` marks a Thing Model; an agent description must be a Thing Description",
            );
        }
    }

    /// The LMOS identifier spellings `thingId` and `thingID`: one of them, a URI, equal to `id`.
    pub(super) fn thing_id(&mut self, thing: &'v Map<String, Value>, at: &Path<'_>) {
        if thing.contains_key("thingId") && thing.contains_key("thingID") {
            self.report(
                ProblemKind::Conflict,
                &at.key("thingID"),
                "both `thingId` and `thingID` are present; write one (Concord writes `thingId`)",
            );
        }
        for term in ["thingId", "thingID"] {
            let Some(thing_id) = self.string(thing, term, at) else {
                continue;
            };
            if let Err(why) = formats::absolute_uri(thing_id) {
                self.report(
                    ProblemKind::InvalidUri,
                    &at.key(term),
                    format!("`{term}` {why}"),
                );
            }
            if let Some(Value::String(id)) = thing.get("id") {
                if id != thing_id {
                    self.report(
                        ProblemKind::Conflict,
                        &at.key(term),
                        format!("`{term}` is \"{thing_id}\" but `id` is \"{id}\"; they name the same Thing"),
                    );
                }
            }
        }
    }

    /// `lmos:metadata` and its `lmos:vendor`.
    pub(super) fn lmos_metadata(&mut self, thing: &'v Map<String, Value>, at: &Path<'_>) {
        let Some(metadata) = self.object(thing, "lmos:metadata", at) else {
            return;
        };
        let at = at.key("lmos:metadata");
        let Some(vendor) = self.object(metadata, "lmos:vendor", &at) else {
            return;
        };
        let at = at.key("lmos:vendor");
        self.string(vendor, "lmos:name", &at);
        if let Some(url) = self.string(vendor, "lmos:url", &at) {
            if let Err(why) = formats::absolute_uri(url) {
                self.report(
                    ProblemKind::InvalidUri,
                    &at.key("lmos:url"),
                    format!("`lmos:url` {why}"),
                );
            }
        }
    }

    /// Terms under the `lmos` and `concord` prefixes need those prefixes in `@context`.
    pub(super) fn prefix_declarations(
        &mut self,
        document: &'v Value,
        thing: &'v Map<String, Value>,
    ) {
        let bindings = prefix_bindings(thing);
        let bound = |prefix: &str| {
            bindings
                .iter()
                .find(|(p, _)| *p == prefix)
                .map(|(_, iri)| *iri)
        };
        for (prefix, namespace) in [
            (LMOS_PREFIX, LMOS_NAMESPACE),
            (CONCORD_PREFIX, CONCORD_NAMESPACE),
        ] {
            let mut first_use = None;
            find_prefix_use(document, prefix, &Path::ROOT, self.max_depth(), &mut |at| {
                if first_use.is_none() {
                    first_use = Some(at.pointer());
                }
            });
            let Some(pointer) = first_use else {
                continue;
            };
            match bound(prefix) {
                None => self.report_at(
                    ProblemKind::UndeclaredPrefix,
                    pointer,
                    format!("`{prefix}:` terms are used but `@context` does not declare the prefix; add {{\"{prefix}\": \"{namespace}\"}}"),
                ),
                Some(iri) if iri == namespace => {}
                Some(iri) if prefix == CONCORD_PREFIX => self.report(
                    ProblemKind::InvalidContext,
                    &Path::ROOT.key("@context"),
                    format!("the `concord` prefix must be bound to \"{CONCORD_NAMESPACE}\", found \"{iri}\""),
                ),
                Some(iri) => self.report(
                    ProblemKind::UnexpectedNamespace,
                    &Path::ROOT.key("@context"),
                    format!("the `lmos` prefix is bound to \"{iri}\", not the LMOS v1 namespace \"{LMOS_NAMESPACE}\"; `lmos:` terms are read as LMOS v1 terms"),
                ),
            }
        }
    }
}

/// The prefix bindings (`"lmos": "https://..."`) in `@context` objects.
fn prefix_bindings(thing: &Map<String, Value>) -> Vec<(&str, &str)> {
    let Some(Value::Array(entries)) = thing.get("@context") else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(Value::as_object)
        .flat_map(|definitions| definitions.iter())
        .filter_map(|(term, value)| Some((term.as_str(), value.as_str()?)))
        .collect()
}

/// Calls `found` for each key, and each `@type` value, that starts with `prefix:`.
fn find_prefix_use(
    value: &Value,
    prefix: &str,
    at: &Path<'_>,
    depth: usize,
    found: &mut dyn FnMut(&Path<'_>),
) {
    if depth == 0 {
        return;
    }
    let prefixed = |text: &str| {
        text.strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with(':'))
    };
    match value {
        Value::Object(members) => {
            for (key, member) in members {
                let at = at.key(key);
                if prefixed(key) {
                    found(&at);
                }
                if key == "@context" {
                    continue;
                }
                if key == "@type" {
                    match member {
                        Value::String(t) if prefixed(t) => found(&at),
                        Value::Array(types) => {
                            for (i, t) in types.iter().enumerate() {
                                if t.as_str().is_some_and(prefixed) {
                                    found(&at.index(i));
                                }
                            }
                        }
                        _ => {}
                    }
                }
                find_prefix_use(member, prefix, &at, depth - 1, found);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                find_prefix_use(item, prefix, &at.index(i), depth - 1, found);
            }
        }
        _ => {}
    }
}
