//! Server-Sent Events answers for the bindings (the WoT Profile's SSE profile, as node-wot
//! 0.9.2 consumes it): a route makes a bounded queue with [`sse_channel`], hands the
//! [`SseQueue`] to [`sse_response`] as the answer's body and keeps the [`SseSender`] to
//! push [`SseMessage`]s into it from wherever its messages come from.
//!
//! What the body writes (axum's `Sse` encodes the lines):
//! - every message carries an `id:` (the id a client sends back as `Last-Event-ID` to
//!   resume) and its `data:`, a multi-line data split into one `data:` line per line;
//! - messages are unnamed (no `event:` line) unless made with [`SseMessage::named`], so
//!   they arrive as `message` events: node-wot listens to `onmessage` only and drops a
//!   named event silently (the agents' HTTP binding sends unnamed messages; the WoT
//!   directory names its `thing_created` / `thing_updated` / `thing_deleted` events, as
//!   WoT Discovery requires);
//! - a comment line (`: keep-alive`) every [`SseLimits::keep_alive`] while nothing else is
//!   written, so proxies and clients see the answer is alive;
//! - the answer ends when the sender is dropped (after what is queued), when the queue
//!   overflowed (see below), or when [`Site::draining`] resolves (the server's shutdown
//!   waits for answers in progress).
//!
//! The queue's overflow policy is **close**: a subscriber that does not read while
//! messages keep coming fills its queue ([`SseLimits::queue_messages`] messages or
//! [`SseLimits::queue_bytes`] bytes); the push that does not fit empties the queue (its
//! memory is freed at once), [`SseSender::send`] answers [`SseSendError::Overflow`], and the
//! answer ends with a `: overflow` comment at its next write. The client reconnects with
//! `Last-Event-ID` and the route resumes it from its own replay buffer (or says the gap).
//!
//! [`SseSender::send_comment`] queues a comment line, which clients' `EventSource` skips
//! (a route says a gap or why its answer ends with one). [`last_event_id`] reads the
//! `Last-Event-ID` header, bounded by [`MAX_EVENT_ID_LEN`].

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{Stream, StreamExt};
use futures_util::task::AtomicWaker;
use tokio::sync::Notify;

use super::Site;

/// The longest event id a message may carry and a `Last-Event-ID` header may hold, in
/// bytes.
pub const MAX_EVENT_ID_LEN: usize = 128;

/// The comment written as keep-alive.
const KEEP_ALIVE: &str = "keep-alive";
/// The comment written last when the queue overflowed.
const OVERFLOW: &str = "overflow";

/// One message of an SSE answer: its id, its data, and its event type if named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseMessage {
    id: String,
    data: String,
    /// The `event:` line's type; `None` writes none (a `message` event).
    event: Option<String>,
}

impl SseMessage {
    /// A message with this id (non-empty, at most [`MAX_EVENT_ID_LEN`] bytes, no line
    /// break or NUL) and data (any text; line breaks split it into `data:` lines).
    pub fn new(id: impl Into<String>, data: impl Into<String>) -> Result<Self, SseError> {
        let id = id.into();
        check_id(&id)?;
        Ok(Self {
            id,
            data: data.into(),
            event: None,
        })
    }

    /// The message named `event` (written as its `event:` line): a client's
    /// `EventSource` delivers it to that type's listeners, not to `onmessage`. The name
    /// is non-empty, at most [`MAX_EVENT_ID_LEN`] bytes, with no line break or NUL.
    pub fn named(mut self, event: impl Into<String>) -> Result<Self, SseError> {
        let event = event.into();
        check_id(&event)?;
        self.event = Some(event);
        Ok(self)
    }

    /// A message whose data is `value` as compact JSON (one line).
    pub fn json(id: impl Into<String>, value: &serde_json::Value) -> Result<Self, SseError> {
        Self::new(id, value.to_string())
    }

    /// Its id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its data.
    pub fn data(&self) -> &str {
        &self.data
    }

    /// Its event type, if named.
    pub fn event(&self) -> Option<&str> {
        self.event.as_deref()
    }

    /// What it counts against [`SseLimits::queue_bytes`].
    fn size(&self) -> usize {
        self.id.len() + self.data.len() + self.event.as_ref().map_or(0, String::len)
    }

    fn into_event(self) -> Event {
        let event = Event::default().id(self.id).data(self.data);
        match self.event {
            Some(name) => event.event(name),
            None => event,
        }
    }
}

/// Why an event id, an event type name or a `Last-Event-ID` header was refused (a name
/// is refused as an id is).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SseError {
    /// The id is empty.
    #[error("an SSE event id is empty")]
    EmptyId,
    /// The id is longer than [`MAX_EVENT_ID_LEN`].
    #[error("an SSE event id of {len} bytes is longer than the {max} allowed")]
    IdTooLong {
        /// Its length in bytes.
        len: usize,
        /// The most allowed.
        max: usize,
    },
    /// The id holds a line break or NUL, or (in a header) is not visible ASCII text.
    #[error("an SSE event id holds a character it may not (a line break, NUL or non-text)")]
    IdNotText,
}

fn check_id(id: &str) -> Result<(), SseError> {
    if id.is_empty() {
        return Err(SseError::EmptyId);
    }
    if id.len() > MAX_EVENT_ID_LEN {
        return Err(SseError::IdTooLong {
            len: id.len(),
            max: MAX_EVENT_ID_LEN,
        });
    }
    if id.contains(['\r', '\n', '\0']) {
        return Err(SseError::IdNotText);
    }
    Ok(())
}

/// The `Last-Event-ID` a reconnecting client sent: `None` without one (or an empty one,
/// which the SSE standard sends to mean none); an error when it is longer than
/// [`MAX_EVENT_ID_LEN`] or not visible ASCII text (a route answers 400).
pub fn last_event_id(headers: &HeaderMap) -> Result<Option<&str>, SseError> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(None);
    };
    if value.len() > MAX_EVENT_ID_LEN {
        return Err(SseError::IdTooLong {
            len: value.len(),
            max: MAX_EVENT_ID_LEN,
        });
    }
    let id = value.to_str().map_err(|_| SseError::IdNotText)?.trim();
    if id.is_empty() {
        return Ok(None);
    }
    check_id(id)?;
    Ok(Some(id))
}

/// The bounds of one subscriber's SSE answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseLimits {
    /// Most messages queued for the subscriber; one more overflows the queue.
    pub queue_messages: usize,
    /// Most bytes (ids and data) queued for the subscriber; one more overflows the queue.
    pub queue_bytes: usize,
    /// How long the answer may write nothing before it writes a keep-alive comment.
    pub keep_alive: Duration,
}

/// Why [`SseSender::send`] did not queue a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SseSendError {
    /// The answer has ended: the client went away, the server drains, or it overflowed
    /// before.
    #[error("the SSE answer has ended")]
    Closed,
    /// The message did not fit in the subscriber's queue: the queue was emptied and the
    /// answer ends (the client resumes from its last event id).
    #[error("the SSE subscriber's queue is full: its answer ends")]
    Overflow,
}

/// The state a sender and its queue share.
#[derive(Debug)]
struct Shared {
    limits: SseLimits,
    state: Mutex<State>,
    /// Wakes the body when a message is queued or the answer ends.
    reader: AtomicWaker,
    /// Wakes [`SseSender::closed`] when the body is dropped.
    gone: Notify,
}

/// What the queue holds: a message, or a comment (a line a client's `EventSource` skips,
/// which a raw reader sees: a gap, why the answer ends).
#[derive(Debug)]
enum Item {
    Message(SseMessage),
    Comment(String),
}

impl Item {
    fn size(&self) -> usize {
        match self {
            Self::Message(message) => message.size(),
            Self::Comment(text) => text.len(),
        }
    }

    fn into_event(self) -> Event {
        match self {
            Self::Message(message) => message.into_event(),
            Self::Comment(text) => Event::default().comment(text),
        }
    }
}

#[derive(Debug, Default)]
struct State {
    queue: VecDeque<Item>,
    bytes: usize,
    overflowed: bool,
    /// The sender was dropped: the body ends once the queue is empty.
    sender_gone: bool,
    /// The body was dropped (the client went away, or the answer ended).
    body_gone: bool,
}

impl Shared {
    /// The state; a panic elsewhere while it was held leaves it whole (every change is a
    /// single step), so a poisoned lock is taken as it is.
    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A bounded queue of SSE messages for one subscriber: the sending half.
#[derive(Debug)]
pub struct SseSender {
    shared: Arc<Shared>,
}

/// The receiving half of [`sse_channel`], handed to [`sse_response`].
#[derive(Debug)]
pub struct SseQueue {
    shared: Arc<Shared>,
}

/// A bounded queue for one subscriber's SSE answer, with the close-on-overflow policy
/// (module docs). A limit of zero is taken as one.
pub fn sse_channel(limits: SseLimits) -> (SseSender, SseQueue) {
    let shared = Arc::new(Shared {
        limits: SseLimits {
            queue_messages: limits.queue_messages.max(1),
            queue_bytes: limits.queue_bytes.max(1),
            keep_alive: limits.keep_alive,
        },
        state: Mutex::new(State::default()),
        reader: AtomicWaker::new(),
        gone: Notify::new(),
    });
    (
        SseSender {
            shared: shared.clone(),
        },
        SseQueue { shared },
    )
}

impl SseSender {
    /// Queues `message` for the subscriber. [`SseSendError::Overflow`] when it does not
    /// fit (the queue is emptied and the answer ends), [`SseSendError::Closed`] when the
    /// answer ended before.
    pub fn send(&self, message: SseMessage) -> Result<(), SseSendError> {
        self.push(Item::Message(message))
    }

    /// Queues a comment line (`: text`), which an `EventSource` skips and a raw reader
    /// sees; a line break in `text` ends the comment there. Bounded and refused as
    /// [`send`](Self::send) is.
    pub fn send_comment(&self, text: &str) -> Result<(), SseSendError> {
        let line = text.lines().next().unwrap_or_default();
        self.push(Item::Comment(line.to_owned()))
    }

    fn push(&self, item: Item) -> Result<(), SseSendError> {
        let limits = self.shared.limits;
        let result = {
            let mut state = self.shared.state();
            if state.body_gone || state.overflowed {
                return Err(SseSendError::Closed);
            }
            let size = item.size();
            if state.queue.len() >= limits.queue_messages
                || state.bytes.saturating_add(size) > limits.queue_bytes
            {
                state.overflowed = true;
                state.queue = VecDeque::new();
                state.bytes = 0;
                Err(SseSendError::Overflow)
            } else {
                state.bytes += size;
                state.queue.push_back(item);
                Ok(())
            }
        };
        self.shared.reader.wake();
        result
    }

    /// Whether the answer has ended (the client went away, or the queue overflowed).
    pub fn is_closed(&self) -> bool {
        let state = self.shared.state();
        state.body_gone || state.overflowed
    }

    /// Resolves once the answer's body is dropped: the client went away, or the answer
    /// ended. What a route's forwarding task waits on beside its source, to stop in time.
    pub async fn closed(&self) {
        loop {
            let gone = self.shared.gone.notified();
            tokio::pin!(gone);
            gone.as_mut().enable();
            if self.shared.state().body_gone {
                return;
            }
            gone.await;
        }
    }
}

impl Drop for SseSender {
    fn drop(&mut self) {
        self.shared.state().sender_gone = true;
        self.shared.reader.wake();
    }
}

impl Drop for SseQueue {
    fn drop(&mut self) {
        let mut state = self.shared.state();
        state.body_gone = true;
        state.queue = VecDeque::new();
        state.bytes = 0;
        drop(state);
        self.shared.gone.notify_waiters();
    }
}

impl SseQueue {
    /// The next event: a queued message, the overflow comment (then the end), or the end.
    fn next_event(&self) -> Poll<Option<Event>> {
        let mut state = self.shared.state();
        if state.overflowed {
            if state.body_gone {
                return Poll::Ready(None);
            }
            // Said once: `body_gone` marks that it was (the body ends next).
            state.body_gone = true;
            return Poll::Ready(Some(Event::default().comment(OVERFLOW)));
        }
        if let Some(item) = state.queue.pop_front() {
            state.bytes -= item.size();
            return Poll::Ready(Some(item.into_event()));
        }
        if state.sender_gone || state.body_gone {
            return Poll::Ready(None);
        }
        Poll::Pending
    }
}

impl Stream for SseQueue {
    type Item = Event;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        if let Poll::Ready(event) = self.next_event() {
            return Poll::Ready(event);
        }
        self.shared.reader.register(cx.waker());
        // A message queued between the first look and the registration.
        self.next_event()
    }
}

/// The SSE answer whose body is `queue`'s messages (`Content-Type: text/event-stream`,
/// `Cache-Control: no-cache`), with a keep-alive comment on the queue's interval, ending
/// when [`Site::draining`] resolves if not before.
pub fn sse_response(site: &Site, queue: SseQueue) -> Response {
    let site = site.clone();
    answer(queue, async move { site.draining().await })
}

/// The SSE answer of `queue`, ending when `until` resolves if not before.
fn answer(
    queue: SseQueue,
    until: impl std::future::Future<Output = ()> + Send + 'static,
) -> Response {
    let keep_alive = queue.shared.limits.keep_alive;
    let events = queue
        .take_until(Box::pin(until))
        .map(Ok::<Event, Infallible>);
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(keep_alive).text(KEEP_ALIVE))
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn limits(messages: usize, bytes: usize) -> SseLimits {
        SseLimits {
            queue_messages: messages,
            queue_bytes: bytes,
            keep_alive: Duration::from_secs(15),
        }
    }

    fn headers(value: &[u8]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            "last-event-id",
            HeaderValue::from_bytes(value).expect("a header value"),
        );
        headers
    }

    #[test]
    fn last_event_id_is_read_bounded_and_checked() {
        assert_eq!(last_event_id(&HeaderMap::new()), Ok(None));
        assert_eq!(last_event_id(&headers(b"")), Ok(None));
        assert_eq!(last_event_id(&headers(b"42")), Ok(Some("42")));
        let long = vec![b'7'; MAX_EVENT_ID_LEN + 1];
        assert_eq!(
            last_event_id(&headers(&long)),
            Err(SseError::IdTooLong {
                len: MAX_EVENT_ID_LEN + 1,
                max: MAX_EVENT_ID_LEN
            })
        );
        assert_eq!(last_event_id(&headers(b"4\xff2")), Err(SseError::IdNotText));
    }

    #[test]
    fn a_message_id_may_not_break_a_line() {
        assert_eq!(SseMessage::new("", "x"), Err(SseError::EmptyId));
        assert_eq!(SseMessage::new("1\n2", "x"), Err(SseError::IdNotText));
        assert!(SseMessage::new("1", "a\nb").is_ok());
    }

    #[tokio::test]
    async fn a_full_queue_overflows_empties_and_ends_with_a_comment() {
        let (sender, mut queue) = sse_channel(limits(2, 1024));
        let message = |id: &str| SseMessage::new(id, "{}").expect("a message");
        assert_eq!(sender.send(message("1")), Ok(()));
        assert_eq!(sender.send(message("2")), Ok(()));
        assert_eq!(sender.send(message("3")), Err(SseSendError::Overflow));
        assert!(sender.is_closed());
        assert_eq!(sender.send(message("4")), Err(SseSendError::Closed));
        assert_eq!(queue.shared.state().queue.len(), 0);
        // The overflow comment, then the end.
        assert!(queue.next().await.is_some());
        assert!(queue.next().await.is_none());
    }

    #[tokio::test]
    async fn the_byte_bound_overflows_too() {
        let (sender, _queue) = sse_channel(limits(100, 10));
        assert_eq!(
            sender.send(SseMessage::new("1", "12345678").expect("a message")),
            Ok(())
        );
        assert_eq!(
            sender.send(SseMessage::new("2", "1").expect("a message")),
            Err(SseSendError::Overflow)
        );
    }

    #[tokio::test]
    async fn the_body_ends_after_the_queue_when_the_sender_goes() {
        let (sender, mut queue) = sse_channel(limits(8, 1024));
        sender
            .send(SseMessage::new("1", "a").expect("a message"))
            .expect("queued");
        drop(sender);
        assert!(queue.next().await.is_some());
        assert!(queue.next().await.is_none());
    }

    /// The whole body of an answer that ends.
    async fn body(response: Response) -> String {
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("the body ends");
        String::from_utf8(bytes.to_vec()).expect("text")
    }

    #[tokio::test]
    async fn every_message_is_unnamed_with_an_id_and_split_data_lines() {
        let (sender, queue) = sse_channel(limits(8, 1024));
        let response = answer(queue, std::future::pending());
        assert_eq!(
            response.headers()["content-type"],
            HeaderValue::from_static("text/event-stream")
        );
        sender
            .send(SseMessage::new("7", "first\nsecond").expect("a message"))
            .expect("queued");
        sender
            .send(SseMessage::json("8", &serde_json::json!({"a": 1})).expect("a message"))
            .expect("queued");
        drop(sender);
        assert_eq!(
            body(response).await,
            "id: 7\ndata: first\ndata: second\n\nid: 8\ndata: {\"a\":1}\n\n"
        );
    }

    #[tokio::test]
    async fn a_named_message_carries_its_event_line() {
        let (sender, queue) = sse_channel(limits(8, 1024));
        let response = answer(queue, std::future::pending());
        let message = SseMessage::new("3", "{}")
            .and_then(|message| message.named("thing_created"))
            .expect("a message");
        assert_eq!(message.event(), Some("thing_created"));
        sender.send(message).expect("queued");
        drop(sender);
        let text = body(response).await;
        assert!(text.contains("event: thing_created\n"), "{text}");
        assert!(
            text.contains("id: 3\n") && text.contains("data: {}\n"),
            "{text}"
        );
        assert_eq!(
            SseMessage::new("1", "x").and_then(|message| message.named("a\nb")),
            Err(SseError::IdNotText)
        );
    }

    #[tokio::test]
    async fn a_comment_is_one_line_that_event_sources_skip() {
        let (sender, queue) = sse_channel(limits(8, 1024));
        let response = answer(queue, std::future::pending());
        sender.send_comment("gap 3-5\nid: 9").expect("queued");
        drop(sender);
        assert_eq!(body(response).await, ": gap 3-5\n\n");
    }

    #[tokio::test]
    async fn the_answer_ends_when_the_server_drains() {
        let (sender, queue) = sse_channel(limits(8, 1024));
        let (drain, drained) = tokio::sync::oneshot::channel::<()>();
        let response = answer(queue, async move {
            let _ = drained.await;
        });
        sender
            .send(SseMessage::new("1", "a").expect("a message"))
            .expect("queued");
        let reading = tokio::spawn(body(response));
        tokio::task::yield_now().await;
        drain.send(()).expect("the answer waits");
        // The sender is still held: only the drain ends the body.
        let text = reading.await.expect("the body ends");
        assert!(text.starts_with("id: 1\ndata: a\n\n"), "{text}");
        // The body is gone: the route's forwarding task hears it.
        assert!(sender.is_closed());
    }

    #[tokio::test]
    async fn the_sender_hears_when_the_body_is_dropped() {
        let (sender, queue) = sse_channel(limits(8, 1024));
        let waiting = tokio::spawn(async move {
            sender.closed().await;
            sender.send(SseMessage::new("1", "a").expect("a message"))
        });
        tokio::task::yield_now().await;
        drop(queue);
        let sent = waiting.await.expect("the task ran");
        assert_eq!(sent, Err(SseSendError::Closed));
    }
}
