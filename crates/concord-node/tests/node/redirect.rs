//! A peer's description is not fetched through a redirect: the origin checks (the DID
//! against the description's origin, no `ws://` endpoint from an `https://` description)
//! are made against the URL asked for, so a `3xx` is a fetch error naming where it points.

use concord_node::ConnectError;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::support::{catalogue, provider, requester, serve};

/// A server on loopback answering every request with `302 Found` to `location`; its base
/// URL.
async fn redirecting_to(location: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let location = location.clone();
            tokio::spawn(async move {
                // The request's head, then the answer.
                let mut head = Vec::new();
                let mut buffer = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(read) => head.extend_from_slice(&buffer[..read]),
                    }
                }
                let answer = format!(
                    "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\
                     Connection: close\r\n\r\n"
                );
                let _ = socket.write_all(answer.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    url
}

#[tokio::test]
async fn a_description_behind_a_redirect_is_not_fetched() {
    let provider = provider();
    let server = serve(&provider).await;
    let requester = requester();
    // The redirect's target is a real description, which the requester reads directly.
    let target = server.description_url();
    requester.node.describe(&target).await.unwrap();

    let redirecting = redirecting_to(target.clone()).await;
    match requester.node.describe(&redirecting).await {
        Err(ConnectError::Fetch { url, reason }) => {
            assert_eq!(url, format!("{redirecting}.well-known/wot"));
            assert!(reason.contains("302"), "{reason}");
            assert!(
                reason.contains(&format!("redirected to {target}")),
                "{reason}"
            );
        }
        other => panic!("expected a fetch error naming the redirect, got {other:?}"),
    }
    // Connecting fetches the description the same way.
    let error = requester
        .node
        .connect(&redirecting, catalogue::ACTION)
        .await
        .err()
        .unwrap();
    assert!(
        matches!(&error, ConnectError::Fetch { reason, .. } if reason.contains("302")),
        "{error}"
    );
}
