//! How many idle sessions one node holds, and what each costs: the provider's memory per
//! established, idle session, beside the floor of a raw idle axum WebSocket.
//!
//! ```sh
//! cargo bench -p concord-node --bench sessions                      # 10,000 sessions
//! cargo bench -p concord-node --bench sessions -- --sessions 1000 --negotiated 100
//! CONCORD_BENCH_SESSIONS=20000 cargo bench -p concord-node --bench sessions
//! ```
//!
//! The server side runs in a child process (this binary again, `--serve node|echo`), so its
//! memory is its own: figures are its `VmRSS`/`VmHWM` from `/proc/<pid>/status`, and the live
//! heap bytes a counting global allocator (this binary's, the system allocator underneath)
//! reports. This process is the client side. Cases, each against a fresh child:
//! - **echo**: `N` raw WebSockets to a trivial axum echo server (tungstenite, the node's
//!   16 KiB read buffer), held idle: KB per raw WebSocket, the floor;
//! - **0-RTT**: one full negotiation, then `N` connections that resume it by 0-RTT, held
//!   idle: KB per session, sessions/s to open;
//! - **negotiated**: `--negotiated` connections (default 200) each negotiated in full by a
//!   fresh requester (its own store), held idle: KB per session.
//!
//! Every case prints server RSS before and after, the per-session figure and its ratio to
//! the echo's per-WebSocket figure measured in the same run. No figure is asserted.
//!
//! Each process needs a file descriptor per connection: both raise their soft
//! `RLIMIT_NOFILE` to the hard limit and refuse to start below `N` + 256. Raise the hard
//! limit with `ulimit -Hn 65536` (as root, in the shell that runs the bench), a `nofile`
//! line in `/etc/security/limits.conf` (`* hard nofile 65536`, for login sessions), or
//! `LimitNOFILE=65536` in a systemd unit. All connections come from 127.0.0.1 to one port:
//! 10,000 fit the default ephemeral port range (32768–60999) with the previous case's ports
//! in TIME_WAIT; for more, widen `net.ipv4.ip_local_port_range`. The provider's limits are
//! raised for the run (`max_sessions`, the per-address session, connection and rate limits,
//! the idle timeout): every connection comes from one address.

#[path = "common/report.rs"]
mod report;

use std::alloc::{GlobalAlloc, Layout, System};
use std::error::Error;
use std::process::Stdio;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use concord_fixtures::catalogue;
use concord_node::{Connection, Limits, Node, Settlement};
use futures_util::{stream, SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

type BoxError = Box<dyn Error + Send + Sync>;

/// Counts the heap bytes in use, over the system allocator.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static BLOCKS: AtomicUsize = AtomicUsize::new(0);
/// Live blocks and bytes by size class: class `k` holds blocks of 2^(k-1) < size ≤ 2^k.
static CLASS_BLOCKS: [AtomicIsize; CLASSES] = [const { AtomicIsize::new(0) }; CLASSES];
static CLASS_BYTES: [AtomicIsize; CLASSES] = [const { AtomicIsize::new(0) }; CLASSES];
const CLASSES: usize = 40;

fn class_of(size: usize) -> usize {
    (size.next_power_of_two().trailing_zeros() as usize).min(CLASSES - 1)
}

fn count(size: usize, blocks: isize) {
    let class = class_of(size);
    CLASS_BLOCKS[class].fetch_add(blocks, Ordering::Relaxed);
    CLASS_BYTES[class].fetch_add(blocks * size as isize, Ordering::Relaxed);
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counters are
// only read for the report.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
            BLOCKS.fetch_add(1, Ordering::Relaxed);
            count(layout.size(), 1);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        unsafe { System.dealloc(pointer, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        BLOCKS.fetch_sub(1, Ordering::Relaxed);
        count(layout.size(), -1);
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
            count(layout.size(), -1);
            count(new_size, 1);
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Descriptors kept beyond one per connection (store, runtime, listener, pipes).
const SPARE_DESCRIPTORS: u64 = 256;
/// Connections opened at once.
const OPENING_AT_ONCE: usize = 64;
/// Full negotiations run at once (each is CPU work on both sides).
const NEGOTIATING_AT_ONCE: usize = 4;
/// How long the server is left to settle before a reading.
const SETTLE: Duration = Duration::from_millis(1500);

struct Options {
    sessions: usize,
    negotiated: usize,
}

impl Options {
    fn from_args() -> Result<Self, BoxError> {
        let sessions = match std::env::var("CONCORD_BENCH_SESSIONS") {
            Ok(value) => value
                .parse()
                .map_err(|_| format!("CONCORD_BENCH_SESSIONS={value:?} is not a count"))?,
            Err(_) => 10_000,
        };
        let mut options = Self {
            sessions,
            negotiated: 200,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut count = || -> Result<usize, BoxError> {
                let value = args.next().ok_or_else(|| format!("{arg} needs a value"))?;
                Ok(value
                    .parse()
                    .map_err(|_| format!("{arg} {value:?} is not a count"))?)
            };
            match arg.as_str() {
                "--sessions" => options.sessions = count()?,
                "--negotiated" => options.negotiated = count()?,
                // What `cargo bench` passes to every bench binary.
                "--bench" => {}
                other => return Err(format!("unknown argument {other:?}").into()),
            }
        }
        if options.sessions == 0 {
            return Err("--sessions must be at least 1".into());
        }
        Ok(options)
    }
}

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if let [_, flag, what, count] = args.as_slice() {
        if flag == "--serve" {
            let sessions: usize = count.parse()?;
            return runtime.block_on(serve(what, sessions));
        }
    }
    let options = Options::from_args()?;
    runtime.block_on(run(&options))
}

// ----- the server side (child process) ---------------------------------------------------

/// Serves `what` (`node` or `echo`) on loopback: prints `URL <url>`, then answers `stats`
/// lines with `STATS <rss kB> <hwm kB> <heap bytes> <heap blocks>` until stdin closes.
async fn serve(what: &str, sessions: usize) -> Result<(), BoxError> {
    raise_descriptor_limit(sessions + SPARE_DESCRIPTORS as usize)?;
    let dir = tempfile::tempdir()?;
    let (url, _server) = match what {
        "node" => {
            let node = Node::builder("Product agent")
                .description("Product information for a small shop.")
                .data_dir(dir.path())
                .limits(server_limits(sessions))
                .action(catalogue::action(), catalogue::answer)
                .build()?;
            let server = node.serve("127.0.0.1:0").await?;
            (server.url().to_owned(), Some((node, server)))
        }
        "echo" => (echo::serve().await?, None),
        other => return Err(format!("--serve {other:?}: expected node or echo").into()),
    };
    // Blocking pipes on a thread of their own (tokio's `io-std` is not enabled here).
    tokio::task::spawn_blocking(move || answer_stats(&url)).await?
}

fn answer_stats(url: &str) -> Result<(), BoxError> {
    use std::io::{BufRead, Write};
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "URL {url}")?;
    stdout.flush()?;
    for line in std::io::stdin().lock().lines() {
        if line?.trim() == "stats" {
            let (rss, hwm) = memory_of("self")?;
            let classes: Vec<String> = (0..CLASSES)
                .map(|class| {
                    format!(
                        "{}:{}",
                        CLASS_BLOCKS[class].load(Ordering::Relaxed),
                        CLASS_BYTES[class].load(Ordering::Relaxed)
                    )
                })
                .collect();
            writeln!(
                stdout,
                "STATS {rss} {hwm} {} {} {}",
                LIVE.load(Ordering::Relaxed),
                BLOCKS.load(Ordering::Relaxed),
                classes.join(",")
            )?;
            stdout.flush()?;
        }
    }
    Ok(())
}

/// The provider's limits for the run: room for every session, all from 127.0.0.1, opened
/// as fast as the client can, and never closed as idle.
fn server_limits(sessions: usize) -> Limits {
    let room = sessions + SPARE_DESCRIPTORS as usize;
    let rate = u32::try_from(room).unwrap_or(u32::MAX);
    Limits {
        max_sessions: room,
        max_sessions_per_address: room,
        max_connections: room,
        max_connections_per_address: room,
        connection_rate_per_address: rate,
        connection_burst_per_address: rate,
        idle_timeout: Duration::from_secs(3600),
        ..Limits::default()
    }
}

/// `VmRSS` and `VmHWM` of `/proc/<pid>`, in kB.
fn memory_of(pid: &str) -> Result<(u64, u64), BoxError> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> Result<u64, BoxError> {
        let line = status
            .lines()
            .find(|line| line.starts_with(name))
            .ok_or_else(|| format!("no {name} in /proc/{pid}/status"))?;
        let kb = line
            .split_whitespace()
            .nth(1)
            .ok_or_else(|| format!("no value in {line:?}"))?;
        Ok(kb.parse()?)
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}

/// Raises the soft descriptor limit to the hard one; an error when the hard one is below
/// what `connections` need.
fn raise_descriptor_limit(connections: usize) -> Result<(), BoxError> {
    let needed = connections as u64 + SPARE_DESCRIPTORS;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `getrlimit` and `setrlimit` only read and write the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(format!(
            "cannot read RLIMIT_NOFILE: {}",
            std::io::Error::last_os_error()
        )
        .into());
    }
    if limit.rlim_max < needed {
        return Err(format!(
            "{connections} connections need {needed} file descriptors, but the hard limit \
             (ulimit -Hn) is {}: raise it (`ulimit -Hn {needed}` as root, /etc/security/limits.conf, \
             or systemd LimitNOFILE) or run fewer sessions (--sessions)",
            limit.rlim_max
        )
        .into());
    }
    limit.rlim_cur = limit.rlim_max;
    // SAFETY: as above.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
        return Err(format!(
            "cannot raise RLIMIT_NOFILE: {}",
            std::io::Error::last_os_error()
        )
        .into());
    }
    Ok(())
}

mod echo {
    //! The floor: an axum WebSocket server that echoes each message, nothing else.

    use axum::extract::ws::{WebSocket, WebSocketUpgrade};
    use axum::response::Response;
    use axum::routing::get;
    use axum::Router;

    use super::BoxError;

    /// The node's own read buffer (`transport::READ_BUFFER_SIZE`): the floor is the same
    /// WebSocket configured the same way.
    const READ_BUFFER_SIZE: usize = 4 * 1024;

    /// Starts the server; its URL.
    pub async fn serve() -> Result<String, BoxError> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let app = Router::new().route("/", get(upgrade));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(format!("ws://{address}/"))
    }

    async fn upgrade(upgrade: WebSocketUpgrade) -> Response {
        upgrade.read_buffer_size(READ_BUFFER_SIZE).on_upgrade(echo)
    }

    async fn echo(mut socket: WebSocket) {
        while let Some(Ok(message)) = socket.recv().await {
            if socket.send(message).await.is_err() {
                return;
            }
        }
    }
}

// ----- the client side (this process) ----------------------------------------------------

/// A server child process and its pipes.
struct ServerProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: tokio::io::Lines<BufReader<ChildStdout>>,
    url: String,
}

/// One reading of the server's memory.
#[derive(Debug, Clone)]
struct Stats {
    rss_kb: u64,
    hwm_kb: u64,
    heap: i64,
    blocks: u64,
    /// Live (blocks, bytes) per size class.
    classes: Vec<(i64, i64)>,
}

impl ServerProcess {
    async fn start(what: &str, sessions: usize) -> Result<Self, BoxError> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["--serve", what, &sessions.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut stdout = BufReader::new(stdout).lines();
        let line = stdout
            .next_line()
            .await?
            .ok_or("the server process ended before saying its URL")?;
        let url = line
            .strip_prefix("URL ")
            .ok_or_else(|| format!("the server process said {line:?}"))?
            .to_owned();
        Ok(Self {
            child,
            stdin,
            stdout,
            url,
        })
    }

    /// Its memory now, after letting it settle.
    async fn stats(&mut self) -> Result<Stats, BoxError> {
        tokio::time::sleep(SETTLE).await;
        self.stdin.write_all(b"stats\n").await?;
        self.stdin.flush().await?;
        let line = self
            .stdout
            .next_line()
            .await?
            .ok_or("the server process ended")?;
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, rss, hwm, heap, blocks, classes] = fields.as_slice() else {
            return Err(format!("the server process said {line:?}").into());
        };
        let classes = classes
            .split(',')
            .map(|class| -> Result<(i64, i64), BoxError> {
                let (blocks, bytes) = class.split_once(':').ok_or("a bad size class")?;
                Ok((blocks.parse()?, bytes.parse()?))
            })
            .collect::<Result<_, _>>()?;
        Ok(Stats {
            rss_kb: rss.parse()?,
            hwm_kb: hwm.parse()?,
            heap: heap.parse()?,
            blocks: blocks.parse()?,
            classes,
        })
    }

    async fn stop(mut self) -> Result<(), BoxError> {
        drop(self.stdin);
        match tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await {
            Ok(status) => {
                status?;
            }
            Err(_) => self.child.kill().await?,
        }
        Ok(())
    }
}

/// What one case measured.
struct Case {
    name: &'static str,
    sessions: usize,
    before: Stats,
    after: Stats,
    open_time: Duration,
}

impl Case {
    fn kb_per_session(&self) -> f64 {
        (self.after.rss_kb as f64 - self.before.rss_kb as f64) / self.sessions as f64
    }

    fn heap_per_session(&self) -> f64 {
        (self.after.heap - self.before.heap) as f64 / self.sessions as f64
    }

    fn blocks_per_session(&self) -> f64 {
        (self.after.blocks as f64 - self.before.blocks as f64) / self.sessions as f64
    }
}

async fn run(options: &Options) -> Result<(), BoxError> {
    raise_descriptor_limit(options.sessions)?;
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    println!(
        "sessions: {} held idle per case ({} negotiated in full); {cpus} CPUs, load {}",
        options.sessions,
        options.negotiated,
        report::load_average()
    );
    print_header();
    let echo = echo_case(options.sessions).await?;
    let floor = echo.kb_per_session();
    print_row(&echo, floor);
    let resumed = resumed_case(options.sessions).await?;
    print_row(&resumed, floor);
    let mut cases = vec![echo, resumed];
    if options.negotiated > 0 {
        let negotiated = negotiated_case(options.negotiated).await?;
        print_row(&negotiated, floor);
        cases.push(negotiated);
    }
    print_classes(&cases);
    Ok(())
}

async fn echo_case(sessions: usize) -> Result<Case, BoxError> {
    let mut server = ServerProcess::start("echo", sessions).await?;
    let before = server.stats().await?;
    let started = Instant::now();
    let url = server.url.clone();
    let sockets: Vec<_> = stream::iter(0..sessions)
        .map(|_| {
            let url = url.clone();
            async move { tokio_tungstenite::connect_async(url.as_str()).await }
        })
        .buffer_unordered(OPENING_AT_ONCE)
        .collect()
        .await;
    let open_time = started.elapsed();
    let mut sockets = sockets.into_iter().collect::<Result<Vec<_>, _>>()?;
    // Each socket carries one message, as a session carries its hello.
    for (socket, _) in sockets.iter_mut().take(1) {
        socket.send("ping".into()).await?;
        socket.next().await.ok_or("the echo closed")??;
    }
    let after = server.stats().await?;
    drop(sockets);
    server.stop().await?;
    Ok(Case {
        name: "raw WebSocket (echo)",
        sessions,
        before,
        after,
        open_time,
    })
}

fn requester_limits() -> Limits {
    Limits {
        idle_timeout: Duration::from_secs(3600),
        ..Limits::default()
    }
}

async fn resumed_case(sessions: usize) -> Result<Case, BoxError> {
    let mut server = ServerProcess::start("node", sessions).await?;
    let dir = tempfile::tempdir()?;
    let requester = Node::builder("Requester")
        .data_dir(dir.path())
        .limits(requester_limits())
        .build()?;
    let first = requester.connect(&server.url, catalogue::ACTION).await?;
    if first.info().settlement != Settlement::Negotiated {
        return Err("the first connection was not negotiated".into());
    }
    first.close().await;
    let before = server.stats().await?;
    let started = Instant::now();
    let url = server.url.clone();
    let connections: Vec<_> = stream::iter(0..sessions)
        .map(|_| {
            let (requester, url) = (requester.clone(), url.clone());
            async move { requester.connect(&url, catalogue::ACTION).await }
        })
        .buffer_unordered(OPENING_AT_ONCE)
        .collect()
        .await;
    let open_time = started.elapsed();
    let connections = all_settled(connections, &Settlement::Resumed)?;
    check_calls(&connections).await?;
    let after = server.stats().await?;
    close_all(connections).await;
    server.stop().await?;
    Ok(Case {
        name: "node session, 0-RTT",
        sessions,
        before,
        after,
        open_time,
    })
}

/// The connections, once each opened and was settled `how`.
fn all_settled(
    connections: Vec<Result<Connection, impl Into<BoxError>>>,
    how: &Settlement,
) -> Result<Vec<Connection>, BoxError> {
    let connections = connections
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(Into::into)?;
    match connections
        .iter()
        .find(|connection| connection.info().settlement != *how)
    {
        Some(connection) => Err(format!(
            "a session was settled {:?}, not {how:?}",
            connection.info().settlement
        )
        .into()),
        None => Ok(connections),
    }
}

async fn negotiated_case(sessions: usize) -> Result<Case, BoxError> {
    // Each fresh requester also keeps its description fetch's HTTP connection open.
    let mut server = ServerProcess::start("node", 2 * sessions).await?;
    // One negotiation first, so that the figure is what each further session adds.
    let warm_dir = tempfile::tempdir()?;
    let warm = fresh_requester(&warm_dir)?
        .connect(&server.url, catalogue::ACTION)
        .await?;
    warm.close().await;
    let before = server.stats().await?;
    let dirs = (0..sessions)
        .map(|_| tempfile::tempdir())
        .collect::<Result<Vec<_>, _>>()?;
    let started = Instant::now();
    let url = server.url.clone();
    let connections: Vec<_> = stream::iter(dirs.iter())
        .map(|dir| {
            let url = url.clone();
            async move {
                let node = fresh_requester(dir)?;
                Ok::<_, BoxError>(node.connect(&url, catalogue::ACTION).await?)
            }
        })
        .buffer_unordered(NEGOTIATING_AT_ONCE)
        .collect()
        .await;
    let open_time = started.elapsed();
    let connections = all_settled(connections, &Settlement::Negotiated)?;
    check_calls(&connections).await?;
    let after = server.stats().await?;
    close_all(connections).await;
    server.stop().await?;
    Ok(Case {
        name: "node session, negotiated",
        sessions,
        before,
        after,
        open_time,
    })
}

fn fresh_requester(dir: &tempfile::TempDir) -> Result<Node, BoxError> {
    Ok(Node::builder("Fresh requester")
        .data_dir(dir.path())
        .limits(requester_limits())
        .build()?)
}

/// A call on the first and the last connection: the sessions are established, not just
/// open.
async fn check_calls(connections: &[Connection]) -> Result<(), BoxError> {
    for connection in [connections.first(), connections.last()]
        .into_iter()
        .flatten()
    {
        connection
            .call(catalogue::ACTION, catalogue::input(0))
            .await?;
    }
    Ok(())
}

async fn close_all(connections: Vec<Connection>) {
    stream::iter(connections)
        .for_each_concurrent(OPENING_AT_ONCE, |connection| async move {
            connection.close().await;
        })
        .await;
}

fn print_header() {
    println!();
    println!(
        "| case | sessions | server RSS before → after (HWM) | KB per session | × raw WebSocket | heap bytes per session | heap blocks per session | opened per s (all in) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
}

/// One case's row, as soon as it is measured; `floor` is the raw WebSocket's KB.
fn print_row(case: &Case, floor: f64) {
    let ratio = if floor > 0.0 {
        format!("{:.1}×", case.kb_per_session() / floor)
    } else {
        "–".to_owned()
    };
    println!(
        "| {} | {} | {:.1} → {:.1} MB ({:.1} MB) | {:.1} | {ratio} | {:.0} | {:.1} | {:.0} ({}) |",
        case.name,
        case.sessions,
        case.before.rss_kb as f64 / 1024.0,
        case.after.rss_kb as f64 / 1024.0,
        case.after.hwm_kb as f64 / 1024.0,
        case.kb_per_session(),
        case.heap_per_session(),
        case.blocks_per_session(),
        case.sessions as f64 / case.open_time.as_secs_f64(),
        report::human(case.open_time),
    );
}

/// What each case's sessions hold, by allocation size.
fn print_classes(cases: &[Case]) {
    for case in cases {
        println!();
        println!(
            "{}: live heap blocks per session by size (what a session holds)",
            case.name
        );
        println!("| size up to | blocks per session | bytes per session |");
        println!("|---|---|---|");
        let pairs = case.before.classes.iter().zip(&case.after.classes);
        for (class, (before, after)) in pairs.enumerate() {
            let blocks = (after.0 - before.0) as f64 / case.sessions as f64;
            let bytes = (after.1 - before.1) as f64 / case.sessions as f64;
            if bytes.abs() >= 16.0 {
                println!("| {} B | {blocks:.2} | {bytes:.0} |", 1u64 << class);
            }
        }
    }
    println!();
    println!(
        "KB per session: (RSS after − RSS before) / sessions, the server process's own; heap: \
         its live allocated bytes (a counting allocator), the part of RSS sessions hold"
    );
}
