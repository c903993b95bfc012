//! A stranger on an interface session: a raw WebSocket peer that resumes the stored
//! interface protocol by hash (0-RTT) and writes W3C Web Thing Protocol messages and
//! stream chunks by hand, as another implementation would, including bad ones. Every bad
//! input gets a typed answer (an RFC 9457 problem) and the session goes on.

use concord_fixtures::weather;
use concord_node::{Node, Notification, Want};
use futures_util::SinkExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::support::{
    build, hello, next, quick_limits, raw_socket, raw_socket_from, requester, serve, RawSocket,
};

/// PT 1 (application) header byte.
const APPLICATION: u8 = 0x40;

async fn send_json(socket: &mut RawSocket, message: &Value) {
    let mut bytes = vec![APPLICATION];
    bytes.extend_from_slice(message.to_string().as_bytes());
    socket.send(Message::Binary(bytes.into())).await.unwrap();
}

async fn send_raw(socket: &mut RawSocket, data: &[u8]) {
    let mut bytes = vec![APPLICATION];
    bytes.extend_from_slice(data);
    socket.send(Message::Binary(bytes.into())).await.unwrap();
}

/// A stream chunk: 0x00, stream id and sequence (u32 big endian), flags, payload.
fn chunk(stream: u32, sequence: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0x00];
    bytes.extend_from_slice(&stream.to_be_bytes());
    bytes.extend_from_slice(&sequence.to_be_bytes());
    bytes.push(flags);
    bytes.extend_from_slice(payload);
    bytes
}

/// The next application frame: a JSON message, or a chunk (`Err` with its bytes).
async fn next_application(socket: &mut RawSocket) -> Result<Value, Vec<u8>> {
    loop {
        if let Message::Binary(bytes) = next(socket).await {
            assert_eq!(bytes[0] >> 6, 1, "expected an application frame");
            let data = &bytes[1..];
            return match data.first() {
                Some(b'{') => Ok(serde_json::from_slice(data).unwrap()),
                _ => Err(data.to_vec()),
            };
        }
    }
}

/// The next JSON message, skipping stream chunks.
async fn next_message(socket: &mut RawSocket) -> Value {
    loop {
        if let Ok(message) = next_application(socket).await {
            return message;
        }
    }
}

#[tokio::test]
async fn hand_written_messages_get_answers_and_bad_ones_typed_problems() {
    let provider = build(weather::agent(Node::builder(weather::TITLE)).limits(quick_limits()));
    let server = serve(&provider).await;
    // A Concord requester negotiates the interface once: the provider stores it by hash.
    let requester = requester();
    let want = Want::interface([
        weather::GET_WEATHER,
        weather::TALK,
        weather::USER_FEEDBACK_RECEIVED,
    ]);
    let peer = requester
        .node
        .connect_with(server.url(), want)
        .await
        .unwrap();
    let hash = peer.info().hash.to_string();
    peer.close().await;

    // The stranger resumes it by hash and speaks the layer directly.
    let mut socket = raw_socket(&server).await;
    let destination = hello(&mut socket, Some(&hash)).await;
    assert_eq!(
        destination["metaProtocol"]["usedProtocolHash"], hash,
        "{destination}"
    );

    send_json(
        &mut socket,
        &json!({"messageType": "request", "operation": "invokeaction", "name": "getWeather",
                "correlationID": "c1", "input": {"question": "Weather in Paris?", "interactionMode": "text"}}),
    )
    .await;
    let answer = next_message(&mut socket).await;
    assert_eq!(answer["messageType"], "response", "{answer}");
    assert_eq!(answer["correlationID"], "c1");
    assert!(
        answer["output"].as_str().unwrap().contains("Paris"),
        "{answer}"
    );

    // Input its schema refuses: 400, on the request's correlation id.
    send_json(
        &mut socket,
        &json!({"messageType": "request", "operation": "invokeaction", "name": "getWeather",
                "correlationID": "c2", "input": {"question": 7}}),
    )
    .await;
    let problem = next_message(&mut socket).await;
    assert_eq!(problem["correlationID"], "c2", "{problem}");
    assert_eq!(problem["error"]["status"], 400, "{problem}");

    // An event the provider does not have: 404.
    send_json(
        &mut socket,
        &json!({"messageType": "request", "operation": "subscribeevent", "name": "stormWarning",
                "correlationID": "c3"}),
    )
    .await;
    let problem = next_message(&mut socket).await;
    assert_eq!(problem["correlationID"], "c3", "{problem}");
    assert_eq!(problem["error"]["status"], 404, "{problem}");

    // Not JSON: a problem nobody's request can own.
    send_raw(&mut socket, b"{not json").await;
    let problem = next_message(&mut socket).await;
    assert_eq!(problem["error"]["status"], 400, "{problem}");

    // A response the provider never asked for (an unknown correlation id).
    send_json(
        &mut socket,
        &json!({"messageType": "response", "operation": "invokeaction", "correlationID": "nobody",
                "output": {}}),
    )
    .await;
    let problem = next_message(&mut socket).await;
    assert!(
        problem["error"]["status"].as_u64().unwrap() >= 400,
        "{problem}"
    );

    // A query for an action id that never existed: 404.
    send_json(
        &mut socket,
        &json!({"messageType": "request", "operation": "queryaction", "actionID": "no-such-id",
                "correlationID": "c4"}),
    )
    .await;
    let problem = next_message(&mut socket).await;
    assert_eq!(problem["correlationID"], "c4", "{problem}");
    assert_eq!(problem["error"]["status"], 404, "{problem}");

    // A stream, then a chunk past the credit the interface states: 429 and a reset.
    let credit = weather::voice_stream().initial_credit as usize;
    send_json(
        &mut socket,
        &json!({"messageType": "request", "operation": "invokeaction", "name": "talk",
                "correlationID": "c5", "input": {}, "streamID": 0}),
    )
    .await;
    let opened = next_message(&mut socket).await;
    assert_eq!(opened["correlationID"], "c5", "{opened}");
    assert!(opened.get("error").is_none(), "{opened}");
    send_raw(&mut socket, &chunk(0, 0, 0, &vec![0u8; credit + 960])).await;
    let problem = next_message(&mut socket).await;
    assert_eq!(problem["error"]["status"], 429, "{problem}");

    // Another stream: data after its END is refused.
    send_json(
        &mut socket,
        &json!({"messageType": "request", "operation": "invokeaction", "name": "talk",
                "correlationID": "c6", "input": {}, "streamID": 2}),
    )
    .await;
    let opened = next_message(&mut socket).await;
    assert_eq!(opened["correlationID"], "c6", "{opened}");
    send_raw(&mut socket, &chunk(2, 0, 1, &[0u8; 960])).await; // END with one frame
    send_raw(&mut socket, &chunk(2, 1, 0, &[0u8; 960])).await; // data after END
    let problem = next_message(&mut socket).await;
    assert_eq!(problem["error"]["status"], 400, "{problem}");

    // After all that, the session still serves.
    send_json(
        &mut socket,
        &json!({"messageType": "request", "operation": "invokeaction", "name": "getWeather",
                "correlationID": "c7", "input": {"question": "And in Rome?", "interactionMode": "voice"}}),
    )
    .await;
    let answer = loop {
        let message = next_message(&mut socket).await;
        if message["correlationID"] == "c7" {
            break message;
        }
    };
    assert!(
        answer["output"].as_str().unwrap().contains("Rome"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_subscriber_that_stops_reading_is_gapped_and_nobody_else_waits() {
    let mut limits = quick_limits();
    limits.interaction.subscriber_queue = 64;
    let provider = build(weather::agent(Node::builder(weather::TITLE)).limits(limits));
    let server = serve(&provider).await;
    let requester = requester();
    let want = Want::interface([weather::USER_FEEDBACK_RECEIVED]);
    let reader = requester
        .node
        .connect_with(server.url(), want)
        .await
        .unwrap();
    let hash = reader.info().hash.to_string();
    let mut feedback = reader
        .subscribe(weather::USER_FEEDBACK_RECEIVED, None)
        .await
        .unwrap();

    // The stranger subscribes, then reads nothing at all.
    let mut stalled = raw_socket(&server).await;
    hello(&mut stalled, Some(&hash)).await;
    send_json(
        &mut stalled,
        &json!({"messageType": "request", "operation": "subscribeevent",
                "name": weather::USER_FEEDBACK_RECEIVED, "correlationID": "s1"}),
    )
    .await;
    let confirmed = next_message(&mut stalled).await;
    assert_eq!(confirmed["correlationID"], "s1", "{confirmed}");

    // Publishing never waits for anyone (a publish is a push into bounded queues; a wait
    // on the stalled subscriber would hang this test): the reader, which keeps up batch by
    // batch, gets every event in order while the stalled one's queue overflows.
    let comment = "x".repeat(2000);
    let events = 2_048u64;
    let mut expected = 0;
    for _ in 0..events / 32 {
        for _ in 0..32 {
            provider
                .node
                .publisher()
                .publish(
                    weather::USER_FEEDBACK_RECEIVED,
                    json!({"rating": 3, "comment": comment}),
                )
                .unwrap();
        }
        for _ in 0..32 {
            match feedback.next().await.unwrap() {
                Notification::Event { id, .. } => {
                    // Ids are consecutive from the node's first.
                    assert!(expected == 0 || id == expected, "{id} after {expected}");
                    expected = id + 1;
                }
                other => panic!("the reading subscriber lost events: {other:?}"),
            }
        }
    }

    // The stalled subscriber, once it reads, learns what it lost: a gap, never silence.
    let mut saw_gap = false;
    let mut last = 0;
    while last + 1 < expected {
        let message = next_message(&mut stalled).await;
        if message["error"]["type"] == "urn:concord:interact:gap" {
            saw_gap = true;
            continue;
        }
        if let Some(id) = message["eventID"].as_u64() {
            last = id;
        }
    }
    assert!(saw_gap, "the stalled subscriber was not told of its losses");
}

#[tokio::test]
async fn a_subscriber_that_stops_reading_large_events_holds_at_most_its_bytes() {
    const BOUND: usize = 1024 * 1024;
    let mut limits = quick_limits();
    limits.interaction.subscriber_queue_bytes = BOUND;
    let provider = build(weather::agent(Node::builder(weather::TITLE)).limits(limits));
    let server = serve(&provider).await;
    let requester = requester();
    let want = Want::interface([weather::USER_FEEDBACK_RECEIVED]);
    let reader = requester
        .node
        .connect_with(server.url(), want)
        .await
        .unwrap();
    let hash = reader.info().hash.to_string();
    let mut feedback = reader
        .subscribe(weather::USER_FEEDBACK_RECEIVED, None)
        .await
        .unwrap();

    // The stranger, from another address, subscribes and then reads nothing at all.
    let mut stalled = raw_socket_from("127.0.0.2", &server).await;
    hello(&mut stalled, Some(&hash)).await;
    send_json(
        &mut stalled,
        &json!({"messageType": "request", "operation": "subscribeevent",
                "name": weather::USER_FEEDBACK_RECEIVED, "correlationID": "s1"}),
    )
    .await;
    let confirmed = next_message(&mut stalled).await;
    assert_eq!(confirmed["correlationID"], "s1", "{confirmed}");

    // 160 events of 100 KB (16 MB, far under the queue's 1,024 messages): the reader keeps
    // up batch by batch; what the node holds for the stalled one stays within its bytes.
    let publisher = provider.node.publisher();
    let comment = "x".repeat(100 * 1024);
    let events = 160u64;
    let mut most = 0;
    let mut last_read = 0;
    for _ in 0..events / 8 {
        for _ in 0..8 {
            publisher
                .publish(
                    weather::USER_FEEDBACK_RECEIVED,
                    json!({"rating": 3, "comment": comment}),
                )
                .unwrap();
        }
        for _ in 0..8 {
            match feedback.next().await.unwrap() {
                Notification::Event { id, .. } => last_read = id,
                other => panic!("the reading subscriber lost events: {other:?}"),
            }
        }
        // The reader's queue is empty now: what is queued is the stalled subscriber's.
        most = most.max(publisher.queued_bytes());
    }
    assert!(most <= BOUND, "{most} bytes queued for one subscriber");

    // Once it reads, it learns what it lost: a gap, never silence.
    let mut saw_gap = false;
    let mut last = 0;
    while last < last_read {
        let message = next_message(&mut stalled).await;
        if message["error"]["type"] == "urn:concord:interact:gap" {
            saw_gap = true;
            last = message["error"]["to"].as_u64().unwrap_or(last);
            continue;
        }
        if let Some(id) = message["eventID"].as_u64() {
            last = id;
        }
    }
    assert!(saw_gap, "the stalled subscriber was not told of its losses");
}

/// A stream action that drops its reader at once: the requester is told to stop sending
/// (a STOP chunk, flag 0x20, for its stream), rather than have what it sends read and
/// dropped. Before, no such chunk existed and the requester went on sending to nobody.
#[tokio::test]
async fn a_dropped_reader_sends_its_peer_a_stop() {
    let spec = concord_node::StreamSpec {
        content_type: "application/octet-stream".to_owned(),
        output_content_type: None,
        frame_bytes: 1024,
        initial_credit: 64 * 1024,
        realtime: false,
    };
    let provider = build(
        Node::builder("Deaf")
            .stream_action(
                concord_negotiate::ActionSpec {
                    name: "listen".to_owned(),
                    description: "Drops its reader at once.".to_owned(),
                    input: json!({"type": "object"}),
                    output: json!({"type": "object"}),
                },
                spec,
                |_input: Value, stream: concord_node::StreamIo| async move {
                    let concord_node::StreamIo {
                        sender, receiver, ..
                    } = stream;
                    drop(receiver);
                    let _ = sender.closed().await;
                    Ok(json!({}))
                },
            )
            .limits(quick_limits()),
    );
    let server = serve(&provider).await;
    let requester = requester();
    let peer = requester
        .node
        .connect_with(server.url(), Want::interface(["listen"]))
        .await
        .unwrap();
    let hash = peer.info().hash.to_string();
    peer.close().await;

    let mut socket = raw_socket(&server).await;
    hello(&mut socket, Some(&hash)).await;
    send_json(
        &mut socket,
        &json!({"messageType": "request", "operation": "invokeaction", "name": "listen",
                "correlationID": "s1", "input": {}, "streamID": 0}),
    )
    .await;
    send_raw(&mut socket, &chunk(0, 0, 0, &[7; 1024])).await;
    let stop = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            if let Err(chunk) = next_application(&mut socket).await {
                if chunk.get(1..9) == Some(&[0, 0, 0, 0, 0, 0, 0, 0][..]) && chunk[9] == 0x20 {
                    return chunk;
                }
            }
        }
    })
    .await
    .expect("a STOP for stream 0");
    assert_eq!(stop.len(), 10, "a STOP carries no payload");
}

/// A stream action that keeps its reader and never reads, and a stranger that sends all
/// the credit it is given: the node holds no more of that stream than its credit. Bytes the
/// node moved into the reader's queue stay within the credit until the reader consumes
/// them (h2's `release_capacity`). Before, moving them into the queue granted the peer
/// their credit back, so a reader that never read held the credit plus a 1 MiB queue.
#[tokio::test]
async fn a_reader_that_never_reads_holds_no_more_than_its_credit() {
    const CREDIT: u64 = 64 * 1024;
    const PIECE: usize = 1024;
    let spec = concord_node::StreamSpec {
        content_type: "application/octet-stream".to_owned(),
        output_content_type: None,
        frame_bytes: 1024,
        initial_credit: CREDIT,
        realtime: false,
    };
    let provider = build(
        Node::builder("Hoarder")
            .stream_action(
                concord_negotiate::ActionSpec {
                    name: "hoard".to_owned(),
                    description: "Keeps its reader and never reads.".to_owned(),
                    input: json!({"type": "object"}),
                    output: json!({"type": "object"}),
                },
                spec,
                |_input: Value, stream: concord_node::StreamIo| async move {
                    let concord_node::StreamIo {
                        sender, receiver, ..
                    } = stream;
                    let _ = sender.closed().await;
                    drop(receiver);
                    Ok(json!({}))
                },
            )
            .limits(quick_limits()),
    );
    let server = serve(&provider).await;
    let requester = requester();
    let peer = requester
        .node
        .connect_with(server.url(), Want::interface(["hoard"]))
        .await
        .unwrap();
    let hash = peer.info().hash.to_string();
    peer.close().await;

    let mut socket = raw_socket_from("127.0.0.2", &server).await;
    hello(&mut socket, Some(&hash)).await;
    send_json(
        &mut socket,
        &json!({"messageType": "request", "operation": "invokeaction", "name": "hoard",
                "correlationID": "s1", "input": {}, "streamID": 0}),
    )
    .await;
    let pieces = u32::try_from(CREDIT / PIECE as u64).unwrap();
    for sequence in 0..pieces {
        send_raw(&mut socket, &chunk(0, sequence, 0, &[7; PIECE])).await;
    }
    // A request after the chunks: its answer comes after whatever they made the node
    // grant (a session handles its frames in order).
    send_json(
        &mut socket,
        &json!({"messageType": "request", "operation": "invokeaction", "name": "nothing",
                "correlationID": "after", "input": {}}),
    )
    .await;
    let mut granted = CREDIT;
    let answered = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            match next_application(&mut socket).await {
                Ok(message) if message["correlationID"] == "after" => return,
                Ok(_) => {}
                Err(chunk) => {
                    let stream = chunk.get(1..5) == Some(&[0, 0, 0, 0][..]);
                    if stream && chunk.get(9) == Some(&0x08) {
                        let total: [u8; 8] = chunk[10..18].try_into().unwrap();
                        granted = granted.max(u64::from_be_bytes(total));
                    }
                }
            }
        }
    })
    .await;
    assert!(
        answered.is_ok(),
        "the request after the chunks was answered"
    );
    assert_eq!(
        granted, CREDIT,
        "a reader that never read was granted no credit beyond its window"
    );
}
