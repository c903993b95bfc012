//! The per-stream state machine: one [`SendHalf`] and one [`RecvHalf`] per stream, and
//! the rule that decides what becomes of the whole stream ([`StreamState::fate`]).
//!
//! ```text
//! send half:  Open ──finish()──▶ Finishing (END queued) ──END transmitted──▶ Finished
//!             (the peer's STOP marks it stopped: queued data goes, later writes are
//!              refused, END still ends it)
//! recv half:  Open ──END received──▶ Ended ──buffer read──▶ (drained)
//!             Open ──stop()──▶ Stopped (STOP sent; data discarded) ──END──▶ Ended
//! either:     ──RESET sent or received──▶ gone (the whole stream, both ways)
//! ```
//!
//! The whole stream ([`Fate`]), decided after every change of either half:
//! - **closed** when the send half is `Finished` and the receive half `Ended` and drained;
//! - **cancelled** (a RESET with the stop's code) on the requester's side when its receive
//!   half is stopped and its send half ended before the peer's END, in either order: the
//!   side that asked for the stream wants nothing more of it, so the provider's work on it
//!   ends too. The provider's side is never cancelled so: it waits for the requester's END
//!   (the requester's writes are refused at its end once the STOP arrived, and it finishes
//!   in order);
//! - **live** otherwise.
//!
//! Connection-wide bookkeeping (ids, the transmit queue, the session credit, events) lives
//! in [`Streams`](super::Streams).

use bytes::Bytes;

use super::credit::{RecvCredit, SendCredit, SendMode};
use super::header::{ChunkHeader, Flags, ResetCode, Side, StreamId};
use super::recv_buffer::RecvBuffer;
use super::PeerError;

/// Where the sending direction of a stream stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SendState {
    /// Data may be sent.
    Open,
    /// END is queued, not yet transmitted.
    Finishing,
    /// END was transmitted.
    Finished,
}

/// The sending direction of one stream.
#[derive(Debug)]
pub(super) struct SendHalf {
    pub(super) credit: SendCredit,
    pub(super) state: SendState,
    /// The sequence the next transmitted chunk carries.
    pub(super) next_seq: u64,
    /// Sequences taken by chunks transmitted or queued (`next_seq` + queued chunks).
    pub(super) reserved_seq: u64,
    /// Payload bytes admitted and waiting in the transmit queue.
    pub(super) queued_bytes: u64,
    /// A send was refused or dropped for want of credit or queue room: announce
    /// `Writable` when room comes back.
    pub(super) blocked: bool,
    /// The peer's STOP and its code: it reads nothing more of this direction.
    pub(super) stopped: Option<ResetCode>,
}

impl SendHalf {
    pub(super) fn new(initial_credit: u64, mode: SendMode) -> Self {
        Self {
            credit: SendCredit::new(initial_credit, mode),
            state: SendState::Open,
            next_seq: 0,
            reserved_seq: 0,
            queued_bytes: 0,
            blocked: false,
            stopped: None,
        }
    }

    /// Whether our direction is not finished (a stopped one still is open: `finish` ends
    /// it).
    pub(super) fn is_open(&self) -> bool {
        self.state == SendState::Open
    }

    /// What may be sent now: the credit, bounded by the room left in the send queue.
    pub(super) fn available(&self, max_send_queue: u64) -> u64 {
        self.credit
            .available()
            .min(max_send_queue.saturating_sub(self.queued_bytes))
    }

    /// Whether another chunk can still get a 32-bit sequence number.
    pub(super) fn has_sequence_left(&self) -> bool {
        self.reserved_seq <= u64::from(u32::MAX)
    }
}

/// Where the receiving direction of a stream stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RecvState {
    /// Data may arrive.
    Open,
    /// We asked the peer to stop (a STOP went out): what still arrives is checked and
    /// discarded until its END.
    Stopped(ResetCode),
    /// The peer's END arrived.
    Ended,
}

/// The receiving direction of one stream.
#[derive(Debug)]
pub(super) struct RecvHalf {
    pub(super) credit: RecvCredit,
    pub(super) state: RecvState,
    /// The sequence the next chunk must carry.
    pub(super) expected_seq: u64,
    /// Bytes received and not yet read, in order (their total is `credit.buffered()`).
    pub(super) buffer: RecvBuffer,
    /// A grant for this stream waits in the transmit queue.
    pub(super) grant_pending: bool,
    /// Bytes read out of the buffer and not yet released by the application
    /// ([`RecvStream::read_held`](super::RecvStream::read_held)): still within the credit,
    /// so the refill and the session credit wait for them.
    pub(super) held: u64,
}

/// What an accepted chunk did to the receive half.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Received {
    /// The buffer went from empty to holding data.
    pub(super) became_readable: bool,
    /// Bytes a TRUNCATE discarded, when it carried the flag.
    pub(super) truncated: Option<u64>,
    /// The chunk carried END.
    pub(super) ended: bool,
}

impl RecvHalf {
    pub(super) fn new(initial_credit: u64) -> Self {
        Self {
            credit: RecvCredit::new(initial_credit),
            state: RecvState::Open,
            expected_seq: 0,
            buffer: RecvBuffer::default(),
            grant_pending: false,
            held: 0,
        }
    }

    /// Applies a (non-RESET) chunk. Errors say which rule it broke; the caller decides
    /// between dropping the chunk and resetting the stream ([`PeerError::reset_code`]).
    pub(super) fn on_chunk(
        &mut self,
        header: &ChunkHeader,
        payload: &[u8],
        max_chunk_size: usize,
    ) -> Result<Received, PeerError> {
        let id = header.stream_id;
        let got = header.sequence;
        if self.state == RecvState::Ended {
            return Err(PeerError::DataAfterEnd { id, sequence: got });
        }
        let expected = self.expected_seq;
        if u64::from(got) < expected {
            return Err(PeerError::Duplicate { id, expected, got });
        }
        if u64::from(got) > expected {
            return Err(PeerError::SequenceGap { id, expected, got });
        }
        if payload.len() > max_chunk_size {
            return Err(PeerError::ChunkTooLarge {
                id,
                len: payload.len(),
                limit: max_chunk_size,
            });
        }
        let len = payload.len() as u64;
        let available = self.credit.available();
        if self.credit.on_chunk(len).is_err() {
            return Err(PeerError::ChunkPastCredit { id, len, available });
        }
        self.expected_seq += 1;
        let mut received = Received::default();
        if let RecvState::Stopped(_) = self.state {
            // Sent before our STOP reached the peer: checked, counted and dropped.
            self.credit.consume(len);
        } else if header.flags.contains(Flags::TRUNCATE) {
            let discarded = self.discard();
            received.truncated = Some(discarded);
        }
        if !payload.is_empty() && self.state == RecvState::Open {
            received.became_readable = self.buffer.is_empty();
            self.buffer.push(payload);
        }
        if header.flags.contains(Flags::END) {
            self.state = RecvState::Ended;
            received.ended = true;
        }
        Ok(received)
    }

    /// Pops the oldest buffered bytes, counting them consumed.
    pub(super) fn read(&mut self) -> Option<Bytes> {
        let chunk = self.buffer.pop()?;
        self.credit.consume(chunk.len() as u64);
        Some(chunk)
    }

    /// Pops the oldest buffered bytes and holds them: they stay within the credit until
    /// [`RecvHalf::release`].
    pub(super) fn read_held(&mut self) -> Option<Bytes> {
        let chunk = self.buffer.pop()?;
        self.held = self.held.saturating_add(chunk.len() as u64);
        Some(chunk)
    }

    /// Counts up to `n` held bytes consumed; returns how many were held.
    pub(super) fn release(&mut self, n: u64) -> u64 {
        let released = n.min(self.held);
        self.held -= released;
        self.credit.consume(released);
        released
    }

    /// Bytes in the buffer (received, neither read nor held).
    pub(super) fn unread(&self) -> u64 {
        self.credit.buffered().saturating_sub(self.held)
    }

    /// Drops the whole buffer (a TRUNCATE, a stop); returns the bytes discarded. Held
    /// bytes are the application's: they stay held.
    pub(super) fn discard(&mut self) -> u64 {
        let discarded = self.unread();
        self.buffer.clear();
        self.credit.consume(discarded);
        discarded
    }

    /// END received, everything read, and nothing read is still held.
    pub(super) fn is_drained(&self) -> bool {
        self.state == RecvState::Ended && self.buffer.is_empty() && self.held == 0
    }
}

/// Both directions of one stream.
#[derive(Debug)]
pub(super) struct StreamState {
    pub(super) send: SendHalf,
    pub(super) recv: RecvHalf,
}

impl StreamState {
    pub(super) fn new(initial_credit: u64, mode: SendMode) -> Self {
        Self {
            send: SendHalf::new(initial_credit, mode),
            recv: RecvHalf::new(initial_credit),
        }
    }

    /// What becomes of the whole stream now, on `side` (see the module's rules).
    pub(super) fn fate(&self, side: Side) -> Fate {
        if self.send.state == SendState::Finished && self.recv.is_drained() {
            return Fate::Closed;
        }
        match self.recv.state {
            RecvState::Stopped(code) if side == Side::Requester && !self.send.is_open() => {
                Fate::Cancelled(code)
            }
            _ => Fate::Live,
        }
    }
}

/// What becomes of a whole stream ([`StreamState::fate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fate {
    /// It goes on.
    Live,
    /// Both directions ended and everything was read: the state goes.
    Closed,
    /// Nothing of it is wanted any more: it is reset with the code.
    Cancelled(ResetCode),
}

/// One entry of the transmit queue: a chunk whose sequence is assigned when it leaves
/// (so a truncate can still discard it without leaving a gap).
#[derive(Debug)]
pub(super) enum Pending {
    /// A data, END or TRUNCATE chunk: `frame` is the frame prefix, room for the header
    /// (`headroom` bytes together) and the payload.
    Data {
        id: StreamId,
        flags: Flags,
        frame: Vec<u8>,
        headroom: usize,
    },
    /// A RESET chunk.
    Reset { id: StreamId, code: ResetCode },
    /// A STOP chunk (our receiving direction wants nothing more).
    Stop { id: StreamId, code: ResetCode },
}

impl Pending {
    pub(super) fn stream_id(&self) -> StreamId {
        match self {
            Self::Data { id, .. } | Self::Reset { id, .. } | Self::Stop { id, .. } => *id,
        }
    }
}
