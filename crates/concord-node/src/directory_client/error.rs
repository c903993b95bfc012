//! What a directory answered that was not what we asked for, typed.

use std::time::Duration;

use serde::Deserialize;

/// Why a [`Directory`](crate::Directory) request failed. Each variant names the URL.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DirectoryError {
    /// The directory's URL, an id or a query cannot make a request URL.
    #[error("directory URL {url:?}: {reason}")]
    Url {
        /// The URL (or the base it was joined to).
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client could not be built (TLS configuration).
    #[error("directory client: {0}")]
    Client(String),
    /// No answer: the connection failed or broke.
    #[error("directory {url} is unreachable: {cause}")]
    Unreachable {
        /// The request's URL.
        url: String,
        /// The transport's error, with its causes.
        cause: String,
    },
    /// No complete answer within [`DirectoryClientLimits::timeout`](crate::DirectoryClientLimits::timeout).
    #[error("directory {url} did not answer within {after:?}")]
    Timeout {
        /// The request's URL.
        url: String,
        /// The timeout.
        after: Duration,
    },
    /// The directory answered with an error status (problem details when it sent them).
    #[error("directory {url} answered {status}{}", problem_text(.problem))]
    Status {
        /// The request's URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The RFC 9457 problem details of the answer, when it carried them.
        problem: Option<Box<Problem>>,
        /// The `Retry-After` of a 429 or 503, in seconds, when given.
        retry_after: Option<Duration>,
    },
    /// The answer's body was larger than [`DirectoryClientLimits::max_response_bytes`](crate::DirectoryClientLimits::max_response_bytes).
    #[error("directory {url}: the answer is larger than {limit} bytes")]
    TooLarge {
        /// The request's URL.
        url: String,
        /// The limit.
        limit: usize,
    },
    /// A listing went on for more than [`DirectoryClientLimits::max_pages`](crate::DirectoryClientLimits::max_pages) pages, or its
    /// `next` link went back to a page already read.
    #[error("directory {url}: the listing {reason}")]
    Pages {
        /// The listing's first URL.
        url: String,
        /// `has more than N pages` or `links back to a page it already gave`.
        reason: String,
    },
    /// A listing's pages, each within its own bounds, added up to more bytes than
    /// [`DirectoryClientLimits::max_listing_bytes`](crate::DirectoryClientLimits::max_listing_bytes)
    /// or more entries than
    /// [`DirectoryClientLimits::max_listing_items`](crate::DirectoryClientLimits::max_listing_items):
    /// no further page is read.
    #[error("directory {url}: the listing exceeds {limit} ({value})")]
    ListingTooLarge {
        /// The listing's first URL.
        url: String,
        /// The limit hit: `max_listing_bytes` or `max_listing_items`.
        limit: &'static str,
        /// Its value.
        value: usize,
    },
    /// A `Link: rel="next"` pointed away from the directory (another scheme, host or port):
    /// not followed, so that a directory cannot send our signed requests elsewhere.
    #[error("directory {url}: its next page {link:?} is on another origin; not followed")]
    ForeignLink {
        /// The page that named it.
        url: String,
        /// The link.
        link: String,
    },
    /// The answer was not what the API defines (not JSON, not an array, no `Location`…).
    #[error("directory {url}: {reason}")]
    Invalid {
        /// The request's URL.
        url: String,
        /// What was wrong.
        reason: String,
    },
    /// A description to register has no `id`, and the directory gave none (`Location`).
    #[error("the description to register has no `id` (an absolute URI)")]
    NoId,
}

impl DirectoryError {
    /// The HTTP status the directory answered with, when it answered with an error status.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The problem details of an error status, when the directory sent them.
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            Self::Status { problem, .. } => problem.as_deref(),
            _ => None,
        }
    }

    /// Whether trying again later may succeed: the directory away, slow or overloaded
    /// (no answer, a timeout, 408, 425, 429, 5xx) or an answer we could not read. A refusal
    /// (any other 4xx) would be answered the same way again.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Unreachable { .. }
            | Self::Timeout { .. }
            | Self::TooLarge { .. }
            | Self::Invalid { .. } => true,
            Self::Status { status, .. } => matches!(status, 408 | 425 | 429) || *status >= 500,
            _ => false,
        }
    }

    /// How long the directory asked us to wait (`Retry-After`, in seconds), when it did.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// RFC 9457 problem details, as a WoT Discovery directory sends them
/// (`application/problem+json`), with the directory's `validationErrors`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Problem {
    /// The problem type (a URI).
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// A short summary.
    pub title: Option<String>,
    /// The HTTP status it repeats.
    pub status: Option<u16>,
    /// What went wrong this time.
    pub detail: Option<String>,
    /// The request it is about.
    pub instance: Option<String>,
    /// What a directory found invalid in a description: a JSON pointer (or path) and why.
    #[serde(default)]
    pub validation_errors: Vec<ValidationError>,
}

/// One problem a directory found in a description (`validationErrors[]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct ValidationError {
    /// Where: a JSON pointer or path into the description.
    #[serde(default)]
    pub field: String,
    /// What is wrong there.
    #[serde(default)]
    pub description: String,
}

impl Problem {
    /// Problem details from an answer's body; `None` when it is not a JSON object.
    pub(crate) fn parse(body: &[u8]) -> Option<Self> {
        serde_json::from_slice::<Self>(body).ok()
    }
}

/// The most characters of each of a directory's texts an error message repeats.
const MAX_TEXT_CHARS: usize = 300;

/// A directory's text as an error repeats it: one line, at most [`MAX_TEXT_CHARS`].
fn said(text: &str) -> String {
    let mut line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_TEXT_CHARS)
        .collect();
    if text.chars().nth(MAX_TEXT_CHARS).is_some() {
        line.push('…');
    }
    line
}

fn problem_text(problem: &Option<Box<Problem>>) -> String {
    let Some(problem) = problem else {
        return String::new();
    };
    let mut text = String::new();
    if let Some(title) = &problem.title {
        text.push_str(&format!(": {}", said(title)));
    }
    if let Some(detail) = &problem.detail {
        text.push_str(&format!(": {}", said(detail)));
    }
    for error in problem.validation_errors.iter().take(8) {
        text.push_str(&format!(
            "; {}: {}",
            said(&error.field),
            said(&error.description)
        ));
    }
    if problem.validation_errors.len() > 8 {
        text.push_str(&format!(
            "; and {} more",
            problem.validation_errors.len() - 8
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directorys_texts_are_cut_to_one_short_line() {
        let problem = Problem {
            title: Some(format!("bad\n\u{1b}[31m{}", "x".repeat(1000))),
            ..Problem::default()
        };
        let text = problem_text(&Some(Box::new(problem)));
        assert!(!text.contains('\n') && !text.contains('\u{1b}'), "{text}");
        assert!(text.chars().count() < MAX_TEXT_CHARS + 10, "{text}");
        assert!(text.ends_with('…'));
    }
}
