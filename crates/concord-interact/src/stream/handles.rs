//! The borrowed handles of one stream ([`SendStream`], [`RecvStream`]): what the
//! application does to one direction, applied to the [`Streams`] that own it.

use bytes::Bytes;

use super::credit::{Admitted, CreditError, RecvCredit, SendCredit, SendMode};
use super::event::Sent;
use super::header::{Flags, ResetCode, StreamId, HEADER_LEN};
use super::state::{self, Fate, Pending, RecvState, SendState};
use super::{discard_queued, Refilled, StreamError, Streams};
#[cfg(doc)]
use super::{ResetBy, StreamEvent, StreamLimits, Transmit};

/// The sending direction of one stream, borrowed from [`Streams`].
#[derive(Debug)]
pub struct SendStream<'a> {
    pub(super) streams: &'a mut Streams,
    pub(super) id: StreamId,
}

impl SendStream<'_> {
    /// The stream.
    pub fn id(&self) -> StreamId {
        self.id
    }

    /// Bytes that may be sent now: the credit, bounded by the send queue's room.
    pub fn available(&self) -> u64 {
        let max_send_queue = self.streams.limits.max_send_queue;
        self.streams
            .streams
            .get(&self.id)
            .map_or(0, |s| s.send.available(max_send_queue))
    }

    /// Whether our direction is still open: not finished (a stopped one is open: it refuses
    /// writes, and `finish` ends it).
    pub fn is_open(&self) -> bool {
        self.streams
            .streams
            .get(&self.id)
            .is_some_and(|s| s.send.is_open())
    }

    /// The peer's STOP code, when it asked us to stop sending ([`StreamEvent::Stopped`]).
    pub fn stopped(&self) -> Option<ResetCode> {
        self.streams
            .streams
            .get(&self.id)
            .and_then(|s| s.send.stopped)
    }

    /// The credit of this direction (granted, sent, dropped).
    pub fn credit(&self) -> Option<&SendCredit> {
        self.streams.streams.get(&self.id).map(|s| &s.send.credit)
    }

    /// Changes what sends do without credit.
    pub fn set_mode(&mut self, mode: SendMode) -> Result<(), StreamError> {
        self.streams.stream_mut(self.id)?.send.credit.set_mode(mode);
        Ok(())
    }

    /// Sends `payload` as one chunk, whole or not at all (a voice frame stays a frame).
    /// Without credit: [`StreamError::Blocked`] in reliable mode, [`Sent::Dropped`]
    /// (counted in [`SendCredit::dropped_chunks`]) in realtime mode. After the peer's STOP:
    /// [`StreamError::Stopped`].
    pub fn send(&mut self, payload: &[u8]) -> Result<Sent, StreamError> {
        let id = self.id;
        let limits = self.streams.limits;
        if payload.len() > limits.max_chunk_size {
            return Err(StreamError::ChunkTooLarge {
                len: payload.len(),
                limit: limits.max_chunk_size,
            });
        }
        let send = &mut self.streams.stream_mut(id)?.send;
        check_writable(id, send)?;
        let len = payload.len() as u64;
        let queue_room = limits.max_send_queue.saturating_sub(send.queued_bytes);
        let admitted = if len > queue_room {
            match send.credit.mode() {
                SendMode::Reliable => Err(CreditError::Blocked {
                    len,
                    available: send.available(limits.max_send_queue),
                }),
                SendMode::Realtime => {
                    send.credit.record_drop(len);
                    Ok(Admitted::Dropped)
                }
            }
        } else {
            send.credit.try_send(len)
        };
        match admitted {
            Ok(Admitted::Send) => {
                let frame = self.streams.frame_for(payload);
                self.queue(Flags::NONE, frame);
                Ok(Sent::Queued)
            }
            Ok(Admitted::Dropped) => {
                send.blocked = true;
                Ok(Sent::Dropped)
            }
            Err(_) => {
                send.blocked = true;
                Err(StreamError::Blocked {
                    id,
                    len,
                    available: send.available(limits.max_send_queue),
                })
            }
        }
    }

    /// Sends as much of `data` as the credit, the queue and one chunk allow; returns how
    /// many bytes went (a byte pipe). Nothing at all: [`StreamError::Blocked`]. Ignores
    /// the realtime mode: a byte pipe never drops. After the peer's STOP:
    /// [`StreamError::Stopped`].
    pub fn write(&mut self, data: &[u8]) -> Result<usize, StreamError> {
        let id = self.id;
        let limits = self.streams.limits;
        let send = &mut self.streams.stream_mut(id)?.send;
        check_writable(id, send)?;
        if data.is_empty() {
            return Ok(0);
        }
        let available = send.available(limits.max_send_queue);
        let n = usize::try_from(available)
            .unwrap_or(usize::MAX)
            .min(limits.max_chunk_size)
            .min(data.len());
        if n == 0 {
            send.blocked = true;
            return Err(StreamError::Blocked {
                id,
                len: data.len() as u64,
                available,
            });
        }
        // `n` is within the credit, so the mode never comes into play: nothing drops.
        if send.credit.try_send(n as u64) != Ok(Admitted::Send) {
            send.blocked = true;
            return Err(StreamError::Blocked {
                id,
                len: data.len() as u64,
                available,
            });
        }
        let frame = self.streams.frame_for(data.get(..n).unwrap_or(data));
        self.queue(Flags::NONE, frame);
        Ok(n)
    }

    /// Ends our direction (half close): an END chunk after what is queued. On the
    /// requester's side, after its reader stopped ([`RecvStream::stop`]) and before the
    /// peer's END, this cancels the stream instead ([`ResetBy::Unwanted`]).
    pub fn finish(&mut self) -> Result<(), StreamError> {
        let id = self.id;
        let send = &mut self.streams.stream_mut(id)?.send;
        check_open(id, send)?;
        send.state = SendState::Finishing;
        let frame = self.streams.frame_for(&[]);
        self.queue(Flags::END, frame);
        self.streams.settle(id);
        Ok(())
    }

    /// Cuts what the peer has not played (realtime voice interruption): our queued,
    /// untransmitted chunks are discarded (their credit comes back) and a TRUNCATE tells
    /// the peer to discard its buffer. The stream goes on. Returns the bytes discarded here.
    pub fn truncate(&mut self) -> Result<u64, StreamError> {
        let id = self.id;
        let streams = &mut *self.streams;
        let send = &mut streams
            .streams
            .get_mut(&id)
            .ok_or(StreamError::UnknownStream { id })?
            .send;
        check_writable(id, send)?;
        // An open direction has no END queued: every chunk of it goes.
        let (discarded_bytes, discarded_chunks) = discard_queued(&mut streams.queue, id, false);
        send.credit.refund(discarded_bytes);
        send.queued_bytes = send.queued_bytes.saturating_sub(discarded_bytes);
        send.reserved_seq = send.reserved_seq.saturating_sub(discarded_chunks);
        let frame = streams.frame_for(&[]);
        self.queue(Flags::TRUNCATE, frame);
        Ok(discarded_bytes)
    }

    /// Aborts the stream both ways with `code`; its state goes at once.
    pub fn reset(self, code: ResetCode) {
        self.streams.remove_with_reset(self.id, code, None);
    }

    /// Queues a chunk built by [`Streams::frame_for`], reserving its sequence (checked by
    /// [`check_open`]).
    fn queue(&mut self, flags: Flags, frame: Vec<u8>) {
        let headroom = self.streams.frame_prefix.len() + HEADER_LEN;
        if let Some(stream) = self.streams.streams.get_mut(&self.id) {
            stream.send.reserved_seq += 1;
            stream.send.queued_bytes += frame.len().saturating_sub(headroom) as u64;
            self.streams.queue.push_back(Pending::Data {
                id: self.id,
                flags,
                frame,
                headroom,
            });
        }
    }
}

/// Refuses sending on a finished direction or one out of sequence numbers.
fn check_open(id: StreamId, send: &state::SendHalf) -> Result<(), StreamError> {
    if send.state != SendState::Open {
        return Err(StreamError::SendFinished { id });
    }
    if !send.has_sequence_left() {
        return Err(StreamError::SequenceExhausted { id });
    }
    Ok(())
}

/// Refuses writing where [`check_open`] does, and after the peer's STOP.
fn check_writable(id: StreamId, send: &state::SendHalf) -> Result<(), StreamError> {
    check_open(id, send)?;
    match send.stopped {
        Some(code) => Err(StreamError::Stopped { id, code }),
        None => Ok(()),
    }
}

/// The receiving direction of one stream, borrowed from [`Streams`].
#[derive(Debug)]
pub struct RecvStream<'a> {
    pub(super) streams: &'a mut Streams,
    pub(super) id: StreamId,
}

impl RecvStream<'_> {
    /// The stream.
    pub fn id(&self) -> StreamId {
        self.id
    }

    /// The oldest received bytes not yet read (one chunk's payload, or several small
    /// ones together: a stream is a byte stream), or `None` when nothing is buffered.
    /// Reading the last bytes after END closes the stream if our direction is finished too
    /// ([`StreamEvent::Closed`]).
    pub fn read(&mut self) -> Option<Bytes> {
        let chunk = self.streams.streams.get_mut(&self.id)?.recv.read()?;
        self.streams.released(chunk.len() as u64);
        self.streams.settle(self.id);
        Some(chunk)
    }

    /// [`RecvStream::read`], then the refill rule ([`RecvCredit::refill`]): once a quarter
    /// of the window is free, the peer gets it back (a [`Transmit::Grant`] follows), as
    /// far as the session credit has room; the rest waits for reads on any stream of the
    /// session to make room ([`StreamLimits::max_session_buffer`]).
    pub fn read_and_grant(&mut self) -> Option<Bytes> {
        let chunk = self.read()?;
        let id = self.id;
        if !self.streams.starved.contains(&id) && self.streams.refill(id) == Refilled::Waiting {
            self.streams.starved.push_back(id);
        }
        Some(chunk)
    }

    /// The oldest received bytes, like [`RecvStream::read`], but held (h2's model of
    /// `release_capacity`): they stay within the stream's credit and the session credit
    /// until the application says it consumed them ([`RecvStream::release`]), so a reader
    /// that keeps what it read without consuming it gets no more credit back. What an
    /// application holds of a stream is then bounded by the credit, wherever it keeps it.
    pub fn read_held(&mut self) -> Option<Bytes> {
        self.streams.streams.get_mut(&self.id)?.recv.read_held()
    }

    /// The application consumed `n` bytes it read with [`RecvStream::read_held`] (at most
    /// what it holds; returns how many were released): they leave the session credit and
    /// the refill rule applies, as after [`RecvStream::read_and_grant`]. Releasing the
    /// last held bytes after END closes the stream if our direction is finished too.
    pub fn release(&mut self, n: u64) -> u64 {
        let id = self.id;
        let Some(stream) = self.streams.streams.get_mut(&id) else {
            return 0;
        };
        let released = stream.recv.release(n);
        self.streams.released(released);
        if released > 0
            && !self.streams.starved.contains(&id)
            && self.streams.refill(id) == Refilled::Waiting
        {
            self.streams.starved.push_back(id);
        }
        self.streams.settle(id);
        released
    }

    /// Bytes read with [`RecvStream::read_held`] and not yet released.
    pub fn held(&self) -> u64 {
        self.streams
            .streams
            .get(&self.id)
            .map_or(0, |s| s.recv.held)
    }

    /// Bytes buffered and not read.
    pub fn buffered(&self) -> u64 {
        self.streams
            .streams
            .get(&self.id)
            .map_or(0, |s| s.recv.unread())
    }

    /// The peer's END arrived and everything was read.
    pub fn is_finished(&self) -> bool {
        self.streams
            .streams
            .get(&self.id)
            .is_none_or(|s| s.recv.is_drained())
    }

    /// The credit of this direction (granted, received, buffered).
    pub fn credit(&self) -> Option<&RecvCredit> {
        self.streams.streams.get(&self.id).map(|s| &s.recv.credit)
    }

    /// Grants the peer `n` more bytes (cumulative, like RSocket's REQUEST_N); a
    /// [`Transmit::Grant`] carrying the new total follows. Returns the total. After the
    /// peer's END, or our [`RecvStream::stop`], a grant changes nothing. A grant past the
    /// room of the session credit is refused ([`StreamError::SessionFull`]).
    pub fn grant(&mut self, n: u64) -> Result<u64, StreamError> {
        let id = self.id;
        let max = self.streams.limits.max_receive_buffer;
        let session_room = self.streams.session.room();
        let recv = &mut self.streams.stream_mut(id)?.recv;
        if recv.state != RecvState::Open || n == 0 {
            return Ok(recv.credit.granted());
        }
        if n > session_room {
            return Err(StreamError::SessionFull {
                credit: n,
                room: session_room,
            });
        }
        let room = max.saturating_sub(recv.credit.outstanding());
        if n > room {
            return Err(StreamError::GrantExceedsBuffer {
                id,
                requested: n,
                room,
            });
        }
        let total = recv
            .credit
            .grant(n)
            .map_err(|_| StreamError::GrantExceedsBuffer {
                id,
                requested: n,
                room,
            })?;
        if !recv.grant_pending {
            recv.grant_pending = true;
            self.streams.grants.push_back(id);
        }
        // Within the room checked above.
        let _ = self.streams.session.take(n);
        Ok(total)
    }

    /// Stops reading (quinn's `stop`; a reader that wants nothing more): what is buffered
    /// is discarded (and what was held, [`RecvStream::read_held`], released), a STOP with `code` asks the peer to stop sending, and what it sent
    /// before the STOP reached it is discarded on arrival; its END still ends this
    /// direction. On the requester's side, when our direction is already ended (and the
    /// peer's is not), nothing of the stream is wanted: it is reset with `code` instead
    /// ([`ResetBy::Unwanted`]). After the peer's END only the buffer goes.
    pub fn stop(&mut self, code: ResetCode) -> Result<(), StreamError> {
        let id = self.id;
        let recv = &mut self.streams.stream_mut(id)?.recv;
        let open = match recv.state {
            RecvState::Stopped(_) => return Ok(()),
            RecvState::Open => true,
            RecvState::Ended => false,
        };
        // The reader wants nothing more: what it held is released with the buffer.
        let held = recv.held;
        let discarded = recv.discard() + recv.release(held);
        if open {
            recv.state = RecvState::Stopped(code);
        }
        self.streams.released(discarded);
        if open
            && self
                .streams
                .streams
                .get(&id)
                .map(|s| s.fate(self.streams.side))
                == Some(Fate::Live)
        {
            self.streams.queue.push_back(Pending::Stop { id, code });
        }
        self.streams.settle(id);
        Ok(())
    }

    /// Cancels the stream both ways with `code` (a receiver that wants no more); its
    /// state goes at once.
    pub fn reset(self, code: ResetCode) {
        self.streams.remove_with_reset(self.id, code, None);
    }
}
