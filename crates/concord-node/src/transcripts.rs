//! Transcripts written in the background: every session queues its hellos, frames and
//! outcome to one node-wide writer task without waiting, and the task writes what all the
//! sessions queued meanwhile in one trip to the blocking pool. An idle session holds no
//! task and no channel of its own, and a node opening many sessions at once makes a few
//! store trips, not one per session and frame.
//!
//! Bounded as before per session: each text cut to `transcript_text_max_bytes` before it
//! is queued, at most `transcript_max_frames` frames queued, the others counted. A busy
//! store is tried again with growing pauses; any other failure is logged and never ends a
//! session.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use concord_proto::{Frame, Role};
use concord_store::{
    Direction, FrameRecord, Outcome, Store, StoreError, TranscriptBounds, TranscriptId,
};
use tokio::sync::{mpsc, oneshot, Notify};

use crate::storage::SharedStore;

/// How many times a transcript write that found the store busy is tried again (each
/// attempt already waited out the store's busy timeout), and the pause before the first
/// retry (doubled for each next one).
const WRITE_RETRIES: u32 = 3;
const FIRST_RETRY_PAUSE: Duration = Duration::from_millis(100);

/// The most entries one trip to the store writes; the rest wait for the next trip.
const WRITE_BATCH: usize = 512;

/// The most entries a session queues, whatever `transcript_max_frames` says.
const MAX_QUEUED: u64 = 1 << 16;

/// The node's transcript writer: where [`Recorder`]s queue their entries. Its task is
/// started with the first transcript (it needs a Tokio runtime), and started again if
/// the runtime it ran on is gone; it ends once the node and every recorder are gone.
#[derive(Debug)]
pub(crate) struct Transcripts {
    store: SharedStore,
    jobs: Mutex<Option<mpsc::UnboundedSender<Job>>>,
}

impl Transcripts {
    /// The writer of the transcripts in `store`.
    pub(crate) fn new(store: SharedStore) -> Self {
        Self {
            store,
            jobs: Mutex::new(None),
        }
    }

    /// Where entries go; starts the writer's task if none runs. Needs a Tokio runtime.
    fn sender(&self) -> mpsc::UnboundedSender<Job> {
        let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        match &*jobs {
            Some(sender) if !sender.is_closed() => sender.clone(),
            _ => {
                let (sender, receiver) = mpsc::unbounded_channel();
                tokio::spawn(write_transcripts(self.store.clone(), receiver));
                *jobs = Some(sender.clone());
                sender
            }
        }
    }
}

/// One entry of one transcript, in the writer's queue.
struct Job {
    transcript: Arc<Transcript>,
    entry: Entry,
}

enum Entry {
    /// The transcript's row: always a transcript's first entry.
    Begin {
        peer: String,
        role: Role,
        channel: String,
    },
    Frame(FrameRecord),
    /// Frames the session had that the recorder did not pass on.
    Unrecorded(u64),
    /// The outcome; `written` hears once it is written (or given up).
    Finish {
        outcome: Outcome,
        written: oneshot::Sender<()>,
    },
}

/// One transcript, as its recorder and the writer share it.
#[derive(Debug, Default)]
struct Transcript {
    state: Mutex<State>,
    /// Told when `state.begun` leaves `Pending`.
    begun: Notify,
}

#[derive(Debug, Default)]
struct State {
    begun: Begun,
    /// A write other than a busy one failed (logged): its later entries are not written.
    abandoned: bool,
}

impl Transcript {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set_begun(&self, begun: Begun) {
        self.state().begun = begun;
        self.begun.notify_waiters();
    }

    /// No more of it is written: a recorder still waiting for its id hears none.
    fn abandon(&self) {
        let pending = {
            let mut state = self.state();
            state.abandoned = true;
            state.begun == Begun::Pending
        };
        if pending {
            self.set_begun(Begun::Failed);
        }
    }
}

/// Where the beginning of a transcript stands.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Begun {
    /// Its row is not written yet.
    #[default]
    Pending,
    /// Written under this id.
    Started(TranscriptId),
    /// The store refused it (logged): the session goes on without a transcript.
    Failed,
}

/// The writer's task: takes what the sessions queued, up to [`WRITE_BATCH`] entries a
/// trip, until every sender is gone.
async fn write_transcripts(store: SharedStore, mut jobs: mpsc::UnboundedReceiver<Job>) {
    let mut batch = Vec::with_capacity(WRITE_BATCH);
    while jobs.recv_many(&mut batch, WRITE_BATCH).await > 0 {
        let mut pending: VecDeque<Job> = batch.drain(..).collect();
        let mut pause = FIRST_RETRY_PAUSE;
        let mut retries = 0;
        let mut finished = Vec::new();
        loop {
            // Kept to tell them if the trip's jobs are lost with its task.
            let transcripts: Vec<Arc<Transcript>> = pending
                .iter()
                .map(|job| Arc::clone(&job.transcript))
                .collect();
            let before = pending.len();
            let result = store.run(move |store| Ok(write_jobs(store, pending))).await;
            let (rest, error, done) = match result {
                Ok(written) => written,
                Err(error) => {
                    // The blocking task died with the jobs (logged): their transcripts
                    // are abandoned, a recorder waiting for its id hears none, and a
                    // finish waiting for its outcome hears that it is gone.
                    tracing::warn!(%error, "cannot write transcripts");
                    for transcript in transcripts {
                        transcript.abandon();
                    }
                    break;
                }
            };
            finished.extend(done);
            let Some(error) = error else { break };
            // The budget of busy retries is for a store that writes nothing.
            if rest.len() < before {
                retries = 0;
                pause = FIRST_RETRY_PAUSE;
            }
            if retries < WRITE_RETRIES {
                tracing::debug!(%error, retries, "the store is busy; writing the transcripts again");
                pending = rest;
                retries += 1;
                tokio::time::sleep(pause).await;
                pause *= 2;
                continue;
            }
            tracing::warn!(%error, "cannot write the transcripts: the store stays busy");
            for job in rest {
                give_up(job, &mut finished);
            }
            break;
        }
        for written in finished {
            // The session may be gone; it waits for nothing then.
            let _ = written.send(());
            store.session_ended();
        }
    }
}

/// Writes `jobs` in order. A busy store stops the trip: the jobs not written come back
/// (the one that found it busy first) with the error, to be tried again. Any other
/// failure abandons its transcript (logged) and the others go on. Also gives back the
/// finished transcripts' notices.
fn write_jobs(
    store: &Store,
    mut jobs: VecDeque<Job>,
) -> (VecDeque<Job>, Option<StoreError>, Vec<oneshot::Sender<()>>) {
    let mut finished = Vec::new();
    while let Some(job) = jobs.pop_front() {
        match write_job(store, &job) {
            Err(error) if error.is_busy() => {
                jobs.push_front(job);
                return (jobs, Some(error), finished);
            }
            Err(error) => {
                tracing::warn!(%error, "cannot write a transcript; the session goes on without the rest of it");
                job.transcript.abandon();
            }
            Ok(()) => {}
        }
        if let Entry::Finish { written, .. } = job.entry {
            finished.push(written);
        }
    }
    (jobs, None, finished)
}

/// Writes one entry, unless its transcript was abandoned.
fn write_job(store: &Store, job: &Job) -> Result<(), StoreError> {
    let (begun, abandoned) = {
        let state = job.transcript.state();
        (state.begun, state.abandoned)
    };
    if abandoned {
        return Ok(());
    }
    if let Entry::Begin {
        peer,
        role,
        channel,
    } = &job.entry
    {
        // Begun already when only its channel found the store busy.
        let id = match begun {
            Begun::Started(id) => id,
            Begun::Pending | Begun::Failed => {
                let id = store.begin_transcript(peer, *role, SystemTime::now())?;
                job.transcript.set_begun(Begun::Started(id));
                id
            }
        };
        return store.set_transcript_channel(id, channel);
    }
    // Never otherwise: a transcript's first entry begins it, or abandons it.
    let Begun::Started(id) = begun else {
        return Ok(());
    };
    match &job.entry {
        Entry::Begin { .. } => Ok(()),
        Entry::Frame(frame) => store.append_frame(id, frame).map(drop),
        Entry::Unrecorded(count) => store.count_unrecorded_frames(id, *count),
        Entry::Finish { outcome, .. } => store.finish_transcript(id, outcome, SystemTime::now()),
    }
}

/// A job that is not written: its transcript is abandoned (no later entry makes a hole
/// in it), its waiters hear so, and a finish is told.
fn give_up(job: Job, finished: &mut Vec<oneshot::Sender<()>>) {
    job.transcript.abandon();
    if let Entry::Finish { written, .. } = job.entry {
        finished.push(written);
    }
}

/// Appends a session's frames to its transcript in the background, in order, within the
/// node's transcript bounds: each text cut to `transcript_text_max_bytes` before it is
/// queued, at most `transcript_max_frames` frames queued, the others counted. The
/// transcript itself is begun by the node's writer, before the first frame is written: no
/// store write stands between a hello and its answer.
#[derive(Debug)]
pub(crate) struct Recorder {
    transcript: Arc<Transcript>,
    jobs: Option<mpsc::UnboundedSender<Job>>,
    bounds: TranscriptBounds,
    /// Frames queued so far.
    queued: AtomicU64,
    /// Frames not queued: beyond the bound.
    dropped: AtomicU64,
}

impl Recorder {
    /// Starts a transcript for a session with `peer`, protected as `channel` says (the
    /// Noise channel or plain; who proved which DID), without waiting for the store: its
    /// row is written by the node's writer, before the frames queued after it. A store
    /// failure leaves the session without a transcript (logged), never without a session.
    /// Needs a Tokio runtime.
    pub(crate) fn start(transcripts: &Transcripts, peer: &str, role: Role, channel: &str) -> Self {
        let recorder = Self {
            transcript: Arc::default(),
            jobs: Some(transcripts.sender()),
            bounds: transcripts.store.transcript_bounds(),
            queued: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        };
        recorder.push(Entry::Begin {
            peer: peer.to_owned(),
            role,
            channel: channel.to_owned(),
        });
        recorder
    }

    /// Waits until the transcript is begun (or could not be): its id, if it was.
    pub(crate) async fn begun(&mut self) -> Option<TranscriptId> {
        loop {
            let told = self.transcript.begun.notified();
            tokio::pin!(told);
            // Registered before the state is read: a change in between is not missed.
            told.as_mut().enable();
            match self.transcript.state().begun {
                Begun::Started(id) => return Some(id),
                Begun::Failed => return None,
                Begun::Pending => {}
            }
            // The writer is gone (its runtime shut down), now or while we wait: none.
            let Some(jobs) = &self.jobs else {
                return None;
            };
            tokio::select! {
                () = told => {}
                () = jobs.closed() => return self.id(),
            }
        }
    }

    /// The transcript's id, if it is begun by now (see [`Recorder::begun`]).
    pub(crate) fn id(&self) -> Option<TranscriptId> {
        match self.transcript.state().begun {
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
        self.push(Entry::Frame(FrameRecord::hello_within(
            direction,
            text,
            limit,
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
            if !self.take_slot() {
                return;
            }
            let limit = self.bounds.text_prefix_bytes;
            self.push(Entry::Frame(FrameRecord::from_frame_within(
                direction,
                &frame,
                limit,
                SystemTime::now(),
            )));
        }
    }

    /// Records the outcome (and how many frames were not recorded) and waits until
    /// everything is written.
    pub(crate) async fn finish(mut self, outcome: Outcome) {
        let dropped = self.dropped.load(Ordering::Relaxed);
        if dropped > 0 {
            self.push(Entry::Unrecorded(dropped));
        }
        let (written, heard) = oneshot::channel();
        self.push(Entry::Finish { outcome, written });
        self.jobs = None;
        // An error: the writer is gone with its runtime.
        let _ = heard.await;
    }

    /// Whether one more frame may be queued: counts it as queued, or as dropped beyond
    /// `transcript_max_frames`.
    fn take_slot(&self) -> bool {
        if self.jobs.is_none() {
            return false;
        }
        let limit = self.bounds.max_frames.min(MAX_QUEUED);
        if self.queued.fetch_add(1, Ordering::Relaxed) < limit {
            true
        } else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            false
        }
    }

    /// Queues an entry without waiting.
    fn push(&self, entry: Entry) {
        if let Some(jobs) = &self.jobs {
            let job = Job {
                transcript: Arc::clone(&self.transcript),
                entry,
            };
            // An error: the writer is gone with its runtime, and the session with it.
            let _ = jobs.send(job);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Backends;

    fn transcripts(dir: &std::path::Path) -> Transcripts {
        let store = Arc::new(Store::open(dir).expect("the store opens"));
        let backends = Backends {
            protocols: Arc::clone(&store) as Arc<dyn concord_store::ProtocolBook>,
            consensus: Arc::clone(&store) as Arc<dyn concord_store::ConsensusRegistry>,
        };
        Transcripts::new(SharedStore::new(
            store,
            backends,
            &crate::config::Limits::default(),
        ))
    }

    /// Transcript `id` as the store holds it.
    fn written(transcripts: &Transcripts, id: TranscriptId) -> concord_store::Transcript {
        transcripts
            .store
            .get()
            .transcript(id)
            .expect("the store reads")
            .expect("the transcript exists")
    }

    #[tokio::test]
    async fn a_transcript_begun_in_the_background_keeps_the_frames_queued_before_its_row() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let transcripts = transcripts(dir.path());
        // Frames are queued at once, before the store has written the transcript's row.
        let mut recorder = Recorder::start(&transcripts, "ws://peer", Role::Provider, "plain");
        recorder.hello(Direction::Received, r#"{"hello":"source"}"#);
        recorder.hello(Direction::Sent, r#"{"hello":"destination"}"#);
        let id = recorder.begun().await.expect("the transcript is begun");
        assert_eq!(recorder.id(), Some(id), "the id is known once begun");
        recorder.finish(Outcome::Failed("over".to_owned())).await;

        let transcript = written(&transcripts, id);
        assert_eq!(transcript.summary.channel.as_deref(), Some("plain"));
        assert_eq!(transcript.summary.peer, "ws://peer");
        assert_eq!(
            transcript.summary.outcome,
            Some(Outcome::Failed("over".to_owned()))
        );
        let directions: Vec<_> = transcript.frames.iter().map(|f| f.direction).collect();
        assert_eq!(directions, [Direction::Received, Direction::Sent]);
    }

    #[test]
    fn a_recorder_whose_writer_is_gone_with_its_runtime_hears_so_and_does_not_wait() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let first = tokio::runtime::Runtime::new().expect("a runtime");
        let (transcripts, mut recorder) = first.block_on(async {
            // The writer is started on this runtime, which then shuts down under it.
            let transcripts = transcripts(dir.path());
            let recorder = Recorder::start(&transcripts, "ws://peer", Role::Provider, "plain");
            (transcripts, recorder)
        });
        drop(first);
        let second = tokio::runtime::Runtime::new().expect("a runtime");
        second.block_on(async {
            let begun = tokio::time::timeout(Duration::from_secs(5), recorder.begun()).await;
            assert!(begun.is_ok(), "begun() waited for a writer that is gone");
            let finished = tokio::time::timeout(
                Duration::from_secs(5),
                recorder.finish(Outcome::Failed("gone".to_owned())),
            )
            .await;
            assert!(
                finished.is_ok(),
                "finish() waited for a writer that is gone"
            );
            // A new recorder on this runtime gets a writer of its own.
            let mut again = Recorder::start(&transcripts, "ws://peer", Role::Provider, "plain");
            assert!(again.begun().await.is_some());
        });
    }

    #[tokio::test]
    async fn many_sessions_share_one_writer_and_each_transcript_keeps_its_own_order() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let transcripts = transcripts(dir.path());
        let mut recorders: Vec<Recorder> = (0..50)
            .map(|i| {
                let recorder = Recorder::start(
                    &transcripts,
                    &format!("ws://peer/{i}"),
                    Role::Requester,
                    "plain",
                );
                recorder.hello(Direction::Sent, &format!(r#"{{"hello":{i}}}"#));
                recorder
            })
            .collect();
        // Interleaved: every session's second frame after every session's first.
        for (i, recorder) in recorders.iter().enumerate() {
            recorder.hello(Direction::Received, &format!(r#"{{"answer":{i}}}"#));
        }
        let mut ids = Vec::new();
        for recorder in &mut recorders {
            ids.push(recorder.begun().await.expect("begun"));
        }
        for recorder in recorders {
            recorder.finish(Outcome::Failed("closed".to_owned())).await;
        }
        for (i, id) in ids.into_iter().enumerate() {
            let transcript = written(&transcripts, id);
            assert_eq!(transcript.summary.peer, format!("ws://peer/{i}"));
            assert_eq!(
                transcript.summary.outcome,
                Some(Outcome::Failed("closed".to_owned()))
            );
            let texts: Vec<_> = transcript
                .frames
                .iter()
                .map(|frame| match &frame.content {
                    concord_store::FrameContent::Text(text) => text.clone(),
                    other => format!("{other:?}"),
                })
                .collect();
            assert_eq!(
                texts,
                [
                    format!(r#"{{"hello":{i}}}"#),
                    format!(r#"{{"answer":{i}}}"#)
                ]
            );
        }
    }
}
