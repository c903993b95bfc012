//! RFC 1924 base85 as Python's `base64.b85encode` / `b85decode` write and read it.
//!
//! Encoding uses the `base85` crate. Decoding is our own: the crate's decoder adds group
//! values in `u32` (it panics on overflow in debug builds and wraps in release builds, where
//! Python reports "base85 overflow"), pads a final partial group with the digit 126 instead of
//! `~` (84), and reports no position. Tensor data comes from peers, so the decoder here checks
//! every group, reports where it broke, and is tested byte-for-byte against the crate's encoder
//! and against vectors produced by Python (`testdata/`).

/// Why base85 text did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Base85Error {
    /// A byte outside the alphabet at this index.
    BadChar { index: usize, byte: u8 },
    /// The group starting at this index decodes to more than `u32::MAX`.
    Overflow { group_start: usize },
}

/// The alphabet, in digit order.
const ALPHABET: &[u8; 85] =
    b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~";

/// Marks a byte that is not a digit.
const NOT_A_DIGIT: u8 = 0xFF;

/// Digit value of every byte, or [`NOT_A_DIGIT`].
static DIGITS: [u8; 256] = {
    let mut table = [NOT_A_DIGIT; 256];
    let mut digit = 0;
    while digit < ALPHABET.len() {
        table[ALPHABET[digit] as usize] = digit as u8;
        digit += 1;
    }
    table
};

/// Characters needed for `bytes` bytes: 5 per full 4-byte group, n + 1 for a final group of n.
pub(crate) fn encoded_len(bytes: usize) -> Option<usize> {
    let tail = match bytes % 4 {
        0 => 0,
        partial => partial + 1,
    };
    (bytes / 4).checked_mul(5)?.checked_add(tail)
}

/// Bytes that `chars` characters decode to, or `None` for an impossible length (5k + 1).
pub(crate) fn decoded_len(chars: usize) -> Option<usize> {
    match chars % 5 {
        1 => None,
        0 => Some(chars / 5 * 4),
        partial => Some(chars / 5 * 4 + partial - 1),
    }
}

/// Appends the encoding of `data` to `out`.
pub(crate) fn encode_into(data: &[u8], out: &mut String) {
    out.push_str(&base85::encode(data));
}

/// Decodes base85 `text` whose length is not 5k + 1 (callers check the length against a shape first).
pub(crate) fn decode(text: &[u8]) -> Result<Vec<u8>, Base85Error> {
    let Some(len) = decoded_len(text.len()) else {
        // The length check of every caller rules this out; report it as Python would see it.
        return Err(first_error(text).unwrap_or(Base85Error::Overflow {
            group_start: text.len() - text.len() % 5,
        }));
    };
    let mut out = vec![0u8; len];
    let groups = text.chunks_exact(5);
    let tail = groups.remainder();
    let mut outputs = out.chunks_exact_mut(4);
    // Any bit here means a bad character (bit 7) or a group above u32::MAX (bits 32 and up);
    // checked once at the end, and the first error is then looked for on the slow path.
    let mut bad = 0u64;
    for (group, output) in groups.zip(&mut outputs) {
        if let (Ok(group), Ok(output)) = (
            <&[u8; 5]>::try_from(group),
            <&mut [u8; 4]>::try_from(output),
        ) {
            let (value, flags) = group_value(group);
            bad |= flags;
            *output = (value as u32).to_be_bytes();
        }
    }
    if !tail.is_empty() {
        // Pad with the highest digit, as Python does, and keep the first n - 1 bytes.
        let mut padded = [b'~'; 5];
        padded[..tail.len()].copy_from_slice(tail);
        let (value, flags) = group_value(&padded);
        bad |= flags;
        let bytes = (value as u32).to_be_bytes();
        let kept = tail.len() - 1;
        let start = out.len() - kept;
        out[start..].copy_from_slice(&bytes[..kept]);
    }
    if bad == 0 {
        Ok(out)
    } else {
        Err(first_error(text).unwrap_or(Base85Error::Overflow { group_start: 0 }))
    }
}

/// The value of one 5-character group, and flags that are zero when it is valid
/// (bit 7: a character outside the alphabet; bits 32 and up: more than `u32::MAX`).
#[inline(always)]
fn group_value(group: &[u8; 5]) -> (u64, u64) {
    let digit = |index: usize| u64::from(DIGITS[usize::from(group[index])]);
    let (d0, d1, d2, d3, d4) = (digit(0), digit(1), digit(2), digit(3), digit(4));
    // Independent products (85⁴, 85³, 85², 85) rather than Horner's chain: shorter latency.
    let value = d0 * 52_200_625 + d1 * 614_125 + d2 * 7_225 + d3 * 85 + d4;
    (value, ((d0 | d1 | d2 | d3 | d4) & 0x80) | (value >> 32))
}

/// The first error in `text`, in the order Python finds them (group by group).
fn first_error(text: &[u8]) -> Option<Base85Error> {
    for (number, group) in text.chunks(5).enumerate() {
        let group_start = number * 5;
        if let Some(index) = group
            .iter()
            .position(|&byte| DIGITS[byte as usize] == NOT_A_DIGIT)
        {
            return Some(Base85Error::BadChar {
                index: group_start + index,
                byte: group[index],
            });
        }
        let mut padded = [b'~'; 5];
        padded[..group.len()].copy_from_slice(group);
        if group_value(&padded).1 != 0 {
            return Some(Base85Error::Overflow { group_start });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lengths_follow_python() {
        assert_eq!(encoded_len(0), Some(0));
        assert_eq!(encoded_len(1), Some(2));
        assert_eq!(encoded_len(4), Some(5));
        assert_eq!(encoded_len(7), Some(9));
        assert_eq!(decoded_len(9), Some(7));
        assert_eq!(decoded_len(6), None);
    }

    #[test]
    fn errors_match_python_positions() {
        // Python: b85decode(b'~~~~~') -> "base85 overflow in hunk starting at byte 0"
        assert_eq!(
            decode(b"~~~~~"),
            Err(Base85Error::Overflow { group_start: 0 })
        );
        assert_eq!(
            decode(b"|NsC1"),
            Err(Base85Error::Overflow { group_start: 0 })
        );
        assert_eq!(decode(b"|NsC0"), Ok(vec![0xFF; 4]));
        // A partial group is padded with `~` before the overflow check.
        assert_eq!(
            decode(b"00000~~"),
            Err(Base85Error::Overflow { group_start: 5 })
        );
        assert_eq!(
            decode(b"0000\"0"),
            Err(Base85Error::BadChar {
                index: 4,
                byte: b'"'
            })
        );
    }

    proptest! {
        /// The decoder inverts the `base85` crate's encoder and agrees byte-for-byte with the
        /// crate's decoder on everything that encoder writes (every length, every final group).
        #[test]
        fn decode_matches_the_crate(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let text = base85::encode(&data);
            prop_assert_eq!(text.len(), encoded_len(data.len()).unwrap());
            let ours = decode(text.as_bytes()).unwrap();
            prop_assert_eq!(&ours, &base85::decode(&text).unwrap());
            prop_assert_eq!(ours, data);
        }

        /// Any byte outside the alphabet is reported at its index.
        #[test]
        fn bad_characters_are_located(data in proptest::collection::vec(any::<u8>(), 1..64), at in any::<proptest::sample::Index>(), bad in prop::sample::select(b" \"',./:[\\]".to_vec())) {
            let mut text = base85::encode(&data).into_bytes();
            let index = at.index(text.len());
            text[index] = bad;
            prop_assert_eq!(decode(&text), Err(Base85Error::BadChar { index, byte: bad }));
        }
    }
}
