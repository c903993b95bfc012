//! Interface sessions: one negotiated protocol for several affordances of a provider (its
//! actions with their modes, properties, events), spoken over the interaction layer of
//! `concord-interact`.
//!
//! The protocol is an interface document (`concord_interact::document`): it names the
//! layer by URI and lists the affordances with their payload schemas. There is no
//! generated handler: the layer is native code, and the payloads are checked here against
//! the document's schemas, compiled once per protocol ([`InterfaceCode`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use concord_interact::document::{
    self, InterfaceDocumentError, InterfaceDocumentLimits, Judgement,
};
use concord_interact::stream::StreamLimits;
use concord_interact::Interface;
use concord_negotiate::complexity::{check_complexity, SchemaLimits, SchemaTooComplex};
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
#[non_exhaustive]
pub enum Payload {
    /// An action's `input`.
    Input,
    /// An action's `output`.
    Output,
    /// A property's value.
    Property,
    /// An event's `data`.
    Event,
}

/// Why a payload schema cannot be used, or a payload is refused. Each message names the
/// payload, the affordance and, for a refused value, where in it (a JSON pointer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PayloadError {
    /// The interface has no such affordance.
    #[error("no {} `{name}` in this interface", .payload.what())]
    Unknown {
        /// Which payload was asked for.
        payload: Payload,
        /// The affordance's name.
        name: String,
    },
    /// The schema is over the schema limits.
    #[error("the {} `{name}`: {error}", .payload.what())]
    TooComplex {
        /// Whose schema.
        payload: Payload,
        /// The affordance's name.
        name: String,
        /// Which limit, and where.
        error: SchemaTooComplex,
    },
    /// The schema does not compile.
    #[error("the schema of the {} `{name}` does not compile: {reason}", .payload.what())]
    Uncompilable {
        /// Whose schema.
        payload: Payload,
        /// The affordance's name.
        name: String,
        /// The schema compiler's message.
        reason: String,
    },
    /// The value breaks the schema.
    #[error("the {} `{name}` is invalid at {pointer}: {reason}", .payload.what())]
    Invalid {
        /// Which payload.
        payload: Payload,
        /// The affordance's name.
        name: String,
        /// Where in the value (a JSON pointer, `/` for the whole value).
        pointer: String,
        /// The first problem the validator found there.
        reason: String,
    },
    /// The interface document cannot be read.
    #[error("the interface document cannot be read: {0}")]
    Document(InterfaceDocumentError),
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
    validators: HashMap<(Payload, String), PayloadSchema>,
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
    pub(crate) fn compile(
        interface: &Interface,
        limits: &SchemaLimits,
    ) -> Result<Self, PayloadError> {
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
            let validator = PayloadSchema::compile(payload, name, schema, limits)?;
            validators.insert((payload, name.to_owned()), validator);
        }
        Ok(Self { validators })
    }

    /// Checks `value` as the `payload` of the affordance `name`: `Err` names the first
    /// problem and where.
    pub(crate) fn check(
        &self,
        payload: Payload,
        name: &str,
        value: &Value,
    ) -> Result<(), PayloadError> {
        let Some(validator) = self.validators.get(&(payload, name.to_owned())) else {
            return Err(PayloadError::Unknown {
                payload,
                name: name.to_owned(),
            });
        };
        validator.check(value)
    }
}

/// One payload schema of one affordance, compiled: the one check of a payload in every
/// mode (an interface's affordances, and a one-action protocol's input on either side), so
/// that every mode refuses the same values in the same words.
pub(crate) struct PayloadSchema {
    payload: Payload,
    name: String,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for PayloadSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PayloadSchema")
            .field("payload", &self.payload)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl PayloadSchema {
    /// Compiles `schema`, the `payload` of the affordance `name`, checked against `limits`
    /// first.
    pub(crate) fn compile(
        payload: Payload,
        name: &str,
        schema: &Value,
        limits: &SchemaLimits,
    ) -> Result<Self, PayloadError> {
        check_complexity(schema, limits).map_err(|error| PayloadError::TooComplex {
            payload,
            name: name.to_owned(),
            error,
        })?;
        let validator =
            jsonschema::validator_for(schema).map_err(|error| PayloadError::Uncompilable {
                payload,
                name: name.to_owned(),
                reason: error.to_string(),
            })?;
        Ok(Self {
            payload,
            name: name.to_owned(),
            validator,
        })
    }

    /// Checks `value`: `Err` names the payload, the affordance, where (a JSON pointer) and
    /// the first problem.
    pub(crate) fn check(&self, value: &Value) -> Result<(), PayloadError> {
        if self.validator.is_valid(value) {
            return Ok(());
        }
        let (pointer, reason) = self
            .validator
            .iter_errors(value)
            .next()
            .map(|error| {
                let pointer = error.instance_path().to_string();
                let pointer = if pointer.is_empty() {
                    "/".to_owned()
                } else {
                    pointer
                };
                (pointer, error.to_string())
            })
            .unwrap_or_else(|| ("/".to_owned(), "invalid".to_owned()));
        Err(PayloadError::Invalid {
            payload: self.payload,
            name: self.name.clone(),
            pointer,
            reason,
        })
    }
}

/// Our code for an interface protocol: the document, the interface it states and its
/// payload schemas.
#[derive(Debug)]
pub(crate) struct InterfaceCode {
    document: String,
    /// Shared with every session's endpoint.
    interface: Arc<Interface>,
    schemas: PayloadSchemas,
}

impl InterfaceCode {
    /// Reads the interface document `text` and compiles its schemas under `limits`.
    pub(crate) fn load(text: &str, limits: &SchemaLimits) -> Result<Self, PayloadError> {
        let interface = document::parse(text, &InterfaceDocumentLimits::default())
            .map_err(PayloadError::Document)?;
        let schemas = PayloadSchemas::compile(&interface, limits)?;
        Ok(Self {
            document: text.to_owned(),
            interface: Arc::new(interface),
            schemas,
        })
    }

    /// The protocol's text.
    pub(crate) fn document(&self) -> &str {
        &self.document
    }

    /// The affordances the protocol covers.
    pub(crate) fn interface(&self) -> &Arc<Interface> {
        &self.interface
    }

    /// Checks a payload against the protocol's schema for it.
    pub(crate) fn check(
        &self,
        payload: Payload,
        name: &str,
        value: &Value,
    ) -> Result<(), PayloadError> {
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
///
/// A candidate asking a stream action for another initial credit than ours is countered
/// with ours (which the node's builder made sure our receive buffer holds); when it asked
/// for more than `streams.max_receive_buffer`, the summary names the action and
/// `stream.initialCredit`.
pub(crate) fn judge(
    candidate: &str,
    ours: &Interface,
    title: &str,
    streams: &StreamLimits,
) -> Decision {
    let interface = match document::parse(candidate, &InterfaceDocumentLimits::default()) {
        Ok(interface) => interface,
        Err(error) => {
            return Decision::Reject {
                reason: format!("the interface document cannot be read: {error}"),
            }
        }
    };
    match document::judge(&interface, ours) {
        Judgement::Accept => Decision::Accept,
        Judgement::Counter(ours) => {
            let mut modification_summary = format!(
                "The affordances {} as this agent serves them.",
                names(&ours).join(", ")
            );
            if let Err(error) = document::check_credits(&interface, streams) {
                modification_summary.push_str(&format!(" The candidate's {error}."));
            }
            Decision::Counter {
                candidate: document::write(&ours, title, TIMEOUT),
                modification_summary,
            }
        }
        Judgement::Reject(reason) => Decision::Reject { reason },
    }
}

/// The requester's decision on the provider's counter-proposal: accepted when it covers
/// exactly the affordances we asked for (the provider states its own schemas), and every
/// stream action's initial credit fits our receive buffer per stream
/// (`streams.max_receive_buffer`; refused naming the action and `stream.initialCredit`).
pub(crate) fn judge_counter(
    candidate: &str,
    wanted: &Interface,
    streams: &StreamLimits,
) -> Decision {
    match document::parse(candidate, &InterfaceDocumentLimits::default()) {
        Ok(interface) if names(&interface) == names(wanted) => {
            match document::check_credits(&interface, streams) {
                Ok(()) => Decision::Accept,
                Err(error) => Decision::Reject {
                    reason: format!("the counter-proposal's {error}"),
                },
            }
        }
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

#[cfg(test)]
mod tests {
    //! A stream action's initial credit against the judging side's receive buffer.

    use concord_interact::document::{self, InterfaceDocumentLimits};
    use concord_interact::stream::StreamLimits;
    use concord_interact::{ActionAffordance, ActionMode, Interface, StreamSpec};
    use concord_proto::Decision;
    use serde_json::json;

    use super::{judge, judge_counter};

    /// A provider serving one stream action starting with `credit` bytes.
    fn talk(credit: u64) -> Interface {
        let mut interface = Interface::default();
        interface.actions.insert(
            "talk".into(),
            ActionAffordance {
                description: "Talk.".into(),
                input: json!({"type": "object"}),
                output: json!({"type": "object"}),
                mode: ActionMode::Stream,
                stream: Some(StreamSpec {
                    content_type: "audio/pcm;rate=24000;channels=1".into(),
                    output_content_type: None,
                    frame_bytes: 960,
                    initial_credit: credit,
                    realtime: true,
                }),
            },
        );
        interface
    }

    fn buffer(bytes: u64) -> StreamLimits {
        let mut streams = StreamLimits::default();
        streams.max_receive_buffer = bytes;
        streams
    }

    fn credit_of(text: &str) -> u64 {
        let interface = document::parse(text, &InterfaceDocumentLimits::default()).unwrap();
        interface.actions["talk"]
            .stream
            .as_ref()
            .unwrap()
            .initial_credit
    }

    /// A foreign requester's hand-written document asks for 4 MiB; we hold 1 MiB and serve
    /// 96 000 bytes: countered with ours, the summary naming the action and the field.
    #[test]
    fn a_foreign_candidate_credit_over_our_buffer_is_countered_naming_the_field() {
        let candidate = "# What we want\n\nTo talk.\n\n# Interaction layer\n\nurn:concord:interaction:1\n\n# Interface\n\n```json\n{\"actions\": {\"talk\": {\"mode\": \"stream\", \"input\": {\"type\": \"object\"}, \"output\": {\"type\": \"object\"}, \"stream\": {\"contentType\": \"audio/pcm;rate=24000;channels=1\", \"frameBytes\": 960, \"initialCredit\": 4194304, \"realtime\": true}}}}\n```\n";
        let decision = judge(candidate, &talk(96_000), "Agent", &buffer(1 << 20));
        let Decision::Counter {
            candidate,
            modification_summary,
        } = decision
        else {
            panic!("expected a counter: {decision:?}");
        };
        assert_eq!(credit_of(&candidate), 96_000);
        assert!(
            modification_summary.contains("`talk`")
                && modification_summary.contains("stream.initialCredit")
                && modification_summary.contains("4194304"),
            "{modification_summary}"
        );
    }

    /// The requester holds 64 000 bytes; a foreign provider's hand-written counter states
    /// 96 000: refused, naming the field. A counter within the buffer is accepted.
    #[test]
    fn a_requester_refuses_a_counter_credit_over_its_buffer() {
        let wanted = talk(1);
        let counter = "## Purpose\n\nVoice.\n\n## Layer\n\nurn:concord:interaction:1\n\n## Affordances\n\n{\"actions\": {\"talk\": {\"mode\": \"stream\", \"input\": {\"type\": \"object\"}, \"output\": {\"type\": \"object\"}, \"stream\": {\"contentType\": \"audio/pcm;rate=24000;channels=1\", \"frameBytes\": 960, \"initialCredit\": 96000, \"realtime\": true}}}}\n";
        match judge_counter(counter, &wanted, &buffer(64_000)) {
            Decision::Reject { reason } => assert!(
                reason.contains("`talk`")
                    && reason.contains("stream.initialCredit")
                    && reason.contains("64000"),
                "{reason}"
            ),
            other => panic!("expected a refusal: {other:?}"),
        }
        assert_eq!(
            judge_counter(counter, &wanted, &buffer(96_000)),
            Decision::Accept
        );
    }
}
