//! A stream action over one HTTP exchange: the request's body is the caller's half, read
//! into the action's [`StreamReceiver`] only as fast as its reader queue empties
//! (`streams.max_reader_queue`); the action's [`StreamSender`] writes the response's body,
//! each write answered once the body took it (so a client that stops reading stops the
//! action's writes: at most one write waits). The response ends when the action returns
//! `Ok`, and is cut short (no orderly end of its chunked body) when it fails, panics or
//! resets the stream. The call takes a long slot of the node's backend budget first, as a
//! session's stream action does.

use std::io;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;

use super::handles::{OnDrop, ReaderQueue, StreamReceiver, StreamSender};
use super::{StreamAction, StreamCommand, StreamIo, STREAM_COMMANDS};
use crate::action::ActionError;
use crate::admission::ClientKey;
use crate::budget::{CallBudget, CallKind};
use crate::error::CallError;

/// Response chunks waiting for the client, at most (each at most one write of the action).
const OUT_QUEUE: usize = 4;

/// The stream's id in its own exchange (there is one).
const ID: u32 = 0;

/// Runs `action` with `input`, its incoming bytes from `incoming`; the response body it
/// writes. `limits` bound the reader queue and the sender's room.
pub(crate) fn run(
    action: Arc<dyn StreamAction>,
    input: Value,
    incoming: Body,
    limits: &concord_interact::stream::StreamLimits,
    (budget, client): (Arc<CallBudget>, ClientKey),
) -> Body {
    let (commands, received) = mpsc::channel(STREAM_COMMANDS);
    let (queue, reader) = ReaderQueue::new();
    let reader_queue = usize::try_from(limits.max_reader_queue).unwrap_or(usize::MAX);
    queue.configure(reader_queue, reader_queue / 4);
    let room = usize::try_from(limits.max_send_room).unwrap_or(usize::MAX);
    let sender = StreamSender::new(ID, commands.clone(), OnDrop::Release, room);
    let receiver = StreamReceiver::new(ID, reader, commands);
    let task = tokio::spawn(async move {
        let _permit = budget.enter(client, CallKind::Long).await?;
        let call = std::panic::AssertUnwindSafe(action.call(input, StreamIo { sender, receiver }));
        futures_util::FutureExt::catch_unwind(call)
            .await
            .unwrap_or_else(|_| Err(ActionError::internal("the action panicked")))
    });
    let (out, body) = mpsc::channel(OUT_QUEUE);
    tokio::spawn(pump(received, queue, incoming, out, task));
    Body::from_stream(futures_util::stream::unfold(body, |mut body| async move {
        body.recv().await.map(|chunk| (chunk, body))
    }))
}

/// What the response body gets: bytes, or the error that cuts it short.
type Chunk = Result<Bytes, io::Error>;

/// Moves bytes between the exchange and the action until the action ends.
async fn pump(
    mut commands: mpsc::Receiver<StreamCommand>,
    queue: ReaderQueue,
    incoming: Body,
    out: mpsc::Sender<Chunk>,
    mut task: tokio::task::JoinHandle<Result<Value, ActionError>>,
) {
    let mut incoming = incoming.into_data_stream();
    let mut queue = Some(queue);
    // A chunk read while the reader's queue was full, handed over once it has room.
    let mut pending: Option<Bytes> = None;
    let mut commands_open = true;
    loop {
        hand_over(&mut queue, &mut pending);
        let reading = queue.is_some() && pending.is_none();
        tokio::select! {
            chunk = incoming.next(), if reading => match chunk {
                Some(Ok(bytes)) => pending = Some(bytes),
                Some(Err(error)) => {
                    if let Some(queue) = queue.take() {
                        queue.fail(CallError::Closed(format!("the request body broke: {error}")));
                    }
                }
                None => {
                    if let Some(queue) = queue.take() {
                        queue.finish();
                    }
                }
            },
            command = commands.recv(), if commands_open => match command {
                Some(StreamCommand::Write { bytes, done, .. }) => {
                    let len = bytes.len();
                    let sent = len == 0 || out.send(Ok(Bytes::from(bytes))).await.is_ok();
                    let answer = if sent {
                        Ok(len)
                    } else {
                        Err(CallError::Closed("the caller stopped reading".to_owned()))
                    };
                    if let Some(done) = done {
                        let _ = done.send(answer);
                    }
                    if !sent {
                        task.abort();
                        return;
                    }
                }
                Some(StreamCommand::Abort { .. }) => {
                    task.abort();
                    let _ = out.send(Err(io::Error::other("the action reset the stream"))).await;
                    return;
                }
                // More room in the reader's queue (handed over at the loop's top), or the
                // sender let go: the body ends with the action.
                Some(StreamCommand::Read { .. } | StreamCommand::Release { .. }) => {}
                None => commands_open = false,
            },
            ended = &mut task => {
                if let Some(queue) = queue.take() {
                    queue.fail(CallError::Closed("the action ended".to_owned()));
                }
                // Writes the action made before it returned are in `commands`.
                while let Ok(StreamCommand::Write { bytes, done, .. }) = commands.try_recv() {
                    let len = bytes.len();
                    if len > 0 && out.send(Ok(Bytes::from(bytes))).await.is_err() {
                        return;
                    }
                    if let Some(done) = done {
                        let _ = done.send(Ok(len));
                    }
                }
                if let Err(error) = ended.unwrap_or_else(|_| Err(ActionError::internal("the action stopped"))) {
                    let _ = out.send(Err(io::Error::other(error.to_string()))).await;
                }
                return;
            }
        }
    }
}

/// Hands the pending chunk to the reader when its queue has room (or drops it when the
/// reader is gone).
fn hand_over(queue: &mut Option<ReaderQueue>, pending: &mut Option<Bytes>) {
    let Some(reader) = queue.as_ref() else {
        *pending = None;
        return;
    };
    if reader.is_abandoned() {
        *pending = None;
        *queue = None;
        return;
    }
    if pending.is_none() {
        return;
    }
    if let Some(slot) = reader.slot() {
        if let Some(bytes) = pending.take() {
            slot.send(bytes);
        }
    }
}
