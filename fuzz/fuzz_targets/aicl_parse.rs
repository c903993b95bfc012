//! AICL text in strict and lenient mode, then the message layer and the JSON bridge: never
//! panics, and whatever parses is written back (compact and pretty) to text that parses to
//! the same value.
#![no_main]

use concord_aicl::{json, Message, ParseOptions, Value};
use libfuzzer_sys::fuzz_target;

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
    for options in [ParseOptions::strict(), ParseOptions::lenient()] {
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
