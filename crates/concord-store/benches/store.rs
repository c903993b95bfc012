//! Cost of the store's operations beside bare SQLite doing the same I/O, in one run.
//!
//! Run: `cargo bench -p concord-store --bench store`
//!
//! Pairs (store operation / baseline on a second, raw `rusqlite` connection to the same
//! file, same pragmas):
//! - `resume_check`: `Store::can_resume` on a 4 KiB document this process verified (lock,
//!   one indexed lookup of the handler column; no read of the document, no re-hash) /
//!   `SELECT document, provider_handler IS NOT NULL` by hash.
//! - `append_frame`: `Store::append_frame` of a 512-byte meta frame (one IMMEDIATE
//!   transaction: state check, insert, count update) / one autocommit `INSERT` of the same
//!   row into a plain table.
//! - `touch`: `Store::touch_protocol` (one IMMEDIATE transaction: use count, the peer's
//!   entry, pruning past the peer cap) / the same three statements in one raw transaction.
//!
//! The summary also times `can_resume` on a 1 MB document: verified by this process (a
//! lookup) against the first check in a process that has not verified it (read and
//! re-hash, what every check cost before documents were verified once), and the append baseline with `synchronous=FULL` (an fsync per
//! commit) to show what the store's `synchronous=NORMAL` saves. Files live under
//! Cargo's target tmp dir (a real disk, not tmpfs).

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use concord_proto::{ProtocolHash, Role};
use concord_store::{Direction, FrameRecord, NewProtocol, Store, TranscriptBounds, TranscriptId};
use criterion::{criterion_group, Criterion};
use rusqlite::Connection;

const DOC_LEN: usize = 4096;
const FRAME_LEN: usize = 512;

struct Fixture {
    _dir: tempfile::TempDir,
    store: Store,
    raw: Connection,
    hash: ProtocolHash,
    transcript: TranscriptId,
    frame: FrameRecord,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let store = Store::open(dir.path()).expect("open");
    // Every append takes the full path (the frame bound would only count them).
    store.set_transcript_bounds(TranscriptBounds::new(4096, u64::MAX));
    let document: String = "# Protocol\n".chars().cycle().take(DOC_LEN).collect();
    let hash = store
        .save_protocol(
            &NewProtocol::negotiated(document, "peer").with_handler(Role::Provider, "/* js */"),
        )
        .expect("save");
    let transcript = store
        .begin_transcript("peer", Role::Provider, SystemTime::now())
        .expect("begin");
    let frame = FrameRecord::hello(
        Direction::Received,
        "x".repeat(FRAME_LEN),
        SystemTime::now(),
    );
    let raw = raw_connection(store.path(), "NORMAL");
    raw.execute_batch(
        "CREATE TABLE IF NOT EXISTS bench_frames (transcript_id INTEGER, seq INTEGER,
             direction TEXT, kind TEXT, text TEXT, byte_len INTEGER, at_ms INTEGER)",
    )
    .expect("baseline table");
    Fixture {
        _dir: dir,
        store,
        raw,
        hash,
        transcript,
        frame,
    }
}

fn raw_connection(path: &Path, synchronous: &str) -> Connection {
    let raw = Connection::open(path).expect("raw connection");
    raw.busy_timeout(Duration::from_secs(5))
        .expect("busy timeout");
    raw.pragma_update(None, "journal_mode", "WAL").expect("wal");
    raw.pragma_update(None, "synchronous", synchronous)
        .expect("synchronous");
    raw
}

fn raw_resume_check(raw: &Connection, hash: &str) -> bool {
    let mut statement = raw
        .prepare_cached(
            "SELECT document, provider_handler IS NOT NULL FROM protocols WHERE hash = ?1",
        )
        .expect("prepare");
    statement
        .query_row([hash], |row| {
            let document: String = row.get(0)?;
            let has_handler: bool = row.get(1)?;
            Ok(!document.is_empty() && has_handler)
        })
        .expect("select")
}

fn raw_append(raw: &Connection, seq: i64, text: &str) {
    raw.prepare_cached("INSERT INTO bench_frames VALUES (1, ?1, 'received', 'hello', ?2, NULL, 0)")
        .and_then(|mut statement| statement.execute(rusqlite::params![seq, text]))
        .expect("insert");
}

fn raw_touch(raw: &Connection, hash: &str) -> i64 {
    raw.execute_batch("BEGIN IMMEDIATE").expect("begin");
    let count = raw
        .prepare_cached(
            "UPDATE protocols SET last_used_ms = 0, use_count = use_count + 1
             WHERE hash = ?1 RETURNING use_count",
        )
        .and_then(|mut statement| statement.query_row([hash], |row| row.get(0)))
        .expect("update");
    raw.prepare_cached(
        "INSERT OR REPLACE INTO protocol_peers (hash, peer, last_used_ms) VALUES (?1, 'peer', 0)",
    )
    .and_then(|mut statement| statement.execute([hash]))
    .expect("peer");
    raw.prepare_cached(
        "DELETE FROM protocol_peers WHERE hash = ?1 AND rowid IN (
             SELECT rowid FROM protocol_peers WHERE hash = ?1
             ORDER BY last_used_ms DESC, rowid DESC LIMIT -1 OFFSET 64)",
    )
    .and_then(|mut statement| statement.execute([hash]))
    .expect("prune");
    raw.execute_batch("COMMIT").expect("commit");
    count
}

fn benches(c: &mut Criterion) {
    let f = fixture();
    let hash_text = f.hash.to_string();
    let text = "x".repeat(FRAME_LEN);

    let mut group = c.benchmark_group("resume_check");
    group.bench_function("store", |b| {
        b.iter(|| black_box(f.store.can_resume(&f.hash, Role::Provider).expect("check")))
    });
    group.bench_function("raw_select", |b| {
        b.iter(|| black_box(raw_resume_check(&f.raw, &hash_text)))
    });
    group.finish();

    let mut group = c.benchmark_group("append_frame");
    group.bench_function("store", |b| {
        b.iter(|| {
            black_box(
                f.store
                    .append_frame(f.transcript, &f.frame)
                    .expect("append"),
            )
        })
    });
    let mut seq = 0;
    group.bench_function("raw_insert", |b| {
        b.iter(|| {
            seq += 1;
            raw_append(&f.raw, seq, &text)
        })
    });
    group.finish();

    let mut group = c.benchmark_group("touch");
    group.bench_function("store", |b| {
        b.iter(|| black_box(f.store.touch_protocol(&f.hash, "peer").expect("touch")))
    });
    group.bench_function("raw_transaction", |b| {
        b.iter(|| black_box(raw_touch(&f.raw, &hash_text)))
    });
    group.finish();
}

criterion_group!(benches_group, benches);

/// Operations per second of `op` over `window` of wall time.
fn rate(window: Duration, op: &mut dyn FnMut()) -> f64 {
    let start = Instant::now();
    let mut count = 0u64;
    while start.elapsed() < window {
        for _ in 0..20 {
            op();
        }
        count += 20;
    }
    count as f64 / start.elapsed().as_secs_f64()
}

/// The best ops/s of `store` and of `baseline`, measured in alternation (five 300 ms
/// windows each), so that load from other processes hits both sides alike.
fn pair(store: &mut dyn FnMut(), baseline: &mut dyn FnMut()) -> (f64, f64) {
    let window = Duration::from_millis(300);
    rate(Duration::from_millis(100), store);
    rate(Duration::from_millis(100), baseline);
    (0..5).fold((0.0_f64, 0.0_f64), |(best_store, best_baseline), _| {
        (
            best_store.max(rate(window, store)),
            best_baseline.max(rate(window, baseline)),
        )
    })
}

fn line(name: &str, (store, baseline): (f64, f64), baseline_name: &str) {
    println!(
        "  {name:<13} store {store:>9.0}/s   {baseline_name:<31} {baseline:>9.0}/s   ratio {:.2}x",
        baseline / store
    );
}

/// Ops/s of each pair and their ratio (baseline / store: how many times slower the store is).
fn summary() {
    let f = fixture();
    let hash_text = f.hash.to_string();
    let text = "x".repeat(FRAME_LEN);
    println!("summary (best ops/s of alternating windows, one thread; ratio = baseline / store):");
    let resume = pair(
        &mut || {
            black_box(f.store.can_resume(&f.hash, Role::Provider).expect("check"));
        },
        &mut || {
            black_box(raw_resume_check(&f.raw, &hash_text));
        },
    );
    line("resume_check", resume, "raw select (no re-hash)");
    resume_check_1mb();

    let mut seq = 0;
    let append = pair(
        &mut || {
            black_box(
                f.store
                    .append_frame(f.transcript, &f.frame)
                    .expect("append"),
            );
        },
        &mut || {
            seq += 1;
            raw_append(&f.raw, seq, &text);
        },
    );
    line("append_frame", append, "raw insert (one table)");
    let full = raw_connection(f.store.path(), "FULL");
    let mut seq_full = 0;
    let (normal, with_full) = pair(
        &mut || {
            seq += 1;
            raw_append(&f.raw, seq, &text);
        },
        &mut || {
            seq_full += 1;
            raw_append(&full, seq_full, &text);
        },
    );
    println!(
        "  {:<13} raw insert, synchronous=NORMAL {normal:>9.0}/s vs FULL {with_full:>9.0}/s: \
         FULL costs {:.0}x",
        "",
        normal / with_full
    );

    let touch = pair(
        &mut || {
            black_box(f.store.touch_protocol(&f.hash, "peer").expect("touch"));
        },
        &mut || {
            black_box(raw_touch(&f.raw, &hash_text));
        },
    );
    line("touch", touch, "raw transaction");
}

/// `can_resume` on a 1 MB document: verified (a lookup) vs the first check of a process
/// (read and re-hash), each the mean over its runs.
fn resume_check_1mb() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let document: String = "# Protocol\n".chars().cycle().take(1 << 20).collect();
    let hash = Store::open(dir.path())
        .expect("open")
        .save_protocol(
            &NewProtocol::negotiated(document, "peer").with_handler(Role::Provider, "/* js */"),
        )
        .expect("save");
    let runs = 50;
    let mut first = Duration::ZERO;
    for _ in 0..runs {
        let fresh = Store::open(dir.path()).expect("open");
        let start = Instant::now();
        black_box(fresh.can_resume(&hash, Role::Provider).expect("check"));
        first += start.elapsed();
    }
    let store = Store::open(dir.path()).expect("open");
    store.can_resume(&hash, Role::Provider).expect("check");
    let verified_runs = 10_000;
    let start = Instant::now();
    for _ in 0..verified_runs {
        black_box(store.can_resume(&hash, Role::Provider).expect("check"));
    }
    let verified = start.elapsed() / verified_runs;
    let first = first / runs;
    println!(
        "  {:<13} 1 MB document: first check (read + re-hash) {first:>10.2?}, verified {verified:>8.2?}: {:.0}x",
        "resume_1mb",
        first.as_secs_f64() / verified.as_secs_f64()
    );
}

fn main() {
    benches_group();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
