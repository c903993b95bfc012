//! Wire encoding of application messages: the bytes of a PT 1 frame's body. JSON, or AICL
//! through `concord-aicl`'s JSON bridge when the protocol document says AICL.

use concord_negotiate::Encoding;
use serde_json::Value;

/// A message that cannot be put on the wire, or bytes that are not a message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The received message is larger than the limit; it was not parsed.
    #[error("the message is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// JSON that does not parse (with line and column), or a value JSON cannot carry.
    #[error("the message is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// AICL that does not parse, or a value AICL cannot carry (e.g. `null`), with its place.
    #[error("the message is not valid AICL: {0}")]
    Aicl(#[from] concord_aicl::Error),
}

/// Encodes a message for the wire.
///
/// ```
/// use concord_handlers::wire;
/// use concord_negotiate::Encoding;
/// use serde_json::json;
///
/// let message = json!({"messageId": "m1", "price": 12});
/// assert_eq!(wire::encode(Encoding::Json, &message)?, br#"{"messageId":"m1","price":12}"#);
/// assert_eq!(
///     wire::encode(Encoding::Aicl, &message)?,
///     b"[d:[s:messageId]:[s:m1],[s:price]:[i:12]]"
/// );
/// # Ok::<(), concord_handlers::WireError>(())
/// ```
pub fn encode(encoding: Encoding, message: &Value) -> Result<Vec<u8>, WireError> {
    match encoding {
        Encoding::Json => Ok(serde_json::to_vec(message)?),
        Encoding::Aicl => Ok(concord_aicl::to_vec(&concord_aicl::json::from_json(
            message,
        )?)?),
    }
}

/// Decodes a received message, refusing more than `limit` bytes before parsing.
///
/// ```
/// use concord_handlers::wire;
/// use concord_negotiate::Encoding;
///
/// let message = wire::decode(Encoding::Aicl, b"[d:[s:price]:[f:12.5]]", 1024)?;
/// assert_eq!(message["price"], 12.5);
/// assert!(wire::decode(Encoding::Json, b"{\"a\":", 1024).is_err());
/// # Ok::<(), concord_handlers::WireError>(())
/// ```
pub fn decode(encoding: Encoding, bytes: &[u8], limit: usize) -> Result<Value, WireError> {
    if bytes.len() > limit {
        return Err(WireError::TooLarge {
            size: bytes.len(),
            limit,
        });
    }
    match encoding {
        Encoding::Json => Ok(serde_json::from_slice(bytes)?),
        Encoding::Aicl => {
            let value: concord_aicl::Value = concord_aicl::from_slice(bytes)?;
            Ok(concord_aicl::json::to_json(&value)?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_encodings_round_trip() {
        let message = json!({"messageId": "m", "nested": {"list": [1, 2.5, "x", true]}});
        for encoding in [Encoding::Json, Encoding::Aicl] {
            let bytes = encode(encoding, &message).unwrap();
            assert_eq!(decode(encoding, &bytes, 1 << 20).unwrap(), message);
        }
    }

    #[test]
    fn null_has_no_aicl_form_and_limits_hold() {
        let error = encode(Encoding::Aicl, &json!({"productInfo": null})).unwrap_err();
        assert!(error.to_string().contains("/productInfo"), "{error}");
        assert!(matches!(
            decode(Encoding::Json, b"[1,2,3]", 3),
            Err(WireError::TooLarge { size: 7, limit: 3 })
        ));
    }
}
