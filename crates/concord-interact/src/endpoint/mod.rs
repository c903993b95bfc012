//! The two ends of an interface session, sans-IO: [`ProviderEndpoint`] (one per provider
//! session, next to the node-wide [`Thing`](crate::Thing)) and [`ConsumerEndpoint`] (one
//! per requester session). Both take PT 1 frame data in (`handle_frame`) and hand PT 1
//! frame data out (`poll_transmit`); neither reads a clock nor touches a socket.
//!
//! Payloads are not checked against the interface's JSON Schemas here: the node does
//! that. The endpoints check names, modes, correlation ids, sizes and stream credit, and
//! answer every violation with a typed problem; the session goes on.
//!
//! **Unattributable problems.** A problem about a message whose `correlationID` cannot
//! be read (bad JSON, a bad frame, a chunk for a stream no request opened) goes out as a
//! response with the reserved `correlationID` [`NO_CORRELATION`] (and the message's
//! operation when it could be read, `invokeaction` otherwise).

mod consumer;
mod provider;

use serde_json::Value;

use crate::interface::Interface;
use crate::message::{Message, MessageType, Operation};
use crate::problem::Problem;
use crate::stream::{ResetBy, ResetCode, SendMode, StreamEvent, StreamId, StreamLimits, Streams};
use crate::wire::CHUNK_PREFIX;
use crate::Limits;

pub use consumer::{ConsumerEndpoint, ConsumerEvent, UseError};
pub use provider::{ProviderEndpoint, ProviderEvent};

/// What happened on one of the session's streams, as either endpoint reports it
/// ([`ConsumerEvent::Stream`], [`ProviderEvent::Stream`]). "The peer" is the provider for
/// the consumer, the requester for the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StreamUpdate {
    /// Data is waiting on the stream ([`ConsumerEndpoint::stream_read`],
    /// [`ProviderEndpoint::stream_read`]).
    Readable {
        /// The stream.
        id: StreamId,
    },
    /// The peer ended its direction of the stream.
    Finished {
        /// The stream.
        id: StreamId,
    },
    /// The peer truncated the stream: what was buffered is gone (its credit was granted
    /// again).
    Truncated {
        /// The stream.
        id: StreamId,
        /// Bytes discarded.
        discarded: u64,
    },
    /// The stream was reset, by the peer or because it broke the stream rules.
    Reset {
        /// The stream.
        id: StreamId,
        /// Why.
        code: ResetCode,
    },
    /// Credit came back on the stream after a send was blocked or dropped.
    Writable {
        /// The stream.
        id: StreamId,
    },
    /// The peer stopped reading the stream: our writes on it are taken and discarded from
    /// now on (what waited for credit may go), and END still ends our direction.
    Stopped {
        /// The stream.
        id: StreamId,
        /// The peer's code.
        code: ResetCode,
    },
    /// We cancelled the stream: our reader stopped and our direction ended before the
    /// peer's, so nothing of it was wanted (a RESET went out with the stop's code).
    Cancelled {
        /// The stream.
        id: StreamId,
        /// The code.
        code: ResetCode,
    },
}

/// The next event of an endpoint's streams, sorted for the endpoint
/// ([`poll_stream_event`]).
enum StreamNews {
    /// For the application.
    Update(StreamUpdate),
    /// The peer opened a stream of its own (no request named it): the endpoint refuses it.
    Opened(StreamId),
    /// A stream ended cleanly both ways; its state is gone.
    Closed(StreamId),
}

/// The next event of `streams`. A truncation's discarded bytes are granted back first, so
/// the credit level stays where it was.
fn poll_stream_event(streams: &mut Streams) -> Option<StreamNews> {
    let update = match streams.poll_event()? {
        StreamEvent::Opened { id } => return Some(StreamNews::Opened(id)),
        StreamEvent::Closed { id } => return Some(StreamNews::Closed(id)),
        StreamEvent::Readable { id } => StreamUpdate::Readable { id },
        StreamEvent::Writable { id } => StreamUpdate::Writable { id },
        StreamEvent::Finished { id } => StreamUpdate::Finished { id },
        StreamEvent::Truncated { id, discarded } => {
            if let Ok(mut recv) = streams.recv_stream(id) {
                // Within the buffer: the discarded bytes made the room.
                let _ = recv.grant(discarded);
            }
            StreamUpdate::Truncated { id, discarded }
        }
        StreamEvent::Stopped { id, code } => StreamUpdate::Stopped { id, code },
        StreamEvent::Reset {
            id,
            code,
            by: ResetBy::Unwanted,
        } => StreamUpdate::Cancelled { id, code },
        StreamEvent::Reset { id, code, .. } => StreamUpdate::Reset { id, code },
    };
    Some(StreamNews::Update(update))
}

/// The `correlationID` of a problem response that answers no request in particular.
pub const NO_CORRELATION: &str = "-";

/// The problem type URI of an action the session does not cover (404).
pub const UNKNOWN_ACTION_NAME: &str = "urn:concord:interact:unknown-action-name";
/// The problem type URI of a stream violation (a chunk past the credit: 429; a chunk
/// after END, for an unknown stream, or breaking the chunk rules: 400).
pub const STREAM_VIOLATION: &str = "urn:concord:interact:stream-violation";

/// A `correlationID` the consumer chose for one of its requests.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Correlation(pub String);

/// A request the provider's node must answer ([`ProviderEndpoint::reply`]): its
/// `correlationID` and operation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId {
    correlation_id: String,
    operation: Operation,
}

impl RequestId {
    /// The request's `correlationID`.
    pub fn correlation_id(&self) -> &str {
        &self.correlation_id
    }

    /// The request's operation.
    pub fn operation(&self) -> Operation {
        self.operation
    }
}

/// A problem with a type URI of this module.
fn problem(uri: &str, status: u16, title: &str, detail: impl Into<String>) -> Problem {
    Problem::new(uri)
        .with_title(title)
        .with_status(status)
        .with_detail(detail)
}

/// The response carrying `problem` for a request we could not place.
fn unattributed(operation: Option<Operation>, problem: Problem) -> Message {
    Message::new(
        MessageType::Response,
        operation.unwrap_or(Operation::InvokeAction),
        NO_CORRELATION,
    )
    .with_error(problem)
}

/// The response carrying `problem` for a message that did not decode: on its
/// `correlationID` and operation when its JSON has both (and the id is within the
/// limits), unattributed otherwise. `bytes` is within `Limits::max_message_size` or not
/// parsed at all.
fn answer_undecodable(bytes: &[u8], problem: Problem, limits: &Limits) -> Message {
    let value: Option<Value> = (bytes.len() <= limits.max_message_size)
        .then(|| serde_json::from_slice(bytes).ok())
        .flatten();
    let operation = value
        .as_ref()
        .and_then(|v| v.get("operation")?.as_str())
        .and_then(Operation::parse);
    let correlation = value
        .as_ref()
        .and_then(|v| v.get("correlationID")?.as_str())
        .filter(|c| !c.is_empty() && c.len() <= limits.max_correlation_id);
    match (operation, correlation) {
        (Some(operation), Some(correlation)) => {
            Message::new(MessageType::Response, operation, correlation).with_error(problem)
        }
        _ => unattributed(operation, problem),
    }
}

/// How an action's stream sends without credit.
fn send_mode(interface: &Interface, action: &str) -> SendMode {
    let realtime = interface
        .actions
        .get(action)
        .and_then(|a| a.stream.as_ref())
        .is_some_and(|s| s.realtime);
    if realtime {
        SendMode::Realtime
    } else {
        SendMode::Reliable
    }
}

/// The credit each direction of a stream for `action` starts with: what the action
/// declares (both peers read it from the same interface), else the limits' default.
fn initial_credit(interface: &Interface, action: &str, limits: &StreamLimits) -> u64 {
    interface
        .actions
        .get(action)
        .and_then(|a| a.stream.as_ref())
        .map_or(limits.initial_credit, |s| s.initial_credit)
}

/// Encodes a message to send.
fn encode(message: &Message, limits: &Limits) -> Result<Vec<u8>, crate::MessageError> {
    crate::wire::encode_message(message, limits)
}

/// The prefix of every chunk frame of an endpoint whose frames start with `headroom`
/// bytes of room for the carrier's header: that room, then [`CHUNK_PREFIX`].
fn chunk_prefix(headroom: usize) -> Vec<u8> {
    let mut prefix = vec![0; headroom];
    prefix.push(CHUNK_PREFIX);
    prefix
}

/// An encoded message as a frame with `headroom` bytes of room in front.
fn with_headroom(message: Vec<u8>, headroom: usize) -> Vec<u8> {
    if headroom == 0 {
        return message;
    }
    let mut frame = Vec::with_capacity(headroom + message.len());
    frame.resize(headroom, 0);
    frame.extend_from_slice(&message);
    frame
}
