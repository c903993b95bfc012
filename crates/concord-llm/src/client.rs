//! The client: one call is a request with its retries, recorded in the ledger.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use reqwest::{StatusCode, Url};
use secrecy::ExposeSecret;
use serde::de::DeserializeOwned;

use crate::config::LlmConfig;
use crate::error::{excerpt, ContentError, LlmError, TextPosition};
use crate::message::Message;
use crate::request::{AnswerFormat, ChatRequest, ResponseFormat};
use crate::response::{ChatResponse, FinishReason, TokenUsage};
use crate::retry::server_delay;
use crate::usage::{CallOutcome, CallRecord, Usage};

/// The largest response body read; a larger one is a [`LlmError::MalformedResponse`].
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// How much of a body or an answer an error quotes, in bytes.
const EXCERPT_BYTES: usize = 512;

/// An async client for an OpenAI-compatible chat-completions server.
///
/// Cheap to clone: clones share the connection pool and the [`Usage`] ledger.
///
/// ```no_run
/// use concord_llm::{ChatRequest, LlmClient, LlmConfig, Message};
///
/// # async fn demo() -> Result<(), concord_llm::LlmError> {
/// let client = LlmClient::new(LlmConfig::new("http://127.0.0.1:11434/v1", "llama3.1"))?;
/// let response = client.chat(ChatRequest::new(vec![Message::user("Hello")])).await?;
/// println!("{}", response.content().unwrap_or_default());
/// println!("{:?}", client.usage().summary());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct LlmClient {
    shared: Arc<Shared>,
    usage: Usage,
}

#[derive(Debug)]
struct Shared {
    http: reqwest::Client,
    config: LlmConfig,
    endpoint: Url,
    /// The endpoint as errors show it (without any password in the URL).
    shown_endpoint: String,
}

/// A strictly parsed JSON answer from [`LlmClient::complete_json`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JsonCompletion<T> {
    /// The parsed answer.
    pub value: T,
    /// The response it came from.
    pub response: ChatResponse,
    /// Whether the first answer was rejected and this is the corrected one.
    pub corrected: bool,
    /// How the answer that was used was asked for: with the request's JSON Schema, in JSON
    /// mode, or in the prompt only (the server refused the `response_format`).
    pub format: AnswerFormat,
}

/// One call (a request with its attempts) before it is recorded.
struct Call {
    model: String,
    attempts: u32,
    started: Instant,
    /// The JSON format asked for (`None`: not a JSON request).
    format: Option<AnswerFormat>,
    /// Whether this is a corrective retry.
    corrective: bool,
    /// The `max_tokens` sent.
    max_tokens: Option<u32>,
}

/// How one attempt failed.
enum Failure {
    /// An HTTP error status; retried when 429 or 5xx.
    Status {
        status: StatusCode,
        body: String,
        retry_after: Option<Duration>,
    },
    /// No complete answer within the request timeout; retried.
    Timeout,
    /// Could not connect or lost the connection; retried.
    Transport(reqwest::Error),
    /// Anything else; not retried.
    Final(LlmError),
}

impl Failure {
    fn is_retryable(&self) -> bool {
        match self {
            Failure::Status { status, .. } => {
                *status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
            }
            Failure::Timeout | Failure::Transport(_) => true,
            Failure::Final(_) => false,
        }
    }
}

impl LlmClient {
    /// A client for `config`, recording into a new [`Usage`] ledger.
    ///
    /// Fails with [`LlmError::InvalidConfig`] when the base URL is not an http(s) URL, the
    /// model is empty or the timeout is zero.
    pub fn new(config: LlmConfig) -> Result<Self, LlmError> {
        let endpoint = config.endpoint()?;
        let mut shown = endpoint.clone();
        // Only fails for URLs that cannot have a password, which then have none to hide.
        let _ = shown.set_password(None);
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("concord-llm/", env!("CARGO_PKG_VERSION")));
        let roots = config.root_certificates("ca_cert")?;
        if !roots.is_empty() {
            let roots = roots
                .iter()
                .map(|root| reqwest::Certificate::from_der(root))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|error| LlmError::InvalidConfig {
                    setting: "ca_cert".into(),
                    reason: error.to_string(),
                })?;
            builder = builder.tls_certs_merge(roots);
        }
        let http = builder.build().map_err(|error| LlmError::InvalidConfig {
            setting: "http client".into(),
            reason: error.to_string(),
        })?;
        Ok(LlmClient {
            shared: Arc::new(Shared {
                http,
                config,
                endpoint,
                shown_endpoint: shown.to_string(),
            }),
            usage: Usage::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &LlmConfig {
        &self.shared.config
    }

    /// The ledger every call is recorded in.
    pub fn usage(&self) -> &Usage {
        &self.usage
    }

    /// A client on the same connection pool that records into `usage` instead.
    ///
    /// Give each negotiation `client.with_usage(client.usage().child())` to count its calls
    /// apart while the client's own ledger still sees them all.
    pub fn with_usage(&self, usage: Usage) -> LlmClient {
        LlmClient {
            shared: Arc::clone(&self.shared),
            usage,
        }
    }

    /// Checks, cheaply, that the server answers: one `GET {base_url}/models` with no retry,
    /// bounded by `timeout` (and the configured request timeout, if shorter). Nothing is
    /// recorded in the [`Usage`] ledger and no model is asked anything.
    ///
    /// Any HTTP answer counts as reachable (servers that do not list models answer 404),
    /// except 401 and 403, which say the API key is refused: every chat would fail the same
    /// way.
    ///
    /// # Errors
    /// [`LlmError::Transport`] when the server cannot be reached (refused connection, unknown
    /// host, TLS failure), [`LlmError::Timeout`] when it does not answer in time,
    /// [`LlmError::HttpStatus`] for 401 and 403.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use concord_llm::{LlmClient, LlmConfig};
    ///
    /// # async fn demo() -> Result<(), concord_llm::LlmError> {
    /// let client = LlmClient::new(LlmConfig::new("http://127.0.0.1:11434/v1", "llama3.1"))?;
    /// client.probe(Duration::from_secs(3)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn probe(&self, timeout: Duration) -> Result<(), LlmError> {
        let shared = &self.shared;
        let timeout = timeout.min(shared.config.request_timeout);
        let mut url = shared.endpoint.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop().pop().push("models");
        }
        let mut request = shared.http.get(url);
        if let Some(key) = &shared.config.api_key {
            request = request.bearer_auth(key.expose_secret());
        }
        let failure = match tokio::time::timeout(timeout, request.send()).await {
            Err(_) => Failure::Timeout,
            Ok(Err(error)) if error.is_timeout() => Failure::Timeout,
            Ok(Err(error)) => Failure::Transport(error),
            Ok(Ok(mut response)) => {
                let status = response.status();
                if status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN {
                    return Ok(());
                }
                // A body that trickles in must not stall the probe past its timeout, nor a
                // large one fill the memory.
                let body = tokio::time::timeout(timeout, read_limited(&mut response))
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .flatten()
                    .unwrap_or_default();
                Failure::Status {
                    status,
                    body: self.excerpt(&body),
                    retry_after: None,
                }
            }
        };
        Err(self.probe_failed(failure, timeout))
    }

    /// The models the server lists: one `GET {base_url}/models`, no retry, bounded by
    /// `timeout` (and the configured request timeout, if shorter), the `id` of each entry of
    /// its `data` array (the OpenAI shape, which Ollama, vLLM and llama.cpp also serve).
    /// Nothing is recorded in the [`Usage`] ledger.
    ///
    /// # Errors
    /// [`LlmError::Transport`], [`LlmError::Timeout`], [`LlmError::HttpStatus`] for any
    /// status but 2xx, [`LlmError::MalformedResponse`] when the body is not a model list.
    pub async fn models(&self, timeout: Duration) -> Result<Vec<String>, LlmError> {
        #[derive(serde::Deserialize)]
        struct Listed {
            id: String,
        }
        #[derive(serde::Deserialize)]
        struct List {
            data: Vec<Listed>,
        }
        let shared = &self.shared;
        let timeout = timeout.min(shared.config.request_timeout);
        let mut url = shared.endpoint.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop().pop().push("models");
        }
        let mut request = shared.http.get(url.clone());
        if let Some(key) = &shared.config.api_key {
            request = request.bearer_auth(key.expose_secret());
        }
        let exchange = async {
            let mut response = request.send().await?;
            let status = response.status();
            let bytes = read_limited(&mut response).await?;
            Ok::<_, reqwest::Error>((status, bytes))
        };
        let failure = match tokio::time::timeout(timeout, exchange).await {
            Err(_) => Failure::Timeout,
            Ok(Err(error)) if error.is_timeout() => Failure::Timeout,
            Ok(Err(error)) => Failure::Transport(error),
            Ok(Ok((status, bytes))) if status.is_success() => {
                let shown = {
                    let mut shown = url.clone();
                    let _ = shown.set_password(None);
                    shown.to_string()
                };
                let Some(bytes) = bytes else {
                    return Err(LlmError::MalformedResponse {
                        url: shown,
                        reason: format!("the body is larger than {MAX_RESPONSE_BYTES} bytes"),
                        body: String::new(),
                    });
                };
                return serde_json::from_slice::<List>(&bytes)
                    .map(|list| list.data.into_iter().map(|model| model.id).collect())
                    .map_err(|error| LlmError::MalformedResponse {
                        url: shown,
                        reason: format!("not a model list: {error}"),
                        body: self.excerpt(&bytes),
                    });
            }
            Ok(Ok((status, bytes))) => Failure::Status {
                status,
                body: self.excerpt(bytes.as_deref().unwrap_or_default()),
                retry_after: None,
            },
        };
        Err(self.probe_failed(failure, timeout))
    }

    /// A probe's failure (one attempt, no retry) as the error it gives, naming the probe's
    /// own `timeout`.
    fn probe_failed(&self, failure: Failure, timeout: Duration) -> LlmError {
        match self.give_up(failure, 1) {
            LlmError::Timeout { url, attempts, .. } => LlmError::Timeout {
                url,
                timeout,
                attempts,
            },
            other => other,
        }
    }

    /// Sends `request` (with retries) and returns the server's answer as it is.
    ///
    /// The call is recorded whatever its outcome.
    ///
    /// A cut-off answer (`finish_reason: "length"`) is returned too, and recorded as
    /// [`CallOutcome::Truncated`]; [`LlmClient::chat_json`] and
    /// [`LlmClient::complete_json`] make it an [`LlmError::Truncated`] instead.
    pub async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        let (call, result) = self.call(&request, request.answer_format(), false).await;
        match &result {
            Ok(response) => {
                let outcome = if cut_off(response) {
                    CallOutcome::Truncated
                } else {
                    CallOutcome::Answered
                };
                self.record(&call, response.usage, outcome);
            }
            Err(error) => self.record(&call, None, failure_outcome(error)),
        }
        result
    }

    /// Sends `request`, which asks for JSON, and returns the server's answer with the
    /// format that was used. Parsing the answer is the caller's (use
    /// [`LlmClient::complete_json`] to have it done); set `corrective` when this call asks
    /// again after an unusable answer, so the ledger counts it.
    ///
    /// When the server refuses the request's `response_format` (HTTP 400 or 422 whose body
    /// names `response_format` or the JSON Schema: a server without structured output, or
    /// one that cannot compile the schema), the request is sent again at once without it,
    /// the prompt alone asking for JSON ([`AnswerFormat::PromptOnly`]); both calls are
    /// recorded.
    ///
    /// # Errors
    /// As [`LlmClient::chat`], and [`LlmError::Truncated`] when the answer (without tool
    /// calls) was cut off at `max_tokens`.
    pub async fn chat_json(
        &self,
        mut request: ChatRequest,
        corrective: bool,
    ) -> Result<(ChatResponse, AnswerFormat), LlmError> {
        let (call, response, format) = self.send_json(&mut request, corrective).await?;
        if let Some(error) = truncated(&call, &response) {
            self.record(&call, response.usage, CallOutcome::Truncated);
            return Err(error);
        }
        self.record(&call, response.usage, CallOutcome::Answered);
        Ok((response, format))
    }

    /// Sends a JSON request, without the `response_format` again if the server refuses it;
    /// failed calls are recorded, the answered one is left for the caller to record.
    async fn send_json(
        &self,
        request: &mut ChatRequest,
        corrective: bool,
    ) -> Result<(Call, ChatResponse, AnswerFormat), LlmError> {
        let format = request.answer_format().unwrap_or(AnswerFormat::PromptOnly);
        let (call, result) = self.call(request, Some(format), corrective).await;
        let error = match result {
            Ok(response) => return Ok((call, response, format)),
            Err(error) => error,
        };
        self.record(&call, None, failure_outcome(&error));
        if format == AnswerFormat::PromptOnly || !refuses_format(&error) {
            return Err(error);
        }
        tracing::warn!(
            url = %self.shared.shown_endpoint,
            %format,
            %error,
            "the LLM server refused the response_format; asking for JSON in the prompt only"
        );
        request.response_format = None;
        let (call, result) = self
            .call(request, Some(AnswerFormat::PromptOnly), corrective)
            .await;
        match result {
            Ok(response) => Ok((call, response, AnswerFormat::PromptOnly)),
            Err(error) => {
                self.record(&call, None, failure_outcome(&error));
                Err(error)
            }
        }
    }

    /// Asks for JSON and parses the answer strictly into `T`.
    ///
    /// Unless `request` already asks for JSON (a JSON object or a JSON Schema), it is sent
    /// with `response_format: {"type": "json_object"}`; say in the prompt what JSON you want
    /// (OpenAI refuses JSON mode when no message mentions JSON). The first choice's text must
    /// be exactly one JSON value that deserializes into `T`: no prose, no code fences.
    ///
    /// A request with a JSON Schema ([`ChatRequest::with_json_schema`]) is sent with it;
    /// when the server refuses it (see [`LlmClient::chat_json`]) the request goes again
    /// with the prompt alone asking for JSON, and [`JsonCompletion::format`] says which
    /// was used. An answer cut off at `max_tokens` is [`LlmError::Truncated`], with no
    /// corrective retry (it would be cut again).
    ///
    /// If it is not, the client asks once more with the model's answer and a user message
    /// naming the parse error appended to the conversation; if that answer is also
    /// unusable the result is [`LlmError::InvalidJson`] carrying both errors. HTTP and
    /// transport errors are returned as they are. Every call is recorded, a rejected answer
    /// as [`CallOutcome::InvalidContent`].
    ///
    /// ```no_run
    /// use concord_llm::{ChatRequest, LlmClient, LlmConfig, Message};
    /// use serde::Deserialize;
    ///
    /// #[derive(Deserialize)]
    /// struct Verdict { accept: bool, reason: String }
    ///
    /// # async fn demo(client: LlmClient) -> Result<(), concord_llm::LlmError> {
    /// let request = ChatRequest::new(vec![
    ///     Message::system(r#"Answer with JSON: {"accept": bool, "reason": string}."#),
    ///     Message::user("Should we accept protocol v2?"),
    /// ]);
    /// let verdict = client.complete_json::<Verdict>(request).await?.value;
    /// # let _ = (verdict.accept, verdict.reason);
    /// # Ok(()) }
    /// ```
    pub async fn complete_json<T: DeserializeOwned>(
        &self,
        mut request: ChatRequest,
    ) -> Result<JsonCompletion<T>, LlmError> {
        if !request
            .response_format
            .as_ref()
            .is_some_and(ResponseFormat::is_json)
        {
            request.response_format = Some(ResponseFormat::JsonObject);
        }

        let (parsed, response, format) = self.json_call::<T>(&mut request, false).await?;
        let first = match parsed {
            Ok(value) => {
                return Ok(JsonCompletion {
                    value,
                    response,
                    corrected: false,
                    format,
                })
            }
            Err(error) => error,
        };
        tracing::debug!(error = %first, "LLM answer is not the JSON asked for; asking again");
        request.messages.push(Message::Assistant {
            content: Some(response.content().unwrap_or_default().to_owned()),
            tool_calls: Vec::new(),
        });
        request
            .messages
            .push(Message::user(corrective_prompt(&first)));

        let (parsed, response, format) = self.json_call::<T>(&mut request, true).await?;
        match parsed {
            Ok(value) => Ok(JsonCompletion {
                value,
                response,
                corrected: true,
                format,
            }),
            Err(second) => Err(LlmError::InvalidJson {
                first: Box::new(first),
                second: Box::new(second),
            }),
        }
    }

    /// One call whose answer is parsed into `T` before it is recorded.
    async fn json_call<T: DeserializeOwned>(
        &self,
        request: &mut ChatRequest,
        corrective: bool,
    ) -> Result<(Result<T, ContentError>, ChatResponse, AnswerFormat), LlmError> {
        let (call, response, format) = self.send_json(request, corrective).await?;
        if let Some(error) = truncated(&call, &response) {
            self.record(&call, response.usage, CallOutcome::Truncated);
            return Err(error);
        }
        let parsed = parse_content::<T>(&response);
        let outcome = match parsed {
            Ok(_) => CallOutcome::Answered,
            Err(_) => CallOutcome::InvalidContent,
        };
        self.record(&call, response.usage, outcome);
        Ok((parsed, response, format))
    }

    fn record(&self, call: &Call, tokens: Option<TokenUsage>, outcome: CallOutcome) {
        let tokens = tokens.unwrap_or_default();
        self.usage.record(CallRecord {
            model: call.model.clone(),
            attempts: call.attempts,
            prompt_tokens: tokens.prompt_tokens,
            completion_tokens: tokens.completion_tokens,
            latency: call.started.elapsed(),
            outcome,
            format: call.format,
            corrective: call.corrective,
        });
    }

    /// Sends `request`, retrying as the configuration allows. The configured temperature,
    /// seed and `max_tokens` fill in what the request leaves unset.
    async fn call(
        &self,
        request: &ChatRequest,
        format: Option<AnswerFormat>,
        corrective: bool,
    ) -> (Call, Result<ChatResponse, LlmError>) {
        let config = &self.shared.config;
        let mut wire = request.clone();
        wire.temperature = wire.temperature.or(config.temperature);
        wire.seed = wire.seed.or(config.seed);
        wire.max_tokens = wire.max_tokens.or(config.max_tokens);
        let mut call = Call {
            model: request
                .model
                .clone()
                .unwrap_or_else(|| config.model.clone()),
            attempts: 0,
            started: Instant::now(),
            format,
            corrective,
            max_tokens: wire.max_tokens,
        };
        wire.model = Some(call.model.clone());
        let body = match serde_json::to_vec(&wire) {
            Ok(body) => body,
            Err(error) => return (call, Err(LlmError::InvalidRequest(error))),
        };

        let result = loop {
            call.attempts += 1;
            let failure = match self.attempt(&body).await {
                Ok(response) => break Ok(response),
                Err(failure) => failure,
            };
            let retry_after = match &failure {
                Failure::Status { retry_after, .. } => *retry_after,
                _ => None,
            };
            let too_long = retry_after.is_some_and(|wait| wait > config.backoff.max_retry_after);
            if !failure.is_retryable() || call.attempts > config.max_retries || too_long {
                break Err(self.give_up(failure, call.attempts));
            }
            let wait = retry_after.unwrap_or_else(|| config.backoff.delay(call.attempts));
            tracing::warn!(
                url = %self.shared.shown_endpoint,
                attempt = call.attempts,
                error = %self.give_up(failure, call.attempts),
                ?wait,
                "LLM request failed; retrying"
            );
            tokio::time::sleep(wait).await;
        };
        (call, result)
    }

    /// One HTTP attempt.
    async fn attempt(&self, body: &[u8]) -> Result<ChatResponse, Failure> {
        let shared = &self.shared;
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(key) = &shared.config.api_key {
            let mut value = HeaderValue::try_from(format!("Bearer {}", key.expose_secret()))
                .map_err(|_| {
                    Failure::Final(LlmError::InvalidConfig {
                        setting: "api_key".into(),
                        reason: "contains characters not allowed in an HTTP header".into(),
                    })
                })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let exchange = async {
            let mut response = shared
                .http
                .post(shared.endpoint.clone())
                .headers(headers)
                .body(body.to_vec())
                .send()
                .await?;
            let status = response.status();
            let retry_after = server_delay(
                header(response.headers(), "retry-after"),
                header(response.headers(), "retry-after-ms"),
                SystemTime::now(),
            );
            let bytes = read_limited(&mut response).await?;
            Ok::<_, reqwest::Error>((status, retry_after, bytes))
        };
        let (status, retry_after, bytes) =
            match tokio::time::timeout(shared.config.request_timeout, exchange).await {
                Err(_) => return Err(Failure::Timeout),
                Ok(Err(error)) if error.is_timeout() => return Err(Failure::Timeout),
                Ok(Err(error)) => return Err(Failure::Transport(error)),
                Ok(Ok(exchange)) => exchange,
            };
        let Some(bytes) = bytes else {
            return Err(Failure::Final(self.malformed(
                format!("the body is larger than {MAX_RESPONSE_BYTES} bytes"),
                &[],
            )));
        };
        if !status.is_success() {
            return Err(Failure::Status {
                status,
                body: self.excerpt(&bytes),
                retry_after,
            });
        }
        match ChatResponse::from_json(&bytes) {
            Err(error) => Err(Failure::Final(self.malformed(error.to_string(), &bytes))),
            Ok(response) if response.choices.is_empty() => Err(Failure::Final(
                self.malformed("it has no choices".into(), &bytes),
            )),
            Ok(response) => Ok(response),
        }
    }

    /// The start of a server's body, with the API key removed.
    fn excerpt(&self, bytes: &[u8]) -> String {
        let key = self.shared.config.api_key.as_ref();
        excerpt(bytes, EXCERPT_BYTES, key.map(|key| key.expose_secret()))
    }

    fn malformed(&self, reason: String, body: &[u8]) -> LlmError {
        LlmError::MalformedResponse {
            url: self.shared.shown_endpoint.clone(),
            reason,
            body: self.excerpt(body),
        }
    }

    /// The error for an attempt's failure after `attempts` attempts.
    fn give_up(&self, failure: Failure, attempts: u32) -> LlmError {
        let url = self.shared.shown_endpoint.clone();
        match failure {
            Failure::Status {
                status,
                body,
                retry_after,
            } => LlmError::HttpStatus {
                url,
                status: status.as_u16(),
                body,
                retry_after,
                attempts,
            },
            Failure::Timeout => LlmError::Timeout {
                url,
                timeout: self.shared.config.request_timeout,
                attempts,
            },
            Failure::Transport(error) => LlmError::Transport {
                url,
                attempts,
                cause: error.without_url(),
            },
            Failure::Final(error) => error,
        }
    }
}

/// The value of header `name`, if it is text.
fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name)?.to_str().ok()
}

/// Whether the answer was cut off at `max_tokens` (and called no tool).
fn cut_off(response: &ChatResponse) -> bool {
    response
        .choices
        .first()
        .is_some_and(|choice| choice.finish_reason == Some(FinishReason::Length))
        && response.tool_calls().is_empty()
}

/// The error for a cut-off answer, if `response` is one.
fn truncated(call: &Call, response: &ChatResponse) -> Option<LlmError> {
    if !cut_off(response) {
        return None;
    }
    Some(LlmError::Truncated {
        completion_tokens: response.usage.map_or(0, |usage| usage.completion_tokens),
        max_tokens: call.max_tokens,
        excerpt: excerpt(
            response.content().unwrap_or_default().as_bytes(),
            EXCERPT_BYTES,
            None,
        ),
    })
}

/// Whether `error` is the server refusing the request's `response_format`: HTTP 400 or 422
/// whose body names it or its JSON Schema (llama.cpp: "response_format type must be one of
/// …", "JSON schema error at …"; OpenAI: "Invalid schema for response_format …").
fn refuses_format(error: &LlmError) -> bool {
    let LlmError::HttpStatus { status, body, .. } = error else {
        return false;
    };
    let body = body.to_ascii_lowercase();
    matches!(status, 400 | 422)
        && ["response_format", "json_schema", "json schema"]
            .iter()
            .any(|word| body.contains(word))
}

/// The ledger's name for how a failed call ended.
fn failure_outcome(error: &LlmError) -> CallOutcome {
    match error {
        LlmError::HttpStatus { status, .. } => CallOutcome::HttpStatus(*status),
        LlmError::Timeout { .. } => CallOutcome::Timeout,
        LlmError::Transport { .. } => CallOutcome::Transport,
        LlmError::InvalidJson { .. } => CallOutcome::InvalidContent,
        LlmError::Truncated { .. } => CallOutcome::Truncated,
        LlmError::MalformedResponse { .. } => CallOutcome::MalformedResponse,
        LlmError::NotConfigured | LlmError::InvalidConfig { .. } | LlmError::InvalidRequest(_) => {
            CallOutcome::NotSent
        }
    }
}

/// Reads the first choice's text strictly as `T`.
fn parse_content<T: DeserializeOwned>(response: &ChatResponse) -> Result<T, ContentError> {
    let Some(content) = response.content() else {
        let message = response.message();
        let why = match (
            message.and_then(|message| message.refusal.as_deref()),
            message.is_some_and(|message| !message.tool_calls.is_empty()),
        ) {
            (Some(refusal), _) => format!("the answer has no text; the model refused: {refusal}"),
            (None, true) => "the answer has no text, only tool calls".to_owned(),
            (None, false) => "the answer has no text".to_owned(),
        };
        return Err(ContentError {
            message: why,
            position: None,
            excerpt: String::new(),
        });
    };
    serde_json::from_str(content).map_err(|error| ContentError {
        message: error.to_string(),
        position: TextPosition::of_json_error(content, &error),
        excerpt: excerpt(content.as_bytes(), EXCERPT_BYTES, None),
    })
}

/// The user message that asks the model to correct an answer that failed to parse.
fn corrective_prompt(error: &ContentError) -> String {
    format!(
        "Your previous answer could not be used: {}. Answer again with only the JSON value \
         asked for, exactly as specified: no prose, no code fences.",
        error.message
    )
}

/// The body of `response`, or `None` when it is larger than [`MAX_RESPONSE_BYTES`] (read
/// no further than that).
async fn read_limited(response: &mut reqwest::Response) -> reqwest::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Ok(None);
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Some(bytes))
}
