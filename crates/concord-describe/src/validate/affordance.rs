//! Properties, actions, events, and the forms of each (and of the Thing).

use serde_json::{Map, Value};

use super::{formats, Checker};
use crate::model::{FormContext, Operation};
use crate::pointer::Path;
use crate::problem::ProblemKind;

impl<'v> Checker<'v> {
    pub(super) fn affordances(&mut self, thing: &'v Map<String, Value>, at: &Path<'_>) {
        for (term, context) in [
            ("properties", FormContext::Property),
            ("actions", FormContext::Action),
            ("events", FormContext::Event),
        ] {
            let Some(affordances) = self.object(thing, term, at) else {
                continue;
            };
            let at = at.key(term);
            for (name, affordance) in affordances {
                let at = at.key(name);
                let Value::Object(terms) = affordance else {
                    let what = match context {
                        FormContext::Property => "a property affordance (object)",
                        FormContext::Action => "an action affordance (object)",
                        _ => "an event affordance (object)",
                    };
                    self.wrong_type(&at, what, affordance);
                    continue;
                };
                match context {
                    FormContext::Property => self.property(terms, &at),
                    FormContext::Action => self.action(terms, &at),
                    _ => self.event(terms, &at),
                }
            }
        }
    }

    fn property(&mut self, terms: &'v Map<String, Value>, at: &Path<'_>) {
        let before = self.error_count();
        // A property is its own data schema.
        self.schema_terms(terms, at, 0);
        let schema_clean = self.error_count() == before;
        let observable = self.boolean(terms, "observable", at);
        self.schema_map(terms, "uriVariables", at, false);
        let operations = self.forms(terms, at, FormContext::Property);
        if schema_clean {
            if let Some(schema) = terms_without(terms, &["forms", "uriVariables", "observable"]) {
                self.meta_schema(&schema, at);
            }
        }
        self.read_write_consistency(terms, observable, &operations, at);
    }

    fn action(&mut self, terms: &'v Map<String, Value>, at: &Path<'_>) {
        self.interaction_terms(terms, at);
        self.schema_term(terms, "input", at);
        self.schema_term(terms, "output", at);
        for term in ["safe", "idempotent", "synchronous"] {
            self.boolean(terms, term, at);
        }
        self.schema_map(terms, "uriVariables", at, false);
        self.forms(terms, at, FormContext::Action);
        self.action_extension(terms, at);
    }

    fn event(&mut self, terms: &'v Map<String, Value>, at: &Path<'_>) {
        self.interaction_terms(terms, at);
        for term in ["subscription", "data", "dataResponse", "cancellation"] {
            self.schema_term(terms, term, at);
        }
        self.schema_map(terms, "uriVariables", at, false);
        self.forms(terms, at, FormContext::Event);
    }

    fn interaction_terms(&mut self, terms: &'v Map<String, Value>, at: &Path<'_>) {
        self.type_declaration(terms, at);
        self.string(terms, "title", at);
        self.multi_language(terms, "titles", at);
        self.string(terms, "description", at);
        self.multi_language(terms, "descriptions", at);
    }

    /// An affordance's `forms` (required, at least one). Returns the operations the forms
    /// name, each with the index of its form.
    fn forms(
        &mut self,
        terms: &'v Map<String, Value>,
        at: &Path<'_>,
        context: FormContext,
    ) -> Vec<(usize, Option<Vec<Operation>>)> {
        let Some(forms) = terms.get("forms") else {
            self.report(
                ProblemKind::MissingTerm,
                &at.key("forms"),
                "`forms` is required: at least one form saying how to reach this affordance",
            );
            return Vec::new();
        };
        let at = at.key("forms");
        let Value::Array(forms) = forms else {
            self.wrong_type(&at, "`forms` to be an array of forms", forms);
            return Vec::new();
        };
        if forms.is_empty() {
            self.report(
                ProblemKind::Empty,
                &at,
                "`forms` must hold at least one form",
            );
        }
        forms
            .iter()
            .enumerate()
            .map(|(i, form)| (i, self.form(form, &at.index(i), context)))
            .collect()
    }

    /// The Thing-level `forms`: optional, but each needs an `op`.
    pub(super) fn thing_forms(&mut self, thing: &'v Map<String, Value>, at: &Path<'_>) {
        let Some(forms) = self.array(thing, "forms", at) else {
            return;
        };
        let at = at.key("forms");
        if forms.is_empty() {
            self.report(
                ProblemKind::Empty,
                &at,
                "`forms` must hold at least one form when present",
            );
        }
        for (i, form) in forms.iter().enumerate() {
            let at = at.index(i);
            if let Value::Object(terms) = form {
                if !terms.contains_key("op") {
                    self.report(
                        ProblemKind::MissingTerm,
                        &at.key("op"),
                        "a Thing-level form needs `op` (readallproperties, subscribeallevents, ...)",
                    );
                }
            }
            self.form(form, &at, FormContext::Thing);
        }
    }

    /// One form; returns its operations when `op` is well formed (None when absent).
    fn form(
        &mut self,
        form: &'v Value,
        at: &Path<'_>,
        context: FormContext,
    ) -> Option<Vec<Operation>> {
        let Value::Object(terms) = form else {
            self.wrong_type(at, "a form (object)", form);
            return None;
        };
        if let Some(href) = self.required_string(terms, "href", at) {
            self.href(href, &at.key("href"));
        }
        let operations = self.operations(terms, at, context);
        self.http_form(terms, at, operations.as_deref());
        for term in ["contentType", "contentCoding", "subprotocol"] {
            self.string(terms, term, at);
        }
        self.media_type(terms, at);
        if let Some(security) = terms.get("security") {
            self.security_references(security, &at.key("security"));
        }
        self.strings(terms, "scopes", at);
        if let Some(response) = self.object(terms, "response", at) {
            let at = at.key("response");
            if self.string(response, "contentType", &at).is_some() {
                self.media_type(response, &at);
            }
        }
        self.additional_responses(terms, at);
        operations
    }

    fn operations(
        &mut self,
        terms: &'v Map<String, Value>,
        at: &Path<'_>,
        context: FormContext,
    ) -> Option<Vec<Operation>> {
        let op = terms.get("op")?;
        let at = at.key("op");
        let names: Vec<(Option<usize>, &Value)> = match op {
            Value::Array(names) if names.is_empty() => {
                self.report(
                    ProblemKind::Empty,
                    &at,
                    "`op` must name at least one operation when it is an array",
                );
                return None;
            }
            Value::Array(names) => names
                .iter()
                .enumerate()
                .map(|(i, n)| (Some(i), n))
                .collect(),
            name => vec![(None, name)],
        };
        let mut operations = Vec::new();
        for (index, name) in names {
            let at = match index {
                Some(i) => at.index(i),
                None => at,
            };
            let Value::String(name) = name else {
                self.wrong_type(&at, "an operation name (string)", name);
                continue;
            };
            let allowed = context.operations();
            match Operation::from_name(name) {
                Some(operation) if allowed.contains(&operation) => operations.push(operation),
                found => {
                    let hint = match (found, Operation::from_name(&name.to_lowercase())) {
                        (Some(_), _) => " (it belongs to another kind of affordance)".to_owned(),
                        (None, Some(lower)) => {
                            format!(" (operation names are lowercase: `{lower}`)")
                        }
                        (None, None) => String::new(),
                    };
                    let names: Vec<&str> = allowed.iter().map(|op| op.name()).collect();
                    let place = match context {
                        FormContext::Property => "a property form",
                        FormContext::Action => "an action form",
                        FormContext::Event => "an event form",
                        FormContext::Thing => "a Thing-level form",
                    };
                    self.report(
                        ProblemKind::InvalidOperation,
                        &at,
                        format!(
                            "`{name}` is not an operation of {place}{hint}; expected one of {}",
                            names.join(", ")
                        ),
                    );
                }
            }
        }
        Some(operations)
    }

    fn media_type(&mut self, terms: &'v Map<String, Value>, at: &Path<'_>) {
        if let Some(Value::String(media_type)) = terms.get("contentType") {
            if !formats::is_media_type(media_type) {
                self.report(
                    ProblemKind::InvalidValue,
                    &at.key("contentType"),
                    format!("`{media_type}` is not a media type (type/subtype, such as application/json)"),
                );
            }
        }
    }

    fn additional_responses(&mut self, terms: &'v Map<String, Value>, at: &Path<'_>) {
        let Some(responses) = self.array(terms, "additionalResponses", at) else {
            return;
        };
        let at = at.key("additionalResponses");
        for (i, response) in responses.iter().enumerate() {
            let at = at.index(i);
            let Value::Object(response) = response else {
                self.wrong_type(&at, "an additional response (object)", response);
                continue;
            };
            let success = self.boolean(response, "success", &at);
            let content_type = self.string(response, "contentType", &at);
            if content_type.is_some() {
                self.media_type(response, &at);
            }
            if let Some(schema) = self.string(response, "schema", &at) {
                if !self.schema_names.contains(schema) {
                    self.report(
                        ProblemKind::UndefinedSchema,
                        &at.key("schema"),
                        format!("`{schema}` is not defined in `schemaDefinitions`"),
                    );
                }
            }
            let missing: Vec<&str> = [
                (
                    success.is_none() && !response.contains_key("success"),
                    "`success` (defaults to false: an error response)",
                ),
                (
                    content_type.is_none() && !response.contains_key("contentType"),
                    "`contentType` (defaults to the form's)",
                ),
            ]
            .into_iter()
            .filter_map(|(missing, term)| missing.then_some(term))
            .collect();
            if !missing.is_empty() {
                self.report(
                    ProblemKind::IncompleteAdditionalResponse,
                    &at,
                    format!(
                        "this additional response leaves {} to defaults",
                        missing.join(" and ")
                    ),
                );
            }
        }
    }

    /// `readOnly`, `writeOnly` and `observable` must agree with the operations offered.
    fn read_write_consistency(
        &mut self,
        terms: &'v Map<String, Value>,
        observable: Option<bool>,
        forms: &[(usize, Option<Vec<Operation>>)],
        at: &Path<'_>,
    ) {
        let read_only = terms.get("readOnly") == Some(&Value::Bool(true));
        let write_only = terms.get("writeOnly") == Some(&Value::Bool(true));
        if read_only && write_only {
            self.report(
                ProblemKind::ReadWriteConflict,
                at,
                "both `readOnly` and `writeOnly` are true",
            );
        }
        if write_only && observable == Some(true) {
            self.report(
                ProblemKind::ReadWriteConflict,
                at,
                "`writeOnly` and `observable` are both true",
            );
        }
        for (index, operations) in forms {
            let Some(operations) = operations else {
                continue;
            };
            let at = at.key("forms");
            let at = at.index(*index);
            if read_only && operations.contains(&Operation::WriteProperty) {
                self.report(
                    ProblemKind::ReadWriteConflict,
                    &at.key("op"),
                    "the property is `readOnly` but this form offers writeproperty",
                );
            }
            if write_only {
                for operation in [Operation::ReadProperty, Operation::ObserveProperty] {
                    if operations.contains(&operation) {
                        self.report(
                            ProblemKind::ReadWriteConflict,
                            &at.key("op"),
                            format!("the property is `writeOnly` but this form offers {operation}"),
                        );
                    }
                }
            }
        }
    }
}

/// A copy of `terms` without the interaction terms, leaving the data schema; None when
/// nothing is left to check.
fn terms_without(terms: &Map<String, Value>, interaction_terms: &[&str]) -> Option<Value> {
    let schema: Map<String, Value> = terms
        .iter()
        .filter(|(term, _)| !interaction_terms.contains(&term.as_str()))
        .map(|(term, value)| (term.clone(), value.clone()))
        .collect();
    (!schema.is_empty()).then_some(Value::Object(schema))
}
