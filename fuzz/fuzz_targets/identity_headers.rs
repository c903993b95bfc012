//! DID authentication headers (concord-identity): `Credentials::from_headers` on arbitrary
//! `Signature-Input`, `Signature`, `Authorization` and `Content-Digest` values (NUL-separated
//! in the input) never panics; what it reads is verified against a fixed document, which
//! must never succeed for a signature the fuzzer did not get from the key.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use concord_identity::{
    read_document, Credentials, DidDocumentLimits, Identity, Keys, ReplayCache, RequestTarget,
    TimeWindow, VerifiedDocument,
};
use libfuzzer_sys::fuzz_target;

fn document() -> &'static VerifiedDocument {
    static DOC: OnceLock<VerifiedDocument> = OnceLock::new();
    DOC.get_or_init(|| {
        let id = Identity::new(
            Keys::from_secret_bytes(&[1; 32], &[2; 32]),
            "client.example",
            None,
            &["agents", "alice"],
        )
        .expect("fixed identity");
        let bytes = serde_json::to_vec(&id.document("2026-01-01T00:00:00Z", &[])).expect("json");
        read_document(&bytes, id.did(), &DidDocumentLimits::default()).expect("own document")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = text.split('\0').map(|p| (!p.is_empty()).then_some(p));
    let input = parts.next().flatten();
    let signature = parts.next().flatten();
    let authorization = parts.next().flatten();
    let digest = parts.next().flatten();
    let header = |name: &str| match name.to_ascii_lowercase().as_str() {
        "signature-input" => input,
        "signature" => signature,
        "authorization" => authorization,
        "content-digest" => digest,
        _ => None,
    };
    let Ok(Some(creds)) = Credentials::from_headers(header) else {
        return;
    };
    let _ = (creds.did(), creds.keyid(), creds.nonce(), creds.scheme());
    let target = RequestTarget {
        method: "GET",
        target_uri: "https://provider.example/ws",
    };
    let mut replay = ReplayCache::new(16, Duration::from_secs(360));
    let result = creds.verify(
        document(),
        &target,
        "provider.example",
        header,
        b"",
        1_767_225_600,
        &TimeWindow::default(),
        &mut replay,
    );
    if let Err(e) = &result {
        let _ = (
            e.status(),
            e.challenge_error(),
            concord_identity::challenge("r", e),
        );
        assert_eq!(replay.len(), 0, "a refused request was recorded");
    }
});
