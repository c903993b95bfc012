//! Data schemas: the TD terms, value types of `enum`/`const`/`default`, warnings about
//! underspecified schemas, and (when the TD terms are right) a JSON Schema draft-07
//! meta-schema check, so later stages can compile every schema an agent publishes.

use concord_proto::json_type;
use serde_json::{Map, Value};

use super::Checker;
use crate::model::DataType;
use crate::pointer::Path;
use crate::problem::ProblemKind;

impl<'v> Checker<'v> {
    /// A data schema that stands alone (action input, event data, a `schemaDefinitions` entry):
    /// checks its terms, then the JSON Schema meta-schema if they were right.
    pub(super) fn schema_root(&mut self, value: &'v Value, at: &Path<'_>) {
        let before = self.error_count();
        match value {
            Value::Object(terms) => self.schema_terms(terms, at, 0),
            other => {
                self.wrong_type(at, "a data schema (object)", other);
                return;
            }
        }
        if self.error_count() == before {
            self.meta_schema(value, at);
        }
    }

    /// A map of data schemas (`uriVariables`, `schemaDefinitions`).
    pub(super) fn schema_map(
        &mut self,
        object: &'v Map<String, Value>,
        term: &str,
        at: &Path<'_>,
        non_empty: bool,
    ) {
        let Some(schemas) = self.object(object, term, at) else {
            return;
        };
        let at = at.key(term);
        if non_empty && schemas.is_empty() {
            self.report(
                ProblemKind::Empty,
                &at,
                format!("`{term}` must define at least one schema when present"),
            );
        }
        for (name, schema) in schemas {
            self.schema_root(schema, &at.key(name));
        }
    }

    /// An optional data schema term (`input`, `output`, `data`, ...).
    pub(super) fn schema_term(
        &mut self,
        object: &'v Map<String, Value>,
        term: &str,
        at: &Path<'_>,
    ) {
        if let Some(schema) = object.get(term) {
            self.schema_root(schema, &at.key(term));
        }
    }

    /// The data schema terms of `terms`, which may also hold other terms (a property).
    pub(super) fn schema_terms(
        &mut self,
        terms: &'v Map<String, Value>,
        at: &Path<'_>,
        depth: usize,
    ) {
        if depth >= self.max_depth() {
            self.report(ProblemKind::TooDeep, at, "data schemas nest too deeply");
            return;
        }
        self.type_declaration(terms, at);
        self.string(terms, "title", at);
        self.multi_language(terms, "titles", at);
        self.string(terms, "description", at);
        self.multi_language(terms, "descriptions", at);
        self.boolean(terms, "readOnly", at);
        self.boolean(terms, "writeOnly", at);
        for term in ["unit", "format", "contentEncoding", "contentMediaType"] {
            self.string(terms, term, at);
        }
        let data_type = self.data_type(terms, at);
        self.enumeration(terms, data_type, at);
        for term in ["const", "default"] {
            if let (Some(value), Some(data_type)) = (terms.get(term), data_type) {
                self.value_of_type(value, data_type, &at.key(term), term);
            }
        }
        if terms.contains_key("enum") && terms.contains_key("const") {
            self.report(
                ProblemKind::EnumWithConst,
                &at.key("const"),
                "`enum` and `const` together: only the `const` value can ever be valid",
            );
        }
        for term in ["minItems", "maxItems", "minLength", "maxLength"] {
            self.count(terms, term, at);
        }
        for term in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
            if let Some(value) = terms.get(term) {
                if !value.is_number() {
                    self.wrong_type(&at.key(term), &format!("`{term}` to be a number"), value);
                }
            }
        }
        if let Some(value) = terms.get("multipleOf") {
            match value.as_f64() {
                Some(step) if step > 0.0 => {}
                Some(_) => self.report(
                    ProblemKind::InvalidValue,
                    &at.key("multipleOf"),
                    "`multipleOf` must be greater than 0",
                ),
                None => {
                    self.wrong_type(&at.key("multipleOf"), "`multipleOf` to be a number", value)
                }
            }
        }
        if let Some(required) = self.array(terms, "required", at) {
            let at = at.key("required");
            for (i, name) in required.iter().enumerate() {
                if !name.is_string() {
                    self.wrong_type(&at.index(i), "a member name (string)", name);
                }
            }
        }
        if let Some(schemas) = self.array(terms, "oneOf", at) {
            let at = at.key("oneOf");
            for (i, schema) in schemas.iter().enumerate() {
                self.nested_schema(schema, &at.index(i), depth);
            }
        }
        match terms.get("items") {
            Some(Value::Array(schemas)) => {
                let at = at.key("items");
                for (i, schema) in schemas.iter().enumerate() {
                    self.nested_schema(schema, &at.index(i), depth);
                }
            }
            Some(schema) => self.nested_schema(schema, &at.key("items"), depth),
            None if data_type == Some(DataType::Array) => self.report(
                ProblemKind::ArrayWithoutItems,
                at,
                "`type` is array but `items` is missing, so peers cannot know what the array holds",
            ),
            None => {}
        }
        match terms.get("properties") {
            Some(Value::Object(members)) => {
                let at = at.key("properties");
                for (name, schema) in members {
                    self.nested_schema(schema, &at.key(name), depth);
                }
            }
            Some(other) => self.wrong_type(
                &at.key("properties"),
                "`properties` to be an object of data schemas",
                other,
            ),
            None if data_type == Some(DataType::Object) => self.report(
                ProblemKind::ObjectWithoutProperties,
                at,
                "`type` is object but `properties` is missing, so peers cannot know its members",
            ),
            None => {}
        }
    }

    fn nested_schema(&mut self, schema: &'v Value, at: &Path<'_>, depth: usize) {
        match schema {
            Value::Object(terms) => self.schema_terms(terms, at, depth + 1),
            other => self.wrong_type(at, "a data schema (object)", other),
        }
    }

    fn data_type(&mut self, terms: &'v Map<String, Value>, at: &Path<'_>) -> Option<DataType> {
        let name = self.string(terms, "type", at)?;
        let data_type = DataType::from_name(name);
        if data_type.is_none() {
            self.report(
                ProblemKind::InvalidValue,
                &at.key("type"),
                format!("`{name}` is not a data schema type: expected boolean, integer, number, string, object, array or null"),
            );
        }
        data_type
    }

    fn enumeration(
        &mut self,
        terms: &'v Map<String, Value>,
        data_type: Option<DataType>,
        at: &Path<'_>,
    ) {
        let Some(values) = self.array(terms, "enum", at) else {
            return;
        };
        let at = at.key("enum");
        if values.is_empty() {
            self.report(
                ProblemKind::Empty,
                &at,
                "`enum` must list at least one value",
            );
        }
        let mut seen = std::collections::HashSet::new();
        for (i, value) in values.iter().enumerate() {
            let at = at.index(i);
            let mut key = String::new();
            canonical(value, &mut key);
            if !seen.insert(key) {
                self.report(
                    ProblemKind::DuplicateValue,
                    &at,
                    format!("{value} is already listed in `enum`"),
                );
            }
            if let Some(data_type) = data_type {
                self.value_of_type(value, data_type, &at, "enum");
            }
        }
    }

    fn value_of_type(&mut self, value: &Value, data_type: DataType, at: &Path<'_>, term: &str) {
        if !data_type.admits(value) {
            let found = json_type(value);
            self.report(
                ProblemKind::ValueTypeMismatch,
                at,
                format!(
                    "this `{term}` value is {found} but the schema's `type` is {}",
                    data_type.name()
                ),
            );
        }
    }

    /// A non-negative integer term.
    fn count(&mut self, terms: &'v Map<String, Value>, term: &str, at: &Path<'_>) {
        let Some(value) = terms.get(term) else {
            return;
        };
        match value.as_f64() {
            Some(n) if n >= 0.0 && n.fract() == 0.0 => {}
            Some(_) => self.report(
                ProblemKind::InvalidValue,
                &at.key(term),
                format!("`{term}` must be a non-negative integer"),
            ),
            None => self.wrong_type(
                &at.key(term),
                &format!("`{term}` to be a non-negative integer"),
                value,
            ),
        }
    }

    /// JSON Schema draft-07 meta-schema: the keywords TD does not define (`pattern`,
    /// `additionalProperties`, ...) must be well formed too.
    pub(super) fn meta_schema(&mut self, schema: &Value, at: &Path<'_>) {
        let validator = jsonschema::draft7::meta::validator();
        let base = at.pointer();
        for error in validator.iter_errors(schema) {
            let location = error.instance_path().as_str().to_owned();
            self.report_at(
                ProblemKind::InvalidSchema,
                format!("{base}{location}"),
                format!("not a valid JSON Schema (draft-07): {error}"),
            );
        }
    }
}

/// A key equal for values JSON Schema's `uniqueItems` treats as equal (`1` and `1.0`;
/// objects regardless of member order).
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Number(n) => {
            let integral = n
                .as_i64()
                .map(i128::from)
                .or(n.as_u64().map(i128::from))
                .or_else(|| {
                    n.as_f64()
                        .filter(|f| f.fract() == 0.0 && f.abs() < 1e18)
                        .map(|f| f as i128)
                });
            match integral {
                Some(i) => out.push_str(&format!("i{i}")),
                None => out.push_str(&format!("f{}", n.as_f64().unwrap_or_default().to_bits())),
            }
        }
        Value::Array(items) => {
            out.push('[');
            for item in items {
                canonical(item, out);
                out.push(',');
            }
            out.push(']');
        }
        Value::Object(members) => {
            let mut keys: Vec<&String> = members.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for key in keys {
                out.push_str(&serde_json::to_string(key).unwrap_or_default());
                out.push(':');
                if let Some(member) = members.get(key) {
                    canonical(member, out);
                }
                out.push(',');
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}
