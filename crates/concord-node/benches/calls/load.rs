//! Closed-loop load: each connection makes one call at a time, back to back, until the
//! deadline; every call's latency is kept.

use std::error::Error;
use std::time::{Duration, Instant};

use concord_node::Connection;
use serde_json::json;

use crate::catalogue::{Catalogue, ACTION};
use crate::echo;

type BoxError = Box<dyn Error + Send + Sync>;

/// A connection of either kind.
pub enum Client {
    Node(Connection),
    Echo(Box<echo::Client>),
}

impl Client {
    /// A new connection to the echo at `url`.
    pub async fn echo(url: &str, wire: &echo::Wire) -> Result<Self, BoxError> {
        let client = echo::Client::connect(url, wire.clone()).await?;
        Ok(Client::Echo(Box::new(client)))
    }

    async fn call(&mut self, catalogue: &Catalogue, n: usize) -> Result<(), BoxError> {
        let id = catalogue.id(n);
        let product = match self {
            Client::Node(connection) => connection.call(ACTION, json!({"productId": id})).await?,
            Client::Echo(client) => client.call(id).await?,
        };
        if product["productId"] != id {
            return Err(format!("asked for {id}, got {product}").into());
        }
        Ok(())
    }

    pub async fn close(self) {
        match self {
            Client::Node(connection) => connection.close().await,
            Client::Echo(client) => client.close().await,
        }
    }
}

/// What one load run measured.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub calls_per_second: f64,
    pub p50: Duration,
    pub p99: Duration,
    /// Process CPU time (user + system, both sides) per call.
    pub cpu_per_call: Duration,
}

/// Runs every client for `duration`; gives the clients back with what was measured.
pub async fn run(
    clients: Vec<Client>,
    catalogue: &Catalogue,
    duration: Duration,
) -> Result<(Vec<Client>, Sample), BoxError> {
    let cpu_before = process_cpu_time();
    let started = Instant::now();
    let deadline = started + duration;
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(index, mut client)| {
            let catalogue = catalogue.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(16 * 1024);
                let mut n = index * 7;
                while Instant::now() < deadline {
                    let call_started = Instant::now();
                    client.call(&catalogue, n).await?;
                    latencies.push(call_started.elapsed());
                    n += 1;
                }
                Ok::<_, BoxError>((client, latencies))
            })
        })
        .collect();
    let mut clients = Vec::with_capacity(tasks.len());
    let mut latencies = Vec::new();
    for task in tasks {
        let (client, mut measured) = task.await??;
        clients.push(client);
        latencies.append(&mut measured);
    }
    let elapsed = started.elapsed();
    let cpu = process_cpu_time().saturating_sub(cpu_before);
    latencies.sort_unstable();
    let sample = Sample {
        calls_per_second: latencies.len() as f64 / elapsed.as_secs_f64(),
        p50: percentile(&latencies, 0.50),
        p99: percentile(&latencies, 0.99),
        cpu_per_call: cpu / u32::try_from(latencies.len().max(1))?,
    };
    Ok((clients, sample))
}

/// The `q` quantile of sorted durations (nearest rank).
pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// User + system CPU time of this process so far.
#[cfg(unix)]
pub fn process_cpu_time() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid out-pointer; RUSAGE_SELF is always supported.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let time = |t: libc::timeval| {
        Duration::new(t.tv_sec as u64, 0) + Duration::from_micros(t.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// Not measured elsewhere.
#[cfg(not(unix))]
pub fn process_cpu_time() -> Duration {
    Duration::ZERO
}
