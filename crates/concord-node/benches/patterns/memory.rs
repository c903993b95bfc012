//! Memory per idle subscription. The server runs in a child process (this binary again,
//! `--serve node|raw N`) so that its memory is its own: `VmRSS` from `/proc`, and the live
//! heap bytes a counting global allocator reports (counting only in the child).
//!
//! - node: `N` interface sessions (0-RTT) held idle, then each subscribes to the event;
//! - raw: `N` idle WebSockets to `/echo`, and in a second child `N` WebSockets to
//!   `/broadcast`, each holding a broadcast receiver in its handler task.

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::time::Duration;

use concord_fixtures::weather;
use futures_util::{stream, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::fanout::OPENING_AT_ONCE;
use crate::servers::{raw, want, Provider, Requester, SPARE};
use crate::BoxError;

/// Counts the heap bytes in use, over the system allocator, once [`COUNTING`] is on.
pub struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the counter is only
// read for the report.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() && COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        unsafe { System.dealloc(pointer, layout) };
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        }
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if !moved.is_null() && COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        moved
    }
}

/// How long the server is left to settle before a reading.
const SETTLE: Duration = Duration::from_millis(1000);

/// Serves `what` on loopback (child side): prints `URL <url>`, then answers each `stats`
/// line with `STATS <rss kB> <heap bytes>` until stdin closes.
pub async fn serve(what: &str, sessions: usize) -> Result<(), BoxError> {
    COUNTING.store(true, Ordering::Relaxed);
    crate::raise_descriptor_limit(sessions + SPARE)?;
    let (url, _keep) = match what {
        "node" => {
            let provider = Provider::start(sessions).await?;
            (provider.url().to_owned(), Some(provider))
        }
        "raw" => (raw::serve().await?.0, None),
        other => return Err(format!("--serve {other:?}: expected node or raw").into()),
    };
    tokio::task::spawn_blocking(move || answer_stats(&url)).await?
}

fn answer_stats(url: &str) -> Result<(), BoxError> {
    use std::io::{BufRead, Write};
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "URL {url}")?;
    stdout.flush()?;
    for line in std::io::stdin().lock().lines() {
        if line?.trim() == "stats" {
            writeln!(
                stdout,
                "STATS {} {}",
                rss_kb()?,
                LIVE.load(Ordering::Relaxed)
            )?;
            stdout.flush()?;
        }
    }
    Ok(())
}

fn rss_kb() -> Result<u64, BoxError> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .ok_or("no VmRSS in /proc/self/status")?;
    Ok(line
        .split_whitespace()
        .nth(1)
        .ok_or("no VmRSS value")?
        .parse()?)
}

/// A server child process and its pipes.
struct ServerProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: tokio::io::Lines<BufReader<ChildStdout>>,
    url: String,
}

/// One reading of the server's memory.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    pub rss_kb: u64,
    pub heap: i64,
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
        let [_, rss, heap] = fields.as_slice() else {
            return Err(format!("the server process said {line:?}").into());
        };
        Ok(Stats {
            rss_kb: rss.parse()?,
            heap: heap.parse()?,
        })
    }

    async fn stop(mut self) -> Result<(), BoxError> {
        drop(self.stdin);
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            self.child.kill().await?;
        }
        Ok(())
    }
}

/// What one step added, per connection.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    pub kb: f64,
    pub heap: f64,
}

impl Step {
    fn between(before: Stats, after: Stats, count: usize) -> Self {
        Self {
            kb: (after.rss_kb as f64 - before.rss_kb as f64) / count as f64,
            heap: (after.heap - before.heap) as f64 / count as f64,
        }
    }
}

/// The memory figures.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    pub raw_idle: Step,
    pub raw_subscribed: Step,
    pub node_idle: Step,
    pub node_subscription: Step,
}

pub async fn measure(sessions: usize) -> Result<Memory, BoxError> {
    let raw_idle = raw_case(sessions, "echo").await?;
    let raw_subscribed = raw_case(sessions, "broadcast").await?;
    let (node_idle, node_subscription) = node_case(sessions).await?;
    Ok(Memory {
        raw_idle,
        raw_subscribed,
        node_idle,
        node_subscription,
    })
}

async fn raw_case(sessions: usize, route: &str) -> Result<Step, BoxError> {
    let mut server = ServerProcess::start("raw", sessions).await?;
    let before = server.stats().await?;
    let url = format!("{}/{route}", server.url);
    let sockets: Vec<_> = stream::iter(0..sessions)
        .map(|_| {
            let url = url.clone();
            async move { tokio_tungstenite::connect_async(url.as_str()).await }
        })
        .buffer_unordered(OPENING_AT_ONCE)
        .collect()
        .await;
    let sockets = sockets.into_iter().collect::<Result<Vec<_>, _>>()?;
    let after = server.stats().await?;
    drop(sockets);
    server.stop().await?;
    Ok(Step::between(before, after, sessions))
}

async fn node_case(sessions: usize) -> Result<(Step, Step), BoxError> {
    let mut server = ServerProcess::start("node", sessions).await?;
    let requester = Requester::new()?;
    let first = requester.node.connect_with(&server.url, want()).await?;
    first.close().await;
    let before = server.stats().await?;
    let url = server.url.clone();
    let connections: Vec<_> = stream::iter(0..sessions)
        .map(|_| {
            let (node, url) = (requester.node.clone(), url.clone());
            async move { node.connect_with(&url, want()).await }
        })
        .buffer_unordered(OPENING_AT_ONCE)
        .collect()
        .await;
    let connections = connections.into_iter().collect::<Result<Vec<_>, _>>()?;
    let idle = server.stats().await?;
    let subscriptions: Vec<_> = stream::iter(connections.iter())
        .map(|connection| connection.subscribe(weather::USER_FEEDBACK_RECEIVED, None))
        .buffer_unordered(OPENING_AT_ONCE)
        .collect()
        .await;
    let subscriptions = subscriptions.into_iter().collect::<Result<Vec<_>, _>>()?;
    let subscribed = server.stats().await?;
    drop(subscriptions);
    stream::iter(connections)
        .for_each_concurrent(OPENING_AT_ONCE, |connection| async move {
            connection.close().await;
        })
        .await;
    server.stop().await?;
    Ok((
        Step::between(before, idle, sessions),
        Step::between(idle, subscribed, sessions),
    ))
}
