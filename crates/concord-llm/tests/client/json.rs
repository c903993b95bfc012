use concord_llm::{CallOutcome, ChatRequest, LlmError, Message, ResponseFormat, TextPosition};
use concord_llm_script::{ScriptServer, Step};
use serde::Deserialize;
use serde_json::json;

use crate::client;

#[derive(Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Decision {
    status: String,
    reason: String,
}

fn judge() -> ChatRequest {
    ChatRequest::new(vec![
        Message::system(
            r#"Answer with JSON: {"status": "accepted"|"rejected", "reason": string}."#,
        ),
        Message::user("Judge this candidate."),
    ])
}

/// The error serde_json gives for `text` as a `Decision`: what the corrective message must name.
fn parse_error(text: &str) -> String {
    serde_json::from_str::<Decision>(text)
        .unwrap_err()
        .to_string()
}

const GOOD: &str = r#"{"status":"accepted","reason":"schemas match"}"#;

/// The model answers `first`, then [`GOOD`]: the text of the corrective message between.
async fn correction_after(first: Step) -> String {
    let server = ScriptServer::start([first, Step::content(GOOD)])
        .await
        .unwrap();

    let completion = client(&server)
        .complete_json::<Decision>(judge())
        .await
        .unwrap();

    assert!(completion.corrected);
    let correction = server.requests()[1].messages().last().unwrap().clone();
    correction["content"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn json_mode_is_requested_and_the_answer_parsed_strictly() {
    let server = ScriptServer::start([Step::content(GOOD)]).await.unwrap();

    let completion = client(&server)
        .complete_json::<Decision>(judge())
        .await
        .unwrap();

    assert_eq!(completion.value.status, "accepted");
    assert!(!completion.corrected);
    assert_eq!(
        server.requests()[0].body["response_format"],
        json!({"type": "json_object"})
    );
}

#[tokio::test]
async fn a_json_schema_format_is_kept() {
    let server = ScriptServer::start([Step::content(GOOD)]).await.unwrap();
    let format = ResponseFormat::json_schema("decision", json!({"type": "object"}));

    client(&server)
        .complete_json::<Decision>(judge().with_response_format(format))
        .await
        .unwrap();

    assert_eq!(
        server.requests()[0].body["response_format"]["type"],
        "json_schema"
    );
}

#[tokio::test]
async fn malformed_json_gets_one_corrective_retry_naming_the_parse_error() {
    let bad = "Sure! Here is the JSON:\n```json\n{\"status\":\"accepted\"}\n```";
    let server = ScriptServer::start([Step::content(bad), Step::content(GOOD)])
        .await
        .unwrap();
    let client = client(&server);

    let completion = client.complete_json::<Decision>(judge()).await.unwrap();

    assert!(completion.corrected);
    assert_eq!(completion.value.reason, "schemas match");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let (first, second) = (requests[0].messages(), requests[1].messages());
    assert_eq!(second.len(), first.len() + 2);
    assert_eq!(&second[..first.len()], first);
    assert_eq!(
        second[first.len()],
        json!({"role": "assistant", "content": bad})
    );
    let correction = &second[first.len() + 1];
    assert_eq!(correction["role"], "user");
    let text = correction["content"].as_str().unwrap();
    let expected = parse_error(bad);
    assert!(expected.contains("line 1 column 1"), "{expected}");
    assert!(text.contains(&expected), "{text}");
    assert_eq!(
        requests[1].body["response_format"],
        json!({"type": "json_object"})
    );

    let outcomes: Vec<_> = client.usage().records().iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [CallOutcome::InvalidContent, CallOutcome::Answered]
    );
}

#[tokio::test]
async fn valid_json_of_the_wrong_shape_is_corrected_too() {
    let text = correction_after(Step::content(r#"{"status":"accepted"}"#)).await;
    assert!(text.contains("missing field `reason`"), "{text}");
}

#[tokio::test]
async fn a_malformed_answer_is_placed_in_characters() {
    // "é" is two bytes and one character: serde_json's column of the stray `x` is 18 (bytes),
    // the character is the 17th of its line.
    let answer = "{\"status\": \"é\", x}";
    let server = ScriptServer::start([Step::content(answer), Step::content(answer)])
        .await
        .unwrap();
    let error = client(&server)
        .complete_json::<Decision>(judge())
        .await
        .unwrap_err();
    let LlmError::InvalidJson { first, .. } = &error else {
        panic!("expected InvalidJson, got {error:?}");
    };
    assert!(first.message.ends_with("at line 1 column 18"), "{first:?}");
    assert_eq!(
        first.position,
        Some(TextPosition {
            line: 1,
            column: 17
        })
    );
}

#[tokio::test]
async fn malformed_twice_is_a_typed_failure_with_both_errors() {
    let first_answer = "{\"status\": \"accepted\",";
    let second_answer = r#"{"status":"accepted","reason":"ok","extra":1}"#;
    let server = ScriptServer::start([
        Step::content(first_answer),
        Step::content(second_answer),
        Step::content(GOOD),
    ])
    .await
    .unwrap();
    let client = client(&server);

    let error = client.complete_json::<Decision>(judge()).await.unwrap_err();

    let LlmError::InvalidJson { first, second } = &error else {
        panic!("expected InvalidJson, got {error:?}");
    };
    assert_eq!(first.message, parse_error(first_answer));
    assert_eq!(second.message, parse_error(second_answer));
    assert!(second.message.contains("unknown field `extra`"));
    assert_eq!(
        first.position,
        Some(TextPosition {
            line: 1,
            column: first_answer.len()
        })
    );
    assert_eq!(second.excerpt, second_answer);
    let shown = error.to_string();
    assert!(shown.contains(&first.message) && shown.contains(&second.message));
    assert_eq!(server.requests().len(), 2, "exactly one corrective retry");
    assert_eq!(server.remaining(), 1);
    assert!(client
        .usage()
        .records()
        .iter()
        .all(|r| r.outcome == CallOutcome::InvalidContent));
}

#[tokio::test]
async fn an_answer_with_no_text_is_corrected_like_bad_json() {
    let text = correction_after(Step::tool_call("lookup", json!({"sku": "A-1"}))).await;
    assert!(text.contains("no text, only tool calls"), "{text}");
}

#[tokio::test]
async fn http_errors_are_not_turned_into_json_failures() {
    let server = ScriptServer::start([Step::status(401, "invalid key")])
        .await
        .unwrap();

    let error = client(&server)
        .complete_json::<Decision>(judge())
        .await
        .unwrap_err();

    assert!(
        matches!(error, LlmError::HttpStatus { status: 401, .. }),
        "{error:?}"
    );
}
