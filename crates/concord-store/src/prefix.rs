//! Naming a stored protocol by a unique prefix of its hash, as `git` names commits.

use crate::error::StoreError;

/// The fewest hex digits a hash prefix may have (8 digits = 32 bits).
pub const MIN_PREFIX_LEN: usize = 8;

/// Normalises a hash selector: an optional `sha256:` prefix, then 8 to 64 hex digits of
/// either case; returns the lowercase digits.
pub(crate) fn normalise(selector: &str) -> Result<String, StoreError> {
    let digits = selector.strip_prefix("sha256:").unwrap_or(selector);
    let not_a_prefix = |problem: String| StoreError::NotAHashPrefix {
        selector: selector.to_owned(),
        problem,
    };
    if let Some((position, character)) = digits
        .char_indices()
        .find(|(_, character)| !character.is_ascii_hexdigit())
    {
        return Err(not_a_prefix(format!(
            "{character:?} at byte {position} is not a hex digit"
        )));
    }
    if digits.len() > 64 {
        return Err(not_a_prefix(format!(
            "{} hex digits, a SHA-256 hash has 64",
            digits.len()
        )));
    }
    if digits.len() < MIN_PREFIX_LEN {
        return Err(StoreError::PrefixTooShort {
            selector: selector.to_owned(),
            min: MIN_PREFIX_LEN,
        });
    }
    Ok(digits.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_case_and_prefix() {
        assert_eq!(normalise("sha256:ABCDEF0123").unwrap(), "abcdef0123");
        assert_eq!(normalise(&"a".repeat(64)).unwrap(), "a".repeat(64));
    }

    #[test]
    fn rejects_short_long_and_non_hex() {
        assert!(matches!(
            normalise("abcdef1"),
            Err(StoreError::PrefixTooShort { min: 8, .. })
        ));
        assert!(matches!(
            normalise(&"a".repeat(65)),
            Err(StoreError::NotAHashPrefix { .. })
        ));
        // Glob metacharacters never reach SQL.
        assert!(matches!(
            normalise("abcd*efgh"),
            Err(StoreError::NotAHashPrefix { .. })
        ));
    }
}
