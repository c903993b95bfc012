//! Sans-IO interaction layer for Concord: the patterns of an LMOS agent (request-reply,
//! one request with many responses, notifications, publish-subscribe, streams) over one
//! negotiated session.
//!
//! Nothing here performs I/O or reads a clock: every time-dependent call takes
//! `now: std::time::Instant` from the driver, exactly like `concord_proto::Session`.
//!
//! - [`Message`]: the W3C Web Thing Protocol message (`messageType`, `operation`,
//!   `name`, `correlationID`, …) with bounded, field-by-field decoding, and
//!   [`Correlations`], the requester's table of open correlation ids.
//! - [`Problem`]: RFC 9457 problem details carried in a message's `error`.
//! - [`EventHub`]: publish-subscribe with per-event sequence numbers, a bounded replay
//!   buffer for resuming, explicit [`Gap`]s, and a bounded queue per subscriber with a
//!   declared [`Overflow`] policy.
//! - [`ActionTable`]: long-running actions (pending → running → exactly one terminal
//!   state), query, cancel, and a lease that outlives a dropped connection;
//!   [`ActionTracker`], the caller's view that refuses what the provider must not send.
//! - [`stream`]: binary chunks with credit-based flow control.
//! - [`Interface`]: the affordances one session covers (actions with their [`ActionMode`],
//!   properties, events) with their payload schemas.
//! - [`wire`]: the PT 1 frames of an interface session (a message or a chunk).
//! - [`Thing`]: the provider's node-wide state (events, the [`PropertyTable`], actions);
//!   [`ProviderEndpoint`] and [`ConsumerEndpoint`]: the two ends of one session, sans-IO.
//! - [`document`]: the interface protocol document stating an [`Interface`] and the layer
//!   ([`LAYER_URI`]): written, parsed, judged against ours.
//!
//! Every bound lives in [`Limits`].
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]
#![warn(missing_docs)]

use std::time::Duration;

mod action_records;
mod action_relay;
mod actions;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
mod correlation;
pub mod document;
mod endpoint;
mod event_log;
mod events;
mod interface;
mod message;
mod problem;
mod property;
pub mod stream;
mod thing;
pub mod wire;

pub use action_records::{ActionRecord, ActionRecords, ActionRecordsError, LocalActionRecords};
pub use action_relay::{
    ActionRelay, LocalActions, RelayError, RelayFuture, RELAY_RETRY_AFTER_SECS,
};
pub use actions::{
    Action, ActionEvent, ActionIds, ActionTable, ActionTableError, ActionTracker, CancelReason,
    SequentialIds,
};
pub use concord_text::TextPosition;
pub use correlation::{CorrelationError, CorrelationState, Correlations};
pub use document::{InterfaceDocumentError, InterfaceDocumentLimits, Judgement};
pub use endpoint::{
    ConsumerEndpoint, ConsumerEvent, Correlation, ProviderEndpoint, ProviderEvent, RequestId,
    StreamUpdate, UseError, NO_CORRELATION, STREAM_VIOLATION, UNKNOWN_ACTION_NAME,
};
pub use event_log::{EventLog, EventLogError, EventSink, LocalEventLog};
pub use events::{
    Delivery, DropReason, EventError, EventHub, EventRecord, Gap, HubEvent, Overflow, Subscribed,
    SubscriberId,
};
pub use interface::{
    ActionAffordance, ActionMode, EventAffordance, Interface, PropertyAffordance, StreamSpec,
    LAYER_URI,
};
pub use message::{ActionStatus, Message, MessageError, MessageType, Operation};
pub use problem::{Problem, ProblemType};
pub use property::{PropertyChange, PropertyError, PropertyTable, NOT_ALLOWED, UNKNOWN_PROPERTY};
pub use thing::{ActionCaller, FeedItem, Thing, ThingError};
pub use wire::{decode_frame, encode_message, Frame, InteractionFrameError, CHUNK_PREFIX};

/// Every bound of the interaction layer (streams have their own in [`stream`]).
/// [`Limits::default`] gives the values below.
///
/// | field | default | when it is hit |
/// |---|---|---|
/// | `max_message_size` | 1 MiB | a longer message is refused before JSON parsing ([`MessageError::TooLarge`]); ours too |
/// | `max_depth` | 32 | a message nesting deeper is refused ([`MessageError::TooDeep`]); serde_json's own recursion limit (128) guards the parser itself |
/// | `max_correlation_id` | 128 bytes | `correlationID` longer ([`MessageError::TooLong`]) |
/// | `max_action_id` | 128 bytes | `actionID` longer ([`MessageError::TooLong`]) |
/// | `max_name` | 256 bytes | `name` longer ([`MessageError::TooLong`]); an event declared with a longer name ([`EventError::NameTooLong`]) or an action started with one ([`ActionTableError::NameTooLong`]) |
/// | `max_problem_text` | 4 KiB | a problem's `type`, `title`, `detail` or `instance` longer ([`MessageError::TooLong`]) |
/// | `max_open_correlations` | 1024 | [`Correlations::open`] refuses another request ([`CorrelationError::TooMany`]) |
/// | `max_events` | 256 | [`EventHub::declare`] refuses another event ([`EventError::TooManyEvents`]) |
/// | `replay_events` | 256 | per event, older events leave the replay buffer; a resume from before them answers a [`Gap`] |
/// | `replay_max_age` | none | when set, events older than this leave the replay buffer too |
/// | `subscriber_queue` | 1024 | per subscriber, undelivered messages; past it the hub's [`Overflow`] policy applies |
/// | `subscriber_queue_bytes` | 4 MiB | per subscriber, the undelivered events' data as JSON (a gap counts its name and 16 bytes); past it the hub's [`Overflow`] policy applies as past `subscriber_queue` (one message is queued whatever its size) |
/// | `replay_bytes` | 4 MiB | per event, the replay buffer's data as JSON: older events leave it past this as past `replay_events` (0: no replay) |
/// | `max_subscribers` | 10 000 | [`EventHub::subscribe`] refuses a new subscriber ([`EventError::TooManySubscribers`]) |
/// | `max_actions_per_caller` | 16 | [`Thing`] refuses another unfinished action of a caller whose address, or whose identity, holds this many over all its sessions ([`ActionTableError::CallerLimit`], a 429 problem; [`ActionCaller`]) |
/// | `max_actions` | 256 | [`ActionTable::start`] refuses another unfinished action ([`ActionTableError::TooMany`], a 503 problem) |
/// | `reserved_actions` | 64 | the last this many of `max_actions` are for callers holding none: [`Thing`] refuses another to a caller that holds one ([`ActionTableError::Reserved`], a 503 problem); a reserve not below `max_actions` (`max_actions` lowered alone) counts as a quarter of it ([`Limits::reserved_actions_in_force`]) |
/// | `finished_actions` | 256 | finished actions kept for [`ActionTable::query`]; the oldest is forgotten past it |
/// | `action_lease` | 30 s | an action whose caller detached is cancelled that long after [`ActionTable::detach`] ([`CancelReason::LeaseExpired`]) |
/// | `max_pending_requests` | 1024 | per provider session, requests awaiting the node's [`ProviderEndpoint::reply`]; past it a request is answered with a [`ProblemType::LimitReached`] problem (429) |
///
/// A [`ConsumerEndpoint`] bounds its open requests with `max_open_correlations` and
/// remembers at most that many notify-mode invocations (to attribute their failures); a
/// [`Thing`] declares at most `max_events` events and `max_events` properties, and a
/// provider session's action notifications wait at most two per unfinished action (a
/// newer progress replaces an unsent one).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Largest encoded message accepted or sent, in bytes (default 1 MiB).
    pub max_message_size: usize,
    /// Deepest nesting of arrays and objects in a message, the message object itself
    /// counting as 1 (default 32; serde_json stops at 128 whatever this says).
    pub max_depth: usize,
    /// Longest `correlationID`, in bytes (default 128).
    pub max_correlation_id: usize,
    /// Longest `actionID`, in bytes (default 128).
    pub max_action_id: usize,
    /// Longest affordance name (`name`, event and action names), in bytes (default 256).
    pub max_name: usize,
    /// Longest text member of a problem (`type`, `title`, `detail`, `instance`), in bytes
    /// (default 4 KiB).
    pub max_problem_text: usize,
    /// Most requests awaiting their answers in one [`Correlations`] (default 1024).
    pub max_open_correlations: usize,
    /// Most events one [`EventHub`] declares (default 256).
    pub max_events: usize,
    /// Events kept per event name for resuming subscribers (default 256).
    pub replay_events: usize,
    /// Bytes of events kept per event name for resuming subscribers, weighed as in
    /// `subscriber_queue_bytes`: the oldest leave the replay buffer past it (default 4 MiB;
    /// 0: no replay).
    pub replay_bytes: usize,
    /// When set, events older than this leave the replay buffer even if there is room
    /// (default: none).
    pub replay_max_age: Option<Duration>,
    /// Undelivered messages per subscriber before the [`Overflow`] policy applies
    /// (default 1024).
    pub subscriber_queue: usize,
    /// Bytes of undelivered messages per subscriber before the [`Overflow`] policy
    /// applies, whatever their count: each event weighs its data as JSON plus its name (the
    /// data is shared with the replay buffer and the other subscribers, and held in memory
    /// once more as parsed JSON), a gap its name plus 16. A queue always takes one message,
    /// however large (default 4 MiB).
    pub subscriber_queue_bytes: usize,
    /// Most subscribers one [`EventHub`] serves (default 10 000).
    pub max_subscribers: usize,
    /// Most unfinished actions in one [`ActionTable`] (default 256).
    pub max_actions: usize,
    /// Most unfinished actions of one caller (all its sessions, and those that ended within
    /// their lease, together), so that no caller takes `max_actions` from the others
    /// (default 16).
    pub max_actions_per_caller: usize,
    /// Of `max_actions`, the last this many are only for callers (addresses, identities)
    /// that hold no unfinished action, so that callers filling their shares cannot keep a
    /// newcomer out (default 64, a quarter; 0: no reserve; less than `max_actions`: a
    /// reserve not below it counts as a quarter of it, see
    /// [`Limits::reserved_actions_in_force`]).
    pub reserved_actions: usize,
    /// Finished actions kept so that a caller can still query them (default 256).
    pub finished_actions: usize,
    /// How long an unfinished action survives its caller's detached connection
    /// (default 30 s).
    pub action_lease: Duration,
    /// Requests of one provider session awaiting the node's answer (default 1024).
    pub max_pending_requests: usize,
}

impl Limits {
    /// The default reserve of `max_actions` places (`reserved_actions` for that
    /// `max_actions`): a quarter of them.
    ///
    /// ```
    /// assert_eq!(concord_interact::Limits::reserve_share_of(256), 64);
    /// assert_eq!(concord_interact::Limits::reserve_share_of(32), 8);
    /// ```
    pub fn reserve_share_of(max_actions: usize) -> usize {
        max_actions / 4
    }

    /// The reserve [`Thing`] keeps: `reserved_actions`, or, when that is not below
    /// `max_actions` (the default reserve with `max_actions` lowered alone), a quarter of
    /// `max_actions` ([`Limits::reserve_share_of`]), so that a caller holding an action may
    /// still start another while the table has room.
    ///
    /// ```
    /// let mut limits = concord_interact::Limits::default();
    /// assert_eq!(limits.reserved_actions_in_force(), 64);
    /// limits.max_actions = 32;
    /// assert_eq!(limits.reserved_actions_in_force(), 8);
    /// ```
    pub fn reserved_actions_in_force(&self) -> usize {
        if self.reserved_actions < self.max_actions {
            self.reserved_actions
        } else {
            Self::reserve_share_of(self.max_actions)
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_message_size: 1024 * 1024,
            max_depth: 32,
            max_correlation_id: 128,
            max_action_id: 128,
            max_name: 256,
            max_problem_text: 4096,
            max_open_correlations: 1024,
            max_events: 256,
            replay_events: 256,
            replay_bytes: 4 * 1024 * 1024,
            replay_max_age: None,
            subscriber_queue: 1024,
            subscriber_queue_bytes: 4 * 1024 * 1024,
            max_subscribers: 10_000,
            max_actions: 256,
            max_actions_per_caller: 16,
            reserved_actions: 64,
            finished_actions: 256,
            action_lease: Duration::from_secs(30),
            max_pending_requests: 1024,
        }
    }
}
