//! Our side's schemas: what a handler maps the protocol's messages to and from.

use concord_negotiate::{ActionSpec, Need, ProtocolDocument};
use concord_sandbox::Role;
use serde_json::{json, Value};

use crate::envelope::Envelope;
use concord_negotiate::fit::find_action;

use crate::schema::properties;

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
        find_action(actions, &Envelope::of(document))
            .ok()
            .map(|action| Local::Provider(action.clone()))
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

pub(crate) use concord_negotiate::fit::{data_schema, is_single_value};
