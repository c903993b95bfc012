//! A directory of 10,000 TDs on the SQLite store (`concord_store::Store`), each figure also
//! as a ratio against a baseline measured in the same run: `Directory::get` of one TD by
//! id (an indexed read, parse and enrichment).
//!
//! Run: `cargo bench -p concord-directory --bench directory`
//!
//! - registrations/s: `Directory::put` of 10,000 distinct agent TDs (about 1 KB each:
//!   validation, capability keys, one IMMEDIATE transaction with the event), and what the
//!   strict validator alone costs of it;
//! - `list` of `limit=100` at random offsets, p50/p99;
//! - JSONPath `$[?@.title=='…']` over all 10,000 enriched TDs at the default limits: the
//!   first search (it reads, parses and enriches every TD into the snapshot searches
//!   share; the snapshot's heap beside it), the searches after it, and a search after one
//!   TD was replaced (the snapshot catches up by the events), p50/p99; a `match()` on
//!   every TD's title (its pattern compiled once for the search), p50/p99;
//! - capability search by action name (100 TDs match: the result bound) and by DID (one
//!   match), p50/p99;
//! - store bytes per TD (the SQLite file after a checkpoint, over the TD count) beside the
//!   TD's JSON size;
//! - heap per registration: a counting allocator's live bytes per TD held by the in-memory
//!   store, and what the SQLite store's process keeps per TD (SQLite's own page cache is
//!   allocated outside Rust's allocator and bounded by its cache size).
//!
//! Files live under Cargo's target tmp dir (a real disk, not tmpfs).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use concord_directory::{
    CapabilityKind, CapabilityQuery, Directory, DirectoryLimits, DirectoryStore, ListFormat,
    ListQuery, MemoryDirectoryStore, Registrant,
};
use serde_json::json;

/// Counts live heap bytes over the system allocator.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only a counter is
// updated beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const TDS: usize = 10_000;

fn agent(n: usize) -> Vec<u8> {
    json!({
        "@context": ["https://www.w3.org/2022/wot/td/v1.1",
            {"lmos": "https://eclipse.dev/lmos/protocol/v1", "concord": "https://concord.dev/ns/v1#"}],
        "@type": "lmos:Agent",
        "id": format!("urn:bench:{n:05}"),
        "title": format!("Agent {n:05}"),
        "description": "A benchmark agent that answers questions about one topic.",
        "lmos:metadata": {"lmos:vendor": {"lmos:name": format!("Vendor {}", n % 50)}},
        "securityDefinitions": {"nosec": {"scheme": "nosec"}},
        "security": "nosec",
        "actions": {
            format!("action{}", n % 100): {
                "input": {"type": "object", "properties": {
                    format!("field{}", n % 30): {"type": "string"},
                    "language": {"type": "string"}
                }},
                "output": {"type": "object", "properties": {"answer": {"type": "string"}}},
                "forms": [{"href": format!("https://agent{n}.example/act")}]
            }
        },
        "concord:metaProtocol": {
            "concord:endpoint": format!("wss://agent{n}.example/concord"),
            "concord:versions": ["1.0"],
            "concord:did": format!("did:wba:agent{n}.example"),
            "concord:consensusProtocols": [{
                "concord:uri": format!("https://protocols.example/p{}/1.0", n % 10),
                "concord:protocolHash": format!("{:064x}", n % 10)
            }]
        }
    })
    .to_string()
    .into_bytes()
}

fn limits() -> DirectoryLimits {
    DirectoryLimits::default()
}

/// p50 and p99 of `runs` timings of `f`.
fn percentiles(runs: usize, mut f: impl FnMut(usize)) -> (Duration, Duration) {
    let mut times: Vec<Duration> = (0..runs)
        .map(|n| {
            let start = Instant::now();
            f(n);
            start.elapsed()
        })
        .collect();
    times.sort();
    (times[runs / 2], times[(runs * 99 / 100).min(runs - 1)])
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    if std::env::args().any(|arg| arg == "--list") {
        println!("directory: bench");
        return;
    }
    let now = SystemTime::now();
    let anyone = Registrant::default();
    let tds: Vec<Vec<u8>> = (0..TDS).map(agent).collect();
    let td_bytes = tds.iter().map(Vec::len).sum::<usize>() as f64 / TDS as f64;

    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let store = Arc::new(concord_store::Store::open(dir.path()).expect("open"));
    let directory = Directory::new(store.clone(), limits()).expect("limits");

    // What validation alone costs of a registration (the strict validator every TD passes).
    let validator = concord_describe::Validator::new();
    let start = Instant::now();
    for td in &tds {
        assert!(black_box(validator.validate(td)).is_valid());
    }
    let validating = start.elapsed() / TDS as u32;

    let heap_before = LIVE.load(Ordering::Relaxed);
    let start = Instant::now();
    for (n, td) in tds.iter().enumerate() {
        directory
            .put(&format!("urn:bench:{n:05}"), td, &anyone, now)
            .expect("register");
    }
    let registering = start.elapsed();
    let sqlite_heap = (LIVE.load(Ordering::Relaxed) - heap_before) as f64 / TDS as f64;
    let per_registration = registering / TDS as u32;

    let mut rng = fastrand::Rng::with_seed(7);
    let (get50, get99) = percentiles(2_000, |_| {
        let id = format!("urn:bench:{:05}", rng.usize(..TDS));
        black_box(directory.get(&id, now).expect("get"));
    });
    let (list50, list99) = percentiles(200, |_| {
        let query = ListQuery::new(rng.u64(..(TDS as u64 - 100)), Some(100), ListFormat::Array);
        black_box(directory.list(&query, now).expect("list"));
    });
    let (page50, page99) = percentiles(200, |_| {
        black_box(
            store
                .page(rng.u64(..(TDS as u64 - 100)), 100, 0)
                .expect("page"),
        );
    });
    let (find50, find99) = percentiles(200, |n| {
        let keys = [concord_directory::CapabilityKey::new(
            CapabilityKind::Action,
            format!("action{}", n % 100),
        )];
        assert_eq!(
            black_box(store.find(&keys, 0, 101).expect("find")).len(),
            100
        );
    });
    // The first search reads every TD into the snapshot.
    let heap_before = LIVE.load(Ordering::Relaxed);
    let start = Instant::now();
    let found = directory
        .search_jsonpath("$[?@.title=='Agent 00042']", now, &mut || Duration::ZERO)
        .expect("jsonpath");
    let path_cold = start.elapsed();
    let snapshot_heap = (LIVE.load(Ordering::Relaxed) - heap_before) as f64 / TDS as f64;
    assert_eq!(found.len(), 1);
    let (path50, path99) = percentiles(200, |n| {
        let query = format!("$[?@.title=='Agent {:05}']", (n * 397) % TDS);
        let found = directory
            .search_jsonpath(&query, now, &mut || Duration::ZERO)
            .expect("jsonpath");
        assert_eq!(found.len(), 1);
    });
    // `match()` on every TD's title: the pattern compiled once, not once per TD.
    let (match50, match99) = percentiles(50, |n| {
        let query = format!(
            "$[?match(@.title, 'Agent {:04}\\\\d')].id",
            (n * 97) % 1_000
        );
        let found = directory
            .search_jsonpath(&query, now, &mut || Duration::ZERO)
            .expect("jsonpath");
        assert_eq!(found.len(), 10);
    });
    // A search after one TD was replaced: the snapshot catches up by the events.
    let mut after_write = Vec::with_capacity(50);
    for n in 0..50 {
        let id = (n * 211) % TDS;
        directory
            .put(&format!("urn:bench:{id:05}"), &tds[id], &anyone, now)
            .expect("replace");
        let start = Instant::now();
        let found = directory
            .search_jsonpath(&format!("$[?@.title=='Agent {id:05}']"), now, &mut || {
                Duration::ZERO
            })
            .expect("jsonpath");
        after_write.push(start.elapsed());
        assert_eq!(found.len(), 1);
    }
    after_write.sort();
    let (caught50, caught99) = (after_write[25], after_write[49]);
    let (action50, action99) = percentiles(200, |n| {
        let query =
            CapabilityQuery::new().and(CapabilityKind::Action, format!("action{}", n % 100));
        let found = directory
            .search_capabilities(&query, now)
            .expect("capabilities");
        assert_eq!(found.things.len(), 100);
    });
    let (did50, did99) = percentiles(1_000, |_| {
        let query = CapabilityQuery::new().and(
            CapabilityKind::Did,
            format!("did:wba:agent{}.example", rng.usize(..TDS)),
        );
        let found = directory
            .search_capabilities(&query, now)
            .expect("capabilities");
        assert_eq!(found.things.len(), 1);
    });
    drop(directory);
    store
        .checkpoint(concord_store::CheckpointMode::Truncate)
        .expect("checkpoint");
    let file_bytes: u64 = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|entry| entry.expect("entry").metadata().expect("metadata").len())
        .sum();
    let store_bytes = file_bytes as f64 / TDS as f64;

    let memory = Arc::new(MemoryDirectoryStore::new());
    let in_memory = Directory::new(memory.clone(), limits()).expect("limits");
    let heap_before = LIVE.load(Ordering::Relaxed);
    for (n, td) in tds.iter().enumerate() {
        in_memory
            .put(&format!("urn:bench:{n:05}"), td, &anyone, now)
            .expect("register");
    }
    let memory_heap = (LIVE.load(Ordering::Relaxed) - heap_before) as f64 / TDS as f64;
    assert_eq!(memory.page(0, 1, 0).expect("page").total, TDS as u64);

    let base = micros(get50);
    println!("directory of {TDS} TDs (mean {td_bytes:.0} bytes of JSON each), SQLite store");
    println!(
        "baseline: get by id p50 {base:.1} µs, p99 {:.1} µs",
        micros(get99)
    );
    println!(
        "register (PUT): {:.0} /s, {:.1} µs each = {:.1}x get",
        TDS as f64 / registering.as_secs_f64(),
        micros(per_registration),
        micros(per_registration) / base
    );
    println!(
        "  of which validation alone: {:.1} µs ({:.0}%)",
        micros(validating),
        100.0 * validating.as_secs_f64() / per_registration.as_secs_f64()
    );
    for (what, p50, p99) in [
        ("list limit=100", list50, list99),
        (
            "  of which the store's page (rows read and parsed)",
            page50,
            page99,
        ),
        (
            "JSONPath title over all, first search (reads every TD)",
            path_cold,
            path_cold,
        ),
        ("JSONPath title over all, later searches", path50, path99),
        ("JSONPath match() on every title", match50, match99),
        (
            "JSONPath title over all, after one TD replaced",
            caught50,
            caught99,
        ),
        ("capability: action (100 match)", action50, action99),
        ("  of which the store's find (ids only)", find50, find99),
        ("capability: DID (1 match)", did50, did99),
    ] {
        println!(
            "{what}: p50 {:.1} µs ({:.1}x get), p99 {:.1} µs ({:.1}x get)",
            micros(p50),
            micros(p50) / base,
            micros(p99),
            micros(p99) / base
        );
    }
    println!(
        "store bytes per TD: {store_bytes:.0} ({:.1}x the TD's JSON)",
        store_bytes / td_bytes
    );
    println!(
        "JSONPath snapshot heap per TD: {snapshot_heap:.0} bytes ({:.1}x the TD's JSON)",
        snapshot_heap / td_bytes
    );
    println!(
        "heap per registration: in-memory store {memory_heap:.0} bytes ({:.1}x the TD's JSON); SQLite store's process {sqlite_heap:.0} bytes",
        memory_heap / td_bytes
    );
}
