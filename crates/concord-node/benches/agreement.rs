//! Time to Ready for foreign candidate protocols (`concord_fixtures::foreign`), beside the
//! baseline: a requester that proposes nothing, so that the provider is offered our own
//! canonical draft.
//!
//! ```sh
//! cargo bench -p concord-node --bench agreement                  # 20 rounds
//! cargo bench -p concord-node --bench agreement -- --rounds 5
//! ```
//!
//! One provider on loopback serves every corpus action. Each round negotiates every
//! candidate the corpus expects to end in an agreement (accepted as written, or countered
//! and the counter accepted) through a fresh requester (its store in a new temp dir, so a
//! full negotiation, never 0-RTT), then the baseline once per action those candidates call,
//! the order alternating between rounds. A sample is the time from `connect_with` to a
//! Ready connection (discovery, hello, negotiation, code generation, test cases,
//! verification); building the requester node is not timed.
//!
//! The table shows, per expectation class, the median and p99 over every successful
//! sample, and the ratio of each to the baseline's; then how the negotiations ended
//! (agreed as written, countered, rejected, failed) and the LLM calls the requesters made
//! (no LLM is configured: any call is a bug).

use std::error::Error;
use std::time::{Duration, Instant};

use concord_fixtures::foreign::{corpus, Corpus, Expectation, ForeignCandidate};
use concord_negotiate::Step;
use concord_node::{ConnectError, Limits, Node, Server, Want};
use concord_proto::{CloseReason, ProtocolHash};
use tempfile::TempDir;
#[path = "common/report.rs"]
mod report;

use report::{human, load_average};

type BoxError = Box<dyn Error + Send + Sync>;

/// Longest one negotiation may take before it counts as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

struct Options {
    rounds: usize,
}

impl Options {
    fn from_args() -> Result<Self, BoxError> {
        let mut options = Self { rounds: 20 };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            // cargo bench passes --bench; filters are not supported.
            if arg == "--rounds" {
                let value = args.next().ok_or("--rounds needs a value")?;
                options.rounds = value.parse()?;
            }
        }
        if options.rounds == 0 {
            return Err("rounds must be positive".into());
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

/// How one negotiation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ended {
    /// Ready on the proposed text.
    AgreedAsWritten,
    /// Ready on a counter-proposal.
    Countered,
    /// The provider rejected the candidate.
    Rejected(String),
    /// Any other failure (timeout, code, verification…).
    Failed(String),
}

/// One negotiation: how it ended, how long it took to Ready, the requester's LLM calls.
struct Sample {
    ended: Ended,
    time: Duration,
    llm_calls: u64,
}

/// The provider serving every corpus action.
struct Provider {
    server: Server,
    _node: Node,
    _dir: TempDir,
}

fn limits() -> Limits {
    Limits {
        call_timeout: Duration::from_secs(10),
        ..Limits::default()
    }
}

impl Provider {
    async fn start(corpus: &Corpus) -> Result<Self, BoxError> {
        let dir = tempfile::tempdir()?;
        let mut builder = Node::builder("Foreign corpus provider")
            .description(
                "Products, weather, currencies, translation, orders, calendars and stocks.",
            )
            .data_dir(dir.path())
            .limits(limits());
        for action in &corpus.actions {
            builder = builder.action(action.spec.clone(), action.backend());
        }
        let node = builder.build()?;
        let server = node.serve("127.0.0.1:0").await?;
        Ok(Self {
            server,
            _node: node,
            _dir: dir,
        })
    }

    /// Negotiates `want` through a fresh requester; `proposed` is the text it proposes.
    async fn negotiate(&self, want: Want, proposed: Option<&str>) -> Result<Sample, BoxError> {
        let dir = tempfile::tempdir()?;
        let requester = Node::builder("Fresh requester")
            .data_dir(dir.path())
            .limits(limits())
            .build()?;
        let started = Instant::now();
        let result = tokio::time::timeout(
            CONNECT_TIMEOUT,
            requester.connect_with(self.server.url(), want),
        )
        .await;
        let time = started.elapsed();
        let sample = match result {
            Err(_) => Sample {
                ended: Ended::Failed(format!("no connection within {CONNECT_TIMEOUT:?}")),
                time,
                llm_calls: 0,
            },
            Ok(Err(ConnectError::Closed(CloseReason::NegotiationRejected { reason, .. }))) => {
                Sample {
                    ended: Ended::Rejected(reason.unwrap_or_default()),
                    time,
                    llm_calls: 0,
                }
            }
            Ok(Err(error)) => Sample {
                ended: Ended::Failed(error.to_string()),
                time,
                llm_calls: 0,
            },
            Ok(Ok(connection)) => {
                let info = connection.info();
                let judged = info.accounting.steps.iter().any(|s| s.step == Step::Judge);
                let as_written =
                    proposed.is_none_or(|text| info.hash == ProtocolHash::of_text(text));
                let ended = if as_written && !judged {
                    Ended::AgreedAsWritten
                } else {
                    Ended::Countered
                };
                let llm_calls = u64::from(info.accounting.llm_calls())
                    + info.code.iter().map(|code| code.llm_calls).sum::<u64>();
                connection.close().await;
                Sample {
                    ended,
                    time,
                    llm_calls,
                }
            }
        };
        Ok(sample)
    }
}

/// Samples of one class, and which candidates ended otherwise than expected.
#[derive(Default)]
struct Class {
    times: Vec<Duration>,
    agreed_as_written: usize,
    countered: usize,
    rejected: usize,
    failed: usize,
    llm_calls: u64,
    /// `(file, how it ended)`, once per candidate.
    surprises: Vec<(String, String)>,
}

impl Class {
    fn add(&mut self, sample: Sample, file: &str, expected: Option<&Expectation>) {
        self.llm_calls += sample.llm_calls;
        let surprise = match (&sample.ended, expected) {
            (Ended::AgreedAsWritten, Some(Expectation::Accept) | None)
            | (Ended::Countered, Some(Expectation::Counter)) => None,
            (Ended::AgreedAsWritten, _) => Some("agreed as written".to_owned()),
            (Ended::Countered, _) => Some("countered".to_owned()),
            (Ended::Rejected(reason), _) => Some(format!("rejected: {}", one_line(reason))),
            (Ended::Failed(reason), _) => Some(format!("failed: {}", one_line(reason))),
        };
        match sample.ended {
            Ended::AgreedAsWritten => {
                self.agreed_as_written += 1;
                self.times.push(sample.time);
            }
            Ended::Countered => {
                self.countered += 1;
                self.times.push(sample.time);
            }
            Ended::Rejected(_) => self.rejected += 1,
            Ended::Failed(_) => self.failed += 1,
        }
        if let Some(surprise) = surprise {
            if !self.surprises.iter().any(|(seen, _)| seen == file) {
                self.surprises.push((file.to_owned(), surprise));
            }
        }
    }
}

fn one_line(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > 140 {
        format!("{}…", line.chars().take(140).collect::<String>())
    } else {
        line
    }
}

async fn run(options: Options) -> Result<(), BoxError> {
    let corpus = corpus();
    let provider = Provider::start(&corpus).await?;
    let candidates: Vec<&ForeignCandidate> = corpus.agreeing().collect();
    let mut baseline_actions: Vec<&str> = candidates.iter().map(|c| c.action.as_str()).collect();
    baseline_actions.sort_unstable();
    baseline_actions.dedup();
    let load_before = load_average();

    let mut accept = Class::default();
    let mut counter = Class::default();
    let mut baseline = Class::default();
    for round in 0..options.rounds {
        let mut order: Vec<usize> = (0..candidates.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for index in order {
            let candidate = candidates[index];
            let want = Want::action(candidate.action.as_str()).propose(candidate.text);
            let sample = provider.negotiate(want, Some(candidate.text)).await?;
            let class = match candidate.expect {
                Expectation::Counter => &mut counter,
                _ => &mut accept,
            };
            class.add(sample, &candidate.file, Some(&candidate.expect));
        }
        for action in &baseline_actions {
            let sample = provider.negotiate(Want::action(*action), None).await?;
            baseline.add(sample, action, None);
        }
    }
    let load_after = load_average();

    let count = |expect: &str| {
        candidates
            .iter()
            .filter(|c| c.expect.name() == expect)
            .count()
    };
    println!(
        "\nconcord-node agreement: {} rounds x {} candidates ({} accept, {} counter) + {} baseline actions; {} CPUs; load average {} before, {} after",
        options.rounds,
        candidates.len(),
        count("accept"),
        count("counter"),
        baseline_actions.len(),
        std::thread::available_parallelism().map_or(0, usize::from),
        load_before,
        load_after,
    );
    println!(
        "\n{:<34} {:>8} {:>10} {:>10}   {:>10} {:>10}",
        "time to Ready", "samples", "median", "p99", "vs median", "vs p99"
    );
    let base = (median(&baseline.times), percentile(&baseline.times, 0.99));
    for (name, class) in [
        ("baseline: our own draft", &baseline),
        ("accept: the candidate as written", &accept),
        ("counter: then our counter", &counter),
    ] {
        print_class(name, class, base);
    }
    println!(
        "\n{:<34} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "outcomes (all rounds)", "as written", "countered", "rejected", "failed", "LLM calls"
    );
    for (name, class) in [
        ("baseline", &baseline),
        ("expected accept", &accept),
        ("expected counter", &counter),
    ] {
        println!(
            "{name:<34} {:>10} {:>10} {:>10} {:>10} {:>10}",
            class.agreed_as_written, class.countered, class.rejected, class.failed, class.llm_calls
        );
    }
    let surprises: Vec<&(String, String)> = baseline
        .surprises
        .iter()
        .chain(&accept.surprises)
        .chain(&counter.surprises)
        .collect();
    if !surprises.is_empty() {
        println!("\nnot as the manifest expects (first time seen):");
        for (file, ended) in surprises {
            println!("  {file}: {ended}");
        }
    }
    println!(
        "\ntime to Ready: connect_with until the connection is ready (fresh requester store: a full negotiation each time), negotiations that did not reach Ready excluded; ratios: the class's median and p99 over the baseline's"
    );
    Ok(())
}

fn print_class(name: &str, class: &Class, (base_median, base_p99): (Duration, Duration)) {
    if class.times.is_empty() {
        println!(
            "{name:<34} {:>8} {:>10} {:>10}   {:>10} {:>10}",
            0, "-", "-", "-", "-"
        );
        return;
    }
    let (middle, p99) = (median(&class.times), percentile(&class.times, 0.99));
    let ratio = |of: Duration, base: Duration| {
        if base.is_zero() {
            "-".to_owned()
        } else {
            format!("{:.2}x", of.as_secs_f64() / base.as_secs_f64())
        }
    };
    println!(
        "{name:<34} {:>8} {:>10} {:>10}   {:>10} {:>10}",
        class.times.len(),
        human(middle),
        human(p99),
        ratio(middle, base_median),
        ratio(p99, base_p99),
    );
}

fn median(times: &[Duration]) -> Duration {
    if times.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = times.to_vec();
    sorted.sort_unstable();
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2
    }
}

/// The `q` quantile (nearest rank).
fn percentile(times: &[Duration], q: f64) -> Duration {
    if times.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = times.to_vec();
    sorted.sort_unstable();
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}
