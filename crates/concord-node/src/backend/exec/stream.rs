//! Stream mode: the requester's bytes to the command's stdin, its stdout to the
//! requester, its stderr to our log. A requester that resets the stream or stops reading
//! its output (a STOP) has the command killed.

use std::convert::Infallible;
use std::pin::pin;

use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::ChildStdin;

use super::{ended, kill_group, stderr_tail, tail, ExecSpec, STDERR_TAIL_CHARS, STREAM_INPUT_ENV};
use crate::action::ActionError;
use crate::backend::{FAILED, TIMED_OUT};
use crate::config::human;
use crate::error::CallError;
use crate::interact::{StreamIo, StreamReceiver, StreamSender};

/// Why a stream's command failed, for our log (the requester sees the stream reset).
#[derive(Debug, thiserror::Error)]
enum StreamFailure {
    /// The command cannot be started.
    #[error("cannot run `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    /// The command started without the pipes we asked for.
    #[error("`{program}` started without its standard streams")]
    NoStreams { program: String },
    /// Reading its stdout or waiting for it failed.
    #[error("`{program}`: {source}")]
    Io {
        program: String,
        source: std::io::Error,
    },
    /// It ended with a failure.
    #[error("`{program}` {ended}")]
    Failed { program: String, ended: String },
    /// It ran past its timeout and was killed.
    #[error("`{program}` did not finish within {} and was killed", human(*.timeout))]
    Timeout {
        program: String,
        timeout: std::time::Duration,
    },
    /// The requester reset the stream (or its session ended) or stopped reading its
    /// output: the command was killed.
    #[error("`{program}` was killed: {reason}")]
    Abandoned { program: String, reason: String },
}

impl ExecSpec {
    /// Runs the command for one stream. Returning an error resets the stream (the
    /// requester never takes a failed command's output for a whole one).
    pub(super) async fn run_stream(
        &self,
        input: &Value,
        stream: StreamIo,
    ) -> Result<Value, ActionError> {
        let program = self.program.clone();
        let StreamIo { sender, receiver } = stream;
        let mut command = self.command();
        // JSON of a `Value` cannot fail to serialise.
        command.env(
            STREAM_INPUT_ENV,
            serde_json::to_string(input).unwrap_or_default(),
        );
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(source) => return Err(failed(&StreamFailure::Spawn { program, source }, "")),
        };
        let pid = child.id();
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(failed(&StreamFailure::NoStreams { program }, ""));
        };
        let run = async {
            // The requester's bytes to stdin until it ends its half; then a reset (or its
            // session ending), or its STOP (it reads no more of the output), is heard
            // through our sender.
            let inbound = pin!(async {
                // Heard even while stdin is blocked on a command that does not read (and
                // after the requester ended its half).
                tokio::select! {
                    pumped = pump_in(receiver, stdin) => pumped?,
                    gone = unwanted(&sender) => return Err(gone),
                }
                Err::<Infallible, _>(unwanted(&sender).await)
            });
            let outbound = pin!(async {
                tokio::try_join!(pump_out(stdout, &sender, self.frame_bytes), async {
                    Ok(stderr_tail(stderr).await)
                })
            });
            // The stream ends when the command's stdout does: the requester's half is
            // not waited for, unless it is reset, which kills the command.
            let ((), stderr) = match futures_util::future::select(inbound, outbound).await {
                futures_util::future::Either::Left((Err(gone), _)) => return Err(Pump::Gone(gone)),
                futures_util::future::Either::Left((Ok(never), _)) => match never {},
                futures_util::future::Either::Right((done, _)) => done?,
            };
            let stderr = tail(String::from_utf8_lossy(&stderr).trim(), STDERR_TAIL_CHARS);
            let status = child.wait().await.map_err(Pump::Io)?;
            Ok((status, stderr))
        };
        let (status, stderr) = match tokio::time::timeout(self.timeout, run).await {
            Ok(Ok(done)) => done,
            Ok(Err(pump)) => {
                kill_group(pid);
                let failure = match pump {
                    Pump::Gone(error) => StreamFailure::Abandoned {
                        program,
                        reason: error.to_string(),
                    },
                    Pump::Io(source) => StreamFailure::Io { program, source },
                };
                return Err(failed(&failure, ""));
            }
            Err(_) => {
                kill_group(pid);
                let timeout = self.timeout;
                return Err(failed(&StreamFailure::Timeout { program, timeout }, ""));
            }
        };
        if !stderr.is_empty() {
            tracing::info!(%stderr, "the stream's command wrote on stderr");
        }
        if !status.success() {
            let failure = StreamFailure::Failed {
                program,
                ended: ended(status),
            };
            return Err(failed(&failure, &stderr));
        }
        // Our half ends once this returns `Ok` (a failure resets the stream instead).
        Ok(json!({}))
    }
}

/// Resolves when the command's output is wanted no more: the requester stopped reading
/// (its STOP) or the stream is gone (reset, or its session ended); says which.
async fn unwanted(sender: &StreamSender) -> CallError {
    match sender.stopped().await {
        Ok(code) => CallError::Stopped { code },
        Err(gone) => gone,
    }
}

/// Why the pipes between a stream and its command stopped early.
enum Pump {
    /// The requester reset the stream (or its session ended) or stopped reading its
    /// output: the command is killed.
    Gone(CallError),
    /// Reading the command's stdout, or waiting for it, failed.
    Io(std::io::Error),
}

/// Logs a failure; what the requester is told.
fn failed(failure: &StreamFailure, stderr: &str) -> ActionError {
    tracing::warn!(error = %failure, %stderr, "the stream's command failed; the stream is reset");
    match failure {
        StreamFailure::Timeout { .. } => ActionError::timeout(TIMED_OUT),
        _ => ActionError::bad_gateway(FAILED),
    }
}

/// The requester's bytes to the command's stdin, closed when the requester ends its half
/// (or the command stops reading). A stream reset by the requester (or lost with its
/// session) is an error: the command is then killed, not told the input ended.
async fn pump_in(mut receiver: StreamReceiver, mut stdin: ChildStdin) -> Result<(), CallError> {
    while let Some(bytes) = receiver.next().await {
        if stdin.write_all(&bytes?).await.is_err() {
            return Ok(());
        }
    }
    let _ = stdin.shutdown().await;
    Ok(())
}

/// The command's stdout to the requester, in frames of `frame_bytes` when not zero. A
/// stream the requester reset (or lost with its session) is [`Pump::Gone`]: the command
/// is then killed.
async fn pump_out(
    mut stdout: impl AsyncRead + Unpin,
    sender: &StreamSender,
    frame_bytes: usize,
) -> Result<(), Pump> {
    let mut buffer = vec![0; 16 << 10];
    let mut frame = Vec::new();
    loop {
        let read = stdout.read(&mut buffer).await.map_err(Pump::Io)?;
        let Some(bytes) = buffer.get(..read).filter(|bytes| !bytes.is_empty()) else {
            break;
        };
        if frame_bytes == 0 {
            sender.send(bytes.to_vec()).await.map_err(Pump::Gone)?;
            continue;
        }
        frame.extend_from_slice(bytes);
        let mut whole = frame.chunks_exact(frame_bytes);
        for piece in whole.by_ref() {
            sender.send(piece.to_vec()).await.map_err(Pump::Gone)?;
        }
        let rest = whole.remainder().len();
        frame.drain(..frame.len() - rest);
    }
    if !frame.is_empty() {
        sender.send(frame).await.map_err(Pump::Gone)?;
    }
    Ok(())
}
