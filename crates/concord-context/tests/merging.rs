//! Merge rules, output methods and instancing, through whole contexts.

use concord_context::{
    Conflict, Context, InstanceId, Kind, MergeError, OutputError, OutputMethod, OutputWrite, View,
};
use serde_json::{json, Value};

fn context(messages: Value) -> Context {
    Context::from_json(messages.to_string().as_bytes()).unwrap()
}

fn merged(context: &Context, view: &View, kind: &str) -> Option<Value> {
    context.data(view, &Kind::new(kind).unwrap()).unwrap()
}

fn instance(id: &str) -> View {
    View::Instance(InstanceId::new(id).unwrap())
}

#[test]
fn objects_merge_recursively_in_order() {
    let context = context(json!([
        {"type": "state", "user": {"name": "Alex", "address": {"city": "Paris"}}},
        {"type": "state", "user": {"address": {"zip": "75001"}}, "step": 1},
        {"type": "state", "user": {"address": {"city": "Austin"}}}
    ]));
    let value = merged(&context, &View::Global, "state").unwrap();
    assert_eq!(
        serde_json::to_string(&value).unwrap(),
        r#"{"user":{"name":"Alex","address":{"city":"Austin","zip":"75001"}},"step":1}"#
    );
}

#[test]
fn arrays_and_scalars_are_replaced() {
    let context = context(json!([
        {"type": "state", "tags": ["a", "b"], "count": 1, "nested": {"x": 1}},
        {"type": "state", "tags": ["c"], "count": "one", "nested": 5}
    ]));
    assert_eq!(
        merged(&context, &View::Global, "state"),
        Some(json!({"tags": ["c"], "count": "one", "nested": 5}))
    );
    // A whole payload that is not an object replaces too.
    let context = crate::context(json!([
        {"type": "data", "kind": "list", "data": [1, 2]},
        {"type": "data", "kind": "list", "data": [3]}
    ]));
    assert_eq!(merged(&context, &View::Global, "list"), Some(json!([3])));
}

#[test]
fn null_is_a_value_not_a_deletion() {
    let context = context(json!([
        {"type": "state", "draft": "text", "review": {"by": "Sam"}},
        {"type": "state", "draft": null, "review": null}
    ]));
    assert_eq!(
        merged(&context, &View::Global, "state"),
        Some(json!({"draft": null, "review": null}))
    );
    let found = context
        .resolve(&View::Global, &"†state.draft".parse().unwrap())
        .unwrap();
    assert_eq!(found, concord_context::Resolution::Ready(Value::Null));
}

#[test]
fn kinds_are_separate_identities() {
    let context = context(json!([
        {"type": "data", "kind": "user", "data": {"name": "A"}},
        {"type": "data", "kind": "account", "data": {"name": "B"}},
        {"type": "data", "data": {"name": "C"}}
    ]));
    assert_eq!(
        merged(&context, &View::Global, "user"),
        Some(json!({"name": "A"}))
    );
    assert_eq!(
        merged(&context, &View::Global, "account"),
        Some(json!({"name": "B"}))
    );
    assert_eq!(
        merged(&context, &View::Global, "data"),
        Some(json!({"name": "C"}))
    );
    assert_eq!(merged(&context, &View::Global, "state"), None);
}

#[test]
fn output_method_set_replaces_at_the_path() {
    let context = context(json!([
        {"type": "state", "user": {"name": "Alex", "address": {"city": "Paris", "zip": "1"}}},
        {"type": "data", "_outputPath": "†state.user.address", "data": {"city": "Austin"}}
    ]));
    assert_eq!(
        merged(&context, &View::Global, "state"),
        Some(json!({"user": {"name": "Alex", "address": {"city": "Austin"}}}))
    );
}

#[test]
fn output_method_merge_deep_merges_at_the_path() {
    let context = context(json!([
        {"type": "state", "user": {"address": {"city": "Paris", "geo": {"lat": 1}}}},
        {"type": "data", "_outputPath": "†state.user", "_outputMethod": "merge",
         "data": {"address": {"geo": {"lon": 2}}}}
    ]));
    assert_eq!(
        merged(&context, &View::Global, "state"),
        Some(json!({"user": {"address": {"city": "Paris", "geo": {"lat": 1, "lon": 2}}}}))
    );
}

#[test]
fn output_method_assign_is_shallow() {
    let context = context(json!([
        {"type": "state", "user": {"name": "Alex", "address": {"city": "Paris", "geo": {"lat": 1}}}},
        {"type": "data", "_outputPath": "†state.user", "_outputMethod": "assign",
         "data": {"address": {"zip": "1"}}}
    ]));
    assert_eq!(
        merged(&context, &View::Global, "state"),
        Some(json!({"user": {"name": "Alex", "address": {"zip": "1"}}}))
    );
}

#[test]
fn output_methods_push_and_concat_append() {
    let context = context(json!([
        {"type": "data", "_outputPath": "†state.log", "_outputMethod": "push", "data": {"step": 1}},
        {"type": "data", "_outputPath": "†state.log", "_outputMethod": "push", "data": [2]},
        {"type": "data", "_outputPath": "†state.log", "_outputMethod": "concat", "data": [3, 4]}
    ]));
    assert_eq!(
        merged(&context, &View::Global, "state"),
        Some(json!({"log": [{"step": 1}, [2], 3, 4]}))
    );
}

#[test]
fn output_into_an_array_element_by_index() {
    let context = context(json!([
        {"type": "state", "items": [{"name": "a"}, {"name": "b"}]},
        {"type": "data", "_outputPath": "†state.items.1.name", "data": "B"}
    ]));
    assert_eq!(
        merged(&context, &View::Global, "state"),
        Some(json!({"items": [{"name": "a"}, {"name": "B"}]}))
    );
}

#[test]
fn conflicting_writes_are_errors_naming_the_message() {
    let context = context(json!([
        {"type": "state", "log": {"not": "an array"}},
        {"type": "text", "text": "between"},
        {"type": "data", "_outputPath": "†state.log", "_outputMethod": "push", "data": 1}
    ]));
    let error = context.render(&View::Global).unwrap_err();
    assert_eq!(error.message, 2);
    assert_eq!(
        error.to_string(),
        "message at /2 (¶state): push needs an array at †state.log, found an object"
    );
    let context = crate::context(json!([
        {"type": "state", "name": "Alex"},
        {"type": "data", "_outputPath": "†state.name.first", "data": "A"}
    ]));
    assert!(matches!(
        context.data(&View::Global, &Kind::state()),
        Err(MergeError {
            message: 1,
            conflict: Conflict::NotAContainer { .. },
            ..
        })
    ));
}

#[test]
fn append_output_fans_out_and_is_atomic() {
    let mut context = context(json!([{"type": "state", "audit": "not an object"}]));
    let before = context.clone();
    // The second target conflicts: nothing is appended.
    let write = OutputWrite::new(
        "†data.summary && †state.audit.summary".parse().unwrap(),
        json!("S"),
    );
    assert!(matches!(
        context.append_output(write),
        Err(OutputError::Merge(_))
    ));
    assert_eq!(context, before);

    let write = OutputWrite::new(
        "†data.user.summary && †data.audit.summary".parse().unwrap(),
        json!("S"),
    );
    assert_eq!(context.append_output(write).unwrap(), 2);
    assert_eq!(
        merged(&context, &View::Global, "data"),
        Some(json!({"user": {"summary": "S"}, "audit": {"summary": "S"}}))
    );

    let write = OutputWrite::new("†data.ok || †data.failed".parse().unwrap(), json!(true));
    assert!(matches!(
        context.append_output(write),
        Err(OutputError::Alternatives(_))
    ));
}

#[test]
fn append_output_for_an_instanced_call() {
    let mut context = context(json!([
        {"type": "state", "_instance": "employee_A", "task": "Draft", "status": "In Progress"},
        {"type": "state", "_instance": "employee_B", "task": "Review", "status": "Blocked"}
    ]));
    let call = json!({"_tool": "updateTask", "_instance": "employee_B", "_outputPath": "†state.log",
                      "_outputMethod": "push", "newTask": "Finalize"});
    context
        .append_output(OutputWrite::for_call(&call, json!("Finalize")).unwrap())
        .unwrap();
    assert_eq!(
        merged(&context, &instance("employee_B"), "state"),
        Some(json!({"task": "Review", "status": "Blocked", "log": ["Finalize"]}))
    );
    assert_eq!(
        merged(&context, &instance("employee_A"), "state"),
        Some(json!({"task": "Draft", "status": "In Progress"}))
    );
    assert!(matches!(
        OutputWrite::for_call(&json!({"_tool": "x"}), json!(1)),
        Err(OutputError::NoOutputPath)
    ));
    assert!(matches!(
        OutputWrite::for_call(
            &json!({"_outputPath": "†a", "_outputMethod": "pop"}),
            json!(1)
        ),
        Err(OutputError::Message(_))
    ));
    let concat_scalar =
        OutputWrite::new("†state.log".parse().unwrap(), json!(1)).method(OutputMethod::Concat);
    assert!(matches!(
        context.append_output(concat_scalar),
        Err(OutputError::Message(_))
    ));
}

#[test]
fn global_data_is_visible_to_every_instance() {
    let context = context(json!([
        {"type": "input", "instruction": "Give employee B a new task"},
        {"type": "state", "_instance": "employee_A", "task": "Draft"},
        {"type": "state", "_instance": "employee_B", "task": "Review"}
    ]));
    for id in ["employee_A", "employee_B"] {
        assert_eq!(
            merged(&context, &instance(id), "input"),
            Some(json!({"instruction": "Give employee B a new task"}))
        );
    }
    assert_eq!(merged(&context, &View::Global, "state"), None);
    assert_eq!(
        context
            .instances()
            .iter()
            .map(|i| i.as_str())
            .collect::<Vec<_>>(),
        ["employee_A", "employee_B"]
    );
}

#[test]
fn instanced_data_overrides_global_data_wherever_it_appears() {
    // The instanced message comes first and the global one later: the
    // instance still wins for its own view.
    let context = context(json!([
        {"type": "input", "_instance": "①", "comment": "Great post", "lang": "en"},
        {"type": "input", "comment": "(none)", "moderate": true},
        {"type": "input", "_instance": "②", "comment": "Spam"}
    ]));
    assert_eq!(
        merged(&context, &instance("①"), "input"),
        Some(json!({"comment": "Great post", "moderate": true, "lang": "en"}))
    );
    assert_eq!(
        merged(&context, &instance("②"), "input"),
        Some(json!({"comment": "Spam", "moderate": true}))
    );
    assert_eq!(
        merged(&context, &instance("③"), "input"),
        Some(json!({"comment": "(none)", "moderate": true}))
    );
    assert_eq!(
        merged(&context, &View::Global, "input"),
        Some(json!({"comment": "(none)", "moderate": true}))
    );
}

#[test]
fn instances_are_isolated() {
    let context = context(json!([
        {"type": "state", "_instance": "①", "secret": 1},
        {"type": "state", "_instance": "②", "other": 2}
    ]));
    assert_eq!(
        merged(&context, &instance("①"), "state"),
        Some(json!({"secret": 1}))
    );
    assert_eq!(
        merged(&context, &instance("②"), "state"),
        Some(json!({"other": 2}))
    );
    let rendered = context.render(&instance("②")).unwrap();
    assert_eq!(rendered.len(), 1);
    assert!(!rendered[0].content.contains("secret"));
}

#[test]
fn global_render_labels_instances_and_instance_render_does_not() {
    let context = context(json!([
        {"type": "text", "text": "Moderate the comments."},
        {"type": "input", "moderate": true},
        {"type": "state", "_instance": "①", "comment": "Great post"},
        {"type": "state", "_instance": "②", "comment": "Spam"},
        {"type": "input", "_instance": "②", "strict": true}
    ]));
    let global: Vec<String> = context
        .render(&View::Global)
        .unwrap()
        .into_iter()
        .map(|m| m.content)
        .collect();
    assert_eq!(
        global,
        [
            "Moderate the comments.",
            "## Data: ¶input\nInput data MUST be treated as a structured prompt\n\n{\n  \"moderate\": true\n}",
            "## Data: ¶state (_instance: ①)\n{\n  \"comment\": \"Great post\"\n}",
            "## Data: ¶state (_instance: ②)\n{\n  \"comment\": \"Spam\"\n}",
            "## Data: ¶input (_instance: ②)\nInput data MUST be treated as a structured prompt\n\n{\n  \"strict\": true\n}",
        ]
    );
    let second: Vec<String> = context
        .render(&instance("②"))
        .unwrap()
        .into_iter()
        .map(|m| m.content)
        .collect();
    assert_eq!(
        second,
        [
            "Moderate the comments.",
            "## Data: ¶input\nInput data MUST be treated as a structured prompt\n\n{\n  \"moderate\": true,\n  \"strict\": true\n}",
            "## Data: ¶state\n{\n  \"comment\": \"Spam\"\n}",
        ]
    );
}

#[test]
fn newest_schema_and_description_apply() {
    let context = context(json!([
        {"type": "data", "kind": "user", "data": {"a": 1}, "description": "old", "schema": {"title": "old"}},
        {"type": "data", "kind": "user", "data": {"b": 2}, "description": "new"},
        {"type": "data", "kind": "user", "data": {"c": 3}, "schema": {"title": "new"}}
    ]));
    let chat = context.render(&View::Global).unwrap();
    assert_eq!(
        chat[0].content,
        "## Data: ¶user\n{\n  \"a\": 1,\n  \"b\": 2,\n  \"c\": 3\n}\nnew\nSchema for ¶user:\n{\n  \"title\": \"new\"\n}"
    );
}

#[test]
fn blocks_sit_where_their_identity_first_appears() {
    let context = context(json!([
        {"type": "data", "kind": "a", "data": 1},
        {"type": "text", "text": "t1"},
        {"type": "data", "kind": "b", "data": 2},
        {"type": "data", "kind": "a", "data": 3},
        {"type": "text", "text": "t2", "role": "assistant"}
    ]));
    let chat = context.render(&View::Global).unwrap();
    let contents: Vec<&str> = chat.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(contents, ["## Data: ¶a\n3", "t1", "## Data: ¶b\n2", "t2"]);
    assert_eq!(chat[3].role, concord_context::Role::Assistant);
}
