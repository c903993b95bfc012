//! The validator: TD 1.1 rules, the LMOS terms, Concord's extension, and the checks the
//! official JSON Schema cannot make. It walks a `serde_json::Value` (so it works on any
//! document, however wrong) and reports problems by JSON pointer.

mod affordance;
mod context;
mod extension;
pub(crate) mod formats;
mod http_form;
mod links;
mod schema;
mod security;

use std::collections::HashSet;

use concord_proto::json_type;
use serde_json::{Map, Value};
use url::Url;

use crate::pointer::Path;
use crate::problem::{Problem, ProblemKind, Severity};

/// Checks a whole document.
pub(crate) fn check(document: &Value, max_depth: usize, max_problems: usize) -> Vec<Problem> {
    let mut checker = Checker {
        problems: Vec::new(),
        errors: 0,
        max_problems,
        dropped: false,
        max_depth,
        security_names: HashSet::new(),
        schema_names: HashSet::new(),
        base: None,
    };
    checker.thing(document);
    if checker.dropped {
        checker.problems.push(Problem::new(
            ProblemKind::TooManyProblems,
            String::new(),
            format!("stopped after {max_problems} problems; fix these and validate again"),
        ));
    }
    checker.problems
}

/// Walks one document, collecting problems.
pub(crate) struct Checker<'v> {
    problems: Vec<Problem>,
    /// Errors found so far, to tell whether a subtree added any.
    errors: usize,
    max_problems: usize,
    dropped: bool,
    max_depth: usize,
    /// Keys of `securityDefinitions`.
    security_names: HashSet<&'v str>,
    /// Keys of `schemaDefinitions`.
    schema_names: HashSet<&'v str>,
    /// The parsed `base`, when valid.
    base: Option<Url>,
}

impl<'v> Checker<'v> {
    fn thing(&mut self, document: &'v Value) {
        let at = Path::ROOT;
        let Some(thing) = document.as_object() else {
            let found = json_type(document);
            self.report(
                ProblemKind::WrongType,
                &at,
                format!("an agent description is a JSON object, found {found}"),
            );
            return;
        };
        // Names that references elsewhere must resolve to.
        if let Some(Value::Object(definitions)) = thing.get("securityDefinitions") {
            self.security_names = definitions.keys().map(String::as_str).collect();
        }
        if let Some(Value::Object(definitions)) = thing.get("schemaDefinitions") {
            self.schema_names = definitions.keys().map(String::as_str).collect();
        }

        self.context(thing, &at);
        self.type_declaration(thing, &at);
        self.required_string(thing, "title", &at);
        self.multi_language(thing, "titles", &at);
        self.string(thing, "description", &at);
        self.multi_language(thing, "descriptions", &at);
        if let Some(id) = self.string(thing, "id", &at) {
            if let Err(why) = formats::absolute_uri(id) {
                self.report(
                    ProblemKind::InvalidUri,
                    &at.key("id"),
                    format!("`id` {why}"),
                );
            }
        }
        self.thing_id(thing, &at);
        self.version(thing, &at);
        for term in ["created", "modified"] {
            if let Some(text) = self.string(thing, term, &at) {
                if !formats::is_date_time(text) {
                    self.report(
                        ProblemKind::InvalidValue,
                        &at.key(term),
                        format!("`{term}` must be an RFC 3339 date-time such as 2024-05-01T12:00:00Z, found `{text}`"),
                    );
                }
            }
        }
        self.uri_reference_term(thing, "support", &at);
        self.base(thing, &at);
        self.security_definitions(thing, &at);
        match thing.get("security") {
            Some(security) => self.security_references(security, &at.key("security")),
            None => self.report(
                ProblemKind::MissingTerm,
                &at.key("security"),
                "`security` is required: the names of the security definitions that apply (for example \"nosec_sc\")",
            ),
        }
        self.profile(thing, &at);
        self.schema_map(thing, "schemaDefinitions", &at, true);
        self.schema_map(thing, "uriVariables", &at, false);
        self.affordances(thing, &at);
        self.links(thing, &at);
        self.thing_forms(thing, &at);
        self.lmos_metadata(thing, &at);
        self.meta_protocol(thing, &at);
        self.prefix_declarations(document, thing);
    }

    fn version(&mut self, thing: &'v Map<String, Value>, at: &Path<'_>) {
        let Some(version) = self.object(thing, "version", at) else {
            return;
        };
        let at = at.key("version");
        self.required_string(version, "instance", &at);
        self.string(version, "model", &at);
    }

    fn base(&mut self, thing: &'v Map<String, Value>, at: &Path<'_>) {
        let Some(base) = self.string(thing, "base", at) else {
            return;
        };
        match formats::absolute_uri(base) {
            Ok(url) if url.cannot_be_a_base() => self.report(
                ProblemKind::InvalidUri,
                &at.key("base"),
                format!("`base` {base} cannot be a base URI (relative references cannot resolve against it)"),
            ),
            Ok(url) => self.base = Some(url),
            Err(why) => self.report(ProblemKind::InvalidUri, &at.key("base"), format!("`base` {why}")),
        }
    }

    fn profile(&mut self, thing: &'v Map<String, Value>, at: &Path<'_>) {
        let Some(profile) = thing.get("profile") else {
            return;
        };
        let at = at.key("profile");
        let check = |checker: &mut Self, uri: &Value, at: &Path<'_>| match uri {
            Value::String(uri) => {
                if let Err(why) = formats::absolute_uri(uri) {
                    checker.report(ProblemKind::InvalidUri, at, format!("profile {why}"));
                }
            }
            other => checker.wrong_type(at, "a profile URI (string)", other),
        };
        match profile {
            Value::Array(uris) if uris.is_empty() => self.report(
                ProblemKind::Empty,
                &at,
                "`profile` must name at least one profile when it is an array",
            ),
            Value::Array(uris) => {
                for (i, uri) in uris.iter().enumerate() {
                    check(self, uri, &at.index(i));
                }
            }
            uri => check(self, uri, &at),
        }
    }

    // ----- reporting -----

    pub(crate) fn report(&mut self, kind: ProblemKind, at: &Path<'_>, message: impl Into<String>) {
        if self.problems.len() >= self.max_problems {
            // Counted, not recorded: the pointer is not even built.
            self.report_at(kind, String::new(), message);
        } else {
            self.report_at(kind, at.pointer(), message);
        }
    }

    /// Like [`Checker::report`], with a pointer already made.
    pub(crate) fn report_at(
        &mut self,
        kind: ProblemKind,
        pointer: String,
        message: impl Into<String>,
    ) {
        if kind.severity() == Severity::Error {
            self.errors += 1;
        }
        if self.problems.len() >= self.max_problems {
            self.dropped = true;
            return;
        }
        self.problems
            .push(Problem::new(kind, pointer, message.into()));
    }

    pub(crate) fn wrong_type(&mut self, at: &Path<'_>, expected: &str, found: &Value) {
        let found = json_type(found);
        self.report(
            ProblemKind::WrongType,
            at,
            format!("expected {expected}, found {found}"),
        );
    }

    /// Errors reported so far (a subtree is clean when this did not change while checking it).
    pub(crate) fn error_count(&self) -> usize {
        self.errors
    }

    // ----- typed term access: each reports a wrong type and returns None -----

    /// `term` of `object` as `read` takes it; a value `read` refuses is reported as not
    /// `expected` (`"a string"`, ...).
    fn typed<T>(
        &mut self,
        object: &'v Map<String, Value>,
        term: &str,
        at: &Path<'_>,
        expected: &str,
        read: fn(&'v Value) -> Option<T>,
    ) -> Option<T> {
        let value = object.get(term)?;
        let typed = read(value);
        if typed.is_none() {
            self.wrong_type(&at.key(term), &format!("`{term}` to be {expected}"), value);
        }
        typed
    }

    pub(crate) fn string(
        &mut self,
        object: &'v Map<String, Value>,
        term: &str,
        at: &Path<'_>,
    ) -> Option<&'v str> {
        self.typed(object, term, at, "a string", Value::as_str)
    }

    pub(crate) fn required_string(
        &mut self,
        object: &'v Map<String, Value>,
        term: &str,
        at: &Path<'_>,
    ) -> Option<&'v str> {
        if !object.contains_key(term) {
            self.report(
                ProblemKind::MissingTerm,
                &at.key(term),
                format!("`{term}` is required"),
            );
            return None;
        }
        self.string(object, term, at)
    }

    pub(crate) fn boolean(
        &mut self,
        object: &'v Map<String, Value>,
        term: &str,
        at: &Path<'_>,
    ) -> Option<bool> {
        self.typed(object, term, at, "true or false", Value::as_bool)
    }

    pub(crate) fn object(
        &mut self,
        object: &'v Map<String, Value>,
        term: &str,
        at: &Path<'_>,
    ) -> Option<&'v Map<String, Value>> {
        self.typed(object, term, at, "an object", Value::as_object)
    }

    pub(crate) fn array(
        &mut self,
        object: &'v Map<String, Value>,
        term: &str,
        at: &Path<'_>,
    ) -> Option<&'v Vec<Value>> {
        self.typed(object, term, at, "an array", Value::as_array)
    }

    /// A term that is a string or an array of strings (`scopes`, `@type`, `hreflang`).
    pub(crate) fn strings(
        &mut self,
        object: &'v Map<String, Value>,
        term: &str,
        at: &Path<'_>,
    ) -> Vec<&'v str> {
        let Some(value) = object.get(term) else {
            return Vec::new();
        };
        let at = at.key(term);
        match value {
            Value::String(text) => vec![text.as_str()],
            Value::Array(items) => {
                let mut strings = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    match item {
                        Value::String(text) => strings.push(text.as_str()),
                        other => self.wrong_type(
                            &at.index(i),
                            &format!("the items of `{term}` to be strings"),
                            other,
                        ),
                    }
                }
                strings
            }
            other => {
                self.wrong_type(
                    &at,
                    &format!("`{term}` to be a string or an array of strings"),
                    other,
                );
                Vec::new()
            }
        }
    }

    /// `titles` / `descriptions`: strings by BCP 47 language tag.
    pub(crate) fn multi_language(
        &mut self,
        object: &'v Map<String, Value>,
        term: &str,
        at: &Path<'_>,
    ) {
        let Some(texts) = self.object(object, term, at) else {
            return;
        };
        let at = at.key(term);
        for (tag, text) in texts {
            let at = at.key(tag);
            if !formats::is_language_tag(tag) {
                self.report(
                    ProblemKind::InvalidValue,
                    &at,
                    format!("`{tag}` is not a BCP 47 language tag (such as en, de-CH)"),
                );
            }
            if !text.is_string() {
                self.wrong_type(&at, "a string", text);
            }
        }
    }

    /// A term holding a URI reference (absolute, or relative to the document).
    pub(crate) fn uri_reference_term(
        &mut self,
        object: &'v Map<String, Value>,
        term: &str,
        at: &Path<'_>,
    ) {
        if let Some(uri) = self.string(object, term, at) {
            if let Err(why) = formats::uri_reference(uri) {
                self.report(
                    ProblemKind::InvalidUri,
                    &at.key(term),
                    format!("`{term}` {why}"),
                );
            }
        }
    }

    /// Checks an `href` and resolves it against `base`.
    pub(crate) fn href(&mut self, href: &str, at: &Path<'_>) {
        match formats::resolve_href(href, self.base.as_ref()) {
            Ok(formats::Href::Resolved) => {}
            Ok(formats::Href::Relative) => self.report(
                ProblemKind::RelativeHrefWithoutBase,
                at,
                format!("`{href}` is relative and there is no `base`; it resolves against the document's own URL, which a peer may not know"),
            ),
            Err(why) => self.report(ProblemKind::InvalidUri, at, format!("href `{href}` {why}")),
        }
    }

    pub(crate) fn max_depth(&self) -> usize {
        self.max_depth
    }
}
