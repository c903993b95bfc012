//! The negotiation policy a node uses: the rules alone, or the rules escalating to an LLM.

use concord_negotiate::{
    ActionSpec, Decided, DeterministicNegotiator, EscalatingNegotiator, JudgeContext, Need,
    NegotiateError, Negotiator, Previous, ProtocolDocument,
};
use concord_proto::{Decision, FixDecision};
use serde_json::Value;

/// [`DeterministicNegotiator`] without an LLM; [`EscalatingNegotiator`] with one.
#[derive(Debug, Clone)]
pub(crate) enum Policy {
    Rules(DeterministicNegotiator),
    Escalating(Box<EscalatingNegotiator>),
}

impl Negotiator for Policy {
    async fn draft(
        &self,
        need: &Need,
        peer_action: &ActionSpec,
    ) -> Result<Decided<String>, NegotiateError> {
        match self {
            Self::Rules(rules) => rules.draft(need, peer_action).await,
            Self::Escalating(escalating) => escalating.draft(need, peer_action).await,
        }
    }

    async fn judge(
        &self,
        context: JudgeContext<'_>,
        candidate: &str,
        previous: Previous<'_>,
    ) -> Result<Decided<Decision>, NegotiateError> {
        match self {
            Self::Rules(rules) => rules.judge(context, candidate, previous).await,
            Self::Escalating(escalating) => escalating.judge(context, candidate, previous).await,
        }
    }

    async fn draft_test_cases(
        &self,
        protocol: &ProtocolDocument,
    ) -> Result<Decided<String>, NegotiateError> {
        match self {
            Self::Rules(rules) => rules.draft_test_cases(protocol).await,
            Self::Escalating(escalating) => escalating.draft_test_cases(protocol).await,
        }
    }

    async fn judge_test_cases(
        &self,
        protocol: &ProtocolDocument,
        test_cases: &str,
    ) -> Result<Decided<Decision>, NegotiateError> {
        match self {
            Self::Rules(rules) => rules.judge_test_cases(protocol, test_cases).await,
            Self::Escalating(escalating) => escalating.judge_test_cases(protocol, test_cases).await,
        }
    }

    async fn diagnose(
        &self,
        protocol: &ProtocolDocument,
        error_description: &str,
        our_messages: &[Value],
    ) -> Result<Decided<FixDecision>, NegotiateError> {
        match self {
            Self::Rules(rules) => {
                rules
                    .diagnose(protocol, error_description, our_messages)
                    .await
            }
            Self::Escalating(escalating) => {
                escalating
                    .diagnose(protocol, error_description, our_messages)
                    .await
            }
        }
    }
}
