//! Action records: where an [`ActionTable`](crate::ActionTable) writes each change of its
//! actions, and where it reads an action it does not hold, so that the replicas of one agent
//! sharing a backend (a key-value bucket of a message broker) can answer a query for an action
//! another replica runs. [`LocalActionRecords`] is the in-memory backend.
//!
//! The table stays the one state machine of the rules (progress never lower, one terminal
//! state, leases): records only copy what it decided.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::actions::CancelReason;
use crate::message::ActionStatus;
use crate::problem::Problem;

/// An action as the table last wrote it: what a query needs, its times by the wall clock
/// (instants do not cross processes).
#[derive(Debug, Clone, PartialEq)]
pub struct ActionRecord {
    /// The action id.
    pub id: String,
    /// The action's affordance name.
    pub name: String,
    /// Its status.
    pub status: ActionStatus,
    /// The latest progress, 0 to 1.
    pub progress: Option<f64>,
    /// The output: partial while running, final once completed.
    pub output: Option<Value>,
    /// Why it failed or was cancelled.
    pub error: Option<Problem>,
    /// Why it was cancelled.
    pub cancel_reason: Option<CancelReason>,
    /// How long it survives a detached caller.
    pub lease: Duration,
    /// The number of this change of the action, from 1 (its creation), one more at each
    /// change: a later change has a higher revision.
    pub revision: u64,
    /// When it was requested, by the wall clock of the process running it (whole
    /// milliseconds; `None` from a table given no wall clock,
    /// [`ActionTable::with_wall_clock`](crate::ActionTable::with_wall_clock)): what
    /// another replica answers as its `timeRequested`.
    pub requested_at: Option<SystemTime>,
    /// When it reached its terminal state, likewise (`None` while unfinished).
    pub ended_at: Option<SystemTime>,
}

/// Why [`ActionRecords`] could not write or read a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ActionRecordsError {
    /// The backend could not be reached or refused.
    #[error("the {backend} action records could not {operation} action {id:?}: {reason}")]
    Unavailable {
        /// The backend (`"memory"`, `"nats-kv"`, …).
        backend: &'static str,
        /// `"write"`, `"read"` or `"forget"`.
        operation: &'static str,
        /// The action id (its first 64 characters).
        id: String,
        /// What it said.
        reason: String,
    },
}

/// Where an [`ActionTable`](crate::ActionTable) records its actions.
///
/// # Contract
///
/// What a backend may get wrong, and what the table then does:
/// - **Stale or lost records**: [`read`](Self::read) may answer an earlier revision than the
///   latest written (a replica's copy lagging), or `None` for an action it lost or forgot
///   (its own retention): a query then answers an earlier state of the action, or "unknown
///   action", as it would for an action forgotten after `Limits::finished_actions`.
/// - **Failures**: a [`write`](Self::write) that fails changes nothing at the table (the
///   change stands; the table reports [`ActionEvent::NotRecorded`](crate::ActionEvent)); a
///   [`read`](Self::read) that fails answers [`ActionTableError::Records`](crate::ActionTableError)
///   (503).
///
/// What it must never get wrong (`conformance::action_records` checks each):
/// - answer a record for an id never written, or another id's record;
/// - go back: once it holds a revision of an action, never answer a lower one, whatever
///   order writes arrive in (writes of one action may race on the network) — so a terminal
///   record is never replaced by an unfinished one;
/// - lose a record between a write that returned `Ok` and a read from the same handle, short
///   of a [`forget`](Self::forget) or its own retention (which must outlive the action).
///
/// Called synchronously, under the lock of the table's owner, at each change of an action
/// (created, running, progress, terminal, cancelled, lease expired): a backend on the network
/// answers quickly or fails. One that cannot (a broker a round trip away) keeps a local copy
/// it reads from (a key-value watch) and sends its writes from a queue of its own: the
/// contract above allows the lag and the lost write this costs, never a record going back.
/// Action ids must be unique over every table sharing the records, and random: the id is
/// all a caller needs to query an action on any replica, so it must not be guessable.
pub trait ActionRecords: Send + Sync + std::fmt::Debug {
    /// Records the action as it now stands.
    ///
    /// # Errors
    /// [`ActionRecordsError::Unavailable`] when it could not be written.
    fn write(&self, record: &ActionRecord) -> Result<(), ActionRecordsError>;

    /// The latest record of the action `id` it holds, if any.
    ///
    /// # Errors
    /// [`ActionRecordsError::Unavailable`] when it could not be read.
    fn read(&self, id: &str) -> Result<Option<ActionRecord>, ActionRecordsError>;

    /// The table forgot the finished action `id` (past `Limits::finished_actions`): a backend
    /// may forget it too, or keep it for its own retention.
    ///
    /// # Errors
    /// [`ActionRecordsError::Unavailable`] when it could not be told.
    fn forget(&self, id: &str) -> Result<(), ActionRecordsError>;
}

/// The in-memory [`ActionRecords`]: one record per action, the highest revision kept, until
/// the table that wrote it forgets it. Share one between the tables of one process (nodes
/// in one test); each table bounds what it wrote and forgets it.
#[derive(Debug, Default)]
pub struct LocalActionRecords {
    records: Mutex<HashMap<String, ActionRecord>>,
}

impl LocalActionRecords {
    /// No records.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many records it holds.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, ActionRecord>> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ActionRecords for LocalActionRecords {
    fn write(&self, record: &ActionRecord) -> Result<(), ActionRecordsError> {
        let mut records = self.lock();
        match records.get_mut(&record.id) {
            Some(held) if held.revision >= record.revision => {}
            Some(held) => *held = record.clone(),
            None => {
                records.insert(record.id.clone(), record.clone());
            }
        }
        Ok(())
    }

    fn read(&self, id: &str) -> Result<Option<ActionRecord>, ActionRecordsError> {
        Ok(self.lock().get(id).cloned())
    }

    fn forget(&self, id: &str) -> Result<(), ActionRecordsError> {
        self.lock().remove(id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_action_records_pass_the_action_records_conformance_suite() {
        crate::conformance::action_records(&LocalActionRecords::new());
    }

    #[test]
    fn sequential_ids_pass_the_action_ids_conformance_suite() {
        crate::conformance::action_ids(&mut crate::SequentialIds::default(), 128);
    }

    /// Ids that come round again after 100: the suite must catch it.
    #[derive(Debug, Default)]
    struct Wrapping(u64);

    impl crate::ActionIds for Wrapping {
        fn next_id(&mut self) -> String {
            self.0 = (self.0 + 1) % 100;
            format!("a{}", self.0)
        }
    }

    #[test]
    #[should_panic(expected = "was issued before")]
    fn the_action_ids_suite_refuses_ids_that_repeat() {
        crate::conformance::action_ids(&mut Wrapping::default(), 128);
    }

    /// Records that take the last write, whatever its revision: the suite must catch it.
    #[derive(Debug, Default)]
    struct LastWriteWins(Mutex<HashMap<String, ActionRecord>>);

    impl ActionRecords for LastWriteWins {
        fn write(&self, record: &ActionRecord) -> Result<(), ActionRecordsError> {
            let mut records = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            records.insert(record.id.clone(), record.clone());
            Ok(())
        }

        fn read(&self, id: &str) -> Result<Option<ActionRecord>, ActionRecordsError> {
            let records = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            Ok(records.get(id).cloned())
        }

        fn forget(&self, id: &str) -> Result<(), ActionRecordsError> {
            let mut records = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            records.remove(id);
            Ok(())
        }
    }

    #[test]
    #[should_panic(expected = "must never go back")]
    fn the_action_records_suite_refuses_records_that_go_back() {
        crate::conformance::action_records(&LastWriteWins::default());
    }
}
