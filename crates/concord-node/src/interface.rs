//! Interface sessions: one negotiated protocol for several affordances of a provider (its
//! actions with their modes, properties, events), spoken over the interaction layer of
//! `concord-interact`.
//!
//! The protocol is an interface document (`concord_interact::document`): it names the
//! layer by URI and lists the affordances with their payload schemas. There is no
//! generated handler: the layer is native code, and the payloads are checked here against
//! the document's schemas, compiled once per protocol ([`InterfaceCode`]).

use std::collections::HashMap;
use std::time::Duration;

use concord_interact::document::{self, DocumentLimits, Judgement};
use concord_interact::Interface;
use concord_negotiate::complexity::{check_complexity, SchemaLimits};
use concord_proto::Decision;
use serde_json::Value;

/// What the store keeps as "our handler" for an interface protocol: the layer is native
/// code, so the handler is this marker naming it. A stored handler for an interface
/// document that is anything else is refused.
pub(crate) const NATIVE_LAYER: &str =
    "// native: the Concord interaction layer, urn:concord:interaction:1\n";

/// The timeout an interface document states.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(15);

/// The key a requester's interface need is stored and offered under (the role of an
/// action name for 0-RTT): the affordance names, sorted, after `interface:`.
pub(crate) fn need_key(names: &[String]) -> String {
    let mut sorted: Vec<&str> = names.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    sorted.dedup();
    format!("interface:{}", sorted.join(","))
}

/// Which payload of an affordance a value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Payload {
    /// An action's `input`.
    Input,
    /// An action's `output`.
    Output,
    /// A property's value.
    Property,
    /// An event's `data`.
    Event,
}

impl Payload {
    fn what(self) -> &'static str {
        match self {
            Self::Input => "input of the action",
            Self::Output => "output of the action",
            Self::Property => "value of the property",
            Self::Event => "data of the event",
        }
    }
}

/// The payload schemas of an interface, compiled once.
pub(crate) struct PayloadSchemas {
    validators: HashMap<(Payload, String), jsonschema::Validator>,
}

impl std::fmt::Debug for PayloadSchemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PayloadSchemas")
            .field("schemas", &self.validators.len())
            .finish()
    }
}

impl PayloadSchemas {
    /// Compiles every payload schema of `interface`, each checked against `limits` first.
    pub(crate) fn compile(interface: &Interface, limits: &SchemaLimits) -> Result<Self, String> {
        let mut schemas: Vec<(Payload, &str, &Value)> = Vec::new();
        for (name, action) in &interface.actions {
            schemas.push((Payload::Input, name, &action.input));
            schemas.push((Payload::Output, name, &action.output));
        }
        for (name, property) in &interface.properties {
            schemas.push((Payload::Property, name, &property.schema));
        }
        for (name, event) in &interface.events {
            schemas.push((Payload::Event, name, &event.data));
        }
        let mut validators = HashMap::with_capacity(schemas.len());
        for (payload, name, schema) in schemas {
            check_complexity(schema, limits)
                .map_err(|error| format!("the {} `{name}`: {error}", payload.what()))?;
            let validator = jsonschema::validator_for(schema).map_err(|error| {
                format!(
                    "the schema of the {} `{name}` does not compile: {error}",
                    payload.what()
                )
            })?;
            validators.insert((payload, name.to_owned()), validator);
        }
        Ok(Self { validators })
    }

    /// Checks `value` as the `payload` of the affordance `name`: `Err` names the first
    /// problem and where.
    pub(crate) fn check(&self, payload: Payload, name: &str, value: &Value) -> Result<(), String> {
        let Some(validator) = self.validators.get(&(payload, name.to_owned())) else {
            return Err(format!("no {} `{name}` in this interface", payload.what()));
        };
        if validator.is_valid(value) {
            return Ok(());
        }
        let problem = validator
            .iter_errors(value)
            .next()
            .map(|error| {
                let pointer = error.instance_path().to_string();
                let pointer = if pointer.is_empty() {
                    "/".to_owned()
                } else {
                    pointer
                };
                format!("{pointer}: {error}")
            })
            .unwrap_or_else(|| "invalid".to_owned());
        Err(format!(
            "the {} `{name}` is invalid at {problem}",
            payload.what()
        ))
    }
}

/// Our code for an interface protocol: the document, the interface it states and its
/// payload schemas.
#[derive(Debug)]
pub(crate) struct InterfaceCode {
    document: String,
    interface: Interface,
    schemas: PayloadSchemas,
}

impl InterfaceCode {
    /// Reads the interface document `text` and compiles its schemas under `limits`.
    pub(crate) fn load(text: &str, limits: &SchemaLimits) -> Result<Self, String> {
        let interface = document::parse(text, &DocumentLimits::default())
            .map_err(|error| format!("the interface document cannot be read: {error}"))?;
        let schemas = PayloadSchemas::compile(&interface, limits)?;
        Ok(Self {
            document: text.to_owned(),
            interface,
            schemas,
        })
    }

    /// The protocol's text.
    pub(crate) fn document(&self) -> &str {
        &self.document
    }

    /// The affordances the protocol covers.
    pub(crate) fn interface(&self) -> &Interface {
        &self.interface
    }

    /// Checks a payload against the protocol's schema for it.
    pub(crate) fn check(&self, payload: Payload, name: &str, value: &Value) -> Result<(), String> {
        self.schemas.check(payload, name, value)
    }
}

/// Whether `text` is an interface document rather than a one-action protocol.
pub(crate) fn is_interface(text: &str) -> bool {
    document::is_interface_document(text)
}

/// The provider's decision on a candidate interface document: accepted when it states
/// exactly our affordances (of those the caller may use), countered with ours when it
/// states them differently, rejected when it names one we do not serve to this caller.
pub(crate) fn judge(candidate: &str, ours: &Interface, title: &str) -> Decision {
    let interface = match document::parse(candidate, &DocumentLimits::default()) {
        Ok(interface) => interface,
        Err(error) => {
            return Decision::Reject {
                reason: format!("the interface document cannot be read: {error}"),
            }
        }
    };
    match document::judge(&interface, ours) {
        Judgement::Accept => Decision::Accept,
        Judgement::Counter(ours) => Decision::Counter {
            candidate: document::write(&ours, title, TIMEOUT),
            modification_summary: format!(
                "The affordances {} as this agent serves them.",
                names(&ours).join(", ")
            ),
        },
        Judgement::Reject(reason) => Decision::Reject { reason },
    }
}

/// The requester's decision on the provider's counter-proposal: accepted when it covers
/// exactly the affordances we asked for (the provider states its own schemas).
pub(crate) fn judge_counter(candidate: &str, wanted: &Interface) -> Decision {
    match document::parse(candidate, &DocumentLimits::default()) {
        Ok(interface) if names(&interface) == names(wanted) => Decision::Accept,
        Ok(interface) => Decision::Reject {
            reason: format!(
                "we asked for {} and the counter-proposal covers {}",
                names(wanted).join(", "),
                names(&interface).join(", ")
            ),
        },
        Err(error) => Decision::Reject {
            reason: format!("the interface document cannot be read: {error}"),
        },
    }
}

/// Every affordance name of `interface`, sorted.
pub(crate) fn names(interface: &Interface) -> Vec<String> {
    let mut names: Vec<String> = interface
        .actions
        .keys()
        .chain(interface.properties.keys())
        .chain(interface.events.keys())
        .cloned()
        .collect();
    names.sort_unstable();
    names
}
