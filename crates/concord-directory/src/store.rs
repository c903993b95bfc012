//! [`DirectoryStore`]: the seam behind which a directory's state sits (in memory, SQLite in
//! `concord-store`, …), with its contract; [`crate::conformance`] checks it.

use serde_json::Value;

use crate::capability::CapabilityKey;
use crate::event::{EventKind, ThingEvent};

/// Unix time in milliseconds: how stores keep instants.
pub type UnixMillis = i64;

/// One registered TD and what the directory knows about its registration.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Entry {
    /// The TD's `id`, or the local `urn:uuid:` id given to an anonymous TD.
    pub id: String,
    /// The TD as registered, without `registration` (the directory writes that member).
    pub td: Value,
    /// Whether the TD came without an `id` (the directory adds `id` when it serves it).
    pub anonymous: bool,
    /// When it was first registered.
    pub created: UnixMillis,
    /// When it was last written (created, replaced, patched or refreshed).
    pub modified: UnixMillis,
    /// When its registration expires, if it does.
    pub expires: Option<UnixMillis>,
    /// Its relative expiry as the producer gave it (or the default), in milliseconds.
    pub ttl_ms: Option<u64>,
    /// The DID that registered it (or took it over as the DID the TD names), when the
    /// caller proved one; only it (or the DID the TD names) may change it.
    pub owner: Option<String>,
    /// The client address that registered it (a quota of every caller; who may change an
    /// entry registered without a DID).
    pub client: Option<String>,
    /// The size of `td` as JSON, in bytes.
    pub size: u64,
    /// The id of the event of its last write (assigned by the store).
    pub revision: u64,
}

impl Entry {
    /// An entry for `td` under `id`, registered at time 0 by no one, not expiring, with
    /// `size` the length of `td` as JSON (set the other fields as needed).
    pub fn new(id: impl Into<String>, td: Value) -> Self {
        let size = u64::try_from(td.to_string().len()).unwrap_or(u64::MAX);
        Self::sized(id, td, size)
    }

    /// An entry for `td` under `id` whose JSON is `size` bytes long (as a store reads it
    /// back, without serializing `td` again), registered at time 0 by no one, not
    /// expiring (set the other fields as needed).
    pub fn sized(id: impl Into<String>, td: Value, size: u64) -> Self {
        Self {
            id: id.into(),
            td,
            anonymous: false,
            created: 0,
            modified: 0,
            expires: None,
            ttl_ms: None,
            owner: None,
            client: None,
            size,
            revision: 0,
        }
    }

    /// Whether its registration has expired at `now`.
    pub fn expired_at(&self, now: UnixMillis) -> bool {
        self.expires.is_some_and(|expires| expires <= now)
    }
}

/// What a write expects to find, so that a read-decide-write cannot overwrite a change it
/// did not see (across processes sharing a store).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Expect {
    /// No entry with this id.
    Absent,
    /// The entry at this revision.
    Revision(u64),
}

/// One write: an entry, its capability index and its event, stored atomically.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Write<'a> {
    /// The entry (its `revision` is ignored: the store sets it to the new event's id).
    pub entry: &'a Entry,
    /// Its capability-search keys (replacing any held for this id).
    pub keys: &'a [CapabilityKey],
    /// What the store must find, else it writes nothing and answers a conflict.
    pub expect: Expect,
    /// The event recorded with it.
    pub kind: EventKind,
    /// The event's diff: the TD created, or the merge patch applied.
    pub diff: Option<&'a Value>,
    /// How many events to keep (the oldest beyond go in the same write).
    pub event_retention: usize,
    /// The capacity a new registration must fit, checked by the store in the same atomic
    /// step as the write (`None`: no check, e.g. a replacement).
    pub admission: Option<Admission<'a>>,
}

/// The capacity a new registration must fit: at most `max_entries` entries in all
/// (expired ones not yet removed included) and at most `max_per_holder` held by `holder`
/// and by `also` each (a signed write counts against its DID and its client address).
/// The store counts and writes in one atomic step, so writers sharing it (threads, or
/// processes on one file) cannot both pass a limit with room for one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Admission<'a> {
    /// The most entries the store may hold once the write is done.
    pub max_entries: u64,
    /// Whose entries count against `max_per_holder` (`None`: no per-holder bound).
    pub holder: Option<Holder<'a>>,
    /// A second holder bound by `max_per_holder` too (`None`: only `holder`).
    pub also: Option<Holder<'a>>,
    /// The most entries `holder` (and `also`) may hold once the write is done.
    pub max_per_holder: u64,
}

impl<'a> Admission<'a> {
    /// At most `max_entries` in all and `max_per_holder` held by `holder`.
    pub fn new(max_entries: u64, holder: Option<Holder<'a>>, max_per_holder: u64) -> Self {
        Self {
            max_entries,
            holder,
            also: None,
            max_per_holder,
        }
    }

    /// The same admission, with `also` bound by `max_per_holder` too.
    #[must_use]
    pub fn also(mut self, also: Option<Holder<'a>>) -> Self {
        self.also = also;
        self
    }

    /// The holders bound by `max_per_holder`: `holder`, then `also`.
    pub fn holders(&self) -> impl Iterator<Item = Holder<'a>> {
        self.holder.into_iter().chain(self.also)
    }

    /// What a store holding `total` entries, `held` of them by the holder that holds the
    /// most of the [`holders`](Self::holders), answers: `None` when one more fits.
    pub fn refusal(&self, total: u64, held: u64) -> Option<Outcome> {
        if total >= self.max_entries {
            Some(Outcome::Full)
        } else if self.holder.is_some() && held >= self.max_per_holder {
            Some(Outcome::OverQuota)
        } else {
            None
        }
    }
}

/// A removal: the entry `id`, if still at `expect`, and its `thing_deleted` event.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Removal<'a> {
    /// The entry's id.
    pub id: &'a str,
    /// The revision it must be at.
    pub expect: u64,
    /// When (the event's time).
    pub at: UnixMillis,
    /// How many events to keep.
    pub event_retention: usize,
}

impl<'a> Write<'a> {
    /// A write of `entry` with `keys`, expecting `expect`, recording a `kind` event with
    /// `diff`, keeping `event_retention` events.
    pub fn new(
        entry: &'a Entry,
        keys: &'a [CapabilityKey],
        expect: Expect,
        kind: EventKind,
        diff: Option<&'a Value>,
        event_retention: usize,
    ) -> Self {
        Self {
            entry,
            keys,
            expect,
            kind,
            diff,
            event_retention,
            admission: None,
        }
    }

    /// This write, made only if the store has room for it ([`Admission`]).
    pub fn admitting(mut self, admission: Admission<'a>) -> Self {
        self.admission = Some(admission);
        self
    }
}

impl<'a> Removal<'a> {
    /// A removal of `id` at revision `expect`, at `at`, keeping `event_retention` events.
    pub fn new(id: &'a str, expect: u64, at: UnixMillis, event_retention: usize) -> Self {
        Self {
            id,
            expect,
            at,
            event_retention,
        }
    }
}

/// What a write or removal did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Done; the id of its event (the entry's new revision).
    Done(u64),
    /// The entry was not as expected (another write came first): nothing was written.
    Conflict,
    /// The store holds [`Admission::max_entries`] entries already: nothing was written.
    Full,
    /// The holder holds [`Admission::max_per_holder`] entries already: nothing was written.
    OverQuota,
}

/// Who holds registrations, for the per-registrant quota.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Holder<'a> {
    /// Entries registered by this DID.
    Owner(&'a str),
    /// Entries registered from this client address, with a DID or without.
    Client(&'a str),
}

/// One page of entries in code-point order of id, with the directory's size and state.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Page {
    /// The entries, unexpired at the time asked.
    pub entries: Vec<Entry>,
    /// How many unexpired entries there are in all.
    pub total: u64,
    /// The id of the latest event (0 before any): it changes whenever the content does.
    pub revision: u64,
}

impl Page {
    /// A page.
    pub fn new(entries: Vec<Entry>, total: u64, revision: u64) -> Self {
        Self {
            entries,
            total,
            revision,
        }
    }
}

/// Events after an id, and the range the store still holds.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct EventsAfter {
    /// The events, oldest first.
    pub events: Vec<ThingEvent>,
    /// The oldest event id held (`None` when none is).
    pub oldest: Option<u64>,
    /// The id of the latest event ever recorded (0 before any).
    pub latest: u64,
}

impl EventsAfter {
    /// Events with the store's range.
    pub fn new(events: Vec<ThingEvent>, oldest: Option<u64>, latest: u64) -> Self {
        Self {
            events,
            oldest,
            latest,
        }
    }
}

/// A store could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreFailure {
    /// The backend failed (I/O, SQLite, a lost connection).
    #[error("directory store: {operation}: {message}")]
    Backend {
        /// What it was doing.
        operation: &'static str,
        /// The backend's error.
        message: String,
    },
    /// The backend cannot be reached for now (a shared store whose servers are away, or not
    /// reached yet): the directory answers 503 with `Retry-After` and the same request may
    /// pass later.
    #[error("directory store: {operation}: unavailable: {reason}")]
    Unavailable {
        /// What it was doing.
        operation: &'static str,
        /// Why it cannot be reached.
        reason: String,
    },
    /// A stored row cannot be read back.
    #[error("directory store: entry `{id}` is corrupt: {reason}")]
    Corrupt {
        /// The entry (or event) id.
        id: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Where a directory's state sits. Synchronous (an async caller uses `spawn_blocking`),
/// shared as `Arc<dyn DirectoryStore>`.
///
/// # Contract
///
/// - Every [`write`](Self::write) and [`remove`](Self::remove) is atomic with its event:
///   the entry, its capability keys and the event are all stored or none is, and it is
///   durable when it returns `Ok` (a crash after it does not lose it).
/// - Event ids are assigned by the store, strictly increasing, never reused (not even
///   after the events are dropped by retention); an entry's `revision` is the id of the
///   event of its last write. A write or removal whose [`Expect`] does not hold writes
///   nothing and answers [`Outcome::Conflict`].
/// - A write with an [`Admission`] counts the entries held (in all, and by its holder) in
///   the same atomic step as the write, and writes nothing when they are at its bounds
///   ([`Outcome::Full`], [`Outcome::OverQuota`]): writers racing on one store never pass
///   a bound with room for fewer of them.
/// - At most `event_retention` events are kept: each write drops the oldest beyond it.
/// - [`page`](Self::page) lists unexpired entries in ascending code-point (UTF-8 byte)
///   order of id, with their total and the latest event id; [`scan`](Self::scan) in the
///   same order from after a given id.
/// - [`find`](Self::find) answers the ids of unexpired entries holding every key, in
///   code-point order, at most `limit`.
pub trait DirectoryStore: Send + Sync + std::fmt::Debug {
    /// The entry `id`, expired or not.
    ///
    /// # Errors
    /// When it could not be read.
    fn entry(&self, id: &str) -> Result<Option<Entry>, StoreFailure>;

    /// The entries of `ids` that are held, expired or not, in the order of `ids` (by
    /// default one [`entry`](Self::entry) each; a backend reads them in one go).
    ///
    /// # Errors
    /// When they could not be read.
    fn entries(&self, ids: &[String]) -> Result<Vec<Entry>, StoreFailure> {
        let mut entries = Vec::with_capacity(ids.len());
        for id in ids {
            entries.extend(self.entry(id)?);
        }
        Ok(entries)
    }

    /// Stores an entry with its keys and event, if `expect` holds.
    ///
    /// # Errors
    /// When it could not be written.
    fn write(&self, write: &Write<'_>) -> Result<Outcome, StoreFailure>;

    /// Removes an entry with its keys and records its `thing_deleted` event, if it is at
    /// the expected revision.
    ///
    /// # Errors
    /// When it could not be written.
    fn remove(&self, removal: &Removal<'_>) -> Result<Outcome, StoreFailure>;

    /// Up to `limit` unexpired entries from `offset`, in code-point order of id.
    ///
    /// # Errors
    /// When they could not be read.
    fn page(&self, offset: u64, limit: u64, now: UnixMillis) -> Result<Page, StoreFailure>;

    /// Up to `limit` unexpired entries whose ids come after `after` (from the first when
    /// `None`), in code-point order of id: a walk over every entry that a write during it
    /// cannot make skip an entry it did not touch (as an offset would, when an entry before
    /// it comes or goes).
    ///
    /// # Errors
    /// When they could not be read.
    fn scan(
        &self,
        after: Option<&str>,
        limit: u64,
        now: UnixMillis,
    ) -> Result<Vec<Entry>, StoreFailure>;

    /// How many entries are held in all (expired ones not yet removed included), and by
    /// `holder`.
    ///
    /// # Errors
    /// When they could not be counted.
    fn count(&self, holder: Option<Holder<'_>>) -> Result<(u64, u64), StoreFailure>;

    /// Up to `max` entries expired at `now`, as (id, revision), in order of expiry.
    ///
    /// # Errors
    /// When they could not be read.
    fn expired(&self, now: UnixMillis, max: usize) -> Result<Vec<(String, u64)>, StoreFailure>;

    /// Up to `max` events with ids above `after`, oldest first, and the range held.
    ///
    /// # Errors
    /// When they could not be read.
    fn events_after(&self, after: u64, max: usize) -> Result<EventsAfter, StoreFailure>;

    /// The ids of unexpired entries holding every key of `keys` (at least one), in
    /// code-point order, at most `limit`.
    ///
    /// # Errors
    /// When they could not be read.
    fn find(
        &self,
        keys: &[CapabilityKey],
        now: UnixMillis,
        limit: u64,
    ) -> Result<Vec<String>, StoreFailure>;
}
