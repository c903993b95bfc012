//! Bad input from a peer: each gets a clear error, the session's resources are freed, and
//! the node keeps serving everyone else.

use std::time::Duration;

use concord_node::{ConnectError, Limits, Node};
use futures_util::SinkExt;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

use crate::support::*;

/// After a bad peer, its session ends and the provider still serves a good one (up to its
/// answer to a candidate, which needs no code).
async fn still_serves(server: &concord_node::Server) {
    wait_for_sessions(server, 0).await;
    let mut socket = raw_socket(server).await;
    let destination = hello(&mut socket, None).await;
    assert_eq!(destination["type"], "destinationHello");
    socket.close(None).await.unwrap();
}

#[tokio::test]
async fn a_binary_frame_before_the_hello_is_refused_with_a_reason() {
    let agent = provider();
    let server = serve(&agent).await;
    let mut socket = raw_socket(&server).await;
    socket
        .send(Message::Binary(vec![0u8, b'{', b'}'].into()))
        .await
        .unwrap();
    assert_closed_with(
        &mut socket,
        1002,
        "expected the sourceHello as a JSON text frame first, got a binary frame",
    )
    .await;
    still_serves(&server).await;
}

#[tokio::test]
async fn a_hello_missing_fields_is_refused_naming_the_field() {
    let agent = provider();
    let server = serve(&agent).await;
    for (hello, says) in [
        (
            json!({"version": "1.0", "type": "sourceHello", "messageId": "x"}).to_string(),
            "invalid sourceHello: hello: missing required field `metaProtocol`",
        ),
        (
            json!({"version": "1.0", "type": "sourceHello", "messageId": "x", "metaProtocol": {}}).to_string(),
            "invalid sourceHello: hello: missing required field `metaProtocol.version`",
        ),
        (
            json!({"type": "sourceHello", "messageId": "x", "metaProtocol": {"version": "1.0"}}).to_string(),
            "invalid sourceHello: hello: missing required field `version`",
        ),
        (
            "this is not JSON".to_owned(),
            "invalid sourceHello: hello is not valid JSON at line 1, column 2",
        ),
        (
            json!({"version": "1.0", "type": "destinationHello", "messageId": "x", "metaProtocol": {"version": "1.0"}}).to_string(),
            "expected a sourceHello, got a destinationHello",
        ),
        (
            json!({"version": "1.0", "type": "sourceHello", "messageId": "x", "metaProtocol": {"version": "7.0"}}).to_string(),
            "handshake: no common meta-protocol version: we speak 1.0, the peer speaks 7.0",
        ),
        (
            json!({"version": "1.0", "type": "sourceHello", "metaProtocol": {"version": "1.0"}}).to_string(),
            "invalid sourceHello: hello: missing required field `messageId`",
        ),
        (
            json!({"version": "9.9", "type": "sourceHello", "messageId": "x", "metaProtocol": {"version": "1.0"}}).to_string(),
            "invalid sourceHello: hello: format version \"9.9\" is not one we speak",
        ),
    ] {
        let mut socket = raw_socket(&server).await;
        socket.send(Message::Text(hello.into())).await.unwrap();
        let (code, reason) = closed_with(&mut socket).await;
        assert_eq!(code, 1002, "{reason}");
        assert!(reason.starts_with(says), "{reason:?} does not start with {says:?}");
    }
    still_serves(&server).await;
    // Refused hellos leave no transcript: there was no session.
    assert!(agent.store().list_transcripts(10).unwrap().len() <= 1);
}

#[tokio::test]
async fn an_oversized_frame_is_refused_with_1009() {
    let agent = provider_with(Limits {
        max_frame_size: 4096,
        ..quick_limits()
    });
    let server = serve(&agent).await;
    // As the hello.
    let mut socket = raw_socket(&server).await;
    socket
        .send(Message::Text("x".repeat(5000).into()))
        .await
        .unwrap();
    assert_closed_with(
        &mut socket,
        1009,
        "the hello exceeds the limit of 4096 bytes",
    )
    .await;
    // After the hello.
    let mut socket = raw_socket(&server).await;
    hello(&mut socket, None).await;
    let mut frame = vec![0u8];
    frame.extend(std::iter::repeat_n(b' ', 5000));
    socket.send(Message::Binary(frame.into())).await.unwrap();
    assert_closed_with(
        &mut socket,
        1009,
        "a message exceeds the limit of 4096 bytes",
    )
    .await;
    wait_for_sessions(&server, 0).await;
    let transcripts = finished_transcripts(agent.store(), 1).await;
    assert_eq!(
        transcripts[0].summary.outcome,
        Some(concord_store::Outcome::Failed(
            "the peer sent a message over the limit of 4096 bytes".into()
        ))
    );
    still_serves(&server).await;
}

#[tokio::test]
async fn a_garbage_frame_is_answered_rejected_and_closed() {
    let agent = provider();
    let server = serve(&agent).await;
    let mut socket = raw_socket(&server).await;
    hello(&mut socket, None).await;
    socket
        .send(Message::Binary(vec![0x00, 0xff, 0xfe, b'{'].into()))
        .await
        .unwrap();
    let rejected = next_meta(&mut socket).await;
    assert_eq!(rejected["action"], "protocolNegotiation");
    assert_eq!(rejected["status"], "rejected");
    let reason = rejected["modificationSummary"].as_str().unwrap();
    assert!(reason.starts_with("bad meta message:"), "{reason}");
    let (code, close_reason) = closed_with(&mut socket).await;
    assert_eq!(code, 1002);
    assert!(
        close_reason.starts_with("protocol violation: bad meta message:"),
        "{close_reason}"
    );
    // An empty binary frame is a violation too.
    let mut socket = raw_socket(&server).await;
    hello(&mut socket, None).await;
    socket
        .send(Message::Binary(Vec::new().into()))
        .await
        .unwrap();
    let rejected = next_meta(&mut socket).await;
    assert_eq!(
        rejected["modificationSummary"],
        "bad frame: empty frame: a frame needs at least its 1-byte header"
    );
    assert_eq!(closed_with(&mut socket).await.0, 1002);
    wait_for_sessions(&server, 0).await;
    let transcripts = finished_transcripts(agent.store(), 2).await;
    // Newest first: the empty frame (no header, so not recorded as a frame), then the
    // garbage one (not UTF-8, so kept as its length).
    assert_eq!(
        frame_summary(&transcripts[0]),
        [
            "received hello sourceHello",
            "sent hello destinationHello",
            "sent meta protocolNegotiation:rejected",
        ]
    );
    assert_eq!(
        frame_summary(&transcripts[1]),
        [
            "received hello sourceHello",
            "sent hello destinationHello",
            "received meta 3 bytes",
            "sent meta protocolNegotiation:rejected",
        ]
    );
    still_serves(&server).await;
}

#[tokio::test]
async fn a_text_frame_after_the_hello_breaks_the_binding() {
    let agent = provider();
    let server = serve(&agent).await;
    let mut socket = raw_socket(&server).await;
    hello(&mut socket, None).await;
    socket
        .send(Message::Text(r#"{"action":"protocolNegotiation"}"#.into()))
        .await
        .unwrap();
    assert_closed_with(
        &mut socket,
        1002,
        "a text frame after the hello: every later frame must be binary [header][data]",
    )
    .await;
    still_serves(&server).await;
}

#[tokio::test]
async fn a_silent_peer_times_out_at_the_hello() {
    let agent = provider_with(Limits {
        hello_timeout: Duration::from_millis(300),
        pending_hello_shed_after: Duration::from_millis(100),
        ..quick_limits()
    });
    let server = serve(&agent).await;
    let mut socket = raw_socket(&server).await;
    assert_closed_with(&mut socket, 1008, "no sourceHello within 300 ms").await;
    wait_for_sessions(&server, 0).await;
}

#[tokio::test]
async fn a_peer_that_says_hello_and_never_proposes_is_timed_out() {
    let agent = provider_with(Limits {
        first_proposal_timeout: Duration::from_millis(400),
        ..quick_limits()
    });
    let server = serve(&agent).await;
    let mut socket = raw_socket(&server).await;
    hello(&mut socket, None).await;
    // Never propose anything: the session slot is given back well before the 60 s a
    // negotiation step may take.
    let rejected = next_meta(&mut socket).await;
    assert_eq!(rejected["status"], "rejected");
    assert_eq!(
        rejected["modificationSummary"],
        "timed out: no protocolNegotiation within 0 s of the hellos"
    );
    assert_closed_with(
        &mut socket,
        1008,
        "timed out waiting for the first protocolNegotiation (first_proposal_timeout)",
    )
    .await;
    still_serves(&server).await;
}

#[tokio::test]
async fn a_peer_that_disconnects_mid_negotiation_frees_its_session() {
    let agent = provider();
    let server = serve(&agent).await;
    let mut socket = raw_socket(&server).await;
    hello(&mut socket, None).await;
    wait_for_sessions(&server, 1).await;
    drop(socket);
    wait_for_sessions(&server, 0).await;
    let transcripts = finished_transcripts(agent.store(), 1).await;
    let outcome = transcripts[0].summary.outcome.clone().unwrap();
    match outcome {
        concord_store::Outcome::Failed(reason) => assert!(
            reason.starts_with("the peer closed the connection")
                || reason.starts_with("WebSocket error"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
    still_serves(&server).await;
}

#[tokio::test]
async fn an_unknown_zero_rtt_hash_falls_back_to_negotiation() {
    let agent = provider();
    let server = serve(&agent).await;
    let mut socket = raw_socket(&server).await;
    let unknown = "ab".repeat(32);
    let destination = hello(&mut socket, Some(&unknown)).await;
    assert_eq!(destination["type"], "destinationHello");
    assert!(destination["metaProtocol"]
        .get("usedProtocolHash")
        .is_none());
    // A normal negotiation follows: the provider answers a candidate it cannot read with
    // its own protocol, saying what it could not find.
    socket
        .send(meta_frame(&json!({
            "action": "protocolNegotiation", "sequenceId": 0, "status": "negotiating",
            "candidateProtocols": "# Requirement\nNothing useful.\n"
        })))
        .await
        .unwrap();
    let answer = next_meta(&mut socket).await;
    assert_eq!(answer["action"], "protocolNegotiation");
    assert_eq!(answer["sequenceId"], 1);
    assert_eq!(answer["status"], "negotiating");
    let summary = answer["modificationSummary"].as_str().unwrap_or_default();
    assert!(summary.contains("no schema"), "{summary}");
    assert!(answer["candidateProtocols"]
        .as_str()
        .is_some_and(|text| text.contains("getProductInfo")));
}

#[tokio::test]
async fn the_session_limit_answers_503_and_frees_up() {
    let agent = provider_with(Limits {
        max_sessions: 1,
        max_holding_sessions: 1,
        max_holding_sessions_per_address: 1,
        ..quick_limits()
    });
    let server = serve(&agent).await;
    let mut first = raw_socket(&server).await;
    hello(&mut first, None).await;
    wait_for_sessions(&server, 1).await;
    let requester = requester();
    let error = requester
        .node
        .connect(server.url(), "getProductInfo")
        .await
        .unwrap_err();
    match &error {
        ConnectError::Connect { reason, .. } => assert_eq!(
            reason,
            "HTTP 503 Service Unavailable: this node serves at most 1 sessions at once; try again later"
        ),
        other => panic!("{other}"),
    }
    first.close(None).await.unwrap();
    still_serves(&server).await;
}

#[tokio::test]
async fn a_bad_peer_url_or_description_is_a_clear_error() {
    let requester = requester();
    let error = requester
        .node
        .connect("ftp://example.com", "x")
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "\"ftp://example.com\" is not a peer URL: a peer URL starts with http:// or https://"
    );
    let agent = provider();
    let server = serve(&agent).await;
    let error = requester
        .node
        .connect(server.url(), "getWeather")
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "the peer at {} publishes no action `getWeather` (it has: getProductInfo)",
            server.description_url()
        )
    );
    // Nothing listens there.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let error = requester
        .node
        .connect(&format!("http://{closed}/"), "x")
        .await
        .unwrap_err();
    assert!(matches!(error, ConnectError::Fetch { .. }), "{error}");
    // The message says why, not only that sending the request failed.
    assert!(error.to_string().contains("refused"), "{error}");
    let _ = Node::builder("unused");
}

/// A provider whose handlers read at most 4 KiB per message, a raw peer on a session it
/// resumed by 0-RTT (after a real requester negotiated the protocol), and the protocol's
/// request as the real requester writes it.
async fn resumed_raw_session() -> (Agent, concord_node::Server, RawSocket) {
    let mut handler_limits = concord_sandbox::Limits::default();
    handler_limits.input_bytes = 4096;
    let agent = build(
        Node::builder("Product agent")
            .description("Product information for a small shop.")
            .action(catalogue::action(), catalogue::answer)
            .limits(quick_limits())
            .handler_limits(handler_limits),
    );
    let server = serve(&agent).await;
    let first = requester().connect(&server, "getProductInfo").await;
    let hash = first.info().hash.to_string();
    first.close().await;
    let mut socket = raw_socket(&server).await;
    let destination = hello(&mut socket, Some(&hash)).await;
    assert_eq!(
        destination["metaProtocol"]["usedProtocolHash"],
        hash.as_str()
    );
    (agent, server, socket)
}

/// An application frame (PT 1): header 0x40 then the bytes.
fn application_frame(bytes: &[u8]) -> Message {
    let mut frame = vec![0x40u8];
    frame.extend_from_slice(bytes);
    Message::Binary(frame.into())
}

/// The next application frame's message as JSON (meta frames, e.g. error reports, skipped).
async fn next_application(socket: &mut RawSocket) -> serde_json::Value {
    loop {
        match next(socket).await {
            Message::Binary(bytes) if bytes.first() == Some(&0x40) => {
                return serde_json::from_slice(&bytes[1..]).unwrap();
            }
            Message::Binary(_) => {}
            other => panic!("expected an application frame, got {other:?}"),
        }
    }
}

/// The message's string values, wherever they are (the envelope decides the layout).
fn strings(value: &serde_json::Value) -> Vec<String> {
    match value {
        serde_json::Value::String(text) => vec![text.clone()],
        serde_json::Value::Array(items) => items.iter().flat_map(strings).collect(),
        serde_json::Value::Object(map) => map.values().flat_map(strings).collect(),
        _ => Vec::new(),
    }
}

#[tokio::test]
async fn a_request_over_the_input_cap_is_answered_under_its_message_id() {
    let (_agent, server, mut socket) = resumed_raw_session().await;
    let request = json!({
        "messageId": "toolarge00000001",
        "productId": "P12345",
        "padding": "x".repeat(10_000),
    });
    socket
        .send(application_frame(request.to_string().as_bytes()))
        .await
        .unwrap();
    let response = next_application(&mut socket).await;
    let texts = strings(&response);
    assert!(
        texts.iter().any(|text| text == "toolarge00000001"),
        "the error response does not carry the request's id: {response}"
    );
    assert!(
        texts.iter().any(|text| text.contains("4096")),
        "the error response does not name the limit: {response}"
    );
    // The session goes on: a good request is served.
    let request = json!({"messageId": "fine000000000001", "productId": "P12345"});
    socket
        .send(application_frame(request.to_string().as_bytes()))
        .await
        .unwrap();
    let response = next_application(&mut socket).await;
    assert!(
        strings(&response)
            .iter()
            .any(|text| text == "fine000000000001"),
        "{response}"
    );
    assert_eq!(server.sessions(), 1);
}

#[tokio::test]
async fn a_request_that_is_not_json_is_answered_under_the_empty_id() {
    let (_agent, server, mut socket) = resumed_raw_session().await;
    socket
        .send(application_frame(b"this is not JSON"))
        .await
        .unwrap();
    let response = next_application(&mut socket).await;
    let texts = strings(&response);
    assert!(
        texts.iter().any(String::is_empty),
        "the error response carries no empty id: {response}"
    );
    assert!(
        texts.iter().any(|text| text.contains("not valid JSON")),
        "the error response does not say why: {response}"
    );
    // A request over the cap whose id cannot be found (it is cut off) is answered too.
    let cut_off = format!(r#"{{"padding": "{}", "messageId": "#, "x".repeat(10_000));
    socket
        .send(application_frame(cut_off.as_bytes()))
        .await
        .unwrap();
    let response = next_application(&mut socket).await;
    assert!(
        strings(&response).iter().any(String::is_empty),
        "{response}"
    );
    assert_eq!(server.sessions(), 1);
}
