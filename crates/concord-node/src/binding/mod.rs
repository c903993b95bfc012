//! Protocol bindings: how peers reach the node's affordances. A [`Binding`] supplies both
//! halves of one way in, as node-wot's `ProtocolServer` does: the forms it adds to each
//! affordance of the description, and the HTTP routes that serve them. The server merges
//! every binding's routes behind its admission (connections, the per-address request
//! budget), and the description lists every binding's forms. Neither knows the other
//! bindings: the server builds the WebSocket's state (the session slots it counts and
//! drains), the description names the WebSocket in `concord:metaProtocol`.
//!
//! The node's own bindings are the meta-protocol WebSocket (`websocket/`, forms on
//! `/concord` for every affordance) and the event ingest (`ingest.rs`, a route for
//! backend services and no forms); [`NodeBuilder::binding`](crate::NodeBuilder::binding)
//! adds others. A new binding of the node's own goes in this folder, with a line in
//! [`served`]. A route answering with Server-Sent Events uses [`sse`]. Every binding reaches the node's affordances through one handle,
//! [`ThingAccess`] (`thing.rs`, implemented once over the node), and its security
//! schemes are checked when the node starts serving (`schemes.rs`).

mod described;
pub(crate) mod directory;
mod feed;
pub(crate) mod http;
pub(crate) mod http_caller;
pub(crate) mod ingest;
mod problem;
mod schemes;
pub mod sse;
mod thing;
pub(crate) mod websocket;
pub(crate) mod wellknown;

pub(crate) use described::check_described;
pub use described::Described;
pub use directory::{DirectoryService, DEFAULT_PURGE_INTERVAL};
pub use feed::{Feed, FeedEnd, FeedNews};
pub use http_caller::{BearerGrant, BearerTokenError, MIN_BEARER_TOKEN_LEN};
pub use problem::{ProblemResponse, PROBLEM_JSON};
pub(crate) use schemes::check_schemes;
pub(crate) use thing::NodeThing;
pub use thing::{
    ActionState, InvokeFuture, RelayCancelFuture, StartFuture, ThingAccess, ThingError,
};
pub use wellknown::anp::Owner;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use axum::Router;
use concord_describe::{Form, SecurityScheme};
use concord_interact::{ActionAffordance, EventAffordance, PropertyAffordance};
use tokio::sync::watch;

use crate::describe::DescriptionHandle;
use crate::error::NodeError;
use crate::node::Shared;
use websocket::MetaProtocol;

/// One way peers reach the node: the forms it adds to the description and the routes that
/// serve them (the shape of node-wot's `ProtocolServer`).
///
/// Its routes sit behind the node's admission like every other route: each request spends
/// from its client address's request budget
/// ([`Limits::request_rate_per_address`](crate::Limits::request_rate_per_address)) and its
/// connection counts against the connection limits, before the binding sees it. A route's
/// handler finds the client's address in the request's extensions
/// (`axum::extract::ConnectInfo<std::net::SocketAddr>`). The routes carry their own
/// state (`Router::with_state`), narrow: what they serve with, not the whole node. They
/// reach the node's affordances through [`Site::thing`] ([`ThingAccess`]), which checks
/// what the meta-protocol WebSocket checks (who may call, the schemas, the backend call
/// budget); the security schemes their forms name are the node's or the binding's own
/// ([`Binding::security_schemes`]).
///
/// ```
/// use concord_node::axum::{routing::get, Router};
/// use concord_node::{Affordance, Binding, Site};
/// use concord_describe::{Form, OneOrMany, Operation};
///
/// /// Reads every property with `GET /properties/{name}` (the handler is left out here).
/// struct ReadOnlyHttp;
///
/// impl Binding for ReadOnlyHttp {
///     fn name(&self) -> &str {
///         "read-only HTTP"
///     }
///
///     fn forms(&self, site: &Site, affordance: Affordance<'_>) -> Vec<Form> {
///         match affordance {
///             Affordance::Property { name, .. } => {
///                 let mut form = Form::new(site.http_url(&format!("properties/{name}")));
///                 form.op = Some(OneOrMany::One(Operation::ReadProperty));
///                 vec![form]
///             }
///             _ => Vec::new(),
///         }
///     }
///
///     fn routes(&self, _site: &Site) -> Router {
///         Router::new().route("/properties/{name}", get(|| async { "…" }))
///     }
/// }
/// ```
pub trait Binding: Send + Sync + 'static {
    /// Its name, in logs and in the error when its routes overlap another binding's.
    fn name(&self) -> &str;

    /// The forms it offers for `affordance`, in order (none when it does not serve it).
    /// `site` is where the node serves: an `href` may be absolute or relative to the
    /// description's `base` (the site's base URL). Asked each time the description is
    /// built: at the first request for it, and again when the consensus protocols it lists
    /// change.
    fn forms(&self, site: &Site, affordance: Affordance<'_>) -> Vec<Form>;

    /// The routes it serves, with their state applied. Asked once, when the node starts
    /// serving; a path another binding or the node itself serves
    /// (`/.well-known/wot`, the DID document's) fails [`Node::serve`](crate::Node::serve).
    /// A route whose answer can take long (a long poll, a stream of events) ends it when
    /// [`Site::draining`] resolves: the server's shutdown waits for the answers in
    /// progress.
    fn routes(&self, site: &Site) -> Router;

    /// The security schemes its forms name (`Form::security`) beside the node's own
    /// (`nosec_sc`, and `didwba_sc` when the node has a DID), by name: the description's
    /// `securityDefinitions` lists them. None by default. Checked when the node starts
    /// serving: a name the node or another binding defines, a scheme the description's
    /// validator refuses, or a form naming a scheme nobody defines fails
    /// [`Node::serve`](crate::Node::serve) with a [`NodeError::Config`] naming the binding.
    fn security_schemes(&self) -> Vec<(String, SecurityScheme)> {
        Vec::new()
    }

    /// What it adds to the description beside its forms on the node's affordances: context
    /// URIs, `@type`s and affordances of its own, which it serves alone (a WoT Discovery
    /// directory: the discovery context, `ThingDirectory`, the `things` property, the
    /// registration and search actions and the notification events, each with its HTTP
    /// forms). Nothing by default. Asked each time the description is built, and once when
    /// the node starts serving: an affordance named as one of the node's interface or of
    /// another binding, or a form naming a security scheme nobody defines, fails
    /// [`Node::serve`](crate::Node::serve) with a [`NodeError::Config`] naming the binding.
    fn described(&self, _site: &Site) -> Described {
        Described::default()
    }

    /// Its Thing-level forms (the description's top-level `forms`: `readallproperties`
    /// and the other operations on the whole Thing it serves), in order. None by default.
    /// Asked each time the description is built; checked as [`Binding::forms`] are when
    /// the node starts serving.
    fn thing_forms(&self, _site: &Site) -> Vec<Form> {
        Vec::new()
    }

    /// The URI template variables its forms' `href`s for `affordance` use (`{?input}`),
    /// by name, each with its data schema: the affordance's `uriVariables`, merged with
    /// the other bindings'. None by default.
    fn uri_variables(&self, _affordance: Affordance<'_>) -> Vec<(String, serde_json::Value)> {
        Vec::new()
    }
}

impl std::fmt::Debug for dyn Binding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Binding").field(&self.name()).finish()
    }
}

/// One affordance of the node's interface, as a binding is asked for its forms.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Affordance<'a> {
    /// A property: its name and definition.
    Property {
        /// The property's name.
        name: &'a str,
        /// What it holds, and whether it can be written and observed.
        property: &'a PropertyAffordance,
    },
    /// An action: its name and definition.
    Action {
        /// The action's name.
        name: &'a str,
        /// Its input and output schemas and how it answers.
        action: &'a ActionAffordance,
    },
    /// An event: its name and definition.
    Event {
        /// The event's name.
        name: &'a str,
        /// The schema of its data.
        event: &'a EventAffordance,
    },
}

impl<'a> Affordance<'a> {
    /// The affordance's name.
    pub fn name(&self) -> &'a str {
        match self {
            Self::Property { name, .. } | Self::Action { name, .. } | Self::Event { name, .. } => {
                name
            }
        }
    }
}

/// Where and how long the node serves, as bindings write their forms and serve their
/// routes: its base URL (the public URL when it has one, else `http://host:port/`,
/// `https://` with a certificate), whether the server drains, and the node's affordances
/// ([`Site::thing`]).
#[derive(Debug, Clone)]
pub struct Site {
    base_url: String,
    /// Set when the server stops taking connections and calls.
    stop: watch::Receiver<bool>,
    thing: Arc<dyn ThingAccess>,
}

impl Site {
    pub(crate) fn new(
        base_url: String,
        stop: watch::Receiver<bool>,
        thing: Arc<dyn ThingAccess>,
    ) -> Self {
        Self {
            base_url,
            stop,
            thing,
        }
    }

    /// The node's affordances, as a binding's routes serve them: calls and property
    /// accesses checked as the meta-protocol WebSocket checks them (who may call, the
    /// schemas, the node's backend call budget).
    pub fn thing(&self) -> &Arc<dyn ThingAccess> {
        &self.thing
    }

    /// The base URL, ending in `/`, as the description's `base` says it.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The absolute URL of `path` (relative to the base URL, with or without a leading
    /// `/`): `http://host:port/path`.
    pub fn http_url(&self, path: &str) -> String {
        http_url(&self.base_url, path)
    }

    /// The WebSocket URL of `path`: `ws://host:port/path` (`wss://` under `https`).
    pub fn websocket_url(&self, path: &str) -> String {
        websocket_url(&self.base_url, path)
    }

    /// Whether the server drains ([`Server::shutdown`](crate::Server::shutdown)) or has
    /// stopped.
    pub fn is_draining(&self) -> bool {
        *self.stop.borrow()
    }

    /// Resolves once the server drains or has stopped: what a long answer waits on beside
    /// its own work, to end in time.
    pub async fn draining(&self) {
        let mut stop = self.stop.clone();
        // An error: the server is gone, which is stopped too.
        let _ = stop.wait_for(|stop| *stop).await;
    }
}

/// `base_url` joined with `path`: `http://host:port/path`.
pub(crate) fn http_url(base_url: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base_url.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

/// The WebSocket URL of `path` under `base_url`: `ws://host:port/path` (`wss://` under
/// `https`).
pub(crate) fn websocket_url(base_url: &str, path: &str) -> String {
    let http = http_url(base_url, path);
    match http.split_once("://") {
        Some(("https", rest)) => format!("wss://{rest}"),
        Some((_, rest)) => format!("ws://{rest}"),
        None => format!("ws://{http}"),
    }
}

/// The bindings a server runs, in the order their forms are listed.
pub(crate) type Bindings = Arc<[Arc<dyn Binding>]>;

/// The bindings a server runs: the meta-protocol WebSocket, then the node's other own
/// bindings (the WoT HTTP binding unless turned off, the event ingest when it has a
/// token, the discovery documents derived from `description`, the directory when the node
/// serves one), then those the builder added.
pub(crate) fn served(
    shared: &Arc<Shared>,
    websocket: MetaProtocol,
    description: &DescriptionHandle,
) -> Bindings {
    let mut bindings: Vec<Arc<dyn Binding>> = vec![Arc::new(websocket)];
    bindings.extend(http::binding(shared));
    bindings.extend(ingest::binding(shared));
    bindings.push(Arc::new(wellknown::WellKnown::new(
        Arc::clone(shared),
        description.clone(),
    )));
    bindings.extend(directory::binding(shared));
    bindings.extend(shared.bindings.iter().cloned());
    bindings.into()
}

/// `app` with every binding's routes merged in; [`NodeError::Config`] names the binding
/// whose routes overlap a route already there (axum refuses overlapping routes by
/// panicking, caught here: a binding is configuration, never a peer's input).
pub(crate) fn merge_routes(
    mut app: Router,
    bindings: &Bindings,
    site: &Site,
) -> Result<Router, NodeError> {
    for binding in bindings.iter() {
        let routes = binding.routes(site);
        let merged = std::panic::catch_unwind(AssertUnwindSafe(move || app.merge(routes)));
        app = merged.map_err(|panic| {
            let cause = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("overlapping routes");
            NodeError::Config(format!(
                "the binding `{}` cannot be served: {cause}",
                binding.name()
            ))
        })?;
    }
    Ok(app)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_site_writes_http_and_websocket_urls_from_its_base() {
        // What `Site::http_url` and `Site::websocket_url` answer for these bases.
        let base = "http://127.0.0.1:8080/";
        assert_eq!(
            http_url(base, "/actions/a"),
            "http://127.0.0.1:8080/actions/a"
        );
        assert_eq!(
            websocket_url(base, "concord"),
            "ws://127.0.0.1:8080/concord"
        );
        assert_eq!(
            websocket_url("https://agent.example.com/", "/concord"),
            "wss://agent.example.com/concord"
        );
    }
}
