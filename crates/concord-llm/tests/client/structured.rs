//! Structured output: a JSON Schema sent where the server takes it, prompt-only JSON where it
//! refuses it, and answers cut off at `max_tokens` as their own error.

use concord_llm::{
    AnswerFormat, CallOutcome, ChatRequest, LlmClient, LlmConfig, LlmError, Message,
};
use concord_llm_script::{ScriptServer, Step};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::{client, config};

#[derive(Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Verdict {
    status: String,
}

const GOOD: &str = r#"{"status":"accepted"}"#;

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {"status": {"type": "string", "enum": ["accepted", "rejected"]}},
        "required": ["status"],
        "additionalProperties": false
    })
}

fn request() -> ChatRequest {
    ChatRequest::new(vec![
        Message::system(r#"Answer with JSON: {"status": "accepted"|"rejected"}."#),
        Message::user("Judge this."),
    ])
    .with_json_schema("verdict", schema())
}

/// llama.cpp's answer to a response_format it cannot use.
const REFUSAL: &str = r#"{"error":{"code":400,"message":"response_format type must be one of \"text\" or \"json_object\", but got: json_schema","type":"invalid_request_error"}}"#;

#[tokio::test]
async fn the_schema_is_sent_and_recorded() {
    let server = ScriptServer::start([Step::content(GOOD)]).await.unwrap();
    let client = client(&server);

    let completion = client.complete_json::<Verdict>(request()).await.unwrap();

    assert_eq!(completion.format, AnswerFormat::JsonSchema);
    let sent = &server.requests()[0].body["response_format"];
    assert_eq!(sent["type"], "json_schema");
    assert_eq!(sent["json_schema"]["name"], "verdict");
    assert_eq!(sent["json_schema"]["schema"], schema());
    assert_eq!(sent["json_schema"]["strict"], true);
    let summary = client.usage().summary();
    assert_eq!(
        (summary.json_schema_calls, summary.prompt_only_calls),
        (1, 0)
    );
    assert_eq!(
        client.usage().records()[0].format,
        Some(AnswerFormat::JsonSchema)
    );
}

#[tokio::test]
async fn a_refused_response_format_falls_back_to_the_prompt_alone() {
    let server = ScriptServer::start([Step::status(400, REFUSAL), Step::content(GOOD)])
        .await
        .unwrap();
    let client = client(&server);

    let completion = client.complete_json::<Verdict>(request()).await.unwrap();

    assert_eq!(completion.value.status, "accepted");
    assert_eq!(completion.format, AnswerFormat::PromptOnly);
    assert!(!completion.corrected);
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        2,
        "a 400 is not retried, but the fallback is sent"
    );
    assert_eq!(requests[0].body["response_format"]["type"], "json_schema");
    assert!(requests[1].body.get("response_format").is_none());
    assert_eq!(requests[0].body["messages"], requests[1].body["messages"]);
    let records = client.usage().records();
    let seen: Vec<_> = records.iter().map(|r| (r.outcome, r.format)).collect();
    assert_eq!(
        seen,
        [
            (CallOutcome::HttpStatus(400), Some(AnswerFormat::JsonSchema)),
            (CallOutcome::Answered, Some(AnswerFormat::PromptOnly)),
        ]
    );
    let summary = client.usage().summary();
    assert_eq!(
        (summary.json_schema_calls, summary.prompt_only_calls),
        (1, 1)
    );
}

#[tokio::test]
async fn after_the_fallback_a_bad_answer_gets_the_corrective_retry_without_the_format() {
    let server = ScriptServer::start([
        Step::status(400, REFUSAL),
        Step::content("Sure! ```json\n{\"status\":\"accepted\"}\n```"),
        Step::content(GOOD),
    ])
    .await
    .unwrap();
    let client = client(&server);

    let completion = client.complete_json::<Verdict>(request()).await.unwrap();

    assert!(completion.corrected);
    assert_eq!(completion.format, AnswerFormat::PromptOnly);
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests[2].body.get("response_format").is_none());
    let summary = client.usage().summary();
    assert_eq!(
        (summary.prompt_only_calls, summary.corrective_calls),
        (2, 1)
    );
}

#[tokio::test]
async fn a_400_about_something_else_is_not_a_refusal_of_the_format() {
    let server = ScriptServer::start([Step::status(
        400,
        r#"{"error":{"message":"the context is too long","type":"invalid_request_error"}}"#,
    )])
    .await
    .unwrap();

    let error = client(&server)
        .complete_json::<Verdict>(request())
        .await
        .unwrap_err();

    assert!(
        matches!(error, LlmError::HttpStatus { status: 400, .. }),
        "{error}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn an_answer_cut_at_max_tokens_is_its_own_error_with_no_corrective_retry() {
    let server = ScriptServer::start([
        Step::content(r#"{"status":"acc"#)
            .finish_reason("length")
            .usage(40, 4),
        Step::content(GOOD),
    ])
    .await
    .unwrap();
    let client = client(&server);

    let error = client
        .complete_json::<Verdict>(request().with_max_tokens(4))
        .await
        .unwrap_err();

    match &error {
        LlmError::Truncated {
            completion_tokens,
            max_tokens,
            excerpt,
        } => {
            assert_eq!((*completion_tokens, *max_tokens), (4, Some(4)));
            assert_eq!(excerpt, r#"{"status":"acc"#);
        }
        other => panic!("expected Truncated, got {other:?}"),
    }
    assert!(
        error.to_string().contains("finish_reason: length"),
        "{error}"
    );
    assert_eq!(server.requests().len(), 1);
    let summary = client.usage().summary();
    assert_eq!((summary.calls, summary.truncated_calls), (1, 1));
    assert_eq!(summary.completion_tokens, 4);
    assert_eq!(client.usage().records()[0].outcome, CallOutcome::Truncated);
}

#[tokio::test]
async fn chat_returns_a_cut_answer_but_records_it_as_truncated() {
    let server = ScriptServer::start([Step::content("Once upon a").finish_reason("length")])
        .await
        .unwrap();
    let client = client(&server);

    let response = client
        .chat(ChatRequest::new(vec![Message::user("A story")]))
        .await
        .unwrap();

    assert_eq!(response.content(), Some("Once upon a"));
    assert_eq!(client.usage().records()[0].outcome, CallOutcome::Truncated);
}

#[tokio::test]
async fn configured_sampling_fills_what_a_request_leaves_unset() {
    let server = ScriptServer::start([Step::content(GOOD), Step::content(GOOD)])
        .await
        .unwrap();
    let client = LlmClient::new(
        config(&server)
            .with_temperature(0.0)
            .with_seed(42)
            .with_max_tokens(64),
    )
    .unwrap();

    client.complete_json::<Verdict>(request()).await.unwrap();
    client
        .complete_json::<Verdict>(
            request()
                .with_max_tokens(8)
                .with_seed(7)
                .with_temperature(0.5),
        )
        .await
        .unwrap();

    let requests = server.requests();
    let sampling = |n: usize| {
        let body = &requests[n].body;
        (
            body["temperature"].clone(),
            body["seed"].clone(),
            body["max_tokens"].clone(),
        )
    };
    assert_eq!(sampling(0), (json!(0.0), json!(42), json!(64)));
    assert_eq!(sampling(1), (json!(0.5), json!(7), json!(8)));
}

#[test]
fn sampling_comes_from_the_environment_and_bad_values_name_their_variable() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        }
    };
    let config = LlmConfig::from_lookup(env(&[
        ("CONCORD_LLM_BASE_URL", "http://127.0.0.1:1/v1"),
        ("CONCORD_LLM_TEMPERATURE", "0"),
        ("CONCORD_LLM_SEED", "42"),
        ("CONCORD_LLM_MAX_TOKENS", "256"),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(
        (config.temperature, config.seed, config.max_tokens),
        (Some(0.0), Some(42), Some(256))
    );
    assert!(LlmConfig::from_lookup(env(&[("CONCORD_LLM_SEED", "42")]))
        .unwrap()
        .is_none());
    for (variable, value) in [
        ("CONCORD_LLM_TEMPERATURE", "hot"),
        ("CONCORD_LLM_TEMPERATURE", "3"),
        ("CONCORD_LLM_SEED", "-1"),
        ("CONCORD_LLM_MAX_TOKENS", "0"),
    ] {
        let pairs: &'static [(&'static str, &'static str)] = Box::leak(Box::new([
            ("CONCORD_LLM_BASE_URL", "http://127.0.0.1:1/v1"),
            (variable, value),
        ]));
        let error = LlmConfig::from_lookup(env(pairs)).unwrap_err();
        assert!(
            matches!(&error, LlmError::InvalidConfig { setting, .. } if setting == variable),
            "{variable}={value}: {error}"
        );
    }
}
