//! Hostile candidates (`tests/hostile/`): small documents, in the layout of the foreign
//! corpus, whose schemas are expensive to compile or read. Each is over one of the default
//! `SchemaLimits` and is rejected, in either role, naming the limit, the JSON pointer and
//! the count; none reaches the LLM. With that limit raised, the same document is read.

mod support;

use concord_negotiate::complexity::SchemaLimits;
use concord_negotiate::{
    DeterministicNegotiator, DocumentError, JudgeContext, ProtocolDocument, ProtocolSchemas,
};
use concord_proto::Decision;
use support::{need, product_action};

/// One hostile candidate: its file, the limit it is over (the `SchemaLimits` field), the
/// schema it is in, the JSON pointer named (when it is fixed by the document alone), and
/// limits under which it is read.
struct Hostile {
    file: &'static str,
    text: &'static str,
    field: &'static str,
    section: &'static str,
    pointer: Option<&'static str>,
    raised: fn(SchemaLimits) -> SchemaLimits,
}

fn hostile() -> Vec<Hostile> {
    vec![
        Hostile {
            file: "01-deep-nesting.md",
            text: include_str!("hostile/01-deep-nesting.md"),
            field: "max_depth",
            section: "request",
            pointer: None,
            raised: |limits| SchemaLimits {
                max_depth: 100,
                ..limits
            },
        },
        Hostile {
            file: "02-huge-enum.md",
            text: include_str!("hostile/02-huge-enum.md"),
            field: "max_enum_values",
            section: "request",
            pointer: Some("/properties/productId/enum"),
            raised: |limits| SchemaLimits {
                max_enum_values: 2_000,
                ..limits
            },
        },
        Hostile {
            file: "03-many-properties.md",
            text: include_str!("hostile/03-many-properties.md"),
            field: "max_members",
            section: "response",
            pointer: Some("/properties/data/properties"),
            raised: |limits| SchemaLimits {
                max_members: 300,
                ..limits
            },
        },
        Hostile {
            file: "04-wide-anyof.md",
            text: include_str!("hostile/04-wide-anyof.md"),
            field: "max_branches",
            section: "response",
            pointer: Some("/properties/data/anyOf"),
            raised: |limits| SchemaLimits {
                max_branches: 100,
                ..limits
            },
        },
        Hostile {
            file: "05-long-pattern.md",
            text: include_str!("hostile/05-long-pattern.md"),
            field: "max_pattern_len",
            section: "request",
            pointer: Some("/properties/productId/pattern"),
            raised: |limits| SchemaLimits {
                max_pattern_len: 4_096,
                ..limits
            },
        },
        Hostile {
            file: "06-many-patterns.md",
            text: include_str!("hostile/06-many-patterns.md"),
            field: "max_pattern_total",
            section: "request",
            pointer: None,
            raised: |limits| SchemaLimits {
                max_pattern_total: 32_768,
                ..limits
            },
        },
        Hostile {
            file: "07-many-nodes.md",
            text: include_str!("hostile/07-many-nodes.md"),
            field: "max_nodes",
            section: "response",
            pointer: None,
            raised: |limits| SchemaLimits {
                max_nodes: 6_000,
                ..limits
            },
        },
        Hostile {
            file: "08-ref-fan-out.md",
            text: include_str!("hostile/08-ref-fan-out.md"),
            field: "max_values",
            section: "response",
            pointer: None,
            // A million copies: no reasonable limit reads it.
            raised: |limits| limits,
        },
        Hostile {
            file: "09-many-values.md",
            text: include_str!("hostile/09-many-values.md"),
            field: "max_values",
            section: "request",
            pointer: Some("/examples/0"),
            raised: |limits| SchemaLimits {
                max_values: 30_000,
                ..limits
            },
        },
    ]
}

/// Why `decision` is not a rejection naming what `hostile` is over, if it is not.
fn names_its_limit(hostile: &Hostile, decision: &Decision) -> Result<(), String> {
    let Decision::Reject { reason } = decision else {
        return Err(format!("not rejected: {decision:?}"));
    };
    let mut wanted = vec![
        hostile.field.to_owned(),
        format!("the {} schema is too complex", hostile.section),
        "over the limit of".to_owned(),
    ];
    wanted.extend(hostile.pointer.map(|pointer| format!("at {pointer}:")));
    match wanted.iter().find(|part| !reason.contains(part.as_str())) {
        Some(missing) => Err(format!("the reason does not say {missing:?}: {reason}")),
        None => Ok(()),
    }
}

#[test]
fn every_hostile_candidate_is_rejected_in_either_role_naming_its_limit() {
    let negotiator = DeterministicNegotiator::new();
    let actions = [product_action()];
    let (need, peer_action) = (need(), product_action());
    let mut failures = Vec::new();
    for hostile in hostile() {
        let provider = JudgeContext::Provider { actions: &actions };
        let requester = JudgeContext::Requester {
            need: &need,
            peer_action: &peer_action,
        };
        for (role, context) in [("provider", provider), ("requester", requester)] {
            let decision = negotiator.judge_now(context, hostile.text);
            if let Err(problem) = names_its_limit(&hostile, &decision) {
                failures.push(format!("{} as {role}: {problem}", hostile.file));
            }
        }
        if !matches!(
            ProtocolDocument::parse(hostile.text),
            Err(DocumentError::TooComplex { .. })
        ) {
            failures.push(format!("{}: parses", hostile.file));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The limit, not something else in the document, is what rejects it: raised past the
/// document's count, the document is read, judged as any other and its schemas compile.
#[test]
fn with_its_limit_raised_each_hostile_candidate_is_read() {
    let actions = [product_action()];
    for hostile in hostile() {
        let limits = (hostile.raised)(SchemaLimits::default());
        if limits == SchemaLimits::default() {
            continue;
        }
        let document = ProtocolDocument::parse_within(hostile.text, &limits)
            .unwrap_or_else(|error| panic!("{}: {error}", hostile.file));
        ProtocolSchemas::compile(&document)
            .unwrap_or_else(|error| panic!("{}: {error}", hostile.file));
        let negotiator = DeterministicNegotiator::new().with_schema_limits(limits);
        let decision =
            negotiator.judge_now(JudgeContext::Provider { actions: &actions }, hostile.text);
        assert!(
            !matches!(&decision, Decision::Reject { reason } if reason.contains("too complex")),
            "{}: {decision:?}",
            hostile.file
        );
    }
}

/// Schemas changed after parsing are checked again before they compile.
#[test]
fn schemas_are_checked_again_before_they_compile() {
    let text = include_str!("hostile/02-huge-enum.md");
    let limits = SchemaLimits {
        max_enum_values: 2_000,
        ..SchemaLimits::default()
    };
    let mut document = ProtocolDocument::parse_within(text, &limits).unwrap();
    assert!(ProtocolSchemas::compile(&document).is_ok());
    let huge = serde_json::json!({"type": "object", "properties": {
        "kind": {"enum": (0..3_000).collect::<Vec<_>>()}}});
    document.response_schema = Some(huge);
    let error = ProtocolSchemas::compile(&document).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("response schema is too complex")
            && message.contains("/properties/kind/enum")
            && message.contains("3000")
            && message.contains("2000"),
        "{message}"
    );
}

/// A candidate of 64 KiB with a 5,000-value enum, as a hostile client would send it once
/// the candidate size is capped: rejected in well under a second.
#[test]
fn a_64_kib_candidate_with_a_5000_value_enum_is_judged_quickly() {
    let text = worst_case_candidate();
    assert!(text.len() <= 64 * 1024, "{} bytes", text.len());
    let actions = [product_action()];
    let start = std::time::Instant::now();
    let decision = DeterministicNegotiator::new()
        .judge_now(JudgeContext::Provider { actions: &actions }, &text);
    let elapsed = start.elapsed();
    match &decision {
        Decision::Reject { reason } => assert!(
            reason.contains("max_enum_values") && reason.contains("5000 enum values"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(elapsed.as_millis() < 1_000, "{elapsed:?}");
}

/// The worst case the brief names: 64 KiB at most, an enum of 5,000 product ids.
fn worst_case_candidate() -> String {
    let ids: Vec<String> = (0..5_000).map(|i| format!("P{i:05}")).collect();
    let request = serde_json::json!({
        "type": "object",
        "properties": {
            "messageId": {"type": "string"},
            "productId": {"type": "string", "enum": ids}
        },
        "required": ["messageId", "productId"]
    });
    format!(
        "# Requirements\nGet a product's information.\n\n# Data Format\n\n## Request\n```json\n{request}\n```\n\n\
         ## Response\n```json\n{{\"type\":\"object\",\"properties\":{{\"messageId\":{{\"type\":\"string\"}},\
         \"code\":{{\"type\":\"integer\"}},\"data\":{{\"type\":\"object\"}}}}}}\n```\n"
    )
}

#[cfg(feature = "llm")]
mod llm {
    use std::time::Duration;

    use concord_llm::{LlmClient, LlmConfig};
    use concord_llm_script::ScriptServer;
    use concord_negotiate::{
        EscalatingNegotiator, JudgeContext, LlmNegotiator, Negotiator, PolicyKind, Previous,
    };
    use concord_proto::Decision;

    use super::{hostile, names_its_limit, product_action};

    /// Neither the escalating negotiator nor the LLM negotiator on its own sends a hostile
    /// candidate to the model: the script has no answer, and records no request.
    #[tokio::test]
    async fn a_hostile_candidate_never_reaches_the_llm() {
        let server = ScriptServer::start([]).await.unwrap();
        let config = LlmConfig::new(server.base_url(), "test-model")
            .with_request_timeout(Duration::from_secs(5))
            .with_max_retries(0);
        let llm = LlmNegotiator::new(LlmClient::new(config).unwrap());
        let escalating = EscalatingNegotiator::new(llm.clone());
        let actions = [product_action()];
        let provider = JudgeContext::Provider { actions: &actions };
        for hostile in hostile() {
            for (who, judged) in [
                (
                    "escalating",
                    escalating
                        .judge(provider, hostile.text, Previous::default())
                        .await,
                ),
                (
                    "llm",
                    llm.judge(provider, hostile.text, Previous::default()).await,
                ),
            ] {
                let judged = judged.unwrap_or_else(|error| panic!("{who}: {error}"));
                assert!(
                    matches!(judged.value, Decision::Reject { .. }),
                    "{who}: {}",
                    hostile.file
                );
                names_its_limit(&hostile, &judged.value)
                    .unwrap_or_else(|problem| panic!("{who}: {}: {problem}", hostile.file));
                assert_eq!(judged.record.policy, PolicyKind::Deterministic);
                assert_eq!(judged.record.llm_calls, 0);
            }
        }
        assert!(server.requests().is_empty());
    }
}
