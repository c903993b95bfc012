//! Conformance suites for the traits of this crate: any backend must pass them (they
//! panic, naming the broken rule, when it does not). Feature `conformance`.
//!
//! ```
//! use concord_interact::{conformance, LocalEventLog};
//!
//! conformance::event_log(&LocalEventLog::new(1));
//! ```
//!
//! ```
//! use concord_interact::{conformance, LocalActionRecords};
//!
//! conformance::action_records(&LocalActionRecords::new());
//! ```
//!
//! ```
//! use concord_interact::{conformance, SequentialIds};
//!
//! conformance::action_ids(&mut SequentialIds::default(), 128);
//! ```
// Panicking, naming the broken rule, is how a conformance suite fails.
#![allow(clippy::panic)]

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::action_records::{ActionRecord, ActionRecords};
use crate::actions::ActionIds;
use crate::event_log::{EventLog, EventSink};
use crate::message::ActionStatus;

/// Checks the [`EventLog`] contract on an empty log: ids of one name strictly increase,
/// names are numbered apart, appends racing from several threads never share an id and
/// each thread sees its ids increase, and an attempt appended again
/// ([`EventLog::append_again`]) keeps its first id.
///
/// # Panics
/// When the backend breaks a rule, with a message naming it.
pub fn event_log(log: &dyn EventLog) {
    let append = |event: &str| {
        log.append(event, &json!({"n": 1}))
            .unwrap_or_else(|error| panic!("appending `{event}`: the backend failed: {error}"))
    };
    let first = append("conformance.a");
    let second = append("conformance.a");
    assert!(
        second > first,
        "ids of one name must increase: {first} then {second}"
    );
    let other = append("conformance.b");
    let third = append("conformance.a");
    assert!(
        third > second,
        "another name's event must not break the sequence: {second} then {third}"
    );
    let _ = other;

    const THREADS: usize = 4;
    const APPENDS: usize = 64;
    let seen: Vec<Vec<u64>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                scope.spawn(|| {
                    (0..APPENDS)
                        .map(|_| append("conformance.race"))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|_| panic!("a racing thread panicked"))
            })
            .collect()
    });
    for ids in &seen {
        assert!(
            ids.windows(2).all(|pair| pair[0] < pair[1]),
            "each thread's ids must increase: {ids:?}"
        );
    }
    let mut all: Vec<u64> = seen.concat();
    all.sort_unstable();
    all.dedup();
    assert_eq!(
        all.len(),
        THREADS * APPENDS,
        "racing appends must never share an id"
    );

    // An attempt appended again is the same event; another attempt is a new one.
    let again_on = |event: &str, attempt: &str| {
        log.append_again(event, &json!({"n": 2}), attempt)
            .unwrap_or_else(|error| {
                panic!("appending `{event}` as `{attempt}`: the backend failed: {error}")
            })
    };
    let again = |attempt: &str| again_on("conformance.again", attempt);
    let once = again("conformance-attempt-1");
    assert_eq!(
        again("conformance-attempt-1"),
        once,
        "an attempt appended again must keep its first id"
    );
    let next = again("conformance-attempt-2");
    assert!(
        next > once,
        "another attempt is a new event: {once} then {next}"
    );
    // Another name's event under the same attempt is an event of its own: after that
    // name's latest, not the first name's.
    let latest = append("conformance.elsewhere");
    let elsewhere = again_on("conformance.elsewhere", "conformance-attempt-1");
    assert!(
        elsewhere > latest,
        "an attempt is one per event name: another name's is another event ({elsewhere} after {latest})"
    );
    let plain = append("conformance.again");
    assert!(
        plain > next,
        "ids of one name must increase: {next} then {plain}"
    );
    assert_eq!(
        again("conformance-attempt-1"),
        once,
        "an attempt appended again after other events must keep its first id"
    );
}

/// A sink that keeps what it was given.
#[derive(Default)]
struct Collected {
    events: Mutex<Vec<(String, u64, Value)>>,
}

impl Collected {
    fn events(&self) -> Vec<(String, u64, Value)> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl EventSink for Collected {
    fn deliver(&self, event: &str, id: u64, data: Value) {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((event.to_owned(), id, data));
    }

    fn forget_before(&self, _first: u64) {}
}

/// A sink for `log`, which must deliver.
fn delivering(log: &dyn EventLog) -> Arc<Collected> {
    let sink = Arc::new(Collected::default());
    let weak: Weak<dyn EventSink> = Arc::downgrade(&(Arc::clone(&sink) as Arc<dyn EventSink>));
    assert!(
        log.deliver_to(weak),
        "a log checked for delivery must deliver (`deliver_to` answered false)"
    );
    sink
}

/// Waits (at most `within`) until `sink` holds every id of `wanted`.
fn wait_for(sink: &Collected, wanted: &[u64], within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let held: std::collections::HashSet<u64> =
            sink.events().iter().map(|(_, id, _)| *id).collect();
        let missing: Vec<u64> = wanted
            .iter()
            .copied()
            .filter(|id| !held.contains(id))
            .collect();
        if missing.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "every appended event must reach every sink: {} of {} missing after {within:?} (first {:?})",
            missing.len(),
            wanted.len(),
            &missing[..missing.len().min(8)]
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Checks the fan-out contract of a log that delivers ([`EventLog::deliver_to`]) on
/// `logs`, handles of ONE log as several nodes hold it (each its own connection, at least
/// one): appends racing through every handle each reach every sink once, with the name,
/// id and data appended, in increasing id order, the same order for every sink; a sink
/// given afterwards (a node starting later) gets the events held before it, in the same
/// order. Events the log held before the suite are allowed (they come first). Waits at
/// most `within` for deliveries.
///
/// # Panics
/// When the backend breaks a rule, with a message naming it.
pub fn event_log_delivery(logs: &[&dyn EventLog], within: Duration) {
    assert!(!logs.is_empty(), "give at least one handle of the log");
    let sinks: Vec<Arc<Collected>> = logs.iter().map(|log| delivering(*log)).collect();
    const APPENDS: usize = 24;
    let appended: Vec<Vec<(String, u64, Value)>> = std::thread::scope(|scope| {
        let workers: Vec<_> = logs
            .iter()
            .enumerate()
            .map(|(node, log)| {
                scope.spawn(move || {
                    (0..APPENDS)
                        .map(|n| {
                            let event = if n % 3 == 0 {
                                "conformance.other"
                            } else {
                                "conformance.shared"
                            };
                            let data = json!({"node": node, "n": n});
                            let id = log.append(event, &data).unwrap_or_else(|error| {
                                panic!("appending `{event}` through handle {node}: the backend failed: {error}")
                            });
                            (event.to_owned(), id, data)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|_| panic!("an appending thread panicked"))
            })
            .collect()
    });
    for ids in &appended {
        assert!(
            ids.windows(2).all(|pair| pair[0].1 < pair[1].1),
            "each handle's ids must increase: {:?}",
            ids.iter().map(|(_, id, _)| id).collect::<Vec<_>>()
        );
    }
    let mut all: Vec<(String, u64, Value)> = appended.concat();
    all.sort_by_key(|(_, id, _)| *id);
    let wanted: Vec<u64> = all.iter().map(|(_, id, _)| *id).collect();
    assert!(
        wanted.windows(2).all(|pair| pair[0] < pair[1]),
        "racing appends must never share an id"
    );
    let first = wanted.first().copied().unwrap_or(0);
    let mut orders = Vec::new();
    let late = delivering(logs[0]);
    for (node, sink) in sinks.iter().chain(std::iter::once(&late)).enumerate() {
        wait_for(sink, &wanted, within);
        let events = sink.events();
        assert!(
            events.windows(2).all(|pair| pair[0].1 < pair[1].1),
            "sink {node} must receive ids in increasing order, each once: {:?}",
            events.iter().map(|(_, id, _)| id).collect::<Vec<_>>()
        );
        let ours: Vec<(String, u64, Value)> = events
            .into_iter()
            .filter(|(_, id, _)| *id >= first)
            .collect();
        assert_eq!(
            ours, all,
            "sink {node} must receive exactly the events appended, with their names and data"
        );
        orders.push(ours);
    }
    assert!(
        orders.windows(2).all(|pair| pair[0] == pair[1]),
        "every sink must receive one order"
    );
}

/// A record of the action `id` at `revision`, `status`, `progress`.
fn record(id: &str, revision: u64, status: ActionStatus, progress: Option<f64>) -> ActionRecord {
    ActionRecord {
        id: id.to_owned(),
        name: "conformance".to_owned(),
        status,
        progress,
        output: progress.map(|p| json!({"done": p})),
        error: None,
        cancel_reason: None,
        lease: Duration::from_secs(30),
        revision,
        requested_at: Some(std::time::UNIX_EPOCH + Duration::from_millis(1_764_000_000_000)),
        ended_at: status
            .is_terminal()
            .then(|| std::time::UNIX_EPOCH + Duration::from_millis(1_764_000_060_000)),
    }
}

/// Checks the [`ActionRecords`] contract on empty records: no record for an id never
/// written, a write read back whole, ids kept apart, never a lower revision after a higher
/// one (late writes, racing threads), and a forgotten record gone or intact.
///
/// # Panics
/// When the backend breaks a rule, with a message naming it.
pub fn action_records(records: &dyn ActionRecords) {
    let write = |record: &ActionRecord| {
        records.write(record).unwrap_or_else(|error| {
            panic!(
                "writing action {:?} revision {}: the backend failed: {error}",
                record.id, record.revision
            )
        })
    };
    let read = |id: &str| {
        records
            .read(id)
            .unwrap_or_else(|error| panic!("reading action {id:?}: the backend failed: {error}"))
    };
    assert_eq!(
        read("conformance-never-written"),
        None,
        "an id never written must have no record"
    );

    let created = record("conformance-a", 1, ActionStatus::Pending, None);
    write(&created);
    assert_eq!(
        read("conformance-a").as_ref(),
        Some(&created),
        "a record written must be read back whole"
    );
    let other = record("conformance-b", 1, ActionStatus::Running, Some(0.5));
    write(&other);
    assert_eq!(
        read("conformance-a").as_ref(),
        Some(&created),
        "another id's write must not change a record"
    );
    assert_eq!(
        read("conformance-b").as_ref(),
        Some(&other),
        "each id must have its own record"
    );

    let finished = record("conformance-a", 3, ActionStatus::Completed, Some(1.0));
    write(&finished);
    // The progress written before the terminal state arrives late.
    write(&record(
        "conformance-a",
        2,
        ActionStatus::Running,
        Some(0.5),
    ));
    assert_eq!(
        read("conformance-a").as_ref(),
        Some(&finished),
        "records must never go back to a lower revision (a late write of an earlier change)"
    );

    records.forget("conformance-a").unwrap_or_else(|error| {
        panic!("forgetting action \"conformance-a\": the backend failed: {error}")
    });
    let after = read("conformance-a");
    assert!(
        after.is_none() || after.as_ref() == Some(&finished),
        "a forgotten record must be gone or intact, not {after:?}"
    );

    const THREADS: u64 = 4;
    const REVISIONS: u64 = 32;
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let write = &write;
            scope.spawn(move || {
                for revision in 1..=REVISIONS {
                    // Every thread writes every revision of the shared action, in its own order.
                    let revision = if thread % 2 == 0 {
                        revision
                    } else {
                        REVISIONS + 1 - revision
                    };
                    write(&record(
                        "conformance-race",
                        revision,
                        ActionStatus::Running,
                        Some(revision as f64 / REVISIONS as f64),
                    ));
                    write(&record(
                        &format!("conformance-race-{thread}"),
                        revision,
                        ActionStatus::Running,
                        None,
                    ));
                }
            });
        }
    });
    assert_eq!(
        read("conformance-race").map(|record| record.revision),
        Some(REVISIONS),
        "racing writes must leave the highest revision: records must never go back"
    );
    for thread in 0..THREADS {
        assert_eq!(
            read(&format!("conformance-race-{thread}")).map(|record| record.revision),
            Some(REVISIONS),
            "racing writes to distinct ids must each keep their highest revision"
        );
    }
}

/// Checks the [`ActionIds`] contract: 10,000 ids in a row are all different, none empty,
/// none longer than `max_bytes` (`Limits::max_action_id`: an id travels in `actionID`), and
/// each printable ASCII with no space (it is echoed in messages and logs).
///
/// # Panics
/// When the ids break a rule, with a message naming it.
pub fn action_ids(ids: &mut dyn ActionIds, max_bytes: usize) {
    let mut seen = std::collections::HashSet::new();
    for n in 0..10_000 {
        let id = ids.next_id();
        assert!(!id.is_empty(), "id {n} is empty");
        assert!(
            id.len() <= max_bytes,
            "id {n} ({id:?}) is {} bytes, over the {max_bytes} an actionID may carry",
            id.len()
        );
        assert!(
            id.bytes().all(|byte| byte.is_ascii_graphic()),
            "id {n} ({id:?}) is not printable ASCII without spaces"
        );
        assert!(seen.insert(id.clone()), "id {n} ({id:?}) was issued before");
    }
}
