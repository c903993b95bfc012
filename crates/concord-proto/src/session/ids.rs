//! Deterministic 16-character message ids for natural-language negotiation.

/// Generates ids from a seed (SplitMix64), so a session replays identically in tests.
#[derive(Debug, Clone)]
pub(crate) struct MessageIds {
    state: u64,
}

const ALPHABET: &[u8; 62] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

impl MessageIds {
    pub(crate) fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// The next 16-character alphanumeric id.
    pub(crate) fn next_id(&mut self) -> String {
        let (mut high, mut low) = (self.next_u64(), self.next_u64());
        (0..16)
            .map(|i| {
                let source = if i < 8 { &mut high } else { &mut low };
                let index = (*source % 62) as usize;
                *source /= 62;
                char::from(ALPHABET[index])
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_16_alphanumerics_and_distinct() {
        let mut ids = MessageIds::new(7);
        let a = ids.next_id();
        let b = ids.next_id();
        assert_eq!(a.len(), 16);
        assert!(a.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_ne!(a, b);
        assert_eq!(MessageIds::new(7).next_id(), a);
    }
}
