//! The synchronous store, used from async code: blocking calls on the blocking pool, a
//! per-session transcript recorder that never holds up the session (bounded: a prefix of
//! each long text, a bounded number of frames, busy writes retried), and the store's
//! retention (transcripts pruned by age and count, negotiated protocols by count, after
//! sessions end, at most once per interval).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant, SystemTime};

use concord_proto::{Frame, Role};
use concord_store::{
    CheckpointMode, Direction, FrameRecord, Outcome, RecordingClaim, Store, StoreError,
    TranscriptBounds, TranscriptId, TranscriptRetention,
};
use tokio::sync::{mpsc, watch};

use crate::config::Limits;
use crate::state::Backends;

/// The store behind an `Arc`, with an async door, the node's transcript upkeep, and the
/// backends of protocols and consensus entries (the store itself unless others were given).
#[derive(Debug, Clone)]
pub(crate) struct SharedStore(Arc<Store>, Arc<Upkeep>, Arc<Backends>);

/// How long transcripts are kept, how many negotiated protocols, this node's claim to
/// record transcripts, and when they were last pruned.
#[derive(Debug)]
struct Upkeep {
    max_age: Duration,
    max_count: u64,
    max_protocols: u64,
    /// Where the negotiated protocols kept within `max_protocols` are.
    protocols: Arc<dyn concord_store::ProtocolBook>,
    interval: Duration,
    /// How much of each transcript is kept (also set on the store).
    bounds: TranscriptBounds,
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
    pub(crate) fn new(store: Arc<Store>, backends: Backends, limits: &Limits) -> Self {
        let bounds = TranscriptBounds::new(
            limits.transcript_text_max_bytes,
            limits.transcript_max_frames,
        );
        store.set_transcript_bounds(bounds);
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
            max_protocols: limits.protocol_max_count,
            protocols: Arc::clone(&backends.protocols),
            interval: limits.transcript_prune_interval,
            bounds,
            _claim: claim,
            prunes: Mutex::new(PruneState::default()),
        };
        Self(store, Arc::new(upkeep), Arc::new(backends))
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
        blocking(Arc::clone(&self.0), operation).await
    }

    /// Runs `operation` on the protocols and consensus backends, on the blocking pool.
    pub(crate) async fn run_state<T, F>(&self, operation: F) -> Result<T, StoreFailure>
    where
        F: FnOnce(&Backends) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        blocking(Arc::clone(&self.2), operation).await
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

/// Runs `operation` on `target` on the blocking pool.
async fn blocking<S, T, F>(target: Arc<S>, operation: F) -> Result<T, StoreFailure>
where
    S: Send + Sync + ?Sized + 'static,
    F: FnOnce(&S) -> Result<T, StoreError> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(move || operation(&target))
        .await
        .map_err(|error| StoreFailure::Task(error.to_string()))?
        .map_err(|error| StoreFailure::Store(Arc::new(error)))
}

/// Deletes the transcripts and the negotiated protocols `upkeep`'s limits do not keep (in
/// short transactions), then checkpoints the write-ahead log passively. Failures are
/// logged: retention never stops a node.
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
    let max_protocols = upkeep.max_protocols;
    let protocols = Arc::clone(&upkeep.protocols);
    let result = blocking(store, move |store| {
        let transcripts = store.prune_transcripts_by(&retention)?;
        let protocols = protocols.prune_protocols(max_protocols)?;
        if transcripts > 0 || protocols > 0 {
            store.checkpoint(CheckpointMode::Passive)?;
        }
        Ok((transcripts, protocols))
    })
    .await;
    match result {
        Ok((0, 0)) => {}
        Ok((transcripts, protocols)) => {
            tracing::debug!(transcripts, protocols, "pruned transcripts and protocols");
        }
        Err(error) => tracing::warn!(%error, "cannot prune the transcripts and protocols"),
    }
}

/// How many times a transcript write that found the store busy is tried again (each
/// attempt already waited out the store's busy timeout), and the pause before the first
/// retry (doubled for each next one).
const WRITE_RETRIES: u32 = 3;
const FIRST_RETRY_PAUSE: Duration = Duration::from_millis(100);

/// The most entries a recorder's channel holds, whatever `transcript_max_frames` says.
const MAX_CHANNEL: u64 = 1 << 16;

enum Entry {
    Frame(FrameRecord),
    /// Frames the session had that the recorder did not pass on.
    Unrecorded(u64),
    Finish(Outcome),
}

/// Writes `entries` in order; stops at the first failure, and returns the entries not
/// written (the failed one first) with the error.
fn write_entries(
    store: &Store,
    id: TranscriptId,
    mut entries: VecDeque<Entry>,
) -> (VecDeque<Entry>, Option<StoreError>) {
    while let Some(entry) = entries.pop_front() {
        let result = match &entry {
            Entry::Frame(frame) => store.append_frame(id, frame).map(drop),
            Entry::Unrecorded(count) => store.count_unrecorded_frames(id, *count),
            Entry::Finish(outcome) => store.finish_transcript(id, outcome, SystemTime::now()),
        };
        if let Err(error) = result {
            entries.push_front(entry);
            return (entries, Some(error));
        }
    }
    (entries, None)
}

/// Writes `entries` to transcript `id`, trying a write that found the store busy again
/// [`WRITE_RETRIES`] times with growing pauses; gives up (logged) on any other failure or
/// after the last retry. An outcome that could not be written leaves the transcript
/// open, and the next node to claim the store closes it as interrupted.
async fn write_with_retries(store: &SharedStore, id: TranscriptId, entries: VecDeque<Entry>) {
    let mut pending = entries;
    let mut pause = FIRST_RETRY_PAUSE;
    let mut retries = 0;
    loop {
        let result = store
            .run(move |store| Ok(write_entries(store, id, pending)))
            .await;
        let error = match result {
            Ok((_, None)) => return,
            Ok((rest, Some(error))) if error.is_busy() && retries < WRITE_RETRIES => {
                tracing::debug!(%error, transcript = id.get(), retries, "the store is busy; writing the transcript again");
                pending = rest;
                retries += 1;
                tokio::time::sleep(pause).await;
                pause *= 2;
                continue;
            }
            Ok((_, Some(error))) => error.to_string(),
            Err(error) => error.to_string(),
        };
        tracing::warn!(%error, transcript = id.get(), "cannot write the transcript");
        return;
    }
}

/// Appends a session's frames to its transcript in the background, in order, within the
/// node's transcript bounds: each text cut to `transcript_text_max_bytes` before it is
/// queued, at most `transcript_max_frames` frames queued (the channel holds that many and
/// the outcome, so it never blocks the session), the others counted. The transcript itself
/// is begun by the same background task, before the first frame is written: no store write
/// stands between a hello and its answer.
#[derive(Debug)]
pub(crate) struct Recorder {
    /// Whether the transcript is begun yet, and its id.
    begun: watch::Receiver<Begun>,
    /// Boxed entries: the channel's first block (32 slots) is allocated for the whole
    /// session, and 32 pointers cost far less than 32 entries in an idle session.
    entries: Option<mpsc::Sender<Box<Entry>>>,
    done: Option<tokio::task::JoinHandle<()>>,
    bounds: TranscriptBounds,
    /// Frames queued so far.
    queued: AtomicU64,
    /// Frames not queued: beyond the bound, or the channel was full.
    dropped: AtomicU64,
}

/// Where the beginning of a transcript stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Begun {
    /// Its row is being written.
    Pending,
    /// Written under this id.
    Started(TranscriptId),
    /// The store refused it (logged): the session goes on without a transcript.
    Failed,
}

impl Recorder {
    /// Starts a transcript for a session with `peer`, protected as `channel` says (the
    /// Noise channel or plain; who proved which DID), without waiting for the store: its
    /// row is written by the recorder's task, before the frames queued meanwhile. A store
    /// failure leaves the session without a transcript (logged), never without a session.
    /// Needs a Tokio runtime.
    pub(crate) fn start(store: &SharedStore, peer: &str, role: Role, channel: &str) -> Self {
        let peer = peer.to_owned();
        let channel = channel.to_owned();
        let bounds = store.1.bounds;
        // Room for every frame queued, the count of the others, and the outcome.
        let capacity = bounds.max_frames.min(MAX_CHANNEL) + 2;
        let (sender, mut receiver) =
            mpsc::channel::<Box<Entry>>(usize::try_from(capacity).unwrap_or(usize::MAX));
        let (begun_sender, begun) = watch::channel(Begun::Pending);
        let store = store.clone();
        let done = tokio::spawn(async move {
            // The frames queued by now (a session's hellos, queued as it starts) are written
            // in the same trip to the store as the transcript's row.
            let mut queued = VecDeque::new();
            while let Ok(next) = receiver.try_recv() {
                queued.push_back(*next);
            }
            let started = store
                .run(move |store| {
                    let id = store.begin_transcript(&peer, role, SystemTime::now())?;
                    store.set_transcript_channel(id, &channel)?;
                    Ok((id, write_entries(store, id, queued)))
                })
                .await;
            let id = match started {
                Ok((id, (rest, error))) => {
                    begun_sender.send_replace(Begun::Started(id));
                    if let Some(error) = error {
                        tracing::debug!(%error, transcript = id.get(), "writing the first frames again");
                        write_with_retries(&store, id, rest).await;
                    }
                    id
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot start a transcript; the session goes on without one");
                    begun_sender.send_replace(Begun::Failed);
                    return;
                }
            };
            while let Some(first) = receiver.recv().await {
                let mut batch = VecDeque::from([*first]);
                while let Ok(next) = receiver.try_recv() {
                    batch.push_back(*next);
                }
                write_with_retries(&store, id, batch).await;
            }
            // Everything is written (the outcome too, unless the recorder was dropped).
            store.session_ended();
        });
        Self {
            begun,
            entries: Some(sender),
            done: Some(done),
            bounds,
            queued: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Waits until the transcript is begun (or could not be): its id, if it was.
    pub(crate) async fn begun(&mut self) -> Option<TranscriptId> {
        match self
            .begun
            .wait_for(|begun| *begun != Begun::Pending)
            .await
            .map(|begun| *begun)
        {
            Ok(Begun::Started(id)) => Some(id),
            // The task ended before saying (its runtime is shutting down): none.
            Ok(Begun::Pending | Begun::Failed) | Err(_) => None,
        }
    }

    /// The transcript's id, if it is begun by now (see [`Recorder::begun`]).
    pub(crate) fn id(&self) -> Option<TranscriptId> {
        match *self.begun.borrow() {
            Begun::Started(id) => Some(id),
            Begun::Pending | Begun::Failed => None,
        }
    }

    /// Records a hello sent or received (its first `transcript_text_max_bytes` bytes,
    /// with its size and SHA-256 when longer).
    pub(crate) fn hello(&self, direction: Direction, text: &str) {
        if !self.take_slot() {
            return;
        }
        let limit = self.bounds.text_prefix_bytes;
        self.push_frame(FrameRecord::hello_within(
            direction,
            text,
            limit,
            SystemTime::now(),
        ));
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
            if !self.take_slot() {
                return;
            }
            let limit = self.bounds.text_prefix_bytes;
            self.push_frame(FrameRecord::from_frame_within(
                direction,
                &frame,
                limit,
                SystemTime::now(),
            ));
        }
    }

    /// Records the outcome (and how many frames were not recorded) and waits until
    /// everything is written.
    pub(crate) async fn finish(mut self, outcome: Outcome) {
        if let Some(entries) = self.entries.take() {
            let dropped = self.dropped.load(Ordering::Relaxed);
            // The channel has room for these two: frames beyond the bound never enter it.
            if dropped > 0 {
                let _ = entries.send(Box::new(Entry::Unrecorded(dropped))).await;
            }
            let _ = entries.send(Box::new(Entry::Finish(outcome))).await;
        }
        if let Some(done) = self.done.take() {
            let _ = done.await;
        }
    }

    /// Whether one more frame may be queued: counts it as queued, or as dropped beyond
    /// `transcript_max_frames`.
    fn take_slot(&self) -> bool {
        if self.entries.is_none() {
            return false;
        }
        let limit = self.bounds.max_frames.min(MAX_CHANNEL);
        if self.queued.fetch_add(1, Ordering::Relaxed) < limit {
            true
        } else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            false
        }
    }

    /// Queues a frame without waiting; a full channel drops it (counted).
    fn push_frame(&self, frame: FrameRecord) {
        if let Some(entries) = &self.entries {
            if entries.try_send(Box::new(Entry::Frame(frame))).is_err() {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared_store(dir: &std::path::Path) -> SharedStore {
        let store = Arc::new(Store::open(dir).expect("the store opens"));
        let backends = Backends {
            protocols: Arc::clone(&store) as Arc<dyn concord_store::ProtocolBook>,
            consensus: Arc::clone(&store) as Arc<dyn concord_store::ConsensusRegistry>,
        };
        SharedStore::new(store, backends, &Limits::default())
    }

    #[tokio::test]
    async fn a_transcript_begun_in_the_background_keeps_the_frames_queued_before_its_row() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let store = shared_store(dir.path());
        // Frames are queued at once, before the store has written the transcript's row.
        let mut recorder = Recorder::start(&store, "ws://peer", Role::Provider, "plain");
        recorder.hello(Direction::Received, r#"{"hello":"source"}"#);
        recorder.hello(Direction::Sent, r#"{"hello":"destination"}"#);
        let id = recorder.begun().await.expect("the transcript is begun");
        assert_eq!(recorder.id(), Some(id), "the id is known once begun");
        recorder.finish(Outcome::Failed("over".to_owned())).await;

        let transcript = store
            .get()
            .transcript(id)
            .expect("the store reads")
            .expect("the transcript exists");
        assert_eq!(transcript.summary.channel.as_deref(), Some("plain"));
        assert_eq!(transcript.summary.peer, "ws://peer");
        assert_eq!(
            transcript.summary.outcome,
            Some(Outcome::Failed("over".to_owned()))
        );
        let directions: Vec<_> = transcript.frames.iter().map(|f| f.direction).collect();
        assert_eq!(directions, [Direction::Received, Direction::Sent]);
    }
}
