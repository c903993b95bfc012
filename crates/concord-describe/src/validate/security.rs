//! `securityDefinitions`, every TD 1.1 scheme, and the names that must resolve to them.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::Checker;
use crate::model::{is_known_scheme, KNOWN_SCHEMES};
use crate::pointer::Path;
use crate::problem::ProblemKind;

const LOCATIONS: [&str; 5] = ["header", "query", "body", "cookie", "auto"];
const APIKEY_LOCATIONS: [&str; 6] = ["header", "query", "body", "cookie", "uri", "auto"];

impl<'v> Checker<'v> {
    pub(super) fn security_definitions(&mut self, thing: &'v Map<String, Value>, at: &Path<'_>) {
        let at = at.key("securityDefinitions");
        let definitions = match thing.get("securityDefinitions") {
            None => {
                self.report(
                    ProblemKind::MissingTerm,
                    &at,
                    "`securityDefinitions` is required (for an open agent: {\"nosec_sc\": {\"scheme\": \"nosec\"}})",
                );
                return;
            }
            Some(Value::Object(definitions)) => definitions,
            Some(other) => {
                self.wrong_type(&at, "`securityDefinitions` to be an object", other);
                return;
            }
        };
        if definitions.is_empty() {
            self.report(
                ProblemKind::Empty,
                &at,
                "`securityDefinitions` must define at least one scheme (for an open agent: {\"nosec_sc\": {\"scheme\": \"nosec\"}})",
            );
        }
        let mut combos = HashMap::new();
        for (name, scheme) in definitions {
            if let Some(references) = self.security_scheme(name, scheme, &at.key(name)) {
                combos.insert(name.as_str(), references);
            }
        }
        self.combo_cycles(&combos, &at);
    }

    /// Checks one scheme; returns the names a `combo` refers to.
    fn security_scheme(
        &mut self,
        name: &'v str,
        scheme: &'v Value,
        at: &Path<'_>,
    ) -> Option<Vec<&'v str>> {
        let Value::Object(terms) = scheme else {
            self.wrong_type(at, "a security scheme (object)", scheme);
            return None;
        };
        self.type_declaration(terms, at);
        self.string(terms, "description", at);
        self.multi_language(terms, "descriptions", at);
        self.uri_reference_term(terms, "proxy", at);
        let kind = self.required_string(terms, "scheme", at)?;
        if !is_known_scheme(kind) {
            // An extension scheme is named with a prefix from a context extension.
            if !kind.char_indices().any(|(i, c)| c == ':' && i > 0) {
                self.report(
                    ProblemKind::UnknownSecurityScheme,
                    &at.key("scheme"),
                    format!(
                        "unknown scheme `{kind}`: expected one of {}, or a prefixed extension scheme such as `ace:ACESecurityScheme`",
                        KNOWN_SCHEMES.join(", ")
                    ),
                );
            }
            return None;
        }
        match kind {
            "basic" => {
                self.one_of_strings(terms, "in", &LOCATIONS, at);
                self.string(terms, "name", at);
            }
            "digest" => {
                self.one_of_strings(terms, "qop", &["auth", "auth-int"], at);
                self.one_of_strings(terms, "in", &LOCATIONS, at);
                self.string(terms, "name", at);
            }
            "apikey" => {
                self.one_of_strings(terms, "in", &APIKEY_LOCATIONS, at);
                self.string(terms, "name", at);
            }
            "bearer" => {
                self.uri_reference_term(terms, "authorization", at);
                self.string(terms, "alg", at);
                self.string(terms, "format", at);
                self.one_of_strings(terms, "in", &LOCATIONS, at);
                self.string(terms, "name", at);
            }
            "psk" => {
                self.string(terms, "identity", at);
            }
            "oauth2" => {
                for term in ["authorization", "token", "refresh"] {
                    self.uri_reference_term(terms, term, at);
                }
                self.strings(terms, "scopes", at);
                self.string(terms, "flow", at);
            }
            "auto" if terms.contains_key("name") => {
                self.report(
                    ProblemKind::Conflict,
                    &at.key("name"),
                    "an `auto` scheme must not have `name`: the protocol decides it",
                );
            }
            "combo" => return self.combo(name, terms, at),
            _ => {}
        }
        None
    }

    fn combo(
        &mut self,
        name: &'v str,
        terms: &'v Map<String, Value>,
        at: &Path<'_>,
    ) -> Option<Vec<&'v str>> {
        let term = match (terms.contains_key("oneOf"), terms.contains_key("allOf")) {
            (true, true) => {
                self.report(
                    ProblemKind::Conflict,
                    &at.key("allOf"),
                    "a `combo` scheme has either `oneOf` or `allOf`, not both",
                );
                return None;
            }
            (false, false) => {
                self.report(
                    ProblemKind::MissingTerm,
                    &at.key("oneOf"),
                    "a `combo` scheme needs `oneOf` or `allOf`: the names of at least two schemes",
                );
                return None;
            }
            (true, false) => "oneOf",
            (false, true) => "allOf",
        };
        let names = self.array(terms, term, at)?;
        let at = at.key(term);
        if names.len() < 2 {
            self.report(
                ProblemKind::InvalidValue,
                &at,
                format!(
                    "`{term}` must name at least two schemes, found {}",
                    names.len()
                ),
            );
        }
        let mut seen = HashSet::new();
        let mut references = Vec::new();
        for (i, reference) in names.iter().enumerate() {
            let at = at.index(i);
            let Value::String(reference) = reference else {
                self.wrong_type(&at, "a security scheme name (string)", reference);
                continue;
            };
            if !seen.insert(reference.as_str()) {
                self.report(
                    ProblemKind::DuplicateValue,
                    &at,
                    format!("`{reference}` is named twice"),
                );
            }
            if reference == name {
                self.report(
                    ProblemKind::InvalidValue,
                    &at,
                    format!("combo `{name}` refers to itself"),
                );
            } else {
                self.defined_security(reference, &at);
                references.push(reference.as_str());
            }
        }
        Some(references)
    }

    /// Reports each `combo` that refers back to itself through other combos.
    fn combo_cycles(&mut self, combos: &HashMap<&'v str, Vec<&'v str>>, at: &Path<'_>) {
        let mut names: Vec<&str> = combos.keys().copied().collect();
        names.sort_unstable();
        for start in names {
            let mut stack: Vec<&str> = combos.get(start).cloned().unwrap_or_default();
            let mut visited = HashSet::new();
            while let Some(next) = stack.pop() {
                if next == start {
                    self.report(
                        ProblemKind::InvalidValue,
                        &at.key(start),
                        format!("combo `{start}` refers back to itself through other combos"),
                    );
                    break;
                }
                if visited.insert(next) {
                    stack.extend(combos.get(next).into_iter().flatten().copied());
                }
            }
        }
    }

    /// `security` of the Thing or of a form: a name or a non-empty array of names, each defined.
    pub(super) fn security_references(&mut self, security: &'v Value, at: &Path<'_>) {
        match security {
            Value::String(name) => self.defined_security(name, at),
            Value::Array(names) if names.is_empty() => self.report(
                ProblemKind::Empty,
                at,
                "`security` must name at least one security definition",
            ),
            Value::Array(names) => {
                for (i, name) in names.iter().enumerate() {
                    match name {
                        Value::String(name) => self.defined_security(name, &at.index(i)),
                        other => self.wrong_type(
                            &at.index(i),
                            "a security definition name (string)",
                            other,
                        ),
                    }
                }
            }
            other => self.wrong_type(at, "`security` to be a name or an array of names", other),
        }
    }

    fn defined_security(&mut self, name: &str, at: &Path<'_>) {
        if !self.security_names.contains(name) {
            self.report(
                ProblemKind::UndefinedSecurity,
                at,
                format!("`{name}` is not defined in `securityDefinitions`"),
            );
        }
    }

    /// A string term whose value must be one of `allowed`.
    fn one_of_strings(
        &mut self,
        terms: &'v Map<String, Value>,
        term: &str,
        allowed: &[&str],
        at: &Path<'_>,
    ) {
        if let Some(value) = self.string(terms, term, at) {
            if !allowed.contains(&value) {
                self.report(
                    ProblemKind::InvalidValue,
                    &at.key(term),
                    format!(
                        "`{term}` must be one of {}, found `{value}`",
                        allowed.join(", ")
                    ),
                );
            }
        }
    }
}
