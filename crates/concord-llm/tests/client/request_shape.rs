use concord_llm::{
    ChatRequest, LlmClient, LlmConfig, Message, ResponseFormat, Tool, ToolCall, ToolChoice,
};
use concord_llm_script::{ScriptServer, Step};
use serde_json::json;

use crate::{client, config, KEY};

#[tokio::test]
async fn chat_sends_the_openai_request_shape() {
    let server = ScriptServer::start([Step::content("ok")]).await.unwrap();
    let schema = json!({"type": "object", "properties": {"status": {"type": "string"}}});
    let request = ChatRequest::new(vec![
        Message::system("You negotiate protocols."),
        Message::user("Draft a candidate."),
        Message::assistant_tool_calls(vec![ToolCall::function(
            "call_7",
            "get_capabilities",
            r#"{"agent":"b"}"#,
        )]),
        Message::tool_result("call_7", r#"{"actions":["getProduct"]}"#),
        Message::assistant("Here is a draft."),
    ])
    .with_response_format(ResponseFormat::json_schema("candidate", schema.clone()))
    .with_tools(vec![Tool::function(
        "get_capabilities",
        "Lists an agent's actions",
        json!({"type": "object", "properties": {"agent": {"type": "string"}}}),
    )])
    .with_tool_choice(ToolChoice::Auto)
    .with_temperature(0.25)
    .with_max_tokens(300);

    client(&server).chat(request).await.unwrap();

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(
        sent.body,
        json!({
            "model": "test-model",
            "messages": [
                {"role": "system", "content": "You negotiate protocols."},
                {"role": "user", "content": "Draft a candidate."},
                {"role": "assistant", "tool_calls": [{
                    "id": "call_7", "type": "function",
                    "function": {"name": "get_capabilities", "arguments": "{\"agent\":\"b\"}"},
                }]},
                {"role": "tool", "tool_call_id": "call_7", "content": "{\"actions\":[\"getProduct\"]}"},
                {"role": "assistant", "content": "Here is a draft."},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "candidate", "schema": schema, "strict": true},
            },
            "tools": [{"type": "function", "function": {
                "name": "get_capabilities",
                "description": "Lists an agent's actions",
                "parameters": {"type": "object", "properties": {"agent": {"type": "string"}}},
            }}],
            "tool_choice": "auto",
            "temperature": 0.25,
            "max_tokens": 300,
        })
    );
}

#[tokio::test]
async fn unset_fields_are_left_out_and_no_key_sends_no_authorization() {
    let server = ScriptServer::start([Step::content("ok")]).await.unwrap();
    let client = LlmClient::new(LlmConfig::new(server.base_url(), "local")).unwrap();

    client
        .chat(ChatRequest::new(vec![Message::user("hi")]))
        .await
        .unwrap();

    let sent = &server.requests()[0];
    assert_eq!(
        sent.body,
        json!({"model": "local", "messages": [{"role": "user", "content": "hi"}]})
    );
    assert_eq!(sent.header("authorization"), None);
}

#[tokio::test]
async fn the_endpoint_follows_the_base_url_and_a_request_may_name_its_model() {
    let server = ScriptServer::start([Step::content("a"), Step::content("b")])
        .await
        .unwrap();
    let bare = LlmConfig::new(format!("http://{}", server.addr()), "m");
    let trailing_slash = LlmConfig::new(format!("{}/", server.base_url()), "m");

    for config in [bare, trailing_slash] {
        let client = LlmClient::new(config).unwrap();
        let request = ChatRequest::new(vec![Message::user("hi")]).with_model("other-model");
        client.chat(request).await.unwrap();
        assert_eq!(client.usage().records()[0].model, "other-model");
    }

    let requests = server.requests();
    assert_eq!(requests[0].path, "/chat/completions");
    assert_eq!(requests[1].path, "/v1/chat/completions");
    assert!(requests.iter().all(|r| r.body["model"] == "other-model"));
}

#[tokio::test]
async fn debug_output_never_shows_the_key() {
    let server = ScriptServer::start([]).await.unwrap();
    let config = config(&server);
    let client = LlmClient::new(config.clone()).unwrap();
    for shown in [format!("{config:?}"), format!("{client:?}")] {
        assert!(!shown.contains(KEY), "{shown}");
        assert!(shown.contains("REDACTED"), "{shown}");
    }
}
