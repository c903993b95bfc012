//! Interoperability with the reference SDK (PyPI `anp` 1.0.7), both directions.
//!
//! Every test is `#[ignore]`: run with `cargo test -p concord-identity --test anp_interop --
//! --ignored` and `CONCORD_ANP_PYTHON` set to a Python that has `anp==1.0.7`. The Python
//! helpers live in `tests/anp/` (one JSON object in on stdin, one out on stdout).

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use concord_identity::{
    legacy_authorization, read_document, sign_request, Credentials, Did, DidDocumentLimits,
    Identity, Keys, ReplayCache, RequestTarget, Service, TimeWindow,
};
use serde_json::{json, Value};

const NOW: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z
const WAIT: Duration = Duration::from_secs(60);

fn python() -> String {
    std::env::var("CONCORD_ANP_PYTHON").unwrap_or_else(|_| {
        panic!("CONCORD_ANP_PYTHON is not set: point it at a Python with anp==1.0.7 (e.g. /root/.cache/concord-venv/bin/python)")
    })
}

/// Runs `tests/anp/<script>` with `input` on stdin; its JSON stdout, within `WAIT`.
fn run(script: &str, input: &Value) -> Value {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "anp", script]
        .iter()
        .collect();
    let mut child = Command::new(python())
        .arg(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", python()));
    let mut stdin = child.stdin.take().unwrap();
    let text = input.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).map(|_| s)
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > WAIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{script} did not finish within {WAIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    writer.join().unwrap().unwrap();
    let stdout = out.join().unwrap().unwrap();
    let stderr = err.join().unwrap();
    assert!(status.success(), "{script} failed ({status}):\n{stderr}");
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{script} printed no JSON ({e}): {stdout}\n{stderr}"))
}

fn identity() -> Identity {
    Identity::new(
        Keys::generate(),
        "localhost",
        Some(9876),
        &["agents", "alice"],
    )
    .unwrap()
}

fn headers_json(h: &concord_identity::SignatureHeaders) -> Value {
    let mut map = serde_json::Map::new();
    map.insert("Signature-Input".into(), h.signature_input.clone().into());
    map.insert("Signature".into(), h.signature.clone().into());
    if let Some(d) = &h.content_digest {
        map.insert("Content-Digest".into(), d.clone().into());
    }
    Value::Object(map)
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[test]
#[ignore = "needs CONCORD_ANP_PYTHON (anp==1.0.7)"]
fn sdk_accepts_our_document() {
    let id = identity();
    let services = [Service {
        id_fragment: "ad".into(),
        kind: "AgentDescription".into(),
        endpoint: "https://localhost:9876/ad.json".into(),
    }];
    for doc in [
        id.document("2026-01-01T00:00:00Z", &[]),
        id.document("2026-01-01T00:00:00Z", &services),
    ] {
        let out = run("check_document.py", &json!({ "document": doc }));
        assert_eq!(
            out["binding"], true,
            "validate_did_document_binding refused: {out}"
        );
        assert_eq!(out["proof"], true, "verify_w3c_proof refused: {out}");
        assert_eq!(out["key1"], "Ed25519PublicKey", "{out}");
        assert_eq!(out["key3"], "X25519PublicKey", "{out}");
        assert_eq!(
            out["key3_raw_b64"],
            b64(&id.keys().agreement_public()),
            "{out}"
        );
    }
    // And a tampered one is refused there too (the oracle is not a rubber stamp).
    let mut doc = id.document("2026-01-01T00:00:00Z", &[]);
    doc["keyAgreement"] = json!([]);
    let out = run("check_document.py", &json!({ "document": doc }));
    assert_eq!(out["binding"], false, "{out}");
}

#[test]
#[ignore = "needs CONCORD_ANP_PYTHON (anp==1.0.7)"]
fn sdk_verifies_our_signed_requests() {
    let id = identity();
    let doc = id.document("2026-01-01T00:00:00Z", &[]);
    let url = "https://localhost:9876/agents/alice/ws?x=1";
    let target = RequestTarget {
        method: "get",
        target_uri: url,
    };
    let plain = sign_request(&id, &target, b"", NOW, "0123456789abcdef0123456789abcdef");
    let body = br#"{"hello":"world"}"#;
    let post = RequestTarget {
        method: "POST",
        target_uri: url,
    };
    let with_body = sign_request(&id, &post, body, NOW, "fedcba9876543210fedcba9876543210");
    assert!(with_body.content_digest.is_some());
    let legacy = legacy_authorization(
        &id,
        "localhost",
        "abcdef0123456789abcdef0123456789",
        "2026-01-01T00:00:00Z",
    );
    let checks = json!([
        {"kind": "http", "method": "GET", "url": url, "headers": headers_json(&plain), "body_b64": ""},
        {"kind": "http", "method": "POST", "url": url, "headers": headers_json(&with_body), "body_b64": b64(body)},
        {"kind": "legacy", "header": legacy, "domain": "localhost"},
        // Tampered: another method, another URI, another body, another audience.
        {"kind": "http", "method": "POST", "url": url, "headers": headers_json(&plain), "body_b64": ""},
        {"kind": "http", "method": "GET", "url": "https://localhost:9876/agents/bob/ws?x=1", "headers": headers_json(&plain), "body_b64": ""},
        {"kind": "http", "method": "POST", "url": url, "headers": headers_json(&with_body), "body_b64": b64(b"{\"hello\":\"there\"}")},
        {"kind": "legacy", "header": legacy, "domain": "evil.example"},
    ]);
    let out = run(
        "verify_request.py",
        &json!({ "document": doc, "checks": checks }),
    );
    let results: Vec<bool> = out["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["ok"].as_bool().unwrap())
        .collect();
    assert_eq!(
        results,
        [true, true, true, false, false, false, false],
        "{out}"
    );
}

#[test]
#[ignore = "needs CONCORD_ANP_PYTHON (anp==1.0.7)"]
fn we_verify_the_sdks_identity_and_requests() {
    let url = "https://localhost:4321/rpc";
    let body = br#"{"method":"ping"}"#;
    let out = run(
        "sdk_identity.py",
        &json!({
            "hostname": "localhost", "port": 4321, "path_segments": ["agents", "x"],
            "method": "POST", "url": url, "body_b64": b64(body), "domain": "localhost",
            "created": NOW, "nonce": "n0123456789", "timestamp": "2026-01-01T00:00:00Z",
        }),
    );
    let doc_bytes = serde_json::to_vec(&out["document"]).unwrap();
    let did = Did::parse(out["document"]["id"].as_str().unwrap()).unwrap();
    assert!(did.e1_fingerprint().is_some(), "{did}");
    assert!(
        did.as_str()
            .starts_with("did:wba:localhost%3A4321:agents:x:e1_"),
        "{did}"
    );
    let verified = read_document(&doc_bytes, &did, &DidDocumentLimits::default())
        .expect("our reader refuses the SDK's document");
    let x25519 = base64::engine::general_purpose::STANDARD
        .decode(out["x25519_raw_b64"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        verified.key_agreement(),
        &[<[u8; 32]>::try_from(x25519.as_slice()).unwrap()]
    );

    let window = TimeWindow::default();
    let replay = ReplayCache::default();
    let header_from = |headers: &Value, name: &str| -> Option<String> {
        headers
            .as_object()?
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| v.as_str().map(str::to_owned))
    };
    for (key, method, body) in [
        ("http_plain", "POST", &b""[..]),
        ("http_body", "POST", &body[..]),
    ] {
        let headers = out[key].clone();
        let owned: Vec<(String, String)> = ["Signature-Input", "Signature", "Content-Digest"]
            .iter()
            .filter_map(|n| header_from(&headers, n).map(|v| (n.to_ascii_lowercase(), v)))
            .collect();
        let lookup = |name: &str| {
            owned
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        let creds = Credentials::from_headers(lookup)
            .unwrap()
            .expect("no credentials read");
        assert_eq!(creds.did(), &did);
        let target = RequestTarget {
            method,
            target_uri: url,
        };
        let auth = creds
            .verify(
                &verified,
                &target,
                "localhost",
                lookup,
                body,
                NOW + 5,
                &window,
                &replay,
            )
            .unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_eq!(auth.did, did);
        assert_eq!(auth.keyid, format!("{did}#key-1"));
        assert_eq!(auth.scheme.to_string(), "http-signatures");
        // The same request again is a replay.
        let again = creds.verify(
            &verified,
            &target,
            "localhost",
            lookup,
            body,
            NOW + 6,
            &window,
            &replay,
        );
        assert!(
            matches!(again, Err(concord_identity::AuthError::Replayed)),
            "{again:?}"
        );
    }
    let legacy = out["legacy"].as_str().unwrap().to_owned();
    let lookup = |name: &str| {
        name.eq_ignore_ascii_case("authorization")
            .then_some(legacy.as_str())
    };
    let creds = Credentials::from_headers(lookup)
        .unwrap()
        .expect("no legacy credentials read");
    let target = RequestTarget {
        method: "GET",
        target_uri: url,
    };
    let auth = creds
        .verify(
            &verified,
            &target,
            "localhost",
            lookup,
            b"",
            NOW + 5,
            &window,
            &replay,
        )
        .unwrap();
    assert_eq!(auth.scheme.to_string(), "didwba");
    let wrong_aud = Credentials::from_headers(lookup).unwrap().unwrap();
    let err = wrong_aud.verify(
        &verified,
        &target,
        "evil.example",
        lookup,
        b"",
        NOW + 5,
        &window,
        &ReplayCache::default(),
    );
    assert!(
        matches!(err, Err(concord_identity::AuthError::BadSignature)),
        "{err:?}"
    );
    // The SDK's P-256 #key-2 is in the document but never usable for authentication.
    assert!(verified
        .authentication_key(&format!("{did}#key-2"))
        .is_err());
}

#[test]
#[ignore = "needs CONCORD_ANP_PYTHON (anp==1.0.7)"]
fn we_read_the_sdks_document_without_path() {
    // e1 profile without path segments: did:wba:host%3Aport, no e1_ segment, a proof we verify.
    let out = run(
        "sdk_identity.py",
        &json!({
            "hostname": "localhost", "port": 4321, "path_segments": [],
            "method": "GET", "url": "https://localhost:4321/", "body_b64": "", "domain": "localhost",
            "created": NOW, "nonce": "n", "timestamp": "2026-01-01T00:00:00Z",
        }),
    );
    let did = Did::parse(out["document"]["id"].as_str().unwrap()).unwrap();
    assert_eq!(did.as_str(), "did:wba:localhost%3A4321");
    let mut doc = out["document"].clone();
    read_document(
        &serde_json::to_vec(&doc).unwrap(),
        &did,
        &DidDocumentLimits::default(),
    )
    .expect("refused");
    doc["authentication"] = json!([]);
    let err = read_document(
        &serde_json::to_vec(&doc).unwrap(),
        &did,
        &DidDocumentLimits::default(),
    )
    .unwrap_err();
    assert_eq!(err, concord_identity::DidDocumentError::ProofSignature);
}
