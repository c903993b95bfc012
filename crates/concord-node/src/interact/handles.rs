//! What a requester holds for the interactions that answer more than once: a long-running
//! action's updates, a subscription's notifications, a stream's two halves.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use concord_interact::stream::StreamLimits;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, Notify, Semaphore};

use super::{StreamCommand, STREAM_QUEUE};
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
        // A session holds a gap only when this queue was full; then this read, the first
        // after it filled, wakes it to send the gap (if its own queue is full it is busy,
        // and it retries its gaps on every frame it handles anyway). Otherwise no wake-up:
        // a reader keeping up costs its session nothing.
        if self.notifications.len() + 1 >= self.notifications.max_capacity() {
            let _ = self.room.try_send(crate::driver::Command::Room);
        }
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

/// What a [`StreamSender`] shares with its session: room for writes that are queued and
/// not yet admitted under the peer's credit, and why the stream failed.
///
/// A write takes room for its bytes (at most the room, `streams.max_send_room`) before it is queued and
/// returns at once; the session gives the room back once the stream layer took the
/// write under the peer's credit. So what a sender has in flight stays bounded by the
/// room plus the credit, and the peer's credit still decides what goes out.
#[derive(Debug)]
pub(crate) struct SendRoom {
    bytes: Semaphore,
    /// The whole room (`StreamLimits::max_send_room`).
    size: usize,
    /// Set by the session: the stream is not realtime, so writes need no answer.
    pipelined: AtomicBool,
    failed: Mutex<Option<CallError>>,
    /// The code of the peer's STOP, once it arrived.
    stopped: OnceLock<u32>,
    /// Wakes [`StreamSender::closed`] and [`StreamSender::stopped`] when the stream fails
    /// or the peer stops reading.
    gone: Notify,
    /// Frames of a realtime stream dropped for want of the peer's credit, and their bytes.
    dropped_frames: AtomicU64,
    dropped_bytes: AtomicU64,
}

impl SendRoom {
    fn new(size: usize) -> Self {
        let size = size.min(Semaphore::MAX_PERMITS);
        Self {
            bytes: Semaphore::new(size),
            size,
            pipelined: AtomicBool::new(false),
            failed: Mutex::new(None),
            stopped: OnceLock::new(),
            gone: Notify::new(),
            dropped_frames: AtomicU64::new(0),
            dropped_bytes: AtomicU64::new(0),
        }
    }

    /// Session: a realtime frame of `len` bytes was dropped (no credit for it).
    pub(crate) fn record_drop(&self, len: usize) {
        self.dropped_frames.fetch_add(1, Ordering::Relaxed);
        self.dropped_bytes
            .fetch_add(u64::try_from(len).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// The frames dropped so far, and their bytes.
    pub(crate) fn dropped(&self) -> (u64, u64) {
        (
            self.dropped_frames.load(Ordering::Relaxed),
            self.dropped_bytes.load(Ordering::Relaxed),
        )
    }

    /// Session: writes on this stream may be pipelined (it is not realtime).
    pub(crate) fn allow_pipelining(&self) {
        self.pipelined.store(true, Ordering::Release);
    }

    /// Session: a pipelined write of `permits` room was admitted.
    pub(crate) fn release(&self, permits: usize) {
        self.bytes.add_permits(permits);
    }

    /// Session: the stream is gone; the sender's next write hears `error`.
    pub(crate) fn fail(&self, error: &CallError) {
        if let Ok(mut failed) = self.failed.lock() {
            failed.get_or_insert_with(|| error.clone());
        }
        self.bytes.close();
        self.gone.notify_waiters();
    }

    /// Session: the peer stopped reading, with `code`.
    pub(crate) fn stop(&self, code: u32) {
        if self.stopped.set(code).is_ok() {
            self.gone.notify_waiters();
        }
    }

    fn error(&self) -> CallError {
        self.failed
            .lock()
            .ok()
            .and_then(|failed| failed.clone())
            .unwrap_or_else(|| CallError::Closed("the stream ended".to_owned()))
    }

    fn has_failed(&self) -> bool {
        self.failed.lock().map_or(true, |failed| failed.is_some())
    }
}

impl SendRoom {
    /// The room a write of `len` bytes takes.
    pub(crate) fn room_for(&self, len: usize) -> usize {
        len.min(self.size)
    }
}

/// What dropping a [`StreamSender`] that was not finished does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnDrop {
    /// Ends our half in order (a requester's sender).
    Finish,
    /// Tells the session the action let go of it ([`StreamCommand::Release`]): the
    /// stream ends once the action also returned `Ok`; an action that failed resets it.
    Release,
}

/// Our half of a stream: bytes to the peer, under its credit.
///
/// Its end: [`StreamSender::finish`], or dropping it. A requester's sender ends its half
/// when dropped. A stream action's sender ends it once the sender is dropped *and* the
/// action returned `Ok`; when the action returns an error (or panics) the peer sees the
/// stream reset, never an orderly end, whatever it had sent before.
#[derive(Debug)]
pub struct StreamSender {
    pub(crate) id: u32,
    pub(crate) commands: mpsc::Sender<StreamCommand>,
    /// Whether our half was ended ([`StreamSender::finish`]) or reset
    /// ([`StreamSender::abort`]); dropping it otherwise does `on_drop`.
    pub(crate) ended: bool,
    on_drop: OnDrop,
    pub(crate) room: Arc<SendRoom>,
    /// The runtime it was made on: where a command that cannot wait is sent from.
    runtime: Option<tokio::runtime::Handle>,
}

impl Drop for StreamSender {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let command = match self.on_drop {
            // Whoever held it panicked: what was sent is not the whole of it.
            _ if std::thread::panicking() => StreamCommand::Abort { id: self.id },
            OnDrop::Finish => StreamCommand::Write {
                id: self.id,
                bytes: Vec::new(),
                finish: true,
                done: None,
                pipelined: false,
            },
            OnDrop::Release => StreamCommand::Release { id: self.id },
        };
        send_without_waiting(&self.commands, &self.runtime, command);
    }
}

/// Queues `command` for the session without waiting (from a destructor, or a call that
/// returns at once): when the session's queue is full it is sent from a task on the
/// handle's runtime, so it is not lost while the session runs (wherever the handle is
/// dropped).
fn send_without_waiting(
    commands: &mpsc::Sender<StreamCommand>,
    runtime: &Option<tokio::runtime::Handle>,
    command: StreamCommand,
) {
    if let Err(mpsc::error::TrySendError::Full(command)) = commands.try_send(command) {
        if let Some(runtime) = runtime {
            let commands = commands.clone();
            runtime.spawn(async move {
                let _ = commands.send(command).await;
            });
        }
    }
}

impl StreamSender {
    /// The sender of stream `id`, whose session takes `commands`; `on_drop` says what
    /// dropping it unfinished does; `room` bytes of its writes may wait for credit.
    pub(crate) fn new(
        id: u32,
        commands: mpsc::Sender<StreamCommand>,
        on_drop: OnDrop,
        room: usize,
    ) -> Self {
        Self {
            id,
            commands,
            ended: false,
            on_drop,
            room: Arc::new(SendRoom::new(room)),
            runtime: tokio::runtime::Handle::try_current().ok(),
        }
    }

    /// Sends `bytes` (split into chunks as needed) and returns how many bytes went. On a
    /// reliable stream the write is queued for the session and the answer is all of
    /// `bytes` at once; it waits while earlier writes fill the sender's room
    /// (`streams.max_send_room`, 1 MiB by default, not yet admitted under the peer's credit), so a sender the peer does not grant credit
    /// to stops. On a realtime stream (live audio) `bytes` is one frame, sent whole or,
    /// when the credit is spent, dropped at once: the answer is then 0.
    ///
    /// # Errors
    /// [`CallError::Closed`] when the stream or session ended, [`CallError::Remote`] when the
    /// peer reset the stream. A queued write that the stream could no longer take is
    /// reported by the next `send` or by [`StreamSender::finish`]. A stream action's sender
    /// whose peer stopped reading: [`CallError::Stopped`] (what it had queued is dropped;
    /// [`StreamSender::stopped`] tells it without a write). A requester's writes after the
    /// provider's STOP are taken and dropped instead, so that its half still ends in order
    /// (the provider's action may wait for the end of its input).
    pub async fn send(&self, bytes: Vec<u8>) -> Result<usize, CallError> {
        if let (OnDrop::Release, Some(&code)) = (self.on_drop, self.room.stopped.get()) {
            return Err(CallError::Stopped { code });
        }
        if !self.room.pipelined.load(Ordering::Acquire) {
            return self.command(bytes, false).await;
        }
        let len = bytes.len();
        let permits = u32::try_from(self.room.room_for(len)).unwrap_or(u32::MAX);
        match self.room.bytes.acquire_many(permits).await {
            Ok(permit) => permit.forget(),
            Err(_) => return Err(self.room.error()),
        }
        let command = StreamCommand::Write {
            id: self.id,
            bytes,
            finish: false,
            done: None,
            pipelined: true,
        };
        self.commands
            .send(command)
            .await
            .map_err(|_| CallError::Closed("the session ended".to_owned()))?;
        Ok(len)
    }

    /// How many frames of a realtime stream this sender's [`send`](Self::send)s dropped
    /// for want of the peer's credit (each answered 0), and their bytes: what of our half
    /// the peer never got, unless sent again. Always `(0, 0)` on a reliable stream.
    pub fn dropped(&self) -> (u64, u64) {
        self.room.dropped()
    }

    /// Ends our half once everything sent before went: the peer reads to the end, then
    /// sees the stream finished. (Dropping the sender ends it too, without waiting; see
    /// [`StreamSender`] for a stream action's.)
    ///
    /// # Errors
    /// As [`StreamSender::send`], for this call and for queued writes.
    pub async fn finish(mut self) -> Result<(), CallError> {
        // A stream action's half ends only once the action returned `Ok`: its `finish`
        // waits for what it sent, then lets go of the stream as a drop does (a `finish`
        // cancelled while it waits still lets go, through the drop).
        let release = self.on_drop == OnDrop::Release;
        self.ended = !release;
        let result = self.command(Vec::new(), !release).await.map(drop);
        if release {
            self.ended = true;
            let release = StreamCommand::Release { id: self.id };
            send_without_waiting(&self.commands, &self.runtime, release);
        }
        if self.room.has_failed() {
            return Err(self.room.error());
        }
        result
    }

    /// Waits until the stream is gone (the peer reset it, its session ended, or it was
    /// aborted) and says why: what a writer with nothing to send waits on to notice, e.g.
    /// to stop the work that would have produced the bytes.
    pub async fn closed(&self) -> CallError {
        loop {
            let gone = self.room.gone.notified();
            tokio::pin!(gone);
            gone.as_mut().enable();
            if self.room.has_failed() {
                return self.room.error();
            }
            gone.await;
        }
    }

    /// Waits until the peer stops reading (its STOP, quinn's `SendStream::stopped`) and
    /// returns the STOP's code; when the stream goes first (the peer reset it, its session
    /// ended, or it was aborted) the error says why. A writer selects on it to stop the
    /// work that produces what nobody reads.
    ///
    /// # Errors
    /// As [`StreamSender::closed`]'s answer, when the stream is gone before any STOP.
    pub async fn stopped(&self) -> Result<u32, CallError> {
        loop {
            let woken = self.room.gone.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if let Some(&code) = self.room.stopped.get() {
                return Ok(code);
            }
            if self.room.has_failed() {
                return Err(self.room.error());
            }
            woken.await;
        }
    }

    /// Resets the stream (both ways): queued writes are discarded and the peer sees a
    /// reset, not an end. Returns at once.
    pub fn abort(mut self) {
        self.ended = true;
        let abort = StreamCommand::Abort { id: self.id };
        send_without_waiting(&self.commands, &self.runtime, abort);
    }

    async fn command(&self, bytes: Vec<u8>, finish: bool) -> Result<usize, CallError> {
        let (done, answer) = oneshot::channel();
        let command = StreamCommand::Write {
            id: self.id,
            bytes,
            finish,
            done: Some(done),
            pipelined: false,
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

/// What the two ends of a [`ReaderQueue`] share.
#[derive(Debug)]
struct ReaderShared {
    /// Bytes in the queue, counted down by the reader.
    queued: AtomicUsize,
    /// The queue's bound in bytes (`StreamLimits::max_reader_queue`), set by the session.
    max_bytes: AtomicUsize,
    /// Consumed bytes the reader reports at once ([`StreamCommand::Read`]): a quarter of
    /// the stream's window, when the refill rule gives the peer credit back. Set by the
    /// session when it opens the stream.
    report_at: AtomicUsize,
    /// How the peer's half ended, set before the session's end is dropped: `Ok` for an
    /// orderly end, the error for a reset or a session that ended. A queue dropped with
    /// neither was lost with its session, which the reader hears as an error too.
    outcome: OnceLock<Result<(), CallError>>,
}

/// The session's end of the queue between a stream and its reader, bounded in pieces
/// ([`STREAM_QUEUE`]) and in bytes (`StreamLimits::max_reader_queue`). The bytes in it are
/// held in the stream layer ([`RecvStream::read_held`](concord_interact::stream::RecvStream::read_held)):
/// they count against the stream's and the session's credit until the reader reports them
/// consumed. The reader sees the end of
/// the stream only after [`ReaderQueue::finish`]; a reset or a lost session is an error,
/// never an end, even when the queue is full at that moment.
#[derive(Debug)]
pub(crate) struct ReaderQueue {
    pieces: mpsc::Sender<Bytes>,
    shared: Arc<ReaderShared>,
}

/// The reader's end of a [`ReaderQueue`], for a [`StreamReceiver`].
#[derive(Debug)]
pub(crate) struct ReaderEnd {
    incoming: mpsc::Receiver<Bytes>,
    shared: Arc<ReaderShared>,
    /// The outcome was reported: the next read says `None`.
    over: bool,
    /// Bytes read and not yet reported consumed to the session.
    unreported: usize,
}

impl ReaderQueue {
    /// A queue and its reader's end.
    pub(crate) fn new() -> (Self, ReaderEnd) {
        let (pieces, incoming) = mpsc::channel(STREAM_QUEUE);
        let max_bytes = usize::try_from(StreamLimits::default().max_reader_queue);
        let shared = Arc::new(ReaderShared {
            queued: AtomicUsize::new(0),
            max_bytes: AtomicUsize::new(max_bytes.unwrap_or(usize::MAX)),
            report_at: AtomicUsize::new(usize::MAX),
            outcome: OnceLock::new(),
        });
        let end = ReaderEnd {
            incoming,
            shared: Arc::clone(&shared),
            over: false,
            unreported: 0,
        };
        (Self { pieces, shared }, end)
    }

    /// Bounds the queue at `max_bytes`, and has the reader report what it consumed once
    /// that comes to `report_at` bytes (at least 1).
    pub(crate) fn configure(&self, max_bytes: usize, report_at: usize) {
        self.shared.max_bytes.store(max_bytes, Ordering::Release);
        self.shared
            .report_at
            .store(report_at.max(1), Ordering::Release);
    }

    /// Room for one more piece, if the queue has a free place and is under its byte
    /// bound (the reader only ever makes more room).
    pub(crate) fn slot(&self) -> Option<ReaderSlot<'_>> {
        let max_bytes = self.shared.max_bytes.load(Ordering::Acquire);
        if self.shared.queued.load(Ordering::Acquire) >= max_bytes {
            return None;
        }
        let permit = self.pieces.try_reserve().ok()?;
        Some(ReaderSlot {
            permit,
            queued: &self.shared.queued,
        })
    }

    /// The peer ended its half and everything was handed over: the reader reads what is
    /// queued, then the end.
    pub(crate) fn finish(self) {
        let _ = self.shared.outcome.set(Ok(()));
    }

    /// The stream failed: the reader reads what is queued, then `error`.
    pub(crate) fn fail(self, error: CallError) {
        let _ = self.shared.outcome.set(Err(error));
    }

    /// Whether the reader is gone (its [`StreamReceiver`] was dropped).
    pub(crate) fn is_abandoned(&self) -> bool {
        self.pieces.is_closed()
    }
}

/// A place in a [`ReaderQueue`], taken before the bytes that fill it are read from the
/// stream (they stay held there until the reader reports them consumed).
pub(crate) struct ReaderSlot<'a> {
    permit: mpsc::Permit<'a, Bytes>,
    queued: &'a AtomicUsize,
}

impl ReaderSlot<'_> {
    /// Hands `bytes` to the reader.
    pub(crate) fn send(self, bytes: Bytes) {
        self.queued.fetch_add(bytes.len(), Ordering::AcqRel);
        self.permit.send(bytes);
    }
}

/// The peer's half of a stream, as it arrives.
#[derive(Debug)]
pub struct StreamReceiver {
    id: u32,
    end: ReaderEnd,
    commands: mpsc::Sender<StreamCommand>,
    /// The runtime it was made on: where a wake-up that cannot wait is sent from.
    runtime: Option<tokio::runtime::Handle>,
}

impl Drop for StreamReceiver {
    /// The session then stops the stream's receiving half (the peer is told to stop
    /// sending, and its END still ends it), so that the stream can end; what was read or
    /// is still queued is reported consumed (it is dropped with the reader).
    fn drop(&mut self) {
        let queued = self.end.shared.queued.load(Ordering::Acquire);
        let read = StreamCommand::Read {
            id: self.id,
            consumed: self.end.unreported.saturating_add(queued),
        };
        send_without_waiting(&self.commands, &self.runtime, read);
    }
}

impl StreamReceiver {
    /// The reader of stream `id` at `end`; its requests go to the session's `commands`.
    pub(crate) fn new(id: u32, end: ReaderEnd, commands: mpsc::Sender<StreamCommand>) -> Self {
        Self {
            id,
            end,
            commands,
            runtime: tokio::runtime::Handle::try_current().ok(),
        }
    }

    /// The next bytes; `None` at the end of the stream. Reading consumes them: the session
    /// then takes more from the peer and grants it credit for as many bytes (reported
    /// a quarter of the stream's window at a time, when the refill rule gives it back).
    pub async fn next(&mut self) -> Option<Result<Bytes, CallError>> {
        let ReaderEnd {
            incoming,
            shared,
            over,
            unreported,
        } = &mut self.end;
        let Some(bytes) = incoming.recv().await else {
            // The session's end is gone: the stream ended, failed, or was lost with its
            // session. That is said once; afterwards the stream is over.
            if std::mem::replace(over, true) {
                return None;
            }
            return match shared.outcome.get() {
                Some(Ok(())) => None,
                Some(Err(error)) => Some(Err(error.clone())),
                None => Some(Err(CallError::Closed(
                    "the session ended before the stream did".to_owned(),
                ))),
            };
        };
        let len = bytes.len();
        let before = shared.queued.fetch_sub(len, Ordering::AcqRel);
        // The session stops handing bytes over only when this queue is full, in pieces or
        // in bytes; then the first read that makes room for a piece, or that takes the
        // bytes below half the bound, wakes it (once: so that wake-up is never lost, it
        // waits for room in the session's queue). Otherwise it needs no wake-up.
        // What it read is reported consumed a quarter window at a time (with such a
        // wake-up, or on its own), so the peer's credit comes back as the refill rule says.
        let pieces_full = incoming.len() + 1 >= incoming.max_capacity();
        let refill = shared.max_bytes.load(Ordering::Acquire) / 2;
        let bytes_full = before >= refill && before - len < refill;
        *unreported = unreported.saturating_add(len);
        let report = *unreported >= shared.report_at.load(Ordering::Acquire);
        if pieces_full || bytes_full || report {
            let read = StreamCommand::Read {
                id: self.id,
                consumed: std::mem::take(unreported),
            };
            send_without_waiting(&self.commands, &self.runtime, read);
        }
        Some(Ok(bytes))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A reader that does not read holds at most `max_reader_queue` in its queue (the
    /// rest waits in the stream's receive buffer, under the peer's credit); the session is
    /// woken to refill it once the reader took it below half, and only then.
    #[tokio::test]
    async fn the_reader_queue_is_bounded_in_bytes_and_refilled_at_half() {
        let (queue, end) = ReaderQueue::new();
        let (commands, mut session) = mpsc::channel(8);
        let mut receiver = StreamReceiver::new(1, end, commands);
        let piece = Bytes::from(vec![0; 64 * 1024]);
        let mut handed = 0;
        while let Some(slot) = queue.slot() {
            slot.send(piece.clone());
            handed += 1;
        }
        let max_bytes = StreamLimits::default().max_reader_queue;
        assert_eq!(handed, usize::try_from(max_bytes).unwrap() / piece.len());
        assert!(handed < STREAM_QUEUE, "the byte bound held first");
        let half = handed / 2;
        for read in 1..=handed {
            let bytes = receiver.next().await.map(|r| r.map(|b| b.len()));
            assert_eq!(bytes, Some(Ok(piece.len())));
            let woken = matches!(session.try_recv(), Ok(StreamCommand::Read { id: 1, .. }));
            assert_eq!(woken, read == half + 1, "read {read}");
        }
        assert!(queue.slot().is_some());
    }

    /// A session that answers the first write and then takes writes without admitting
    /// them (the peer grants no credit): the sender stops once its room is full.
    #[tokio::test]
    async fn pipelined_writes_stop_at_the_room_and_hear_a_failure() {
        let (commands, mut session) = mpsc::channel(1024);
        let room = usize::try_from(StreamLimits::default().max_send_room).unwrap();
        let sender = StreamSender::new(1, commands, OnDrop::Finish, room);
        let room = Arc::clone(&sender.room);
        let first = tokio::spawn(async move {
            let sent = sender.send(vec![0; 10]).await;
            (sender, sent)
        });
        let Some(StreamCommand::Write {
            done: Some(done), ..
        }) = session.recv().await
        else {
            panic!("the first write asks for an answer");
        };
        room.allow_pipelining();
        let _ = done.send(Ok(10));
        let (sender, sent) = first.await.unwrap();
        assert_eq!(sent.unwrap(), 10);

        // 16 writes of 64 KiB fill the 1 MiB room; the 17th waits.
        for _ in 0..16 {
            let sent = tokio::time::timeout(Duration::from_secs(5), sender.send(vec![0; 65536]));
            assert_eq!(sent.await.unwrap().unwrap(), 65536);
        }
        let blocked =
            tokio::time::timeout(Duration::from_millis(100), sender.send(vec![0; 65536])).await;
        assert!(blocked.is_err(), "past the room the sender waits");

        // The session admits one write: room for one more.
        room.release(65536);
        let sent = tokio::time::timeout(Duration::from_secs(5), sender.send(vec![0; 65536]));
        assert_eq!(sent.await.unwrap().unwrap(), 65536);

        // The stream fails: the waiting sender hears why.
        let waiting = tokio::spawn(async move { sender.send(vec![0; 65536]).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        room.fail(&CallError::Closed("reset".to_owned()));
        let error = waiting.await.unwrap().unwrap_err();
        assert!(matches!(error, CallError::Closed(reason) if reason == "reset"));
        let mut writes = 0;
        while let Ok(StreamCommand::Write {
            done: None,
            finish: false,
            ..
        }) = session.try_recv()
        {
            writes += 1;
        }
        assert_eq!(writes, 17, "only what fit in the room was queued");
    }
}
