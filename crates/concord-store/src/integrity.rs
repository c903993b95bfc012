//! The 0-RTT rule: a stored document is trusted only if it reproduces its hash (checked
//! once per process for the 0-RTT checks, see `verified.rs`; on every call for the
//! explicit check and the listings).

use std::fmt;

use concord_proto::ProtocolHash;

/// Why a stored document cannot be trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Corruption {
    /// The document's SHA-256 is not the hash it is stored under.
    HashMismatch {
        /// What the stored document really hashes to.
        actual: ProtocolHash,
    },
    /// The stored document is not UTF-8 text, so it is not the text that was agreed.
    NotUtf8 {
        /// Length of the valid UTF-8 prefix, in bytes.
        valid_up_to: usize,
    },
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::HashMismatch { actual } => {
                write!(f, "the stored document hashes to {actual}")
            }
            Self::NotUtf8 { valid_up_to } => write!(
                f,
                "the stored document is not UTF-8 text (invalid byte at offset {valid_up_to})"
            ),
        }
    }
}

/// Whether a stored document reproduces its hash, as shown in listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Integrity {
    /// The document re-hashes to the hash it is stored under.
    Verified,
    /// The document cannot be trusted; the entry is never used.
    Corrupt(Corruption),
}

impl Integrity {
    /// Whether the entry may be used.
    pub fn is_verified(&self) -> bool {
        matches!(self, Self::Verified)
    }
}

/// Recomputes the hash of a stored document from its bytes; returns the text only if it
/// is UTF-8 and hashes to `expected`.
pub(crate) fn verify_document(expected: &ProtocolHash, raw: Vec<u8>) -> Result<String, Corruption> {
    let text = String::from_utf8(raw).map_err(|error| Corruption::NotUtf8 {
        valid_up_to: error.utf8_error().valid_up_to(),
    })?;
    if expected.matches(&text) {
        Ok(text)
    } else {
        Err(Corruption::HashMismatch {
            actual: ProtocolHash::of_text(&text),
        })
    }
}

/// [`verify_document`] for listings: only the verdict.
pub(crate) fn integrity_of(expected: &ProtocolHash, raw: &[u8]) -> Integrity {
    let checked = std::str::from_utf8(raw)
        .map_err(|error| Corruption::NotUtf8 {
            valid_up_to: error.valid_up_to(),
        })
        .and_then(|text| {
            if expected.matches(text) {
                Ok(())
            } else {
                Err(Corruption::HashMismatch {
                    actual: ProtocolHash::of_text(text),
                })
            }
        });
    match checked {
        Ok(()) => Integrity::Verified,
        Err(corruption) => Integrity::Corrupt(corruption),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_the_exact_text() {
        let hash = ProtocolHash::of_text("# Protocol\n");
        assert_eq!(
            verify_document(&hash, b"# Protocol\n".to_vec()).as_deref(),
            Ok("# Protocol\n")
        );
        assert_eq!(
            verify_document(&hash, b"# Protocol\r\n".to_vec()),
            Err(Corruption::HashMismatch {
                actual: ProtocolHash::of_text("# Protocol\r\n")
            })
        );
        assert_eq!(
            verify_document(&hash, vec![b'#', 0xff]),
            Err(Corruption::NotUtf8 { valid_up_to: 1 })
        );
    }
}
