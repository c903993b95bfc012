//! The HTTP server: takes a step per request and records what it was sent.

use std::collections::VecDeque;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri};
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::reply;
use crate::step::Step;

/// A scripted chat-completions server on `127.0.0.1`. Dropping it stops the server.
///
/// Must be started inside a Tokio runtime; the server runs as a task on it.
#[derive(Debug)]
pub struct ScriptServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
}

#[derive(Debug, Default)]
struct Shared {
    script: Mutex<VecDeque<Step>>,
    requests: Mutex<Vec<RecordedRequest>>,
}

/// A request the server received.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RecordedRequest {
    /// The path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// The headers, names in lower case, in the order received.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Value::Null` when it was not JSON; the server then
    /// answered 400 without using a step).
    pub body: Value,
}

impl RecordedRequest {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The body's `messages` array (empty when there is none).
    pub fn messages(&self) -> &[Value] {
        self.body
            .get("messages")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }
}

impl ScriptServer {
    /// Binds `127.0.0.1:0` and serves `script`, one step per request, in order.
    pub async fn start(script: impl IntoIterator<Item = Step>) -> io::Result<ScriptServer> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            script: Mutex::new(script.into_iter().collect()),
            requests: Mutex::default(),
        });
        let router = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .route("/chat/completions", post(chat_completions))
            .with_state(Arc::clone(&shared));
        let (shutdown, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let serve = axum::serve(listener, router).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(error) = serve.await {
                eprintln!("concord-llm-script: server on {addr} failed: {error}");
            }
        });
        Ok(ScriptServer {
            addr,
            shared,
            shutdown: Some(shutdown),
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL to give a client: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Adds a step to the end of the script.
    pub fn push(&self, step: Step) {
        lock(&self.shared.script).push_back(step);
    }

    /// Steps not used yet.
    pub fn remaining(&self) -> usize {
        lock(&self.shared.script).len()
    }

    /// Every request received so far, in order of arrival.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }
}

impl Drop for ScriptServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let parsed = serde_json::from_slice::<Value>(&body);
    let (served, step) = {
        let mut requests = lock(&shared.requests);
        requests.push(RecordedRequest {
            path: uri.path().to_owned(),
            headers: headers
                .iter()
                .map(|(name, value)| {
                    let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                    (name.as_str().to_owned(), value)
                })
                .collect(),
            body: parsed.as_ref().map_or(Value::Null, Clone::clone),
        });
        let step = match parsed {
            Ok(_) => lock(&shared.script).pop_front(),
            Err(_) => None,
        };
        (requests.len(), step)
    };
    let request = match parsed {
        Ok(request) => request,
        Err(error) => {
            let message = format!("concord-llm-script: the request body is not JSON: {error}");
            return json_response(
                StatusCode::BAD_REQUEST,
                reply::error(&message, "invalid_request_error"),
                &[],
            );
        }
    };
    let Some(step) = step else {
        let message = format!(
            "concord-llm-script: script exhausted: request {served} has no step left to answer it"
        );
        return json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            reply::error(&message, "script_exhausted"),
            &[],
        );
    };

    tokio::time::sleep(step.delay).await;
    let (status, body) = reply::answer(&request, &step, served);
    json_response(status, body, &step.headers)
}

/// A response with a JSON content type, this status and body, and these extra headers
/// (any that are not valid HTTP headers are left out).
fn json_response(status: StatusCode, body: String, headers: &[(String, String)]) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    let map = response.headers_mut();
    map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::try_from(name.as_str()),
            HeaderValue::try_from(value.as_str()),
        ) {
            map.append(name, value);
        }
    }
    response
}

/// Locks `mutex`; a panic in another handler does not make the script unusable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
