//! Properties: rendering is deterministic, merging object patches is
//! associative, and reads follow chapter 008's newest-to-oldest rule.

use concord_context::{deep_merge, Context, InstanceId, Kind, Resolution, View};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1000i32..1000).prop_map(|n| Value::from(f64::from(n) / 4.0)),
        ".{0,12}".prop_map(Value::String),
    ]
}

fn any_json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("[a-d_]{1,3}", inner), 0..4)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

/// An object patch whose shape is consistent across patches: keys `a` and `b`
/// always hold objects, keys `x` and `y` always hold leaves (scalars, `null`
/// or arrays of numbers).
fn object_patch(depth: u32) -> BoxedStrategy<Value> {
    let leaf_value = prop_oneof![
        leaf(),
        prop::collection::vec(any::<i8>(), 0..3).prop_map(|v| json!(v))
    ];
    let leaf_member =
        (prop::sample::select(vec!["x", "y"]), leaf_value).prop_map(|(k, v)| (k.to_owned(), v));
    if depth == 0 {
        return prop::collection::vec(leaf_member, 0..3)
            .prop_map(|members| Value::Object(members.into_iter().collect::<Map<_, _>>()))
            .boxed();
    }
    let object_member = (
        prop::sample::select(vec!["a", "b"]),
        object_patch(depth - 1),
    )
        .prop_map(|(k, v)| (k.to_owned(), v));
    prop::collection::vec(prop_oneof![leaf_member, object_member], 0..4)
        .prop_map(|members| Value::Object(members.into_iter().collect::<Map<_, _>>()))
        .boxed()
}

fn leaf_path() -> impl Strategy<Value = Vec<String>> {
    (
        prop::collection::vec(prop::sample::select(vec!["a", "b"]), 0..3),
        prop::sample::select(vec!["x", "y"]),
    )
        .prop_map(|(objects, leaf)| {
            objects
                .into_iter()
                .chain([leaf])
                .map(str::to_owned)
                .collect()
        })
}

fn message() -> impl Strategy<Value = Value> {
    let kind = prop::sample::select(vec!["user", "state", "input", "data"]);
    let instance = prop::option::of(prop::sample::select(vec!["①", "②", "employee_A"]));
    let data = (
        kind,
        instance,
        any_json(),
        prop::option::of(".{0,20}"),
        prop::option::of(any_json()),
        prop::option::of((
            prop::sample::select(vec!["set", "merge", "assign", "push"]),
            "[a-c]{1,2}",
        )),
    )
        .prop_map(|(kind, instance, data, description, schema, output)| {
            let mut message = json!({"type": "data", "kind": kind, "data": data});
            if let Some(instance) = instance {
                message["_instance"] = json!(instance);
            }
            if let Some(description) = description {
                message["description"] = json!(description);
            }
            if let Some(schema @ Value::Object(_)) = schema {
                message["schema"] = schema;
            }
            if let Some((method, key)) = output {
                message["_outputPath"] = json!(format!("†{kind}.{key}"));
                message["_outputMethod"] = json!(method);
            }
            message
        });
    prop_oneof![
        4 => data,
        1 => (".{0,30}", prop::sample::select(vec!["system", "user", "assistant"]))
            .prop_map(|(text, role)| json!({"type": "text", "text": text, "role": role})),
        1 => ("[a-z:.]{1,10}", ".{0,30}").prop_map(|(peer, text)| json!({"type": "peer", "peer": peer, "text": text})),
    ]
}

fn views(context: &Context) -> Vec<View> {
    let mut views = vec![View::Global];
    views.extend(context.instances().into_iter().cloned().map(View::Instance));
    views.push(View::Instance(InstanceId::new("absent").unwrap()));
    views
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn rendering_is_deterministic(messages in prop::collection::vec(message(), 0..12)) {
        let text = serde_json::to_vec(&messages).unwrap();
        let context = Context::from_json(&text).unwrap();
        // A second, independently built context (other hash seeds), and one
        // read back from the first one's canonical JSON.
        let again = Context::from_json(&text).unwrap();
        let round_trip = Context::from_json(&serde_json::to_vec(&context).unwrap()).unwrap();
        prop_assert_eq!(&round_trip, &context);
        for view in views(&context) {
            let first = context.render(&view);
            prop_assert_eq!(&first, &context.render(&view));
            prop_assert_eq!(&first, &again.render(&view));
            prop_assert_eq!(&first, &round_trip.render(&view));
        }
    }

    #[test]
    fn merging_object_patches_is_associative(a in object_patch(2), b in object_patch(2), c in object_patch(2)) {
        let mut left = a.clone();
        deep_merge(&mut left, &b);
        deep_merge(&mut left, &c);
        let mut bc = b.clone();
        deep_merge(&mut bc, &c);
        let mut right = a.clone();
        deep_merge(&mut right, &bc);
        // Equal including key order.
        prop_assert_eq!(serde_json::to_string(&left).unwrap(), serde_json::to_string(&right).unwrap());

        // The same through contexts: three messages read as a, then b merged with c.
        let three = Context::from_json(json!([
            {"type": "state", "state": a}, {"type": "state", "state": b}, {"type": "state", "state": c}
        ]).to_string().as_bytes()).unwrap();
        let two = Context::from_json(json!([
            {"type": "state", "state": a}, {"type": "state", "state": bc}
        ]).to_string().as_bytes()).unwrap();
        let state = Kind::state();
        prop_assert_eq!(three.render(&View::Global), two.render(&View::Global));
        prop_assert_eq!(three.data(&View::Global, &state), two.data(&View::Global, &state));
    }

    /// Chapter 008: a leaf path reads from the newest message that contains it.
    #[test]
    fn leaf_reads_come_from_the_newest_message_that_has_them(
        patches in prop::collection::vec(object_patch(2), 1..8),
        path in leaf_path(),
    ) {
        let messages: Vec<Value> = patches.iter().map(|p| json!({"type": "state", "state": p})).collect();
        let context = Context::from_json(serde_json::to_vec(&messages).unwrap().as_slice()).unwrap();
        let oracle = patches.iter().rev().find_map(|patch| {
            path.iter().try_fold(patch, |node, key| node.get(key))
        });
        let reference = format!("†state.{}", path.join("."));
        let resolved = context.resolve(&View::Global, &reference.parse().unwrap()).unwrap();
        match oracle {
            Some(value) => prop_assert_eq!(resolved, Resolution::Ready(value.clone())),
            None => prop_assert!(matches!(resolved, Resolution::Pending(_))),
        }
    }

    /// Outputs with `set`: a path reads from the newest write at it or above it.
    #[test]
    fn set_outputs_read_back_newest_first(
        writes in prop::collection::vec((leaf_path(), 0usize..3, leaf()), 1..10),
        path in leaf_path(),
    ) {
        // Each write stores a leaf at a cut of its path, wrapped to the full
        // path, so it may cover a deeper read.
        let mut messages = vec![json!({"type": "state"})];
        let mut oracle_writes = Vec::new();
        for (full, cut, value) in &writes {
            let cut = (*cut).min(full.len() - 1);
            let (at, rest) = full.split_at(full.len() - cut);
            let wrapped = rest.iter().rev().fold(value.clone(), |inner, key| json!({key.clone(): inner}));
            messages.push(json!({"type": "data", "_outputPath": format!("†state.{}", at.join(".")), "data": wrapped}));
            oracle_writes.push((at.to_vec(), wrapped));
        }
        let context = Context::from_json(serde_json::to_vec(&messages).unwrap().as_slice()).unwrap();
        let oracle = oracle_writes.iter().rev().find_map(|(at, value)| {
            path.strip_prefix(at.as_slice()).map(|rest| rest.iter().try_fold(value, |node, key| node.get(key)))
        });
        let reference = format!("†state.{}", path.join("."));
        let resolved = context.resolve(&View::Global, &reference.parse().unwrap());
        match oracle {
            Some(Some(value)) => prop_assert_eq!(resolved.unwrap(), Resolution::Ready(value.clone())),
            // The newest covering write has no such key, or nothing covers the path.
            Some(None) | None => prop_assert!(!matches!(resolved, Ok(Resolution::Ready(_)))),
        }
    }
}
