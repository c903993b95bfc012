//! Shared state injected through `NodeBuilder`: nodes sharing a nonce log or a nonce store
//! refuse a nonce any of them accepted (the replayer plays from 127.0.0.2); providers
//! sharing a protocol book resume what either negotiated; a consensus registry given to a
//! node is the one it advertises and selects from; nodes sharing an event log number
//! their events in one sequence, each fanning out its own, and an event the log cannot
//! take is not published (503 to a poster); replicas sharing action records answer a query
//! for an action any of them runs, and refuse to cancel one another runs (409).

use std::sync::Arc;
use std::time::Duration;

use concord_fixtures::weather;
use concord_identity::{NonceLog, ReplayCache};
use concord_negotiate::ActionSpec;
use concord_node::{
    ActionIds, ActionRecords, ActionUpdate, Allow, CallError, Connection, Event, EventLog,
    EventLogError, LocalActionRecords, LocalEventLog, Node, Notification, ProgressReporter,
    PublishError, Server, Settlement, Want,
};
use concord_store::{ConsensusRegistry, NonceStore, ProtocolBook, Store};
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue, Response};

use crate::consensus::{registry_entry, URI};
use crate::identity::{challenge_error, host, now, signed};
use crate::support::{
    build, catalogue, loopback_security, quick_limits, requester, serve, tcp_from, Agent,
};

/// A provider whose action only DID-authenticated callers may call, with these backends.
fn provider(log: Option<Arc<dyn NonceLog>>, nonces: Option<Arc<dyn NonceStore>>) -> Agent {
    let mut builder = Node::builder("Product agent")
        .action(catalogue::action(), |input: Value| catalogue::answer(input))
        .keys(concord_identity::Keys::generate())
        .security(loopback_security())
        .allow(catalogue::ACTION, Allow::Authenticated)
        .limits(quick_limits());
    if let Some(log) = log {
        builder = builder.nonce_log(log);
    }
    if let Some(nonces) = nonces {
        builder = builder.nonce_store(nonces);
    }
    build(builder)
}

/// Upgrades from `source` with these headers: `Ok(())` when the WebSocket opened, else
/// the HTTP refusal.
pub(crate) async fn upgrade_from(
    source: &str,
    server: &Server,
    headers: &[(String, String)],
) -> Result<(), Response<Option<Vec<u8>>>> {
    let mut request = server.endpoint().into_client_request().unwrap();
    for (name, value) in headers {
        request.headers_mut().insert(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    let tcp = tokio_tungstenite::MaybeTlsStream::Plain(tcp_from(source, server).await);
    match tokio_tungstenite::client_async(request, tcp).await {
        Ok((mut socket, _)) => {
            socket.close(None).await.unwrap();
            Ok(())
        }
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => Err(*response),
        Err(other) => panic!("not an HTTP refusal: {other}"),
    }
}

/// The caller's nonce is accepted by `first`; the same nonce, signed again for `second`,
/// is refused there (401 `invalid_nonce`) and a fresh one is served.
async fn nonce_is_single_use_across(first: &Server, second: &Server) {
    let caller = host(crate::identity::document).await;
    let id = &caller.identity;
    upgrade_from(
        "127.0.0.1",
        first,
        &signed(id, first, now(), "shared-nonce-0001"),
    )
    .await
    .expect("the first use of the nonce is served");
    let refused = upgrade_from(
        "127.0.0.2",
        second,
        &signed(id, second, now(), "shared-nonce-0001"),
    )
    .await
    .expect_err("the nonce was accepted by the other node");
    assert_eq!(refused.status(), 401, "{refused:?}");
    assert_eq!(challenge_error(&refused), "invalid_nonce");
    upgrade_from(
        "127.0.0.1",
        second,
        &signed(id, second, now(), "fresh-nonce-00002"),
    )
    .await
    .expect("a fresh nonce is served");
}

#[tokio::test]
async fn nodes_sharing_a_nonce_log_refuse_a_nonce_either_accepted() {
    let log: Arc<dyn NonceLog> = Arc::new(ReplayCache::new(1_000, Duration::from_secs(360)));
    let a = provider(Some(Arc::clone(&log)), None);
    let b = provider(Some(log), None);
    let (a, b) = (
        a.node.serve("127.0.0.1:0").await.unwrap(),
        b.node.serve("127.0.0.1:0").await.unwrap(),
    );
    nonce_is_single_use_across(&a, &b).await;
}

#[tokio::test]
async fn nodes_sharing_a_nonce_store_refuse_a_nonce_either_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let shared: Arc<dyn NonceStore> = Arc::new(Store::open(dir.path()).unwrap());
    let a = provider(None, Some(Arc::clone(&shared)));
    let b = provider(None, Some(Arc::clone(&shared)));
    let (a_server, b_server) = (
        a.node.serve("127.0.0.1:0").await.unwrap(),
        b.node.serve("127.0.0.1:0").await.unwrap(),
    );
    nonce_is_single_use_across(&a_server, &b_server).await;
    // The nonces went to the injected store, not to the nodes' own.
    assert_eq!(shared.unexpired_nonces(now()).unwrap().len(), 2);
    assert!(a.store().unexpired_nonces(now()).unwrap().is_empty());
    assert!(b.store().unexpired_nonces(now()).unwrap().is_empty());
}

/// A product-info provider whose protocols or consensus registry are kept elsewhere.
fn product_provider(
    protocols: Option<Arc<dyn ProtocolBook>>,
    consensus: Option<Arc<dyn ConsensusRegistry>>,
) -> Agent {
    let mut builder = Node::builder("Product agent")
        .action(catalogue::action(), catalogue::answer)
        .limits(quick_limits());
    if let Some(protocols) = protocols {
        builder = builder.protocols(protocols);
    }
    if let Some(consensus) = consensus {
        builder = builder.consensus_registry(consensus);
    }
    build(builder)
}

#[tokio::test]
async fn providers_sharing_a_protocol_book_resume_what_either_negotiated() {
    let dir = tempfile::tempdir().unwrap();
    let shared = Arc::new(Store::open(dir.path()).unwrap());
    let a = product_provider(Some(Arc::clone(&shared) as Arc<dyn ProtocolBook>), None);
    let b = product_provider(Some(Arc::clone(&shared) as Arc<dyn ProtocolBook>), None);
    let (a_server, b_server) = (serve(&a).await, serve(&b).await);
    let requester = requester();

    let first = requester.connect(&a_server, catalogue::ACTION).await;
    assert_eq!(first.info().settlement, Settlement::Negotiated);
    let hash = first.info().hash;
    first.close().await;
    // B never negotiated it, yet holds it through the shared book: 0-RTT.
    let second = requester.connect(&b_server, catalogue::ACTION).await;
    assert_eq!(second.info().settlement, Settlement::Resumed);
    assert_eq!(second.info().hash, hash);
    let output = second
        .call(catalogue::ACTION, json!({"productId": "P12345"}))
        .await
        .unwrap();
    assert_eq!(output["productName"], "Laptop");
    second.close().await;
    assert!(shared.protocol(&hash).unwrap().is_some());
    for own in [a.store(), b.store()] {
        assert!(
            own.protocol(&hash).unwrap().is_none(),
            "kept in the book only"
        );
    }
}

#[tokio::test]
async fn a_consensus_registry_given_to_the_node_is_advertised_and_selected() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Arc::new(Store::open(dir.path()).unwrap());
    let entry = registry_entry();
    registry.add_consensus(&entry).unwrap();
    let provider = product_provider(None, Some(registry as Arc<dyn ConsensusRegistry>));
    let server = serve(&provider).await;
    let requester = requester();
    requester.store().add_consensus(&entry).unwrap();

    let connection = requester.connect(&server, catalogue::ACTION).await;
    assert_eq!(
        connection.info().settlement,
        Settlement::Consensus {
            uri: URI.to_owned()
        }
    );
    assert_eq!(connection.info().hash, entry.hash());
    connection.close().await;
    assert!(provider.store().list_consensus().unwrap().is_empty());
}

#[tokio::test]
async fn nodes_sharing_an_event_log_number_events_in_one_sequence_and_fan_out_their_own() {
    let log: Arc<dyn EventLog> = Arc::new(LocalEventLog::new(1));
    let weather = |log: &Arc<dyn EventLog>| {
        build(
            weather::agent(Node::builder(weather::TITLE))
                .event_log(Arc::clone(log))
                .limits(quick_limits()),
        )
    };
    let (a, b) = (weather(&log), weather(&log));
    let b_server = serve(&b).await;
    let requester = requester();
    let peer = requester
        .node
        .connect_with(
            b_server.url(),
            Want::interface([weather::USER_FEEDBACK_RECEIVED]),
        )
        .await
        .unwrap();
    let mut feedback = peer
        .subscribe(weather::USER_FEEDBACK_RECEIVED, None)
        .await
        .unwrap();

    let event = weather::USER_FEEDBACK_RECEIVED;
    let on_a = a
        .node
        .publisher()
        .publish(event, json!({"rating": 1}))
        .unwrap();
    let on_b = b
        .node
        .publisher()
        .publish(event, json!({"rating": 2}))
        .unwrap();
    assert_eq!((on_a, on_b), (1, 2), "one sequence across both nodes");
    // B's subscriber hears B's event, under the log's id; A's stays on A.
    match tokio::time::timeout(Duration::from_secs(10), feedback.next()).await {
        Ok(Some(Notification::Event { id, data, .. })) => {
            assert_eq!((id, data["rating"].as_u64()), (on_b, Some(2)));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_event_the_log_cannot_take_is_not_published_and_a_poster_gets_503() {
    // A log whose ids are exhausted refuses every append.
    let agent = build(
        Node::builder("Ingest agent")
            .event("feedback", Event::new(json!({"type": "object"})))
            .event_ingest_token("s3cret-token")
            .event_log(Arc::new(LocalEventLog::new(u64::MAX)))
            .limits(quick_limits()),
    );
    assert!(matches!(
        agent.node.publisher().publish("feedback", json!({})),
        Err(PublishError::Log(EventLogError::Unavailable { .. }))
    ));
    let server = serve(&agent).await;
    let response = reqwest::Client::new()
        .post(format!("{}events/feedback", server.url()))
        .header("Authorization", "Bearer s3cret-token")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 503);
    assert_eq!(
        response
            .headers()
            .get("retry-after")
            .and_then(|value| value.to_str().ok()),
        Some("1")
    );
    assert!(response.text().await.unwrap().contains("event log"));
}

/// A render agent whose `render` action reports half its progress, then waits for `gate`
/// to open before it completes; its long-running actions are recorded in `records`, their
/// ids drawn from `ids` when given.
fn render_replica(
    records: &Arc<dyn ActionRecords>,
    gate: &watch::Receiver<bool>,
    ids: Option<Box<dyn ActionIds>>,
) -> Agent {
    let schema = json!({"type": "object", "properties": {"frames": {"type": "integer"}}});
    let spec = ActionSpec {
        name: RENDER.into(),
        description: "Renders frames, reporting progress.".into(),
        input: schema.clone(),
        output: schema,
    };
    let gate = gate.clone();
    let mut builder = Node::builder("Render agent");
    if let Some(ids) = ids {
        builder = builder.action_ids(ids);
    }
    build(
        builder
            .progress_action(spec, move |input: Value, progress: ProgressReporter| {
                let mut gate = gate.clone();
                async move {
                    progress.report(0.5, Some(json!({"frames": 1})));
                    gate.wait_for(|open| *open)
                        .await
                        .map_err(|_| concord_node::ActionError::internal("the gate is gone"))?;
                    Ok(input)
                }
            })
            .action_records(Arc::clone(records))
            .limits(quick_limits()),
    )
}

const RENDER: &str = "render";

/// The status `peer` gets for `action_id` once it reads `status` (within 10 s).
async fn status_once(peer: &Connection, action_id: &str, status: &str) -> Value {
    for _ in 0..200 {
        let answer = peer.query_action(action_id).await.unwrap();
        if answer["status"] == status {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("action {action_id} never reached {status}");
}

#[tokio::test]
async fn a_replica_sharing_action_records_answers_a_query_for_an_action_another_runs() {
    let records: Arc<dyn ActionRecords> = Arc::new(LocalActionRecords::new());
    let (open, gate) = watch::channel(false);
    let (a, b) = (
        render_replica(&records, &gate, None),
        render_replica(&records, &gate, None),
    );
    let (a_server, b_server) = (serve(&a).await, serve(&b).await);
    let requester = requester();
    let want = Want::interface([RENDER]);
    let on_a = requester
        .node
        .connect_with(a_server.url(), want.clone())
        .await
        .unwrap();
    let mut run = on_a
        .call_with_progress(RENDER, json!({"frames": 4}))
        .await
        .unwrap();
    let mut action_id = None;
    loop {
        match tokio::time::timeout(Duration::from_secs(10), run.next()).await {
            Ok(Some(ActionUpdate::Started { action_id: id })) => action_id = Some(id),
            Ok(Some(ActionUpdate::Progress { progress, .. })) if progress >= 0.5 => break,
            Ok(Some(_)) => {}
            other => panic!("no progress from A: {other:?}"),
        }
    }
    let action_id = action_id.expect("started before its progress");

    // B does not run it, yet answers its state from the shared records.
    let on_b = requester
        .node
        .connect_with(b_server.url(), want)
        .await
        .unwrap();
    let running = on_b.query_action(&action_id).await.unwrap();
    assert_eq!(running["status"], "running", "{running}");
    assert_eq!(running["progress"], 0.5, "{running}");
    assert_eq!(running["output"]["frames"], 1, "{running}");
    // A cancel sent to B is refused, not forwarded: only A can stop the work.
    match on_b.cancel_action(&action_id).await {
        Err(CallError::Remote { code: 409, message }) => {
            assert!(message.contains("another replica"), "{message}");
        }
        other => panic!("a cancel on B must be refused with 409: {other:?}"),
    }
    assert_eq!(
        on_a.query_action(&action_id).await.unwrap()["status"],
        "running",
        "the refused cancel left the action running on A"
    );

    // A finishes it; B answers the terminal state, and a cancel there is refused as late.
    open.send(true).unwrap();
    let completed = status_once(&on_b, &action_id, "completed").await;
    assert_eq!(completed["output"]["frames"], 4, "{completed}");
    assert!(matches!(
        on_b.cancel_action(&action_id).await,
        Err(CallError::Remote { code: 409, .. })
    ));
    // An id neither node issued stays unknown.
    assert!(matches!(
        on_b.query_action("0123456789abcdef0123456789abcdef").await,
        Err(CallError::Remote { code: 404, .. })
    ));
}

/// Ids `replica-1`, `replica-2`, …
#[derive(Debug, Default)]
struct ReplicaIds(u64);

impl ActionIds for ReplicaIds {
    fn next_id(&mut self) -> String {
        self.0 += 1;
        format!("replica-{}", self.0)
    }
}

#[tokio::test]
async fn a_node_given_action_ids_issues_them_and_records_under_them() {
    let records = Arc::new(LocalActionRecords::new());
    let shared: Arc<dyn ActionRecords> = Arc::clone(&records) as Arc<dyn ActionRecords>;
    let (open, gate) = watch::channel(false);
    let agent = render_replica(&shared, &gate, Some(Box::new(ReplicaIds::default())));
    let server = serve(&agent).await;
    let requester = requester();
    let peer = requester
        .node
        .connect_with(server.url(), Want::interface([RENDER]))
        .await
        .unwrap();
    let mut run = peer
        .call_with_progress(RENDER, json!({"frames": 2}))
        .await
        .unwrap();
    let action_id = loop {
        match tokio::time::timeout(Duration::from_secs(10), run.next()).await {
            Ok(Some(ActionUpdate::Started { action_id })) => break action_id,
            Ok(Some(_)) => {}
            other => panic!("no start: {other:?}"),
        }
    };
    assert_eq!(action_id, "replica-1");
    assert!(records.read("replica-1").unwrap().is_some());
    open.send(true).unwrap();
    let done = status_once(&peer, &action_id, "completed").await;
    assert_eq!(done["output"]["frames"], 2, "{done}");
    assert_eq!(
        records
            .read("replica-1")
            .unwrap()
            .map(|record| record.status),
        Some(concord_interact::ActionStatus::Completed)
    );
}

/// A consensus registry whose listing takes a while (a shared backend's round trip, or its
/// timeout while it is away), counting its listings.
#[derive(Debug)]
struct SlowListing {
    inner: Arc<Store>,
    lists: std::sync::atomic::AtomicUsize,
}

impl ConsensusRegistry for SlowListing {
    fn add_consensus(
        &self,
        entry: &concord_store::NewConsensus,
    ) -> Result<concord_proto::ProtocolHash, concord_store::StoreError> {
        self.inner.add_consensus(entry)
    }
    fn consensus(
        &self,
        uri: &str,
    ) -> Result<Option<concord_store::ConsensusProtocol>, concord_store::StoreError> {
        self.inner.consensus(uri)
    }
    fn list_consensus(
        &self,
    ) -> Result<Vec<concord_store::ConsensusSummary>, concord_store::StoreError> {
        self.lists.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(300));
        self.inner.list_consensus()
    }
    fn remove_consensus(&self, uri: &str) -> Result<bool, concord_store::StoreError> {
        self.inner.remove_consensus(uri)
    }
    fn can_use_consensus(
        &self,
        uri: &str,
        role: concord_proto::Role,
    ) -> Result<bool, concord_store::StoreError> {
        self.inner.can_use_consensus(uri, role)
    }
}

/// Many strangers fetching the description at once (from several addresses) cost one or
/// two listings of the consensus registry, not one each: each request takes the answer
/// of a listing begun after it arrived, and waiting for it holds no thread.
#[tokio::test]
async fn many_description_requests_at_once_share_the_registrys_listing() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Arc::new(SlowListing {
        inner: Arc::new(Store::open(dir.path()).unwrap()),
        lists: std::sync::atomic::AtomicUsize::new(0),
    });
    let agent = product_provider(None, Some(Arc::clone(&registry) as _));
    let server = serve(&agent).await;
    let url = server.description_url();
    let before = registry.lists.load(std::sync::atomic::Ordering::SeqCst);
    let fetches = (0..16).map(|n| {
        let url = url.clone();
        async move {
            let client = crate::http::client_from(&format!("127.0.0.{}", 2 + n % 4));
            client.get(url).send().await.unwrap().status().as_u16()
        }
    });
    let statuses = futures_util::future::join_all(fetches).await;
    assert!(statuses.iter().all(|status| *status == 200), "{statuses:?}");
    let lists = registry.lists.load(std::sync::atomic::Ordering::SeqCst) - before;
    assert!(
        (1..8).contains(&lists),
        "16 requests at once listed the registry {lists} times"
    );
}
