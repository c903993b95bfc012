//! The legacy `Authorization: DIDWba …` header (version 1.1), as the SDK's
//! `generate_auth_header` writes it.

use crate::encoding::{b64url, jcs, sha256};
use crate::identity::Identity;

/// The bytes a legacy header signs: SHA-256 of the JCS form of `{nonce, timestamp, <field>,
/// did}`, where `<field>` is `aud` for version ≥ 1.1 and `service` before.
pub(crate) fn signed_hash(
    nonce: &str,
    timestamp: &str,
    audience: &str,
    did: &str,
    aud_field: bool,
) -> [u8; 32] {
    let field = if aud_field { "aud" } else { "service" };
    let mut data = serde_json::Map::new();
    data.insert("nonce".into(), nonce.into());
    data.insert("timestamp".into(), timestamp.into());
    data.insert(field.into(), audience.into());
    data.insert("did".into(), did.into());
    sha256(&jcs(&serde_json::Value::Object(data)).unwrap_or_default())
}

/// `DIDWba v="1.1", did="…", nonce="…", timestamp="…", verification_method="key-1",
/// signature="<base64url>"`, the signature being Ed25519 over
/// `sha256(JCS({nonce, timestamp, aud, did}))`. `audience` is the host the client names
/// (the SDK's `service_domain`); `timestamp` is `YYYY-MM-DDTHH:MM:SSZ`.
pub fn legacy_authorization(
    identity: &Identity,
    audience: &str,
    nonce: &str,
    timestamp: &str,
) -> String {
    let did = identity.did().as_str();
    let signature = identity
        .keys()
        .sign(&signed_hash(nonce, timestamp, audience, did, true));
    format!(
        "DIDWba v=\"1.1\", did=\"{did}\", nonce=\"{nonce}\", timestamp=\"{timestamp}\", verification_method=\"key-1\", signature=\"{}\"",
        b64url(&signature)
    )
}
