//! Node-wide bounds strangers cannot take from each other: the budget of running backend
//! calls (`Limits::max_backend_calls`, per address `max_backend_calls_per_address`) and
//! the table of long-running actions (`interaction.max_actions_per_caller` per address,
//! `interaction.reserved_actions` for callers holding none). Attackers call from
//! 127.0.0.2 and up (`NodeBuilder::local_address`), the legitimate caller from 127.0.0.1.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use concord_negotiate::ActionSpec;
use concord_node::{
    ActionError, ActionUpdate, CallError, Connection, ExecAction, Keys, Limits, Node,
    ProgressReporter, StreamIo, StreamSpec, Want,
};
use serde_json::{json, Value};

use crate::support::{build, loopback_security, quick_limits, serve, Agent};

fn text_action(name: &str) -> ActionSpec {
    let schema = json!({
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"]
    });
    ActionSpec {
        name: name.into(),
        description: format!("The {name} action."),
        input: schema.clone(),
        output: schema,
    }
}

/// A requester calling from `address`.
fn requester_from(address: &str) -> Agent {
    let address: IpAddr = address.parse().unwrap();
    build(
        Node::builder("Caller")
            .limits(quick_limits())
            .local_address(address),
    )
}

/// Our child processes (the backend's commands: not their own children, nor a shell's fork
/// before it runs its command) whose command line holds `marker`, now (read from /proc).
fn processes_with(marker: &str) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let us = std::process::id().to_string();
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|entry| {
            // `pid (comm) state ppid …`: the parent is the second field after the `)`.
            std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                    == Some(us.as_str())
            })
        })
        .filter_map(|entry| std::fs::read(entry.path().join("cmdline")).ok())
        .filter(|cmdline| String::from_utf8_lossy(cmdline).contains(marker))
        .count()
}

/// Samples `processes_with(marker)` until `stop`; the most seen at once.
fn count_processes(marker: String, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<usize> {
    tokio::task::spawn_blocking(move || {
        let mut most = 0;
        while !stop.load(Ordering::Relaxed) {
            most = most.max(processes_with(&marker));
            std::thread::sleep(Duration::from_millis(5));
        }
        most
    })
}

/// What became of a call: served, or refused with its status.
fn outcome(result: &Result<Value, CallError>) -> Result<(), i64> {
    match result {
        Ok(_) => Ok(()),
        Err(CallError::Remote { code, .. }) => Err(*code),
        Err(other) => panic!("a call failed otherwise than with a status: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_exec_calls_from_two_addresses_stays_within_the_budget_and_another_is_served() {
    const BUDGET: usize = 4;
    const FLOOD: usize = 16;
    let marker = format!("concord-budget-{}", std::process::id());
    let script = format!("cat >/dev/null; sleep 0.4; echo '{{\"text\": \"slept\"}}' # {marker}");
    let limits = Limits {
        max_backend_calls: BUDGET,
        max_backend_calls_per_address: 2,
        backend_call_wait: Duration::from_secs(5),
        // A flood waits at most its share: the rest is refused at once.
        max_backend_waiting: BUDGET,
        max_backend_waiting_per_address: 2,
        ..quick_limits()
    };
    let exec = || ExecAction::new("sh").args(["-c", &script]);
    let provider = build(
        Node::builder("Sleepy agent")
            .limits(limits)
            .action(text_action("nap"), exec())
            .notify_action(text_action("ping"), exec()),
    );
    let server = serve(&provider).await;

    // Two attackers: one over a one-action protocol, one over an interface session.
    let plain = requester_from("127.0.0.2");
    let plain = plain.node.connect(server.url(), "nap").await.unwrap();
    let interface = requester_from("127.0.0.3");
    let interface = interface
        .node
        .connect_with(server.url(), Want::interface(["nap", "ping"]))
        .await
        .unwrap();
    let legitimate = requester_from("127.0.0.1");
    let legitimate = legitimate
        .node
        .connect_with(server.url(), Want::interface(["nap"]))
        .await
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let sampler = count_processes(marker.clone(), Arc::clone(&stop));
    let flood = |peer: Connection| {
        (0..FLOOD)
            .map(move |_| {
                let peer = peer.clone();
                tokio::spawn(async move { peer.call("nap", json!({"text": "z"})).await })
            })
            .collect::<Vec<_>>()
    };
    let mut calls = flood(plain.clone());
    calls.extend(flood(interface.clone()));
    // Fire-and-forget calls take slots too (their refusals are only logged by the caller).
    for _ in 0..FLOOD {
        interface
            .notify("ping", json!({"text": "z"}))
            .await
            .unwrap();
    }
    // The legitimate call comes while the node is full.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let served = legitimate.call("nap", json!({"text": "me"})).await;
    let mut outcomes = Vec::new();
    for call in calls {
        outcomes.push(outcome(&call.await.unwrap()));
    }
    stop.store(true, Ordering::Relaxed);
    let most = sampler.await.unwrap();

    assert_eq!(served.unwrap(), json!({"text": "slept"}));
    let refused: Vec<i64> = outcomes.iter().filter_map(|o| o.err()).collect();
    let ran = outcomes.iter().filter(|o| o.is_ok()).count();
    println!(
        "flood of {}: {ran} served, refused {refused:?}; at most {most} processes at once \
         (budget {BUDGET})",
        2 * FLOOD
    );
    assert!(most <= BUDGET, "{most} processes at once, budget {BUDGET}");
    assert!(most > 0, "the sampler saw no process");
    assert!(ran > 0, "no attacking call ran");
    assert!(
        !refused.is_empty() && refused.iter().all(|code| *code == 429 || *code == 503),
        "refused {refused:?}"
    );
    assert!(refused.contains(&429), "refused {refused:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_running_stream_and_closure_calls_share_the_budget() {
    // A progress action that holds its slot until told to finish.
    let release = Arc::new(tokio::sync::Notify::new());
    let running = Arc::new(AtomicUsize::new(0));
    let long = {
        let (release, running) = (Arc::clone(&release), Arc::clone(&running));
        move |_: Value, _: ProgressReporter| {
            let (release, running) = (Arc::clone(&release), Arc::clone(&running));
            async move {
                running.fetch_add(1, Ordering::SeqCst);
                release.notified().await;
                running.fetch_sub(1, Ordering::SeqCst);
                Ok(json!({"text": "done"}))
            }
        }
    };
    let limits = Limits {
        max_backend_calls: 2,
        max_backend_calls_per_address: 2,
        backend_call_wait: Duration::from_millis(300),
        max_backend_waiting: 2,
        max_backend_waiting_per_address: 2,
        // Long-lived calls may take the whole budget here.
        max_long_backend_calls: 2,
        max_long_backend_calls_per_address: 2,
        ..quick_limits()
    };
    let provider = build(
        Node::builder("Long agent")
            .limits(limits)
            .progress_action(text_action("long"), long)
            .action(
                text_action("quick"),
                |input: Value| async move { Ok(input) },
            )
            .stream_action(
                text_action("echo"),
                StreamSpec {
                    content_type: "text/plain".into(),
                    output_content_type: None,
                    frame_bytes: 0,
                    initial_credit: 4096,
                    realtime: false,
                },
                |_: Value, stream: StreamIo| async move {
                    let StreamIo {
                        sender,
                        mut receiver,
                    } = stream;
                    while let Some(bytes) = receiver.next().await {
                        sender
                            .send(
                                bytes
                                    .map_err(|e| ActionError::internal(e.to_string()))?
                                    .to_vec(),
                            )
                            .await
                            .map_err(|e| ActionError::internal(e.to_string()))?;
                    }
                    Ok(json!({"text": "echoed"}))
                },
            ),
    );
    let server = serve(&provider).await;
    let attacker = requester_from("127.0.0.2");
    let peer = attacker
        .node
        .connect_with(server.url(), Want::interface(["long", "quick", "echo"]))
        .await
        .unwrap();
    let mut runs = Vec::new();
    for _ in 0..2 {
        runs.push(
            peer.call_with_progress("long", json!({"text": "x"}))
                .await
                .unwrap(),
        );
    }
    while running.load(Ordering::SeqCst) < 2 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Both slots are held by long-running actions: a third waits, then fails 429.
    let mut third = peer
        .call_with_progress("long", json!({"text": "x"}))
        .await
        .unwrap();
    let failed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match third.next().await.unwrap() {
                ActionUpdate::Done(result) => break result,
                _ => continue,
            }
        }
    })
    .await
    .expect("the third action neither ran nor was refused");
    match failed {
        Err(CallError::Remote { code: 429, .. }) => {}
        other => panic!("{other:?}"),
    }
    // So does a stream: its action never starts, the stream is reset with 429.
    let (_sender, mut receiver) = peer
        .open_stream("echo", json!({"text": "x"}))
        .await
        .unwrap();
    match receiver.next().await {
        Some(Err(CallError::Remote { code: 429, .. })) => {}
        other => panic!("{other:?}"),
    }
    // A closure's call counts too: the node is full for another address (503).
    let other = requester_from("127.0.0.3");
    let other = other
        .node
        .connect_with(server.url(), Want::interface(["quick"]))
        .await
        .unwrap();
    match other.call("quick", json!({"text": "x"})).await {
        Err(CallError::Remote { code: 503, .. }) => {}
        other => panic!("{other:?}"),
    }
    // Once they end, it is served.
    release.notify_waiters();
    for mut run in runs {
        while let Some(update) = run.next().await {
            if let ActionUpdate::Done(result) = update {
                assert_eq!(result.unwrap(), json!({"text": "done"}));
            }
        }
    }
    assert_eq!(
        other.call("quick", json!({"text": "y"})).await.unwrap(),
        json!({"text": "y"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attackers_filling_their_action_shares_leave_a_newcomer_a_long_running_action() {
    // Actions and streams that run until the test ends.
    let never = |_: Value, _: ProgressReporter| async move {
        std::future::pending::<()>().await;
        Ok(json!({"text": "never"}))
    };
    let hold = |_: Value, _: StreamIo| async move {
        std::future::pending::<()>().await;
        Ok(json!({"text": "never"}))
    };
    let mut limits = Limits {
        // The defaults of 2 CPUs, with room for one long-lived call beyond the attackers'.
        max_backend_calls: 8,
        max_backend_calls_per_address: 2,
        max_long_backend_calls: 5,
        max_long_backend_calls_per_address: 1,
        backend_call_wait: Duration::from_secs(1),
        ..quick_limits()
    };
    limits.interaction.max_actions = 8;
    limits.interaction.max_actions_per_caller = 2;
    limits.interaction.reserved_actions = 2;
    let provider = build(
        Node::builder("Long agent")
            .limits(limits)
            .progress_action(text_action("long"), never)
            .progress_action(
                text_action("work"),
                |input: Value, _: ProgressReporter| async move { Ok(input) },
            )
            .stream_action(
                text_action("hold"),
                StreamSpec {
                    content_type: "text/plain".into(),
                    output_content_type: None,
                    frame_bytes: 0,
                    initial_credit: 4096,
                    realtime: false,
                },
                hold,
            )
            .action(
                text_action("quick"),
                |input: Value| async move { Ok(input) },
            ),
    );
    let server = serve(&provider).await;
    // Four attacking addresses, two sessions each, each trying for three actions (under
    // a count per caller alone they would hold all 8 places) and a stream: under one
    // budget for every call they would hold all 8 backend slots.
    // Everything the attackers hold stays open until the end.
    let (mut agents, mut peers, mut runs, mut streams) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut started = 0;
    let mut refused = Vec::new();
    for address in ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"] {
        let agent = requester_from(address);
        for _ in 0..2 {
            let peer = agent
                .node
                .connect_with(server.url(), Want::interface(["long", "hold"]))
                .await
                .unwrap();
            for _ in 0..3 {
                let mut run = peer
                    .call_with_progress("long", json!({"text": "x"}))
                    .await
                    .unwrap();
                match run.next().await.unwrap() {
                    ActionUpdate::Started { .. } => started += 1,
                    ActionUpdate::Done(Err(CallError::Remote { code, .. })) => refused.push(code),
                    other => panic!("{other:?}"),
                }
                runs.push(run);
            }
            peers.push(peer);
        }
        streams.push(
            peers
                .last()
                .unwrap()
                .open_stream("hold", json!({"text": "x"}))
                .await
                .unwrap(),
        );
        agents.push(agent);
    }
    println!("attackers: {started} actions started, refused {refused:?}");
    // The legitimate caller, from another address, still starts one, and it runs to its
    // end while the attackers hold theirs.
    let legitimate = requester_from("127.0.0.1");
    let peer = legitimate
        .node
        .connect_with(server.url(), Want::interface(["work"]))
        .await
        .unwrap();
    let mut run = peer
        .call_with_progress("work", json!({"text": "mine"}))
        .await
        .unwrap();
    match run.next().await.unwrap() {
        ActionUpdate::Started { .. } => {}
        other => panic!("the legitimate caller was refused: {other:?}"),
    }
    let done = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match run.next().await {
                Some(ActionUpdate::Done(result)) => break result,
                Some(_) => continue,
                None => panic!("the legitimate action's updates ended with no result"),
            }
        }
    })
    .await
    .expect("the legitimate action neither ran nor was refused");
    assert_eq!(done.unwrap(), json!({"text": "mine"}));
    // A request-reply call from yet another address is served too.
    let other = requester_from("127.0.0.6");
    let other = other
        .node
        .connect_with(server.url(), Want::interface(["quick"]))
        .await
        .unwrap();
    assert_eq!(
        other.call("quick", json!({"text": "y"})).await.unwrap(),
        json!({"text": "y"})
    );
    // Three addresses took the shared six places, the fourth one reserved place.
    assert_eq!(started, 7);
    assert!(
        refused.iter().all(|code| *code == 429 || *code == 503),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dids_minted_on_one_address_share_its_long_running_actions() {
    let never = |_: Value, _: ProgressReporter| async move {
        std::future::pending::<()>().await;
        Ok(json!({"text": "never"}))
    };
    let mut limits = quick_limits();
    limits.interaction.max_actions = 8;
    limits.interaction.max_actions_per_caller = 2;
    limits.interaction.reserved_actions = 2;
    let provider = build(
        Node::builder("Long agent")
            .keys(Keys::generate())
            .security(loopback_security())
            .limits(limits)
            .progress_action(text_action("long"), never),
    );
    let server = serve(&provider).await;
    // Three DIDs, each served (so that its document resolves) and calling from 127.0.0.6.
    let (mut runs, mut kept, mut started, mut refused) = (Vec::new(), Vec::new(), 0, Vec::new());
    for _ in 0..3 {
        let agent = build(
            Node::builder("Minted")
                .keys(Keys::generate())
                .security(loopback_security())
                .limits(quick_limits())
                .local_address("127.0.0.6".parse().unwrap()),
        );
        let own = agent.node.serve("127.0.0.1:0").await.unwrap();
        let peer = agent
            .node
            .connect_with(server.url(), Want::interface(["long"]))
            .await
            .unwrap();
        assert_eq!(peer.info().signed_as.as_deref(), own.did());
        for _ in 0..2 {
            let mut run = peer
                .call_with_progress("long", json!({"text": "x"}))
                .await
                .unwrap();
            match run.next().await.unwrap() {
                ActionUpdate::Started { .. } => started += 1,
                ActionUpdate::Done(Err(CallError::Remote { code, .. })) => refused.push(code),
                other => panic!("{other:?}"),
            }
            runs.push(run);
        }
        kept.push((agent, own, peer));
    }
    println!("three DIDs on one address: {started} actions started, refused {refused:?}");
    // The address's share, whatever the number of DIDs.
    assert_eq!(started, 2);
    assert_eq!(refused, [429, 429, 429, 429]);
}

/// Strangers from eight addresses keep every backend slot busy with calls that hold it
/// 1 s each, more of theirs always waiting; a caller from another address keeps two calls
/// that take no time in flight. A freed slot goes to the address that has had the least
/// slot time lately, so the caller's calls are served next, not after a round of the
/// strangers' (a grant to each of the six or so waiting addresses, 1 s each on two slots:
/// longer than the caller may wait, 2 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_whose_calls_take_no_time_is_not_queued_behind_rounds_of_slow_calls() {
    let nap = |input: Value| async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok::<_, ActionError>(input)
    };
    let quick = |input: Value| async move { Ok::<_, ActionError>(input) };
    let limits = Limits {
        max_backend_calls: 2,
        max_backend_calls_per_address: 1,
        backend_call_wait: Duration::from_secs(2),
        ..quick_limits()
    };
    let provider = build(
        Node::builder("Mixed agent")
            .limits(limits)
            .action(text_action("nap"), nap)
            .action(text_action("quick"), quick),
    );
    let server = serve(&provider).await;

    let stop = Arc::new(AtomicBool::new(false));
    let mut strangers = Vec::new();
    let mut flooding = Vec::new();
    for n in 2..10 {
        let stranger = requester_from(&format!("127.0.0.{n}"));
        let peer = stranger
            .node
            .connect_with(server.url(), Want::interface(["nap"]))
            .await
            .unwrap();
        // Three calls of each stranger in flight at all times, until the test ends.
        for _ in 0..3 {
            let (peer, stop) = (peer.clone(), Arc::clone(&stop));
            flooding.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let _ = peer.call("nap", json!({"text": "z"})).await;
                }
            }));
        }
        strangers.push((stranger, peer));
    }
    // Every slot taken, strangers waiting, and every stranger's address served at least
    // once (eight addresses, 1 s each on two slots): none is new to the budget.
    tokio::time::sleep(Duration::from_millis(4500)).await;

    let caller = requester_from("127.0.0.1");
    let peer = caller
        .node
        .connect_with(server.url(), Want::interface(["quick"]))
        .await
        .unwrap();
    let calling: Vec<_> = (0..2)
        .map(|lane| {
            let peer = peer.clone();
            tokio::spawn(async move {
                let mut outcomes = Vec::new();
                for n in 0..8 {
                    let text = format!("{lane}-{n}");
                    let result = peer.call("quick", json!({ "text": text })).await;
                    outcomes.push(outcome(&result));
                }
                outcomes
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for lane in calling {
        outcomes.extend(lane.await.unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    for task in flooding {
        task.await.unwrap();
    }
    let refused: Vec<i64> = outcomes.iter().filter_map(|o| o.err()).collect();
    assert!(
        refused.is_empty(),
        "{} of {} of the caller's calls served beside the strangers' slow calls; refused {refused:?}",
        outcomes.len() - refused.len(),
        outcomes.len()
    );
}
