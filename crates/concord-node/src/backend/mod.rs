//! Action backends beside Rust closures: a command per call, a POST per call.
//!
//! Both read application errors the same way ([`report`]: our `{"error": {"code",
//! "message"}}` object and RFC 9457 problem details), and both keep their own failures to
//! themselves: the caller gets a status and [`FAILED`] or [`TIMED_OUT`], our log (`warn`,
//! in the node's `action` span) gets the details.

use concord_proto::TextPosition;

pub(crate) mod exec;
pub(crate) mod http;
pub(crate) mod lines;
pub(crate) mod report;

/// What the caller is told when a backend failed (502): nothing of the failure itself.
pub(crate) const FAILED: &str = "the action failed";

/// What the caller is told when a backend did not answer in time (504).
pub(crate) const TIMED_OUT: &str = "the action did not finish in time";

/// At most this many characters of a backend's output are quoted in an error.
const PREVIEW_CHARS: usize = 120;

/// The start of `bytes` as text, for error messages.
pub(crate) fn preview(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    if text.is_empty() {
        return "(nothing)".to_owned();
    }
    let shown: String = text.chars().take(PREVIEW_CHARS).collect();
    if shown.len() < text.len() {
        format!("{shown:?}…")
    } else {
        format!("{shown:?}")
    }
}

/// A JSON parse error with its position in `text`, the bytes serde_json was reading.
pub(crate) fn describe_json_error(error: &serde_json::Error, text: &[u8]) -> String {
    let what = match error.classify() {
        serde_json::error::Category::Eof => "unexpected end",
        serde_json::error::Category::Syntax => "syntax error",
        serde_json::error::Category::Data => "wrong data",
        serde_json::error::Category::Io => "read error",
    };
    match TextPosition::of_json_error(text, error) {
        Some(position) => format!("{what} at {position}"),
        None => what.to_owned(),
    }
}
