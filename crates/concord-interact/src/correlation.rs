//! The requester's table of open correlation ids: every answer is matched to its request.

use std::collections::BTreeMap;

use crate::message::{shorten, ActionStatus, Message, MessageType, Operation};
use crate::problem::{Problem, ProblemType};
use crate::Limits;

/// Whether a correlation stays open after an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CorrelationState {
    /// More answers may come (an acknowledged subscription, a running action).
    Open,
    /// The request is answered for good; its `correlationID` is free again.
    Closed,
}

/// An answer that matches no open request, or a request that cannot be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CorrelationError {
    /// [`Correlations::open`] takes requests only.
    #[error("a {0} cannot open a correlation")]
    NotARequest(&'static str),
    /// [`Correlations::accept`] takes responses and notifications only.
    #[error("a request is not an answer")]
    NotAnAnswer,
    /// A request reuses an open `correlationID`.
    #[error("correlationID {correlation_id:?} is already open")]
    Duplicate {
        /// The id.
        correlation_id: String,
    },
    /// `Limits::max_open_correlations` requests are open already.
    #[error("{limit} requests are open already")]
    TooMany {
        /// `Limits::max_open_correlations`.
        limit: usize,
    },
    /// An answer whose `correlationID` matches no open request.
    #[error("unknown correlationID {correlation_id:?}")]
    Unknown {
        /// The id.
        correlation_id: String,
    },
    /// An answer for another operation than the request's.
    #[error("correlationID {correlation_id:?} belongs to {expected}, not {got}")]
    OperationMismatch {
        /// The id.
        correlation_id: String,
        /// The request's operation.
        expected: &'static str,
        /// The answer's operation.
        got: &'static str,
    },
    /// A notification for an operation that has none (only `invokeaction`,
    /// `observeproperty`, `subscribeevent` and `subscribeallevents` have).
    #[error("{operation} has no notifications")]
    UnexpectedNotification {
        /// The operation.
        operation: &'static str,
    },
}

impl CorrelationError {
    /// The problem to answer with.
    pub fn to_problem(&self) -> Problem {
        let kind = match self {
            Self::Unknown { .. } => ProblemType::UnknownCorrelationId,
            Self::Duplicate { .. } => ProblemType::Conflict,
            Self::TooMany { .. } => ProblemType::LimitReached,
            _ => ProblemType::BadMessage,
        };
        Problem::of(kind, self.to_string())
    }
}

/// The requester's open requests by `correlationID`, so that every answer is matched to
/// its request and an answer to nothing is a typed error.
///
/// A response closes its request, except the acknowledgement of `observeproperty`,
/// `subscribeevent`, `subscribeallevents` and of a long-running `invokeaction` (status
/// `pending` or `running`); those stay open until a terminal action status, an error
/// response, or [`Correlations::close`] (after unobserving or unsubscribing).
#[derive(Debug, Clone)]
pub struct Correlations {
    open: BTreeMap<String, Operation>,
    limit: usize,
}

impl Correlations {
    /// An empty table bounded by `Limits::max_open_correlations`.
    pub fn new(limits: &Limits) -> Self {
        Self {
            open: BTreeMap::new(),
            limit: limits.max_open_correlations,
        }
    }

    /// Records a request we are about to send.
    pub fn open(&mut self, request: &Message) -> Result<(), CorrelationError> {
        if request.message_type != MessageType::Request {
            return Err(CorrelationError::NotARequest(request.message_type.as_str()));
        }
        if self.open.contains_key(&request.correlation_id) {
            return Err(CorrelationError::Duplicate {
                correlation_id: request.correlation_id.clone(),
            });
        }
        if self.open.len() >= self.limit {
            return Err(CorrelationError::TooMany { limit: self.limit });
        }
        self.open
            .insert(request.correlation_id.clone(), request.operation);
        Ok(())
    }

    /// Matches a received response or notification to its request.
    pub fn accept(&mut self, answer: &Message) -> Result<CorrelationState, CorrelationError> {
        let id = &answer.correlation_id;
        let expected = match (answer.message_type, self.open.get(id)) {
            (MessageType::Request, _) => return Err(CorrelationError::NotAnAnswer),
            (_, None) => {
                return Err(CorrelationError::Unknown {
                    correlation_id: shorten(id),
                })
            }
            (_, Some(op)) => *op,
        };
        if expected != answer.operation {
            return Err(CorrelationError::OperationMismatch {
                correlation_id: shorten(id),
                expected: expected.as_str(),
                got: answer.operation.as_str(),
            });
        }
        let long_lived = matches!(
            expected,
            Operation::ObserveProperty | Operation::SubscribeEvent | Operation::SubscribeAllEvents
        );
        let terminal = answer.status.is_some_and(ActionStatus::is_terminal);
        let state = match answer.message_type {
            MessageType::Response if answer.error.is_some() => CorrelationState::Closed,
            MessageType::Response if long_lived => CorrelationState::Open,
            MessageType::Response if expected == Operation::InvokeAction => match answer.status {
                Some(ActionStatus::Pending | ActionStatus::Running) => CorrelationState::Open,
                _ => CorrelationState::Closed,
            },
            MessageType::Response => CorrelationState::Closed,
            _ if long_lived => CorrelationState::Open,
            _ if expected == Operation::InvokeAction => {
                if terminal || (answer.error.is_some() && answer.status.is_none()) {
                    CorrelationState::Closed
                } else {
                    CorrelationState::Open
                }
            }
            _ => {
                return Err(CorrelationError::UnexpectedNotification {
                    operation: expected.as_str(),
                })
            }
        };
        if state == CorrelationState::Closed {
            self.open.remove(id);
        }
        Ok(state)
    }

    /// Forgets an open request (after unsubscribing, or giving up); whether it was open.
    pub fn close(&mut self, correlation_id: &str) -> bool {
        self.open.remove(correlation_id).is_some()
    }

    /// The operation of an open request.
    pub fn operation(&self, correlation_id: &str) -> Option<Operation> {
        self.open.get(correlation_id).copied()
    }

    /// How many requests are open.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// Whether no request is open.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}
