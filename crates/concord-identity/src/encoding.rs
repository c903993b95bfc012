//! Byte encodings shared by the writers and the readers: base64 flavours, base58 multibase,
//! JCS (RFC 8785) and the RFC 7638 thumbprint of an Ed25519 key.

use base64::alphabet;
use base64::engine::general_purpose::{
    GeneralPurpose, GeneralPurposeConfig, STANDARD, URL_SAFE_NO_PAD,
};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;
use sha2::{Digest, Sha256};

/// Multicodec prefix of an Ed25519 public key.
pub(crate) const ED25519_MULTICODEC: [u8; 2] = [0xed, 0x01];
/// Multicodec prefix of an X25519 public key.
pub(crate) const X25519_MULTICODEC: [u8; 2] = [0xec, 0x01];

/// base64url with padding accepted or not (what the SDK's `urlsafe_b64decode(s + "=" * …)` reads).
const URL_SAFE_ANY_PAD: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// base64url without padding.
pub(crate) fn b64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Decodes base64url, padded or not.
pub(crate) fn b64url_decode(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_ANY_PAD.decode(text).ok()
}

/// Decodes the canonical unpadded base64url form of exactly 32 bytes (a JWK `x`).
pub(crate) fn b64url_canonical_32(text: &str) -> Option<[u8; 32]> {
    let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
    let array: [u8; 32] = bytes.as_slice().try_into().ok()?;
    (b64url(&array) == text).then_some(array)
}

/// Standard base64 with padding (RFC 9421 byte sequences, Content-Digest).
pub(crate) fn b64std(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// Decodes standard padded base64.
pub(crate) fn b64std_decode(text: &str) -> Option<Vec<u8>> {
    STANDARD.decode(text).ok()
}

/// `"z"` + base58btc of `bytes`.
pub(crate) fn multibase_z(bytes: &[u8]) -> String {
    format!("z{}", bs58::encode(bytes).into_string())
}

/// Decodes `"z"` + base58btc; `None` for another base or bad characters.
pub(crate) fn multibase_z_decode(text: &str) -> Option<Vec<u8>> {
    let rest = text.strip_prefix('z')?;
    if rest.len() > 128 {
        return None;
    }
    bs58::decode(rest).into_vec().ok()
}

/// Decodes plain base58btc (`publicKeyBase58`).
pub(crate) fn base58_decode(text: &str) -> Option<Vec<u8>> {
    if text.len() > 128 {
        return None;
    }
    bs58::decode(text).into_vec().ok()
}

/// SHA-256.
pub(crate) fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// JCS (RFC 8785) form of a JSON value. A `serde_json::Value` holds no non-finite number, so
/// this cannot fail in practice; an error gives `None`.
pub(crate) fn jcs(value: &serde_json::Value) -> Option<Vec<u8>> {
    serde_jcs::to_vec(value).ok()
}

/// RFC 7638 thumbprint of the Ed25519 JWK `{"crv":"Ed25519","kty":"OKP","x":…}`: SHA-256 of
/// its canonical form, base64url without padding (43 characters), as the SDK's
/// `compute_multikey_fingerprint`.
pub(crate) fn ed25519_thumbprint(public: &[u8; 32]) -> String {
    let canonical = format!(
        r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#,
        b64url(public)
    );
    b64url(&sha256(canonical.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_32_refuses_padding_and_other_lengths() {
        let x = b64url(&[7u8; 32]);
        assert_eq!(b64url_canonical_32(&x), Some([7u8; 32]));
        assert_eq!(b64url_canonical_32(&format!("{x}=")), None);
        assert_eq!(b64url_canonical_32(&b64url(&[7u8; 31])), None);
    }

    #[test]
    fn multibase_round_trips() {
        let text = multibase_z(&[1, 2, 3]);
        assert!(text.starts_with('z'));
        assert_eq!(multibase_z_decode(&text), Some(vec![1, 2, 3]));
        assert_eq!(multibase_z_decode("m123"), None);
        assert_eq!(multibase_z_decode("z0OIl"), None);
    }

    #[test]
    fn jcs_sorts_keys() {
        let value = serde_json::json!({"b": 1, "a": "x"});
        assert_eq!(jcs(&value).as_deref(), Some(&br#"{"a":"x","b":1}"#[..]));
    }
}
