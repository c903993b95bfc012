//! The `http` backend: a POST per call, input JSON as the body, output JSON as the answer.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rustls::pki_types::CertificateDer;

use serde_json::Value;

use crate::action::{Action, ActionError, ActionFuture};
use crate::backend::{describe_json_error, preview};
use crate::config::human;
use concord_llm::with_causes;

/// POSTs the action's input JSON to a URL per call; the response body is the output JSON.
///
/// | the service… | the caller gets |
/// |---|---|
/// | answers 2xx with one JSON value | that value |
/// | cannot be reached | 502 naming the URL and the error |
/// | answers 4xx | the same status, with the body's `message` or `error` (or its start) |
/// | answers 5xx or anything else | 502 with the status and the start of the body |
/// | answers 2xx with a body that is not JSON | 502 with the parse error |
/// | answers with more than `max_response_bytes` | 502 naming the limit |
/// | takes longer than `timeout` | 504 |
///
/// ```
/// use std::time::Duration;
/// use concord_node::HttpAction;
///
/// let action = HttpAction::new("http://127.0.0.1:9000/product-info")?
///     .timeout(Duration::from_secs(5));
/// # Ok::<(), concord_node::NodeError>(())
/// ```
#[derive(Debug, Clone)]
pub struct HttpAction {
    inner: Arc<HttpSpec>,
}

#[derive(Debug, Clone)]
struct HttpSpec {
    url: url::Url,
    /// Roots trusted on top of the system's.
    extra_roots: Vec<CertificateDer<'static>>,
    /// Built on the first call, once the roots are known (it reads the system's trust
    /// store, so it is built once).
    client: OnceLock<Result<reqwest::Client, String>>,
    timeout: Duration,
    max_response_bytes: usize,
}

/// Default time one POST may take.
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(30);

impl HttpAction {
    /// POSTs to `url` (`http` or `https`).
    ///
    /// # Errors
    /// [`NodeError::Config`](crate::NodeError::Config) when `url` is not an absolute
    /// `http(s)` URL.
    pub fn new(url: &str) -> Result<Self, crate::NodeError> {
        let parsed = url::Url::parse(url).map_err(|error| {
            crate::NodeError::Config(format!("http backend URL {url:?}: {error}"))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(crate::NodeError::Config(format!(
                "http backend URL {url:?} must start with http:// or https://"
            )));
        }
        Ok(Self {
            inner: Arc::new(HttpSpec {
                url: parsed,
                extra_roots: Vec::new(),
                client: OnceLock::new(),
                timeout: DEFAULT_HTTP_TIMEOUT,
                max_response_bytes: super::exec::DEFAULT_MAX_OUTPUT_BYTES,
            }),
        })
    }

    /// How long one call may take (default 30 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        Arc::make_mut(&mut self.inner).timeout = timeout;
        self
    }

    /// Cap on the response body per call (default 10 MiB).
    pub fn max_response_bytes(mut self, bytes: usize) -> Self {
        Arc::make_mut(&mut self.inner).max_response_bytes = bytes;
        self
    }

    /// Also trusts these root certificates (PEM) for an `https://` backend, on top of the
    /// system's trust store: a service whose certificate a private CA signed. The same
    /// verification the node uses for its peers.
    ///
    /// # Errors
    /// [`NodeError::Config`](crate::NodeError::Config) when the PEM holds no certificate.
    pub fn trust_root_certificates_pem(
        mut self,
        pem: impl AsRef<[u8]>,
    ) -> Result<Self, crate::NodeError> {
        let roots = crate::tls::parse_roots(pem.as_ref()).map_err(crate::NodeError::Config)?;
        Arc::make_mut(&mut self.inner).extra_roots = roots;
        Ok(self)
    }
}

impl Action for HttpAction {
    fn call(&self, input: Value) -> ActionFuture {
        let spec = Arc::clone(&self.inner);
        Box::pin(async move {
            match tokio::time::timeout(spec.timeout, spec.post(&input)).await {
                Ok(result) => result,
                Err(_) => Err(ActionError::timeout(format!(
                    "{} did not answer within {}",
                    spec.url,
                    human(spec.timeout)
                ))),
            }
        })
    }
}

impl HttpSpec {
    async fn post(&self, input: &Value) -> Result<Value, ActionError> {
        let url = &self.url;
        // JSON of a `Value` cannot fail to serialise.
        let body = serde_json::to_vec(input).unwrap_or_default();
        let client = self
            .client
            .get_or_init(|| {
                crate::tls::client_config(self.extra_roots.clone())
                    .and_then(crate::tls::http_client)
            })
            .as_ref()
            .map_err(|error| ActionError::bad_gateway(format!("cannot reach {url}: {error}")))?;
        let mut response = client
            .post(url.clone())
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|error| {
                let error = with_causes(&error.without_url());
                ActionError::bad_gateway(format!("cannot reach {url}: {error}"))
            })?;
        let status = response.status();
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|error| {
            let error = with_causes(&error.without_url());
            ActionError::bad_gateway(format!("reading the answer of {url} failed: {error}"))
        })? {
            if bytes.len() + chunk.len() > self.max_response_bytes {
                return Err(ActionError::bad_gateway(format!(
                    "{url} answered more than the limit of {} bytes",
                    self.max_response_bytes
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        if status.is_success() {
            return serde_json::from_slice(&bytes).map_err(|error| {
                ActionError::bad_gateway(format!(
                    "{url} answered {status} with a body that is not JSON ({}); it starts: {}",
                    describe_json_error(&error),
                    preview(&bytes)
                ))
            });
        }
        if status.is_client_error() {
            return Err(ActionError::new(status.as_u16(), error_message(&bytes)));
        }
        Err(ActionError::bad_gateway(format!(
            "{url} answered {status}: {}",
            preview(&bytes)
        )))
    }
}

/// The `message` or `error` of a JSON error body, else the start of the body.
fn error_message(body: &[u8]) -> String {
    let from_json = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|value| {
            ["message", "error"]
                .iter()
                .find_map(|key| match &value[*key] {
                    Value::String(text) => Some(text.clone()),
                    Value::Object(inner) => inner
                        .get("message")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    _ => None,
                })
        });
    from_json.unwrap_or_else(|| preview(body))
}
