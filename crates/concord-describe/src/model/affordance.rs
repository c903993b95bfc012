//! Interaction affordances: what can be done with an agent (properties, actions, events).

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Annotations, DataSchema, Form, InteractionMode, StreamDescription};

/// A property: state that can be read, written or observed. Its value's schema is the
/// property itself, so the data schema terms sit beside the interaction terms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PropertyAffordance {
    /// The value's schema, with the title, description and `@type` of the property, and
    /// every term the model does not name.
    #[serde(flatten)]
    pub schema: DataSchema,
    /// Whether the property can be observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observable: Option<bool>,
    /// Variables of URI templates in the forms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri_variables: Option<IndexMap<String, DataSchema>>,
    /// How to read, write and observe it (at least one).
    pub forms: Vec<Form>,
}

/// An action: a function the agent performs, with the JSON Schemas of what goes in and
/// what comes out. Peers negotiate protocols from these schemas.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ActionAffordance {
    /// `@type`, title(s) and description(s) of the action.
    #[serde(flatten)]
    pub annotations: Annotations,
    /// Schema of the input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<DataSchema>,
    /// Schema of the output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<DataSchema>,
    /// Whether invoking it changes nothing (TD default `false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safe: Option<bool>,
    /// Whether invoking it twice equals invoking it once (TD default `false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    /// Whether the result comes in the response to the invocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synchronous: Option<bool>,
    /// Variables of URI templates in the forms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri_variables: Option<IndexMap<String, DataSchema>>,
    /// How to invoke, query and cancel it (at least one).
    pub forms: Vec<Form>,
    /// `concord:mode`: how it answers (absent: request-reply).
    #[serde(
        rename = "concord:mode",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub mode: Option<InteractionMode>,
    /// `concord:stream`: for a stream action, what its streams carry.
    #[serde(
        rename = "concord:stream",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub stream: Option<StreamDescription>,
    /// `concord:actionLease`: for a progress action, the seconds an unfinished run
    /// outlives its caller's connection (1 to 86,400).
    #[serde(
        rename = "concord:actionLease",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub action_lease: Option<u64>,
    /// Every other term, kept as written.
    #[serde(flatten)]
    pub extensions: Map<String, Value>,
}

impl ActionAffordance {
    /// How it answers: `concord:mode`, request-reply when absent (a foreign agent's action).
    pub fn interaction_mode(&self) -> InteractionMode {
        self.mode.unwrap_or_default()
    }

    /// How long an unfinished run outlives its caller's connection
    /// (`concord:actionLease`), when the action declares it.
    pub fn lease(&self) -> Option<std::time::Duration> {
        self.action_lease.map(std::time::Duration::from_secs)
    }
}

/// An event: something the agent notifies subscribers of.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct EventAffordance {
    /// `@type`, title(s) and description(s) of the event.
    #[serde(flatten)]
    pub annotations: Annotations,
    /// Schema of data sent when subscribing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription: Option<DataSchema>,
    /// Schema of the event's data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataSchema>,
    /// Schema of the reply the subscriber sends on each event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_response: Option<DataSchema>,
    /// Schema of data sent when unsubscribing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancellation: Option<DataSchema>,
    /// Variables of URI templates in the forms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri_variables: Option<IndexMap<String, DataSchema>>,
    /// How to subscribe and unsubscribe (at least one).
    pub forms: Vec<Form>,
    /// Every other term, kept as written.
    #[serde(flatten)]
    pub extensions: Map<String, Value>,
}
