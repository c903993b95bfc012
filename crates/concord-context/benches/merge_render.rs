//! Merge and render a context of 10,000 data messages over 100 identities.
//!
//! `cargo bench -p concord-context --bench merge_render`
//!
//! Criterion measures each case; a summary at the end prints messages per
//! second and the ratio to the baseline, measured in the same run. The
//! baseline is the naive prompt: every data message pretty-printed on its own,
//! without merging.

use std::hint::black_box;
use std::time::{Duration, Instant};

use concord_context::{Context, InstanceId, View};
use criterion::{Criterion, Throughput};
use serde_json::{json, Value};

const MESSAGES: usize = 10_000;
const KINDS: usize = 25;
/// Each kind has a global identity and one per instance: 25 × 4 = 100 identities.
const INSTANCES: [&str; 3] = ["①", "②", "③"];
const IDENTITIES: usize = KINDS * (INSTANCES.len() + 1);

/// One message: mostly object patches, with outputs that `set` and `push` at paths.
fn message(n: usize) -> Value {
    let identity = n % IDENTITIES;
    let kind = format!("k{:02}", identity % KINDS);
    let scope = identity / KINDS;
    let mut message = match n / IDENTITIES % 10 {
        3 => json!({"type": "data", "_outputPath": format!("†{kind}.log"), "_outputMethod": "push",
                    "data": {"step": n, "ok": n.is_multiple_of(2)}}),
        7 => json!({"type": "data", "_outputPath": format!("†{kind}.status"),
                    "data": format!("status after step {n}")}),
        _ => json!({"type": "data", "kind": kind, "data": {
            "step": n,
            format!("field{}", n % 7): format!("value {n}"),
            "nested": {format!("a{}", n % 5): n, "flag": n.is_multiple_of(3)},
            "tags": [n % 3, n % 5],
        }}),
    };
    if n < IDENTITIES {
        message["description"] = json!(format!("Working memory of {kind}."));
        message["schema"] = json!({"type": "object", "properties": {
            "step": {"type": "integer"}, "log": {"type": "array"}, "status": {"type": "string"}
        }});
    }
    if scope > 0 {
        message["_instance"] = json!(INSTANCES[scope - 1]);
    }
    message
}

fn context_json() -> Vec<u8> {
    let messages: Vec<Value> = (0..MESSAGES).map(message).collect();
    serde_json::to_vec(&messages).unwrap_or_default()
}

/// What a prompt builder without data messages would do: print every payload.
fn baseline(context: &Context) -> usize {
    context
        .messages()
        .iter()
        .filter_map(|message| serde_json::to_string_pretty(&message.to_value()).ok())
        .map(|text| text.len())
        .sum()
}

fn rendered_bytes(context: &Context, view: &View) -> usize {
    match context.render(view) {
        Ok(chat) => chat.iter().map(|message| message.content.len()).sum(),
        Err(error) => panic!("benchmark context does not merge: {error}"),
    }
}

fn median_time(mut run: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..21)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let bytes = context_json();
    let context = match Context::from_json(&bytes) {
        Ok(context) => context,
        Err(error) => panic!("benchmark context does not parse: {error}"),
    };
    let instance = View::Instance(InstanceId::new(INSTANCES[0]).unwrap_or_else(|e| panic!("{e}")));

    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("context_10k_messages_100_identities");
    group.throughput(Throughput::Elements(MESSAGES as u64));
    group.bench_function("baseline_print_each_message", |b| {
        b.iter(|| baseline(black_box(&context)))
    });
    group.bench_function("merge_and_render_global", |b| {
        b.iter(|| rendered_bytes(black_box(&context), &View::Global))
    });
    group.bench_function("merge_and_render_one_instance", |b| {
        b.iter(|| rendered_bytes(black_box(&context), &instance))
    });
    group.bench_function("parse_json", |b| {
        b.iter(|| Context::from_json(black_box(&bytes)).map(|c| c.messages().len()))
    });
    group.finish();
    criterion.final_summary();

    if std::env::args().any(|arg| arg == "--test" || arg == "--list") {
        return;
    }
    let per_second = |time: Duration| MESSAGES as f64 / time.as_secs_f64();
    let base = median_time(|| {
        black_box(baseline(&context));
    });
    println!("\nsummary (median of 21 runs, {MESSAGES} messages, {IDENTITIES} identities)");
    println!(
        "  baseline, print each message:  {:>12.0} msgs/s  ({} bytes of prompt)",
        per_second(base),
        baseline(&context)
    );
    for (name, view) in [("global", &View::Global), ("one instance", &instance)] {
        let time = median_time(|| {
            black_box(rendered_bytes(&context, view));
        });
        println!(
            "  merge and render, {name:<12} {:>12.0} msgs/s  ({} bytes of prompt)  {:.2}x baseline",
            per_second(time),
            rendered_bytes(&context, view),
            base.as_secs_f64() / time.as_secs_f64()
        );
    }
}
