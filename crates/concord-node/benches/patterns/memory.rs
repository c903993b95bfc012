//! Memory per idle subscription. The server runs in a child process (this binary again,
//! `--serve node|raw N`) so that its memory is its own: `VmRSS` from `/proc`, and the live
//! heap bytes a counting global allocator reports (counting only in the child).
//!
//! - node: `N` interface sessions (0-RTT) held idle, then each subscribes to the event;
//! - raw: `N` idle WebSockets to `/echo`, and in a second child `N` WebSockets to
//!   `/broadcast`, each holding a broadcast receiver in its handler task.

use std::time::Duration;

use crate::limits::SPARE;
use crate::server_process::{self, ServerProcess, Stats};
use crate::servers::{raw, subscribe_each, want, Provider, Requester};
use crate::{counting, descriptors, open, BoxError, FEWER};

/// How long the server is left to settle before a reading.
const SETTLE: Duration = Duration::from_millis(1000);

/// Serves `what` on loopback (child side), answering the parent's `stats` lines
/// ([`server_process::answer_stats`]) until stdin closes.
pub async fn serve(what: &str, sessions: usize) -> Result<(), BoxError> {
    counting::start();
    descriptors::raise_limit(sessions + SPARE, FEWER)?;
    let (url, _keep) = match what {
        "node" => {
            let provider = Provider::start(sessions).await?;
            (provider.url().to_owned(), Some(provider))
        }
        "raw" => (raw::serve().await?.0, None),
        other => return Err(format!("--serve {other:?}: expected node or raw").into()),
    };
    server_process::answer_stats(url).await
}

/// What one step added, per connection.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    pub kb: f64,
    pub heap: f64,
}

impl Step {
    fn between(before: &Stats, after: &Stats, count: usize) -> Self {
        Self {
            kb: (after.rss_kb as f64 - before.rss_kb as f64) / count as f64,
            heap: (after.heap.bytes - before.heap.bytes) as f64 / count as f64,
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
    let mut server = ServerProcess::start("raw", sessions, SETTLE).await?;
    let before = server.stats().await?;
    let sockets = open::websockets(&format!("{}/{route}", server.url), sessions).await?;
    let after = server.stats().await?;
    drop(sockets);
    server.stop().await?;
    Ok(Step::between(&before, &after, sessions))
}

async fn node_case(sessions: usize) -> Result<(Step, Step), BoxError> {
    let mut server = ServerProcess::start("node", sessions, SETTLE).await?;
    let requester = Requester::new()?;
    let first = requester.node.connect_with(&server.url, want()).await?;
    first.close().await;
    let before = server.stats().await?;
    let connections = requester.connect_all(&server.url, sessions).await?;
    let idle = server.stats().await?;
    let subscriptions = subscribe_each(&connections).await?;
    let subscribed = server.stats().await?;
    drop(subscriptions);
    open::close_all(connections).await;
    server.stop().await?;
    Ok((
        Step::between(&before, &idle, sessions),
        Step::between(&idle, &subscribed, sessions),
    ))
}
