//! Lenient mode: what it forgives (text from an LLM) and what it still refuses.

use concord_aicl::{ErrorKind, Message, ParseOptions, Value};

fn lenient(text: &str) -> Value {
    concord_aicl::from_str_with(text, &ParseOptions::lenient())
        .unwrap_or_else(|error| panic!("{text}: {error}"))
}

#[test]
fn prose_and_code_fences_around_the_value() {
    let reply = "Sure, here is the message:\n```aicl\n[d:[s:protocol]:[s:LightAICL],[s:session_id]:[s:s1],[s:msg_type]:[s:data_query],[s:query]:[s:price]]\n```\nLet me know!";
    let message = Message::parse_with(reply, &ParseOptions::lenient()).unwrap();
    assert_eq!(message.get("query"), Some(&Value::from("price")));
    assert!(Message::parse(reply).is_err());
}

#[test]
fn forgiving_scalars() {
    assert_eq!(lenient("[i: +007 ]"), Value::Int(7));
    assert_eq!(lenient("[f: .5]"), Value::Float(0.5));
    assert_eq!(lenient("[f:Infinity]"), Value::Float(f64::INFINITY));
    assert_eq!(lenient("[b:True]"), Value::Bool(true));
    assert_eq!(lenient("[b: FALSE ]"), Value::Bool(false));
    // Strings keep their spaces in both modes.
    assert_eq!(lenient("[s: spaced ]"), Value::from(" spaced "));
}

#[test]
fn forgiving_strings() {
    assert_eq!(lenient(r"[s:line\nbreak]"), Value::from(r"line\nbreak"));
    assert_eq!(
        lenient("[s:see [1] and [2]]"),
        Value::from("see [1] and [2]")
    );
    assert_eq!(lenient(r"[s:a\]b]"), Value::from("a]b"));
}

#[test]
fn forgiving_structure() {
    assert_eq!(
        lenient("[l:\n  [i:1], # one\n  [i:2], # two\n]"),
        Value::List(vec![Value::Int(1), Value::Int(2)])
    );
    assert_eq!(
        lenient("[d:[s:a]:[i:1],[s:a]:[i:2],]").to_string(),
        "[d:[s:a]:[i:2]]"
    );
    assert_eq!(
        lenient("[t: uint8 : 3 : 0R jU ]")
            .as_tensor()
            .unwrap()
            .data(),
        &[1, 2, 3]
    );
}

#[test]
fn still_refused() {
    for (text, check) in [
        (
            "[i:12x]",
            (|kind| matches!(kind, ErrorKind::BadInt { .. })) as fn(&ErrorKind) -> bool,
        ),
        ("[d:[i:1]:[i:2]]", |kind| {
            matches!(kind, ErrorKind::NonStringKey { .. })
        }),
        ("[l:[i:1]", |kind| {
            matches!(kind, ErrorKind::Unclosed { .. })
        }),
        ("[t:uint8:3:0R jU x]", |kind| {
            matches!(kind, ErrorKind::TensorLength { .. })
        }),
        ("[t:uint8:3:0R\"U]", |kind| {
            matches!(kind, ErrorKind::BadBase85Char { found: '"' })
        }),
        ("no value at all", |kind| {
            matches!(kind, ErrorKind::Expected { .. })
        }),
    ] {
        let error =
            concord_aicl::from_str_with::<Value>(text, &ParseOptions::lenient()).expect_err(text);
        assert!(check(error.kind()), "{text}: {error}");
    }
    // A bad character in whitespace-broken data is located in the original text.
    let text = "[t:uint8:4:00 0\"0]";
    let error = concord_aicl::from_str_with::<Value>(text, &ParseOptions::lenient()).unwrap_err();
    assert_eq!(error.position().unwrap().offset, text.find('"').unwrap());
}
