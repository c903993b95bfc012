//! The message layer: header, required fields per instruction, error replies, negotiation,
//! streams and the canonical form for signatures.

use concord_aicl::{
    ErrorCode, ErrorKind, Map, Message, Mode, MsgType, ParseOptions, Tensor, Value,
};

const HEAD: &str = "[s:protocol]:[s:LightAICL],[s:session_id]:[s:s1],";

fn message(msg_type: &str, body: &str) -> String {
    format!("[d:{HEAD}[s:msg_type]:[s:{msg_type}]{body}]")
}

#[test]
fn every_instruction_requires_its_fields() {
    let cases = [
        ("task_request", ",[s:task]:[s:t]", "constraints"),
        ("task_request", ",[s:constraints]:[d:]", "task"),
        ("data_query", "", "query"),
        ("tool_call", ",[s:tool]:[s:x]", "params"),
        ("tool_call", ",[s:params]:[d:]", "tool"),
        ("result", ",[s:metadata]:[d:]", "data` or `content"),
        ("error", ",[s:code]:[i:3001]", "reason"),
        ("error", ",[s:reason]:[s:r]", "code"),
        ("protocol_negotiate", "", "supported"),
    ];
    for (msg_type, body, missing) in cases {
        let text = message(msg_type, body);
        let error = Message::parse(&text).unwrap_err();
        assert_eq!(error.code(), ErrorCode::MissingField, "{text}");
        assert_eq!(
            error.kind(),
            &ErrorKind::MissingField {
                msg_type: msg_type.to_owned(),
                field: missing.to_owned()
            }
        );
    }
    for (msg_type, body) in [
        (
            "task_request",
            ",[s:task]:[s:t],[s:constraints]:[d:],[s:deadline]:[s:2025-07-21]",
        ),
        (
            "data_query",
            ",[s:query]:[d:[s:sku]:[s:A1]],[s:data_format]:[s:json]",
        ),
        (
            "tool_call",
            ",[s:tool]:[s:x],[s:params]:[d:],[s:timeout]:[f:2.5]",
        ),
        (
            "result",
            ",[s:content]:[s:done],[s:metadata]:[d:[s:ms]:[i:3]]",
        ),
        (
            "error",
            ",[s:code]:[i:3001],[s:reason]:[s:TOOL_UNAVAILABLE],[s:detail]:[s:no]",
        ),
        ("protocol_negotiate", ",[s:supported]:[l:[s:LightAICL_v1]]"),
        ("some_future_instruction", ",[s:anything]:[i:1]"),
    ] {
        let text = message(msg_type, body);
        let parsed = Message::parse(&text).unwrap_or_else(|error| panic!("{text}: {error}"));
        assert_eq!(parsed.msg_type().as_str(), msg_type);
        assert_eq!(parsed.to_text(), text, "messages write back as they came");
    }
    assert!(!MsgType::from_name("some_future_instruction").is_known());
}

#[test]
fn field_types_are_checked() {
    let cases = [
        ("tool_call", ",[s:tool]:[i:1],[s:params]:[d:]", "tool"),
        ("tool_call", ",[s:tool]:[s:x],[s:params]:[l:]", "params"),
        (
            "tool_call",
            ",[s:tool]:[s:x],[s:params]:[d:],[s:timeout]:[s:soon]",
            "timeout",
        ),
        ("error", ",[s:code]:[s:2001],[s:reason]:[s:r]", "code"),
        (
            "protocol_negotiate",
            ",[s:supported]:[l:[i:1]]",
            "supported",
        ),
        ("protocol_negotiate", ",[s:supported]:[l:]", "supported"),
        ("result", ",[s:data]:[i:1],[s:signature]:[i:5]", "signature"),
    ];
    for (msg_type, body, field) in cases {
        let text = message(msg_type, body);
        let error = Message::parse(&text).unwrap_err();
        assert_eq!(error.code(), ErrorCode::DataFormatError, "{text}");
        assert!(
            matches!(error.kind(), ErrorKind::BadField { field: f, .. } if f == field),
            "{text}: {error}"
        );
        // The position is the field's key in the text.
        let offset = error.position().unwrap().offset;
        assert!(
            text[offset..].starts_with(&format!("[s:{field}]")),
            "{text}: {error}"
        );
    }
}

#[test]
fn the_header_is_checked() {
    let cases = [
        ("[d:[s:session_id]:[s:s1],[s:msg_type]:[s:result],[s:data]:[i:1]]", "protocol"),
        ("[d:[s:protocol]:[s:LightAICL_v2],[s:session_id]:[s:s1],[s:msg_type]:[s:result],[s:data]:[i:1]]", "protocol"),
        ("[d:[s:protocol]:[s:LightAICL],[s:session_id]:[i:7],[s:msg_type]:[s:result],[s:data]:[i:1]]", "session_id"),
        ("[d:[s:protocol]:[s:LightAICL],[s:session_id]:[s:],[s:msg_type]:[s:result],[s:data]:[i:1]]", "session_id"),
        ("[d:[s:protocol]:[s:LightAICL],[s:msg_type]:[s:result],[s:session_id]:[s:s1],[s:data]:[i:1]]", "session_id"),
    ];
    for (text, field) in cases {
        let error = Message::parse(text).unwrap_err();
        assert_eq!(error.code(), ErrorCode::ProtocolError, "{text}");
        assert!(
            matches!(error.kind(), ErrorKind::BadHeader { field: f, .. } if *f == field),
            "{text}: {error}"
        );
    }
    let not_a_dict = Message::parse("[l:]").unwrap_err();
    assert!(matches!(
        not_a_dict.kind(),
        ErrorKind::NotAMessage { found: "list" }
    ));
    // Lenient mode takes the header from anywhere and puts it first.
    let (shuffled, _) = cases[4];
    let message = Message::parse_with(shuffled, &ParseOptions::lenient()).unwrap();
    assert!(message.to_text().starts_with(
        "[d:[s:protocol]:[s:LightAICL],[s:session_id]:[s:s1],[s:msg_type]:[s:result]"
    ));
    let value: Value = shuffled.parse().unwrap();
    assert!(Message::from_value_with(value, Mode::Lenient).is_ok());
}

#[test]
fn constructors_build_valid_messages() {
    let mut constraints = Map::new();
    constraints.insert("lang".into(), Value::from("zh-CN"));
    let image = Tensor::from_vec(vec![2, 2], vec![1u8, 2, 3, 4]).unwrap();
    let messages = [
        Message::task_request("s", "caption", constraints).with("deadline", 30),
        Message::data_query("s", "price"),
        Message::tool_call("s", "web_scraper", Map::new()),
        Message::result("s", image),
        Message::error("s", ErrorCode::ToolUnavailable, "TOOL_UNAVAILABLE"),
        Message::protocol_negotiate("s", &["LightAICL_v1"]),
        Message::result("s", "part").with_stream("chunk_1/2", false),
    ];
    for message in messages {
        message.validate().unwrap();
        assert_eq!(Message::parse(&message.to_text()).unwrap(), message);
        assert_eq!(Message::parse(&message.to_text_pretty()).unwrap(), message);
        // Messages are serde values too.
        let text = concord_aicl::to_string(&message).unwrap();
        assert_eq!(concord_aicl::from_str::<Message>(&text).unwrap(), message);
    }
    let incomplete = Message::new("s", MsgType::ToolCall);
    assert_eq!(
        incomplete.validate().unwrap_err().code(),
        ErrorCode::MissingField
    );
}

#[test]
fn errors_become_error_replies() {
    let bad = "[d:\n  [s:protocol]:[s:LightAICL],\n  [s:session_id]:[s:s9],\n  [s:msg_type]:[s:result],\n  [s:data]:[t:uint8:2:0]\n]";
    let error = Message::parse(bad).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidTensor);
    let reply = Message::error_reply("s9", &error);
    reply.validate().unwrap();
    let info = reply.error_info().unwrap();
    assert_eq!(info.code.code(), 1001);
    assert_eq!(info.reason, "INVALID_TENSOR");
    assert!(
        info.detail
            .unwrap()
            .ends_with("at line 5, column 23 (byte 108)"),
        "{info:?}"
    );
    // Unknown codes from a peer are kept.
    let peer = Message::parse(&message(
        "error",
        ",[s:code]:[i:5003],[s:reason]:[s:TIMEOUT]",
    ))
    .unwrap();
    assert_eq!(peer.error_info().unwrap().code, ErrorCode::Other(5003));
}

#[test]
fn streams_are_checked() {
    let last = message(
        "result",
        ",[s:data]:[i:1],[s:stream_id]:[s:chunk_5/5],[s:is_final]:[b:true]",
    );
    assert!(Message::parse(&last)
        .unwrap()
        .stream()
        .unwrap()
        .unwrap()
        .is_last());
    let wrong = message(
        "result",
        ",[s:data]:[i:1],[s:stream_id]:[s:chunk_4/5],[s:is_final]:[b:true]",
    );
    let error = Message::parse(&wrong).unwrap_err();
    assert!(matches!(error.kind(), ErrorKind::BadField { field, .. } if field == "is_final"));
    let plain = Message::parse(&message("result", ",[s:data]:[i:1]")).unwrap();
    assert_eq!(plain.stream().unwrap(), None);
}

#[test]
fn negotiation_picks_the_highest_common_version() {
    let offer = Message::protocol_negotiate("s", &["LightAICL_v1", "LightAICL_v2"]);
    let reply = offer
        .negotiation_reply(&["LightAICL_v1", "LightAICL_v2", "LightAICL_v3"])
        .unwrap();
    assert_eq!(reply.supported_versions(), ["LightAICL_v2"]);
    assert_eq!(
        reply.get("selected").and_then(Value::as_str),
        Some("LightAICL_v2")
    );
    reply.validate().unwrap();
    let error = offer.negotiation_reply(&["LightAICL_v3"]).unwrap_err();
    assert!(matches!(error.kind(), ErrorKind::NoCommonVersion { .. }));
}

#[test]
fn canonical_form_ignores_layout_and_the_signature() {
    let message = Message::tool_call("s", "calc", Map::new())
        .with("timeout", 1.50)
        .with_signature("abc");
    let canonical = message.canonical_bytes();
    let text = String::from_utf8(canonical.clone()).unwrap();
    assert!(!text.contains("signature"));
    assert!(text.ends_with("[s:timeout]:[f:1.5]]"));
    // The same message written differently has the same canonical bytes.
    let spaced = message.to_text_pretty().replace("[f:1.5]", "[f:1.50]");
    let received = Message::parse(&spaced).unwrap();
    assert_eq!(received.canonical_bytes(), canonical);
    // A changed field changes them.
    let tampered = received.with("timeout", 2.0);
    assert_ne!(tampered.canonical_bytes(), canonical);
    // Re-signing replaces the signature and keeps it last.
    let resigned = message.with_signature("def");
    assert_eq!(resigned.signature(), Some("def"));
    assert_eq!(resigned.fields().keys().last(), Some("signature"));
}
