use std::time::Duration;

use concord_llm::{CallOutcome, ChatRequest, LlmClient, LlmConfig, LlmError, Message};
use concord_llm_script::{ScriptServer, Step};

use crate::{client, config, KEY};

fn hello() -> ChatRequest {
    ChatRequest::new(vec![Message::user("hello")])
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried_honouring_the_servers_wait() {
    let server = ScriptServer::start([
        Step::status(429, r#"{"error":{"message":"rate limited"}}"#).header("retry-after", "1"),
        Step::status(500, r#"{"error":{"message":"boom"}}"#).header("retry-after-ms", "300"),
        Step::content("finally"),
    ])
    .await
    .unwrap();
    let client = client(&server);

    let response = client.chat(hello()).await.unwrap();

    assert_eq!(response.content(), Some("finally"));
    assert_eq!(server.requests().len(), 3);
    let record = &client.usage().records()[0];
    assert_eq!(record.attempts, 3);
    assert_eq!(record.outcome, CallOutcome::Answered);
    // The backoff alone is a few milliseconds; only the server's waits (1 s, then 300 ms)
    // make the call this long. A lower bound: sleeping can't be faster than asked.
    assert!(
        record.latency >= Duration::from_millis(1300),
        "{:?}",
        record.latency
    );
}

#[tokio::test]
async fn a_client_error_is_not_retried_and_its_body_is_quoted_without_the_key() {
    let server = ScriptServer::start([
        Step::status(
            400,
            format!(r#"{{"error":{{"message":"bad request from key {KEY}"}}}}"#),
        ),
        Step::content("never sent"),
    ])
    .await
    .unwrap();
    let client = client(&server);

    let error = client.chat(hello()).await.unwrap_err();

    let LlmError::HttpStatus {
        status,
        ref body,
        attempts,
        ..
    } = error
    else {
        panic!("expected HttpStatus, got {error:?}");
    };
    assert_eq!((status, attempts), (400, 1));
    assert!(body.contains("bad request from key [REDACTED]"), "{body}");
    for shown in [error.to_string(), format!("{error:?}")] {
        assert!(!shown.contains(KEY), "{shown}");
    }
    assert_eq!(server.requests().len(), 1);
    assert_eq!(server.remaining(), 1);
    assert_eq!(
        client.usage().records()[0].outcome,
        CallOutcome::HttpStatus(400)
    );
}

#[tokio::test]
async fn server_errors_exhaust_the_retries() {
    let server = ScriptServer::start([
        Step::status(503, "overloaded"),
        Step::status(502, "bad gateway"),
        Step::status(503, "still overloaded"),
        Step::content("too late"),
    ])
    .await
    .unwrap();
    let client = client(&server);

    let error = client.chat(hello()).await.unwrap_err();

    assert!(
        matches!(&error, LlmError::HttpStatus { status: 503, attempts: 3, body, .. } if body == "still overloaded"),
        "{error:?}"
    );
    assert_eq!(server.remaining(), 1);
    let record = &client.usage().records()[0];
    assert_eq!(
        (record.attempts, record.outcome),
        (3, CallOutcome::HttpStatus(503))
    );
}

#[tokio::test]
async fn a_wait_longer_than_allowed_is_not_waited_for() {
    let server = ScriptServer::start([
        Step::status(429, "come back in an hour").header("retry-after", "3600"),
        Step::content("unused"),
    ])
    .await
    .unwrap();

    let error = client(&server).chat(hello()).await.unwrap_err();

    assert!(
        matches!(
            error,
            LlmError::HttpStatus { status: 429, attempts: 1, retry_after: Some(wait), .. }
                if wait == Duration::from_secs(3600)
        ),
        "{error:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn connection_failures_are_retried_then_reported() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let client = LlmClient::new(
        LlmConfig::new(format!("http://{addr}/v1"), "m")
            .with_max_retries(2)
            .with_backoff(concord_llm::Backoff::new(
                Duration::from_millis(1),
                Duration::from_millis(2),
            )),
    )
    .unwrap();

    let error = client.chat(hello()).await.unwrap_err();

    assert!(
        matches!(error, LlmError::Transport { attempts: 3, .. }),
        "{error:?}"
    );
    // The message says why (reqwest's own message only says what it was doing), once.
    let message = error.to_string();
    assert!(message.contains("refused"), "{message}");
    assert_eq!(message.matches(&addr.to_string()).count(), 1, "{message}");
    assert!(std::error::Error::source(&error).is_none(), "{error:?}");
    assert_eq!(client.usage().records()[0].outcome, CallOutcome::Transport);
}

#[tokio::test]
async fn an_exhausted_script_is_a_500_that_says_so() {
    let server = ScriptServer::start([]).await.unwrap();
    let client = LlmClient::new(config(&server).with_max_retries(0)).unwrap();

    let error = client.chat(hello()).await.unwrap_err();

    assert!(
        matches!(&error, LlmError::HttpStatus { status: 500, body, .. } if body.contains("script exhausted")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_body_that_is_not_a_chat_completion_is_not_retried() {
    let server = ScriptServer::start([
        Step::status(200, "<html>proxy login</html>"),
        Step::status(200, r#"{"id":"x","choices":[]}"#),
        Step::content("unused"),
    ])
    .await
    .unwrap();
    let client = client(&server);

    let first = client.chat(hello()).await.unwrap_err();
    let second = client.chat(hello()).await.unwrap_err();

    assert!(
        matches!(&first, LlmError::MalformedResponse { body, .. } if body == "<html>proxy login</html>"),
        "{first:?}"
    );
    assert!(
        matches!(&second, LlmError::MalformedResponse { reason, .. } if reason.contains("no choices")),
        "{second:?}"
    );
    assert_eq!(server.requests().len(), 2);
    assert!(client
        .usage()
        .records()
        .iter()
        .all(|record| record.attempts == 1 && record.outcome == CallOutcome::MalformedResponse));
}
