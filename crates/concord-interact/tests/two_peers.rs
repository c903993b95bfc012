//! Two peers over PT 1 frame data on a simulated clock: `ConsumerEndpoint`s and
//! `ProviderEndpoint`s sharing one node-wide `Thing`, exchanging exactly what
//! `poll_transmit` hands out through `handle_frame`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use concord_interact::stream::{
    Chunk, ChunkHeader, Flags, ResetCode, Sent, StreamId, StreamLimits,
};
use concord_interact::{
    decode_frame, ActionEvent, ActionMode, ActionRecords, ActionStatus, CancelReason,
    ConsumerEndpoint, ConsumerEvent, Correlation, Frame, Interface, Limits, LocalActionRecords,
    Message, MessageType, Operation, Overflow, Problem, ProblemType, ProviderEndpoint,
    ProviderEvent, StreamUpdate, SubscriberId, Thing, UseError, CHUNK_PREFIX, NO_CORRELATION,
};
use serde_json::{json, Value};

const FRAME: usize = 960;
const CREDIT: u64 = 2048;
/// The bulk `upload` action's credit: each stream starts with its own action's.
const BULK_CREDIT: u64 = 256 * 1024;

fn interface() -> Interface {
    serde_json::from_value(json!({
        "actions": {
            "echo": {"mode": "reply"},
            "train": {"mode": "progress"},
            "ping": {"mode": "notify"},
            "talk": {"mode": "stream", "stream": {"contentType": "audio/pcm", "frameBytes": 960, "initialCredit": CREDIT}},
            "voice": {"mode": "stream", "stream": {"contentType": "audio/pcm", "frameBytes": 960, "initialCredit": CREDIT, "realtime": true}},
            "upload": {"mode": "stream", "stream": {"contentType": "application/octet-stream", "initialCredit": BULK_CREDIT}},
        },
        "properties": {
            "level": {"schema": {"type": "integer"}, "writable": true, "observable": true},
            "serial": {"schema": {"type": "string"}},
        },
        "events": {"alarm": {}, "tick": {}},
    }))
    .unwrap()
}

/// One node (a Thing) and its sessions, each a consumer and a provider endpoint.
struct Net {
    thing: Thing,
    now: Instant,
    limits: Limits,
    sessions: Vec<Session>,
}

struct Session {
    consumer: ConsumerEndpoint,
    provider: ProviderEndpoint,
    consumer_events: Vec<ConsumerEvent>,
    provider_events: Vec<ProviderEvent>,
    /// Frames the provider sent, as they crossed.
    to_consumer: Vec<Vec<u8>>,
}

impl Net {
    fn new(limits: Limits, overflow: Overflow) -> Self {
        let thing = Thing::new(
            interface(),
            [
                ("level".to_owned(), json!(3)),
                ("serial".to_owned(), json!("A-1")),
            ]
            .into(),
            limits.clone(),
            overflow,
        )
        .unwrap();
        Self {
            thing,
            now: Instant::now(),
            limits,
            sessions: Vec::new(),
        }
    }

    fn standard() -> Self {
        Self::new(Limits::default(), Overflow::DropOldest)
    }

    /// A session; the consumer may know more than the provider's subset.
    fn connect_with(&mut self, consumer: Interface, provider: Interface) -> usize {
        let subscriber = self.thing.new_subscriber();
        self.sessions.push(Session {
            consumer: ConsumerEndpoint::new(consumer, self.limits.clone(), StreamLimits::default()),
            provider: ProviderEndpoint::new(
                subscriber,
                provider,
                self.limits.clone(),
                StreamLimits::default(),
            ),
            consumer_events: Vec::new(),
            provider_events: Vec::new(),
            to_consumer: Vec::new(),
        });
        self.sessions.len() - 1
    }

    fn connect(&mut self) -> usize {
        self.connect_with(interface(), interface())
    }

    fn c(&mut self, s: usize) -> &mut ConsumerEndpoint {
        &mut self.sessions[s].consumer
    }

    fn p(&mut self, s: usize) -> &mut ProviderEndpoint {
        &mut self.sessions[s].provider
    }

    /// Moves frames both ways in session `s` until both are quiet.
    fn pump(&mut self, s: usize) {
        let now = self.now;
        let session = &mut self.sessions[s];
        loop {
            let mut moved = false;
            while let Some(bytes) = session.consumer.poll_transmit() {
                session.provider.handle_frame(now, &bytes, &mut self.thing);
                moved = true;
            }
            while let Some(bytes) = session.provider.poll_transmit(&mut self.thing) {
                session.consumer.handle_frame(now, &bytes);
                session.to_consumer.push(bytes);
                moved = true;
            }
            session
                .consumer_events
                .extend(std::iter::from_fn(|| session.consumer.poll_event()));
            session
                .provider_events
                .extend(std::iter::from_fn(|| session.provider.poll_event()));
            if !moved {
                break;
            }
        }
    }

    /// Pumps every session the Thing wakes, as a node would.
    fn pump_woken(&mut self) -> Vec<SubscriberId> {
        let mut woken = Vec::new();
        while let Some(id) = self.thing.poll_wake() {
            woken.push(id);
            let s = self
                .sessions
                .iter()
                .position(|x| x.provider.subscriber() == id)
                .unwrap();
            self.pump(s);
        }
        woken
    }

    /// Frame data straight into session `s`'s provider (a misbehaving requester).
    fn raw_to_provider(&mut self, s: usize, bytes: &[u8]) {
        let now = self.now;
        self.sessions[s]
            .provider
            .handle_frame(now, bytes, &mut self.thing);
        self.pump(s);
    }

    fn consumer_events(&mut self, s: usize) -> Vec<ConsumerEvent> {
        std::mem::take(&mut self.sessions[s].consumer_events)
    }

    fn provider_events(&mut self, s: usize) -> Vec<ProviderEvent> {
        std::mem::take(&mut self.sessions[s].provider_events)
    }

    /// Messages session `s`'s provider sent since the last call.
    fn sent_messages(&mut self, s: usize) -> Vec<Message> {
        let limits = self.limits.clone();
        std::mem::take(&mut self.sessions[s].to_consumer)
            .into_iter()
            .filter_map(|b| match decode_frame(&b, &limits).unwrap() {
                Frame::Message(m) => Some(m),
                Frame::Chunk(_) => None,
            })
            .collect()
    }
}

fn one_invoke(
    events: Vec<ProviderEvent>,
) -> (
    concord_interact::RequestId,
    Value,
    Option<String>,
    Option<StreamId>,
) {
    match events.as_slice() {
        [ProviderEvent::Invoke {
            request,
            input,
            action_id,
            stream,
            ..
        }] => (request.clone(), input.clone(), action_id.clone(), *stream),
        other => panic!("expected one Invoke, got {other:?}"),
    }
}

fn problem_status(problem: &Problem) -> Option<u16> {
    problem.status
}

#[test]
fn request_reply() {
    let mut net = Net::standard();
    let s = net.connect();
    let c = net.c(s).invoke("echo", json!({"say": "hi"})).unwrap();
    net.pump(s);
    let (request, input, action_id, stream) = one_invoke(net.provider_events(s));
    assert_eq!(input, json!({"say": "hi"}));
    assert_eq!((action_id, stream), (None, None));
    assert_eq!(request.operation(), Operation::InvokeAction);
    let now = net.now;
    net.sessions[s]
        .provider
        .reply(request.clone(), Ok(input), &mut net.thing, now);
    // A second reply to the same request is ignored.
    net.sessions[s]
        .provider
        .reply(request, Ok(json!("again")), &mut net.thing, now);
    net.pump(s);
    assert_eq!(
        net.consumer_events(s),
        vec![ConsumerEvent::Answered {
            correlation: c,
            result: Ok(json!({"say": "hi"}))
        }]
    );
    assert_eq!(net.c(s).open_requests(), 0);

    // A refusal is typed and closes the request.
    let c = net.c(s).invoke("echo", json!(1)).unwrap();
    net.pump(s);
    let (request, ..) = one_invoke(net.provider_events(s));
    let problem = Problem::of(ProblemType::BadMessage, "input: expected an object");
    net.sessions[s]
        .provider
        .reply(request, Err(problem.clone()), &mut net.thing, now);
    net.pump(s);
    assert_eq!(
        net.consumer_events(s),
        vec![ConsumerEvent::Answered {
            correlation: c,
            result: Err(problem)
        }]
    );
    assert_eq!(net.c(s).open_requests(), 0);
    assert_eq!(net.p(s).pending_requests(), 0);
}

fn accepted(events: &[ConsumerEvent]) -> String {
    events
        .iter()
        .find_map(|e| match e {
            ConsumerEvent::Accepted { action_id, .. } => Some(action_id.clone()),
            _ => None,
        })
        .expect("accepted")
}

#[test]
fn progress_is_monotonic_with_exactly_one_terminal_notification() {
    let mut net = Net::standard();
    let s = net.connect();
    let c = net.c(s).invoke("train", json!({})).unwrap();
    net.pump(s);
    let (_, _, action_id, _) = one_invoke(net.provider_events(s));
    let action_id = action_id.unwrap();
    assert_eq!(accepted(&net.consumer_events(s)), action_id);

    let now = net.now;
    net.thing.progress(&action_id, 0.25, None, now).unwrap();
    net.pump_woken();
    // Two reports before the session is drained: the newer replaces the older.
    net.thing.progress(&action_id, 0.4, None, now).unwrap();
    net.thing
        .progress(&action_id, 0.5, Some(json!({"epoch": 5})), now)
        .unwrap();
    assert!(net.thing.progress(&action_id, 0.3, None, now).is_err());
    net.pump_woken();
    net.thing
        .complete(&action_id, json!({"accuracy": 0.9}), now)
        .unwrap();
    assert!(net.thing.complete(&action_id, json!({}), now).is_err());
    assert!(net.thing.progress(&action_id, 1.0, None, now).is_err());
    let woken = net.pump_woken();
    assert_eq!(woken, vec![net.p(s).subscriber()]);
    assert_eq!(
        net.consumer_events(s),
        vec![
            ConsumerEvent::Progress {
                correlation: c.clone(),
                action_id: action_id.clone(),
                progress: 0.25,
                partial: None
            },
            ConsumerEvent::Progress {
                correlation: c.clone(),
                action_id: action_id.clone(),
                progress: 0.5,
                partial: Some(json!({"epoch": 5}))
            },
            ConsumerEvent::Finished {
                correlation: c,
                action_id: action_id.clone(),
                result: Ok(json!({"accuracy": 0.9}))
            },
        ]
    );
    assert_eq!(net.c(s).open_requests(), 0);

    // queryaction by id after the end.
    let q = net.c(s).query_action(&action_id).unwrap();
    net.pump(s);
    match net.consumer_events(s).as_slice() {
        [ConsumerEvent::Answered {
            correlation,
            result: Ok(status),
        }] => {
            assert_eq!(*correlation, q);
            assert_eq!(status["status"], "completed");
            assert_eq!(status["output"], json!({"accuracy": 0.9}));
        }
        other => panic!("{other:?}"),
    }
    // An unknown id: 404.
    net.c(s).query_action("action-99").unwrap();
    net.pump(s);
    match net.consumer_events(s).as_slice() {
        [ConsumerEvent::Answered { result: Err(p), .. }] => assert_eq!(p.status, Some(404)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_action_another_replica_answered_ends_here_with_that_answer() {
    let records = Arc::new(LocalActionRecords::new());
    let mut net = Net::standard();
    net.thing = Thing::new(
        interface(),
        [
            ("level".to_owned(), json!(3)),
            ("serial".to_owned(), json!("A-1")),
        ]
        .into(),
        net.limits.clone(),
        Overflow::DropOldest,
    )
    .unwrap()
    .with_action_records(Arc::clone(&records) as Arc<dyn ActionRecords>);
    let s = net.connect();
    let c = net.c(s).invoke("train", json!({})).unwrap();
    net.pump(s);
    let (_, _, action_id, _) = one_invoke(net.provider_events(s));
    let action_id = action_id.unwrap();
    assert_eq!(accepted(&net.consumer_events(s)), action_id);
    let now = net.now;
    net.thing.progress(&action_id, 0.25, None, now).unwrap();
    net.pump_woken();
    net.consumer_events(s);

    // Another replica took this one for stopped (cut off past the lease) and answered the
    // action failed in the shared records.
    let mut failed = net.thing.query_action(&action_id).unwrap().to_record();
    failed.status = ActionStatus::Failed;
    failed.error = Some(
        Problem::new("urn:concord:interact:runner-gone")
            .with_title("Action failed")
            .with_detail("its replica stopped"),
    );
    failed.revision += 1;
    records.write(&failed).unwrap();
    net.thing.action_ended_elsewhere(&failed, now).unwrap();
    assert_eq!(
        net.thing.poll_action_event(),
        Some(ActionEvent::EndedElsewhere {
            id: action_id.clone()
        })
    );
    // The caller hears that answer as the action's end ...
    net.pump_woken();
    match net.consumer_events(s).as_slice() {
        [ConsumerEvent::Finished {
            correlation,
            action_id: finished,
            result: Err(problem),
        }] => {
            assert_eq!((correlation, finished), (&c, &action_id));
            assert_eq!(problem.detail.as_deref(), Some("its replica stopped"));
        }
        other => panic!("{other:?}"),
    }
    // ... and a query here answers what every replica answers: the records'.
    assert!(net.thing.query_action(&action_id).is_err());
    assert_eq!(
        net.thing
            .lookup_action(&action_id, now)
            .unwrap()
            .to_record(),
        failed
    );
    // Its work's late reports change nothing, and it ends once.
    assert!(net.thing.progress(&action_id, 0.5, None, now).is_err());
    assert!(net.thing.complete(&action_id, json!({}), now).is_err());
    assert!(net.thing.action_ended_elsewhere(&failed, now).is_err());
    assert_eq!(records.read(&action_id).unwrap(), Some(failed));
    assert_eq!(net.thing.unfinished_actions(), 0);
}

#[test]
fn cancel_by_action_id() {
    let mut net = Net::standard();
    let s = net.connect();
    let c = net.c(s).invoke("train", json!({})).unwrap();
    net.pump(s);
    let action_id = accepted(&net.consumer_events(s));
    net.provider_events(s);
    net.c(s).cancel_action(&action_id).unwrap();
    net.pump(s);
    assert_eq!(
        net.provider_events(s),
        vec![ProviderEvent::Cancel {
            action_id: action_id.clone()
        }]
    );
    assert_eq!(
        net.thing.poll_action_event(),
        Some(ActionEvent::Cancelled {
            id: action_id.clone(),
            reason: CancelReason::Requested
        })
    );
    net.pump_woken();
    let events = net.consumer_events(s);
    let finished: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, ConsumerEvent::Finished { .. }))
        .collect();
    assert_eq!(finished.len(), 1);
    match finished[0] {
        ConsumerEvent::Finished {
            correlation,
            result: Err(problem),
            ..
        } => {
            assert_eq!(*correlation, c);
            assert_eq!(problem.problem_type, "urn:concord:interact:cancelled");
        }
        other => panic!("{other:?}"),
    }
    assert!(events.iter().any(|e| matches!(
        e,
        ConsumerEvent::Answered { result: Ok(status), .. } if status["status"] == "cancelled"
    )));
    // Nothing may follow the terminal status.
    let now = net.now;
    assert!(net.thing.complete(&action_id, json!({}), now).is_err());
    // Cancelling again: 409.
    net.c(s).cancel_action(&action_id).unwrap();
    net.pump(s);
    match net.consumer_events(s).as_slice() {
        [ConsumerEvent::Answered { result: Err(p), .. }] => assert_eq!(p.status, Some(409)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_dropped_session_does_not_cancel_before_the_lease() {
    let mut net = Net::standard();
    let s = net.connect();
    net.c(s).invoke("train", json!({})).unwrap();
    net.pump(s);
    let action_id = accepted(&net.consumer_events(s));
    let t0 = net.now;
    let subscriber = net.p(s).subscriber();
    net.thing.remove_subscriber(subscriber, t0);
    let lease = Limits::default().action_lease;
    assert_eq!(net.thing.poll_timeout(), Some(t0 + lease));
    net.thing
        .handle_timeout(t0 + lease - Duration::from_secs(1));
    assert_eq!(net.thing.poll_action_event(), None);
    // The work goes on meanwhile, and another session can query it.
    net.thing.progress(&action_id, 0.5, None, t0).unwrap();
    let s2 = net.connect();
    net.c(s2).query_action(&action_id).unwrap();
    net.pump(s2);
    match net.consumer_events(s2).as_slice() {
        [ConsumerEvent::Answered {
            result: Ok(status), ..
        }] => {
            assert_eq!(status["status"], "running")
        }
        other => panic!("{other:?}"),
    }
    net.thing.handle_timeout(t0 + lease);
    assert_eq!(
        net.thing.poll_action_event(),
        Some(ActionEvent::Cancelled {
            id: action_id.clone(),
            reason: CancelReason::LeaseExpired
        })
    );
    assert_eq!(
        net.thing
            .query_action(&action_id)
            .unwrap()
            .status()
            .as_str(),
        "cancelled"
    );
    assert_eq!(net.thing.unfinished_actions(), 0);
}

#[test]
fn notify_answers_nothing_unless_it_fails() {
    let mut net = Net::standard();
    let s = net.connect();
    net.c(s).invoke("ping", json!({"n": 1})).unwrap();
    assert_eq!(net.c(s).open_requests(), 0);
    net.pump(s);
    let (request, ..) = one_invoke(net.provider_events(s));
    let now = net.now;
    net.sessions[s]
        .provider
        .reply(request, Ok(Value::Null), &mut net.thing, now);
    net.pump(s);
    assert!(net.sent_messages(s).is_empty());
    assert!(net.consumer_events(s).is_empty());

    let c = net.c(s).invoke("ping", json!({"n": 2})).unwrap();
    net.pump(s);
    let (request, ..) = one_invoke(net.provider_events(s));
    let problem = Problem::of(ProblemType::Conflict, "pinged out");
    net.sessions[s]
        .provider
        .reply(request, Err(problem.clone()), &mut net.thing, now);
    net.pump(s);
    assert_eq!(
        net.consumer_events(s),
        vec![ConsumerEvent::Problem {
            correlation: Some(c),
            problem
        }]
    );
}

fn subscribed(events: &[ConsumerEvent]) -> Vec<(String, u64)> {
    events
        .iter()
        .filter_map(|e| match e {
            ConsumerEvent::Subscribed { event, latest, .. } => Some((event.clone(), *latest)),
            _ => None,
        })
        .collect()
}

fn delivered(events: &[ConsumerEvent]) -> Vec<(String, u64)> {
    events
        .iter()
        .filter_map(|e| match e {
            ConsumerEvent::Event { event, id, .. } => Some((event.clone(), *id)),
            _ => None,
        })
        .collect()
}

fn alarms(ids: &[u64]) -> Vec<(String, u64)> {
    ids.iter().map(|i| ("alarm".to_owned(), *i)).collect()
}

#[test]
fn fan_out_to_every_session_with_sequence_numbers() {
    let mut net = Net::standard();
    let now = net.now;
    net.thing.publish("alarm", json!({"n": 0}), now).unwrap();
    let sessions: Vec<usize> = (0..3).map(|_| net.connect()).collect();
    for &s in &sessions {
        net.c(s).subscribe("alarm", None).unwrap();
        net.pump(s);
        assert_eq!(
            subscribed(&net.consumer_events(s)),
            vec![("alarm".into(), 1)]
        );
    }
    for n in 1..=3 {
        assert_eq!(
            net.thing.publish("alarm", json!({"n": n}), now).unwrap(),
            n + 1
        );
    }
    let woken = net.pump_woken();
    assert_eq!(woken.len(), 3);
    for &s in &sessions {
        let events = net.consumer_events(s);
        assert_eq!(delivered(&events), alarms(&[2, 3, 4]));
        assert!(events.contains(&ConsumerEvent::Event {
            event: "alarm".into(),
            id: 4,
            data: json!({"n": 3})
        }));
    }
    // Unsubscribing ends deliveries for that session only.
    net.c(sessions[0]).unsubscribe("alarm").unwrap();
    net.pump(sessions[0]);
    net.consumer_events(sessions[0]);
    net.thing.publish("alarm", json!({}), now).unwrap();
    net.pump_woken();
    assert!(net.consumer_events(sessions[0]).is_empty());
    assert_eq!(delivered(&net.consumer_events(sessions[1])), alarms(&[5]));
}

#[test]
fn resume_from_the_replay_buffer_or_an_explicit_gap() {
    let mut limits = Limits::default();
    limits.replay_events = 2;
    let mut net = Net::new(limits, Overflow::DropOldest);
    let now = net.now;
    for n in 1..=5 {
        net.thing.publish("alarm", json!(n), now).unwrap();
    }
    let s = net.connect();
    net.c(s).subscribe("alarm", Some(1)).unwrap();
    net.pump(s);
    let events = net.consumer_events(s);
    assert_eq!(subscribed(&events), vec![("alarm".into(), 5)]);
    let gap_at = events
        .iter()
        .position(|e| {
            *e == ConsumerEvent::Gap {
                event: "alarm".into(),
                from: 2,
                to: 3,
            }
        })
        .expect("a gap");
    let first_event = events
        .iter()
        .position(|e| matches!(e, ConsumerEvent::Event { .. }))
        .unwrap();
    assert!(gap_at < first_event);
    assert_eq!(delivered(&events), alarms(&[4, 5]));

    // A resume from within the buffer: no gap.
    let s2 = net.connect();
    net.c(s2).subscribe("alarm", Some(4)).unwrap();
    net.pump(s2);
    let events = net.consumer_events(s2);
    assert!(!events
        .iter()
        .any(|e| matches!(e, ConsumerEvent::Gap { .. })));
    assert_eq!(delivered(&events), alarms(&[5]));
}

#[test]
fn a_slow_subscriber_is_gapped_and_nobody_waits() {
    let mut limits = Limits::default();
    limits.subscriber_queue = 2;
    let mut net = Net::new(limits, Overflow::DropOldest);
    let fast = net.connect();
    let slow = net.connect();
    for s in [fast, slow] {
        net.c(s).subscribe("alarm", None).unwrap();
        net.pump(s);
        net.consumer_events(s);
    }
    let now = net.now;
    for n in 1..=5 {
        net.thing.publish("alarm", json!(n), now).unwrap();
        net.pump(fast);
    }
    assert_eq!(
        delivered(&net.consumer_events(fast)),
        alarms(&[1, 2, 3, 4, 5])
    );
    net.pump(slow);
    let events = net.consumer_events(slow);
    assert_eq!(
        events[0],
        ConsumerEvent::Gap {
            event: "alarm".into(),
            from: 1,
            to: 3
        }
    );
    assert_eq!(delivered(&events), alarms(&[4, 5]));
}

#[test]
fn a_slow_subscriber_is_dropped_and_nobody_waits() {
    let mut limits = Limits::default();
    limits.subscriber_queue = 2;
    let mut net = Net::new(limits, Overflow::Disconnect);
    let fast = net.connect();
    let slow = net.connect();
    for s in [fast, slow] {
        net.c(s).subscribe("alarm", None).unwrap();
        net.c(s).observe_property("level").unwrap();
        net.pump(s);
        net.consumer_events(s);
    }
    let now = net.now;
    for n in 1..=4 {
        net.thing.publish("alarm", json!(n), now).unwrap();
        net.pump(fast);
    }
    assert_eq!(delivered(&net.consumer_events(fast)), alarms(&[1, 2, 3, 4]));
    net.pump(slow);
    let events = net.consumer_events(slow);
    let dropped: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            ConsumerEvent::Problem {
                correlation: Some(_),
                problem,
            } => Some(problem.kind()),
            _ => None,
        })
        .collect();
    // The subscription and the observation both end, with a typed notice.
    assert_eq!(dropped, vec![Some(ProblemType::SubscriberDropped); 2]);
    assert_eq!(net.c(slow).open_requests(), 0);
    // The session itself goes on.
    net.c(slow).read_property("level").unwrap();
    net.pump(slow);
    assert!(matches!(
        net.consumer_events(slow).as_slice(),
        [ConsumerEvent::Answered { result: Ok(_), .. }]
    ));
}

#[test]
fn subscribe_all_events() {
    let mut net = Net::standard();
    let s = net.connect();
    net.c(s).subscribe_all().unwrap();
    net.pump(s);
    assert_eq!(subscribed(&net.consumer_events(s)), vec![("*".into(), 0)]);
    let now = net.now;
    net.thing.publish("alarm", json!(1), now).unwrap();
    net.thing.publish("tick", json!(1), now).unwrap();
    net.pump_woken();
    assert_eq!(
        delivered(&net.consumer_events(s)),
        vec![("alarm".into(), 1), ("tick".into(), 1)]
    );
    // Twice: 409.
    net.c(s).subscribe_all().unwrap();
    net.pump(s);
    match net.consumer_events(s).as_slice() {
        [ConsumerEvent::Answered { result: Err(p), .. }] => assert_eq!(p.status, Some(409)),
        other => panic!("{other:?}"),
    }
    net.c(s).unsubscribe_all().unwrap();
    net.pump(s);
    net.consumer_events(s);
    net.thing.publish("tick", json!(2), now).unwrap();
    net.pump_woken();
    assert!(net.consumer_events(s).is_empty());
    assert_eq!(net.c(s).open_requests(), 0);
}

#[test]
fn properties_read_write_observe() {
    let mut net = Net::standard();
    let writer = net.connect();
    let watcher = net.connect();
    net.c(watcher).observe_property("level").unwrap();
    net.pump(watcher);
    assert!(matches!(
        net.consumer_events(watcher).as_slice(),
        [ConsumerEvent::Answered { result: Ok(v), .. }] if *v == json!(3)
    ));

    let r = net.c(writer).read_property("serial").unwrap();
    net.pump(writer);
    assert_eq!(
        net.consumer_events(writer),
        vec![ConsumerEvent::Answered {
            correlation: r,
            result: Ok(json!("A-1"))
        }]
    );

    // A write the node accepts: set in the Thing, observers notified.
    let w = net.c(writer).write_property("level", json!(7)).unwrap();
    net.pump(writer);
    let request = match net.provider_events(writer).as_slice() {
        [ProviderEvent::WriteProperty {
            request,
            name,
            value,
        }] => {
            assert_eq!((name.as_str(), value), ("level", &json!(7)));
            request.clone()
        }
        other => panic!("{other:?}"),
    };
    let now = net.now;
    net.sessions[writer]
        .provider
        .reply(request, Ok(Value::Null), &mut net.thing, now);
    net.pump(writer);
    assert_eq!(
        net.consumer_events(writer),
        vec![ConsumerEvent::Answered {
            correlation: w,
            result: Ok(json!(7))
        }]
    );
    assert_eq!(net.thing.read_property("level").unwrap(), &json!(7));
    net.pump_woken();
    assert_eq!(
        net.consumer_events(watcher),
        vec![ConsumerEvent::PropertyChanged {
            name: "level".into(),
            id: 1,
            value: json!(7)
        }]
    );

    // A write the node vetoes changes nothing.
    net.c(writer).write_property("level", json!(-1)).unwrap();
    net.pump(writer);
    let request = match net.provider_events(writer).as_slice() {
        [ProviderEvent::WriteProperty { request, .. }] => request.clone(),
        other => panic!("{other:?}"),
    };
    let veto = Problem::of(ProblemType::BadMessage, "value: below minimum");
    net.sessions[writer]
        .provider
        .reply(request, Err(veto.clone()), &mut net.thing, now);
    net.pump(writer);
    assert!(matches!(
        net.consumer_events(writer).as_slice(),
        [ConsumerEvent::Answered { result: Err(p), .. }] if *p == veto
    ));
    assert_eq!(net.thing.read_property("level").unwrap(), &json!(7));

    // A local write notifies too.
    net.thing.set_property("level", json!(9), now).unwrap();
    net.pump_woken();
    assert_eq!(
        net.consumer_events(watcher),
        vec![ConsumerEvent::PropertyChanged {
            name: "level".into(),
            id: 2,
            value: json!(9)
        }]
    );

    // Read-only: refused locally, and with a 405 when sent anyway.
    assert_eq!(
        net.c(writer).write_property("serial", json!("B")),
        Err(UseError::ReadOnly {
            name: "serial".into()
        })
    );
    let raw = br#"{"messageType":"request","operation":"writeproperty","name":"serial","value":"B","correlationID":"w-1"}"#;
    net.raw_to_provider(writer, raw);
    let answers = net.sent_messages(writer);
    let last = answers.last().unwrap();
    assert_eq!(last.correlation_id, "w-1");
    assert_eq!(last.error.as_ref().and_then(problem_status), Some(405));
    assert!(net.provider_events(writer).is_empty());

    // Unobserve: no more changes.
    net.c(watcher).unobserve_property("level").unwrap();
    net.pump(watcher);
    net.consumer_events(watcher);
    net.thing.set_property("level", json!(10), now).unwrap();
    net.pump_woken();
    assert!(net.consumer_events(watcher).is_empty());
    assert_eq!(net.c(watcher).open_requests(), 0);
}

fn stream_opened(events: &[ConsumerEvent]) -> StreamId {
    events
        .iter()
        .find_map(|e| match e {
            ConsumerEvent::StreamOpened { id, .. } => Some(*id),
            _ => None,
        })
        .expect("stream opened")
}

fn frame(n: u8) -> Vec<u8> {
    vec![n; FRAME]
}

/// The flag bytes of the chunks among frames.
fn chunk_flags(frames: &[Vec<u8>]) -> Vec<u8> {
    frames
        .iter()
        .filter(|f| f.first() == Some(&CHUNK_PREFIX))
        .map(|f| f[9])
        .collect()
}

#[test]
fn streams_both_ways_under_credit_with_credit_chunks() {
    let mut net = Net::standard();
    let s = net.connect();
    let (c, id) = net
        .c(s)
        .open_stream("talk", json!({"voice": "alto"}))
        .unwrap();
    // Chunks may follow the request at once, within the initial credit.
    assert_eq!(net.c(s).stream_send(id, &frame(1)), Ok(Sent::Queued));
    assert_eq!(net.c(s).stream_send(id, &frame(2)), Ok(Sent::Queued));
    assert!(
        net.c(s).stream_send(id, &frame(3)).is_err(),
        "past the credit"
    );
    net.pump(s);
    assert_eq!(stream_opened(&net.consumer_events(s)), id);
    assert!(net.c(s).stream_send(id, &frame(3)).is_err(), "no grant yet");
    let events = net.provider_events(s);
    let (request, input, _, stream) = one_invoke(events[..1].to_vec());
    assert_eq!((input, stream), (json!({"voice": "alto"}), Some(id)));
    assert!(events.contains(&ProviderEvent::Stream(StreamUpdate::Readable { id })));

    // Reading grants the bytes back as a CREDIT chunk (flag 8), and the sender may go on.
    // Both frames were buffered before the read, so one read gives both: a stream is a
    // byte stream, and small chunks share the receive buffer's memory.
    let both = [frame(1), frame(2)].concat();
    assert_eq!(net.p(s).stream_read(id).as_deref(), Some(&both[..]));
    assert_eq!(net.p(s).stream_read(id), None);
    net.sent_messages(s);
    net.pump(s);
    assert!(chunk_flags(&net.sessions[s].to_consumer).contains(&Flags::CREDIT.bits()));
    assert_eq!(net.c(s).stream_send(id, &frame(3)), Ok(Sent::Queued));
    net.c(s).stream_finish(id).unwrap();

    // The provider's direction: frames, then END.
    assert_eq!(net.p(s).stream_send(id, &frame(9)), Ok(Sent::Queued));
    net.p(s).stream_finish(id).unwrap();
    net.pump(s);
    let events = net.provider_events(s);
    assert!(events.contains(&ProviderEvent::Stream(StreamUpdate::Finished { id })));
    assert_eq!(net.p(s).stream_read(id).as_deref(), Some(&frame(3)[..]));
    let events = net.consumer_events(s);
    assert!(events.contains(&ConsumerEvent::Stream(StreamUpdate::Readable { id })));
    assert!(events.contains(&ConsumerEvent::Stream(StreamUpdate::Finished { id })));
    assert_eq!(net.c(s).stream_read(id).as_deref(), Some(&frame(9)[..]));

    // The final answer.
    let now = net.now;
    net.sessions[s]
        .provider
        .reply(request, Ok(json!({"frames": 3})), &mut net.thing, now);
    net.pump(s);
    assert!(net.consumer_events(s).contains(&ConsumerEvent::Answered {
        correlation: c,
        result: Ok(json!({"frames": 3}))
    }));
    assert_eq!(net.c(s).open_requests(), 0);
    assert!(!net.c(s).streams().contains(id));
    assert!(!net.p(s).streams().contains(id));
}

#[test]
fn a_sender_never_exceeds_the_credit() {
    let mut net = Net::standard();
    let s = net.connect();
    let (_, id) = net.c(s).open_stream("talk", json!({})).unwrap();
    net.pump(s);
    // Never read on the provider: the credit stays at its initial level.
    let mut queued = 0;
    for n in 0..10 {
        if net.c(s).stream_send(id, &frame(n)) == Ok(Sent::Queued) {
            queued += FRAME as u64;
        }
        net.pump(s);
    }
    assert!(queued <= CREDIT);
    assert_eq!(
        net.p(s).streams().recv_stream(id).unwrap().buffered(),
        queued
    );
}

#[test]
fn a_realtime_sender_drops_rather_than_buffers() {
    let mut net = Net::standard();
    let s = net.connect();
    let (_, id) = net.c(s).open_stream("voice", json!({})).unwrap();
    net.pump(s);
    let sent: Vec<Sent> = (0..4)
        .map(|n| net.c(s).stream_send(id, &frame(n)).unwrap())
        .collect();
    assert_eq!(
        sent,
        vec![Sent::Queued, Sent::Queued, Sent::Dropped, Sent::Dropped]
    );
    let credit = net
        .c(s)
        .streams()
        .send_stream(id)
        .unwrap()
        .credit()
        .unwrap()
        .clone();
    assert_eq!(credit.dropped_chunks(), 2);
    net.pump(s);
    assert_eq!(
        net.p(s).streams().recv_stream(id).unwrap().buffered(),
        2 * FRAME as u64
    );
}

#[test]
fn reset_and_truncate() {
    let mut net = Net::standard();
    let s = net.connect();
    let (_, id) = net.c(s).open_stream("talk", json!({})).unwrap();
    net.c(s).stream_send(id, &frame(1)).unwrap();
    net.c(s).stream_send(id, &frame(2)).unwrap();
    net.pump(s);
    net.provider_events(s);
    // TRUNCATE: the provider drops what it buffered and grants it again.
    net.c(s).stream_truncate(id).unwrap();
    net.pump(s);
    assert!(net
        .provider_events(s)
        .contains(&ProviderEvent::Stream(StreamUpdate::Truncated {
            id,
            discarded: 2 * FRAME as u64
        })));
    assert_eq!(net.p(s).stream_read(id), None);
    assert_eq!(net.c(s).stream_send(id, &frame(3)), Ok(Sent::Queued));
    assert_eq!(net.c(s).stream_send(id, &frame(4)), Ok(Sent::Queued));
    // RESET (cancel): gone both ways.
    net.c(s).stream_reset(id, ResetCode::CANCELLED).unwrap();
    net.pump(s);
    assert!(net
        .provider_events(s)
        .contains(&ProviderEvent::Stream(StreamUpdate::Reset {
            id,
            code: ResetCode::CANCELLED
        })));
    assert!(!net.p(s).streams().contains(id));
    assert!(net.p(s).stream_send(id, &frame(5)).is_err());
}

fn chunk(id: StreamId, sequence: u32, flags: Flags, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![CHUNK_PREFIX];
    Chunk {
        header: ChunkHeader {
            stream_id: id,
            sequence,
            flags,
        },
        payload,
    }
    .encode_into(&mut out);
    out
}

/// The session still answers a plain request.
fn still_alive(net: &mut Net, s: usize) {
    net.c(s).read_property("serial").unwrap();
    net.pump(s);
    assert!(net.consumer_events(s).iter().any(|e| matches!(
        e,
        ConsumerEvent::Answered { result: Ok(v), .. } if *v == json!("A-1")
    )));
}

#[test]
fn a_chunk_past_the_credit_is_a_429_and_a_reset() {
    let mut net = Net::standard();
    let s = net.connect();
    let (c, id) = net.c(s).open_stream("talk", json!({})).unwrap();
    net.pump(s);
    net.consumer_events(s);
    let too_much = vec![0u8; CREDIT as usize + 1];
    net.raw_to_provider(s, &chunk(id, 0, Flags::NONE, &too_much));
    let events = net.consumer_events(s);
    assert!(events.contains(&ConsumerEvent::Stream(StreamUpdate::Reset {
        id,
        code: ResetCode::CREDIT_EXCEEDED
    })));
    assert!(events.iter().any(|e| matches!(
        e,
        ConsumerEvent::Problem { correlation: Some(cc), problem } if *cc == c && problem.status == Some(429)
    )));
    assert!(net
        .provider_events(s)
        .contains(&ProviderEvent::Stream(StreamUpdate::Reset {
            id,
            code: ResetCode::CREDIT_EXCEEDED
        })));
    // The request stays open for its final answer; the session goes on.
    assert_eq!(net.c(s).open_requests(), 1);
    still_alive(&mut net, s);
}

#[test]
fn data_after_end_is_a_400() {
    let mut net = Net::standard();
    let s = net.connect();
    let (c, id) = net.c(s).open_stream("talk", json!({})).unwrap();
    net.pump(s);
    net.consumer_events(s);
    net.raw_to_provider(s, &chunk(id, 0, Flags::END, b"last"));
    net.raw_to_provider(s, &chunk(id, 1, Flags::NONE, b"more"));
    let events = net.consumer_events(s);
    assert!(events.iter().any(|e| matches!(
        e,
        ConsumerEvent::Problem { correlation: Some(cc), problem } if *cc == c && problem.status == Some(400)
    )));
    still_alive(&mut net, s);
}

#[test]
fn a_chunk_for_a_stream_no_request_opened_is_refused() {
    let mut net = Net::standard();
    let s = net.connect();
    net.raw_to_provider(s, &chunk(StreamId(40), 0, Flags::NONE, b"hello"));
    let events = net.consumer_events(s);
    assert!(events.iter().any(|e| matches!(
        e,
        ConsumerEvent::Problem { correlation: None, problem } if problem.status == Some(400)
    )));
    assert!(!net.p(s).streams().contains(StreamId(40)));
    still_alive(&mut net, s);
}

#[test]
fn typed_answers_and_the_session_survives() {
    let mut net = Net::standard();
    let mut wider = interface();
    wider
        .events
        .insert("secret".into(), serde_json::from_value(json!({})).unwrap());
    let s = net.connect_with(wider, interface());

    // Subscribe to an event the session does not cover: 404.
    let c = net.c(s).subscribe("secret", None).unwrap();
    net.pump(s);
    match net.consumer_events(s).as_slice() {
        [ConsumerEvent::Answered {
            correlation,
            result: Err(p),
        }] => {
            assert_eq!(*correlation, c);
            assert_eq!(
                (p.status, p.kind()),
                (Some(404), Some(ProblemType::UnknownEvent))
            );
        }
        other => panic!("{other:?}"),
    }

    // Bad JSON and a bad frame: 400, unattributed.
    for bad in [&b"{not json"[..], &b"\x07hello"[..], &b""[..]] {
        net.raw_to_provider(s, bad);
        match net.consumer_events(s).as_slice() {
            [ConsumerEvent::Problem {
                correlation: None,
                problem,
            }] => assert_eq!(problem.status, Some(400)),
            other => panic!("{other:?}"),
        }
    }
    // A request breaking a field rule is answered on its own correlation id.
    net.raw_to_provider(
        s,
        br#"{"messageType":"request","operation":"readproperty","correlationID":"x-1"}"#,
    );
    let sent = net.sent_messages(s);
    let last = sent.last().unwrap();
    assert_eq!(last.correlation_id, "x-1");
    assert_eq!(last.error.as_ref().and_then(problem_status), Some(400));
    assert!(net
        .consumer_events(s)
        .iter()
        .all(|e| matches!(e, ConsumerEvent::Unexpected { .. })));

    // An action the session does not cover: 404.
    net.raw_to_provider(
        s,
        br#"{"messageType":"request","operation":"invokeaction","name":"nope","correlationID":"x-2"}"#,
    );
    let sent = net.sent_messages(s);
    assert_eq!(
        sent.last().unwrap().error.as_ref().and_then(problem_status),
        Some(404)
    );

    // A response sent to the provider matches no request of its own: 404.
    net.raw_to_provider(
        s,
        br#"{"messageType":"response","operation":"readproperty","name":"level","correlationID":"x-3"}"#,
    );
    let sent = net.sent_messages(s);
    let last = sent.last().unwrap();
    assert_eq!(
        last.error.as_ref().and_then(|p| p.kind()),
        Some(ProblemType::UnknownCorrelationId)
    );
    net.consumer_events(s);

    // An answer to an unknown correlation id reaching the consumer: counted, dropped.
    let stray = Message::new(MessageType::Response, Operation::ReadProperty, "c-999")
        .with_name("level")
        .with_value(json!(1))
        .encode(&Limits::default())
        .unwrap();
    let now = net.now;
    net.c(s).handle_frame(now, &stray);
    assert!(matches!(
        net.c(s).poll_event(),
        Some(ConsumerEvent::Unexpected { .. })
    ));

    // Unknown names are refused before they leave.
    assert!(matches!(
        net.c(s).invoke("nope", json!({})),
        Err(UseError::UnknownAction { .. })
    ));
    assert!(matches!(
        net.c(s).open_stream("echo", json!({})),
        Err(UseError::NotAStreamAction { .. })
    ));
    still_alive(&mut net, s);
    let _ = NO_CORRELATION;
}

#[test]
fn pending_requests_are_bounded() {
    let mut limits = Limits::default();
    limits.max_pending_requests = 2;
    let mut net = Net::new(limits, Overflow::DropOldest);
    let s = net.connect();
    let cs: Vec<Correlation> = (0..3)
        .map(|n| net.c(s).invoke("echo", json!(n)).unwrap())
        .collect();
    net.pump(s);
    assert_eq!(net.provider_events(s).len(), 2);
    match net.consumer_events(s).as_slice() {
        [ConsumerEvent::Answered {
            correlation,
            result: Err(p),
        }] => {
            assert_eq!(*correlation, cs[2]);
            assert_eq!(p.status, Some(429));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_thing_checks_its_properties() {
    let missing = Thing::new(
        interface(),
        [("level".to_owned(), json!(1))].into(),
        Limits::default(),
        Overflow::DropOldest,
    );
    assert!(missing.is_err());
    let extra = Thing::new(
        interface(),
        [
            ("level".to_owned(), json!(1)),
            ("serial".to_owned(), json!("s")),
            ("nope".to_owned(), json!(0)),
        ]
        .into(),
        Limits::default(),
        Overflow::DropOldest,
    );
    assert!(extra.is_err());
    let mode = interface().actions["train"].mode;
    assert_eq!(mode, ActionMode::Progress);
}

/// The status of the problem in the last message session `s`'s provider sent.
fn last_status(net: &mut Net, s: usize) -> Option<u16> {
    let sent = net.sent_messages(s);
    sent.last()
        .and_then(|m| m.error.as_ref())
        .and_then(problem_status)
}

#[test]
fn modes_and_correlations_are_checked() {
    let mut net = Net::standard();
    let s = net.connect();
    // Observing a property that is not observable: 405.
    assert!(matches!(
        net.c(s).observe_property("serial"),
        Err(UseError::NotObservable { .. })
    ));
    net.raw_to_provider(
        s,
        br#"{"messageType":"request","operation":"observeproperty","name":"serial","correlationID":"o-1"}"#,
    );
    assert_eq!(last_status(&mut net, s), Some(405));
    // A stream on a reply action, a stream action without one: 400.
    net.raw_to_provider(
        s,
        br#"{"messageType":"request","operation":"invokeaction","name":"echo","streamID":0,"correlationID":"i-1"}"#,
    );
    assert_eq!(last_status(&mut net, s), Some(400));
    net.raw_to_provider(
        s,
        br#"{"messageType":"request","operation":"invokeaction","name":"talk","correlationID":"i-2"}"#,
    );
    assert_eq!(last_status(&mut net, s), Some(400));
    // A stream id of the provider's parity: 400.
    net.raw_to_provider(
        s,
        br#"{"messageType":"request","operation":"invokeaction","name":"talk","streamID":1,"correlationID":"i-3"}"#,
    );
    assert_eq!(last_status(&mut net, s), Some(400));
    // A correlation id still awaiting its answer: 409.
    let echo = br#"{"messageType":"request","operation":"invokeaction","name":"echo","correlationID":"i-4"}"#;
    net.raw_to_provider(s, echo);
    assert_eq!(net.provider_events(s).len(), 1);
    net.raw_to_provider(s, echo);
    assert_eq!(last_status(&mut net, s), Some(409));
    assert!(net.provider_events(s).is_empty());
    // Nothing queued: the Thing wakes nobody.
    assert_eq!(net.thing.poll_wake(), None);
    still_alive(&mut net, s);
}

#[test]
fn a_stream_action_the_node_refuses_ends_with_its_problem() {
    let mut net = Net::standard();
    let s = net.connect();
    let (c, id) = net.c(s).open_stream("talk", json!({"bad": true})).unwrap();
    net.pump(s);
    let (request, ..) = one_invoke(net.provider_events(s));
    net.consumer_events(s);
    let problem = Problem::of(ProblemType::BadMessage, "input: unknown member bad");
    let now = net.now;
    net.sessions[s]
        .provider
        .reply(request, Err(problem.clone()), &mut net.thing, now);
    net.p(s).stream_reset(id, ResetCode::CANCELLED).unwrap();
    net.pump(s);
    let events = net.consumer_events(s);
    assert!(events.contains(&ConsumerEvent::Answered {
        correlation: c,
        result: Err(problem)
    }));
    assert!(events.contains(&ConsumerEvent::Stream(StreamUpdate::Reset {
        id,
        code: ResetCode::CANCELLED
    })));
    assert_eq!(net.c(s).open_requests(), 0);
    assert!(!net.c(s).streams().contains(id));
}

#[test]
fn one_caller_cannot_take_every_long_running_action_slot() {
    use concord_interact::{ActionAffordance, ActionMode, Interface, Limits, Overflow, Thing};
    let mut interface = Interface::default();
    interface.actions.insert(
        "render".to_owned(),
        ActionAffordance {
            description: String::new(),
            input: serde_json::json!({"type": "object"}),
            output: serde_json::json!({"type": "object"}),
            mode: ActionMode::Progress,
            stream: None,
        },
    );
    let mut limits = Limits::default();
    limits.max_actions_per_caller = 2;
    let mut thing = Thing::new(
        interface.clone(),
        Default::default(),
        limits.clone(),
        Overflow::DropOldest,
    )
    .unwrap();
    let now = std::time::Instant::now();
    let invoke = |correlation: &str| {
        concord_interact::encode_message(
            &concord_interact::Message::request(
                concord_interact::Operation::InvokeAction,
                correlation,
            )
            .with_name("render")
            .with_input(serde_json::json!({})),
            &limits,
        )
        .unwrap()
    };
    let streams = concord_interact::stream::StreamLimits::default();
    // Two sessions of one caller share its two slots; a third invoke is refused 429.
    let first = thing.new_subscriber_for("ws://192.0.2.7");
    let second = thing.new_subscriber_for("ws://192.0.2.7");
    let mut a =
        concord_interact::ProviderEndpoint::new(first, interface.clone(), limits.clone(), streams);
    let mut b =
        concord_interact::ProviderEndpoint::new(second, interface.clone(), limits.clone(), streams);
    a.handle_frame(now, &invoke("c1"), &mut thing);
    b.handle_frame(now, &invoke("c2"), &mut thing);
    b.handle_frame(now, &invoke("c3"), &mut thing);
    assert_eq!(thing.unfinished_actions(), 2);
    let refused: Vec<serde_json::Value> = std::iter::from_fn(|| b.poll_transmit(&mut thing))
        .map(|frame| serde_json::from_slice(&frame).unwrap())
        .filter(|message: &serde_json::Value| message["correlationID"] == "c3")
        .collect();
    assert_eq!(refused[0]["error"]["status"], 429, "{refused:?}");
    // Another caller still gets its own.
    let other = thing.new_subscriber_for("ws://198.51.100.9");
    let mut c = concord_interact::ProviderEndpoint::new(other, interface, limits.clone(), streams);
    c.handle_frame(now, &invoke("c4"), &mut thing);
    assert_eq!(thing.unfinished_actions(), 3);
}

#[test]
fn each_stream_starts_with_the_credit_its_action_declares() {
    let mut net = Net::standard();
    let s = net.connect();
    let (_, talk) = net.c(s).open_stream("talk", json!({})).unwrap();
    let (_, upload) = net.c(s).open_stream("upload", json!({})).unwrap();
    net.pump(s);
    for (id, credit) in [(talk, CREDIT), (upload, BULK_CREDIT)] {
        assert_eq!(
            net.c(s).streams().send_stream(id).unwrap().available(),
            credit
        );
        assert_eq!(
            net.p(s).streams().send_stream(id).unwrap().available(),
            credit
        );
        let granted = |e: &mut ProviderEndpoint| {
            e.streams()
                .recv_stream(id)
                .unwrap()
                .credit()
                .map(|c| c.granted())
        };
        assert_eq!(granted(net.p(s)), Some(credit));
    }
    // The bulk stream carries its whole credit at once, the voice stream's stays small.
    let bulk = vec![1u8; BULK_CREDIT as usize];
    let mut written = 0;
    while written < bulk.len() {
        let mut stream = net.c(s).streams().send_stream(upload).unwrap();
        written += stream.write(&bulk[written..]).unwrap();
    }
    net.pump(s);
    let mut read = 0;
    while let Some(bytes) = net.p(s).stream_read(upload) {
        read += bytes.len();
    }
    assert_eq!(read, bulk.len());
    assert!(!net
        .provider_events(s)
        .iter()
        .any(|e| matches!(e, ProviderEvent::Stream(StreamUpdate::Reset { .. }))));
    let written = net.c(s).streams().send_stream(talk).unwrap().write(&bulk);
    assert_eq!(written, Ok(CREDIT as usize));
}

#[test]
fn frames_with_headroom_are_the_same_frames_one_header_later() {
    // Two sessions alike but for a byte of headroom in front of every frame of the second:
    // the same calls give the same frames (messages, chunks, grants), each behind one
    // zero byte that the carrier fills with its header.
    let mut plain = Net::standard();
    let a = plain.connect();
    let mut roomy = Net::standard();
    let b = roomy.connect();
    roomy.c(b).set_frame_headroom(1);
    roomy.p(b).set_frame_headroom(1);
    let frames = |c: &mut ConsumerEndpoint| std::iter::from_fn(|| c.poll_transmit()).collect();
    let mut sent: Vec<Vec<Vec<u8>>> = Vec::new();
    for (net, s) in [(&mut plain, a), (&mut roomy, b)] {
        net.c(s).invoke("echo", json!({"x": 1})).unwrap();
        let (_, id) = net.c(s).open_stream("upload", json!({})).unwrap();
        net.c(s).stream_send(id, &[7; 1000]).unwrap();
        sent.push(frames(net.c(s)));
    }
    let [plain_frames, roomy_frames] = [&sent[0], &sent[1]];
    assert_eq!(plain_frames.len(), 3);
    assert_eq!(roomy_frames.len(), plain_frames.len());
    for (plain_frame, roomy_frame) in plain_frames.iter().zip(roomy_frames) {
        assert_eq!(roomy_frame[0], 0);
        assert_eq!(&roomy_frame[1..], &plain_frame[..]);
    }
    // The providers take the same frames and answer alike, the grant included.
    let mut answers: Vec<Vec<Vec<u8>>> = Vec::new();
    for (net, s) in [(&mut plain, a), (&mut roomy, b)] {
        let now = net.now;
        for frame in plain_frames {
            net.sessions[s]
                .provider
                .handle_frame(now, frame, &mut net.thing);
        }
        let id = StreamId(1);
        while net.p(s).stream_read(id).is_some() {}
        let reply = std::iter::from_fn(|| net.p(s).poll_event())
            .find_map(|e| match e {
                ProviderEvent::Invoke { request, name, .. } if name == "echo" => Some(request),
                _ => None,
            })
            .unwrap();
        let Net {
            thing, sessions, ..
        } = &mut *net;
        let provider = &mut sessions[s].provider;
        provider.reply(reply, Ok(json!({"x": 1})), thing, now);
        answers.push(std::iter::from_fn(|| provider.poll_transmit(thing)).collect());
    }
    assert!(!answers[0].is_empty());
    assert_eq!(answers[1].len(), answers[0].len());
    for (plain_frame, roomy_frame) in answers[0].iter().zip(&answers[1]) {
        assert_eq!(roomy_frame[0], 0);
        assert_eq!(&roomy_frame[1..], &plain_frame[..]);
    }
}

#[test]
fn actions_count_per_address_and_per_identity_with_a_reserve_for_callers_holding_none() {
    use concord_interact::{
        ActionAffordance, ActionCaller, ActionMode, Interface, Limits, Overflow, ProviderEndpoint,
        Thing,
    };
    let mut interface = Interface::default();
    interface.actions.insert(
        "render".to_owned(),
        ActionAffordance {
            description: String::new(),
            input: json!({"type": "object"}),
            output: json!({"type": "object"}),
            mode: ActionMode::Progress,
            stream: None,
        },
    );
    let mut limits = Limits::default();
    limits.max_actions = 6;
    limits.max_actions_per_caller = 2;
    limits.reserved_actions = 2;
    let mut thing = Thing::new(
        interface.clone(),
        Default::default(),
        limits.clone(),
        Overflow::DropOldest,
    )
    .unwrap();
    let now = Instant::now();
    let streams = concord_interact::stream::StreamLimits::default();
    let mut next = 0;
    // Invokes once as `caller`: the refusal's status, or None when it started.
    let mut invoke = |thing: &mut Thing, caller: ActionCaller| {
        next += 1;
        let correlation = format!("c{next}");
        let session = thing.new_subscriber_for(caller);
        let mut endpoint =
            ProviderEndpoint::new(session, interface.clone(), limits.clone(), streams);
        let frame = concord_interact::encode_message(
            &concord_interact::Message::request(
                concord_interact::Operation::InvokeAction,
                &correlation,
            )
            .with_name("render")
            .with_input(json!({})),
            &limits,
        )
        .unwrap();
        endpoint.handle_frame(now, &frame, thing);
        std::iter::from_fn(|| endpoint.poll_transmit(thing))
            .map(|frame| serde_json::from_slice::<Value>(&frame).unwrap())
            .find(|message| message["correlationID"] == correlation.as_str())
            .and_then(|message| message["error"]["status"].as_u64())
    };
    let did = |address: &str, did: &str| ActionCaller::address(address).with_identity(did);
    // Two DIDs minted on one address share its two places (429 for the third).
    assert_eq!(
        invoke(&mut thing, did("192.0.2.7", "did:wba:a.example:1")),
        None
    );
    assert_eq!(
        invoke(&mut thing, did("192.0.2.7", "did:wba:a.example:2")),
        None
    );
    assert_eq!(
        invoke(&mut thing, did("192.0.2.7", "did:wba:a.example:3")),
        Some(429)
    );
    // One DID over two addresses has its own two places.
    assert_eq!(
        invoke(&mut thing, did("198.51.100.1", "did:wba:b.example")),
        None
    );
    assert_eq!(
        invoke(&mut thing, did("198.51.100.2", "did:wba:b.example")),
        None
    );
    assert_eq!(
        invoke(&mut thing, did("198.51.100.3", "did:wba:b.example")),
        Some(429)
    );
    assert_eq!(thing.unfinished_actions(), 4);
    // Only the reserve is left: a caller holding one is refused (503), a newcomer is not.
    assert_eq!(invoke(&mut thing, "198.51.100.1".into()), Some(503));
    assert_eq!(invoke(&mut thing, "203.0.113.9".into()), None);
    assert_eq!(invoke(&mut thing, "203.0.113.9".into()), Some(503));
    assert_eq!(invoke(&mut thing, "2001:db8::/64".into()), None);
    // The table is full.
    assert_eq!(invoke(&mut thing, "2001:db8:1::/64".into()), Some(503));
    assert_eq!(thing.unfinished_actions(), 6);
}

/// The node's gate on holding: asked only when a request would make a session that holds
/// nothing hold something (a subscription, an observation, a stream), and its problem
/// answers that request.
#[test]
fn the_holding_gate_is_asked_before_a_first_hold_only_and_its_problem_answers() {
    let mut net = Net::standard();
    let s = net.connect();
    let now = net.now;
    let mut asked = 0;
    let send = |net: &mut Net, message: Value, allow: bool, asked: &mut usize| {
        let bytes = message.to_string().into_bytes();
        let Net {
            sessions, thing, ..
        } = net;
        sessions[s].provider.handle_frame_gated(
            now,
            &bytes,
            || &mut *thing,
            || {
                *asked += 1;
                if allow {
                    Ok(())
                } else {
                    Err(Box::new(
                        Problem::of(ProblemType::LimitReached, "no room").with_status(503),
                    ))
                }
            },
        );
        net.pump(s);
        net.sent_messages(s)
    };
    // A read and a reply-mode call hold nothing: the gate is not asked.
    let read = json!({"messageType": "request", "operation": "readproperty", "name": "level", "correlationID": "r"});
    send(&mut net, read, false, &mut asked);
    assert_eq!(asked, 0);
    // Refused: the gate's problem answers, nothing is held.
    let observe = json!({"messageType": "request", "operation": "observeproperty", "name": "level", "correlationID": "o"});
    let answers = send(&mut net, observe.clone(), false, &mut asked);
    assert_eq!(asked, 1);
    assert_eq!(
        answers[0].error.as_ref().unwrap().status,
        Some(503),
        "{answers:?}"
    );
    assert!(!net.p(s).holds());
    let stream = json!({"messageType": "request", "operation": "invokeaction", "name": "talk", "correlationID": "t", "streamID": 2, "input": {}});
    let answers = send(&mut net, stream, false, &mut asked);
    assert_eq!(asked, 2);
    assert_eq!(
        answers[0].error.as_ref().unwrap().status,
        Some(503),
        "{answers:?}"
    );
    assert!(!net.p(s).holds());
    // Allowed: held; a second hold while holding does not ask again.
    send(&mut net, observe, true, &mut asked);
    assert_eq!(asked, 3);
    assert!(net.p(s).holds());
    let subscribe = json!({"messageType": "request", "operation": "subscribeevent", "name": "alarm", "correlationID": "e"});
    send(&mut net, subscribe, false, &mut asked);
    assert_eq!(asked, 3);
    let unobserve = json!({"messageType": "request", "operation": "unobserveproperty", "name": "level", "correlationID": "u"});
    send(&mut net, unobserve, false, &mut asked);
    let unsubscribe = json!({"messageType": "request", "operation": "unsubscribeevent", "name": "alarm", "correlationID": "v"});
    send(&mut net, unsubscribe, false, &mut asked);
    assert!(!net.p(s).holds(), "nothing held any more");
}

/// A provider whose reader is gone stops its requester (a STOP chunk, flag 0x20): the
/// requester hears it, its writes are refused, and its END still ends the stream in
/// order. A requester that ended its half and stops reading wants nothing more of the
/// stream: the layer cancels it (a RESET the provider hears), in either order.
#[test]
fn a_stopped_reader_stops_its_peer_and_an_unwanted_stream_is_cancelled() {
    let mut net = Net::standard();
    let s = net.connect();
    let (_, id) = net.c(s).open_stream("talk", json!({})).unwrap();
    net.c(s).stream_send(id, &frame(1)).unwrap();
    net.pump(s);
    net.provider_events(s);
    net.p(s).stream_stop(id, ResetCode::CANCELLED).unwrap();
    net.sent_messages(s);
    net.pump(s);
    assert!(chunk_flags(&net.sessions[s].to_consumer).contains(&Flags::STOP.bits()));
    assert!(net
        .consumer_events(s)
        .contains(&ConsumerEvent::Stream(StreamUpdate::Stopped {
            id,
            code: ResetCode::CANCELLED
        })));
    assert_eq!(
        net.c(s).stream_send(id, &frame(2)),
        Err(concord_interact::stream::StreamError::Stopped {
            id,
            code: ResetCode::CANCELLED
        })
    );
    net.c(s).stream_finish(id).unwrap();
    net.p(s).stream_finish(id).unwrap();
    net.pump(s);
    assert!(!net.p(s).streams().contains(id));
    assert!(!net.c(s).streams().contains(id));
    assert!(!net
        .provider_events(s)
        .iter()
        .any(|e| matches!(e, ProviderEvent::Stream(StreamUpdate::Reset { .. }))));

    for stop_first in [false, true] {
        let (_, id) = net.c(s).open_stream("talk", json!({})).unwrap();
        net.pump(s);
        net.provider_events(s);
        net.consumer_events(s);
        if stop_first {
            net.c(s).stream_stop(id, ResetCode::CANCELLED).unwrap();
            net.pump(s);
            assert!(net.c(s).streams().contains(id), "stopped, still sending");
            net.c(s).stream_finish(id).unwrap();
        } else {
            net.c(s).stream_finish(id).unwrap();
            net.pump(s);
            assert!(net.c(s).streams().contains(id), "ended, still reading");
            net.c(s).stream_stop(id, ResetCode::CANCELLED).unwrap();
        }
        net.pump(s);
        assert!(net
            .consumer_events(s)
            .contains(&ConsumerEvent::Stream(StreamUpdate::Cancelled {
                id,
                code: ResetCode::CANCELLED
            })));
        assert!(net
            .provider_events(s)
            .contains(&ProviderEvent::Stream(StreamUpdate::Reset {
                id,
                code: ResetCode::CANCELLED
            })));
        assert!(!net.p(s).streams().contains(id));
        assert!(!net.c(s).streams().contains(id));
    }
}
