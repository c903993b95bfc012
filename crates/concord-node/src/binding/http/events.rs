//! Events and property observations: `subscribeevent` (`/events/{name}/subscription`; `POST /events/{name}` is the event ingest's) and
//! `observeproperty` (`/properties/{name}/observable`), each in two ways, through
//! [`ThingAccess::subscribe_event`](crate::ThingAccess::subscribe_event) and
//! [`ThingAccess::observe_property`](crate::ThingAccess::observe_property) (who may, the
//! holders' budget: 429 or 503 problems):
//!
//! - **Server-Sent Events** (the WoT Profile's SSE profile; forms with `subprotocol:
//!   "sse"`): a `GET` with `Accept: text/event-stream` is answered with a stream of
//!   unnamed messages, each with `id:` (the event's sequence number) and `data:` (its data,
//!   or the property's new value, as JSON). A client reconnecting with `Last-Event-ID`
//!   (an event's id) first gets every later event still in the node's replay buffer; the
//!   events that left it (or that an overflowing subscriber queue dropped) are said as a
//!   comment line `: gap FROM-TO` (an `EventSource` skips it; the next id shows the
//!   jump). A property observation starts from now (`Last-Event-ID` is not used: values
//!   are state, read the property). The answer ends with a comment saying why (`:
//!   overflow` when its queue overflowed, `: shed` when the holders' budget gave its place
//!   to a newcomer, `: dropped` when it fell behind under `event_overflow = Disconnect`),
//!   or when the server drains.
//! - **Long polls** (forms without a subprotocol, as node-wot falls back to): a `HEAD`
//!   answers 200 once the caller may subscribe, then each `GET` waits for the next event
//!   (or change) and answers 200 with its data as JSON, or 204 with no content after
//!   `Limits::http_long_poll_timeout`. What is published between two `GET`s is not
//!   delivered: use the SSE form to resume.
//!
//! Unsubscribing (`unsubscribeevent`, `unobserveproperty`, named on the same forms) is
//! closing the answer.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use concord_identity::Caller;

use super::{admit, json, HttpState};
use crate::binding::sse::{self, SseLimits, SseMessage, SseSender};
use crate::binding::{Feed, FeedEnd, FeedNews, ProblemResponse, ThingError};

/// Where events are subscribed: `GET` (and `HEAD`) `/events/{name}/subscription`.
pub(crate) const EVENT_PATH: &str = "/events/{name}/subscription";
/// Where properties are observed: `GET` (and `HEAD`) `/properties/{name}/observable`.
pub(crate) const OBSERVE_PATH: &str = "/properties/{name}/observable";

/// The media type of a Server-Sent Events answer.
pub(crate) const EVENT_STREAM: &str = "text/event-stream";

/// What is subscribed to: an event or a property.
#[derive(Debug, Clone, Copy)]
enum Source {
    Event,
    Property,
}

/// `GET /events/{name}/subscription`: SSE or a long poll.
pub(super) async fn subscribe(
    State(state): State<Arc<HttpState>>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    serve(state, name, request, Source::Event).await
}

/// `GET /properties/{name}/observable`: SSE or a long poll.
pub(super) async fn observe(
    State(state): State<Arc<HttpState>>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    serve(state, name, request, Source::Property).await
}

/// `HEAD /events/{name}/subscription`: 200 once the caller may subscribe (a long poll's handshake).
pub(super) async fn subscribe_head(
    State(state): State<Arc<HttpState>>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    handshake(state, name, request, Source::Event).await
}

/// `HEAD /properties/{name}/observable`: 200 once the caller may observe.
pub(super) async fn observe_head(
    State(state): State<Arc<HttpState>>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    handshake(state, name, request, Source::Property).await
}

async fn handshake(
    state: Arc<HttpState>,
    name: String,
    request: Request,
    source: Source,
) -> Response {
    let admitted = match admit(&state, request).await {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    let thing = state.site.thing();
    let known = match source {
        Source::Event => thing.interface().events.contains_key(&name),
        Source::Property => thing
            .interface()
            .properties
            .get(&name)
            .is_some_and(|property| property.observable),
    };
    if !known {
        let kind = match source {
            Source::Event => "event",
            Source::Property => "observable property",
        };
        return problem(&ThingError::Unknown { kind, name }, admitted.path());
    }
    if !state.shared.identity.permits(&admitted.caller, &name) {
        return problem(&ThingError::Forbidden { name }, admitted.path());
    }
    StatusCode::OK.into_response()
}

async fn serve(state: Arc<HttpState>, name: String, request: Request, source: Source) -> Response {
    let admitted = match admit(&state, request).await {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    let instance = admitted.path().to_owned();
    let headers = &admitted.parts.headers;
    let streams = wants_event_stream(headers);
    let last_seen = match (streams, source) {
        (true, Source::Event) => match resume_point(headers) {
            Ok(last_seen) => last_seen,
            Err(refused) => return refused.with_instance(instance).into_response(),
        },
        _ => None,
    };
    let from = admitted.remote.ip();
    let feed = match open(&state, &admitted.caller, from, &name, source, last_seen) {
        Ok(feed) => feed,
        Err(error) => return problem(&error, &instance),
    };
    if streams {
        event_stream(&state, feed)
    } else {
        long_poll(&state, feed, &instance).await
    }
}

fn open(
    state: &HttpState,
    caller: &Caller,
    from: IpAddr,
    name: &str,
    source: Source,
    last_seen: Option<u64>,
) -> Result<Feed, ThingError> {
    let thing = state.site.thing();
    match source {
        Source::Event => thing.subscribe_event(caller, from, name, last_seen),
        Source::Property => thing.observe_property(caller, from, name),
    }
}

/// Whether the request asks for Server-Sent Events.
fn wants_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|range| {
            range
                .split(';')
                .next()
                .is_some_and(|media| media.trim().eq_ignore_ascii_case(EVENT_STREAM))
        })
}

/// The event id a reconnecting client resumes after: `Last-Event-ID`, one of ours (a
/// sequence number); 400 otherwise.
fn resume_point(headers: &HeaderMap) -> Result<Option<u64>, ProblemResponse> {
    let refused = |detail: String| {
        ProblemResponse::new(400, "Invalid Last-Event-ID", detail)
            .with_type("urn:concord:http:last-event-id")
    };
    let Some(id) = sse::last_event_id(headers).map_err(|error| refused(error.to_string()))? else {
        return Ok(None);
    };
    id.parse::<u64>().map(Some).map_err(|_| {
        refused(format!(
            "`{id}` is not an event id of this node (a sequence number)"
        ))
    })
}

/// The SSE answer fed by `feed`.
fn event_stream(state: &HttpState, feed: Feed) -> Response {
    let limits = &state.shared.limits;
    let (sender, queue) = sse::sse_channel(SseLimits {
        queue_messages: limits.http_sse_queue,
        queue_bytes: limits.http_sse_queue_bytes,
        keep_alive: limits.http_sse_keep_alive,
    });
    tokio::spawn(forward(feed, sender));
    sse::sse_response(&state.site, queue)
}

/// Moves what `feed` hands into the subscriber's queue until either ends.
async fn forward(mut feed: Feed, sender: SseSender) {
    loop {
        let news = tokio::select! {
            news = feed.next() => news,
            () = sender.closed() => return,
        };
        let sent = match news {
            Ok(FeedNews::Item { id, data }) => {
                match SseMessage::new(id.to_string(), data.to_string()) {
                    Ok(message) => sender.send(message),
                    // A number is always an id.
                    Err(_) => return,
                }
            }
            Ok(FeedNews::Gap { from, to }) => sender.send_comment(&format!("gap {from}-{to}")),
            Err(end) => {
                // The sender's drop ends the answer after this.
                let _ = sender.send_comment(ending(end));
                return;
            }
        };
        if sent.is_err() {
            return;
        }
    }
}

/// The comment an answer ends with when its feed ended.
fn ending(end: FeedEnd) -> &'static str {
    match end {
        FeedEnd::Dropped => "dropped",
        FeedEnd::Shed => "shed",
        FeedEnd::Shutdown => "shutdown",
    }
}

/// Waits for the next event or change of `feed`: 200 with its data, 204 after
/// `Limits::http_long_poll_timeout`, 503 when the subscription ended or the server drains.
async fn long_poll(state: &HttpState, mut feed: Feed, instance: &str) -> Response {
    let next = async {
        loop {
            match feed.next().await {
                Ok(FeedNews::Item { data, .. }) => return Ok(data),
                Ok(FeedNews::Gap { .. }) => continue,
                Err(end) => return Err(end),
            }
        }
    };
    let timeout = state.shared.limits.http_long_poll_timeout;
    let ended = |why: &str| {
        ProblemResponse::new(
            503,
            "Subscription ended",
            format!("the subscription ended: {why}"),
        )
        .with_type("urn:concord:http:subscription-ended")
        .with_instance(instance)
        .into_response()
    };
    tokio::select! {
        polled = tokio::time::timeout(timeout, next) => match polled {
            Ok(Ok(data)) => json(&*data),
            Ok(Err(end)) => ended(ending(end)),
            Err(_) => StatusCode::NO_CONTENT.into_response(),
        },
        () = state.site.draining() => ended("the server drains"),
    }
}

fn problem(error: &ThingError, instance: &str) -> Response {
    ProblemResponse::from(error)
        .with_instance(instance)
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn an_accept_header_asks_for_events_by_media_range() {
        let mut headers = HeaderMap::new();
        assert!(!wants_event_stream(&headers));
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, Text/Event-Stream;q=0.9"),
        );
        assert!(wants_event_stream(&headers));
        headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        assert!(!wants_event_stream(&headers));
    }

    #[test]
    fn a_resume_point_is_one_of_our_sequence_numbers() {
        let mut headers = HeaderMap::new();
        assert_eq!(resume_point(&headers).ok(), Some(None));
        headers.insert("last-event-id", HeaderValue::from_static("42"));
        assert_eq!(resume_point(&headers).ok(), Some(Some(42)));
        headers.insert("last-event-id", HeaderValue::from_static("forty-two"));
        assert!(resume_point(&headers).is_err());
    }
}
