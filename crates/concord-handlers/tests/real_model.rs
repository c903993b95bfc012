//! Handler code written by a real model (llama.cpp with SmolLM2-135M-Instruct, started by
//! the shared harness in `interop/llama`), for a protocol no template fits: every module is
//! run in the sandbox on the agreed test cases, wrong code is refused and fed back (up to
//! `MAX_ATTEMPTS` rounds), and the generation ends either with a module that passes every
//! case or with a typed failure naming what failed. Ignored by default; `.ci/run` runs it.

mod common;

#[path = "../../../interop/llama/harness.rs"]
mod llama;

use std::time::Duration;

use common::{load, product_action, seed_cases, SEED_BASED_ON};
use concord_handlers::{AttemptFailure, GenerateError, Generator, Local, Origin, MAX_ATTEMPTS};
use concord_llm::{LlmClient, LlmConfig};
use concord_negotiate::ProtocolDocument;
use llama::{LlamaServer, SEED};

#[tokio::test]
#[ignore = "needs a real model: set CONCORD_LLAMA_PYTHON (`.ci/run` does)"]
async fn the_model_writes_a_handler_that_passes_the_cases_or_fails_naming_them() {
    let server = LlamaServer::start();
    let client = LlmClient::new(
        LlmConfig::new(&server.base_url, &server.model)
            .with_request_timeout(Duration::from_secs(180))
            .with_max_retries(0)
            .with_temperature(0.0)
            .with_seed(SEED)
            .with_max_tokens(384),
    )
    .unwrap();
    let document = ProtocolDocument::parse(SEED_BASED_ON).unwrap();
    let local = Local::Provider(product_action());
    let cases = seed_cases();

    let result = Generator::new()
        .with_llm(client.clone())
        .generate(&document, &local, Some(&cases))
        .await;

    let ledger = client.usage().summary();
    assert!(ledger.calls >= 1 && ledger.prompt_tokens > 0 && ledger.completion_tokens > 0);
    assert_eq!(
        ledger.json_schema_calls, ledger.calls,
        "every call sends the module schema"
    );
    match result {
        Ok(generated) => {
            // Accepted only after passing every case in the sandbox: check it again here.
            assert!(matches!(generated.origin, Origin::Llm { .. }));
            assert_eq!(generated.cases_run, cases.cases.len());
            let mut code = load(&generated.source, &local);
            let report = concord_handlers::CaseRunner::new(
                &concord_handlers::Verifier::new(&document).unwrap(),
            )
            .with_side(&mut code, &local)
            .run(&cases);
            assert!(report.fix_error_report().is_none());
            eprintln!(
                "generated on {}: {} LLM call(s)",
                generated.origin, generated.usage.calls
            );
        }
        Err(GenerateError::Exhausted {
            attempts, usage, ..
        }) => {
            assert_eq!(attempts.len(), MAX_ATTEMPTS as usize);
            assert_eq!(usage.calls, ledger.calls);
            for attempt in &attempts {
                // Each refusal is typed; a module that ran and failed names the cases.
                match attempt {
                    AttemptFailure::Cases(report) => {
                        assert!(report.starts_with("The handler code fails"), "{report}");
                        assert!(
                            cases.cases.iter().any(|case| report.contains(&case.name)),
                            "the report names no failed case: {report}"
                        );
                    }
                    AttemptFailure::Load(_)
                    | AttemptFailure::Unusable(_)
                    | AttemptFailure::Truncated { .. } => {}
                    other => panic!("an untyped refusal: {other:?}"),
                }
            }
            eprintln!(
                "refused {} times: {}",
                attempts.len(),
                attempts
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" | ")
            );
        }
        Err(other) => panic!("expected generated code or Exhausted, got {other}"),
    }
}
