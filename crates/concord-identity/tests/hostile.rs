//! Hostile input: each case is refused with its typed error, and nothing is recorded in the
//! replay cache for a refused request.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use concord_identity::{
    read_document, sign_request, AuthError, Credentials, Did, DidDocumentError, DidDocumentLimits,
    Identity, Keys, ReplayCache, RequestTarget, SignatureHeaders, TimeWindow, VerifiedDocument,
};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const NOW: i64 = 1_767_225_600;
const URL: &str = "https://provider.example:8443/agents/bob/ws";
const TARGET: RequestTarget<'static> = RequestTarget {
    method: "GET",
    target_uri: URL,
};

fn identity() -> Identity {
    Identity::new(
        Keys::generate(),
        "client.example",
        None,
        &["agents", "alice"],
    )
    .unwrap()
}

fn verified(id: &Identity) -> VerifiedDocument {
    let bytes = serde_json::to_vec(&id.document("2026-01-01T00:00:00Z", &[])).unwrap();
    read_document(&bytes, id.did(), &DidDocumentLimits::default()).unwrap()
}

fn headers(h: &SignatureHeaders) -> Vec<(String, String)> {
    let mut v = vec![
        ("signature-input".to_owned(), h.signature_input.clone()),
        ("signature".to_owned(), h.signature.clone()),
    ];
    if let Some(d) = &h.content_digest {
        v.push(("content-digest".to_owned(), d.clone()));
    }
    v
}

fn lookup<'h>(h: &'h [(String, String)]) -> impl Fn(&str) -> Option<&'h str> {
    move |name: &str| {
        h.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn verify_with(
    doc: &VerifiedDocument,
    h: &[(String, String)],
    body: &[u8],
    now: i64,
    replay: &mut ReplayCache,
) -> Result<concord_identity::Authenticated, AuthError> {
    let creds = Credentials::from_headers(lookup(h))?.expect("credentials");
    creds.verify(
        doc,
        &TARGET,
        "provider.example",
        lookup(h),
        body,
        now,
        &TimeWindow::default(),
        replay,
    )
}

fn verify(
    doc: &VerifiedDocument,
    h: &[(String, String)],
    body: &[u8],
    now: i64,
) -> Result<concord_identity::Authenticated, AuthError> {
    verify_with(doc, h, body, now, &mut ReplayCache::default())
}

/// Signs a hand-written `@signature-params` (an independent writer: tests the verifier
/// rebuilds exactly `created;expires;nonce;keyid`).
fn hand_signed(id: &Identity, params: &str, keyid: &str) -> Vec<(String, String)> {
    let base = format!(
        "\"@method\": GET\n\"@target-uri\": {URL}\n\"@authority\": provider.example:8443\n\"@signature-params\": (\"@method\" \"@target-uri\" \"@authority\"){params};keyid=\"{keyid}\""
    );
    let sig = id.keys().sign(base.as_bytes());
    vec![
        (
            "Signature-Input".into(),
            format!("sig1=(\"@method\" \"@target-uri\" \"@authority\"){params};keyid=\"{keyid}\""),
        ),
        (
            "Signature".into(),
            format!("sig1=:{}:", STANDARD.encode(sig)),
        ),
    ]
}

#[test]
fn a_good_request_passes_and_the_hand_written_form_matches() {
    let id = identity();
    let doc = verified(&id);
    let h = headers(&sign_request(&id, &TARGET, b"", NOW, "n1"));
    verify(&doc, &h, b"", NOW).unwrap();
    let hand = hand_signed(
        &id,
        &format!(";created={NOW};expires={};nonce=\"n1\"", NOW + 300),
        &id.keyid(),
    );
    assert_eq!(hand[0].1, h[0].1);
    assert_eq!(hand[1].1, h[1].1);
}

#[test]
fn forged_signature() {
    let id = identity();
    let mallory = Identity::new(
        Keys::generate(),
        "client.example",
        None,
        &["agents", "alice"],
    )
    .unwrap();
    let doc = verified(&id);
    // Mallory signs claiming alice's keyid.
    let h = hand_signed(
        &mallory,
        &format!(";created={NOW};expires={};nonce=\"f\"", NOW + 300),
        &id.keyid(),
    );
    assert_eq!(verify(&doc, &h, b"", NOW), Err(AuthError::BadSignature));
    // A flipped bit.
    let mut h = headers(&sign_request(&id, &TARGET, b"", NOW, "g"));
    let mut sig = STANDARD
        .decode(h[1].1.trim_start_matches("sig1=:").trim_end_matches(':'))
        .unwrap();
    sig[10] ^= 1;
    h[1].1 = format!("sig1=:{}:", STANDARD.encode(sig));
    assert_eq!(verify(&doc, &h, b"", NOW), Err(AuthError::BadSignature));
    // Another target.
    let h = headers(&sign_request(
        &id,
        &RequestTarget {
            method: "GET",
            target_uri: "https://provider.example:8443/other",
        },
        b"",
        NOW,
        "t",
    ));
    assert_eq!(verify(&doc, &h, b"", NOW), Err(AuthError::BadSignature));
}

#[test]
fn replayed_nonce_and_refusals_record_nothing() {
    let id = identity();
    let doc = verified(&id);
    let mut replay = ReplayCache::default();
    let forged = hand_signed(
        &identity(),
        &format!(";created={NOW};nonce=\"same\""),
        &id.keyid(),
    );
    assert_eq!(
        verify_with(&doc, &forged, b"", NOW, &mut replay),
        Err(AuthError::BadSignature)
    );
    assert_eq!(replay.len(), 0);
    let h = headers(&sign_request(&id, &TARGET, b"", NOW, "same"));
    verify_with(&doc, &h, b"", NOW, &mut replay).unwrap();
    assert_eq!(
        verify_with(&doc, &h, b"", NOW + 1, &mut replay),
        Err(AuthError::Replayed)
    );
    let full = &mut ReplayCache::new(0, std::time::Duration::from_secs(360));
    let err = verify_with(&doc, &h, b"", NOW, full).unwrap_err();
    assert!(matches!(err, AuthError::ReplayCacheFull { .. }));
    assert_eq!(err.status(), 503);
}

#[test]
fn expired_future_and_past_expires() {
    let id = identity();
    let doc = verified(&id);
    let old = headers(&sign_request(&id, &TARGET, b"", NOW - 301, "old"));
    assert!(matches!(
        verify(&doc, &old, b"", NOW),
        Err(AuthError::Expired { .. })
    ));
    let future = headers(&sign_request(&id, &TARGET, b"", NOW + 61, "fut"));
    let err = verify(&doc, &future, b"", NOW).unwrap_err();
    assert!(matches!(err, AuthError::NotYetValid { .. }));
    assert_eq!(err.challenge_error(), "invalid_timestamp");
    verify(
        &doc,
        &headers(&sign_request(&id, &TARGET, b"", NOW + 60, "edge")),
        b"",
        NOW,
    )
    .unwrap();
    let expired = hand_signed(
        &id,
        &format!(";created={};expires={};nonce=\"e\"", NOW - 10, NOW - 1),
        &id.keyid(),
    );
    assert!(matches!(
        verify(&doc, &expired, b"", NOW),
        Err(AuthError::SignatureExpired { .. })
    ));
}

#[test]
fn missing_nonce() {
    let id = identity();
    let doc = verified(&id);
    let h = hand_signed(
        &id,
        &format!(";created={NOW};expires={}", NOW + 300),
        &id.keyid(),
    );
    assert_eq!(verify(&doc, &h, b"", NOW), Err(AuthError::MissingNonce));
}

#[test]
fn keyid_not_in_authentication() {
    let id = identity();
    let doc = verified(&id);
    // #key-3 (the X25519 key) is in the document but not in authentication.
    let keyid = format!("{}#key-3", id.did());
    let h = hand_signed(&id, &format!(";created={NOW};nonce=\"k3\""), &keyid);
    let err = verify(&doc, &h, b"", NOW).unwrap_err();
    assert_eq!(err, AuthError::NotAuthentication { keyid });
    assert_eq!(err.status(), 403);
    assert_eq!(err.challenge_error(), "invalid_verification_method");
    // A plain (non-e1) document with a P-256 #key-2 and an Ed25519 #key-4 outside
    // authentication, and the P-256 key listed in authentication under #key-5.
    let did = Did::parse("did:wba:client.example:agents:plain").unwrap();
    let ed = id.keys().signing_public();
    let mut mb = vec![0xed, 0x01];
    mb.extend_from_slice(&ed);
    let mb = format!("z{}", bs58::encode(&mb).into_string());
    let p256 = json!({"kty": "EC", "crv": "P-256", "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"});
    let document = json!({
        "@context": ["https://www.w3.org/ns/did/v1"],
        "id": did,
        "verificationMethod": [
            {"id": format!("{did}#key-1"), "type": "Multikey", "controller": did, "publicKeyMultibase": mb},
            {"id": format!("{did}#key-2"), "type": "EcdsaSecp256r1VerificationKey2019", "controller": did, "publicKeyJwk": p256},
            {"id": format!("{did}#key-4"), "type": "Multikey", "controller": did, "publicKeyMultibase": mb},
            {"id": format!("{did}#key-5"), "type": "EcdsaSecp256r1VerificationKey2019", "controller": did, "publicKeyJwk": p256},
        ],
        "authentication": [format!("{did}#key-1"), format!("{did}#key-5")],
    });
    let plain = read_document(
        &serde_json::to_vec(&document).unwrap(),
        &did,
        &DidDocumentLimits::default(),
    )
    .unwrap();
    for (frag, expect_403) in [("key-2", true), ("key-4", true), ("key-5", false)] {
        let keyid = format!("{did}#{frag}");
        let h = hand_signed(&id, &format!(";created={NOW};nonce=\"{frag}\""), &keyid);
        let err = verify(&plain, &h, b"", NOW).unwrap_err();
        if expect_403 {
            assert_eq!(err, AuthError::NotAuthentication { keyid });
        } else {
            assert_eq!(
                err,
                AuthError::Document(DidDocumentError::NotEd25519 { keyid })
            );
        }
    }
    // key-1 works there (proof optional for a DID without e1_).
    let h = hand_signed(
        &id,
        &format!(";created={NOW};nonce=\"ok\""),
        &format!("{did}#key-1"),
    );
    verify(&plain, &h, b"", NOW).unwrap();
}

#[test]
fn credentials_for_another_did() {
    let alice = identity();
    let bob = Identity::new(Keys::generate(), "client.example", None, &["agents", "bob"]).unwrap();
    let h = headers(&sign_request(&bob, &TARGET, b"", NOW, "x"));
    assert!(matches!(
        verify(&verified(&alice), &h, b"", NOW),
        Err(AuthError::DidMismatch { .. })
    ));
}

#[test]
fn body_digest() {
    let id = identity();
    let doc = verified(&id);
    let h = headers(&sign_request(&id, &TARGET, b"payload", NOW, "d1"));
    verify(&doc, &h, b"payload", NOW).unwrap();
    assert!(matches!(
        verify(&doc, &h, b"other", NOW),
        Err(AuthError::Digest { .. })
    ));
    let no_digest: Vec<_> = h
        .iter()
        .filter(|(k, _)| k != "content-digest")
        .cloned()
        .collect();
    assert!(matches!(
        verify(&doc, &no_digest, b"payload", NOW),
        Err(AuthError::Digest { .. })
    ));
    // A body on a request whose signature does not cover it.
    let plain = headers(&sign_request(&id, &TARGET, b"", NOW, "d2"));
    assert!(matches!(
        verify(&doc, &plain, b"smuggled", NOW),
        Err(AuthError::Digest { .. })
    ));
}

fn sign_proof(id: &Identity, mut doc: Value) -> Value {
    let proof = doc.as_object_mut().unwrap().remove("proof").unwrap();
    let mut options = proof.clone();
    options.as_object_mut().unwrap().remove("proofValue");
    let mut input = Sha256::digest(serde_jcs::to_vec(&options).unwrap()).to_vec();
    input.extend_from_slice(&Sha256::digest(serde_jcs::to_vec(&doc).unwrap()));
    let mut proof = proof;
    proof["proofValue"] = URL_SAFE_NO_PAD.encode(id.keys().sign(&input)).into();
    doc["proof"] = proof;
    doc
}

#[test]
fn documents() {
    let id = identity();
    let limits = DidDocumentLimits::default();
    let doc = id.document("2026-01-01T00:00:00Z", &[]);
    let bytes = serde_json::to_vec(&doc).unwrap();

    // Whose id differs.
    let other = Did::parse("did:wba:client.example:agents:someone").unwrap();
    assert!(matches!(
        read_document(&bytes, &other, &limits),
        Err(DidDocumentError::IdMismatch { .. })
    ));

    // Proof over an altered document.
    let mut altered = doc.clone();
    altered["keyAgreement"] = json!([]);
    let err = read_document(&serde_json::to_vec(&altered).unwrap(), id.did(), &limits).unwrap_err();
    assert_eq!(err, DidDocumentError::ProofSignature);

    // e1 fingerprint mismatch: a document for Bob's e1 DID, consistent and signed, but with
    // Alice's keys.
    let bob = identity();
    let text = serde_json::to_string(&doc)
        .unwrap()
        .replace(id.did().as_str(), bob.did().as_str());
    let swapped = sign_proof(&id, serde_json::from_str(&text).unwrap());
    let err =
        read_document(&serde_json::to_vec(&swapped).unwrap(), bob.did(), &limits).unwrap_err();
    assert!(
        matches!(err, DidDocumentError::FingerprintMismatch { .. }),
        "{err}"
    );

    // No proof on an e1 DID.
    let mut bare = doc.clone();
    bare.as_object_mut().unwrap().remove("proof");
    assert_eq!(
        read_document(&serde_json::to_vec(&bare).unwrap(), id.did(), &limits).unwrap_err(),
        DidDocumentError::MissingProof
    );

    // Proof with another purpose (re-signed so only the purpose is wrong).
    let mut purpose = doc.clone();
    purpose["proof"]["proofPurpose"] = "authentication".into();
    let purpose = sign_proof(&id, purpose);
    assert!(matches!(
        read_document(&serde_json::to_vec(&purpose).unwrap(), id.did(), &limits),
        Err(DidDocumentError::BadProof { .. })
    ));

    // Huge.
    let mut huge = doc.clone();
    huge["padding"] = "x".repeat(70 * 1024).into();
    assert!(matches!(
        read_document(&serde_json::to_vec(&huge).unwrap(), id.did(), &limits),
        Err(DidDocumentError::TooLarge { .. })
    ));

    // Deep (also far deeper than serde_json's own limit, without a stack overflow).
    for depth in [17usize, 100_000] {
        let deep = format!(
            "{{\"id\":\"{}\",\"x\":{}{}}}",
            id.did(),
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let err = read_document(
            deep.as_bytes(),
            id.did(),
            &DidDocumentLimits {
                max_bytes: 1 << 20,
                ..limits
            },
        )
        .unwrap_err();
        assert_eq!(err, DidDocumentError::TooDeep { max: 16 });
    }

    // Too many methods.
    let mut many = doc.clone();
    let vm = many["verificationMethod"][1].clone();
    let list: Vec<Value> = (0..17)
        .map(|i| {
            let mut m = vm.clone();
            m["id"] = format!("{}#x{i}", id.did()).into();
            m
        })
        .collect();
    many["verificationMethod"] = list.into();
    assert!(matches!(
        read_document(&serde_json::to_vec(&many).unwrap(), id.did(), &limits),
        Err(DidDocumentError::TooMany {
            field: "verificationMethod",
            ..
        })
    ));

    // k1 profile.
    let k1 = Did::parse("did:wba:client.example:user:k1_abc").unwrap();
    let k1_doc = json!({"id": k1});
    assert!(matches!(
        read_document(&serde_json::to_vec(&k1_doc).unwrap(), &k1, &limits),
        Err(DidDocumentError::UnsupportedProfile { .. })
    ));

    // Not JSON, not an object.
    assert!(matches!(
        read_document(b"\xff{", id.did(), &limits),
        Err(DidDocumentError::Json { .. })
    ));
    assert!(matches!(
        read_document(b"[]", id.did(), &limits),
        Err(DidDocumentError::NotObject)
    ));
}

#[test]
fn header_over_4k_and_odd_headers() {
    let id = identity();
    let good = sign_request(&id, &TARGET, b"", NOW, "n");
    let read = |input: &str, sig: &str| {
        let h = vec![
            ("signature-input".to_owned(), input.to_owned()),
            ("signature".to_owned(), sig.to_owned()),
        ];
        Credentials::from_headers(lookup(&h)).map(|_| ())
    };
    let malformed = |r: Result<(), AuthError>| matches!(r, Err(AuthError::Malformed { .. }));
    let si = &good.signature_input;
    let sig = &good.signature;
    assert!(read(si, sig).is_ok());
    // Over 4 KiB.
    let long_nonce = format!("{si};nonce=\"{}\"", "a".repeat(5000));
    assert!(malformed(read(&long_nonce, sig)));
    let long_sig = format!("sig1=:{}:", "A".repeat(5000));
    assert!(malformed(read(si, &long_sig)));
    // Duplicated and odd params.
    assert!(malformed(read(&format!("{si};created={NOW}"), sig)));
    assert!(malformed(read(&format!("{si};nonce=\"again\""), sig)));
    assert!(malformed(read(&format!("{si};alg=\"ed25519\""), sig)));
    assert!(malformed(read(&format!("{si};tag"), sig)));
    assert!(malformed(read(
        &si.replace(&format!("created={NOW}"), "created=\"1\""),
        sig
    )));
    assert!(malformed(read(&si.replace("nonce=\"n\"", "nonce=n"), sig)));
    assert!(malformed(read(
        &si.replace("nonce=\"n\"", "nonce=\"a\\\"b\""),
        sig
    )));
    assert!(malformed(read(
        &format!("{si}, sig2=(\"@method\");created=1;keyid=\"x\""),
        sig
    )));
    assert!(malformed(read(
        &si.replace("(\"@method\" ", "(\"@method\" \"@method\" "),
        sig
    )));
    assert!(malformed(read(&si.replace("\"@method\" ", ""), sig)));
    let nine: String = (0..9).map(|i| format!(" \"h{i}\"")).collect();
    assert!(malformed(read(
        &si.replace("\"@authority\"", &format!("\"@authority\"{nine}")),
        sig
    )));
    // Label mismatch.
    assert!(malformed(read(si, &sig.replace("sig1=", "sig2="))));
    // Non-base64 signature.
    assert!(malformed(read(si, "sig1=:not*base64!:")));
    assert!(malformed(read(si, "sig1=:QUJD:, sig2=:QUJD:")));
    // Only one of the pair.
    let h = vec![("signature".to_owned(), sig.clone())];
    assert!(malformed(Credentials::from_headers(lookup(&h)).map(|_| ())));
    // keyid problems are invalid_verification_method / invalid_did.
    let no_hash = si.replace("#key-1", "");
    assert!(matches!(
        read(&no_hash, sig),
        Err(AuthError::InvalidKeyId { .. })
    ));
    let ip = si.replace("client.example", "10.0.0.1");
    assert!(matches!(read(&ip, sig), Err(AuthError::InvalidDid(_))));
    // Nothing at all, or another Authorization scheme.
    assert_eq!(Credentials::from_headers(|_| None).unwrap(), None);
    assert_eq!(
        Credentials::from_headers(|n| (n == "Authorization").then_some("Bearer abc")).unwrap(),
        None
    );
}

#[test]
fn legacy_header_hostile() {
    let id = identity();
    let doc = verified(&id);
    let ts = "2026-01-01T00:00:00Z";
    let good = concord_identity::legacy_authorization(&id, "provider.example", "ln", ts);
    let check = |value: &str, now: i64| {
        let h = vec![("authorization".to_owned(), value.to_owned())];
        let creds = Credentials::from_headers(lookup(&h))?.expect("credentials");
        creds.verify(
            &doc,
            &TARGET,
            "provider.example",
            lookup(&h),
            b"",
            now,
            &TimeWindow::default(),
            &ReplayCache::default(),
        )
    };
    check(&good, NOW).unwrap();
    assert!(matches!(
        check(&good, NOW + 301),
        Err(AuthError::Expired { .. })
    ));
    assert!(matches!(
        check(&good, NOW - 61),
        Err(AuthError::NotYetValid { .. })
    ));
    assert_eq!(
        check(&good.replace("nonce=\"ln\"", "nonce=\"lm\""), NOW),
        Err(AuthError::BadSignature)
    );
    assert!(matches!(
        check(&format!("{good}, nonce=\"x\""), NOW),
        Err(AuthError::Malformed { .. })
    ));
    assert!(matches!(
        check(&good.replace("2026-01-01T00:00:00Z", "yesterday"), NOW),
        Err(AuthError::Malformed { .. })
    ));
    assert!(matches!(
        check(&good.replace("key-1", "key-3"), NOW),
        Err(AuthError::NotAuthentication { .. })
    ));
    assert!(matches!(
        check(&format!("{good}{}", " ".repeat(5000)), NOW),
        Err(AuthError::Malformed { .. })
    ));
}
