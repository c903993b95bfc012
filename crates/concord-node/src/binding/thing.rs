//! What a binding reaches the node's affordances through: [`ThingAccess`], implemented once
//! over the node ([`NodeThing`]) with the checks of the meta-protocol WebSocket, so that no
//! binding serves an affordance around the node's authorization, schemas or call budget.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use concord_identity::Caller;
use concord_interact::{ActionMode, Interface};
use serde_json::Value;

use crate::action::ActionError;
use crate::admission::ClientKey;
use crate::budget::CallKind;
use crate::driver::provider::run_plain;
use crate::interact::{Backend, PublishError};
use crate::interface::{Payload, PayloadError};
use crate::node::Shared;

/// The answer of [`ThingAccess::invoke`]: borrowed from the handle it came from.
pub type InvokeFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, ThingError>> + Send + 'a>>;

/// A binding's handle to the node's affordances ([`Site::thing`](crate::Site::thing)):
/// every call and property access goes through the checks the meta-protocol WebSocket
/// makes. `caller` is who the binding says calls: [`Caller::Anonymous`] unless the binding
/// verified the caller's DID itself (with `concord_identity::Credentials`, as the
/// WebSocket's upgrade does); `from` is the client's address, which the node's call
/// budget counts.
pub trait ThingAccess: Send + Sync + 'static {
    /// Every affordance the node serves (its actions with their modes and schemas, its
    /// properties, its events), whoever may use them.
    fn interface(&self) -> &Interface;

    /// Calls the request-reply action `name` with `input` for `caller` from `from`: refused
    /// unless `caller` may call it ([`ThingError::Forbidden`]) and its input schema takes
    /// `input` ([`ThingError::Input`]); then it takes a slot of the node's backend call
    /// budget for `from`'s address, waiting at most `Limits::backend_call_wait`
    /// ([`ThingError::Busy`], 429 or 503), and its output is checked against its output
    /// schema ([`ThingError::Output`]).
    fn invoke<'a>(
        &'a self,
        caller: &'a Caller,
        from: IpAddr,
        name: &'a str,
        input: Value,
    ) -> InvokeFuture<'a>;

    /// The property `name`'s value now, for `caller`.
    ///
    /// # Errors
    /// [`ThingError::Unknown`] or [`ThingError::Forbidden`].
    fn read_property(&self, caller: &Caller, name: &str) -> Result<Value, ThingError>;

    /// Writes the property `name` for `caller`: checked against its schema, its observers
    /// notified.
    ///
    /// # Errors
    /// [`ThingError::Unknown`], [`ThingError::Forbidden`], [`ThingError::ReadOnly`], or
    /// [`ThingError::Input`] naming where the value breaks the schema.
    fn write_property(&self, caller: &Caller, name: &str, value: Value) -> Result<(), ThingError>;
}

impl std::fmt::Debug for dyn ThingAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThingAccess").finish_non_exhaustive()
    }
}

/// Why a binding's call or property access was refused or failed; [`ThingError::status`]
/// is the HTTP status it answers with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ThingError {
    /// The node has no such affordance (404).
    #[error("the node has no {kind} named `{name}`")]
    Unknown {
        /// `action` or `property`.
        kind: &'static str,
        /// The name asked for.
        name: String,
    },
    /// The caller may not use the affordance (403).
    #[error("the caller may not use `{name}`")]
    Forbidden {
        /// The affordance.
        name: String,
    },
    /// The input or value breaks its schema (400): the error names the affordance, the
    /// JSON pointer and the problem.
    #[error("{0}")]
    Input(PayloadError),
    /// The property cannot be written (405).
    #[error("property `{name}` is read-only")]
    ReadOnly {
        /// The property.
        name: String,
    },
    /// The action does not answer request-reply (501): progress, notify and stream
    /// actions are not invoked through this handle.
    #[error("action `{name}` runs in {mode} mode: only request-reply actions are invoked here")]
    Mode {
        /// The action.
        name: String,
        /// Its mode (`progress`, `notify`, `stream`).
        mode: &'static str,
    },
    /// The node's backend call budget refused the call: 429 when the client's address
    /// holds its share, 503 when the node is full.
    #[error("{0}")]
    Busy(ActionError),
    /// The action answered with an error (its own status).
    #[error("the action failed: {0}")]
    Failed(ActionError),
    /// The action's output breaks its output schema (500).
    #[error("the action's output breaks its schema: {0}")]
    Output(PayloadError),
}

impl ThingError {
    /// The HTTP status this error answers with.
    pub fn status(&self) -> u16 {
        match self {
            Self::Unknown { .. } => 404,
            Self::Forbidden { .. } => 403,
            Self::Input(_) => 400,
            Self::ReadOnly { .. } => 405,
            Self::Mode { .. } => 501,
            Self::Busy(refused) => refused.code,
            Self::Failed(error) => error.code,
            Self::Output(_) => 500,
        }
    }
}

/// The one [`ThingAccess`] over a node.
pub(crate) struct NodeThing {
    shared: Arc<Shared>,
}

impl NodeThing {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    /// `Ok` when `caller` may use `name`.
    fn permit(&self, caller: &Caller, name: &str) -> Result<(), ThingError> {
        if self.shared.identity.permits(caller, name) {
            return Ok(());
        }
        Err(ThingError::Forbidden {
            name: name.to_owned(),
        })
    }

    /// The property `name`, when the node has it.
    fn property(&self, name: &str) -> Result<&concord_interact::PropertyAffordance, ThingError> {
        self.shared
            .interface
            .properties
            .get(name)
            .ok_or_else(|| ThingError::Unknown {
                kind: "property",
                name: name.to_owned(),
            })
    }

    /// The request-reply action `name`, checked for `caller` with `input`.
    fn reply_action(
        &self,
        caller: &Caller,
        name: &str,
        input: &Value,
    ) -> Result<Backend, ThingError> {
        let unknown = || ThingError::Unknown {
            kind: "action",
            name: name.to_owned(),
        };
        let action = self
            .shared
            .interface
            .actions
            .get(name)
            .ok_or_else(unknown)?;
        self.permit(caller, name)?;
        if action.mode != ActionMode::Reply {
            return Err(ThingError::Mode {
                name: name.to_owned(),
                mode: action.mode.as_str(),
            });
        }
        let schemas = &self.shared.affordances.schemas;
        schemas
            .check(Payload::Input, name, input)
            .map_err(ThingError::Input)?;
        match self.shared.actions.mode_backend(name) {
            Some(backend @ Backend::Reply(_)) => Ok(backend),
            _ => Err(unknown()),
        }
    }
}

impl ThingAccess for NodeThing {
    fn interface(&self) -> &Interface {
        &self.shared.interface
    }

    fn invoke<'a>(
        &'a self,
        caller: &'a Caller,
        from: IpAddr,
        name: &'a str,
        input: Value,
    ) -> InvokeFuture<'a> {
        Box::pin(async move {
            let backend = self.reply_action(caller, name, &input)?;
            // A slot of the node's budget first, as a WebSocket session's call takes one.
            let _permit = self
                .shared
                .calls
                .enter(ClientKey::of(from), CallKind::Brief)
                .await
                .map_err(ThingError::Busy)?;
            let output = run_plain(&backend, name, input)
                .await
                .map_err(ThingError::Failed)?;
            self.shared
                .affordances
                .schemas
                .check(Payload::Output, name, &output)
                .map_err(ThingError::Output)?;
            Ok(output)
        })
    }

    fn read_property(&self, caller: &Caller, name: &str) -> Result<Value, ThingError> {
        self.property(name)?;
        self.permit(caller, name)?;
        self.shared
            .affordances
            .lock()
            .read_property(name)
            .cloned()
            .map_err(|_| ThingError::Unknown {
                kind: "property",
                name: name.to_owned(),
            })
    }

    fn write_property(&self, caller: &Caller, name: &str, value: Value) -> Result<(), ThingError> {
        let property = self.property(name)?;
        self.permit(caller, name)?;
        if !property.writable {
            return Err(ThingError::ReadOnly {
                name: name.to_owned(),
            });
        }
        self.shared
            .affordances
            .set_property(name, value)
            .map_err(|error| match error {
                PublishError::Invalid(problem) => ThingError::Input(problem),
                _ => ThingError::Unknown {
                    kind: "property",
                    name: name.to_owned(),
                },
            })
    }
}
