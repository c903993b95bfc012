//! The store survives `kill -9` mid-write.
//!
//! This test binary runs in two modes. Run normally, it is the test: it re-executes
//! itself as a child writer (`CONCORD_STORE_CRASH_CHILD=<dir>`) that opens the store and
//! writes in a tight loop of transactions (large protocol documents, touches, forgets,
//! consensus entries, transcripts appended frame by frame), kills it with SIGKILL at a
//! random moment, reopens the store and checks it, several times over the same file.
//!
//! The child prints a line after each commit returns; everything it reported must be
//! there after the kill (durability), and nothing may be half there (atomicity):
//! `PRAGMA integrity_check` is `ok`, every protocol and consensus document reproduces its
//! hash, every transcript's frames are exactly positions `0..frame_count` in order, and every
//! transcript the child finished has all its frames.
//!
//! Reproduce a run with `CONCORD_STORE_CRASH_SEED=<seed>` (printed at the start).

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use concord_proto::{ProtocolHash, Role};
use concord_store::{
    Direction, FrameContent, FrameRecord, Integrity, NewConsensus, NewProtocol, Outcome, Store,
    TranscriptId, MAX_PEERS_PER_PROTOCOL,
};

const NAME: &str = "kill_9_mid_write";
const CHILD_ENV: &str = "CONCORD_STORE_CRASH_CHILD";
const CHILD_SEED_ENV: &str = "CONCORD_STORE_CRASH_CHILD_SEED";
const SEED_ENV: &str = "CONCORD_STORE_CRASH_SEED";
const ROUNDS: usize = 8;

fn main() -> ExitCode {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        let seed = std::env::var(CHILD_SEED_ENV)
            .ok()
            .and_then(|seed| seed.parse().ok())
            .unwrap_or(0);
        return writer(Path::new(&dir), seed);
    }
    // A minimal libtest face: `--list`, and name filters.
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

/// A line the child prints after a commit returned (or before a delete it starts).
#[derive(Debug)]
enum Report {
    Ready,
    Saved(ProtocolHash),
    Touched(ProtocolHash, u64),
    Forgetting(ProtocolHash),
    Consensus(String, ProtocolHash),
    Transcript(TranscriptId, u64),
}

impl Report {
    fn line(&self) -> String {
        match self {
            Self::Ready => "ready".into(),
            Self::Saved(hash) => format!("saved {hash}"),
            Self::Touched(hash, count) => format!("touched {hash} {count}"),
            Self::Forgetting(hash) => format!("forgetting {hash}"),
            Self::Consensus(uri, hash) => format!("consensus {uri} {hash}"),
            Self::Transcript(id, frames) => format!("transcript {id} {frames}"),
        }
    }

    fn parse(line: &str) -> Option<Self> {
        let words: Vec<&str> = line.split(' ').collect();
        Some(match words.as_slice() {
            ["ready"] => Self::Ready,
            ["saved", hash] => Self::Saved(hash.parse().ok()?),
            ["touched", hash, count] => Self::Touched(hash.parse().ok()?, count.parse().ok()?),
            ["forgetting", hash] => Self::Forgetting(hash.parse().ok()?),
            ["consensus", uri, hash] => Self::Consensus((*uri).to_owned(), hash.parse().ok()?),
            ["transcript", id, frames] => Self::Transcript(id.parse().ok()?, frames.parse().ok()?),
            _ => return None,
        })
    }
}

/// The peer name of a transcript planned with `frames` frames.
fn transcript_peer(frames: u64) -> String {
    format!("crash-writer/frames={frames}")
}

/// The text of frame `seq` (with `pad` bytes of padding).
fn frame_text(seq: u64, pad: usize) -> String {
    format!("{{\"seq\":{seq},\"pad\":\"{}\"}}", "x".repeat(pad))
}

fn random_text(rng: &mut fastrand::Rng, len: usize) -> String {
    const PIECES: &[&str] = &["é", "✓", "\n", "## ", "\"", " — ", "𝄞"];
    let mut text = String::with_capacity(len + 8);
    while text.len() < len {
        if rng.u8(..16) == 0 {
            text.push_str(PIECES[rng.usize(..PIECES.len())]);
        } else {
            text.push(rng.alphanumeric());
        }
    }
    text
}

/// The child: writes until killed. Any store error ends it with exit code 3.
fn writer(dir: &Path, seed: u64) -> ExitCode {
    match write_forever(dir, seed) {
        Ok(never) => match never {},
        Err(error) => {
            eprintln!("crash writer: {error}");
            ExitCode::from(3)
        }
    }
}

fn write_forever(
    dir: &Path,
    seed: u64,
) -> Result<std::convert::Infallible, concord_store::StoreError> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let store = Store::open(dir)?;
    let mut hashes: Vec<ProtocolHash> = store
        .list_protocols()?
        .into_iter()
        .map(|summary| summary.hash)
        .collect();
    let report = |report: Report| println!("{}", report.line());
    report(Report::Ready);
    loop {
        match rng.u8(..20) {
            // A protocol with a document from 100 bytes to 256 KiB, spanning many pages.
            0..=5 => {
                let len = 100 << rng.u32(0..12);
                let mut protocol = NewProtocol::negotiated(
                    random_text(&mut rng, len),
                    format!("peer-{}", rng.u8(..4)),
                )
                .with_handler(Role::Provider, random_text(&mut rng, 2000));
                if rng.bool() {
                    protocol = protocol
                        .with_handler(Role::Requester, random_text(&mut rng, 2000))
                        .with_test_cases(random_text(&mut rng, 1000));
                }
                let hash = store.save_protocol(&protocol)?;
                hashes.push(hash);
                report(Report::Saved(hash));
            }
            6..=8 if !hashes.is_empty() => {
                let hash = hashes[rng.usize(..hashes.len())];
                let count = store.touch_protocol(&hash, &format!("peer-{}", rng.u8(..4)))?;
                report(Report::Touched(hash, count));
            }
            9 if !hashes.is_empty() => {
                let hash = hashes.swap_remove(rng.usize(..hashes.len()));
                report(Report::Forgetting(hash));
                store.forget_protocol(&hash.to_string())?;
            }
            10 => {
                let uri = format!("urn:crash:{}", rng.u8(..8));
                let len = 100 << rng.u32(0..8);
                let entry = NewConsensus::new(uri.clone(), random_text(&mut rng, len))
                    .with_handler(Role::Provider, random_text(&mut rng, 500));
                let hash = store.add_consensus(&entry)?;
                report(Report::Consensus(uri, hash));
            }
            _ => {
                let frames = rng.u64(1..16);
                let id = store.begin_transcript(
                    &transcript_peer(frames),
                    Role::Requester,
                    SystemTime::now(),
                )?;
                for seq in 0..frames {
                    let record = FrameRecord::hello(
                        if seq % 2 == 0 {
                            Direction::Sent
                        } else {
                            Direction::Received
                        },
                        frame_text(seq, rng.usize(..20_000)),
                        SystemTime::now(),
                    );
                    store.append_frame(id, &record)?;
                }
                let outcome = Outcome::Agreed(ProtocolHash::of_text(&id.to_string()));
                store.finish_transcript(id, &outcome, SystemTime::now())?;
                report(Report::Transcript(id, frames));
            }
        }
    }
}

#[cfg(unix)]
mod parent {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    /// What the children reported, over all rounds.
    #[derive(Default)]
    struct Expected {
        protocols: HashSet<ProtocolHash>,
        maybe_forgotten: HashSet<ProtocolHash>,
        touches: HashMap<ProtocolHash, u64>,
        consensus: HashMap<String, ProtocolHash>,
        transcripts: HashMap<TranscriptId, u64>,
    }

    impl Expected {
        fn record(&mut self, report: Report) {
            match report {
                Report::Ready => {}
                Report::Saved(hash) => {
                    self.protocols.insert(hash);
                }
                Report::Touched(hash, count) => {
                    let seen = self.touches.entry(hash).or_default();
                    *seen = (*seen).max(count);
                }
                Report::Forgetting(hash) => {
                    self.protocols.remove(&hash);
                    self.maybe_forgotten.insert(hash);
                }
                Report::Consensus(uri, hash) => {
                    self.consensus.insert(uri, hash);
                }
                Report::Transcript(id, frames) => {
                    self.transcripts.insert(id, frames);
                }
            }
        }
    }

    pub(super) fn kill_and_check(seed: u64) {
        let mut rng = fastrand::Rng::with_seed(seed);
        let dir = tempfile::tempdir().expect("temp dir");
        let exe = std::env::current_exe().expect("own executable");
        let mut expected = Expected::default();
        for round in 0..ROUNDS {
            let mut child = Command::new(&exe)
                .env(CHILD_ENV, dir.path())
                .env(CHILD_SEED_ENV, rng.u64(..).to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("spawn the writer");
            let stdout = child.stdout.take().expect("piped stdout");
            let (lines_tx, lines) = mpsc::channel();
            let reader = std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let line = line.expect("child stdout");
                    let report = Report::parse(&line)
                        .unwrap_or_else(|| panic!("unreadable line from the writer: {line:?}"));
                    if lines_tx.send(report).is_err() {
                        break;
                    }
                }
            });
            match lines.recv_timeout(Duration::from_secs(60)) {
                Ok(Report::Ready) => {}
                other => panic!("round {round}: the writer did not start: {other:?}"),
            }
            let delay = Duration::from_millis(rng.u64(30..400));
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
            for report in lines.try_iter() {
                commits += 1;
                expected.record(report);
            }
            assert!(
                commits > 0,
                "round {round}: killed before any commit; raise the delay"
            );

            let unfinished = check(dir.path(), &expected, round);
            println!(
                "round {round}: killed after {} ms and {commits} commits; reopened: ok \
                 ({} protocols, {} transcripts, {unfinished} cut off mid-negotiation so far)",
                delay.as_millis(),
                expected.protocols.len(),
                expected.transcripts.len(),
            );
        }
        // Still writable after all that.
        let store = Store::open(dir.path()).expect("reopen");
        store
            .save_protocol(&NewProtocol::negotiated("# after the crashes\n", "p"))
            .expect("write after recovery");
        assert!(store.check().expect("check").is_empty());
    }

    /// Reopens the store and checks everything; returns how many transcripts were cut off.
    fn check(dir: &Path, expected: &Expected, round: usize) -> usize {
        let store = Store::open(dir)
            .unwrap_or_else(|error| panic!("round {round}: reopen after kill -9: {error}"));

        // SQLite's own verdict, asked directly.
        let connection = rusqlite::Connection::open(store.path()).expect("raw connection");
        let integrity: String = connection
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))
            .expect("integrity_check");
        assert_eq!(integrity, "ok", "round {round}");
        drop(connection);
        // And the store's: SQLite checks, every document re-hashed, transcript shapes.
        let problems = store.check().expect("check");
        assert!(problems.is_empty(), "round {round}: {problems:#?}");

        // Every protocol row reproduces its hash, and every reported save is there.
        let listed: HashMap<ProtocolHash, _> = store
            .list_protocols()
            .expect("list")
            .into_iter()
            .map(|summary| (summary.hash, summary))
            .collect();
        for (hash, summary) in &listed {
            assert_eq!(
                summary.integrity,
                Integrity::Verified,
                "round {round}: {hash}"
            );
            let stored = store.protocol(hash).expect("read").expect("listed");
            assert!(hash.matches(&stored.document));
            assert!(stored.handlers.get(Role::Provider).is_some());
            // Saved with its peer in one transaction: never a protocol without one.
            assert!(
                (1..=MAX_PEERS_PER_PROTOCOL).contains(&stored.peers.len()),
                "round {round}: {hash} has peers {:?}",
                stored.peers
            );
        }
        // A save can commit and be killed before its report: at most one per kill.
        let unreported = listed
            .keys()
            .filter(|hash| {
                !expected.protocols.contains(hash) && !expected.maybe_forgotten.contains(hash)
            })
            .count();
        assert!(
            unreported <= round + 1,
            "round {round}: {unreported} protocols were never reported saved"
        );
        for hash in &expected.protocols {
            assert!(
                listed.contains_key(hash),
                "round {round}: committed protocol {hash} lost"
            );
        }
        for (hash, count) in &expected.touches {
            if let Some(summary) = listed.get(hash) {
                assert!(
                    summary.use_count >= *count,
                    "round {round}: touches of {hash} lost"
                );
            }
        }
        for (uri, hash) in &expected.consensus {
            let entry = store
                .consensus(uri)
                .expect("read consensus")
                .expect("reported added");
            // A later add (whose report was cut off) may have replaced it, but it is whole.
            assert!(entry.hash.matches(&entry.document));
            if entry.hash != *hash {
                println!("round {round}: {uri} was replaced by an unreported add");
            }
        }

        // Transcripts: every finished one is whole, every cut-off one is a clean prefix.
        let mut unfinished = 0;
        for summary in store
            .list_transcripts(usize::MAX)
            .expect("list transcripts")
        {
            let transcript = store.transcript(summary.id).expect("read").expect("listed");
            let planned: u64 = summary
                .peer
                .strip_prefix("crash-writer/frames=")
                .and_then(|n| n.parse().ok())
                .expect("writer's peer name");
            for (seq, frame) in transcript.frames.iter().enumerate() {
                let FrameContent::Text(text) = &frame.content else {
                    panic!("round {round}: transcript {}: binary frame", summary.id)
                };
                assert!(
                    text.starts_with(&format!("{{\"seq\":{seq},")),
                    "round {round}: transcript {} frame {seq} holds {:?}",
                    summary.id,
                    &text[..text.len().min(20)]
                );
            }
            match &summary.outcome {
                Some(Outcome::Agreed(_)) => {
                    assert_eq!(
                        summary.frame_count, planned,
                        "round {round}: {}",
                        summary.id
                    )
                }
                None => {
                    unfinished += 1;
                    assert!(summary.frame_count <= planned);
                    assert!(!expected.transcripts.contains_key(&summary.id));
                }
                other => panic!("round {round}: unexpected outcome {other:?}"),
            }
            assert_eq!(transcript.frames.len() as u64, summary.frame_count);
        }
        for (id, frames) in &expected.transcripts {
            let transcript = store
                .transcript(*id)
                .expect("read")
                .unwrap_or_else(|| panic!("round {round}: committed transcript {id} lost"));
            assert_eq!(
                transcript.frames.len() as u64,
                *frames,
                "round {round}: transcript {id}"
            );
            assert!(transcript.summary.outcome.is_some());
        }
        unfinished
    }
}
