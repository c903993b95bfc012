//! Stream mode: the requester's bytes to the command's stdin, its stdout to the
//! requester, its stderr to our log.

use std::pin::pin;

use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::ChildStdin;

use super::{ended, kill_group, tail, ExecSpec, STDERR_TAIL_CHARS, STREAM_INPUT_ENV};
use crate::action::ActionError;
use crate::backend::{FAILED, TIMED_OUT};
use crate::config::human;
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
    /// The requester reset the stream (or its session ended): the command was killed.
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
            let inbound = pin!(pump_in(receiver, stdin));
            let outbound = pin!(async {
                tokio::join!(
                    pump_out(stdout, &sender, self.frame_bytes),
                    stderr_tail(stderr)
                )
            });
            // The stream ends when the command's stdout does: the requester's half is
            // not waited for, unless it is reset.
            let (out, stderr) = match futures_util::future::select(inbound, outbound).await {
                futures_util::future::Either::Left((Ok(()), outbound)) => outbound.await,
                futures_util::future::Either::Left((Err(error), _)) => return Err(error),
                futures_util::future::Either::Right((done, _)) => done,
            };
            let stderr = tail(String::from_utf8_lossy(&stderr).trim(), STDERR_TAIL_CHARS);
            let status = child.wait().await;
            Ok((out, status, stderr))
        };
        let (out, status, stderr) = match tokio::time::timeout(self.timeout, run).await {
            Ok(Ok(done)) => done,
            Ok(Err(error)) => {
                kill_group(pid);
                let reason = error.to_string();
                return Err(failed(&StreamFailure::Abandoned { program, reason }, ""));
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
        let failure = match (out, status) {
            (Err(source), _) | (_, Err(source)) => StreamFailure::Io { program, source },
            (Ok(()), Ok(status)) if !status.success() => StreamFailure::Failed {
                program,
                ended: ended(status),
            },
            // Our half ends once this returns `Ok` (a failure resets the stream instead).
            (Ok(()), Ok(_)) => return Ok(json!({})),
        };
        Err(failed(&failure, &stderr))
    }
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
async fn pump_in(
    mut receiver: StreamReceiver,
    mut stdin: ChildStdin,
) -> Result<(), crate::error::CallError> {
    while let Some(bytes) = receiver.next().await {
        if stdin.write_all(&bytes?).await.is_err() {
            return Ok(());
        }
    }
    let _ = stdin.shutdown().await;
    Ok(())
}

/// Bytes of a stream command's stderr kept for the log: its last ones. The rest is read
/// and dropped, so a command may write on stderr for as long as its stream lasts.
const STDERR_KEPT: usize = 4 * STDERR_TAIL_CHARS;

/// Reads `stderr` to its end and returns its last [`STDERR_KEPT`] bytes.
async fn stderr_tail(mut stderr: impl AsyncRead + Unpin) -> Vec<u8> {
    let mut kept = Vec::with_capacity(2 * STDERR_KEPT);
    let mut buffer = [0u8; 4096];
    while let Ok(read @ 1..) = stderr.read(&mut buffer).await {
        kept.extend_from_slice(buffer.get(..read).unwrap_or_default());
        if kept.len() > 2 * STDERR_KEPT {
            kept.drain(..kept.len() - STDERR_KEPT);
        }
    }
    let excess = kept.len().saturating_sub(STDERR_KEPT);
    kept.drain(..excess);
    kept
}

/// The command's stdout to the requester, in frames of `frame_bytes` when not zero. A
/// requester gone stops the reading (the command then sees a closed pipe).
async fn pump_out(
    mut stdout: impl AsyncRead + Unpin,
    sender: &StreamSender,
    frame_bytes: usize,
) -> std::io::Result<()> {
    let mut buffer = vec![0; 16 << 10];
    let mut frame = Vec::new();
    loop {
        let read = stdout.read(&mut buffer).await?;
        let Some(bytes) = buffer.get(..read).filter(|bytes| !bytes.is_empty()) else {
            break;
        };
        if frame_bytes == 0 {
            if sender.send(bytes.to_vec()).await.is_err() {
                return Ok(());
            }
            continue;
        }
        frame.extend_from_slice(bytes);
        let mut whole = frame.chunks_exact(frame_bytes);
        for piece in whole.by_ref() {
            if sender.send(piece.to_vec()).await.is_err() {
                return Ok(());
            }
        }
        let rest = whole.remainder().len();
        frame.drain(..frame.len() - rest);
    }
    if !frame.is_empty() {
        let _ = sender.send(frame).await;
    }
    Ok(())
}
