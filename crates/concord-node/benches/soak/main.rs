//! Soak: a legitimate caller beside each attack a stranger can make, against a provider
//! with the node's default limits running in a child process (so that its memory is
//! measured alone).
//!
//! ```sh
//! cargo bench -p concord-node --bench soak                      # 10 s per phase
//! cargo bench -p concord-node --bench soak -- --seconds 30      # longer phases
//! cargo bench -p concord-node --bench soak -- --only slowloris  # one attack (by a word of its name)
//! ```
//!
//! Each phase runs one attack from 127.0.0.2–127.0.0.17 while the legitimate caller, a
//! Concord requester on 127.0.0.1, starts an attempt (connect and call) every 100 ms
//! without waiting for the previous ones, at most four under way at once (alternating
//! full negotiations from a fresh store and 0-RTT reconnects), each attempt given 5 s.
//! The first phase runs no attack: its figures are the baseline the others are compared
//! with. The last phase runs every attack at once, three times as long as the others,
//! and the legitimate caller also listens to the provider's event (100 KiB every 100 ms)
//! and talks over its voice stream. For each phase the table prints the share of the
//! caller's attempts served, their median and 95th-percentile times, the provider's peak
//! resident memory during the phase and after it (memory given back), the most backend
//! processes it ran at once, and how much the store's files grew; the last phase's
//! listener and stream figures follow, then where the attempts' time went step by step
//! (description, upgrade and hello, protocol settled, call: `steps.rs`).
//!
//! In the phases where the DID attack runs (upgrades signed with DIDs on hosts that never
//! answer), a signed caller (`legit.rs`) calls beside the anonymous one, as it does (a new
//! DID of its own for each fresh attempt, its document served from 127.0.0.1): its share
//! served, median and p95 follow the table. The provider resolves `*.localhost` DIDs on
//! loopback (`provider.rs`: the resolver's test mode; otherwise default security).
//!
//! `SOAK_PROVIDER_LOG=concord_node=info` (an `EnvFilter`) makes the provider log to
//! standard error, to see a legitimate session's way through it (its `remote` is
//! 127.0.0.1).
//!
//! The attacks need about 1,000 descriptors: the bench raises its soft `RLIMIT_NOFILE` to
//! the hard limit (the provider inherits it).

mod attacks;
mod legit;
mod provider;
mod steps;

use std::error::Error;
use std::time::Duration;

use attacks::{Attack, Target};
use legit::{Caller, Listened, Served};
use provider::Provider;
use tokio::sync::watch;

#[path = "../common/descriptors.rs"]
mod descriptors;
#[path = "../common/report.rs"]
mod report;
#[path = "../common/resident.rs"]
mod resident;

type BoxError = Box<dyn Error + Send + Sync>;

struct Options {
    seconds: f64,
    only: Option<String>,
}

impl Options {
    fn from_args(args: &[String]) -> Result<Self, BoxError> {
        let mut options = Self {
            seconds: 10.0,
            only: None,
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
            match arg.as_str() {
                "--seconds" => options.seconds = value()?.parse()?,
                "--only" => options.only = Some(value()?.clone()),
                // cargo bench passes --bench; filters are not supported.
                _ => {}
            }
        }
        if options.seconds <= 0.0 {
            return Err("--seconds must be positive".into());
        }
        Ok(options)
    }
}

/// The attacks, in the order they run.
fn attacks() -> Vec<Attack> {
    vec![
        Attack::SilentUpgrades { clients: 256 },
        Attack::HelloThenSilence { clients: 256 },
        Attack::ResumedThenSilence { clients: 256 },
        Attack::IdleTcp {
            silent: 600,
            dribbling: 100,
        },
        Attack::LargeCandidates {
            clients: 32,
            bytes: 4 * 1024 * 1024,
        },
        Attack::LargeCandidates {
            clients: 32,
            bytes: 60 * 1024,
        },
        Attack::ZeroRttFlood { clients: 64 },
        Attack::StoreFill { clients: 32 },
        Attack::ConnectionChurn { clients: 16 },
        Attack::SilentUpgradesFromOne { clients: 64 },
        Attack::SilentSubscribers { clients: 256 },
        Attack::SilentStreams { clients: 64 },
        Attack::ActionTableFill { clients: 32 },
        Attack::ProcessFlood { clients: 16 },
        Attack::KeepAliveFetches { connections: 8 },
        Attack::SilentDidHosts { per_address: 4 },
    ]
}

/// The attacks of the last phase, all at once.
fn all_at_once() -> Vec<Attack> {
    vec![
        Attack::SilentUpgradesFromOne { clients: 64 },
        Attack::HelloThenSilence { clients: 64 },
        Attack::IdleTcp {
            silent: 200,
            dribbling: 32,
        },
        Attack::SilentSubscribers { clients: 256 },
        Attack::SilentStreams { clients: 32 },
        Attack::ActionTableFill { clients: 16 },
        Attack::ProcessFlood { clients: 16 },
        Attack::StoreFill { clients: 16 },
        Attack::ZeroRttFlood { clients: 16 },
        Attack::KeepAliveFetches { connections: 8 },
        Attack::SilentDidHosts { per_address: 4 },
    ]
}

/// The last phase's name (for `--only`).
const ALL_AT_ONCE: &str = "every attack at once";

/// How many times `--seconds` the last phase runs: its shares are measured over a few
/// hundred attempts.
const ALL_AT_ONCE_LONGER: u32 = 3;

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if let Some(at) = args.iter().position(|arg| arg == "--provider") {
        let dir = args.get(at + 1).ok_or("--provider needs a directory")?;
        if let Ok(filter) = std::env::var("SOAK_PROVIDER_LOG") {
            tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_writer(std::io::stderr)
                .init();
        }
        return runtime.block_on(provider::run(std::path::Path::new(dir)));
    }
    let options = Options::from_args(&args)?;
    raise_descriptor_limit();
    steps::install();
    runtime.block_on(run(&options))
}

/// One phase's figures.
struct Phase {
    name: String,
    served: Served,
    attack_connections: u64,
    peak_kib: u64,
    after_kib: u64,
    most_processes: usize,
    store_growth: i64,
    /// The listener's and the stream's figures (the last phase only).
    interface: Option<(Listened, Served)>,
    /// The signed caller's figures (the phases with the DID attack).
    signed: Option<Served>,
}

/// The two legitimate callers.
struct Callers {
    anonymous: Caller,
    signed: Caller,
}

async fn run(options: &Options) -> Result<(), BoxError> {
    let provider = Provider::spawn()?;
    let callers = Callers {
        anonymous: Caller::new().await?,
        signed: Caller::signed().await?,
    };
    let caller = &callers.anonymous;
    let hash = caller.first(&provider.url).await?;
    let interface_hash = caller.first_interface(&provider.url).await?;
    let target = Target {
        addr: provider.addr()?,
        endpoint: provider.endpoint(),
        hash,
        interface_hash,
        description_path: "/.well-known/wot".to_owned(),
    };
    let duration = Duration::from_secs_f64(options.seconds);
    println!(
        "soak: {} s per phase, provider pid with default limits, load average {}",
        options.seconds,
        report::load_average()
    );
    let wanted = |name: &str| {
        options
            .only
            .as_deref()
            .is_none_or(|only| name.contains(only))
    };
    let mut phases = vec![phase(&provider, &callers, &target, None, duration).await?];
    for attack in attacks() {
        if wanted(&attack.name()) {
            phases.push(phase(&provider, &callers, &target, Some(vec![attack]), duration).await?);
        }
    }
    if wanted(ALL_AT_ONCE) {
        let longer = duration.saturating_mul(ALL_AT_ONCE_LONGER);
        phases.push(phase(&provider, &callers, &target, Some(all_at_once()), longer).await?);
    }
    print_table(&phases);
    Ok(())
}

async fn phase(
    provider: &Provider,
    callers: &Callers,
    target: &Target,
    attacks: Option<Vec<Attack>>,
    duration: Duration,
) -> Result<Phase, BoxError> {
    let caller = &callers.anonymous;
    let together = attacks.as_ref().is_some_and(|attacks| attacks.len() > 1);
    let with_signed = attacks.iter().flatten().any(Attack::against_signed_callers);
    let name = match &attacks {
        None => "no attack (baseline)".to_owned(),
        Some(_) if together => ALL_AT_ONCE.to_owned(),
        Some(attacks) => attacks.iter().map(Attack::name).collect(),
    };
    eprintln!("phase: {name}");
    // Let the previous phase's connections go.
    tokio::time::sleep(Duration::from_secs(1)).await;
    provider.reset_peak()?;
    let store_before = provider.store_bytes()?;
    let (stop, stopped) = watch::channel(false);
    let attacking: Vec<_> = attacks
        .into_iter()
        .flatten()
        .map(|attack| tokio::spawn(attack.run(target.clone(), stopped.clone())))
        .collect();
    // The attack first takes hold.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let calling = caller.run(&provider.url, stopped.clone());
    let signed_calling = async {
        if with_signed {
            Some(callers.signed.run(&provider.url, stopped.clone()).await)
        } else {
            None
        }
    };
    let using_interface = async {
        if together {
            Some(tokio::join!(
                caller.listen(&provider.url, stopped.clone()),
                caller.talk(&provider.url, stopped.clone())
            ))
        } else {
            None
        }
    };
    let counting = async {
        let mut most = 0;
        let mut stopped = stopped.clone();
        while !*stopped.borrow() {
            most = most.max(provider.children());
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = stopped.changed() => {}
            }
        }
        most
    };
    let timer = async {
        tokio::time::sleep(duration).await;
        stop.send_replace(true);
    };
    let (served, signed, interface, most_processes, ()) =
        tokio::join!(calling, signed_calling, using_interface, counting, timer);
    let mut attack_connections = 0;
    for task in attacking {
        attack_connections += task.await?;
    }
    let (_, peak_kib) = provider.memory()?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (after_kib, _) = provider.memory()?;
    let store_after = provider.store_bytes()?;
    Ok(Phase {
        name,
        served,
        attack_connections,
        peak_kib,
        after_kib,
        most_processes,
        store_growth: i64::try_from(store_after).unwrap_or(i64::MAX)
            - i64::try_from(store_before).unwrap_or(i64::MAX),
        interface,
        signed,
    })
}

fn print_table(phases: &[Phase]) {
    let Some(baseline) = phases.first() else {
        return;
    };
    println!();
    println!(
        "| phase | attack connections | legitimate calls served | x baseline | median time | x baseline | p95 time | provider peak RSS | x baseline | RSS 2 s after | most processes | store growth |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for phase in phases {
        let median = phase.served.median();
        let time_ratio = match (median, baseline.served.median()) {
            (Some(time), Some(base)) if !base.is_zero() => {
                format!("{:.2}", time.as_secs_f64() / base.as_secs_f64())
            }
            _ => "-".to_owned(),
        };
        println!(
            "| {} | {} | {:.0}% ({}/{}) | {:.2} | {} | {} | {} | {:.1} MiB | {:.2} | {:.1} MiB | {} | {} KiB |",
            phase.name,
            phase.attack_connections,
            phase.served.share(),
            phase.served.served,
            phase.served.attempts,
            phase.served.share() / baseline.served.share().max(f64::MIN_POSITIVE),
            median.map_or_else(|| "-".to_owned(), report::human),
            time_ratio,
            phase
                .served
                .p95()
                .map_or_else(|| "-".to_owned(), report::human),
            phase.peak_kib as f64 / 1024.0,
            phase.peak_kib as f64 / baseline.peak_kib.max(1) as f64,
            phase.after_kib as f64 / 1024.0,
            phase.most_processes,
            phase.store_growth / 1024,
        );
    }
    print_signed(phases);
    for phase in phases {
        if let Some((listened, talked)) = &phase.interface {
            println!();
            println!(
                "{}: the legitimate listener got {} events ({} gaps) over {} sessions; \
                 stream round trips served {:.0}% ({}/{}), median {}",
                phase.name,
                listened.events,
                listened.gaps,
                listened.sessions,
                talked.share(),
                talked.served,
                talked.attempts,
                talked
                    .median()
                    .map_or_else(|| "-".to_owned(), report::human),
            );
            for failure in listened.failures.iter().chain(&talked.failures) {
                println!(
                    "{}: a legitimate listener or stream failed: {failure}",
                    phase.name
                );
            }
        }
    }
    println!();
    println!("Where the legitimate calls' time went, per step (median / p95 of the attempts that finished it):");
    for phase in phases {
        println!("- {}: {}", phase.name, phase.served.steps.summary());
        if let Some(signed) = &phase.signed {
            println!(
                "- {} (signed caller): {}",
                phase.name,
                signed.steps.summary()
            );
        }
    }
    for phase in phases {
        for failure in &phase.served.failures {
            println!("{}: a legitimate attempt failed: {failure}", phase.name);
        }
        for failure in phase.signed.iter().flat_map(|signed| &signed.failures) {
            println!(
                "{}: a legitimate signed attempt failed: {failure}",
                phase.name
            );
        }
    }
}

/// The signed caller's figures, for the phases it ran in (beside the DID attack).
fn print_signed(phases: &[Phase]) {
    let signed: Vec<_> = phases
        .iter()
        .filter_map(|phase| phase.signed.as_ref().map(|signed| (&phase.name, signed)))
        .collect();
    if signed.is_empty() {
        return;
    }
    println!();
    println!("| phase | legitimate signed calls served | median time | p95 time |");
    println!("|---|---:|---:|---:|");
    for (name, served) in signed {
        println!(
            "| {name} | {:.0}% ({}/{}) | {} | {} |",
            served.share(),
            served.served,
            served.attempts,
            served
                .median()
                .map_or_else(|| "-".to_owned(), report::human),
            served.p95().map_or_else(|| "-".to_owned(), report::human),
        );
    }
}

/// Raises the soft descriptor limit to the hard one; says so when the hard one is low.
fn raise_descriptor_limit() {
    let limit = descriptors::raise_limit(0, "attacks").unwrap_or(0);
    if limit < 4096 {
        eprintln!(
            "soak: only {limit} descriptors allowed (hard limit); attacks may fail to connect. Raise it with `ulimit -Hn 65536` as root, or LimitNOFILE= under systemd"
        );
    }
}
