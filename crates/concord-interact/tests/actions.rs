//! A provider's `ActionTable` and a caller peer, driven by hand on a simulated clock.

use std::time::{Duration, Instant};

use concord_interact::{
    ActionEvent, ActionStatus, ActionTable, ActionTableError, ActionTracker, CancelReason,
    CorrelationState, Correlations, Limits, Message, MessageType, Operation, Problem, ProblemType,
};
use serde_json::json;

fn wire(message: &Message, limits: &Limits) -> Message {
    Message::decode(&message.encode(limits).unwrap(), limits).unwrap()
}

#[test]
fn progress_is_monotonic_and_ends_in_one_terminal_state() {
    let limits = Limits::default();
    let t0 = Instant::now();
    let mut caller = Correlations::new(&limits);
    let mut table = ActionTable::new(limits.clone());

    let invoke = Message::request(Operation::InvokeAction, "c-1")
        .with_name("getWeather")
        .with_input(json!({ "city": "Berlin" }));
    caller.open(&invoke).unwrap();
    let invoke = wire(&invoke, &limits);
    let id = table.start(invoke.name.as_deref().unwrap(), t0).unwrap();
    let ack =
        table
            .query(&id)
            .unwrap()
            .to_message(MessageType::Response, Operation::InvokeAction, "c-1");
    assert_eq!(ack.status, Some(ActionStatus::Pending));
    assert_eq!(
        caller.accept(&wire(&ack, &limits)).unwrap(),
        CorrelationState::Open
    );

    table.run(&id, t0).unwrap();
    table
        .progress(&id, 0.25, None, t0 + Duration::from_secs(1))
        .unwrap();
    table
        .progress(
            &id,
            0.5,
            Some(json!({ "partial": "sunny" })),
            t0 + Duration::from_secs(2),
        )
        .unwrap();
    table
        .progress(&id, 0.5, None, t0 + Duration::from_secs(2))
        .unwrap();
    let err = table
        .progress(&id, 0.4, None, t0 + Duration::from_secs(3))
        .unwrap_err();
    assert_eq!(
        err,
        ActionTableError::ProgressDecreased {
            id: id.clone(),
            previous: 0.5,
            got: 0.4
        }
    );
    assert_eq!(err.to_problem().kind(), Some(ProblemType::BadProgress));
    assert!(matches!(
        table.progress(&id, f64::NAN, None, t0),
        Err(ActionTableError::ProgressOutOfRange { .. })
    ));
    assert!(matches!(
        table.progress(&id, 1.5, None, t0),
        Err(ActionTableError::ProgressOutOfRange { .. })
    ));

    let action = table.query(&id).unwrap();
    assert_eq!(action.status(), ActionStatus::Running);
    assert_eq!(action.progress(), Some(0.5));
    assert_eq!(action.output(), Some(&json!({ "partial": "sunny" })));
    let note = action.to_message(MessageType::Notification, Operation::InvokeAction, "c-1");
    assert_eq!(
        caller.accept(&wire(&note, &limits)).unwrap(),
        CorrelationState::Open
    );

    table
        .complete(
            &id,
            Some(json!({ "forecast": "sunny" })),
            t0 + Duration::from_secs(4),
        )
        .unwrap();
    let done = table.query(&id).unwrap();
    assert_eq!(done.status(), ActionStatus::Completed);
    assert_eq!(done.progress(), Some(1.0));
    let last = done.to_message(MessageType::Notification, Operation::InvokeAction, "c-1");
    assert_eq!(
        caller.accept(&wire(&last, &limits)).unwrap(),
        CorrelationState::Closed
    );

    // Exactly one terminal state: everything after it is refused.
    let finished = ActionTableError::Finished {
        id: id.clone(),
        status: ActionStatus::Completed,
    };
    assert_eq!(table.progress(&id, 1.0, None, t0).unwrap_err(), finished);
    assert_eq!(table.complete(&id, None, t0).unwrap_err(), finished);
    assert_eq!(
        table
            .fail(&id, Problem::new("about:blank"), t0)
            .unwrap_err(),
        finished
    );
    assert_eq!(table.cancel(&id, t0).unwrap_err(), finished);
    assert_eq!(table.run(&id, t0).unwrap_err(), finished);
    assert_eq!(finished.to_problem().status, Some(409));
    // The caller's correlation is closed: a late notification is unknown.
    assert!(caller.accept(&wire(&last, &limits)).is_err());
}

#[test]
fn cancel_and_query_by_action_id() {
    let limits = Limits::default();
    let t0 = Instant::now();
    let mut table = ActionTable::new(limits.clone());
    let first = table.start("getWeather", t0).unwrap();
    let second = table.start("getWeather", t0).unwrap();
    assert_ne!(first, second);

    let cancel = Message::request(Operation::CancelAction, "c-2")
        .with_name("getWeather")
        .with_action_id(second.clone());
    let reply = table.respond(&wire(&cancel, &limits), t0).unwrap();
    assert_eq!(reply.message_type, MessageType::Response);
    assert_eq!(reply.correlation_id, "c-2");
    assert_eq!(reply.status, Some(ActionStatus::Cancelled));
    assert_eq!(
        table.poll_event(),
        Some(ActionEvent::Cancelled {
            id: second.clone(),
            reason: CancelReason::Requested
        })
    );
    // The other call with the same name is untouched.
    assert_eq!(table.query(&first).unwrap().status(), ActionStatus::Pending);

    let query = Message::request(Operation::QueryAction, "c-3")
        .with_name("getWeather")
        .with_action_id(second.clone());
    let reply = table.respond(&wire(&query, &limits), t0).unwrap();
    assert_eq!(reply.status, Some(ActionStatus::Cancelled));
    assert!(wire(&reply, &limits).error.is_some());

    // A second cancel is refused, an unknown id is a typed error.
    assert!(matches!(
        table.respond(&cancel, t0),
        Err(ActionTableError::Finished { .. })
    ));
    let unknown = Message::request(Operation::QueryAction, "c-4")
        .with_name("getWeather")
        .with_action_id("action-99");
    let err = table.respond(&unknown, t0).unwrap_err();
    assert_eq!(
        err,
        ActionTableError::Unknown {
            id: "action-99".into()
        }
    );
    assert_eq!(err.to_problem().kind(), Some(ProblemType::UnknownAction));
    // A queryaction without actionID does not even decode.
    let bare = r#"{"messageType":"request","operation":"queryaction","name":"getWeather","correlationID":"c-5"}"#;
    assert!(Message::decode(bare.as_bytes(), &limits).is_err());
}

#[test]
fn a_detached_caller_keeps_its_actions_until_the_lease_runs_out() {
    let mut limits = Limits::default();
    limits.action_lease = Duration::from_secs(30);
    let t0 = Instant::now();
    let mut table = ActionTable::new(limits);
    let short = table.start("getWeather", t0).unwrap();
    let long = table
        .start_with_lease("transcribe", Duration::from_secs(120), t0)
        .unwrap();
    let done = table.start("getWeather", t0).unwrap();
    table.complete(&done, None, t0).unwrap();
    assert_eq!(table.poll_timeout(), None);

    // The connection drops at t0 + 10 s.
    let dropped = t0 + Duration::from_secs(10);
    table.detach(dropped);
    assert_eq!(
        table.poll_timeout(),
        Some(dropped + Duration::from_secs(30))
    );
    table.handle_timeout(dropped + Duration::from_secs(29));
    assert_eq!(table.query(&short).unwrap().status(), ActionStatus::Pending);
    table
        .progress(&short, 0.5, None, dropped + Duration::from_secs(20))
        .unwrap();

    table.handle_timeout(dropped + Duration::from_secs(30));
    assert_eq!(
        table.query(&short).unwrap().status(),
        ActionStatus::Cancelled
    );
    assert_eq!(
        table.query(&short).unwrap().cancel_reason(),
        Some(CancelReason::LeaseExpired)
    );
    assert_eq!(
        table.poll_event(),
        Some(ActionEvent::Cancelled {
            id: short.clone(),
            reason: CancelReason::LeaseExpired
        })
    );
    assert_eq!(
        table.poll_timeout(),
        Some(dropped + Duration::from_secs(120))
    );

    // The caller comes back within the long lease and queries both.
    table.attach();
    assert_eq!(table.poll_timeout(), None);
    assert_eq!(table.query(&long).unwrap().status(), ActionStatus::Pending);
    assert_eq!(
        table.query(&done).unwrap().status(),
        ActionStatus::Completed
    );
    table.handle_timeout(dropped + Duration::from_secs(500));
    assert_eq!(table.query(&long).unwrap().status(), ActionStatus::Pending);
    assert_eq!(table.poll_event(), None);
}

#[test]
fn bounds_on_actions() {
    let mut limits = Limits::default();
    limits.max_actions = 2;
    limits.finished_actions = 1;
    let t0 = Instant::now();
    let mut table = ActionTable::new(limits);
    let a = table.start("x", t0).unwrap();
    let b = table.start("x", t0).unwrap();
    assert_eq!(
        table.start("x", t0).unwrap_err(),
        ActionTableError::TooMany { limit: 2 }
    );
    table.fail(&a, Problem::new("about:blank"), t0).unwrap();
    table.complete(&b, None, t0).unwrap();
    // Only the latest finished action is remembered.
    assert!(matches!(
        table.query(&a),
        Err(ActionTableError::Unknown { .. })
    ));
    assert_eq!(table.query(&b).unwrap().status(), ActionStatus::Completed);
    let c = table.start("x", t0).unwrap();
    assert_eq!(c, "action-3");
}

#[test]
fn the_caller_refuses_what_the_provider_must_not_send() {
    let limits = Limits::default();
    let t0 = Instant::now();
    let mut tracker = ActionTracker::new(limits.clone());
    let invoke = Message::request(Operation::InvokeAction, "c-1").with_name("transcribe");
    let status = |s: ActionStatus| {
        invoke
            .notification()
            .with_action_id("action-1")
            .with_status(s)
    };

    let seen = tracker
        .observe(&wire(&status(ActionStatus::Pending), &limits), t0)
        .unwrap();
    assert_eq!(
        (seen.name(), seen.status()),
        ("transcribe", ActionStatus::Pending)
    );
    let running = status(ActionStatus::Running).with_progress(0.5);
    tracker.observe(&wire(&running, &limits), t0).unwrap();
    // Progress going down.
    let lower = status(ActionStatus::Running).with_progress(0.25);
    assert_eq!(
        tracker.observe(&wire(&lower, &limits), t0).unwrap_err(),
        ActionTableError::ProgressDecreased {
            id: "action-1".into(),
            previous: 0.5,
            got: 0.25
        }
    );
    // Status going backwards.
    assert!(matches!(
        tracker.observe(&status(ActionStatus::Pending), t0),
        Err(ActionTableError::InvalidTransition { .. })
    ));
    // Progress only: running, with partial output.
    let partial = invoke
        .notification()
        .with_action_id("action-1")
        .with_progress(0.75)
        .with_output(json!("hello"));
    let seen = tracker.observe(&wire(&partial, &limits), t0).unwrap();
    assert_eq!(
        (seen.status(), seen.progress()),
        (ActionStatus::Running, Some(0.75))
    );
    // One terminal state, then nothing.
    let done = status(ActionStatus::Completed).with_output(json!("hello world"));
    let seen = tracker.observe(&wire(&done, &limits), t0).unwrap();
    assert_eq!(seen.output(), Some(&json!("hello world")));
    for late in [
        status(ActionStatus::Failed),
        status(ActionStatus::Running),
        running,
    ] {
        assert_eq!(
            tracker.observe(&late, t0).unwrap_err(),
            ActionTableError::Finished {
                id: "action-1".into(),
                status: ActionStatus::Completed
            }
        );
    }
    assert!(matches!(
        tracker.observe(&invoke.notification(), t0),
        Err(ActionTableError::MissingActionId("invokeaction"))
    ));
}

#[test]
fn the_provider_and_the_caller_agree_end_to_end() {
    let limits = Limits::default();
    let t0 = Instant::now();
    let mut table = ActionTable::new(limits.clone());
    let mut tracker = ActionTracker::new(limits.clone());
    let mut caller = Correlations::new(&limits);
    let invoke = Message::request(Operation::InvokeAction, "c-1").with_name("getWeather");
    caller.open(&invoke).unwrap();
    let id = table.start("getWeather", t0).unwrap();
    let mut send = |table: &ActionTable, message_type| {
        let m = wire(
            &table
                .query(&id)
                .unwrap()
                .to_message(message_type, Operation::InvokeAction, "c-1"),
            &limits,
        );
        let state = caller.accept(&m).unwrap();
        tracker.observe(&m, t0).unwrap();
        state
    };
    assert_eq!(send(&table, MessageType::Response), CorrelationState::Open);
    for k in 1..=4 {
        table.progress(&id, f64::from(k) / 4.0, None, t0).unwrap();
        assert_eq!(
            send(&table, MessageType::Notification),
            CorrelationState::Open
        );
    }
    table
        .fail(
            &id,
            Problem::new("urn:example:no-data").with_status(503),
            t0,
        )
        .unwrap();
    assert_eq!(
        send(&table, MessageType::Notification),
        CorrelationState::Closed
    );
    assert!(caller.is_empty());
}
