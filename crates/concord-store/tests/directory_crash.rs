//! The directory's SQLite tables survive `kill -9` mid-write.
//!
//! Run normally, this binary is the test: it re-executes itself as a child writer
//! (`CONCORD_DIRECTORY_CRASH_CHILD=<dir>`) that registers, replaces and deletes TDs through
//! a real `Directory` over the store in a tight loop, printing a line after each operation
//! returned; it kills the child with SIGKILL at a random moment, reopens the store and
//! checks it, several times over the same file. Everything reported must be there
//! (durability) and nothing half there (atomicity): `PRAGMA integrity_check` is `ok`, every
//! TD is indexed under its own action (the index is written with the TD), every entry's
//! revision is an event id not above the latest, and each TD holds the last state reported
//! for it, or the one operation that committed before the kill but was not reported yet.
//!
//! Reproduce a run with `CONCORD_DIRECTORY_CRASH_SEED=<seed>` (printed at the start).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use concord_directory::{
    CapabilityKey, CapabilityKind, Directory, DirectoryLimits, DirectoryStore, Registrant,
};
use concord_store::Store;
use serde_json::json;

const NAME: &str = "directory_kill_9_mid_write";
const CHILD_ENV: &str = "CONCORD_DIRECTORY_CRASH_CHILD";
const CHILD_SEED_ENV: &str = "CONCORD_DIRECTORY_CRASH_CHILD_SEED";
const SEED_ENV: &str = "CONCORD_DIRECTORY_CRASH_SEED";
const ROUNDS: u64 = 6;
const IDS: u64 = 40;

fn main() -> ExitCode {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        let seed = std::env::var(CHILD_SEED_ENV)
            .ok()
            .and_then(|seed| seed.parse().ok())
            .unwrap_or(0);
        return writer(Path::new(&dir), seed);
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|arg| arg == "--list") {
        println!("{NAME}: test");
        return ExitCode::SUCCESS;
    }
    let filters: Vec<&String> = args.iter().filter(|arg| !arg.starts_with('-')).collect();
    if !filters.is_empty() && !filters.iter().any(|filter| NAME.contains(filter.as_str())) {
        println!("running 0 tests (filtered out {NAME})");
        return ExitCode::SUCCESS;
    }
    run()
}

#[cfg(not(unix))]
fn run() -> ExitCode {
    println!("test {NAME} ... skipped: SIGKILL needs a Unix platform");
    ExitCode::SUCCESS
}

#[cfg(unix)]
fn run() -> ExitCode {
    let seed = std::env::var(SEED_ENV)
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    println!("test {NAME}: seed {seed} (set {SEED_ENV}={seed} to repeat this run)");
    parent::kill_and_check(seed);
    println!("test {NAME} ... ok");
    ExitCode::SUCCESS
}

/// A write's stamp: (round, sequence number within the round); later stamps are larger.
type Stamp = (u64, u64);

fn td(id: &str, stamp: Stamp, pad: usize) -> Vec<u8> {
    json!({
        "@context": "https://www.w3.org/2022/wot/td/v1.1",
        "id": id,
        "title": format!("t-{}-{}", stamp.0, stamp.1),
        "description": "x".repeat(pad),
        "securityDefinitions": {"nosec": {"scheme": "nosec"}},
        "security": "nosec",
        "actions": {action(stamp): {"forms": [{"href": "https://crash.example/act"}]}}
    })
    .to_string()
    .into_bytes()
}

fn action(stamp: Stamp) -> String {
    format!("a_{}_{}", stamp.0, stamp.1)
}

fn stamp_of(title: &str) -> Option<Stamp> {
    let mut parts = title.strip_prefix("t-")?.split('-');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

fn directory(dir: &Path) -> (Arc<Store>, Directory) {
    let store = Arc::new(Store::open(dir).expect("open the store"));
    let mut limits = DirectoryLimits::default();
    limits.event_retention = 50;
    let directory = Directory::new(store.clone(), limits).expect("limits");
    (store, directory)
}

/// The child: writes until killed; any error ends it with exit code 3.
fn writer(dir: &Path, seed: u64) -> ExitCode {
    let mut rng = fastrand::Rng::with_seed(seed);
    let round: u64 = std::env::var("CONCORD_DIRECTORY_CRASH_ROUND")
        .ok()
        .and_then(|round| round.parse().ok())
        .unwrap_or(0);
    let (_store, directory) = directory(dir);
    let who = Registrant::client("127.0.0.1");
    println!("ready");
    for seq in 0.. {
        let id = format!("urn:crash:{}", rng.u64(..IDS));
        let stamp = (round, seq);
        let result = if rng.u8(..5) == 0 {
            match directory.delete(&id, &who, SystemTime::now()) {
                Ok(()) => {
                    println!("deleted {id} {round} {seq}");
                    Ok(())
                }
                Err(concord_directory::DirectoryError::NotFound { .. }) => Ok(()),
                Err(error) => Err(error),
            }
        } else {
            let body = td(&id, stamp, rng.usize(..16_000));
            directory
                .put(&id, &body, &who, SystemTime::now())
                .map(|_| println!("put {id} {round} {seq}"))
        };
        if let Err(error) = result {
            eprintln!("directory crash writer: {error}");
            return ExitCode::from(3);
        }
    }
    ExitCode::SUCCESS
}

#[cfg(unix)]
mod parent {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    /// The last state reported per id: its stamp, and whether it is registered.
    type Expected = HashMap<String, (Stamp, bool)>;

    fn record(expected: &mut Expected, line: &str) {
        let words: Vec<&str> = line.split(' ').collect();
        let (kind, id, round, seq) = match words.as_slice() {
            [kind, id, round, seq] => (*kind, *id, round, seq),
            _ => panic!("unreadable line from the writer: {line:?}"),
        };
        let stamp = (
            round.parse().expect("round"),
            seq.parse().expect("sequence"),
        );
        expected.insert(id.to_owned(), (stamp, kind == "put"));
    }

    pub(super) fn kill_and_check(seed: u64) {
        let mut rng = fastrand::Rng::with_seed(seed);
        let dir = tempfile::tempdir().expect("temp dir");
        let exe = std::env::current_exe().expect("own executable");
        let mut expected = Expected::new();
        for round in 0..ROUNDS {
            let mut child = Command::new(&exe)
                .env(CHILD_ENV, dir.path())
                .env(CHILD_SEED_ENV, rng.u64(..).to_string())
                .env("CONCORD_DIRECTORY_CRASH_ROUND", round.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("spawn the writer");
            let stdout = child.stdout.take().expect("piped stdout");
            let (lines_tx, lines) = mpsc::channel();
            let reader = std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let line = line.expect("child stdout");
                    if lines_tx.send(line).is_err() {
                        break;
                    }
                }
            });
            match lines.recv_timeout(Duration::from_secs(60)) {
                Ok(line) if line == "ready" => {}
                other => panic!("round {round}: the writer did not start: {other:?}"),
            }
            let delay = Duration::from_millis(rng.u64(50..400));
            std::thread::sleep(delay);
            child.kill().expect("SIGKILL the writer");
            let status = child.wait().expect("reap the writer");
            assert_eq!(
                status.signal(),
                Some(9),
                "round {round}: the writer ended by itself ({status}) instead of being killed"
            );
            reader.join().expect("reader thread");
            let mut commits = 0;
            for line in lines.try_iter() {
                commits += 1;
                record(&mut expected, &line);
            }
            assert!(commits > 0, "round {round}: killed before any commit");
            check(dir.path(), &expected, round);
            println!(
                "round {round}: killed after {} ms and {commits} commits; reopened: ok",
                delay.as_millis()
            );
        }
    }

    fn check(dir: &Path, expected: &Expected, round: u64) {
        let (store, _directory) = directory(dir);
        let integrity = store.check().expect("check the store");
        assert!(integrity.is_empty(), "round {round}: {integrity:?}");
        let latest = store.events_after(u64::MAX, 0).expect("events").latest;
        let page = store.page(0, IDS + 1, 0).expect("list");
        let mut unreported = 0;
        for entry in &page.entries {
            let title = entry.td["title"].as_str().unwrap_or_default();
            let stamp = stamp_of(title)
                .unwrap_or_else(|| panic!("round {round}: `{}` has title {title:?}", entry.id));
            let keys = [CapabilityKey::new(CapabilityKind::Action, action(stamp))];
            assert_eq!(
                store.find(&keys, 0, 2).expect("find"),
                std::slice::from_ref(&entry.id),
                "round {round}: `{}` must be indexed under its own action",
                entry.id
            );
            assert!(
                entry.revision > 0 && entry.revision <= latest,
                "round {round}: `{}` has revision {} (latest event {latest})",
                entry.id,
                entry.revision
            );
            match expected.get(&entry.id) {
                Some((reported, true)) if *reported == stamp => {}
                _ => unreported += 1,
            }
        }
        for (id, (stamp, registered)) in expected {
            let held = page.entries.iter().find(|entry| &entry.id == id);
            if *registered && held.is_none() {
                unreported += 1;
            }
            if let Some(entry) = held {
                let found = stamp_of(entry.td["title"].as_str().unwrap_or_default());
                assert!(
                    found >= Some(*stamp),
                    "round {round}: `{id}` went back from {stamp:?} to {found:?}"
                );
            }
        }
        assert!(
            unreported <= 1,
            "round {round}: {unreported} TDs differ from what was reported (only the one \
             write in flight at the kill may)"
        );
    }
}
