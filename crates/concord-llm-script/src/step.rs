//! One scripted answer.

use std::time::Duration;

use serde_json::Value;

/// What the server does with one request: a reply, optionally after a delay, with extra
/// headers and exact token counts if you want them.
///
/// ```
/// use std::time::Duration;
/// use concord_llm_script::Step;
///
/// let script = [
///     Step::content("not json at all"),
///     Step::status(503, "overloaded").header("retry-after", "0"),
///     Step::content(r#"{"ok":true}"#).delay(Duration::from_secs(5)), // outlasts a short timeout
/// ];
/// # let _ = script;
/// ```
#[derive(Debug, Clone)]
pub struct Step {
    pub(crate) reply: Reply,
    pub(crate) delay: Duration,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) usage: Option<(u64, u64)>,
    pub(crate) finish_reason: Option<String>,
}

/// The body of a [`Step`]'s answer.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// HTTP 200, an assistant message with this text, `finish_reason: "stop"`.
    Content(String),
    /// HTTP 200, an assistant message calling one function, `finish_reason: "tool_calls"`.
    ToolCall { name: String, arguments: Value },
    /// This status and body, as they are.
    Status { code: u16, body: String },
}

impl Step {
    /// Answer with an assistant message whose content is `text`.
    pub fn content(text: impl Into<String>) -> Self {
        Step::new(Reply::Content(text.into()))
    }

    /// Answer with an assistant message that calls the function `name` with `arguments`
    /// (sent, as OpenAI does, as JSON text in `function.arguments`).
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Step::new(Reply::ToolCall {
            name: name.into(),
            arguments,
        })
    }

    /// Answer with HTTP status `code` and `body` as they are (with
    /// `content-type: application/json`). A status outside 100–999 becomes a 500 that says so.
    pub fn status(code: u16, body: impl Into<String>) -> Self {
        Step::new(Reply::Status {
            code,
            body: body.into(),
        })
    }

    /// Wait `delay` before answering (longer than a client's timeout, to make it time out).
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Add a response header, e.g. `.header("retry-after", "1")`.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Report exactly these token counts in `usage` (ignored for [`Step::status`]).
    pub fn usage(mut self, prompt_tokens: u64, completion_tokens: u64) -> Self {
        self.usage = Some((prompt_tokens, completion_tokens));
        self
    }

    /// Report this `finish_reason` instead of the usual one, e.g. `"length"` for an answer
    /// cut off at `max_tokens` (ignored for [`Step::status`]).
    pub fn finish_reason(mut self, reason: impl Into<String>) -> Self {
        self.finish_reason = Some(reason.into());
        self
    }

    fn new(reply: Reply) -> Self {
        Step {
            reply,
            delay: Duration::ZERO,
            headers: Vec::new(),
            usage: None,
            finish_reason: None,
        }
    }
}
