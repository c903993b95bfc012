use std::time::Duration;

use concord_llm::{CallOutcome, ChatRequest, LlmClient, LlmError, Message};
use concord_llm_script::{ScriptServer, Step};

use crate::config;

fn hello() -> ChatRequest {
    ChatRequest::new(vec![Message::user("hello")])
}

#[tokio::test]
async fn a_slow_answer_times_out_and_the_retry_succeeds() {
    let server = ScriptServer::start([
        Step::content("too late").delay(Duration::from_secs(3)),
        Step::content("on time"),
    ])
    .await
    .unwrap();
    let client =
        LlmClient::new(config(&server).with_request_timeout(Duration::from_millis(300))).unwrap();

    let response = client.chat(hello()).await.unwrap();

    assert_eq!(response.content(), Some("on time"));
    assert_eq!(server.requests().len(), 2);
    let record = &client.usage().records()[0];
    assert_eq!(
        (record.attempts, record.outcome),
        (2, CallOutcome::Answered)
    );
}

#[tokio::test]
async fn timeouts_exhaust_the_retries() {
    let server = ScriptServer::start([
        Step::content("late").delay(Duration::from_secs(3)),
        Step::content("later").delay(Duration::from_secs(3)),
        Step::content("unused"),
    ])
    .await
    .unwrap();
    let client = LlmClient::new(
        config(&server)
            .with_request_timeout(Duration::from_millis(200))
            .with_max_retries(1),
    )
    .unwrap();

    let error = client.chat(hello()).await.unwrap_err();

    assert!(
        matches!(
            error,
            LlmError::Timeout { attempts: 2, timeout, .. } if timeout == Duration::from_millis(200)
        ),
        "{error:?}"
    );
    assert_eq!(server.requests().len(), 2);
    assert_eq!(client.usage().records()[0].outcome, CallOutcome::Timeout);
}
