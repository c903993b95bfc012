//! Per-call cost of sandboxed handlers, beside the same mapping in plain Rust.
//!
//! Run: `cargo bench -p concord-sandbox --bench call`
//!
//! Every figure is CPU time of the benchmarking thread (`CLOCK_THREAD_CPUTIME_ID`), not wall
//! time: the goal is a per-core rate, and on a shared machine wall time mostly measures the
//! other processes. The summary printed at the end measures the alternatives of each comparison
//! in interleaved batches, so that they share whatever contention there is.
//!
//! Comparisons:
//! - `pair`: one `encodeRequest` (78-byte input) + one `decodeResponse` (257-byte response
//!   message) of the product-info protocol through the sandbox, and the same mapping in plain
//!   Rust on `serde_json::Value`.
//! - `value_passing`: how values cross into and out of the engine (bare QuickJS, one call of a
//!   decodeResponse-like function): JSON text (`serde_json` → `JSON.parse` in, `JSON.stringify`
//!   → `serde_json` out) vs. building JS objects from Rust and walking the result from Rust.
//! - `isolation`: what per-call isolation costs (bare QuickJS, JSON text passing): functions
//!   defined once and shared; a fresh top-level scope per call (the sandbox's choice); a fresh
//!   context per call (not even locked down).
//! - `lifecycle`: loading a module (compile + engine + lockdown), and rebuilding an engine from
//!   bytecode (what happens after a limit was hit).

use std::hint::black_box;
use std::time::Duration;
#[cfg(not(unix))]
use std::time::Instant;

use concord_sandbox::{Function, Handler, Limits, Role, Sandbox};
use criterion::{criterion_group, Criterion};
use rquickjs::context::intrinsic;
use rquickjs::object::Property;
use rquickjs::{Array, Context, Ctx, Function as JsFunction, Object, Runtime, Value as JsValue};
use serde_json::{json, Map, Number, Value};

const REQUESTER: &str = include_str!("../tests/fixtures/product-info-requester.js");

fn request_input() -> Value {
    json!({"messageId": "msg001", "productId": "P12345", "productName": "ThinkPad X1 Carbon"})
}

fn response_message() -> Value {
    json!({
        "messageId": "msg001",
        "type": "RESPONSE",
        "status": {"code": 200, "message": "OK"},
        "productInfo": {
            "productId": "P12345",
            "productName": "ThinkPad X1 Carbon",
            "productDescription": "A high-performance laptop with the latest processor",
            "price": 1299.99,
            "currency": "USD"
        }
    })
}

/// The requester fixture's mapping, written in Rust over `serde_json::Value`.
mod native {
    use super::*;

    fn required_str<'a>(value: &'a Value, field: &str) -> Result<&'a str, String> {
        match value.get(field).and_then(Value::as_str) {
            Some(text) if !text.is_empty() => Ok(text),
            _ => Err(format!("{field} must be a non-empty string")),
        }
    }

    pub fn encode_request(input: &Value) -> Result<Value, String> {
        let mut request = Map::new();
        request.insert("messageId".into(), required_str(input, "messageId")?.into());
        request.insert("type".into(), "REQUEST".into());
        request.insert("action".into(), "getProductInfo".into());
        request.insert("productId".into(), required_str(input, "productId")?.into());
        if input.get("productName").is_some() {
            request.insert(
                "productName".into(),
                required_str(input, "productName")?.into(),
            );
        }
        Ok(Value::Object(request))
    }

    pub fn decode_response(message: &Value) -> Result<Value, String> {
        if message.get("type").and_then(Value::as_str) != Some("RESPONSE") {
            return Err("expected a RESPONSE message".into());
        }
        let status = message.get("status").filter(|s| s.is_object());
        let code = status
            .and_then(|s| s.get("code"))
            .and_then(Value::as_i64)
            .ok_or("response status must be an object with an integer code")?;
        let text = match status.and_then(|s| s.get("message")) {
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
            None => "undefined".into(),
        };
        let mut output = Map::new();
        output.insert(
            "messageId".into(),
            required_str(message, "messageId")?.into(),
        );
        output.insert("code".into(), code.into());
        output.insert("message".into(), text.into());
        output.insert(
            "productInfo".into(),
            message.get("productInfo").cloned().unwrap_or(Value::Null),
        );
        Ok(Value::Object(output))
    }
}

/// CPU time this thread has used.
#[cfg(unix)]
fn thread_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid out-pointer and the clock id is supported on every unix target.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// Wall time elsewhere.
#[cfg(not(unix))]
fn thread_time() -> Duration {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

/// A criterion routine timed in thread CPU time.
fn cpu_timed(routine: &mut dyn FnMut()) -> impl FnMut(u64) -> Duration + '_ {
    move |iterations| {
        let start = thread_time();
        for _ in 0..iterations {
            routine();
        }
        thread_time() - start
    }
}

/// One measured alternative of a comparison.
struct Subject<'a> {
    name: &'static str,
    run: Box<dyn FnMut() + 'a>,
}

fn subject<'a>(name: &'static str, run: impl FnMut() + 'a) -> Subject<'a> {
    Subject {
        name,
        run: Box::new(run),
    }
}

/// Runs each subject under criterion, then all of them in interleaved batches for about
/// `budget` of CPU time in total, printing CPU time per iteration and the ratio to the first.
/// Returns the seconds per iteration of each subject.
fn compare(
    c: &mut Criterion,
    group: &str,
    batch: u32,
    budget: Duration,
    subjects: &mut [Subject<'_>],
) -> Vec<f64> {
    let mut criterion_group = c.benchmark_group(group);
    if batch < 100 {
        criterion_group.sample_size(10);
    }
    for subject in subjects.iter_mut() {
        criterion_group
            .bench_function(subject.name, |b| b.iter_custom(cpu_timed(&mut subject.run)));
    }
    criterion_group.finish();

    let mut spent = vec![Duration::ZERO; subjects.len()];
    let mut rounds = 0u32;
    while rounds < 3 || spent.iter().sum::<Duration>() < budget {
        for (subject, spent) in subjects.iter_mut().zip(&mut spent) {
            let start = thread_time();
            for _ in 0..batch {
                (subject.run)();
            }
            *spent += thread_time() - start;
        }
        rounds += 1;
    }
    let per_iteration: Vec<f64> = spent
        .iter()
        .map(|spent| spent.as_secs_f64() / f64::from(rounds * batch))
        .collect();
    println!(
        "\nsummary {group} (interleaved, CPU time per iteration, {} iterations each):",
        rounds * batch
    );
    for (subject, seconds) in subjects.iter().zip(&per_iteration) {
        println!(
            "  {:<24} {:>10.2} µs  {:>10.0} /s  {:>6.2}x",
            subject.name,
            seconds * 1e6,
            1.0 / seconds,
            seconds / per_iteration[0]
        );
    }
    per_iteration
}

fn pair(c: &mut Criterion) {
    let input = request_input();
    let response = response_message();
    let mut handler: Handler =
        Sandbox::load(REQUESTER, Role::Requester, Limits::default()).unwrap();
    let mut subjects = [
        subject("rust", || {
            black_box(native::encode_request(black_box(&input)).unwrap());
            black_box(native::decode_response(black_box(&response)).unwrap());
        }),
        subject("sandbox", || {
            black_box(
                handler
                    .call(Function::EncodeRequest, black_box(&input))
                    .unwrap(),
            );
            black_box(
                handler
                    .call(Function::DecodeResponse, black_box(&response))
                    .unwrap(),
            );
        }),
    ];
    let seconds = compare(c, "pair", 2_000, Duration::from_secs(6), &mut subjects);
    let (rust, sandbox) = (1.0 / seconds[0], 1.0 / seconds[1]);
    let goal = |met: bool| if met { "met" } else { "NOT MET" };
    println!(
        "  goals: >= 100000 sandboxed pairs/s per core: {} ({sandbox:.0}/s); \
         within 10x of plain Rust: {} ({:.1}x)",
        goal(sandbox >= 100_000.0),
        goal(rust / sandbox <= 10.0),
        rust / sandbox
    );
}

/// Serde value → JS value, property by property, as the sandbox does.
fn to_js<'js>(ctx: &Ctx<'js>, value: &Value) -> rquickjs::Result<JsValue<'js>> {
    Ok(match value {
        Value::Null => JsValue::new_null(ctx.clone()),
        Value::Bool(b) => JsValue::new_bool(ctx.clone(), *b),
        Value::Number(n) => match n.as_i64().and_then(|i| i32::try_from(i).ok()) {
            Some(i) => JsValue::new_int(ctx.clone(), i),
            None => JsValue::new_float(ctx.clone(), n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => rquickjs::String::from_str(ctx.clone(), s)?.into_value(),
        Value::Array(items) => {
            let array = Array::new(ctx.clone())?;
            for (index, item) in items.iter().enumerate() {
                array.set(index, to_js(ctx, item)?)?;
            }
            array.into_value()
        }
        Value::Object(map) => {
            let object = Object::new(ctx.clone())?;
            for (key, item) in map {
                let member = Property::from(to_js(ctx, item)?)
                    .writable()
                    .enumerable()
                    .configurable();
                object.prop(key.as_str(), member)?;
            }
            object.into_value()
        }
    })
}

/// JS value → serde value, walking own enumerable properties from Rust.
fn from_js(value: &JsValue<'_>) -> rquickjs::Result<Value> {
    Ok(if let Some(b) = value.as_bool() {
        Value::Bool(b)
    } else if let Some(i) = value.as_int() {
        Value::from(i)
    } else if let Some(f) = value.as_float() {
        Number::from_f64(f).map_or(Value::Null, Value::Number)
    } else if let Some(s) = value.as_string() {
        Value::String(s.to_string()?)
    } else if let Some(array) = value.as_array() {
        array
            .iter::<JsValue>()
            .map(|item| from_js(&item?))
            .collect::<rquickjs::Result<_>>()?
    } else if let Some(object) = value.as_object() {
        let mut map = Map::new();
        for entry in object.props::<String, JsValue>() {
            let (key, item) = entry?;
            map.insert(key, from_js(&item)?);
        }
        Value::Object(map)
    } else {
        Value::Null
    })
}

/// JSON text in, `call` in the engine, JSON text out.
fn call_text<'js>(
    ctx: &Ctx<'js>,
    input: &Value,
    call: impl FnOnce(JsValue<'js>) -> rquickjs::Result<JsValue<'js>>,
) -> Value {
    let input = ctx.json_parse(serde_json::to_vec(input).unwrap()).unwrap();
    let output = call(input).unwrap();
    let text = ctx.json_stringify(output).unwrap().unwrap();
    serde_json::from_str(&text.to_string().unwrap()).unwrap()
}

const DECODE: &str = "function decodeResponse(m) { return { messageId: m.messageId, \
    code: m.status.code, message: m.status.message, productInfo: m.productInfo }; }";

type Intrinsics = (
    intrinsic::Date,
    intrinsic::Eval,
    intrinsic::RegExpCompiler,
    intrinsic::RegExp,
    intrinsic::Json,
    intrinsic::MapSet,
    intrinsic::TypedArrays,
    intrinsic::Promise,
);

fn value_passing(c: &mut Criterion) {
    let response = response_message();
    let runtime = Runtime::new().unwrap();
    let context = Context::custom::<Intrinsics>(&runtime).unwrap();
    context.with(|ctx| {
        let decode: JsFunction = ctx.eval(format!("({DECODE})")).unwrap();
        let mut subjects = [
            subject("json_text", || {
                black_box(call_text(&ctx, black_box(&response), |input| {
                    decode.call((input,))
                }));
            }),
            subject("object_conversion", || {
                let input = to_js(&ctx, black_box(&response)).unwrap();
                let output: JsValue = decode.call((input,)).unwrap();
                black_box(from_js(&output).unwrap());
            }),
        ];
        compare(
            c,
            "value_passing",
            2_000,
            Duration::from_secs(4),
            &mut subjects,
        );
    });
}

fn isolation(c: &mut Criterion) {
    let response = response_message();
    let runtime = Runtime::new().unwrap();
    let other_runtime = Runtime::new().unwrap();
    let context = Context::custom::<Intrinsics>(&runtime).unwrap();
    context.with(|ctx| {
        let shared: JsFunction = ctx.eval(format!("({DECODE})")).unwrap();
        let factory: JsFunction = ctx
            .eval(format!(
                "(function(){{\"use strict\";{DECODE}\n;return[decodeResponse];}})"
            ))
            .unwrap();
        let invoke: JsFunction = ctx
            .eval("(function(factory, input) { return factory()[0](input); })")
            .unwrap();
        let mut subjects = [
            subject("shared_top_level", || {
                black_box(call_text(&ctx, black_box(&response), |input| {
                    shared.call((input,))
                }));
            }),
            subject("fresh_scope_per_call", || {
                black_box(call_text(&ctx, black_box(&response), |input| {
                    invoke.call((factory.clone(), input))
                }));
            }),
            subject("fresh_context_per_call", || {
                // Another runtime: `runtime` is locked by the `with` this closure runs in.
                let context = Context::custom::<Intrinsics>(&other_runtime).unwrap();
                context.with(|ctx| {
                    let decode: JsFunction = ctx.eval(format!("({DECODE})")).unwrap();
                    black_box(call_text(&ctx, black_box(&response), |input| {
                        decode.call((input,))
                    }));
                })
            }),
        ];
        compare(c, "isolation", 200, Duration::from_secs(4), &mut subjects);
    });
}

fn lifecycle(c: &mut Criterion) {
    let handler = Sandbox::load(REQUESTER, Role::Requester, Limits::default()).unwrap();
    let mut subjects = [
        subject("load", || {
            black_box(
                Sandbox::load(black_box(REQUESTER), Role::Requester, Limits::default()).unwrap(),
            );
        }),
        subject("rebuild_from_bytecode", || {
            black_box(handler.try_clone().unwrap());
        }),
    ];
    compare(c, "lifecycle", 10, Duration::from_secs(3), &mut subjects);
}

criterion_group!(benches, pair, value_passing, isolation, lifecycle);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
