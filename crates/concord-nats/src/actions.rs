//! Progress actions on any replica: [`ActionRecords`] in a key-value bucket, and an
//! [`ActionRelay`] that carries a `cancelaction` to the replica running the action over a
//! NATS subject of its own.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_nats::jetstream::kv;
use concord_interact::{
    ActionRecord, ActionRecords, ActionRecordsError, ActionRelay, ActionStatus, CancelReason,
    LocalActions, Problem, ProblemType, RelayError, RelayFuture,
};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Notify;

use crate::client::{file_bucket, key_of, Nats};
use crate::error::NatsError;

/// The bucket's name unless configured otherwise.
pub const DEFAULT_ACTION_BUCKET: &str = "concord_actions";

/// How long the bucket keeps a record after its last change unless configured otherwise:
/// longer than any action runs without reporting (a record is rewritten at each change),
/// and the bound on what a replica that stopped leaves behind.
pub const DEFAULT_ACTION_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// Where every key of this bucket starts.
const PREFIX: &str = "a.";

/// Where each replica's sign of life starts: `r.<runner>`, rewritten every [`BEAT`].
const BEAT_PREFIX: &str = "r.";

/// How often a replica rewrites its sign of life. A replica whose sign of life did not
/// change for an action's lease plus two beats is taken as stopped, and its unfinished
/// actions as failed.
pub const BEAT: Duration = Duration::from_secs(1);

/// The name errors give as the backend.
const BACKEND: &str = "nats-kv";

/// How long a write that NATS refused waits before it is tried again.
const RETRY: Duration = Duration::from_millis(500);

/// What a relayed cancel's answer adds around the record it carries, at most.
const ANSWER_ROOM: usize = 64;

/// How long the watch may bring nothing before it is taken as gone and started again: this
/// replica's own sign of life comes through it every [`BEAT`], so silence means its
/// consumer went with the server it was on (the client would notice only after two missed
/// idle heartbeats, 10 s, while this replica's copy stood still) or NATS is away (then the
/// copy is not watching until it watches again, and decides no runner stopped meanwhile).
const WATCH_STALLED: Duration = Duration::from_secs(3);

/// The longest action id a relayed cancel carries (`Limits::max_action_id` is smaller).
const MAX_RELAYED_ID: usize = 1024;

/// A record as stored: the table's record, and the replica that runs the action.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Stored {
    id: String,
    name: String,
    status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    progress: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    output: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cancel_reason: Option<String>,
    lease_ms: u64,
    revision: u64,
    runner: String,
    /// Milliseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    requested_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ended_ms: Option<u64>,
}

/// `time` in milliseconds since the Unix epoch (0 before it).
fn millis_of(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| {
        u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
    })
}

fn status_of(name: &str) -> Option<ActionStatus> {
    [
        ActionStatus::Pending,
        ActionStatus::Running,
        ActionStatus::Completed,
        ActionStatus::Failed,
        ActionStatus::Cancelled,
    ]
    .into_iter()
    .find(|status| status.as_str() == name)
}

impl Stored {
    fn of(record: &ActionRecord, runner: &str) -> Self {
        Self {
            id: record.id.clone(),
            name: record.name.clone(),
            status: record.status.as_str().to_owned(),
            progress: record.progress,
            output: record.output.clone(),
            error: record
                .error
                .as_ref()
                .and_then(|problem| serde_json::to_value(problem).ok()),
            cancel_reason: record.cancel_reason.map(|reason| {
                match reason {
                    CancelReason::Requested => "requested",
                    CancelReason::LeaseExpired => "lease-expired",
                }
                .to_owned()
            }),
            lease_ms: u64::try_from(record.lease.as_millis()).unwrap_or(u64::MAX),
            revision: record.revision,
            runner: runner.to_owned(),
            requested_ms: record.requested_at.map(millis_of),
            ended_ms: record.ended_at.map(millis_of),
        }
    }

    /// The record as stored, and its JSON, within `room` bytes (NATS refuses a message
    /// over its `max_payload`): whole when it fits; else with its output left out and a
    /// problem saying so (the replica running the action still answers it whole); `None`
    /// when even that does not fit.
    fn fitting(record: &ActionRecord, runner: &str, room: usize) -> Option<(Self, Vec<u8>)> {
        let whole = Self::of(record, runner);
        let json = serde_json::to_vec(&whole).ok()?;
        if json.len() <= room {
            return Some((whole, json));
        }
        let mut shared = record.clone();
        shared.output = None;
        shared.error = Some(Problem::of(
            ProblemType::Unavailable,
            format!(
                "the action's record ({} bytes) is larger than NATS takes ({room} bytes): its output is answered only by the replica running it",
                json.len()
            ),
        ));
        let shared = Self::of(&shared, runner);
        let json = serde_json::to_vec(&shared).ok()?;
        (json.len() <= room).then_some((shared, json))
    }

    /// The table's record, or what is wrong with this one.
    fn record(&self) -> Result<ActionRecord, String> {
        let status = status_of(&self.status).ok_or_else(|| format!("status {:?}", self.status))?;
        let error = self
            .error
            .as_ref()
            .map(|value| {
                Problem::from_value(value, &concord_interact::Limits::default())
                    .map_err(|error| format!("error: {error}"))
            })
            .transpose()?;
        let cancel_reason = match self.cancel_reason.as_deref() {
            None => None,
            Some("requested") => Some(CancelReason::Requested),
            Some("lease-expired") => Some(CancelReason::LeaseExpired),
            Some(other) => return Err(format!("cancel reason {other:?}")),
        };
        if self.progress.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
            return Err(format!("progress {:?}", self.progress));
        }
        Ok(ActionRecord {
            id: self.id.clone(),
            name: self.name.clone(),
            status,
            progress: self.progress,
            output: self.output.clone(),
            error,
            cancel_reason,
            lease: Duration::from_millis(self.lease_ms),
            revision: self.revision,
            requested_at: self
                .requested_ms
                .map(|ms| UNIX_EPOCH + Duration::from_millis(ms)),
            ended_at: self
                .ended_ms
                .map(|ms| UNIX_EPOCH + Duration::from_millis(ms)),
        })
    }
}

/// What this replica holds: a copy of the bucket (fed by a watch, and by its own writes at
/// once), and what it still has to send.
#[derive(Debug, Default)]
struct Copy {
    /// By key: the latest record seen, and who runs it.
    records: HashMap<String, (ActionRecord, String)>,
    /// Keys whose latest record this replica wrote and NATS does not have yet.
    unsent: HashSet<String>,
    /// Keys this replica forgot and NATS still has: never answered from NATS meanwhile.
    forgotten: HashSet<String>,
    /// When each record last changed here: NATS ages a record out after the bucket's
    /// `max_age` without telling watchers, so the copy forgets it after as long.
    changed: HashMap<String, std::time::Instant>,
    /// The bucket's revision of each record as NATS last delivered it (what a
    /// compare-and-swap expects).
    kv_revisions: HashMap<String, u64>,
    /// By runner: when its sign of life last changed here (or was first looked for).
    beats: HashMap<String, std::time::Instant>,
    /// Since when the watch has delivered everything (signs of life included): `None`
    /// while it is loading or broken, when no runner is taken as stopped.
    watching_since: Option<std::time::Instant>,
    /// Since when this replica has been connected to NATS, as its sign-of-life task saw
    /// at its last turn: `None` while it is not. Signs of life missed while away say
    /// nothing, so the silence of a runner counts from the later of this and the watch.
    connected_since: Option<std::time::Instant>,
}

impl Copy {
    /// Keeps `record` unless a later revision, or a terminal record, is held (an action
    /// ends once: its runner, back after another replica answered it failed, may still
    /// hold later revisions); whether it was kept.
    fn keep(&mut self, key: &str, record: ActionRecord, runner: String) -> bool {
        if self.forgotten.contains(key) {
            return false;
        }
        match self.records.get(key) {
            Some((held, _)) if held.revision >= record.revision || held.status.is_terminal() => {
                false
            }
            _ => {
                self.records.insert(key.to_owned(), (record, runner));
                self.changed
                    .insert(key.to_owned(), std::time::Instant::now());
                true
            }
        }
    }

    /// Forgets the records that did not change for `max_age` (NATS forgot them too),
    /// unless still to be sent, and the signs of life unchanged as long.
    fn age_out(&mut self, max_age: Duration) {
        let Some(oldest) = std::time::Instant::now().checked_sub(max_age) else {
            return;
        };
        let aged: Vec<String> = self
            .changed
            .iter()
            .filter(|(key, at)| **at < oldest && !self.unsent.contains(*key))
            .map(|(key, _)| key.clone())
            .collect();
        for key in aged {
            self.changed.remove(&key);
            self.records.remove(&key);
            self.kv_revisions.remove(&key);
        }
        // Each replica start draws a new runner id: a sign of life unchanged for as long
        // belongs to a replica long gone (its actions' records aged out with it).
        self.beats.retain(|_, at| *at >= oldest);
    }
}

#[derive(Debug)]
struct Inner {
    nats: Nats,
    store: kv::Store,
    /// This replica's runner id (random): the subject its cancels come on.
    runner: String,
    /// How long the bucket keeps a record after its last change.
    max_age: Duration,
    copy: Mutex<Copy>,
    /// This replica's table, once [`ActionRelay::serve`] gave it.
    local: Local,
    /// Wakes the sender when there is something to send.
    wake: Notify,
    /// Whether the watch delivered what the bucket held when it started: until then a
    /// miss in the copy says nothing.
    caught_up: AtomicBool,
}

/// The node's side of this replica's actions (not `Debug`).
#[derive(Default)]
struct Local(Mutex<Option<Arc<dyn LocalActions>>>);

impl std::fmt::Debug for Local {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Local(..)")
    }
}

impl Local {
    fn set(&self, local: Arc<dyn LocalActions>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(local);
    }

    fn get(&self) -> Option<Arc<dyn LocalActions>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Inner {
    fn copy(&self) -> MutexGuard<'_, Copy> {
        self.copy.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A put of `key` found a revision in the bucket this replica did not see: reads it.
    /// One of this replica's own (a put whose answer was lost) is the base of the next
    /// put. Another replica's terminal record (this one was cut off past the action's lease
    /// and another answered the action failed) stands: it replaces the copy's, this
    /// replica's unsent change is dropped, and the action's table here lets go of it
    /// ([`LocalActions::ended_elsewhere`]) so that its work stops and it is answered as on
    /// every other replica. Whether it learned what the bucket holds: `false` (NATS could not be read,
    /// or holds what this crate does not write) leaves it to the next turn, after a pause.
    async fn overtaken(&self, key: &str) -> bool {
        let timeout = self.nats.operation_timeout();
        let Ok(Ok(entry)) = tokio::time::timeout(timeout, self.store.entry(key)).await else {
            return false;
        };
        let Some(entry) = entry.filter(|entry| entry.operation == kv::Operation::Put) else {
            // Deleted meanwhile: created again on the next turn.
            self.copy().kv_revisions.remove(key);
            return true;
        };
        let Ok((held, runner)) = decode(&self.store.name, key, &entry.value) else {
            return false;
        };
        // Another action's record under this key breaks the contract: it ends nothing here.
        if key != format!("{PREFIX}{}", key_of(&held.id)) {
            return false;
        }
        let lost = {
            let mut copy = self.copy();
            copy.kv_revisions.insert(key.to_owned(), entry.revision);
            let same = copy.records.get(key).is_some_and(|(ours, _)| *ours == held);
            if same {
                copy.unsent.remove(key);
            }
            let lost = held.status.is_terminal() && !same;
            if lost {
                copy.unsent.remove(key);
                copy.changed
                    .insert(key.to_owned(), std::time::Instant::now());
                copy.records.insert(key.to_owned(), (held.clone(), runner));
            }
            lost
        };
        if !lost {
            return true;
        }
        tracing::warn!(
            action_id = %held.id,
            status = held.status.as_str(),
            "another replica ended this replica's action while it could not reach NATS: its answer stands, the action is stopped here"
        );
        if let Some(local) = self.local.get() {
            if let Err(error) = local.ended_elsewhere(&held) {
                tracing::debug!(%error, action_id = %held.id, "the action was not running here any more");
            }
        }
        true
    }

    fn mark_caught_up(&self) {
        self.caught_up.store(true, Ordering::Release);
    }

    fn subject(&self, runner: &str) -> String {
        format!("concord.actions.{}.cancel.{runner}", self.store.name)
    }

    /// The subject the renewals of `runner`'s actions' leases come on.
    fn renew_subject(&self, runner: &str) -> String {
        format!("concord.actions.{}.renew.{runner}", self.store.name)
    }

    /// `record` (run by `runner`) as this replica answers it: failed when it is unfinished
    /// and its runner showed no sign of life for its lease plus two beats while this
    /// replica watched; then the failed record is kept in the copy and written to NATS
    /// once, by compare-and-swap on the revision the copy read (every replica makes the
    /// same failed record, so whichever writes first, they agree).
    fn orphan_checked(
        self: &Arc<Self>,
        key: &str,
        copy: &mut Copy,
        record: ActionRecord,
        runner: String,
    ) -> (ActionRecord, String) {
        if record.status.is_terminal() || runner == self.runner || !self.nats.is_connected() {
            return (record, runner);
        }
        let (Some(watching), Some(connected)) = (copy.watching_since, copy.connected_since) else {
            return (record, runner);
        };
        let since = watching.max(connected);
        let now = std::time::Instant::now();
        let beat = *copy.beats.entry(runner.clone()).or_insert(now);
        let silent = now.saturating_duration_since(beat.max(since));
        if silent <= record.lease.saturating_add(BEAT.saturating_mul(2)) {
            return (record, runner);
        }
        let failed = stopped(&record);
        let expected = copy.kv_revisions.get(key).copied().unwrap_or(0);
        copy.keep(key, failed.clone(), runner.clone());
        if let Some((_, value)) =
            Stored::fitting(&failed, &runner, self.nats.client().max_payload())
        {
            let (inner, key) = (Arc::clone(self), key.to_owned());
            self.nats.handle().spawn(async move {
                let timeout = inner.nats.operation_timeout();
                let swapped =
                    tokio::time::timeout(timeout, inner.store.update(&key, value.into(), expected))
                        .await;
                if !matches!(swapped, Ok(Ok(_))) {
                    // Another replica wrote first (the same failed record), or the runner
                    // came back: what NATS holds replaces the copy's.
                    tracing::debug!(
                        key,
                        "an orphaned action's failure was written elsewhere first"
                    );
                    if let Ok(Ok(Some(entry))) =
                        tokio::time::timeout(timeout, inner.store.entry(&key)).await
                    {
                        if entry.operation == kv::Operation::Put {
                            if let Ok((held, runner)) =
                                decode(&inner.store.name, &key, &entry.value)
                            {
                                let mut copy = inner.copy();
                                copy.kv_revisions.insert(key.clone(), entry.revision);
                                copy.records.insert(key.clone(), (held, runner));
                                copy.changed.insert(key, std::time::Instant::now());
                            }
                        }
                    }
                }
            });
        }
        (failed, runner)
    }
}

/// `record` failed because the replica running it stopped: the next revision, the same on
/// every replica that decides it.
fn stopped(record: &ActionRecord) -> ActionRecord {
    ActionRecord {
        status: ActionStatus::Failed,
        error: Some(concord_interact::Problem::of(
            concord_interact::ProblemType::Unavailable,
            format!(
                "its replica stopped: no sign of life for longer than the action's lease ({:?})",
                record.lease
            ),
        )),
        cancel_reason: None,
        revision: record.revision.saturating_add(1),
        // Ended when found stopped (the record that wins the compare-and-swap says when).
        ended_at: Some(UNIX_EPOCH + Duration::from_millis(millis_of(SystemTime::now()))),
        ..record.clone()
    }
}

/// The records of every replica's progress actions in one key-value bucket, and the relay
/// of cancels between them.
///
/// Each replica keeps a copy of the bucket, fed by a key-value watch, and reads from it
/// only: a query never waits on NATS (the table reads under its lock, on the runtime's
/// threads). A write lands in the copy at once and is sent by a task of its own (the latest
/// revision of each changed action, until NATS took it), so a replica's own reads see its
/// writes and a write never goes back: the copy keeps the highest revision of each action
/// whatever order changes arrive in. An id the copy lacks is unknown once the copy caught
/// up with the bucket and NATS is connected (a record written elsewhere a moment ago may
/// still be on its way: the lag the [`ActionRecords`] contract allows); while the copy is
/// loading or NATS is away, a miss answers [`ActionRecordsError::Unavailable`] (503) at
/// once. A relayed cancel, awaited outside any lock, asks NATS for an id the copy lacks.
///
/// Each record names the replica running the action (a random id drawn at
/// [`open`](Self::open)); that replica answers cancels on the subject
/// `concord.actions.<bucket>.cancel.<runner>` ([`ActionRelay::serve`]), and rewrites its
/// sign of life `r.<runner>` every [`BEAT`]. An unfinished action whose runner's sign of
/// life did not change for the action's lease plus two beats, while this replica watched,
/// is answered failed ("its replica stopped"), written once to the bucket by
/// compare-and-swap on the revision read (every replica decides the same record, but for
/// the time it ended: the one that wins says it).
#[derive(Debug, Clone)]
pub struct NatsActionRecords {
    inner: Arc<Inner>,
}

impl NatsActionRecords {
    /// The bucket `bucket` (file storage, one value per key, a record forgotten `max_age`
    /// after its last change), created when missing; starts the watch that feeds this
    /// replica's copy and the task that sends its writes.
    ///
    /// # Errors
    /// When the bucket cannot be created or read, or no randomness for the runner id.
    pub async fn open(nats: &Nats, bucket: &str, max_age: Duration) -> Result<Self, NatsError> {
        let store = nats
            .bucket(kv::Config {
                max_age,
                ..file_bucket(bucket, "Concord: progress actions by id")
            })
            .await?;
        let mut runner = [0_u8; 16];
        getrandom::getrandom(&mut runner).map_err(|error| NatsError::Bucket {
            bucket: bucket.to_owned(),
            cause: format!("no randomness for this replica's runner id: {error}"),
        })?;
        let inner = Arc::new(Inner {
            nats: nats.clone(),
            store,
            runner: hex::encode(runner),
            max_age,
            copy: Mutex::new(Copy::default()),
            local: Local::default(),
            wake: Notify::new(),
            caught_up: AtomicBool::new(false),
        });
        nats.handle()
            .spawn(watch(Arc::downgrade(&inner), inner.store.clone()));
        nats.handle().spawn(send(Arc::downgrade(&inner)));
        nats.handle().spawn(beat(Arc::downgrade(&inner)));
        // The copy loaded before the first query, unless that takes longer than a few
        // operations (reads answer 503 until it is).
        let deadline = tokio::time::Instant::now() + nats.operation_timeout().saturating_mul(3);
        while !inner.caught_up.load(Ordering::Acquire) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(Self { inner })
    }

    /// This replica's runner id (what its records name as the replica running them).
    pub fn runner(&self) -> &str {
        &self.inner.runner
    }

    /// How many changes this replica has not sent to NATS yet (the latest of each action).
    pub fn unsent(&self) -> usize {
        self.inner.copy().unsent.len()
    }

    fn unavailable(operation: &'static str, id: &str, reason: impl ToString) -> ActionRecordsError {
        ActionRecordsError::Unavailable {
            backend: BACKEND,
            operation,
            id: id.chars().take(64).collect(),
            reason: reason.to_string(),
        }
    }

    /// The record of `id` and its runner as the copy has it: `None` once the copy holds
    /// everything the bucket held (it caught up) and NATS is connected; unavailable while
    /// the copy is loading or NATS is away (a miss then says nothing). Never waits on NATS:
    /// the table reads under its lock, on the runtime's threads.
    fn held(&self, id: &str) -> Result<Option<(ActionRecord, String)>, ActionRecordsError> {
        let key = format!("{PREFIX}{}", key_of(id));
        {
            let mut copy = self.inner.copy();
            if copy.forgotten.contains(&key) {
                return Ok(None);
            }
            if let Some((record, runner)) = copy.records.get(&key).cloned() {
                return Ok(Some(
                    self.inner.orphan_checked(&key, &mut copy, record, runner),
                ));
            }
        }
        if !self.inner.nats.is_connected() {
            return Err(Self::unavailable(
                "read",
                id,
                "NATS is not connected (the client is reconnecting)",
            ));
        }
        if !self.inner.caught_up.load(Ordering::Acquire) {
            return Err(Self::unavailable(
                "read",
                id,
                "this replica's copy of the records is still loading",
            ));
        }
        Ok(None)
    }

    /// The record of `id` and its runner: the copy's, else NATS's (a request awaited here,
    /// for a record that reached NATS before the watch brought it).
    async fn fetch(&self, id: &str) -> Result<Option<(ActionRecord, String)>, ActionRecordsError> {
        if let Some(held) = self.held(id)? {
            return Ok(Some(held));
        }
        let key = format!("{PREFIX}{}", key_of(id));
        let timeout = self.inner.nats.operation_timeout();
        let entry = tokio::time::timeout(timeout, self.inner.store.entry(&key))
            .await
            .map_err(|_| Self::unavailable("read", id, format!("no answer within {timeout:?}")))?
            .map_err(|error| Self::unavailable("read", id, error))?;
        let Some(entry) = entry.filter(|entry| entry.operation == kv::Operation::Put) else {
            return Ok(None);
        };
        let (record, runner) = decode(&self.inner.store.name, &key, &entry.value)
            .map_err(|error| Self::unavailable("read", id, error))?;
        if record.id != id {
            return Ok(None);
        }
        let mut copy = self.inner.copy();
        if copy.keep(&key, record, runner) {
            copy.kv_revisions.insert(key.clone(), entry.revision);
        }
        let Some((record, runner)) = copy.records.get(&key).cloned() else {
            return Ok(None);
        };
        Ok(Some(
            self.inner.orphan_checked(&key, &mut copy, record, runner),
        ))
    }
}

fn decode(bucket: &str, key: &str, value: &[u8]) -> Result<(ActionRecord, String), NatsError> {
    let corrupt = |detail: String| NatsError::Corrupt {
        bucket: bucket.to_owned(),
        key: key.to_owned(),
        detail,
    };
    let stored: Stored = serde_json::from_slice(value)
        .map_err(|error| corrupt(format!("not an action record: {error}")))?;
    let record = stored
        .record()
        .map_err(|detail| corrupt(format!("not an action record: {detail}")))?;
    Ok((record, stored.runner))
}

impl ActionRecords for NatsActionRecords {
    fn write(&self, record: &ActionRecord) -> Result<(), ActionRecordsError> {
        let key = format!("{PREFIX}{}", key_of(&record.id));
        {
            let mut copy = self.inner.copy();
            copy.forgotten.remove(&key);
            if copy.keep(&key, record.clone(), self.inner.runner.clone()) {
                copy.unsent.insert(key);
            }
        }
        self.inner.wake.notify_one();
        if self.inner.nats.is_connected() {
            Ok(())
        } else {
            // Kept here and sent when NATS is back; other replicas read an earlier state.
            Err(Self::unavailable(
                "write",
                &record.id,
                "NATS is not connected: the change is kept and sent when it is back",
            ))
        }
    }

    fn read(&self, id: &str) -> Result<Option<ActionRecord>, ActionRecordsError> {
        Ok(self
            .held(id)?
            .map(|(record, _)| record)
            .filter(|record| record.id == id))
    }

    fn forget(&self, id: &str) -> Result<(), ActionRecordsError> {
        let key = format!("{PREFIX}{}", key_of(id));
        {
            let mut copy = self.inner.copy();
            copy.records.remove(&key);
            copy.changed.remove(&key);
            copy.unsent.remove(&key);
            copy.kv_revisions.remove(&key);
            copy.forgotten.insert(key);
        }
        self.inner.wake.notify_one();
        Ok(())
    }
}

/// Why [`put_over`] did not write.
enum Put {
    /// The bucket holds a revision of the record this replica did not see: another
    /// replica wrote it.
    Overtaken,
    /// NATS refused or could not be reached.
    Failed(String),
}

/// Writes `value` at `key` over the bucket's revision `expected` (created when `None`): its
/// new revision. A replica never overwrites a record another wrote (the failure a replica
/// decided for an action whose runner went silent) with one it held while cut off.
async fn put_over(
    store: &kv::Store,
    key: &str,
    value: bytes::Bytes,
    expected: Option<u64>,
) -> Result<u64, Put> {
    match expected {
        Some(expected) => {
            store
                .update(key, value, expected)
                .await
                .map_err(|error| match error.kind() {
                    kv::UpdateErrorKind::WrongLastRevision => Put::Overtaken,
                    _ => Put::Failed(error.to_string()),
                })
        }
        None => store
            .create(key, value)
            .await
            .map_err(|error| match error.kind() {
                kv::CreateErrorKind::AlreadyExists => Put::Overtaken,
                _ => Put::Failed(error.to_string()),
            }),
    }
}

/// Sends what the copy holds unsent, and the deletes of what was forgotten, until the
/// records are dropped; what NATS refuses is tried again.
async fn send(inner: Weak<Inner>) {
    loop {
        let Some(strong) = inner.upgrade() else {
            return;
        };
        let room = strong.nats.client().max_payload();
        let (puts, deletes) = {
            let mut copy = strong.copy();
            let mut unsendable = Vec::new();
            // Each key's latest record: its JSON, the bucket revision it goes over, and
            // its own revision (what tells, once sent, whether a later change came).
            let puts: Vec<(String, bytes::Bytes, Option<u64>, u64)> = copy
                .unsent
                .iter()
                .filter_map(|key| {
                    let (record, runner) = copy.records.get(key)?;
                    let Some((_, value)) = Stored::fitting(record, runner, room) else {
                        unsendable.push(key.clone());
                        return None;
                    };
                    let expected = copy.kv_revisions.get(key).copied();
                    Some((
                        key.clone(),
                        bytes::Bytes::from(value),
                        expected,
                        record.revision,
                    ))
                })
                .collect();
            for key in unsendable {
                tracing::warn!(key, room, "an action record does not fit NATS's max_payload even without its output: not shared");
                copy.unsent.remove(&key);
            }
            let deletes: Vec<String> = copy.forgotten.iter().cloned().collect();
            (puts, deletes)
        };
        let mut failed = false;
        // Every action's latest change at once (one key each): under many actions
        // reporting progress, a new action's record does not wait behind the others'.
        let sent = futures_util::future::join_all(puts.iter().map(|(key, value, expected, _)| {
            tokio::time::timeout(
                strong.nats.operation_timeout(),
                put_over(&strong.store, key, value.clone(), *expected),
            )
        }))
        .await;
        for ((key, _, _, sent_revision), sent) in puts.into_iter().zip(sent) {
            match sent {
                Ok(Ok(revision)) => {
                    let mut copy = strong.copy();
                    copy.kv_revisions.insert(key.clone(), revision);
                    // Sent unless a later change arrived meanwhile (sent on the next turn).
                    let latest = copy.records.get(&key).map(|(record, _)| record.revision);
                    if latest.is_none_or(|latest| latest == sent_revision) {
                        copy.unsent.remove(&key);
                    }
                }
                Ok(Err(Put::Overtaken)) => failed |= !strong.overtaken(&key).await,
                Ok(Err(Put::Failed(error))) => {
                    tracing::debug!(%error, key, "an action record was not sent: trying again");
                    failed = true;
                }
                Err(_) => failed = true,
            }
        }
        for key in deletes {
            let sent =
                tokio::time::timeout(strong.nats.operation_timeout(), strong.store.delete(&key))
                    .await;
            match sent {
                Ok(Ok(())) => {
                    strong.copy().forgotten.remove(&key);
                }
                Ok(Err(error)) => {
                    tracing::debug!(%error, key, "a forgotten action record was not deleted: trying again");
                    failed = true;
                }
                Err(_) => failed = true,
            }
        }
        let idle = {
            let mut copy = strong.copy();
            copy.age_out(strong.max_age);
            copy.unsent.is_empty() && copy.forgotten.is_empty()
        };
        if failed {
            drop(strong);
            tokio::time::sleep(RETRY).await;
        } else if idle {
            // Bounded, so that a dropped handle ends this task (a wake meanwhile is kept
            // by the `Notify` as a permit).
            let _ = tokio::time::timeout(Duration::from_secs(5), strong.wake.notified()).await;
        }
    }
}

/// Rewrites this replica's sign of life every [`BEAT`] until the records are dropped.
async fn beat(inner: Weak<Inner>) {
    loop {
        let Some(strong) = inner.upgrade() else {
            return;
        };
        let key = format!("{BEAT_PREFIX}{}", strong.runner);
        {
            let connected = strong.nats.is_connected();
            let mut copy = strong.copy();
            match (connected, copy.connected_since) {
                (true, None) => copy.connected_since = Some(std::time::Instant::now()),
                (false, Some(_)) => copy.connected_since = None,
                _ => {}
            }
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_millis());
        let put = tokio::time::timeout(
            strong.nats.operation_timeout(),
            strong.store.put(&key, now.to_string().into()),
        )
        .await;
        if !matches!(put, Ok(Ok(_))) {
            tracing::debug!(key, "this replica's sign of life was not written");
        }
        drop(strong);
        tokio::time::sleep(BEAT).await;
    }
}

/// Feeds the copy from a watch of the bucket (the latest value of each key, then every
/// change), watching again whenever the watch ends, until the records are dropped.
async fn watch(inner: Weak<Inner>, store: kv::Store) {
    loop {
        if let Some(strong) = inner.upgrade() {
            strong.copy().watching_since = None;
        }
        let started = store.watch_with_history(">").await;
        let mut entries = match started {
            Ok(entries) => {
                // An empty bucket delivers nothing to say the watch caught up.
                let mut stream = store.stream.clone();
                if let Ok(info) = stream.info().await {
                    if info.state.messages == 0 {
                        if let Some(strong) = inner.upgrade() {
                            strong.mark_caught_up();
                            strong
                                .copy()
                                .watching_since
                                .get_or_insert_with(std::time::Instant::now);
                        }
                    }
                }
                entries
            }
            Err(error) => {
                if inner.strong_count() == 0 {
                    return;
                }
                tracing::debug!(%error, bucket = %store.name, "cannot watch the action records: trying again");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        loop {
            let next = tokio::time::timeout(WATCH_STALLED, entries.next()).await;
            let Some(strong) = inner.upgrade() else {
                return;
            };
            let entry = match next {
                Err(_) => {
                    tracing::debug!(bucket = %store.name, "the action records' watch brought nothing for {WATCH_STALLED:?}, not even this replica's sign of life (its server is gone, or NATS): watching again");
                    break;
                }
                Ok(Some(Ok(entry))) => entry,
                Ok(Some(Err(error))) => {
                    tracing::debug!(%error, bucket = %store.name, "the action records' watch failed: watching again");
                    break;
                }
                Ok(None) => break,
            };
            if let Some(runner) = entry.key.strip_prefix(BEAT_PREFIX) {
                let mut copy = strong.copy();
                copy.beats
                    .insert(runner.to_owned(), std::time::Instant::now());
                if entry.delta == 0 || entry.seen_current {
                    copy.watching_since
                        .get_or_insert_with(std::time::Instant::now);
                    drop(copy);
                    strong.mark_caught_up();
                }
                continue;
            }
            let caught_up = entry.delta == 0 || entry.seen_current;
            let mut copy = strong.copy();
            match entry.operation {
                kv::Operation::Put => match decode(&store.name, &entry.key, &entry.value) {
                    Ok((record, runner)) => {
                        if copy.keep(&entry.key, record, runner) {
                            copy.kv_revisions.insert(entry.key.clone(), entry.revision);
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, "an action record in NATS is not used");
                    }
                },
                kv::Operation::Delete | kv::Operation::Purge => {
                    // Another replica forgot it; our own unsent change of it stands (and
                    // creates the key again).
                    copy.kv_revisions.remove(&entry.key);
                    if !copy.unsent.contains(&entry.key) {
                        copy.records.remove(&entry.key);
                        copy.changed.remove(&entry.key);
                    }
                }
            }
            if caught_up {
                copy.watching_since
                    .get_or_insert_with(std::time::Instant::now);
            }
            drop(copy);
            if caught_up {
                strong.mark_caught_up();
            }
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// A relayed cancel's answer, on the wire.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Answer {
    /// The action after the cancel.
    Record(Box<Stored>),
    /// The runner's refusal.
    Problem(Value),
}

impl NatsActionRecords {
    /// Renews, with `local`, the leases of this replica's actions whose callers came back
    /// on another replica (`renew`'s messages: an action id, no answer), until the relay is
    /// dropped.
    fn serve_renewals(&self, local: Arc<dyn LocalActions>) {
        let subject = self.inner.renew_subject(&self.inner.runner);
        let client = self.inner.nats.client().clone();
        let weak = Arc::downgrade(&self.inner);
        self.inner.nats.handle().spawn(async move {
            let mut renewals = loop {
                match client.subscribe(subject.clone()).await {
                    Ok(renewals) => break renewals,
                    Err(error) => {
                        if weak.strong_count() == 0 {
                            return;
                        }
                        tracing::warn!(%error, subject, "cannot listen for relayed renewals: trying again");
                        tokio::time::sleep(RETRY).await;
                    }
                }
            };
            while let Some(renewal) = renewals.next().await {
                if weak.strong_count() == 0 {
                    return;
                }
                match std::str::from_utf8(&renewal.payload) {
                    Ok(id) if !id.is_empty() && id.len() <= MAX_RELAYED_ID => {
                        if let Err(error) = local.renew(id) {
                            tracing::debug!(%error, "a relayed renewal was not taken");
                        }
                    }
                    _ => tracing::debug!("a relayed renewal carries no action id"),
                }
            }
        });
    }
}

impl ActionRelay for NatsActionRecords {
    fn serve(&self, local: Arc<dyn LocalActions>) -> Result<(), RelayError> {
        self.inner.local.set(Arc::clone(&local));
        self.serve_renewals(Arc::clone(&local));
        let subject = self.inner.subject(&self.inner.runner);
        let (client, runner) = (self.inner.nats.client().clone(), self.inner.runner.clone());
        let weak = Arc::downgrade(&self.inner);
        // Not awaited here (a node is built on any thread): the task subscribes, and tries
        // again while NATS refuses; the client subscribes again by itself after a reconnect.
        self.inner.nats.handle().spawn(async move {
            let mut requests = loop {
                match client.subscribe(subject.clone()).await {
                    Ok(requests) => break requests,
                    Err(error) => {
                        if weak.strong_count() == 0 {
                            return;
                        }
                        tracing::warn!(%error, subject, "cannot listen for relayed cancels: trying again");
                        tokio::time::sleep(RETRY).await;
                    }
                }
            };
            while let Some(request) = requests.next().await {
                if weak.strong_count() == 0 {
                    return;
                }
                let Some(reply) = request.reply.clone() else {
                    continue;
                };
                let answer = match std::str::from_utf8(&request.payload) {
                    Ok(id) if !id.is_empty() && id.len() <= MAX_RELAYED_ID => {
                        match local.cancel(id) {
                            Ok(record) => match Stored::fitting(
                                &record,
                                &runner,
                                client.max_payload().saturating_sub(ANSWER_ROOM),
                            ) {
                                Some((stored, _)) => Answer::Record(Box::new(stored)),
                                None => Answer::Problem(
                                    serde_json::to_value(Problem::of(
                                        ProblemType::Unavailable,
                                        "the cancelled action's record is larger than NATS takes",
                                    ))
                                    .unwrap_or(Value::Null),
                                ),
                            },
                            Err(error) => Answer::Problem(
                                serde_json::to_value(error.to_problem()).unwrap_or(Value::Null),
                            ),
                        }
                    }
                    _ => Answer::Problem(
                        serde_json::to_value(
                            Problem::new("about:blank")
                                .with_status(400)
                                .with_detail("a relayed cancel carries an action id"),
                        )
                        .unwrap_or(Value::Null),
                    ),
                };
                let Ok(body) = serde_json::to_vec(&answer) else {
                    continue;
                };
                if let Err(error) = client.publish(reply, body.into()).await {
                    tracing::debug!(%error, "a relayed cancel's answer was not sent");
                }
            }
        });
        Ok(())
    }

    fn renew(&self, id: &str) {
        // The runner from the copy (never waits on NATS); an id it lacks has no runner to
        // tell, and a publish while disconnected would only wait in the client's buffer.
        let Ok(Some((record, runner))) = self.held(id) else {
            return;
        };
        if record.status.is_terminal() || !self.inner.nats.is_connected() {
            return;
        }
        let (client, subject) = (
            self.inner.nats.client().clone(),
            self.inner.renew_subject(&runner),
        );
        let id = id.to_owned();
        self.inner.nats.handle().spawn(async move {
            if let Err(error) = client.publish(subject, id.into()).await {
                tracing::debug!(%error, "a renewal was not relayed");
            }
        });
    }

    fn cancel(&self, id: &str) -> RelayFuture {
        let this = self.clone();
        let id = id.to_owned();
        Box::pin(async move {
            let short: String = id.chars().take(64).collect();
            let unavailable = |reason: String| RelayError::Unavailable {
                backend: "nats",
                id: short.clone(),
                reason,
            };
            if !this.inner.nats.is_connected() {
                return Err(unavailable(
                    "NATS is not connected (the client is reconnecting)".to_owned(),
                ));
            }
            // The copy first; NATS only for an id it lacks.
            let held = this
                .fetch(&id)
                .await
                .map_err(|error| unavailable(error.to_string()))?;
            let Some((record, runner)) = held else {
                return Err(RelayError::Refused(Box::new(
                    concord_interact::ActionTableError::Unknown { id: short.clone() }.to_problem(),
                )));
            };
            if record.status.is_terminal() {
                return Err(RelayError::Refused(Box::new(
                    concord_interact::ActionTableError::Finished {
                        id: short.clone(),
                        status: record.status,
                    }
                    .to_problem(),
                )));
            }
            let timeout = this.inner.nats.operation_timeout();
            let asked = tokio::time::timeout(
                timeout,
                this.inner
                    .nats
                    .client()
                    .request(this.inner.subject(&runner), id.clone().into()),
            )
            .await;
            let answer = match asked {
                Err(_) => {
                    return Err(RelayError::RunnerGone {
                        id: short,
                        reason: format!("no answer within {timeout:?}"),
                    })
                }
                Ok(Err(error)) => {
                    return Err(match error.kind() {
                        async_nats::RequestErrorKind::NoResponders => RelayError::RunnerGone {
                            id: short,
                            reason: "no replica listens for its cancels".to_owned(),
                        },
                        async_nats::RequestErrorKind::TimedOut => RelayError::RunnerGone {
                            id: short,
                            reason: format!("no answer within {timeout:?}"),
                        },
                        _ => unavailable(error.to_string()),
                    })
                }
                Ok(Ok(answer)) => answer,
            };
            let malformed = |detail: String| RelayError::Malformed {
                id: short.clone(),
                detail,
            };
            match serde_json::from_slice::<Answer>(&answer.payload)
                .map_err(|error| malformed(error.to_string()))?
            {
                Answer::Record(stored) => {
                    let record = stored.record().map_err(&malformed)?;
                    if record.id != id {
                        return Err(malformed(format!("it answered for action {:?}", record.id)));
                    }
                    let key = format!("{PREFIX}{}", key_of(&id));
                    this.inner.copy().keep(&key, record.clone(), stored.runner);
                    Ok(record)
                }
                Answer::Problem(value) => {
                    Problem::from_value(&value, &concord_interact::Limits::default())
                        .map(|problem| Err(RelayError::Refused(Box::new(problem))))
                        .map_err(|error| malformed(error.to_string()))?
                }
            }
        })
    }
}
