//! Events across replicas (issue 27): three replicas of the WeatherAgent sharing one
//! JetStream stream (`concord_nats::NatsEventLog`, each replica its own NATS connection,
//! a nats-server on loopback started here) against ONE node with the in-memory event log,
//! in the same run, rounds alternating:
//!
//! - **latency**: one subscriber; an event published on replica C until the subscriber
//!   on replica A has it (and, for the single node, published on it until its subscriber
//!   has it), one at a time: p50/p99, and the publish call alone (the stream's
//!   acknowledgement);
//! - **fan-out**: `--subscribers` (1,000) interface sessions, spread over the three
//!   replicas (or all on the single node), `--burst` (20) events published at once on
//!   replica A per round: the time until the last subscriber has the last event, and
//!   deliveries per second; and the single node with its events paced one stream
//!   acknowledgement apart (the publish p50 measured above), as a replica receives them
//!   from the stream: what the pacing alone costs; and the replicas with the burst
//!   published from as many threads at once (independent publishers, each waiting for its
//!   own acknowledgement only).
//!
//! Ratios are replicas / single node, from the same run. Noisy on a shared machine: run
//! it twice.
//!
//! `CONCORD_NATS_SERVER=…/nats-server cargo bench -p concord-node --bench replica_events [-- --events N --subscribers N --burst N --rounds N]`

#[path = "common/descriptors.rs"]
mod descriptors;
#[path = "common/limits.rs"]
mod limits;
// Shared with the other benches: not every helper is used here.
#[allow(dead_code)]
#[path = "common/open.rs"]
mod open;
#[allow(dead_code)]
#[path = "common/report.rs"]
mod report;

use std::error::Error;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use concord_fixtures::weather;
use concord_nats::testing::NatsServer;
use concord_nats::{EventStream, Nats, NatsEventLog, NatsSettings};
use concord_node::{Connection, Node, Notification, Publisher, Server, Subscription, Want};
use futures_util::stream::{self, StreamExt};
use serde_json::{json, Value};

type BoxError = Box<dyn Error + Send + Sync>;

const EVENT: &str = weather::USER_FEEDBACK_RECEIVED;

struct Options {
    events: usize,
    subscribers: usize,
    burst: u64,
    rounds: usize,
}

impl Options {
    fn from_args() -> Result<Self, BoxError> {
        let mut options = Self {
            events: 300,
            subscribers: 1000,
            burst: 20,
            rounds: 5,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = || args.next().ok_or(format!("{arg} needs a value"));
            match arg.as_str() {
                "--events" => options.events = value()?.parse()?,
                "--subscribers" => options.subscribers = value()?.parse()?,
                "--burst" => options.burst = value()?.parse()?,
                "--rounds" => options.rounds = value()?.parse()?,
                // cargo bench passes --bench.
                _ => {}
            }
        }
        Ok(options)
    }
}

/// One provider: the WeatherAgent, its limits raised for `sessions` sessions from
/// 127.0.0.1, with `log` as its event log (none: the in-memory default).
struct Provider {
    node: Node,
    server: Server,
    _dir: tempfile::TempDir,
}

impl Provider {
    async fn start(sessions: usize, log: Option<NatsEventLog>) -> Result<Self, BoxError> {
        let dir = tempfile::tempdir()?;
        let mut builder = weather::agent(Node::builder(weather::TITLE))
            .data_dir(dir.path())
            .limits(limits::provider(sessions));
        if let Some(log) = log {
            builder = builder.event_log(Arc::new(log));
        }
        let node = builder.build()?;
        let server = node.serve("127.0.0.1:0").await?;
        Ok(Self {
            node,
            server,
            _dir: dir,
        })
    }
}

/// A replica's event log: its own connection to the stream.
async fn replica_log(url: &str, stream: &EventStream) -> Result<NatsEventLog, BoxError> {
    let nats = Nats::connect(&NatsSettings::new([url])).await?;
    Ok(NatsEventLog::open(&nats, stream).await?)
}

fn data(n: u64) -> Value {
    json!({"rating": 1 + n % 5, "comment": format!("feedback number {n}: the forecast was spot on")})
}

/// Publishes on a blocking thread (a shared log waits for the stream's acknowledgement).
async fn publish(publisher: &Publisher, n: u64) -> Result<u64, BoxError> {
    let publisher = publisher.clone();
    Ok(tokio::task::spawn_blocking(move || publisher.publish(EVENT, data(n))).await??)
}

/// `count` subscribed sessions of `requester` to `url`.
async fn subscribers(
    requester: &Node,
    url: &str,
    count: usize,
) -> Result<Vec<(Connection, Subscription)>, BoxError> {
    let want = || Want::interface([EVENT]);
    // The first negotiates, the others resume with 0-RTT.
    requester.connect_with(url, want()).await?.close().await;
    open::all(count, |_| async {
        let connection = requester.connect_with(url, want()).await?;
        let subscription = connection.subscribe(EVENT, None).await?;
        Ok::<_, BoxError>((connection, subscription))
    })
    .await
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples.get(index).copied().unwrap_or_default()
}

/// The next event of `subscription`, within 10 s.
async fn next_event(subscription: &mut Subscription) -> Result<u64, BoxError> {
    match tokio::time::timeout(Duration::from_secs(10), subscription.next()).await {
        Ok(Some(Notification::Event { id, .. })) => Ok(id),
        other => Err(format!("no event within 10 s: {other:?}").into()),
    }
}

/// Deliveries counted by reading tasks.
fn count_deliveries(subscriptions: Vec<Subscription>, delivered: &Arc<AtomicU64>) {
    for group in chunks(subscriptions, 8) {
        let delivered = Arc::clone(delivered);
        tokio::spawn(async move {
            let mut all = stream::select_all(group.into_iter().map(|subscription| {
                Box::pin(stream::unfold(
                    subscription,
                    |mut subscription| async move {
                        let notification = subscription.next().await?;
                        Some((notification, subscription))
                    },
                ))
            }));
            while let Some(notification) = all.next().await {
                if matches!(notification, Notification::Event { .. }) {
                    delivered.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
}

fn chunks<T>(items: Vec<T>, groups: usize) -> Vec<Vec<T>> {
    let mut out: Vec<Vec<T>> = (0..groups).map(|_| Vec::new()).collect();
    for (i, item) in items.into_iter().enumerate() {
        out[i % groups].push(item);
    }
    out
}

/// How a round's events are published: one after the other (`None`), this far apart, or
/// all at once from as many threads.
#[derive(Clone, Copy)]
enum Pace {
    Apart(Duration),
    Concurrent,
}

/// One fan-out round: `burst` events published at once on `publisher`, until `delivered`
/// reached `target`: the time, within 60 s, and the time the publishes took.
async fn fanout_round(
    publisher: &Publisher,
    burst: u64,
    delivered: &AtomicU64,
    target: u64,
    pace: Option<Pace>,
) -> Result<(Duration, Duration), BoxError> {
    let started = Instant::now();
    match pace {
        Some(Pace::Concurrent) => {
            // Independent publishers at once (e.g. as many ingest requests): each waits
            // for its own acknowledgement, none for another's.
            let publishes: Vec<_> = (0..burst)
                .map(|n| {
                    let publisher = publisher.clone();
                    tokio::task::spawn_blocking(move || publisher.publish(EVENT, data(n)))
                })
                .collect();
            for publish in publishes {
                publish.await??;
            }
        }
        pace => {
            let publisher = publisher.clone();
            tokio::task::spawn_blocking(move || {
                (0..burst).try_for_each(|n| {
                    if let Some(Pace::Apart(pace)) = pace {
                        std::thread::sleep(pace);
                    }
                    publisher.publish(EVENT, data(n)).map(drop)
                })
            })
            .await??;
        }
    }
    let published = started.elapsed();
    while delivered.load(Ordering::Relaxed) < target {
        if started.elapsed() > Duration::from_secs(60) {
            return Err(format!(
                "a fan-out round timed out: {} of {target} deliveries",
                delivered.load(Ordering::Relaxed)
            )
            .into());
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    Ok((started.elapsed(), published))
}

fn ms(duration: Duration) -> String {
    format!("{:.3} ms", duration.as_secs_f64() * 1e3)
}

fn ratio(replicas: Duration, single: Duration) -> f64 {
    replicas.as_secs_f64() / single.as_secs_f64().max(1e-9)
}

fn main() -> Result<(), BoxError> {
    let options = Options::from_args()?;
    if NatsServer::binary().is_none() {
        println!(
            "replica_events: set CONCORD_NATS_SERVER to a nats-server binary; nothing measured"
        );
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(&options))
}

async fn run(options: &Options) -> Result<(), BoxError> {
    let needed = 4 * options.subscribers + 2 * limits::SPARE;
    let limit = descriptors::raise_limit(needed, "subscribers (--subscribers)")?;
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    println!(
        "{cpus} CPUs, load {}, RLIMIT_NOFILE {limit}",
        report::load_average()
    );
    let nats = tokio::task::spawn_blocking(NatsServer::start).await?;
    let stream = EventStream::new("bench_events");
    let per_replica = options.subscribers.div_ceil(3);
    let mut replicas = Vec::new();
    for _ in 0..3 {
        let log = replica_log(&nats.url(), &stream).await?;
        replicas.push(Provider::start(per_replica + 8, Some(log)).await?);
    }
    let single = Provider::start(options.subscribers + 8, None).await?;
    let requester = Node::builder("Requester")
        .data_dir(tempfile::tempdir()?.keep())
        .limits(limits::requester())
        .build()?;

    // Latency: one subscriber each, events one at a time, alternating.
    let (_single_connection, mut on_single) = subscribers(&requester, single.server.url(), 1)
        .await?
        .pop()
        .ok_or("no subscriber")?;
    let (_replica_connection, mut on_a) = subscribers(&requester, replicas[0].server.url(), 1)
        .await?
        .pop()
        .ok_or("no subscriber")?;
    let (single_publisher, c_publisher) = (single.node.publisher(), replicas[2].node.publisher());
    let (mut single_samples, mut replica_samples, mut publish_samples) =
        (Vec::new(), Vec::new(), Vec::new());
    for n in 0..(options.events + options.events / 10) as u64 {
        let warm = n < (options.events / 10) as u64;
        let started = Instant::now();
        let id = publish(&single_publisher, n).await?;
        let heard = next_event(&mut on_single).await?;
        if heard != id {
            return Err(format!("single node: published {id}, heard {heard}").into());
        }
        let single_took = started.elapsed();
        let started = Instant::now();
        let id = publish(&c_publisher, n).await?;
        let published_took = started.elapsed();
        let heard = next_event(&mut on_a).await?;
        if heard != id {
            return Err(format!("replicas: published {id} on C, heard {heard} on A").into());
        }
        let replica_took = started.elapsed();
        if !warm {
            single_samples.push(single_took);
            replica_samples.push(replica_took);
            publish_samples.push(published_took);
        }
    }
    let (s50, s99) = (
        percentile(&mut single_samples, 0.5),
        percentile(&mut single_samples, 0.99),
    );
    let (r50, r99) = (
        percentile(&mut replica_samples, 0.5),
        percentile(&mut replica_samples, 0.99),
    );
    let (p50, p99) = (
        percentile(&mut publish_samples, 0.5),
        percentile(&mut publish_samples, 0.99),
    );
    println!(
        "\npublish-to-deliver, {} events one at a time (after {} warm-up):",
        options.events,
        options.events / 10
    );
    println!(
        "  single node, in-memory log:        p50 {}  p99 {}",
        ms(s50),
        ms(s99)
    );
    println!(
        "  published on C, delivered on A:    p50 {}  p99 {}   x single: p50 {:.1}, p99 {:.1}",
        ms(r50),
        ms(r99),
        ratio(r50, s50),
        ratio(r99, s99)
    );
    println!(
        "  of which the publish (stream ack): p50 {}  p99 {}",
        ms(p50),
        ms(p99)
    );

    // Fan-out: the subscribers spread over the three replicas, or all on the single node.
    let single_delivered = Arc::new(AtomicU64::new(0));
    let replica_delivered = Arc::new(AtomicU64::new(0));
    let opened = Instant::now();
    let mut held = Vec::new();
    let mut replica_subscriptions = Vec::new();
    for (index, replica) in replicas.iter().enumerate() {
        let count = per_replica.min(options.subscribers - index * per_replica);
        for (connection, subscription) in
            subscribers(&requester, replica.server.url(), count).await?
        {
            held.push(connection);
            replica_subscriptions.push(subscription);
        }
    }
    let mut single_subscriptions = Vec::new();
    for (connection, subscription) in
        subscribers(&requester, single.server.url(), options.subscribers).await?
    {
        held.push(connection);
        single_subscriptions.push(subscription);
    }
    println!(
        "\nfan-out: {} subscribers on the single node, {} spread over 3 replicas (opened in {:.1} s)",
        single_subscriptions.len(),
        replica_subscriptions.len(),
        opened.elapsed().as_secs_f64()
    );
    let subscribers = options.subscribers as u64;
    count_deliveries(single_subscriptions, &single_delivered);
    count_deliveries(replica_subscriptions, &replica_delivered);
    // The latency subscribers stay subscribed: they count too.
    let a_publisher = replicas[0].node.publisher();
    let (mut single_times, mut paced_times, mut replica_times) =
        (Vec::new(), Vec::new(), Vec::new());
    let (mut replica_publishing, mut concurrent_times) = (Vec::new(), Vec::new());
    let (mut single_target, mut replica_target) = (0, 0);
    for round in 0..=options.rounds {
        single_target += subscribers * options.burst;
        let single_took = fanout_round(
            &single_publisher,
            options.burst,
            &single_delivered,
            single_target,
            None,
        )
        .await?;
        // The single node again, its events one stream acknowledgement apart (p50), as
        // they reach a replica from the stream.
        single_target += subscribers * options.burst;
        let paced_took = fanout_round(
            &single_publisher,
            options.burst,
            &single_delivered,
            single_target,
            Some(Pace::Apart(p50)),
        )
        .await?;
        replica_target += subscribers * options.burst;
        let replica_took = fanout_round(
            &a_publisher,
            options.burst,
            &replica_delivered,
            replica_target,
            None,
        )
        .await?;
        replica_target += subscribers * options.burst;
        let concurrent_took = fanout_round(
            &a_publisher,
            options.burst,
            &replica_delivered,
            replica_target,
            Some(Pace::Concurrent),
        )
        .await?;
        // Drain what the two latency subscribers got.
        for _ in 0..2 * options.burst {
            next_event(&mut on_single).await?;
            next_event(&mut on_a).await?;
        }
        if round > 0 {
            single_times.push(single_took.0);
            paced_times.push(paced_took.0);
            replica_times.push(replica_took.0);
            replica_publishing.push(replica_took.1);
            concurrent_times.push(concurrent_took.0);
        }
    }
    let per_second =
        |took: Duration| (subscribers * options.burst) as f64 / took.as_secs_f64().max(1e-9);
    let single_median = percentile(&mut single_times, 0.5);
    let replica_median = percentile(&mut replica_times, 0.5);
    println!(
        "  {} events at once per round, {} rounds (after a warm-up round), medians:",
        options.burst, options.rounds
    );
    println!(
        "  single node, in-memory log:   last delivery after {}  {:.0} deliveries/s",
        ms(single_median),
        per_second(single_median)
    );
    let paced_median = percentile(&mut paced_times, 0.5);
    println!(
        "  single node, paced {}:  last delivery after {}  {:.0} deliveries/s   x single: time {:.2}",
        ms(p50),
        ms(paced_median),
        per_second(paced_median),
        ratio(paced_median, single_median)
    );
    println!(
        "  3 replicas, published on A:   last delivery after {}  {:.0} deliveries/s   x single: time {:.2}, throughput {:.2}; x paced: time {:.2}",
        ms(replica_median),
        per_second(replica_median),
        ratio(replica_median, single_median),
        per_second(replica_median) / per_second(single_median),
        ratio(replica_median, paced_median)
    );
    println!(
        "  of which the replicas' {} publishes on A (each waits for its stream ack): median {}",
        options.burst,
        ms(percentile(&mut replica_publishing, 0.5))
    );
    let concurrent_median = percentile(&mut concurrent_times, 0.5);
    println!(
        "  3 replicas, the {} published at once from {} threads on A: last delivery after {}  {:.0} deliveries/s   x single: time {:.2}, throughput {:.2}",
        options.burst,
        options.burst,
        ms(concurrent_median),
        per_second(concurrent_median),
        ratio(concurrent_median, single_median),
        per_second(concurrent_median) / per_second(single_median)
    );
    println!(
        "  rounds (ms), paced: {:?}",
        paced_times
            .iter()
            .map(|d| (d.as_secs_f64() * 1e3).round())
            .collect::<Vec<_>>()
    );
    println!(
        "  rounds (ms), single: {:?}",
        single_times
            .iter()
            .map(|d| (d.as_secs_f64() * 1e3).round())
            .collect::<Vec<_>>()
    );
    println!(
        "  rounds (ms), replicas: {:?}",
        replica_times
            .iter()
            .map(|d| (d.as_secs_f64() * 1e3).round())
            .collect::<Vec<_>>()
    );
    println!("\nload after: {}", report::load_average());
    open::close_all(held).await;
    drop(nats);
    Ok(())
}
