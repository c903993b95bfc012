//! Slow work a session hands to tasks, and what comes back.

use std::time::Duration;

use concord_negotiate::{Decided, DocumentError, NegotiateError, StepRecord};

use crate::code::{CodeError, CodeInfo};
use crate::language::AnswerError;
use concord_proto::{AfterSave, Decision, FixDecision};
use serde_json::Value;

use crate::action::ActionError;
use crate::code::ProtocolCode;
use crate::config::human;

/// Why a negotiation step handed to a task (a draft, a judgement, test cases, a diagnosis)
/// gave no answer; the session answers the peer with its text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum StepError {
    /// The negotiator failed (its LLM, or the rules found nothing to say).
    #[error("{0}")]
    Negotiator(NegotiateError),
    /// The step did not finish within its deadline.
    #[error("{what} took longer than {}", human(*limit))]
    TimedOut {
        /// The step, in words (`judging the candidate`).
        what: &'static str,
        /// Its deadline.
        limit: Duration,
    },
    /// The step needs the agreed protocol, and none is agreed.
    #[error("no protocol is agreed")]
    NoProtocol,
    /// The agreed protocol cannot be read.
    #[error("{0}")]
    Protocol(DocumentError),
    /// The run of the agreed test cases on our code did not finish (its task failed).
    #[error("{0}")]
    CaseRun(tokio::task::JoinError),
}

/// The result of one piece of slow work, fed back into the session.
pub(crate) enum Work {
    /// Requester: the first candidate protocol.
    Drafted(Result<Decided<String>, StepError>),
    /// Our answer to the peer's candidate.
    Judged(Result<Decided<Decision>, StepError>),
    /// Requester: test cases for the agreed protocol.
    TestCasesDrafted(Result<Decided<String>, StepError>),
    /// Our answer to the peer's test cases.
    TestCasesJudged(Result<Decided<Decision>, StepError>),
    /// Our answer to the peer's error report.
    Diagnosed(Result<Decided<FixDecision>, StepError>),
    /// Our handler code for the agreed protocol (generation `generation`).
    CodeGenerated {
        generation: u32,
        result: Result<Box<(ProtocolCode, CodeInfo)>, CodeError>,
    },
    /// The protocol (with our handler) is saved in the store.
    Saved { then: AfterSave },
    /// Provider: an action call finished.
    ActionDone {
        message_id: String,
        result: Result<Value, ActionError>,
    },
    /// Provider, interface session: a request-reply or notify call finished.
    Interacted {
        request: concord_interact::RequestId,
        name: String,
        result: Result<Value, ActionError>,
    },
    /// Provider, interface session: a `cancelaction` relayed to the replica running the
    /// action came back with its answer.
    Relayed {
        request: concord_interact::RequestId,
        result: Box<Result<concord_interact::ActionRecord, concord_interact::Problem>>,
    },
    /// Provider, interface session: a stream action ended.
    StreamDone {
        id: u32,
        result: Result<Value, ActionError>,
    },
    /// The LLM answered a natural-language message (`message_id` for a negotiation
    /// REQUEST, `None` for a PT 2 frame).
    Answered {
        message_id: Option<String>,
        answer: Result<String, AnswerError>,
    },
}

impl Work {
    /// The accounting record a step carries, if any.
    pub(crate) fn record(&self) -> Option<&StepRecord> {
        match self {
            Work::Drafted(Ok(decided)) | Work::TestCasesDrafted(Ok(decided)) => {
                Some(&decided.record)
            }
            Work::Judged(Ok(decided)) | Work::TestCasesJudged(Ok(decided)) => Some(&decided.record),
            Work::Diagnosed(Ok(decided)) => Some(&decided.record),
            _ => None,
        }
    }
}
