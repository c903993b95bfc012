//! `concord serve --config examples/weather/agent.toml`: the seed's WeatherAgent from a
//! configuration alone (a property, an event, and exec actions in every mode), called over
//! one interface session, and events posted in over raw HTTP with the ingest token.

mod support;

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Once;

use concord_node::{ActionUpdate, Node, Notification, Security, Want};
use serde_json::{json, Value};
use support::*;

/// The token the example's `${WEATHER_INGEST_TOKEN}` names, set once in this test binary's
/// environment (the served process inherits it).
const TOKEN: &str = "weather-test-token-7f3a";

fn weather_config() -> PathBuf {
    static SET: Once = Once::new();
    SET.call_once(|| std::env::set_var("WEATHER_INGEST_TOKEN", TOKEN));
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/weather/agent.toml")
}

fn serve_weather(data_dir: &std::path::Path) -> Served {
    Served::start(&[
        OsStr::new("--config"),
        weather_config().as_os_str(),
        OsStr::new("--listen"),
        OsStr::new("127.0.0.1:0"),
        OsStr::new("--data-dir"),
        data_dir.as_os_str(),
    ])
}

fn ops(affordance: &Value) -> Vec<&str> {
    affordance["forms"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|form| match &form["op"] {
            Value::String(op) => vec![op.as_str()],
            Value::Array(ops) => ops.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// A raw HTTP/1.1 POST, as any service would write it: the status and the body.
fn post(served: &Served, path: &str, token: Option<&str>, body: &[u8]) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(served.listening).unwrap();
    let auth = token.map_or(String::new(), |token| {
        format!("Authorization: Bearer {token}\r\n")
    });
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n{auth}\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        served.listening,
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    // A body over the limit may be refused before it is all sent.
    let _ = stream.write_all(body);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {answer:?}"));
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

#[test]
fn the_weather_configuration_describes_every_affordance() {
    let data = tempfile::tempdir().unwrap();
    let served = serve_weather(data.path());
    assert!(
        served.banner.contains(
            "serving \"WeatherAgent\": 4 action(s): getWeather, forecastReport, logFeedback, talk"
        ),
        "{}",
        served.banner
    );
    assert!(
        served.banner.contains("properties:  modelConfiguration")
            && served.banner.contains("events:      userFeedbackReceived")
            && served.banner.contains("events/{name}"),
        "{}",
        served.banner
    );
    assert!(!served.banner.contains(TOKEN), "the token is never printed");
    let td: Value = serde_json::from_str(&http_get(&served.description)).unwrap();

    let model = &td["properties"]["modelConfiguration"];
    assert_eq!(
        ops(model),
        // The WebSocket's forms, then the WoT HTTP binding's: read, then observe over
        // Server-Sent Events and by long poll.
        [
            "readproperty",
            "observeproperty",
            "unobserveproperty",
            "readproperty",
            "observeproperty",
            "unobserveproperty",
            "observeproperty",
            "unobserveproperty"
        ]
    );
    assert_eq!(model["readOnly"], true);
    assert_eq!(model["observable"], true);
    assert_eq!(model["properties"]["temperature"]["maximum"], 1, "{model}");

    let weather = &td["actions"]["getWeather"];
    assert_eq!(ops(weather), ["invokeaction", "invokeaction"]);
    assert_eq!(weather["synchronous"], true, "{weather}");
    let forecast = &td["actions"]["forecastReport"];
    assert_eq!(forecast["synchronous"], false, "{forecast}");
    // The node's default lease: the configuration sets none.
    assert_eq!(forecast["concord:actionLease"], 30, "{forecast}");
    assert_eq!(
        ops(forecast),
        [
            "invokeaction",
            "queryaction",
            "cancelaction",
            "invokeaction"
        ]
    );
    assert_eq!(td["actions"]["logFeedback"]["concord:mode"], "notify");
    let talk = &td["actions"]["talk"];
    assert_eq!(
        talk["concord:stream"],
        json!({
            "concord:contentType": "audio/pcm;rate=24000;channels=1",
            "concord:frameBytes": 960,
            "concord:initialCredit": 48000,
            "concord:realtime": true
        }),
        "{talk}"
    );
    let event = &td["events"]["userFeedbackReceived"];
    // The WebSocket's forms, then the HTTP binding's SSE and long-poll forms.
    assert_eq!(
        ops(event),
        [
            "subscribeevent",
            "unsubscribeevent",
            "subscribeevent",
            "unsubscribeevent",
            "subscribeevent",
            "unsubscribeevent"
        ]
    );
    assert_eq!(event["forms"][2]["subprotocol"], "sse", "{event}");
    assert_eq!(event["data"]["required"], json!(["rating"]), "{event}");
}

#[test]
fn events_are_posted_in_with_the_token_only() {
    let data = tempfile::tempdir().unwrap();
    let served = serve_weather(data.path());
    let path = "/events/userFeedbackReceived";
    let (status, body) = post(&served, path, Some(TOKEN), br#"{"rating": 4}"#);
    assert_eq!(status, 202, "{body}");
    let id: Value = serde_json::from_str(&body).unwrap();
    let first = id["id"].as_u64().unwrap_or_else(|| panic!("{id}"));

    let (status, body) = post(&served, path, None, br#"{"rating": 4}"#);
    assert_eq!(status, 401, "{body}");
    let (status, _) = post(&served, path, Some("weather-test-token-7f3b"), b"{}");
    assert_eq!(status, 401);
    let (status, body) = post(&served, "/events/rainStarted", Some(TOKEN), b"{}");
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("rainStarted"), "{body}");
    let (status, body) = post(&served, path, Some(TOKEN), br#"{"rating": 9}"#);
    assert_eq!(status, 400, "{body}");
    let (status, body) = post(&served, path, Some(TOKEN), b"rating: 4");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("not JSON"), "{body}");
    // Past the interaction layer's largest message (1 MiB).
    let comment = "x".repeat(1 << 21);
    let big = format!(r#"{{"rating": 4, "comment": "{comment}"}}"#);
    let (status, _) = post(&served, path, Some(TOKEN), big.as_bytes());
    assert_eq!(status, 413);
    // The next one follows the first: nothing refused was published.
    let (status, body) = post(&served, path, Some(TOKEN), br#"{"rating": 5}"#);
    assert_eq!(status, 202, "{body}");
    let next: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(next["id"], first + 1, "{body}");
}

#[test]
fn every_exec_mode_answers_over_one_interface_session() {
    let data = tempfile::tempdir().unwrap();
    let served = serve_weather(data.path());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let requester_dir = tempfile::tempdir().unwrap();
    runtime.block_on(async {
        // The served agent has a `localhost` DID: its document is fetched over http://.
        let mut security = Security::default();
        security.resolver.allow_loopback_http = true;
        let requester = Node::builder("Requester")
            .security(security)
            .data_dir(requester_dir.path())
            .build()
            .unwrap();
        let peer = requester
            .connect_with(
                &served.url,
                Want::interface([
                    "getWeather",
                    "forecastReport",
                    "logFeedback",
                    "talk",
                    "modelConfiguration",
                    "userFeedbackReceived",
                ]),
            )
            .await
            .unwrap();
        let answer = peer
            .call(
                "getWeather",
                json!({"question": "Weather in Lisbon?", "interactionMode": "text"}),
            )
            .await
            .unwrap();
        assert!(answer.as_str().unwrap().contains("Lisbon"), "{answer}");
        let model = peer.read_property("modelConfiguration").await.unwrap();
        assert_eq!(model["modelName"], "gpt-4o");

        // Progress lines, then the answer.
        let mut run = peer
            .call_with_progress("forecastReport", json!({"city": "Oslo", "days": 3}))
            .await
            .unwrap();
        let mut reports = Vec::new();
        let output = loop {
            match run.next().await.unwrap() {
                ActionUpdate::Progress { progress, .. } => reports.push(progress),
                ActionUpdate::Done(result) => break result.unwrap(),
                _ => {}
            }
        };
        assert!(!reports.is_empty(), "no progress reported");
        assert!(
            reports.windows(2).all(|pair| pair[0] <= pair[1]),
            "{reports:?}"
        );
        assert_eq!(output["days"].as_array().unwrap().len(), 3, "{output}");

        // An event line of a fire-and-forget action, then one posted in.
        let mut feedback = peer.subscribe("userFeedbackReceived", None).await.unwrap();
        peer.notify("logFeedback", json!({"rating": 5, "comment": "spot on"}))
            .await
            .unwrap();
        match feedback.next().await.unwrap() {
            Notification::Event { data, .. } => assert_eq!(data["comment"], "spot on"),
            other => panic!("{other:?}"),
        }
        let (status, body) = tokio::task::block_in_place(|| {
            post(
                &served,
                "/events/userFeedbackReceived",
                Some(TOKEN),
                br#"{"rating": 3, "comment": "posted in"}"#,
            )
        });
        assert_eq!(status, 202, "{body}");
        match feedback.next().await.unwrap() {
            Notification::Event { data, .. } => assert_eq!(data["comment"], "posted in"),
            other => panic!("{other:?}"),
        }

        // The stream: `cat` gives the frames back.
        let (sender, mut receiver) = peer.open_stream("talk", json!({})).await.unwrap();
        let frame: Vec<u8> = (0..960u32).map(|i| (i % 251) as u8).collect();
        for _ in 0..5 {
            assert_eq!(sender.send(frame.clone()).await.unwrap(), 960);
        }
        sender.finish().await.unwrap();
        let mut back = Vec::new();
        while let Some(bytes) = receiver.next().await {
            back.extend(bytes.unwrap());
        }
        assert_eq!(back.len(), 5 * 960);
        assert_eq!(&back[..960], &frame[..]);
    });
}

#[test]
fn the_new_keys_are_checked_by_file_and_key() {
    let base =
        "[agent]\ntitle = \"W\"\n\n[[actions]]\nname = \"a\"\ninput = { type = \"object\" }\n\
                output = { type = \"object\" }\nexec = { command = \"cat\" }\n";
    let cases = [
        (
            format!("{base}mode = \"sometimes\"\n"),
            "actions[0].mode: \"sometimes\" is not one of",
        ),
        (
            format!("{base}mode = \"stream\"\n"),
            "actions[0].stream: is missing",
        ),
        (
            format!("{base}[actions.stream]\ncontent_type = \"x\"\ninitial_credit = 10\n"),
            "actions[0].stream: only a stream action has one",
        ),
        (
            format!("{base}mode = \"stream\"\n[actions.stream]\ncontent_type = \"x\"\ninitial_credit = 10\nframe_bytes = 20\n"),
            "actions[0].stream.initial_credit: 10 is less than one frame",
        ),
        (
            format!("{base}mode = \"stream\"\n[actions.stream]\ncontent_type = \"x\"\ninitial_credit = 10\nlatency = 3\n"),
            "unknown field `latency`",
        ),
        (
            format!("{base}\n[[properties]]\nname = \"p\"\nschema = {{ type = \"integer\" }}\ninitial = \"x\"\n"),
            "properties[0].initial: its schema refuses it",
        ),
        (
            format!("{base}\n[[properties]]\nname = \"p\"\nschema = {{ type = \"integer\" }}\n"),
            "properties[0].initial: is missing",
        ),
        (
            format!("{base}\n[[properties]]\nname = \"p\"\ninitial = 1\n"),
            "properties[0]: give `schema`",
        ),
        (
            format!("{base}\n[[properties]]\nname = \"p\"\nschema = {{}}\nschema_file = \"p.json\"\ninitial = 1\n"),
            "properties[0]: give `schema` or `schema_file`, not both",
        ),
        (
            format!("{base}\n[[properties]]\nname = \"p\"\nschema = {{}}\ninitial = 1\nreadonly = true\n"),
            "unknown field `readonly`",
        ),
        (
            format!("{base}\n[[events]]\nname = \"a\"\ndata = {{}}\n"),
            "events[0].name: `a` is already an action",
        ),
        (
            format!("{base}\n[[events]]\nname = \"e\"\ndata_file = \"none.json\"\n"),
            "events[0].data_file: cannot read",
        ),
        (
            format!("[node]\nevent_ingest_token = \"${{CONCORD_TEST_NO_SUCH_VARIABLE}}\"\n{base}"),
            "node.event_ingest_token: the environment variable CONCORD_TEST_NO_SUCH_VARIABLE is not set",
        ),
        (
            format!("[node]\nevent_ingest_token = \"two words\"\n{base}"),
            "node.event_ingest_token: must be printable ASCII without spaces",
        ),
        (
            base.replace("exec = { command = \"cat\" }", "http = { url = \"http://127.0.0.1:9/\" }\nmode = \"progress\""),
            "actions[0].mode: an http backend serves the modes \"reply\" and \"notify\"",
        ),
        (
            format!("{base}\n[limits.interaction]\nmax_depth = 0\n"),
            "limits.interaction.max_depth: must be greater than zero",
        ),
        (
            format!("{base}\n[limits.interaction]\naction_lease = \"1500ms\"\n"),
            "limits.interaction.action_lease: must be a whole number of seconds up to a day, not 1.5 s",
        ),
        (
            format!("{base}\n[limits.interaction]\nlease = \"45s\"\n"),
            "unknown field `lease`",
        ),
        (
            format!("{base}\n[limits.streams]\nmax_send_queue = 0\n"),
            "limits.streams.max_send_queue: must be greater than zero",
        ),
        (
            format!("{base}\n[limits.streams]\nchunk = 1\n"),
            "unknown field `chunk`",
        ),
        (
            format!("{base}mode = \"stream\"\n[actions.stream]\ncontent_type = \"x\"\ninitial_credit = 2000000\n"),
            "actions[0].stream.initial_credit: 2000000 is more than limits.streams.max_receive_buffer (1048576) holds",
        ),
        (
            format!("{base}mode = \"stream\"\n[actions.stream]\ncontent_type = \"x\"\ninitial_credit = 200\n\
                     [limits.streams]\nmax_receive_buffer = 100\ninitial_credit = 100\n"),
            "actions[0].stream.initial_credit: 200 is more than limits.streams.max_receive_buffer (100) holds",
        ),
    ];
    for (text, expected) in cases {
        // Messages name the key in backquotes: `actions[0].mode`: …
        let expected = match expected.split_once(": ") {
            Some((key, message)) if !key.contains(' ') => format!("`{key}`: {message}"),
            _ => expected.to_owned(),
        };
        let expected = expected.as_str();
        let (_dir, path) = write_config(&text);
        let output = run(concord().arg("serve").arg("--config").arg(&path));
        output.fails(1, expected);
    }
}

/// `[limits.interaction]` and `[limits.streams]` reach the node: the description publishes
/// the configured lease, and a stream action may declare a credit only a larger receive
/// buffer holds.
#[test]
fn interaction_and_stream_limits_reach_the_node() {
    let (dir, path) = write_config(
        "[agent]\ntitle = \"Leases\"\n\n[node]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"data\"\n\n\
         [[actions]]\nname = \"forecastReport\"\nmode = \"progress\"\ninput = { type = \"object\" }\n\
         output = { type = \"object\" }\nexec = { command = \"cat\" }\n\n\
         [[actions]]\nname = \"talk\"\nmode = \"stream\"\ninput = {}\noutput = {}\n\
         exec = { command = \"cat\" }\n[actions.stream]\ncontent_type = \"audio/pcm\"\n\
         initial_credit = 2000000\n\n\
         [limits.interaction]\naction_lease = \"45s\"\n\n\
         [limits.streams]\nmax_receive_buffer = 4194304\n",
    );
    let served = Served::start(&[OsStr::new("--config"), path.as_os_str()]);
    let td: Value = serde_json::from_str(&http_get(&served.description)).unwrap();
    let forecast = &td["actions"]["forecastReport"];
    assert_eq!(forecast["concord:actionLease"], 45, "{forecast}");
    let talk = &td["actions"]["talk"];
    assert_eq!(
        talk["concord:stream"]["concord:initialCredit"], 2_000_000,
        "{talk}"
    );
    drop(served);
    drop(dir);
}
