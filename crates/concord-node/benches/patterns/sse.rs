//! Event fan-out over the WoT HTTP binding's Server-Sent Events: the same provider and
//! rounds as `fanout.rs`, its `subscribers` each a `GET /events/{name}/subscription` with
//! `Accept: text/event-stream` on a plain TCP connection, read by a few tasks that count
//! the messages (one `\n\n`-ended block each) as they arrive.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use concord_fixtures::weather;
use concord_node::{Limits, Node, Server};
use futures_util::stream::{self, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::fanout::{groups, wait_for, Counts, Round};
use crate::servers::feedback;
use crate::{limits, BoxError};

/// The node side over SSE: its subscribers, read by a few tasks.
pub struct SseFanout {
    node: Node,
    _server: Server,
    _dir: tempfile::TempDir,
    counts: Arc<Counts>,
    readers: Vec<JoinHandle<()>>,
    subscribers: u64,
}

impl SseFanout {
    pub async fn start(subscribers: usize, readers: usize, events: u64) -> Result<Self, BoxError> {
        let dir = tempfile::tempdir()?;
        let queue = usize::try_from(events)?.saturating_mul(2).max(256);
        let node = weather::agent(Node::builder(weather::TITLE))
            .data_dir(dir.path())
            .limits(Limits {
                // A whole round queued per subscriber, as the interface session's queue
                // holds it: a slow reader is measured, not closed.
                http_sse_queue: queue,
                http_sse_queue_bytes: queue * 1024,
                ..limits::provider(subscribers)
            })
            .build()?;
        let server = node.serve("127.0.0.1:0").await?;
        let address = server.local_addr();
        let path = format!("/events/{}/subscription", weather::USER_FEEDBACK_RECEIVED);
        let mut connections = Vec::with_capacity(subscribers);
        for _ in 0..subscribers {
            let mut tcp = TcpStream::connect(address).await?;
            let head = format!(
                "GET {path} HTTP/1.1\r\nHost: {address}\r\nAccept: text/event-stream\r\n\r\n"
            );
            tcp.write_all(head.as_bytes()).await?;
            // The answer's head: the subscription is made before it is sent.
            let mut seen = Vec::new();
            let mut byte = [0u8; 1];
            while !seen.ends_with(b"\r\n\r\n") {
                if tcp.read(&mut byte).await? == 0 {
                    return Err("an SSE subscription closed before its head".into());
                }
                seen.push(byte[0]);
            }
            if !seen.starts_with(b"HTTP/1.1 200") {
                return Err(format!(
                    "an SSE subscription was refused: {}",
                    String::from_utf8_lossy(&seen)
                )
                .into());
            }
            connections.push(tcp);
        }
        let counts = Arc::new(Counts::default());
        let readers = groups(connections, readers)
            .into_iter()
            .map(|group| tokio::spawn(read_streams(group, Arc::clone(&counts))))
            .collect();
        Ok(Self {
            node,
            _server: server,
            _dir: dir,
            counts,
            readers,
            subscribers: subscribers as u64,
        })
    }

    /// Publishes `events` at once; waits for every delivery.
    pub async fn round(&self, events: u64) -> Result<Round, BoxError> {
        let publisher = self.node.publisher();
        let data: Vec<_> = (0..events).map(feedback).collect();
        let target = self.counts.seen() + events * self.subscribers;
        let lost_before = self.counts.lost.load(Ordering::Relaxed);
        let started = Instant::now();
        for data in data {
            publisher.publish(weather::USER_FEEDBACK_RECEIVED, data)?;
        }
        let mut round = wait_for(&self.counts, target, started, lost_before).await?;
        round.per_second = (events * self.subscribers) as f64 / round.elapsed.as_secs_f64();
        Ok(round)
    }

    pub fn stop(self) {
        for reader in &self.readers {
            reader.abort();
        }
    }
}

/// Counts the messages of every stream in `group`: blocks ending in `\n\n` that carry
/// `data:` (a comment would be a keep-alive, a gap or an end).
async fn read_streams(group: Vec<TcpStream>, counts: Arc<Counts>) {
    let mut all = stream::select_all(group.into_iter().map(|tcp| {
        Box::pin(stream::unfold(
            (tcp, Vec::new()),
            |(mut tcp, mut pending)| async move {
                let mut buffer = [0u8; 16 * 1024];
                let n = tcp.read(&mut buffer).await.ok().filter(|n| *n > 0)?;
                pending.extend_from_slice(&buffer[..n]);
                let mut messages = 0u64;
                while let Some(end) = pending.windows(2).position(|pair| pair == b"\n\n") {
                    let block: Vec<u8> = pending.drain(..end + 2).collect();
                    if block.windows(5).any(|w| w == b"data:") {
                        messages += 1;
                    }
                }
                Some((messages, (tcp, pending)))
            },
        ))
    }));
    while let Some(messages) = all.next().await {
        counts.delivered.fetch_add(messages, Ordering::Relaxed);
    }
}
