//! A stream action over one HTTP exchange: the request's body is the caller's half, read
//! into the action's [`StreamReceiver`] only as fast as its reader queue empties
//! (`streams.max_reader_queue`); the action's [`StreamSender`] writes the response's body,
//! each write answered once the body took it (so a client that stops reading stops the
//! action's writes: at most one write waits). The response ends when the action returns
//! `Ok`, and is cut short (no orderly end of its chunked body) when it fails, panics or
//! resets the stream. The call takes a long slot of the node's backend budget first, as a
//! session's stream action does, and its place in the holders' budget (taken by the
//! caller of [`run`], given back when the exchange ends).
//!
//! The exchange is bounded as a session's stream is: once the action runs, no byte either
//! way (a chunk in, a chunk taken by the client) for `stream_idle_timeout` cuts it short;
//! so does the holders' budget shedding it, and the response body's receiver going away
//! (the client left, or the binding ended the answer on the node's drain) ends the action.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::handles::{OnDrop, ReaderQueue, StreamReceiver, StreamSender};
use super::{StreamAction, StreamCommand, StreamIo, STREAM_COMMANDS};
use crate::action::ActionError;
use crate::admission::ClientKey;
use crate::budget::{CallBudget, CallKind};
use crate::driver::StopSignal;
use crate::error::CallError;
use crate::shed::Registration;

/// Response chunks waiting for the client, at most (each at most one write of the action).
const OUT_QUEUE: usize = 4;

/// The stream's id in its own exchange (there is one).
const ID: u32 = 0;

/// What bounds one exchange beside the action's own stream limits.
pub(crate) struct ExchangeBounds {
    /// No byte either way for this long, once the action runs, cuts the exchange short
    /// (`Limits::stream_idle_timeout`).
    pub(crate) idle: Duration,
    /// Its place in the holders' budget, given back when the exchange ends.
    pub(crate) registration: Registration,
    /// Says when the holders' budget sheds the exchange.
    pub(crate) stop: watch::Receiver<StopSignal>,
}

/// Runs `action` with `input`, its incoming bytes from `incoming`; the response body it
/// writes. `limits` bound the reader queue and the sender's room, `bounds` the exchange.
pub(crate) fn run(
    action: Arc<dyn StreamAction>,
    input: Value,
    incoming: Body,
    limits: &concord_interact::stream::StreamLimits,
    (budget, client): (Arc<CallBudget>, ClientKey),
    bounds: ExchangeBounds,
) -> Body {
    let (commands, received) = mpsc::channel(STREAM_COMMANDS);
    let (queue, reader) = ReaderQueue::new();
    let reader_queue = usize::try_from(limits.max_reader_queue).unwrap_or(usize::MAX);
    queue.configure(reader_queue, reader_queue / 4);
    let room = usize::try_from(limits.max_send_room).unwrap_or(usize::MAX);
    let sender = StreamSender::new(ID, commands.clone(), OnDrop::Release, room);
    let receiver = StreamReceiver::new(ID, reader, commands);
    let (entered_tx, entered) = oneshot::channel();
    let task = tokio::spawn(async move {
        let _permit = budget.enter(client, CallKind::Long).await?;
        let _ = entered_tx.send(());
        let call = std::panic::AssertUnwindSafe(action.call(input, StreamIo { sender, receiver }));
        futures_util::FutureExt::catch_unwind(call)
            .await
            .unwrap_or_else(|_| Err(ActionError::internal("the action panicked")))
    });
    let (out, body) = mpsc::channel(OUT_QUEUE);
    let ended_well = Arc::new(AtomicBool::new(false));
    let exchange = Exchange {
        out,
        bounds,
        entered: Some(entered),
        ended_well: Arc::clone(&ended_well),
    };
    tokio::spawn(pump(received, queue, incoming, exchange, task));
    response_body(body, ended_well)
}

/// The response body: the chunks `body` gets, then an orderly end when the action
/// returned `Ok` (`ended_well`), else an error that cuts it short.
fn response_body(body: mpsc::Receiver<Chunk>, ended_well: Arc<AtomicBool>) -> Body {
    let chunks = futures_util::stream::unfold(Some(body), move |body| {
        let ended_well = Arc::clone(&ended_well);
        async move {
            let mut body = body?;
            match body.recv().await {
                Some(chunk) => Some((chunk, Some(body))),
                None if ended_well.load(Ordering::Acquire) => None,
                None => Some((Err(io::Error::other("the stream was cut short")), None)),
            }
        }
    });
    Body::from_stream(chunks)
}

/// What the response body gets: bytes, or the error that cuts it short.
type Chunk = Result<Bytes, io::Error>;

/// The pump's side of the exchange: where the response's chunks go, its bounds, and
/// whether it ended in order.
struct Exchange {
    out: mpsc::Sender<Chunk>,
    bounds: ExchangeBounds,
    /// Resolves once the action has its long slot and runs: the idle clock starts then.
    entered: Option<oneshot::Receiver<()>>,
    ended_well: Arc<AtomicBool>,
}

impl Exchange {
    /// Hands `chunk` to the client within the idle timeout; `false` when the client went
    /// away, did not take it in time, or the exchange was shed.
    async fn deliver(&mut self, chunk: Chunk) -> bool {
        let idle = self.bounds.idle;
        let stop = &mut self.bounds.stop;
        tokio::select! {
            sent = self.out.send(chunk) => sent.is_ok(),
            () = tokio::time::sleep(idle) => false,
            _ = stop.changed() => false,
        }
    }

    /// Bytes moved now: the idle clock starts again, and the holders' budget learns when
    /// the exchange was last active.
    fn active(&self, deadline: std::pin::Pin<&mut tokio::time::Sleep>) {
        deadline.reset(Instant::now() + self.bounds.idle);
        self.bounds
            .registration
            .set_idle(Some(std::time::Instant::now()));
    }

    /// Tells the client why the exchange is cut short, when there is room for it (the
    /// body ends with an error either way).
    fn cut(&self, why: String) {
        let _ = self.out.try_send(Err(io::Error::other(why)));
    }
}

/// Moves bytes between the exchange and the action until the action ends, the exchange
/// is idle too long, is shed, or its client goes away.
async fn pump(
    mut commands: mpsc::Receiver<StreamCommand>,
    queue: ReaderQueue,
    incoming: Body,
    mut exchange: Exchange,
    mut task: tokio::task::JoinHandle<Result<Value, ActionError>>,
) {
    let mut incoming = incoming.into_data_stream();
    let mut queue = Some(queue);
    // A chunk read while the reader's queue was full, handed over once it has room.
    let mut pending: Option<Bytes> = None;
    let mut commands_open = true;
    exchange
        .bounds
        .registration
        .set_idle(Some(std::time::Instant::now()));
    let idle = tokio::time::sleep(exchange.bounds.idle);
    tokio::pin!(idle);
    let mut entered = exchange.entered.take();
    loop {
        hand_over(&mut queue, &mut pending);
        let reading = queue.is_some() && pending.is_none();
        let running = entered.is_none();
        tokio::select! {
            started = async { entered.as_mut()?.await.ok() }, if entered.is_some() => {
                entered = None;
                if started.is_some() {
                    exchange.active(idle.as_mut());
                }
            }
            () = &mut idle, if running => {
                task.abort();
                fail(&mut queue, "the stream was idle too long");
                exchange.cut(format!(
                    "no byte either way for {:?}: the stream was idle too long",
                    exchange.bounds.idle
                ));
                return;
            }
            _ = exchange.bounds.stop.changed() => {
                task.abort();
                fail(&mut queue, "the node shed the stream");
                exchange.cut("the node shed the stream for another holder".to_owned());
                return;
            }
            () = exchange.out.closed() => {
                task.abort();
                fail(&mut queue, "the caller went away");
                return;
            }
            chunk = incoming.next(), if reading => {
                exchange.active(idle.as_mut());
                match chunk {
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
                }
            }
            command = commands.recv(), if commands_open => match command {
                Some(StreamCommand::Write { bytes, done, .. }) => {
                    let len = bytes.len();
                    let sent = len == 0 || exchange.deliver(Ok(Bytes::from(bytes))).await;
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
                        fail(&mut queue, "the caller stopped reading");
                        return;
                    }
                    exchange.active(idle.as_mut());
                }
                Some(StreamCommand::Abort { .. }) => {
                    task.abort();
                    exchange.cut("the action reset the stream".to_owned());
                    return;
                }
                // More room in the reader's queue (handed over at the loop's top), or the
                // sender let go: the body ends with the action.
                Some(StreamCommand::Read { .. } | StreamCommand::Release { .. }) => {}
                None => commands_open = false,
            },
            ended = &mut task => {
                fail(&mut queue, "the action ended");
                // Writes the action made before it returned are in `commands`.
                while let Ok(StreamCommand::Write { bytes, done, .. }) = commands.try_recv() {
                    let len = bytes.len();
                    if len > 0 && !exchange.deliver(Ok(Bytes::from(bytes))).await {
                        return;
                    }
                    if let Some(done) = done {
                        let _ = done.send(Ok(len));
                    }
                }
                match ended.unwrap_or_else(|_| Err(ActionError::internal("the action stopped"))) {
                    Ok(_) => exchange.ended_well.store(true, Ordering::Release),
                    Err(error) => exchange.cut(error.to_string()),
                }
                return;
            }
        }
    }
}

/// Tells the action's reader, if it still reads, that the exchange is over: `why`.
fn fail(queue: &mut Option<ReaderQueue>, why: &str) {
    if let Some(queue) = queue.take() {
        queue.fail(CallError::Closed(why.to_owned()));
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
