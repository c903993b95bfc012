//! The scripted server, driven by a plain HTTP client.

use std::time::Duration;

use concord_llm_script::{ScriptServer, Step};
use serde_json::{json, Value};

async fn post(url: &str, body: &str) -> (u16, Vec<(String, String)>, Value) {
    let response = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("authorization", "Bearer k")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
        .collect();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, headers, body)
}

const REQUEST: &str = r#"{"model":"m1","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"one two three"}]}"#;

#[tokio::test]
async fn answers_in_script_order_and_records_every_request() {
    let server = ScriptServer::start([
        Step::content("hello there"),
        Step::tool_call("lookup", json!({"sku": "A-1"})).usage(100, 9),
        Step::status(429, "slow down").header("retry-after", "2"),
    ])
    .await
    .unwrap();
    let url = format!("{}/chat/completions", server.base_url());

    let (status, _, first) = post(&url, REQUEST).await;
    assert_eq!(status, 200);
    assert_eq!(
        first,
        json!({
            "id": "chatcmpl-script-1", "object": "chat.completion", "created": 0, "model": "m1",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "hello there"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
        })
    );

    let (status, _, second) = post(&url, REQUEST).await;
    assert_eq!(status, 200);
    assert_eq!(second["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(second["choices"][0]["message"]["content"], Value::Null);
    let call = &second["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "lookup");
    assert_eq!(call["function"]["arguments"], r#"{"sku":"A-1"}"#);
    assert_eq!(
        second["usage"],
        json!({"prompt_tokens": 100, "completion_tokens": 9, "total_tokens": 109})
    );

    let (status, headers, third) = post(&url, REQUEST).await;
    assert_eq!(status, 429);
    assert_eq!(third, Value::String("slow down".into()));
    assert!(headers.contains(&("retry-after".into(), "2".into())));

    let (status, _, fourth) = post(&url, REQUEST).await;
    assert_eq!(status, 500);
    assert_eq!(fourth["error"]["type"], "script_exhausted");
    assert!(fourth["error"]["message"]
        .as_str()
        .unwrap()
        .contains("script exhausted"));

    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].header("Authorization"), Some("Bearer k"));
    assert_eq!(requests[0].body["model"], "m1");
    assert_eq!(requests[0].messages().len(), 2);
}

#[tokio::test]
async fn serves_the_path_without_v1_and_steps_can_be_added() {
    let server = ScriptServer::start([]).await.unwrap();
    server.push(Step::content("late addition"));
    assert_eq!(server.remaining(), 1);

    let (status, _, body) = post(
        &format!("http://{}/chat/completions", server.addr()),
        REQUEST,
    )
    .await;

    assert_eq!(status, 200);
    assert_eq!(body["choices"][0]["message"]["content"], "late addition");
    assert_eq!(server.requests()[0].path, "/chat/completions");
    assert_eq!(server.remaining(), 0);
}

#[tokio::test]
async fn a_body_that_is_not_json_gets_400_and_uses_no_step() {
    let server = ScriptServer::start([Step::content("kept")]).await.unwrap();

    let (status, _, body) = post(&format!("{}/chat/completions", server.base_url()), "{oops").await;

    assert_eq!(status, 400);
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not JSON"));
    assert_eq!(server.remaining(), 1);
    assert_eq!(server.requests()[0].body, Value::Null);
}

#[tokio::test]
async fn an_invalid_status_in_the_script_is_reported() {
    let server = ScriptServer::start([Step::status(1000, "")]).await.unwrap();

    let (status, _, body) = post(&format!("{}/chat/completions", server.base_url()), REQUEST).await;

    assert_eq!(status, 500);
    assert_eq!(body["error"]["type"], "script_error");
}

#[tokio::test]
async fn a_delay_holds_the_answer_back() {
    let server = ScriptServer::start([Step::content("slow").delay(Duration::from_secs(5))])
        .await
        .unwrap();
    let url = format!("{}/chat/completions", server.base_url());

    let outcome = tokio::time::timeout(Duration::from_millis(200), post(&url, REQUEST)).await;

    assert!(outcome.is_err(), "answered before its delay");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn dropping_the_server_stops_it() {
    let server = ScriptServer::start([]).await.unwrap();
    let addr = server.addr();
    drop(server);

    // The server task closes its listener once it sees the shutdown; give it a chance.
    let mut refused = false;
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(refused, "{addr} still accepts connections after drop");
}
