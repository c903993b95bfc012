//! Bounds on a received hello: its size, its lists, its strings and its unknown fields.

use serde_json::{Map, Value};

use super::HelloError;

/// Bounds on a received hello, each checked before the part it bounds is used.
/// [`HelloLimits::default`] fits every hello Concord and the reference implementation send
/// with a wide margin.
///
/// | limit | default | bounds |
/// |---|---|---|
/// | `max_text_size` | 64 KiB | the whole hello text, checked before JSON parsing |
/// | `max_message_id_len` | 128 bytes | `messageId` |
/// | `max_versions` | 16 | `metaProtocol.supportedVersions` entries |
/// | `max_capabilities` | 32 | `metaProtocol.supportedCapabilities` entries, known or not |
/// | `max_candidate_protocols` | 32 | `metaProtocol.candidateProtocols` URIs |
/// | `max_string_len` | 2 KiB | every other interpreted string (URIs, capability names, versions) |
/// | `max_extra_fields` | 32 | uninterpreted fields, top level and `metaProtocol` together |
/// | `max_extra_size` | 16 KiB | their names and JSON values together |
///
/// ```
/// use concord_proto::{Hello, HelloError, HelloLimits};
///
/// let text = r#"{"version":"1.0","type":"sourceHello","messageId":"a1","metaProtocol":{"version":"1.0"}}"#;
/// let mut limits = HelloLimits::default();
/// limits.max_text_size = 64;
/// assert!(matches!(
///     Hello::decode_with_limits(text, &limits),
///     Err(HelloError::TooLarge { field: "(hello)", limit: 64, .. })
/// ));
/// assert!(Hello::decode(text).is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HelloLimits {
    /// Largest hello text, in bytes (default 64 KiB).
    pub max_text_size: usize,
    /// Longest `messageId`, in bytes (default 128).
    pub max_message_id_len: usize,
    /// Most `metaProtocol.supportedVersions` entries (default 16).
    pub max_versions: usize,
    /// Most `metaProtocol.supportedCapabilities` entries, unknown names included (default 32).
    pub max_capabilities: usize,
    /// Most `metaProtocol.candidateProtocols` URIs (default 32).
    pub max_candidate_protocols: usize,
    /// Longest other interpreted string (a URI, a capability name, a version), in bytes
    /// (default 2 KiB).
    pub max_string_len: usize,
    /// Most uninterpreted fields (DIDs, key shares…), top level and `metaProtocol`
    /// together (default 32).
    pub max_extra_fields: usize,
    /// Largest total size of the uninterpreted fields, names and compact JSON values, in
    /// bytes (default 16 KiB).
    pub max_extra_size: usize,
}

impl Default for HelloLimits {
    fn default() -> Self {
        Self {
            max_text_size: 64 * 1024,
            max_message_id_len: 128,
            max_versions: 16,
            max_capabilities: 32,
            max_candidate_protocols: 32,
            max_string_len: 2 * 1024,
            max_extra_fields: 32,
            max_extra_size: 16 * 1024,
        }
    }
}

impl HelloLimits {
    /// `text` (the value of `field`) fits in `limit` bytes.
    pub(super) fn check_len(
        field: &'static str,
        text: &str,
        limit: usize,
    ) -> Result<(), HelloError> {
        if text.len() > limit {
            return Err(HelloError::TooLarge {
                field,
                size: text.len(),
                limit,
            });
        }
        Ok(())
    }

    /// The list `field` has at most `limit` entries.
    pub(super) fn check_count(
        field: &'static str,
        count: usize,
        limit: usize,
    ) -> Result<(), HelloError> {
        if count > limit {
            return Err(HelloError::TooMany {
                field,
                count,
                limit,
            });
        }
        Ok(())
    }

    /// The uninterpreted fields of the top level and of `metaProtocol`, together, are
    /// within [`max_extra_fields`](Self::max_extra_fields) and
    /// [`max_extra_size`](Self::max_extra_size).
    pub(super) fn check_extras(
        &self,
        top: &Map<String, Value>,
        meta: &Map<String, Value>,
    ) -> Result<(), HelloError> {
        const FIELD: &str = "(extra fields)";
        Self::check_count(FIELD, top.len() + meta.len(), self.max_extra_fields)?;
        let size = top
            .iter()
            .chain(meta)
            .map(|(name, value)| name.len() + json_size(value))
            .sum::<usize>();
        if size > self.max_extra_size {
            return Err(HelloError::TooLarge {
                field: FIELD,
                size,
                limit: self.max_extra_size,
            });
        }
        Ok(())
    }
}

/// The length of `value` written as compact JSON, counted without building the text.
fn json_size(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_size_is_the_compact_text_length() {
        let value = json!({"a": [1, "é", null], "b": {"c": true}});
        assert_eq!(json_size(&value), value.to_string().len());
    }
}
