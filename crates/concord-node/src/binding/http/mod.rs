//! The WoT HTTP binding, on every agent unless turned off
//! ([`NodeBuilder::http_binding`](crate::NodeBuilder::http_binding)): forms following the
//! W3C WoT Profile "HTTP Basic" for every affordance, served on the node's listener behind
//! its admission, through [`ThingAccess`](super::ThingAccess) like the meta-protocol path
//! (who may call, the schemas, the backend call budget, the action table's bounds).
//!
//! | route | op | answer |
//! |---|---|---|
//! | `POST /actions/{name}` | `invokeaction` | a reply or notify action: 200 with its output, 204 when it has none; a progress action: 201 with `Location` of its status resource and its status object (as `GET` answers it) plus `href`; a stream action: the request's chunked body in, the response's chunked body out (`?input=` its JSON input: the form's `{?input}`, a `uriVariables` entry) |
//! | `GET /actions/{name}/{id}` | `queryaction` | 200 `{status, output?, error?, timeRequested, timeEnded?}` |
//! | `DELETE /actions/{name}/{id}` | `cancelaction` | 204 |
//! | `GET /properties` | `readallproperties` (a Thing-level form) | 200, every property the caller may read |
//! | `GET /properties/{name}` | `readproperty` | 200 with its value |
//! | `PUT /properties/{name}` | `writeproperty` | 204 |
//! | `GET /properties/{name}/observable` | `observeproperty` | Server-Sent Events with `Accept: text/event-stream`, else a long poll (`HEAD` 200, `GET` 200 with the next value or 204): `events.rs` |
//! | `GET /events/{name}/subscription` | `subscribeevent` | the same for an event, SSE resuming from `Last-Event-ID` |
//!
//! Every refusal is a problem ([`ProblemResponse`](super::ProblemResponse)): 400 (invalid
//! JSON naming line and column, a schema violation naming its JSON pointer), 401 with
//! ANP's challenge, 403, 404, 405 with `Allow`, 408 (a body slower than
//! `Limits::http_body_timeout`), 409, 413 (a body over `Limits::http_max_body`, chunked or
//! not), 415, 429 and 503 with `Retry-After`. The caller is who the request proves
//! (`http_caller.rs`); request bodies are read by `body.rs`.

mod actions;
mod body;
mod events;
mod properties;
mod status;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use concord_describe::{Form, OneOrMany, Operation, SecurityScheme};
use concord_identity::Caller;
use concord_interact::ActionMode;

use super::http_caller::{self, BearerGrant, HttpRequest};
use super::{Affordance, Binding, ProblemResponse, Site, ThingError};
use crate::admission::ClientKey;
use crate::describe::DIDWBA_SCHEME;
use crate::identity::upgrade;
use crate::node::Shared;

pub(crate) use body::read_body;

/// Where actions are invoked: `POST /actions/{name}`.
pub(crate) const ACTION_PATH: &str = "/actions/{name}";
/// An action's status resource: `GET` and `DELETE /actions/{name}/{id}`.
pub(crate) const ACTION_STATUS_PATH: &str = "/actions/{name}/{id}";
/// Every property: `GET /properties`.
pub(crate) const PROPERTIES_PATH: &str = "/properties";
/// One property: `GET` and `PUT /properties/{name}`.
pub(crate) const PROPERTY_PATH: &str = "/properties/{name}";

/// The query parameter carrying a stream action's JSON input (`?input=`).
pub(crate) const STREAM_INPUT: &str = "input";

/// The name of the bearer scheme in the description, when the agent grants tokens.
pub(crate) const BEARER_SCHEME: &str = "bearer_sc";
/// The name of the scheme "a DID or a bearer token", when the agent has both.
pub(crate) const DID_OR_BEARER_SCHEME: &str = "didwba_or_bearer_sc";

/// The WoT HTTP binding's settings ([`NodeBuilder`](crate::NodeBuilder)): whether it is
/// served, and the bearer tokens the agent grants.
#[derive(Debug, Clone)]
pub(crate) struct HttpSettings {
    pub(crate) enabled: bool,
    pub(crate) grants: Vec<BearerGrant>,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            grants: Vec::new(),
        }
    }
}

/// What the binding's routes serve with: the site (the node's affordances, its base URL,
/// the drain) and the node (its identity, to check callers' credentials; its limits).
pub(crate) struct HttpState {
    pub(crate) site: Site,
    pub(crate) shared: Arc<Shared>,
}

/// The WoT HTTP binding as a [`Binding`].
pub(crate) struct HttpBinding {
    shared: Arc<Shared>,
}

/// The binding, unless the node turned it off.
pub(crate) fn binding(shared: &Arc<Shared>) -> Option<Arc<dyn Binding>> {
    shared.http_binding.enabled.then(|| {
        Arc::new(HttpBinding {
            shared: Arc::clone(shared),
        }) as Arc<dyn Binding>
    })
}

impl Binding for HttpBinding {
    fn name(&self) -> &str {
        "WoT HTTP"
    }

    fn forms(&self, site: &Site, affordance: Affordance<'_>) -> Vec<Form> {
        let security = self.form_security(affordance.name());
        let mut forms = match affordance {
            Affordance::Property { name, property } => {
                let href = site.http_url(&format!("properties/{name}"));
                let mut forms = vec![form(&href, Operation::ReadProperty, "GET")];
                if property.writable {
                    forms.push(form(&href, Operation::WriteProperty, "PUT"));
                }
                if property.observable {
                    let href = site.http_url(&format!("properties/{name}/observable"));
                    forms.extend(push_forms(
                        &href,
                        [Operation::ObserveProperty, Operation::UnobserveProperty],
                    ));
                }
                forms
            }
            Affordance::Action { name, action } => {
                let href = site.http_url(&format!("actions/{name}"));
                let mut invoke = form(&href, Operation::InvokeAction, "POST");
                // A stream action's body is its stream, in both directions; its input is
                // the query's `input` parameter.
                if let Some(stream) = action
                    .stream
                    .as_ref()
                    .filter(|_| action.mode == ActionMode::Stream)
                {
                    invoke.href = format!("{href}{{?{STREAM_INPUT}}}");
                    invoke.content_type = Some(stream.content_type.clone());
                }
                vec![invoke]
            }
            Affordance::Event { name, .. } => {
                let href = site.http_url(&format!("events/{name}/subscription"));
                push_forms(
                    &href,
                    [Operation::SubscribeEvent, Operation::UnsubscribeEvent],
                )
            }
        };
        if let Some(scheme) = security {
            for form in &mut forms {
                form.security = Some(OneOrMany::One(scheme.to_owned()));
            }
        }
        forms
    }

    /// `readallproperties` on `GET /properties` (open to anyone: it answers the properties
    /// the caller may read); `readmultipleproperties` is not served.
    fn thing_forms(&self, site: &Site) -> Vec<Form> {
        let href = site.http_url("properties");
        vec![form(&href, Operation::ReadAllProperties, "GET")]
    }

    /// A stream action's `input`: its JSON input as a string (`{?input}` on its form).
    fn uri_variables(&self, affordance: Affordance<'_>) -> Vec<(String, serde_json::Value)> {
        match affordance {
            Affordance::Action { action, .. } if action.mode == ActionMode::Stream => vec![(
                STREAM_INPUT.to_owned(),
                serde_json::json!({
                    "type": "string",
                    "contentMediaType": "application/json",
                    "description": "the action's input, JSON (none: null)"
                }),
            )],
            _ => Vec::new(),
        }
    }

    fn routes(&self, site: &Site) -> Router {
        let state = Arc::new(HttpState {
            site: site.clone(),
            shared: Arc::clone(&self.shared),
        });
        Router::new()
            .route(ACTION_PATH, only(post(actions::invoke), &["POST"]))
            .route(
                ACTION_STATUS_PATH,
                only(
                    get(status::query).delete(status::cancel),
                    &["GET", "DELETE"],
                ),
            )
            .route(PROPERTIES_PATH, only(get(properties::read_all), &["GET"]))
            .route(
                PROPERTY_PATH,
                only(
                    get(properties::read).put(properties::write),
                    &["GET", "PUT"],
                ),
            )
            .route(
                events::OBSERVE_PATH,
                only(
                    get(events::observe).head(events::observe_head),
                    &["GET", "HEAD"],
                ),
            )
            .route(
                events::EVENT_PATH,
                only(
                    get(events::subscribe).head(events::subscribe_head),
                    &["GET", "HEAD"],
                ),
            )
            .with_state(state)
    }

    fn security_schemes(&self) -> Vec<(String, SecurityScheme)> {
        if self.shared.http_binding.grants.is_empty() {
            return Vec::new();
        }
        let mut schemes = vec![(BEARER_SCHEME.to_owned(), SecurityScheme::bearer())];
        if self.shared.identity.identity().is_some() {
            schemes.push((
                DID_OR_BEARER_SCHEME.to_owned(),
                SecurityScheme::one_of([DIDWBA_SCHEME.to_owned(), BEARER_SCHEME.to_owned()]),
            ));
        }
        schemes
    }
}

impl HttpBinding {
    /// The scheme the HTTP forms of the affordance `name` name: none where anonymous
    /// callers may use it (the description's default says so), else what a caller proves
    /// here (a DID, a granted bearer token, either).
    fn form_security(&self, name: &str) -> Option<&'static str> {
        let identity = &self.shared.identity;
        if identity.permits(&Caller::Anonymous, name) {
            return None;
        }
        let has_did = identity.identity().is_some();
        let grants = !self.shared.http_binding.grants.is_empty();
        match (has_did, grants) {
            (true, true) => Some(DID_OR_BEARER_SCHEME),
            (true, false) => Some(DIDWBA_SCHEME),
            (false, true) => Some(BEARER_SCHEME),
            (false, false) => None,
        }
    }
}

/// A form on `href` for `op` with `method` (`htv:methodName`) and a JSON body.
fn form(href: &str, op: Operation, method: &str) -> Form {
    let mut form = Form::new(href);
    form.op = Some(OneOrMany::One(op));
    form.content_type = Some("application/json".to_owned());
    form.extensions
        .insert("htv:methodName".to_owned(), method.into());
    form
}

/// The forms of an observation or a subscription on `href` for `ops` (the operation and
/// its undoing: closing the answer): Server-Sent Events first (`subprotocol: "sse"`; the
/// answer is `text/event-stream`, but the form's `contentType` is `application/json`, each
/// message's data's: node-wot 0.9.2 decodes a message with the form's `contentType`, and
/// fails on `text/event-stream` there or as a `response.contentType`), then a long poll
/// (no subprotocol: node-wot's fallback), both `GET`.
fn push_forms(href: &str, ops: [Operation; 2]) -> Vec<Form> {
    // `contentType` is each message's data's: node-wot 0.9.2 decodes a message with it
    // (and checks it against a `response.contentType`, so none is given).
    let mut sse = form(href, ops[0], "GET");
    sse.op = Some(OneOrMany::Many(ops.to_vec()));
    sse.subprotocol = Some("sse".to_owned());
    let mut long_poll = form(href, ops[0], "GET");
    long_poll.op = Some(OneOrMany::Many(ops.to_vec()));
    vec![sse, long_poll]
}

/// `methods` served by `router`; any other method answers 405 with `Allow` as a problem.
fn only(
    router: MethodRouter<Arc<HttpState>>,
    methods: &'static [&'static str],
) -> MethodRouter<Arc<HttpState>> {
    router.fallback(move |request: Request| async move {
        ProblemResponse::method_not_allowed(request.method().as_str(), methods)
            .with_instance(request.uri().path())
            .into_response()
    })
}

/// A 200 answer with `value` as its JSON body.
pub(crate) fn json(value: impl serde::Serialize) -> Response {
    match serde_json::to_vec(&value) {
        Ok(body) => (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
        Err(error) => {
            ProblemResponse::new(500, "Unwritable answer", error.to_string()).into_response()
        }
    }
}

/// A request of the binding, its body read and its caller known.
pub(crate) struct Admitted {
    pub(crate) caller: Caller,
    pub(crate) remote: SocketAddr,
    pub(crate) parts: Parts,
    pub(crate) body: bytes::Bytes,
}

impl Admitted {
    /// The request's path: the `instance` of its problems.
    pub(crate) fn path(&self) -> &str {
        self.parts.uri.path()
    }

    /// The problem answering `error` for this request: an anonymous caller the `allow`
    /// rules refuse gets 401 with ANP's challenge (and a `Bearer` one where the agent
    /// grants tokens), so that it knows how to prove who it is; anything else answers as
    /// [`ProblemResponse::from`] says.
    pub(crate) fn refusal(&self, state: &HttpState, error: &ThingError) -> ProblemResponse {
        let problem = match (error, &self.caller) {
            (ThingError::Forbidden { .. }, Caller::Anonymous) => {
                let url = state.site.http_url(self.path());
                let realm = url::Url::parse(&url)
                    .ok()
                    .and_then(|url| url.host_str().map(str::to_owned))
                    .unwrap_or_default();
                let granting = !state.shared.http_binding.grants.is_empty();
                upgrade::Refusal::anonymous(&realm, granting).into_problem()
            }
            _ => ProblemResponse::from(error),
        };
        problem.with_instance(self.path())
    }
}

/// Reads `request`'s body (bounded in size and time) and finds its caller: what every route
/// of the binding does first. `Err` is the answer (413, 408, 401, 429, 503).
pub(crate) async fn admit(state: &HttpState, request: Request) -> Result<Admitted, Response> {
    admit_within(state, request, state.shared.limits.http_max_body).await
}

/// [`admit`] with a body of at most `limit` bytes (the directory's `max_td_bytes`).
pub(crate) async fn admit_within(
    state: &HttpState,
    request: Request,
    limit: usize,
) -> Result<Admitted, Response> {
    let (parts, body) = request.into_parts();
    let limits = &state.shared.limits;
    let body = read_body(&parts.headers, body, limit, limits.http_body_timeout)
        .await
        .map_err(|problem| problem.with_instance(parts.uri.path()).into_response())?;
    let (caller, remote) = identify(state, &parts, &body).await?;
    Ok(Admitted {
        caller,
        remote,
        parts,
        body,
    })
}

/// Finds the caller of a request whose body is a stream, left unread: its signature
/// covers the method, the URL and the authority, not the body. `Err` is the answer.
pub(crate) async fn admit_stream(
    state: &HttpState,
    request: Request,
) -> Result<(Admitted, axum::body::Body), Response> {
    let (parts, body) = request.into_parts();
    let (caller, remote) = identify(state, &parts, b"").await?;
    let admitted = Admitted {
        caller,
        remote,
        parts,
        body: bytes::Bytes::new(),
    };
    Ok((admitted, body))
}

/// The caller of the request `parts` with `body`, and its client address.
async fn identify(
    state: &HttpState,
    parts: &Parts,
    body: &[u8],
) -> Result<(Caller, SocketAddr), Response> {
    let refused =
        |problem: ProblemResponse| problem.with_instance(parts.uri.path()).into_response();
    let remote = parts
        .extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
        .map(|info| info.0)
        .ok_or_else(|| {
            refused(ProblemResponse::new(
                500,
                "No client address",
                "the request carries no client address",
            ))
        })?;
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or(parts.uri.path(), |path| path.as_str());
    let url = state.site.http_url(path_and_query);
    let request = HttpRequest {
        client: ClientKey::of(remote.ip()),
        method: parts.method.as_str(),
        url: &url,
        headers: &parts.headers,
        body,
    };
    let caller = http_caller::identify(
        &state.shared.identity,
        &state.shared.http_binding.grants,
        &request,
    )
    .await
    .map_err(refused)?;
    Ok((caller, remote))
}
