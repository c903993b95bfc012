//! Writing descriptions in Rust. [`ThingBuilder::build`] runs the validator, so a builder
//! only ever produces valid descriptions; anything wrong (a malformed input schema, an
//! undefined security name) comes back as the same problems a file would get.

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::model::{
    Form, InteractionMode, LmosMetadata, LmosVendor, MetaProtocol, Operation, SecurityScheme,
    StreamDescription, Thing,
};
use crate::problem::{Problem, ProblemKind, Report};
use crate::vocab::{
    CONCORD_ACTION_LEASE, CONCORD_MODE, CONCORD_NAMESPACE, CONCORD_PREFIX, CONCORD_STREAM,
    LMOS_AGENT, LMOS_NAMESPACE, LMOS_PREFIX, LMOS_TOOL, TD_1_0_CONTEXT, TD_1_1_CONTEXT,
};
use crate::{read_thing, validate, InvalidDescription, Validator};

/// Builds an agent (or tool) description.
///
/// Without any [`ThingBuilder::security`] call the description is open (`nosec`).
///
/// ```
/// use concord_describe::{EventBuilder, PropertyBuilder, SecurityScheme, ThingBuilder};
/// use serde_json::json;
///
/// let thing = ThingBuilder::agent("Thermostat")
///     .description("Keeps the room at the temperature you ask for.")
///     .vendor("Example AG", "https://example.com")
///     .base("https://thermostat.example.com/")
///     .security("bearer_sc", SecurityScheme::bearer())
///     .property("target", PropertyBuilder::new("properties/target", json!({"type": "number", "unit": "celsius"})))
///     .event("overheating", EventBuilder::new("events/overheating").data(json!({"type": "number"})))
///     .build()?;
/// assert_eq!(thing.security.as_slice(), ["bearer_sc"]);
/// # Ok::<(), concord_describe::InvalidDescription>(())
/// ```
#[derive(Clone, Debug)]
pub struct ThingBuilder {
    document: Map<String, Value>,
    security_definitions: Map<String, Value>,
    security: Vec<String>,
    problems: Vec<Problem>,
}

impl ThingBuilder {
    /// A description of an LMOS agent (`@type: lmos:Agent`).
    pub fn agent(title: impl Into<String>) -> Self {
        Self::new(LMOS_AGENT, title.into())
    }

    /// A description of an LMOS tool (`@type: lmos:Tool`).
    pub fn tool(title: impl Into<String>) -> Self {
        Self::new(LMOS_TOOL, title.into())
    }

    fn new(kind: &str, title: String) -> Self {
        let mut document = Map::new();
        document.insert(
            "@context".into(),
            json!([TD_1_0_CONTEXT, TD_1_1_CONTEXT, { LMOS_PREFIX: LMOS_NAMESPACE }]),
        );
        document.insert("@type".into(), Value::from(kind));
        document.insert("title".into(), Value::from(title));
        Self {
            document,
            security_definitions: Map::new(),
            security: Vec::new(),
            problems: Vec::new(),
        }
    }

    /// Adds `kind` to the description's `@type`, after the agent's or tool's own
    /// (`ThingDirectory` for a WoT Discovery directory, with [`ThingBuilder::context`]
    /// naming the vocabulary that defines it). A kind already there is not repeated.
    ///
    /// ```
    /// use concord_describe::ThingBuilder;
    ///
    /// let thing = ThingBuilder::agent("Directory")
    ///     .context("https://www.w3.org/2022/wot/discovery")
    ///     .also_type("ThingDirectory")
    ///     .build()?;
    /// let td = serde_json::to_value(&thing).unwrap();
    /// assert_eq!(td["@type"], serde_json::json!(["lmos:Agent", "ThingDirectory"]));
    /// let context = td["@context"].as_array().unwrap();
    /// assert_eq!(context.last().unwrap(), "https://www.w3.org/2022/wot/discovery");
    /// # Ok::<(), concord_describe::InvalidDescription>(())
    /// ```
    pub fn also_type(mut self, kind: impl Into<String>) -> Self {
        let kind = Value::from(kind.into());
        let mut types = match self.document.remove("@type") {
            Some(Value::Array(types)) => types,
            Some(one) => vec![one],
            None => Vec::new(),
        };
        if !types.contains(&kind) {
            types.push(kind);
        }
        self.document.insert("@type".into(), Value::Array(types));
        self
    }

    /// Adds the context URI `uri` to `@context`, after the TD context and the prefixes
    /// (a vocabulary the description's terms or `@type` come from). A URI already there
    /// is not repeated; one that is not an absolute URI fails [`ThingBuilder::build`].
    pub fn context(mut self, uri: impl Into<String>) -> Self {
        let uri = Value::from(uri.into());
        if let Some(Value::Array(context)) = self.document.get_mut("@context") {
            if !context.contains(&uri) {
                context.push(uri);
            }
        }
        self
    }

    /// The identifier (a URI such as `urn:uuid:...`).
    pub fn id(self, id: impl Into<String>) -> Self {
        self.term("id", id.into())
    }

    /// What the agent does, for people and for LLMs choosing an agent.
    pub fn description(self, description: impl Into<String>) -> Self {
        self.term("description", description.into())
    }

    /// The version of this description (`version.instance`).
    pub fn version(self, instance: impl Into<String>) -> Self {
        self.term("version", json!({ "instance": instance.into() }))
    }

    /// The base URI relative `href`s resolve against.
    pub fn base(self, base: impl Into<String>) -> Self {
        self.term("base", base.into())
    }

    /// The vendor (`lmos:metadata` / `lmos:vendor`).
    pub fn vendor(self, name: impl Into<String>, url: impl Into<String>) -> Self {
        let metadata = LmosMetadata {
            vendor: Some(LmosVendor {
                name: Some(name.into()),
                url: Some(url.into()),
                ..LmosVendor::default()
            }),
            ..LmosMetadata::default()
        };
        self.serialized("lmos:metadata", &metadata)
    }

    /// Defines a security scheme under `name` without applying it by default (forms name
    /// it: [`ActionBuilder::security`]).
    pub fn security_definition(mut self, name: impl Into<String>, scheme: SecurityScheme) -> Self {
        let scheme = serde_json::to_value(scheme).unwrap_or(Value::Null);
        self.security_definitions.insert(name.into(), scheme);
        self
    }

    /// Defines a security scheme under `name` and makes it apply by default.
    pub fn security(mut self, name: impl Into<String>, scheme: SecurityScheme) -> Self {
        let name = name.into();
        let scheme = to_json(&scheme, &mut self.problems);
        self.security_definitions.insert(name.clone(), scheme);
        self.security.push(name);
        self
    }

    /// Adds a property.
    pub fn property(mut self, name: impl Into<String>, property: PropertyBuilder) -> Self {
        let name = name.into();
        let mut terms = match property.schema {
            Value::Object(schema) => schema,
            other => {
                self.problems.push(Problem::new(
                    ProblemKind::WrongType,
                    format!("/properties/{}", crate::pointer::escape(&name)),
                    format!(
                        "a property's schema must be a JSON object, found {}",
                        concord_proto::json_type(&other)
                    ),
                ));
                Map::new()
            }
        };
        terms.extend(property.terms);
        self.affordance("properties", name, terms)
    }

    /// Adds an action (and declares the `concord` prefix when it carries Concord's terms).
    pub fn action(mut self, name: impl Into<String>, action: ActionBuilder) -> Self {
        if action.terms.keys().any(|term| term.starts_with("concord:")) {
            self.declare_concord_prefix();
        }
        self.affordance("actions", name.into(), action.terms)
    }

    /// Adds an event.
    pub fn event(self, name: impl Into<String>, event: EventBuilder) -> Self {
        self.affordance("events", name.into(), event.terms)
    }

    /// Adds a Thing-level form (`readallproperties`, ...: its `op` says which), after
    /// those added before.
    pub fn form(mut self, form: Form) -> Self {
        let form = to_json(&form, &mut self.problems);
        match self.document.get_mut("forms") {
            Some(Value::Array(forms)) => forms.push(form),
            _ => {
                self.document
                    .insert("forms".into(), Value::Array(vec![form]));
            }
        }
        self
    }

    /// Sets Concord's extension (endpoint, versions, capabilities, consensus protocols) and
    /// declares the `concord` prefix.
    pub fn meta_protocol(mut self, meta_protocol: MetaProtocol) -> Self {
        self.declare_concord_prefix();
        self.serialized("concord:metaProtocol", &meta_protocol)
    }

    fn declare_concord_prefix(&mut self) {
        if let Some(Value::Array(context)) = self.document.get_mut("@context") {
            // The prefixes' object, after the TD context URIs.
            if let Some(Value::Object(prefixes)) =
                context.iter_mut().find(|entry| entry.is_object())
            {
                prefixes.insert(CONCORD_PREFIX.into(), Value::from(CONCORD_NAMESPACE));
            }
        }
    }

    /// Validates and returns the description, or every problem found.
    pub fn build(mut self) -> Result<Thing, InvalidDescription> {
        if self.security.is_empty() {
            self.security_definitions
                .insert("nosec_sc".into(), json!({"scheme": "nosec"}));
            self.security.push("nosec_sc".into());
        }
        self.document.insert(
            "securityDefinitions".into(),
            Value::Object(self.security_definitions),
        );
        let security = match self.security.as_slice() {
            [one] => Value::from(one.as_str()),
            many => Value::from(many.to_vec()),
        };
        self.document.insert("security".into(), security);
        let document = Value::Object(self.document);
        let limits = Validator::default();
        let mut problems = self.problems;
        problems.extend(validate::check(
            &document,
            limits.max_depth,
            limits.max_problems,
        ));
        let report = Report::from_problems(problems);
        if !report.is_valid() {
            return Err(InvalidDescription { report });
        }
        read_thing(document, report).map(|validated| validated.thing)
    }

    fn term(mut self, term: &str, value: impl Into<Value>) -> Self {
        self.document.insert(term.into(), value.into());
        self
    }

    fn serialized(mut self, term: &str, value: &impl Serialize) -> Self {
        let value = to_json(value, &mut self.problems);
        self.term(term, value)
    }

    fn affordance(mut self, kind: &str, name: String, terms: Map<String, Value>) -> Self {
        let affordances = self
            .document
            .entry(kind)
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(affordances) = affordances {
            affordances.insert(name, Value::Object(terms));
        }
        self
    }
}

fn to_json(value: &impl Serialize, problems: &mut Vec<Problem>) -> Value {
    serde_json::to_value(value).unwrap_or_else(|error| {
        problems.push(Problem::new(
            ProblemKind::WrongType,
            String::new(),
            format!("cannot be written as JSON: {error}"),
        ));
        Value::Null
    })
}

/// Shared parts of the affordance builders.
fn affordance_terms(href: String, operation: Operation) -> Map<String, Value> {
    let mut form = Form::new(href);
    form.op = Some(crate::model::OneOrMany::One(operation));
    let mut terms = Map::new();
    terms.insert(
        "forms".into(),
        Value::Array(vec![serde_json::to_value(form).unwrap_or(Value::Null)]),
    );
    terms
}

/// Affordance terms holding exactly `forms`.
fn forms_terms(forms: impl IntoIterator<Item = Form>) -> Map<String, Value> {
    let mut terms = Map::new();
    terms.insert("forms".into(), Value::Array(Vec::new()));
    for form in forms {
        add_form(&mut terms, form);
    }
    terms
}

fn add_form(terms: &mut Map<String, Value>, form: Form) {
    if let Some(Value::Array(forms)) = terms.get_mut("forms") {
        forms.push(serde_json::to_value(form).unwrap_or(Value::Null));
    }
}

/// Builds an action: what the agent does, with the JSON Schemas of its input and output.
#[derive(Clone, Debug)]
pub struct ActionBuilder {
    terms: Map<String, Value>,
}

impl ActionBuilder {
    /// An action invoked at `href` (absolute, or relative to the description's `base`).
    pub fn new(href: impl Into<String>) -> Self {
        Self {
            terms: affordance_terms(href.into(), Operation::InvokeAction),
        }
    }

    /// An action reached through `forms` alone, in this order (each protocol binding's
    /// forms, say): no default form. At least one is needed; [`ThingBuilder::build`]
    /// refuses an action without forms.
    pub fn with_forms(forms: impl IntoIterator<Item = Form>) -> Self {
        Self {
            terms: forms_terms(forms),
        }
    }

    /// Human-readable title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.terms.insert("title".into(), Value::from(title.into()));
        self
    }

    /// What the action does.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.terms
            .insert("description".into(), Value::from(description.into()));
        self
    }

    /// JSON Schema of the input.
    pub fn input(mut self, schema: Value) -> Self {
        self.terms.insert("input".into(), schema);
        self
    }

    /// JSON Schema of the output.
    pub fn output(mut self, schema: Value) -> Self {
        self.terms.insert("output".into(), schema);
        self
    }

    /// Whether the action changes nothing.
    pub fn safe(mut self, safe: bool) -> Self {
        self.terms.insert("safe".into(), Value::from(safe));
        self
    }

    /// Whether invoking it twice equals invoking it once.
    pub fn idempotent(mut self, idempotent: bool) -> Self {
        self.terms
            .insert("idempotent".into(), Value::from(idempotent));
        self
    }

    /// Whether the result comes in the response to the invocation.
    pub fn synchronous(mut self, synchronous: bool) -> Self {
        self.terms
            .insert("synchronous".into(), Value::from(synchronous));
        self
    }

    /// The URI template variables its forms' `href`s use (`{?offset,limit}`, `{id}`),
    /// each with its data schema: a JSON object of schemas.
    pub fn uri_variables(mut self, variables: Value) -> Self {
        self.terms.insert("uriVariables".into(), variables);
        self
    }

    /// Adds another form (another protocol or operation).
    pub fn form(mut self, form: Form) -> Self {
        add_form(&mut self.terms, form);
        self
    }

    /// How the action answers (`concord:mode`; absent means request-reply). A
    /// [`InteractionMode::Progress`] action should also say `synchronous(false)` and offer
    /// `queryaction`/`cancelaction` forms; a [`InteractionMode::Stream`] one needs
    /// [`ActionBuilder::stream`].
    pub fn mode(mut self, mode: InteractionMode) -> Self {
        self.terms
            .insert(CONCORD_MODE.into(), Value::from(mode.name()));
        self
    }

    /// How many seconds an unfinished run of a progress action outlives its caller's
    /// connection (`concord:actionLease`: 1 to [`MAX_ACTION_LEASE_SECS`](crate::MAX_ACTION_LEASE_SECS);
    /// the validator refuses others).
    pub fn action_lease(mut self, seconds: u64) -> Self {
        self.terms
            .insert(CONCORD_ACTION_LEASE.into(), Value::from(seconds));
        self
    }

    /// What a stream action's streams carry (`concord:stream`).
    pub fn stream(mut self, stream: StreamDescription) -> Self {
        let stream = serde_json::to_value(stream).unwrap_or(Value::Null);
        self.terms.insert(CONCORD_STREAM.into(), stream);
        self
    }

    /// The security schemes every form of the action requires (names defined with
    /// [`ThingBuilder::security_definition`] or [`ThingBuilder::security`]), in place of the
    /// description's default. Forms added later are not covered.
    pub fn security(mut self, names: &[&str]) -> Self {
        form_security(&mut self.terms, names);
        self
    }
}

/// Sets `security` on every form in `terms`.
fn form_security(terms: &mut Map<String, Value>, names: &[&str]) {
    let value = match names {
        [one] => Value::from(*one),
        many => Value::from(many.to_vec()),
    };
    if let Some(Value::Array(forms)) = terms.get_mut("forms") {
        for form in forms {
            if let Value::Object(form) = form {
                form.insert("security".into(), value.clone());
            }
        }
    }
}

/// Builds an event the agent notifies subscribers of.
#[derive(Clone, Debug)]
pub struct EventBuilder {
    terms: Map<String, Value>,
}

impl EventBuilder {
    /// An event subscribed to at `href`.
    pub fn new(href: impl Into<String>) -> Self {
        Self {
            terms: affordance_terms(href.into(), Operation::SubscribeEvent),
        }
    }

    /// An event reached through `forms` alone, in this order (as
    /// [`ActionBuilder::with_forms`]).
    pub fn with_forms(forms: impl IntoIterator<Item = Form>) -> Self {
        Self {
            terms: forms_terms(forms),
        }
    }

    /// What the event means.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.terms
            .insert("description".into(), Value::from(description.into()));
        self
    }

    /// JSON Schema of the event's data.
    pub fn data(mut self, schema: Value) -> Self {
        self.terms.insert("data".into(), schema);
        self
    }

    /// The URI template variables its forms' `href`s use (`{?offset,limit}`, `{id}`),
    /// each with its data schema: a JSON object of schemas.
    pub fn uri_variables(mut self, variables: Value) -> Self {
        self.terms.insert("uriVariables".into(), variables);
        self
    }

    /// Adds another form.
    pub fn form(mut self, form: Form) -> Self {
        add_form(&mut self.terms, form);
        self
    }

    /// The security schemes every form of the event requires, in place of the
    /// description's default (as [`ActionBuilder::security`]).
    pub fn security(mut self, names: &[&str]) -> Self {
        form_security(&mut self.terms, names);
        self
    }
}

/// Builds a property: agent state, whose schema is the property itself.
#[derive(Clone, Debug)]
pub struct PropertyBuilder {
    schema: Value,
    terms: Map<String, Value>,
}

impl PropertyBuilder {
    /// A property read at `href`, with the JSON Schema of its value.
    pub fn new(href: impl Into<String>, schema: Value) -> Self {
        Self {
            schema,
            terms: affordance_terms(href.into(), Operation::ReadProperty),
        }
    }

    /// A property reached through `forms` alone, in this order (as
    /// [`ActionBuilder::with_forms`]), with the JSON Schema of its value.
    pub fn with_forms(forms: impl IntoIterator<Item = Form>, schema: Value) -> Self {
        Self {
            schema,
            terms: forms_terms(forms),
        }
    }

    /// The value cannot be written.
    pub fn read_only(mut self) -> Self {
        self.terms.insert("readOnly".into(), Value::Bool(true));
        self
    }

    /// Whether the property can be observed.
    pub fn observable(mut self, observable: bool) -> Self {
        self.terms
            .insert("observable".into(), Value::from(observable));
        self
    }

    /// The URI template variables its forms' `href`s use (`{?offset,limit}`, `{id}`),
    /// each with its data schema: a JSON object of schemas.
    pub fn uri_variables(mut self, variables: Value) -> Self {
        self.terms.insert("uriVariables".into(), variables);
        self
    }

    /// Adds another form (write, observe...).
    pub fn form(mut self, form: Form) -> Self {
        add_form(&mut self.terms, form);
        self
    }

    /// The security schemes every form of the property requires, in place of the
    /// description's default (as [`ActionBuilder::security`]).
    pub fn security(mut self, names: &[&str]) -> Self {
        form_security(&mut self.terms, names);
        self
    }
}
