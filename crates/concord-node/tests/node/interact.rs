//! Interface sessions: the seed's WeatherAgent served whole over one negotiated session,
//! every LMOS pattern on it, and a 0-RTT reconnect that resumes a subscription.

use concord_describe::{Form, InteractionMode, Operation, Validated};
use concord_fixtures::weather::{self, VOICE_FRAME_BYTES};
use concord_node::{ActionUpdate, CallError, Limits, Node, Notification, Settlement, Want};
use serde_json::json;

use crate::support::{
    build, quick_limits, requester, serve, served_description, served_description_bytes, Agent,
};

fn weather_agent() -> Agent {
    build(weather::agent(Node::builder(weather::TITLE)).limits(quick_limits()))
}

fn everything() -> Want {
    Want::interface([
        weather::GET_WEATHER,
        weather::FORECAST_REPORT,
        weather::LOG_FEEDBACK,
        weather::TALK,
        weather::MODEL_CONFIGURATION,
        weather::USER_FEEDBACK_RECEIVED,
    ])
}

#[tokio::test]
async fn one_negotiation_covers_the_whole_weather_agent() {
    let provider = weather_agent();
    let server = serve(&provider).await;
    let requester = requester();
    let peer = requester
        .node
        .connect_with(server.url(), everything())
        .await
        .unwrap();
    assert_eq!(peer.info().settlement, Settlement::Negotiated);
    assert_eq!(
        peer.info().accounting.llm_calls(),
        0,
        "an interface is settled by rules alone"
    );

    // Request-reply.
    let answer = peer
        .call(
            weather::GET_WEATHER,
            json!({"question": "Weather in Lisbon?", "interactionMode": "text"}),
        )
        .await
        .unwrap();
    assert!(answer.as_str().unwrap().contains("Lisbon"), "{answer}");
    // Input the schema refuses never leaves.
    let refused = peer
        .call(weather::GET_WEATHER, json!({"question": "?"}))
        .await
        .unwrap_err();
    assert!(matches!(refused, CallError::InvalidInput(_)), "{refused}");

    // Properties.
    let model = peer
        .read_property(weather::MODEL_CONFIGURATION)
        .await
        .unwrap();
    assert_eq!(model, weather::model_configuration());
    let write = peer
        .write_property(weather::MODEL_CONFIGURATION, json!({"modelName": "x"}))
        .await
        .unwrap_err();
    // Refused before anything is sent: the interface says it is read-only.
    assert!(matches!(write, CallError::Unsupported(_)), "{write}");
    assert!(write.to_string().contains("read-only"), "{write}");
    let mut changes = peer
        .observe_property(weather::MODEL_CONFIGURATION)
        .await
        .unwrap();
    provider
        .node
        .publisher()
        .set_property(
            weather::MODEL_CONFIGURATION,
            json!({"modelName": "gpt-4o-mini", "temperature": 0.5, "maxTokens": 256}),
        )
        .unwrap();
    match changes.next().await.unwrap() {
        Notification::PropertyChanged { name, value, .. } => {
            assert_eq!(name, weather::MODEL_CONFIGURATION);
            assert_eq!(value["modelName"], "gpt-4o-mini");
        }
        other => panic!("{other:?}"),
    }

    // Publish-subscribe, fed by a fire-and-forget action.
    let mut feedback = peer
        .subscribe(weather::USER_FEEDBACK_RECEIVED, None)
        .await
        .unwrap();
    peer.notify(
        weather::LOG_FEEDBACK,
        json!({"rating": 5, "comment": "spot on"}),
    )
    .await
    .unwrap();
    let first_id = match feedback.next().await.unwrap() {
        Notification::Event { event, id, data } => {
            assert_eq!(event, weather::USER_FEEDBACK_RECEIVED);
            assert_eq!(data["rating"], 5);
            id
        }
        other => panic!("{other:?}"),
    };

    // One request, many responses.
    let mut run = peer
        .call_with_progress(weather::FORECAST_REPORT, json!({"city": "Oslo", "days": 4}))
        .await
        .unwrap();
    let mut last = 0.0;
    let mut started = false;
    let output = loop {
        match run.next().await.unwrap() {
            ActionUpdate::Started { .. } => started = true,
            ActionUpdate::Progress { progress, .. } => {
                assert!(
                    progress >= last,
                    "progress went back: {last} then {progress}"
                );
                last = progress;
            }
            ActionUpdate::Done(result) => break result.unwrap(),
            other => panic!("{other:?}"),
        }
    };
    assert!(started);
    assert_eq!(output["days"].as_array().unwrap().len(), 4);
    assert!(run.next().await.is_none(), "exactly one terminal update");
    let status = peer.query_action(run.action_id().unwrap()).await.unwrap();
    assert_eq!(status["status"], "completed", "{status}");

    // Streams both ways: ten 20 ms frames in, ten frames back with the volume halved.
    let (sender, mut receiver) = peer.open_stream(weather::TALK, json!({})).await.unwrap();
    let frame: Vec<u8> = (0..VOICE_FRAME_BYTES / 2)
        .flat_map(|i| ((i as i16) * 8).to_le_bytes())
        .collect();
    for _ in 0..10 {
        assert_eq!(sender.send(frame.clone()).await.unwrap(), VOICE_FRAME_BYTES);
    }
    sender.finish().await.unwrap();
    let mut back = Vec::new();
    while let Some(bytes) = receiver.next().await {
        back.extend(bytes.unwrap());
    }
    assert_eq!(back.len(), 10 * VOICE_FRAME_BYTES);
    assert_eq!(
        &back[..VOICE_FRAME_BYTES],
        &weather::halve_volume(&frame)[..]
    );

    // A reconnect resumes the protocol (0-RTT) and the subscription from the last seen id.
    let last_seen = feedback.last_seen();
    drop(feedback);
    peer.close().await;
    provider
        .node
        .publisher()
        .publish(weather::USER_FEEDBACK_RECEIVED, json!({"rating": 2}))
        .unwrap();
    let again = requester
        .node
        .connect_with(server.url(), everything())
        .await
        .unwrap();
    assert_eq!(again.info().settlement, Settlement::Resumed);
    let mut resumed = again
        .subscribe(weather::USER_FEEDBACK_RECEIVED, last_seen)
        .await
        .unwrap();
    match resumed.next().await.unwrap() {
        Notification::Event { id, data, .. } => {
            assert_eq!(id, first_id + 1, "the event published while we were away");
            assert_eq!(data["rating"], 2);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_interface_the_provider_does_not_serve_is_refused_before_any_session() {
    let provider = weather_agent();
    let server = serve(&provider).await;
    let requester = requester();
    let error = requester
        .node
        .connect_with(
            server.url(),
            Want::interface([weather::GET_WEATHER, "getTides"]),
        )
        .await
        .unwrap_err();
    assert!(error.to_string().contains("getTides"), "{error}");
}

#[tokio::test]
async fn a_one_action_connection_has_no_interactions() {
    let provider = weather_agent();
    let server = serve(&provider).await;
    let requester = requester();
    let peer = requester.connect(&server, weather::GET_WEATHER).await;
    let answer = peer
        .call(
            weather::GET_WEATHER,
            json!({"question": "Weather in Rome?", "interactionMode": "voice"}),
        )
        .await
        .unwrap();
    assert!(answer.as_str().unwrap().contains("Rome"));
    let error = peer
        .subscribe(weather::USER_FEEDBACK_RECEIVED, None)
        .await
        .unwrap_err();
    assert!(matches!(error, CallError::Unsupported(_)), "{error}");
}

#[tokio::test]
async fn the_served_description_tells_every_pattern_and_is_strictly_valid() {
    let provider = weather_agent();
    let server = serve(&provider).await;
    let Validated { thing, report, .. } = served_description(&server).await;
    assert_eq!(report.warnings().count(), 0, "{report:?}");
    // The terms as spelt on the wire (what other agents read), not only through our parser.
    let raw: serde_json::Value =
        serde_json::from_slice(&served_description_bytes(&server).await).unwrap();
    let talk = &raw["actions"][weather::TALK];
    assert_eq!(talk["concord:mode"], "stream");
    assert_eq!(
        talk["concord:stream"]["concord:frameBytes"],
        VOICE_FRAME_BYTES
    );
    assert!(talk["concord:stream"]["concord:initialCredit"].is_u64());
    let forecast = &raw["actions"][weather::FORECAST_REPORT];
    assert_eq!(forecast["synchronous"], false);
    assert_eq!(forecast["concord:actionLease"], 30);
    // `op` is a string or an array of them, per form (the WebSocket's here; the HTTP
    // binding's SSE and long-poll forms follow it, tested in `http_events`).
    let raw_ops: Vec<&str> = raw["events"][weather::USER_FEEDBACK_RECEIVED]["forms"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|form| {
            form["href"]
                .as_str()
                .is_some_and(|href| href.starts_with("ws"))
        })
        .flat_map(|form| match &form["op"] {
            serde_json::Value::Array(ops) => ops.iter().filter_map(|op| op.as_str()).collect(),
            op => op.as_str().into_iter().collect::<Vec<_>>(),
        })
        .collect();
    assert_eq!(raw_ops, ["subscribeevent", "unsubscribeevent"]);
    let ops = |forms: &[Form]| -> Vec<Operation> {
        forms
            .iter()
            .flat_map(|form| form.op.iter().flat_map(|ops| ops.iter().copied()))
            .collect()
    };
    let properties = thing.properties.as_ref().unwrap();
    let actions = thing.actions.as_ref().unwrap();
    let events = thing.events.as_ref().unwrap();

    let model = &properties[weather::MODEL_CONFIGURATION];
    assert_eq!(model.schema.read_only, Some(true), "{model:?}");
    let model_ops = ops(&model.forms);
    assert!(
        model_ops.contains(&Operation::ReadProperty),
        "{model_ops:?}"
    );
    assert!(
        model_ops.contains(&Operation::ObserveProperty),
        "{model_ops:?}"
    );
    assert!(
        !model_ops.contains(&Operation::WriteProperty),
        "{model_ops:?}"
    );

    let forecast = &actions[weather::FORECAST_REPORT];
    assert_eq!(forecast.synchronous, Some(false), "{forecast:?}");
    assert_eq!(forecast.interaction_mode(), InteractionMode::Progress);
    let forecast_ops = ops(&forecast.forms);
    for op in [
        Operation::InvokeAction,
        Operation::QueryAction,
        Operation::CancelAction,
    ] {
        assert!(forecast_ops.contains(&op), "{forecast_ops:?}");
    }

    let talk = &actions[weather::TALK];
    assert_eq!(talk.interaction_mode(), InteractionMode::Stream);
    let stream = talk.stream.as_ref().unwrap();
    assert_eq!(stream.frame_bytes as usize, VOICE_FRAME_BYTES, "{stream:?}");
    assert_eq!(
        actions[weather::LOG_FEEDBACK].interaction_mode(),
        InteractionMode::Notify
    );

    let event = &events[weather::USER_FEEDBACK_RECEIVED];
    let rating = &event.data.as_ref().unwrap().properties.as_ref().unwrap()["rating"];
    assert_eq!(rating.maximum, Some(5.into()), "{event:?}");
    let event_ops = ops(&event.forms);
    assert!(
        event_ops.contains(&Operation::SubscribeEvent),
        "{event_ops:?}"
    );
    assert!(
        event_ops.contains(&Operation::UnsubscribeEvent),
        "{event_ops:?}"
    );
}

#[tokio::test]
async fn a_long_running_action_outlives_its_callers_connection() {
    let provider = weather_agent();
    let server = serve(&provider).await;
    let requester = requester();
    let want = Want::interface([weather::FORECAST_REPORT]);
    let peer = requester
        .node
        .connect_with(server.url(), want.clone())
        .await
        .unwrap();
    let mut run = peer
        .call_with_progress(
            weather::FORECAST_REPORT,
            json!({"city": "Riga", "days": 10}),
        )
        .await
        .unwrap();
    let action_id = loop {
        if let ActionUpdate::Started { action_id } = run.next().await.unwrap() {
            break action_id;
        }
    };
    // The id is the capability to query and cancel: 128 unguessable bits.
    assert_eq!(action_id.len(), 32, "{action_id}");
    assert!(
        action_id.chars().all(|c| c.is_ascii_hexdigit()),
        "{action_id}"
    );
    // The caller goes away mid-run: within the lease (30 s) the action runs on.
    peer.close().await;
    let again = requester
        .node
        .connect_with(server.url(), want)
        .await
        .unwrap();
    let status = loop {
        let status = again.query_action(&action_id).await.unwrap();
        if status["status"] != "running" && status["status"] != "pending" {
            break status;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(status["status"], "completed", "{status}");
    assert_eq!(
        status["output"]["days"].as_array().unwrap().len(),
        10,
        "{status}"
    );
}

/// The next `count` feedback events on `feedback`, within 10 s each; their ratings.
async fn next_ratings(feedback: &mut concord_node::Subscription, count: usize) -> Vec<u64> {
    let mut ratings = Vec::new();
    while ratings.len() < count {
        let next = tokio::time::timeout(std::time::Duration::from_secs(10), feedback.next())
            .await
            .unwrap_or_else(|_| panic!("only {} of {count} notifications arrived", ratings.len()));
        match next {
            Some(Notification::Event { data, .. }) => {
                ratings.push(data["rating"].as_u64().unwrap())
            }
            other => panic!("{other:?}"),
        }
    }
    ratings
}

#[tokio::test]
async fn a_notification_reported_sent_reaches_the_provider_even_when_closed_at_once() {
    let provider = weather_agent();
    let server = serve(&provider).await;
    let requester = requester();
    let watcher = requester
        .node
        .connect_with(
            server.url(),
            Want::interface([weather::USER_FEEDBACK_RECEIVED]),
        )
        .await
        .unwrap();
    let mut feedback = watcher
        .subscribe(weather::USER_FEEDBACK_RECEIVED, None)
        .await
        .unwrap();
    let want = Want::interface([weather::LOG_FEEDBACK]);
    // Each caller sends one notification and closes as soon as it is told "sent", as
    // `concord call` does.
    let calls = 12;
    for rating in 1..=calls {
        let peer = requester
            .node
            .connect_with(server.url(), want.clone())
            .await
            .unwrap();
        peer.notify(weather::LOG_FEEDBACK, json!({"rating": rating % 5 + 1}))
            .await
            .unwrap();
        peer.close().await;
    }
    let received = next_ratings(&mut feedback, calls as usize).await;
    assert_eq!(received.len(), calls as usize);

    // A close asked for while the notification is still queued does not drop it: the
    // notification goes first, and is reported sent.
    let peer = requester
        .node
        .connect_with(server.url(), want)
        .await
        .unwrap();
    let (sent, ()) = tokio::join!(
        peer.notify(weather::LOG_FEEDBACK, json!({"rating": 3})),
        peer.close()
    );
    sent.unwrap();
    assert_eq!(next_ratings(&mut feedback, 1).await, [3]);
    // After the close, a notification is an error, never "sent".
    let late = peer
        .notify(weather::LOG_FEEDBACK, json!({"rating": 3}))
        .await
        .unwrap_err();
    assert!(matches!(late, CallError::Closed(_)), "{late}");
}

#[tokio::test]
async fn a_notification_over_the_frame_limit_is_invalid_input_naming_the_limit() {
    let provider = weather_agent();
    let server = serve(&provider).await;
    let requester = build(Node::builder("Requester").limits(Limits {
        max_frame_size: 64 * 1024,
        ..quick_limits()
    }));
    let peer = requester
        .node
        .connect_with(server.url(), Want::interface([weather::LOG_FEEDBACK]))
        .await
        .unwrap();
    let large = json!({"rating": 3, "comment": "x".repeat(70_000)});
    let error = peer.notify(weather::LOG_FEEDBACK, large).await.unwrap_err();
    match &error {
        // Not "closed": the request cannot go as it is, and the limit is named.
        CallError::InvalidInput(text) => {
            assert!(text.contains("limit of 65536 bytes"), "{text}")
        }
        other => panic!("{other}"),
    }
    // Nothing was sent: the session goes on.
    peer.notify(weather::LOG_FEEDBACK, json!({"rating": 4}))
        .await
        .unwrap();
    assert!(!peer.is_closed());
}

#[tokio::test]
async fn a_reader_that_falls_behind_its_own_queue_is_told_with_a_gap() {
    let provider = weather_agent();
    let server = serve(&provider).await;
    let requester = requester();
    let peer = requester
        .node
        .connect_with(
            server.url(),
            Want::interface([weather::USER_FEEDBACK_RECEIVED]),
        )
        .await
        .unwrap();
    let mut all = peer.subscribe_all().await.unwrap();
    // Far more than the connection's queue (1,024), none read meanwhile.
    let events = 3_000u64;
    for _ in 0..events {
        provider
            .node
            .publisher()
            .publish(weather::USER_FEEDBACK_RECEIVED, json!({"rating": 4}))
            .unwrap();
    }
    let mut seen = 0u64;
    let mut gaps = 0u64;
    let mut last = 0u64;
    while seen + gaps < events {
        match all.next().await.unwrap() {
            Notification::Event { event, id, .. } => {
                assert_eq!(event, weather::USER_FEEDBACK_RECEIVED);
                assert!(id > last, "out of order: {last} then {id}");
                last = id;
                seen += 1;
            }
            Notification::Gap { from, to, .. } => {
                assert!(from > last, "a gap over what was delivered");
                gaps += to - from + 1;
                last = to;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        seen + gaps,
        events,
        "every event delivered or reported lost"
    );
    assert!(
        gaps > 0,
        "3,000 unread events overflow a 1,024 queue: a gap was due"
    );
}

/// `quick_limits` with a receive buffer per stream of `bytes` (and the credit of a stream
/// opened by its first chunk within it).
fn stream_buffer(bytes: u64) -> concord_node::Limits {
    let mut limits = quick_limits();
    limits.streams.max_receive_buffer = bytes;
    limits.streams.initial_credit = limits.streams.initial_credit.min(bytes);
    limits
}

/// The talk action starts each direction with 48 000 bytes of credit; this requester
/// buffers 32 000 per stream. It refuses to connect for talk before anything is agreed,
/// naming the action, the credit and its buffer, instead of letting the provider send
/// 48 000 bytes to a side that holds 32 000; without talk it connects.
#[tokio::test]
async fn a_stream_credit_the_requester_cannot_hold_is_refused_before_negotiating() {
    let provider = weather_agent();
    let server = serve(&provider).await;
    let requester = build(Node::builder("Requester").limits(stream_buffer(32_000)));
    let refused = requester
        .node
        .connect_with(
            server.url(),
            Want::interface([weather::TALK, weather::GET_WEATHER]),
        )
        .await
        .expect_err("refused");
    let said = refused.to_string();
    assert!(
        said.contains("`talk`")
            && said.contains("48000")
            && said.contains("32000")
            && said.contains("max_receive_buffer"),
        "{refused:?}"
    );
    let peer = requester
        .node
        .connect_with(server.url(), Want::interface([weather::GET_WEATHER]))
        .await
        .unwrap();
    let answer = peer
        .call(
            weather::GET_WEATHER,
            json!({"question": "Weather in Oslo?", "interactionMode": "text"}),
        )
        .await
        .unwrap();
    assert!(answer.as_str().unwrap().contains("Oslo"), "{answer}");
}

/// A provider that buffers 32 000 bytes per stream cannot serve talk with 48 000 of
/// credit: its description would promise what it cannot hold. The builder refuses it,
/// naming the action, the field and the limit.
#[test]
fn a_provider_cannot_promise_a_credit_it_cannot_hold() {
    let dir = tempfile::tempdir().unwrap();
    let refused = weather::agent(Node::builder(weather::TITLE))
        .limits(stream_buffer(32_000))
        .data_dir(dir.path())
        .build()
        .expect_err("refused");
    let said = refused.to_string();
    assert!(
        said.contains("`talk`")
            && said.contains("stream.initialCredit")
            && said.contains("48000")
            && said.contains("max_receive_buffer"),
        "{said}"
    );
}

#[tokio::test]
async fn a_realtime_sender_counts_the_frames_it_dropped() {
    // A realtime stream whose action never reads: no credit comes back once its reader's
    // queue is full.
    let frame = 100usize;
    let deaf = concord_node::StreamSpec {
        content_type: "application/octet-stream".to_owned(),
        output_content_type: None,
        frame_bytes: frame as u32,
        initial_credit: 3 * frame as u64,
        realtime: true,
    };
    let provider = build(
        Node::builder("Deaf")
            .stream_action(
                concord_negotiate::ActionSpec {
                    name: "listen".to_owned(),
                    description: "Never reads.".to_owned(),
                    input: json!({"type": "object"}),
                    output: json!({"type": "object"}),
                },
                deaf,
                |_input: serde_json::Value, stream: concord_node::StreamIo| async move {
                    // Held, never read (a dropped reader would take and discard everything).
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
        .connect_with(server.url(), Want::interface(["listen"]))
        .await
        .unwrap();
    let (sender, _receiver) = peer.open_stream("listen", json!({})).await.unwrap();
    assert_eq!(sender.dropped(), (0, 0));
    // Far more than the credit and the provider's reader queue (64 pieces) hold.
    let mut dropped = 0u64;
    for _ in 0..200 {
        match sender.send(vec![7u8; frame]).await.unwrap() {
            0 => dropped += 1,
            went => assert_eq!(went, frame),
        }
    }
    assert!(dropped > 0, "nothing was dropped");
    assert_eq!(sender.dropped(), (dropped, dropped * frame as u64));
    sender.abort();
}
