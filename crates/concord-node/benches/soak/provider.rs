//! The provider under attack, in a child process of its own (this bench binary run with
//! `--provider DIR`), so that its resident memory is measured alone.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};

use concord_fixtures::catalogue;
use concord_node::{Limits, Node};

use crate::BoxError;

/// The line the child prints once it serves: `serving <base URL>`.
const READY: &str = "serving ";

/// Child side: serves the product-info action with the node's default limits until its
/// standard input closes.
pub async fn run(dir: &Path) -> Result<(), BoxError> {
    let node = Node::builder("Product agent")
        .description("Product information for a small shop.")
        .data_dir(dir)
        .limits(Limits::default())
        .action(catalogue::action(), catalogue::answer)
        .build()?;
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
