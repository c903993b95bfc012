//! The provider under attack, in a child process of its own (this bench binary run with
//! `--provider DIR`), so that its resident memory and its backend processes are measured
//! alone. It serves the product-info action, the seed's WeatherAgent (a property, an
//! event, progress, notify and stream actions) and [`WORK`], a notify action whose
//! backend is a process, and publishes a large [`weather::USER_FEEDBACK_RECEIVED`] event
//! every [`EVENT_EVERY`]. Its security is the default but for the resolver's loopback
//! test mode ([`security`]), so that signed callers and the DID attack, whose DIDs are on
//! `*.localhost` hosts, are authenticated as on a public host.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};

use std::time::Duration;

use concord_fixtures::{catalogue, weather};
use concord_negotiate::ActionSpec;
use concord_node::{ExecAction, Limits, Node, Security};
use serde_json::json;

use crate::BoxError;

/// The line the child prints once it serves: `serving <base URL>`.
const READY: &str = "serving ";

/// The notify action whose backend is a process (`sleep 1`).
pub const WORK: &str = "work";
/// How often the provider publishes its event.
pub const EVENT_EVERY: Duration = Duration::from_millis(100);
/// The size of the comment in each published event.
pub const EVENT_BYTES: usize = 100 * 1024;

/// The provider's security: the default (authentication optional, so anonymous callers
/// are served as before; encryption preferred) with DIDs on `localhost` and `*.localhost`
/// resolved on loopback over plain HTTP (the resolver's documented test mode). The
/// provider has no DID of its own: a node with one resumes (0-RTT) only for authenticated
/// callers, which would turn the anonymous caller's and the 0-RTT attacks' resumptions
/// into negotiations and make the phases incomparable with the runs before; it still
/// checks every signed upgrade, resolving the signer's DID document, as a node with one
/// does.
pub fn security() -> Security {
    let mut security = Security::default();
    security.resolver.allow_loopback_http = true;
    security
}

/// Child side: serves the product-info action, the WeatherAgent and [`WORK`] with the
/// node's default limits until its standard input closes.
pub async fn run(dir: &Path) -> Result<(), BoxError> {
    let work = ActionSpec {
        name: WORK.to_owned(),
        description: "Starts a job that takes a second.".to_owned(),
        input: json!({"type": "object", "properties": {"job": {"type": "integer"}}}),
        output: json!({"type": "object"}),
    };
    let node = weather::agent(Node::builder("Product agent"))
        .description("Product information for a small shop.")
        .data_dir(dir)
        .limits(Limits::default())
        .security(security())
        .action(catalogue::action(), catalogue::answer)
        .notify_action(work, ExecAction::new("sleep").args(["1"]))
        .build()?;
    let publisher = node.publisher();
    tokio::spawn(async move {
        let comment = "n".repeat(EVENT_BYTES);
        let mut ticks = tokio::time::interval(EVENT_EVERY);
        loop {
            ticks.tick().await;
            let data = json!({"rating": 5, "comment": comment});
            if publisher
                .publish(weather::USER_FEEDBACK_RECEIVED, data)
                .is_err()
            {
                return;
            }
        }
    });
    let server = node.serve("127.0.0.1:0").await?;
    println!("{READY}{}", server.url());
    std::io::stdout().flush()?;
    // The parent keeps our stdin open while it wants us.
    tokio::task::spawn_blocking(|| {
        let mut sink = String::new();
        while std::io::stdin()
            .read_line(&mut sink)
            .is_ok_and(|read| read > 0)
        {}
    })
    .await?;
    server.shutdown_within(std::time::Duration::ZERO).await?;
    Ok(())
}

/// Parent side: the provider process.
pub struct Provider {
    child: Child,
    /// Closing it stops the child.
    stdin: Option<ChildStdin>,
    pub url: String,
    pub dir: tempfile::TempDir,
}

impl Provider {
    /// Starts this binary as the provider, with a store in a fresh temp dir.
    pub fn spawn() -> Result<Self, BoxError> {
        let dir = tempfile::tempdir()?;
        let mut child = Command::new(std::env::current_exe()?)
            .arg("--provider")
            .arg(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("the provider has no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let url = line
            .trim()
            .strip_prefix(READY)
            .ok_or_else(|| format!("the provider did not start: {line:?}"))?
            .to_owned();
        let stdin = child.stdin.take();
        Ok(Self {
            child,
            stdin,
            url,
            dir,
        })
    }

    /// The provider's WebSocket endpoint.
    pub fn endpoint(&self) -> String {
        format!("{}concord", self.url.replacen("http", "ws", 1))
    }

    /// The provider's `host:port`.
    pub fn addr(&self) -> Result<std::net::SocketAddr, BoxError> {
        let authority = self.url.trim_start_matches("http://").trim_end_matches('/');
        Ok(authority.parse()?)
    }

    /// Resident memory now and its peak since the last [`Provider::reset_peak`], in KiB.
    pub fn memory(&self) -> Result<(u64, u64), BoxError> {
        crate::resident::memory_of(self.child.id())
    }

    /// How many processes the provider has started that are running now (its children).
    pub fn children(&self) -> usize {
        let pid = self.child.id().to_string();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return 0;
        };
        entries
            .filter_map(Result::ok)
            .filter(|entry| {
                std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|stat| {
                    // `pid (comm) state ppid ...`: the command may hold spaces.
                    stat.rsplit_once(')')
                        .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                        == Some(pid.as_str())
                })
            })
            .count()
    }

    /// Starts a new peak-RSS window (`/proc/PID/clear_refs` 5, Linux ≥ 4.0).
    pub fn reset_peak(&self) -> Result<(), BoxError> {
        std::fs::write(format!("/proc/{}/clear_refs", self.child.id()), "5")?;
        Ok(())
    }

    /// Bytes the store's files take now (the database, its write-ahead log, ...).
    pub fn store_bytes(&self) -> Result<u64, BoxError> {
        let mut total = 0;
        for entry in std::fs::read_dir(self.dir.path())? {
            let metadata = entry?.metadata()?;
            if metadata.is_file() {
                total += metadata.len();
            }
        }
        Ok(total)
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        drop(self.stdin.take());
        if self.child.wait().is_err() {
            let _ = self.child.kill();
        }
    }
}
