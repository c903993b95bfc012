//! AICL beside serde_json, same data, same run.
//!
//! Data sets: the whitepaper's messages, a 1,000-item product catalogue, a 224×224×3 uint8
//! image and a 128×256 float32 matrix (JSON as nested number arrays: with each float32's
//! shortest digits, and widened to f64 as `tensor.tolist()` and JavaScript write them).
//! Run: `cargo bench -p concord-aicl --bench codec`; a summary table with bytes, MB/s and the
//! ratios against serde_json is printed at the end. Times are on-CPU time of the benchmark
//! thread where Linux reports it (see [`cpu_time`]).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use concord_aicl::{Tensor, Value};
use criterion::{Criterion, Throughput};
use serde::{Deserialize, Serialize};

// ---------------------------------------------------------------- data

/// A small deterministic generator (xorshift64*), so every run measures the same data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Serialize, Deserialize, Clone, PartialEq, Debug)]
struct Dimensions {
    width_cm: f64,
    height_cm: f64,
    depth_cm: f64,
}

#[derive(Serialize, Deserialize, Clone, PartialEq, Debug)]
struct Product {
    id: u64,
    sku: String,
    name: String,
    description: String,
    category: String,
    price: f64,
    currency: String,
    in_stock: bool,
    quantity: u32,
    rating: f64,
    tags: Vec<String>,
    dimensions: Dimensions,
}

#[derive(Serialize, Deserialize, Clone, PartialEq, Debug)]
struct Catalogue {
    store: String,
    products: Vec<Product>,
}

fn catalogue() -> Catalogue {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    const WORDS: &[&str] = &[
        "wireless",
        "compact",
        "steel",
        "organic",
        "smart",
        "travel",
        "classic",
        "pro",
        "ultra",
        "eco",
        "portable",
        "digital",
        "premium",
        "mini",
        "solar",
        "ergonomic",
    ];
    const CATEGORIES: &[&str] = &["audio", "kitchen", "outdoor", "office", "toys", "garden"];
    let products = (0..1000)
        .map(|id| {
            let mut words = |n: usize| {
                (0..n)
                    .map(|_| WORDS[rng.below(WORDS.len() as u64) as usize])
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let name = words(3);
            let description = words(12);
            let tags = (0..3).map(|_| words(1)).collect();
            Product {
                id: 100_000 + id,
                sku: format!("SKU-{:06}", rng.below(1_000_000)),
                name,
                description,
                category: CATEGORIES[rng.below(CATEGORIES.len() as u64) as usize].to_owned(),
                price: (rng.below(100_000) as f64) / 100.0,
                currency: "EUR".to_owned(),
                in_stock: rng.below(4) != 0,
                quantity: rng.below(500) as u32,
                rating: (rng.below(50) as f64) / 10.0,
                tags,
                dimensions: Dimensions {
                    width_cm: (rng.below(1000) as f64) / 10.0,
                    height_cm: (rng.below(1000) as f64) / 10.0,
                    depth_cm: (rng.below(1000) as f64) / 10.0,
                },
            }
        })
        .collect();
    Catalogue {
        store: "Concord Demo Store".to_owned(),
        products,
    }
}

/// The whitepaper's example messages (§4.2, §7.1–7.3, §8.1–8.3), with real tensors where it
/// shows placeholders.
fn whitepaper_messages() -> Vec<Value> {
    let video = Tensor::from_vec(vec![2, 4, 4, 3], (0..96u8).collect()).unwrap();
    let weights = Tensor::from_vec(vec![2, 3], vec![0.5f32, -1.25, 3.0, 0.0, 2.5, -0.75]).unwrap();
    let texts = [
        "[d:[s:protocol]:[s:LightAICL],[s:session_id]:[s:current_session],[s:msg_type]:[s:error],[s:code]:[i:2001],[s:reason]:[s:MISSING_REQUIRED_FIELD],[s:detail]:[s:Field 'target_url' required in tool_call]]".to_owned(),
        format!("[d:[s:protocol]:[s:LightAICL],[s:session_id]:[s:multimodal_001],[s:msg_type]:[s:task_request],[s:task]:[s:生成视频解说],[s:constraints]:[d:[s:video]:{},[s:lang]:[s:zh-CN]]]", Value::Tensor(video)),
        "[d:[s:protocol]:[s:LightAICL],[s:session_id]:[s:auto_web_05],[s:msg_type]:[s:tool_call],[s:tool]:[s:web_scraper],[s:params]:[d:[s:target_url]:[s:https://example.com],[s:extract]:[l:[s:title],[s:price]]]]".to_owned(),
        format!("[d:[s:protocol]:[s:LightAICL],[s:session_id]:[s:fl_session_12],[s:msg_type]:[s:result],[s:data]:{}]", Value::Tensor(weights)),
        "[d:[s:protocol]:[s:LightAICL],[s:session_id]:[s:s1],[s:msg_type]:[s:result],[s:data]:[i:1],[s:signature]:[s:4fd2a1f3]]".to_owned(),
        "[d:[s:protocol]:[s:LightAICL],[s:session_id]:[s:s1],[s:msg_type]:[s:result],[s:content]:[s:part three],[s:stream_id]:[s:chunk_3/5],[s:is_final]:[b:false]]".to_owned(),
        "[d:[s:protocol]:[s:LightAICL],[s:session_id]:[s:s1],[s:msg_type]:[s:protocol_negotiate],[s:supported]:[l:[s:LightAICL_v1],[s:LightAICL_v2]]]".to_owned(),
    ];
    texts.iter().map(|text| text.parse().unwrap()).collect()
}

fn image() -> (Tensor, Vec<Vec<Vec<u8>>>) {
    let mut rng = Rng(7);
    let nested: Vec<Vec<Vec<u8>>> = (0..224)
        .map(|_| {
            (0..224)
                .map(|_| (0..3).map(|_| rng.below(256) as u8).collect())
                .collect()
        })
        .collect();
    let flat: Vec<u8> = nested.iter().flatten().flatten().copied().collect();
    (Tensor::from_vec(vec![224, 224, 3], flat).unwrap(), nested)
}

fn weights() -> (Tensor, Vec<Vec<f32>>) {
    let mut rng = Rng(11);
    // Roughly normal weights with standard deviation 0.05 (sum of uniforms).
    let nested: Vec<Vec<f32>> = (0..128)
        .map(|_| {
            (0..256)
                .map(|_| (((0..4).map(|_| rng.unit()).sum::<f64>() - 2.0) * 0.087) as f32)
                .collect()
        })
        .collect();
    let flat: Vec<f32> = nested.iter().flatten().copied().collect();
    (Tensor::from_vec(vec![128, 256], flat).unwrap(), nested)
}

// ---------------------------------------------------------------- measurement

/// Per-iteration times of every sample, by benchmark id, for the summary table.
static SAMPLES: Mutex<BTreeMap<String, Vec<f64>>> = Mutex::new(BTreeMap::new());

fn record(id: &str, iters: u64, elapsed: Duration) {
    let per_iter = elapsed.as_secs_f64() / iters as f64;
    SAMPLES
        .lock()
        .unwrap()
        .entry(id.to_owned())
        .or_default()
        .push(per_iter);
}

fn median(id: &str) -> f64 {
    let samples = SAMPLES.lock().unwrap();
    let mut times = samples.get(id).cloned().unwrap_or_default();
    times.sort_by(f64::total_cmp);
    times.get(times.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Time this thread has spent on a CPU, from `/proc/thread-self/schedstat` (Linux).
///
/// The machine these benchmarks run on is shared, and time spent waiting for a core says
/// nothing about the code: samples are measured in on-CPU time where Linux reports it, and
/// in wall-clock time elsewhere.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos: u64 = stat.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(nanos))
}

/// Runs `iters` iterations and returns the time they took (on-CPU time when available).
fn measure<O>(iters: u64, routine: &mut impl FnMut() -> O) -> Duration {
    let (cpu_start, wall_start) = (cpu_time(), Instant::now());
    for _ in 0..iters {
        black_box(routine());
    }
    match (cpu_start, cpu_time()) {
        (Some(start), Some(end)) => end.saturating_sub(start),
        _ => wall_start.elapsed(),
    }
}

/// Benchmarks `routine` as `group/name`, with throughput in `bytes`, and records its samples.
fn bench<O>(
    c: &mut Criterion,
    group: &str,
    name: &str,
    bytes: usize,
    mut routine: impl FnMut() -> O,
) {
    let id = format!("{group}/{name}");
    let mut criterion_group = c.benchmark_group(group);
    criterion_group.throughput(Throughput::Bytes(bytes as u64));
    criterion_group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let elapsed = measure(iters, &mut routine);
            record(&id, iters, elapsed);
            elapsed
        })
    });
    criterion_group.finish();
}

/// Sizes of each data set in both formats, for the table.
struct Sizes {
    group: &'static str,
    aicl: usize,
    json: usize,
    payload: Option<usize>,
}

static SIZES: Mutex<Vec<Sizes>> = Mutex::new(Vec::new());

/// Python's `json.dumps(tensor.tolist())` size of a tensor group's tensor: (group, bytes).
static PYTHON_SIZES: Mutex<Vec<(&str, usize)>> = Mutex::new(Vec::new());

// ---------------------------------------------------------------- benchmarks

fn messages(c: &mut Criterion) {
    let values = whitepaper_messages();
    let aicl: Vec<String> = values.iter().map(Value::to_string).collect();
    let json_values: Vec<serde_json::Value> = values
        .iter()
        .map(|v| concord_aicl::json::to_json(v).unwrap())
        .collect();
    let json: Vec<String> = json_values.iter().map(|v| v.to_string()).collect();
    let aicl_bytes = aicl.iter().map(String::len).sum();
    let json_bytes = json.iter().map(String::len).sum();
    SIZES.lock().unwrap().push(Sizes {
        group: "messages",
        aicl: aicl_bytes,
        json: json_bytes,
        payload: None,
    });

    bench(c, "messages", "parse/aicl", aicl_bytes, || {
        aicl.iter()
            .map(|t| concord_aicl::from_str::<Value>(t).unwrap())
            .collect::<Vec<_>>()
    });
    bench(c, "messages", "parse/json", json_bytes, || {
        json.iter()
            .map(|t| serde_json::from_str::<serde_json::Value>(t).unwrap())
            .collect::<Vec<_>>()
    });
    bench(c, "messages", "write/aicl", aicl_bytes, || {
        values
            .iter()
            .map(|v| concord_aicl::to_string(v).unwrap().len())
            .sum::<usize>()
    });
    bench(c, "messages", "write/json", json_bytes, || {
        json_values
            .iter()
            .map(|v| serde_json::to_string(v).unwrap().len())
            .sum::<usize>()
    });
}

fn catalogue_typed(c: &mut Criterion) {
    let data = catalogue();
    let aicl = concord_aicl::to_string(&data).unwrap();
    let json = serde_json::to_string(&data).unwrap();
    assert_eq!(concord_aicl::from_str::<Catalogue>(&aicl).unwrap(), data);
    SIZES.lock().unwrap().push(Sizes {
        group: "catalogue",
        aicl: aicl.len(),
        json: json.len(),
        payload: None,
    });

    bench(c, "catalogue", "parse/aicl", aicl.len(), || {
        concord_aicl::from_str::<Catalogue>(&aicl).unwrap()
    });
    bench(c, "catalogue", "parse/json", json.len(), || {
        serde_json::from_str::<Catalogue>(&json).unwrap()
    });
    bench(c, "catalogue", "write/aicl", aicl.len(), || {
        concord_aicl::to_string(&data).unwrap()
    });
    bench(c, "catalogue", "write/json", json.len(), || {
        serde_json::to_string(&data).unwrap()
    });
}

fn catalogue_values(c: &mut Criterion) {
    let data = catalogue();
    let aicl = concord_aicl::to_string(&data).unwrap();
    let json = serde_json::to_string(&data).unwrap();
    let aicl_value: Value = concord_aicl::from_str(&aicl).unwrap();
    let json_value: serde_json::Value = serde_json::from_str(&json).unwrap();
    SIZES.lock().unwrap().push(Sizes {
        group: "catalogue-value",
        aicl: aicl.len(),
        json: json.len(),
        payload: None,
    });

    bench(c, "catalogue-value", "parse/aicl", aicl.len(), || {
        concord_aicl::from_str::<Value>(&aicl).unwrap()
    });
    bench(c, "catalogue-value", "parse/json", json.len(), || {
        serde_json::from_str::<serde_json::Value>(&json).unwrap()
    });
    bench(c, "catalogue-value", "write/aicl", aicl.len(), || {
        concord_aicl::to_string(&aicl_value).unwrap()
    });
    bench(c, "catalogue-value", "write/json", json.len(), || {
        serde_json::to_string(&json_value).unwrap()
    });
}

/// The size of `json.dumps(tensor.tolist())` in Python (the whitepaper's §6.2 comparison):
/// elements as Python floats (f64) or ints, separated by `", "`.
fn python_json_size(tensor: &Tensor) -> usize {
    let widened = concord_aicl::json::to_json(&Value::Tensor(tensor.clone())).unwrap();
    let data = serde_json::to_string(&widened["data"]).unwrap();
    let separators = data.matches(',').count();
    // Nested lists add a `[`, a `]` and a `, ` per row of each outer dimension.
    let rows: usize = (1..tensor.shape().len())
        .map(|depth| tensor.shape()[..depth].iter().product::<usize>())
        .sum();
    data.len() + separators + 3 * rows
}

fn tensor_group<N>(c: &mut Criterion, group: &'static str, tensor: &Tensor, nested: N)
where
    N: Serialize + for<'de> Deserialize<'de>,
{
    let aicl = concord_aicl::to_string(tensor).unwrap();
    let json = serde_json::to_string(&nested).unwrap();
    let payload = tensor.data().len();
    assert_eq!(&concord_aicl::from_str::<Tensor>(&aicl).unwrap(), tensor);
    SIZES.lock().unwrap().push(Sizes {
        group,
        aicl: aicl.len(),
        json: json.len(),
        payload: Some(payload),
    });

    bench(c, group, "parse/aicl", aicl.len(), || {
        concord_aicl::from_str::<Tensor>(&aicl).unwrap()
    });
    bench(c, group, "parse/json", json.len(), || {
        serde_json::from_str::<N>(&json).unwrap()
    });
    bench(c, group, "write/aicl", aicl.len(), || {
        concord_aicl::to_string(tensor).unwrap()
    });
    bench(c, group, "write/json", json.len(), || {
        serde_json::to_string(&nested).unwrap()
    });
}

/// Records the size of Python's `json.dumps(tensor.tolist())` for `group`'s tensor.
fn python_comparison(group: &'static str, tensor: &Tensor) {
    PYTHON_SIZES
        .lock()
        .unwrap()
        .push((group, python_json_size(tensor)));
}

fn tensors(c: &mut Criterion) {
    let (tensor, nested) = image();
    python_comparison("tensor-u8-224x224x3", &tensor);
    tensor_group(c, "tensor-u8-224x224x3", &tensor, nested);
    let (tensor, nested) = weights();
    // The same float32 values as every non-Rust JSON writer sends them: `tensor.tolist()` in
    // Python, `Array.from(float32Array)` in JavaScript widen each element to f64, and JSON
    // then carries the f64's shortest digits (`0.02437848225235939`, not `0.024378482`).
    let widened: Vec<Vec<f64>> = nested
        .iter()
        .map(|row| row.iter().map(|&x| f64::from(x)).collect())
        .collect();
    python_comparison("tensor-f32-128x256", &tensor);
    tensor_group(c, "tensor-f32-128x256", &tensor, nested);
    tensor_group(c, "tensor-f32-128x256-as-f64", &tensor, widened);
}

/// The `base85` crate on the image's bytes, to show where tensor time goes.
fn base85_crate(c: &mut Criterion) {
    let (tensor, _) = image();
    let encoded = base85::encode(tensor.data());
    bench(c, "base85-crate", "encode", tensor.data().len(), || {
        base85::encode(tensor.data())
    });
    bench(c, "base85-crate", "decode", tensor.data().len(), || {
        base85::decode(&encoded).unwrap()
    });
}

// ---------------------------------------------------------------- summary

fn mb_per_s(bytes: usize, seconds: f64) -> f64 {
    bytes as f64 / seconds / 1e6
}

fn print_summary() {
    println!();
    println!("| data | AICL bytes | JSON bytes | size AICL/JSON | parse AICL MB/s | parse JSON MB/s | parse speed AICL/JSON | write AICL MB/s | write JSON MB/s | write speed AICL/JSON |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for sizes in SIZES.lock().unwrap().iter() {
        let time = |name: &str| median(&format!("{}/{name}", sizes.group));
        let (parse_aicl, parse_json) = (time("parse/aicl"), time("parse/json"));
        let (write_aicl, write_json) = (time("write/aicl"), time("write/json"));
        println!(
            "| {} | {} | {} | {:.2} | {:.0} | {:.0} | {:.2}× | {:.0} | {:.0} | {:.2}× |",
            sizes.group,
            sizes.aicl,
            sizes.json,
            sizes.aicl as f64 / sizes.json as f64,
            mb_per_s(sizes.aicl, parse_aicl),
            mb_per_s(sizes.json, parse_json),
            parse_json / parse_aicl,
            mb_per_s(sizes.aicl, write_aicl),
            mb_per_s(sizes.json, write_json),
            write_json / write_aicl,
        );
    }
    println!();
    println!("Speed columns are serde_json's time divided by AICL's for the same data (> 1: AICL faster).");
    for sizes in SIZES.lock().unwrap().iter() {
        if let Some(payload) = sizes.payload {
            let seconds = median(&format!("{}/parse/aicl", sizes.group));
            println!(
                "{}: {} payload bytes decoded at {:.2} GB/s (AICL text parsed at {:.2} GB/s)",
                sizes.group,
                payload,
                payload as f64 / seconds / 1e9,
                sizes.aicl as f64 / seconds / 1e9
            );
        }
    }
    let sizes = SIZES.lock().unwrap();
    for (group, python) in PYTHON_SIZES.lock().unwrap().iter() {
        let Some(aicl) = sizes.iter().find(|s| s.group == *group).map(|s| s.aicl) else {
            continue;
        };
        println!(
            "{group}: AICL {aicl} bytes vs Python json.dumps(tensor.tolist()) {python} bytes: {:.2}×",
            aicl as f64 / *python as f64
        );
    }
    let (tensor, _) = image();
    let bytes = tensor.data().len();
    for name in ["encode", "decode"] {
        let seconds = median(&format!("base85-crate/{name}"));
        println!(
            "base85 crate {name}: {:.2} GB/s of raw bytes",
            bytes as f64 / seconds / 1e9
        );
    }
}

fn main() {
    let mut criterion = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    messages(&mut criterion);
    catalogue_typed(&mut criterion);
    catalogue_values(&mut criterion);
    tensors(&mut criterion);
    base85_crate(&mut criterion);
    criterion.final_summary();
    print_summary();
}
