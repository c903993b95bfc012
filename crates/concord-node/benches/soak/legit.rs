//! The legitimate caller: a Concord requester that connects and calls, again and again,
//! from 127.0.0.1 while an attack runs from other addresses; in the phase where every
//! attack runs at once it also listens to the provider's event and talks over its voice
//! stream, on the provider's interface protocol. A signed caller ([`Caller::signed`])
//! does the same calls with DIDs of its own, their documents served by its nodes on
//! 127.0.0.1, beside the DID attack.

use std::time::{Duration, Instant};

use concord_fixtures::{catalogue, weather};
use concord_node::{Keys, Limits, Node, Notification, Server, Want};
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::watch;
use tracing::Instrument;

use crate::provider::WORK;
use crate::steps::{self, StepTimes, Steps};
use crate::BoxError;

/// Every affordance of the provider's interface.
fn interface() -> Want {
    Want::interface([
        weather::GET_WEATHER,
        weather::FORECAST_REPORT,
        weather::LOG_FEEDBACK,
        weather::TALK,
        weather::USER_FEEDBACK_RECEIVED,
        weather::MODEL_CONFIGURATION,
        WORK,
    ])
}

/// Voice frames one stream round trip sends (and expects back).
const FRAMES: usize = 10;

/// What the legitimate listener got: events, gaps, how often it had to reconnect.
#[derive(Debug, Default)]
pub struct Listened {
    pub events: u64,
    pub gaps: u64,
    pub sessions: u32,
    pub failures: Vec<String>,
}

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
    /// Where the attempts' time went, step by step (the calls only).
    pub steps: StepTimes,
}

impl Served {
    /// The share of attempts served, in percent.
    pub fn share(&self) -> f64 {
        if self.attempts == 0 {
            return 0.0;
        }
        100.0 * f64::from(self.served) / f64::from(self.attempts)
    }

    /// Runs one attempt within [`ATTEMPT_DEADLINE`] and counts it: served with its time
    /// since `started`, or the reason it was not (`late` when it ran out of time).
    async fn record(
        &mut self,
        started: Instant,
        attempt: impl std::future::Future<Output = Result<(), BoxError>>,
        late: &str,
    ) {
        self.attempts += 1;
        match tokio::time::timeout(ATTEMPT_DEADLINE, attempt).await {
            Ok(Ok(())) => {
                self.served += 1;
                self.times.push(started.elapsed());
            }
            Ok(Err(error)) => note_failure(&mut self.failures, error.to_string()),
            Err(_) => note_failure(
                &mut self.failures,
                format!("{late} within {ATTEMPT_DEADLINE:?}"),
            ),
        }
    }

    /// Counts one of the caller's attempts and its steps.
    fn count(&mut self, attempt: Attempt) {
        self.attempts += 1;
        self.steps.add(&attempt.steps, attempt.outcome.is_ok());
        match attempt.outcome {
            Ok(time) => {
                self.served += 1;
                self.times.push(time);
            }
            Err(failure) => note_failure(&mut self.failures, failure),
        }
    }

    /// The median time to an answer.
    pub fn median(&self) -> Option<Duration> {
        steps::quantile(&self.times, 0.5)
    }

    /// The 95th percentile of the time to an answer.
    pub fn p95(&self) -> Option<Duration> {
        steps::quantile(&self.times, 0.95)
    }
}

/// A requester that keeps its store across attempts: every other attempt reconnects with
/// 0-RTT, the others start from a fresh store and negotiate in full.
pub struct Caller {
    resuming: Node,
    /// Whether it signs its upgrades: the resuming node with its DID, each fresh attempt
    /// with a new DID, which the provider has to resolve.
    signed: bool,
    /// Its attempts are numbered from here (apart from another caller's in this process,
    /// for [`steps`]; even, so that the parity of a number still says fresh or resuming).
    numbers_from: u64,
    /// The resuming node's server when it signs: its DID document is served there.
    _server: Option<Server>,
    _dirs: Vec<tempfile::TempDir>,
}

/// A caller's node with a fresh store in `dir`; when `signed`, with a DID of its own on
/// `localhost`, served from 127.0.0.1 so that the provider can fetch its document.
async fn caller_node(
    dir: &std::path::Path,
    signed: bool,
) -> Result<(Node, Option<Server>), BoxError> {
    let builder = Node::builder("Legitimate caller")
        .data_dir(dir)
        .limits(limits());
    if !signed {
        return Ok((builder.build()?, None));
    }
    let node = builder
        .keys(Keys::generate())
        .security(crate::provider::security())
        .build()?;
    let server = node.serve("127.0.0.1:0").await?;
    Ok((node, Some(server)))
}

fn limits() -> Limits {
    Limits {
        call_timeout: ATTEMPT_DEADLINE,
        ..Limits::default()
    }
}

impl Caller {
    /// The anonymous caller.
    pub async fn new() -> Result<Self, BoxError> {
        Self::with(false, 0).await
    }

    /// The signed caller: its attempts are numbered apart from the anonymous one's.
    pub async fn signed() -> Result<Self, BoxError> {
        Self::with(true, 1 << 32).await
    }

    async fn with(signed: bool, numbers_from: u64) -> Result<Self, BoxError> {
        let dir = tempfile::tempdir()?;
        let (resuming, server) = caller_node(dir.path(), signed).await?;
        Ok(Self {
            resuming,
            signed,
            numbers_from,
            _server: server,
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

    /// The provider's interface negotiated once; returns its hash (the one the interface
    /// attacks resume).
    pub async fn first_interface(&self, url: &str) -> Result<String, BoxError> {
        let connection = self.resuming.connect_with(url, interface()).await?;
        let hash = connection.info().hash.to_string();
        connection.close().await;
        Ok(hash)
    }

    /// Listens to the provider's event until `stop`, resuming from the last event seen
    /// whenever its session ends.
    pub async fn listen(&self, url: &str, mut stop: watch::Receiver<bool>) -> Listened {
        let mut listened = Listened::default();
        let mut last_seen = None;
        while !*stop.borrow() {
            listened.sessions += 1;
            let subscribed = async {
                let connection = self.resuming.connect_with(url, interface()).await?;
                let subscription = connection
                    .subscribe(weather::USER_FEEDBACK_RECEIVED, last_seen)
                    .await?;
                Ok::<_, BoxError>((connection, subscription))
            };
            let (connection, mut subscription) =
                match tokio::time::timeout(ATTEMPT_DEADLINE, subscribed).await {
                    Ok(Ok(subscribed)) => subscribed,
                    Ok(Err(error)) => {
                        note_failure(&mut listened.failures, error.to_string());
                        continue;
                    }
                    Err(_) => {
                        note_failure(
                            &mut listened.failures,
                            format!("not subscribed within {ATTEMPT_DEADLINE:?}"),
                        );
                        continue;
                    }
                };
            loop {
                let notification = tokio::select! {
                    notification = subscription.next() => notification,
                    _ = stop.changed() => break,
                };
                match notification {
                    Some(Notification::Event { id, .. }) => {
                        listened.events += 1;
                        last_seen = Some(id);
                    }
                    Some(Notification::Gap { to, .. }) => {
                        listened.gaps += 1;
                        last_seen = Some(to);
                    }
                    Some(_) => {}
                    None => {
                        note_failure(&mut listened.failures, "the subscription ended".into());
                        break;
                    }
                }
            }
            connection.close().await;
        }
        listened
    }

    /// Talks over the voice stream until `stop`: one round trip of [`FRAMES`] frames every
    /// half second, each on a session resumed by 0-RTT.
    pub async fn talk(&self, url: &str, mut stop: watch::Receiver<bool>) -> Served {
        let mut served = Served::default();
        while !*stop.borrow() {
            let started = Instant::now();
            let attempt = async {
                let connection = self.resuming.connect_with(url, interface()).await?;
                let (sender, mut receiver) = connection
                    .open_stream(weather::TALK, serde_json::json!({}))
                    .await?;
                for _ in 0..FRAMES {
                    sender.send(vec![1; weather::VOICE_FRAME_BYTES]).await?;
                }
                sender.finish().await?;
                let mut bytes = 0;
                while let Some(piece) = receiver.next().await {
                    bytes += piece?.len();
                }
                connection.close().await;
                if bytes < FRAMES * weather::VOICE_FRAME_BYTES / 2 {
                    return Err(format!("{bytes} bytes came back").into());
                }
                Ok::<(), BoxError>(())
            };
            served.record(started, attempt, "no round trip").await;
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(500)) => {}
                _ = stop.changed() => {}
            }
        }
        served
    }

    /// Calls until `stop`, alternating full negotiations and 0-RTT reconnects: an attempt
    /// starts every [`ATTEMPT_EVERY`] without waiting for the previous ones, at most
    /// [`IN_FLIGHT`] at once; the attempts under way when `stop` comes are awaited and
    /// counted.
    pub async fn run(&self, url: &str, mut stop: watch::Receiver<bool>) -> Served {
        let mut served = Served::default();
        let mut running = FuturesUnordered::new();
        let mut ticks = tokio::time::interval(ATTEMPT_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut n = 0_u64;
        while !*stop.borrow() {
            tokio::select! {
                _ = ticks.tick(), if running.len() < IN_FLIGHT => {
                    n += 1;
                    running.push(self.attempt(url, self.numbers_from + n));
                }
                Some(attempt) = running.next(), if !running.is_empty() => served.count(attempt),
                _ = stop.changed() => {}
            }
        }
        while let Some(attempt) = running.next().await {
            served.count(attempt);
        }
        served
    }

    /// One attempt (number `n`) within [`ATTEMPT_DEADLINE`]: the description, the
    /// session (a fresh store for odd `n`, a full negotiation, and for a signed caller a
    /// new DID; 0-RTT for even `n`), one call; with the time each step took.
    async fn attempt(&self, url: &str, n: u64) -> Attempt {
        let started = Instant::now();
        let mut steps = Steps::default();
        let attempt = async {
            let fresh;
            let node = if n.is_multiple_of(2) {
                &self.resuming
            } else {
                let dir = tempfile::tempdir()?;
                let (node, server) = caller_node(dir.path(), self.signed).await?;
                fresh = (node, server, dir);
                &fresh.0
            };
            let begun = Instant::now();
            let described = node.describe(url).await?;
            let described_at = Instant::now();
            steps.0.push(described_at - begun);
            let connection = node
                .connect_described(&described, Want::action(catalogue::ACTION))
                .await;
            let ready_at = Instant::now();
            if let Some(hello_at) = steps::take_hello(n) {
                steps
                    .0
                    .push(hello_at.saturating_duration_since(described_at));
                if connection.is_ok() {
                    steps.0.push(ready_at.saturating_duration_since(hello_at));
                }
            }
            let connection = connection?;
            if self.signed && connection.info().signed_as.is_none() {
                return Err("the signed caller's upgrade went unsigned".into());
            }
            let index = usize::try_from(n).unwrap_or(usize::MAX);
            connection
                .call(catalogue::ACTION, catalogue::input(index))
                .await?;
            if steps.0.len() == 3 {
                steps.0.push(ready_at.elapsed());
            }
            connection.close().await;
            Ok::<(), BoxError>(())
        }
        .instrument(tracing::info_span!("attempt", n));
        let outcome = match tokio::time::timeout(ATTEMPT_DEADLINE, attempt).await {
            Ok(Ok(())) => Ok(started.elapsed()),
            Ok(Err(error)) => Err(error.to_string()),
            Err(_) => Err(format!("no answer within {ATTEMPT_DEADLINE:?}")),
        };
        // An attempt that ran out of time after its hello leaves its mark behind.
        steps::take_hello(n);
        Attempt { outcome, steps }
    }
}

/// How often the caller starts an attempt.
pub const ATTEMPT_EVERY: Duration = Duration::from_millis(100);

/// How many of the caller's attempts may be under way at once.
pub const IN_FLIGHT: usize = 4;

/// One attempt's outcome (its time, or why it failed) and its steps.
struct Attempt {
    outcome: Result<Duration, String>,
    steps: Steps,
}

/// Keeps the first three distinct failures, to say why.
fn note_failure(failures: &mut Vec<String>, failure: String) {
    if failures.len() < 3 && !failures.contains(&failure) {
        failures.push(failure);
    }
}
