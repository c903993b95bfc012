//! `concord context render` and `concord context get`.

mod support;

use serde_json::{json, Value};
use support::*;

const SEED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../concord-context/tests/data/seed-john-doe.json"
);

/// `concord <args>`, with `stdin` as JSON on standard input when given.
fn concord_with(args: &[&str], stdin: Option<Value>) -> Output {
    let mut command = concord();
    command.args(args);
    if let Some(stdin) = stdin {
        command.write_stdin(stdin.to_string());
    }
    run(&mut command)
}

fn batch() -> Value {
    json!([
        {"type": "text", "text": "Moderate the comments."},
        {"type": "input", "moderate": true},
        {"type": "state", "_instance": "①", "comment": "Great post"},
        {"type": "state", "_instance": "②", "comment": "Spam", "_call": {"_tool": "hidden"}}
    ])
}

#[test]
fn render_prints_the_seed_chat_messages() {
    let out = concord_with(&["context", "render", SEED], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let chat: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        chat,
        json!([
            {"role": "user", "content": "Обновите город пользователя на Остин"},
            {"role": "user", "content": "## Data: ¶user\n{\n  \"name\": \"John Doe\",\n  \"age\": 30\n}\nПредставляет текущего пользователя.\nSchema for ¶user:\n{\n  \"type\": \"object\",\n  \"properties\": {\n    \"name\": { \"type\": \"string\" },\n    \"age\": { \"type\": \"number\" },\n    \"city\": { \"type\": \"string\" }\n  }\n}"}
        ])
    );
    assert_eq!(out.stderr, "");
}

#[test]
fn render_for_one_instance() {
    let out = concord_with(
        &["context", "render", "-", "--instance", "②"],
        Some(batch()),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let chat: Value = serde_json::from_str(&out.stdout).unwrap();
    let contents: Vec<&str> = chat
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        contents,
        [
            "Moderate the comments.",
            "## Data: ¶input\nInput data MUST be treated as a structured prompt\n\n{\n  \"moderate\": true\n}",
            "## Data: ¶state\n{\n  \"comment\": \"Spam\"\n}",
        ]
    );
    let global = concord_with(&["context", "render", "-"], Some(batch()));
    assert!(global.stdout.contains("¶state (_instance: ①)"));
    assert!(!global.stdout.contains("hidden"));
}

#[test]
fn render_reports_schema_violations_with_pointers() {
    let context = json!([
        {"type": "data", "kind": "user", "data": {"age": "thirty"},
         "schema": {"properties": {"age": {"type": "number"}}}}
    ]);
    let out = concord_with(&["context", "render", "-"], Some(context));
    assert_eq!(out.code, 1);
    assert!(
        out.stdout.contains("## Data: ¶user"),
        "the rendering is still printed"
    );
    assert_eq!(
        out.stderr,
        "concord: -: schema violation: ¶user at /age: \"thirty\" is not of type \"number\" (schema /properties/age/type)\n"
    );
}

#[test]
fn render_rejects_invalid_contexts_naming_the_message() {
    let out = concord_with(
        &["context", "render", "-"],
        Some(json!([{"type": "text", "text": "x"}, {"type": "data", "kind": "user"}])),
    );
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr,
        "concord: -: message at /1: data message has no `data`\n"
    );
    assert_eq!(out.stdout, "");

    let output = run_with_stdin(&["context", "render", "-"], "[\n{\"type\": \"text\",}\n]");
    output.fails(1, "context is not valid JSON");
    assert!(output.stderr.contains("line 2"), "{}", output.stderr);

    let conflict = json!([
        {"type": "state", "log": {}},
        {"type": "data", "_outputPath": "†state.log", "_outputMethod": "push", "data": 1}
    ]);
    let out = concord_with(&["context", "render", "-"], Some(conflict));
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr,
        "concord: -: message at /1 (¶state): push needs an array at †state.log, found an object\n"
    );
}

#[test]
fn get_prints_the_resolved_value() {
    let out = concord_with(&["context", "get", SEED, "†user.age"], None);
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, "30\n"),
        "{}",
        out.stderr
    );
    let out = concord_with(&["context", "get", SEED, "†user.city || †user.name"], None);
    assert_eq!((out.code, out.stdout.as_str()), (0, "\"John Doe\"\n"));
    let out = concord_with(&["context", "get", SEED, "†user"], None);
    assert_eq!(
        serde_json::from_str::<Value>(&out.stdout).unwrap(),
        json!({"name": "John Doe", "age": 30})
    );
    let out = concord_with(
        &["context", "get", "-", "†state.comment", "--instance", "①"],
        Some(batch()),
    );
    assert_eq!((out.code, out.stdout.as_str()), (0, "\"Great post\"\n"));
}

#[test]
fn get_exits_1_naming_the_missing_reference() {
    let out = concord_with(&["context", "get", SEED, "†user.age && †user.city"], None);
    assert_eq!(out.code, 1);
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        format!("concord: {SEED}: unresolved `†user.age && †user.city`: †user.city is missing (†user has no key `city`)\n")
    );
}

#[test]
fn bad_arguments_exit_2() {
    let out = concord_with(&["context", "get", SEED, "user.age"], None);
    out.says(2, "expected `†` to start a reference");

    concord_with(&["context", "render", "/nonexistent/context.json"], None)
        .fails(2, "cannot read /nonexistent/context.json");

    let out = concord_with(
        &["context", "render", "-", "--instance", "③"],
        Some(batch()),
    );
    assert_eq!(out.code, 2);
    assert_eq!(
        out.stderr,
        "concord: --instance ③: no message in - has `_instance: ③`\n"
    );

    let out = concord_with(
        &["context", "render", "-", "--instance", "a b"],
        Some(batch()),
    );
    out.says(2, "--instance");
}
