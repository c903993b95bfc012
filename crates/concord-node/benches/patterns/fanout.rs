//! Event fan-out: one provider, `subscribers` connections each subscribed, `events`
//! published at once per round; events delivered per second until every subscriber has
//! them all. The floor: a tokio broadcast channel feeding as many raw WebSockets the same
//! JSON message.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use concord_fixtures::weather;
use concord_node::{Connection, Notification, Subscription};
use futures_util::stream::{self, SelectAll};
use futures_util::StreamExt;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

use crate::servers::{event_message, feedback, raw, subscribe_each, want, Provider, Requester};
use crate::{open, BoxError};

/// How long one round may take before it counts as lost.
const ROUND_TIMEOUT: Duration = Duration::from_secs(30);

/// Deliveries and losses, counted by the reading tasks.
#[derive(Default)]
pub struct Counts {
    pub delivered: AtomicU64,
    pub lost: AtomicU64,
}

impl Counts {
    pub fn seen(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed) + self.lost.load(Ordering::Relaxed)
    }
}

/// One round's figures.
#[derive(Debug, Clone, Copy)]
pub struct Round {
    pub per_second: f64,
    pub elapsed: Duration,
    pub lost: u64,
}

/// Waits until `counts` saw `target` deliveries (or losses), from `started`.
pub async fn wait_for(
    counts: &Counts,
    target: u64,
    started: Instant,
    lost_before: u64,
) -> Result<Round, BoxError> {
    loop {
        if counts.seen() >= target {
            return Ok(Round {
                per_second: 0.0,
                elapsed: started.elapsed(),
                lost: counts.lost.load(Ordering::Relaxed) - lost_before,
            });
        }
        if started.elapsed() > ROUND_TIMEOUT {
            return Err(format!(
                "a fan-out round timed out: {} of {target} deliveries",
                counts.seen()
            )
            .into());
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

/// Splits `items` into `groups` nearly equal parts.
pub fn groups<T>(items: Vec<T>, groups: usize) -> Vec<Vec<T>> {
    let mut out: Vec<Vec<T>> = (0..groups).map(|_| Vec::new()).collect();
    for (i, item) in items.into_iter().enumerate() {
        out[i % groups].push(item);
    }
    out
}

/// The node side: its subscribers, read by a few tasks.
pub struct NodeFanout {
    provider: Provider,
    _requester: Requester,
    connections: Vec<Connection>,
    counts: Arc<Counts>,
    readers: Vec<JoinHandle<()>>,
    subscribers: u64,
}

impl NodeFanout {
    pub async fn start(subscribers: usize, readers: usize) -> Result<Self, BoxError> {
        let provider = Provider::start(subscribers).await?;
        let requester = Requester::new()?;
        let first = requester.node.connect_with(provider.url(), want()).await?;
        first.close().await;
        let connections = requester.connect_all(provider.url(), subscribers).await?;
        let subscriptions = subscribe_each(&connections).await?;
        let counts = Arc::new(Counts::default());
        let readers = groups(subscriptions, readers)
            .into_iter()
            .map(|group| tokio::spawn(read_subscriptions(group, Arc::clone(&counts))))
            .collect();
        Ok(Self {
            provider,
            _requester: requester,
            connections,
            counts,
            readers,
            subscribers: subscribers as u64,
        })
    }

    /// Publishes `events` at once; waits for every delivery.
    pub async fn round(&self, events: u64) -> Result<Round, BoxError> {
        let publisher = self.provider.publisher();
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

    pub async fn stop(self) {
        for reader in &self.readers {
            reader.abort();
        }
        open::close_all(self.connections).await;
    }
}

async fn read_subscriptions(subscriptions: Vec<Subscription>, counts: Arc<Counts>) {
    let mut all: SelectAll<_> = stream::select_all(subscriptions.into_iter().map(|subscription| {
        Box::pin(stream::unfold(
            subscription,
            |mut subscription| async move {
                let notification = subscription.next().await?;
                Some((notification, subscription))
            },
        ))
    }));
    while let Some(notification) = all.next().await {
        match notification {
            Notification::Event { .. } => {
                counts.delivered.fetch_add(1, Ordering::Relaxed);
            }
            Notification::Gap { from, to, .. } => {
                counts.lost.fetch_add(to - from + 1, Ordering::Relaxed);
            }
            _ => {}
        }
    }
}

/// The floor: raw WebSockets fed by a broadcast channel.
pub struct RawFanout {
    broadcast: raw::Broadcast,
    counts: Arc<Counts>,
    readers: Vec<JoinHandle<()>>,
    subscribers: u64,
    next_id: std::sync::atomic::AtomicU64,
}

impl RawFanout {
    pub async fn start(subscribers: usize, readers: usize) -> Result<Self, BoxError> {
        let (base, broadcast) = raw::serve().await?;
        let sockets = open::websockets(&format!("{base}/broadcast"), subscribers).await?;
        // Every socket's handler has subscribed before its upgrade answered.
        let counts = Arc::new(Counts::default());
        let readers = groups(sockets, readers)
            .into_iter()
            .map(|group| {
                let counts = Arc::clone(&counts);
                tokio::spawn(async move {
                    let mut all = stream::select_all(group);
                    while let Some(Ok(message)) = all.next().await {
                        if let Message::Text(text) = message {
                            // Decoded, as the node's requester decodes each message.
                            // "lagged N": the broadcast channel dropped N for this socket.
                            let lagged = text.as_str().strip_prefix("lagged ");
                            match lagged.and_then(|n| n.parse::<u64>().ok()) {
                                Some(n) => counts.lost.fetch_add(n, Ordering::Relaxed),
                                None => {
                                    match serde_json::from_str::<serde_json::Value>(text.as_str()) {
                                        Ok(_) => counts.delivered.fetch_add(1, Ordering::Relaxed),
                                        Err(_) => counts.lost.fetch_add(1, Ordering::Relaxed),
                                    }
                                }
                            };
                        }
                    }
                })
            })
            .collect();
        Ok(Self {
            broadcast,
            counts,
            readers,
            subscribers: subscribers as u64,
            next_id: AtomicU64::new(1),
        })
    }

    /// Sends `events` at once; waits for every delivery.
    pub async fn round(&self, events: u64) -> Result<Round, BoxError> {
        let data: Vec<_> = (0..events).map(feedback).collect();
        let target = self.counts.seen() + events * self.subscribers;
        let lost_before = self.counts.lost.load(Ordering::Relaxed);
        let started = Instant::now();
        for data in data {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            self.broadcast
                .send(event_message(id, &data).into())
                .map_err(|_| "no raw subscriber")?;
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
