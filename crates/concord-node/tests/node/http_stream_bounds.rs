//! A stream action over the WoT HTTP binding is bounded as a session's stream is: strangers
//! (127.0.0.2 and up) sending headers and no chunk are cut off by `stream_idle_timeout`
//! and held to the holders' budget per address, so the legitimate caller (127.0.0.1) still
//! runs a progress action and a stream; and the server's shutdown ends the exchanges still
//! open, a client that stopped reading its answer included.

use std::time::Duration;

use concord_node::{Limits, Server};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::http::{client_from, read_answer, stream_provider_with, value_of, JsonBody};
use crate::support::*;

/// `shout`'s URL path with an empty prefix as its input.
const SHOUT: &str = "/actions/shout?input=%7B%22prefix%22%3A%22%22%7D";

/// A connection from `source` that starts a stream of `shout` (chunked) and sends nothing
/// more.
async fn silent_stream(server: &Server, source: &str) -> tokio::net::TcpStream {
    let mut tcp = tcp_from(source, server).await;
    let head = format!(
        "POST {SHOUT} HTTP/1.1\r\nHost: {}\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        server.local_addr()
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp
}

/// Whether a chunked answer's text ends in order (its last chunk written).
fn ended_in_order(text: &str) -> bool {
    text.ends_with("0\r\n\r\n")
}

#[tokio::test]
async fn silent_http_streams_are_cut_off_and_the_caller_still_runs_a_progress_action_and_a_stream()
{
    let limits = Limits {
        stream_idle_timeout: Duration::from_secs(1),
        backend_call_wait: Duration::from_secs(15),
        max_long_backend_calls: 2,
        max_long_backend_calls_per_address: 1,
        max_holding_sessions_per_address: 1,
        ..quick_limits()
    };
    let provider = stream_provider_with(limits);
    let server = serve(&provider).await;

    // Two strangers each open two streams and send no chunk: the first of each takes a
    // long slot (there are two), the second is refused by the holders' budget.
    let mut held = Vec::new();
    let mut refused = 0;
    for source in ["127.0.0.2", "127.0.0.3"] {
        held.push(silent_stream(&server, source).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut second = silent_stream(&server, source).await;
        let (status, text) = read_answer(&mut second).await;
        assert_eq!(status, 429, "{text}");
        assert!(text.contains("application/problem+json"), "{text}");
        refused += 1;
    }
    assert_eq!(refused, 2);

    // The legitimate caller's progress action runs to its end.
    let client = client_from("127.0.0.1");
    let response = client
        .post(format!("{}actions/tally", server.url()))
        .json_body(&json!({"n": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    let mut status = Value::Null;
    for _ in 0..200 {
        status = value_of(client.get(&location).send().await.unwrap()).await;
        if !["pending", "running"].contains(&status["status"].as_str().unwrap()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status["status"], "completed", "{status}");
    assert_eq!(status["output"], json!({"n": 1}));

    // And its stream is served to an orderly end.
    let mut tcp = tcp_from("127.0.0.1", &server).await;
    let request = format!(
        "POST {SHOUT} HTTP/1.1\r\nHost: {}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\nok\r\n0\r\n\r\n",
        server.local_addr()
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    let (status, text) = read_answer(&mut tcp).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("OK"), "{text}");
    assert!(ended_in_order(&text), "{text:?}");

    // The silent strangers were cut off: their answers end without an orderly end.
    for mut tcp in held {
        let (status, text) = read_answer(&mut tcp).await;
        assert_eq!(status, 200, "{text}");
        assert!(!ended_in_order(&text), "{text:?}");
    }
}

#[tokio::test]
async fn shutdown_ends_a_stream_exchange_and_a_client_that_stopped_reading() {
    let provider = stream_provider_with(quick_limits());
    let server = serve(&provider).await;
    let local = server.local_addr();

    // A stream in progress: a chunk sent, its answer read, the request body left open.
    let mut open = silent_stream(&server, "127.0.0.1").await;
    open.write_all(b"2\r\nhi\r\n").await.unwrap();
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("HI") {
        let mut buffer = [0u8; 1024];
        let read = tokio::time::timeout(Duration::from_secs(10), open.read(&mut buffer))
            .await
            .unwrap()
            .unwrap();
        assert!(read > 0, "closed early");
        seen.extend_from_slice(&buffer[..read]);
    }

    // A client that sends without end and never reads the answer: the server's writes
    // stall on it, and so do its own (the server stops reading). Its writes are bounded
    // (64 MiB at most); a write refused (the server closed the connection) ends them.
    let reader = silent_stream(&server, "127.0.0.2").await;
    let (reading, mut writing) = reader.into_split();
    let writer = tokio::spawn(async move {
        let chunk = format!("{:x}\r\n{}\r\n", 64 * 1024, "a".repeat(64 * 1024));
        for _ in 0..1024 {
            if writing.write_all(chunk.as_bytes()).await.is_err() {
                return true;
            }
        }
        false
    });
    // Let the stall build up.
    tokio::time::sleep(Duration::from_secs(1)).await;

    tokio::time::timeout(
        Duration::from_secs(30),
        server.shutdown_within(Duration::from_secs(1)),
    )
    .await
    .expect("shutdown returns")
    .unwrap();

    // Both connections are closed by the server: reading them reaches their end, and
    // neither answer ended in order.
    let mut rest = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(10), open.read_to_end(&mut rest)).await;
    assert!(ended.is_ok(), "the stream exchange outlived the shutdown");
    seen.extend_from_slice(&rest);
    assert!(!ended_in_order(&String::from_utf8_lossy(&seen)));
    // The client that stopped reading is not read from (reading would let the server
    // write, and end the answer itself): its stalled writes fail once the server closed
    // the connection.
    let broke = tokio::time::timeout(Duration::from_secs(10), writer).await;
    assert!(
        matches!(broke, Ok(Ok(true))),
        "the slow reader's exchange outlived the shutdown ({local}): {broke:?}"
    );
    drop(reading);
}
