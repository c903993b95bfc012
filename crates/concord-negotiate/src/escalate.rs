//! Deterministic first, the LLM only for what rules over schemas cannot settle.

use std::time::Instant;

use concord_proto::{Decision, FixDecision};
use serde_json::Value;

use crate::action::{ActionSpec, Need};
use crate::complexity::SchemaLimits;
use crate::deterministic::{DeterministicNegotiator, Judged};
use crate::document::ProtocolDocument;
use crate::llm::LlmNegotiator;
use crate::policy::{Decided, JudgeContext, NegotiateError, Negotiator, Previous, Step};
use crate::test_cases::TestCases;
use crate::validation::ProtocolSchemas;

/// The deterministic negotiator, escalating to an [`LlmNegotiator`] only when the rules
/// cannot settle a step. Candidates the rules accept as written never reach the LLM.
///
/// | step | settled by the rules | escalated to the LLM |
/// |---|---|---|
/// | draft | the peer's action meets our need ([`DeterministicNegotiator::draft_now`] succeeds) | [`NegotiateError::CannotDraft`]: the action does not mechanically meet our need (say, it names a field differently than our need does) |
/// | judge | the rules accept the candidate as written (its schemas map onto ours, in any layout and naming style) | the rules would counter or reject it: a candidate they cannot map (other field names, a prose-only or "based on URI … with these changes" document, a missing schema), which the LLM may accept as written; the LLM then writes the handler when no template fits, and that code must pass the agreed test cases in the sandbox |
/// | draft test cases | the agreed protocol's schemas compile: the rules' cases (or their error) | the agreed protocol has no usable schemas (e.g. it was agreed as "based on URI") |
/// | judge test cases | the schemas compile and the cases parse: accept, or reject naming the violations | no usable schemas, or cases in a layout the parser does not know |
/// | diagnose | the schemas compile: accept when our recent messages break them, else reject asking the peer for the JSON pointer at fault | no usable schemas |
///
/// So a protocol the rules can map is negotiated, tested and diagnosed with zero LLM
/// calls, even when an LLM is configured.
///
/// An escalated step is recorded as [`PolicyKind::Llm`](crate::PolicyKind::Llm), its wall
/// time including the deterministic attempt; every other step as
/// [`PolicyKind::Deterministic`](crate::PolicyKind::Deterministic) with zero LLM calls.
///
/// A candidate whose schemas are over the [`SchemaLimits`]
/// ([`EscalatingNegotiator::with_schema_limits`]) is rejected by the rules, naming the
/// limit, and never reaches the LLM.
///
/// Without an LLM ([`EscalatingNegotiator::without_llm`]) it is the rules alone: a step they
/// cannot settle is answered as [`DeterministicNegotiator`] answers it (a draft that cannot
/// be made is an error; a candidate they cannot serve as written gets a counter-proposal,
/// or a rejection naming the unsatisfiable field).
#[derive(Debug, Clone)]
pub struct EscalatingNegotiator {
    rules: DeterministicNegotiator,
    llm: Option<LlmNegotiator>,
}

impl EscalatingNegotiator {
    /// Rules first, `llm` for the rest.
    pub fn new(llm: LlmNegotiator) -> Self {
        Self {
            rules: DeterministicNegotiator::new(),
            llm: Some(llm),
        }
    }

    /// The rules alone: what a node without an LLM negotiates with.
    pub fn without_llm() -> Self {
        Self {
            rules: DeterministicNegotiator::new(),
            llm: None,
        }
    }

    /// The same negotiator, reading candidates' schemas within `limits` (the rules' and
    /// the LLM's: a candidate over them is rejected by the rules and never reaches the LLM).
    pub fn with_schema_limits(self, limits: SchemaLimits) -> Self {
        Self {
            rules: self.rules.with_schema_limits(limits),
            llm: self.llm.map(|llm| llm.with_schema_limits(limits)),
        }
    }

    /// The limits candidates' schemas are read within.
    pub fn schema_limits(&self) -> &SchemaLimits {
        self.rules.schema_limits()
    }

    /// The LLM negotiator steps escalate to, if any.
    pub fn llm(&self) -> Option<&LlmNegotiator> {
        self.llm.as_ref()
    }
}

/// The LLM's answer (or failure), its wall time counted from the start of the deterministic attempt.
fn escalated<T>(
    start: Instant,
    result: Result<Decided<T>, NegotiateError>,
) -> Result<Decided<T>, NegotiateError> {
    let wall = start.elapsed();
    match result {
        Ok(mut decided) => {
            decided.record.wall = wall;
            Ok(decided)
        }
        Err(NegotiateError::Llm(mut failed)) => {
            failed.record.wall = wall;
            Err(NegotiateError::Llm(failed))
        }
        Err(other) => Err(other),
    }
}

impl Negotiator for EscalatingNegotiator {
    async fn draft(
        &self,
        need: &Need,
        peer_action: &ActionSpec,
    ) -> Result<Decided<String>, NegotiateError> {
        let start = Instant::now();
        match self.rules.draft_now(need, peer_action) {
            Ok(candidate) => Ok(Decided::deterministic(Step::Draft, start, candidate)),
            Err(error @ NegotiateError::CannotDraft { .. }) => match &self.llm {
                Some(llm) => escalated(start, llm.draft(need, peer_action).await),
                None => Err(error),
            },
            Err(other) => Err(other),
        }
    }

    async fn judge(
        &self,
        context: JudgeContext<'_>,
        candidate: &str,
        previous: Previous<'_>,
    ) -> Result<Decided<Decision>, NegotiateError> {
        let start = Instant::now();
        match (self.rules.judge_checked(context, candidate), &self.llm) {
            (Judged::Open(decision), Some(llm)) if !matches!(decision, Decision::Accept) => {
                escalated(start, llm.judge(context, candidate, previous).await)
            }
            (Judged::Open(decision) | Judged::Final(decision), _) => {
                Ok(Decided::deterministic(Step::Judge, start, decision))
            }
        }
    }

    async fn draft_test_cases(
        &self,
        protocol: &ProtocolDocument,
    ) -> Result<Decided<String>, NegotiateError> {
        let start = Instant::now();
        match ProtocolSchemas::compile(protocol) {
            Ok(schemas) => {
                let cases = self.rules.draft_test_cases_from(protocol, &schemas)?;
                Ok(Decided::deterministic(Step::DraftTestCases, start, cases))
            }
            Err(_) => match &self.llm {
                Some(llm) => escalated(start, llm.draft_test_cases(protocol).await),
                None => self.rules.draft_test_cases(protocol).await,
            },
        }
    }

    async fn judge_test_cases(
        &self,
        protocol: &ProtocolDocument,
        test_cases: &str,
    ) -> Result<Decided<Decision>, NegotiateError> {
        let start = Instant::now();
        let readable = ProtocolSchemas::compile(protocol)
            .ok()
            .and_then(|schemas| Some((schemas, TestCases::parse(test_cases).ok()?)));
        match readable {
            Some((schemas, cases)) => {
                let decision = self.rules.judge_cases(&schemas, &cases);
                Ok(Decided::deterministic(
                    Step::JudgeTestCases,
                    start,
                    decision,
                ))
            }
            None => match &self.llm {
                Some(llm) => escalated(start, llm.judge_test_cases(protocol, test_cases).await),
                None => self.rules.judge_test_cases(protocol, test_cases).await,
            },
        }
    }

    async fn diagnose(
        &self,
        protocol: &ProtocolDocument,
        error_description: &str,
        our_messages: &[Value],
    ) -> Result<Decided<FixDecision>, NegotiateError> {
        let start = Instant::now();
        match ProtocolSchemas::compile(protocol) {
            Ok(schemas) => {
                let decision = self.rules.diagnose_with(&schemas, our_messages);
                Ok(Decided::deterministic(Step::Diagnose, start, decision))
            }
            Err(_) => match &self.llm {
                Some(llm) => escalated(
                    start,
                    llm.diagnose(protocol, error_description, our_messages)
                        .await,
                ),
                None => {
                    self.rules
                        .diagnose(protocol, error_description, our_messages)
                        .await
                }
            },
        }
    }
}
