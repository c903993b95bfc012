//! Hostile hellos: each is refused with a typed error naming the field, the size or count,
//! and the limit; the hellos Concord and the reference-SDK interop scripts send still pass.

use concord_proto::handshake::{answer_source_hello, source_hello, KnownProtocols, LocalOffer};
use concord_proto::{Capabilities, Hello, HelloError, HelloLimits};
use serde_json::{json, Value};

/// A valid `sourceHello` as JSON, to break one field at a time.
fn base() -> Value {
    json!({"version": "1.0", "type": "sourceHello", "messageId": "k3j5h2g1f0d9s8a7",
           "metaProtocol": {"version": "1.0", "supportedCapabilities": ["testCasesNegotiation"]}})
}

fn decode(value: &Value) -> Result<Hello, HelloError> {
    Hello::decode(&value.to_string())
}

#[test]
fn the_hellos_of_the_interop_scripts_and_of_concord_are_accepted() {
    // crates/concord-node/tests/interop/anp_requester.py and anp_provider.py, verbatim.
    let python = [
        r#"{"version": "1.0", "type": "sourceHello", "messageId": "anppython0000001", "metaProtocol": {"version": "1.0"}}"#,
        r#"{"version": "1.0", "type": "destinationHello", "messageId": "anpprovider00001", "metaProtocol": {"version": "1.0"}}"#,
    ];
    for text in python {
        Hello::decode(text).unwrap();
    }
    let offer = LocalOffer::new(Capabilities::all());
    let consensus: Vec<String> = (0..32)
        .map(|i| format!("https://example.com/protocols/{i}/1.0"))
        .collect();
    let source = source_hello(&offer, "aaaaaaaaaaaaaaaa", None, &consensus);
    let decoded = Hello::decode(&source.encode()).unwrap();
    assert_eq!(decoded, source);
    let (destination, _) = answer_source_hello(
        &offer,
        &decoded,
        &KnownProtocols::default(),
        "bbbbbbbbbbbbbbbb",
    )
    .unwrap();
    assert_eq!(Hello::decode(&destination.encode()).unwrap(), destination);
    // A minor version of our major is ours too.
    let mut minor = base();
    minor["version"] = json!("1.1");
    decode(&minor).unwrap();
}

#[test]
fn a_10_mb_message_id_is_refused_by_size_before_parsing() {
    let mut hello = base();
    hello["messageId"] = json!("x".repeat(10_000_000));
    let text = hello.to_string();
    assert_eq!(
        Hello::decode(&text).unwrap_err(),
        HelloError::TooLarge {
            field: "(hello)",
            size: text.len(),
            limit: 64 * 1024
        }
    );
    // Even with room for the text, the id itself is bounded.
    let mut limits = HelloLimits::default();
    limits.max_text_size = 11_000_000;
    let error = Hello::decode_with_limits(&text, &limits).unwrap_err();
    assert_eq!(
        error,
        HelloError::TooLarge {
            field: "messageId",
            size: 10_000_000,
            limit: 128
        }
    );
    assert_eq!(
        error.to_string(),
        "hello: messageId is 10000000 bytes, over the limit of 128 bytes"
    );
    hello["messageId"] = json!("x".repeat(129));
    assert!(matches!(
        decode(&hello),
        Err(HelloError::TooLarge {
            field: "messageId",
            size: 129,
            limit: 128
        })
    ));
    hello["messageId"] = json!("x".repeat(128));
    decode(&hello).unwrap();
}

#[test]
fn the_message_id_is_required_and_not_empty() {
    let mut hello = base();
    hello.as_object_mut().unwrap().remove("messageId");
    assert_eq!(
        decode(&hello).unwrap_err(),
        HelloError::MissingField("messageId")
    );
    hello["messageId"] = json!("");
    assert!(matches!(
        decode(&hello),
        Err(HelloError::InvalidValue {
            field: "messageId",
            ..
        })
    ));
    for wrong in [json!(null), json!(7), json!(["a"])] {
        hello["messageId"] = wrong;
        assert!(matches!(
            decode(&hello),
            Err(HelloError::WrongType {
                field: "messageId",
                ..
            })
        ));
    }
}

#[test]
fn a_format_version_we_do_not_speak_is_named() {
    let mut hello = base();
    for version in ["9.9", "2.0", "0.9", "one", ""] {
        hello["version"] = json!(version);
        let error = decode(&hello).unwrap_err();
        assert_eq!(
            error,
            HelloError::UnsupportedVersion {
                got: version.into(),
                speaks: 1
            }
        );
        assert!(error.to_string().contains("we speak 1.x"), "{error}");
    }
    hello["version"] = json!("9.9");
    assert_eq!(
        decode(&hello).unwrap_err().to_string(),
        r#"hello: format version "9.9" is not one we speak: we speak 1.x"#
    );
    hello["version"] = json!("9".repeat(50_000));
    let HelloError::UnsupportedVersion { got, .. } = decode(&hello).unwrap_err() else {
        panic!("expected UnsupportedVersion");
    };
    assert_eq!(got.len(), 32, "the value quoted is cut");
}

#[test]
fn thousand_entry_lists_are_refused_with_their_count() {
    let thousand = |item: &dyn Fn(usize) -> Value| (0..1000).map(item).collect::<Vec<_>>();
    let cases: [(&str, Value, &str, usize); 3] = [
        (
            "supportedCapabilities",
            json!(thousand(&|i| json!(format!("capability{i}")))),
            "metaProtocol.supportedCapabilities",
            32,
        ),
        (
            "candidateProtocols",
            json!(thousand(&|i| json!(format!("https://e.example/{i}")))),
            "metaProtocol.candidateProtocols",
            32,
        ),
        (
            "supportedVersions",
            json!(thousand(&|_| json!("1.0"))),
            "metaProtocol.supportedVersions",
            16,
        ),
    ];
    for (key, list, field, limit) in cases {
        let mut hello = base();
        hello["metaProtocol"][key] = list;
        assert_eq!(
            decode(&hello).unwrap_err(),
            HelloError::TooMany {
                field,
                count: 1000,
                limit
            },
            "{key}"
        );
    }
    // At the limit, accepted.
    let mut hello = base();
    hello["metaProtocol"]["candidateProtocols"] = json!((0..32)
        .map(|i| format!("https://e.example/{i}"))
        .collect::<Vec<_>>());
    hello["metaProtocol"]["supportedVersions"] = json!(vec!["1.0"; 16]);
    decode(&hello).unwrap();
}

#[test]
fn long_strings_are_refused_with_their_size() {
    let long = "https://e.example/".to_owned() + &"a".repeat(3000);
    let cases = [
        (
            "candidateProtocols",
            json!([long]),
            "metaProtocol.candidateProtocols",
        ),
        (
            "selectedProtocol",
            json!(long),
            "metaProtocol.selectedProtocol",
        ),
        (
            "supportedCapabilities",
            json!([long]),
            "metaProtocol.supportedCapabilities",
        ),
        (
            "supportedVersions",
            json!([long]),
            "metaProtocol.supportedVersions",
        ),
        ("version", json!(long), "metaProtocol.version"),
    ];
    for (key, value, field) in cases {
        let mut hello = base();
        hello["metaProtocol"][key] = value;
        assert_eq!(
            decode(&hello).unwrap_err(),
            HelloError::TooLarge {
                field,
                size: long.len(),
                limit: 2048
            },
            "{key}"
        );
    }
    let mut hello = base();
    hello["metaProtocol"]["usedProtocolHash"] = json!("a".repeat(3000));
    assert!(matches!(
        decode(&hello),
        Err(HelloError::InvalidValue {
            field: "metaProtocol.usedProtocolHash",
            ..
        })
    ));
}

#[test]
fn unknown_fields_are_bounded_in_number_and_size_together() {
    // DIDs and key shares are kept, within bounds.
    let mut hello = base();
    hello["sourceDid"] = json!("did:wba:agents.example:alice");
    hello["keyShares"] = json!([{"group": "secp256r1", "expires": 86400, "keyExchange": "04ab"}]);
    let decoded = decode(&hello).unwrap();
    assert_eq!(decoded.extra.len(), 2);
    // 20 at the top and 13 in metaProtocol: 33 in all.
    for i in 0..20 {
        hello[format!("x{i}")] = json!(i);
    }
    for i in 0..13 {
        hello["metaProtocol"][format!("y{i}")] = json!(i);
    }
    assert_eq!(
        decode(&hello).unwrap_err(),
        HelloError::TooMany {
            field: "(extra fields)",
            count: 35,
            limit: 32
        }
    );
    let mut hello = base();
    hello["sourceDid"] = json!("d".repeat(10_000));
    hello["metaProtocol"]["note"] = json!("n".repeat(7_000));
    // Names and compact JSON values: 9 + 10,002 + 4 + 7,002.
    assert_eq!(
        decode(&hello).unwrap_err(),
        HelloError::TooLarge {
            field: "(extra fields)",
            size: 17_017,
            limit: 16 * 1024
        }
    );
}

#[test]
fn custom_limits_widen_or_narrow_every_bound() {
    let mut hello = base();
    hello["metaProtocol"]["candidateProtocols"] = json!((0..40)
        .map(|i| format!("https://e.example/{i}"))
        .collect::<Vec<_>>());
    let text = hello.to_string();
    assert!(matches!(
        Hello::decode(&text),
        Err(HelloError::TooMany { count: 40, .. })
    ));
    let mut limits = HelloLimits::default();
    limits.max_candidate_protocols = 40;
    let decoded = Hello::decode_with_limits(&text, &limits).unwrap();
    assert_eq!(decoded.meta_protocol.candidate_protocols.len(), 40);
    limits.max_message_id_len = 8;
    assert!(matches!(
        Hello::decode_with_limits(&text, &limits),
        Err(HelloError::TooLarge {
            field: "messageId",
            size: 16,
            limit: 8
        })
    ));
}
