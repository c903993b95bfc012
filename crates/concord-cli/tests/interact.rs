//! The interface commands against the seed's WeatherAgent served in this process:
//! `concord call` on a long-running and a fire-and-forget action, `concord subscribe`
//! (replay with --from, and a reconnect that resumes after the provider restarts),
//! `concord stream` (the talk stream halves every sample), `concord read` and `write`;
//! and, against a provider that requires authentication, the same identity flags as
//! `concord call` (`--did-host`) on the interface commands.

mod support;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use concord_fixtures::weather::{self, VOICE_FRAME_BYTES};
use concord_node::{
    Authentication, Node, ProgressReporter, Property, Security, Server, StreamIo, StreamSpec,
};
use serde_json::{json, Value};
use support::*;
use tempfile::TempDir;

/// A writable, observable property of the served agent (the WeatherAgent has none).
const VOLUME: &str = "volume";
/// A long-running action of the served agent that runs for a minute (the forecast is over
/// in a fraction of a second): to be cancelled.
const RENDER: &str = "render";
/// A realtime stream action of the served agent that ends its half at once and reads none
/// of ours for 9 s: its credit runs out once its reader's queue is full.
const DEAF: &str = "deaf";
/// The frames of [`DEAF`]: as large as a chunk allows, so its reader's queue holds few.
const DEAF_FRAME: usize = 60_000;

/// The WeatherAgent with [`VOLUME`], its store in `store`, its callers authenticated as
/// `authentication` says (their DIDs on localhost resolved over plain HTTP).
fn weather_node(store: &TempDir, authentication: Authentication) -> Node {
    let mut security = Security {
        authentication,
        ..Security::default()
    };
    security.resolver.allow_loopback_http = true;
    let node = weather::agent(Node::builder(weather::TITLE))
        .property(
            VOLUME,
            Property::new(
                json!({"type": "integer", "minimum": 0, "maximum": 10}),
                json!(5),
            )
            .writable()
            .observable(),
        )
        .progress_action(
            concord_negotiate::ActionSpec {
                name: RENDER.to_owned(),
                description: "Renders for a minute, reporting progress.".to_owned(),
                input: json!({"type": "object"}),
                output: json!({"type": "object"}),
            },
            |_input: Value, progress: ProgressReporter| async move {
                for step in 1..=600u32 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    progress.report(f64::from(step) / 600.0, None);
                }
                Ok(json!({"frames": 600}))
            },
        )
        .stream_action(
            concord_negotiate::ActionSpec {
                name: DEAF.to_owned(),
                description: "Takes a realtime stream and never reads it.".to_owned(),
                input: json!({"type": "object"}),
                output: json!({"type": "object"}),
            },
            StreamSpec {
                content_type: "application/octet-stream".to_owned(),
                output_content_type: None,
                frame_bytes: DEAF_FRAME as u32,
                initial_credit: DEAF_FRAME as u64,
                realtime: true,
            },
            |_input: Value, stream: StreamIo| async move {
                let StreamIo {
                    sender, receiver, ..
                } = stream;
                let _ = sender.finish().await;
                // Held, never read, for longer than a caller waits for credit for a frame
                // (5 s); then dropped (the rest of the input is taken and discarded).
                tokio::time::sleep(Duration::from_secs(9)).await;
                drop(receiver);
                Ok(json!({}))
            },
        )
        .data_dir(store.path())
        .security(security)
        .build()
        .unwrap();
    node
}

/// The WeatherAgent (and [`VOLUME`]) served on 127.0.0.1:0, and a data directory for the
/// commands.
struct Weather {
    runtime: tokio::runtime::Runtime,
    node: Node,
    server: Option<Server>,
    url: String,
    authentication: Authentication,
    _store: TempDir,
    requester: TempDir,
}

impl Weather {
    fn start() -> Self {
        Weather::start_with(Authentication::Optional)
    }

    /// [`Weather::start`] with its callers authenticated as `authentication` says.
    fn start_with(authentication: Authentication) -> Self {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let store = tempfile::tempdir().unwrap();
        let node = weather_node(&store, authentication);
        let server = runtime.block_on(node.serve("127.0.0.1:0")).unwrap();
        let url = server.url().to_owned();
        Weather {
            runtime,
            node,
            server: Some(server),
            url,
            authentication,
            _store: store,
            requester: tempfile::tempdir().unwrap(),
        }
    }

    /// `concord <command> URL <args> --data-dir <the requester's>`.
    fn command(&self, command: &str, args: &[&str]) -> assert_cmd::Command {
        assert_cmd::Command::from_std(self.process(command, args))
    }

    /// As [`Weather::command`], as a process to spawn.
    fn process(&self, command: &str, args: &[&str]) -> std::process::Command {
        self.process_in(command, args, self.requester.path())
    }

    /// `concord <command> URL <args> --data-dir <data_dir>`, as a process to spawn.
    fn process_in(
        &self,
        command: &str,
        args: &[&str],
        data_dir: &std::path::Path,
    ) -> std::process::Command {
        let mut concord = process();
        concord
            .arg(command)
            .arg(&self.url)
            .args(args)
            .arg("--data-dir")
            .arg(data_dir);
        concord
    }

    /// `concord <command> URL <args>` signed as `signer` (its data directory, `--did-host`),
    /// or with its data directory alone when `signed` is false.
    fn run_as(&self, signer: &Signer, signed: bool, command: &str, args: &[&str]) -> Output {
        let mut concord = self.process_in(command, args, signer.data_dir.path());
        if signed {
            concord.args(signer.args());
        }
        run(&mut assert_cmd::Command::from_std(concord))
    }

    fn run(&self, command: &str, args: &[&str]) -> Output {
        run(&mut self.command(command, args))
    }

    fn publish(&self, data: Value) -> u64 {
        self.node
            .publisher()
            .publish(weather::USER_FEEDBACK_RECEIVED, data)
            .unwrap()
    }

    /// Stops the server (its sessions close), calls `while_down`, then serves the same
    /// node on the same port (`fresh`: a new node, as a restarted process, whose events
    /// are numbered above the old one's).
    fn restart(&mut self, fresh: bool, while_down: impl FnOnce(&Self)) {
        let node = fresh.then(|| self.fresh_node());
        self.restart_as(node, while_down);
    }

    /// A new node on the same store, as a restarted process (its events numbered from the
    /// clock now).
    fn fresh_node(&self) -> Node {
        weather_node(&self._store, self.authentication)
    }

    /// [`Weather::restart`] serving `node` (when given) instead of the same node.
    fn restart_as(&mut self, node: Option<Node>, while_down: impl FnOnce(&Self)) {
        let server = self.server.take().unwrap();
        let address = server.local_addr();
        self.runtime
            .block_on(server.shutdown_within(Duration::ZERO))
            .unwrap();
        if let Some(node) = node {
            self.node = node;
        }
        while_down(self);
        let server = self
            .runtime
            .block_on(self.node.serve(&address.to_string()))
            .unwrap();
        self.server = Some(server);
    }
}

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

#[test]
fn a_long_running_call_prints_one_json_line_per_update() {
    let weather = Weather::start();
    let output = weather.run(
        "call",
        &[
            weather::FORECAST_REPORT,
            r#"{"city": "Oslo", "days": 3}"#,
            "--json",
        ],
    );
    assert_eq!(output.code, 0, "{}{}", output.stdout, output.stderr);
    let lines = json_lines(&output.stdout);
    assert_eq!(lines[0]["type"], "started", "{lines:#?}");
    assert!(lines[0]["actionId"].is_string(), "{lines:#?}");
    let progress: Vec<f64> = lines
        .iter()
        .filter(|line| line["type"] == "progress")
        .map(|line| line["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(progress.len(), 3, "{lines:#?}");
    assert!(
        progress.windows(2).all(|pair| pair[0] <= pair[1]),
        "{progress:?}"
    );
    assert_eq!(progress.last(), Some(&1.0));
    assert_eq!(lines[1]["partial"], json!({"daysDone": 1}), "{lines:#?}");
    let done = lines.last().unwrap();
    assert_eq!(done["type"], "done", "{lines:#?}");
    assert_eq!(done["output"]["city"], "Oslo");
    assert_eq!(done["output"]["days"].as_array().unwrap().len(), 3);

    // Not on a terminal and without --json: the output alone, as a reply action's.
    let plain = weather.run("call", &[weather::FORECAST_REPORT, r#"{"city": "Rome"}"#]);
    assert_eq!(plain.code, 0, "{}{}", plain.stdout, plain.stderr);
    assert_eq!(plain.json()["city"], "Rome");

    // The input the schema refuses is refused before it is sent: a failed line, exit 1.
    let refused = weather.run(
        "call",
        &[weather::FORECAST_REPORT, r#"{"city": "Oslo", "days": 99}"#],
    );
    assert_eq!(refused.code, 1, "{}{}", refused.stdout, refused.stderr);
    assert!(
        refused.stderr.starts_with("concord: forecastReport: "),
        "{}",
        refused.stderr
    );
}

#[test]
fn a_fire_and_forget_call_prints_sent_and_a_reply_call_is_unchanged() {
    let weather = Weather::start();
    let sent = weather.run(
        "call",
        &[weather::LOG_FEEDBACK, r#"{"rating": 4, "comment": "ok"}"#],
    );
    assert_eq!(sent.code, 0, "{}{}", sent.stdout, sent.stderr);
    assert_eq!(sent.stdout, "sent\n");
    let replied = weather.run(
        "call",
        &[
            weather::GET_WEATHER,
            r#"{"question": "Weather in Lisbon?", "interactionMode": "text"}"#,
            "--json",
        ],
    );
    assert_eq!(replied.code, 0, "{}{}", replied.stdout, replied.stderr);
    let replied = replied.json();
    assert!(replied["output"].as_str().unwrap().contains("Lisbon"));
    assert_eq!(replied["action"], weather::GET_WEATHER);
    let stream = weather.run("call", &[weather::TALK, "{}"]);
    stream.fails(1, "concord stream");
}

#[test]
fn a_whole_interface_over_our_candidate_limit_falls_back_to_what_the_command_uses() {
    // An agent whose whole interface makes a document over the requester's candidate
    // limit (64 KiB): twelve actions, each with an input of 300 long enum words; `ping`
    // alone makes a small one. Its property makes it an interface agent, whose
    // request-reply actions `concord call` reaches over its whole interface.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let store = tempfile::tempdir().unwrap();
    let words: Vec<String> = (0..300)
        .map(|i| format!("enumerated-value-{i:06}"))
        .collect();
    let mut builder = Node::builder("Bulky agent")
        .property(
            "level",
            Property::new(json!({"type": "integer"}), json!(1)).observable(),
        )
        .action(
            concord_negotiate::ActionSpec {
                name: "ping".to_owned(),
                description: "Answers pong.".to_owned(),
                input: json!({"type": "object"}),
                output: json!({"type": "object", "properties": {"pong": {"type": "boolean"}}}),
            },
            |_input: Value| async move { Ok(json!({"pong": true})) },
        );
    for bulky in 0..12 {
        builder = builder.action(
            concord_negotiate::ActionSpec {
                name: format!("bulky{bulky}"),
                description: "Takes one of many words.".to_owned(),
                input: json!({
                    "type": "object",
                    "properties": {"word": {"type": "string", "enum": words}},
                    "required": ["word"]
                }),
                output: json!({"type": "object"}),
            },
            |_input: Value| async move { Ok(json!({})) },
        );
    }
    let node = builder.data_dir(store.path()).build().unwrap();
    let server = runtime.block_on(node.serve("127.0.0.1:0")).unwrap();
    let requester = tempfile::tempdir().unwrap();
    let called = run(concord()
        .args(["call", server.url(), "ping", "{}", "--json", "--data-dir"])
        .arg(requester.path()));
    assert_eq!(called.code, 0, "{}{}", called.stdout, called.stderr);
    assert_eq!(
        called.json()["output"],
        json!({"pong": true}),
        "{}",
        called.stdout
    );
    runtime.block_on(server.shutdown()).unwrap();
}

#[test]
fn every_notification_reported_sent_reached_the_provider() {
    let weather = Weather::start();
    let calls = 12u64;
    for rating in 0..calls {
        let input = json!({"rating": rating % 5 + 1, "comment": format!("call {rating}")});
        let sent = weather.run("call", &[weather::LOG_FEEDBACK, &input.to_string()]);
        assert_eq!(sent.code, 0, "{}{}", sent.stdout, sent.stderr);
        assert_eq!(sent.stdout, "sent\n");
    }
    // Every one of them was published by the provider, in order (a subscription from the
    // start replays them; one that never arrived leaves `next_line` waiting, then failing).
    let (lines, mut child) = subscribe_from_the_start(&weather, calls as u32);
    for rating in 0..calls {
        let line = next_line(&lines, &mut child);
        assert_eq!(line["data"]["comment"], format!("call {rating}"), "{line}");
    }
    assert!(child.wait().unwrap().success());
}

#[test]
fn every_command_against_one_agent_leaves_one_protocol_in_the_callers_store() {
    let weather = Weather::start();
    weather.publish(json!({"rating": 2}));
    let question = r#"{"question": "Weather in Lisbon?", "interactionMode": "text"}"#;
    let audio: Vec<u8> = (0..10 * VOICE_FRAME_BYTES)
        .map(|i| (i % 251) as u8)
        .collect();
    let commands: [(&str, Vec<&str>); 8] = [
        ("call", vec![weather::GET_WEATHER, question]),
        (
            "call",
            vec![weather::FORECAST_REPORT, r#"{"city": "Oslo", "days": 2}"#],
        ),
        ("call", vec![weather::LOG_FEEDBACK, r#"{"rating": 5}"#]),
        ("read", vec![weather::MODEL_CONFIGURATION]),
        ("write", vec![VOLUME, "6"]),
        (
            "subscribe",
            vec![
                weather::USER_FEEDBACK_RECEIVED,
                "--from",
                "0",
                "--count",
                "1",
            ],
        ),
        ("stream", vec![weather::TALK]),
        ("call", vec![weather::GET_WEATHER, question, "--json"]),
    ];
    for (command, args) in &commands {
        let output = weather
            .command(command, args)
            .write_stdin(audio.clone())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{command} {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let listed = run(concord()
        .args(["protocols", "list", "--json", "--data-dir"])
        .arg(weather.requester.path()))
    .json();
    let protocols = listed.as_array().unwrap();
    assert_eq!(protocols.len(), 1, "{listed:#}");
    // Negotiated by the first command, resumed by 0-RTT by every later one.
    assert_eq!(protocols[0]["resumed"], commands.len() - 1, "{listed:#}");
    // A reply call over the whole interface still reports how it was settled.
    let last = weather
        .run("call", &[weather::GET_WEATHER, question, "--json"])
        .json();
    assert_eq!(last["settledBy"], "resumed", "{last:#}");
    assert_eq!(last["action"], weather::GET_WEATHER, "{last:#}");
    assert!(
        last["output"].as_str().unwrap().contains("Lisbon"),
        "{last:#}"
    );
}

#[test]
fn a_long_running_action_is_cancelled_by_its_id_or_by_ctrl_c() {
    let weather = Weather::start();
    let status_of = |id: &str| {
        let status = weather.run("status", &[id]);
        assert_eq!(status.code, 0, "{}{}", status.stdout, status.stderr);
        status.json()["status"].as_str().unwrap().to_owned()
    };

    // `concord status` and `concord cancel` take the id `concord call` showed.
    let (lines, mut child) = spawn_lines(weather.process("call", &[RENDER, "{}", "--json"]));
    let started = next_line(&lines, &mut child);
    assert_eq!(started["type"], "started", "{started}");
    let id = started["actionId"].as_str().unwrap().to_owned();
    assert!(
        ["pending", "running"].contains(&status_of(&id).as_str()),
        "{id}"
    );
    let cancelled = weather.run("cancel", &[&id]);
    assert_eq!(
        cancelled.code, 0,
        "{}{}",
        cancelled.stdout, cancelled.stderr
    );
    assert_eq!(status_of(&id), "cancelled");
    // Its caller hears the cancellation as the action's end, and exits.
    let caller = child.wait_with_output().unwrap();
    assert_eq!(caller.status.code(), Some(1), "{caller:?}");
    // Cancelled already: the peer says no (409), exit 1; an id it never gave: exit 1.
    weather.run("cancel", &[&id]).fails(1, &id);
    let unknown = "0".repeat(32);
    weather.run("status", &[&unknown]).fails(1, &unknown);

    // Ctrl-C during the call cancels the action before exiting 130, and says so.
    let (lines, mut child) = spawn_lines(weather.process("call", &[RENDER, "{}", "--json"]));
    let id = next_line(&lines, &mut child)["actionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let killed = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let interrupted = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&interrupted.stderr);
    assert_eq!(interrupted.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains(&format!("cancelled (action {id})")),
        "{stderr}"
    );
    assert_eq!(status_of(&id), "cancelled");
}

#[test]
fn a_realtime_stream_says_how_many_frames_this_side_dropped() {
    let weather = Weather::start();
    // Forty frames; the peer's credit and its reader's queue (1 MiB) hold about 19: the
    // next finds no credit within 5 s and is dropped, and counted (the ones after it go
    // once the action let go of its reader).
    let input = vec![3u8; 40 * DEAF_FRAME];
    let output = weather
        .command("stream", &[DEAF])
        .write_stdin(input)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("frame(s)") && stderr.contains("dropped by this side"),
        "{stderr}"
    );
    // One line of prose: no run of spaces where a line continuation was lost.
    assert!(
        stderr.contains("dropped by this side: the peer's credit"),
        "{stderr}"
    );
    let dropped: u64 = stderr
        .split("deaf: ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("no count: {stderr}"));
    assert!((1..=40).contains(&dropped), "{stderr}");
    assert!(
        stderr.contains(&format!("({} bytes)", dropped * DEAF_FRAME as u64)),
        "{stderr}"
    );
}

#[test]
fn read_and_write_a_property() {
    let weather = Weather::start();
    let read = weather.run("read", &[weather::MODEL_CONFIGURATION]);
    assert_eq!(read.code, 0, "{}{}", read.stdout, read.stderr);
    assert_eq!(read.json(), weather::model_configuration());

    let written = weather.run("write", &[VOLUME, "7"]);
    assert_eq!(written.code, 0, "{}{}", written.stdout, written.stderr);
    assert_eq!(written.stdout, "");
    assert_eq!(weather.node.publisher().property(VOLUME), Some(json!(7)));
    assert_eq!(weather.run("read", &[VOLUME]).json(), json!(7));
    let from_stdin = run(weather.command("write", &[VOLUME, "-"]).write_stdin("3\n"));
    assert_eq!(from_stdin.code, 0, "{}", from_stdin.stderr);
    assert_eq!(weather.node.publisher().property(VOLUME), Some(json!(3)));

    weather.run("write", &[VOLUME, "99"]).fails(1, VOLUME);
    weather
        .run("write", &[VOLUME, "loud"])
        .fails(1, "not valid JSON");
    weather
        .run(
            "write",
            &[weather::MODEL_CONFIGURATION, r#"{"modelName": "x"}"#],
        )
        .fails(1, "read-only");
    let unknown = weather.run("read", &["nothing"]);
    assert_eq!(unknown.code, 1, "{}{}", unknown.stdout, unknown.stderr);
    assert!(unknown.stderr.contains("nothing"), "{}", unknown.stderr);
    assert_eq!(weather.node.publisher().property(VOLUME), Some(json!(3)));
}

#[test]
fn a_name_is_looked_up_among_its_kind_and_another_kind_is_named() {
    let weather = Weather::start();
    let unknown = weather.run("read", &["nothing"]);
    assert_eq!(unknown.code, 1, "{}{}", unknown.stdout, unknown.stderr);
    assert!(
        unknown.stderr.contains("no property `nothing`"),
        "{}",
        unknown.stderr
    );
    // Only the properties are listed.
    assert!(
        unknown.stderr.contains(weather::MODEL_CONFIGURATION) && unknown.stderr.contains(VOLUME),
        "{}",
        unknown.stderr
    );
    for other in [weather::GET_WEATHER, weather::USER_FEEDBACK_RECEIVED] {
        assert!(!unknown.stderr.contains(other), "{}", unknown.stderr);
    }
    for (command, args, expected) in [
        (
            "read",
            vec![weather::GET_WEATHER],
            "`getWeather` is an action, not a property",
        ),
        (
            "write",
            vec![weather::USER_FEEDBACK_RECEIVED, "1"],
            "is an event, not a property",
        ),
        (
            "subscribe",
            vec![weather::FORECAST_REPORT],
            "is an action, not an event",
        ),
        (
            "call",
            vec![VOLUME, "{}"],
            "`volume` is a property, not an action",
        ),
        (
            "stream",
            vec![weather::USER_FEEDBACK_RECEIVED],
            "is an event, not an action",
        ),
    ] {
        let output = run(weather.command(command, &args).write_stdin(""));
        assert_eq!(output.code, 1, "{command}: {}", output.stderr);
        assert!(
            output.stderr.contains(expected),
            "{command}: {}",
            output.stderr
        );
    }
    // A read-only property: said so, in our words, not the library's.
    let read_only = weather.run(
        "write",
        &[weather::MODEL_CONFIGURATION, r#"{"modelName": "x"}"#],
    );
    assert_eq!(read_only.code, 1, "{}", read_only.stderr);
    assert!(
        read_only
            .stderr
            .contains("property `modelConfiguration` is read-only"),
        "{}",
        read_only.stderr
    );
    assert!(
        !read_only
            .stderr
            .contains("not available on this connection"),
        "{}",
        read_only.stderr
    );
}

#[test]
fn subscribe_replays_from_an_id_and_observes_a_property() {
    let weather = Weather::start();
    let ids: Vec<u64> = (1..=3)
        .map(|rating| weather.publish(json!({"rating": rating})))
        .collect();
    let from = ids[0].to_string();
    let output = weather.run(
        "subscribe",
        &[
            weather::USER_FEEDBACK_RECEIVED,
            "--from",
            &from,
            "--count",
            "2",
        ],
    );
    assert_eq!(output.code, 0, "{}{}", output.stdout, output.stderr);
    assert_eq!(
        json_lines(&output.stdout),
        vec![
            json!({"event": weather::USER_FEEDBACK_RECEIVED, "id": ids[1], "data": {"rating": 2}}),
            json!({"event": weather::USER_FEEDBACK_RECEIVED, "id": ids[2], "data": {"rating": 3}}),
        ]
    );

    // A property by name (the description has no event of that name): its changes.
    let (lines, child) = spawn_lines(weather.process("subscribe", &[VOLUME, "--count", "1"]));
    let changed = publish_until_a_line(&lines, || {
        let _ = weather.node.publisher().set_property(VOLUME, json!(9));
    });
    assert_eq!(changed["property"], VOLUME, "{changed}");
    assert_eq!(changed["value"], 9);
    assert!(child.wait_with_output().unwrap().status.success());

    weather
        .run("subscribe", &["noSuchEvent"])
        .fails(1, "noSuchEvent");
}

#[test]
fn subscribe_reconnects_and_resumes_after_the_provider_restarts() {
    let mut weather = Weather::start();
    let first_id = weather.publish(json!({"rating": 1}));
    let (lines, mut child) = subscribe_from_the_start(&weather, 3);
    let first = next_line(&lines, &mut child);
    assert_eq!(first["id"], first_id, "{first}");
    // Published while the provider is down: the resumed subscription replays it.
    weather.restart(false, |down| {
        down.publish(json!({"rating": 2}));
    });
    let second = next_line(&lines, &mut child);
    assert_eq!(second["id"], first_id + 1, "{second}");
    assert_eq!(second["data"]["rating"], 2);
    weather.publish(json!({"rating": 3}));
    let third = next_line(&lines, &mut child);
    assert_eq!(third["id"], first_id + 2, "{third}");
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("resuming after id {first_id}")),
        "{stderr}"
    );
    assert!(stderr.contains("reconnected (0-RTT resume"), "{stderr}");
}

#[test]
fn subscribe_follows_a_restarted_provider_from_its_first_event() {
    let mut weather = Weather::start();
    let first_id = weather.publish(json!({"rating": 1}));
    weather.publish(json!({"rating": 2}));
    let (lines, mut child) = subscribe_from_the_start(&weather, 4);
    let first = next_line(&lines, &mut child);
    assert_eq!(first["id"], first_id, "{first}");
    let second = next_line(&lines, &mut child);
    assert_eq!(second["id"], first_id + 1, "{second}");
    // A new process numbers its events above the old one's (from the clock): what the
    // old one published after our last seen id is gone, and we are told so.
    let mut restarted = 0;
    weather.restart(true, |down| {
        restarted = down.publish(json!({"rating": 5}));
    });
    assert!(restarted > first_id + 1);
    let third = next_line(&lines, &mut child);
    assert_eq!(
        third["gap"],
        json!({"event": weather::USER_FEEDBACK_RECEIVED, "from": first_id + 2, "to": restarted - 1}),
        "{third}"
    );
    let fourth = next_line(&lines, &mut child);
    assert_eq!(fourth["id"], restarted, "{fourth}");
    assert_eq!(fourth["data"]["rating"], 5);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(output.status.success(), "{stderr}");
}

#[test]
fn subscribe_follows_a_provider_whose_numbering_went_back_afresh() {
    let mut weather = Weather::start();
    // Built now, it numbers its events below those of a node built later: a provider whose
    // clock was stepped back.
    let earlier = weather.fresh_node();
    std::thread::sleep(Duration::from_millis(2));
    weather.restart(true, |_| {});
    let later_id = weather.publish(json!({"rating": 1}));
    let (lines, mut child) = subscribe_from_the_start(&weather, 2);
    let first = next_line(&lines, &mut child);
    assert_eq!(first["id"], later_id, "{first}");
    // Resuming after `later_id` is refused (409: ahead of the latest id): followed afresh.
    weather.restart_as(Some(earlier), |_| {});
    let second = publish_until_a_line(&lines, || {
        weather.publish(json!({"rating": 2}));
    });
    let second_id = second["id"].as_u64().unwrap_or_else(|| panic!("{second}"));
    assert!(second_id < later_id, "{second}");
    assert_eq!(second["data"]["rating"], 2);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("went back (it never reached id {later_id})")),
        "{stderr}"
    );
    assert!(
        stderr.contains("following from its current position"),
        "{stderr}"
    );
}

#[test]
fn stream_pipes_standard_input_through_the_talk_stream() {
    let weather = Weather::start();
    // Three seconds of audio: more than the initial credit, and a short last frame.
    let audio: Vec<u8> = (0..150 * VOICE_FRAME_BYTES + 100)
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    let output = weather
        .command(
            "stream",
            &[weather::TALK, "--input", r#"{"voice": "alloy"}"#],
        )
        .write_stdin(audio.clone())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let expected: Vec<u8> = audio
        .chunks(VOICE_FRAME_BYTES)
        .flat_map(weather::halve_volume)
        .collect();
    assert_eq!(output.stdout.len(), expected.len());
    assert!(
        output.stdout == expected,
        "the bytes back are not the halved input"
    );

    weather
        .run("stream", &[weather::GET_WEATHER])
        .fails(1, "not a stream action");
}

#[test]
fn the_interface_commands_sign_as_call_does_for_a_provider_that_requires_it() {
    let weather = Weather::start_with(Authentication::Required);
    let signer = Signer::start();
    let question = r#"{"question": "Weather in Lisbon?", "interactionMode": "text"}"#;
    let first_id = weather.publish(json!({"rating": 4}));
    let subscribe = [
        weather::USER_FEEDBACK_RECEIVED,
        "--from",
        "0",
        "--count",
        "1",
    ];

    // Anonymous: every command is refused (HTTP 401) with `concord call`'s exit code,
    // saying why in one line.
    let called = weather.run("call", &[weather::GET_WEATHER, question]);
    assert_eq!(called.code, 1, "{}{}", called.stdout, called.stderr);
    for (command, args) in [
        ("read", &[weather::MODEL_CONFIGURATION][..]),
        ("subscribe", &subscribe[..]),
        ("stream", &[weather::TALK][..]),
    ] {
        let refused = run(weather.command(command, args).write_stdin(""));
        assert_eq!(
            refused.code, called.code,
            "{command}: {}{}",
            refused.stdout, refused.stderr
        );
        assert_eq!(refused.stdout, "", "{command}");
        assert!(
            refused.stderr.contains("401") && refused.stderr.lines().count() == 1,
            "{command}: {}",
            refused.stderr
        );
    }
    // With an identity but no --did-host: anonymous too, said once, as `concord call` says.
    let unsigned = weather.run_as(&signer, false, "read", &[weather::MODEL_CONFIGURATION]);
    assert_eq!(unsigned.code, called.code, "{}", unsigned.stderr);
    assert_eq!(
        unsigned.stderr.matches("calling anonymously").count(),
        1,
        "{}",
        unsigned.stderr
    );

    // Signed with --did-host: answered, and nothing said about calling anonymously.
    let called = weather.run_as(&signer, true, "call", &[weather::GET_WEATHER, question]);
    assert_eq!(called.code, 0, "{}{}", called.stdout, called.stderr);
    let read = weather.run_as(&signer, true, "read", &[weather::MODEL_CONFIGURATION]);
    assert_eq!(read.code, 0, "{}{}", read.stdout, read.stderr);
    assert_eq!(read.json(), weather::model_configuration());
    assert_eq!(read.stderr, "");
    let written = weather.run_as(&signer, true, "write", &[VOLUME, "8"]);
    assert_eq!(written.code, 0, "{}{}", written.stdout, written.stderr);
    assert_eq!(weather.node.publisher().property(VOLUME), Some(json!(8)));
    let followed = weather.run_as(&signer, true, "subscribe", &subscribe);
    assert_eq!(followed.code, 0, "{}{}", followed.stdout, followed.stderr);
    assert_eq!(
        json_lines(&followed.stdout),
        vec![
            json!({"event": weather::USER_FEEDBACK_RECEIVED, "id": first_id, "data": {"rating": 4}})
        ]
    );
    // --signature needs --did-host, as `concord call`'s does.
    let unsigned_form = weather.run_as(
        &signer,
        false,
        "read",
        &[weather::MODEL_CONFIGURATION, "--signature", "didwba"],
    );
    assert_eq!(unsigned_form.code, 2, "{}", unsigned_form.stderr);
    assert!(
        unsigned_form.stderr.contains("--did-host"),
        "{}",
        unsigned_form.stderr
    );
}

#[test]
fn the_demo_shows_all_five_patterns_over_one_session() {
    let output = run(concord().args(["demo", "--calls", "10"]));
    assert_eq!(output.code, 0, "{}{}", output.stdout, output.stderr);
    for expected in [
        "Five interaction patterns over ONE interface session",
        "one negotiation: protocol ",
        "request-reply      getWeather",
        "progress           forecastReport",
        " 50% {\"daysDone\":2}",
        "fire-and-forget    logFeedback",
        "publish-subscribe  userFeedbackReceived",
        "readproperty modelConfiguration",
        "observeproperty: ",
        "stream             talk: 50 voice frames",
        "every sample checked, 0 dropped".trim_start_matches("every sample checked, "),
        "frame round trip p50 ",
        "0-RTT reconnect: resumed protocol",
        "published while away",
    ] {
        assert!(
            output.stdout.contains(expected),
            "{expected:?}:\n{}",
            output.stdout
        );
    }

    let json = run(concord().args(["demo", "--calls", "10", "--json"]));
    assert_eq!(json.code, 0, "{}{}", json.stdout, json.stderr);
    let patterns = &json.json()["patterns"];
    assert_eq!(patterns["negotiations"], 1, "{patterns:#}");
    assert_eq!(patterns["llmCalls"], 0, "{patterns:#}");
    assert_eq!(patterns["stream"]["matches"], true, "{patterns:#}");
    assert_eq!(patterns["stream"]["framesBack"], 50, "{patterns:#}");
    assert_eq!(patterns["reconnect"]["resumed"], true, "{patterns:#}");
    let last_seen = patterns["reconnect"]["lastSeen"].as_u64().unwrap();
    assert_eq!(
        patterns["reconnect"]["resumedEventId"],
        last_seen + 1,
        "{patterns:#}"
    );
    assert_eq!(
        patterns["hash"].as_str().unwrap().len(),
        patterns["hash"].as_str().unwrap().trim().len()
    );
}

/// `concord subscribe` to the feedback event from its first id, for `count` events,
/// reconnecting quickly: its JSON lines as they come.
fn subscribe_from_the_start(
    weather: &Weather,
    count: u32,
) -> (mpsc::Receiver<Value>, std::process::Child) {
    let count = count.to_string();
    spawn_lines(weather.process(
        "subscribe",
        &[
            weather::USER_FEEDBACK_RECEIVED,
            "--from",
            "0",
            "--count",
            &count,
            "--reconnect-delay",
            "50ms",
        ],
    ))
}

/// Spawns `command` with its standard output read as JSON lines by a thread.
fn spawn_lines(mut command: std::process::Command) -> (mpsc::Receiver<Value>, std::process::Child) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let Ok(value) = serde_json::from_str(&line) else {
                panic!("not a JSON line: {line}");
            };
            if lines.send(value).is_err() {
                return;
            }
        }
    });
    (receiver, child)
}

/// Calls `publish` every 100 ms until the first line arrives (the subscription starts
/// some time after the process does).
fn publish_until_a_line(lines: &mpsc::Receiver<Value>, publish: impl Fn()) -> Value {
    for _ in 0..300 {
        publish();
        if let Ok(line) = lines.recv_timeout(Duration::from_millis(100)) {
            return line;
        }
    }
    panic!("no line in 30 s");
}

/// The next JSON line within 30 s, or a panic with what the command said.
fn next_line(lines: &mpsc::Receiver<Value>, child: &mut std::process::Child) -> Value {
    match lines.recv_timeout(Duration::from_secs(30)) {
        Ok(line) => line,
        Err(error) => {
            let _ = child.kill();
            let mut stderr = String::new();
            if let Some(mut pipe) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
            }
            panic!("no line ({error}): {stderr}");
        }
    }
}
