//! Slots a stranger could pin: WebSockets waiting for their hello (shed by address, never
//! a caller still in its handshake), and sessions that subscribe, observe or hold a stream
//! and then go silent (a budget of their own, shed when the node is full, pinged, their
//! streams reset when idle). Attackers play from 127.0.0.2 and up, the caller from
//! 127.0.0.1.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use concord_fixtures::weather;
use concord_node::{CallError, Keys, Limits, Node, Notification, Server, Want};
use futures_util::SinkExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::MaybeTlsStream;

use crate::support::tcp_from;
use crate::support::*;

/// A WebSocket to `server` from `source`, before any hello; `None` when it was refused.
async fn socket_from(source: &str, server: &Server) -> Option<RawSocket> {
    let stream = tcp_from(source, server).await;
    tokio_tungstenite::client_async(server.endpoint(), MaybeTlsStream::Plain(stream))
        .await
        .ok()
        .map(|(socket, _)| socket)
}

/// One attacker's loop: a WebSocket that never says hello, closed by the attacker after
/// `lifetime` and opened again, or as soon as the node closes or refuses it, until `stop`.
async fn hold_pre_hello(
    source: &'static str,
    lifetime: Duration,
    server: Arc<Server>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::Relaxed) {
        match socket_from(source, &server).await {
            Some(mut socket) => {
                let closed = tokio::time::timeout(lifetime, closed_with(&mut socket));
                tokio::select! {
                    _ = closed => {}
                    () = async { while !stop.load(Ordering::Relaxed) {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    } } => {}
                }
            }
            // Refused (429 or 503): again, a moment later.
            None => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

#[tokio::test]
async fn pre_hello_sockets_reopened_in_a_loop_from_one_address_do_not_shed_callers() {
    // A provider with a DID: the caller signs its upgrade and runs the Noise handshake
    // while it waits for its hello, the window in which it could be shed.
    let provider = build(
        Node::builder("Product agent")
            .action(catalogue::action(), catalogue::answer)
            .keys(Keys::generate())
            .security(loopback_security())
            .limits(Limits {
                // The attacker is slowed neither by the connection rate nor by its share
                // of sessions: the budget of WebSockets waiting for their hello alone
                // must keep it from the caller.
                connection_rate_per_address: 100_000,
                connection_burst_per_address: 100_000,
                max_sessions_per_address: 1024,
                ..quick_limits()
            }),
    );
    let server = Arc::new(serve(&provider).await);
    let stop = Arc::new(AtomicBool::new(false));
    // Four times the budget of WebSockets waiting for their hello (64), each opened again
    // as soon as it is shed: sheds come in bursts, as fast as the attacker reconnects.
    let attackers: Vec<_> = (0..256)
        .map(|_| {
            tokio::spawn(hold_pre_hello(
                "127.0.0.2",
                Duration::from_secs(1),
                Arc::clone(&server),
                Arc::clone(&stop),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_signed_calls_served(&server, &stop, attackers).await;
}

/// 20 calls from 127.0.0.1 by a requester with a DID (each signs its upgrade and runs the
/// Noise handshake), then the attackers are stopped: at least 95% must be served.
async fn assert_signed_calls_served(
    server: &Server,
    stop: &AtomicBool,
    attackers: Vec<tokio::task::JoinHandle<()>>,
) {
    const CALLS: usize = 20;
    let (requester, _requester_server) = requester_with_did().await;
    let mut served = 0;
    let mut failures = Vec::new();
    for round in 0..CALLS {
        let answer = match requester
            .node
            .connect(server.url(), catalogue::ACTION)
            .await
        {
            Ok(connection) => {
                let answer = connection
                    .call(catalogue::ACTION, catalogue::input(round))
                    .await
                    .map_err(|error| error.to_string());
                connection.close().await;
                answer
            }
            Err(error) => Err(error.to_string()),
        };
        match answer {
            Ok(_) => served += 1,
            Err(error) => failures.push(error),
        }
    }
    stop.store(true, Ordering::Relaxed);
    for attacker in attackers {
        attacker.await.unwrap();
    }
    assert!(
        served * 100 >= CALLS * 95,
        "{served} of {CALLS} calls served beside the attack: {failures:?}"
    );
}

#[tokio::test]
async fn pre_hello_sockets_reopened_before_the_floor_from_four_addresses_do_not_lock_callers_out() {
    let provider = build(
        Node::builder("Product agent")
            .action(catalogue::action(), catalogue::answer)
            .keys(Keys::generate())
            .security(loopback_security())
            .limits(quick_limits()),
    );
    let server = Arc::new(serve(&provider).await);
    let stop = Arc::new(AtomicBool::new(false));
    // Default limits: four addresses, each holding its share (16) of the budget of
    // WebSockets waiting for their hello (64), each socket closed and reopened after
    // 0.9 s, younger than the 1 s floor (about 18 connections per second per address,
    // under the 64/s rate).
    let mut attackers = Vec::new();
    for source in ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"] {
        for _ in 0..16 {
            attackers.push(tokio::spawn(hold_pre_hello(
                source,
                Duration::from_millis(900),
                Arc::clone(&server),
                Arc::clone(&stop),
            )));
        }
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_signed_calls_served(&server, &stop, attackers).await;
}

/// The weather agent (every LMOS pattern) with `limits`, serving, and the hash of its
/// interface protocol, negotiated once by a Concord requester: strangers resume it.
async fn weather_with(limits: Limits) -> (Agent, Server, String) {
    let provider = build(weather::agent(Node::builder(weather::TITLE)).limits(limits));
    let server = serve(&provider).await;
    let requester = requester();
    let want = Want::interface([
        weather::GET_WEATHER,
        weather::TALK,
        weather::MODEL_CONFIGURATION,
        weather::USER_FEEDBACK_RECEIVED,
    ]);
    let peer = requester
        .node
        .connect_with(server.url(), want)
        .await
        .unwrap();
    let hash = peer.info().hash.to_string();
    peer.close().await;
    wait_for_sessions(&server, 0).await;
    (provider, server, hash)
}

/// What a silent stranger holds its session with.
#[derive(Debug, Clone, Copy)]
enum Hold {
    Subscription,
    Observation,
    Stream,
}

impl Hold {
    /// The request that makes a session hold it.
    fn request(self) -> Value {
        match self {
            Self::Subscription => json!({"messageType": "request", "operation": "subscribeevent",
                "name": weather::USER_FEEDBACK_RECEIVED, "correlationID": "hold"}),
            Self::Observation => json!({"messageType": "request", "operation": "observeproperty",
                "name": weather::MODEL_CONFIGURATION, "correlationID": "hold"}),
            Self::Stream => json!({"messageType": "request", "operation": "invokeaction",
                "name": weather::TALK, "correlationID": "hold", "streamID": 2, "input": {}}),
        }
    }
}

/// A stranger from `source` that resumes the interface by `hash`, asks to hold `what`,
/// reads the answer and returns it with the socket (then sends and reads nothing more).
async fn holder_from(source: &str, server: &Server, hash: &str, what: Hold) -> (RawSocket, Value) {
    let mut socket = socket_from(source, server).await.expect("upgraded");
    let destination = hello(&mut socket, Some(hash)).await;
    assert_eq!(destination["metaProtocol"]["usedProtocolHash"], hash);
    let mut bytes = vec![0x40];
    bytes.extend_from_slice(what.request().to_string().as_bytes());
    socket.send(Message::Binary(bytes.into())).await.unwrap();
    loop {
        if let Message::Binary(bytes) = next(&mut socket).await {
            if bytes.get(1) == Some(&b'{') {
                return (socket, serde_json::from_slice(&bytes[1..]).unwrap());
            }
        }
    }
}

/// One call of getWeather from 127.0.0.1 over a fresh interface session.
async fn weather_call(requester: &Agent, server: &Server) -> Result<Value, String> {
    let peer = requester
        .node
        .connect_with(server.url(), Want::interface([weather::GET_WEATHER]))
        .await
        .map_err(|error| error.to_string())?;
    let answer = peer
        .call(
            weather::GET_WEATHER,
            json!({"question": "Weather in Lisbon?", "interactionMode": "text"}),
        )
        .await
        .map_err(|error| error.to_string());
    peer.close().await;
    answer
}

#[tokio::test]
async fn silent_subscribers_observers_and_streams_from_four_addresses_do_not_lock_callers_out() {
    let (_provider, server, hash) = weather_with(Limits {
        max_sessions: 16,
        idle_shed_after: Duration::from_millis(200),
        max_holding_sessions: 8,
        max_holding_sessions_per_address: 2,
        ..quick_limits()
    })
    .await;
    // Every slot taken: four sessions from each of four addresses, each asking to hold a
    // subscription, an observation or a stream, then silent.
    let kinds = [
        Hold::Subscription,
        Hold::Stream,
        Hold::Observation,
        Hold::Subscription,
    ];
    let mut strangers = Vec::new();
    for source in ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"] {
        let mut statuses = Vec::new();
        for what in kinds {
            let (socket, answer) = holder_from(source, &server, &hash, what).await;
            statuses.push(answer["error"]["status"].as_u64().unwrap_or(200));
            strangers.push(socket);
        }
        // Two hold per address; the others are answered 429 and their sessions go on.
        assert_eq!(statuses, [200, 200, 429, 429], "{source}");
    }
    wait_for_sessions(&server, 16).await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    const CALLS: usize = 10;
    let requester = requester();
    let mut failures = Vec::new();
    for _ in 0..CALLS {
        if let Err(error) = weather_call(&requester, &server).await {
            failures.push(error);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {CALLS} calls served beside the silent holders: {failures:?}",
        CALLS - failures.len()
    );
}

#[tokio::test]
async fn a_silent_subscriber_that_answers_no_ping_is_closed_and_a_listening_one_is_not() {
    let (provider, server, hash) = weather_with(Limits {
        ping_interval: Duration::from_millis(300),
        pong_timeout: Duration::from_millis(300),
        ..quick_limits()
    })
    .await;
    // A caller that listens (its client answers pings as it reads).
    let requester = requester();
    let peer = requester
        .node
        .connect_with(
            server.url(),
            Want::interface([weather::USER_FEEDBACK_RECEIVED]),
        )
        .await
        .unwrap();
    let mut feedback = peer
        .subscribe(weather::USER_FEEDBACK_RECEIVED, None)
        .await
        .unwrap();
    // A stranger that subscribes, then reads nothing (so answers no ping).
    let (mut stranger, answer) = holder_from("127.0.0.2", &server, &hash, Hold::Subscription).await;
    assert!(answer.get("error").is_none(), "{answer}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_closed_with(&mut stranger, 1008, "no answer to a ping within 300 ms").await;

    // The listening caller is still served.
    provider
        .node
        .publisher()
        .publish(weather::USER_FEEDBACK_RECEIVED, json!({"rating": 4}))
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(5), feedback.next())
        .await
        .expect("the listening subscriber still gets events");
    match event {
        Some(Notification::Event { data, .. }) => assert_eq!(data["rating"], 4),
        other => panic!("{other:?}"),
    }
    wait_for_sessions(&server, 1).await;
}

#[tokio::test]
async fn a_stream_with_no_byte_either_way_is_reset_with_408() {
    let (_provider, server, _hash) = weather_with(Limits {
        stream_idle_timeout: Duration::from_millis(300),
        ..quick_limits()
    })
    .await;
    let requester = requester();
    let peer = requester
        .node
        .connect_with(
            server.url(),
            Want::interface([weather::GET_WEATHER, weather::TALK]),
        )
        .await
        .unwrap();
    let (_sender, mut receiver) = peer.open_stream(weather::TALK, json!({})).await.unwrap();
    // Nothing is sent either way.
    let ended = tokio::time::timeout(Duration::from_secs(5), receiver.next())
        .await
        .expect("the idle stream is reset");
    match ended {
        Some(Err(CallError::Remote { code, message })) => {
            assert_eq!(code, 408, "{message}");
            assert!(message.contains("idle"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // The session goes on.
    let answer = peer
        .call(
            weather::GET_WEATHER,
            json!({"question": "Weather in Oslo?", "interactionMode": "text"}),
        )
        .await
        .unwrap();
    assert!(answer.as_str().unwrap().contains("Oslo"), "{answer}");
}

#[tokio::test]
async fn a_full_holders_budget_sheds_the_holder_silent_longest_for_a_new_subscriber() {
    let (_provider, server, hash) = weather_with(Limits {
        idle_shed_after: Duration::from_millis(200),
        max_holding_sessions: 2,
        max_holding_sessions_per_address: 2,
        ..quick_limits()
    })
    .await;
    let (mut older, _) = holder_from("127.0.0.2", &server, &hash, Hold::Subscription).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (_newer, _) = holder_from("127.0.0.3", &server, &hash, Hold::Observation).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A third holder from another address takes the place of the one silent longest.
    let requester = requester();
    let peer = requester
        .node
        .connect_with(
            server.url(),
            Want::interface([weather::USER_FEEDBACK_RECEIVED]),
        )
        .await
        .unwrap();
    peer.subscribe(weather::USER_FEEDBACK_RECEIVED, None)
        .await
        .unwrap();
    assert_closed_with(
        &mut older,
        1013,
        "the node holds as many subscriptions and streams as it serves and yours was silent longest; resume later",
    )
    .await;
}

#[tokio::test]
async fn a_session_too_busy_to_read_is_not_closed_as_unresponsive() {
    // One call in flight at most, so the session reads nothing (the pong to its ping
    // included) while that call runs, which is longer than a ping and its pong's deadline.
    let schema = json!({
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"]
    });
    let slow = concord_negotiate::ActionSpec {
        name: "slow".into(),
        description: "An action that takes its time.".into(),
        input: schema.clone(),
        output: schema,
    };
    let provider = build(
        Node::builder("Busy agent")
            .limits(Limits {
                max_calls_in_flight: 1,
                ping_interval: Duration::from_millis(200),
                pong_timeout: Duration::from_millis(200),
                ..quick_limits()
            })
            .action(slow, |input: Value| async move {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                Ok(input)
            }),
    );
    let server = serve(&provider).await;
    let requester = requester();
    let peer = requester
        .node
        .connect_with(server.url(), Want::interface(["slow"]))
        .await
        .unwrap();
    for n in 0..2 {
        let text = format!("call {n}");
        assert_eq!(
            peer.call("slow", json!({ "text": text })).await.unwrap(),
            json!({ "text": text })
        );
    }
}

#[tokio::test]
async fn newcomers_from_addresses_holding_many_shed_their_own_not_a_silent_subscriber() {
    let (provider, server, hash) = weather_with(Limits {
        max_sessions: 8,
        max_holding_sessions: 8,
        idle_shed_after: Duration::from_millis(200),
        ..quick_limits()
    })
    .await;
    // The caller's subscriber, from 127.0.0.1: a real Concord subscription that only
    // reads, so its peer is the one silent longest.
    let requester = requester();
    let peer = requester
        .node
        .connect_with(
            server.url(),
            Want::interface([weather::USER_FEEDBACK_RECEIVED]),
        )
        .await
        .unwrap();
    let mut feedback = peer
        .subscribe(weather::USER_FEEDBACK_RECEIVED, None)
        .await
        .unwrap();
    // Every other slot taken by strangers from three addresses: hello, then silence.
    let sources = ["127.0.0.2", "127.0.0.3", "127.0.0.4"];
    let mut strangers = Vec::new();
    for source in sources.iter().cycle().take(7) {
        let mut socket = socket_from(source, &server).await.expect("upgraded");
        hello(&mut socket, Some(&hash)).await;
        strangers.push(socket);
    }
    wait_for_sessions(&server, 8).await;
    // Newcomers from the strangers' addresses, each once every session is idle long
    // enough to be shed: each takes the slot of a stranger.
    for source in sources.iter().cycle().take(6) {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut socket = socket_from(source, &server).await.expect("upgraded");
        let answer = hello(&mut socket, Some(&hash)).await;
        assert_eq!(answer["metaProtocol"]["usedProtocolHash"], hash.as_str());
        strangers.push(socket);
    }
    wait_for_sessions(&server, 8).await;
    // The caller's subscription goes on, on the same session.
    provider
        .node
        .publisher()
        .publish(weather::USER_FEEDBACK_RECEIVED, json!({"rating": 5}))
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(5), feedback.next())
        .await
        .expect("the silent subscriber still gets events");
    match event {
        Some(Notification::Event { data, .. }) => assert_eq!(data["rating"], 5),
        other => panic!("the subscriber was shed: {other:?}"),
    }
    assert!(!peer.is_closed(), "the caller's session was closed");
}

/// A caller's listener, alone on its address and silent (it only reads), is not shed for
/// a newcomer from an address holding more sessions than the listener's, even when it is
/// the only session silent long enough to be shed: the newcomer's address would then hold
/// more than the listener's, so the newcomer waits (503) and the listener goes on.
#[tokio::test]
async fn a_listener_alone_on_its_address_is_not_shed_for_a_newcomer_of_an_address_holding_more() {
    let idle_shed_after = Duration::from_secs(3);
    let (provider, server, hash) = weather_with(Limits {
        max_sessions: 8,
        idle_shed_after,
        ..quick_limits()
    })
    .await;
    // The caller's listener on 127.0.0.1, silent longer than `idle_shed_after`.
    let requester = requester();
    let peer = requester
        .node
        .connect_with(
            server.url(),
            Want::interface([weather::USER_FEEDBACK_RECEIVED]),
        )
        .await
        .unwrap();
    let mut feedback = peer
        .subscribe(weather::USER_FEEDBACK_RECEIVED, None)
        .await
        .unwrap();
    tokio::time::sleep(idle_shed_after + Duration::from_millis(500)).await;
    // Every other slot taken by one stranger: sessions that said hello just now.
    let mut strangers = Vec::new();
    for _ in 0..7 {
        let mut socket = socket_from("127.0.0.2", &server).await.expect("upgraded");
        hello(&mut socket, Some(&hash)).await;
        strangers.push(socket);
    }
    wait_for_sessions(&server, 8).await;
    // The stranger's next session: none of its own is silent long enough to be shed, and
    // the listener's address holds fewer than the stranger's would.
    let refused = match socket_from("127.0.0.2", &server).await {
        None => true,
        Some(mut socket) => {
            socket
                .send(Message::Text(source_hello(Some(&hash)).into()))
                .await
                .unwrap();
            // A destination hello says it took a slot.
            matches!(next(&mut socket).await, Message::Close(Some(frame)) if u16::from(frame.code) == 1013)
        }
    };
    assert!(refused, "the stranger's newcomer took a slot");
    provider
        .node
        .publisher()
        .publish(weather::USER_FEEDBACK_RECEIVED, json!({"rating": 4}))
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(5), feedback.next())
        .await
        .expect("the listener still gets events");
    match event {
        Some(Notification::Event { data, .. }) => assert_eq!(data["rating"], 4),
        other => panic!("the listener was shed: {other:?}"),
    }
    assert!(!peer.is_closed(), "the caller's session was closed");
    drop(strangers);
}

/// A session shed for a newcomer gives its slot back at once even when its peer reads
/// nothing and the node's writes to it are blocked (a subscriber of large events that
/// never reads): the newcomer is served, not answered 1013 after waiting for a slot that
/// the blocked session would give back only when its write gave up.
#[tokio::test]
async fn a_shed_session_whose_peer_reads_nothing_gives_its_slot_back_at_once() {
    let (provider, server, hash) = weather_with(Limits {
        max_sessions: 2,
        ..quick_limits()
    })
    .await;
    // Both slots: subscribers from one stranger's address that never read.
    let mut strangers = Vec::new();
    for _ in 0..2 {
        let (socket, answer) = holder_from("127.0.0.2", &server, &hash, Hold::Subscription).await;
        assert!(answer.get("error").is_none(), "{answer}");
        strangers.push(socket);
    }
    wait_for_sessions(&server, 2).await;
    // Far more event data than the sockets' buffers hold: the node's writes to them block.
    let comment = "n".repeat(512 * 1024);
    for rating in 0..64 {
        provider
            .node
            .publisher()
            .publish(
                weather::USER_FEEDBACK_RECEIVED,
                json!({"rating": rating % 5 + 1, "comment": comment}),
            )
            .unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The caller's address holds none: one of the stranger's goes for it.
    let requester = requester();
    let answer = weather_call(&requester, &server).await;
    assert!(answer.is_ok(), "the caller was not served: {answer:?}");
    drop(strangers);
}
