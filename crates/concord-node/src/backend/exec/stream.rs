//! Stream mode: the requester's bytes to the command's stdin, its stdout to the
//! requester, its stderr to our log.

use std::pin::pin;

use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::ChildStdin;

use super::{ended, kill_group, read_limited, tail, ExecSpec, STDERR_TAIL_CHARS, STREAM_INPUT_ENV};
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
}

impl ExecSpec {
    /// Runs the command for one stream.
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
            Err(source) => {
                reset_stream(sender);
                return Err(failed(&StreamFailure::Spawn { program, source }, ""));
            }
        };
        let pid = child.id();
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            reset_stream(sender);
            return Err(failed(&StreamFailure::NoStreams { program }, ""));
        };
        let run = async {
            let inbound = pin!(pump_in(receiver, stdin));
            let outbound = pin!(async {
                tokio::join!(
                    pump_out(stdout, &sender, self.frame_bytes),
                    read_limited(stderr, self.max_output_bytes)
                )
            });
            // The stream ends when the command's stdout does: the requester's half is
            // not waited for.
            let (out, err) = match futures_util::future::select(inbound, outbound).await {
                futures_util::future::Either::Left(((), outbound)) => outbound.await,
                futures_util::future::Either::Right((done, _)) => done,
            };
            let stderr = err.map(|(bytes, _)| bytes).unwrap_or_default();
            let stderr = tail(String::from_utf8_lossy(&stderr).trim(), STDERR_TAIL_CHARS);
            let status = child.wait().await;
            (out, status, stderr)
        };
        let Ok((out, status, stderr)) = tokio::time::timeout(self.timeout, run).await else {
            kill_group(pid);
            let timeout = self.timeout;
            reset_stream(sender);
            return Err(failed(&StreamFailure::Timeout { program, timeout }, ""));
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
            (Ok(()), Ok(_)) => {
                // Our half ends only now: a command that failed resets the stream instead.
                let _ = sender.finish().await;
                return Ok(json!({}));
            }
        };
        reset_stream(sender);
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
/// (or the stream fails, or the command stops reading).
async fn pump_in(mut receiver: StreamReceiver, mut stdin: ChildStdin) {
    while let Some(Ok(bytes)) = receiver.next().await {
        if stdin.write_all(&bytes).await.is_err() {
            return;
        }
    }
    let _ = stdin.shutdown().await;
}

/// Resets the stream of a failed command: dropping a [`StreamSender`] would end our half
/// in order, and the requester must see the reset, not an orderly end.
fn reset_stream(sender: StreamSender) {
    sender.abort();
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
        while frame.len() >= frame_bytes {
            let rest = frame.split_off(frame_bytes);
            let whole = std::mem::replace(&mut frame, rest);
            if sender.send(whole).await.is_err() {
                return Ok(());
            }
        }
    }
    if !frame.is_empty() {
        let _ = sender.send(frame).await;
    }
    Ok(())
}
