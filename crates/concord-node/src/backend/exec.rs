//! The `exec` backend: a command run per call, input JSON on stdin, output JSON on stdout.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

use crate::action::{Action, ActionError, ActionFuture};
use crate::backend::{describe_json_error, preview};
use crate::config::human;

/// Runs a command per call: the action's input JSON is written to its stdin, and what it
/// prints on stdout is the output JSON.
///
/// | the command… | the caller gets |
/// |---|---|
/// | exits 0 having printed one JSON value | that value |
/// | cannot be started | 502 naming the program and the OS error |
/// | exits non-zero (or is killed by a signal) | 502 with its exit code (or the signal) and the end of its stderr |
/// | prints something that is not JSON (or nothing) | 502 with the parse error and the start of the output |
/// | prints more than `max_output_bytes` | 502 naming the limit |
/// | runs past `timeout` | 504; the command (and its process group, on Unix) is killed |
///
/// ```no_run
/// use std::time::Duration;
/// use concord_node::ExecAction;
///
/// let action = ExecAction::new("python3")
///     .arg("product_info.py")
///     .timeout(Duration::from_secs(5));
/// ```
#[derive(Debug, Clone)]
pub struct ExecAction {
    inner: Arc<ExecSpec>,
}

#[derive(Debug, Clone)]
struct ExecSpec {
    program: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    current_dir: Option<PathBuf>,
    timeout: Duration,
    max_output_bytes: usize,
}

/// Default time a command may run per call.
pub const DEFAULT_EXEC_TIMEOUT: Duration = Duration::from_secs(30);
/// Default cap on what a command may print on stdout per call (and on the stderr kept).
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 10 << 20;

impl ExecAction {
    /// Runs `program` (looked up in `PATH` when it has no slash) with no arguments.
    pub fn new(program: impl Into<String>) -> Self {
        Self {
            inner: Arc::new(ExecSpec {
                program: program.into(),
                args: Vec::new(),
                env: Vec::new(),
                current_dir: None,
                timeout: DEFAULT_EXEC_TIMEOUT,
                max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            }),
        }
    }

    fn spec(&mut self) -> &mut ExecSpec {
        Arc::make_mut(&mut self.inner)
    }

    /// Adds one argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.spec().args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args(mut self, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.spec().args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable for the command.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.spec().env.push((key.into(), value.into()));
        self
    }

    /// Runs the command in `dir`.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.spec().current_dir = Some(dir.into());
        self
    }

    /// How long one call may run (default 30 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.spec().timeout = timeout;
        self
    }

    /// Cap on stdout per call (default 10 MiB).
    pub fn max_output_bytes(mut self, bytes: usize) -> Self {
        self.spec().max_output_bytes = bytes;
        self
    }
}

impl Action for ExecAction {
    fn call(&self, input: Value) -> ActionFuture {
        let spec = Arc::clone(&self.inner);
        Box::pin(async move { spec.run(&input).await })
    }
}

impl ExecSpec {
    async fn run(&self, input: &Value) -> Result<Value, ActionError> {
        let program = &self.program;
        let mut command = Command::new(program);
        command
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(dir) = &self.current_dir {
            command.current_dir(dir);
        }
        #[cfg(unix)]
        command.process_group(0);
        let mut child = command.spawn().map_err(|error| {
            ActionError::bad_gateway(format!("cannot run `{program}`: {error}"))
        })?;
        let pid = child.id();
        let outcome = tokio::time::timeout(self.timeout, self.exchange(&mut child, input)).await;
        match outcome {
            Ok(result) => result,
            Err(_) => {
                kill_group(pid);
                let _ = child.start_kill();
                Err(ActionError::timeout(format!(
                    "`{program}` did not finish within {} and was killed",
                    human(self.timeout)
                )))
            }
        }
    }

    async fn exchange(&self, child: &mut Child, input: &Value) -> Result<Value, ActionError> {
        let program = &self.program;
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(ActionError::bad_gateway(format!(
                "`{program}` started without its standard streams"
            )));
        };
        // JSON of a `Value` cannot fail to serialise.
        let body = serde_json::to_vec(input).unwrap_or_default();
        let write = async move {
            // A command that exits without reading its input is not an error by itself.
            let _ = stdin.write_all(&body).await;
            let _ = stdin.shutdown().await;
            drop(stdin);
        };
        let limit = self.max_output_bytes;
        let (_, stdout, stderr) = tokio::join!(
            write,
            read_limited(stdout, limit),
            read_limited(stderr, limit)
        );
        let status = child.wait().await.map_err(|error| {
            ActionError::bad_gateway(format!("waiting for `{program}` failed: {error}"))
        })?;
        let (stdout, stdout_truncated) = stdout.map_err(|error| {
            ActionError::bad_gateway(format!("reading the output of `{program}` failed: {error}"))
        })?;
        let stderr = stderr.map(|(bytes, _)| bytes).unwrap_or_default();
        if !status.success() {
            let stderr = String::from_utf8_lossy(&stderr);
            let tail = tail(stderr.trim(), 500);
            let ended = ended(status);
            return Err(ActionError::bad_gateway(if tail.is_empty() {
                format!("`{program}` {ended}")
            } else {
                format!("`{program}` {ended}: {tail}")
            }));
        }
        if stdout_truncated {
            return Err(ActionError::bad_gateway(format!(
                "`{program}` printed more than the limit of {limit} bytes"
            )));
        }
        serde_json::from_slice(&stdout).map_err(|error| {
            ActionError::bad_gateway(format!(
                "`{program}` printed output that is not JSON ({}); it starts: {}",
                describe_json_error(&error),
                preview(&stdout)
            ))
        })
    }
}

/// How a command that failed ended: `exited with code 3`, `was killed by signal 9`.
fn ended(status: std::process::ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exited with code {code}");
    }
    #[cfg(unix)]
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&status) {
        return format!("was killed by signal {signal}");
    }
    format!("ended with {status}")
}

/// Reads at most `limit` bytes; the flag says whether there was more.
async fn read_limited(
    stream: impl AsyncRead + Unpin,
    limit: usize,
) -> std::io::Result<(Vec<u8>, bool)> {
    let mut bytes = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    stream.take(cap).read_to_end(&mut bytes).await?;
    let truncated = bytes.len() > limit;
    bytes.truncate(limit);
    Ok((bytes, truncated))
}

/// The last `chars` characters of `text`.
fn tail(text: &str, chars: usize) -> String {
    let count = text.chars().count();
    if count <= chars {
        return text.to_owned();
    }
    let tail: String = text.chars().skip(count - chars).collect();
    format!("…{tail}")
}

/// Kills the process group the command leads (its children too), on Unix.
fn kill_group(pid: Option<u32>) {
    #[cfg(unix)]
    if let Some(pid) = pid.and_then(|pid| i32::try_from(pid).ok()) {
        // SAFETY: kill(2) with a negative pid signals the process group we created for the
        // command with `process_group(0)`; it touches no memory of ours.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    #[cfg(not(unix))]
    let _ = pid;
}
