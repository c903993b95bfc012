//! The WoT HTTP binding's events and observations (`binding/http/events.rs`) over real
//! HTTP on loopback: Server-Sent Events with an id on every unnamed message and a resume
//! from `Last-Event-ID` (a gap said as a comment), long polls, and strangers (127.0.0.2 and
//! up) holding subscriptions they never read while the legitimate subscriber (127.0.0.1)
//! gets its events.

use std::net::IpAddr;
use std::time::Duration;

use concord_node::{Event, Limits, Node, Property, Server};
use serde_json::{json, Value};

use crate::support::*;

/// A provider with the event `tick` (`{n, pad}`) and the observable, writable property
/// `level`.
fn events_provider(limits: Limits) -> Agent {
    build(
        Node::builder("Sensor agent")
            .action(catalogue::action(), catalogue::answer)
            .event(
                "tick",
                Event::new(json!({
                    "type": "object",
                    "properties": {"n": {"type": "integer"}, "pad": {"type": "string"}},
                    "required": ["n"]
                })),
            )
            .property(
                "level",
                Property::new(json!({"type": "integer"}), json!(0))
                    .writable()
                    .observable(),
            )
            .security(loopback_security())
            .limits(limits),
    )
}

/// An HTTP client whose connections come from `source`, with no overall timeout (an
/// answer that streams is read a piece at a time, each bounded).
fn streaming_client(source: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(source.parse::<IpAddr>().unwrap())
        .connect_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// One SSE block as a client sees it: its `id`, its data lines joined, whether it named
/// an event, and its comments.
#[derive(Debug, Default, Clone, PartialEq)]
struct Block {
    id: Option<String>,
    data: Option<String>,
    named: bool,
    comments: Vec<String>,
}

/// Reads an SSE answer's blocks as they come.
struct SseReader {
    response: reqwest::Response,
    buffer: String,
}

impl SseReader {
    /// Subscribes from `source` to `path`, resuming after `last_seen` when given.
    async fn open(
        server: &Server,
        source: &str,
        path: &str,
        last_seen: Option<&str>,
    ) -> reqwest::Response {
        let mut request = streaming_client(source)
            .get(format!("{}{path}", server.url()))
            .header("accept", "text/event-stream");
        if let Some(id) = last_seen {
            request = request.header("last-event-id", id);
        }
        tokio::time::timeout(Duration::from_secs(10), request.send())
            .await
            .expect("the subscription is answered")
            .unwrap()
    }

    fn new(response: reqwest::Response) -> Self {
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The next block that is not a keep-alive, or `None` when the answer ended.
    async fn next(&mut self) -> Option<Block> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let text: String = self.buffer.drain(..end + 2).collect();
                let block = parse_block(&text);
                if block.comments == ["keep-alive"] && block.data.is_none() {
                    continue;
                }
                return Some(block);
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.response.chunk())
                .await
                .expect("the stream moves")
                .ok()??;
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }

    /// The next block, which must be a message: its id and data as JSON.
    async fn message(&mut self) -> (u64, Value) {
        let block = self.next().await.expect("a message");
        assert!(!block.named, "an SSE message names no event: {block:?}");
        let id = block.id.expect("every message has an id");
        let data = block.data.expect("a message has data");
        (id.parse().unwrap(), serde_json::from_str(&data).unwrap())
    }
}

fn parse_block(text: &str) -> Block {
    let mut block = Block::default();
    for line in text.lines() {
        if let Some(comment) = line.strip_prefix(':') {
            block.comments.push(comment.trim().to_owned());
        } else if let Some(id) = line.strip_prefix("id:") {
            block.id = Some(id.trim().to_owned());
        } else if let Some(data) = line.strip_prefix("data:") {
            let data = data.strip_prefix(' ').unwrap_or(data);
            block.data = Some(match block.data.take() {
                Some(before) => format!("{before}\n{data}"),
                None => data.to_owned(),
            });
        } else if line.starts_with("event:") {
            block.named = true;
        }
    }
    block
}

/// Publishes `tick` `{n, pad}` from the node's side; its id.
async fn publish(agent: &Agent, n: i64, pad: &str) -> u64 {
    agent
        .node
        .publisher()
        .publish("tick", json!({"n": n, "pad": pad}))
        .unwrap()
}

#[tokio::test]
async fn an_event_streams_as_unnamed_sse_messages_with_ids_and_resumes_after_a_gap() {
    let mut limits = quick_limits();
    limits.interaction.replay_events = 2;
    let provider = events_provider(limits);
    let server = serve(&provider).await;
    let path = "events/tick/subscription";

    let mut reader = SseReader::new(SseReader::open(&server, "127.0.0.1", path, None).await);
    let first = publish(&provider, 1, "").await;
    let (id, data) = reader.message().await;
    assert_eq!((id, data), (first, json!({"n": 1, "pad": ""})));
    drop(reader);

    // Four more while away; the replay buffer keeps the last two.
    let mut ids = Vec::new();
    for n in 2..6 {
        ids.push(publish(&provider, n, "").await);
    }
    let resumed = SseReader::open(&server, "127.0.0.1", path, Some(&first.to_string())).await;
    let mut reader = SseReader::new(resumed);
    let gap = reader.next().await.expect("the gap");
    assert_eq!(
        gap.comments,
        [format!("gap {}-{}", ids[0], ids[1])],
        "{gap:?}"
    );
    assert_eq!(reader.message().await, (ids[2], json!({"n": 4, "pad": ""})));
    assert_eq!(reader.message().await, (ids[3], json!({"n": 5, "pad": ""})));
    // And it goes on live.
    let next = publish(&provider, 6, "").await;
    assert_eq!(reader.message().await.0, next);

    // A Last-Event-ID that is not one of ours, or is ahead, is refused.
    let response = SseReader::open(&server, "127.0.0.1", path, Some("later")).await;
    assert_eq!(response.status(), 400);
    let ahead = (next + 10).to_string();
    let response = SseReader::open(&server, "127.0.0.1", path, Some(&ahead)).await;
    assert_eq!(response.status(), 400);
    // An unknown event: 404.
    let response = SseReader::open(&server, "127.0.0.1", "events/nope/subscription", None).await;
    assert_eq!(response.status(), 404);
}

#[tokio::test]
async fn a_property_is_observed_over_sse_and_by_long_poll() {
    let limits = Limits {
        http_long_poll_timeout: Duration::from_millis(300),
        ..quick_limits()
    };
    let provider = events_provider(limits);
    let server = serve(&provider).await;
    let url = format!("{}properties/level/observable", server.url());
    let writer = streaming_client("127.0.0.1");
    let write = |value: i64| {
        let writer = writer.clone();
        let url = format!("{}properties/level", server.url());
        async move {
            let response = writer
                .put(url)
                .header("content-type", "application/json")
                .body(value.to_string())
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 204);
        }
    };

    // SSE: each write comes as a message.
    let mut reader = SseReader::new(
        SseReader::open(&server, "127.0.0.1", "properties/level/observable", None).await,
    );
    write(7).await;
    assert_eq!(reader.message().await.1, json!(7));
    write(8).await;
    assert_eq!(reader.message().await.1, json!(8));
    drop(reader);

    // Long poll: HEAD answers 200, a GET waits for the next write.
    let client = streaming_client("127.0.0.1");
    let head = client.head(&url).send().await.unwrap();
    assert_eq!(head.status(), 200);
    let waiting = tokio::spawn({
        let client = client.clone();
        let url = url.clone();
        async move { client.get(url).send().await.unwrap() }
    });
    // The GET waits (nothing came): with no write, it answers 204 after the timeout.
    let quiet = waiting.await.unwrap();
    assert_eq!(quiet.status(), 204);
    let waiting = tokio::spawn({
        let client = client.clone();
        let url = url.clone();
        async move { client.get(url).send().await.unwrap() }
    });
    // Write until the poll has it (the GET subscribes when it arrives).
    let mut value = 10;
    let answer = loop {
        if waiting.is_finished() {
            break waiting.await.unwrap();
        }
        write(value).await;
        value += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(answer.status(), 200);
    let polled: Value = serde_json::from_slice(&answer.bytes().await.unwrap()).unwrap();
    assert!(
        polled.as_i64().is_some_and(|v| (10..value).contains(&v)),
        "{polled}"
    );

    // A property that is not observable, or unknown: 404 to the handshake.
    let response = client
        .head(format!("{}properties/nope/observable", server.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
}

#[tokio::test]
async fn subscribers_that_never_read_are_bounded_while_the_caller_gets_every_event() {
    // Small queues and budgets so that the bounds are reached with few sockets.
    let limits = Limits {
        max_holding_sessions: 16,
        max_holding_sessions_per_address: 4,
        http_sse_queue: 8,
        ..quick_limits()
    };
    let provider = events_provider(limits);
    let server = serve(&provider).await;
    let path = "events/tick/subscription";

    // Strangers from four addresses each try 12 subscriptions and read nothing.
    let mut held = Vec::new();
    let mut refused = Vec::new();
    for source in ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"] {
        for _ in 0..12 {
            let response = SseReader::open(&server, source, path, None).await;
            match response.status().as_u16() {
                200 => held.push(response),
                status => refused.push(status),
            }
        }
    }
    // Each address holds its share; the rest is refused with 429.
    assert_eq!(held.len(), 16, "refused: {refused:?}");
    assert!(refused.iter().all(|status| *status == 429), "{refused:?}");
    assert_eq!(refused.len(), 32);

    // The node is full of holders; the legitimate subscriber still gets a place (the
    // holder of an address holding the most gives its place up).
    let mut caller = SseReader::new(SseReader::open(&server, "127.0.0.1", path, None).await);

    // Events large enough that the strangers' sockets and queues fill.
    let pad = "x".repeat(64 * 1024);
    let mut ids = Vec::new();
    for n in 0..120 {
        ids.push(publish(&provider, n, &pad).await);
        // The caller reads as they come.
        let (id, data) = caller.message().await;
        assert_eq!(id, ids[n as usize]);
        assert_eq!(data["n"], n);
    }

    // A stranger that never read: its answer ended with the overflow comment, short of
    // every event (its queue was freed, not kept).
    let mut ended_by_overflow = 0;
    for response in held {
        let mut reader = SseReader {
            response,
            buffer: String::new(),
        };
        let mut messages = 0;
        let mut last = None;
        while let Some(block) = reader.next().await {
            if block.data.is_some() {
                messages += 1;
            }
            last = Some(block);
        }
        let shed_or_overflowed = last
            .as_ref()
            .is_some_and(|block| block.comments == ["overflow"] || block.comments == ["shed"]);
        assert!(shed_or_overflowed, "{last:?}");
        assert!(
            messages < ids.len(),
            "a stranger that never read got every event"
        );
        ended_by_overflow += usize::from(last.is_some_and(|block| block.comments == ["overflow"]));
    }
    assert!(ended_by_overflow >= 15, "{ended_by_overflow}");
}

#[tokio::test]
async fn the_description_offers_sse_then_long_poll_forms_that_the_strict_validator_accepts() {
    let provider = events_provider(quick_limits());
    let server = serve(&provider).await;
    let bytes = served_description_bytes(&server).await;
    let report = concord_describe::validate(&bytes);
    assert!(report.is_valid() && report.warning_count() == 0, "{report}");
    let description: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        description["@context"][0],
        "https://www.w3.org/2019/wot/td/v1"
    );
    assert_eq!(
        description["@context"][1],
        "https://www.w3.org/2022/wot/td/v1.1"
    );
    let http_forms = |affordance: &Value| -> Vec<Value> {
        affordance["forms"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|form| form["href"].as_str().unwrap().starts_with("http"))
            .cloned()
            .collect()
    };
    let tick = http_forms(&description["events"]["tick"]);
    let href = format!("{}events/tick/subscription", server.url());
    assert_eq!(
        tick,
        [
            json!({"href": href, "op": ["subscribeevent", "unsubscribeevent"],
                   "subprotocol": "sse", "contentType": "application/json",
                   "htv:methodName": "GET"}),
            json!({"href": href, "op": ["subscribeevent", "unsubscribeevent"],
                   "contentType": "application/json", "htv:methodName": "GET"}),
        ]
    );
    let level = http_forms(&description["properties"]["level"]);
    let observe: Vec<&Value> = level
        .iter()
        .filter(|form| form["op"][0] == "observeproperty")
        .collect();
    assert_eq!(observe.len(), 2, "{level:?}");
    assert_eq!(observe[0]["subprotocol"], "sse");
    assert!(observe[1].get("subprotocol").is_none());
}
