//! The receive buffer of one stream direction: the peer's bytes in order, each piece in
//! memory of its own size.
//!
//! A received payload is copied once, out of the frame it came in: kept as a slice, it
//! would hold the whole WebSocket read buffer it was read into (up to the frame-size limit,
//! shared with whatever else was read with it), and a peer could pin megabytes with every
//! few bytes of credit. Payloads smaller than [`COALESCE_BELOW`] are appended to one shared
//! piece instead of getting one each, so a flood of tiny chunks costs its bytes, not an
//! allocation per chunk. What the buffer holds is then what the credit allowed, plus at most
//! one partly filled piece.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

/// Payloads smaller than this are coalesced into a shared piece.
pub(super) const COALESCE_BELOW: usize = 4 * 1024;

/// A coalesced piece is handed on whole once it holds this much.
pub(super) const PIECE: usize = 16 * 1024;

/// Bytes received and not yet read, in order.
#[derive(Debug, Default)]
pub(super) struct RecvBuffer {
    /// Whole pieces, oldest first.
    pieces: VecDeque<Bytes>,
    /// Small payloads received after the last whole piece.
    tail: BytesMut,
}

impl RecvBuffer {
    /// Appends a copy of `payload`.
    pub(super) fn push(&mut self, payload: &[u8]) {
        if payload.len() < COALESCE_BELOW {
            // The tail never grows its allocation (growing doubles it, and a frozen piece
            // keeps its whole allocation): a payload that does not fit starts a new one.
            if self.tail.capacity() - self.tail.len() < payload.len() {
                self.close_tail();
                self.tail = BytesMut::with_capacity(PIECE);
            }
            self.tail.extend_from_slice(payload);
            if self.tail.len() >= PIECE {
                self.close_tail();
            }
            return;
        }
        self.close_tail();
        self.pieces.push_back(Bytes::copy_from_slice(payload));
    }

    /// The oldest bytes not yet read: a whole piece, else what the tail holds.
    pub(super) fn pop(&mut self) -> Option<Bytes> {
        if let Some(piece) = self.pieces.pop_front() {
            return Some(piece);
        }
        if self.tail.is_empty() {
            return None;
        }
        // What follows goes on in the rest of the same allocation.
        Some(self.tail.split().freeze())
    }

    /// Drops everything.
    pub(super) fn clear(&mut self) {
        self.pieces.clear();
        self.tail = BytesMut::new();
    }

    /// Whether nothing waits to be read.
    pub(super) fn is_empty(&self) -> bool {
        self.pieces.is_empty() && self.tail.is_empty()
    }

    /// Ends the tail as a piece of its own (what follows goes on in the rest of its
    /// allocation, if any).
    fn close_tail(&mut self) {
        if !self.tail.is_empty() {
            self.pieces.push_back(self.tail.split().freeze());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(buffer: &mut RecvBuffer) -> Vec<Bytes> {
        std::iter::from_fn(|| buffer.pop()).collect()
    }

    #[test]
    fn bytes_come_out_in_order_whatever_the_sizes() {
        let mut buffer = RecvBuffer::default();
        let mut sent = Vec::new();
        for (i, len) in [1, 4095, 4096, 3, 70_000, 2, 2, 16 * 1024]
            .into_iter()
            .enumerate()
        {
            let payload = vec![i as u8; len];
            buffer.push(&payload);
            sent.extend_from_slice(&payload);
        }
        let read: Vec<u8> = drain(&mut buffer).concat();
        assert_eq!(read, sent);
        assert!(buffer.is_empty());
    }

    #[test]
    fn tiny_payloads_share_pieces_instead_of_costing_one_each() {
        let mut buffer = RecvBuffer::default();
        for _ in 0..100_000 {
            buffer.push(&[7]);
        }
        let pieces = drain(&mut buffer);
        assert_eq!(pieces.iter().map(Bytes::len).sum::<usize>(), 100_000);
        assert_eq!(pieces.len(), 100_000_usize.div_ceil(PIECE));
        assert!(pieces.iter().all(|piece| piece.len() <= PIECE));
    }

    /// Payloads sized to make a growing tail double its allocation: the tail's allocation
    /// stays one piece, so what the buffer holds costs its bytes, not twice them.
    #[test]
    fn the_tail_never_grows_past_one_piece() {
        let mut buffer = RecvBuffer::default();
        let mut sent = Vec::new();
        for (i, len) in [4095, 4095, 4095, 4095, 4095, 1, 4000, 3999, 4095, 17]
            .into_iter()
            .cycle()
            .take(200)
            .enumerate()
        {
            let payload = vec![i as u8; len];
            buffer.push(&payload);
            sent.extend_from_slice(&payload);
            assert!(buffer.tail.capacity() <= PIECE, "after push {i}");
            if i % 7 == 0 {
                // A reader taking what is there leaves the rest of the allocation.
                let read = drain(&mut buffer).concat();
                assert_eq!(read, sent[..read.len()]);
                sent.drain(..read.len());
            }
        }
        assert_eq!(drain(&mut buffer).concat(), sent);
    }

    #[test]
    fn a_large_payload_is_a_piece_of_its_own_after_the_tail() {
        let mut buffer = RecvBuffer::default();
        buffer.push(b"ab");
        buffer.push(&[1; COALESCE_BELOW]);
        buffer.push(b"c");
        let pieces = drain(&mut buffer);
        assert_eq!(pieces.len(), 3);
        assert_eq!(&pieces[0][..], b"ab");
        assert_eq!(pieces[1].len(), COALESCE_BELOW);
        assert_eq!(&pieces[2][..], b"c");
    }

    #[test]
    fn clear_forgets_pieces_and_tail() {
        let mut buffer = RecvBuffer::default();
        buffer.push(&[1; 10_000]);
        buffer.push(b"x");
        buffer.clear();
        assert!(buffer.is_empty());
        assert_eq!(buffer.pop(), None);
    }
}
