//! The synchronous store, used from async code: blocking calls on the blocking pool, a
//! per-session transcript recorder that never holds up the session, and the transcripts'
//! retention (pruned by age and count after sessions end, at most once per interval).

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant, SystemTime};

use concord_proto::{Frame, Role};
use concord_store::{
    CheckpointMode, Direction, FrameRecord, Outcome, RecordingClaim, Store, StoreError,
    TranscriptId, TranscriptRetention,
};
use tokio::sync::mpsc;

use crate::config::Limits;

/// The store behind an `Arc`, with an async door, and the node's transcript upkeep.
#[derive(Debug, Clone)]
pub(crate) struct SharedStore(Arc<Store>, Arc<Upkeep>);

/// How long transcripts are kept, this node's claim to record them, and when they were
/// last pruned.
#[derive(Debug)]
struct Upkeep {
    max_age: Duration,
    max_count: u64,
    interval: Duration,
    /// Held while the node lives, so that no other node on the store closes our sessions'
    /// transcripts as interrupted. `None` when the lock file could not be used (logged).
    _claim: Option<RecordingClaim>,
    prunes: Mutex<PruneState>,
}

#[derive(Debug, Default)]
struct PruneState {
    /// When the last prune started.
    last: Option<Instant>,
    /// A prune is waiting for its turn: sessions ending meanwhile need no other.
    scheduled: bool,
}

/// A store call failed, or its blocking task died.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum StoreFailure {
    #[error("{0}")]
    Store(Arc<StoreError>),
    #[error("the store task failed: {0}")]
    Task(String),
}

impl SharedStore {
    /// Wraps `store` for a node with these limits, and claims it for recording
    /// transcripts: when no other node records in it, the transcripts a dead process left
    /// open are closed as [`Outcome::Interrupted`] (a blocking call, like opening the
    /// store).
    pub(crate) fn new(store: Arc<Store>, limits: &Limits) -> Self {
        let claim = match store.claim_recording() {
            Ok(claim) => {
                if claim.closed_interrupted() > 0 {
                    tracing::info!(
                        closed = claim.closed_interrupted(),
                        "closed the transcripts of sessions a previous process left unfinished"
                    );
                }
                Some(claim)
            }
            Err(error) => {
                tracing::warn!(%error, "cannot claim the store for transcripts; unfinished ones stay open");
                None
            }
        };
        let upkeep = Upkeep {
            max_age: limits.transcript_max_age,
            max_count: limits.transcript_max_count,
            interval: limits.transcript_prune_interval,
            _claim: claim,
            prunes: Mutex::new(PruneState::default()),
        };
        Self(store, Arc::new(upkeep))
    }

    pub(crate) fn get(&self) -> &Arc<Store> {
        &self.0
    }

    /// Runs `operation` on the blocking pool.
    pub(crate) async fn run<T, F>(&self, operation: F) -> Result<T, StoreFailure>
    where
        F: FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        let store = Arc::clone(&self.0);
        tokio::task::spawn_blocking(move || operation(&store))
            .await
            .map_err(|error| StoreFailure::Task(error.to_string()))?
            .map_err(|error| StoreFailure::Store(Arc::new(error)))
    }

    /// A session ended: prunes the transcripts now, or once the prune interval has passed
    /// since the last prune (one prune then covers every session ended meanwhile). Needs
    /// a Tokio runtime; the prune runs on the blocking pool, and is skipped if the node
    /// is gone by then.
    pub(crate) fn session_ended(&self) {
        let delay = {
            let mut state = self.1.prunes.lock().unwrap_or_else(PoisonError::into_inner);
            if state.scheduled {
                return;
            }
            state.scheduled = true;
            state.last.map_or(Duration::ZERO, |last| {
                self.1.interval.saturating_sub(last.elapsed())
            })
        };
        let (store, upkeep) = (Arc::downgrade(&self.0), Arc::downgrade(&self.1));
        tokio::spawn(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            prune(&store, &upkeep).await;
        });
    }
}

/// Deletes the transcripts `upkeep`'s limits do not keep, then checkpoints the write-ahead
/// log passively. Failures are logged: retention never stops a node.
async fn prune(store: &Weak<Store>, upkeep: &Weak<Upkeep>) {
    let (Some(store), Some(upkeep)) = (store.upgrade(), upkeep.upgrade()) else {
        return;
    };
    {
        let mut state = upkeep.prunes.lock().unwrap_or_else(PoisonError::into_inner);
        state.scheduled = false;
        state.last = Some(Instant::now());
    }
    let retention = TranscriptRetention::all()
        .older_than(upkeep.max_age, SystemTime::now())
        .keep_newest(upkeep.max_count);
    let shared = SharedStore(store, upkeep);
    let result = shared
        .run(move |store| {
            let deleted = store.prune_transcripts_by(&retention)?;
            if deleted > 0 {
                store.checkpoint(CheckpointMode::Passive)?;
            }
            Ok(deleted)
        })
        .await;
    match result {
        Ok(0) => {}
        Ok(deleted) => tracing::debug!(deleted, "pruned transcripts"),
        Err(error) => tracing::warn!(%error, "cannot prune the transcripts"),
    }
}

enum Entry {
    Frame(FrameRecord),
    Finish(Outcome),
}

/// Appends a session's frames to its transcript in the background, in order.
#[derive(Debug)]
pub(crate) struct Recorder {
    id: Option<TranscriptId>,
    entries: Option<mpsc::UnboundedSender<Entry>>,
    done: Option<tokio::task::JoinHandle<()>>,
}

impl Recorder {
    /// Starts a transcript for a session with `peer`. A store failure leaves the session
    /// without a transcript (logged), never without a session.
    pub(crate) async fn start(store: &SharedStore, peer: &str, role: Role) -> Self {
        let peer_owned = peer.to_owned();
        let id = match store
            .run(move |store| store.begin_transcript(&peer_owned, role, SystemTime::now()))
            .await
        {
            Ok(id) => id,
            Err(error) => {
                tracing::warn!(%error, "cannot start a transcript; the session goes on without one");
                return Self {
                    id: None,
                    entries: None,
                    done: None,
                };
            }
        };
        let (sender, mut receiver) = mpsc::unbounded_channel::<Entry>();
        let store = store.clone();
        let done = tokio::spawn(async move {
            while let Some(first) = receiver.recv().await {
                let mut batch = vec![first];
                while let Ok(next) = receiver.try_recv() {
                    batch.push(next);
                }
                let result = store
                    .run(move |store| {
                        for entry in batch {
                            match entry {
                                Entry::Frame(frame) => {
                                    store.append_frame(id, &frame)?;
                                }
                                Entry::Finish(outcome) => {
                                    store.finish_transcript(id, &outcome, SystemTime::now())?;
                                }
                            }
                        }
                        Ok(())
                    })
                    .await;
                if let Err(error) = result {
                    tracing::warn!(%error, transcript = id.get(), "cannot write the transcript");
                }
            }
            // Everything is written (the outcome too, unless the recorder was dropped).
            store.session_ended();
        });
        Self {
            id: Some(id),
            entries: Some(sender),
            done: Some(done),
        }
    }

    /// The transcript's id, if it could be started.
    pub(crate) fn id(&self) -> Option<TranscriptId> {
        self.id
    }

    /// Records a hello sent or received.
    pub(crate) fn hello(&self, direction: Direction, text: &str) {
        self.push(Entry::Frame(FrameRecord::hello(
            direction,
            text,
            SystemTime::now(),
        )));
    }

    /// Records a frame (header byte first). Application frames are not recorded: they are
    /// data, not negotiation, and the store keeps only their length anyway.
    pub(crate) fn frame(&self, direction: Direction, bytes: &[u8]) {
        let Some(first) = bytes.first() else { return };
        if concord_proto::ProtocolType::from_header(*first)
            == concord_proto::ProtocolType::Application
        {
            return;
        }
        if let Ok(frame) = Frame::decode(bytes, usize::MAX) {
            self.push(Entry::Frame(FrameRecord::from_frame(
                direction,
                &frame,
                SystemTime::now(),
            )));
        }
    }

    /// Records the outcome and waits until everything is written.
    pub(crate) async fn finish(mut self, outcome: Outcome) {
        self.push(Entry::Finish(outcome));
        self.entries = None;
        if let Some(done) = self.done.take() {
            let _ = done.await;
        }
    }

    fn push(&self, entry: Entry) {
        if let Some(entries) = &self.entries {
            let _ = entries.send(entry);
        }
    }
}
