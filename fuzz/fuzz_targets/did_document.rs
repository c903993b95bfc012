//! DID documents (concord-identity): `read_document` on arbitrary bytes, against a fixed
//! expected DID and against the DID the bytes claim, never panics; what it accepts has the
//! expected id, and its keys can be asked for.
#![no_main]

use std::sync::OnceLock;

use concord_identity::{read_document, Did, DidDocumentLimits, Identity, Keys};
use libfuzzer_sys::fuzz_target;

/// The DID of the seed documents written by our writer with keys `[1; 32]`, `[2; 32]`.
fn fixed() -> &'static Did {
    static DID: OnceLock<Did> = OnceLock::new();
    DID.get_or_init(|| {
        Identity::new(
            Keys::from_secret_bytes(&[1; 32], &[2; 32]),
            "client.example",
            None,
            &["agents", "alice"],
        )
        .expect("fixed identity")
        .did()
        .clone()
    })
}

fn check(data: &[u8], expected: &Did) {
    let limits = DidDocumentLimits::default();
    if let Ok(doc) = read_document(data, expected, &limits) {
        assert_eq!(doc.did(), expected);
        assert_eq!(doc.document()["id"].as_str(), Some(expected.as_str()));
        for frag in ["key-1", "key-2", "key-3"] {
            let _ = doc.authentication_key(&format!("{expected}#{frag}"));
        }
        let _ = doc.key_agreement();
    }
}

fuzz_target!(|data: &[u8]| {
    check(data, fixed());
    if data.len() <= 64 * 1024 {
        if let Ok(serde_json::Value::Object(map)) =
            serde_json::from_slice::<serde_json::Value>(data)
        {
            if let Some(did) = map
                .get("id")
                .and_then(|v| v.as_str())
                .and_then(|s| Did::parse(s).ok())
            {
                check(data, &did);
            }
        }
    }
});
