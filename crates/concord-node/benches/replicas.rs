//! What one replica on NATS costs a caller, against the same node on its SQLite store, in
//! the same run: time to the first call's answer on a fresh connection (a full
//! deterministic negotiation; a 0-RTT reconnect) and calls/s on one established connection
//! (calls touch no shared state: they should be unchanged).
//!
//! ```sh
//! CONCORD_NATS_SERVER=…/nats-server cargo bench -p concord-node --bench replicas
//! CONCORD_NATS_SERVER=…/nats-server cargo bench -p concord-node --bench replicas -- --rounds 7 --seconds 2
//! ```
//!
//! Both providers hold one DID (the same keys, as replicas do), so that each connection
//! is a signed upgrade whose nonce is recorded (in NATS for the replica) and a session in
//! the Noise channel; the requesters have DIDs of their own (a provider with a DID resumes
//! only for authenticated callers). The replica keeps protocols, nonces, the consensus
//! registry and progress actions in a nats-server on loopback started here; the other its
//! SQLite file. Each round runs every case on both, in alternating order, so that both
//! see the same contention on a shared machine; the table shows medians over the rounds,
//! and each ratio is the median of the per-round ratios (NATS / SQLite).

use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use concord_fixtures::catalogue::{action, answer, ACTION};
use concord_nats::testing::NatsServer;
use concord_node::{Keys, Limits, Node, NodeBuilder, Security, Server, Settlement};
use serde_json::json;
use tempfile::TempDir;

#[path = "common/report.rs"]
mod report;

type BoxError = Box<dyn Error + Send + Sync>;

struct Options {
    rounds: usize,
    seconds: f64,
    fresh: usize,
    resumed: usize,
}

impl Options {
    fn from_args() -> Result<Self, BoxError> {
        let mut options = Self {
            rounds: 5,
            seconds: 1.0,
            fresh: 3,
            resumed: 10,
        };
        let args: Vec<String> = std::env::args().skip(1).collect();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let mut value = || -> Result<&String, BoxError> {
                args.next()
                    .ok_or_else(|| format!("{arg} needs a value").into())
            };
            match arg.as_str() {
                "--rounds" => options.rounds = value()?.parse()?,
                "--seconds" => options.seconds = value()?.parse()?,
                "--fresh" => options.fresh = value()?.parse()?,
                "--resumed" => options.resumed = value()?.parse()?,
                "--bench" => {}
                other => return Err(format!("unknown option {other}").into()),
            }
        }
        Ok(options)
    }
}

/// Test mode for DIDs on loopback (`localhost` resolves over `http://`).
fn security() -> Security {
    let mut security = Security::default();
    security.resolver.allow_loopback_http = true;
    security
}

/// Every caller is on 127.0.0.1: the per-address limits, made for strangers, are raised.
fn limits() -> Limits {
    Limits {
        call_timeout: Duration::from_secs(10),
        max_sessions_per_address: 4096,
        max_connections_per_address: 8192,
        connection_rate_per_address: 100_000,
        connection_burst_per_address: 100_000,
        request_rate_per_address: 200_000,
        request_burst_per_address: 200_000,
        max_pending_hellos: 4096,
        max_pending_hellos_per_address: 4096,
        ..Limits::default()
    }
}

/// A progress action, run once at the end so that the actions bucket holds a record.
fn render() -> concord_negotiate::ActionSpec {
    let schema = json!({"type": "object", "properties": {"frames": {"type": "integer"}}});
    concord_negotiate::ActionSpec {
        name: "render".into(),
        description: "Renders frames, reporting progress.".into(),
        input: schema.clone(),
        output: schema,
    }
}

/// The provider under test, its server, and a requester that negotiated with it.
struct Side {
    name: &'static str,
    server: Server,
    _provider: Node,
    requester: Node,
    _requester_server: Server,
    _dirs: Vec<TempDir>,
}

const SEED: [u8; 32] = [5; 32];

async fn requester() -> Result<(Node, Server, TempDir), BoxError> {
    let dir = tempfile::tempdir()?;
    let node = Node::builder("Requester")
        .keys(Keys::generate())
        .security(security())
        .data_dir(dir.path())
        .limits(limits())
        .build()?;
    // Its DID document is served before any clock starts.
    let server = node.serve("127.0.0.1:0").await?;
    Ok((node, server, dir))
}

impl Side {
    async fn start(name: &'static str, nats: Option<&str>) -> Result<Self, BoxError> {
        let dir = tempfile::tempdir()?;
        let mut builder: NodeBuilder = Node::builder("Product agent")
            .description("Product information for a small shop.")
            .keys(Keys::from_secret_bytes(&SEED, &SEED))
            .security(security())
            .data_dir(dir.path())
            .limits(limits())
            .action(action(), answer)
            .progress_action(
                render(),
                |input: serde_json::Value, progress: concord_node::ProgressReporter| async move {
                    progress.report(0.5, Some(json!({"frames": 1})));
                    Ok::<_, concord_node::ActionError>(input)
                },
            );
        if let Some(url) = nats {
            let connection =
                concord_nats::Nats::connect(&concord_nats::NatsSettings::new([url])).await?;
            let shared = concord_nats::SharedState::open(
                &connection,
                &concord_nats::Buckets::default(),
                security().replay_ttl,
            )
            .await?;
            let actions = Arc::new(
                concord_nats::NatsActionRecords::open(
                    &connection,
                    concord_nats::DEFAULT_ACTION_BUCKET,
                    concord_nats::DEFAULT_ACTION_MAX_AGE,
                )
                .await?,
            );
            builder = builder
                .protocols(shared.protocols.clone() as _)
                .nonce_store(shared.nonces.clone() as _)
                .consensus_registry(shared.consensus.clone() as _)
                .action_records(Arc::clone(&actions) as _)
                .action_relay(actions as _);
        }
        let provider = builder.build()?;
        let server = provider.serve("127.0.0.1:0").await?;
        let (requester, requester_server, requester_dir) = requester().await?;
        // The protocol the 0-RTT case resumes.
        let first = requester.connect(server.url(), ACTION).await?;
        if first.info().settlement != Settlement::Negotiated {
            return Err(format!("{name}: the first connection did not negotiate").into());
        }
        first.close().await;
        Ok(Self {
            name,
            server,
            _provider: provider,
            requester,
            _requester_server: requester_server,
            _dirs: vec![dir, requester_dir],
        })
    }

    /// Time to the first call's answer: a fresh requester (full negotiation), or ours (0-RTT).
    async fn first_call(&self, fresh: bool) -> Result<Duration, BoxError> {
        let (node, _hosting, _dir) = if fresh {
            let (node, server, dir) = requester().await?;
            (node, Some(server), Some(dir))
        } else {
            (self.requester.clone(), None, None)
        };
        let started = Instant::now();
        let connection = node.connect(self.server.url(), ACTION).await?;
        connection
            .call(ACTION, json!({"productId": "P12345"}))
            .await?;
        let elapsed = started.elapsed();
        let expected = if fresh {
            Settlement::Negotiated
        } else {
            Settlement::Resumed
        };
        if connection.info().settlement != expected {
            return Err(format!(
                "{}: expected {expected:?}, got {:?}",
                self.name,
                connection.info().settlement
            )
            .into());
        }
        connection.close().await;
        Ok(elapsed)
    }

    /// Calls per second on one established connection, back to back, for `seconds`.
    async fn calls_per_second(&self, seconds: f64) -> Result<f64, BoxError> {
        let connection = self.requester.connect(self.server.url(), ACTION).await?;
        for _ in 0..50 {
            connection
                .call(ACTION, json!({"productId": "P12345"}))
                .await?;
        }
        let (started, mut calls) = (Instant::now(), 0_u64);
        let until = Duration::from_secs_f64(seconds);
        while started.elapsed() < until {
            connection
                .call(ACTION, json!({"productId": "P12345"}))
                .await?;
            calls += 1;
        }
        let rate = calls as f64 / started.elapsed().as_secs_f64();
        connection.close().await;
        Ok(rate)
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// One case's figures over the rounds: per round, SQLite's and NATS's value.
#[derive(Default)]
struct Figures {
    sqlite: Vec<f64>,
    nats: Vec<f64>,
}

impl Figures {
    fn push(&mut self, name: &str, value: f64) {
        if name == "sqlite" {
            self.sqlite.push(value);
        } else {
            self.nats.push(value);
        }
    }

    fn row(&self, case: &str, unit: &str, show: impl Fn(f64) -> String) {
        let mut ratios: Vec<f64> = self
            .nats
            .iter()
            .zip(&self.sqlite)
            .map(|(nats, sqlite)| nats / sqlite)
            .collect();
        let (mut sqlite, mut nats) = (self.sqlite.clone(), self.nats.clone());
        println!(
            "{case:<28} {:>14} {:>14} {:>8.2}   ({unit}; per-round ratios {})",
            show(median(&mut sqlite)),
            show(median(&mut nats)),
            median(&mut ratios.clone()),
            {
                ratios.sort_by(f64::total_cmp);
                ratios
                    .iter()
                    .map(|ratio| format!("{ratio:.2}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            }
        );
    }
}

fn main() -> Result<(), BoxError> {
    let options = Options::from_args()?;
    if NatsServer::binary().is_none() {
        println!("replicas: set CONCORD_NATS_SERVER to a nats-server binary; nothing measured");
        return Ok(());
    }
    let nats = NatsServer::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let sides = [
            Side::start("sqlite", None).await?,
            Side::start("nats", Some(&nats.url())).await?,
        ];
        let (mut negotiated, mut resumed, mut rates) =
            (Figures::default(), Figures::default(), Figures::default());
        for round in 0..options.rounds {
            let order: Vec<&Side> = if round % 2 == 0 {
                sides.iter().collect()
            } else {
                sides.iter().rev().collect()
            };
            for side in order {
                let mut fresh = Vec::new();
                for _ in 0..options.fresh {
                    fresh.push(side.first_call(true).await?.as_secs_f64());
                }
                negotiated.push(side.name, median(&mut fresh));
                let mut again = Vec::new();
                for _ in 0..options.resumed {
                    again.push(side.first_call(false).await?.as_secs_f64());
                }
                resumed.push(side.name, median(&mut again));
                rates.push(side.name, side.calls_per_second(options.seconds).await?);
            }
        }
        println!(
            "replicas: {} rounds; load average {}; nats-server on loopback",
            options.rounds,
            report::load_average()
        );
        println!(
            "{:<28} {:>14} {:>14} {:>8}",
            "case", "SQLite", "NATS", "x SQLite"
        );
        let time = |seconds: f64| report::human(Duration::from_secs_f64(seconds));
        negotiated.row("first call, negotiated", "median", time);
        resumed.row("first call, 0-RTT", "median", time);
        rates.row("calls/s, one connection", "calls/s", |rate| {
            format!("{rate:.0}")
        });
        // One progress action on the replica, run to its end (its record stays).
        let want = concord_node::Want::interface(["render"]);
        let on_nats = sides[1]
            .requester
            .connect_with(sides[1].server.url(), want)
            .await?;
        let mut run = on_nats
            .call_with_progress("render", json!({"frames": 2}))
            .await?;
        while let Some(update) = run.next().await {
            if let concord_node::ActionUpdate::Done(done) = update {
                done?;
                break;
            }
        }
        on_nats.close().await;
        // What the replica's state weighs in NATS after the run (every connection a
        // signed upgrade: one nonce each; one protocol per fresh requester).
        let connection =
            concord_nats::Nats::connect(&concord_nats::NatsSettings::new([nats.url()])).await?;
        println!(
            "{:<28} {:>10} {:>12} {:>14}",
            "bucket", "messages", "bytes", "bytes/message"
        );
        for bucket in [
            concord_nats::DEFAULT_PROTOCOL_BUCKET,
            concord_nats::DEFAULT_NONCE_BUCKET,
            concord_nats::DEFAULT_CONSENSUS_BUCKET,
            concord_nats::DEFAULT_ACTION_BUCKET,
        ] {
            let usage = concord_nats::bucket_usage(&connection, bucket).await?;
            println!(
                "{bucket:<28} {:>10} {:>12} {:>14}",
                usage.messages,
                usage.bytes,
                usage.bytes_per_message()
            );
        }
        Ok::<_, BoxError>(())
    })?;
    Ok(())
}
