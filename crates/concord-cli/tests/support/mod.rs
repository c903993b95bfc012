//! Shared pieces of the network command tests: the `concord` binary with no LLM, a
//! `concord serve` process on 127.0.0.1:0, and temporary agent configurations.
#![allow(dead_code)] // each test file uses its own part of this module

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
    let mut command = Command::cargo_bin("concord").unwrap();
    for name in LLM_VARIABLES {
        command.env_remove(name);
    }
    command.env_remove("RUST_LOG");
    command
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
}

pub fn run(command: &mut Command) -> Output {
    let output = command.output().unwrap();
    Output {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// The shipped example configuration.
pub fn example_config() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/product-agent.toml")
}

/// The seeds' product-info protocol (Chinese), kept with concord-negotiate's tests.
pub fn seed_protocol() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../concord-negotiate/tests/fixtures/seed-product-info.zh.md")
}

/// A fixture of this crate's tests.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A temporary directory with an agent configuration `agent.toml` serving getProductInfo
/// with the example's script, on 127.0.0.1:0, its store in `data/`, with `extra` appended.
pub fn temp_config(extra: &str) -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples");
    let config = format!(
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
    );
    let path = dir.path().join("agent.toml");
    std::fs::write(&path, config).unwrap();
    (dir, path)
}

/// A running `concord serve`, killed when dropped.
pub struct Served {
    child: Child,
    /// The base URL (`http://127.0.0.1:port/`).
    pub url: String,
    /// The description URL.
    pub description: String,
    /// The WebSocket endpoint.
    pub endpoint: String,
    /// Everything printed on stdout up to the endpoint line.
    pub banner: String,
    stderr: Arc<Mutex<String>>,
}

impl Served {
    /// Starts `concord serve` with `args` and waits (up to 60 s) for it to print its
    /// addresses.
    pub fn start(args: &[&std::ffi::OsStr]) -> Served {
        let mut child = Process::new(assert_cmd::cargo::cargo_bin("concord"))
            .arg("serve")
            .args(args)
            .env_clear_llm()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut stderr_pipe = child.stderr.take().unwrap();
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
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
        let (mut description, mut endpoint) = (None, None);
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
            if let Some(url) = line.strip_prefix("description: ") {
                description = Some(url.trim().to_owned());
            }
            if let Some(url) = line.strip_prefix("endpoint: ") {
                endpoint = Some(url.trim().to_owned());
            }
        }
        let description = description.expect("the description line comes first");
        let url = description.trim_end_matches(".well-known/wot").to_owned();
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || while received.recv().is_ok() {});
        Served {
            child,
            url,
            description,
            endpoint: endpoint.unwrap_or_default(),
            banner,
            stderr,
        }
    }

    /// What the server logged so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
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
                std::thread::sleep(Duration::from_millis(50));
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

/// Removes the LLM variables from a process's environment.
trait ClearLlm {
    fn env_clear_llm(&mut self) -> &mut Self;
}

impl ClearLlm for Process {
    fn env_clear_llm(&mut self) -> &mut Self {
        for name in LLM_VARIABLES {
            self.env_remove(name);
        }
        self.env_remove("RUST_LOG")
    }
}

/// `concord call <url> getProductInfo <input> --json --data-dir <dir>`.
pub fn call_json(url: &str, input: &str, data_dir: &Path) -> Output {
    run(concord()
        .args(["call", url, "getProductInfo", input, "--json", "--data-dir"])
        .arg(data_dir))
}
