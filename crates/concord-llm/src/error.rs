//! What can go wrong talking to an LLM.

use std::time::Duration;

/// An error from configuring or calling an LLM.
///
/// No variant ever holds the API key: server text quoted in an error has the key removed.
///
/// The message says everything, the underlying error included, and there is no
/// [`source`](std::error::Error::source): a chain printed in full says each cause once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// No LLM is configured; see [`LlmConfig::from_env`](crate::LlmConfig::from_env).
    #[error(
        "no LLM is configured: set CONCORD_LLM_BASE_URL and CONCORD_LLM_MODEL \
         (and CONCORD_LLM_API_KEY if the server needs one), or OPENAI_API_KEY"
    )]
    NotConfigured,

    /// A setting is unusable.
    #[error("invalid LLM setting {setting}: {reason}")]
    InvalidConfig {
        /// The setting (a config field or an environment variable).
        setting: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The request could not be encoded as JSON.
    #[error("the chat request cannot be encoded as JSON: {0}")]
    InvalidRequest(serde_json::Error),

    /// The server answered with an HTTP error status (after any retries).
    #[error("{url} answered HTTP {status} (attempt {attempts}): {body}")]
    HttpStatus {
        /// The URL called.
        url: String,
        /// The status code.
        status: u16,
        /// The start of the response body.
        body: String,
        /// The wait the server asked for, if it asked.
        retry_after: Option<Duration>,
        /// Attempts made.
        attempts: u32,
    },

    /// No answer within the request timeout (on the last attempt).
    #[error("{url} did not answer within {timeout:?} (attempt {attempts})")]
    Timeout {
        /// The URL called.
        url: String,
        /// The per-attempt timeout.
        timeout: Duration,
        /// Attempts made.
        attempts: u32,
    },

    /// Could not connect, or the connection failed (on the last attempt).
    ///
    /// Only with the `client` feature: nothing else talks to a server.
    #[cfg(feature = "client")]
    #[cfg_attr(docsrs, doc(cfg(feature = "client")))]
    #[error("could not talk to {url} (attempt {attempts}): {}", with_causes(.cause))]
    Transport {
        /// The URL called.
        url: String,
        /// Attempts made.
        attempts: u32,
        /// What failed (without the URL, which `url` gives).
        cause: reqwest::Error,
    },

    /// The server's answer is not a chat completion.
    #[error("{url} answered with something that is not a chat completion: {reason}; body: {body}")]
    MalformedResponse {
        /// The URL called.
        url: String,
        /// What is wrong with it.
        reason: String,
        /// The start of the body.
        body: String,
    },

    /// The model's answer was cut off: the server stopped it at `max_tokens` (or the
    /// context length) with `finish_reason: "length"`. Asking again the same way would be
    /// cut again, so there is no corrective retry: raise `max_tokens` or ask for less.
    #[error(
        "the model's answer was cut off after {completion_tokens} tokens \
         (finish_reason: length; max_tokens {}); answer begins {excerpt:?}",
        max_tokens.map_or_else(|| "unset".to_owned(), |n| n.to_string())
    )]
    Truncated {
        /// Answer tokens the server reported (0 when it reported none).
        completion_tokens: u64,
        /// The `max_tokens` the request carried, if any.
        max_tokens: Option<u32>,
        /// The start of the cut answer.
        excerpt: String,
    },

    /// The model's content was not the JSON asked for, twice: once in its first answer and
    /// again after being told what was wrong.
    #[error("the model's answer is not the JSON asked for: {first}; after correction: {second}")]
    InvalidJson {
        /// Why the first answer was rejected.
        first: Box<ContentError>,
        /// Why the corrected answer was rejected.
        second: Box<ContentError>,
    },
}

pub use concord_text::TextPosition;

/// Why a model's answer could not be read as the JSON asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (answer begins {excerpt:?})")]
#[non_exhaustive]
pub struct ContentError {
    /// The parse error, with its line and column (e.g. "expected value at line 1 column 1").
    pub message: String,
    /// Where in the answer (the column counted in characters); `None` when the answer had
    /// no text at all.
    pub position: Option<TextPosition>,
    /// The start of the answer.
    pub excerpt: String,
}

/// `error` and the errors under it as one text, `what: why: why`, each said once. A reqwest
/// or WebSocket error's own message often names only the step that failed (sending the
/// request), the errors under it say why (connection refused, TLS, ...).
///
/// ```
/// use std::{error::Error, fmt, io};
///
/// #[derive(Debug)]
/// struct Sending(io::Error);
/// impl fmt::Display for Sending {
///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
///         f.write_str("error sending request")
///     }
/// }
/// impl Error for Sending {
///     fn source(&self) -> Option<&(dyn Error + 'static)> {
///         Some(&self.0)
///     }
/// }
///
/// let refused = Sending(io::Error::new(io::ErrorKind::ConnectionRefused, "connection refused"));
/// assert_eq!(
///     concord_llm::with_causes(&refused),
///     "error sending request: connection refused"
/// );
/// ```
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        next = cause.source();
    }
    text
}

/// The first `limit` bytes (at most) of `bytes` as text, cut at a character boundary, with
/// `secret` (the API key) replaced wherever it appears.
#[cfg(feature = "client")]
pub(crate) fn excerpt(bytes: &[u8], limit: usize, secret: Option<&str>) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = match secret.filter(|secret| !secret.is_empty()) {
        Some(secret) => text.replace(secret, "[REDACTED]"),
        None => text.into_owned(),
    };
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(all(test, feature = "client"))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn excerpt_redacts_the_key_and_cuts_at_a_character() {
        assert_eq!(
            excerpt(b"bad key sk-123 given", 100, Some("sk-123")),
            "bad key [REDACTED] given"
        );
        assert_eq!(excerpt("héllo".as_bytes(), 2, None), "h…");
        assert_eq!(excerpt(b"\xff\xfeabc", 100, None), "\u{fffd}\u{fffd}abc");
    }

    proptest! {
        #[test]
        fn excerpt_is_bounded_and_never_shows_the_key(
            bytes in proptest::collection::vec(any::<u8>(), 0..300),
            limit in 0usize..200,
            key in "[a-z0-9-]{1,12}",
        ) {
            let mut body = bytes.clone();
            body.extend_from_slice(key.as_bytes());
            let out = excerpt(&body, limit, Some(&key));
            prop_assert!(out.len() <= limit + '…'.len_utf8());
            prop_assert!(!out.contains(&key));
        }
    }
}
