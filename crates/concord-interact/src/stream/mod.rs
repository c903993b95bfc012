//! Binary streams both ways with credit-based flow control: the request-stream /
//! response-stream pattern (voice in, audio out).
//!
//! One [`Streams`] per session owns every stream (the quinn-proto shape); the application
//! reaches one through a short-lived borrowed handle, [`Streams::send_stream`] or
//! [`Streams::recv_stream`]. Nothing here reads a clock or touches a socket: the driver
//! feeds received chunks ([`Streams::handle_chunk`]) and grants ([`Streams::handle_grant`])
//! in, and drains what to send ([`Streams::poll_transmit`]) and what happened
//! ([`Streams::poll_event`]).
//!
//! - [`header`]: the 9-byte chunk header of PT 1 frames (stream id, sequence, END / RESET /
//!   TRUNCATE).
//! - [`credit`]: RSocket-style byte credits; a sender never exceeds what was granted; the
//!   refill rule and the session-wide credit sit beside the window.
//! - `state`: the per-stream state machine (END, STOP, RESET and when the whole stream
//!   closes or is cancelled); `event` and `error`: what leaves the layer.
//!
//! Every stream is bidirectional: each side has a send half and a receive half, each with
//! its own sequence and credit. Both start with the initial credit the stream was opened
//! with ([`Streams::open`], [`Streams::accept`]; both peers must use the same value: the
//! protocol description states it per stream action). A credit larger than
//! [`StreamLimits::max_receive_buffer`] is refused ([`StreamError::CreditExceedsBuffer`]),
//! not cut down: the peer starts with the full credit and would send past ours.
//!
//! **Stopping and ending.** A reader that wants nothing more calls [`RecvStream::stop`]:
//! a STOP chunk ([`Flags::STOP`]) asks the peer to stop sending (its queued data goes, its
//! writes are refused with [`StreamError::Stopped`], its END still ends its direction). When
//! a stream closes, is cancelled or stays is one rule of the `state` module, applied after
//! every change of either half: the driver above carries bytes and makes no such decision.
//!
//! **Memory.** Each stream's receive buffer is bounded by its credit, and every stream of a
//! session together by [`StreamLimits::max_session_buffer`] ([`SessionCredit`]); a reader
//! that reads with [`RecvStream::read_and_grant`] refills the peer's window by the rule of
//! [`RecvCredit::refill`]. A driver that hands the bytes to a reader elsewhere reads them
//! held ([`RecvStream::read_held`]) and releases them as that reader consumes them
//! ([`RecvStream::release`], h2's `release_capacity`): until then they count against both
//! credits, so a reader that never reads holds its credit, no more.
//!
//! **Where grants and opens travel.** A chunk is a PT 1 frame. A grant
//! ([`Transmit::Grant`], the cumulative total) travels as a chunk too, with the CREDIT
//! flag ([`Transmit::into_frame`] encodes it; [`Streams::handle_chunk`] takes it like
//! [`Streams::handle_grant`]). The request that opens a stream is a message on the message
//! layer. A stream also opens implicitly on the first chunk or grant the peer sends for a
//! new id of its parity.

pub mod credit;
mod error;
mod event;
mod handles;
pub mod header;
mod recv_buffer;
mod state;

use std::collections::{BTreeMap, VecDeque};

pub use credit::{Admitted, CreditError, RecvCredit, SendCredit, SendMode, SessionCredit};
pub use error::{PeerError, StreamError};
pub use event::{ResetBy, Sent, StreamEvent, Transmit};
pub use handles::{RecvStream, SendStream};
pub use header::{Chunk, ChunkHeader, Flags, HeaderError, ResetCode, Side, StreamId, HEADER_LEN};

use state::{Fate, Pending, RecvState, SendState, StreamState};

/// The bounds of the stream layer. Memory per session is at most
/// `max_session_buffer + max_streams × max_send_queue` payload bytes (the receive side
/// also within `max_streams × max_receive_buffer`; bytes read with
/// [`RecvStream::read_held`] count until released), and a driver's writers' queues add at
/// most `max_streams × max_send_room`.
///
/// | field | default | when it is hit |
/// |---|---|---|
/// | `max_streams` | 64 | [`Streams::open`] answers [`StreamError::TooManyStreams`]; a new peer stream is refused with a RESET ([`ResetCode::REFUSED`]) and [`PeerError::TooManyStreams`] |
/// | `max_chunk_size` | 64 KiB | payload bytes per chunk: ours is refused ([`StreamError::ChunkTooLarge`]; [`SendStream::write`] splits); the peer's resets the stream ([`ResetCode::TOO_LARGE`], [`PeerError::ChunkTooLarge`]) |
/// | `initial_credit` | 64 KiB | bytes each direction of a stream the peer opened implicitly (by its first chunk, without a request naming the stream) may carry before the first grant; capped at `max_receive_buffer` |
/// | `max_receive_buffer` | 1 MiB | granted bytes not yet read, per stream (so the receive buffer never exceeds it): a larger grant is refused ([`StreamError::GrantExceedsBuffer`]), and so is a larger initial credit at [`Streams::open`] and [`Streams::accept`] ([`StreamError::CreditExceedsBuffer`]) |
/// | `max_send_queue` | 1 MiB | admitted bytes waiting for [`Streams::poll_transmit`], per stream: past it a send is blocked (or dropped in realtime mode) like past the credit |
/// | `max_session_buffer` | 16 MiB | granted bytes not yet read over every stream of the session ([`SessionCredit`], h2's connection window): a stream whose initial credit does not fit is refused ([`StreamError::SessionFull`] at [`Streams::open`]; a RESET with [`ResetCode::REFUSED`] and [`PeerError::SessionFull`] for the peer's), a grant that does not fit is refused ([`StreamError::SessionFull`]) and a refill waits until reads on any stream make room |
/// | `max_reader_queue` | 1 MiB | for a driver: bytes of one stream waiting in its reader's queue (within the credit, held until released); past it they wait in the receive buffer |
/// | `max_send_room` | 1 MiB | for a driver: bytes of one stream its writer queued and the layer did not admit yet (no credit); past it the writer waits |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StreamLimits {
    /// Streams open at once, both initiators together (default 64).
    pub max_streams: usize,
    /// Largest chunk payload sent or accepted, in bytes (default 64 KiB).
    pub max_chunk_size: usize,
    /// Credit each direction of a stream the peer opened implicitly starts with, in bytes
    /// (default 64 KiB). Streams opened by name ([`Streams::open`], [`Streams::accept`])
    /// start with the credit given there.
    pub initial_credit: u64,
    /// Most granted-but-unread bytes per stream (default 1 MiB).
    pub max_receive_buffer: u64,
    /// Most admitted-but-untransmitted bytes per stream (default 1 MiB).
    pub max_send_queue: u64,
    /// Most granted-but-unread bytes over every stream of the session (default 16 MiB, a
    /// quarter of `max_streams × max_receive_buffer`).
    pub max_session_buffer: u64,
    /// Most bytes a driver moves out of a stream's receive buffer into its reader's queue
    /// (default 1 MiB). They stay within the credit until the reader consumed them
    /// ([`RecvStream::read_held`], [`RecvStream::release`]): this bounds the queue, not
    /// the memory, which the credit bounds.
    pub max_reader_queue: u64,
    /// Most bytes a driver lets a writer queue for a stream beyond `max_send_queue`,
    /// waiting for the peer's credit (default 1 MiB); past it the writer waits.
    pub max_send_room: u64,
}

impl Default for StreamLimits {
    fn default() -> Self {
        Self {
            max_streams: 64,
            max_chunk_size: 64 * 1024,
            initial_credit: 64 * 1024,
            max_receive_buffer: 1024 * 1024,
            max_send_queue: 1024 * 1024,
            max_session_buffer: 16 * 1024 * 1024,
            max_reader_queue: 1024 * 1024,
            max_send_room: 1024 * 1024,
        }
    }
}

/// Every stream of one session: ids, per-stream state, the transmit queue and events.
///
/// ```text
///  app ── open / accept / send_stream(id).send, finish / recv_stream(id).read, stop ─▶ Streams
///  peer ── handle_chunk(PT 1 data) / handle_grant(id, total) ──────────────────▶ Streams
///  Streams ── poll_transmit: Chunk bytes (data, END, STOP, RESET) | Grant (CREDIT) ▶ peer
///  Streams ── poll_event: Opened, Readable, Writable, Finished, Truncated, Stopped,
///                         Reset, Closed ───────────────────────────────────────────▶ app
/// ```
#[derive(Debug)]
pub struct Streams {
    side: Side,
    limits: StreamLimits,
    streams: BTreeMap<StreamId, StreamState>,
    /// The id our next [`Streams::open`] takes (`u64` so exhaustion is visible).
    next_local: u64,
    /// The lowest peer id not seen yet: lower peer ids that are not live are closed.
    next_remote: u64,
    queue: VecDeque<Pending>,
    grants: VecDeque<StreamId>,
    events: VecDeque<StreamEvent>,
    /// Streams that closed after the peer's END, newest last (at most `max_streams`): a
    /// chunk the peer sends on one of them is data after END, not a late chunk of a reset
    /// stream, and is answered as such.
    ended_by_peer: VecDeque<StreamId>,
    /// Bytes in front of every [`Transmit::Chunk`] ([`Streams::set_frame_prefix`]).
    frame_prefix: Vec<u8>,
    /// Granted-but-unread bytes over every stream.
    session: SessionCredit,
    /// Streams whose refill waits for room in the session credit, oldest first.
    starved: VecDeque<StreamId>,
}

/// How a peer's chunk or grant finds its stream.
enum Target {
    Live,
    Closed,
}

impl Streams {
    /// The streams of one session, for the given side (which fixes the parity of the ids
    /// we open). `limits.initial_credit` is capped at `limits.max_receive_buffer`.
    pub fn new(side: Side, mut limits: StreamLimits) -> Self {
        limits.initial_credit = limits.initial_credit.min(limits.max_receive_buffer);
        let peer_first = side.peer().first_stream_id();
        Self {
            side,
            limits,
            streams: BTreeMap::new(),
            next_local: u64::from(side.first_stream_id().0),
            next_remote: u64::from(peer_first.0),
            queue: VecDeque::new(),
            grants: VecDeque::new(),
            events: VecDeque::new(),
            ended_by_peer: VecDeque::new(),
            frame_prefix: Vec::new(),
            session: SessionCredit::new(limits.max_session_buffer),
            starved: VecDeque::new(),
        }
    }

    /// Puts `prefix` (the wire's frame prefix, say) in front of every
    /// [`Transmit::Chunk`] from now on, so a data chunk is built once, in the buffer that
    /// is sent: the prefix, the header and the payload, one allocation and one copy of the
    /// payload. [`Transmit::into_frame`] gives grants the same prefix. Set it before the
    /// first send; chunks queued earlier keep the prefix they were queued with.
    pub fn set_frame_prefix(&mut self, prefix: &[u8]) {
        self.frame_prefix = prefix.to_vec();
    }

    /// What [`Streams::set_frame_prefix`] put in front of every chunk (empty by default).
    pub fn frame_prefix(&self) -> &[u8] {
        &self.frame_prefix
    }

    /// The buffer of one queued chunk: room for the prefix and the header (filled in when
    /// it leaves), then `payload`.
    fn frame_for(&self, payload: &[u8]) -> Vec<u8> {
        let mut frame = Vec::with_capacity(self.frame_prefix.len() + HEADER_LEN + payload.len());
        frame.extend_from_slice(&self.frame_prefix);
        frame.extend_from_slice(&[0; HEADER_LEN]);
        frame.extend_from_slice(payload);
        frame
    }

    /// Our side.
    pub fn side(&self) -> Side {
        self.side
    }

    /// The limits in force.
    pub fn limits(&self) -> &StreamLimits {
        &self.limits
    }

    /// The session-wide receive credit: what every stream together holds granted and
    /// unread.
    pub fn session_credit(&self) -> &SessionCredit {
        &self.session
    }

    /// How many streams are open.
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    /// Whether no stream is open.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    /// Whether `id` is open.
    pub fn contains(&self, id: StreamId) -> bool {
        self.streams.contains_key(&id)
    }

    /// Opens a stream of ours; the caller names the id in the request that opens it on the
    /// peer. `mode` says what our sends do without credit; each direction starts with
    /// `initial_credit` bytes, the value the peer uses too: more than
    /// [`StreamLimits::max_receive_buffer`] is refused ([`StreamError::CreditExceedsBuffer`]).
    pub fn open(&mut self, mode: SendMode, initial_credit: u64) -> Result<StreamId, StreamError> {
        self.check_credit(initial_credit)?;
        if self.streams.len() >= self.limits.max_streams {
            return Err(StreamError::TooManyStreams {
                limit: self.limits.max_streams,
            });
        }
        let id = u32::try_from(self.next_local).map_err(|_| StreamError::IdsExhausted)?;
        self.take_session(initial_credit)?;
        let id = StreamId(id);
        self.next_local += 2;
        self.streams
            .insert(id, StreamState::new(initial_credit, mode));
        Ok(id)
    }

    /// Registers a peer stream named in the peer's request, before any of its chunks, so
    /// we may send on it; each direction starts with `initial_credit` bytes as in
    /// [`Streams::open`]. Already open: only the mode changes. Over the stream limit, or
    /// with a credit over [`StreamLimits::max_receive_buffer`]: the stream is refused with
    /// a RESET ([`ResetCode::REFUSED`]) and its chunks are not taken.
    pub fn accept(
        &mut self,
        id: StreamId,
        mode: SendMode,
        initial_credit: u64,
    ) -> Result<(), StreamError> {
        if id.initiator() == self.side {
            return Err(StreamError::NotPeerStream { id });
        }
        if let Some(stream) = self.streams.get_mut(&id) {
            stream.send.credit.set_mode(mode);
            return Ok(());
        }
        if u64::from(id.0) < self.next_remote {
            return Err(StreamError::StreamClosed { id });
        }
        self.next_remote = u64::from(id.0) + 2;
        let refused = if self.streams.len() >= self.limits.max_streams {
            Err(StreamError::TooManyStreams {
                limit: self.limits.max_streams,
            })
        } else {
            self.check_credit(initial_credit)
                .and_then(|()| self.take_session(initial_credit))
        };
        if let Err(error) = refused {
            self.queue.push_back(Pending::Reset {
                id,
                code: ResetCode::REFUSED,
            });
            return Err(error);
        }
        self.streams
            .insert(id, StreamState::new(initial_credit, mode));
        Ok(())
    }

    /// Takes the session's share of an initial credit, or says it does not fit.
    fn take_session(&mut self, credit: u64) -> Result<(), StreamError> {
        self.session
            .take(credit)
            .map_err(|_| StreamError::SessionFull {
                credit,
                room: self.session.room(),
            })
    }

    /// Refuses an initial credit our receive buffer cannot hold.
    fn check_credit(&self, credit: u64) -> Result<(), StreamError> {
        if credit > self.limits.max_receive_buffer {
            return Err(StreamError::CreditExceedsBuffer {
                credit,
                limit: self.limits.max_receive_buffer,
            });
        }
        Ok(())
    }

    /// The sending direction of a live stream.
    pub fn send_stream(&mut self, id: StreamId) -> Result<SendStream<'_>, StreamError> {
        if !self.streams.contains_key(&id) {
            return Err(StreamError::UnknownStream { id });
        }
        Ok(SendStream { streams: self, id })
    }

    /// The receiving direction of a live stream.
    pub fn recv_stream(&mut self, id: StreamId) -> Result<RecvStream<'_>, StreamError> {
        if !self.streams.contains_key(&id) {
            return Err(StreamError::UnknownStream { id });
        }
        Ok(RecvStream { streams: self, id })
    }

    /// Takes the data of a received PT 1 frame. An error drops the chunk and, when
    /// [`PeerError::reset_code`] says so, resets the stream; the other streams and the
    /// session go on.
    ///
    /// `bytes` is the frame's data after its prefix (header and payload). The payload is
    /// copied once, into the stream's receive buffer (small payloads coalesced): what a
    /// peer holds in our memory is what its credit allows, never the buffers its frames
    /// were read into.
    pub fn handle_chunk(&mut self, bytes: &[u8]) -> Result<(), PeerError> {
        let chunk = Chunk::decode(bytes)?;
        let id = chunk.header.stream_id;
        if let Some(total) = chunk.credit_total() {
            return self.handle_grant(id, total);
        }
        if let Some(code) = chunk.stop_code() {
            self.on_stop(id, code);
            return Ok(());
        }
        if let Some(code) = chunk.reset_code() {
            if self.streams.contains_key(&id) {
                self.remove_with_reset(id, code, Some(ResetBy::Peer));
            } else if id.initiator() != self.side && u64::from(id.0) >= self.next_remote {
                // Opened and cancelled before anything else reached us.
                self.next_remote = u64::from(id.0) + 2;
            }
            return Ok(());
        }
        match self.target(id)? {
            Target::Closed if self.ended_by_peer.contains(&id) => {
                return Err(PeerError::DataAfterEnd {
                    id,
                    sequence: chunk.header.sequence,
                })
            }
            Target::Closed => return Err(PeerError::StreamClosed { id }),
            Target::Live => {}
        }
        let max_chunk_size = self.limits.max_chunk_size;
        let Some(stream) = self.streams.get_mut(&id) else {
            return Err(PeerError::StreamClosed { id });
        };
        let before = stream.recv.credit.outstanding();
        let outcome = stream
            .recv
            .on_chunk(&chunk.header, chunk.payload, max_chunk_size);
        let consumed = before.saturating_sub(stream.recv.credit.outstanding());
        let stopped = matches!(stream.recv.state, RecvState::Stopped(_));
        self.released(consumed);
        if stopped && consumed > 0 {
            self.refill(id);
        }
        let received = match outcome {
            Ok(received) => received,
            Err(error) => {
                if let Some(code) = error.reset_code() {
                    self.remove_with_reset(id, code, Some(ResetBy::Violation));
                }
                return Err(error);
            }
        };
        if let Some(discarded) = received.truncated {
            self.events
                .push_back(StreamEvent::Truncated { id, discarded });
        }
        if received.became_readable {
            self.events.push_back(StreamEvent::Readable { id });
        }
        if received.ended {
            self.events.push_back(StreamEvent::Finished { id });
            self.settle(id);
        }
        Ok(())
    }

    /// The peer's STOP for our sending direction of `id`: what is queued and not yet
    /// transmitted goes (its credit comes back), later writes are discarded, and the writer
    /// hears [`StreamEvent::Stopped`]. An END already queued still goes. A STOP for a
    /// stream that is over changes nothing (it crossed our END or RESET).
    fn on_stop(&mut self, id: StreamId, code: ResetCode) {
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        let send = &mut stream.send;
        if send.stopped.is_some() || send.state == SendState::Finished {
            return;
        }
        send.stopped = Some(code);
        send.blocked = false;
        let (bytes, chunks) = discard_queued(&mut self.queue, id, true);
        send.credit.refund(bytes);
        send.queued_bytes = send.queued_bytes.saturating_sub(bytes);
        send.reserved_seq = send.reserved_seq.saturating_sub(chunks);
        self.events.push_back(StreamEvent::Stopped { id, code });
    }

    /// Takes a grant the peer sent for our sending direction of `id`: the cumulative total
    /// (a repeated or older total changes nothing).
    pub fn handle_grant(&mut self, id: StreamId, total: u64) -> Result<(), PeerError> {
        match self.target(id)? {
            Target::Closed => return Err(PeerError::StreamClosed { id }),
            Target::Live => {}
        }
        let max_send_queue = self.limits.max_send_queue;
        let Some(stream) = self.streams.get_mut(&id) else {
            return Err(PeerError::StreamClosed { id });
        };
        let send = &mut stream.send;
        if send.credit.update_total(total) && send.blocked && send.available(max_send_queue) > 0 {
            send.blocked = false;
            self.events.push_back(StreamEvent::Writable { id });
        }
        Ok(())
    }

    /// The next thing to send: grants first (they unblock the peer), then chunks in the
    /// order they were admitted.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        while let Some(id) = self.grants.pop_front() {
            if let Some(stream) = self.streams.get_mut(&id) {
                if stream.recv.grant_pending {
                    stream.recv.grant_pending = false;
                    return Some(Transmit::Grant {
                        id,
                        total: stream.recv.credit.granted(),
                    });
                }
            }
        }
        while let Some(pending) = self.queue.pop_front() {
            if let Some(bytes) = self.transmit(pending) {
                return Some(Transmit::Chunk(bytes));
            }
        }
        None
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<StreamEvent> {
        self.events.pop_front()
    }

    /// Encodes a queued chunk, assigning its sequence; `None` when its stream is gone.
    fn transmit(&mut self, pending: Pending) -> Option<Vec<u8>> {
        let (id, flags, mut frame, headroom) = match pending {
            Pending::Reset { id, code } => {
                let mut bytes = self.frame_prefix.clone();
                Chunk::reset(id, code).encode_into(&mut bytes);
                return Some(bytes);
            }
            Pending::Stop { id, code } => {
                self.streams.get(&id)?;
                let mut bytes = self.frame_prefix.clone();
                Chunk::stop(id, code).encode_into(&mut bytes);
                return Some(bytes);
            }
            Pending::Data {
                id,
                flags,
                frame,
                headroom,
            } => (id, flags, frame, headroom),
        };
        let max_send_queue = self.limits.max_send_queue;
        let stream = self.streams.get_mut(&id)?;
        let send = &mut stream.send;
        // Reserved when queued, so it fits in 32 bits.
        let sequence = u32::try_from(send.next_seq).ok()?;
        send.next_seq += 1;
        let payload_len = frame.len().saturating_sub(headroom);
        send.queued_bytes = send.queued_bytes.saturating_sub(payload_len as u64);
        let header = ChunkHeader {
            stream_id: id,
            sequence,
            flags,
        };
        let start = headroom.saturating_sub(HEADER_LEN);
        if let Some(room) = frame.get_mut(start..headroom) {
            room.copy_from_slice(&header.to_bytes());
        }
        if flags.contains(Flags::END) {
            send.state = SendState::Finished;
            self.settle(id);
        } else if send.blocked && send.available(max_send_queue) > 0 {
            send.blocked = false;
            self.events.push_back(StreamEvent::Writable { id });
        }
        Some(frame)
    }

    /// Finds the stream of a peer's chunk or grant, opening a new peer stream.
    fn target(&mut self, id: StreamId) -> Result<Target, PeerError> {
        if self.streams.contains_key(&id) {
            return Ok(Target::Live);
        }
        if id.initiator() == self.side {
            return if u64::from(id.0) < self.next_local {
                Ok(Target::Closed)
            } else {
                Err(PeerError::UnknownStream { id })
            };
        }
        if u64::from(id.0) < self.next_remote {
            return Ok(Target::Closed);
        }
        self.next_remote = u64::from(id.0) + 2;
        if self.streams.len() >= self.limits.max_streams {
            self.queue.push_back(Pending::Reset {
                id,
                code: ResetCode::REFUSED,
            });
            return Err(PeerError::TooManyStreams {
                id,
                limit: self.limits.max_streams,
            });
        }
        let credit = self.limits.initial_credit;
        if self.session.take(credit).is_err() {
            self.queue.push_back(Pending::Reset {
                id,
                code: ResetCode::REFUSED,
            });
            return Err(PeerError::SessionFull {
                id,
                credit,
                room: self.session.room(),
            });
        }
        self.streams
            .insert(id, StreamState::new(credit, SendMode::Reliable));
        self.events.push_back(StreamEvent::Opened { id });
        Ok(Target::Live)
    }

    /// Drops a stream's state and its queued chunks; queues a RESET unless the peer sent
    /// it; raises [`StreamEvent::Reset`] unless the application asked for it.
    fn remove_with_reset(&mut self, id: StreamId, code: ResetCode, by: Option<ResetBy>) {
        self.remove(id);
        self.queue.retain(|pending| pending.stream_id() != id);
        if by != Some(ResetBy::Peer) {
            self.queue.push_back(Pending::Reset { id, code });
        }
        if let Some(by) = by {
            self.events.push_back(StreamEvent::Reset { id, code, by });
        }
    }

    /// Applies the stream's fate ([`StreamState::fate`]) after a change of either half.
    fn settle(&mut self, id: StreamId) {
        let Some(fate) = self.streams.get(&id).map(|s| s.fate(self.side)) else {
            return;
        };
        match fate {
            Fate::Live => {}
            Fate::Closed => {
                self.remove(id);
                // Closed cleanly: both ENDs, the peer's among them.
                if self.ended_by_peer.len() >= self.limits.max_streams {
                    self.ended_by_peer.pop_front();
                }
                self.ended_by_peer.push_back(id);
                self.events.push_back(StreamEvent::Closed { id });
            }
            Fate::Cancelled(code) => self.remove_with_reset(id, code, Some(ResetBy::Unwanted)),
        }
    }

    /// Drops a stream's state, giving its unread credit back to the session.
    fn remove(&mut self, id: StreamId) {
        if let Some(stream) = self.streams.remove(&id) {
            self.released(stream.recv.credit.outstanding());
        }
    }

    /// `n` bytes of session credit came back (read, discarded, or a stream gone): the
    /// refills that waited for room go out, oldest first, as far as it goes.
    fn released(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        self.session.release(n);
        while let Some(&id) = self.starved.front() {
            match self.refill(id) {
                Refilled::Waiting => return,
                Refilled::Granted | Refilled::Nothing => {
                    self.starved.pop_front();
                }
            }
        }
    }

    /// Applies the refill rule ([`RecvCredit::refill`]) to `id` within the session's
    /// room.
    fn refill(&mut self, id: StreamId) -> Refilled {
        let Some(stream) = self.streams.get_mut(&id) else {
            return Refilled::Nothing;
        };
        let recv = &mut stream.recv;
        // A stopped reader still grants what it dropped: a peer that never heard the STOP
        // (an older build, another implementation) can finish, and nothing is held.
        if recv.state == RecvState::Ended {
            return Refilled::Nothing;
        }
        let Some(room) = recv.credit.refill() else {
            return Refilled::Nothing;
        };
        if self.session.take(room).is_err() || recv.credit.grant(room).is_err() {
            return Refilled::Waiting;
        }
        if !recv.grant_pending {
            recv.grant_pending = true;
            self.grants.push_back(id);
        }
        Refilled::Granted
    }

    fn stream_mut(&mut self, id: StreamId) -> Result<&mut StreamState, StreamError> {
        self.streams
            .get_mut(&id)
            .ok_or(StreamError::UnknownStream { id })
    }
}

/// What [`Streams::refill`] did.
#[derive(PartialEq, Eq)]
enum Refilled {
    Granted,
    /// No refill due (or no such stream).
    Nothing,
    /// Due, but the session credit has no room for it yet.
    Waiting,
}

/// Takes the queued data chunks of `id` out of `queue` (but its END, with `keep_end`):
/// their payload bytes and their number.
fn discard_queued(queue: &mut VecDeque<Pending>, id: StreamId, keep_end: bool) -> (u64, u64) {
    let (mut bytes, mut chunks) = (0u64, 0u64);
    queue.retain(|pending| match pending {
        Pending::Data {
            id: chunk_id,
            flags,
            frame,
            headroom,
        } if *chunk_id == id && !(keep_end && flags.contains(Flags::END)) => {
            bytes += frame.len().saturating_sub(*headroom) as u64;
            chunks += 1;
            false
        }
        _ => true,
    });
    (bytes, chunks)
}
