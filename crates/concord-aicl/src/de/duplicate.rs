//! Strict mode's duplicate-key check, made cheap for the common case where every key is new.
//!
//! Two ways, for disjoint sets of keys, so a key is only ever compared with keys of its own set:
//! - a key that is one of the target struct's `fields` (the list serde passes to
//!   `deserialize_struct`) is one bit of a 64-bit mask, found by comparing the key with the field
//!   that follows the last one matched (struct text is usually in field order);
//! - any other key (maps, `Value`, unknown fields, fields past the 64th) is hashed from its raw
//!   text: a 64-bit filter answers "new" for most keys, a clash compares the full hashes of the
//!   keys seen, and only equal hashes compare text. Above [`LINEAR_KEY_CHECK`] keys a dictionary
//!   moves to a hash set.
//!
//! In strict mode an escape has one spelling, so equal raw text means equal keys and the raw
//! text can stand for the key.

use std::collections::HashSet;

/// Above this many other keys a dictionary checks duplicates with a hash set instead of a scan.
const LINEAR_KEY_CHECK: usize = 16;

/// A key of a dictionary being read: the hash and place of its raw text.
#[derive(Clone, Copy, Debug)]
pub(super) struct SeenKey {
    hash: u64,
    start: usize,
    end: usize,
}

/// The duplicate-key state of one dictionary. The keys themselves are kept in a list shared by
/// all the dictionaries being read (nested ones append after this one's and are truncated when
/// they end), so reading a dictionary allocates nothing.
pub(super) struct KeyCheck<'de> {
    /// The names of the target struct's fields; empty when the target is not a struct.
    fields: &'static [&'static str],
    /// The field expected next: the one after the last field matched.
    next_field: usize,
    /// One bit per field (of the first 64) already seen.
    seen_fields: u64,
    /// Where this dictionary's other keys start in the shared list.
    keys_before: usize,
    /// One bit per other key seen, chosen by the top bits of its hash.
    filter: u64,
    /// The other keys, once there are more than [`LINEAR_KEY_CHECK`].
    large: Option<HashSet<&'de str>>,
}

impl<'de> KeyCheck<'de> {
    /// The check for a dictionary read into a struct with these `fields` (empty for any other
    /// target) whose other keys go after the first `keys_before` of the shared list.
    pub(super) fn new(fields: &'static [&'static str], keys_before: usize) -> Self {
        KeyCheck {
            fields,
            next_field: 0,
            seen_fields: 0,
            keys_before,
            filter: 0,
            large: None,
        }
    }

    /// The field expected next (the one after the last field matched), if it is one of the
    /// first 64.
    #[inline(always)]
    pub(super) fn expected_field(&self) -> Option<&'static str> {
        self.fields
            .get(self.next_field)
            .filter(|_| self.next_field < 64)
            .copied()
    }

    /// Records that the key just read is [`Self::expected_field`]; `false` (nothing recorded)
    /// if this dictionary already had it, for the caller to take the general path.
    #[inline(always)]
    pub(super) fn take_expected_field(&mut self) -> bool {
        let Some(bit) = u32::try_from(self.next_field)
            .ok()
            .and_then(|index| 1u64.checked_shl(index))
        else {
            return false;
        };
        if self.seen_fields & bit != 0 {
            return false;
        }
        self.seen_fields |= bit;
        self.next_field += 1;
        true
    }

    /// Records the key `key` (decoded), whose raw text is `text[start..end]`, and tells whether
    /// this dictionary already had it.
    #[inline(always)]
    pub(super) fn is_duplicate(
        &mut self,
        keys: &mut Vec<SeenKey>,
        text: &'de str,
        key: &str,
        (start, end): (usize, usize),
    ) -> bool {
        if let Some(bit) = self.field_bit(key) {
            let duplicate = self.seen_fields & bit != 0;
            self.seen_fields |= bit;
            return duplicate;
        }
        self.other_is_duplicate(keys, text, start, end)
    }

    /// The mask bit of `key` if it is one of the first 64 fields.
    #[inline(always)]
    fn field_bit(&mut self, key: &str) -> Option<u64> {
        let expected = self.next_field;
        let index = match self.fields.get(expected) {
            Some(field) if same_key(field.as_bytes(), key.as_bytes()) => expected,
            _ => self.fields.iter().position(|&field| field == key)?,
        };
        self.next_field = index + 1;
        1u64.checked_shl(u32::try_from(index).ok()?)
    }

    /// A key that is not a field: the filter, then the hashes, then the text.
    #[inline(never)]
    fn other_is_duplicate(
        &mut self,
        keys: &mut Vec<SeenKey>,
        text: &'de str,
        start: usize,
        end: usize,
    ) -> bool {
        let hash = raw_key_hash(text.as_bytes(), start, end);
        let bit = 1u64 << (hash >> 58);
        let count = keys.len() - self.keys_before;
        if self.filter & bit == 0 && count < LINEAR_KEY_CHECK {
            self.filter |= bit;
            keys.push(SeenKey { hash, start, end });
            return false;
        }
        self.other_is_duplicate_slow(keys, text, SeenKey { hash, start, end })
    }

    /// A key whose filter bit was already set, or a large dictionary.
    #[cold]
    #[inline(never)]
    fn other_is_duplicate_slow(
        &mut self,
        keys: &mut Vec<SeenKey>,
        text: &'de str,
        key: SeenKey,
    ) -> bool {
        let raw = &text[key.start..key.end];
        if let Some(set) = &mut self.large {
            return !set.insert(raw);
        }
        let mine = &keys[self.keys_before..];
        if mine
            .iter()
            .any(|seen| seen.hash == key.hash && &text[seen.start..seen.end] == raw)
        {
            return true;
        }
        if mine.len() < LINEAR_KEY_CHECK {
            self.filter |= 1u64 << (key.hash >> 58);
            keys.push(key);
        } else {
            let mut set: HashSet<&'de str> = mine
                .iter()
                .map(|seen| &text[seen.start..seen.end])
                .collect();
            set.insert(raw);
            self.large = Some(set);
        }
        false
    }
}

/// `a == b` for short keys without a call into `memcmp`: one or two words.
#[inline(always)]
pub(super) fn same_key(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    match (a.first_chunk::<8>(), b.first_chunk::<8>()) {
        (Some(a_start), Some(b_start)) if a.len() <= 16 => {
            a_start == b_start && a.last_chunk::<8>() == b.last_chunk::<8>()
        }
        (None, None) => a.iter().zip(b).all(|(x, y)| x == y),
        _ => a == b,
    }
}

/// A hash of the raw key `bytes[start..end]` from its length, first 8 and last 8 bytes: keys of
/// up to 8 bytes never clash, and longer ones rarely do. Reads the input past the key only to
/// load a whole word, then masks what is not the key's.
#[inline(always)]
fn raw_key_hash(bytes: &[u8], start: usize, end: usize) -> u64 {
    let length = end - start;
    let first = match bytes.get(start..).and_then(<[u8]>::first_chunk::<8>) {
        Some(word) if length >= 8 => u64::from_le_bytes(*word),
        Some(word) => u64::from_le_bytes(*word) & ((1u64 << (8 * length)) - 1),
        None => {
            // Within 8 bytes of the end of the input (a key in malformed text).
            let mut word = [0u8; 8];
            let key = bytes.get(start..end).unwrap_or_default();
            word[..key.len()].copy_from_slice(key);
            u64::from_le_bytes(word)
        }
    };
    let last = match bytes.get(..end).and_then(<[u8]>::last_chunk::<8>) {
        Some(word) if length > 8 => u64::from_le_bytes(*word),
        _ => 0,
    };
    (first ^ last.rotate_left(29) ^ (length as u64).wrapping_mul(0xFF51_AFD7_ED55_8CCD))
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `keys` (no escapes) as one dictionary; the index of the first duplicate.
    fn first_duplicate(fields: &'static [&'static str], keys: &[&str]) -> Option<usize> {
        let mut text = String::new();
        let mut places = Vec::new();
        for key in keys {
            text.push_str("[s:");
            places.push((text.len(), text.len() + key.len()));
            text.push_str(key);
            text.push_str("]:");
        }
        let mut seen = Vec::new();
        let mut check = KeyCheck::new(fields, 0);
        keys.iter()
            .zip(places)
            .position(|(key, place)| check.is_duplicate(&mut seen, &text, key, place))
    }

    #[test]
    fn fields_in_and_out_of_order() {
        const FIELDS: &[&str] = &["a", "b", "c"];
        assert_eq!(first_duplicate(FIELDS, &["a", "b", "c"]), None);
        assert_eq!(first_duplicate(FIELDS, &["c", "a", "b"]), None);
        assert_eq!(first_duplicate(FIELDS, &["a", "b", "a"]), Some(2));
        assert_eq!(first_duplicate(FIELDS, &["c", "b", "c"]), Some(2));
        assert_eq!(first_duplicate(FIELDS, &["x", "a", "y", "x"]), Some(3));
        assert_eq!(first_duplicate(FIELDS, &["x", "a", "y", "b", "a"]), Some(4));
    }

    #[test]
    fn fields_past_the_64th_use_the_general_check() {
        let names: Vec<String> = (0..80).map(|i| format!("f{i}")).collect();
        let fields: &'static [&'static str] = Vec::leak(
            names
                .iter()
                .map(|name| &*String::leak(name.clone()))
                .collect(),
        );
        let mut keys: Vec<&str> = fields.to_vec();
        assert_eq!(first_duplicate(fields, &keys), None);
        keys.push("f70");
        assert_eq!(first_duplicate(fields, &keys), Some(80));
        keys.pop();
        keys.push("f63");
        assert_eq!(first_duplicate(fields, &keys), Some(80));
    }

    #[test]
    fn clashing_filter_bits_still_compare_exactly() {
        // 16 keys fill some filter bits twice; none is a duplicate until the repeat.
        let names: Vec<String> = (0..16).map(|i| format!("key_{i}")).collect();
        let mut keys: Vec<&str> = names.iter().map(String::as_str).collect();
        assert_eq!(first_duplicate(&[], &keys), None);
        keys.push("key_7");
        assert_eq!(first_duplicate(&[], &keys), Some(16));
    }

    #[test]
    fn same_key_is_equality() {
        let words = [
            "",
            "a",
            "b",
            "ab",
            "abcdefg",
            "abcdefgh",
            "abcdefgi",
            "bbcdefgh",
            "abcdefghijklmnop",
            "abcdefghijklmnoq",
            "xbcdefghijklmnop",
            "abcdefghijklmnopq",
            "abcdefghijklmnopr",
        ];
        for a in words {
            for b in words {
                assert_eq!(same_key(a.as_bytes(), b.as_bytes()), a == b, "{a} {b}");
            }
        }
    }

    #[test]
    fn the_hash_depends_only_on_the_key() {
        let text = b"abcdefghijklmnopqrstuvwxyz";
        // The same key text at two places, followed by different bytes.
        let other = b"xxabcdefghijklmnopqrstuvwxyz";
        for length in 0..=20 {
            assert_eq!(
                raw_key_hash(text, 0, length),
                raw_key_hash(other, 2, 2 + length),
                "{length}"
            );
            assert_eq!(
                raw_key_hash(text, 0, length),
                raw_key_hash(&text[..length], 0, length),
                "{length} at the end of the input"
            );
        }
        assert_ne!(raw_key_hash(text, 0, 3), raw_key_hash(text, 0, 4));
    }
}
