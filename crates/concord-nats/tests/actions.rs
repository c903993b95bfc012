//! Progress actions on any replica, against a real nats-server started here
//! (`CONCORD_NATS_SERVER` names the binary; `.ci/run` runs these with `--ignored`): the
//! action records' conformance suite, a record written on one replica read on another, a
//! cancel relayed to the replica running the action, and the typed answers when that
//! replica is gone or NATS is away.

mod common;

use common::runtime;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use concord_interact::{
    conformance, ActionRecord, ActionRecords, ActionRelay, ActionStatus, ActionTableError,
    CancelReason, LocalActions, RelayError,
};
use concord_nats::testing::{NatsServer, Partition};
use concord_nats::{NatsActionRecords, DEFAULT_ACTION_MAX_AGE};

/// One replica's records on its own connection (its own runtime: dropping it is the
/// replica's process ending).
fn replica(runtime: &tokio::runtime::Runtime, server: &NatsServer) -> NatsActionRecords {
    records_at(runtime, server.url())
}

/// [`replica`], reaching NATS at `url`.
fn records_at(runtime: &tokio::runtime::Runtime, url: String) -> NatsActionRecords {
    let nats = common::connect(runtime, url, Duration::from_secs(1));
    runtime
        .block_on(NatsActionRecords::open(
            &nats,
            "actions",
            DEFAULT_ACTION_MAX_AGE,
        ))
        .unwrap()
}

fn running(id: &str, revision: u64, progress: f64) -> ActionRecord {
    ActionRecord {
        id: id.to_owned(),
        name: "render".to_owned(),
        status: ActionStatus::Running,
        progress: Some(progress),
        output: Some(serde_json::json!({"frames": revision})),
        error: None,
        cancel_reason: None,
        lease: Duration::from_secs(30),
        revision,
        requested_at: Some(std::time::UNIX_EPOCH + Duration::from_millis(1_764_000_000_123)),
        ended_at: None,
    }
}

/// `records.read(id)` once it answers a record at `revision` or later (within 10 s).
fn read_once(records: &NatsActionRecords, id: &str, revision: u64) -> ActionRecord {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(record)) = records.read(id) {
            if record.revision >= revision {
                return record;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{id} revision {revision} never read"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A replica's table as the relay sees it: cancels what it runs, refuses the rest.
struct Table {
    runs: Mutex<Vec<ActionRecord>>,
    cancelled: Mutex<Vec<String>>,
    renewed: Mutex<Vec<String>>,
    /// The actions another replica answered while this one ran them, with that answer.
    ended: Mutex<Vec<ActionRecord>>,
    records: NatsActionRecords,
}

impl LocalActions for Table {
    fn cancel(&self, id: &str) -> Result<ActionRecord, ActionTableError> {
        let mut runs = self.runs.lock().unwrap();
        let Some(action) = runs.iter_mut().find(|action| action.id == id) else {
            return Err(ActionTableError::Unknown { id: id.to_owned() });
        };
        action.status = ActionStatus::Cancelled;
        action.cancel_reason = Some(CancelReason::Requested);
        action.revision += 1;
        self.records.write(action).unwrap();
        self.cancelled.lock().unwrap().push(id.to_owned());
        Ok(action.clone())
    }

    fn ended_elsewhere(&self, record: &ActionRecord) -> Result<(), ActionTableError> {
        let mut runs = self.runs.lock().unwrap();
        let Some(at) = runs.iter().position(|action| action.id == record.id) else {
            return Err(ActionTableError::Unknown {
                id: record.id.clone(),
            });
        };
        runs.remove(at);
        self.ended.lock().unwrap().push(record.clone());
        Ok(())
    }

    fn renew(&self, id: &str) -> Result<(), ActionTableError> {
        if !self
            .runs
            .lock()
            .unwrap()
            .iter()
            .any(|action| action.id == id)
        {
            return Err(ActionTableError::Unknown { id: id.to_owned() });
        }
        self.renewed.lock().unwrap().push(id.to_owned());
        Ok(())
    }
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn the_action_records_pass_their_conformance_suite() {
    let server = NatsServer::start();
    let runtime = runtime();
    let records = replica(&runtime, &server);
    conformance::action_records(&records);
    // Everything written reached NATS: another replica reads the highest revisions.
    let other = replica(&runtime, &server);
    assert_eq!(read_once(&other, "conformance-race", 32).revision, 32);
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn an_action_run_on_one_replica_is_read_and_cancelled_on_another() {
    let mut server = NatsServer::start();
    let (runtime_a, runtime_b) = (runtime(), runtime());
    let (a, b) = (replica(&runtime_a, &server), replica(&runtime_b, &server));
    let table = Arc::new(Table {
        runs: Mutex::new(Vec::new()),
        cancelled: Mutex::new(Vec::new()),
        renewed: Mutex::new(Vec::new()),
        ended: Mutex::new(Vec::new()),
        records: a.clone(),
    });
    a.serve(Arc::clone(&table) as Arc<dyn LocalActions>)
        .unwrap();

    // A runs two actions; B reads each as A last wrote it.
    for id in ["render-1", "render-2"] {
        let record = running(id, 2, 0.5);
        a.write(&record).unwrap();
        table.runs.lock().unwrap().push(record);
    }
    assert_eq!(read_once(&b, "render-1", 2), running("render-1", 2, 0.5));
    assert_eq!(b.read("never-issued").unwrap(), None);

    // Its caller came back on B: A hears of it (the lease starts again there); an id B
    // does not hold is not relayed.
    runtime_b.block_on(async {
        b.renew("render-1");
        b.renew("never-issued");
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    while table.renewed.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "A never heard of the renewal");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(*table.renewed.lock().unwrap(), ["render-1"]);

    // A cancel on B reaches A, which stops the action; B answers what A answered.
    let cancelled = runtime_b.block_on(b.cancel("render-1")).unwrap();
    assert_eq!(cancelled.status, ActionStatus::Cancelled);
    assert_eq!(cancelled.revision, 3);
    assert_eq!(*table.cancelled.lock().unwrap(), ["render-1"]);
    assert_eq!(
        b.read("render-1").unwrap().unwrap().status,
        ActionStatus::Cancelled
    );
    // Cancelled already: refused as finished (409), without asking A again.
    match runtime_b.block_on(b.cancel("render-1")) {
        Err(RelayError::Refused(problem)) => assert_eq!(problem.status, Some(409)),
        other => panic!("a finished action's cancel must be refused: {other:?}"),
    }
    assert_eq!(table.cancelled.lock().unwrap().len(), 1);

    // A stops (its process ends): a cancel of its other action is a typed 503, in time.
    drop(a);
    drop(runtime_a);
    let started = Instant::now();
    match runtime_b.block_on(b.cancel("render-2")) {
        Err(gone @ RelayError::RunnerGone { .. }) => {
            assert!(gone.is_transient());
            assert_eq!(gone.to_problem().status, Some(503));
        }
        other => panic!("a cancel for a replica that stopped must say so: {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );

    // NATS away: a relayed cancel and a read the copy cannot answer are 503 at once; what
    // the copy holds is still answered.
    server.stop();
    let deadline = Instant::now() + Duration::from_secs(10);
    while runtime_b.block_on(async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        b.read("unknown-id").is_ok()
    }) {
        assert!(Instant::now() < deadline, "B never noticed NATS went away");
    }
    let started = Instant::now();
    match runtime_b.block_on(b.cancel("render-2")) {
        Err(unavailable @ RelayError::Unavailable { .. }) => {
            assert_eq!(unavailable.to_problem().status, Some(503));
        }
        other => panic!("with NATS away a relayed cancel is unavailable: {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(b.read("render-2").unwrap().unwrap().revision, 2);

    // A change written while NATS is away is kept, and sent once it is back.
    let late = running("render-3", 1, 0.1);
    assert!(b.write(&late).is_err(), "the write says NATS is away");
    assert_eq!(b.read("render-3").unwrap().as_ref(), Some(&late));
    server.resume();
    let runtime_c = runtime();
    let c = replica(&runtime_c, &server);
    assert_eq!(read_once(&c, "render-3", 1), late);
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn an_action_whose_replica_stopped_is_answered_failed_once_on_every_replica() {
    let server = NatsServer::start();
    let (runtime_a, runtime_b, runtime_c) = (runtime(), runtime(), runtime());
    let a = replica(&runtime_a, &server);
    let (b, c) = (replica(&runtime_b, &server), replica(&runtime_c, &server));
    let lease = Duration::from_secs(1);
    let record = ActionRecord {
        lease,
        ..running("orphan-1", 2, 0.5)
    };
    a.write(&record).unwrap();
    assert_eq!(read_once(&b, "orphan-1", 2), record);

    // A runs it past its lease and lives: its signs of life keep it running everywhere.
    std::thread::sleep(lease + concord_nats::ACTION_BEAT * 4);
    assert_eq!(b.read("orphan-1").unwrap().unwrap(), record);
    assert_eq!(c.read("orphan-1").unwrap().unwrap(), record);

    // A's process ends (its connection drops): past the lease and two beats, B and C
    // both answer the action failed, the same record, at the next revision.
    drop(a);
    drop(runtime_a);
    let deadline = Instant::now() + lease + Duration::from_secs(10);
    let failed = loop {
        let read = b.read("orphan-1").unwrap().unwrap();
        if read.status != ActionStatus::Running {
            break read;
        }
        assert!(Instant::now() < deadline, "B still answers {read:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(failed.status, ActionStatus::Failed);
    assert_eq!(failed.revision, 3);
    let problem = failed.error.clone().unwrap();
    assert_eq!(problem.status, Some(503));
    assert!(
        problem
            .detail
            .as_deref()
            .unwrap()
            .contains("its replica stopped"),
        "{problem:?}"
    );
    // B and C decided the same failure, but for when it ended: the record that won the
    // compare-and-swap, which NATS holds, replaces the other's within a round trip.
    let runtime_d = runtime();
    let d = replica(&runtime_d, &server);
    let failed = read_once(&d, "orphan-1", 3);
    let deadline = Instant::now() + Duration::from_secs(10);
    let holds = |replica: &NatsActionRecords| replica.read("orphan-1").unwrap().unwrap() == failed;
    while !(holds(&b) && holds(&c)) {
        assert!(
            Instant::now() < deadline,
            "B and C never took the failure NATS holds"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // A cancel is refused as finished (409), not 503 forever.
    match runtime_b.block_on(b.cancel("orphan-1")) {
        Err(RelayError::Refused(problem)) => assert_eq!(problem.status, Some(409)),
        other => panic!("an orphaned action's cancel must be refused as finished: {other:?}"),
    }

    // NATS holds the failed record (written once): a replica started now reads it as is.
    let runtime_e = runtime();
    let e = replica(&runtime_e, &server);
    assert_eq!(read_once(&e, "orphan-1", 3), failed);
    assert_eq!(b.read("orphan-1").unwrap().unwrap(), failed);
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn an_outage_of_nats_longer_than_a_lease_fails_no_action_whose_replica_lives() {
    let mut server = NatsServer::start();
    let (runtime_a, runtime_b) = (runtime(), runtime());
    let (a, b) = (replica(&runtime_a, &server), replica(&runtime_b, &server));
    let lease = Duration::from_secs(1);
    let record = ActionRecord {
        lease,
        ..running("outage-1", 2, 0.5)
    };
    a.write(&record).unwrap();
    assert_eq!(read_once(&b, "outage-1", 2), record);

    // NATS away for longer than the lease and two beats: no sign of life reaches B, and
    // none is expected; once both are back, A's action stays running on B.
    server.stop();
    std::thread::sleep(lease + concord_nats::ACTION_BEAT * 4);
    assert_eq!(b.read("outage-1").unwrap().unwrap(), record);
    server.resume();
    let until = Instant::now() + lease + concord_nats::ACTION_BEAT * 6;
    while Instant::now() < until {
        if let Ok(Some(read)) = b.read("outage-1") {
            assert_eq!(read, record, "A lives: its action is not failed");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(b.read("outage-1").unwrap().unwrap(), record);
    drop(runtime_a);
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn a_record_larger_than_nats_takes_is_shared_without_its_output() {
    let server = NatsServer::start_with_max_payload(Some(4096));
    let runtime = runtime();
    let (a, b) = (replica(&runtime, &server), replica(&runtime, &server));
    let mut large = running("large", 1, 0.5);
    large.output = Some(serde_json::json!({"text": "x".repeat(8 * 1024)}));
    a.write(&large).unwrap();
    // B reads the action's state, its output left out with a problem saying why.
    let read = read_once(&b, "large", 1);
    assert_eq!(
        (read.status, read.progress),
        (ActionStatus::Running, Some(0.5))
    );
    assert_eq!(read.output, None);
    let problem = read
        .error
        .expect("a problem saying the output is not shared");
    assert!(
        problem
            .detail
            .as_deref()
            .is_some_and(|detail| detail.contains("larger than NATS takes")),
        "{problem:?}"
    );
    // A's writes go on: the next change (small again) reaches B whole.
    let mut done = running("large", 2, 1.0);
    done.status = ActionStatus::Completed;
    a.write(&done).unwrap();
    assert_eq!(read_once(&b, "large", 2), done);
}

#[test]
#[ignore = "needs a nats-server: set CONCORD_NATS_SERVER"]
fn a_runner_cut_off_past_the_lease_keeps_the_failure_another_replica_answered() {
    let server = NatsServer::start();
    let partition = Partition::to(&server);
    let (runtime_a, runtime_b) = (runtime(), runtime());
    // A reaches NATS through the partition; B directly.
    let a = records_at(&runtime_a, partition.url());
    let b = replica(&runtime_b, &server);
    let lease = Duration::from_secs(1);
    let started = ActionRecord {
        lease,
        ..running("cut-1", 2, 0.25)
    };
    let table = Arc::new(Table {
        runs: Mutex::new(vec![started.clone()]),
        cancelled: Mutex::new(Vec::new()),
        renewed: Mutex::new(Vec::new()),
        ended: Mutex::new(Vec::new()),
        records: a.clone(),
    });
    a.serve(Arc::clone(&table) as Arc<dyn LocalActions>)
        .unwrap();
    a.write(&started).unwrap();
    assert_eq!(read_once(&b, "cut-1", 2), started);

    // A is cut off past the lease, and goes on with the action meanwhile.
    partition.cut();
    let deadline = Instant::now() + Duration::from_secs(20);
    let failed = loop {
        match b.read("cut-1") {
            Ok(Some(read)) if read.status == ActionStatus::Failed => break read,
            _ => {
                assert!(
                    Instant::now() < deadline,
                    "B never answered A's action failed"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    for (revision, progress) in [(3, 0.5), (4, 0.75)] {
        let _ = a.write(&ActionRecord {
            lease,
            ..running("cut-1", revision, progress)
        });
    }

    // Back: A's later revisions do not replace the failure B answered; A takes it, and
    // its table lets go of the action with that answer (not a cancel of its own).
    partition.mend();
    let deadline = Instant::now() + Duration::from_secs(20);
    while table.ended.lock().unwrap().is_empty() {
        assert!(
            Instant::now() < deadline,
            "A was never told its action failed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(*table.ended.lock().unwrap(), std::slice::from_ref(&failed));
    assert!(table.cancelled.lock().unwrap().is_empty());
    assert_eq!(a.read("cut-1").unwrap().unwrap(), failed);
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        assert_eq!(
            b.read("cut-1").unwrap().unwrap(),
            failed,
            "the failure must stand"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let c = replica(&runtime_b, &server);
    assert_eq!(read_once(&c, "cut-1", failed.revision), failed);
}
