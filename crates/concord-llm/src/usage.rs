//! Accounting: every LLM call, its tokens and its wall time.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::request::AnswerFormat;

/// How many recent [`CallRecord`]s a [`Usage`] keeps; its [`UsageSummary`] counts all calls.
pub const RECORD_LIMIT: usize = 1024;

/// One chat-completions call: one request as the caller made it, with all its attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallRecord {
    /// The model asked.
    pub model: String,
    /// HTTP attempts made (1 when the first succeeded).
    pub attempts: u32,
    /// Prompt tokens the server reported (0 when it reported none).
    pub prompt_tokens: u64,
    /// Answer tokens the server reported (0 when it reported none).
    pub completion_tokens: u64,
    /// Wall time of the call, all attempts and waits included.
    pub latency: Duration,
    /// How it ended.
    pub outcome: CallOutcome,
    /// The JSON format the request asked for (`None`: not a JSON request).
    pub format: Option<AnswerFormat>,
    /// Whether this call was the corrective retry after an answer that was not the JSON
    /// asked for.
    pub corrective: bool,
}

/// How a [`CallRecord`]'s call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallOutcome {
    /// The server answered and the answer was used.
    Answered,
    /// The server answered but the content was not the JSON asked for.
    InvalidContent,
    /// The server answered with this HTTP error status.
    HttpStatus(u16),
    /// The last attempt timed out.
    Timeout,
    /// The last attempt failed to connect or lost the connection.
    Transport,
    /// The server's body was not a chat completion (or was too large).
    MalformedResponse,
    /// Nothing was sent: the request or the configuration was unusable.
    NotSent,
    /// The server answered, but cut the answer off (`finish_reason: "length"`).
    Truncated,
}

/// Totals over calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct UsageSummary {
    /// Chat-completions calls.
    pub calls: u64,
    /// Calls that did not end [`CallOutcome::Answered`].
    pub failed_calls: u64,
    /// HTTP attempts over all calls.
    pub attempts: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Answer tokens.
    pub completion_tokens: u64,
    /// Wall time spent in calls (summed; concurrent calls overlap).
    pub wall_time: Duration,
    /// Calls that asked for JSON with a JSON Schema (structured output).
    pub json_schema_calls: u64,
    /// Calls that asked for any JSON object (JSON mode).
    pub json_object_calls: u64,
    /// Calls that asked for JSON in the prompt only, after the server refused the format.
    pub prompt_only_calls: u64,
    /// Corrective retries: calls made because an answer was not the JSON asked for.
    pub corrective_calls: u64,
    /// Calls whose answer was cut off (`finish_reason: "length"`).
    pub truncated_calls: u64,
}

impl UsageSummary {
    fn add(&mut self, record: &CallRecord) {
        self.calls += 1;
        if record.outcome != CallOutcome::Answered {
            self.failed_calls += 1;
        }
        self.attempts += u64::from(record.attempts);
        self.prompt_tokens += record.prompt_tokens;
        self.completion_tokens += record.completion_tokens;
        self.wall_time += record.latency;
        match record.format {
            Some(AnswerFormat::JsonSchema) => self.json_schema_calls += 1,
            Some(AnswerFormat::JsonObject) => self.json_object_calls += 1,
            Some(AnswerFormat::PromptOnly) => self.prompt_only_calls += 1,
            None => {}
        }
        if record.corrective {
            self.corrective_calls += 1;
        }
        if record.outcome == CallOutcome::Truncated {
            self.truncated_calls += 1;
        }
    }
}

/// A shareable ledger of LLM calls. Clones share the same ledger.
///
/// [`LlmClient`](crate::LlmClient) (feature `client`) records every call it makes; without
/// that feature nothing records, and the type is there for code that only reads a ledger.
///
/// A [`child`](Usage::child) ledger records its own calls and passes each one on to its
/// parent, so a node can keep one ledger for everything and one per negotiation:
///
/// ```
/// use concord_llm::Usage;
///
/// let node = Usage::new();
/// let negotiation = node.child();
/// // … a client made with `client.with_usage(negotiation.clone())` records into both …
/// assert_eq!(negotiation.summary().calls, node.summary().calls);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Usage {
    ledger: Arc<Mutex<Ledger>>,
    parent: Option<Arc<Usage>>,
}

#[derive(Debug, Default)]
struct Ledger {
    recent: VecDeque<CallRecord>,
    summary: UsageSummary,
}

impl Usage {
    /// An empty ledger.
    pub fn new() -> Self {
        Usage::default()
    }

    /// An empty ledger whose calls are also recorded in this one.
    pub fn child(&self) -> Usage {
        Usage {
            ledger: Arc::default(),
            parent: Some(Arc::new(self.clone())),
        }
    }

    /// The most recent calls, oldest first (at most [`RECORD_LIMIT`]).
    pub fn records(&self) -> Vec<CallRecord> {
        self.lock().recent.iter().cloned().collect()
    }

    /// Totals over every call recorded.
    pub fn summary(&self) -> UsageSummary {
        self.lock().summary
    }

    /// Records `record` here and in every ancestor ledger.
    #[cfg_attr(
        not(feature = "client"),
        allow(dead_code, reason = "only the client records calls")
    )]
    pub(crate) fn record(&self, record: CallRecord) {
        if let Some(parent) = &self.parent {
            parent.record(record.clone());
        }
        let mut ledger = self.lock();
        ledger.summary.add(&record);
        if ledger.recent.len() == RECORD_LIMIT {
            ledger.recent.pop_front();
        }
        ledger.recent.push_back(record);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Ledger> {
        // A panic elsewhere while holding the lock cannot leave the ledger half-written
        // in a way that matters for counting, so a poisoned lock is still used.
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(outcome: CallOutcome, prompt_tokens: u64) -> CallRecord {
        CallRecord {
            model: "m".into(),
            attempts: 2,
            prompt_tokens,
            completion_tokens: 1,
            latency: Duration::from_millis(10),
            outcome,
            format: None,
            corrective: false,
        }
    }

    #[test]
    fn child_records_reach_the_parent_but_not_siblings() {
        let root = Usage::new();
        let a = root.child();
        let b = root.child();
        a.record(call(CallOutcome::Answered, 5));
        b.record(call(CallOutcome::Timeout, 0));
        root.clone().record(call(CallOutcome::Answered, 7));

        assert_eq!(a.summary().calls, 1);
        assert_eq!(b.summary().failed_calls, 1);
        let total = root.summary();
        assert_eq!(
            (
                total.calls,
                total.failed_calls,
                total.attempts,
                total.prompt_tokens
            ),
            (3, 1, 6, 12)
        );
        assert_eq!(total.wall_time, Duration::from_millis(30));
        assert_eq!(root.records().len(), 3);
    }

    #[test]
    fn records_are_bounded_but_the_summary_counts_everything() {
        let usage = Usage::new();
        for i in 0..RECORD_LIMIT as u64 + 10 {
            usage.record(call(CallOutcome::Answered, i));
        }
        let records = usage.records();
        assert_eq!(records.len(), RECORD_LIMIT);
        assert_eq!(records[0].prompt_tokens, 10);
        assert_eq!(usage.summary().calls, RECORD_LIMIT as u64 + 10);
    }
}
