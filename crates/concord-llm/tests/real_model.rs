//! The client against a real model: llama.cpp's server with SmolLM2-135M-Instruct, started
//! by the shared harness (`interop/llama`). Ignored by default; `.ci/run` runs them.

#[path = "../../../interop/llama/harness.rs"]
mod llama;

use std::time::Duration;

use concord_llm::{
    AnswerFormat, CallOutcome, ChatRequest, LlmClient, LlmConfig, LlmError, Message,
};
use llama::{LlamaServer, SEED};
use serde::Deserialize;
use serde_json::json;

fn client(server: &LlamaServer) -> LlmClient {
    LlmClient::new(
        LlmConfig::new(&server.base_url, &server.model)
            .with_request_timeout(Duration::from_secs(120))
            .with_max_retries(0)
            .with_temperature(0.0)
            .with_seed(SEED)
            .with_max_tokens(96),
    )
    .unwrap()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Colour {
    name: String,
    hex: String,
}

fn colour_request() -> ChatRequest {
    ChatRequest::new(vec![
        Message::system(r##"Answer with JSON: {"name": string, "hex": "#rrggbb"}."##),
        Message::user("The colour of the sky at noon."),
    ])
    .with_json_schema(
        "colour",
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 24},
                "hex": {"type": "string", "pattern": "^#[0-9a-f]{6}$"}
            },
            "required": ["name", "hex"],
            "additionalProperties": false
        }),
    )
}

#[tokio::test]
#[ignore = "needs a real model: set CONCORD_LLAMA_PYTHON (`.ci/run` does)"]
async fn a_json_schema_answer_is_parsed_and_its_real_usage_recorded() {
    let server = LlamaServer::start();
    let client = client(&server);

    let completion = client
        .complete_json::<Colour>(colour_request())
        .await
        .unwrap();

    assert_eq!(completion.format, AnswerFormat::JsonSchema);
    assert!(completion.value.name.chars().count() <= 24);
    assert_eq!(completion.value.hex.len(), 7, "{}", completion.value.hex);
    // The ledger holds what the server reported, not an estimate.
    let reported = completion.response.usage.expect("llama.cpp reports usage");
    assert!(reported.prompt_tokens > 10 && reported.completion_tokens > 5);
    let records = client.usage().records();
    assert_eq!(records.len(), 1);
    assert_eq!(
        (records[0].prompt_tokens, records[0].completion_tokens),
        (reported.prompt_tokens, reported.completion_tokens)
    );
    assert_eq!(records[0].outcome, CallOutcome::Answered);
    assert_eq!(client.usage().summary().json_schema_calls, 1);
}

#[tokio::test]
#[ignore = "needs a real model: set CONCORD_LLAMA_PYTHON (`.ci/run` does)"]
async fn temperature_zero_and_a_seed_answer_the_same_twice() {
    let server = LlamaServer::start();
    let client = client(&server);

    let first = client.chat(colour_request()).await.unwrap();
    let second = client.chat(colour_request()).await.unwrap();

    assert_eq!(first.content(), second.content());
}

#[tokio::test]
#[ignore = "needs a real model: set CONCORD_LLAMA_PYTHON (`.ci/run` does)"]
async fn an_answer_cut_at_a_tiny_max_tokens_is_truncated_not_invalid_json() {
    let server = LlamaServer::start();
    let client = client(&server);

    let error = client
        .complete_json::<Colour>(colour_request().with_max_tokens(3))
        .await
        .unwrap_err();

    match error {
        LlmError::Truncated {
            completion_tokens,
            max_tokens,
            ..
        } => assert_eq!((completion_tokens, max_tokens), (3, Some(3))),
        other => panic!("expected Truncated, got {other}"),
    }
    let summary = client.usage().summary();
    assert_eq!(
        (
            summary.calls,
            summary.truncated_calls,
            summary.corrective_calls
        ),
        (1, 1, 0)
    );
}

#[tokio::test]
#[ignore = "needs a real model: set CONCORD_LLAMA_PYTHON (`.ci/run` does)"]
async fn a_schema_the_server_cannot_compile_falls_back_to_the_prompt_alone() {
    let server = LlamaServer::start();
    let client = client(&server);
    // llama.cpp refuses a schema whose $ref it cannot resolve (HTTP 400 naming the schema).
    let request = ChatRequest::new(vec![
        Message::system(r##"Answer with JSON: {"name": string, "hex": "#rrggbb"}."##),
        Message::user("The colour of the sky at noon."),
    ])
    .with_json_schema(
        "colour",
        json!({"type": "object", "properties": {"name": {"$ref": "#/nowhere"}}}),
    );

    let result = client.complete_json::<Colour>(request).await;

    let records = client.usage().records();
    assert_eq!(records[0].outcome, CallOutcome::HttpStatus(400));
    assert_eq!(records[0].format, Some(AnswerFormat::JsonSchema));
    assert!(records[1..]
        .iter()
        .all(|record| record.format == Some(AnswerFormat::PromptOnly)));
    // The tiny model, unconstrained, may or may not write the JSON: either it parsed, or
    // the corrective retry ran and the failure is typed.
    match result {
        Ok(completion) => assert_eq!(completion.format, AnswerFormat::PromptOnly),
        Err(LlmError::InvalidJson { .. } | LlmError::Truncated { .. }) => {}
        Err(other) => panic!("expected a typed content failure, got {other}"),
    }
}
