//! `concord directory serve`: a real process on loopback with its SQLite store on disk,
//! driven over plain HTTP; killed with `kill -9` in the middle of writes and restarted,
//! every acknowledged write is still there; a wrong configuration key is refused by name.

mod support;

use std::ffi::OsStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use support::*;

/// A valid TD with this id.
fn td(id: &str) -> Value {
    json!({
        "@context": "https://www.w3.org/2022/wot/td/v1.1",
        "id": id,
        "title": "Lamp",
        "securityDefinitions": {"nosec_sc": {"scheme": "nosec"}},
        "security": "nosec_sc",
        "actions": {"toggle": {"forms": [{"href": "https://lamp.example.com/toggle"}]}}
    })
}

fn start(data_dir: &std::path::Path, listen: &str) -> Served {
    Served::directory(&[
        OsStr::new("--listen"),
        OsStr::new(listen),
        OsStr::new("--data-dir"),
        data_dir.as_os_str(),
    ])
}

/// tdd-things-create-known-td and the store's durability: writers keep registering TDs
/// while the directory is killed with SIGKILL; after a restart on the same data directory
/// every TD whose `PUT` was answered 201 is served, and the listing holds them all.
#[test]
fn every_acknowledged_write_survives_kill_9_of_directory_serve() {
    let data = tempfile::tempdir().unwrap();
    let served = start(data.path(), "127.0.0.1:0");
    let port = served.listening.port();
    let base = served.url.clone();
    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let writers: Vec<_> = (0..4)
        .map(|writer| {
            let (base, acknowledged) = (base.clone(), Arc::clone(&acknowledged));
            runtime.spawn(async move {
                let client = reqwest::Client::builder()
                    .timeout(Duration::from_secs(5))
                    .build()
                    .unwrap();
                for index in 0..10_000 {
                    let id = format!("urn:example:w{writer}-{index:05}");
                    let sent = client
                        .put(format!("{base}things/{id}"))
                        .header("content-type", "application/td+json")
                        .body(td(&id).to_string())
                        .send()
                        .await;
                    match sent {
                        Ok(response) if response.status().as_u16() == 201 => {
                            acknowledged.lock().unwrap().push(id);
                        }
                        // The server is gone: the writer stops.
                        _ => return,
                    }
                }
            })
        })
        .collect();
    // Kill it once some writes were acknowledged, in the middle of the others.
    for _ in 0..600 {
        if acknowledged.lock().unwrap().len() >= 40 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    served.kill9();
    runtime.block_on(async {
        for writer in writers {
            let _ = writer.await;
        }
    });
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(
        acknowledged.len() >= 40,
        "{} acknowledged",
        acknowledged.len()
    );

    let restarted = start(data.path(), &format!("127.0.0.1:{port}"));
    runtime.block_on(async {
        let client = reqwest::Client::new();
        for id in &acknowledged {
            let response = client
                .get(format!("{}things/{id}", restarted.url))
                .send()
                .await
                .unwrap();
            assert_eq!(
                response.status().as_u16(),
                200,
                "{id} was acknowledged, then lost"
            );
        }
        let listing: Value = serde_json::from_str(
            &client
                .get(format!("{}things?format=collection&limit=1", restarted.url))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap(),
        )
        .unwrap();
        let total = listing["total"].as_u64().unwrap();
        assert!(
            total >= acknowledged.len() as u64,
            "{total} listed, {} acknowledged",
            acknowledged.len()
        );
    });
}

#[test]
fn a_wrong_directory_key_is_refused_by_name() {
    let (_dir, path) = write_config("[directory]\nmax_entries = 0\n");
    run(concord()
        .args(["directory", "serve", "--config"])
        .arg(&path))
    .fails(1, "directory.max_entries");
    let (_dir, path) = write_config("[directory]\nmax_entrys = 3\n");
    run(concord()
        .args(["directory", "serve", "--config"])
        .arg(&path))
    .fails(1, "max_entrys");
}

/// `--tls-cert`/`--tls-key`: the directory serves `https://` itself, as `concord serve`
/// does with `node.tls`; a client trusting the CA registers and reads a TD.
#[test]
fn the_directory_serves_https_with_its_certificate() {
    let ca = concord_fixtures::tls::PrivateCa::for_localhost().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (chain, key) = (dir.path().join("chain.pem"), dir.path().join("key.pem"));
    std::fs::write(&chain, ca.chain_pem()).unwrap();
    std::fs::write(&key, ca.key_pem()).unwrap();
    let served = Served::directory(&[
        OsStr::new("--listen"),
        OsStr::new("127.0.0.1:0"),
        OsStr::new("--data-dir"),
        dir.path().join("data").as_os_str(),
        OsStr::new("--tls-cert"),
        chain.as_os_str(),
        OsStr::new("--tls-key"),
        key.as_os_str(),
    ]);
    assert!(served.url.starts_with("https://"), "{}", served.banner);
    let url = served.url.replace("127.0.0.1", "localhost");
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let client = reqwest::Client::builder()
                .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap())
                .build()
                .unwrap();
            let id = "urn:example:tls";
            let response = client
                .put(format!("{url}things/{id}"))
                .header("content-type", "application/td+json")
                .body(td(id).to_string())
                .send()
                .await
                .unwrap();
            assert_eq!(response.status().as_u16(), 201);
            let response = client
                .get(format!("{url}things/{id}"))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status().as_u16(), 200);
        });
}

/// `concord find --ca-cert` and a target looked up by id with `--ca-cert`: a directory on
/// `https://` with a private CA is read when its root is given, and not without it.
#[test]
fn find_and_a_target_by_id_trust_the_directory_private_ca_with_ca_cert() {
    let ca = concord_fixtures::tls::PrivateCa::for_localhost().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (chain, key, root) = (
        dir.path().join("chain.pem"),
        dir.path().join("key.pem"),
        dir.path().join("ca.pem"),
    );
    std::fs::write(&chain, ca.chain_pem()).unwrap();
    std::fs::write(&key, ca.key_pem()).unwrap();
    std::fs::write(&root, ca.pem()).unwrap();
    let served = Served::directory(&[
        OsStr::new("--listen"),
        OsStr::new("127.0.0.1:0"),
        OsStr::new("--data-dir"),
        dir.path().join("data").as_os_str(),
        OsStr::new("--tls-cert"),
        chain.as_os_str(),
        OsStr::new("--tls-key"),
        key.as_os_str(),
    ]);
    let url = served.url.replace("127.0.0.1", "localhost");
    let id = "urn:example:private-ca";
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let client = reqwest::Client::builder()
                .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap())
                .build()
                .unwrap();
            let response = client
                .put(format!("{url}things/{id}"))
                .header("content-type", "application/td+json")
                .body(td(id).to_string())
                .send()
                .await
                .unwrap();
            assert_eq!(response.status().as_u16(), 201);
        });
    let find = |extra: &[&OsStr]| {
        run(concord()
            .env_remove("CONCORD_DIRECTORY")
            .args(["find", "--json", "--directory", &url])
            .args(extra))
    };
    // Without the CA: the directory cannot be reached (exit 2).
    let untrusted = find(&[]);
    assert_eq!(untrusted.code, 2, "{untrusted:?}");
    let found = find(&[OsStr::new("--ca-cert"), root.as_os_str()]);
    assert_eq!(found.code, 0, "{found:?}");
    let json: Value = serde_json::from_str(&found.stdout).unwrap();
    assert_eq!(json[0]["id"], id, "{json:#}");
    // `concord call ID` looks the id up in the directory with the same --ca-cert: the
    // lookup reaches it (the TD has no `base`, which it says), and fails without it.
    let call = |extra: &[&OsStr]| {
        run(concord()
            .env_remove("CONCORD_DIRECTORY")
            .args(["call", id, "toggle", "{}", "--directory", &url])
            .args(extra))
    };
    let looked_up = call(&[OsStr::new("--ca-cert"), root.as_os_str()]);
    assert_eq!(looked_up.code, 1, "{looked_up:?}");
    assert!(
        looked_up.stderr.contains("has no http(s) `base`"),
        "{looked_up:?}"
    );
    let unreachable = call(&[]);
    assert_eq!(unreachable.code, 2, "{unreachable:?}");
}
