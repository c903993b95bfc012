//! AICL text in strict and lenient mode, then the message layer and the JSON bridge: never
//! panics, and whatever parses is written back (compact and pretty) to text that parses to
//! the same value. The same text read into a struct (whose keys take the parser's field path)
//! refuses the same duplicate keys, at the same place, as when read into a `Value`.
#![no_main]

use concord_aicl::{json, ErrorKind, Message, ParseOptions, Value};
use libfuzzer_sys::fuzz_target;

/// A struct with fields the seeds and the fuzzer write: the message header, short names, a
/// name with escapes, nesting.
#[derive(serde::Deserialize, Debug)]
#[allow(dead_code)]
struct Typed {
    #[serde(default)]
    protocol: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    msg_type: Option<String>,
    #[serde(default)]
    a: Option<i64>,
    #[serde(default)]
    b: Option<String>,
    #[serde(default)]
    c: Vec<Typed>,
    #[serde(default)]
    d: Option<Box<Typed>>,
    #[serde(default, rename = "e[1]")]
    e: Option<f64>,
}

/// Strict mode: a struct target refuses a duplicate key exactly where a `Value` target does.
fn check_typed_duplicates(data: &[u8], value: &Result<Value, concord_aicl::Error>) {
    let typed = concord_aicl::from_slice::<Typed>(data);
    let is_duplicate =
        |error: &concord_aicl::Error| matches!(error.kind(), ErrorKind::DuplicateKey { .. });
    let offset = |error: &concord_aicl::Error| error.position().map(|position| position.offset);
    if let Err(error) = &typed {
        if is_duplicate(error) {
            let expected = value
                .as_ref()
                .expect_err("a duplicate for a struct is one for a Value");
            assert_eq!(expected.kind(), error.kind());
            assert_eq!(expected.position(), error.position());
        }
    }
    if let Err(expected) = value {
        if is_duplicate(expected) {
            let error = typed
                .as_ref()
                .expect_err("a duplicate for a Value is an error for a struct");
            assert!(offset(error) <= offset(expected), "{error} / {expected}");
        }
    }
}

/// Equality where every NaN equals every NaN (the writer spells them all `nan`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => {
            (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits()
        }
        (Value::List(xs), Value::List(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| same(x, y))
        }
        (Value::Dict(xs), Value::Dict(ys)) => {
            xs.len() == ys.len()
                && xs
                    .iter()
                    .zip(ys.iter())
                    .all(|((kx, x), (ky, y))| kx == ky && same(x, y))
        }
        _ => a == b,
    }
}

fuzz_target!(|data: &[u8]| {
    check_typed_duplicates(data, &concord_aicl::from_slice::<Value>(data));
    for options in [ParseOptions::strict(), ParseOptions::lenient()] {
        let _ = concord_aicl::from_slice_with::<Typed>(data, &options);
        if let Ok(value) = concord_aicl::from_slice_with::<Value>(data, &options) {
            let compact = value.to_string();
            let back: Value = concord_aicl::from_str(&compact).expect("compact output parses");
            assert!(same(&value, &back), "compact: {compact}");
            assert_eq!(back.to_string(), compact, "canonical text is a fixed point");
            let pretty = format!("{value:#}");
            let back: Value = concord_aicl::from_str(&pretty).expect("pretty output parses");
            assert!(same(&value, &back), "pretty: {pretty}");
            if let Ok(bridged) = json::to_json(&value) {
                let _ = json::from_json(&bridged);
            }
            if let Ok(message) = Message::from_value_with(value, options.mode) {
                let reparsed = Message::parse(&message.to_text()).expect("message output parses");
                assert_eq!(reparsed.canonical_bytes(), message.canonical_bytes());
            }
        }
        if let Ok(text) = std::str::from_utf8(data) {
            let _ = Message::parse_with(text, &options);
        }
    }
});
