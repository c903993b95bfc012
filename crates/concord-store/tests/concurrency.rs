//! One store shared by many threads, and two stores (two connections, as two processes
//! would have) on the same file.

use std::sync::Arc;
use std::time::SystemTime;

use concord_proto::{ProtocolHash, Role};
use concord_store::{Direction, FrameRecord, NewProtocol, Outcome, Store};

const THREADS: usize = 8;
const ROUNDS: usize = 50;

#[test]
fn the_store_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Store>();
    assert_send_sync::<concord_store::StoreError>();
}

/// Each worker saves its own protocols, touches a shared one and writes its own transcript.
fn work(store: &Store, worker: usize, shared: ProtocolHash) {
    let transcript = store
        .begin_transcript(&format!("peer-{worker}"), Role::Provider, SystemTime::now())
        .unwrap();
    for round in 0..ROUNDS {
        let hash = store
            .save_protocol(
                &NewProtocol::negotiated(format!("# worker {worker} round {round}\n"), "peer")
                    .with_handler(Role::Provider, "js"),
            )
            .unwrap();
        assert!(store.can_resume(&hash, Role::Provider).unwrap());
        store
            .touch_protocol(&shared, &format!("peer-{worker}"))
            .unwrap();
        let seq = store
            .append_frame(
                transcript,
                &FrameRecord::hello(
                    Direction::Sent,
                    format!("{{\"round\":{round}}}"),
                    SystemTime::now(),
                ),
            )
            .unwrap();
        assert_eq!(seq, Some(round as u64));
        if round % 10 == 0 {
            store.list_protocols().unwrap();
        }
    }
    store
        .finish_transcript(transcript, &Outcome::Agreed(shared), SystemTime::now())
        .unwrap();
}

fn assert_all_work_is_there(store: &Store, shared: ProtocolHash) {
    assert_eq!(store.list_protocols().unwrap().len(), THREADS * ROUNDS + 1);
    let stored = store.protocol(&shared).unwrap().unwrap();
    assert_eq!(stored.use_count, (THREADS * ROUNDS) as u64);
    // Every worker's peer was added, none replaced another.
    let mut peers = stored.peers;
    peers.sort();
    let mut expected: Vec<String> = (0..THREADS)
        .map(|worker| format!("peer-{worker}"))
        .collect();
    expected.insert(0, "peer".to_owned());
    assert_eq!(peers, expected);
    let transcripts = store.list_transcripts(usize::MAX).unwrap();
    assert_eq!(transcripts.len(), THREADS);
    for summary in transcripts {
        let transcript = store.transcript(summary.id).unwrap().unwrap();
        assert_eq!(transcript.frames.len(), ROUNDS);
        assert_eq!(transcript.summary.outcome, Some(Outcome::Agreed(shared)));
    }
    assert!(store.check().unwrap().is_empty());
}

#[test]
fn threads_sharing_one_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    let shared = store
        .save_protocol(&NewProtocol::negotiated("# shared\n", "peer"))
        .unwrap();
    let handles: Vec<_> = (0..THREADS)
        .map(|worker| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || work(&store, worker, shared))
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_all_work_is_there(&store, shared);
}

#[test]
fn separate_stores_on_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let shared = Store::open(dir.path())
        .unwrap()
        .save_protocol(&NewProtocol::negotiated("# shared\n", "peer"))
        .unwrap();
    let handles: Vec<_> = (0..THREADS)
        .map(|worker| {
            let path = dir.path().to_path_buf();
            std::thread::spawn(move || work(&Store::open(path).unwrap(), worker, shared))
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_all_work_is_there(&Store::open(dir.path()).unwrap(), shared);
}
