//! Slots a stranger could pin: WebSockets waiting for their hello (shed by address, never
//! a caller still in its handshake), and sessions that subscribe, observe or hold a stream
//! and then go silent (a budget of their own, shed when the node is full, pinged, their
//! streams reset when idle). Attackers play from 127.0.0.2 and up, the caller from
//! 127.0.0.1.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use concord_node::{Keys, Limits, Node, Server};
use tokio_tungstenite::MaybeTlsStream;

use crate::hostile::tcp_from;
use crate::support::*;

/// A WebSocket to `server` from `source`, before any hello; `None` when it was refused.
async fn socket_from(source: &str, server: &Server) -> Option<RawSocket> {
    let stream = tcp_from(source, server).await;
    tokio_tungstenite::client_async(server.endpoint(), MaybeTlsStream::Plain(stream))
        .await
        .ok()
        .map(|(socket, _)| socket)
}

/// One attacker's loop: a WebSocket that never says hello, opened again as soon as the
/// node closes or refuses it, until `stop`.
async fn hold_pre_hello(source: &'static str, server: Arc<Server>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        match socket_from(source, &server).await {
            Some(mut socket) => {
                let closed = tokio::time::timeout(Duration::from_secs(1), closed_with(&mut socket));
                tokio::select! {
                    _ = closed => {}
                    () = async { while !stop.load(Ordering::Relaxed) {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    } } => {}
                }
            }
            // Refused (429 or 503): again, a moment later.
            None => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

#[tokio::test]
async fn pre_hello_sockets_reopened_in_a_loop_from_one_address_do_not_shed_callers() {
    // A provider with a DID: the caller signs its upgrade and runs the Noise handshake
    // while it waits for its hello, the window in which it could be shed.
    let provider = build(
        Node::builder("Product agent")
            .action(catalogue::action(), catalogue::answer)
            .keys(Keys::generate())
            .security(loopback_security())
            .limits(Limits {
                // The attacker is slowed neither by the connection rate nor by its share
                // of sessions: the budget of WebSockets waiting for their hello alone
                // must keep it from the caller.
                connection_rate_per_address: 100_000,
                connection_burst_per_address: 100_000,
                max_sessions_per_address: 1024,
                ..quick_limits()
            }),
    );
    let server = Arc::new(serve(&provider).await);
    let stop = Arc::new(AtomicBool::new(false));
    // Four times the budget of WebSockets waiting for their hello (64), each opened again
    // as soon as it is shed: sheds come in bursts, as fast as the attacker reconnects.
    let attackers: Vec<_> = (0..256)
        .map(|_| {
            tokio::spawn(hold_pre_hello(
                "127.0.0.2",
                Arc::clone(&server),
                Arc::clone(&stop),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;

    const CALLS: usize = 20;
    let (requester, _requester_server) = requester_with_did().await;
    let mut served = 0;
    let mut failures = Vec::new();
    for round in 0..CALLS {
        let answer = match requester
            .node
            .connect(server.url(), catalogue::ACTION)
            .await
        {
            Ok(connection) => {
                let answer = connection
                    .call(catalogue::ACTION, catalogue::input(round))
                    .await
                    .map_err(|error| error.to_string());
                connection.close().await;
                answer
            }
            Err(error) => Err(error.to_string()),
        };
        match answer {
            Ok(_) => served += 1,
            Err(error) => failures.push(error),
        }
    }
    stop.store(true, Ordering::Relaxed);
    for attacker in attackers {
        attacker.await.unwrap();
    }
    assert!(
        served * 100 >= CALLS * 95,
        "{served} of {CALLS} calls served beside the attack: {failures:?}"
    );
}
