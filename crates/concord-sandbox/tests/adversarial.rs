//! Hostile handler modules. Each must be stopped within its limit with a typed error, leave the
//! process running, and leave the same handler (and a fresh, good one) answering correctly.

use std::time::Duration;

use concord_sandbox::{Function, Limits, Role, Sandbox, SandboxError};
use serde_json::{json, Value};

const GOOD_REQUESTER: &str = include_str!("fixtures/product-info-requester.js");

fn limits() -> Limits {
    let mut limits = Limits::default();
    limits.call_timeout = Duration::from_millis(250);
    limits.memory_bytes = 16 << 20;
    limits
}

/// A requester module whose `encodeRequest` runs `attack` when `input.attack` is true and
/// otherwise echoes `input.x`.
fn hostile(attack: &str) -> String {
    format!(
        "function encodeRequest(input) {{\n  if (input.attack) {{\n{attack}\n  }}\n  \
         return {{ echo: input.x }};\n}}\nfunction decodeResponse(message) {{ return message; }}\n"
    )
}

/// Runs the attack and checks the error with `expected`, then checks the handler and a fresh
/// good handler still work. Returns the error for further checks.
fn contained(attack: &str, expected: fn(&SandboxError) -> bool) -> SandboxError {
    let source = hostile(attack);
    let mut handler = Sandbox::load(&source, Role::Requester, limits()).expect("module loads");
    let mut error = None;
    for round in 0..2 {
        let outcome = handler.call(Function::EncodeRequest, &json!({"attack": true}));
        let failure = outcome.expect_err("the attack must fail");
        assert!(
            expected(&failure),
            "round {round}: unexpected error {failure:?}"
        );
        let echo = handler.call(
            Function::EncodeRequest,
            &json!({"attack": false, "x": round}),
        );
        assert_eq!(
            echo,
            Ok(json!({"echo": round})),
            "handler broken after {failure:?}"
        );
        error = Some(failure);
    }
    let mut good = Sandbox::load(GOOD_REQUESTER, Role::Requester, limits()).expect("good loads");
    let request = good
        .call(
            Function::EncodeRequest,
            &json!({"messageId": "m1", "productId": "P1"}),
        )
        .expect("good handler works");
    assert_eq!(request["productId"], "P1");
    error.expect("two rounds ran")
}

fn is_timeout(error: &SandboxError) -> bool {
    matches!(error, SandboxError::Timeout { limit } if *limit == Duration::from_millis(250))
}

fn is_memory(error: &SandboxError) -> bool {
    matches!(error, SandboxError::MemoryLimit { limit } if *limit == 16 << 20)
}

fn is_stack(error: &SandboxError) -> bool {
    matches!(error, SandboxError::StackOverflow { limit } if *limit == 512 << 10)
}

fn is_thrown_with(error: &SandboxError, needle: &str) -> bool {
    matches!(error, SandboxError::Thrown { message } if message.contains(needle))
}

// --- time ---------------------------------------------------------------------------------

#[test]
fn infinite_loop_times_out() {
    contained("for (;;) {}", is_timeout);
}

#[test]
fn infinite_loop_that_catches_everything_still_times_out() {
    contained(
        "for (;;) { try { for (;;) {} } catch (e) {} finally { continue; } }",
        is_timeout,
    );
}

#[test]
fn catastrophic_regexp_times_out() {
    contained(r#"/^(a+)+$/.test("a".repeat(64) + "!");"#, is_timeout);
}

#[test]
fn endless_microtask_chain_times_out() {
    contained(
        "const spin = () => queueMicrotask(spin); spin(); return 'returned';",
        is_timeout,
    );
    // Each step also keeps the previous promise alive: time or memory, whichever comes first.
    contained(
        "const spin = () => Promise.resolve().then(spin); spin(); return 'returned';",
        |e| is_timeout(e) || is_memory(e),
    );
}

#[test]
fn looping_job_queued_after_returning_times_out() {
    // The value is returned, but the job it queued would otherwise run during a later call.
    contained(
        "queueMicrotask(() => { for (;;) {} }); return { done: true };",
        is_timeout,
    );
}

#[test]
fn jobs_queued_by_a_failing_call_run_within_that_call() {
    // The loop must use up the failing call's deadline, not the next (innocent) call's.
    contained(
        "queueMicrotask(() => { for (;;) {} }); throw new Error('fails');",
        is_timeout,
    );
    contained("queueMicrotask(() => {}); throw new Error('fails');", |e| {
        is_thrown_with(e, "Error: fails")
    });
}

#[test]
fn looping_getter_on_the_result_times_out() {
    contained("return { get x() { for (;;) {} } };", is_timeout);
}

#[test]
fn looping_to_json_times_out() {
    contained("return { toJSON() { for (;;) {} } };", is_timeout);
}

#[test]
fn looping_getters_on_a_thrown_object_time_out() {
    contained("throw { get message() { for (;;) {} } };", is_timeout);
}

// --- memory -------------------------------------------------------------------------------

#[test]
fn memory_bomb_hits_the_memory_limit() {
    contained(
        "const hoard = []; for (;;) hoard.push(new Array(100000).fill(1.5));",
        is_memory,
    );
}

#[test]
fn huge_string_by_repeat_hits_the_memory_limit() {
    contained(r#"return "x".repeat(1 << 28);"#, is_memory);
}

#[test]
fn string_doubling_is_stopped() {
    // Concatenation builds ropes, so the engine's string length cap (2^30) can come first.
    contained(r#"let s = "x"; for (;;) s += s;"#, |e| {
        is_memory(e) || is_thrown_with(e, "InternalError: string too long")
    });
    contained(
        r#"let s = "x"; for (;;) s = (s + s).split("").join("");"#,
        |e| is_memory(e) || is_timeout(e),
    );
}

#[test]
fn memory_bomb_that_swallows_the_error_still_hits_a_limit() {
    let error = contained(
        "const hoard = []; for (;;) { try { hoard.push(new Array(100000).fill(1.5)); } catch (e) {} }",
        |e| is_memory(e) || is_timeout(e),
    );
    assert!(error.is_limit());
}

// --- stack --------------------------------------------------------------------------------

#[test]
fn deep_recursion_hits_the_stack_limit() {
    contained(
        "const down = (n) => down(n + 1) + 1; return down(0);",
        is_stack,
    );
}

#[test]
fn recursion_that_catches_overflow_is_stopped() {
    contained(
        "function down() { try { return down(); } catch (e) { return down(); } } return down();",
        |e| is_stack(e) || is_timeout(e),
    );
}

#[test]
fn infinitely_deep_lazy_result_is_stopped() {
    let error = contained(
        "const deep = () => ({ get next() { return deep(); } }); return deep();",
        |e| e.is_limit() || matches!(e, SandboxError::InvalidOutput { .. }),
    );
    assert!(!matches!(error, SandboxError::Thrown { .. }));
}

// --- output -------------------------------------------------------------------------------

#[test]
fn huge_output_is_refused() {
    contained(
        r#"return new Array(200000).fill("0123456789");"#,
        |e| matches!(e, SandboxError::OutputTooLarge { limit } if *limit == 1 << 20),
    );
}

#[test]
fn huge_sparse_array_is_refused_without_walking_it() {
    contained(
        "const holes = []; holes.length = 4294967295; return holes;",
        |e| matches!(e, SandboxError::OutputTooLarge { .. }),
    );
}

#[test]
fn huge_string_output_is_refused() {
    contained(r#"return { blob: "x".repeat(2 * 1024 * 1024) };"#, |e| {
        matches!(e, SandboxError::OutputTooLarge { .. })
    });
}

#[test]
fn cyclic_result_is_invalid_output() {
    let error = contained("const a = { b: {} }; a.b.a = a; return a;", |e| {
        matches!(e, SandboxError::InvalidOutput { .. })
    });
    assert!(error.to_string().contains("circular"), "{error}");
}

#[test]
fn throwing_to_json_is_invalid_output() {
    let error = contained("return { toJSON() { throw new Error('nope'); } };", |e| {
        matches!(e, SandboxError::InvalidOutput { .. })
    });
    assert!(error.to_string().contains("nope"), "{error}");
}

#[test]
fn undefined_and_function_results_are_invalid_output() {
    contained("return undefined;", |e| {
        matches!(e, SandboxError::InvalidOutput { .. })
    });
    contained("return () => 1;", |e| {
        matches!(e, SandboxError::InvalidOutput { .. })
    });
}

#[test]
fn lone_surrogate_in_output_is_invalid_output() {
    contained(r#"return { s: "\ud800" };"#, |e| {
        matches!(e, SandboxError::InvalidOutput { .. })
    });
}

// --- promises -----------------------------------------------------------------------------

#[test]
fn never_resolving_promise_is_reported() {
    contained("return new Promise(() => {});", |e| {
        matches!(e, SandboxError::PromiseNeverSettles)
    });
}

#[test]
fn async_function_awaiting_forever_is_reported() {
    let source = "async function encodeRequest(input) {\n  if (input.attack) await new Promise(() => {});\n  \
                  return { echo: input.x };\n}\nfunction decodeResponse(m) { return m; }";
    let mut handler = Sandbox::load(source, Role::Requester, limits()).unwrap();
    assert_eq!(
        handler.call(Function::EncodeRequest, &json!({"attack": true})),
        Err(SandboxError::PromiseNeverSettles)
    );
    assert_eq!(
        handler.call(Function::EncodeRequest, &json!({"x": 5})),
        Ok(json!({"echo": 5}))
    );
}

#[test]
fn rejected_promise_is_a_throw() {
    let error = contained("return Promise.reject(new RangeError('bad range'));", |e| {
        is_thrown_with(e, "RangeError: bad range")
    });
    assert!(!error.is_limit());
}

// --- non-Error throws ---------------------------------------------------------------------

#[test]
fn throwing_non_error_values_is_a_typed_throw() {
    for (attack, text) in [
        ("throw 42;", "uncaught number value: 42"),
        ("throw null;", "uncaught null value: null"),
        ("throw undefined;", "uncaught undefined value: undefined"),
        (r#"throw "boom";"#, r#"uncaught string value: "boom""#),
        (
            r#"throw { code: 400, reason: "bad" };"#,
            r#"uncaught object value: {"code":400,"reason":"bad"}"#,
        ),
        (r#"throw Symbol("s");"#, "uncaught symbol value: Symbol(s)"),
        ("throw () => 1;", "uncaught function value"),
    ] {
        let source = hostile(attack);
        let mut handler = Sandbox::load(&source, Role::Requester, limits()).unwrap();
        let error = handler
            .call(Function::EncodeRequest, &json!({"attack": true}))
            .unwrap_err();
        assert!(is_thrown_with(&error, text), "{attack}: {error:?}");
        assert_eq!(
            handler.call(Function::EncodeRequest, &json!({"x": 1})),
            Ok(json!({"echo": 1}))
        );
    }
}

#[test]
fn error_with_hostile_accessors_is_described_without_running_them() {
    let error = contained(
        "class Evil extends Error {\n  get message() { for (;;) {} }\n  get name() { for (;;) {} }\n  \
         get stack() { for (;;) {} }\n}\nthrow new Evil();",
        |e| matches!(e, SandboxError::Thrown { .. }),
    );
    assert!(
        error.to_string().contains("handler threw: Error"),
        "{error}"
    );
}

#[test]
fn forged_limit_errors_do_not_pass_for_limits_they_did_not_hit() {
    // A module can throw its own RangeError; only the engine's own stack error counts, and a
    // genuine one is what a module sees anyway, so forging it gains nothing.
    let error = contained(r#"throw new TypeError("out of memory");"#, |e| {
        is_thrown_with(e, "TypeError: out of memory")
    });
    assert!(!error.is_limit());
}

// --- reaching the outside world -----------------------------------------------------------

#[test]
fn no_file_system_network_or_process() {
    for (attack, missing) in [
        (r#"require("fs").readFileSync("/etc/passwd");"#, "require"),
        ("process.exit(1);", "process"),
        (r#"fetch("http://127.0.0.1/");"#, "fetch"),
        (
            r#"new XMLHttpRequest().open("GET", "/");"#,
            "XMLHttpRequest",
        ),
        (r#"std.open("/etc/passwd", "r");"#, "std"),
        (r#"os.exec(["/bin/sh"]);"#, "os"),
        ("Deno.exit();", "Deno"),
        ("Bun.file('x');", "Bun"),
        ("performance.now();", "performance"),
        ("new WebSocket('ws://127.0.0.1');", "WebSocket"),
        ("new Worker('x.js');", "Worker"),
    ] {
        let error = contained(attack, |e| matches!(e, SandboxError::Thrown { .. }));
        assert!(
            error
                .to_string()
                .contains(&format!("'{missing}' is not defined"))
                || error
                    .to_string()
                    .contains(&format!("{missing} is not defined")),
            "{attack}: {error}"
        );
    }
}

#[test]
fn dynamic_import_is_refused_at_load() {
    for specifier in [
        "std",
        "os",
        "fs",
        "node:child_process",
        "./handler.js",
        "data:text/javascript,1",
    ] {
        let source = hostile(&format!(
            "return import({specifier:?}).then((m) => Object.keys(m));"
        ));
        let error = Sandbox::load(&source, Role::Requester, limits()).unwrap_err();
        assert!(
            matches!(error, SandboxError::Import { .. }),
            "{specifier}: {error:?}"
        );
        assert!(!error.is_limit(), "{specifier}: {error}");
    }
}

#[test]
fn static_import_is_refused_and_export_is_a_module() {
    for source in [
        "import * as std from 'std';\nfunction encodeRequest(i) { return i; }\nfunction decodeResponse(m) { return m; }",
        "function encodeRequest(i) { return import.meta; }\nfunction decodeResponse(m) { return m; }",
        "export * from 'std';\nexport function encodeRequest(i) { return i; }\nexport function decodeResponse(m) { return m; }",
        "export { open as encodeRequest } from 'os';\nexport function decodeResponse(m) { return m; }",
    ] {
        let error = Sandbox::load(source, Role::Requester, limits()).unwrap_err();
        assert!(matches!(error, SandboxError::Import { .. }), "{source}: {error:?}");
    }
    let module = "export function encodeRequest(i) { return i; }\nexport function decodeResponse(m) { return m; }";
    let mut handler = Sandbox::load(module, Role::Requester, limits()).expect("an ES module loads");
    assert_eq!(
        handler.call(Function::EncodeRequest, &json!({"a": 1})),
        Ok(json!({"a": 1}))
    );
}

#[test]
fn no_timers() {
    for timer in [
        "setTimeout",
        "setInterval",
        "setImmediate",
        "requestAnimationFrame",
    ] {
        let error = contained(&format!("{timer}(() => {{}}, 0);"), |e| {
            matches!(e, SandboxError::Thrown { .. })
        });
        assert!(error.to_string().contains(timer), "{error}");
    }
}

#[test]
fn no_run_time_code_compilation() {
    for attack in [
        r#"eval("1 + 1");"#,
        r#"(0, eval)("globalThis");"#,
        r#"new Function("return globalThis")();"#,
        r#"Function("return this")();"#,
        r#"(function () {}).constructor("return this")();"#,
        r#"(async function () {}).constructor("return 1")();"#,
        r#"(function* () {}).constructor("yield 1")().next();"#,
        r#"(async function* () {}).constructor("yield 1")();"#,
        r#"Reflect.construct(Function, ["return 1"]);"#,
        r#"Object.getPrototypeOf(() => {}).constructor.call(null, "return 1")();"#,
    ] {
        let error = contained(attack, |e| matches!(e, SandboxError::Thrown { .. }));
        let text = error.to_string();
        assert!(
            text.contains("not supported") || text.contains("not defined"),
            "{attack}: {text}"
        );
    }
}

#[test]
fn atomics_wait_cannot_block() {
    for attack in [
        "Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);",
        "new SharedArrayBuffer(4);",
    ] {
        contained(attack, |e| matches!(e, SandboxError::Thrown { .. }));
    }
}

#[test]
fn big_int_is_not_available() {
    // Its arithmetic runs uninterrupted in native code: a 2^20-bit toString takes seconds.
    let error = Sandbox::load(
        &hostile("return (2n ** 1000000n).toString();"),
        Role::Requester,
        limits(),
    )
    .unwrap_err();
    assert!(
        matches!(&error, SandboxError::Compile { line: 3, column: 9, message } if message.contains("BigInt")),
        "{error:?}"
    );
    for attack in [
        "return BigInt(2) ** BigInt(1000000);",
        "return new BigInt64Array(1);",
        "return new DataView(new ArrayBuffer(8)).getBigInt64(0);",
        "return Object.getPrototypeOf(Int8Array).from.call(BigUint64Array, [1]);",
    ] {
        contained(attack, |e| matches!(e, SandboxError::Thrown { .. }));
    }
}

#[test]
fn clock_and_randomness_are_not_available() {
    for attack in [
        "return Date.now();",
        "return new Date().toISOString();",
        "return Date();",
        "return Math.random();",
    ] {
        let error = contained(attack, |e| matches!(e, SandboxError::Thrown { .. }));
        assert!(
            error.to_string().contains("deterministic"),
            "{attack}: {error}"
        );
    }
}

#[test]
fn dates_with_arguments_still_work() {
    let source = "function decodeRequest(m) { return new Date(Date.UTC(2024, 1, 29, 12)).toISOString(); }\n\
                  function encodeResponse(r) { return { parsed: Date.parse(r.when), ok: new Date(r.when) instanceof Date }; }";
    let mut handler = Sandbox::load(source, Role::Provider, limits()).unwrap();
    assert_eq!(
        handler.call(Function::DecodeRequest, &json!({})),
        Ok(json!("2024-02-29T12:00:00.000Z"))
    );
    assert_eq!(
        handler.call(
            Function::EncodeResponse,
            &json!({"when": "2024-02-29T12:00:00Z"})
        ),
        Ok(json!({"parsed": 1_709_208_000_000u64, "ok": true}))
    );
}

// --- isolation between calls --------------------------------------------------------------

/// Every mutation of shared state a module might try, each attempted and its failure ignored.
const POLLUTE: &str = r#"
const attempts = [
  () => { Object.prototype.polluted = "yes"; },
  () => { Object.defineProperty(Object.prototype, "polluted", { get() { return "yes"; } }); },
  () => { Array.prototype.polluted = "yes"; },
  () => { Array.prototype.push = function () { return "hijacked"; }; },
  () => { JSON.stringify = () => "hijacked"; },
  () => { JSON.parse = () => "hijacked"; },
  () => { Math.max = () => "hijacked"; },
  () => { String.prototype.trim = function () { return "hijacked"; }; },
  () => { Function.prototype.call = function () { return "hijacked"; }; },
  () => { Promise.prototype.then = function () { return "hijacked"; }; },
  () => { Symbol.iterator = "hijacked"; },
  () => { Error.prepareStackTrace = () => "hijacked"; },
  () => { Error.stackTraceLimit = 0; },
  () => { Error.prototype.toString = () => "hijacked"; },
  () => { globalThis.polluted = "yes"; },
  () => { globalThis.JSON = { stringify: () => "hijacked" }; },
  () => { delete globalThis.Array; },
  () => { input.__proto__.polluted = "yes"; },
  () => { ({}).constructor.prototype.polluted = "yes"; },
  () => { Object.getPrototypeOf(function* () {}).polluted = "yes"; },
  () => { Object.getPrototypeOf(async function () {}).polluted = "yes"; },
  () => { Object.getPrototypeOf([][Symbol.iterator]()).next = () => "hijacked"; },
  () => { Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]())).polluted = "yes"; },
  () => { Object.getPrototypeOf(Int8Array).prototype.polluted = "yes"; },
  () => { Object.setPrototypeOf(Object.prototype, { polluted: "yes" }); },
  () => { if (!Reflect.setPrototypeOf(Array.prototype, { polluted: "yes" })) throw 0; },
  () => { if (!Reflect.set(Object.prototype, "polluted", "yes")) throw 0; },
  () => { if (!Reflect.defineProperty(globalThis, "polluted", { value: "yes" })) throw 0; },
  () => { console.log = () => "hijacked"; },
  () => { Date.prototype.toISOString = () => "hijacked"; },
  () => { RegExp.prototype.exec = () => null; },
];
const succeeded = [];
attempts.forEach((attempt, index) => {
  try { attempt(); succeeded.push(index); } catch (e) {}
});
return { succeeded };
"#;

const OBSERVE: &str = r#"
function encodeRequest(input) {
  if (input.attack) {
    POLLUTE
  }
  return {
    objectPolluted: ({}).polluted ?? null,
    arrayPolluted: [].polluted ?? null,
    globalPolluted: globalThis.polluted ?? null,
    push: [].push(1),
    stringify: JSON.stringify({ a: 1 }),
    parse: JSON.parse("[1]")[0],
    max: Math.max(1, 2),
    trim: " x ".trim(),
    iterated: [...[1, 2]].length,
    isoDate: new Date(0).toISOString(),
    regexp: /a/.exec("a")[0],
    errorText: String(new Error("e")),
  };
}
function decodeResponse(message) { return message; }
"#;

#[test]
fn prototype_pollution_and_global_mutation_never_reach_the_next_call() {
    let source = OBSERVE.replace("POLLUTE", POLLUTE);
    let mut handler = Sandbox::load(&source, Role::Requester, limits()).unwrap();
    let clean = json!({
        "objectPolluted": null, "arrayPolluted": null, "globalPolluted": null, "push": 1,
        "stringify": "{\"a\":1}", "parse": 1, "max": 2, "trim": "x", "iterated": 2,
        "isoDate": "1970-01-01T00:00:00.000Z", "regexp": "a", "errorText": "Error: e",
    });
    assert_eq!(
        handler.call(Function::EncodeRequest, &json!({})),
        Ok(clean.clone())
    );
    let attack = handler.call(Function::EncodeRequest, &json!({"attack": true}));
    assert_eq!(
        attack,
        Ok(json!({"succeeded": []})),
        "mutations of shared state succeeded"
    );
    assert_eq!(handler.call(Function::EncodeRequest, &json!({})), Ok(clean));
}

#[test]
fn each_pollution_attempt_is_a_typed_throw() {
    let error = contained("Object.prototype.polluted = 'yes';", |e| {
        matches!(e, SandboxError::Thrown { .. })
    });
    assert!(error.to_string().contains("TypeError"), "{error}");
    contained("globalThis.carried = 1;", |e| {
        matches!(e, SandboxError::Thrown { .. })
    });
    contained("undeclaredGlobal = 1;", |e| {
        matches!(e, SandboxError::Thrown { .. })
    });
}

#[test]
fn every_intrinsic_reachable_from_module_code_is_frozen() {
    let source = r#"
function decodeRequest(input) {
  const roots = [globalThis, function* () {}, async function () {}, async function* () {},
    [][Symbol.iterator](), new Map()[Symbol.iterator](), new Set()[Symbol.iterator](),
    ""[Symbol.iterator](), /a/[Symbol.matchAll]("a"), [].values().map((x) => x),
    Iterator.from({ next() { return { done: true }; } }), new Int8Array(0), new DataView(new ArrayBuffer(1)),
    Promise.resolve(), new WeakMap(), new WeakSet(), /a/, new Error("e"), new AggregateError([]),
    new DisposableStack(), Symbol("s"), "s", 1, true];
  const seen = new Set();
  const open = [];
  const pending = roots.map((root) => Object.getPrototypeOf(Object(root)));
  pending.push(globalThis);
  while (pending.length > 0) {
    const object = pending.pop();
    if ((typeof object !== "object" && typeof object !== "function") || object === null || seen.has(object)) continue;
    seen.add(object);
    if (!Object.isFrozen(object)) open.push(String(object.constructor && object.constructor.name));
    pending.push(Object.getPrototypeOf(object));
    for (const key of Reflect.ownKeys(object)) {
      const d = Object.getOwnPropertyDescriptor(object, key);
      pending.push(d.value, d.get, d.set);
    }
  }
  return { checked: seen.size, open };
}
function encodeResponse(r) { return r; }
"#;
    let mut handler = Sandbox::load(source, Role::Provider, limits()).unwrap();
    let report = handler.call(Function::DecodeRequest, &json!({})).unwrap();
    assert_eq!(
        report["open"],
        json!([]),
        "unfrozen shared objects: {report}"
    );
    assert!(report["checked"].as_u64().unwrap_or(0) > 500, "{report}");
}

#[test]
fn module_level_state_is_fresh_for_every_call() {
    let source = r#"
let counter = 0;
var seen = [];
const cache = new Map();
function encodeRequest(input) {
  counter += 1;
  seen.push(input.x);
  cache.set(input.x, true);
  encodeRequest.calls = (encodeRequest.calls || 0) + 1;
  return { counter, seen, cached: cache.size, calls: encodeRequest.calls, topThis: typeof topThis };
}
const topThis = this;
function decodeResponse(message) { return message; }
"#;
    let mut handler = Sandbox::load(source, Role::Requester, limits()).unwrap();
    for x in 0..3 {
        assert_eq!(
            handler.call(Function::EncodeRequest, &json!({"x": x})),
            Ok(json!({"counter": 1, "seen": [x], "cached": 1, "calls": 1, "topThis": "undefined"}))
        );
    }
}

#[test]
fn hostile_input_keys_are_plain_data() {
    let source = r#"
function decodeRequest(input) {
  return {
    protoIsObjectPrototype: Object.getPrototypeOf(input) === Object.prototype,
    inherited: input.polluted ?? null,
    ownProto: Object.keys(input),
    nestedInherited: input.inner.polluted ?? null,
    constructorIsData: input.constructor,
  };
}
function encodeResponse(r) { return r; }
"#;
    let mut handler = Sandbox::load(source, Role::Provider, limits()).unwrap();
    let input: Value = serde_json::from_str(
        r#"{"__proto__": {"polluted": "yes"}, "constructor": "data", "inner": {"__proto__": {"polluted": 1}}}"#,
    )
    .unwrap();
    assert_eq!(
        handler.call(Function::DecodeRequest, &input),
        Ok(json!({
            "protoIsObjectPrototype": true,
            "inherited": null,
            "ownProto": ["__proto__", "constructor", "inner"],
            "nestedInherited": null,
            "constructorIsData": "data",
        }))
    );
}

#[test]
fn input_keys_named_like_object_prototype_members_are_own_data() {
    let source = r#"
function decodeRequest(input) {
  const own = Object.keys(input).filter((key) => Object.getOwnPropertyDescriptor(input, key).value === key);
  return { own, proto: Object.getPrototypeOf(input) === Object.prototype, text: String({}) };
}
function encodeResponse(r) { return r; }
"#;
    let mut handler = Sandbox::load(source, Role::Provider, limits()).unwrap();
    let names = [
        "constructor",
        "__proto__",
        "toString",
        "toLocaleString",
        "valueOf",
        "hasOwnProperty",
        "isPrototypeOf",
        "propertyIsEnumerable",
        "__defineGetter__",
        "__defineSetter__",
        "__lookupGetter__",
        "__lookupSetter__",
        "ordinary",
    ];
    let input: serde_json::Map<String, Value> = names
        .iter()
        .map(|name| (name.to_string(), json!(name)))
        .collect();
    let output = handler
        .call(Function::DecodeRequest, &Value::Object(input))
        .unwrap();
    assert_eq!(output["own"], json!(names));
    assert_eq!(output["proto"], json!(true));
    assert_eq!(output["text"], json!("[object Object]"));
}

// --- load-time hostility ------------------------------------------------------------------

#[test]
fn hostile_top_level_is_stopped_at_load() {
    type Expected = fn(&SandboxError) -> bool;
    let cases: [(&str, Expected); 4] = [
        ("for (;;) {}", is_timeout),
        (
            "const hoard = []; for (;;) hoard.push(new Array(100000).fill(1));",
            is_memory,
        ),
        ("(function down() { down(); })();", is_stack),
        ("throw new Error('top level');", |e| {
            is_thrown_with(e, "Error: top level")
        }),
    ];
    for (top_level, expected) in cases {
        let source = format!("{top_level}\nfunction encodeRequest(i) {{ return i; }}\nfunction decodeResponse(m) {{ return m; }}");
        let error = Sandbox::load(&source, Role::Requester, limits()).unwrap_err();
        assert!(expected(&error), "{top_level}: {error:?}");
    }
}

#[test]
fn wrapper_breakout_attempts_fail_without_running_anything() {
    // If any of these closed the factory function early, the trailing code would run while the
    // engine is set up and `load` would fail with that error (or time out) instead.
    let escape = "throw new Error('escaped');";
    for source in [
        format!("}}); {escape} (function(){{"),
        format!("}})(); {escape} (function(){{"),
        format!("--> }}); {escape} (function(){{"),
        format!("<!-- }}); {escape} (function(){{"),
        format!("/* */ }}); {escape} /*"),
        "function encodeRequest(i) { return i; } /*".to_owned(),
        format!("`${{ }}); {escape} (function(){{ `"),
        format!("\0 {escape}"),
        format!("#!/usr/bin/env qjs\n{escape}"),
        "return 1;".to_owned(),
        format!("}}\n{escape}\n{{"),
    ] {
        let outcome = Sandbox::load(&source, Role::Requester, limits());
        assert!(
            matches!(
                outcome,
                Err(SandboxError::Compile { .. } | SandboxError::MissingExport { .. })
            ),
            "{source:?}: {outcome:?}"
        );
    }
}

#[test]
fn compile_errors_point_into_the_source() {
    let source = "function encodeRequest(input) {\n  return { a: 1,, };\n}\n";
    match Sandbox::load(source, Role::Requester, limits()) {
        Err(SandboxError::Compile {
            line,
            column,
            message,
        }) => {
            assert_eq!(line, 2, "{message}");
            assert_eq!(column, 17, "{message}");
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
    match Sandbox::load("let x = ;", Role::Requester, limits()) {
        Err(SandboxError::Compile {
            line: 1, column, ..
        }) => assert!(column <= 10, "{column}"),
        other => panic!("expected a compile error on line 1, got {other:?}"),
    }
}

#[test]
fn deeply_nested_source_is_refused_cleanly() {
    let source = "(".repeat(100_000) + &")".repeat(100_000);
    let error = Sandbox::load(&source, Role::Requester, limits()).unwrap_err();
    assert!(
        matches!(
            error,
            SandboxError::StackOverflow { .. } | SandboxError::Compile { .. }
        ),
        "{error:?}"
    );
}

#[test]
fn oversized_source_is_refused_before_compiling() {
    let mut small = limits();
    small.source_bytes = 64;
    let error = Sandbox::load(&"x".repeat(65), Role::Requester, small).unwrap_err();
    assert_eq!(
        error,
        SandboxError::SourceTooLarge {
            size: 65,
            limit: 64
        }
    );
}

// --- input limits -------------------------------------------------------------------------

#[test]
fn input_limits_are_enforced_before_the_module_runs() {
    let mut tight = limits();
    let input = json!({"text": "x".repeat(100)});
    let exact = serde_json::to_string(&input).unwrap().len();
    tight.input_bytes = exact;
    let source = hostile("for (;;) {}");
    let mut handler = Sandbox::load(&source, Role::Requester, tight.clone()).unwrap();
    assert_eq!(
        handler.call(Function::EncodeRequest, &json!({"x": input})),
        Err(SandboxError::InputTooLarge { limit: exact })
    );
    assert_eq!(
        handler.call(
            Function::EncodeRequest,
            &json!({"attack": true, "padding": "x".repeat(exact)})
        ),
        Err(SandboxError::InputTooLarge { limit: exact })
    );
    tight.input_bytes = exact + 9;
    let mut handler = Sandbox::load(&source, Role::Requester, tight).unwrap();
    // {"x":<input>} is exactly 6 + exact bytes, {"echo":…} comes back.
    assert_eq!(
        handler.call(Function::EncodeRequest, &json!({"x": input})),
        Ok(json!({"echo": input}))
    );

    let mut deep = json!(1);
    for _ in 0..200 {
        deep = json!([deep]);
    }
    let mut handler = Sandbox::load(&source, Role::Requester, limits()).unwrap();
    assert_eq!(
        handler.call(Function::EncodeRequest, &json!({"x": deep})),
        Err(SandboxError::InputTooDeep { limit: 127 })
    );
}

#[test]
fn building_a_huge_input_is_held_to_the_deadline() {
    let mut quick = limits();
    quick.call_timeout = Duration::from_millis(10);
    quick.input_bytes = 8 << 20;
    quick.memory_bytes = 256 << 20;
    let source = hostile("");
    let mut handler = Sandbox::load(&source, Role::Requester, quick).unwrap();
    let wide: serde_json::Map<String, Value> = (0..200_000)
        .map(|index| (format!("key{index}"), json!(index)))
        .collect();
    assert_eq!(
        handler.call(Function::EncodeRequest, &json!({"x": wide})),
        Err(SandboxError::Timeout {
            limit: Duration::from_millis(10)
        })
    );
    assert_eq!(
        handler.call(Function::EncodeRequest, &json!({"x": 1})),
        Ok(json!({"echo": 1}))
    );
}

// --- the process and threads --------------------------------------------------------------

#[test]
fn handlers_move_to_other_threads_and_clone_for_them() {
    let source = hostile("for (;;) {}");
    let handler = Sandbox::load(&source, Role::Requester, limits()).unwrap();
    let clone = handler.try_clone().unwrap();
    let workers: Vec<_> = [handler, clone]
        .into_iter()
        .enumerate()
        .map(|(index, mut handler)| {
            std::thread::spawn(move || {
                let attack = handler.call(Function::EncodeRequest, &json!({"attack": true}));
                assert!(
                    matches!(attack, Err(SandboxError::Timeout { .. })),
                    "{attack:?}"
                );
                handler.call(Function::EncodeRequest, &json!({"x": index}))
            })
        })
        .collect();
    for (index, worker) in workers.into_iter().enumerate() {
        assert_eq!(
            worker.join().expect("worker ran"),
            Ok(json!({"echo": index}))
        );
    }
}
