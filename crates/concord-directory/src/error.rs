//! [`DirectoryError`]: every refusal of a directory operation, with its HTTP status and
//! the pieces of an RFC 9457 problem-details answer (the HTTP layer writes them).

use serde::Serialize;

use crate::store::StoreFailure;

/// One problem found validating a TD: an entry of a problem's `validationErrors`
/// (tdd-validation-response).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ValidationError {
    /// JSON pointer (RFC 6901) to the offending value (`""`: the whole TD).
    pub field: String,
    /// What is wrong there.
    pub description: String,
}

impl ValidationError {
    /// A problem at `field`.
    pub fn new(field: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            description: description.into(),
        }
    }
}

/// Why a directory operation was refused or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DirectoryError {
    /// The TD is not valid (400); `errors` says where and why.
    #[error("the TD is not valid: {} problem(s), first: {}", .errors.len(), first(.errors))]
    InvalidTd {
        /// Every problem found.
        errors: Vec<ValidationError>,
    },
    /// The TD is larger than `max_td_bytes` (413).
    #[error("the TD is {size} bytes; the limit is {limit}")]
    TdTooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A TD with an `id` was posted: it must be `PUT` at `/things/{id}` (400,
    /// tdd-things-create-known-vs-anonymous).
    #[error("the TD has an id (`{id}`): register it with PUT /things/{{id}}, not POST")]
    IdOnPost {
        /// Its id.
        id: String,
    },
    /// The TD's `id` is not the one its URL names, or is missing from a `PUT` (400).
    #[error("the TD's id is {found:?}; the request names `{expected}`")]
    IdMismatch {
        /// The id the request names.
        expected: String,
        /// The TD's `id` (`None`: absent).
        found: Option<String>,
    },
    /// The merge patch is not a JSON object, or not JSON (400).
    #[error("invalid merge patch: {reason}")]
    InvalidPatch {
        /// Why.
        reason: String,
    },
    /// `registration` holds a `ttl` or `expires` the directory does not accept (400).
    #[error("registration.{field}: {reason}")]
    InvalidRegistration {
        /// `ttl` or `expires` (or `registration` itself).
        field: &'static str,
        /// Why, naming the limit when one is broken.
        reason: String,
    },
    /// No TD with this id (404), or it has expired.
    #[error("no TD with id `{id}`")]
    NotFound {
        /// The id asked.
        id: String,
    },
    /// The TD was registered by another DID (403).
    #[error("TD `{id}` was registered by another identity; only it may change it")]
    NotOwner {
        /// The TD's id.
        id: String,
    },
    /// The TD names a DID (its `id`, or `concord:metaProtocol`'s `concord:did`) other
    /// than the writer's, in a directory where each agent writes only its own entry
    /// ([`Directory::own_entries_only`](crate::Directory::own_entries_only)) (403).
    #[error("the TD's {field} names DID `{named}`; only that DID may write it, not {writer}")]
    NotNamedWriter {
        /// Where the TD names the DID: `id` or `concord:metaProtocol.concord:did`.
        field: &'static str,
        /// The DID the TD names.
        named: String,
        /// Who tried to write it (its DID, or that it proved none).
        writer: String,
    },
    /// Another write changed the TD between this operation's read and its write (409).
    #[error("TD `{id}` changed meanwhile; retry")]
    Conflict {
        /// The TD's id.
        id: String,
    },
    /// The directory holds `max_entries` TDs (503).
    #[error("the directory holds its limit of {limit} TDs")]
    DirectoryFull {
        /// The limit.
        limit: u64,
    },
    /// The registrant holds `max_entries_per_registrant` TDs (429).
    #[error("{holder} holds its limit of {limit} TDs")]
    QuotaExceeded {
        /// The DID or client address.
        holder: String,
        /// The limit.
        limit: u64,
    },
    /// A listing's paging arguments cannot be used (400).
    #[error("invalid paging: {reason}")]
    InvalidPaging {
        /// Why.
        reason: String,
    },
    /// A search query is malformed (400).
    #[error("invalid query: {reason}")]
    InvalidQuery {
        /// Why (for JSONPath, the parser's message with its position).
        reason: String,
    },
    /// A JSONPath query longer than `max_query_bytes` (400).
    #[error("the query is {length} bytes; the limit is {limit}")]
    QueryTooLong {
        /// Its length.
        length: usize,
        /// The limit.
        limit: usize,
    },
    /// A JSONPath query found more than `max_query_results` nodes (400: the request is
    /// small, its query too broad; narrow it).
    #[error("the query matches more than {limit} nodes; narrow it")]
    TooManyResults {
        /// The limit.
        limit: usize,
    },
    /// A JSONPath search ran past `max_query_time` before it had walked every TD (400:
    /// the query is too expensive for the directory's TDs; narrow it).
    #[error("the query ran past {limit:?} after {walked} of {held} TDs; narrow it")]
    SearchTooSlow {
        /// The limit.
        limit: std::time::Duration,
        /// The TDs it had walked.
        walked: usize,
        /// The TDs the directory holds.
        held: usize,
    },
    /// The nodes a JSONPath query selects take more than `max_query_answer_bytes` of JSON
    /// (413).
    #[error("the query's answer takes more than {limit} bytes of JSON; narrow it")]
    AnswerTooLarge {
        /// The limit.
        limit: u64,
    },
    /// The directory holds more TD bytes than one JSONPath search reads,
    /// `max_query_scan_bytes` (503).
    #[error("a JSONPath search reads at most {limit} bytes of TDs; the directory holds more (use capability search)")]
    SearchTooBroad {
        /// The limit.
        limit: u64,
    },
    /// The events after `asked` are no longer all kept (410): the oldest kept is `oldest`.
    #[error(
        "events after {asked} are no longer kept (oldest kept: {oldest:?}); reload the listing"
    )]
    EventGap {
        /// The last event id the client saw.
        asked: u64,
        /// The oldest event id kept.
        oldest: Option<u64>,
    },
    /// An event id later than any recorded (400): not from this directory.
    #[error("event id {asked} is later than the latest ({latest})")]
    UnknownEvent {
        /// The id asked.
        asked: u64,
        /// The latest event id.
        latest: u64,
    },
    /// The store failed (500), or cannot be reached for now (503,
    /// [`StoreFailure::Unavailable`]).
    #[error(transparent)]
    Store(#[from] StoreFailure),
}

fn first(errors: &[ValidationError]) -> String {
    errors.first().map_or_else(String::new, |error| {
        format!("{} at `{}`", error.description, error.field)
    })
}

/// The `Retry-After` of a refusal that passes with time ([`DirectoryError::retry_after`]):
/// the default interval between two purges of expired TDs.
pub const RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(30);

/// The `Retry-After` of a store that cannot be reached for now
/// ([`StoreFailure::Unavailable`]): the shared store may be back within a second.
pub const UNAVAILABLE_RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// The base of this crate's problem `type` URIs.
pub const PROBLEM_BASE: &str = "https://concord.dev/problems/directory/";

impl DirectoryError {
    /// The HTTP status of the answer.
    pub fn status(&self) -> u16 {
        use DirectoryError::*;
        match self {
            InvalidTd { .. }
            | IdOnPost { .. }
            | IdMismatch { .. }
            | InvalidPatch { .. }
            | InvalidRegistration { .. }
            | InvalidPaging { .. }
            | InvalidQuery { .. }
            | QueryTooLong { .. }
            | TooManyResults { .. }
            | SearchTooSlow { .. }
            | UnknownEvent { .. } => 400,
            NotOwner { .. } | NotNamedWriter { .. } => 403,
            NotFound { .. } => 404,
            Conflict { .. } => 409,
            EventGap { .. } => 410,
            TdTooLarge { .. } | AnswerTooLarge { .. } => 413,
            QuotaExceeded { .. } => 429,
            Store(StoreFailure::Unavailable { .. }) => 503,
            Store(_) => 500,
            DirectoryFull { .. } | SearchTooBroad { .. } => 503,
        }
    }

    /// How long a client should wait before it tries again (the answer's `Retry-After`):
    /// [`RETRY_AFTER`] for a refusal that passes with time (a quota or the directory
    /// freed by deletions and the purge of expired TDs, a search once the directory
    /// shrinks), [`UNAVAILABLE_RETRY_AFTER`] for a store that cannot be reached for now
    /// ([`StoreFailure::Unavailable`], 503), `None` for the others.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        use DirectoryError::*;
        match self {
            QuotaExceeded { .. } | DirectoryFull { .. } | SearchTooBroad { .. } => {
                Some(RETRY_AFTER)
            }
            Store(StoreFailure::Unavailable { .. }) => Some(UNAVAILABLE_RETRY_AFTER),
            _ => None,
        }
    }

    /// The problem's stable short name: the last segment of its `type` URI.
    pub fn slug(&self) -> &'static str {
        use DirectoryError::*;
        match self {
            InvalidTd { .. } => "invalid-td",
            TdTooLarge { .. } => "td-too-large",
            IdOnPost { .. } => "id-on-post",
            IdMismatch { .. } => "id-mismatch",
            InvalidPatch { .. } => "invalid-patch",
            InvalidRegistration { .. } => "invalid-registration",
            NotFound { .. } => "not-found",
            NotOwner { .. } => "not-owner",
            NotNamedWriter { .. } => "not-named-writer",
            Conflict { .. } => "conflict",
            DirectoryFull { .. } => "directory-full",
            QuotaExceeded { .. } => "quota-exceeded",
            InvalidPaging { .. } => "invalid-paging",
            InvalidQuery { .. } => "invalid-query",
            QueryTooLong { .. } => "query-too-long",
            TooManyResults { .. } => "too-many-results",
            SearchTooSlow { .. } => "search-too-slow",
            AnswerTooLarge { .. } => "answer-too-large",
            SearchTooBroad { .. } => "search-too-broad",
            EventGap { .. } => "event-gap",
            UnknownEvent { .. } => "unknown-event",
            Store(StoreFailure::Unavailable { .. }) => "store-unavailable",
            Store(_) => "store-failure",
        }
    }

    /// The problem's `type` URI ([`PROBLEM_BASE`] and [`slug`](Self::slug)).
    pub fn problem_type(&self) -> String {
        format!("{PROBLEM_BASE}{}", self.slug())
    }

    /// The problem's `title`: a short summary of its kind, the same for every instance.
    pub fn title(&self) -> &'static str {
        use DirectoryError::*;
        match self {
            InvalidTd { .. } => "Invalid Thing Description",
            TdTooLarge { .. } => "Thing Description too large",
            IdOnPost { .. } => "Thing Description with an id posted",
            IdMismatch { .. } => "Thing Description id does not match the URL",
            InvalidPatch { .. } => "Invalid merge patch",
            InvalidRegistration { .. } => "Invalid registration information",
            NotFound { .. } => "Thing Description not found",
            NotOwner { .. } => "Registered by another identity",
            NotNamedWriter { .. } => "Thing Description names another identity",
            Conflict { .. } => "Concurrent change",
            DirectoryFull { .. } => "Directory full",
            QuotaExceeded { .. } => "Registration quota exceeded",
            InvalidPaging { .. } => "Invalid paging arguments",
            InvalidQuery { .. } => "Invalid search query",
            QueryTooLong { .. } => "Search query too long",
            TooManyResults { .. } => "Too many search results",
            SearchTooSlow { .. } => "Search too slow",
            AnswerTooLarge { .. } => "Search answer too large",
            SearchTooBroad { .. } => "Search over too many Thing Descriptions",
            EventGap { .. } => "Events no longer kept",
            UnknownEvent { .. } => "Unknown event id",
            Store(StoreFailure::Unavailable { .. }) => "Directory store unavailable",
            Store(_) => "Directory store failure",
        }
    }

    /// The problem's `detail`: this instance, naming what was wrong and where. A store
    /// failure's detail does not repeat the backend's message (it may name files).
    pub fn detail(&self) -> String {
        match self {
            DirectoryError::Store(StoreFailure::Unavailable { .. }) => {
                "the directory's shared store cannot be reached for now: try again".to_owned()
            }
            DirectoryError::Store(_) => {
                "the directory could not read or write its store".to_owned()
            }
            other => other.to_string(),
        }
    }

    /// The `validationErrors` extension member, for [`DirectoryError::InvalidTd`].
    pub fn validation_errors(&self) -> Option<&[ValidationError]> {
        match self {
            DirectoryError::InvalidTd { errors } => Some(errors),
            _ => None,
        }
    }
}
