//! Long-running actions: pending → running (monotonic progress, partial output) → exactly
//! one terminal state; query, cancel, and a lease that outlives the caller's connection.

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::action_records::{ActionRecord, ActionRecords, ActionRecordsError};
use crate::message::{ActionStatus, Message, MessageType, Operation};
use crate::problem::{Problem, ProblemType};
use crate::Limits;

/// Why an action was cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CancelReason {
    /// The caller asked (`cancelaction`).
    Requested,
    /// The caller's connection dropped and did not come back within the lease.
    LeaseExpired,
}

/// One action and everything known about it. Read it with [`ActionTable::query`].
#[derive(Debug, Clone, PartialEq)]
pub struct Action {
    id: String,
    name: String,
    status: ActionStatus,
    progress: Option<f64>,
    output: Option<Value>,
    error: Option<Problem>,
    cancel_reason: Option<CancelReason>,
    lease: Duration,
    lease_expires: Option<Instant>,
    started_at: Instant,
    updated_at: Instant,
    revision: u64,
    /// Its instants by the wall clock: from its table's clock, or as its record gave them.
    times: WallTimes,
}

/// A point of the wall clock and the instant it was read at: converts the table's instants
/// to wall-clock times with no clock read (the driver reads both once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WallClock {
    at: Instant,
    wall: SystemTime,
}

impl WallClock {
    /// `instant` by the wall clock, in whole milliseconds (as records keep it).
    fn time_of(self, instant: Instant) -> SystemTime {
        let time = if instant >= self.at {
            self.wall.checked_add(instant - self.at)
        } else {
            self.wall.checked_sub(self.at - instant)
        }
        .unwrap_or(self.wall);
        let millis = time
            .duration_since(UNIX_EPOCH)
            .map_or(Duration::ZERO, |since| {
                Duration::from_millis(u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
            });
        UNIX_EPOCH + millis
    }
}

/// Where an action's wall-clock times come from.
#[derive(Debug, Clone, Copy, PartialEq)]
enum WallTimes {
    /// Its table's clock, if it has one.
    Clock(Option<WallClock>),
    /// Its record (another table's action).
    Recorded {
        requested: Option<SystemTime>,
        ended: Option<SystemTime>,
    },
}

impl Action {
    /// The action as `record` has it (another table's, read from shared
    /// [`ActionRecords`]): instants do not cross processes, so it started and last changed
    /// at `now` as far as this side knows, and no lease runs here.
    pub fn from_record(record: ActionRecord, now: Instant) -> Self {
        Self {
            id: record.id,
            name: record.name,
            status: record.status,
            progress: record.progress,
            output: record.output,
            error: record.error,
            cancel_reason: record.cancel_reason,
            lease: record.lease,
            lease_expires: None,
            started_at: now,
            updated_at: now,
            revision: record.revision,
            times: WallTimes::Recorded {
                requested: record.requested_at,
                ended: record.ended_at,
            },
        }
    }

    /// Its record, as the table writes it to its [`ActionRecords`].
    pub fn to_record(&self) -> ActionRecord {
        ActionRecord {
            id: self.id.clone(),
            name: self.name.clone(),
            status: self.status,
            progress: self.progress,
            output: self.output.clone(),
            error: self.error.clone(),
            cancel_reason: self.cancel_reason,
            lease: self.lease,
            revision: self.revision,
            requested_at: self.requested_at(),
            ended_at: self.ended_at(),
        }
    }

    /// When it was requested, by the wall clock (whole milliseconds): from its table's
    /// clock ([`ActionTable::with_wall_clock`]), or its record's; `None` when neither
    /// says.
    pub fn requested_at(&self) -> Option<SystemTime> {
        match self.times {
            WallTimes::Clock(clock) => clock.map(|clock| clock.time_of(self.started_at)),
            WallTimes::Recorded { requested, .. } => requested,
        }
    }

    /// When it reached its terminal state, by the wall clock, likewise (`None` while
    /// unfinished).
    pub fn ended_at(&self) -> Option<SystemTime> {
        if !self.is_finished() {
            return None;
        }
        match self.times {
            WallTimes::Clock(clock) => clock.map(|clock| clock.time_of(self.updated_at)),
            WallTimes::Recorded { ended, .. } => ended,
        }
    }

    /// How many changes it went through, its creation the first.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// A change at `now`: one revision more.
    fn touch(&mut self, now: Instant) {
        self.updated_at = now;
        self.revision = self.revision.saturating_add(1);
    }

    /// The action id, unique within its table.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The action's affordance name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its status.
    pub fn status(&self) -> ActionStatus {
        self.status
    }

    /// Whether it reached its terminal state.
    pub fn is_finished(&self) -> bool {
        self.status.is_terminal()
    }

    /// The latest progress, 0 to 1.
    pub fn progress(&self) -> Option<f64> {
        self.progress
    }

    /// The output: partial while running, final once completed.
    pub fn output(&self) -> Option<&Value> {
        self.output.as_ref()
    }

    /// Why it failed.
    pub fn error(&self) -> Option<&Problem> {
        self.error.as_ref()
    }

    /// Why it was cancelled.
    pub fn cancel_reason(&self) -> Option<CancelReason> {
        self.cancel_reason
    }

    /// How long it survives a detached caller.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// When it will be cancelled unless the caller reattaches.
    pub fn lease_expires(&self) -> Option<Instant> {
        self.lease_expires
    }

    /// When it started.
    pub fn started_at(&self) -> Instant {
        self.started_at
    }

    /// When its state last changed.
    pub fn updated_at(&self) -> Instant {
        self.updated_at
    }

    /// A status message about it: `actionID`, `name`, `status`, `progress`, `output`,
    /// and for a failure or cancellation `error`. `operation` is `invokeaction` for
    /// progress notifications, `queryaction` or `cancelaction` for those responses.
    pub fn to_message(
        &self,
        message_type: MessageType,
        operation: Operation,
        correlation_id: &str,
    ) -> Message {
        let mut message = Message::new(message_type, operation, correlation_id)
            .with_name(self.name.clone())
            .with_action_id(self.id.clone())
            .with_status(self.status);
        message.progress = self.progress;
        message.output = self.output.clone();
        message.error = self.error.clone();
        message
    }
}

/// What the table tells its driver.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ActionEvent {
    /// The action is cancelled: stop the work behind it and tell the caller if attached.
    Cancelled {
        /// The action id.
        id: String,
        /// Why.
        reason: CancelReason,
    },
    /// Another replica answered the action while this table ran it
    /// ([`ActionTable::ended_elsewhere`]): stop the work behind it. The table holds it no
    /// more; its records hold that replica's answer.
    EndedElsewhere {
        /// The action id.
        id: String,
    },
    /// The table's [`ActionRecords`] could not take a change of the action (the change
    /// stands here; other replicas read an earlier state until a later change is recorded).
    NotRecorded {
        /// The action id.
        id: String,
        /// What the records said.
        error: ActionRecordsError,
    },
}

/// A change the table refuses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ActionTableError {
    /// No action has this id (or it finished long ago and was forgotten).
    #[error("unknown action {id:?}")]
    Unknown {
        /// The id (its first 64 characters).
        id: String,
    },
    /// The action reached its terminal state: nothing may follow.
    #[error("action {id:?} is already {}", status.as_str())]
    Finished {
        /// The id.
        id: String,
        /// Its terminal status.
        status: ActionStatus,
    },
    /// A progress value that is not a number in 0..=1.
    #[error("action {id:?}: progress {progress} is outside 0..=1")]
    ProgressOutOfRange {
        /// The id.
        id: String,
        /// The value.
        progress: f64,
    },
    /// A progress value lower than the previous one.
    #[error("action {id:?}: progress {got} is lower than the previous {previous}")]
    ProgressDecreased {
        /// The id.
        id: String,
        /// The previous value.
        previous: f64,
        /// The value refused.
        got: f64,
    },
    /// `Limits::max_actions` actions are unfinished already.
    #[error("{limit} actions are unfinished already")]
    TooMany {
        /// `Limits::max_actions`.
        limit: usize,
    },
    /// The caller holds `Limits::max_actions_per_caller` unfinished actions already, under
    /// its address or under its identity ([`Thing`](crate::Thing) counts both).
    #[error("{limit} actions of this caller (its address or its identity) are unfinished already")]
    CallerLimit {
        /// `Limits::max_actions_per_caller`.
        limit: usize,
    },
    /// Only the node's last `Limits::reserved_actions` places are free, and they are kept
    /// for callers that hold no unfinished action: this one holds some.
    #[error(
        "the node's last {reserved} places for actions are kept for callers that run none, \
         and this caller runs some; try again when one has finished"
    )]
    Reserved {
        /// `Limits::reserved_actions`.
        reserved: usize,
    },
    /// An action name that is empty or longer than `Limits::max_name`.
    #[error("action name of {len} bytes is empty or exceeds the limit of {limit} bytes")]
    NameTooLong {
        /// Its length.
        len: usize,
        /// `Limits::max_name`.
        limit: usize,
    },
    /// [`ActionTable::respond`] takes `queryaction` and `cancelaction` requests with an
    /// `actionID` only.
    #[error("not a queryaction or cancelaction request with an actionID")]
    NotAnActionRequest,
    /// [`ActionTracker::observe`] takes action status messages with an `actionID` only.
    #[error("{0} carries no actionID")]
    MissingActionId(&'static str),
    /// A status going backwards (`running` → `pending`).
    #[error("action {id:?}: {} cannot follow {}", to.as_str(), from.as_str())]
    InvalidTransition {
        /// The id.
        id: String,
        /// The current status.
        from: ActionStatus,
        /// The status refused.
        to: ActionStatus,
    },
    /// The action runs on another table sharing this one's [`ActionRecords`] (another
    /// replica of the agent): only that one can change it. A `cancelaction` is refused
    /// here, not forwarded: send it to the replica running the action.
    #[error(
        "action {id:?} is {} on another replica: only that one can change or cancel it",
        status.as_str()
    )]
    HeldElsewhere {
        /// The id (its first 64 characters).
        id: String,
        /// Its status as last recorded.
        status: ActionStatus,
    },
    /// The table's [`ActionRecords`] could not be read for an action it does not hold.
    #[error(transparent)]
    Records(#[from] ActionRecordsError),
}

impl ActionTableError {
    /// The problem to answer with.
    pub fn to_problem(&self) -> Problem {
        let kind = match self {
            Self::Unknown { .. } => ProblemType::UnknownAction,
            Self::Finished { .. } => ProblemType::ActionFinished,
            Self::ProgressOutOfRange { .. } | Self::ProgressDecreased { .. } => {
                ProblemType::BadProgress
            }
            Self::CallerLimit { .. } => ProblemType::LimitReached,
            // The node is full (for this caller): 503, not the caller's own 429.
            Self::TooMany { .. } | Self::Reserved { .. } => {
                return Problem::of(ProblemType::LimitReached, self.to_string()).with_status(503)
            }
            Self::InvalidTransition { .. } | Self::HeldElsewhere { .. } => ProblemType::Conflict,
            Self::Records(_) => ProblemType::Unavailable,
            Self::NameTooLong { .. } | Self::NotAnActionRequest | Self::MissingActionId(_) => {
                ProblemType::BadMessage
            }
        };
        Problem::of(kind, self.to_string())
    }
}

/// Where an [`ActionTable`] gets the ids of new actions. An id must not repeat within a
/// table (a repeat is drawn again); whoever holds an id can query and cancel the action.
pub trait ActionIds: Send + std::fmt::Debug {
    /// The next id (at most `Limits::max_action_id` bytes, as it travels in `actionID`).
    fn next_id(&mut self) -> String;
}

/// `action-1`, `action-2`, …: deterministic ids for tests and single-tenant use. Guessable:
/// a node facing strangers supplies random ids ([`ActionTable::with_ids`]).
#[derive(Debug, Default)]
pub struct SequentialIds {
    issued: u64,
}

impl ActionIds for SequentialIds {
    fn next_id(&mut self) -> String {
        self.issued = self.issued.saturating_add(1);
        format!("action-{}", self.issued)
    }
}

/// The provider's long-running actions of one caller session, keyed by the action ids it
/// issues (from its [`ActionIds`]: `action-1`, `action-2`, … by default; never reused).
///
/// The backend drives each action with [`ActionTable::run`], [`ActionTable::progress`]
/// and one of [`ActionTable::complete`], [`ActionTable::fail`]; the caller may
/// [`ActionTable::cancel`]. When the caller's connection drops the driver calls
/// [`ActionTable::detach`]: every unfinished action keeps running until its lease runs
/// out ([`ActionTable::poll_timeout`], [`ActionTable::handle_timeout`]), and a caller that
/// comes back ([`ActionTable::attach`]) can query them. Cancellations come out of
/// [`ActionTable::poll_event`] so that the driver stops the work.
///
/// Given [`ActionRecords`] ([`ActionTable::with_records`]), the table writes each change of
/// an action there and reads an action it does not hold from there
/// ([`ActionTable::lookup`], [`ActionTable::cancel`]); without, it is its own record.
#[derive(Debug)]
pub struct ActionTable {
    limits: Limits,
    ids: Box<dyn ActionIds>,
    records: Option<Arc<dyn ActionRecords>>,
    actions: BTreeMap<String, Action>,
    unfinished: usize,
    /// Finished ids, oldest first, to forget past `Limits::finished_actions`.
    finished: VecDeque<String>,
    detached: bool,
    events: VecDeque<ActionEvent>,
    wall_clock: Option<WallClock>,
}

impl ActionTable {
    /// An empty table.
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            ids: Box::new(SequentialIds::default()),
            records: None,
            actions: BTreeMap::new(),
            unfinished: 0,
            finished: VecDeque::new(),
            detached: false,
            events: VecDeque::new(),
            wall_clock: None,
        }
    }

    /// Gives the table the wall clock: `wall` was the time at the instant `at` (the driver
    /// reads both once). Its actions then carry their times by the wall clock
    /// ([`Action::requested_at`], [`Action::ended_at`]) into their records, so that
    /// another replica answers when an action was requested, not when it was asked. The
    /// conversion reads no clock: the table stays deterministic.
    pub fn with_wall_clock(mut self, at: Instant, wall: SystemTime) -> Self {
        self.wall_clock = Some(WallClock { at, wall });
        self
    }

    /// The limits it was made with.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Takes action ids from `ids` instead of the default [`SequentialIds`]. An action id
    /// is all it takes to query or cancel an action, so a node facing strangers gives
    /// unguessable ones (e.g. 128 random bits).
    pub fn with_ids(mut self, ids: Box<dyn ActionIds>) -> Self {
        self.ids = ids;
        self
    }

    /// Writes each change of an action (created, running, progress, terminal, cancelled,
    /// lease expired) to `records`, tells them when it forgets a finished one, and reads
    /// there an action it does not hold (see the [`ActionRecords`] contract). Tables sharing
    /// records must draw ids that never collide ([`ActionTable::with_ids`]).
    pub fn with_records(mut self, records: Arc<dyn ActionRecords>) -> Self {
        self.records = Some(records);
        self
    }

    /// Writes the action `id` as it now stands to the records, if any.
    fn record(&mut self, id: &str) {
        let (Some(records), Some(action)) = (&self.records, self.actions.get(id)) else {
            return;
        };
        if let Err(error) = records.write(&action.to_record()) {
            self.events.push_back(ActionEvent::NotRecorded {
                id: action.id.clone(),
                error,
            });
        }
    }

    /// Why the action `id`, which this table does not hold, cannot be changed here.
    fn not_held(&self, id: &str) -> ActionTableError {
        let Some(records) = &self.records else {
            return unknown(id);
        };
        match records.read(id) {
            // Another id's record (a backend breaking its contract) says nothing of this one.
            Ok(None) => unknown(id),
            Ok(Some(record)) if record.id != id => unknown(id),
            Ok(Some(record)) if record.status.is_terminal() => ActionTableError::Finished {
                id: record.id,
                status: record.status,
            },
            Ok(Some(record)) => ActionTableError::HeldElsewhere {
                id: record.id.chars().take(64).collect(),
                status: record.status,
            },
            Err(error) => ActionTableError::Records(error),
        }
    }

    /// Starts an action (`pending`) with the default lease `Limits::action_lease`;
    /// returns its id.
    pub fn start(&mut self, name: &str, now: Instant) -> Result<String, ActionTableError> {
        self.start_with_lease(name, self.limits.action_lease, now)
    }

    /// Starts an action (`pending`) with the lease its affordance declares.
    pub fn start_with_lease(
        &mut self,
        name: &str,
        lease: Duration,
        now: Instant,
    ) -> Result<String, ActionTableError> {
        if name.is_empty() || name.len() > self.limits.max_name {
            return Err(ActionTableError::NameTooLong {
                len: name.len(),
                limit: self.limits.max_name,
            });
        }
        if self.unfinished >= self.limits.max_actions {
            return Err(ActionTableError::TooMany {
                limit: self.limits.max_actions,
            });
        }
        let mut id = self.ids.next_id();
        while self.actions.contains_key(&id) {
            id = self.ids.next_id();
        }
        let action = Action {
            id: id.clone(),
            name: name.to_owned(),
            status: ActionStatus::Pending,
            progress: None,
            output: None,
            error: None,
            cancel_reason: None,
            lease,
            lease_expires: self.detached.then(|| now + lease),
            started_at: now,
            updated_at: now,
            revision: 1,
            times: WallTimes::Clock(self.wall_clock),
        };
        self.actions.insert(id.clone(), action);
        self.unfinished += 1;
        self.record(&id);
        Ok(id)
    }

    /// The action, finished or not, if this table holds it.
    pub fn query(&self, id: &str) -> Result<&Action, ActionTableError> {
        self.actions.get(id).ok_or_else(|| unknown(id))
    }

    /// The action, finished or not: this table's, else as its [`ActionRecords`] last have
    /// it (another replica's; see [`Action::from_record`] for its instants).
    ///
    /// # Errors
    /// [`ActionTableError::Unknown`] when neither has it; [`ActionTableError::Records`] when the
    /// records could not be read.
    pub fn lookup(&self, id: &str, now: Instant) -> Result<Cow<'_, Action>, ActionTableError> {
        if let Some(action) = self.actions.get(id) {
            return Ok(Cow::Borrowed(action));
        }
        let Some(records) = &self.records else {
            return Err(unknown(id));
        };
        match records.read(id)? {
            Some(record) if record.id == id => Ok(Cow::Owned(Action::from_record(record, now))),
            _ => Err(unknown(id)),
        }
    }

    fn unfinished_mut(&mut self, id: &str) -> Result<&mut Action, ActionTableError> {
        if !self.actions.contains_key(id) {
            return Err(self.not_held(id));
        }
        let action = self.actions.get_mut(id).ok_or_else(|| unknown(id))?;
        if action.status.is_terminal() {
            return Err(ActionTableError::Finished {
                id: action.id.clone(),
                status: action.status,
            });
        }
        Ok(action)
    }

    /// `pending` → `running` (already running: nothing changes).
    pub fn run(&mut self, id: &str, now: Instant) -> Result<(), ActionTableError> {
        let action = self.unfinished_mut(id)?;
        action.status = ActionStatus::Running;
        action.touch(now);
        self.record(id);
        Ok(())
    }

    /// Reports progress (0 to 1, never lower than before) and optionally a partial
    /// output; a pending action becomes running.
    pub fn progress(
        &mut self,
        id: &str,
        progress: f64,
        partial_output: Option<Value>,
        now: Instant,
    ) -> Result<(), ActionTableError> {
        let action = self.unfinished_mut(id)?;
        if !(0.0..=1.0).contains(&progress) {
            return Err(ActionTableError::ProgressOutOfRange {
                id: action.id.clone(),
                progress,
            });
        }
        if let Some(previous) = action.progress {
            if progress < previous {
                return Err(ActionTableError::ProgressDecreased {
                    id: action.id.clone(),
                    previous,
                    got: progress,
                });
            }
        }
        action.status = ActionStatus::Running;
        action.progress = Some(progress);
        if partial_output.is_some() {
            action.output = partial_output;
        }
        action.touch(now);
        self.record(id);
        Ok(())
    }

    /// Terminal: completed with this output (progress becomes 1).
    pub fn complete(
        &mut self,
        id: &str,
        output: Option<Value>,
        now: Instant,
    ) -> Result<(), ActionTableError> {
        let action = self.unfinished_mut(id)?;
        action.progress = Some(1.0);
        action.output = output;
        self.finish(id, ActionStatus::Completed, now);
        Ok(())
    }

    /// Terminal: failed with this problem.
    pub fn fail(
        &mut self,
        id: &str,
        problem: Problem,
        now: Instant,
    ) -> Result<(), ActionTableError> {
        let action = self.unfinished_mut(id)?;
        action.error = Some(problem);
        self.finish(id, ActionStatus::Failed, now);
        Ok(())
    }

    /// Another replica answered the action `id`, which this table runs or ran, while this
    /// one was cut off from the shared records past the action's lease (its runner was
    /// taken for stopped, and the records hold that replica's terminal answer, which
    /// outlived any this table gave meanwhile): the table lets go of the action without
    /// recording anything, so that it is answered from the records here as on every other
    /// replica. An unfinished one's work is to stop: [`ActionEvent::EndedElsewhere`] tells
    /// the driver.
    ///
    /// # Errors
    /// [`ActionTableError::Unknown`] when the table does not hold it.
    pub fn ended_elsewhere(&mut self, id: &str) -> Result<(), ActionTableError> {
        let action = self.actions.remove(id).ok_or_else(|| unknown(id))?;
        if action.status.is_terminal() {
            // Not forgotten with the finished ones later: that would forget the records'.
            self.finished.retain(|finished| finished != id);
        } else {
            self.unfinished = self.unfinished.saturating_sub(1);
            self.events
                .push_back(ActionEvent::EndedElsewhere { id: id.to_owned() });
        }
        Ok(())
    }

    /// Terminal: cancelled at the caller's request; [`ActionEvent::Cancelled`] tells the
    /// driver to stop the work.
    pub fn cancel(&mut self, id: &str, now: Instant) -> Result<(), ActionTableError> {
        self.cancel_for(id, CancelReason::Requested, now)
    }

    fn cancel_for(
        &mut self,
        id: &str,
        reason: CancelReason,
        now: Instant,
    ) -> Result<(), ActionTableError> {
        let action = self.unfinished_mut(id)?;
        action.cancel_reason = Some(reason);
        let detail = match reason {
            CancelReason::Requested => "cancelled by the caller",
            CancelReason::LeaseExpired => {
                "cancelled: the caller did not come back within the lease"
            }
        };
        action.error = Some(
            Problem::new("urn:concord:interact:cancelled")
                .with_title("Action cancelled")
                .with_detail(detail),
        );
        self.finish(id, ActionStatus::Cancelled, now);
        self.events.push_back(ActionEvent::Cancelled {
            id: id.to_owned(),
            reason,
        });
        Ok(())
    }

    fn finish(&mut self, id: &str, status: ActionStatus, now: Instant) {
        if let Some(action) = self.actions.get_mut(id) {
            action.status = status;
            action.touch(now);
            action.lease_expires = None;
            self.unfinished = self.unfinished.saturating_sub(1);
            self.finished.push_back(action.id.clone());
        }
        self.record(id);
        while self.finished.len() > self.limits.finished_actions {
            if let Some(old) = self.finished.pop_front() {
                self.actions.remove(&old);
                self.forget_record(&old);
            }
        }
    }

    /// Tells the records, if any, that the table forgot the finished action `id`.
    fn forget_record(&mut self, id: &str) {
        if let Some(Err(error)) = self.records.as_ref().map(|records| records.forget(id)) {
            self.events.push_back(ActionEvent::NotRecorded {
                id: id.to_owned(),
                error,
            });
        }
    }

    /// The caller's connection dropped: every unfinished action's lease starts now.
    pub fn detach(&mut self, now: Instant) {
        self.detached = true;
        for action in self.actions.values_mut() {
            if !action.status.is_terminal() {
                action.lease_expires = Some(now + action.lease);
            }
        }
    }

    /// One action's caller detached (a node-wide table serving many sessions): its lease
    /// starts now, as [`ActionTable::detach`] starts every lease.
    pub fn detach_action(&mut self, id: &str, now: Instant) -> Result<(), ActionTableError> {
        let action = self.unfinished_mut(id)?;
        action.lease_expires = Some(now + action.lease);
        Ok(())
    }

    /// The caller is back: leases stop running.
    pub fn attach(&mut self) {
        self.detached = false;
        for action in self.actions.values_mut() {
            action.lease_expires = None;
        }
    }

    /// Whether the caller is detached.
    pub fn is_detached(&self) -> bool {
        self.detached
    }

    /// When the next lease runs out.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.actions.values().filter_map(|a| a.lease_expires).min()
    }

    /// Cancels every action whose lease ran out by `now` ([`CancelReason::LeaseExpired`]).
    pub fn handle_timeout(&mut self, now: Instant) {
        let expired: Vec<String> = self
            .actions
            .values()
            .filter(|a| a.lease_expires.is_some_and(|t| t <= now))
            .map(|a| a.id.clone())
            .collect();
        for id in expired {
            // Only unfinished actions have a lease, so this cannot fail.
            let _ = self.cancel_for(&id, CancelReason::LeaseExpired, now);
        }
    }

    /// Answers a caller's `queryaction` or `cancelaction` request with the action's status
    /// (a `cancelaction` cancels it first). The error's [`ActionTableError::to_problem`] makes
    /// the error response.
    pub fn respond(
        &mut self,
        request: &Message,
        now: Instant,
    ) -> Result<Message, ActionTableError> {
        let Some(id) = request
            .action_id
            .as_deref()
            .filter(|_| request.message_type == MessageType::Request)
        else {
            return Err(ActionTableError::NotAnActionRequest);
        };
        match request.operation {
            Operation::QueryAction => {}
            Operation::CancelAction => self.cancel(id, now)?,
            _ => return Err(ActionTableError::NotAnActionRequest),
        }
        Ok(self.lookup(id, now)?.to_message(
            MessageType::Response,
            request.operation,
            &request.correlation_id,
        ))
    }

    /// How many actions are unfinished.
    pub fn unfinished(&self) -> usize {
        self.unfinished
    }

    /// The next thing the driver must act on.
    pub fn poll_event(&mut self) -> Option<ActionEvent> {
        self.events.pop_front()
    }
}

fn unknown(id: &str) -> ActionTableError {
    ActionTableError::Unknown {
        id: id.chars().take(64).collect(),
    }
}

/// The caller's view of its long-running actions, fed with the provider's status messages
/// (`invokeaction` notifications, `queryaction`/`cancelaction` responses). It refuses what
/// the provider must not send: progress going down, a status going backwards, anything
/// after the terminal status.
///
/// Bounded like the provider's table: `Limits::max_actions` unfinished actions,
/// `Limits::finished_actions` finished ones kept.
#[derive(Debug)]
pub struct ActionTracker {
    limits: Limits,
    actions: BTreeMap<String, Action>,
    finished: VecDeque<String>,
}

impl ActionTracker {
    /// An empty tracker.
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            actions: BTreeMap::new(),
            finished: VecDeque::new(),
        }
    }

    /// Applies a status message from the provider; returns the action as it now stands.
    pub fn observe(
        &mut self,
        message: &Message,
        now: Instant,
    ) -> Result<&Action, ActionTableError> {
        let id = message
            .action_id
            .as_deref()
            .ok_or(ActionTableError::MissingActionId(
                message.operation.as_str(),
            ))?;
        if !self.actions.contains_key(id) {
            let unfinished = self.actions.len().saturating_sub(self.finished.len());
            if unfinished >= self.limits.max_actions {
                return Err(ActionTableError::TooMany {
                    limit: self.limits.max_actions,
                });
            }
            self.actions.insert(
                id.to_owned(),
                Action {
                    id: id.to_owned(),
                    name: message.name.clone().unwrap_or_default(),
                    status: ActionStatus::Pending,
                    progress: None,
                    output: None,
                    error: None,
                    cancel_reason: None,
                    lease: self.limits.action_lease,
                    lease_expires: None,
                    started_at: now,
                    updated_at: now,
                    revision: 0,
                    times: WallTimes::Clock(None),
                },
            );
        }
        let action = self.actions.get_mut(id).ok_or_else(|| unknown(id))?;
        if action.status.is_terminal() {
            return Err(ActionTableError::Finished {
                id: action.id.clone(),
                status: action.status,
            });
        }
        let status = message.status.unwrap_or(if message.progress.is_some() {
            ActionStatus::Running
        } else {
            action.status
        });
        if status == ActionStatus::Pending && action.status == ActionStatus::Running {
            return Err(ActionTableError::InvalidTransition {
                id: action.id.clone(),
                from: action.status,
                to: status,
            });
        }
        if let Some(progress) = message.progress {
            if !(0.0..=1.0).contains(&progress) {
                return Err(ActionTableError::ProgressOutOfRange {
                    id: action.id.clone(),
                    progress,
                });
            }
            if let Some(previous) = action.progress.filter(|p| progress < *p) {
                return Err(ActionTableError::ProgressDecreased {
                    id: action.id.clone(),
                    previous,
                    got: progress,
                });
            }
            action.progress = Some(progress);
        }
        if message.output.is_some() {
            action.output = message.output.clone();
        }
        if message.error.is_some() {
            action.error = message.error.clone();
        }
        action.status = status;
        action.touch(now);
        if status.is_terminal() {
            self.finished.push_back(id.to_owned());
            while self.finished.len() > self.limits.finished_actions {
                if let Some(old) = self.finished.pop_front() {
                    self.actions.remove(&old);
                }
            }
        }
        self.actions.get(id).ok_or_else(|| unknown(id))
    }

    /// An action seen so far.
    pub fn get(&self, id: &str) -> Option<&Action> {
        self.actions.get(id)
    }

    /// Forgets an action; whether it was known.
    pub fn forget(&mut self, id: &str) -> bool {
        self.finished.retain(|f| f != id);
        self.actions.remove(id).is_some()
    }
}
