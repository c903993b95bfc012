//! The streams of one session between its endpoint and the tasks that read and write
//! them: writes wait for the peer's credit, received bytes wait for room in the reader's
//! queue, held in the stream layer (`RecvStream::read_held`): the peer's credit is granted
//! back only as the reader reports them consumed (`RecvStream::release`, h2's
//! `release_capacity`), so a reader that does not read holds at most its credit.
//!
//! This is plumbing: it carries bytes and wake-ups. When a stream ends, stops or is
//! cancelled is the stream layer's rule (`concord_interact::stream`, its `state` module):
//! a dropped reader is a [`RecvStream::stop`](concord_interact::stream::RecvStream::stop),
//! and the layer decides whether that asks the peer to stop or cancels the stream.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use concord_interact::stream::{ResetCode, Sent, StreamError, StreamId, StreamLimits, Streams};
use concord_interact::{ConsumerEndpoint, ProviderEndpoint};
use tokio::sync::{mpsc, oneshot};

use super::handles::{ReaderQueue, SendRoom, StreamReceiver, StreamSender};
use super::{OnDrop, StreamCommand};
use crate::error::CallError;

/// The stream operations both endpoints offer.
pub(crate) trait StreamEnd {
    /// The session's streams.
    fn streams(&mut self) -> &mut Streams;
    /// The next received bytes, held within the credit until [`StreamEnd::release`].
    fn read(&mut self, id: StreamId) -> Option<Bytes> {
        self.streams().recv_stream(id).ok()?.read_held()
    }
    /// The reader consumed `n` bytes: their credit goes back as the refill rule says.
    fn release(&mut self, id: StreamId, n: u64) {
        if let Ok(mut stream) = self.streams().recv_stream(id) {
            stream.release(n);
        }
    }
    /// Whether our direction still takes writes (not finished, not gone).
    fn is_open(&mut self, id: StreamId) -> bool {
        self.streams()
            .send_stream(id)
            .is_ok_and(|stream| stream.is_open())
    }
}

impl StreamEnd for ConsumerEndpoint {
    fn streams(&mut self) -> &mut Streams {
        ConsumerEndpoint::streams(self)
    }
}

impl StreamEnd for ProviderEndpoint {
    fn streams(&mut self) -> &mut Streams {
        ProviderEndpoint::streams(self)
    }
}

/// Sends as much of `bytes` as the credit and queue allow: how much (0 when blocked). A
/// realtime stream takes `bytes` as one frame, whole or not at all: `None` when it was
/// dropped for want of credit. A stream whose peer stopped reading takes all of `bytes`
/// and discards them (the writer is not told; its half still ends in order).
fn send(
    end: &mut impl StreamEnd,
    id: StreamId,
    bytes: &[u8],
    realtime: bool,
) -> Result<Option<usize>, StreamError> {
    let mut stream = end.streams().send_stream(id)?;
    if realtime {
        return match stream.send(bytes) {
            Ok(Sent::Queued) => Ok(Some(bytes.len())),
            // The peer reads no more: the frame is discarded here instead of there.
            Err(StreamError::Stopped { .. }) => Ok(Some(bytes.len())),
            Ok(Sent::Dropped) | Err(StreamError::Blocked { .. }) => Ok(None),
            Err(error) => Err(error),
        };
    }
    match stream.write(bytes) {
        Ok(n) => Ok(Some(n)),
        // The peer reads no more (its reader was dropped): what the writer still sends is
        // discarded here, and its half ends in order when it finishes.
        Err(StreamError::Stopped { .. }) => Ok(Some(bytes.len())),
        Err(StreamError::Blocked { .. }) => Ok(Some(0)),
        Err(error) => Err(error),
    }
}

/// Stream commands taken at once beyond the one that woke the session.
const COMMAND_BATCH: usize = 32;

/// A write waiting for the peer's credit.
#[derive(Debug)]
struct Waiting {
    bytes: Vec<u8>,
    sent: usize,
    finish: bool,
    /// Where the answer goes; `None` for a pipelined write (or the drop of a sender).
    done: Option<oneshot::Sender<Result<usize, CallError>>>,
    /// The sender's room a pipelined write took, given back once it was admitted.
    room: usize,
}

/// One stream: where the peer's bytes go, our writes waiting for credit.
#[derive(Debug)]
struct Pipe {
    incoming: Option<ReaderQueue>,
    /// Each write is one frame, sent whole or dropped for want of credit (live audio).
    realtime: bool,
    waiting: VecDeque<Waiting>,
    /// The sender's room: what its pipelined writes took, and how it hears of a failure.
    room: Arc<SendRoom>,
    /// The peer's END arrived (the layer's `Finished`): the reader sees the end once it
    /// read everything.
    finished: bool,
    /// On a provider, the stream action's part in ending our half.
    action: Option<ActionEnd>,
    /// When a byte last moved either way (data, credit, end).
    last_byte: Instant,
}

impl Drop for Pipe {
    /// The stream is over: the realtime frames our side dropped are logged (a provider's
    /// stream action, which may not count them itself, and a requester alike).
    fn drop(&mut self) {
        let (frames, bytes) = self.room.dropped();
        if frames > 0 {
            tracing::info!(
                frames,
                bytes,
                "the stream is over; our realtime sender dropped frames for want of the peer's credit"
            );
        }
    }
}

/// When a stream action's half ends: once the action returned `Ok` *and* let go of its
/// sender, in whichever order (its writes queued before the sender was dropped go first).
/// An action that fails resets the stream instead ([`Pipes::fail`]).
#[derive(Debug, Default)]
struct ActionEnd {
    returned: bool,
    released: bool,
}

impl Pipe {
    /// Both halves ended (`ours_open`: the layer says whether ours still takes writes) and
    /// everything was handed over: nothing more to do.
    fn is_done(&self, ours_open: bool) -> bool {
        self.finished && !ours_open && self.incoming.is_none() && self.waiting.is_empty()
    }
}

/// Every stream of one session.
#[derive(Debug)]
pub(crate) struct Pipes {
    pipes: HashMap<u32, Pipe>,
    /// Bytes of a stream in its reader's queue, at most (`StreamLimits::max_reader_queue`).
    reader_queue: usize,
    /// Bytes a sender's writes may wait for credit (`StreamLimits::max_send_room`).
    send_room: usize,
    /// Where the handles send their requests, and where the session's loop takes them:
    /// made with the session's first stream, so that a session that never opens one holds
    /// no channel (its first block is about 2 KB).
    channel: Option<(mpsc::Sender<StreamCommand>, mpsc::Receiver<StreamCommand>)>,
}

impl Pipes {
    /// The pipes of a session whose streams have `limits`.
    pub(crate) fn new(limits: &StreamLimits) -> Self {
        Self {
            pipes: HashMap::new(),
            reader_queue: usize::try_from(limits.max_reader_queue).unwrap_or(usize::MAX),
            send_room: usize::try_from(limits.max_send_room).unwrap_or(usize::MAX),
            channel: None,
        }
    }

    /// Whether no stream is open.
    pub(crate) fn is_empty(&self) -> bool {
        self.pipes.is_empty()
    }

    /// A byte moved on stream `id` (the peer's data, credit or end, or ours).
    pub(crate) fn touch(&mut self, id: u32) {
        if let Some(pipe) = self.pipes.get_mut(&id) {
            pipe.last_byte = Instant::now();
        }
    }

    /// When the stream idle longest reaches `limit` with no byte either way.
    pub(crate) fn idle_deadline(&self, limit: Duration) -> Option<Instant> {
        let oldest = self.pipes.values().map(|pipe| pipe.last_byte).min()?;
        Some(oldest + limit)
    }

    /// The streams with no byte either way for `limit` at `now`.
    pub(crate) fn idle(&self, now: Instant, limit: Duration) -> Vec<u32> {
        self.pipes
            .iter()
            .filter(|(_, pipe)| pipe.last_byte + limit <= now)
            .map(|(id, _)| *id)
            .collect()
    }

    /// Where the handles of a stream send their requests.
    fn commands(&mut self) -> mpsc::Sender<StreamCommand> {
        let (commands, _) = self
            .channel
            .get_or_insert_with(|| mpsc::channel(super::STREAM_COMMANDS));
        commands.clone()
    }

    /// The next request of a stream handle; pending while the session has had no stream
    /// (cancel-safe, for the session's `select!`).
    pub(crate) async fn next_command(&mut self) -> StreamCommand {
        if let Some((_, receiver)) = &mut self.channel {
            // The channel holds a sender of its own: it never ends.
            if let Some(command) = receiver.recv().await {
                return command;
            }
        }
        std::future::pending().await
    }

    /// Opens the pipe of stream `id` (a requester's), delivering the peer's bytes to
    /// `incoming`, and returns its sender (which ends our half when dropped).
    pub(crate) fn open(
        &mut self,
        id: u32,
        realtime: bool,
        incoming: ReaderQueue,
        end: &mut impl StreamEnd,
    ) -> StreamSender {
        let sender = StreamSender::new(id, self.commands(), OnDrop::Finish, self.send_room);
        self.insert(id, realtime, incoming, &sender, None, end);
        sender
    }

    /// Opens the pipe of stream `id` for a stream action and returns both its handles:
    /// our half ends once the action returned `Ok` and dropped its sender
    /// ([`Pipes::action_returned`]).
    pub(crate) fn open_for_action(
        &mut self,
        id: u32,
        realtime: bool,
        end: &mut impl StreamEnd,
    ) -> (StreamSender, StreamReceiver) {
        let (incoming, reader) = ReaderQueue::new();
        let sender = StreamSender::new(id, self.commands(), OnDrop::Release, self.send_room);
        let action = Some(ActionEnd::default());
        self.insert(id, realtime, incoming, &sender, action, end);
        (sender, StreamReceiver::new(id, reader, self.commands()))
    }

    /// The pipe of `sender`'s stream: a reliable stream's writes are pipelined (a realtime
    /// one's each wait for their answer: sent whole, or dropped). Its reader reports what
    /// it consumed a quarter of the stream's window at a time: the refill rule's step.
    fn insert(
        &mut self,
        id: u32,
        realtime: bool,
        incoming: ReaderQueue,
        sender: &StreamSender,
        action: Option<ActionEnd>,
        end: &mut impl StreamEnd,
    ) {
        if !realtime {
            sender.room.allow_pipelining();
        }
        let window = end
            .streams()
            .recv_stream(StreamId(id))
            .ok()
            .and_then(|stream| stream.credit().map(|credit| credit.initial()))
            .unwrap_or(0);
        let report_at = usize::try_from(window / 4).unwrap_or(usize::MAX);
        incoming.configure(self.reader_queue, report_at);
        self.pipes.insert(
            id,
            Pipe {
                incoming: Some(incoming),
                realtime,
                waiting: VecDeque::new(),
                room: Arc::clone(&sender.room),
                finished: false,
                action,
                last_byte: Instant::now(),
            },
        );
    }

    /// The stream action of stream `id` returned `Ok`.
    pub(crate) fn action_returned(&mut self, id: u32, end: &mut impl StreamEnd) {
        if let Some(action) = self
            .pipes
            .get_mut(&id)
            .and_then(|pipe| pipe.action.as_mut())
        {
            action.returned = true;
        }
        self.end_after_action(id, end);
    }

    /// Ends our half of stream `id` once its action is done with it.
    fn end_after_action(&mut self, id: u32, end: &mut impl StreamEnd) {
        let Some(pipe) = self.pipes.get_mut(&id) else {
            return;
        };
        let done_with = pipe
            .action
            .as_ref()
            .is_some_and(|action| action.returned && action.released);
        let ending = pipe.waiting.iter().any(|write| write.finish) || !end.is_open(StreamId(id));
        if done_with && !ending {
            pipe.waiting.push_back(Waiting {
                bytes: Vec::new(),
                sent: 0,
                finish: true,
                done: None,
                room: 0,
            });
            self.write(id, end);
        }
    }

    /// A handle's request, and up to [`COMMAND_BATCH`] more that are already queued: the
    /// session then sends what they queued in one flush.
    pub(crate) fn on_command(&mut self, command: StreamCommand, end: &mut impl StreamEnd) {
        self.handle(command, end);
        for _ in 0..COMMAND_BATCH {
            let Some((_, receiver)) = &mut self.channel else {
                return;
            };
            match receiver.try_recv() {
                Ok(command) => self.handle(command, end),
                Err(_) => return,
            }
        }
    }

    fn handle(&mut self, command: StreamCommand, end: &mut impl StreamEnd) {
        match command {
            StreamCommand::Write {
                id,
                bytes,
                finish,
                done,
                pipelined,
            } => {
                // A stream that is gone failed its sender's room already.
                let Some(pipe) = self.pipes.get_mut(&id) else {
                    if let Some(done) = done {
                        let _ = done.send(Err(CallError::Closed("the stream ended".to_owned())));
                    }
                    return;
                };
                let taken = if pipelined {
                    pipe.room.room_for(bytes.len())
                } else {
                    0
                };
                pipe.waiting.push_back(Waiting {
                    bytes,
                    sent: 0,
                    finish,
                    done,
                    room: taken,
                });
                self.write(id, end);
            }
            StreamCommand::Read { id, consumed } => {
                if consumed > 0 {
                    // Credit may go out: a byte moves.
                    self.touch(id);
                    end.release(StreamId(id), u64::try_from(consumed).unwrap_or(u64::MAX));
                }
                self.read(id, end);
            }
            StreamCommand::Release { id } => {
                if let Some(action) = self
                    .pipes
                    .get_mut(&id)
                    .and_then(|pipe| pipe.action.as_mut())
                {
                    action.released = true;
                }
                self.end_after_action(id, end);
            }
            StreamCommand::Abort { id } => {
                if let Ok(stream) = end.streams().send_stream(StreamId(id)) {
                    stream.reset(ResetCode::CANCELLED);
                }
                self.fail(id, &CallError::Closed("the stream was aborted".to_owned()));
            }
        }
    }

    /// Sends what the writers of stream `id` wait to send, as far as the credit goes.
    pub(crate) fn write(&mut self, id: u32, end: &mut impl StreamEnd) {
        let stream = StreamId(id);
        let Some(pipe) = self.pipes.get_mut(&id) else {
            return;
        };
        while let Some(write) = pipe.waiting.front_mut() {
            while write.sent < write.bytes.len() {
                match send(end, stream, &write.bytes[write.sent..], pipe.realtime) {
                    Ok(Some(0)) => return,
                    Ok(Some(n)) => {
                        write.sent += n;
                        pipe.last_byte = Instant::now();
                    }
                    // Dropped whole: the writer hears that nothing went, and it counts.
                    Ok(None) => {
                        pipe.room.record_drop(write.bytes.len() - write.sent);
                        break;
                    }
                    Err(error) => {
                        let error = CallError::Closed(error.to_string());
                        for write in pipe.waiting.drain(..) {
                            if let Some(done) = write.done {
                                let _ = done.send(Err(error.clone()));
                            }
                        }
                        pipe.room.fail(&error);
                        return;
                    }
                }
            }
            let Some(write) = pipe.waiting.pop_front() else {
                return;
            };
            let result = if write.finish {
                end.streams()
                    .send_stream(stream)
                    .and_then(|mut stream| stream.finish())
                    .map(|()| write.sent)
                    .map_err(|error| CallError::Closed(error.to_string()))
            } else {
                Ok(write.sent)
            };
            if write.room > 0 {
                pipe.room.release(write.room);
            }
            match (write.done, result) {
                (Some(done), result) => {
                    let _ = done.send(result);
                }
                (None, Err(error)) => pipe.room.fail(&error),
                (None, Ok(_)) => {}
            }
        }
        if pipe.is_done(end.is_open(stream)) {
            self.pipes.remove(&id);
        }
    }

    /// Moves the peer's bytes on stream `id` to its reader while the reader has room.
    ///
    /// A reader that is gone stops the stream's receiving half: the layer asks the peer
    /// to stop sending (or, on a requester whose half ended, cancels the stream: the
    /// session hears it as `StreamUpdate::Cancelled`).
    pub(crate) fn read(&mut self, id: u32, end: &mut impl StreamEnd) {
        let Some(pipe) = self.pipes.get_mut(&id) else {
            return;
        };
        if pipe
            .incoming
            .as_ref()
            .is_some_and(ReaderQueue::is_abandoned)
        {
            pipe.incoming = None;
            if let Ok(mut stream) = end.streams().recv_stream(StreamId(id)) {
                let _ = stream.stop(ResetCode::CANCELLED);
            }
        }
        if let Some(incoming) = &pipe.incoming {
            loop {
                let Some(slot) = incoming.slot() else {
                    return;
                };
                match end.read(StreamId(id)) {
                    Some(bytes) => {
                        // Held until the reader consumed it: a byte moved.
                        pipe.last_byte = Instant::now();
                        slot.send(bytes);
                    }
                    None => break,
                }
            }
        }
        if pipe.finished {
            // Everything was handed over: the reader sees the end.
            if let Some(incoming) = pipe.incoming.take() {
                incoming.finish();
            }
        }
        if pipe.is_done(end.is_open(StreamId(id))) {
            self.pipes.remove(&id);
        }
    }

    /// The peer stopped reading stream `id` (its STOP, with `code`): its sender hears it
    /// ([`StreamSender::stopped`], and a stream action's next `send`), and what waits to be
    /// sent is dropped as the layer refuses it.
    pub(crate) fn stopped(&mut self, id: u32, code: ResetCode, end: &mut impl StreamEnd) {
        if let Some(pipe) = self.pipes.get(&id) {
            pipe.room.stop(code.0);
        }
        self.write(id, end);
    }

    /// The peer ended its half of stream `id`.
    pub(crate) fn finished(&mut self, id: u32, end: &mut impl StreamEnd) {
        if let Some(pipe) = self.pipes.get_mut(&id) {
            pipe.finished = true;
        }
        self.read(id, end);
    }

    /// Stream `id` is gone (reset, or the session ended): its handles hear `error`.
    pub(crate) fn fail(&mut self, id: u32, error: &CallError) {
        if let Some(pipe) = self.pipes.remove(&id) {
            fail_pipe(pipe, error);
        }
    }

    /// We cancelled stream `id` (its reader was dropped after our half ended: the layer's
    /// rule); its handles hear it.
    pub(crate) fn cancelled(&mut self, id: u32) {
        self.fail(id, &CallError::Closed("the reader was dropped".to_owned()));
    }

    /// Every stream is gone.
    pub(crate) fn fail_all(&mut self, error: &CallError) {
        for (_, pipe) in self.pipes.drain() {
            fail_pipe(pipe, error);
        }
    }
}

/// What the handles of a stream the peer (`by`: "provider" or "requester") reset hear: the
/// reset code as the status when it is one (a failed action's, 400–599), else 499.
pub(crate) fn reset_error(by: &str, code: ResetCode) -> CallError {
    let status = Some(i64::from(code.0))
        .filter(|status| (400..=599).contains(status))
        .unwrap_or(499);
    CallError::Remote {
        code: status,
        message: format!("the {by} reset the stream (code {code})"),
    }
}

fn fail_pipe(mut pipe: Pipe, error: &CallError) {
    if let Some(incoming) = pipe.incoming.take() {
        incoming.fail(error.clone());
    }
    for write in pipe.waiting.drain(..) {
        if let Some(done) = write.done {
            let _ = done.send(Err(error.clone()));
        }
    }
    pipe.room.fail(error);
}
