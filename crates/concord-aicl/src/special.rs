//! Finding the bytes a string must escape (`[`, `]`, `\`), for the parser and the writer.

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Strings longer than this are searched with `memchr` (vectorised) after the first bytes.
const SHORT: usize = 32;

/// The high bit of each byte of `word` equal to `byte` (the lowest set bit is exact; bits above
/// a match may be spurious, which does not matter when only the first match is wanted).
#[inline(always)]
fn matches(word: u64, byte: u8) -> u64 {
    let x = word ^ (ONES * u64::from(byte));
    x.wrapping_sub(ONES) & !x & HIGHS
}

/// Index of the first `[`, `]` or `\` in `bytes`.
///
/// Most AICL strings are short, where a call into `memchr` costs more than it saves: the first
/// bytes are scanned eight at a time in a register.
#[inline(always)]
pub(crate) fn find(bytes: &[u8]) -> Option<usize> {
    let mut offset = 0;
    while let Some(chunk) = bytes[offset..].first_chunk::<8>() {
        if offset >= SHORT {
            return memchr::memchr3(b'[', b']', b'\\', &bytes[offset..])
                .map(|index| offset + index);
        }
        let word = u64::from_le_bytes(*chunk);
        let hits = matches(word, b'[') | matches(word, b']') | matches(word, b'\\');
        if hits != 0 {
            return Some(offset + (hits.trailing_zeros() / 8) as usize);
        }
        offset += 8;
    }
    bytes[offset..]
        .iter()
        .position(|&byte| matches!(byte, b'[' | b']' | b'\\'))
        .map(|index| offset + index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn agrees_with_a_plain_search(bytes in proptest::collection::vec(prop_oneof![any::<u8>(), Just(b'['), Just(b']'), Just(b'\\')], 0..100)) {
            let expected = bytes.iter().position(|&byte| matches!(byte, b'[' | b']' | b'\\'));
            prop_assert_eq!(find(&bytes), expected);
        }
    }
}
