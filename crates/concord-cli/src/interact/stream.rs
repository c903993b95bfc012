//! `concord stream URL ACTION`: standard input to a stream action, its bytes to standard
//! output; ends when both halves ended.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use concord_describe::{InteractionMode, StreamDescription};
use concord_node::{CallError, StreamReceiver, StreamSender};
use serde_json::Value;
use tokio::sync::mpsc;

use super::{Affordance, Kind, PeerArgs};
use crate::output;

/// Bytes read from standard input at a time for a stream that is not framed.
const PIECE_BYTES: usize = 16 * 1024;
/// The largest stream chunk (`StreamLimits::max_chunk_size`, the default both peers use).
const MAX_CHUNK_BYTES: usize = 64 * 1024;
/// Pieces queued between the reading thread and the stream.
const PIECE_QUEUE: usize = 64;
/// How long to wait before sending again a frame a realtime stream dropped (no credit).
const RETRY_WAIT: Duration = Duration::from_millis(2);
/// How long a frame is tried again before it is given up.
const GIVE_UP_AFTER: Duration = Duration::from_secs(5);

/// `concord stream`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  concord stream http://127.0.0.1:8080 talk < voice.pcm > answer.pcm
  concord stream http://127.0.0.1:8080 talk --input '{\"voice\": \"alloy\"}' < voice.pcm | aplay -f S16_LE -r 24000

Standard input goes to the stream as it is read: in pieces of `concord:frameBytes` when the
action declares frames (the last piece may be shorter), else as it comes. The peer's bytes
are written to standard output as they arrive. Both halves flow at once under the
receiver's credit; the command ends when standard input ended and the peer finished its
half.

Realtime streams (`concord:realtime`) drop a frame the receiver's credit has no room for,
rather than wait. Our side sends such a frame again a moment later (standard input is a
file, not a live microphone), for up to 5 s; a frame still refused then is dropped, and at
the end standard error says how many frames (and bytes) of standard input this side
dropped: `concord: ACTION: N frame(s) (B bytes) of standard input were dropped by this
side`. The exit code stays 0: losing frames is what a realtime stream does. Frames the
peer's side drops of its half (its output arrives faster than we read it) are not reported
to us over the wire; a Concord peer logs them (\"our realtime sender dropped frames\").

Exit codes: 0 both halves ended; 1 the peer refused the stream or reset it, or the action
is not a stream action; 2 the peer could not be reached or the session ended early.")]
pub struct StreamArgs {
    #[command(flatten)]
    peer: PeerArgs,
    /// The stream action.
    action: String,
    /// The action's input as JSON (default `{}`).
    #[arg(long, value_name = "JSON", default_value = "{}")]
    input: String,
}

/// Runs `concord stream`.
pub fn run(mut args: StreamArgs) -> anyhow::Result<ExitCode> {
    args.peer.settle()?;
    let input = super::json_argument(&args.input, "--input")?;
    let node = super::requester(&args.peer)?;
    crate::runtime::block_on(async move {
        let described = super::describe(&node, &args.peer.url).await?;
        let (piece_bytes, realtime) = match described.affordance(&args.action) {
            Some(Affordance::Action {
                mode: InteractionMode::Stream,
                stream,
            }) => match stream {
                Some(stream) => (piece_bytes(&stream, &args.action)?, stream.realtime),
                None => (PIECE_BYTES, false),
            },
            Some(Affordance::Action { .. }) => {
                return Err(output::Wrong::error(format!(
                    "`{}` is not a stream action (`concord call` calls it)",
                    args.action
                )))
            }
            _ => {
                described.require(&args.action, Kind::Action)?;
                return Err(output::Wrong::error(format!(
                    "the peer's description has no action `{}`",
                    args.action
                )));
            }
        };
        let names = [args.action.as_str()];
        let connection =
            match super::connect_described(&node, &args.peer.url, &described, &names).await {
                Ok(connection) => connection,
                Err(code) => return Ok(code),
            };
        let exit = pipe(&connection, &args.action, input, piece_bytes, realtime).await?;
        connection.close().await;
        Ok(exit)
    })?
}

/// Opens the stream and runs both halves to their end.
async fn pipe(
    connection: &concord_node::Connection,
    action: &str,
    input: Value,
    piece_bytes: usize,
    realtime: bool,
) -> anyhow::Result<ExitCode> {
    let (sender, receiver) = match connection.open_stream(action, input).await {
        Ok(halves) => halves,
        Err(error) => return Ok(super::failed(action, &error)),
    };
    let pieces = read_stdin(piece_bytes);
    let ((sent, given_up), received) =
        tokio::join!(send(sender, pieces, realtime), receive(receiver));
    given_up.report(action);
    let received = received?;
    let mut exit = 0u8;
    for result in [sent, received] {
        if let Err(error) = result {
            let code = super::failed(action, &error);
            exit = exit.max(if code == ExitCode::from(1) { 1 } else { 2 });
        }
    }
    Ok(ExitCode::from(exit))
}

/// The size of the pieces standard input is sent in: [`PIECE_BYTES`] on a reliable stream
/// (a byte stream: a peer's tiny `concord:frameBytes` does not make us send byte by byte);
/// on a realtime one each piece goes whole or is dropped, so it is the declared frame, or
/// for an unframed one at most the credit. A realtime stream whose frame is larger than
/// its credit or a chunk is refused (no frame of it could ever go whole).
fn piece_bytes(stream: &StreamDescription, action: &str) -> anyhow::Result<usize> {
    let frame = usize::try_from(stream.frame_bytes).unwrap_or(usize::MAX);
    let sendable = usize::try_from(stream.initial_credit)
        .unwrap_or(usize::MAX)
        .clamp(1, MAX_CHUNK_BYTES);
    if !stream.realtime {
        // Frames do not matter on a reliable stream (it is a byte stream): pieces of our
        // size, whatever tiny frame a peer declares.
        return Ok(PIECE_BYTES);
    }
    if frame == 0 {
        // Unframed realtime: a piece is sent whole or dropped, so no larger than the credit.
        return Ok(PIECE_BYTES.min(sendable));
    }
    if frame > sendable {
        return Err(output::Wrong::error(format!(
            "`{action}` is a realtime stream of {frame}-byte frames, but at most {sendable} \
             bytes can go at once (its credit, or a stream chunk): no frame could be sent"
        )));
    }
    Ok(frame)
}

/// Standard input in pieces of `size` bytes (each full but the last), read by a thread
/// of its own; an error reading ends the input early (said on standard error).
fn read_stdin(size: usize) -> mpsc::Receiver<Vec<u8>> {
    let (pieces, receiver) = mpsc::channel(PIECE_QUEUE);
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        loop {
            let mut piece = vec![0u8; size];
            let mut filled = 0;
            while filled < size {
                match stdin.read(&mut piece[filled..]) {
                    Ok(0) => break,
                    Ok(read) => filled += read,
                    Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(error) => {
                        output::note(format_args!("cannot read standard input: {error}"));
                        break;
                    }
                }
            }
            if filled == 0 {
                return;
            }
            piece.truncate(filled);
            let last = filled < size;
            if pieces.blocking_send(piece).is_err() || last {
                return;
            }
        }
    });
    receiver
}

/// Frames of our half given up (realtime: no credit for them within 5 s), and their bytes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct GivenUp {
    frames: u64,
    bytes: u64,
}

impl GivenUp {
    /// Says on standard error what of standard input never went, if anything.
    fn report(self, action: &str) {
        if self.frames > 0 {
            output::note(format_args!(
                "{action}: {} frame(s) ({} bytes) of standard input were dropped by this side: \
                 the peer's credit had no room for them within 5 s",
                self.frames, self.bytes
            ));
        }
    }
}

/// Our half: every piece, then the end; the frames given up on a realtime stream.
async fn send(
    sender: StreamSender,
    mut pieces: mpsc::Receiver<Vec<u8>>,
    realtime: bool,
) -> (Result<(), CallError>, GivenUp) {
    let mut given_up = GivenUp::default();
    while let Some(piece) = pieces.recv().await {
        if !realtime {
            if let Err(error) = sender.send(piece).await {
                return (Err(error), given_up);
            }
            continue;
        }
        // A realtime stream drops a frame it has no credit for (0 bytes went): again, for
        // up to 5 s, then it is given up and counted.
        let give_up = tokio::time::Instant::now() + GIVE_UP_AFTER;
        loop {
            match sender.send(piece.clone()).await {
                Err(error) => return (Err(error), given_up),
                Ok(0) if !piece.is_empty() => {}
                Ok(_) => break,
            }
            if tokio::time::Instant::now() >= give_up {
                given_up.frames += 1;
                given_up.bytes += piece.len() as u64;
                break;
            }
            tokio::time::sleep(RETRY_WAIT).await;
        }
    }
    (sender.finish().await, given_up)
}

/// The peer's half, to standard output. The outer error is a failed write (standard
/// output gone); the inner one the stream's.
async fn receive(mut receiver: StreamReceiver) -> anyhow::Result<Result<(), CallError>> {
    let mut stdout = std::io::stdout();
    while let Some(bytes) = receiver.next().await {
        match bytes {
            Ok(bytes) => {
                let mut lock = stdout.lock();
                lock.write_all(&bytes)?;
                lock.flush()?;
            }
            Err(error) => return Ok(Err(error)),
        }
    }
    stdout.flush()?;
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream as another agent's description may declare it (parsed from its JSON).
    fn declared(json: &str) -> StreamDescription {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn what_a_peer_declares_bounds_the_pieces_not_the_other_way_round() {
        let unframed = declared(r#"{"concord:contentType": "x", "concord:initialCredit": 10}"#);
        assert_eq!(piece_bytes(&unframed, "a").unwrap(), PIECE_BYTES);
        let framed = declared(
            r#"{"concord:contentType": "audio/pcm", "concord:frameBytes": 960, "concord:initialCredit": 48000, "concord:realtime": true}"#,
        );
        assert_eq!(piece_bytes(&framed, "a").unwrap(), 960);
        // 4 GiB frames on a reliable stream: read in our own pieces, never allocated.
        let huge = declared(
            r#"{"concord:contentType": "x", "concord:frameBytes": 4294967295, "concord:initialCredit": 1048576}"#,
        );
        assert_eq!(piece_bytes(&huge, "a").unwrap(), PIECE_BYTES);
        // 1-byte frames on a reliable stream: not a send per byte.
        let tiny = declared(
            r#"{"concord:contentType": "x", "concord:frameBytes": 1, "concord:initialCredit": 1048576}"#,
        );
        assert_eq!(piece_bytes(&tiny, "a").unwrap(), PIECE_BYTES);
        // Unframed realtime with little credit: pieces that can go whole.
        let small = declared(
            r#"{"concord:contentType": "x", "concord:initialCredit": 1000, "concord:realtime": true}"#,
        );
        assert_eq!(piece_bytes(&small, "a").unwrap(), 1000);
        // A realtime frame larger than the credit could never be sent whole: refused.
        let unsendable = declared(
            r#"{"concord:contentType": "x", "concord:frameBytes": 2000, "concord:initialCredit": 1000, "concord:realtime": true}"#,
        );
        let error = piece_bytes(&unsendable, "talk").unwrap_err().to_string();
        assert!(error.contains("2000-byte frames"), "{error}");
    }
}
