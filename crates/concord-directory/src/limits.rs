//! [`DirectoryLimits`]: every bound a stranger could push against, each with a default.

use std::time::Duration;

/// The bounds of a directory. Each one a client could push against answers a typed
/// [`DirectoryError`](crate::DirectoryError) naming it (see each field).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DirectoryLimits {
    /// The largest TD accepted, in bytes of JSON as sent (and of a TD after a merge patch).
    /// Default 64 KiB. Over it: [`DirectoryError::TdTooLarge`](crate::DirectoryError::TdTooLarge) (413).
    pub max_td_bytes: usize,
    /// The most TDs held in all, expired ones not yet purged included. Default 10,000.
    /// A creation beyond it: [`DirectoryError::DirectoryFull`](crate::DirectoryError::DirectoryFull) (503).
    pub max_entries: u64,
    /// The most TDs one registrant holds: one client address, and one owner DID (a signed
    /// registration counts against both). Default 100. A creation beyond it:
    /// [`DirectoryError::QuotaExceeded`](crate::DirectoryError::QuotaExceeded) (429).
    pub max_entries_per_registrant: u64,
    /// The shortest `registration.ttl` accepted (and the nearest `expires`). Default 10 s.
    /// Shorter: [`DirectoryError::InvalidRegistration`](crate::DirectoryError::InvalidRegistration) (400).
    pub min_ttl: Duration,
    /// The longest `registration.ttl` accepted (and the farthest `expires`). Default 30 days.
    /// Longer: [`DirectoryError::InvalidRegistration`](crate::DirectoryError::InvalidRegistration) (400).
    pub max_ttl: Duration,
    /// The TTL of a registration that gives neither `ttl` nor `expires`, so that a TD its
    /// producer forgot is purged; `None` keeps such TDs until deleted. Default 1 day.
    pub default_ttl: Option<Duration>,
    /// How many change events are kept for replay (the oldest go first). Default 1,000.
    /// Asking for events older than those kept: [`DirectoryError::EventGap`](crate::DirectoryError::EventGap).
    pub event_retention: usize,
    /// The longest JSONPath query, in bytes. Default 1,024. Longer:
    /// [`DirectoryError::QueryTooLong`](crate::DirectoryError::QueryTooLong) (400).
    pub max_query_bytes: usize,
    /// The most nodes a JSONPath search answers. Default 1,000. More:
    /// [`DirectoryError::TooManyResults`](crate::DirectoryError::TooManyResults) (400).
    pub max_query_results: usize,
    /// The most bytes of JSON the nodes one JSONPath search selects take (counted from
    /// the selected nodes before any is copied, so `$[*,*,*,…]` cannot multiply a large
    /// TD). Default 4 MiB. More:
    /// [`DirectoryError::AnswerTooLarge`](crate::DirectoryError::AnswerTooLarge) (413).
    pub max_query_answer_bytes: u64,
    /// The most bytes of stored TDs (their JSON) a JSONPath search walks: the directory
    /// holds them parsed and enriched between searches, and every search walks them all,
    /// so this bounds both the work of one search and that memory (parsed, a TD takes
    /// about 12 times its JSON). Default 16 MiB: a full directory at the default
    /// `max_entries` (10,000) of TDs averaging 1.6 KB, about 200 MB parsed. A
    /// directory holding more answers
    /// [`DirectoryError::SearchTooBroad`](crate::DirectoryError::SearchTooBroad) (503).
    pub max_query_scan_bytes: u64,
    /// The longest a JSONPath search runs: the query is evaluated on one TD after another
    /// (each as the only member of the root array) and the time is checked between them.
    /// Default 2 s. Longer:
    /// [`DirectoryError::SearchTooSlow`](crate::DirectoryError::SearchTooSlow) (400: narrow
    /// the query).
    pub max_query_time: Duration,
    /// The most descendant segments (`..`) one JSONPath query holds: each nested one
    /// multiplies the work on a TD by the TD's number of nodes. Default 2. More:
    /// [`DirectoryError::InvalidQuery`](crate::DirectoryError::InvalidQuery) (400).
    pub max_query_descendants: usize,
    /// The longest regular expression of a JSONPath `match()` or `search()`, in bytes
    /// (after the string literal's escapes). The pattern must be a string literal, valid
    /// I-Regexp for the `regex` crate, and compile within 256 KiB: the function compiles it
    /// again for every node it is called on. Default 128. Longer:
    /// [`DirectoryError::InvalidQuery`](crate::DirectoryError::InvalidQuery) (400).
    pub max_query_pattern_bytes: usize,
    /// The most TDs one listing page holds; a larger `limit` (or none) is cut to it and the
    /// answer pages on with `next`, which repeats the `limit` the client sent. Default 100.
    pub max_page_size: u64,
    /// The most TDs a capability search answers; beyond, the answer says it was cut.
    /// Default 100.
    pub max_capability_results: u64,
    /// The most terms one capability search combines. Default 8. More:
    /// [`DirectoryError::InvalidQuery`](crate::DirectoryError::InvalidQuery) (400).
    pub max_capability_terms: usize,
}

impl Default for DirectoryLimits {
    fn default() -> Self {
        Self {
            max_td_bytes: 64 * 1024,
            max_entries: 10_000,
            max_entries_per_registrant: 100,
            min_ttl: Duration::from_secs(10),
            max_ttl: Duration::from_secs(30 * 86_400),
            default_ttl: Some(Duration::from_secs(86_400)),
            event_retention: 1_000,
            max_query_bytes: 1_024,
            max_query_results: 1_000,
            max_query_answer_bytes: 4 * 1024 * 1024,
            max_query_scan_bytes: 16 * 1024 * 1024,
            max_query_time: Duration::from_secs(2),
            max_query_descendants: 2,
            max_query_pattern_bytes: 128,
            max_page_size: 100,
            max_capability_results: 100,
            max_capability_terms: 8,
        }
    }
}

/// A limit of [`DirectoryLimits`] that cannot work as set.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("directory limit `{name}`: {reason}")]
#[non_exhaustive]
pub struct InvalidLimit {
    /// The field of [`DirectoryLimits`].
    pub name: &'static str,
    /// Why it cannot work.
    pub reason: String,
}

impl DirectoryLimits {
    /// Checks that every limit can work: the counts that bound an operation are not zero,
    /// and `min_ttl <= default_ttl <= max_ttl`.
    ///
    /// # Errors
    /// The first limit that cannot work.
    pub fn validate(&self) -> Result<(), InvalidLimit> {
        let zero = |name: &'static str, value: u64| {
            if value == 0 {
                Err(InvalidLimit {
                    name,
                    reason: "must be at least 1".to_owned(),
                })
            } else {
                Ok(())
            }
        };
        let wide = |value: usize| u64::try_from(value).unwrap_or(u64::MAX);
        zero("max_td_bytes", wide(self.max_td_bytes))?;
        zero("max_entries", self.max_entries)?;
        zero(
            "max_entries_per_registrant",
            self.max_entries_per_registrant,
        )?;
        zero("event_retention", wide(self.event_retention))?;
        zero("max_query_bytes", wide(self.max_query_bytes))?;
        zero("max_query_results", wide(self.max_query_results))?;
        zero("max_query_answer_bytes", self.max_query_answer_bytes)?;
        zero("max_query_scan_bytes", self.max_query_scan_bytes)?;
        zero(
            "max_query_pattern_bytes",
            wide(self.max_query_pattern_bytes),
        )?;
        zero("max_page_size", self.max_page_size)?;
        zero("max_capability_results", self.max_capability_results)?;
        zero("max_capability_terms", wide(self.max_capability_terms))?;
        if self.max_query_time.is_zero() {
            return Err(InvalidLimit {
                name: "max_query_time",
                reason: "must be more than zero".to_owned(),
            });
        }
        if self.min_ttl.is_zero() {
            return Err(InvalidLimit {
                name: "min_ttl",
                reason: "must be more than zero".to_owned(),
            });
        }
        if self.min_ttl > self.max_ttl {
            return Err(InvalidLimit {
                name: "min_ttl",
                reason: format!("{:?} is more than max_ttl {:?}", self.min_ttl, self.max_ttl),
            });
        }
        if let Some(default) = self.default_ttl {
            if default < self.min_ttl || default > self.max_ttl {
                return Err(InvalidLimit {
                    name: "default_ttl",
                    reason: format!(
                        "{default:?} is outside min_ttl {:?} ..= max_ttl {:?}",
                        self.min_ttl, self.max_ttl
                    ),
                });
            }
        }
        Ok(())
    }
}
