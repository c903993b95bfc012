//! The legitimate caller: a Concord requester that connects and calls, again and again,
//! from 127.0.0.1 while an attack runs from other addresses.

use std::time::{Duration, Instant};

use concord_fixtures::catalogue;
use concord_node::{Limits, Node};
use tokio::sync::watch;

use crate::BoxError;

/// How long one attempt (connect, negotiate or resume, call) may take before it counts
/// as not served.
pub const ATTEMPT_DEADLINE: Duration = Duration::from_secs(5);

/// What the legitimate caller got during one phase.
#[derive(Debug, Default)]
pub struct Served {
    pub attempts: u32,
    pub served: u32,
    /// Time from connecting to the call's answer, for the attempts served.
    pub times: Vec<Duration>,
    /// The first failures' messages, to say why.
    pub failures: Vec<String>,
}

impl Served {
    /// The share of attempts served, in percent.
    pub fn share(&self) -> f64 {
        if self.attempts == 0 {
            return 0.0;
        }
        100.0 * f64::from(self.served) / f64::from(self.attempts)
    }

    /// The median time to an answer.
    pub fn median(&self) -> Option<Duration> {
        let mut times = self.times.clone();
        times.sort();
        times.get(times.len() / 2).copied()
    }
}

/// A requester that keeps its store across attempts: every other attempt reconnects with
/// 0-RTT, the others start from a fresh store and negotiate in full.
pub struct Caller {
    resuming: Node,
    _dirs: Vec<tempfile::TempDir>,
}

fn limits() -> Limits {
    Limits {
        call_timeout: ATTEMPT_DEADLINE,
        ..Limits::default()
    }
}

impl Caller {
    pub fn new() -> Result<Self, BoxError> {
        let dir = tempfile::tempdir()?;
        let resuming = Node::builder("Legitimate caller")
            .data_dir(dir.path())
            .limits(limits())
            .build()?;
        Ok(Self {
            resuming,
            _dirs: vec![dir],
        })
    }

    /// One full negotiation with the provider; returns the agreed protocol's hash (the one
    /// the 0-RTT attacks name).
    pub async fn first(&self, url: &str) -> Result<String, BoxError> {
        let connection = self.resuming.connect(url, catalogue::ACTION).await?;
        connection
            .call(catalogue::ACTION, catalogue::input(0))
            .await?;
        let hash = connection.info().hash.to_string();
        connection.close().await;
        Ok(hash)
    }

    /// Calls until `stop`, alternating full negotiations and 0-RTT reconnects.
    pub async fn run(&self, url: &str, mut stop: watch::Receiver<bool>) -> Served {
        let mut served = Served::default();
        let mut n = 0_usize;
        while !*stop.borrow() {
            n += 1;
            let started = Instant::now();
            let attempt = async {
                let fresh;
                let node = if n.is_multiple_of(2) {
                    &self.resuming
                } else {
                    let dir = tempfile::tempdir()?;
                    fresh = (
                        Node::builder("Legitimate caller")
                            .data_dir(dir.path())
                            .limits(limits())
                            .build()?,
                        dir,
                    );
                    &fresh.0
                };
                let connection = node.connect(url, catalogue::ACTION).await?;
                connection
                    .call(catalogue::ACTION, catalogue::input(n))
                    .await?;
                connection.close().await;
                Ok::<(), BoxError>(())
            };
            served.attempts += 1;
            match tokio::time::timeout(ATTEMPT_DEADLINE, attempt).await {
                Ok(Ok(())) => {
                    served.served += 1;
                    served.times.push(started.elapsed());
                }
                Ok(Err(error)) => note(&mut served, error.to_string()),
                Err(_) => note(
                    &mut served,
                    format!("no answer within {ATTEMPT_DEADLINE:?}"),
                ),
            }
            // A caller, not a flood: about ten attempts a second at most.
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = stop.changed() => {}
            }
        }
        served
    }
}

fn note(served: &mut Served, failure: String) {
    if served.failures.len() < 3 && !served.failures.contains(&failure) {
        served.failures.push(failure);
    }
}
