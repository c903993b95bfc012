//! The foreign corpus (`concord_fixtures::foreign`) between two nodes: a provider serving
//! every corpus action, and per candidate a fresh requester proposing that candidate as
//! written. Accepted and countered candidates must reach Ready with no LLM and then carry
//! the actions' calls (the published output, and a 404 for an input no example has);
//! rejected ones must fail with an error naming the field.

use std::time::Duration;

use concord_fixtures::foreign::{corpus, Corpus, Expectation, ForeignCandidate};
use concord_negotiate::Step;
use concord_node::{CallError, Node, Settlement, Want};
use concord_proto::ProtocolHash;

use crate::support::*;

/// Longest a connection (discovery, negotiation, code, verification) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(40);
/// Longest one call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// How a candidate's negotiation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Ready on the candidate's own text.
    AgreedAsWritten,
    /// Ready on a counter-proposal the requester accepted.
    Countered,
    /// The connection failed (rejected, or any other error).
    Failed,
}

/// The provider: every corpus action, each answering its examples and 404 otherwise.
fn corpus_provider(corpus: &Corpus) -> Agent {
    let mut builder = Node::builder("Foreign corpus provider")
        .description("Products, weather, currencies, translation, orders, calendars and stocks.")
        .limits(quick_limits());
    for action in &corpus.actions {
        builder = builder.action(action.spec.clone(), action.backend());
    }
    build(builder)
}

/// Negotiates one candidate through a fresh requester and checks what follows.
/// Returns how it ended and, when that is not what the manifest expects, why.
async fn run(
    corpus: &Corpus,
    candidate: &ForeignCandidate,
    url: &str,
) -> (Outcome, Result<(), String>) {
    let requester = build(Node::builder("Foreign requester").limits(quick_limits()));
    let want = Want::action(candidate.action.as_str()).propose(candidate.text);
    let connected =
        match tokio::time::timeout(CONNECT_TIMEOUT, requester.node.connect_with(url, want)).await {
            Ok(result) => result,
            Err(_) => {
                return (
                    Outcome::Failed,
                    Err(format!(
                        "no connection within {CONNECT_TIMEOUT:?} (expected {})",
                        candidate.expect.name()
                    )),
                )
            }
        };
    let connection = match connected {
        Ok(connection) => connection,
        Err(error) => {
            let text = error.to_string();
            let verdict = match &candidate.expect {
                Expectation::Reject { field } if text.contains(field.as_str()) => Ok(()),
                Expectation::Reject { field } => Err(format!(
                    "the error does not name `{field}`: {}",
                    one_line(&text)
                )),
                expected => Err(format!(
                    "expected {}, the connection failed: {}",
                    expected.name(),
                    one_line(&text)
                )),
            };
            return (Outcome::Failed, verdict);
        }
    };
    let info = connection.info().clone();
    let judged = info
        .accounting
        .steps
        .iter()
        .any(|step| step.step == Step::Judge);
    let as_written = info.hash == ProtocolHash::of_text(candidate.text);
    let outcome = if as_written && !judged {
        Outcome::AgreedAsWritten
    } else {
        Outcome::Countered
    };
    let verdict = async {
        match (&candidate.expect, outcome) {
            (Expectation::Accept, Outcome::AgreedAsWritten)
            | (Expectation::Counter, Outcome::Countered) => {}
            (Expectation::Reject { .. }, _) => {
                return Err("expected reject, the connection reached Ready".to_owned())
            }
            (expected, got) => {
                return Err(format!(
                    "expected {}, the connection reached Ready {}",
                    expected.name(),
                    if got == Outcome::Countered {
                        "on a counter-proposal"
                    } else {
                        "on the candidate as written"
                    }
                ))
            }
        }
        if info.settlement != Settlement::Negotiated {
            return Err(format!("settled by {:?}, not negotiated", info.settlement));
        }
        if info.action != candidate.action {
            return Err(format!("connected to `{}`", info.action));
        }
        let llm_calls = u64::from(info.accounting.llm_calls())
            + info.code.iter().map(|code| code.llm_calls).sum::<u64>();
        if llm_calls != 0 {
            return Err(format!("{llm_calls} LLM calls"));
        }
        let Some(action) = corpus.action(&candidate.action) else {
            return Err(format!("no action `{}` in the corpus", candidate.action));
        };
        for example in &action.examples {
            let call = connection.call(&candidate.action, example.input.clone());
            match tokio::time::timeout(CALL_TIMEOUT, call).await {
                Ok(Ok(output)) if output == example.output => {}
                Ok(Ok(output)) => {
                    return Err(format!(
                        "call {} returned {output}, not {}",
                        example.input, example.output
                    ))
                }
                Ok(Err(error)) => return Err(format!("call {} failed: {error}", example.input)),
                Err(_) => return Err(format!("call {} took over {CALL_TIMEOUT:?}", example.input)),
            }
        }
        let call = connection.call(&candidate.action, action.not_found.clone());
        match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(Err(CallError::Remote { code: 404, .. })) => Ok(()),
            Ok(Err(error)) => Err(format!(
                "call {} failed with {error}, not a 404",
                action.not_found
            )),
            Ok(Ok(output)) => Err(format!(
                "call {} returned {output}, not a 404",
                action.not_found
            )),
            Err(_) => Err(format!(
                "call {} took over {CALL_TIMEOUT:?}",
                action.not_found
            )),
        }
    }
    .await;
    connection.close().await;
    (outcome, verdict)
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_foreign_candidate_negotiates_between_two_nodes_as_the_manifest_expects() {
    let corpus = corpus();
    let provider = corpus_provider(&corpus);
    let server = serve(&provider).await;
    let url = server.url().to_owned();
    // `CONCORD_FOREIGN_ONLY=09` runs only the candidates whose file name contains `09`.
    let only = std::env::var("CONCORD_FOREIGN_ONLY").ok();
    let candidates: Vec<&ForeignCandidate> = corpus
        .candidates
        .iter()
        .filter(|candidate| {
            only.as_deref()
                .is_none_or(|only| candidate.file.contains(only))
        })
        .collect();
    let runs = candidates
        .iter()
        .map(|candidate| run(&corpus, candidate, &url));
    let results = futures_util::future::join_all(runs).await;
    let count = |wanted: Outcome| {
        results
            .iter()
            .filter(|(outcome, _)| *outcome == wanted)
            .count()
    };
    println!(
        "foreign corpus over nodes: {} agreed as written, {} countered, {} rejected or failed",
        count(Outcome::AgreedAsWritten),
        count(Outcome::Countered),
        count(Outcome::Failed)
    );
    let failures: Vec<String> = candidates
        .iter()
        .zip(&results)
        .filter_map(|(candidate, (_, verdict))| {
            verdict
                .as_ref()
                .err()
                .map(|problem| format!("{}: {problem}", candidate.file))
        })
        .collect();
    for failure in &failures {
        println!("  {failure}");
    }
    assert!(
        failures.is_empty(),
        "{} of {} candidates did not end as expected:\n{}",
        failures.len(),
        candidates.len(),
        failures.join("\n")
    );
}
