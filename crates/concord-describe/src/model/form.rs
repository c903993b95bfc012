//! Forms: how to perform an operation on an affordance (where, with which method and media type).

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::OneOrMany;

/// Declares [`Operation`] from one table of variants and their names as written in `op`:
/// the enum (serde reads and writes those names), [`Operation::ALL`] and [`Operation::name`].
macro_rules! operations {
    ($($(#[doc = $doc:literal])* $variant:ident = $name:literal,)+) => {
        /// A TD 1.1 operation type (`op`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[non_exhaustive]
        pub enum Operation {
            $($(#[doc = $doc])* #[serde(rename = $name)] $variant,)+
        }

        impl Operation {
            /// Every operation.
            pub const ALL: [Operation; [$($name),+].len()] = [$(Operation::$variant),+];

            /// The name as written in `op`.
            pub fn name(self) -> &'static str {
                match self {
                    $(Operation::$variant => $name,)+
                }
            }

            /// Parses an `op` value (exact, lowercase).
            pub fn from_name(name: &str) -> Option<Self> {
                Self::ALL.into_iter().find(|op| op.name() == name)
            }
        }
    };
}

operations! {
    /// Read a property.
    ReadProperty = "readproperty",
    /// Write a property.
    WriteProperty = "writeproperty",
    /// Observe a property.
    ObserveProperty = "observeproperty",
    /// Stop observing a property.
    UnobserveProperty = "unobserveproperty",
    /// Invoke an action.
    InvokeAction = "invokeaction",
    /// Query the state of an ongoing action.
    QueryAction = "queryaction",
    /// Cancel an ongoing action.
    CancelAction = "cancelaction",
    /// Subscribe to an event.
    SubscribeEvent = "subscribeevent",
    /// Unsubscribe from an event.
    UnsubscribeEvent = "unsubscribeevent",
    /// Read all properties (Thing-level form).
    ReadAllProperties = "readallproperties",
    /// Write all properties (Thing-level form).
    WriteAllProperties = "writeallproperties",
    /// Read several properties (Thing-level form).
    ReadMultipleProperties = "readmultipleproperties",
    /// Write several properties (Thing-level form).
    WriteMultipleProperties = "writemultipleproperties",
    /// Observe all properties (Thing-level form).
    ObserveAllProperties = "observeallproperties",
    /// Stop observing all properties (Thing-level form).
    UnobserveAllProperties = "unobserveallproperties",
    /// Query all ongoing actions (Thing-level form).
    QueryAllActions = "queryallactions",
    /// Subscribe to all events (Thing-level form).
    SubscribeAllEvents = "subscribeallevents",
    /// Unsubscribe from all events (Thing-level form).
    UnsubscribeAllEvents = "unsubscribeallevents",
}

/// Where a form sits, which decides the operations it may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FormContext {
    /// A property affordance's form.
    Property,
    /// An action affordance's form.
    Action,
    /// An event affordance's form.
    Event,
    /// A Thing-level form (`forms` at the top).
    Thing,
}

impl FormContext {
    /// The operations a form here may carry.
    pub fn operations(self) -> &'static [Operation] {
        use Operation::*;
        match self {
            FormContext::Property => &[
                ReadProperty,
                WriteProperty,
                ObserveProperty,
                UnobserveProperty,
            ],
            FormContext::Action => &[InvokeAction, QueryAction, CancelAction],
            FormContext::Event => &[SubscribeEvent, UnsubscribeEvent],
            FormContext::Thing => &[
                ReadAllProperties,
                WriteAllProperties,
                ReadMultipleProperties,
                WriteMultipleProperties,
                ObserveAllProperties,
                UnobserveAllProperties,
                QueryAllActions,
                SubscribeAllEvents,
                UnsubscribeAllEvents,
            ],
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A form: one way to perform one or more operations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Form {
    /// Target URI, possibly relative to the Thing's `base`, possibly a URI template.
    pub href: String,
    /// Operations this form performs; absent means the TD default for its affordance type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<OneOrMany<Operation>>,
    /// Media type of the payload (TD default `application/json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// Content coding (`gzip`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_coding: Option<String>,
    /// Subprotocol (`longpoll`, `websub`, `sse`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subprotocol: Option<String>,
    /// Security definitions that apply here instead of the Thing's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<OneOrMany<String>>,
    /// OAuth2 scopes needed here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<OneOrMany<String>>,
    /// The expected response when it differs from the request's media type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ExpectedResponse>,
    /// Further possible responses (errors, other media types).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_responses: Option<Vec<AdditionalResponse>>,
    /// Protocol-binding terms (`htv:methodName`, `mqv:topic`, ...) and any other term.
    #[serde(flatten)]
    pub extensions: Map<String, Value>,
}

impl Form {
    /// A form for `href` with no other terms.
    pub fn new(href: impl Into<String>) -> Self {
        Self {
            href: href.into(),
            op: None,
            content_type: None,
            content_coding: None,
            subprotocol: None,
            security: None,
            scopes: None,
            response: None,
            additional_responses: None,
            extensions: Map::new(),
        }
    }
}

/// The media type of a form's response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ExpectedResponse {
    /// Media type of the response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// Any other term.
    #[serde(flatten)]
    pub extensions: Map<String, Value>,
}

/// Another response a form may produce.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct AdditionalResponse {
    /// Whether this response means success (TD default `false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success: Option<bool>,
    /// Media type of the response (default: the form's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// Name of its schema in the Thing's `schemaDefinitions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Any other term.
    #[serde(flatten)]
    pub extensions: Map<String, Value>,
}
