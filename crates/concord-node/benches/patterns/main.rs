//! The interaction patterns of an interface session, each beside a raw axum WebSocket
//! floor measured in the same run:
//!
//! ```sh
//! cargo bench -p concord-node --bench patterns                    # every phase
//! cargo bench -p concord-node --bench patterns -- --only fanout --subscribers 2000
//! cargo bench -p concord-node --bench patterns -- --only voice --frames 250
//! ```
//!
//! Phases (`--only fanout|stream|voice|memory`), on loopback, the requester and the
//! provider in this process (a multi-thread tokio runtime, one worker per CPU) except for
//! memory:
//! - **fanout**: `--subscribers` (1,000) interface sessions on one node, each subscribed
//!   to `userFeedbackReceived`; per round the provider publishes `--events` (500) at once,
//!   and the round ends when every subscriber has every event: events delivered per
//!   second. Floor: a tokio broadcast channel feeding as many raw WebSockets the same JSON
//!   message. The connections are read by a few tasks (`--readers`, 4). Beside it, the
//!   same node's WoT HTTP binding: as many Server-Sent Events subscriptions (`sse.rs`).
//! - **stream**: `--stream-mb` (128) MiB in 64 KiB writes over one non-realtime stream to
//!   a `sink` action that counts them: MB/s until its count comes back. Floor: the same
//!   writes as binary messages on a raw WebSocket.
//! - **voice**: `--frames` (500) 960-byte frames paced at 20 ms through the WeatherAgent's
//!   `talk` (realtime, credit for 50 frames), each timed until its halved copy comes back:
//!   p50/p99. Floor: a raw WebSocket echo of the same frames.
//! - **memory**: `--idle` (1,000) sessions held idle in a child process's node, then each
//!   subscribes once: RSS and heap per session and per subscription. Floor: raw idle
//!   WebSockets, and raw WebSockets each holding a broadcast receiver.
//!
//! Fan-out and stream run `--rounds` (3) rounds, the node and the floor back to back in
//! each; the table shows medians and the median of the per-round ratios.

mod fanout;
mod memory;
mod servers;
mod sse;
mod streams;

#[path = "../common/counting.rs"]
mod counting;
#[path = "../common/descriptors.rs"]
mod descriptors;
#[path = "../common/limits.rs"]
mod limits;
#[path = "../common/open.rs"]
mod open;
#[path = "../common/report.rs"]
mod report;
#[path = "../common/resident.rs"]
mod resident;
#[path = "../common/server_process.rs"]
mod server_process;

use std::error::Error;
use std::time::Duration;

use report::{human, load_average};

type BoxError = Box<dyn Error + Send + Sync>;

#[global_allocator]
static ALLOCATOR: counting::Counting = counting::Counting;

/// What to run fewer of when the descriptors are short.
const FEWER: &str = "connections (--subscribers, --idle)";

struct Options {
    subscribers: usize,
    events: u64,
    readers: usize,
    rounds: usize,
    stream_mb: usize,
    frames: usize,
    idle: usize,
    only: Option<String>,
}

impl Options {
    fn from_args() -> Result<Self, BoxError> {
        let mut options = Self {
            subscribers: 1000,
            events: 500,
            readers: 4,
            rounds: 3,
            stream_mb: 128,
            frames: 500,
            idle: 1000,
            only: None,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
            match arg.as_str() {
                "--subscribers" => options.subscribers = value()?.parse()?,
                "--events" => options.events = value()?.parse()?,
                "--readers" => options.readers = value()?.parse()?,
                "--rounds" => options.rounds = value()?.parse()?,
                "--stream-mb" => options.stream_mb = value()?.parse()?,
                "--frames" => options.frames = value()?.parse()?,
                "--idle" => options.idle = value()?.parse()?,
                "--only" => options.only = Some(value()?),
                // What `cargo bench` passes to every bench binary.
                "--bench" => {}
                other => return Err(format!("unknown argument {other:?}").into()),
            }
        }
        if [
            options.subscribers,
            options.events as usize,
            options.readers,
            options.rounds,
            options.stream_mb,
            options.frames,
            options.idle,
        ]
        .contains(&0)
        {
            return Err("every count must be at least 1".into());
        }
        if options.frames > 16_000 {
            return Err("--frames: at most 16,000 (a frame's number is its first sample)".into());
        }
        Ok(options)
    }

    fn runs(&self, phase: &str) -> bool {
        self.only.as_deref().is_none_or(|only| only == phase)
    }
}

fn main() -> Result<(), BoxError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if let Some((what, sessions)) = server_process::requested()? {
        return runtime.block_on(memory::serve(&what, sessions));
    }
    let options = Options::from_args()?;
    runtime.block_on(run(&options))
}

async fn run(options: &Options) -> Result<(), BoxError> {
    let needed = 2 * options.subscribers.max(options.idle) + 2 * limits::SPARE;
    let limit = descriptors::raise_limit(needed, FEWER)?;
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    println!(
        "{cpus} CPUs, load {}, RLIMIT_NOFILE {limit}",
        load_average()
    );
    if options.runs("fanout") {
        fanout_phase(options).await?;
    }
    if options.runs("stream") {
        stream_phase(options).await?;
    }
    if options.runs("voice") {
        voice_phase(options).await?;
    }
    if options.runs("memory") {
        memory_phase(options).await?;
    }
    println!("\nload after: {}", load_average());
    Ok(())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

async fn fanout_phase(options: &Options) -> Result<(), BoxError> {
    let node = fanout::NodeFanout::start(options.subscribers, options.readers).await?;
    let raw = fanout::RawFanout::start(options.subscribers, options.readers).await?;
    let sse = sse::SseFanout::start(options.subscribers, options.readers, options.events).await?;
    // A warm-up round each.
    node.round(options.events.min(50)).await?;
    raw.round(options.events.min(50)).await?;
    sse.round(options.events.min(50)).await?;
    let (mut sse_rates, mut sse_time, mut sse_ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut node_rates, mut raw_rates, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut node_time, mut raw_time) = (Vec::new(), Vec::new());
    let mut lost = 0;
    for round in 0..options.rounds {
        let (n, r) = if round % 2 == 0 {
            let n = node.round(options.events).await?;
            (n, raw.round(options.events).await?)
        } else {
            let r = raw.round(options.events).await?;
            (node.round(options.events).await?, r)
        };
        let s = sse.round(options.events).await?;
        lost += n.lost + r.lost + s.lost;
        sse_rates.push(s.per_second);
        sse_time.push(s.elapsed.as_secs_f64());
        sse_ratios.push(s.per_second / r.per_second);
        node_rates.push(n.per_second);
        raw_rates.push(r.per_second);
        node_time.push(n.elapsed.as_secs_f64());
        raw_time.push(r.elapsed.as_secs_f64());
        ratios.push(n.per_second / r.per_second);
    }
    node.stop().await;
    raw.stop();
    sse.stop();
    println!(
        "\n## Event fan-out: {} subscribers, {} events per round, {} rounds",
        options.subscribers, options.events, options.rounds
    );
    println!("| case | deliveries/s | round (all delivered) | × raw |");
    println!("|---|---|---|---|");
    println!(
        "| raw WebSocket broadcast | {:.0} | {} | 1.00× |",
        median(&mut raw_rates),
        human(Duration::from_secs_f64(median(&mut raw_time)))
    );
    println!(
        "| node, interface subscription | {:.0} | {} | {:.2}× |",
        median(&mut node_rates),
        human(Duration::from_secs_f64(median(&mut node_time))),
        median(&mut ratios)
    );
    println!(
        "| node, HTTP binding SSE | {:.0} | {} | {:.2}× |",
        median(&mut sse_rates),
        human(Duration::from_secs_f64(median(&mut sse_time))),
        median(&mut sse_ratios)
    );
    println!("lost (gaps or lag) over all rounds: {lost}");
    Ok(())
}

async fn stream_phase(options: &Options) -> Result<(), BoxError> {
    let total = options.stream_mb * 1024 * 1024;
    let pair = servers::Pair::start().await?;
    let (connection, base) = (&pair.connection, &pair.raw);
    let mb = total as f64 / 1e6;
    let (mut node_rates, mut raw_rates, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..options.rounds {
        let (n, r) = if round % 2 == 0 {
            let n = streams::node_stream(connection, total).await?;
            (n, streams::raw_stream(base, total).await?)
        } else {
            let r = streams::raw_stream(base, total).await?;
            (streams::node_stream(connection, total).await?, r)
        };
        let (n, r) = (mb / n.as_secs_f64(), mb / r.as_secs_f64());
        node_rates.push(n);
        raw_rates.push(r);
        ratios.push(n / r);
    }
    pair.close().await;
    println!(
        "\n## Stream throughput: {} MiB per round in 64 KiB writes, {} rounds",
        options.stream_mb, options.rounds
    );
    println!("| case | MB/s | × raw |");
    println!("|---|---|---|");
    println!(
        "| raw binary WebSocket | {:.0} | 1.00× |",
        median(&mut raw_rates)
    );
    println!(
        "| node stream (non-realtime, {} KiB initial credit) | {:.0} | {:.2}× |",
        servers::SINK_CREDIT / 1024,
        median(&mut node_rates),
        median(&mut ratios)
    );
    Ok(())
}

async fn voice_phase(options: &Options) -> Result<(), BoxError> {
    let pair = servers::Pair::start().await?;
    let node = streams::node_voice(&pair.connection, options.frames).await?;
    let raw = streams::raw_voice(&pair.raw, options.frames).await?;
    pair.close().await;
    println!(
        "\n## Voice: {} frames of {} bytes paced at 20 ms, round trip",
        options.frames,
        concord_fixtures::weather::VOICE_FRAME_BYTES
    );
    println!("| case | p50 | p99 | max | dropped (no credit) | lost |");
    println!("|---|---|---|---|---|---|");
    for (name, voice) in [
        ("raw WebSocket echo", &raw),
        ("node, `talk` (realtime stream)", &node),
    ] {
        println!(
            "| {name} | {} | {} | {} | {} | {} |",
            human(voice.percentile(0.5)),
            human(voice.percentile(0.99)),
            human(voice.percentile(1.0)),
            voice.dropped,
            voice.lost()
        );
    }
    Ok(())
}

async fn memory_phase(options: &Options) -> Result<(), BoxError> {
    let memory = memory::measure(options.idle).await?;
    println!(
        "\n## Memory: {} idle connections, server process (RSS delta and live heap delta per connection)",
        options.idle
    );
    println!("| case | KB RSS | heap bytes |");
    println!("|---|---|---|");
    let rows = [
        ("raw WebSocket, idle", memory.raw_idle),
        ("raw WebSocket + broadcast receiver", memory.raw_subscribed),
        ("node interface session, idle (0-RTT)", memory.node_idle),
    ];
    for (name, step) in rows {
        println!("| {name} | {:.1} | {:.0} |", step.kb, step.heap);
    }
    let raw_subscription = memory::Step {
        kb: memory.raw_subscribed.kb - memory.raw_idle.kb,
        heap: memory.raw_subscribed.heap - memory.raw_idle.heap,
    };
    println!(
        "| per subscription, raw (broadcast − idle) | {:.1} | {:.0} |",
        raw_subscription.kb, raw_subscription.heap
    );
    println!(
        "| per subscription, node (subscribed − idle, same sessions) | {:.1} | {:.0} |",
        memory.node_subscription.kb, memory.node_subscription.heap
    );
    Ok(())
}
