//! `invokeaction` over the WoT HTTP binding (HTTP/1.1 keep-alive), beside the same action
//! over the negotiated WebSocket session and a raw axum handler doing the same work (the
//! floor: read the JSON body, look the product up, write it as JSON), in the same process
//! and run.
//!
//! ```sh
//! cargo bench -p concord-node --bench http                        # 5 rounds of 1 s per case
//! cargo bench -p concord-node --bench http -- --rounds 7 --seconds 2 --connections 64
//! ```
//!
//! Cases, on loopback with both sides in this process (a multi-thread tokio runtime, one
//! worker per CPU), the provider's action answering from memory: calls/s and p50/p99
//! latency with 1 connection and with `--connections` connections (each making one call at
//! a time, back to back; an HTTP caller holds one kept-alive connection of its own), for
//! `floor` (raw axum), `http` (the node's `POST /actions/getProductInfo`) and `ws` (a
//! negotiated session's `call`). Each round runs every case once, in an order that
//! alternates between rounds; the table shows medians over the rounds, and each ratio is
//! the median of the per-round ratios against the floor.

// The calls bench's catalogue and nodes; this bench uses part of them.
#[allow(dead_code)]
#[path = "calls/catalogue.rs"]
mod catalogue;
#[allow(dead_code)]
#[path = "calls/echo.rs"]
mod echo;
#[allow(dead_code)]
#[path = "calls/node.rs"]
mod node;
#[path = "common/report.rs"]
mod report;

use std::error::Error;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use concord_node::Connection;
use serde_json::{json, Value};

use catalogue::{Catalogue, ACTION};
use report::{human, load_average};

type BoxError = Box<dyn Error + Send + Sync>;

struct Options {
    rounds: usize,
    seconds: f64,
    connections: usize,
}

impl Options {
    fn from_args() -> Result<Self, BoxError> {
        let mut options = Self {
            rounds: 5,
            seconds: 1.0,
            connections: 64,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
            match arg.as_str() {
                "--rounds" => options.rounds = value()?.parse()?,
                "--seconds" => options.seconds = value()?.parse()?,
                "--connections" => options.connections = value()?.parse()?,
                // cargo bench passes --bench; filters are not supported.
                _ => {}
            }
        }
        if options.rounds == 0 || options.connections == 0 || options.seconds <= 0.0 {
            return Err("rounds, seconds and connections must be positive".into());
        }
        Ok(options)
    }
}

fn main() -> Result<(), BoxError> {
    let options = Options::from_args()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(options))
}

/// One caller: an HTTP client with its own kept-alive connection, or a session.
enum Caller {
    Http {
        client: reqwest::Client,
        url: String,
    },
    Ws(Connection),
}

impl Caller {
    fn http(url: &str) -> Result<Self, BoxError> {
        let client = reqwest::Client::builder()
            .http1_only()
            .pool_max_idle_per_host(1)
            .build()?;
        Ok(Caller::Http {
            client,
            url: url.to_owned(),
        })
    }

    async fn call(&self, catalogue: &Catalogue, n: usize) -> Result<(), BoxError> {
        let id = catalogue.id(n);
        let product: Value = match self {
            Caller::Http { client, url } => {
                let response = client
                    .post(url)
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(json!({"productId": id}).to_string())
                    .send()
                    .await?;
                if response.status() != StatusCode::OK {
                    return Err(format!("{url}: {}", response.status()).into());
                }
                serde_json::from_slice(&response.bytes().await?)?
            }
            Caller::Ws(connection) => connection.call(ACTION, json!({"productId": id})).await?,
        };
        if product["productId"] != id {
            return Err(format!("asked for {id}, got {product}").into());
        }
        Ok(())
    }
}

/// What one load run measured.
#[derive(Debug, Clone, Copy)]
struct Sample {
    calls_per_second: f64,
    p50: Duration,
    p99: Duration,
}

/// Every caller calls back to back for `duration`; the callers come back with the sample.
async fn load(
    callers: Vec<Caller>,
    catalogue: &Catalogue,
    duration: Duration,
) -> Result<(Vec<Caller>, Sample), BoxError> {
    let started = Instant::now();
    let deadline = started + duration;
    let tasks: Vec<_> = callers
        .into_iter()
        .enumerate()
        .map(|(index, caller)| {
            let catalogue = catalogue.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(16 * 1024);
                let mut n = index * 7;
                while Instant::now() < deadline {
                    let call_started = Instant::now();
                    caller.call(&catalogue, n).await?;
                    latencies.push(call_started.elapsed());
                    n += 1;
                }
                Ok::<_, BoxError>((caller, latencies))
            })
        })
        .collect();
    let mut callers = Vec::with_capacity(tasks.len());
    let mut latencies = Vec::new();
    for task in tasks {
        let (caller, mut measured) = task.await??;
        callers.push(caller);
        latencies.append(&mut measured);
    }
    let elapsed = started.elapsed();
    latencies.sort_unstable();
    let sample = Sample {
        calls_per_second: latencies.len() as f64 / elapsed.as_secs_f64(),
        p50: percentile(&latencies, 0.50),
        p99: percentile(&latencies, 0.99),
    };
    Ok((callers, sample))
}

/// The `q` quantile of sorted durations (nearest rank).
fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The floor: `POST /product` reads the JSON body, looks the product up and answers it as
/// JSON, on a raw axum server of its own.
async fn serve_floor(catalogue: Catalogue) -> Result<String, BoxError> {
    async fn answer(State(catalogue): State<Catalogue>, body: Bytes) -> Response {
        let Ok(input) = serde_json::from_slice::<Value>(&body) else {
            return StatusCode::BAD_REQUEST.into_response();
        };
        match catalogue.answer(input).await {
            Ok(product) => match serde_json::to_vec(&product) {
                Ok(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
                Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
            },
            Err(error) => StatusCode::from_u16(error.code)
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
                .into_response(),
        }
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address: SocketAddr = listener.local_addr()?;
    let app = Router::new()
        .route("/product", post(answer))
        .with_state(catalogue);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{address}/product"))
}

/// The cases of one connection count, by name, with their samples.
struct Case {
    name: String,
    callers: Vec<Caller>,
    samples: Vec<Sample>,
}

async fn run(options: Options) -> Result<(), BoxError> {
    let catalogue = Catalogue::new();
    let load_before = load_average();
    let nodes = node::Nodes::start(&catalogue, false).await?;
    let floor_url = serve_floor(catalogue.clone()).await?;
    let http_url = format!("{}actions/{ACTION}", nodes.server.url());

    let mut groups: Vec<[Case; 3]> = Vec::new();
    for count in [1, options.connections] {
        let mut floor = Vec::with_capacity(count);
        let mut http = Vec::with_capacity(count);
        let mut ws = Vec::with_capacity(count);
        for _ in 0..count {
            floor.push(Caller::http(&floor_url)?);
            http.push(Caller::http(&http_url)?);
            ws.push(Caller::Ws(nodes.connect().await?));
        }
        let case = |name: &str, callers| Case {
            name: format!("{name}-{count}"),
            callers,
            samples: Vec::new(),
        };
        groups.push([case("floor", floor), case("http", http), case("ws", ws)]);
    }

    let duration = Duration::from_secs_f64(options.seconds);
    for group in &mut groups {
        for case in group.iter_mut() {
            let (back, _) =
                load(std::mem::take(&mut case.callers), &catalogue, duration / 4).await?;
            case.callers = back;
        }
    }
    for round in 0..options.rounds {
        for group in &mut groups {
            let mut order: Vec<&mut Case> = group.iter_mut().collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for case in order {
                let (back, sample) =
                    load(std::mem::take(&mut case.callers), &catalogue, duration).await?;
                case.callers = back;
                case.samples.push(sample);
            }
        }
    }

    println!(
        "invokeaction getProductInfo, {} rounds of {:.1} s per case, {} CPUs, load {} before, {} after",
        options.rounds,
        options.seconds,
        std::thread::available_parallelism().map_or(1, usize::from),
        load_before,
        load_average()
    );
    println!(
        "{:<10} {:>10} {:>10} {:>10} {:>14} {:>12}",
        "case", "calls/s", "p50", "p99", "calls/s÷floor", "p50÷floor"
    );
    for group in &groups {
        let floor = &group[0].samples;
        for case in group {
            let calls = median(case.samples.iter().map(|s| s.calls_per_second));
            let p50 = median_duration(case.samples.iter().map(|s| s.p50));
            let p99 = median_duration(case.samples.iter().map(|s| s.p99));
            let throughput = median(
                case.samples
                    .iter()
                    .zip(floor)
                    .map(|(s, f)| s.calls_per_second / f.calls_per_second),
            );
            let latency = median(
                case.samples
                    .iter()
                    .zip(floor)
                    .map(|(s, f)| s.p50.as_secs_f64() / f.p50.as_secs_f64().max(1e-9)),
            );
            println!(
                "{:<10} {:>10.0} {:>10} {:>10} {:>14.2} {:>12.2}",
                case.name,
                calls,
                human(p50),
                human(p99),
                throughput,
                latency
            );
        }
    }
    Ok(())
}

/// The median of `values`.
fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// The median of `durations`.
fn median_duration(durations: impl Iterator<Item = Duration>) -> Duration {
    let mut durations: Vec<Duration> = durations.collect();
    durations.sort_unstable();
    durations
        .get(durations.len() / 2)
        .copied()
        .unwrap_or_default()
}
