//! What judging and compiling a worst-case candidate of 64 KiB at most costs, with the
//! default schema limits and with none: peak heap and wall time, counted by this test's
//! own allocator. Print the figures with
//! `cargo test -p concord-negotiate --release --test complexity_cost -- --nocapture`.

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use concord_negotiate::complexity::SchemaLimits;
use concord_negotiate::{DeterministicNegotiator, JudgeContext, ProtocolDocument, ProtocolSchemas};
use concord_proto::Decision;
use support::product_action;

/// The system allocator, keeping the bytes live now and the most live since the last reset.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is to the system allocator.
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is to the system allocator.
        unsafe { System.dealloc(pointer, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Peak heap above what was live before, and wall time, of `work`.
fn measure(work: impl FnOnce()) -> (usize, Duration) {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let start = Instant::now();
    work();
    let elapsed = start.elapsed();
    (PEAK.load(Ordering::Relaxed) - before, elapsed)
}

/// What a provider does with a candidate: judge it, and compile its schemas when it reads
/// them (the node compiles an agreed protocol's schemas for every session).
fn judge_and_compile(text: &str, limits: &SchemaLimits) -> Decision {
    let actions = [product_action()];
    let decision = DeterministicNegotiator::new()
        .with_schema_limits(*limits)
        .judge_now(JudgeContext::Provider { actions: &actions }, text);
    if let Ok(document) = ProtocolDocument::parse_within(text, limits) {
        let compiled = ProtocolSchemas::compile(&document);
        assert!(compiled.is_ok(), "{compiled:?}");
    }
    decision
}

/// A candidate whose request lists `count` product ids in an enum (64 KiB at most for
/// 5,000 of them).
fn enum_candidate(count: usize) -> String {
    let ids: Vec<String> = (0..count).map(|i| format!("P{i:05}")).collect();
    let request = serde_json::json!({
        "type": "object",
        "properties": {
            "messageId": {"type": "string"},
            "productId": {"type": "string", "enum": ids}
        },
        "required": ["messageId", "productId"]
    });
    format!(
        "# Requirements\nGet a product's information.\n\n# Data Format\n\n## Request\n```json\n{request}\n```\n\n\
         ## Response\n```json\n{{\"type\":\"object\",\"properties\":{{\"messageId\":{{\"type\":\"string\"}},\
         \"code\":{{\"type\":\"integer\"}},\"data\":{{\"type\":\"object\"}}}}}}\n```\n"
    )
}

#[test]
fn worst_case_candidates_cost_little_within_the_limits() {
    let unlimited = SchemaLimits {
        max_depth: usize::MAX,
        max_nodes: usize::MAX,
        max_values: usize::MAX,
        max_enum_values: usize::MAX,
        max_members: usize::MAX,
        max_branches: usize::MAX,
        max_pattern_len: usize::MAX,
        max_pattern_total: usize::MAX,
    };
    let candidates = [
        ("5,000-value enum", enum_candidate(5_000)),
        (
            "40 patterns of 500 bytes",
            include_str!("hostile/06-many-patterns.md").to_owned(),
        ),
        (
            "5,400 objects",
            include_str!("hostile/07-many-nodes.md").to_owned(),
        ),
        (
            "25,000 values",
            include_str!("hostile/09-many-values.md").to_owned(),
        ),
    ];
    println!("candidate | bytes | no limits: peak heap, time | default limits: peak heap, time, decision");
    for (name, text) in &candidates {
        assert!(text.len() <= 64 * 1024, "{name}: {} bytes", text.len());
        let (before_heap, before_time) = measure(|| {
            judge_and_compile(text, &unlimited);
        });
        let mut decision = None;
        let (after_heap, after_time) = measure(|| {
            decision = Some(judge_and_compile(text, &SchemaLimits::default()));
        });
        let rejected = matches!(decision, Some(Decision::Reject { .. }));
        println!(
            "{name} | {} | {} KiB, {before_time:?} | {} KiB, {after_time:?}, {}",
            text.len(),
            before_heap / 1024,
            after_heap / 1024,
            if rejected { "rejected" } else { "read" }
        );
        assert!(rejected, "{name}: {decision:?}");
        // Reading the text (markdown, then its JSON) costs most of what is left; the
        // schemas are walked once and never compiled.
        assert!(
            after_heap < 6 * 1024 * 1024 && after_heap <= before_heap,
            "{name}: {after_heap} bytes at peak"
        );
    }
    // The reported attack, before candidates were capped at 64 KiB: 4 MB, 200,000 values.
    let reported = enum_candidate(200_000);
    let (before_heap, before_time) = measure(|| {
        judge_and_compile(&reported, &unlimited);
    });
    let (after_heap, after_time) = measure(|| {
        judge_and_compile(&reported, &SchemaLimits::default());
    });
    println!(
        "200,000-value enum (uncapped) | {} | {} KiB, {before_time:?} | {} KiB, {after_time:?}, rejected",
        reported.len(),
        before_heap / 1024,
        after_heap / 1024
    );
    assert!(after_heap < before_heap, "{after_heap} bytes at peak");
}
