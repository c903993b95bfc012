//! Our side's schemas: what a handler maps the protocol's messages to and from.

use concord_negotiate::naming::key;
use concord_negotiate::{ActionSpec, Need, ProtocolDocument};
use concord_sandbox::Role;
use serde_json::{json, Map, Value};

use crate::envelope::Envelope;
use crate::schema::{is_object_schema, is_required, properties, types};

/// Our side of a protocol: the local schemas its handler maps messages to and from.
///
/// - [`Local::Provider`]: our action. `decodeRequest` yields the action's input (its `input`
///   schema), `encodeResponse` takes its result (its `output` schema).
/// - [`Local::Requester`]: our need. `encodeRequest` takes the need's `input`,
///   `decodeResponse` yields its `output`; an absent schema means "as the protocol has it".
#[derive(Debug, Clone, PartialEq)]
pub enum Local {
    /// We serve requests with this action.
    Provider(ActionSpec),
    /// We call the peer's action for this need.
    Requester(Need),
}

impl Local {
    /// The requester side for calling `peer_action` as the peer publishes it (its input
    /// and output schemas are what we send and get back).
    pub fn requester_for(peer_action: &ActionSpec) -> Local {
        Local::Requester(Need {
            action: peer_action.name.clone(),
            input: Some(peer_action.input.clone()),
            output: Some(peer_action.output.clone()),
        })
    }

    /// Our side taken from the protocol itself, for when we have no schemas of our own:
    /// the provider's action takes the request's data fields and returns the response's
    /// data; the requester sends and receives the protocol's fields as they are.
    ///
    /// `action` names the action; when the protocol's request fixes `action` with a
    /// `const`, that value wins.
    pub fn from_protocol(document: &ProtocolDocument, role: Role, action: &str) -> Local {
        let envelope = Envelope::of(document);
        let name = envelope
            .action_value
            .as_ref()
            .and_then(Value::as_str)
            .unwrap_or(action)
            .to_owned();
        match role {
            Role::Requester => Local::Requester(Need {
                action: name,
                input: None,
                output: None,
            }),
            Role::Provider => {
                let input = document
                    .request_schema
                    .as_ref()
                    .map(|schema| data_schema(schema, &|field| envelope.is_request_envelope(field)))
                    .unwrap_or_else(|| json!({"type": "object"}));
                let output = document
                    .response_schema
                    .as_ref()
                    .map(|schema| {
                        let data =
                            data_schema(schema, &|field| envelope.is_response_envelope(field));
                        let fields = properties(&data);
                        match fields.as_slice() {
                            [(_, single)] => (*single).clone(),
                            _ => data.clone(),
                        }
                    })
                    .unwrap_or_else(|| json!({}));
                Local::Provider(ActionSpec {
                    name,
                    description: document.requirement.clone().unwrap_or_default(),
                    input,
                    output,
                })
            }
        }
    }

    /// The provider side for whichever of our `actions` the protocol calls: the one its
    /// request's `action` constant names (exactly, else in another naming style), else the
    /// one whose input fields the request carries most of. `None` when none fits.
    pub fn provider_for(document: &ProtocolDocument, actions: &[ActionSpec]) -> Option<Local> {
        let envelope = Envelope::of(document);
        if let Some(name) = envelope.action_value.as_ref().and_then(Value::as_str) {
            return actions
                .iter()
                .find(|action| action.name == name)
                .or_else(|| actions.iter().find(|action| key(&action.name) == key(name)))
                .map(|action| Local::Provider(action.clone()));
        }
        let fields: Vec<String> = envelope
            .request_fields
            .unwrap_or_default()
            .iter()
            .map(|name| key(name))
            .collect();
        // Reversed, so that of equal overlaps the first action wins.
        actions
            .iter()
            .rev()
            .map(|action| {
                let overlap = properties(&action.input)
                    .iter()
                    .filter(|(name, _)| fields.contains(&key(name)))
                    .count();
                (overlap, action)
            })
            .filter(|(overlap, _)| *overlap > 0)
            .max_by_key(|(overlap, _)| *overlap)
            .map(|(_, action)| Local::Provider(action.clone()))
    }

    /// The role a handler for this side plays.
    pub fn role(&self) -> Role {
        match self {
            Local::Provider(_) => Role::Provider,
            Local::Requester(_) => Role::Requester,
        }
    }

    /// The action's name (ours, or the peer's we call).
    pub fn action(&self) -> &str {
        match self {
            Local::Provider(action) => &action.name,
            Local::Requester(need) => &need.action,
        }
    }

    /// The schema of the action input on our side (`None`: as the protocol has it).
    pub(crate) fn input_schema(&self) -> Option<&Value> {
        match self {
            Local::Provider(action) => Some(&action.input),
            Local::Requester(need) => need.input.as_ref(),
        }
    }

    /// The schema of the action output on our side (`None`: as the protocol has it).
    pub(crate) fn output_schema(&self) -> Option<&Value> {
        match self {
            Local::Provider(action) => Some(&action.output),
            Local::Requester(need) => need.output.as_ref(),
        }
    }
}

/// Whether a local schema describes one non-object value (a string, a number, an array…),
/// carried in the message's single data field.
pub(crate) fn is_single_value(schema: Option<&Value>) -> bool {
    schema.is_some_and(|schema| !is_object_schema(schema) && !types(schema).is_empty())
}

/// An object schema of a message schema's data fields (its envelope removed).
pub(crate) fn data_schema(schema: &Value, is_envelope: &dyn Fn(&str) -> bool) -> Value {
    let mut fields = Map::new();
    for (name, property) in properties(schema) {
        if !is_envelope(name) {
            fields.insert(name.to_owned(), property.clone());
        }
    }
    let required: Vec<Value> = properties(schema)
        .into_iter()
        .map(|(name, _)| name)
        .filter(|name| !is_envelope(name) && is_required(schema, name))
        .map(|name| Value::String(name.to_owned()))
        .collect();
    json!({"type": "object", "properties": fields, "required": required})
}
