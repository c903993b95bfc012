//! What a requester holds for the interactions that answer more than once: a long-running
//! action's updates, a subscription's notifications, a stream's two halves.

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::StreamCommand;
use crate::error::CallError;

/// One update of a long-running action ([`Connection::call_with_progress`](crate::Connection::call_with_progress)).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ActionUpdate {
    /// The provider accepted the call under this action id (for
    /// [`Connection::query_action`](crate::Connection::query_action) and
    /// [`Connection::cancel_action`](crate::Connection::cancel_action)).
    Started {
        /// The provider's id of this run.
        action_id: String,
    },
    /// Progress, from 0 to 1, never going back, with partial output if the action has any.
    Progress {
        /// How far the action is, 0 to 1.
        progress: f64,
        /// Output so far.
        partial: Option<Value>,
    },
    /// The one terminal update: the output, or why it failed or was cancelled.
    Done(Result<Value, CallError>),
}

/// The updates of one long-running action, ending with exactly one
/// [`ActionUpdate::Done`].
#[derive(Debug)]
pub struct Progressing {
    pub(crate) updates: mpsc::Receiver<ActionUpdate>,
    pub(crate) action_id: Option<String>,
    pub(crate) done: bool,
}

impl Progressing {
    /// The next update; `None` after [`ActionUpdate::Done`].
    pub async fn next(&mut self) -> Option<ActionUpdate> {
        if self.done {
            return None;
        }
        let update = self.updates.recv().await.unwrap_or_else(|| {
            ActionUpdate::Done(Err(CallError::Closed(
                "the session ended before the action finished".to_owned(),
            )))
        });
        match &update {
            ActionUpdate::Started { action_id } => self.action_id = Some(action_id.clone()),
            ActionUpdate::Done(_) => self.done = true,
            ActionUpdate::Progress { .. } => {}
        }
        Some(update)
    }

    /// The action id, once [`ActionUpdate::Started`] was read.
    pub fn action_id(&self) -> Option<&str> {
        self.action_id.as_deref()
    }

    /// Skips the progress and waits for the result.
    ///
    /// # Errors
    /// The action's failure or cancellation, or [`CallError::Closed`].
    pub async fn result(mut self) -> Result<Value, CallError> {
        while let Some(update) = self.next().await {
            if let ActionUpdate::Done(result) = update {
                return result;
            }
        }
        Err(CallError::Closed("the action's updates ended".to_owned()))
    }
}

/// A notification of a subscription: an event, a property change, or a gap (events that
/// will never be delivered: the replay buffer no longer holds them, or this subscription's
/// queue overflowed). Never silent loss.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Notification {
    /// An event, with its sequence number (per event, from 1).
    Event {
        /// The event's name.
        event: String,
        /// Its sequence number.
        id: u64,
        /// Its data.
        data: Value,
    },
    /// Events `from..=to` of `event` are lost to this subscriber.
    Gap {
        /// The event's name.
        event: String,
        /// The first lost sequence number.
        from: u64,
        /// The last lost sequence number.
        to: u64,
    },
    /// An observed property's new value, with its change number.
    PropertyChanged {
        /// The property's name.
        name: String,
        /// Its change number.
        id: u64,
        /// The new value.
        value: Value,
    },
}

/// The notifications of one subscription (an event or an observed property) until it is
/// ended or the session closes.
#[derive(Debug)]
pub struct Subscription {
    pub(crate) name: String,
    pub(crate) notifications: mpsc::Receiver<Notification>,
    /// Tells the session the reader made room (a gap waiting for room goes out then).
    pub(crate) room: mpsc::Sender<crate::driver::Command>,
    pub(crate) latest: u64,
    pub(crate) last_seen: Option<u64>,
}

impl Subscription {
    /// The next notification; `None` once the session closed.
    pub async fn next(&mut self) -> Option<Notification> {
        let notification = self.notifications.recv().await?;
        // A wake-up for a session holding a gap for lack of room; if its queue is full it
        // is busy, and it retries its gaps on everything it handles anyway.
        let _ = self.room.try_send(crate::driver::Command::Room);
        match &notification {
            Notification::Event { id, .. } | Notification::PropertyChanged { id, .. } => {
                self.last_seen = Some(*id);
            }
            Notification::Gap { to, .. } => self.last_seen = Some(*to),
        }
        Some(notification)
    }

    /// The event's or property's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The newest sequence number when the subscription started.
    pub fn latest_at_start(&self) -> u64 {
        self.latest
    }

    /// The last sequence number read: resume from it after a reconnect
    /// ([`Connection::subscribe`](crate::Connection::subscribe) with `Some(last_seen)`).
    pub fn last_seen(&self) -> Option<u64> {
        self.last_seen
    }
}

/// Our half of a stream: bytes to the peer, under its credit.
#[derive(Debug)]
pub struct StreamSender {
    pub(crate) id: u32,
    pub(crate) commands: mpsc::Sender<StreamCommand>,
    /// Whether our half was ended ([`StreamSender::finish`]); dropping the sender
    /// otherwise ends it too.
    pub(crate) ended: bool,
}

impl Drop for StreamSender {
    fn drop(&mut self) {
        if !self.ended {
            let (done, _) = oneshot::channel();
            let _ = self.commands.try_send(StreamCommand::Write {
                id: self.id,
                bytes: Vec::new(),
                finish: true,
                done,
            });
        }
    }
}

impl StreamSender {
    /// Sends `bytes` (split into chunks as needed), waiting while the peer's credit is
    /// spent, and returns how many bytes went. On a realtime stream (live audio) `bytes` is
    /// one frame, sent whole or, when the credit is spent, dropped at once: the answer is
    /// then 0.
    ///
    /// # Errors
    /// [`CallError::Closed`] when the stream or session ended, [`CallError::Remote`] when the
    /// peer reset the stream.
    pub async fn send(&self, bytes: Vec<u8>) -> Result<usize, CallError> {
        self.command(bytes, false).await
    }

    /// Ends our half: the peer reads to the end, then sees the stream finished. (Dropping
    /// the sender ends it too, without waiting.)
    ///
    /// # Errors
    /// As [`StreamSender::send`].
    pub async fn finish(mut self) -> Result<(), CallError> {
        self.ended = true;
        self.command(Vec::new(), true).await.map(drop)
    }

    async fn command(&self, bytes: Vec<u8>, finish: bool) -> Result<usize, CallError> {
        let (done, answer) = oneshot::channel();
        let command = StreamCommand::Write {
            id: self.id,
            bytes,
            finish,
            done,
        };
        self.commands
            .send(command)
            .await
            .map_err(|_| CallError::Closed("the session ended".to_owned()))?;
        answer
            .await
            .unwrap_or_else(|_| Err(CallError::Closed("the session ended".to_owned())))
    }
}

/// The peer's half of a stream, as it arrives.
#[derive(Debug)]
pub struct StreamReceiver {
    pub(crate) id: u32,
    pub(crate) incoming: mpsc::Receiver<Result<Vec<u8>, CallError>>,
    pub(crate) commands: mpsc::Sender<StreamCommand>,
}

impl StreamReceiver {
    /// The next bytes; `None` at the end of the stream. Reading makes room: the session
    /// then takes more from the peer and grants it credit for as many bytes.
    pub async fn next(&mut self) -> Option<Result<Vec<u8>, CallError>> {
        let item = self.incoming.recv().await?;
        // A wake-up for a session waiting for room; if its queue is full it is busy and
        // looks at every waiting stream anyway.
        let _ = self.commands.try_send(StreamCommand::Read { id: self.id });
        Some(item)
    }
}
