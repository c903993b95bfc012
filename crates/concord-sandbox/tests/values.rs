//! Values cross the sandbox boundary exactly as `JSON.parse` and `JSON.stringify` would carry
//! them, and the input and output caps are measured on compact JSON text.

use std::time::Duration;

use concord_sandbox::{Function, Limits, Role, Sandbox, SandboxError};
use serde_json::{json, Value};

/// `encodeRequest` returns the case's value itself (taken out by the sandbox);
/// `decodeResponse` returns `JSON.stringify` of the same value, computed inside the engine.
const CASES: &str = r#"
class Point { constructor() { this.x = 1; this.y = 2; } get sum() { return 3; } }
class Stamped { toJSON(key) { return "stamped:" + key; } }
function cases() {
  const withHidden = { shown: 1 };
  Object.defineProperty(withHidden, "hidden", { value: 2, enumerable: false });
  const withSymbol = { a: 1, [Symbol("s")]: 2 };
  const arrayWithExtra = [1, 2];
  arrayWithExtra.extra = "ignored";
  const holes = [1, , 3];
  holes.length = 5;
  const bare = Object.create(null);
  bare.z = 1;
  const inherited = Object.create({ fromProto: 1 });
  inherited.own = 2;
  const ownToJson = { a: 1, toJSON() { return { replaced: true }; } };
  const hiddenToJson = { a: 1 };
  Object.defineProperty(hiddenToJson, "toJSON", { value: () => "hidden toJSON" });
  const getter = { get computed() { return [1, { deep: "yes" }]; } };
  const args = (function () { return arguments; })(1, "two");
  return [
    null, true, false, 0, -0, 1, -1, 2147483647, 2147483648, -2147483649, 9007199254740993,
    1.5, -2.25e-7, 1e21, 123e300, NaN, Infinity, -Infinity, 0.1 + 0.2,
    "", "plain", "quote \" backslash \\ newline \n tab \t nul \u0000 del \u007f", "é中文😀",
    [], {}, [undefined, () => 1, Symbol("x"), null], { u: undefined, f() {}, s: Symbol("y"), n: null },
    { "10": "a", "2": "b", z: "c", "-1": "d", a: "e" },
    withHidden, withSymbol, arrayWithExtra, holes, bare, inherited, ownToJson, hiddenToJson, getter,
    new Point(), new Stamped(), { nested: new Stamped() }, [new Stamped()],
    new Date(0), { when: new Date(86400000) }, new Map([[1, 2]]), new Set([1]),
    new Number(5), new String("boxed"), new Boolean(false),
    new Error("e"), /re/g, new Int8Array([1, -2]), new ArrayBuffer(4), args,
    { pending: Promise.resolve(1) }, new WeakMap(), [[[[["deep"]]]]],
    { a: { b: { c: [1, { d: [2, { e: null }] }] } } },
  ];
}
function encodeRequest(input) { return cases()[input.index]; }
function decodeResponse(input) {
  const value = cases()[input.index];
  return { count: cases().length, text: JSON.stringify(value) };
}
"#;

fn limits() -> Limits {
    let mut limits = Limits::default();
    limits.call_timeout = Duration::from_millis(500);
    limits
}

#[test]
fn output_is_what_json_stringify_gives() {
    let mut handler = Sandbox::load(CASES, Role::Requester, limits()).unwrap();
    let count = handler
        .call(Function::DecodeResponse, &json!({"index": 0}))
        .unwrap()["count"]
        .as_u64()
        .unwrap();
    for index in 0..count {
        let input = json!({"index": index});
        let reference = handler.call(Function::DecodeResponse, &input).unwrap();
        let expected: Value = serde_json::from_str(reference["text"].as_str().unwrap()).unwrap();
        let taken = handler.call(Function::EncodeRequest, &input).unwrap();
        assert_eq!(taken, expected, "case {index}: {}", reference["text"]);
    }
}

const ECHO: &str = r#"
function decodeRequest(message) {
  return {
    same: message,
    text: JSON.stringify(message),
    types: Object.values(message).map((v) => Array.isArray(v) ? "array" : v === null ? "null" : typeof v),
    integerTyped: Number.isInteger(message.int),
    keys: Object.keys(message),
  };
}
function encodeResponse(result) { return result; }
"#;

#[test]
fn input_is_what_json_parse_gives() {
    let mut handler = Sandbox::load(ECHO, Role::Provider, limits()).unwrap();
    let input: Value = serde_json::from_str(
        r#"{"int": 42, "big": 18446744073709551615, "neg": -9007199254740993, "float": 0.1,
            "exp": 1e300, "s": "é\u0000\n\"😀", "t": true, "n": null, "a": [1, [2, {}]], "o": {"k": []},
            "2": "index-like", "__proto__": "own"}"#,
    )
    .unwrap();
    let output = handler.call(Function::DecodeRequest, &input).unwrap();
    let text: Value = serde_json::from_str(output["text"].as_str().unwrap()).unwrap();
    // What JSON.parse of the input's text then JSON.stringify would give: integers beyond
    // 2^53 rounded to the nearest double, everything else unchanged.
    let mut expected = input.clone();
    expected["big"] = json!(18446744073709551616.0);
    expected["neg"] = json!(-9007199254740992i64);
    assert_eq!(text, expected);
    assert_eq!(output["same"], expected);
    assert_eq!(output["integerTyped"], json!(true));
    // Integer-like keys come first, as for any JS object.
    assert_eq!(output["keys"][0], json!("2"));
    assert_eq!(
        output["types"],
        json!([
            "string", "number", "number", "number", "number", "number", "string", "boolean",
            "null", "array", "object", "string"
        ])
    );
}

#[test]
fn output_cap_is_exact_on_compact_json() {
    let source = r#"
function decodeRequest(m) { return m.kind === "float" ? [0.1, 0.2, m.pad] : m.kind === "date"
  ? { when: new Date(0), pad: m.pad } : { pad: m.pad }; }
function encodeResponse(r) { return r; }
"#;
    for kind in ["plain", "float", "date"] {
        let mut probe = Sandbox::load(source, Role::Provider, limits()).unwrap();
        let input = json!({"kind": kind, "pad": "x".repeat(50)});
        let output = probe.call(Function::DecodeRequest, &input).unwrap();
        let size = serde_json::to_string(&output).unwrap().len();

        let mut exact = limits();
        exact.output_bytes = size;
        let mut handler = Sandbox::load(source, Role::Provider, exact.clone()).unwrap();
        assert_eq!(
            handler.call(Function::DecodeRequest, &input),
            Ok(output),
            "{kind}"
        );

        exact.output_bytes = size - 1;
        let mut handler = Sandbox::load(source, Role::Provider, exact).unwrap();
        assert_eq!(
            handler.call(Function::DecodeRequest, &input),
            Err(SandboxError::OutputTooLarge { limit: size - 1 }),
            "{kind}"
        );
    }
}

#[test]
fn output_nesting_is_bounded_like_serde_json() {
    let source = r#"
function decodeRequest(m) { let v = 1; for (let i = 0; i < m.depth; i++) v = [v]; return v; }
function encodeResponse(r) { return r; }
"#;
    let mut handler = Sandbox::load(source, Role::Provider, limits()).unwrap();
    let ok = handler
        .call(Function::DecodeRequest, &json!({"depth": 127}))
        .unwrap();
    assert_eq!(
        serde_json::to_string(&ok).unwrap().matches('[').count(),
        127
    );
    let error = handler
        .call(Function::DecodeRequest, &json!({"depth": 128}))
        .unwrap_err();
    assert!(
        matches!(error, SandboxError::InvalidOutput { .. }),
        "{error:?}"
    );
}

#[test]
fn promises_are_settled_and_console_is_silent() {
    let source = r#"
async function decodeRequest(m) {
  console.log("decoding", m);
  const doubled = await Promise.resolve(m.n * 2);
  return { doubled, later: await new Promise((resolve) => queueMicrotask(() => resolve("ok"))) };
}
function encodeResponse(r) { console.error(r); return r; }
"#;
    let mut handler = Sandbox::load(source, Role::Provider, limits()).unwrap();
    assert_eq!(
        handler.call(Function::DecodeRequest, &json!({"n": 21})),
        Ok(json!({"doubled": 42, "later": "ok"}))
    );
}

#[test]
fn invalid_limits_are_refused_at_load() {
    let mut limits = limits();
    limits.stack_bytes = 0;
    assert!(matches!(
        Sandbox::load("", Role::Provider, limits),
        Err(SandboxError::InvalidLimit {
            limit: "stack_bytes",
            ..
        })
    ));
}

#[test]
fn the_smallest_memory_cap_still_runs_a_handler() {
    let mut small = limits();
    small.memory_bytes = 1 << 20;
    let mut handler = Sandbox::load(ECHO, Role::Provider, small).unwrap();
    let output = handler
        .call(Function::DecodeRequest, &json!({"a": 1}))
        .unwrap();
    assert_eq!(output["same"], json!({"a": 1}));
}

#[test]
fn members_named_like_object_prototype_members_must_be_defined_not_assigned() {
    let source = r#"
function decodeRequest(m) {
  const literal = { toString: "fine", constructor: "fine" };
  const assigned = {};
  try { assigned.toString = "refused"; } catch (e) { return { literal, error: e.name }; }
  return { literal, error: null };
}
function encodeResponse(r) { return r; }
"#;
    let mut handler = Sandbox::load(source, Role::Provider, limits()).unwrap();
    assert_eq!(
        handler.call(Function::DecodeRequest, &json!({})),
        Ok(json!({"literal": {"toString": "fine", "constructor": "fine"}, "error": "TypeError"}))
    );
}

mod round_trip {
    use super::*;
    use concord_sandbox::{check_input, check_output, round_trip};
    use proptest::prelude::*;

    fn key() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "a",
            "b",
            "__proto__",
            "constructor",
            "0",
            "1",
            "7",
            "10",
            "01",
            "-1",
            "1.5",
            "2147483647",
            "2147483648",
            "4294967294",
            "4294967295",
            "",
        ])
        .prop_map(str::to_owned)
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            prop::sample::select(vec![
                0.0,
                -0.0,
                1.0,
                0.5,
                1299.99,
                1e21,
                1e20,
                1.5e-7,
                2f64.powi(53) + 2.0,
                2f64.powi(64),
                -2f64.powi(63),
                123456789.125,
            ])
            .prop_map(|float| json!(float)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            "[a-z😀\"\\\n]{0,3}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((key(), inner), 0..5)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    const IDENTITY: &str = "function decodeRequest(m) { return m; }
                            function encodeResponse(r) { return r; }";

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// `check_input` and `check_output` refuse exactly what the sandbox refuses: a limit
        /// of the value's exact size passes, one byte less does not; too deep is too deep.
        #[test]
        fn the_caps_are_measured_as_the_sandbox_measures_them(
            input in value(),
            nesting in prop::option::weighted(0.2, 120usize..135),
        ) {
            let input = match nesting {
                Some(levels) => (0..levels).fold(input, |inner, _| json!([inner])),
                None => input,
            };
            let size = serde_json::to_string(&input).unwrap().len();
            for limit in [size, size - 1] {
                let mut limits = limits();
                limits.input_bytes = limit;
                limits.output_bytes = limit;
                let mut handler = Sandbox::load(IDENTITY, Role::Provider, limits.clone()).unwrap();
                let sandboxed = handler.call(Function::DecodeRequest, &input);
                let native = check_input(&input, 0, 0, &limits)
                    .and_then(|()| check_output(&round_trip(&input), 0, &limits))
                    .map(|()| round_trip(&input).into_owned());
                prop_assert_eq!(native, sandboxed);
            }
        }

        /// `round_trip` says exactly what the engine gives back, member order included.
        #[test]
        fn round_trip_is_what_the_engine_returns(input in value()) {
            let mut handler = Sandbox::load(IDENTITY, Role::Provider, limits()).unwrap();
            let returned = handler.call(Function::DecodeRequest, &input).unwrap();
            prop_assert_eq!(
                serde_json::to_string(&returned).unwrap(),
                serde_json::to_string(&round_trip(&input)).unwrap()
            );
        }
    }
}
