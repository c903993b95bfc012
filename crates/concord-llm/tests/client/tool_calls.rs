use concord_llm::{ChatRequest, FinishReason, Message, Tool};
use concord_llm_script::{ScriptServer, Step};
use serde::Deserialize;
use serde_json::json;

use crate::client;

#[derive(Debug, PartialEq, Deserialize)]
struct Lookup {
    sku: String,
    quantity: u32,
}

#[tokio::test]
async fn tool_calls_are_parsed_and_can_be_answered() {
    let server = ScriptServer::start([
        Step::tool_call("get_product", json!({"sku": "A-1", "quantity": 2})),
        Step::content("A-1 costs 3 EUR"),
    ])
    .await
    .unwrap();
    let client = client(&server);
    let tools = vec![Tool::function(
        "get_product",
        "Looks a product up",
        json!({"type": "object", "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer"}}}),
    )];
    let mut messages = vec![Message::user("What does A-1 cost?")];

    let response = client
        .chat(ChatRequest::new(messages.clone()).with_tools(tools.clone()))
        .await
        .unwrap();

    assert_eq!(
        response.choices[0].finish_reason,
        Some(FinishReason::ToolCalls)
    );
    assert_eq!(response.content(), None);
    let calls = response.tool_calls().to_vec();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].function.name, "get_product");
    assert_eq!(
        calls[0].parse_arguments::<Lookup>().unwrap(),
        Lookup {
            sku: "A-1".into(),
            quantity: 2
        }
    );

    messages.push(Message::assistant_tool_calls(calls.clone()));
    messages.push(Message::tool_result(&calls[0].id, r#"{"price":"3 EUR"}"#));
    let answer = client
        .chat(ChatRequest::new(messages).with_tools(tools))
        .await
        .unwrap();

    assert_eq!(answer.content(), Some("A-1 costs 3 EUR"));
    let sent = server.requests()[1].messages().to_vec();
    assert_eq!(
        sent[1],
        json!({"role": "assistant", "tool_calls": [{
            "id": calls[0].id, "type": "function",
            "function": {"name": "get_product", "arguments": calls[0].function.arguments},
        }]})
    );
    assert_eq!(
        sent[2],
        json!({"role": "tool", "tool_call_id": calls[0].id, "content": "{\"price\":\"3 EUR\"}"})
    );
}

#[tokio::test]
async fn tool_arguments_are_parsed_strictly() {
    let server = ScriptServer::start([Step::tool_call("get_product", json!({"sku": 7}))])
        .await
        .unwrap();

    let response = client(&server)
        .chat(ChatRequest::new(vec![Message::user("?")]))
        .await
        .unwrap();

    let error = response.tool_calls()[0]
        .parse_arguments::<Lookup>()
        .unwrap_err();
    assert!(error.to_string().contains("invalid type"), "{error}");
}
