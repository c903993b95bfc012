//! `NatsSettings::replicas` against one real nats-server started here
//! (`CONCORD_NATS_SERVER` names the binary; `.ci/run` runs these with `--ignored`): every
//! bucket and stream is created with R1 by default; asking R3 of a server that is not in a
//! cluster is refused with [`NatsError::Replicas`] naming the bucket or stream (a cluster
//! of three is not started here); one that exists with fewer replicas is used as it is. A
//! user NATS does not let create them is told so ([`NatsError::Permission`]), as
//! configuration.

use std::time::Duration;

use concord_nats::testing::NatsServer;
use concord_nats::{
    Buckets, EventStream, Nats, NatsActionRecords, NatsDirectoryStore, NatsError, NatsEventLog,
    NatsSettings, SharedState, DEFAULT_ACTION_MAX_AGE,
};

fn settings(server: &NatsServer, replicas: usize) -> NatsSettings {
    let mut settings = NatsSettings::new([server.url()]);
    settings.operation_timeout = Duration::from_secs(2);
    settings.replicas = replicas;
    settings
}

/// The replication factor of stream `name` as the server reports it.
async fn replicas_of(server: &NatsServer, name: &str) -> usize {
    let client = async_nats::connect(server.url()).await.unwrap();
    let jetstream = async_nats::jetstream::new(client);
    let mut stream = jetstream.get_stream(name).await.unwrap();
    stream.info().await.unwrap().config.num_replicas
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
async fn buckets_and_streams_have_the_configured_replicas_or_a_clear_error() {
    let server = NatsServer::start();

    // R3 on one server: every kind is refused, naming it and the replicas asked.
    let nats = Nats::connect(&settings(&server, 3)).await.unwrap();
    assert_eq!(nats.replicas(), 3);
    let refused = |error: NatsError, wanted: &str| match error {
        NatsError::Replicas {
            ref name, replicas, ..
        } => {
            assert_eq!((name.as_str(), replicas), (wanted, 3));
            assert!(error.to_string().contains("3 replicas"), "{error}");
        }
        other => panic!("{wanted}: R3 on one server must be refused as such: {other:?}"),
    };
    for (opened, name) in open_each(&nats).await {
        refused(opened.unwrap_err(), &name);
    }

    // R1 (the default): everything is created, with one replica.
    let one = Nats::connect(&settings(&server, 1)).await.unwrap();
    let _actions = NatsActionRecords::open(&one, "actions", DEFAULT_ACTION_MAX_AGE)
        .await
        .unwrap();
    let buckets = Buckets::default();
    let _shared = SharedState::open(&one, &buckets, Duration::from_secs(360))
        .await
        .unwrap();
    let _events = NatsEventLog::open(&one, &EventStream::new("events"))
        .await
        .unwrap();
    let _directory = NatsDirectoryStore::open(&one, "directory").await.unwrap();
    for stream in [
        "KV_actions".to_owned(),
        format!("KV_{}", buckets.protocols),
        format!("KV_{}", buckets.nonces),
        format!("KV_{}", buckets.consensus),
        "events".to_owned(),
        "directory".to_owned(),
    ] {
        assert_eq!(replicas_of(&server, &stream).await, 1, "{stream}");
    }

    // Existing with fewer replicas than asked: used as it is (and reported in the log).
    NatsActionRecords::open(&nats, "actions", DEFAULT_ACTION_MAX_AGE)
        .await
        .unwrap();
    SharedState::open(&nats, &buckets, Duration::from_secs(360))
        .await
        .unwrap();
    NatsEventLog::open(&nats, &EventStream::new("events"))
        .await
        .unwrap();
    NatsDirectoryStore::open(&nats, "directory").await.unwrap();
    assert_eq!(replicas_of(&server, "KV_actions").await, 1);
}

/// A server on which a client that does not log in is the user `concord`, who may not use
/// JetStream's API (every other subject is allowed).
fn server_denying_jetstream() -> NatsServer {
    NatsServer::start_with_config(
        "authorization {\n  users = [\n    { user: concord, password: secret, permissions: \
         { publish: { deny: [\"$JS.API.>\"] } } }\n  ]\n}\nno_auth_user: concord\n",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
async fn a_user_without_the_permissions_is_told_as_configuration_not_as_an_outage() {
    let server = server_denying_jetstream();
    let mut settings = NatsSettings::new([server.url()]);
    settings.operation_timeout = Duration::from_secs(1);
    let nats = Nats::connect(&settings).await.unwrap();
    let denied = |error: NatsError, wanted: &str| {
        assert!(error.is_configuration(), "{wanted}: {error:?}");
        match &error {
            NatsError::Permission { name, violation } => {
                assert_eq!(name, wanted);
                assert!(violation.contains("$JS.API"), "{violation}");
            }
            other => panic!("{wanted}: a missing permission must be told as such: {other:?}"),
        }
    };
    for (opened, name) in open_each(&nats).await {
        denied(opened.unwrap_err(), &name);
    }
}

/// Opens each kind of bucket and stream this crate makes on `nats` (the action records,
/// the shared state's buckets, an event stream, a directory log): how each went, with the
/// bucket or stream a failure names.
async fn open_each(nats: &Nats) -> Vec<(Result<(), NatsError>, String)> {
    vec![
        (
            NatsActionRecords::open(nats, "actions", DEFAULT_ACTION_MAX_AGE)
                .await
                .map(drop),
            "actions".to_owned(),
        ),
        (
            SharedState::open(nats, &Buckets::default(), Duration::from_secs(360))
                .await
                .map(drop),
            Buckets::default().protocols,
        ),
        (
            NatsEventLog::open(nats, &EventStream::new("events"))
                .await
                .map(drop),
            "events".to_owned(),
        ),
        (
            NatsDirectoryStore::open(nats, "directory").await.map(drop),
            "directory".to_owned(),
        ),
    ]
}
