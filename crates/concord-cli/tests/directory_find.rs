//! Agents registering with a real directory (the node's WoT Discovery directory, served
//! in-process on loopback) from `concord serve` with `[directory]`, and requesters finding
//! them: `concord find` (table and --json), `concord call urn:…` and `concord call --find`,
//! several matches refused without --first, the entry gone after a graceful shutdown. Also
//! the time from `concord serve`'s start to `concord find` seeing the agent (printed, not
//! asserted: machines are noisy).

mod support;

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use concord_directory::{DirectoryLimits, MemoryDirectoryStore};
use concord_node::{DirectoryService, Node, Server};
use serde_json::Value;
use support::*;

const SHOP: &str = "urn:uuid:3c5e7f90-1a2b-4c3d-8e4f-5a6b7c8d9e0f";
const OTHER_SHOP: &str = "urn:uuid:3c5e7f90-1a2b-4c3d-8e4f-5a6b7c8d9e1a";

/// A directory node on 127.0.0.1 on a runtime of its own, kept as long as the value.
struct LiveDirectory {
    server: Option<Server>,
    runtime: tokio::runtime::Runtime,
    _store: tempfile::TempDir,
}

impl LiveDirectory {
    fn start() -> Self {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let store = tempfile::tempdir().unwrap();
        let tdd = concord_directory::Directory::new(
            Arc::new(MemoryDirectoryStore::new()),
            DirectoryLimits::default(),
        )
        .unwrap();
        // Agents on loopback sign their registrations with localhost DIDs: resolved over
        // this machine's loopback (the test mode of `resolve_loopback_over_http`).
        let mut security = concord_node::Security::default();
        security.resolver.allow_loopback_http = true;
        let node = Node::builder("Directory")
            .directory(DirectoryService::new(tdd))
            .security(security)
            .data_dir(store.path())
            .build()
            .unwrap();
        let server = runtime.block_on(node.serve("127.0.0.1:0")).unwrap();
        Self {
            server: Some(server),
            runtime,
            _store: store,
        }
    }

    fn url(&self) -> String {
        self.server.as_ref().unwrap().url().to_owned()
    }
}

impl Drop for LiveDirectory {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            let _ = self.runtime.block_on(server.shutdown());
        }
    }
}

/// `concord serve` of the example shop with this id, registering with `directory`.
fn registered_shop(id: &str, directory: &str) -> (Served, tempfile::TempDir) {
    registered_shop_with(id, directory, "")
}

/// [`registered_shop`] with more `[directory]` keys.
fn registered_shop_with(id: &str, directory: &str, keys: &str) -> (Served, tempfile::TempDir) {
    let text = config_text(&format!(
        "[directory]\nurl = {directory:?}\nttl = \"30s\"\nfirst_retry = \"100ms\"\n{keys}\n"
    ))
    .replacen("[agent]\n", &format!("[agent]\nid = {id:?}\n"), 1);
    let (dir, config) = write_config(&text);
    (
        Served::start(&[OsStr::new("--config"), config.as_os_str()]),
        dir,
    )
}

fn find(directory: &str, args: &[&str]) -> Output {
    run(concord()
        .env_remove("CONCORD_DIRECTORY")
        .args(["find", "--directory", directory])
        .args(args))
}

#[test]
fn an_agent_registers_is_found_called_by_id_and_by_capability_and_leaves() {
    let directory = LiveDirectory::start();
    let url = directory.url();
    let started = Instant::now();
    let (shop, _shop_dir) = registered_shop(SHOP, &url);
    // The figure: from `concord serve`'s start to `concord find` seeing the agent.
    let findable = loop {
        let output = find(&url, &["--action", "getProductInfo", "--json"]);
        if output.code == 0 {
            break started.elapsed();
        }
        assert_eq!(output.code, 1, "{output:?}");
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never found: {output:?}\n{}",
            shop.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!("time from `concord serve` start to `concord find` seeing it: {findable:?}");
    assert!(shop.logged("registered"), "{}", shop.stderr());
    assert!(
        shop.banner.contains(&format!("directory:   {url}")),
        "{}",
        shop.banner
    );

    // The table: id, title, base URL, the affordances that matched.
    let table = find(&url, &["--action", "getProductInfo"]);
    assert_eq!(table.code, 0, "{table:?}");
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert!(lines[0].starts_with("id"), "{}", table.stdout);
    assert!(lines[0].contains("base") && lines[0].contains("matches"));
    assert_eq!(lines.len(), 2, "{}", table.stdout);
    for column in [
        SHOP,
        "Test shop",
        shop.url.as_str(),
        "action:getProductInfo",
    ] {
        assert!(lines[1].contains(column), "{column}: {}", table.stdout);
    }
    // --json: one object per agent, with its enriched description.
    let json: Value =
        serde_json::from_str(&find(&url, &["--field", "productId", "--json"]).stdout).unwrap();
    assert_eq!(json[0]["id"], SHOP);
    assert_eq!(json[0]["base"], shop.url.as_str());
    assert_eq!(json[0]["matches"][0]["name"], "getProductInfo");
    assert_eq!(json[0]["description"]["registration"]["ttl"], 30);
    // Every agent, and JSONPath.
    assert_eq!(find(&url, &[]).code, 0);
    let titles = find(&url, &["--jsonpath", "$[*].title"]);
    assert_eq!(titles.code, 0, "{titles:?}");
    assert!(titles.stdout.contains("Test shop"), "{}", titles.stdout);
    // Nothing matches: exit 1, saying so.
    let none = find(&url, &["--action", "noSuchAction"]);
    assert_eq!(none.code, 1, "{none:?}");
    assert!(none.stderr.contains("no agent"), "{}", none.stderr);

    // Called by its id, and by capability.
    let requester = tempfile::tempdir().unwrap();
    let by_id = call_product(
        SHOP,
        r#"{"productId": "P12345"}"#,
        requester.path(),
        &[
            OsStr::new("--json"),
            OsStr::new("--directory"),
            OsStr::new(&url),
        ],
    );
    assert_eq!(by_id.code, 0, "{by_id:?}");
    assert_eq!(by_id.json()["output"]["productName"], "Laptop");
    let found = run(concord()
        .env("CONCORD_DIRECTORY", &url)
        .args([
            "call",
            "--find",
            "action=getProductInfo&field=productId",
            "getProductInfo",
            r#"{"productId": "P12345"}"#,
            "--json",
            "--data-dir",
        ])
        .arg(requester.path()));
    assert_eq!(found.code, 0, "{found:?}");
    assert_eq!(found.json()["output"]["productName"], "Laptop");

    // Two shops: --find is refused, naming them, unless --first.
    let (other, _other_dir) = registered_shop(OTHER_SHOP, &url);
    assert!(other.logged("registered"), "{}", other.stderr());
    let several = run(concord()
        .env("CONCORD_DIRECTORY", &url)
        .args(["call", "--find", "getProductInfo", "getProductInfo"])
        .arg(r#"{"productId": "P12345"}"#)
        .arg("--data-dir")
        .arg(requester.path()));
    assert_eq!(several.code, 1, "{several:?}");
    assert!(
        several.stderr.contains("2 agents match") && several.stderr.contains("--first"),
        "{}",
        several.stderr
    );
    let first = run(concord()
        .env("CONCORD_DIRECTORY", &url)
        .args([
            "call",
            "--find",
            "getProductInfo",
            "--first",
            "getProductInfo",
        ])
        .arg(r#"{"productId": "P12345"}"#)
        .arg("--data-dir")
        .arg(requester.path()));
    assert_eq!(first.code, 0, "{first:?}");

    // A graceful shutdown deletes the entry: the other shop alone is found.
    let (code, stderr) = shop.interrupt();
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("deregistered"), "{stderr}");
    let json: Value =
        serde_json::from_str(&find(&url, &["--action", "getProductInfo", "--json"]).stdout)
            .unwrap();
    assert_eq!(json.as_array().map(Vec::len), Some(1), "{json:#}");
    assert_eq!(json[0]["id"], OTHER_SHOP);
    let gone = call_product(
        SHOP,
        "{}",
        requester.path(),
        &[OsStr::new("--directory"), OsStr::new(&url)],
    );
    assert_eq!(gone.code, 1, "{gone:?}");
    assert!(gone.stderr.contains("holds no agent"), "{}", gone.stderr);
}

/// A running `concord directory serve` on 127.0.0.1:0, killed when dropped.
struct DirectoryProcess {
    child: std::process::Child,
    url: String,
    _data: tempfile::TempDir,
}

impl DirectoryProcess {
    fn start() -> Self {
        Self::start_with(None, &[])
    }

    /// With this configuration file's text (if any) and these flags.
    fn start_with(config: Option<&str>, flags: &[&str]) -> Self {
        use std::io::BufRead;
        let data = tempfile::tempdir().unwrap();
        let mut command = process();
        command
            .args(["directory", "serve", "--listen", "127.0.0.1:0"])
            .args(flags)
            .arg("--data-dir")
            .arg(data.path().join("data"));
        if let Some(text) = config {
            let path = data.path().join("directory.toml");
            std::fs::write(&path, text).unwrap();
            command.arg("--config").arg(path);
        }
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = std::io::BufReader::new(stdout).lines();
        let listening = loop {
            let line = lines.next().expect("a listening line").unwrap();
            if let Some(addr) = line.strip_prefix("listening:") {
                break addr.trim().to_owned();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Self {
            child,
            url: format!("http://{listening}/"),
            _data: data,
        }
    }
}

impl Drop for DirectoryProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_agent_registers_with_concord_directory_serve() {
    let directory = DirectoryProcess::start();
    // Always signed (`sign = true`) with its localhost DID, which `concord directory serve`
    // (no loopback test mode) cannot resolve: refused with 401, and the agent says so and
    // stops trying.
    let (signed, _signed_dir) = registered_shop_with(OTHER_SHOP, &directory.url, "sign = true");
    assert!(signed.logged("not retrying"), "{}", signed.stderr());
    assert!(signed.stderr().contains("401"), "{}", signed.stderr());
    drop(signed);
    // Signed when it can (`sign = "auto"`, the default): the 401 to its signature is said,
    // and it registers unsigned; found, and gone after Ctrl-C.
    let started = Instant::now();
    let (shop, _shop_dir) = registered_shop(SHOP, &directory.url);
    let findable = loop {
        let output = find(&directory.url, &["--action", "getProductInfo", "--json"]);
        if output.code == 0 {
            break started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never found: {output:?}\n{}",
            shop.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!("concord directory serve: from `concord serve` start to `concord find` seeing it: {findable:?}");
    assert!(shop.logged("registering unsigned"), "{}", shop.stderr());
    let json: Value = serde_json::from_str(
        &find(
            &directory.url,
            &["--did", shop.did.as_deref().unwrap(), "--json"],
        )
        .stdout,
    )
    .unwrap();
    assert_eq!(json[0]["id"], SHOP, "{json:#}");
    let (code, stderr) = shop.interrupt();
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("deregistered"), "{stderr}");
    assert_eq!(
        find(&directory.url, &["--action", "getProductInfo"]).code,
        1
    );
}

#[test]
fn a_signed_agent_registers_with_concord_directory_serve_requiring_signatures() {
    // Agents on loopback have localhost DIDs: the directory resolves them over http://
    // in the test mode of its `[security]`.
    let directory = DirectoryProcess::start_with(
        Some("[security]\nresolve_loopback_over_http = true\n"),
        &["--require-signatures"],
    );
    // Unsigned (`sign = false`): refused with 401, and the agent says so and stops trying.
    let (unsigned, _unsigned_dir) =
        registered_shop_with(OTHER_SHOP, &directory.url, "sign = false");
    assert!(unsigned.logged("not retrying"), "{}", unsigned.stderr());
    assert!(unsigned.stderr().contains("401"), "{}", unsigned.stderr());
    drop(unsigned);
    // Signed with its localhost DID: registered and found by its DID.
    let (shop, _shop_dir) = registered_shop(SHOP, &directory.url);
    let started = Instant::now();
    let found = loop {
        let output = find(
            &directory.url,
            &["--did", shop.did.as_deref().unwrap(), "--json"],
        );
        if output.code == 0 {
            break output;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never found: {output:?}\n{}",
            shop.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let json: Value = serde_json::from_str(&found.stdout).unwrap();
    assert_eq!(json[0]["id"], SHOP, "{json:#}");
    let listed: Value = serde_json::from_str(
        &find(&directory.url, &["--action", "getProductInfo", "--json"]).stdout,
    )
    .unwrap();
    assert_eq!(
        listed.as_array().map(Vec::len),
        Some(1),
        "the signed agent alone is registered: {listed:#}"
    );
}

/// Registers `td` under `id` in the live directory (unsigned: this directory does not keep
/// each DID-named entry to its own agent), as a lax or hostile directory would hold it.
fn register_as(directory: &LiveDirectory, td: &Value, id: &str) {
    let mut td = td.clone();
    td["id"] = Value::String(id.to_owned());
    if let Some(object) = td.as_object_mut() {
        object.remove("registration");
    }
    let client = concord_node::Directory::new(&directory.url()).unwrap();
    directory
        .runtime
        .block_on(client.register(&td, None))
        .unwrap();
}

#[test]
fn a_did_looked_up_in_a_directory_must_be_the_peer_reached() {
    let directory = LiveDirectory::start();
    let url = directory.url();
    let (shop, _shop_dir) = registered_shop(SHOP, &url);
    let started = Instant::now();
    let listed = loop {
        let output = find(&url, &["--action", "getProductInfo", "--json"]);
        if output.code == 0 {
            break output;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never found: {output:?}\n{}",
            shop.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let json: Value = serde_json::from_str(&listed.stdout).unwrap();
    let td = &json[0]["description"];
    let shop_did = shop.did.clone().expect("the shop has a DID");
    // An impostor's entry: another agent's DID as its id, the shop's base URL (whose
    // provider proves its own DID, not that one).
    let victim = "did:wba:localhost%3A9:agents:victim";
    let mut posing = td.clone();
    posing["concord:metaProtocol"]["concord:did"] = Value::String(victim.to_owned());
    register_as(&directory, &posing, victim);
    let requester = tempfile::tempdir().unwrap();
    let call = |id: &str| {
        call_product(
            id,
            r#"{"productId": "P12345"}"#,
            requester.path(),
            &[OsStr::new("--directory"), OsStr::new(&url)],
        )
    };
    let impostor = call(victim);
    assert_eq!(impostor.code, 1, "{impostor:?}");
    assert!(
        impostor
            .stderr
            .contains(&format!("must prove the DID {victim}"))
            && impostor.stderr.contains(&shop_did),
        "{}",
        impostor.stderr
    );
    // An entry naming two DIDs (the victim's as its id, the shop's in its metaProtocol):
    // no peer proves both, refused before any connection.
    let mixed = "did:wba:localhost%3A9:agents:mixed";
    register_as(&directory, td, mixed);
    let refused = call(mixed);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused.stderr.contains("names several DIDs")
            && refused.stderr.contains(mixed)
            && refused.stderr.contains(&shop_did),
        "{}",
        refused.stderr
    );
    // The same description under the shop's own DID: the peer proves it, the call is made.
    register_as(&directory, td, &shop_did);
    let genuine = call(&shop_did);
    assert_eq!(genuine.code, 0, "{genuine:?}");
}
