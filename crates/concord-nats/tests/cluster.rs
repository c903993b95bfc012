//! Two replicas of one agent on a real three-node NATS JetStream cluster
//! ([`NatsCluster`]: three nats-server processes with routes between them;
//! `CONCORD_NATS_SERVER` names the binary, `.ci/run` runs these with `--ignored`), every
//! bucket and stream created with three replicas (`NatsSettings::replicas = 3`). Replica A
//! and replica B start on different servers, so what one writes reaches the other across
//! the cluster's routes.
//!
//! What they show: the protocols, nonces, consensus and actions buckets and the event and
//! directory streams really have three replicas; with one server killed (`SIGKILL`),
//! once the clients reconnected and the buckets and streams elected their leaders (a
//! bounded wait), every write and read succeeds at the first try on both replicas; a
//! server started again catches up (killing another server next still leaves everything
//! working, which needs the restarted one current); with two of three down every write
//! answers a typed error within the operation timeout (a read by hash may be answered from
//! the copy of the server left), and everything works again when one returns.

mod common;

use common::runtime;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use async_nats::jetstream;
use concord_directory::{DirectoryStore, Entry, EventKind, Expect, Outcome, StoreFailure, Write};
use concord_interact::{
    ActionRecord, ActionRecords, ActionStatus, EventLog, EventLogError, EventSink,
};
use concord_nats::testing::NatsCluster;
use concord_nats::{
    Buckets, EventStream, Nats, NatsActionRecords, NatsDirectoryStore, NatsError, NatsEventLog,
    NatsSettings, SharedState, DEFAULT_ACTION_BUCKET, DEFAULT_ACTION_MAX_AGE,
    DEFAULT_DIRECTORY_STREAM, DEFAULT_EVENT_STREAM,
};
use concord_proto::{ProtocolHash, Role};
use concord_store::{
    ConsensusRegistry, NewConsensus, NewProtocol, NonceStore, ProtocolBook, StoreError,
};
use serde_json::json;

/// One operation's timeout, as `concord serve`'s default `cluster.timeout`.
const TIMEOUT: Duration = Duration::from_secs(2);

/// The longest a server's death may take to settle: the clients reconnecting and every
/// bucket and stream electing a leader on the servers left (nats-server's Raft election
/// timeout is several seconds).
const SETTLE: Duration = Duration::from_secs(30);

/// How long a write on one replica may take to reach the other's copy (an event its sink,
/// a directory write its state, an action record its watch), also right after a server
/// died: less than the 10 s a client takes to notice that a consumer went with its server
/// (two missed idle heartbeats), so a replica that waited for that would fail here.
const REACH: Duration = Duration::from_secs(5);

/// The nonce window the nonce bucket is created with.
const WINDOW: Duration = Duration::from_secs(360);

/// A clock for the nonces, in the window of the bucket.
const NOW: i64 = 1_800_000_000;

/// The JetStream streams behind what a replica opens (a bucket `b` is the stream `KV_b`).
fn streams() -> Vec<String> {
    let buckets = Buckets::default();
    [
        &buckets.protocols,
        &buckets.nonces,
        &buckets.consensus,
        DEFAULT_ACTION_BUCKET,
    ]
    .iter()
    .map(|bucket| format!("KV_{bucket}"))
    .chain([
        DEFAULT_EVENT_STREAM.to_owned(),
        DEFAULT_DIRECTORY_STREAM.to_owned(),
    ])
    .collect()
}

/// The event ids a replica's event hub was given.
#[derive(Default)]
struct Seen(Mutex<Vec<u64>>);

impl EventSink for Seen {
    fn deliver(&self, _event: &str, id: u64, _data: serde_json::Value) {
        self.0.lock().unwrap().push(id);
    }

    fn forget_before(&self, _first: u64) {}
}

/// One replica: its own NATS connection (client name `name`) and every shared backend
/// `concord serve` opens, created with three replicas.
struct Replica {
    name: &'static str,
    nats: Nats,
    shared: SharedState,
    actions: NatsActionRecords,
    events: NatsEventLog,
    seen: Arc<Seen>,
    directory: NatsDirectoryStore,
}

impl Replica {
    fn open(runtime: &tokio::runtime::Runtime, name: &'static str, servers: Vec<String>) -> Self {
        let mut settings = NatsSettings::new(servers);
        settings.client_name = name.to_owned();
        settings.operation_timeout = TIMEOUT;
        settings.replicas = 3;
        let replica = runtime.block_on(async {
            let nats = Nats::connect(&settings).await.unwrap();
            let shared = SharedState::open(&nats, &Buckets::default(), WINDOW)
                .await
                .unwrap();
            let actions =
                NatsActionRecords::open(&nats, DEFAULT_ACTION_BUCKET, DEFAULT_ACTION_MAX_AGE)
                    .await
                    .unwrap();
            let events = NatsEventLog::open(&nats, &EventStream::new(DEFAULT_EVENT_STREAM))
                .await
                .unwrap();
            let directory = NatsDirectoryStore::open(&nats, DEFAULT_DIRECTORY_STREAM)
                .await
                .unwrap();
            Self {
                name,
                nats,
                shared,
                actions,
                events,
                seen: Arc::default(),
                directory,
            }
        });
        let sink: Weak<dyn EventSink> =
            Arc::downgrade(&(Arc::clone(&replica.seen) as Arc<dyn EventSink>));
        assert!(replica.events.deliver_to(sink));
        replica
    }

    /// Waits until `arrived` holds (at most [`REACH`]).
    fn wait_for(&self, what: &str, arrived: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + REACH;
        while !arrived(self) {
            assert!(
                Instant::now() < deadline,
                "{}: {what} within {REACH:?}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// What a round of [`shared_across`] wrote, for later rounds to find again.
#[derive(Default)]
struct Written {
    nonces: Vec<String>,
    protocols: Vec<ProtocolHash>,
}

/// Every kind of shared state written on `from` and read on `to` at the first try (any
/// error fails the test): a new nonce accepted by `from` is refused by `to`; a protocol
/// saved by `from` is found and resumable on `to`; a consensus protocol registered on
/// `from` is read on `to`; an event appended on `from` reaches `to`'s sink; a directory
/// write on `from` is applied on `to`; an action record written on `from` is read on `to`.
/// And what earlier rounds wrote still holds on both.
fn shared_across(from: &Replica, to: &Replica, round: &str, written: &mut Written) {
    let did = "did:wba:cluster.example:caller";
    let nonce = format!("nonce-{round}");
    assert!(
        from.shared
            .nonces
            .record_nonce(did, &nonce, NOW, NOW + 300)
            .unwrap(),
        "{round}: {} refused a new nonce",
        from.name
    );
    assert!(
        !to.shared
            .nonces
            .record_nonce(did, &nonce, NOW + 1, NOW + 301)
            .unwrap(),
        "{round}: {} accepted the nonce {} had accepted",
        to.name,
        from.name
    );
    written.nonces.push(nonce);

    let document = format!("# Protocol of round {round}\n");
    let hash = from
        .shared
        .protocols
        .save_protocol(
            &NewProtocol::negotiated(document.as_str(), "https://peer.example/")
                .with_action("getProductInfo")
                .with_handler(Role::Requester, "/* requester */"),
        )
        .unwrap();
    assert!(
        to.shared
            .protocols
            .can_resume(&hash, Role::Requester)
            .unwrap(),
        "{round}: saved on {}, not resumable on {}",
        from.name,
        to.name
    );
    written.protocols.push(hash);

    let uri = format!("https://protocols.example/{round}");
    let registered = from
        .shared
        .consensus
        .add_consensus(
            &NewConsensus::new(uri.as_str(), document.as_str())
                .with_handler(Role::Provider, "/* p */"),
        )
        .unwrap();
    let read = to.shared.consensus.consensus(&uri).unwrap();
    assert_eq!(
        read.map(|c| c.hash),
        Some(registered),
        "{round}: consensus on {}",
        to.name
    );

    let id = from
        .events
        .append("tick", &json!({"round": round}))
        .unwrap();
    to.wait_for(&format!("{round}: event {id} delivered"), |to| {
        to.seen.0.lock().unwrap().contains(&id)
    });

    let thing = format!("urn:thing:{round}");
    let td = json!({"title": round});
    let outcome = from
        .directory
        .write(&Write::new(
            &Entry::new(thing.as_str(), td.clone()),
            &[],
            Expect::Absent,
            EventKind::Created,
            Some(&td),
            16,
        ))
        .unwrap();
    let Outcome::Done(revision) = outcome else {
        panic!(
            "{round}: {} did not register {thing}: {outcome:?}",
            from.name
        );
    };
    to.wait_for(&format!("{round}: {thing} applied"), |to| {
        to.directory
            .entry(&thing)
            .unwrap()
            .is_some_and(|entry| entry.revision == revision)
    });

    let action = format!("action-{round}");
    from.actions.write(&running(&action)).unwrap();
    to.wait_for(&format!("{round}: action record read"), |to| {
        to.actions.read(&action).unwrap().is_some()
    });

    for replica in [from, to] {
        for nonce in &written.nonces {
            assert!(
                !replica
                    .shared
                    .nonces
                    .record_nonce(did, nonce, NOW + 2, NOW + 302)
                    .unwrap(),
                "{round}: {} forgot {nonce}",
                replica.name
            );
        }
        for hash in &written.protocols {
            assert!(
                replica.shared.protocols.protocol(hash).unwrap().is_some(),
                "{round}: {} lost protocol {hash}",
                replica.name
            );
        }
    }
}

fn running(id: &str) -> ActionRecord {
    ActionRecord {
        id: id.to_owned(),
        name: "render".to_owned(),
        status: ActionStatus::Running,
        progress: Some(0.5),
        output: None,
        error: None,
        cancel_reason: None,
        lease: Duration::from_secs(30),
        revision: 1,
        requested_at: Some(std::time::UNIX_EPOCH + Duration::from_millis(1_764_000_000_000)),
        ended_at: None,
    }
}

/// A JetStream context of the test's own, on every server of the cluster.
fn observer(runtime: &tokio::runtime::Runtime, cluster: &NatsCluster) -> jetstream::Context {
    runtime.block_on(async {
        let client = async_nats::ConnectOptions::new()
            .name("observer")
            .connect(cluster.urls())
            .await
            .unwrap();
        let mut context = jetstream::new(client);
        context.set_timeout(Duration::from_secs(1));
        context
    })
}

/// Stream `name`'s replication as the cluster reports it: its configured replicas, its
/// leader and its other peers (name, current), or why it could not be read.
async fn replication(
    observer: &jetstream::Context,
    name: &str,
) -> Result<(usize, String, Vec<(String, bool)>), String> {
    let mut stream = observer.get_stream(name).await.map_err(|e| e.to_string())?;
    let info = stream.info().await.map_err(|e| e.to_string())?;
    let cluster = info.cluster.clone().ok_or("no cluster information")?;
    let leader = cluster.leader.ok_or("no leader")?;
    let peers = cluster
        .replicas
        .into_iter()
        .map(|peer| (peer.name, peer.current))
        .collect();
    Ok((info.config.num_replicas, leader, peers))
}

/// Every bucket and stream has three replicas: a leader and two peers, on three servers.
fn assert_three_replicas(runtime: &tokio::runtime::Runtime, observer: &jetstream::Context) {
    for stream in streams() {
        let (replicas, leader, peers) = runtime
            .block_on(replication(observer, &stream))
            .unwrap_or_else(|error| panic!("{stream}: {error}"));
        assert_eq!(replicas, 3, "{stream}: configured replicas");
        let mut servers: Vec<&str> = peers.iter().map(|(name, _)| name.as_str()).collect();
        servers.push(&leader);
        servers.sort_unstable();
        assert_eq!(servers, ["n1", "n2", "n3"], "{stream}: its peers");
    }
}

/// Waits until both replicas' clients are connected (at most [`SETTLE`]), and the
/// meta group and every bucket and stream have a leader on a running server
/// ([`NatsCluster::await_leaders`]): what a server's death takes before the cluster serves
/// again. Returns how long it took.
fn settle(cluster: &NatsCluster, replicas: [&Replica; 2]) -> Duration {
    let started = Instant::now();
    while !replicas.iter().all(|replica| replica.nats.is_connected()) {
        assert!(
            started.elapsed() < SETTLE,
            "the clients did not reconnect within {SETTLE:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    cluster.await_leaders();
    started.elapsed()
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn r3_state_survives_one_server_killed_and_a_restarted_server_catches_up() {
    let mut cluster = NatsCluster::start();
    let runtime = runtime();
    let observer = observer(&runtime, &cluster);
    // A is given every server; B every server but the one A is on: they start on two
    // different servers, so their traffic crosses the cluster's routes.
    let a = Replica::open(&runtime, "replica-a", cluster.urls());
    let on_a = *cluster
        .connections("replica-a")
        .first()
        .expect("A is connected");
    let others: Vec<usize> = (0..NatsCluster::SIZE).filter(|i| *i != on_a).collect();
    let b = Replica::open(
        &runtime,
        "replica-b",
        others.iter().map(|i| cluster.url(*i)).collect(),
    );
    let on_b = *cluster
        .connections("replica-b")
        .first()
        .expect("B is connected");
    assert_ne!(on_a, on_b, "B is on another server than A");
    assert_three_replicas(&runtime, &observer);
    let mut written = Written::default();
    shared_across(&a, &b, "all-up-a-to-b", &mut written);
    shared_across(&b, &a, "all-up-b-to-a", &mut written);

    // A's server crashes: A reconnects to another, the leaders it held move.
    cluster.stop(on_a);
    let took = settle(&cluster, [&a, &b]);
    eprintln!("server {on_a} (A's) killed: settled in {took:?}");
    shared_across(&a, &b, "one-down-a-to-b", &mut written);
    shared_across(&b, &a, "one-down-b-to-a", &mut written);

    // It comes back and catches up (its streams' leaders report it current), then B's
    // server crashes: the restarted server is one of the two left, so nothing below
    // passes unless it holds what was written while it was down.
    cluster.resume(on_a);
    let took = caught_up(&runtime, &observer, on_a);
    eprintln!("server {on_a} restarted: current in every stream after {took:?}");
    cluster.stop(on_b);
    let took = settle(&cluster, [&a, &b]);
    eprintln!("server {on_b} (B's) killed after {on_a} returned: settled in {took:?}");
    shared_across(&a, &b, "other-down-a-to-b", &mut written);
    shared_across(&b, &a, "other-down-b-to-a", &mut written);
}

/// Waits (at most [`SETTLE`]) until every bucket's and stream's leader reports server
/// `restarted` current (or it leads): it caught up with what was written while it was
/// down. Returns how long it took.
fn caught_up(
    runtime: &tokio::runtime::Runtime,
    observer: &jetstream::Context,
    restarted: usize,
) -> Duration {
    let started = Instant::now();
    let name = NatsCluster::name(restarted);
    loop {
        let lagging: Vec<String> = streams()
            .into_iter()
            .filter(|stream| {
                !runtime
                    .block_on(replication(observer, stream))
                    .is_ok_and(|(_, leader, peers)| {
                        leader == name || peers.contains(&(name.clone(), true))
                    })
            })
            .collect();
        if lagging.is_empty() {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < SETTLE,
            "{name} not current within {SETTLE:?} of its restart in {lagging:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `attempt` fails within the operation timeout (and a little slack for the thread
/// switches), and `typed` accepts its error.
fn fails_in_time<T: std::fmt::Debug, E: std::fmt::Debug>(
    what: &str,
    attempt: impl FnOnce() -> Result<T, E>,
    typed: impl FnOnce(&E) -> bool,
) {
    let started = Instant::now();
    let result = attempt();
    let took = started.elapsed();
    match result {
        Ok(value) => panic!("{what}: succeeded with two of three servers down: {value:?}"),
        Err(error) => assert!(typed(&error), "{what}: not the typed error: {error:?}"),
    }
    assert!(
        took <= TIMEOUT + Duration::from_millis(500),
        "{what}: answered after {took:?}, beyond the operation timeout {TIMEOUT:?}"
    );
}

/// A store error carrying NATS's timeout or refusal.
fn nats_unavailable(error: &StoreError) -> bool {
    match error {
        StoreError::Backend { cause, .. } => {
            cause.downcast_ref::<NatsError>().is_some_and(|cause| {
                matches!(cause, NatsError::Timeout { .. } | NatsError::Request { .. })
            })
        }
        _ => false,
    }
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn r3_with_two_of_three_servers_down_answers_typed_errors_in_time_and_recovers() {
    let mut cluster = NatsCluster::start();
    let runtime = runtime();
    let a = Replica::open(&runtime, "replica-a", cluster.urls());
    let b = Replica::open(&runtime, "replica-b", cluster.urls());
    let mut written = Written::default();
    shared_across(&a, &b, "all-up", &mut written);

    // Two of three down: the server left has no majority for any bucket or stream.
    let left = *cluster
        .connections("replica-a")
        .first()
        .expect("A is connected");
    let down: Vec<usize> = (0..NatsCluster::SIZE).filter(|i| *i != left).collect();
    for &server in &down {
        cluster.stop(server);
    }
    // Both clients reach the server left (A is on it already): the operations below are
    // answered by a live server that cannot store anything.
    let deadline = Instant::now() + SETTLE;
    while !(a.nats.is_connected() && b.nats.is_connected()) {
        assert!(
            Instant::now() < deadline,
            "B never reconnected to server {left}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let did = "did:wba:cluster.example:caller";
    fails_in_time(
        "a nonce recorded",
        || {
            a.shared
                .nonces
                .record_nonce(did, "no-majority", NOW, NOW + 300)
        },
        nats_unavailable,
    );
    fails_in_time(
        "a protocol saved",
        || {
            b.shared.protocols.save_protocol(&NewProtocol::negotiated(
                "# no majority\n",
                "https://peer.example/",
            ))
        },
        nats_unavailable,
    );
    // A read by hash is answered in time too: by the server left from its copy (JetStream
    // serves a bucket's direct gets from any of its replicas) or a typed error.
    let started = Instant::now();
    match a.shared.protocols.protocol(&written.protocols[0]) {
        Ok(found) => assert!(found.is_some(), "a protocol read: the copy lost it"),
        Err(error) => assert!(nats_unavailable(&error), "a protocol read: {error}"),
    }
    assert!(started.elapsed() <= TIMEOUT + Duration::from_millis(500));
    fails_in_time(
        "an event appended",
        || b.events.append("tick", &json!({"round": "no-majority"})),
        |error| {
            matches!(
                error,
                EventLogError::Unavailable { .. } | EventLogError::Uncertain { .. }
            )
        },
    );
    fails_in_time(
        "a directory write",
        || {
            let td = json!({"title": "no majority"});
            a.directory.write(&Write::new(
                &Entry::new("urn:thing:no-majority", td.clone()),
                &[],
                Expect::Absent,
                EventKind::Created,
                Some(&td),
                16,
            ))
        },
        |error| {
            matches!(
                error,
                StoreFailure::Backend { .. } | StoreFailure::Unavailable { .. }
            )
        },
    );

    // One returns: a majority again, and everything works with no new connection.
    cluster.resume(down[0]);
    let took = settle(&cluster, [&a, &b]);
    eprintln!("server {} back with {left}: settled in {took:?}", down[0]);
    shared_across(&a, &b, "majority-back-a-to-b", &mut written);
    shared_across(&b, &a, "majority-back-b-to-a", &mut written);
}
