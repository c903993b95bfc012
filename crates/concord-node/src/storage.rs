//! The synchronous store, used from async code: blocking calls on the blocking pool, and
//! the store's retention (transcripts pruned by age and count, negotiated protocols by
//! count, after sessions end, at most once per interval).

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant, SystemTime};

use concord_store::{
    CheckpointMode, RecordingClaim, Store, StoreError, TranscriptBounds, TranscriptRetention,
};

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

    /// How much of each transcript is kept.
    pub(crate) fn transcript_bounds(&self) -> TranscriptBounds {
        self.1.bounds
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
