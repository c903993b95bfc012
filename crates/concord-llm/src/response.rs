//! The body of a chat-completions response.

use serde::{Deserialize, Deserializer, Serialize};

use crate::message::ToolCall;

/// A chat-completions response.
///
/// Decoding is lenient about fields servers differ on (`id`, `model`, `usage` may be
/// missing) and strict about the rest: `choices` must be there.
///
/// ```
/// use concord_llm::{ChatResponse, FinishReason};
///
/// let response = ChatResponse::from_json(br#"{
///     "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
///     "choices": [{"index": 0, "finish_reason": "stop",
///                  "message": {"role": "assistant", "content": "{\"ok\":true}"}}],
///     "usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}
/// }"#).unwrap();
/// assert_eq!(response.content(), Some("{\"ok\":true}"));
/// assert_eq!(response.choices[0].finish_reason, Some(FinishReason::Stop));
/// assert_eq!(response.usage.unwrap().prompt_tokens, 12);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChatResponse {
    /// The server's id for this completion.
    #[serde(default, deserialize_with = "null_as_default")]
    pub id: String,
    /// The model that answered, as the server names it.
    #[serde(default, deserialize_with = "null_as_default")]
    pub model: String,
    /// The answers; there is one unless the request asked for more.
    pub choices: Vec<Choice>,
    /// Tokens used, when the server reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
}

impl ChatResponse {
    /// Decodes a response body.
    pub fn from_json(body: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(body)
    }

    /// The first choice's message, if there is a choice.
    pub fn message(&self) -> Option<&AssistantMessage> {
        self.choices.first().map(|choice| &choice.message)
    }

    /// The first choice's text, if it has any.
    pub fn content(&self) -> Option<&str> {
        self.message()?.content.as_deref()
    }

    /// The first choice's tool calls (empty when it called none).
    pub fn tool_calls(&self) -> &[ToolCall] {
        self.message().map_or(&[], |message| &message.tool_calls)
    }
}

/// One answer in a [`ChatResponse`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Choice {
    /// The answer's position among the choices.
    #[serde(default, deserialize_with = "null_as_default")]
    pub index: u32,
    /// The answer.
    pub message: AssistantMessage,
    /// Why the model stopped, when the server says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
}

/// The model's message in a [`Choice`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AssistantMessage {
    /// The text, absent when the model only called tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The tools the model called.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tool_calls: Vec<ToolCall>,
    /// The model's refusal to answer, when it refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
}

/// Why the model stopped writing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
#[non_exhaustive]
pub enum FinishReason {
    /// It finished its answer (`stop`).
    Stop,
    /// It hit `max_tokens` or the context length (`length`): the answer is cut off.
    Length,
    /// It called tools (`tool_calls`).
    ToolCalls,
    /// A content filter removed the answer (`content_filter`).
    ContentFilter,
    /// Any other reason, as the server wrote it.
    Other(String),
}

impl From<String> for FinishReason {
    fn from(reason: String) -> Self {
        match reason.as_str() {
            "stop" => FinishReason::Stop,
            "length" => FinishReason::Length,
            "tool_calls" => FinishReason::ToolCalls,
            "content_filter" => FinishReason::ContentFilter,
            _ => FinishReason::Other(reason),
        }
    }
}

impl From<FinishReason> for String {
    fn from(reason: FinishReason) -> Self {
        match reason {
            FinishReason::Stop => "stop".into(),
            FinishReason::Length => "length".into(),
            FinishReason::ToolCalls => "tool_calls".into(),
            FinishReason::ContentFilter => "content_filter".into(),
            FinishReason::Other(reason) => reason,
        }
    }
}

/// Tokens used by one completion, as the server reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TokenUsage {
    /// Tokens in the request (the prompt).
    #[serde(default, deserialize_with = "null_as_default")]
    pub prompt_tokens: u64,
    /// Tokens in the answer.
    #[serde(default, deserialize_with = "null_as_default")]
    pub completion_tokens: u64,
    /// Both together.
    #[serde(default, deserialize_with = "null_as_default")]
    pub total_tokens: u64,
}

/// Reads `null` as the default value: servers differ on whether they omit a field or send null.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}
