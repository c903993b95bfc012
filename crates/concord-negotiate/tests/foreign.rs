//! The foreign corpus (`tests/foreign/`, loaded by `concord_fixtures::foreign`) through the
//! deterministic rules: a provider serving every corpus action judges each candidate as
//! written, with no LLM, and reaches the decision the manifest expects. A counter-proposal
//! must then be one the requester accepts; a rejection must name the field at fault.

use concord_fixtures::foreign::{corpus, Expectation, ForeignCandidate};
use concord_negotiate::{
    ActionSpec, DeterministicNegotiator, JudgeContext, Need, ProtocolDocument,
};
use concord_proto::Decision;

/// What the rules said about one candidate, in one line.
fn describe(decision: &Decision) -> String {
    match decision {
        Decision::Accept => "accept".to_owned(),
        Decision::Counter {
            modification_summary,
            ..
        } => format!("counter ({})", one_line(modification_summary)),
        Decision::Reject { reason } => format!("reject ({})", one_line(reason)),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Checks one candidate; `Err` says how the decision differs from the expected one.
fn check(
    negotiator: &DeterministicNegotiator,
    actions: &[ActionSpec],
    candidate: &ForeignCandidate,
) -> Result<(), String> {
    let decision = negotiator.judge_now(JudgeContext::Provider { actions }, candidate.text);
    let got = || describe(&decision);
    match (&candidate.expect, &decision) {
        (Expectation::Accept, Decision::Accept) => Ok(()),
        (
            Expectation::Counter,
            Decision::Counter {
                candidate: counter,
                modification_summary,
            },
        ) => {
            if modification_summary.trim().is_empty() {
                return Err("countered with an empty modificationSummary".into());
            }
            let Some(peer_action) = actions.iter().find(|a| a.name == candidate.action) else {
                return Err(format!("no action `{}` in the corpus", candidate.action));
            };
            if let Err(error) = ProtocolDocument::parse(counter) {
                return Err(format!("the counter-proposal does not parse: {error}"));
            }
            let need = Need {
                action: candidate.action.clone(),
                input: None,
                output: None,
            };
            match negotiator.judge_now(
                JudgeContext::Requester {
                    need: &need,
                    peer_action,
                },
                counter,
            ) {
                Decision::Accept => Ok(()),
                other => Err(format!(
                    "countered, but the requester does not accept the counter-proposal: {}",
                    describe(&other)
                )),
            }
        }
        (Expectation::Reject { field }, Decision::Reject { reason }) => {
            if reason.contains(field.as_str()) {
                Ok(())
            } else {
                Err(format!(
                    "rejected, but the reason does not name `{field}`: {}",
                    one_line(reason)
                ))
            }
        }
        (expected, _) => Err(format!("expected {}, got {}", expected.name(), got())),
    }
}

#[test]
fn every_foreign_candidate_gets_the_decision_the_manifest_expects() {
    let corpus = corpus();
    let actions = corpus.specs();
    let negotiator = DeterministicNegotiator::new();
    let (mut accepted, mut countered, mut rejected) = (0, 0, 0);
    let mut failures = Vec::new();
    for candidate in &corpus.candidates {
        match negotiator.judge_now(JudgeContext::Provider { actions: &actions }, candidate.text) {
            Decision::Accept => accepted += 1,
            Decision::Counter { .. } => countered += 1,
            Decision::Reject { .. } => rejected += 1,
        }
        if let Err(problem) = check(&negotiator, &actions, candidate) {
            failures.push(format!("{}: {problem}", candidate.file));
        }
    }
    println!("foreign corpus: {accepted} accepted, {countered} countered, {rejected} rejected");
    let expected = |name: &str| {
        corpus
            .candidates
            .iter()
            .filter(|c| c.expect.name() == name)
            .count()
    };
    println!(
        "foreign corpus, expected: {} accepted, {} countered, {} rejected",
        expected("accept"),
        expected("counter"),
        expected("reject")
    );
    for failure in &failures {
        println!("  {failure}");
    }
    assert!(
        failures.is_empty(),
        "{} of {} candidates got another decision than expected:\n{}",
        failures.len(),
        corpus.candidates.len(),
        failures.join("\n")
    );
}

/// The same candidate judged twice gets the same decision: the rules are deterministic.
#[test]
fn the_rules_decide_every_foreign_candidate_the_same_way_twice() {
    let corpus = corpus();
    let actions = corpus.specs();
    let negotiator = DeterministicNegotiator::new();
    for candidate in &corpus.candidates {
        let context = JudgeContext::Provider { actions: &actions };
        assert_eq!(
            negotiator.judge_now(context, candidate.text),
            negotiator.judge_now(context, candidate.text),
            "{}",
            candidate.file
        );
    }
}
