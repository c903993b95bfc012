//! Variable references: `||`, `&&`, nested paths, array indices, missing data.

use concord_context::{
    Context, Expression, InstanceId, Missing, MissingReason, Pending, Resolution, SubstituteError,
    Unresolved, View,
};
use serde_json::{json, Value};

fn context() -> Context {
    Context::from_json(
        json!([
            {"type": "input", "input": {"userName": "Jane", "topic": null}},
            {"type": "state", "user": {"profile": {"name": "Alex", "langs": ["en", "fr"]}},
             "items": [{"id": 1, "tags": ["a"]}, {"id": 2, "tags": ["b", "c"]}],
             "permissions": ["read"], "title": "T"},
            {"type": "state", "_instance": "①", "title": "Instance title"}
        ])
        .to_string()
        .as_bytes(),
    )
    .unwrap()
}

fn resolve(text: &str) -> Resolution {
    context()
        .resolve(&View::Global, &text.parse().unwrap())
        .unwrap()
}

fn missing_reasons(resolution: Resolution) -> Vec<(String, MissingReason)> {
    let Resolution::Pending(Pending { unresolved }) = resolution else {
        panic!("resolved: {resolution:?}");
    };
    assert_eq!(unresolved.len(), 1);
    unresolved[0]
        .missing
        .iter()
        .map(|Missing { reference, reason }| (reference.to_string(), reason.clone()))
        .collect()
}

#[test]
fn nested_paths_and_array_indices() {
    assert_eq!(resolve("†input.userName"), Resolution::Ready(json!("Jane")));
    assert_eq!(
        resolve("†state.user.profile.name"),
        Resolution::Ready(json!("Alex"))
    );
    assert_eq!(
        resolve("†state.user.profile.langs.1"),
        Resolution::Ready(json!("fr"))
    );
    assert_eq!(
        resolve("†state.items.1.tags.0"),
        Resolution::Ready(json!("b"))
    );
    assert_eq!(
        resolve("†state.items.0"),
        Resolution::Ready(json!({"id": 1, "tags": ["a"]}))
    );
    assert_eq!(
        resolve("†input"),
        Resolution::Ready(json!({"userName": "Jane", "topic": null}))
    );
    assert_eq!(resolve("†input.topic"), Resolution::Ready(Value::Null));
}

#[test]
fn or_takes_the_first_alternative_that_exists() {
    assert_eq!(
        resolve("†input.missing || †input.userName"),
        Resolution::Ready(json!("Jane"))
    );
    assert_eq!(
        resolve("†input.userName || †state.title"),
        Resolution::Ready(json!("Jane"))
    );
    // null exists: it is taken, not skipped.
    assert_eq!(
        resolve("†input.topic || †state.title"),
        Resolution::Ready(Value::Null)
    );
}

#[test]
fn and_needs_every_reference_and_gives_the_last() {
    assert_eq!(
        resolve("†state.user && †state.permissions"),
        Resolution::Ready(json!(["read"]))
    );
    let reasons = missing_reasons(resolve("†state.user && †state.grants && †draft.text"));
    assert_eq!(
        reasons,
        [
            (
                "†state.grants".to_owned(),
                MissingReason::NoKey {
                    at: "†state".into(),
                    key: "grants".into()
                }
            ),
            (
                "†draft.text".to_owned(),
                MissingReason::NoData {
                    kind: "draft".parse().unwrap()
                }
            ),
        ]
    );
    // && binds tighter than ||.
    assert_eq!(
        resolve("†state.grants && †state.user || †state.title"),
        Resolution::Ready(json!("T"))
    );
}

#[test]
fn missing_references_are_named_with_the_reason() {
    let reasons = missing_reasons(resolve(
        "†state.items.5.id || †state.title.x || †state.user.age",
    ));
    assert_eq!(
        reasons,
        [
            (
                "†state.items.5.id".to_owned(),
                MissingReason::NoElement {
                    at: "†state.items".into(),
                    len: 2,
                    segment: "5".into()
                }
            ),
            (
                "†state.title.x".to_owned(),
                MissingReason::NotAContainer {
                    at: "†state.title".into(),
                    found: "a string",
                    segment: "x".into()
                }
            ),
            (
                "†state.user.age".to_owned(),
                MissingReason::NoKey {
                    at: "†state.user".into(),
                    key: "age".into()
                }
            ),
        ]
    );
    let Resolution::Pending(pending) = resolve("†plan.next") else {
        panic!()
    };
    assert_eq!(
        pending.to_string(),
        "unresolved `†plan.next`: †plan.next is missing (no `plan` data in this view)"
    );
    assert_eq!(
        resolve("†state.items.x")
            .into_result()
            .unwrap_err()
            .unresolved
            .len(),
        1
    );
}

#[test]
fn instance_views_resolve_against_the_instance() {
    let context = context();
    let title: Expression = "†state.title".parse().unwrap();
    let first = View::Instance(InstanceId::new("①").unwrap());
    let second = View::Instance(InstanceId::new("②").unwrap());
    assert_eq!(
        context.resolve(&first, &title).unwrap(),
        Resolution::Ready(json!("Instance title"))
    );
    assert_eq!(
        context.resolve(&second, &title).unwrap(),
        Resolution::Ready(json!("T"))
    );
    assert_eq!(
        context.resolve(&View::Global, &title).unwrap(),
        Resolution::Ready(json!("T"))
    );
}

#[test]
fn substitution_inside_any_json_value() {
    let call = json!({
        "_tool": "renderDashboard",
        "user": "†state.user.profile.name",
        "args": {"langs": "†state.user.profile.langs", "list": ["†input.userName", "literal", 3]},
        "note": "not a reference: †input.userName",
        "†input.userName": "keys are never references",
        "_outputPath": "†state.summary",
        "_call": {"arg": "†nothing.here"}
    });
    let Resolution::Ready(value) = context().substitute(&View::Global, &call).unwrap() else {
        panic!("pending");
    };
    assert_eq!(
        value,
        json!({
            "_tool": "renderDashboard",
            "user": "Alex",
            "args": {"langs": ["en", "fr"], "list": ["Jane", "literal", 3]},
            "note": "not a reference: †input.userName",
            "†input.userName": "keys are never references",
            "_outputPath": "†state.summary",
            "_call": {"arg": "†nothing.here"}
        })
    );
}

#[test]
fn substitution_reports_every_pending_pointer() {
    let call = json!({"a": "†state.nope", "b": [1, "†input.userName", "†draft.x || †state.gone"], "c/d": "†x.y"});
    let Resolution::Pending(Pending { unresolved }) =
        context().substitute(&View::Global, &call).unwrap()
    else {
        panic!("resolved");
    };
    let pointers: Vec<&str> = unresolved
        .iter()
        .map(|u: &Unresolved| u.pointer.as_str())
        .collect();
    assert_eq!(pointers, ["/a", "/b/2", "/c~1d"]);
    assert_eq!(unresolved[1].missing.len(), 2);
    assert_eq!(
        unresolved[0].to_string(),
        "`†state.nope` at /a: †state.nope is missing (†state has no key `nope`)"
    );
}

#[test]
fn malformed_references_in_values_are_errors_with_pointers() {
    let error = context()
        .substitute(&View::Global, &json!({"x": ["†state..a"]}))
        .unwrap_err();
    let SubstituteError::Expression { pointer, cause } = &error else {
        panic!("{error}")
    };
    assert_eq!(pointer, "/x/0");
    assert_eq!(cause.at, 9);
    assert_eq!(
        error.to_string(),
        "/x/0: invalid variable expression `†state..a` at byte 9: empty path segment"
    );
    // The message says the cause; no source repeats it.
    assert!(std::error::Error::source(&error).is_none());
}
