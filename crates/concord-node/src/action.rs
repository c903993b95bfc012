//! Actions a provider serves: what they take and return (published in the description) and
//! the backend that runs them.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;

use concord_interact::{ActionAffordance, ActionMode, StreamSpec};
use concord_negotiate::ActionSpec;
use serde_json::Value;

use crate::interact::{Backend, Publisher};

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

    /// Takes the node's publisher: [`NodeBuilder::build`](crate::NodeBuilder::build) calls
    /// it once, before any call, on every action it serves. An action that publishes events
    /// or sets properties itself keeps it (as [`ExecAction`](crate::ExecAction) does for its
    /// command's event lines); by default it is ignored.
    fn attach(&self, publisher: &Publisher) {
        let _ = publisher;
    }
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

/// One action of a node: its published spec, how it answers and what runs it.
#[derive(Clone)]
struct Served {
    spec: ActionSpec,
    backend: Backend,
    /// For a stream action: what its streams carry.
    stream: Option<StreamSpec>,
}

/// The actions of a node, sorted by name.
#[derive(Clone, Default)]
pub(crate) struct Actions {
    served: Vec<Served>,
}

impl fmt::Debug for Actions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.served.iter().map(|served| &served.spec.name))
            .finish()
    }
}

impl Actions {
    /// Adds an action, or replaces the one with its name.
    pub(crate) fn insert(
        &mut self,
        spec: ActionSpec,
        backend: Backend,
        stream: Option<StreamSpec>,
    ) {
        let served = Served {
            spec,
            backend,
            stream,
        };
        match self.index(&served.spec.name) {
            Ok(index) => self.served[index] = served,
            Err(index) => self.served.insert(index, served),
        }
    }

    /// How the action `name` runs.
    pub(crate) fn mode_backend(&self, name: &str) -> Option<Backend> {
        self.index(name)
            .ok()
            .and_then(|index| self.served.get(index))
            .map(|served| served.backend.clone())
    }

    /// The actions a one-action protocol can call (every one but streams), by name.
    pub(crate) fn specs(&self) -> Vec<ActionSpec> {
        self.served
            .iter()
            .filter(|served| !matches!(served.backend, Backend::Stream(_)))
            .map(|served| served.spec.clone())
            .collect()
    }

    /// Every action's name.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.served.iter().map(|served| served.spec.name.as_str())
    }

    /// Hands every backend the node's publisher ([`Action::attach`]).
    pub(crate) fn attach(&self, publisher: &Publisher) {
        for served in &self.served {
            served.backend.attach(publisher);
        }
    }

    /// Whether the node serves the action `name`.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.index(name).is_ok()
    }

    /// The actions as interface affordances, each with its mode.
    pub(crate) fn affordances(&self) -> BTreeMap<String, ActionAffordance> {
        self.served
            .iter()
            .map(|served| {
                let mode = match served.backend {
                    Backend::Reply(_) => ActionMode::Reply,
                    Backend::Notify(_) => ActionMode::Notify,
                    Backend::Progress(_) => ActionMode::Progress,
                    Backend::Stream(_) => ActionMode::Stream,
                };
                let affordance = ActionAffordance {
                    description: served.spec.description.clone(),
                    input: served.spec.input.clone(),
                    output: served.spec.output.clone(),
                    mode,
                    stream: served.stream.clone(),
                };
                (served.spec.name.clone(), affordance)
            })
            .collect()
    }

    fn index(&self, name: &str) -> Result<usize, usize> {
        self.served
            .binary_search_by(|served| served.spec.name.as_str().cmp(name))
    }
}
