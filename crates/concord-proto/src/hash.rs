//! The protocol hash: how two agents name a protocol they agreed on before.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

/// SHA-256 of the exact UTF-8 bytes of an accepted protocol document.
///
/// Written as 64 lowercase hex digits. On input a `sha256:` prefix (as the
/// reference Python implementation stores it) and uppercase digits are accepted.
///
/// ```
/// use concord_proto::ProtocolHash;
///
/// let hash = ProtocolHash::of_text("# Requirement\nGet product info\n");
/// let parsed: ProtocolHash = format!("sha256:{hash}").parse()?;
/// assert_eq!(hash, parsed);
/// assert_eq!(hash.to_string().len(), 64);
/// # Ok::<(), concord_proto::ProtocolHashError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProtocolHash([u8; 32]);

/// Why a string is not a protocol hash.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolHashError {
    /// The digest part is not 64 characters long.
    #[error(
        "protocol hash must be 64 hex digits (optionally prefixed `sha256:`), got {0} characters"
    )]
    Length(usize),
    /// A character outside `0-9a-fA-F`.
    #[error("protocol hash has a non-hex character at position {0}")]
    NotHex(usize),
}

impl ProtocolHash {
    /// Hashes raw document bytes.
    pub fn of_bytes(document: &[u8]) -> Self {
        Self(Sha256::digest(document).into())
    }

    /// Hashes a protocol document's text exactly as written (no normalisation).
    pub fn of_text(document: &str) -> Self {
        Self::of_bytes(document.as_bytes())
    }

    /// Whether `document` hashes to this value: the check to make before trusting a stored protocol.
    pub fn matches(&self, document: &str) -> bool {
        Self::of_text(document) == *self
    }

    /// The 32 digest bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl FromStr for ProtocolHash {
    type Err = ProtocolHashError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let digits = text.strip_prefix("sha256:").unwrap_or(text);
        if digits.len() != 64 {
            return Err(ProtocolHashError::Length(digits.chars().count()));
        }
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(digits, &mut bytes).map_err(|_| {
            let position = digits
                .bytes()
                .position(|b| !b.is_ascii_hexdigit())
                .unwrap_or(0);
            ProtocolHashError::NotHex(position)
        })?;
        Ok(Self(bytes))
    }
}

impl fmt::Display for ProtocolHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for ProtocolHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProtocolHash({self})")
    }
}

impl Serialize for ProtocolHash {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ProtocolHash {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_python_hashlib() {
        // hashlib.sha256("abc".encode('utf-8')).hexdigest()
        assert_eq!(
            ProtocolHash::of_text("abc").to_string(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn accepts_prefix_and_uppercase() {
        let hash = ProtocolHash::of_text("abc");
        let upper = hash.to_string().to_uppercase();
        assert_eq!(upper.parse::<ProtocolHash>(), Ok(hash));
        assert_eq!(format!("sha256:{hash}").parse::<ProtocolHash>(), Ok(hash));
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(
            "abc".parse::<ProtocolHash>(),
            Err(ProtocolHashError::Length(3))
        );
        let mut text = "a".repeat(64);
        text.replace_range(10..11, "z");
        assert_eq!(
            text.parse::<ProtocolHash>(),
            Err(ProtocolHashError::NotHex(10))
        );
    }
}
