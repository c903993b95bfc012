//! Two agents with a real model on both sides (llama.cpp with SmolLM2-135M-Instruct,
//! started by the shared harness in `interop/llama`; temperature 0, a fixed seed): a
//! natural-language question answered by the provider's model, and a candidate the rules
//! cannot map, judged by the model, whose handler the model writes and the sandbox checks
//! on the agreed cases before it is used. The tiny model is often wrong; each test asserts
//! a checked outcome or a typed failure. Ignored by default; `.ci/run` runs them.

#[path = "../../../../interop/llama/harness.rs"]
mod llama;

use std::time::Duration;

use concord_llm::LlmConfig;
use concord_node::{ConnectError, Limits, Node, Settlement, Want};
use concord_proto::Capability;
use llama::{LlamaServer, SEED};
use serde_json::json;

use crate::llm::SKU_CANDIDATE;
use crate::support::*;

fn model(server: &LlamaServer, max_tokens: u32) -> LlmConfig {
    LlmConfig::new(&server.base_url, &server.model)
        .with_request_timeout(Duration::from_secs(120))
        .with_max_retries(0)
        .with_temperature(0.0)
        .with_seed(SEED)
        .with_max_tokens(max_tokens)
}

/// Room for a few model answers at 20 to 80 tokens a second.
fn model_limits() -> Limits {
    Limits {
        negotiation_timeout: Duration::from_secs(180),
        code_generation_timeout: Duration::from_secs(180),
        ..quick_limits()
    }
}

fn agents(server: &LlamaServer, max_tokens: u32) -> (Agent, Agent) {
    let provider = build(
        Node::builder("Product agent")
            .description("Product information for a small shop.")
            .action(catalogue::action(), catalogue::answer)
            .llm(model(server, max_tokens))
            .limits(model_limits()),
    );
    let requester = build(
        Node::builder("Requester")
            .llm(model(server, max_tokens))
            .limits(model_limits()),
    );
    (provider, requester)
}

#[tokio::test]
#[ignore = "needs a real model: set CONCORD_LLAMA_PYTHON (`.ci/run` does)"]
async fn two_agents_with_the_real_model_talk_in_natural_language() {
    let llama = LlamaServer::start();
    let (provider, requester) = agents(&llama, 160);
    let server = serve(&provider).await;

    let connection = requester.connect(&server, "getProductInfo").await;
    assert!(connection
        .info()
        .capabilities
        .contains(Capability::NaturalLanguageNegotiation));
    let before = provider.node.llm().unwrap().usage().summary();

    let answer = connection
        .ask("Which action gives a product's price, and what input does it take? One sentence.")
        .await
        .unwrap();

    // The provider's model answered (its text), or its failure came back typed, in words.
    let after = provider.node.llm().unwrap().usage().summary();
    assert_eq!(after.calls, before.calls + 1);
    assert!(
        after.prompt_tokens > before.prompt_tokens,
        "real usage recorded"
    );
    assert!(!answer.trim().is_empty());
    if answer.starts_with("(no answer: this agent's LLM failed: ") {
        assert!(answer.contains("was cut off after"), "{answer}");
    }
    eprintln!("answer: {answer}");
    connection.close().await;
}

#[tokio::test]
#[ignore = "needs a real model: set CONCORD_LLAMA_PYTHON (`.ci/run` does)"]
async fn a_candidate_the_rules_cannot_map_is_judged_and_coded_by_the_model_or_refused_typed() {
    let llama = LlamaServer::start();
    let (provider, requester) = agents(&llama, 384);
    let server = serve(&provider).await;
    let want = Want::action("getProductInfo")
        .input(json!({"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}))
        .propose(SKU_CANDIDATE);

    let connected = requester.node.connect_with(server.url(), want).await;

    let usage = provider.node.llm().unwrap().usage().summary();
    assert!(usage.calls >= 1 && usage.prompt_tokens > 0, "{usage:?}");
    match connected {
        Ok(connection) => {
            let info = connection.info();
            // Code is used only after it passed every agreed case in the sandbox.
            assert_eq!(info.settlement, Settlement::Negotiated);
            assert!(info.verified_cases >= 2, "{info:?}");
            eprintln!("negotiated; provider LLM: {usage:?}");
            connection.close().await;
        }
        Err(error @ ConnectError::Closed(_)) => {
            // The session ended with a reason in words (a rejection, or code that failed
            // its cases), not a hang or a crash.
            let text = error.to_string();
            assert!(
                ["code generation failed", "rejected", "could not judge"]
                    .iter()
                    .any(|reason| text.contains(reason)),
                "{text}"
            );
            eprintln!("typed failure: {text}; provider LLM: {usage:?}");
        }
        Err(other) => panic!("expected a negotiated session or a closed one, got {other}"),
    }
}
