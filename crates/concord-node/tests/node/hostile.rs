//! A hostile client against the provider: silent WebSockets, slots held per address, idle
//! and dribbling TCP, connection floods, and broken WebSocket framing. Every refusal must
//! be typed (an HTTP status with `Retry-After` and a body, or a close code with a reason),
//! and legitimate callers must still get in.

use std::time::{Duration, Instant};

use concord_node::{Limits, Server};
use futures_util::SinkExt;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::support::*;

/// Reads an HTTP response head byte by byte (nothing after it is consumed).
async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut byte))
            .await
            .expect("no response head within 5 s")
            .unwrap();
        assert_eq!(read, 1, "the connection ended in the head: {head:?}");
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

/// A WebSocket upgrade over `stream`, done by hand: the stream is left right after the
/// 101 response, for frames written byte by byte.
async fn upgrade(mut stream: TcpStream) -> TcpStream {
    let request = "GET /concord HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Version: 13\r\n\r\n";
    stream.write_all(request.as_bytes()).await.unwrap();
    let head = read_head(&mut stream).await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    stream
}

/// A client frame: `first` (FIN and opcode), masked unless `masked` is false.
fn frame(first: u8, payload: &[u8], masked: bool) -> Vec<u8> {
    assert!(payload.len() < 126);
    let mask = [0x12u8, 0x34, 0x56, 0x78];
    let mut bytes = vec![first, payload.len() as u8 | if masked { 0x80 } else { 0 }];
    if masked {
        bytes.extend_from_slice(&mask);
        bytes.extend(payload.iter().zip(mask.iter().cycle()).map(|(b, m)| b ^ m));
    } else {
        bytes.extend_from_slice(payload);
    }
    bytes
}

/// Sends raw `bytes` after a hand-made upgrade and returns the close frame the server
/// answers with.
async fn close_after_raw(server: &Server, bytes: &[u8]) -> (u16, String) {
    let mut stream = upgrade(tcp_from("127.0.0.1", server).await).await;
    stream.write_all(bytes).await.unwrap();
    let mut socket: RawSocket =
        WebSocketStream::from_raw_socket(MaybeTlsStream::Plain(stream), Role::Client, None).await;
    closed_with(&mut socket).await
}

/// Waits until `server` holds `count` WebSockets waiting for their hello.
async fn wait_for_pending(server: &Server, count: usize) {
    for _ in 0..200 {
        if server.pending() == count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "{} WebSockets wait for their hello, not {count}",
        server.pending()
    );
}

/// Whether the server closed `stream` within `limit` (a read of 0 bytes or an error);
/// anything it sends first (an HTTP error) is skipped.
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    let mut buffer = [0u8; 1024];
    tokio::time::timeout(limit, async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

#[tokio::test]
async fn silent_websockets_filling_the_hello_budget_do_not_keep_a_caller_out() {
    let provider = provider_with(Limits {
        max_sessions: 2,
        max_holding_sessions: 2,
        max_holding_sessions_per_address: 2,
        max_pending_hellos: 4,
        max_pending_hellos_per_address: 4,
        ..quick_limits()
    });
    let server = serve(&provider).await;
    let mut silent = Vec::new();
    for _ in 0..4 {
        silent.push(raw_socket_from("127.0.0.2", &server).await);
    }
    wait_for_pending(&server, 4).await;
    assert_eq!(server.sessions(), 0, "no hello, no established session");

    let requester = requester();
    let connection = requester.connect(&server, "getProductInfo").await;
    let info = connection
        .call("getProductInfo", json!({"productId": "P12345"}))
        .await
        .unwrap();
    assert_eq!(info["productName"], "Laptop");

    // The oldest silent one made room, with a reason; the others still wait.
    let (code, reason) = closed_with(&mut silent[0]).await;
    assert_eq!(code, 1008, "{reason}");
    assert!(
        reason.contains("4 connections were waiting for their sourceHello"),
        "{reason}"
    );
    assert_eq!(server.pending(), 3);
    assert_eq!(server.sessions(), 1);
}

#[tokio::test]
async fn sessions_per_address_are_capped_with_a_typed_429() {
    let provider = provider_with(Limits {
        max_sessions_per_address: 2,
        ..quick_limits()
    });
    let server = serve(&provider).await;
    let _first = raw_socket(&server).await;
    let _second = raw_socket(&server).await;
    wait_for_pending(&server, 2).await;

    let error = tokio_tungstenite::connect_async(server.endpoint())
        .await
        .unwrap_err();
    let tokio_tungstenite::tungstenite::Error::Http(response) = error else {
        panic!("expected an HTTP refusal, got {error:?}");
    };
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "1");
    let body = String::from_utf8(response.body().clone().unwrap_or_default()).unwrap();
    assert!(
        body.contains("at most 2 sessions at once from one address"),
        "{body}"
    );

    // Another address has its own share.
    let stream = tcp_from("127.0.0.2", &server).await;
    let (mut other, _) =
        tokio_tungstenite::client_async(server.endpoint(), MaybeTlsStream::Plain(stream))
            .await
            .unwrap();
    let answer = hello(&mut other, None).await;
    assert_eq!(answer["type"], "destinationHello");
}

#[tokio::test]
async fn the_session_pool_filling_before_the_hello_closes_with_1013() {
    let provider = provider_with(Limits {
        max_sessions: 1,
        max_holding_sessions: 1,
        max_holding_sessions_per_address: 1,
        ..quick_limits()
    });
    let server = serve(&provider).await;
    let mut first = raw_socket(&server).await;
    let mut second = raw_socket(&server).await;
    wait_for_pending(&server, 2).await;
    hello(&mut first, None).await;
    wait_for_sessions(&server, 1).await;
    second
        .send(Message::Text(source_hello(None).into()))
        .await
        .unwrap();
    let (code, reason) = closed_with(&mut second).await;
    assert_eq!(code, 1013, "{reason}");
    assert!(reason.contains("at most 1 sessions at once"), "{reason}");
}

#[tokio::test]
async fn silent_and_dribbling_tcp_connections_are_closed_after_the_header_timeout() {
    let provider = provider_with(Limits {
        http_header_timeout: Duration::from_millis(500),
        ..quick_limits()
    });
    let server = serve(&provider).await;

    // Sends nothing.
    let started = Instant::now();
    let mut silent = tcp_from("127.0.0.1", &server).await;
    assert!(closed_within(&mut silent, Duration::from_secs(3)).await);
    assert!(started.elapsed() >= Duration::from_millis(400));

    // Idle after one request on a kept-alive connection.
    let mut kept = tcp_from("127.0.0.1", &server).await;
    kept.write_all(b"GET /.well-known/wot HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    assert!(read_head(&mut kept).await.starts_with("HTTP/1.1 200"));
    assert!(closed_within(&mut kept, Duration::from_secs(3)).await);

    // Dribbles its request line, a byte every 100 ms (3 s for the whole line).
    let started = Instant::now();
    let mut slow = tcp_from("127.0.0.1", &server).await;
    let mut closed = false;
    for byte in b"GET /.well-known/wot HTTP/1.1\r\n" {
        if slow.write_all(&[*byte]).await.is_err()
            || closed_within(&mut slow, Duration::from_millis(100)).await
        {
            closed = true;
            break;
        }
    }
    assert!(closed, "the slowloris was never closed");
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(400) && elapsed < Duration::from_millis(2000),
        "{elapsed:?}"
    );
    assert_eq!(server.connections(), 0);
}

#[tokio::test]
async fn connections_over_the_rate_per_address_get_a_typed_429() {
    let provider = provider_with(Limits {
        connection_rate_per_address: 1,
        connection_burst_per_address: 3,
        ..quick_limits()
    });
    let server = serve(&provider).await;
    let mut statuses = Vec::new();
    let mut refusal = String::new();
    for _ in 0..4 {
        let mut stream = tcp_from("127.0.0.1", &server).await;
        stream
            .write_all(
                b"GET /.well-known/wot HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
            )
            .await
            .unwrap();
        let mut response = String::new();
        tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut response))
            .await
            .unwrap()
            .unwrap();
        statuses.push(response.get(9..12).unwrap_or_default().to_owned());
        refusal = response;
    }
    assert_eq!(statuses, ["200", "200", "200", "429"], "{refusal}");
    let lower = refusal.to_ascii_lowercase();
    assert!(lower.contains("retry-after: 1\r\n"), "{refusal}");
    assert!(
        refusal.contains("at most 1 new connections per second from one address"),
        "{refusal}"
    );
    // Another address has its own bucket.
    let mut other = tcp_from("127.0.0.2", &server).await;
    other
        .write_all(b"GET /.well-known/wot HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    assert!(read_head(&mut other).await.starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn invalid_utf8_in_the_text_hello_gets_close_1007() {
    let provider = provider();
    let server = serve(&provider).await;
    let (code, reason) = close_after_raw(&server, &frame(0x81, &[b'{', 0xff, 0xfe], true)).await;
    assert_eq!(code, 1007, "{reason}");
    assert!(reason.contains("not valid UTF-8"), "{reason}");
}

#[tokio::test]
async fn websocket_protocol_errors_get_close_1002() {
    let provider = provider();
    let server = serve(&provider).await;
    // A reserved opcode (3).
    let (code, reason) = close_after_raw(&server, &frame(0x83, b"", true)).await;
    assert_eq!(code, 1002, "{reason}");
    assert!(reason.starts_with("WebSocket protocol error"), "{reason}");
    // A client frame without a mask.
    let (code, reason) = close_after_raw(&server, &frame(0x81, b"{}", false)).await;
    assert_eq!(code, 1002, "{reason}");
    assert!(reason.starts_with("WebSocket protocol error"), "{reason}");
}

#[tokio::test]
async fn a_websocket_waiting_for_its_hello_is_closed_1001_on_shutdown() {
    let provider = provider();
    let server = serve(&provider).await;
    let mut silent = raw_socket(&server).await;
    wait_for_pending(&server, 1).await;
    let shutdown = tokio::spawn(server.shutdown_within(Duration::ZERO));
    assert_closed_with(&mut silent, 1001, "the node is shutting down").await;
    shutdown.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_resumed_session_then_silence_gives_its_slot_back_after_the_idle_timeout() {
    let idle = Duration::from_millis(600);
    let provider = provider_with(Limits {
        idle_timeout: idle,
        ..quick_limits()
    });
    let server = serve(&provider).await;
    // A protocol the provider holds, so that a stranger's hello can resume it at once.
    let requester = requester();
    let connection = requester.connect(&server, catalogue::ACTION).await;
    let hash = connection.info().hash.to_string();
    connection.close().await;
    wait_for_sessions(&server, 0).await;
    let mut socket = raw_socket(&server).await;
    let answer = hello(&mut socket, Some(&hash)).await;
    assert_eq!(answer["metaProtocol"]["usedProtocolHash"], hash.as_str());
    wait_for_sessions(&server, 1).await;
    let started = Instant::now();
    let (code, reason) = closed_with(&mut socket).await;
    assert!(started.elapsed() >= idle / 2, "{:?}", started.elapsed());
    assert_eq!((code, reason.as_str()), (1000, "idle for 600 ms"));
    wait_for_sessions(&server, 0).await;
}

#[tokio::test]
async fn a_full_node_gives_the_slot_of_the_session_idle_longest_to_a_caller_with_a_valid_hello() {
    let provider = provider_with(Limits {
        max_sessions: 2,
        max_holding_sessions: 2,
        max_holding_sessions_per_address: 2,
        idle_shed_after: Duration::from_millis(200),
        first_proposal_timeout: Duration::from_secs(30),
        ..quick_limits()
    });
    let server = serve(&provider).await;
    // Two strangers say hello and then nothing, holding every slot.
    let mut older = raw_socket(&server).await;
    hello(&mut older, None).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut newer = raw_socket(&server).await;
    hello(&mut newer, None).await;
    wait_for_sessions(&server, 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A caller still gets in: the session idle longest gives up its slot.
    let requester = requester();
    let connection = requester.connect(&server, catalogue::ACTION).await;
    let answer = connection
        .call(catalogue::ACTION, catalogue::input(1))
        .await
        .unwrap();
    assert!(answer.is_object(), "{answer}");
    assert_closed_with(
        &mut older,
        1013,
        "the node is at its session limit and this session was idle longest; reconnect when you need it",
    )
    .await;
    // The other stranger keeps its slot until another newcomer needs one.
    assert_eq!(server.sessions(), 2);
    connection.close().await;
    drop(newer);
}

#[tokio::test]
async fn a_full_node_whose_sessions_are_all_busy_still_answers_503() {
    let provider = provider_with(Limits {
        max_sessions: 1,
        max_holding_sessions: 1,
        max_holding_sessions_per_address: 1,
        idle_shed_after: Duration::from_secs(30),
        ..quick_limits()
    });
    let server = serve(&provider).await;
    let mut holder = raw_socket(&server).await;
    hello(&mut holder, None).await;
    wait_for_sessions(&server, 1).await;
    // Idle, but not for 30 s: nobody may take its slot.
    let error = requester()
        .node
        .connect(server.url(), catalogue::ACTION)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("503"), "{error}");
    assert!(error.contains("at most 1 sessions"), "{error}");
}

/// One GET of the description on a kept-alive connection: the status and the head (the
/// body, sized by `Content-Length`, is read and dropped).
async fn get_kept_alive(stream: &mut TcpStream) -> (u16, String) {
    stream
        .write_all(b"GET /.well-known/wot HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let head = read_head(stream).await;
    let length = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut body))
        .await
        .expect("no body within 5 s")
        .unwrap();
    let status = head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head)
}

#[tokio::test]
async fn requests_over_kept_alive_connections_are_budgeted_per_address_with_a_typed_429() {
    let provider = provider_with(Limits {
        request_rate_per_address: 1,
        request_burst_per_address: 20,
        ..quick_limits()
    });
    let server = serve(&provider).await;
    // The attacker: 8 kept-alive connections from one address, 10 requests on each.
    let mut connections = Vec::new();
    for _ in 0..8 {
        connections.push(Some(tcp_from("127.0.0.2", &server).await));
    }
    let (mut served, mut refused) = (0, Vec::new());
    for _ in 0..10 {
        for slot in &mut connections {
            let Some(stream) = slot else { continue };
            let (status, head) = get_kept_alive(stream).await;
            match status {
                200 => served += 1,
                429 => {
                    refused.push(head);
                    // The refusal closes its connection.
                    *slot = None;
                }
                other => panic!("unexpected status {other}: {head}"),
            }
        }
    }
    assert!(
        !refused.is_empty(),
        "80 requests over 8 kept-alive connections, none refused ({served} served)"
    );
    assert!((20..80).contains(&served), "{served} served");
    let head = refused[0].to_ascii_lowercase();
    assert!(head.contains("retry-after: 1\r\n"), "{head}");
    assert!(head.contains("connection: close\r\n"), "{head}");
    // Another address is still served, on every route.
    let mut other = tcp_from("127.0.0.1", &server).await;
    assert_eq!(get_kept_alive(&mut other).await.0, 200);
    let mut socket = raw_socket(&server).await;
    hello(&mut socket, None).await;
}
