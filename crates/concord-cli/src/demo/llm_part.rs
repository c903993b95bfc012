//! The demo's `--llm` section: where the rules stop. A foreign candidate they cannot map
//! (its request names the product `sku`), the model writing a handler for it that the
//! sandbox checks on the agreed cases (wrong code refused and fed back), the same candidate
//! negotiated between two agents with the model on both sides, and a natural-language
//! question through `ask`. Each step is shown with its LLM calls, tokens, time and outcome;
//! the model being wrong is an outcome, not a failure of the demo.

use std::time::{Duration, Instant};

use concord_handlers::{GenerateError, Generator, Local};
use concord_llm::{LlmClient, UsageSummary};
use concord_negotiate::{JudgeContext, ProtocolDocument};
use concord_node::{Node, Server, Settlement, Want};
use serde_json::{json, Value};

use super::catalogue;
use super::narrate::Narrator;
use super::Setup;

/// A candidate written by another agent, in its own words and layout: the rules would
/// counter it (no naming style maps `sku` to our `productId`).
pub const SKU_CANDIDATE: &str = include_str!("sku-candidate.md");

/// The question asked through `ask`.
const QUESTION: &str = "Which action gives a product's price, and what input does it take?";

/// How long one step may take before the demo stops waiting for it.
const STEP_TIMEOUT: Duration = Duration::from_secs(300);

/// What the section saw, for the JSON summary.
#[derive(Debug)]
pub struct LlmPart {
    json: Value,
    /// What did not happen as it should (the model being wrong is not listed: only a step
    /// that could not run at all).
    pub problems: Vec<String>,
    /// The LLM ledgers of the section's own requesters (the provider's is the caller's).
    pub usage: Vec<UsageSummary>,
}

impl LlmPart {
    /// The section as JSON.
    pub fn to_json(&self) -> Value {
        self.json.clone()
    }
}

/// One step's cost: the difference of a ledger before and after.
fn cost(before: UsageSummary, after: UsageSummary, wall: Duration) -> Value {
    json!({
        "llmCalls": after.calls - before.calls,
        "tokensIn": after.prompt_tokens - before.prompt_tokens,
        "tokensOut": after.completion_tokens - before.completion_tokens,
        "correctiveRetries": after.corrective_calls - before.corrective_calls,
        "cutOff": after.truncated_calls - before.truncated_calls,
        "promptOnly": after.prompt_only_calls - before.prompt_only_calls,
        "seconds": (wall.as_secs_f64() * 1000.0).round() / 1000.0,
    })
}

/// The cost in words.
fn cost_line(cost: &Value) -> String {
    format!(
        "{} LLM call(s), {} tokens in, {} out, {:.1} s",
        cost["llmCalls"],
        cost["tokensIn"],
        cost["tokensOut"],
        cost["seconds"].as_f64().unwrap_or(0.0)
    )
}

fn usage(client: &LlmClient) -> UsageSummary {
    client.usage().summary()
}

/// Runs the section against the provider `server` (whose node is `provider`).
pub async fn run(
    setup: &Setup<'_>,
    provider: &Node,
    server: &Server,
    narrate: Narrator,
) -> anyhow::Result<LlmPart> {
    let Some(client) = provider.llm().cloned() else {
        return Ok(LlmPart {
            json: Value::Null,
            problems: Vec::new(),
            usage: Vec::new(),
        });
    };
    let mut problems = Vec::new();
    narrate.say(
        "Where the rules stop (--llm): a warehouse agent proposes its own protocol for \
         getProductInfo, naming the product `sku`; no naming rule maps that to our `productId`.",
    )?;

    // 1. The rules' verdict, then the model writing the handler, checked in the sandbox.
    let document = ProtocolDocument::parse(SKU_CANDIDATE)?;
    let actions = [catalogue::action()];
    let rules = concord_negotiate::DeterministicNegotiator::new()
        .judge_now(JudgeContext::Provider { actions: &actions }, SKU_CANDIDATE);
    let rules_said = match &rules {
        concord_proto::Decision::Accept => "accepted".to_owned(),
        concord_proto::Decision::Counter { .. } => {
            "a counter-proposal (they cannot take it as written)".to_owned()
        }
        concord_proto::Decision::Reject { reason } => format!("rejected: {reason}"),
    };
    narrate.say(format!("  rules: {rules_said}"))?;
    let before = usage(&client);
    let started = Instant::now();
    let generated = tokio::time::timeout(
        STEP_TIMEOUT,
        Generator::new().with_llm(client.clone()).generate(
            &document,
            &Local::Provider(catalogue::action()),
            None,
        ),
    )
    .await;
    let step_cost = cost(before, usage(&client), started.elapsed());
    let handler = match generated {
        Ok(Ok(generated)) => {
            let refused = match generated.origin {
                concord_handlers::Origin::Llm { attempts } => attempts - 1,
                concord_handlers::Origin::Template => 0,
            };
            narrate.say(format!(
                "  handler: written by the model on {} and passed all {} case(s) in the sandbox; \
                 {refused} wrong module(s) refused before it ({})",
                generated.origin,
                generated.cases_run,
                cost_line(&step_cost)
            ))?;
            json!({"outcome": "generated", "origin": generated.origin.to_string(),
                   "cases": generated.cases_run, "refused": refused, "cost": step_cost})
        }
        Ok(Err(GenerateError::Exhausted { attempts, .. })) => {
            narrate.say(format!(
                "  handler: every module the model wrote was refused ({})",
                cost_line(&step_cost)
            ))?;
            for (number, attempt) in attempts.iter().enumerate() {
                let text = attempt.to_string();
                let first = text.lines().next().unwrap_or_default();
                narrate.say(format!("    attempt {}: {first}", number + 1))?;
            }
            json!({"outcome": "refused", "attempts": attempts.iter().map(ToString::to_string).collect::<Vec<_>>(),
                   "cost": step_cost})
        }
        Ok(Err(error)) => {
            narrate.say(format!(
                "  handler: no module: {error} ({})",
                cost_line(&step_cost)
            ))?;
            json!({"outcome": "error", "error": error.to_string(), "cost": step_cost})
        }
        Err(_) => {
            problems.push(format!(
                "the model wrote no handler within {STEP_TIMEOUT:?}"
            ));
            json!({"outcome": "timeout", "cost": step_cost})
        }
    };

    // 2. The same candidate between two agents with the model on both sides.
    let warehouse = setup.agent(Node::builder("Warehouse client"))?;
    let hosting = setup.host_did(&warehouse).await?;
    let want = Want::action(catalogue::ACTION)
        .input(json!({"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}))
        .propose(SKU_CANDIDATE);
    let before = usage(&client);
    let started = Instant::now();
    let connected = tokio::time::timeout(
        STEP_TIMEOUT,
        warehouse.node.connect_with(server.url(), want),
    )
    .await;
    let step_cost = cost(before, usage(&client), started.elapsed());
    let negotiation = match connected {
        Ok(Ok(connection)) => {
            let info = connection.info();
            let call = connection
                .call(catalogue::ACTION, json!({"sku": "P12345"}))
                .await;
            connection.close().await;
            let settled = info.settlement == Settlement::Negotiated;
            let call_text = match &call {
                Ok(output) => output.to_string(),
                Err(error) => format!("error: {error}"),
            };
            narrate.say(format!(
                "  negotiation: {:?}, the provider's handler verified on {} case(s); \
                 call {{\"sku\": \"P12345\"}} → {call_text} (provider: {})",
                info.settlement,
                info.verified_cases,
                cost_line(&step_cost)
            ))?;
            json!({"outcome": if settled { "negotiated" } else { "other" },
                   "verifiedCases": info.verified_cases, "call": call_text, "cost": step_cost})
        }
        Ok(Err(error)) => {
            narrate.say(format!(
                "  negotiation: ended, {error} (provider: {})",
                cost_line(&step_cost)
            ))?;
            json!({"outcome": "ended", "reason": error.to_string(), "cost": step_cost})
        }
        Err(_) => {
            problems.push(format!(
                "the negotiation did not end within {STEP_TIMEOUT:?}"
            ));
            json!({"outcome": "timeout", "cost": step_cost})
        }
    };
    if let Some(hosting) = hosting {
        let _ = hosting.shutdown().await;
    }

    // 3. A question in natural language, answered by the provider's model.
    let asker = setup.agent(Node::builder("Curious shopper"))?;
    let hosting = setup.host_did(&asker).await?;
    let before = usage(&client);
    let started = Instant::now();
    let asked = tokio::time::timeout(STEP_TIMEOUT, async {
        let connection = asker.node.connect(server.url(), catalogue::ACTION).await?;
        let answer = connection.ask(QUESTION).await;
        connection.close().await;
        Ok::<_, anyhow::Error>(answer?)
    })
    .await;
    let step_cost = cost(before, usage(&client), started.elapsed());
    let ask = match asked {
        Ok(Ok(answer)) => {
            let shown: String = answer.chars().take(300).collect();
            narrate.say(format!(
                "  ask: {QUESTION:?}\n    → {:?}{} ({})",
                shown,
                if shown.len() < answer.len() {
                    "…"
                } else {
                    ""
                },
                cost_line(&step_cost)
            ))?;
            json!({"outcome": "answered", "answer": answer, "cost": step_cost})
        }
        Ok(Err(error)) => {
            narrate.say(format!("  ask: failed, {error}"))?;
            json!({"outcome": "error", "error": error.to_string(), "cost": step_cost})
        }
        Err(_) => {
            problems.push(format!(
                "the question got no answer within {STEP_TIMEOUT:?}"
            ));
            json!({"outcome": "timeout", "cost": step_cost})
        }
    };
    if let Some(hosting) = hosting {
        let _ = hosting.shutdown().await;
    }
    narrate.say("")?;
    let usage = [&warehouse.node, &asker.node]
        .iter()
        .filter_map(|node| node.llm().map(|client| client.usage().summary()))
        .collect();
    Ok(LlmPart {
        json: json!({"rules": rules_said, "handler": handler, "negotiation": negotiation, "ask": ask}),
        problems,
        usage,
    })
}
