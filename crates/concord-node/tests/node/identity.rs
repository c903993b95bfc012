//! DID identity: authenticated and encrypted sessions end to end, who may call what, and
//! hostile upgrades and frames, each refused with its reason while the node keeps serving
//! and nothing reaches the backend.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use concord_identity::{sign_request, Identity, Keys, RequestTarget};
use concord_node::{
    ActionError, Allow, Authentication, ConnectError, DidPattern, Encryption, Node, Security,
    Server,
};
use concord_secure::{ChannelConfig, Handshake, HandshakePayload, RecordKind};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderValue, Response};
use tokio_tungstenite::tungstenite::Message;

use crate::support::{
    build, catalogue, finished_transcripts, loopback_security, quick_limits, requester_with_did,
    served_description_bytes, Agent, RawSocket,
};

/// A provider of the catalogue whose backend counts its calls.
fn counted_provider(security: Security, allow: Allow) -> (Agent, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let agent = build(
        Node::builder("Product agent")
            .action(catalogue::action(), move |input: Value| {
                counted.fetch_add(1, Ordering::SeqCst);
                async move { catalogue::answer(input).await }
            })
            .keys(Keys::generate())
            .security(security)
            .allow(catalogue::ACTION, allow)
            .limits(quick_limits()),
    );
    (agent, calls)
}

/// The server's description, as served.
async fn description_of(server: &Server) -> Value {
    serde_json::from_slice(&served_description_bytes(server).await).unwrap()
}

/// `agent`'s connection to `server` is refused at the upgrade with HTTP `status`.
async fn refused_at_upgrade(agent: &Agent, server: &Server, status: u16) {
    let error = agent
        .node
        .connect(server.url(), catalogue::ACTION)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ConnectError::Connect { reason, .. } if reason.contains(&format!("HTTP {status}"))),
        "{error}"
    );
}

fn anonymous_requester() -> Agent {
    build(
        Node::builder("Anonymous requester")
            .security(loopback_security())
            .limits(quick_limits()),
    )
}

#[tokio::test]
async fn an_authenticated_encrypted_session_calls_what_only_authenticated_callers_may() {
    let (provider, calls) = counted_provider(loopback_security(), Allow::Authenticated);
    let server = provider.node.serve("127.0.0.1:0").await.unwrap();
    let provider_did = server.did().unwrap().to_owned();
    assert!(
        provider_did.starts_with("did:wba:localhost%3A"),
        "{provider_did}"
    );

    // The description names the DID, the channel and the scheme the action requires.
    let description = description_of(&server).await;
    let meta = &description["concord:metaProtocol"];
    assert_eq!(meta["concord:did"], provider_did.as_str());
    assert_eq!(
        meta["concord:secureChannels"],
        json!([concord_secure::SUBPROTOCOL])
    );
    assert_eq!(
        description["securityDefinitions"]["didwba_sc"]["scheme"],
        "concord:didwba"
    );
    // It tells both places a DID is proven: the HTTP binding's forms name it too.
    let says = description["securityDefinitions"]["didwba_sc"]["description"]
        .as_str()
        .unwrap_or_default();
    assert!(
        says.contains("HTTP request") && says.contains("WebSocket upgrade"),
        "{says}"
    );
    assert_eq!(description["security"], "didwba_sc");

    let (requester, requester_server) = requester_with_did().await;
    let connection = requester.connect(&server, catalogue::ACTION).await;
    let info = connection.info();
    assert!(info.encrypted);
    assert_eq!(info.peer_did.as_deref(), Some(provider_did.as_str()));
    assert_eq!(info.signed_as.as_deref(), requester_server.did());
    let answer = connection
        .call(catalogue::ACTION, json!({"productId": "P12345"}))
        .await
        .unwrap();
    assert_eq!(answer["productName"], "Laptop");
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // The provider's transcript says how the session was protected, and by whom.
    connection.close().await;
    let transcripts = finished_transcripts(provider.store(), 1).await;
    let channel = transcripts[0].summary.channel.clone().unwrap_or_default();
    assert!(channel.contains("Noise_XX"), "{channel}");
    assert!(
        channel.contains(requester_server.did().unwrap()),
        "{channel}"
    );
    assert_eq!(transcripts[0].summary.peer, requester_server.did().unwrap());

    // A 0-RTT reconnect works in an authenticated session.
    let again = requester.connect(&server, catalogue::ACTION).await;
    assert_eq!(again.info().settlement, concord_node::Settlement::Resumed);
}

#[tokio::test]
async fn an_anonymous_caller_is_encrypted_where_anyone_may_call_and_refused_elsewhere() {
    let (open, _) = counted_provider(loopback_security(), Allow::Anyone);
    let open_server = open.node.serve("127.0.0.1:0").await.unwrap();
    let anonymous = anonymous_requester();
    let connection = anonymous.connect(&open_server, catalogue::ACTION).await;
    assert!(connection.info().encrypted);
    assert_eq!(connection.info().signed_as, None);
    assert_eq!(connection.info().peer_did.as_deref(), open_server.did());

    let (closed, calls) = counted_provider(loopback_security(), Allow::Authenticated);
    let closed_server = closed.node.serve("127.0.0.1:0").await.unwrap();
    refused_at_upgrade(&anonymous, &closed_server, 401).await;
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_did_outside_the_allowed_patterns_gets_403_and_a_listed_one_calls() {
    let (requester, requester_server) = requester_with_did().await;
    let others: DidPattern = "did:wba:partner.example:*".parse().unwrap();
    let (provider, calls) = counted_provider(loopback_security(), Allow::Dids(vec![others]));
    let server = provider.node.serve("127.0.0.1:0").await.unwrap();
    refused_at_upgrade(&requester, &server, 403).await;
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    let listed: DidPattern = requester_server.did().unwrap().parse().unwrap();
    let (provider, calls) = counted_provider(loopback_security(), Allow::Dids(vec![listed]));
    let server = provider.node.serve("127.0.0.1:0").await.unwrap();
    let connection = requester.connect(&server, catalogue::ACTION).await;
    connection
        .call(catalogue::ACTION, json!({"productId": "P12345"}))
        .await
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_node_that_requires_encryption_refuses_a_plain_upgrade_with_426() {
    let security = Security {
        encryption: Encryption::Required,
        ..loopback_security()
    };
    let (provider, _) = counted_provider(security, Allow::Anyone);
    let server = provider.node.serve("127.0.0.1:0").await.unwrap();
    let response = upgrade(&server, &[]).await.unwrap_err();
    assert_eq!(response.status(), 426);
    // A requester whose policy is off cannot reach it; one with the default can.
    let plain = build(
        Node::builder("Plain requester")
            .security(Security {
                encryption: Encryption::Off,
                ..loopback_security()
            })
            .limits(quick_limits()),
    );
    refused_at_upgrade(&plain, &server, 426).await;
    let connection = anonymous_requester()
        .node
        .connect(server.url(), catalogue::ACTION)
        .await
        .unwrap();
    assert!(connection.info().encrypted);
}

// ----- hostile upgrades -------------------------------------------------------------------

/// An identity of our own making on `localhost:port`, its document served there.
pub(crate) struct Hosted {
    pub(crate) identity: Identity,
    _server: tokio::task::JoinHandle<()>,
}

/// Serves `document(did)` at the DID document path of a new identity.
pub(crate) async fn host(document: impl Fn(&Identity) -> Value) -> Hosted {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let identity = Identity::new(Keys::generate(), "localhost", Some(port), &["agents"]).unwrap();
    let body = serde_json::to_vec(&document(&identity)).unwrap();
    let app = axum::Router::new().route(
        &identity.did().document_path(),
        axum::routing::get(move || {
            let body = body.clone();
            async move { ([("content-type", "application/did+json")], body) }
        }),
    );
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Hosted {
        identity,
        _server: server,
    }
}

pub(crate) fn now() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap()
}

pub(crate) fn document(identity: &Identity) -> Value {
    identity.document(&concord_identity::format_iso8601(now()), &[])
}

/// Signature headers for an upgrade to `server` by `identity`.
pub(crate) fn signed(
    identity: &Identity,
    server: &Server,
    created: i64,
    nonce: &str,
) -> Vec<(String, String)> {
    let endpoint = server.endpoint();
    let target = RequestTarget {
        method: "GET",
        target_uri: &endpoint,
    };
    let headers = sign_request(identity, &target, b"", created, nonce);
    vec![
        ("Signature-Input".into(), headers.signature_input),
        ("Signature".into(), headers.signature),
    ]
}

/// Upgrades with these headers; `Err` is the HTTP answer when refused.
async fn upgrade(
    server: &Server,
    headers: &[(String, String)],
) -> Result<(RawSocket, Response<Option<Vec<u8>>>), Response<Option<Vec<u8>>>> {
    let mut request = server.endpoint().into_client_request().unwrap();
    for (name, value) in headers {
        request.headers_mut().insert(
            tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok(connected) => Ok(connected),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => Err(*response),
        Err(other) => panic!("not an HTTP refusal: {other}"),
    }
}

/// The `error` of a refusal's `WWW-Authenticate` challenge.
pub(crate) fn challenge_error(response: &Response<Option<Vec<u8>>>) -> String {
    let challenge = response
        .headers()
        .get("www-authenticate")
        .unwrap_or_else(|| panic!("no challenge in {response:?}"))
        .to_str()
        .unwrap();
    assert!(challenge.starts_with("DIDWba realm="), "{challenge}");
    assert!(response.headers().get("accept-signature").is_some());
    challenge
        .split("error=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn hostile_upgrades_get_typed_refusals_and_nothing_reaches_the_backend() {
    let (provider, calls) = counted_provider(loopback_security(), Allow::Authenticated);
    let server = provider.node.serve("127.0.0.1:0").await.unwrap();
    let caller = host(document).await;
    let id = &caller.identity;

    // No credentials at all.
    let refused = upgrade(&server, &[]).await.unwrap_err();
    assert_eq!(refused.status(), 401);
    assert_eq!(challenge_error(&refused), "invalid_request");

    // A forged signature: one byte of it changed.
    let mut forged = signed(id, &server, now(), "forged-nonce-0001");
    let signature = forged[1].1.clone();
    let flipped = if signature.contains("sig1=:A") {
        "sig1=:B"
    } else {
        "sig1=:A"
    };
    forged[1].1 = format!("{flipped}{}", &signature[7..]);
    let refused = upgrade(&server, &forged).await.unwrap_err();
    assert_eq!(refused.status(), 401, "{refused:?}");
    assert_eq!(challenge_error(&refused), "invalid_signature");

    // Expired and future `created`.
    for created in [now() - 3600, now() + 3600] {
        let refused = upgrade(
            &server,
            &signed(id, &server, created, &format!("n{created}")),
        )
        .await
        .unwrap_err();
        assert_eq!(refused.status(), 401);
        assert_eq!(challenge_error(&refused), "invalid_timestamp");
    }

    // A good one passes once; replayed, it is refused.
    let good = signed(id, &server, now(), "replayed-nonce-01");
    let (mut socket, _) = upgrade(&server, &good).await.unwrap();
    socket.close(None).await.unwrap();
    let refused = upgrade(&server, &good).await.unwrap_err();
    assert_eq!(refused.status(), 401);
    assert_eq!(challenge_error(&refused), "invalid_nonce");

    // keyid naming the keyAgreement key, not an authentication key.
    let mut wrong_key = signed(id, &server, now(), "wrong-key-nonce-1");
    wrong_key[0].1 = wrong_key[0].1.replace("#key-1", "#key-3");
    let refused = upgrade(&server, &wrong_key).await.unwrap_err();
    assert!(
        matches!(refused.status().as_u16(), 401 | 403),
        "{refused:?}"
    );

    // A signature the caller made for another node's endpoint (one it called, which kept
    // the headers), replayed here under that node's Host: it covers another @target-uri.
    let elsewhere = RequestTarget {
        method: "GET",
        target_uri: "ws://evil.example/concord",
    };
    let made = sign_request(id, &elsewhere, b"", now(), "cross-node-nonce-1");
    let replayed = vec![
        ("Signature-Input".to_owned(), made.signature_input),
        ("Signature".to_owned(), made.signature),
        ("Host".to_owned(), "evil.example".to_owned()),
    ];
    let refused = upgrade(&server, &replayed).await.unwrap_err();
    assert_eq!(refused.status(), 401, "{refused:?}");
    assert_eq!(challenge_error(&refused), "invalid_signature");

    // A DID whose document says it is another DID.
    let impostor = host(|identity| {
        let mut document = document(identity);
        document["id"] = json!("did:wba:localhost%3A1:agents:someone-else");
        document
    })
    .await;
    let refused = upgrade(
        &server,
        &signed(&impostor.identity, &server, now(), "impostor-nonce-1"),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.status(), 401);
    assert_eq!(challenge_error(&refused), "invalid_did");

    // The node goes on serving, and no hostile upgrade reached the action.
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let (requester, _requester_server) = requester_with_did().await;
    let connection = requester.connect(&server, catalogue::ACTION).await;
    connection
        .call(catalogue::ACTION, json!({"productId": "P12345"}))
        .await
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// Runs the Noise handshake (we initiate) on an upgraded raw socket with `static_key`.
async fn noise(
    socket: &mut RawSocket,
    static_key: &[u8; 32],
    our_did: Option<&str>,
    provider_did: &str,
) -> Result<concord_secure::Channel, String> {
    let config = ChannelConfig::default();
    let prologue = concord_secure::prologue(our_did, provider_did);
    let payload = HandshakePayload {
        did: our_did.map(str::to_owned),
    };
    let mut handshake = Handshake::new(
        concord_secure::Role::Initiator,
        static_key,
        &prologue,
        &payload,
        &config,
    )
    .unwrap();
    while !handshake.is_finished() {
        if handshake.is_my_turn() {
            let message = handshake.write_message().unwrap();
            socket.send(Message::Binary(message.into())).await.unwrap();
        } else {
            match socket.next().await {
                Some(Ok(Message::Binary(message))) => handshake
                    .read_message(&message)
                    .map_err(|error| error.to_string())?,
                other => return Err(format!("{other:?}")),
            }
        }
    }
    handshake
        .into_channel(std::time::Instant::now())
        .map_err(|error| error.to_string())
}

/// Upgrades as `id` offering the Noise channel.
async fn noise_upgrade(server: &Server, id: &Identity, nonce: &str) -> RawSocket {
    let mut headers = signed(id, server, now(), nonce);
    headers.push((
        "Sec-WebSocket-Protocol".into(),
        concord_secure::SUBPROTOCOL.into(),
    ));
    upgrade(server, &headers).await.unwrap().0
}

#[tokio::test]
async fn a_wrong_noise_key_and_replayed_or_altered_frames_end_the_session() {
    let (provider, calls) = counted_provider(loopback_security(), Allow::Authenticated);
    let server = provider.node.serve("127.0.0.1:0").await.unwrap();
    let provider_did = server.did().unwrap().to_owned();
    let caller = host(document).await;
    let id = &caller.identity;
    let did = id.did().as_str();

    // A static key that is not the DID's keyAgreement key: the provider closes (1008).
    let mut socket = noise_upgrade(&server, id, "wrong-static-0001").await;
    let stranger = Keys::generate().agreement_secret();
    let _ = noise(&mut socket, &stranger, Some(did), &provider_did).await;
    let (code, reason) = crate::support::closed_with(&mut socket).await;
    assert_eq!(code, 1008, "{reason}");
    assert!(reason.contains("keyAgreement"), "{reason}");

    // The right key; then a sealed hello, then the same message again: a replay (1002).
    let mut socket = noise_upgrade(&server, id, "replayed-frame-01").await;
    let mut channel = noise(
        &mut socket,
        &id.keys().agreement_secret(),
        Some(did),
        &provider_did,
    )
    .await
    .unwrap();
    let hello = crate::support::source_hello(None);
    let sealed = channel
        .seal(
            RecordKind::Text,
            hello.as_bytes(),
            std::time::Instant::now(),
        )
        .unwrap();
    socket
        .send(Message::Binary(sealed.clone().into()))
        .await
        .unwrap();
    // The destinationHello comes back sealed.
    let Some(Ok(Message::Binary(answer))) = socket.next().await else {
        panic!("no sealed destinationHello");
    };
    let record = channel.open(&answer, std::time::Instant::now()).unwrap();
    assert!(String::from_utf8(record.data)
        .unwrap()
        .contains("destinationHello"));
    socket.send(Message::Binary(sealed.into())).await.unwrap();
    let (code, reason) = crate::support::closed_with(&mut socket).await;
    assert_eq!(code, 1002, "{reason}");

    // An altered message: one bit flipped.
    let mut socket = noise_upgrade(&server, id, "altered-frame-001").await;
    let mut channel = noise(
        &mut socket,
        &id.keys().agreement_secret(),
        Some(did),
        &provider_did,
    )
    .await
    .unwrap();
    let mut sealed = channel
        .seal(
            RecordKind::Text,
            hello.as_bytes(),
            std::time::Instant::now(),
        )
        .unwrap();
    let last = sealed.len() - 1;
    sealed[last] ^= 1;
    socket.send(Message::Binary(sealed.into())).await.unwrap();
    let (code, reason) = crate::support::closed_with(&mut socket).await;
    assert_eq!(code, 1002, "{reason}");

    // A plaintext hello where the channel was agreed.
    let mut socket = noise_upgrade(&server, id, "plaintext-hello-1").await;
    let _channel = noise(
        &mut socket,
        &id.keys().agreement_secret(),
        Some(did),
        &provider_did,
    )
    .await
    .unwrap();
    socket
        .send(Message::Text(hello.clone().into()))
        .await
        .unwrap();
    let (code, reason) = crate::support::closed_with(&mut socket).await;
    assert_eq!(code, 1002, "{reason}");

    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn per_action_authorization_an_anonymous_caller_reaches_the_open_action_only() {
    // Two actions: the catalogue for anyone, `adjustPrice` for authenticated callers only.
    let adjusted = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&adjusted);
    let adjust = concord_negotiate::ActionSpec {
        name: "adjustPrice".into(),
        description: "Sets a product's price.".into(),
        input: json!({"type": "object", "properties": {"productId": {"type": "string"}, "price": {"type": "number"}}, "required": ["productId", "price"]}),
        output: json!({"type": "object", "properties": {"ok": {"type": "boolean"}}}),
    };
    let provider = build(
        Node::builder("Shop")
            .action(catalogue::action(), catalogue::answer)
            .action(adjust, move |_input: Value| {
                counted.fetch_add(1, Ordering::SeqCst);
                async move { Ok::<_, ActionError>(json!({"ok": true})) }
            })
            .keys(Keys::generate())
            .security(Security {
                authentication: Authentication::Optional,
                ..loopback_security()
            })
            .allow("adjustPrice", Allow::Authenticated)
            .limits(quick_limits()),
    );
    let server = provider.node.serve("127.0.0.1:0").await.unwrap();
    // The description says which action needs a DID.
    let description = description_of(&server).await;
    assert_eq!(description["security"], "nosec_sc");
    assert_eq!(
        description["actions"]["adjustPrice"]["forms"][0]["security"],
        "didwba_sc"
    );
    assert!(description["actions"][catalogue::ACTION]["forms"][0]
        .get("security")
        .is_none());

    let anonymous = anonymous_requester();
    let open = anonymous.connect(&server, catalogue::ACTION).await;
    open.call(catalogue::ACTION, json!({"productId": "P12345"}))
        .await
        .unwrap();
    let refused = anonymous
        .node
        .connect(server.url(), "adjustPrice")
        .await
        .unwrap_err();
    assert!(!refused.to_string().is_empty());
    assert_eq!(adjusted.load(Ordering::SeqCst), 0);

    let (requester, _requester_server) = requester_with_did().await;
    let allowed = requester.connect(&server, "adjustPrice").await;
    allowed
        .call("adjustPrice", json!({"productId": "P12345", "price": 9.5}))
        .await
        .unwrap();
    assert_eq!(adjusted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_plain_session_between_two_peers_that_speak_the_channel_is_refused_as_stripped() {
    // A proxy (or an attacker) dropped the subprotocol offer: the upgrade is plain, but the
    // sourceHello says the caller speaks the encrypted channel, and so does the provider.
    let (provider, calls) = counted_provider(loopback_security(), Allow::Anyone);
    let server = provider.node.serve("127.0.0.1:0").await.unwrap();
    let (mut socket, _) = upgrade(&server, &[]).await.unwrap();
    let hello = json!({
        "version": "1.0", "type": "sourceHello", "messageId": "stripped-1",
        "metaProtocol": {"version": "1.0", "supportedCapabilities": ["encryptedChannel"]}
    });
    socket
        .send(Message::Text(hello.to_string().into()))
        .await
        .unwrap();
    let (code, reason) = crate::support::closed_with(&mut socket).await;
    assert_eq!(code, 1008, "{reason}");
    assert!(reason.contains("encryptedChannel"), "{reason}");
    // Without the claim, a plain caller (the reference SDK) is served as before.
    let (mut socket, _) = upgrade(&server, &[]).await.unwrap();
    let destination = crate::support::hello(&mut socket, None).await;
    assert_eq!(destination["type"], "destinationHello");
    assert!(!destination["metaProtocol"]["supportedCapabilities"]
        .as_array()
        .unwrap()
        .is_empty());
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[test]
fn a_replay_cache_that_forgets_nonces_while_their_signatures_are_good_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let security = Security {
        replay_ttl: std::time::Duration::from_secs(60),
        ..Security::default()
    };
    let error = Node::builder("Leaky")
        .data_dir(dir.path())
        .security(security)
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("replay_ttl"), "{error}");
}

#[tokio::test]
async fn a_did_that_signs_fresh_nonces_as_fast_as_it_can_fills_only_its_share() {
    let security = Security {
        replay_per_did: 2,
        ..loopback_security()
    };
    let (provider, _) = counted_provider(security, Allow::Authenticated);
    let server = provider.node.serve("127.0.0.1:0").await.unwrap();
    let flooder = host(document).await;
    for n in 0..2 {
        let (mut socket, _) = upgrade(
            &server,
            &signed(
                &flooder.identity,
                &server,
                now(),
                &format!("flood-nonce-{n}"),
            ),
        )
        .await
        .unwrap();
        socket.close(None).await.unwrap();
    }
    let refused = upgrade(
        &server,
        &signed(&flooder.identity, &server, now(), "flood-nonce-2"),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.status(), 429, "{refused:?}");
    // Another DID still gets in.
    let other = host(document).await;
    let (mut socket, _) = upgrade(
        &server,
        &signed(&other.identity, &server, now(), "other-nonce-0"),
    )
    .await
    .unwrap();
    socket.close(None).await.unwrap();
}

// ----- DID resolution under strangers ----------------------------------------------------

/// Upgrades with these headers from the client address `source`; `Err` is the HTTP answer
/// when refused.
pub(crate) async fn upgrade_from(
    source: &str,
    server: &Server,
    headers: &[(String, String)],
) -> Result<RawSocket, Response<Option<Vec<u8>>>> {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(std::net::SocketAddr::new(source.parse().unwrap(), 0))
        .unwrap();
    let stream = socket.connect(server.local_addr()).await.unwrap();
    let mut request = server.endpoint().into_client_request().unwrap();
    for (name, value) in headers {
        request.headers_mut().insert(
            tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    let stream = tokio_tungstenite::MaybeTlsStream::Plain(stream);
    match tokio_tungstenite::client_async(request, stream).await {
        Ok((socket, _)) => Ok(socket),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => Err(*response),
        Err(other) => panic!("not an HTTP refusal: {other}"),
    }
}

/// A listener on 127.0.0.1 that accepts connections and never writes a byte: the DID
/// host of a stranger whose server never answers.
async fn silent_host() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    port
}

/// 16 attacking addresses (127.0.0.2–17), each with as many upgrades in authentication as
/// it may (4), each signed by a DID on `host(address, n)` (at a server that never
/// answers); meanwhile 3 legitimate signed callers from 127.0.0.1, each with a DID of its
/// own, must all be served, and no stranger gets in.
async fn signed_callers_are_served_beside_silent_did_hosts(host: fn(usize, usize) -> String) {
    let (provider, calls) = counted_provider(loopback_security(), Allow::Authenticated);
    let server = Arc::new(provider.node.serve("127.0.0.1:0").await.unwrap());
    let silent = silent_host().await;
    let mut pending = Vec::new();
    for address in 0..16 {
        for n in 0..4 {
            let identity = Identity::new(
                Keys::generate(),
                &host(address, n),
                Some(silent),
                &["agents"],
            )
            .unwrap();
            let headers = signed(
                &identity,
                &server,
                now(),
                &format!("stranger-{address}-{n}"),
            );
            let source = format!("127.0.0.{}", address + 2);
            let server = Arc::clone(&server);
            pending.push(tokio::spawn(async move {
                upgrade_from(&source, &server, &headers).await.map(|_| ())
            }));
        }
    }
    // Let the strangers' upgrades reach their fetches.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    for call in 0..3 {
        let (requester, _requester_server) = requester_with_did().await;
        let connected = tokio::time::timeout(
            std::time::Duration::from_secs(20),
            requester.node.connect(server.url(), catalogue::ACTION),
        )
        .await
        .expect("no answer within 20 s");
        let connection = connected.unwrap_or_else(|error| panic!("call {call}: {error}"));
        connection
            .call(catalogue::ACTION, json!({"productId": "P12345"}))
            .await
            .unwrap();
    }
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    // No stranger got in.
    for attack in pending {
        attack.abort();
        if let Ok(Ok(outcome)) =
            tokio::time::timeout(std::time::Duration::from_millis(1), attack).await
        {
            assert!(
                outcome.is_err(),
                "a stranger whose DID never resolves got in"
            );
        }
    }
}

#[tokio::test]
async fn strangers_whose_did_hosts_never_answer_leave_fetch_slots_for_a_signed_caller() {
    // Every host under one domain: evil.localhost's 4 fetch slots at most.
    signed_callers_are_served_beside_silent_did_hosts(|address, n| {
        format!("h{address}x{n}.evil.localhost")
    })
    .await;
}

#[tokio::test]
async fn strangers_on_a_domain_each_hold_their_addresses_share_of_fetch_slots_only() {
    // A registrable domain per address (free to mint under a public suffix): each address
    // holds at most its share of the node's fetch slots, and a host that never answers
    // gives its slot back at the connect deadline.
    signed_callers_are_served_beside_silent_did_hosts(|address, n| {
        format!("h{n}.evil{address}.localhost")
    })
    .await;
}

// ----- the legacy `Authorization: DIDWba` header -----------------------------------------

/// A legacy `Authorization: DIDWba` header for an upgrade to `server` by `identity`.
fn legacy(identity: &Identity, server: &Server, nonce: &str) -> Vec<(String, String)> {
    let timestamp = concord_identity::format_iso8601(now());
    let audience = server.local_addr().ip().to_string();
    vec![(
        "Authorization".to_owned(),
        concord_identity::legacy_authorization(identity, &audience, nonce, &timestamp),
    )]
}

#[tokio::test]
async fn a_legacy_didwba_header_is_refused_by_default_with_a_challenge_naming_rfc_9421() {
    let (provider, calls) = counted_provider(loopback_security(), Allow::Authenticated);
    let server = provider.node.serve("127.0.0.1:0").await.unwrap();
    let caller = host(document).await;
    let refused = upgrade(
        &server,
        &legacy(&caller.identity, &server, "legacy-nonce-0001"),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.status(), 401, "{refused:?}");
    assert_eq!(challenge_error(&refused), "invalid_request");
    let challenge = refused.headers()["www-authenticate"].to_str().unwrap();
    assert!(challenge.contains("RFC 9421"), "{challenge}");
    let accepted = refused.headers()["accept-signature"].to_str().unwrap();
    assert!(accepted.starts_with("sig1=(\"@method\""), "{accepted}");
    // The description offers the RFC 9421 form alone.
    let description = description_of(&server).await.to_string();
    assert!(
        !description.contains("Authorization: DIDWba"),
        "{description}"
    );
    // The same caller signing RFC 9421 gets in.
    let (mut socket, _) = upgrade(
        &server,
        &signed(&caller.identity, &server, now(), "rfc-9421-nonce-01"),
    )
    .await
    .unwrap();
    socket.close(None).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn with_legacy_didwba_on_a_legacy_header_passes_once() {
    let security = Security {
        legacy_didwba: true,
        ..loopback_security()
    };
    let (provider, _) = counted_provider(security, Allow::Authenticated);
    let server = provider.node.serve("127.0.0.1:0").await.unwrap();
    let caller = host(document).await;
    let headers = legacy(&caller.identity, &server, "legacy-nonce-0002");
    let (mut socket, _) = upgrade(&server, &headers).await.unwrap();
    socket.close(None).await.unwrap();
    let refused = upgrade(&server, &headers).await.unwrap_err();
    assert_eq!(refused.status(), 401);
    assert_eq!(challenge_error(&refused), "invalid_nonce");
    let description = description_of(&server).await.to_string();
    assert!(
        description.contains("Authorization: DIDWba"),
        "{description}"
    );
}

// ----- replays across a restart -----------------------------------------------------------

/// A provider on `data_dir` with `keys`, admitting authenticated callers only.
fn provider_on(data_dir: &std::path::Path, keys: Keys) -> concord_node::Node {
    provider_with_security(data_dir, keys, loopback_security())
}

/// [`provider_on`] with `security`.
fn provider_with_security(
    data_dir: &std::path::Path,
    keys: Keys,
    security: Security,
) -> concord_node::Node {
    Node::builder("Product agent")
        .action(catalogue::action(), catalogue::answer)
        .keys(keys)
        .security(security)
        .allow(catalogue::ACTION, Allow::Authenticated)
        .limits(quick_limits())
        .data_dir(data_dir)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_signed_upgrade_accepted_before_a_restart_is_refused_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("provider-keys.json");
    Keys::generate().save(&key_file).unwrap();
    let keys = || Keys::load(&key_file).unwrap();
    let caller = host(document).await;
    let first = provider_on(dir.path(), keys());
    let server = first.serve("127.0.0.1:0").await.unwrap();
    let address = server.local_addr();
    let headers = signed(&caller.identity, &server, now(), "before-the-restart");
    let (mut socket, _) = upgrade(&server, &headers).await.unwrap();
    socket.close(None).await.unwrap();
    server.shutdown().await.unwrap();
    drop(first);

    // The same data directory and keys, on the same address: the same endpoint, so the
    // header's signature still covers it.
    let second = provider_on(dir.path(), keys());
    let server = second.serve(&address.to_string()).await.unwrap();
    let refused = upgrade(&server, &headers).await.unwrap_err();
    assert_eq!(refused.status(), 401, "{refused:?}");
    assert_eq!(challenge_error(&refused), "invalid_nonce");
    // A fresh nonce of the same caller gets in.
    let fresh = signed(&caller.identity, &server, now(), "after-the-restart");
    let (mut socket, _) = upgrade(&server, &fresh).await.unwrap();
    socket.close(None).await.unwrap();
}

#[tokio::test]
async fn agents_sharing_a_store_accept_a_legacy_header_once_between_them() {
    // Two agents on one host (the default data directory is one per user), the legacy
    // header on: it signs the host name only, so it verifies at both; the nonce recorded
    // in the shared store refuses it at the second.
    let dir = tempfile::tempdir().unwrap();
    let security = Security {
        legacy_didwba: true,
        ..loopback_security()
    };
    let one = provider_with_security(dir.path(), Keys::generate(), security.clone());
    let other = provider_with_security(dir.path(), Keys::generate(), security);
    let first = one.serve("127.0.0.1:0").await.unwrap();
    let second = other.serve("127.0.0.1:0").await.unwrap();
    let caller = host(document).await;
    let headers = legacy(&caller.identity, &first, "legacy-shared-0001");
    let (mut socket, _) = upgrade(&first, &headers).await.unwrap();
    socket.close(None).await.unwrap();
    let refused = upgrade(&second, &headers).await.unwrap_err();
    assert_eq!(refused.status(), 401, "{refused:?}");
    assert_eq!(challenge_error(&refused), "invalid_nonce");
}
