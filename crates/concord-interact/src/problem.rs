//! RFC 9457 problem details, the `error` member of a message.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::message::{check_text, MessageError};
use crate::Limits;

/// The problem types this layer answers with, each a `urn:concord:interact:` URI with an
/// HTTP-like status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProblemType {
    /// The message could not be decoded or breaks a field rule (400).
    BadMessage,
    /// No open request has this `correlationID` (404).
    UnknownCorrelationId,
    /// No such event is declared (404).
    UnknownEvent,
    /// No such action id (404).
    UnknownAction,
    /// The action already reached its terminal state (409).
    ActionFinished,
    /// A progress value out of range or lower than the previous one (400).
    BadProgress,
    /// Events were not delivered: the problem's `from` and `to` extension members name the
    /// missed event ids, both inclusive (a notification, the subscription goes on).
    Gap,
    /// The subscriber fell too far behind and was dropped (429).
    SubscriberDropped,
    /// A bound of [`Limits`] was reached (429).
    LimitReached,
    /// The request conflicts with the current state (409), e.g. a second subscription.
    Conflict,
    /// A backend the answer needs could not be reached (503), e.g. shared action records.
    Unavailable,
}

impl ProblemType {
    /// The `type` URI.
    pub fn uri(self) -> &'static str {
        match self {
            Self::BadMessage => "urn:concord:interact:bad-message",
            Self::UnknownCorrelationId => "urn:concord:interact:unknown-correlation-id",
            Self::UnknownEvent => "urn:concord:interact:unknown-event",
            Self::UnknownAction => "urn:concord:interact:unknown-action",
            Self::ActionFinished => "urn:concord:interact:action-finished",
            Self::BadProgress => "urn:concord:interact:bad-progress",
            Self::Gap => "urn:concord:interact:gap",
            Self::SubscriberDropped => "urn:concord:interact:subscriber-dropped",
            Self::LimitReached => "urn:concord:interact:limit-reached",
            Self::Conflict => "urn:concord:interact:conflict",
            Self::Unavailable => "urn:concord:interact:unavailable",
        }
    }

    /// The HTTP-like status that goes with it.
    pub fn status(self) -> u16 {
        match self {
            Self::BadMessage | Self::BadProgress => 400,
            Self::UnknownCorrelationId | Self::UnknownEvent | Self::UnknownAction => 404,
            Self::ActionFinished | Self::Conflict => 409,
            Self::Gap => 200,
            Self::SubscriberDropped | Self::LimitReached => 429,
            Self::Unavailable => 503,
        }
    }

    /// A short human title.
    pub fn title(self) -> &'static str {
        match self {
            Self::BadMessage => "Bad message",
            Self::UnknownCorrelationId => "Unknown correlation id",
            Self::UnknownEvent => "Unknown event",
            Self::UnknownAction => "Unknown action",
            Self::ActionFinished => "Action already finished",
            Self::BadProgress => "Bad progress",
            Self::Gap => "Events missed",
            Self::SubscriberDropped => "Subscriber dropped",
            Self::LimitReached => "Limit reached",
            Self::Conflict => "Conflict",
            Self::Unavailable => "Unavailable",
        }
    }

    /// The type whose [`uri`](Self::uri) this is.
    pub fn from_uri(uri: &str) -> Option<Self> {
        [
            Self::BadMessage,
            Self::UnknownCorrelationId,
            Self::UnknownEvent,
            Self::UnknownAction,
            Self::ActionFinished,
            Self::BadProgress,
            Self::Gap,
            Self::SubscriberDropped,
            Self::LimitReached,
            Self::Conflict,
            Self::Unavailable,
        ]
        .into_iter()
        .find(|t| t.uri() == uri)
    }
}

/// RFC 9457 problem details: `type` (a URI reference, `about:blank` when absent),
/// `title`, `status`, `detail`, `instance`, and extension members.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Problem {
    /// The problem type URI (`about:blank` when the peer sent none).
    #[serde(rename = "type")]
    pub problem_type: String,
    /// A short summary, the same for every occurrence of the type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The HTTP-like status code (100..=599).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// What happened this time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// A URI reference naming this occurrence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// Extension members (never `type`, `title`, `status`, `detail` or `instance`).
    #[serde(flatten)]
    pub extensions: Map<String, Value>,
}

const STANDARD_MEMBERS: [&str; 5] = ["type", "title", "status", "detail", "instance"];

impl Problem {
    /// A problem of the given type URI with nothing else.
    pub fn new(problem_type: impl Into<String>) -> Self {
        Self {
            problem_type: problem_type.into(),
            title: None,
            status: None,
            detail: None,
            instance: None,
            extensions: Map::new(),
        }
    }

    /// A problem of one of this layer's types, with its title and status and this detail.
    pub fn of(kind: ProblemType, detail: impl Into<String>) -> Self {
        Self {
            title: Some(kind.title().to_owned()),
            status: Some(kind.status()),
            detail: Some(detail.into()),
            ..Self::new(kind.uri())
        }
    }

    /// The [`ProblemType::Gap`] notice for `event`: ids `from..=to` were not delivered.
    pub fn gap(event: &str, from: u64, to: u64) -> Self {
        Self::of(
            ProblemType::Gap,
            format!("events {from}..={to} of {event} were not delivered"),
        )
        .with_extension("from", Value::from(from))
        .with_extension("to", Value::from(to))
    }

    /// Sets `title`.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Sets `status`.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// Sets `detail`.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Sets `instance`.
    pub fn with_instance(mut self, instance: impl Into<String>) -> Self {
        self.instance = Some(instance.into());
        self
    }

    /// Adds an extension member (checked by [`Problem::validate`]: never a standard member).
    pub fn with_extension(mut self, key: impl Into<String>, value: Value) -> Self {
        self.extensions.insert(key.into(), value);
        self
    }

    /// This layer's type, when `type` is one of its URIs.
    pub fn kind(&self) -> Option<ProblemType> {
        ProblemType::from_uri(&self.problem_type)
    }

    /// The missed ids `(from, to)` of a [`ProblemType::Gap`] notice.
    pub fn gap_range(&self) -> Option<(u64, u64)> {
        if self.kind() != Some(ProblemType::Gap) {
            return None;
        }
        let from = self.extensions.get("from")?.as_u64()?;
        let to = self.extensions.get("to")?.as_u64()?;
        Some((from, to))
    }

    /// Checks the field rules that [`Problem::from_value`] checks on a peer's problem.
    pub fn validate(&self, limits: &Limits) -> Result<(), MessageError> {
        check_text("error.type", &self.problem_type, limits.max_problem_text)?;
        for (field, text) in [
            ("error.title", &self.title),
            ("error.detail", &self.detail),
            ("error.instance", &self.instance),
        ] {
            if let Some(text) = text {
                check_text(field, text, limits.max_problem_text)?;
            }
        }
        if let Some(status) = self.status {
            check_status(u64::from(status))?;
        }
        if self
            .extensions
            .keys()
            .any(|k| STANDARD_MEMBERS.contains(&k.as_str()))
        {
            return Err(MessageError::Invalid {
                field: "error",
                reason: "an extension member repeats a standard member",
            });
        }
        Ok(())
    }

    /// Reads the `error` member of a message, field by field.
    pub fn from_value(value: &Value, limits: &Limits) -> Result<Self, MessageError> {
        let Value::Object(map) = value else {
            return Err(MessageError::WrongType {
                field: "error",
                expected: "an object",
            });
        };
        let string = |field: &'static str, key: &str| -> Result<Option<String>, MessageError> {
            match map.get(key) {
                None => Ok(None),
                Some(Value::String(s)) => {
                    check_text(field, s, limits.max_problem_text)?;
                    Ok(Some(s.clone()))
                }
                Some(_) => Err(MessageError::WrongType {
                    field,
                    expected: "a string",
                }),
            }
        };
        let problem_type = string("error.type", "type")?.unwrap_or_else(|| "about:blank".into());
        let title = string("error.title", "title")?;
        let detail = string("error.detail", "detail")?;
        let instance = string("error.instance", "instance")?;
        let status = match map.get("status") {
            None => None,
            Some(v) => {
                let n = v.as_u64().ok_or(MessageError::WrongType {
                    field: "error.status",
                    expected: "an integer",
                })?;
                Some(check_status(n)?)
            }
        };
        let extensions = map
            .iter()
            .filter(|(k, _)| !STANDARD_MEMBERS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(Self {
            problem_type,
            title,
            status,
            detail,
            instance,
            extensions,
        })
    }
}

fn check_status(n: u64) -> Result<u16, MessageError> {
    match u16::try_from(n) {
        Ok(s) if (100..=599).contains(&s) => Ok(s),
        _ => Err(MessageError::OutOfRange {
            field: "error.status",
            value: n.to_string(),
            range: "100..=599",
        }),
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.title.as_deref().unwrap_or(&self.problem_type))?;
        if let Some(status) = self.status {
            write!(f, " ({status})")?;
        }
        if let Some(detail) = &self.detail {
            write!(f, ": {detail}")?;
        }
        Ok(())
    }
}
