use concord_llm::{CallOutcome, ChatRequest, Message};
use concord_llm_script::{ScriptServer, Step};

use crate::client;

fn ask(text: &str) -> ChatRequest {
    ChatRequest::new(vec![Message::user(text)])
}

#[tokio::test]
async fn every_call_is_recorded_with_its_tokens() {
    let server = ScriptServer::start([
        Step::content("one").usage(12, 5),
        Step::content("two").usage(30, 7),
        Step::status(400, "no"),
    ])
    .await
    .unwrap();
    let client = client(&server);

    client.chat(ask("first")).await.unwrap();
    client.chat(ask("second")).await.unwrap();
    client.chat(ask("third")).await.unwrap_err();

    let records = client.usage().records();
    let seen: Vec<_> = records
        .iter()
        .map(|r| {
            (
                r.model.as_str(),
                r.attempts,
                r.prompt_tokens,
                r.completion_tokens,
                r.outcome,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("test-model", 1, 12, 5, CallOutcome::Answered),
            ("test-model", 1, 30, 7, CallOutcome::Answered),
            ("test-model", 1, 0, 0, CallOutcome::HttpStatus(400)),
        ]
    );
    let summary = client.usage().summary();
    assert_eq!(
        (
            summary.calls,
            summary.failed_calls,
            summary.attempts,
            summary.prompt_tokens,
            summary.completion_tokens
        ),
        (3, 1, 3, 42, 12)
    );
    assert_eq!(
        summary.wall_time,
        records
            .iter()
            .map(|r| r.latency)
            .sum::<std::time::Duration>()
    );
}

#[tokio::test]
async fn default_usage_counts_words_and_child_ledgers_roll_up() {
    let server = ScriptServer::start([Step::content("three word answer"), Step::content("x")])
        .await
        .unwrap();
    let client = client(&server);
    let negotiation = client.with_usage(client.usage().child());

    negotiation.chat(ask("a four word prompt")).await.unwrap();
    client.chat(ask("outside")).await.unwrap();

    let record = &negotiation.usage().records()[0];
    assert_eq!((record.prompt_tokens, record.completion_tokens), (4, 3));
    assert_eq!(negotiation.usage().summary().calls, 1);
    assert_eq!(client.usage().summary().calls, 2);
}
