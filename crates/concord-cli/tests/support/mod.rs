//! Shared pieces of the command tests: the `concord` binary with no LLM and what it did,
//! this crate's fixtures and the seeds' documents, a `concord serve` process on
//! 127.0.0.1:0, and temporary agent configurations.
#![allow(dead_code)] // each test file uses its own part of this module

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;
use tempfile::TempDir;

/// Variables that would give the command an LLM.
pub const LLM_VARIABLES: [&str; 5] = [
    "CONCORD_LLM_BASE_URL",
    "CONCORD_LLM_API_KEY",
    "CONCORD_LLM_MODEL",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
];

/// The `concord` binary with no LLM configured and no log filter, whatever the caller's
/// environment says.
pub fn concord() -> Command {
    Command::from_std(process())
}

/// What a finished command did.
#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Stdout as JSON, or a panic showing both streams.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|error| panic!("{error}: {}\n{}", self.stdout, self.stderr))
    }

    /// Asserts the command exited with `code` and its standard error contains `expected`.
    pub fn says(&self, code: i32, expected: &str) {
        assert_eq!(self.code, code, "{}{}", self.stdout, self.stderr);
        assert!(
            self.stderr.contains(expected),
            "{:?} does not say {expected:?}",
            self.stderr
        );
    }

    /// Asserts the command exited with `code` and said what went wrong in one line of
    /// standard error containing `expected` (no panic, no debug dump, no stack).
    pub fn fails(&self, code: i32, expected: &str) {
        self.says(code, expected);
        assert!(
            self.stderr.starts_with("concord: ") && self.stderr.lines().count() == 1,
            "not one line: {:?}",
            self.stderr
        );
    }
}

/// Runs the command to its end.
pub fn run(command: &mut Command) -> Output {
    let output = command.output().unwrap();
    Output {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// `concord <args>` with `stdin` on standard input.
pub fn run_with_stdin(args: &[&str], stdin: impl Into<Vec<u8>>) -> Output {
    run(concord().args(args).write_stdin(stdin))
}

/// The shipped example configuration.
pub fn example_config() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/product-agent.toml")
}

/// One of the seeds' documents, kept with concord-negotiate's tests.
pub fn seed(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../concord-negotiate/tests/fixtures")
        .join(name)
}

/// The seeds' product-info protocol (Chinese).
pub fn seed_protocol() -> PathBuf {
    seed("seed-product-info.zh.md")
}

/// A fixture of this crate's tests.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The protocol `concord protocol draft` writes for the fixture agent's getProductInfo
/// (its request fixes the action with a `const`).
pub fn drafted_protocol() -> String {
    let output = run(concord()
        .args([
            "protocol",
            "draft",
            "--action",
            "getProductInfo",
            "--description",
        ])
        .arg(fixture("product-agent.json")));
    assert_eq!(output.code, 0, "{}", output.stderr);
    output.stdout
}

/// A temporary directory with an agent configuration `agent.toml` serving getProductInfo
/// with the example's script, on 127.0.0.1:0, its store in `data/`, with `extra` appended.
pub fn temp_config(extra: &str) -> (TempDir, PathBuf) {
    write_config(&config_text(extra))
}

/// A temporary directory with `text` as its `agent.toml`.
pub fn write_config(text: &str) -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// The text of [`temp_config`]'s configuration.
pub fn config_text(extra: &str) -> String {
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples");
    format!(
        r#"[agent]
title = "Test shop"
description = "A shop for tests."

[node]
listen = "127.0.0.1:0"
data_dir = "data"

[[actions]]
name = "getProductInfo"
description = "Get product information by product id."
input = {{ type = "object", properties = {{ productId = {{ type = "string" }} }}, required = ["productId"] }}
output = {output:?}
exec = {{ command = "sh", args = [{script:?}], timeout = "5s" }}
{extra}"#,
        output = examples
            .join("product-info.schema.json")
            .display()
            .to_string(),
        script = examples.join("product-info.sh").display().to_string(),
    )
}

/// A running `concord serve`, killed when dropped.
pub struct Served {
    child: Child,
    /// The base URL (`http://127.0.0.1:port/`, or the configured public URL).
    pub url: String,
    /// The address it listens on.
    pub listening: std::net::SocketAddr,
    /// The description URL.
    pub description: String,
    /// The WebSocket endpoint.
    pub endpoint: String,
    /// Everything printed on stdout up to the endpoint line.
    pub banner: String,
    /// The DID it printed (`did:wba:localhost%3A<port>:agents:e1_…` on loopback).
    pub did: Option<String>,
    stderr: Arc<Mutex<String>>,
    stderr_reader: std::thread::JoinHandle<()>,
}

impl Served {
    /// Serves the example configuration on 127.0.0.1:0 with its store in `data_dir`.
    pub fn example(data_dir: &Path) -> Served {
        Served::start(&[
            OsStr::new("--config"),
            example_config().as_os_str(),
            OsStr::new("--listen"),
            OsStr::new("127.0.0.1:0"),
            OsStr::new("--data-dir"),
            data_dir.as_os_str(),
        ])
    }

    /// Starts `concord serve` with `args` and waits (up to 60 s) for it to print its
    /// addresses.
    pub fn start(args: &[&OsStr]) -> Served {
        Served::start_in(Path::new("."), args)
    }

    /// [`Served::start`] in the working directory `cwd`.
    pub fn start_in(cwd: &Path, args: &[&OsStr]) -> Served {
        Served::start_command(cwd, &["serve"], args)
    }

    /// Starts `concord directory serve` with `args` and waits for its banner (its last line
    /// is `things:`, the listing's URL; `endpoint` is that URL).
    pub fn directory(args: &[&OsStr]) -> Served {
        Served::start_command(Path::new("."), &["directory", "serve"], args)
    }

    /// Starts `concord <command>` with `args` in `cwd` and waits (up to 60 s) for the last
    /// line of its banner (`endpoint:`, or a directory's `things:`).
    fn start_command(cwd: &Path, command: &[&str], args: &[&OsStr]) -> Served {
        let mut child = process()
            .current_dir(cwd)
            .args(command)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut stderr_pipe = child.stderr.take().unwrap();
        let sink = Arc::clone(&stderr);
        let stderr_reader = std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n) = stderr_pipe.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buffer[..n]));
            }
        });
        let stdout = child.stdout.take().unwrap();
        let (lines, received) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let mut banner = String::new();
        let (mut description, mut endpoint, mut listening, mut did) = (None, None, None, None);
        while endpoint.is_none() {
            let Ok(line) = received.recv_timeout(Duration::from_secs(60)) else {
                let _ = child.kill();
                panic!(
                    "concord serve printed no endpoint; stdout: {banner}\nstderr: {}",
                    stderr.lock().unwrap()
                );
            };
            banner.push_str(&line);
            banner.push('\n');
            if let Some(addr) = line.strip_prefix("listening: ") {
                listening = addr.trim().parse().ok();
            }
            if let Some(text) = line.strip_prefix("did: ") {
                did = Some(text.trim().to_owned());
            }
            if let Some(url) = line.strip_prefix("description: ") {
                description = Some(url.trim().to_owned());
            }
            if let Some(url) = line
                .strip_prefix("endpoint: ")
                .or_else(|| line.strip_prefix("things: "))
            {
                endpoint = Some(url.trim().to_owned());
            }
        }
        let description = description.expect("the description line comes first");
        let url = description.trim_end_matches(".well-known/wot").to_owned();
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || while received.recv().is_ok() {});
        // stderr is another pipe, read by another thread: what the server printed there
        // before its banner's last line is complete once its last line arrives.
        let started = Served::await_stderr(&stderr, "press Ctrl-C to stop");
        if !started {
            let _ = child.kill();
            panic!(
                "concord serve never said it was ready; stdout: {banner}\nstderr: {}",
                stderr.lock().unwrap()
            );
        }
        Served {
            child,
            url,
            listening: listening.expect("the listening line comes before the endpoint"),
            description,
            endpoint: endpoint.unwrap_or_default(),
            banner,
            did,
            stderr,
            stderr_reader,
        }
    }

    /// What the server logged so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits up to 20 s for the server to log `needle`; true once it has. What a server
    /// logs while answering may reach us after its answer (another pipe, another thread).
    pub fn logged(&self, needle: &str) -> bool {
        Served::await_stderr(&self.stderr, needle)
    }

    fn await_stderr(stderr: &Mutex<String>, needle: &str) -> bool {
        for _ in 0..400 {
            if stderr.lock().unwrap().contains(needle) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Kills the server with SIGKILL (`kill -9`: no shutdown of any kind) and waits for it.
    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Waits up to `within` for the server to exit by itself: its exit code and all it
    /// wrote on standard error.
    pub fn exits_within(mut self, within: Duration) -> (i32, String) {
        let deadline = std::time::Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                for _ in 0..100 {
                    if self.stderr_reader.is_finished() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                return (status.code().unwrap_or(-1), self.stderr());
            }
            assert!(
                std::time::Instant::now() < deadline,
                "concord serve did not exit within {within:?}: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends SIGINT (Ctrl-C) and waits up to 20 s for the exit code.
    pub fn interrupt(mut self) -> (i32, String) {
        let status = Process::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        for _ in 0..200 {
            if let Some(status) = self.child.try_wait().unwrap() {
                // The reader ends at the pipe's end: then all the server wrote is in.
                for _ in 0..100 {
                    if self.stderr_reader.is_finished() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                return (status.code().unwrap_or(-1), self.stderr());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("concord serve did not stop on SIGINT: {}", self.stderr());
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `concord` binary as a plain process (for what `assert_cmd` cannot set up, such as a
/// standard output of our choosing), with no LLM and no log filter.
pub fn process() -> Process {
    let mut process = Process::new(env!("CARGO_BIN_EXE_concord"));
    for name in LLM_VARIABLES {
        process.env_remove(name);
    }
    process.env_remove("RUST_LOG");
    process
}

/// A requester that signs its calls: its data directory, and its own `concord serve`
/// (a temporary configuration) on 127.0.0.1 with that directory, which serves its DID
/// document; calls pass [`Signer::args`].
pub struct Signer {
    /// The data directory (its keys and store): `--data-dir` of its calls.
    pub data_dir: TempDir,
    /// The node serving its DID document.
    pub served: Served,
    /// Its DID.
    pub did: String,
    /// `localhost:<port>`.
    pub did_host: String,
    _config: TempDir,
}

impl Signer {
    /// Creates the identity (by serving it once) and keeps it served.
    pub fn start() -> Signer {
        let data_dir = tempfile::tempdir().unwrap();
        let (config_dir, config) = temp_config("");
        let served = Served::start(&[
            OsStr::new("--config"),
            config.as_os_str(),
            OsStr::new("--data-dir"),
            data_dir.path().as_os_str(),
        ]);
        let did = served.did.clone().expect("concord serve prints its DID");
        let did_host = format!("localhost:{}", served.listening.port());
        Signer {
            data_dir,
            served,
            did,
            did_host,
            _config: config_dir,
        }
    }

    /// `--did-host localhost:<port>`.
    pub fn args(&self) -> [&OsStr; 2] {
        [OsStr::new("--did-host"), OsStr::new(&self.did_host)]
    }

    /// The `Signature-Input` and `Signature` headers of a WebSocket upgrade to `endpoint`
    /// (as the provider's description names it) signed now with `nonce`.
    pub fn upgrade_headers(&self, endpoint: &str, nonce: &str) -> [(String, String); 2] {
        let keys =
            concord_identity::Keys::load(&self.data_dir.path().join("identity/keys.json")).unwrap();
        let port = self.served.listening.port();
        let identity =
            concord_identity::Identity::new(keys, "localhost", Some(port), &["agents"]).unwrap();
        assert_eq!(identity.did().as_str(), self.did);
        let created = i64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs(),
        )
        .unwrap();
        let target = concord_identity::RequestTarget {
            method: "GET",
            target_uri: endpoint,
        };
        let signed = concord_identity::sign_request(&identity, &target, b"", created, nonce);
        [
            ("Signature-Input".to_owned(), signed.signature_input),
            ("Signature".to_owned(), signed.signature),
        ]
    }
}

/// A WebSocket upgrade to `endpoint` (`ws://127.0.0.1:port/concord`) with `headers`, by
/// hand over TCP: the answer's status line.
pub fn raw_upgrade(endpoint: &str, headers: &[(String, String)]) -> String {
    use std::io::{Read, Write};
    let authority = endpoint
        .trim_start_matches("ws://")
        .trim_end_matches("/concord");
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let mut request = format!(
        "GET /concord HTTP/1.1\r\nHost: {authority}\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Version: 13\r\n"
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).unwrap(), 1, "{head:?}");
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

/// A provider serving getProductInfo (the example's script) on 127.0.0.1:0 that resolves
/// DIDs on localhost over plain HTTP (a [`Signer`]'s), with `extra` appended to its
/// configuration; its store in the returned directory.
pub fn provider(extra: &str) -> (Served, TempDir) {
    let (dir, config) = temp_config(&format!(
        "{extra}\n[security]\nresolve_loopback_over_http = true\n"
    ));
    (
        Served::start(&[OsStr::new("--config"), config.as_os_str()]),
        dir,
    )
}

/// `concord call <url> getProductInfo <input> --json` signed as `signer` (its data
/// directory, `--did-host`).
pub fn signed_call_json(url: &str, input: &str, signer: &Signer) -> Output {
    let mut options = vec![OsStr::new("--json")];
    options.extend(signer.args());
    call_product(url, input, signer.data_dir.path(), &options)
}

/// `concord call <url> getProductInfo <input> <options…> --data-dir <dir>`.
pub fn call_product(url: &str, input: &str, data_dir: &Path, options: &[&OsStr]) -> Output {
    run(concord()
        .args(["call", url, "getProductInfo", input])
        .args(options)
        .arg("--data-dir")
        .arg(data_dir))
}

/// `concord call <url> getProductInfo <input> --json --data-dir <dir>`.
pub fn call_json(url: &str, input: &str, data_dir: &Path) -> Output {
    call_product(url, input, data_dir, &[OsStr::new("--json")])
}

/// The body of `GET url`.
pub fn http_get(url: &str) -> String {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async { reqwest::get(url).await.unwrap().text().await.unwrap() })
}

/// Makes identity keys in `data_dir` (`concord identity new`): one agent's key file, made
/// once and named by every replica's `security.keys_file`, or copied to each.
pub fn make_keys(data_dir: &std::path::Path) {
    let made = run(concord()
        .args(["identity", "new", "--data-dir"])
        .arg(data_dir));
    assert_eq!(made.code, 0, "{}", made.stderr);
}
