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
//!   4 KiB read buffer, `transport::READ_BUFFER_SIZE`), held idle: KB per raw WebSocket,
//!   the floor;
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
//! the pending hellos, the idle timeout): every connection comes from one address.

#[path = "common/counting.rs"]
mod counting;
#[path = "common/descriptors.rs"]
mod descriptors;
#[path = "common/limits.rs"]
mod limits;
#[path = "common/open.rs"]
mod open;
#[path = "common/report.rs"]
mod report;
#[path = "common/resident.rs"]
mod resident;
#[path = "common/server_process.rs"]
mod server_process;

use std::error::Error;
use std::time::{Duration, Instant};

use concord_fixtures::catalogue;
use concord_node::{Connection, Node, Settlement};
use futures_util::{stream, SinkExt, StreamExt};
use limits::SPARE;
use server_process::{ServerProcess, Stats};

type BoxError = Box<dyn Error + Send + Sync>;

#[global_allocator]
static ALLOCATOR: counting::Counting = counting::Counting;

/// What to run fewer of when the descriptors are short.
const FEWER: &str = "sessions (--sessions)";
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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if let Some((what, sessions)) = server_process::requested()? {
        return runtime.block_on(serve(&what, sessions));
    }
    let options = Options::from_args()?;
    runtime.block_on(run(&options))
}

// ----- the server side (child process) ---------------------------------------------------

/// Serves `what` (`node` or `echo`) on loopback, answering the parent's `stats` lines
/// ([`server_process::answer_stats`]) until stdin closes.
async fn serve(what: &str, sessions: usize) -> Result<(), BoxError> {
    counting::start();
    // The provider's room (`sessions` + SPARE connections), and the spare of its own.
    descriptors::raise_limit(sessions + 2 * SPARE, FEWER)?;
    let dir = tempfile::tempdir()?;
    let (url, _server) = match what {
        "node" => {
            let node = Node::builder("Product agent")
                .description("Product information for a small shop.")
                .data_dir(dir.path())
                .limits(limits::provider(sessions))
                .action(catalogue::action(), catalogue::answer)
                .build()?;
            let server = node.serve("127.0.0.1:0").await?;
            (server.url().to_owned(), Some((node, server)))
        }
        "echo" => (echo::serve().await?, None),
        other => return Err(format!("--serve {other:?}: expected node or echo").into()),
    };
    server_process::answer_stats(url).await
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
        (self.after.heap.bytes - self.before.heap.bytes) as f64 / self.sessions as f64
    }

    fn blocks_per_session(&self) -> f64 {
        (self.after.heap.blocks - self.before.heap.blocks) as f64 / self.sessions as f64
    }
}

async fn run(options: &Options) -> Result<(), BoxError> {
    descriptors::raise_limit(options.sessions + SPARE, FEWER)?;
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
    let mut server = ServerProcess::start("echo", sessions, SETTLE).await?;
    let before = server.stats().await?;
    let started = Instant::now();
    let sockets = open::websockets(&server.url, sessions).await;
    let open_time = started.elapsed();
    let mut sockets = sockets?;
    // Each socket carries one message, as a session carries its hello.
    for socket in sockets.iter_mut().take(1) {
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

async fn resumed_case(sessions: usize) -> Result<Case, BoxError> {
    let mut server = ServerProcess::start("node", sessions, SETTLE).await?;
    let dir = tempfile::tempdir()?;
    let requester = Node::builder("Requester")
        .data_dir(dir.path())
        .limits(limits::requester())
        .build()?;
    let first = requester.connect(&server.url, catalogue::ACTION).await?;
    if first.info().settlement != Settlement::Negotiated {
        return Err("the first connection was not negotiated".into());
    }
    first.close().await;
    let before = server.stats().await?;
    let started = Instant::now();
    let (requester, url) = (&requester, &server.url);
    let connections = open::all(sessions, |_| requester.connect(url, catalogue::ACTION)).await;
    let open_time = started.elapsed();
    let connections = all_settled(connections, &Settlement::Resumed)?;
    check_calls(&connections).await?;
    let after = server.stats().await?;
    open::close_all(connections).await;
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
    connections: Result<Vec<Connection>, impl Into<BoxError>>,
    how: &Settlement,
) -> Result<Vec<Connection>, BoxError> {
    let connections = connections.map_err(Into::into)?;
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
    let mut server = ServerProcess::start("node", 2 * sessions, SETTLE).await?;
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
    let connections: Vec<Result<_, BoxError>> = stream::iter(dirs.iter())
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
    let connections = all_settled(connections.into_iter().collect(), &Settlement::Negotiated)?;
    check_calls(&connections).await?;
    let after = server.stats().await?;
    open::close_all(connections).await;
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
        .limits(limits::requester())
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
        let pairs = case
            .before
            .heap
            .classes
            .iter()
            .zip(&case.after.heap.classes);
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
