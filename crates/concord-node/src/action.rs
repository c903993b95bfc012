//! Actions a provider serves: what they take and return (published in the description) and
//! the backend that runs them.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use concord_negotiate::ActionSpec;
use serde_json::Value;

/// The future an [`Action`] returns.
pub type ActionFuture = Pin<Box<dyn Future<Output = Result<Value, ActionError>> + Send>>;

/// Runs one action call: the action's input JSON in, its output JSON (or an error) out.
///
/// Implemented for async closures `Fn(Value) -> impl Future<Output = Result<Value, ActionError>>`,
/// and by the [`ExecAction`](crate::ExecAction) (a command per call) and
/// [`HttpAction`](crate::HttpAction) (a POST per call) backends.
///
/// ```
/// use concord_node::{Action, ActionError};
/// use serde_json::{json, Value};
///
/// fn check(_: &dyn Action) {}
/// check(&|input: Value| async move {
///     match input["productId"].as_str() {
///         Some("P1") => Ok(json!({"name": "Laptop"})),
///         _ => Err(ActionError::not_found("no such product")),
///     }
/// });
/// ```
pub trait Action: Send + Sync + 'static {
    /// Runs the action on `input` (already checked against the action's input schema by
    /// the protocol's handler).
    fn call(&self, input: Value) -> ActionFuture;
}

impl<F, Fut> Action for F
where
    F: Fn(Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ActionError>> + Send + 'static,
{
    fn call(&self, input: Value) -> ActionFuture {
        Box::pin(self(input))
    }
}

/// Why an action call failed. Sent to the caller as an error response: `code` is an HTTP
/// status code (the protocols Concord drafts report errors that way) and `message` says
/// what went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ActionError {
    /// HTTP status code, 400–599.
    pub code: u16,
    /// What went wrong, for the caller.
    pub message: String,
}

impl ActionError {
    /// An error with this HTTP status code (clamped to 400–599) and message.
    pub fn new(code: u16, message: impl Into<String>) -> Self {
        Self {
            code: code.clamp(400, 599),
            message: message.into(),
        }
    }

    /// 400: the input is wrong.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, message)
    }

    /// 404: nothing matches the input.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(404, message)
    }

    /// 500: the action failed.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, message)
    }

    /// 502: the backend (command, HTTP service) answered badly.
    pub fn bad_gateway(message: impl Into<String>) -> Self {
        Self::new(502, message)
    }

    /// 504: the backend did not answer in time.
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, message)
    }
}

/// The actions of a node, sorted by name: their published specs and, at the same index,
/// their backends.
#[derive(Clone, Default)]
pub(crate) struct Actions {
    specs: Vec<ActionSpec>,
    backends: Vec<Arc<dyn Action>>,
}

impl fmt::Debug for Actions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.specs.iter().map(|spec| &spec.name))
            .finish()
    }
}

impl Actions {
    /// Adds an action, or replaces the one with its name.
    pub(crate) fn insert(&mut self, spec: ActionSpec, backend: Arc<dyn Action>) {
        match self.index(&spec.name) {
            Ok(index) => {
                self.specs[index] = spec;
                self.backends[index] = backend;
            }
            Err(index) => {
                self.specs.insert(index, spec);
                self.backends.insert(index, backend);
            }
        }
    }

    /// The backend of the action `name`.
    pub(crate) fn backend(&self, name: &str) -> Option<&Arc<dyn Action>> {
        self.index(name)
            .ok()
            .and_then(|index| self.backends.get(index))
    }

    /// The actions' specs, by name.
    pub(crate) fn specs(&self) -> &[ActionSpec] {
        &self.specs
    }

    fn index(&self, name: &str) -> Result<usize, usize> {
        self.specs
            .binary_search_by(|spec| spec.name.as_str().cmp(name))
    }
}
