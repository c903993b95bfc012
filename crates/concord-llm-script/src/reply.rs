//! The bodies the server answers with.

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::step::{Reply, Step};

/// The status and body that answer `request` (the `n`th request received, from 1) by `step`.
pub(crate) fn answer(request: &Value, step: &Step, n: usize) -> (StatusCode, String) {
    let (message, finish_reason, answer_text) = match &step.reply {
        Reply::Status { code, body } => {
            return match StatusCode::from_u16(*code) {
                Ok(status) => (status, body.clone()),
                Err(_) => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    error(
                        &format!("concord-llm-script: the script's status {code} is invalid"),
                        "script_error",
                    ),
                ),
            }
        }
        Reply::Content(text) => (
            json!({"role": "assistant", "content": text}),
            "stop",
            text.clone(),
        ),
        Reply::ToolCall { name, arguments } => {
            let arguments = arguments.to_string();
            let message = json!({
                "role": "assistant",
                "content": null,
                "tool_calls": [{
                    "id": format!("call_{n}"),
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }],
            });
            (message, "tool_calls", arguments)
        }
    };
    let finish_reason = step.finish_reason.as_deref().unwrap_or(finish_reason);
    let (prompt_tokens, completion_tokens) = step
        .usage
        .unwrap_or_else(|| (prompt_words(request), words(&answer_text)));
    let completion = json!({
        "id": format!("chatcmpl-script-{n}"),
        "object": "chat.completion",
        "created": 0,
        "model": request.get("model").cloned().unwrap_or(Value::Null),
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    });
    (StatusCode::OK, completion.to_string())
}

/// An OpenAI-style error body.
pub(crate) fn error(message: &str, kind: &str) -> String {
    json!({"error": {"message": message, "type": kind}}).to_string()
}

/// Words in the text content of the request's messages.
fn prompt_words(request: &Value) -> u64 {
    request
        .get("messages")
        .and_then(Value::as_array)
        .map_or(0, |messages| {
            messages
                .iter()
                .filter_map(|message| message.get("content")?.as_str())
                .map(words)
                .sum()
        })
}

fn words(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}
