//! The examples of the source chapters, rendered and read exactly as they show.

use concord_context::{ChatMessage, Context, OutputWrite, Resolution, Role, View};
use serde_json::json;

const SEED_CONTEXT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/seed-john-doe.json");
const SEED_DOCUMENT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/seeds/agent-data-message.ru.txt"
);

/// The seed's "What the LLM sees", with its indentation restored and the
/// fixed label in the language SPEC-NOTES §2 gives it (`Schema for`).
const SEED_DATA_BLOCK: &str = r#"## Data: ¶user
{
  "name": "John Doe",
  "age": 30
}
Представляет текущего пользователя.
Schema for ¶user:
{
  "type": "object",
  "properties": {
    "name": { "type": "string" },
    "age": { "type": "number" },
    "city": { "type": "string" }
  }
}"#;

fn seed_context() -> Context {
    Context::from_json(&std::fs::read(SEED_CONTEXT).unwrap()).unwrap()
}

#[test]
fn john_doe_then_age_30_renders_as_the_seed_shows() {
    let chat = seed_context().render(&View::Global).unwrap();
    assert_eq!(
        chat,
        vec![
            ChatMessage {
                role: Role::User,
                content: "Обновите город пользователя на Остин".into()
            },
            ChatMessage {
                role: Role::User,
                content: SEED_DATA_BLOCK.into()
            },
        ]
    );
}

/// The seed document itself as the oracle: its page text lost the
/// indentation and translated the fixed label, otherwise it must match line
/// for line.
#[test]
fn rendered_block_matches_the_seed_document_line_for_line() {
    let Ok(document) = std::fs::read_to_string(SEED_DOCUMENT) else {
        eprintln!("skipped: {SEED_DOCUMENT} is absent (../shared is not beside the checkout)");
        return;
    };
    let start = document
        .find("text: `\n")
        .expect("seed has the rendered block")
        + "text: `\n".len();
    let end = start + document[start..].find('`').expect("block is closed");
    let seed_lines: Vec<String> = document[start..end]
        .replace("Схема для ¶user:", "Schema for ¶user:")
        .lines()
        .map(|line| line.trim().to_owned())
        .collect();
    let chat = seed_context().render(&View::Global).unwrap();
    let ours: Vec<String> = chat[1]
        .content
        .lines()
        .map(|line| line.trim().to_owned())
        .collect();
    assert_eq!(ours, seed_lines);
}

#[test]
fn chapter_006_input_renders_with_the_input_layout() {
    let context = Context::from_json(
        br#"[{
          "type": "input",
          "input": {"userName": "Jane", "topic": "the weather"},
          "schema": {"type": "object", "properties": {
            "userName": {"type": "string", "description": "Author of the article"},
            "topic": {"type": "string", "description": "Topic to write article about"}
          }}
        }]"#,
    )
    .unwrap();
    let chat = context.render(&View::Global).unwrap();
    assert_eq!(chat.len(), 1);
    assert_eq!(
        chat[0].content,
        r#"## Data: ¶input
Input data MUST be treated as a structured prompt
Schema: {
  "type": "object",
  "properties": {
    "userName": { "type": "string", "description": "Author of the article" },
    "topic": { "type": "string", "description": "Topic to write article about" }
  }
}

{
  "userName": "Jane",
  "topic": "the weather"
}"#
    );
}

/// Chapter 008's user after the status update: `status` reads the written
/// value, `name` the older one.
fn assert_user_status_written(context: &Context) {
    let read = |text: &str| {
        context
            .resolve(&View::Global, &text.parse().unwrap())
            .unwrap()
    };
    assert_eq!(
        read("†data.user.status"),
        Resolution::Ready(json!("inactive"))
    );
    assert_eq!(read("†data.user.name"), Resolution::Ready(json!("Alex")));
}

/// Chapter 008's example: an output appended, then both paths read back
/// newest to oldest.
#[test]
fn chapter_008_append_and_resolve() {
    let mut context = Context::from_json(
        br#"[{"type": "data", "data": {"user": {"name": "Alex", "status": "active"}}}]"#,
    )
    .unwrap();
    let call = json!({"_tool": "updateUserStatus", "newStatus": "inactive", "_outputPath": "†data.user.status"});
    let appended = context
        .append_output(
            OutputWrite::for_call(&call, json!("inactive"))
                .unwrap()
                .date("2025-10-26T12:00:00Z"),
        )
        .unwrap();
    assert_eq!(appended, 1);
    assert_eq!(
        context.messages()[1].to_value(),
        json!({
            "type": "data", "kind": "data", "data": "inactive",
            "_outputPath": "†data.user.status", "_call": call, "_date": "2025-10-26T12:00:00Z"
        })
    );
    assert_user_status_written(&context);
    // The LLM sees the merged value, without the hidden _call and _date.
    let chat = context.render(&View::Global).unwrap();
    assert_eq!(
        chat[0].content,
        "## Data: ¶data\n{\n  \"user\": { \"name\": \"Alex\", \"status\": \"inactive\" }\n}"
    );
}

/// Chapter 008's appended message, written as the chapter writes it (data
/// wrapped to the path, no `_outputPath`), reads the same way.
#[test]
fn chapter_008_wrapped_output_message_reads_the_same() {
    let context = Context::from_json(
        r#"[
          {"type": "data", "data": {"user": {"name": "Alex", "status": "active"}}},
          {"type": "data", "data": {"user": {"status": "inactive"}},
           "_call": {"_tool": "updateUserStatus", "newStatus": "inactive", "_outputPath": "†data.user.status"},
           "_date": "2025-10-26T12:00:00Z"}
        ]"#
        .as_bytes(),
    )
    .unwrap();
    assert_user_status_written(&context);
}
