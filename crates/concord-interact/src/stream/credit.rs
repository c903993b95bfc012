//! Credit-based flow control in bytes, after RSocket's REQUEST_N (and h2's `FlowControl`).
//!
//! The receiver grants bytes; grants add up. The sender may have sent at most the sum of
//! the grants (the initial credit included); past it, a reliable sender is told
//! [`CreditError::Blocked`] and a realtime sender drops the chunk and counts it. The
//! receiver checks the same sum on every chunk ([`CreditError::ChunkPastCredit`]).
//!
//! On the wire a grant travels as the cumulative total (`granted()`), not as the
//! increment, so a repeated or reordered grant changes nothing ([`SendCredit::update_total`]
//! keeps the maximum). All arithmetic is checked `u64`: nothing wraps.
//!
//! Two rules sit beside the window: the refill ([`RecvCredit::refill`]: a reader gives the
//! peer its window back once a quarter of it is free) and the session-wide bound
//! ([`SessionCredit`]: what every stream of a session may hold unread together).

/// Why the credit refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CreditError {
    /// The sender has less credit than the chunk needs.
    #[error("blocked: {len} bytes need credit, {available} available")]
    Blocked {
        /// The chunk's length.
        len: u64,
        /// The credit left.
        available: u64,
    },
    /// The peer sent past the credit we granted.
    #[error("chunk of {len} bytes past the granted credit ({available} bytes left)")]
    ChunkPastCredit {
        /// The chunk's length.
        len: u64,
        /// What the peer still had.
        available: u64,
    },
    /// A grant that would overflow the cumulative total.
    #[error("granting {add} bytes more would overflow the total of {granted}")]
    Overflow {
        /// The cumulative grant so far.
        granted: u64,
        /// The grant asked for.
        add: u64,
    },
    /// The session's receive credit has less room than a grant or an initial credit needs
    /// ([`SessionCredit`]).
    #[error("{len} bytes of credit exceed the session's room of {room} bytes")]
    SessionFull {
        /// The credit asked for.
        len: u64,
        /// What the session may still grant.
        room: u64,
    },
}

/// How a sender treats a chunk it has no credit for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SendMode {
    /// Refuse it ([`CreditError::Blocked`]); the application retries when credit arrives.
    #[default]
    Reliable,
    /// Drop it and count it: late audio is worse than lost audio, and nothing buffers.
    Realtime,
}

/// What became of a chunk offered to [`SendCredit::try_send`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Admitted {
    /// The credit was taken: send the chunk.
    Send,
    /// Realtime mode without credit: the chunk is dropped (and counted).
    Dropped,
}

/// The sender's side of one direction of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendCredit {
    granted: u64,
    sent: u64,
    mode: SendMode,
    dropped_chunks: u64,
    dropped_bytes: u64,
}

impl SendCredit {
    /// A sender starting with `initial` bytes of credit.
    pub fn new(initial: u64, mode: SendMode) -> Self {
        Self {
            granted: initial,
            sent: 0,
            mode,
            dropped_chunks: 0,
            dropped_bytes: 0,
        }
    }

    /// Bytes that may still be sent.
    pub fn available(&self) -> u64 {
        self.granted.saturating_sub(self.sent)
    }

    /// The cumulative credit granted so far, the initial credit included.
    pub fn granted(&self) -> u64 {
        self.granted
    }

    /// Bytes sent (credit taken) so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// The sender's mode.
    pub fn mode(&self) -> SendMode {
        self.mode
    }

    /// Changes the sender's mode.
    pub fn set_mode(&mut self, mode: SendMode) {
        self.mode = mode;
    }

    /// Chunks dropped for want of credit (realtime mode).
    pub fn dropped_chunks(&self) -> u64 {
        self.dropped_chunks
    }

    /// Bytes dropped for want of credit (realtime mode).
    pub fn dropped_bytes(&self) -> u64 {
        self.dropped_bytes
    }

    /// Adds `n` bytes to the credit (a REQUEST_N-style increment).
    pub fn grant(&mut self, n: u64) -> Result<(), CreditError> {
        self.granted = self.granted.checked_add(n).ok_or(CreditError::Overflow {
            granted: self.granted,
            add: n,
        })?;
        Ok(())
    }

    /// Applies a cumulative total from the wire: the credit only grows. Returns whether it grew.
    pub fn update_total(&mut self, total: u64) -> bool {
        let grew = total > self.granted;
        self.granted = self.granted.max(total);
        grew
    }

    /// Takes credit for a chunk of `len` bytes; without enough credit, refuses it
    /// ([`SendMode::Reliable`]) or drops and counts it ([`SendMode::Realtime`]).
    pub fn try_send(&mut self, len: u64) -> Result<Admitted, CreditError> {
        let available = self.available();
        if len <= available {
            self.sent += len;
            return Ok(Admitted::Send);
        }
        match self.mode {
            SendMode::Reliable => Err(CreditError::Blocked { len, available }),
            SendMode::Realtime => {
                self.record_drop(len);
                Ok(Admitted::Dropped)
            }
        }
    }

    /// Counts a chunk dropped without taking credit.
    pub fn record_drop(&mut self, len: u64) {
        self.dropped_chunks = self.dropped_chunks.saturating_add(1);
        self.dropped_bytes = self.dropped_bytes.saturating_add(len);
    }

    /// Gives back the credit of `len` bytes that were admitted but never left (discarded
    /// before transmission by a truncate).
    pub fn refund(&mut self, len: u64) {
        self.sent = self.sent.saturating_sub(len);
    }
}

/// The receiver's side of one direction of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvCredit {
    initial: u64,
    granted: u64,
    received: u64,
    consumed: u64,
}

impl RecvCredit {
    /// A receiver that starts by granting `initial` bytes.
    pub fn new(initial: u64) -> Self {
        Self {
            initial,
            granted: initial,
            received: 0,
            consumed: 0,
        }
    }

    /// The credit the stream started with: the window a reader refills as it reads.
    pub fn initial(&self) -> u64 {
        self.initial
    }

    /// The cumulative credit granted so far, the initial credit included; what a grant
    /// message carries.
    pub fn granted(&self) -> u64 {
        self.granted
    }

    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Bytes the peer may still send.
    pub fn available(&self) -> u64 {
        self.granted.saturating_sub(self.received)
    }

    /// Bytes received and not yet consumed (read or discarded).
    pub fn buffered(&self) -> u64 {
        self.received.saturating_sub(self.consumed)
    }

    /// Granted bytes not yet consumed: what the buffer may come to hold at most.
    pub fn outstanding(&self) -> u64 {
        self.granted.saturating_sub(self.consumed)
    }

    /// Adds `n` bytes to the grant; returns the new cumulative total.
    pub fn grant(&mut self, n: u64) -> Result<u64, CreditError> {
        self.granted = self.granted.checked_add(n).ok_or(CreditError::Overflow {
            granted: self.granted,
            add: n,
        })?;
        Ok(self.granted)
    }

    /// Checks and records an arriving chunk of `len` bytes.
    pub fn on_chunk(&mut self, len: u64) -> Result<(), CreditError> {
        let available = self.available();
        if len > available {
            return Err(CreditError::ChunkPastCredit { len, available });
        }
        self.received += len;
        Ok(())
    }

    /// Records `len` buffered bytes as consumed (read by the application or discarded).
    pub fn consume(&mut self, len: u64) {
        self.consumed = self.consumed.saturating_add(len).min(self.received);
    }

    /// The refill rule: what to grant after a read so that the window (the initial credit)
    /// is whole again, once that comes to a quarter of the window (`None` before). So a
    /// bulk stream is not answered with a grant per chunk, and meanwhile the peer keeps at
    /// least three quarters of its window: it is never blocked waiting for a grant held
    /// here. A grant beyond the window ([`RecvStream::grant`](super::RecvStream::grant))
    /// is the application's; the rule never takes it back.
    pub fn refill(&self) -> Option<u64> {
        let room = self.initial.saturating_sub(self.outstanding());
        (room > 0 && room >= self.initial / 4).then_some(room)
    }
}

/// The session-wide receive credit (h2's connection window, quinn's `max_data`): the bytes
/// granted to the peer and not yet consumed, over every stream of a session, stay within
/// [`StreamLimits::max_session_buffer`](super::StreamLimits::max_session_buffer). A
/// stream's initial credit takes its share when the stream opens (a stream it does not fit
/// is refused); a grant takes its share when it goes out; consumed bytes and the credit of
/// a stream that is gone give theirs back. The peer needs no signal of its own: it never
/// sends past its per-stream credits, whose sum this bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCredit {
    limit: u64,
    outstanding: u64,
}

impl SessionCredit {
    /// A session that lets at most `limit` granted bytes wait unread.
    pub fn new(limit: u64) -> Self {
        Self {
            limit,
            outstanding: 0,
        }
    }

    /// The bound.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Granted bytes not yet consumed, over every stream.
    pub fn outstanding(&self) -> u64 {
        self.outstanding
    }

    /// What may still be granted, over every stream.
    pub fn room(&self) -> u64 {
        self.limit.saturating_sub(self.outstanding)
    }

    /// Takes `n` bytes of room for a grant or an initial credit; refused whole when there
    /// is less.
    pub fn take(&mut self, n: u64) -> Result<(), CreditError> {
        let room = self.room();
        if n > room {
            return Err(CreditError::SessionFull { len: n, room });
        }
        self.outstanding += n;
        Ok(())
    }

    /// Gives back `n` bytes of room (consumed, or the credit of a stream that is gone).
    pub fn release(&mut self, n: u64) {
        self.outstanding = self.outstanding.saturating_sub(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reliable_sender_is_blocked_at_its_credit() {
        let mut credit = SendCredit::new(10, SendMode::Reliable);
        assert_eq!(credit.try_send(6), Ok(Admitted::Send));
        assert_eq!(
            credit.try_send(6),
            Err(CreditError::Blocked {
                len: 6,
                available: 4
            })
        );
        credit.grant(2).unwrap();
        assert_eq!(credit.try_send(6), Ok(Admitted::Send));
        assert_eq!(credit.available(), 0);
    }

    #[test]
    fn realtime_sender_drops_and_counts() {
        let mut credit = SendCredit::new(4, SendMode::Realtime);
        assert_eq!(credit.try_send(5), Ok(Admitted::Dropped));
        assert_eq!((credit.dropped_chunks(), credit.dropped_bytes()), (1, 5));
        assert_eq!(credit.sent(), 0);
    }

    #[test]
    fn overflow_is_an_error_and_totals_only_grow() {
        let mut credit = SendCredit::new(u64::MAX - 1, SendMode::Reliable);
        assert!(matches!(credit.grant(2), Err(CreditError::Overflow { .. })));
        assert!(!credit.update_total(5));
        assert_eq!(credit.granted(), u64::MAX - 1);
        assert!(credit.update_total(u64::MAX));

        let mut recv = RecvCredit::new(u64::MAX);
        assert!(matches!(recv.grant(1), Err(CreditError::Overflow { .. })));
    }

    #[test]
    fn receiver_checks_the_grant() {
        let mut recv = RecvCredit::new(8);
        recv.on_chunk(8).unwrap();
        assert_eq!(
            recv.on_chunk(1),
            Err(CreditError::ChunkPastCredit {
                len: 1,
                available: 0
            })
        );
        recv.consume(3);
        assert_eq!((recv.buffered(), recv.outstanding()), (5, 5));
        assert_eq!(recv.grant(3), Ok(11));
        recv.on_chunk(3).unwrap();
    }

    #[test]
    fn the_refill_comes_once_a_quarter_of_the_window_is_free() {
        let mut recv = RecvCredit::new(4000);
        recv.on_chunk(4000).unwrap();
        recv.consume(999);
        assert_eq!(recv.refill(), None, "less than a quarter");
        recv.consume(1);
        assert_eq!(recv.refill(), Some(1000));
        assert_eq!(recv.grant(1000), Ok(5000));
        assert_eq!(recv.refill(), None, "the window is whole again");
        // A grant beyond the window is never taken back by the rule.
        recv.grant(4000).unwrap();
        recv.consume(3000);
        assert_eq!(recv.refill(), None);
    }

    #[test]
    fn the_session_credit_takes_whole_or_refuses() {
        let mut session = SessionCredit::new(10);
        session.take(6).unwrap();
        assert_eq!(
            session.take(5),
            Err(CreditError::SessionFull { len: 5, room: 4 })
        );
        session.release(3);
        session.take(7).unwrap();
        assert_eq!((session.outstanding(), session.room()), (10, 0));
        session.release(20);
        assert_eq!(session.outstanding(), 0);
    }
}
