//! A bench's server side in a child process of its own (this bench binary again, run with
//! `--serve WHAT N`), so that its memory is its own. The child prints `URL <url>`, then
//! answers each `stats` line on its stdin with its resident memory and the heap the
//! [`counting`](crate::counting) allocator counted, until its stdin closes. Needs the
//! `counting` and `resident` modules beside it in the bench's root.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What to serve and for how many sessions, when this process is a server child
/// (`--serve WHAT N`).
pub fn requested() -> Result<Option<(String, usize)>, BoxError> {
    let args: Vec<String> = std::env::args().collect();
    match args.as_slice() {
        [_, flag, what, count] if flag == "--serve" => Ok(Some((what.clone(), count.parse()?))),
        _ => Ok(None),
    }
}

/// Child side, once it serves `url`: says it, then answers each `stats` line with
/// `STATS <rss kB> <hwm kB> <heap bytes> <heap blocks> <blocks:bytes,…>` (the last one per
/// size class) until stdin closes.
pub async fn answer_stats(url: String) -> Result<(), BoxError> {
    // Blocking pipes on a thread of their own (tokio's `io-std` is not enabled here).
    tokio::task::spawn_blocking(move || {
        use std::io::{BufRead, Write};
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "URL {url}")?;
        stdout.flush()?;
        for line in std::io::stdin().lock().lines() {
            if line?.trim() == "stats" {
                let (rss, hwm) = crate::resident::memory_of("self")?;
                let heap = crate::counting::heap();
                let classes: Vec<String> = heap
                    .classes
                    .iter()
                    .map(|(blocks, bytes)| format!("{blocks}:{bytes}"))
                    .collect();
                writeln!(
                    stdout,
                    "STATS {rss} {hwm} {} {} {}",
                    heap.bytes,
                    heap.blocks,
                    classes.join(",")
                )?;
                stdout.flush()?;
            }
        }
        Ok(())
    })
    .await?
}

/// Parent side: a server child process and its pipes.
pub struct ServerProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: tokio::io::Lines<BufReader<ChildStdout>>,
    /// What the child serves.
    pub url: String,
    /// How long the child is left to settle before a reading.
    settle: Duration,
}

/// One reading of the server's memory.
#[derive(Debug, Clone)]
pub struct Stats {
    pub rss_kb: u64,
    /// Peak resident memory.
    #[allow(dead_code, reason = "not every bench reports the peak")]
    pub hwm_kb: u64,
    pub heap: crate::counting::Heap,
}

impl ServerProcess {
    /// Starts this binary with `--serve what sessions`; its readings come `settle` after
    /// they are asked for.
    pub async fn start(what: &str, sessions: usize, settle: Duration) -> Result<Self, BoxError> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["--serve", what, &sessions.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut stdout = BufReader::new(stdout).lines();
        let line = stdout
            .next_line()
            .await?
            .ok_or("the server process ended before saying its URL")?;
        let url = line
            .strip_prefix("URL ")
            .ok_or_else(|| format!("the server process said {line:?}"))?
            .to_owned();
        Ok(Self {
            child,
            stdin,
            stdout,
            url,
            settle,
        })
    }

    /// Its memory now, after letting it settle.
    pub async fn stats(&mut self) -> Result<Stats, BoxError> {
        tokio::time::sleep(self.settle).await;
        self.stdin.write_all(b"stats\n").await?;
        self.stdin.flush().await?;
        let line = self
            .stdout
            .next_line()
            .await?
            .ok_or("the server process ended")?;
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, rss, hwm, heap, blocks, classes] = fields.as_slice() else {
            return Err(format!("the server process said {line:?}").into());
        };
        let classes = classes
            .split(',')
            .map(|class| -> Result<(i64, i64), BoxError> {
                let (blocks, bytes) = class.split_once(':').ok_or("a bad size class")?;
                Ok((blocks.parse()?, bytes.parse()?))
            })
            .collect::<Result<_, _>>()?;
        Ok(Stats {
            rss_kb: rss.parse()?,
            hwm_kb: hwm.parse()?,
            heap: crate::counting::Heap {
                bytes: heap.parse()?,
                blocks: blocks.parse()?,
                classes,
            },
        })
    }

    /// Closes its stdin and waits for it to end (10 s at the most, then kills it).
    pub async fn stop(mut self) -> Result<(), BoxError> {
        drop(self.stdin);
        match tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await {
            Ok(status) => {
                status?;
            }
            Err(_) => self.child.kill().await?,
        }
        Ok(())
    }
}
