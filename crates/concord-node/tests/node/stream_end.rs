//! How a stream ends: an orderly end only when the provider's action succeeded, a reset
//! (an error to the reader, never an end) when it failed, panicked or was abandoned, and
//! a command behind an `exec` stream killed when the requester resets.

use std::time::Duration;

use concord_negotiate::ActionSpec;
use concord_node::{
    ActionError, CallError, Connection, ExecAction, Node, Server, StreamIo, StreamReceiver,
    StreamSpec, Want,
};
use serde_json::json;

use crate::support::{build, quick_limits, requester, serve, Agent};

fn any_action(name: &str) -> ActionSpec {
    ActionSpec {
        name: name.into(),
        description: format!("The {name} stream."),
        input: json!({"type": "object"}),
        output: json!({"type": "object"}),
    }
}

fn reliable() -> StreamSpec {
    StreamSpec {
        content_type: "application/octet-stream".into(),
        output_content_type: None,
        frame_bytes: 0,
        initial_credit: 64 * 1024,
        realtime: false,
    }
}

/// Everything the reader gets: the bytes, then `Ok(())` for an orderly end or the error.
async fn read_to_end(mut receiver: StreamReceiver) -> (Vec<u8>, Result<(), CallError>) {
    let mut bytes = Vec::new();
    let read = async {
        while let Some(piece) = receiver.next().await {
            match piece {
                Ok(piece) => bytes.extend_from_slice(&piece),
                Err(error) => {
                    // An error is the last thing a reader hears.
                    assert!(receiver.next().await.is_none());
                    return Err(error);
                }
            }
        }
        Ok(())
    };
    let end = tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .expect("the stream ends one way or the other");
    (bytes, end)
}

/// The provider served, and the requester's interface session for `names` with it.
async fn connect(provider: &Agent, requester: &Agent, names: &[&str]) -> (Server, Connection) {
    let server = serve(provider).await;
    let connection = requester
        .node
        .connect_with(server.url(), Want::interface(names.to_vec()))
        .await
        .unwrap();
    (server, connection)
}

#[tokio::test]
async fn a_stream_ends_in_order_only_when_its_action_succeeded() {
    let provider = build(
        Node::builder("Stream endings")
            .limits(quick_limits())
            .stream_action(
                any_action("fails"),
                reliable(),
                |_, io: StreamIo| async move {
                    io.sender.send(b"half a result".to_vec()).await.ok();
                    Err::<serde_json::Value, _>(ActionError::internal("gave up"))
                },
            )
            .stream_action(
                any_action("panics"),
                reliable(),
                |_, io: StreamIo| async move {
                    io.sender.send(b"half a result".to_vec()).await.ok();
                    if io.sender.send(Vec::new()).await.is_ok() {
                        panic!("the action broke");
                    }
                    Ok(json!({}))
                },
            )
            .stream_action(
                any_action("floods_then_fails"),
                reliable(),
                |_, io: StreamIo| async move {
                    // More than the reader's queue holds: it is full when the reset comes.
                    for _ in 0..96 {
                        io.sender.send(vec![7; 16 * 1024]).await.ok();
                    }
                    Err::<serde_json::Value, _>(ActionError::internal("gave up"))
                },
            )
            .stream_action(
                any_action("finishes_then_fails"),
                reliable(),
                |_, io: StreamIo| async move {
                    // Its own `finish` ends the stream only once it returned `Ok`.
                    io.sender.send(b"all of it?".to_vec()).await.ok();
                    io.sender.finish().await.ok();
                    Err::<serde_json::Value, _>(ActionError::internal("no"))
                },
            )
            .stream_action(
                any_action("hands_off_then_panics"),
                reliable(),
                |_, io: StreamIo| async move {
                    tokio::spawn(async move {
                        // The task panics holding the sender: the peer must not read an end.
                        if io.sender.send(b"a beginning".to_vec()).await.is_ok() {
                            panic!("the writer broke");
                        }
                    });
                    Ok(json!({}))
                },
            )
            .stream_action(
                any_action("hands_off"),
                reliable(),
                |_, io: StreamIo| async move {
                    // The action returns at once; a task it started writes on and ends
                    // the stream by dropping the sender.
                    tokio::spawn(async move {
                        for piece in [&b"later "[..], b"and later"] {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            io.sender.send(piece.to_vec()).await.ok();
                        }
                    });
                    Ok(json!({}))
                },
            ),
    );
    let requester = requester();
    let (_server, peer) = connect(
        &provider,
        &requester,
        &[
            "fails",
            "panics",
            "floods_then_fails",
            "finishes_then_fails",
            "hands_off_then_panics",
            "hands_off",
        ],
    )
    .await;

    for name in [
        "fails",
        "panics",
        "floods_then_fails",
        "finishes_then_fails",
    ] {
        let (sender, receiver) = peer.open_stream(name, json!({})).await.unwrap();
        // The reader starts late: whatever was queued for it, the reset is not lost.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (bytes, end) = read_to_end(receiver).await;
        // The action's status (500) is the reset code; a panic resets the stream as the
        // sender unwinds (cancelled, 499) or when the node catches it (500), whichever
        // comes first.
        let status = match end {
            Err(CallError::Remote { code, .. }) => code,
            _ => 0,
        };
        assert!(
            status == 500 || (name == "panics" && status == 499),
            "{name}: {end:?} after {:?}",
            String::from_utf8_lossy(&bytes)
        );
        drop(sender);
    }
    // Reset by the task's sender as it unwinds (not a status: the action had returned).
    let (_sender, receiver) = peer
        .open_stream("hands_off_then_panics", json!({}))
        .await
        .unwrap();
    let (_, end) = read_to_end(receiver).await;
    assert!(end.is_err(), "{end:?}");
    let (_sender, receiver) = peer.open_stream("hands_off", json!({})).await.unwrap();
    let (bytes, end) = read_to_end(receiver).await;
    assert_eq!(end, Ok(()));
    assert_eq!(bytes, b"later and later");
    // The session still serves.
    let (_sender, receiver) = peer.open_stream("hands_off", json!({})).await.unwrap();
    assert_eq!(read_to_end(receiver).await.1, Ok(()));
}

#[tokio::test]
async fn a_reset_reaches_the_action_as_an_error_not_as_the_end_of_its_input() {
    let (seen, mut heard) = tokio::sync::mpsc::unbounded_channel();
    let provider = build(
        Node::builder("Reset reader")
            .limits(quick_limits())
            .stream_action(any_action("listen"), reliable(), move |_, io: StreamIo| {
                let seen = seen.clone();
                async move {
                    let (_, end) = read_to_end(io.receiver).await;
                    let _ = seen.send(end);
                    Ok(json!({}))
                }
            }),
    );
    let requester = requester();
    let (_server, peer) = connect(&provider, &requester, &["listen"]).await;
    let (sender, _receiver) = peer.open_stream("listen", json!({})).await.unwrap();
    sender.send(b"some input".to_vec()).await.unwrap();
    sender.abort();
    let end = tokio::time::timeout(Duration::from_secs(10), heard.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(end.is_err(), "the action read {end:?}");
}

/// Whether process `pid` is gone (or a zombie nobody waits for any more).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[tokio::test]
async fn exec_streams_outlive_chatty_stderr_and_deaf_commands_and_die_with_a_reset() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    // 2 MiB on stderr, far past the output limit, then (only if all of it could be
    // written) the input echoed back.
    let chatty = ExecAction::new("sh")
        .args(["-c", "head -c 2097152 /dev/zero | tr '\\0' x >&2 && cat"])
        .max_output_bytes(64 * 1024);
    // Reads 10 bytes, answers them and ends while the requester still sends.
    let short = ExecAction::new("head").args(["-c", "10"]);
    let waiting = ExecAction::new("sh").args([
        "-c",
        // It would outlive the end of its input: only a kill stops it.
        &format!("echo $$ > '{}'; cat; exec sleep 60", pid_file.display()),
    ]);
    let provider = build(
        Node::builder("Exec streams")
            .limits(quick_limits())
            .stream_action(any_action("chatty"), reliable(), chatty)
            .stream_action(any_action("short"), reliable(), short)
            .stream_action(any_action("waiting"), reliable(), waiting),
    );
    let requester = requester();
    let (_server, peer) = connect(&provider, &requester, &["chatty", "short", "waiting"]).await;

    let (sender, receiver) = peer.open_stream("chatty", json!({})).await.unwrap();
    sender.send(b"still here".to_vec()).await.unwrap();
    sender.finish().await.unwrap();
    let (bytes, end) = read_to_end(receiver).await;
    assert_eq!((bytes.as_slice(), end), (&b"still here"[..], Ok(())));

    // The command stopped reading: what the requester still sends (16 times the credit)
    // is taken and dropped, so its half can end and the stream closes in order.
    let (sender, receiver) = peer.open_stream("short", json!({})).await.unwrap();
    let reading = tokio::spawn(read_to_end(receiver));
    for _ in 0..16 {
        sender.send(vec![b'y'; 64 * 1024]).await.unwrap();
    }
    tokio::time::timeout(Duration::from_secs(20), sender.finish())
        .await
        .expect("the requester's half ends")
        .unwrap();
    let (bytes, end) = reading.await.unwrap();
    assert_eq!((bytes.as_slice(), end), (&b"yyyyyyyyyy"[..], Ok(())));

    // The requester ends its half (the command's `cat` ends, its `sleep` goes on) and
    // stops reading, in either order: it wants nothing more, the stream is reset, the
    // command killed.
    for reader_first in [false, true] {
        let (sender, mut receiver) = peer.open_stream("waiting", json!({})).await.unwrap();
        sender.send(b"ping".to_vec()).await.unwrap();
        let echoed = receiver.next().await.unwrap().unwrap();
        assert_eq!(&echoed[..], b"ping");
        let pid: u32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(!gone(pid));
        if reader_first {
            drop(receiver);
            // The finish resets the stream it was the last user of: it may say so.
            let _ = sender.finish().await;
        } else {
            sender.finish().await.unwrap();
            drop(receiver);
        }
        let mut waited = Duration::ZERO;
        while !gone(pid) {
            assert!(
                waited < Duration::from_secs(10),
                "the command outlived the reset (reader dropped first: {reader_first})"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
            waited += Duration::from_millis(50);
        }
    }
}

/// A requester that drops its reader and keeps its own half open: its STOP reaches the
/// provider's sender. A stream action that writes on hears it on its next `send`
/// (`CallError::Stopped`) and from `stopped()`; an `exec` command whose output nobody reads
/// is killed, whether it writes on (its next write is refused) or has gone quiet (the
/// backend waits on `stopped()`). Before, the STOP was taken for "accepted and discarded": `send` went on
/// answering `Ok`, `stopped()` did not exist, and the command ran for nobody.
#[tokio::test]
async fn a_stop_reaches_the_providers_sender_and_stops_its_writer() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let (heard, mut hear) = tokio::sync::mpsc::unbounded_channel();
    let writer = move |_input: serde_json::Value, stream: StreamIo| {
        let heard = heard.clone();
        async move {
            let StreamIo { sender, receiver } = stream;
            // Writes until a write is refused (bounded: 64 MiB, 1,024 times the credit).
            let mut refused = None;
            for _ in 0..1024 {
                if let Err(error) = sender.send(vec![b'z'; 64 * 1024]).await {
                    refused = Some(error);
                    break;
                }
            }
            let stopped = tokio::time::timeout(Duration::from_secs(10), sender.stopped()).await;
            let _ = heard.send((refused, stopped.ok()));
            drop(receiver);
            Ok::<_, ActionError>(json!({}))
        }
    };
    // Writes for ever (unless killed) and never ends on its own.
    let endless = ExecAction::new("sh").args([
        "-c",
        &format!("echo $$ > '{}'; exec yes", pid_file.display()),
    ]);
    // Writes one line, then nothing for a minute.
    let quiet = ExecAction::new("sh").args([
        "-c",
        &format!("echo $$ > '{}'; echo hi; exec sleep 60", pid_file.display()),
    ]);
    let provider = build(
        Node::builder("Stopped writers")
            .limits(quick_limits())
            .stream_action(any_action("writer"), reliable(), writer)
            .stream_action(any_action("endless"), reliable(), endless)
            .stream_action(any_action("quiet"), reliable(), quiet),
    );
    let requester = requester();
    let names = ["writer", "endless", "quiet"];
    let (_server, peer) = connect(&provider, &requester, &names).await;

    let (sender, mut receiver) = peer.open_stream("writer", json!({})).await.unwrap();
    receiver.next().await.unwrap().unwrap();
    drop(receiver);
    let (refused, stopped) = tokio::time::timeout(Duration::from_secs(20), hear.recv())
        .await
        .expect("the writer stopped writing")
        .unwrap();
    assert_eq!(refused, Some(CallError::Stopped { code: 0 }));
    assert_eq!(stopped, Some(Ok(0)), "stopped() says the STOP's code");
    drop(sender);

    for command in ["endless", "quiet"] {
        let (sender, mut receiver) = peer.open_stream(command, json!({})).await.unwrap();
        receiver.next().await.unwrap().unwrap();
        let pid: u32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        drop(receiver);
        let mut waited = Duration::ZERO;
        while !gone(pid) {
            assert!(
                waited < Duration::from_secs(10),
                "the {command} command ran on for a requester that stopped reading"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
            waited += Duration::from_millis(50);
        }
        drop(sender);
    }
}
