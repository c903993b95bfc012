//! The LMOS interaction patterns on a node: the provider's affordances beyond
//! request-reply (long-running actions, fire-and-forget actions, streams, properties,
//! events) and the requester's handles for them, over one interface session.
//!
//! The interaction layer itself is the sans-IO `concord-interact`; this module drives it:
//! - `affordances`: what a provider serves ([`Property`], [`Event`], the action backends
//!   [`ProgressAction`] and [`StreamAction`]) and the node-wide state shared by its
//!   sessions (the `Thing`: event fan-out, property values, long-running actions), with
//!   [`Publisher`] to publish events and set properties from anywhere;
//! - `handles`: the requester's [`Progressing`], [`Subscription`], [`StreamSender`] and
//!   [`StreamReceiver`];
//! - `consumer` and `provider`: each side's part of a session's driver; `pipes`: the
//!   streams between an endpoint and the tasks reading and writing them.

mod affordances;
pub(crate) mod body_stream;
mod consumer;
mod handles;
mod pipes;
mod provider;
pub(crate) mod relay;

pub(crate) use affordances::{Affordances, Backend, ThingBackends};
pub use affordances::{
    Event, ProgressAction, ProgressReporter, Property, PublishError, Publisher, StreamAction,
    StreamIo,
};
pub(crate) use consumer::{ConsumerState, Interaction, Sink};
pub use handles::{
    ActionUpdate, Notification, Progressing, StreamReceiver, StreamSender, Subscription,
};
pub(crate) use handles::{OnDrop, ReaderQueue};
pub(crate) use provider::ProviderInteract;

/// Updates of one long-running action buffered for a requester that reads them slowly;
/// past it the oldest progress is dropped (the terminal update is never dropped).
pub(crate) const UPDATES_QUEUE: usize = 64;
/// Notifications of one subscription buffered for a requester that reads them slowly;
/// past it they are dropped and reported as a gap.
pub(crate) const NOTIFICATION_QUEUE: usize = 1024;
/// Pieces of one stream buffered for the reader; past it the session stops handing the
/// reader the peer's bytes (they wait in the stream's receive buffer, and the peer's credit
/// runs out). In bytes the queue is bounded by `StreamLimits::max_reader_queue`, and what
/// it holds stays within the peer's credit until the reader consumed it: a full queue is
/// refilled once the reader has taken half of it, and what the reader consumed is
/// reported a quarter of the stream's window at a time, not per piece.
pub(crate) const STREAM_QUEUE: usize = 64;
/// Stream writes (ours, waiting for credit) queued per session.
pub(crate) const STREAM_COMMANDS: usize = 64;

/// A request of a stream handle to its session.
#[derive(Debug)]
pub(crate) enum StreamCommand {
    /// Send these bytes (and end our half when `finish`); answer how many were sent.
    Write {
        id: u32,
        bytes: Vec<u8>,
        finish: bool,
        /// Where the answer goes; `None` for a pipelined write (or a drop), which hears of
        /// a failure through the sender's room.
        done: Option<tokio::sync::oneshot::Sender<Result<usize, crate::error::CallError>>>,
        /// A pipelined write: it took room for its bytes from the sender's room, which the
        /// session gives back once the write is admitted.
        pipelined: bool,
    },
    /// The reader made room, or consumed `consumed` bytes (their credit goes back to
    /// the peer as the refill rule says): take more of the peer's chunks.
    Read { id: u32, consumed: usize },
    /// Reset the stream both ways ([`StreamSender::abort`]).
    Abort { id: u32 },
    /// A stream action's sender was dropped unfinished: the stream ends once the action
    /// returned `Ok` too ([`handles::OnDrop::Release`]).
    Release { id: u32 },
}
