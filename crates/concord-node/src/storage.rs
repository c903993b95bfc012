//! The synchronous store, used from async code: blocking calls on the blocking pool, and a
//! per-session transcript recorder that never holds up the session.

use std::sync::Arc;
use std::time::SystemTime;

use concord_proto::{Frame, Role};
use concord_store::{Direction, FrameRecord, Outcome, Store, StoreError, TranscriptId};
use tokio::sync::mpsc;

/// The store behind an `Arc`, with an async door.
#[derive(Debug, Clone)]
pub(crate) struct SharedStore(Arc<Store>);

/// A store call failed, or its blocking task died.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum StoreFailure {
    #[error("{0}")]
    Store(Arc<StoreError>),
    #[error("the store task failed: {0}")]
    Task(String),
}

impl SharedStore {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        Self(store)
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
