//! Two `ActionTable`s (two replicas of one agent) sharing `ActionRecords`, on a simulated
//! clock: each change is recorded, a query for the other's action answers its state, a
//! cancel for it is refused, and a backend that fails is answered by type.

use std::sync::Arc;
use std::time::{Duration, Instant};

use concord_interact::{
    ActionEvent, ActionRecord, ActionRecords, ActionRecordsError, ActionStatus, ActionTable,
    ActionTableError, CancelReason, Limits, LocalActionRecords, Message, Operation, Problem,
    SequentialIds,
};
use serde_json::json;

/// `a-1`, `a-2`, … or `b-1`, …: ids that never collide between the two tables.
#[derive(Debug)]
struct Prefixed(&'static str, SequentialIds);

impl concord_interact::ActionIds for Prefixed {
    fn next_id(&mut self) -> String {
        format!("{}-{}", self.0, self.1.next_id())
    }
}

fn replicas(records: &Arc<LocalActionRecords>) -> (ActionTable, ActionTable) {
    let table = |prefix| {
        ActionTable::new(Limits::default())
            .with_ids(Box::new(Prefixed(prefix, SequentialIds::default())))
            .with_records(Arc::clone(records) as Arc<dyn ActionRecords>)
    };
    (table("a"), table("b"))
}

#[test]
fn a_replica_answers_a_query_for_an_action_another_runs_and_refuses_to_cancel_it() {
    let records = Arc::new(LocalActionRecords::new());
    let (mut a, mut b) = replicas(&records);
    let t0 = Instant::now();
    let id = a.start("render", t0).unwrap();
    assert_eq!(b.lookup(&id, t0).unwrap().status(), ActionStatus::Pending);

    a.progress(&id, 0.25, Some(json!({"frames": 1})), t0)
        .unwrap();
    let seen = b.lookup(&id, t0 + Duration::from_secs(1)).unwrap();
    assert_eq!(seen.status(), ActionStatus::Running);
    assert_eq!(seen.progress(), Some(0.25));
    assert_eq!(seen.output(), Some(&json!({"frames": 1})));
    assert_eq!(seen.revision(), 2);
    // `b` does not hold it: its own `query` says so, and it cannot change it.
    assert!(matches!(
        b.query(&id),
        Err(ActionTableError::Unknown { .. })
    ));
    let refused = b.cancel(&id, t0).unwrap_err();
    assert_eq!(
        refused,
        ActionTableError::HeldElsewhere {
            id: id.clone(),
            status: ActionStatus::Running
        }
    );
    assert_eq!(refused.to_problem().status, Some(409));
    assert!(b.progress(&id, 0.5, None, t0).is_err());
    assert_eq!(a.query(&id).unwrap().status(), ActionStatus::Running);

    // The same through the wire answers: `queryaction` served, `cancelaction` refused.
    let query = Message::request(Operation::QueryAction, "q-1").with_action_id(id.clone());
    let answer = b.respond(&query, t0).unwrap();
    assert_eq!(answer.status, Some(ActionStatus::Running));
    assert_eq!(answer.progress, Some(0.25));
    let cancel = Message::request(Operation::CancelAction, "c-1").with_action_id(id.clone());
    assert!(matches!(
        b.respond(&cancel, t0),
        Err(ActionTableError::HeldElsewhere { .. })
    ));

    a.complete(&id, Some(json!({"frames": 4})), t0).unwrap();
    let done = b.lookup(&id, t0).unwrap();
    assert_eq!(done.status(), ActionStatus::Completed);
    assert_eq!(done.output(), Some(&json!({"frames": 4})));
    assert_eq!(
        b.cancel(&id, t0).unwrap_err(),
        ActionTableError::Finished {
            id: id.clone(),
            status: ActionStatus::Completed
        }
    );
    assert!(b.lookup("a-never", t0).is_err());
    assert!(b.poll_event().is_none(), "b changed nothing");
}

#[test]
fn the_times_an_action_was_requested_and_ended_cross_by_the_runners_wall_clock() {
    let records = Arc::new(LocalActionRecords::new());
    let t0 = Instant::now();
    // A's wall clock read at t0; B's clock is another process's (its own anchor).
    let wall = std::time::UNIX_EPOCH + Duration::from_millis(1_764_000_000_000);
    let (a, b) = replicas(&records);
    let mut a = a.with_wall_clock(t0, wall);
    let b = b.with_wall_clock(t0, wall + Duration::from_secs(3600));
    let id = a
        .start("render", t0 + Duration::from_millis(2_500_700))
        .unwrap();
    let requested = wall + Duration::from_millis(2_500_700);
    assert_eq!(a.query(&id).unwrap().requested_at(), Some(requested));
    assert_eq!(a.query(&id).unwrap().ended_at(), None);
    // B answers A's times, whenever and by whatever clock it is asked.
    let later = t0 + Duration::from_secs(9_000);
    let seen = b.lookup(&id, later).unwrap();
    assert_eq!(
        (seen.requested_at(), seen.ended_at()),
        (Some(requested), None)
    );
    a.complete(&id, None, t0 + Duration::from_secs(3_000))
        .unwrap();
    let ended = wall + Duration::from_secs(3_000);
    let seen = b.lookup(&id, later).unwrap();
    assert_eq!(
        (seen.requested_at(), seen.ended_at()),
        (Some(requested), Some(ended))
    );
    // Whole milliseconds, as records keep them; before the anchor too.
    let id = a
        .start("render", t0 - Duration::from_nanos(1_500_000))
        .unwrap();
    assert_eq!(
        a.query(&id).unwrap().requested_at(),
        Some(wall - Duration::from_millis(2))
    );
    // A table given no clock says nothing.
    let mut unclocked = ActionTable::new(Limits::default());
    let id = unclocked.start("render", t0).unwrap();
    assert_eq!(unclocked.query(&id).unwrap().requested_at(), None);
}

#[test]
fn cancellation_and_lease_expiry_are_recorded_as_the_terminal_state() {
    let records = Arc::new(LocalActionRecords::new());
    let (mut a, b) = replicas(&records);
    let t0 = Instant::now();
    let asked = a.start("render", t0).unwrap();
    let leased = a
        .start_with_lease("render", Duration::from_secs(5), t0)
        .unwrap();
    a.cancel(&asked, t0).unwrap();
    a.detach(t0);
    a.handle_timeout(t0 + Duration::from_secs(5));
    let asked = b.lookup(&asked, t0).unwrap();
    assert_eq!(asked.status(), ActionStatus::Cancelled);
    assert_eq!(asked.cancel_reason(), Some(CancelReason::Requested));
    let leased = b.lookup(&leased, t0).unwrap();
    assert_eq!(leased.status(), ActionStatus::Cancelled);
    assert_eq!(leased.cancel_reason(), Some(CancelReason::LeaseExpired));
}

#[test]
fn finished_actions_the_table_forgets_leave_the_local_records() {
    let records = Arc::new(LocalActionRecords::new());
    let mut limits = Limits::default();
    limits.finished_actions = 2;
    let mut table = ActionTable::new(limits).with_records(Arc::clone(&records) as _);
    let t0 = Instant::now();
    let ids: Vec<String> = (0..4)
        .map(|_| {
            let id = table.start("render", t0).unwrap();
            table.complete(&id, None, t0).unwrap();
            id
        })
        .collect();
    assert_eq!(records.len(), 2);
    // A forgotten action is unknown, as without records.
    assert!(matches!(
        table.lookup(&ids[0], t0),
        Err(ActionTableError::Unknown { .. })
    ));
    assert_eq!(
        table.lookup(&ids[3], t0).unwrap().status(),
        ActionStatus::Completed
    );
}

/// Records whose backend is down.
#[derive(Debug)]
struct Down;

impl Down {
    fn error(operation: &'static str, id: &str) -> ActionRecordsError {
        ActionRecordsError::Unavailable {
            backend: "test",
            operation,
            id: id.to_owned(),
            reason: "down".to_owned(),
        }
    }
}

impl ActionRecords for Down {
    fn write(&self, record: &ActionRecord) -> Result<(), ActionRecordsError> {
        Err(Self::error("write", &record.id))
    }

    fn read(&self, id: &str) -> Result<Option<ActionRecord>, ActionRecordsError> {
        Err(Self::error("read", id))
    }

    fn forget(&self, id: &str) -> Result<(), ActionRecordsError> {
        Err(Self::error("forget", id))
    }
}

#[test]
fn records_that_fail_leave_the_table_s_changes_standing_and_answer_503_for_others() {
    let mut table = ActionTable::new(Limits::default()).with_records(Arc::new(Down));
    let t0 = Instant::now();
    let id = table.start("render", t0).unwrap();
    table.progress(&id, 0.5, None, t0).unwrap();
    assert_eq!(table.query(&id).unwrap().progress(), Some(0.5));
    assert_eq!(
        table.poll_event(),
        Some(ActionEvent::NotRecorded {
            id: id.clone(),
            error: Down::error("write", &id)
        })
    );
    assert!(matches!(
        table.poll_event(),
        Some(ActionEvent::NotRecorded { .. })
    ));
    assert_eq!(table.poll_event(), None);
    // Its own action is answered from the table; another's needs the records.
    assert_eq!(
        table.lookup(&id, t0).unwrap().status(),
        ActionStatus::Running
    );
    let refused = table.lookup("elsewhere", t0).unwrap_err();
    assert_eq!(
        refused,
        ActionTableError::Records(Down::error("read", "elsewhere"))
    );
    let problem: Problem = refused.to_problem();
    assert_eq!(problem.status, Some(503));
    assert!(matches!(
        table.cancel("elsewhere", t0),
        Err(ActionTableError::Records(_))
    ));
}

/// The one message `provider` sends next.
fn sent(
    provider: &mut concord_interact::ProviderEndpoint,
    thing: &mut concord_interact::Thing,
) -> Message {
    let bytes = provider.poll_transmit(thing).expect("an answer");
    match concord_interact::decode_frame(&bytes, &Limits::default()).unwrap() {
        concord_interact::Frame::Message(message) => message,
        other => panic!("not a message: {other:?}"),
    }
}

#[test]
fn a_provider_endpoint_asks_its_node_to_relay_a_cancel_held_elsewhere_and_answers_what_came_back() {
    let records = Arc::new(LocalActionRecords::new());
    let (mut a, _) = replicas(&records);
    let t0 = Instant::now();
    let id = a.start("train", t0).unwrap();
    a.progress(&id, 0.5, None, t0).unwrap();
    // Replica B's node-wide Thing, sharing the records, and one session on it.
    let interface: concord_interact::Interface =
        serde_json::from_value(json!({"actions": {"train": {"mode": "progress"}}})).unwrap();
    let mut thing = concord_interact::Thing::new(
        interface.clone(),
        Default::default(),
        Limits::default(),
        concord_interact::Overflow::DropOldest,
    )
    .unwrap()
    .with_action_records(Arc::clone(&records) as Arc<dyn ActionRecords>);
    let subscriber = thing.new_subscriber();
    let mut provider = concord_interact::ProviderEndpoint::new(
        subscriber,
        interface,
        Limits::default(),
        concord_interact::stream::StreamLimits::default(),
    );
    let cancel = |correlation: &str| {
        concord_interact::encode_message(
            &Message::request(Operation::CancelAction, correlation).with_action_id(id.clone()),
            &Limits::default(),
        )
        .unwrap()
    };

    // Not answered at once: the node is asked to relay it, with the 409 to answer if it cannot.
    provider.handle_frame(t0, &cancel("c-1"), &mut thing);
    let (request, refused) = match provider.poll_event() {
        Some(concord_interact::ProviderEvent::CancelElsewhere {
            request,
            action_id,
            refused,
        }) => {
            assert_eq!(action_id, id);
            (request, refused)
        }
        other => panic!("expected CancelElsewhere, got {other:?}"),
    };
    assert_eq!(refused.status, Some(409));
    assert!(
        provider.poll_transmit(&mut thing).is_none(),
        "nothing answered yet"
    );
    assert_eq!(provider.pending_requests(), 1);

    // The runner cancelled it: the caller hears its record.
    a.cancel(&id, t0).unwrap();
    let record = a.query(&id).unwrap().to_record();
    provider.reply_cancel(request.clone(), Ok(record), t0);
    let answer = sent(&mut provider, &mut thing);
    assert_eq!(answer.correlation_id, "c-1");
    assert_eq!(answer.operation, Operation::CancelAction);
    assert_eq!(answer.status, Some(ActionStatus::Cancelled));
    assert_eq!(answer.action_id.as_deref(), Some(id.as_str()));
    assert_eq!(provider.pending_requests(), 0);
    // Answered once: a late second answer is ignored.
    provider.reply_cancel(
        request,
        Err(Problem::new("about:blank").with_status(503)),
        t0,
    );
    assert!(provider.poll_transmit(&mut thing).is_none());

    // A relay that failed: the caller hears its problem.
    let other = a.start("train", t0).unwrap();
    let cancel_other = concord_interact::encode_message(
        &Message::request(Operation::CancelAction, "c-2").with_action_id(other.clone()),
        &Limits::default(),
    )
    .unwrap();
    provider.handle_frame(t0, &cancel_other, &mut thing);
    let Some(concord_interact::ProviderEvent::CancelElsewhere { request, .. }) =
        provider.poll_event()
    else {
        panic!("expected CancelElsewhere");
    };
    let unavailable = Problem::new("urn:concord:interact:unavailable").with_status(503);
    provider.reply_cancel(request, Err(unavailable.clone()), t0);
    let answer = sent(&mut provider, &mut thing);
    assert_eq!(answer.correlation_id, "c-2");
    assert_eq!(answer.error, Some(unavailable));
}

#[test]
fn a_table_lets_go_of_an_action_another_replica_answered_even_one_it_ended_itself() {
    let records = Arc::new(LocalActionRecords::new());
    let (mut a, _) = replicas(&records);
    let t0 = Instant::now();
    // Cut off, A ended its action itself (its caller's lease ran out) ...
    let id = a.start("render", t0).unwrap();
    a.cancel(&id, t0).unwrap();
    assert!(matches!(
        a.poll_event(),
        Some(ActionEvent::Cancelled { .. })
    ));
    // ... while B, taking A for stopped, answered it failed: the records hold B's answer.
    let mut failed = a.query(&id).unwrap().to_record();
    failed.status = ActionStatus::Failed;
    failed.cancel_reason = None;
    failed.error =
        Some(Problem::new("urn:concord:interact:unavailable").with_detail("its replica stopped"));
    failed.revision += 5;
    records.write(&failed).unwrap();

    a.ended_elsewhere(&id).unwrap();
    assert_eq!(a.poll_event(), None, "nothing runs: nothing to stop");
    assert!(a.query(&id).is_err());
    assert_eq!(a.lookup(&id, t0).unwrap().to_record(), failed);
    // Finished actions A forgets later never take B's answer with them.
    for _ in 0..Limits::default().finished_actions + 1 {
        let other = a.start("render", t0).unwrap();
        a.complete(&other, None, t0).unwrap();
    }
    assert_eq!(records.read(&id).unwrap(), Some(failed));
    assert!(matches!(
        a.ended_elsewhere(&id),
        Err(ActionTableError::Unknown { .. })
    ));
}
