//! Test-case failure → fix-error → success: the requester verifies the provider's real code
//! against the agreed test cases over the verification protocol, reports the failure, and
//! the provider confirms it by running the cases, regenerates its code and says
//! `generated` again.

use concord_llm::LlmConfig;
use concord_llm_script::{ScriptServer, Step};
use concord_negotiate::{
    canonical_protocol, DeterministicNegotiator, ProtocolDocument, TestCases,
    DEFAULT_PROTOCOL_TIMEOUT,
};
use concord_node::{ConnectError, Limits, Node, Settlement, Want};
use concord_proto::{CloseReason, Role, Side};
use serde_json::json;

use crate::support::*;

/// The cases the rules draft for the product-info protocol, each response also carrying
/// `servedBy`: a field the schema allows but the provider's template does not write.
fn cases_with_served_by() -> (String, usize) {
    let document = ProtocolDocument::parse(&canonical_protocol(
        &catalogue::action(),
        DEFAULT_PROTOCOL_TIMEOUT,
    ))
    .unwrap();
    let text = DeterministicNegotiator::new()
        .draft_test_cases_now(&document)
        .unwrap();
    let mut cases = TestCases::parse(&text).unwrap();
    for case in &mut cases.cases {
        case.response["servedBy"] = json!("shop-1");
    }
    (cases.write(), cases.cases.len())
}

/// The provider module the scripted LLM writes: the template's mapping plus `servedBy`.
const FIXED_MODULE: &str = r#"
function decodeRequest(message) {
  return { messageId: message.messageId, input: { productId: message.productId } };
}
function encodeResponse(answer) {
  if (answer.error !== undefined) {
    return { messageId: answer.messageId, type: "RESPONSE",
             status: { code: answer.error.code, message: answer.error.message },
             servedBy: "shop-1" };
  }
  return { messageId: answer.messageId, type: "RESPONSE",
           status: { code: 200, message: "OK" },
           productInfo: answer.result, servedBy: "shop-1" };
}
"#;

#[tokio::test]
async fn a_failing_case_is_reported_fixed_and_verified_again() {
    let llm = ScriptServer::start([Step::content(json!({"module": FIXED_MODULE}).to_string())])
        .await
        .unwrap();
    let provider = build(
        Node::builder("Product agent")
            .action(catalogue::action(), catalogue::answer)
            .llm(LlmConfig::new(llm.base_url(), "scripted-model").with_max_retries(0))
            .limits(quick_limits()),
    );
    let server = serve(&provider).await;
    let requester = requester();
    let (cases, count) = cases_with_served_by();
    let connection = requester
        .node
        .connect_with(
            server.url(),
            Want::action("getProductInfo").test_cases(cases.clone()),
        )
        .await
        .unwrap();
    let info = connection.info();
    assert_eq!(info.settlement, Settlement::Negotiated);
    assert_eq!(info.verified_cases, count);
    let output = connection
        .call("getProductInfo", json!({"productId": "P12345"}))
        .await
        .unwrap();
    assert_eq!(output["productName"], "Laptop");
    let hash = info.hash;
    connection.close().await;

    // The provider's LLM wrote the fix, told why the template failed the agreed cases.
    let requests = llm.requests();
    assert_eq!(requests.len(), 1);
    let prompt = requests[0].body.to_string();
    assert!(prompt.contains("servedBy"), "{prompt}");
    let stored = provider.store().protocol(&hash).unwrap().unwrap();
    assert!(stored
        .handlers
        .get(Role::Provider)
        .unwrap()
        .contains("servedBy"));

    // The requester's transcript: verification fails, the report, the fix, verification passes.
    let transcripts = finished_transcripts(requester.store(), 1).await;
    let frames = frame_summary(&transcripts[0]);
    let generated = frames
        .iter()
        .filter(|frame| *frame == "received meta codeGeneration:generated")
        .count();
    assert_eq!(generated, 2, "{frames:#?}");
    assert_in_order(
        &frames,
        &[
            "sent meta testCasesNegotiation:negotiating".to_owned(),
            "received meta testCasesNegotiation:accepted".to_owned(),
            "sent meta fixErrorNegotiation:negotiating".to_owned(),
            "received meta fixErrorNegotiation:accepted".to_owned(),
            "received meta codeGeneration:generated".to_owned(),
        ],
    );
    let verification = frames.iter().filter(|f| f.contains("verification")).count();
    assert_eq!(verification, 4 * count, "{frames:#?}");
    let report = transcripts[0]
        .frames
        .iter()
        .find_map(|frame| match &frame.content {
            concord_store::FrameContent::Text(text) => {
                let json = serde_json::from_str::<serde_json::Value>(text).ok()?;
                (json["action"] == "fixErrorNegotiation").then_some(json)
            }
            _ => None,
        })
        .unwrap();
    let description = report["errorDescription"].as_str().unwrap();
    assert!(
        description.contains("/servedBy: expected \"shop-1\", got absent"),
        "{description}"
    );
}

#[tokio::test]
async fn a_failing_case_the_provider_cannot_fix_ends_with_a_clear_error() {
    // No LLM on the provider: its template cannot write `servedBy`.
    let provider = provider();
    let server = serve(&provider).await;
    let requester = requester();
    let (cases, _) = cases_with_served_by();
    let error = requester
        .node
        .connect_with(
            server.url(),
            Want::action("getProductInfo").test_cases(cases),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            ConnectError::Closed(CloseReason::CodeGenerationFailed { by: Side::Peer })
        ),
        "{error}"
    );
    let transcripts = finished_transcripts(provider.store(), 1).await;
    match &transcripts[0].summary.outcome {
        Some(concord_store::Outcome::Failed(reason)) => assert!(
            reason.starts_with(
                "our code generation failed: the template module fails its test cases, and no LLM is configured"
            ),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn no_fix_round_left_ends_at_the_first_failure_of_the_peers_code() {
    // The provider's LLM could fix its code, but the requester allows no fix round.
    let llm = ScriptServer::start([Step::content(json!({"module": FIXED_MODULE}).to_string())])
        .await
        .unwrap();
    let provider = build(
        Node::builder("Product agent")
            .action(catalogue::action(), catalogue::answer)
            .llm(LlmConfig::new(llm.base_url(), "scripted-model").with_max_retries(0))
            .limits(quick_limits()),
    );
    let server = serve(&provider).await;
    let requester = build(Node::builder("Requester").limits(Limits {
        max_fix_rounds: 0,
        ..quick_limits()
    }));
    let (cases, _) = cases_with_served_by();
    let error = requester
        .node
        .connect_with(
            server.url(),
            Want::action("getProductInfo").test_cases(cases),
        )
        .await
        .unwrap_err();
    match &error {
        ConnectError::Verification(reason) => assert!(
            reason.contains("/servedBy: expected \"shop-1\", got absent"),
            "{reason}"
        ),
        other => panic!("{other}"),
    }
    assert!(llm.requests().is_empty());
    let transcripts = finished_transcripts(requester.store(), 1).await;
    let frames = frame_summary(&transcripts[0]);
    assert!(
        !frames
            .iter()
            .any(|frame| frame.contains("fixErrorNegotiation")),
        "{frames:#?}"
    );
}

#[tokio::test]
async fn a_provider_out_of_generations_gives_up_naming_the_limit() {
    // The provider's LLM would fix its code, but one generation is all it may make.
    let llm = ScriptServer::start([Step::content(json!({"module": FIXED_MODULE}).to_string())])
        .await
        .unwrap();
    let provider = build(
        Node::builder("Product agent")
            .action(catalogue::action(), catalogue::answer)
            .llm(LlmConfig::new(llm.base_url(), "scripted-model").with_max_retries(0))
            .limits(Limits {
                max_code_generations: 1,
                ..quick_limits()
            }),
    );
    let server = serve(&provider).await;
    let requester = requester();
    let (cases, _) = cases_with_served_by();
    let error = requester
        .node
        .connect_with(
            server.url(),
            Want::action("getProductInfo").test_cases(cases),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            ConnectError::Closed(CloseReason::CodeGenerationFailed { by: Side::Peer })
        ),
        "{error}"
    );
    assert!(llm.requests().is_empty());
    let transcripts = finished_transcripts(provider.store(), 1).await;
    match &transcripts[0].summary.outcome {
        Some(concord_store::Outcome::Failed(reason)) => assert_eq!(
            reason,
            "our code generation failed: the peer still reports errors after 1 generations of our code"
        ),
        other => panic!("{other:?}"),
    }
}
