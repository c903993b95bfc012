//! [`DirectoryState`]: what a directory holds, in memory, and every answer a
//! [`DirectoryStore`](crate::DirectoryStore) reads from it. [`MemoryDirectoryStore`](crate::MemoryDirectoryStore)
//! is one behind a lock; a store shared by replicas (a log every replica applies, as
//! `concord-nats` keeps on a stream) applies its log to one of its own and reads from it,
//! so both decide and answer alike.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Bound;

use crate::capability::CapabilityKey;
use crate::event::ThingEvent;
use crate::store::{Entry, EventsAfter, Expect, Holder, Outcome, Page, Removal, UnixMillis, Write};

/// Entries with their capability index and the latest events, as of the event `latest`.
///
/// Every change is made whole by one method call: a caller holding it behind a lock never
/// leaves half of one.
#[derive(Debug, Default)]
pub struct DirectoryState {
    entries: BTreeMap<String, Entry>,
    index: BTreeMap<CapabilityKey, BTreeSet<String>>,
    keys: BTreeMap<String, Vec<CapabilityKey>>,
    events: VecDeque<ThingEvent>,
    latest: u64,
}

impl DirectoryState {
    /// Nothing held, no event yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The latest event id (0: none), or the latest position [`advance_to`](Self::advance_to)
    /// set.
    pub fn latest(&self) -> u64 {
        self.latest
    }

    /// Moves the latest position to `id` with no event (a log position that carried none
    /// this state can use); never backwards.
    pub fn advance_to(&mut self, id: u64) {
        self.latest = self.latest.max(id);
    }

    /// Forgets the events held (their ids left the log): a reader asking from before the
    /// next one is told of the gap.
    pub fn forget_events(&mut self) {
        self.events.clear();
    }

    /// Why `write` may not be made now, if it may not: the entry is not at the revision it
    /// expects ([`Outcome::Conflict`]), or its admission refuses it ([`Outcome::Full`],
    /// [`Outcome::HolderFull`]).
    pub fn refusal(&self, write: &Write<'_>) -> Option<Outcome> {
        if !self.matches(write.entry.id.as_str(), write.expect) {
            return Some(Outcome::Conflict);
        }
        let admission = write.admission?;
        let total = u64::try_from(self.entries.len()).unwrap_or(u64::MAX);
        let held = admission
            .holders()
            .map(|holder| self.held(Some(holder)))
            .max()
            .unwrap_or(0);
        admission.refusal(total, held)
    }

    /// Why `removal` may not be made now, if it may not ([`Outcome::Conflict`]).
    pub fn removal_refusal(&self, removal: &Removal<'_>) -> Option<Outcome> {
        (!self.matches(removal.id, Expect::Revision(removal.expect))).then_some(Outcome::Conflict)
    }

    /// Holds `entry` (its `revision` as given) with its capability `keys`, replacing what
    /// was held under its id, and records `event` (keeping the latest `retention` events).
    pub fn put(
        &mut self,
        entry: Entry,
        keys: Vec<CapabilityKey>,
        event: ThingEvent,
        retention: usize,
    ) {
        let id = entry.id.clone();
        self.unindex(&id);
        for key in &keys {
            self.index
                .entry(key.clone())
                .or_default()
                .insert(id.clone());
        }
        self.keys.insert(id.clone(), keys);
        self.entries.insert(id, entry);
        self.record(event, retention);
    }

    /// Forgets the entry `id` and records `event` (keeping the latest `retention` events).
    pub fn delete(&mut self, id: &str, event: ThingEvent, retention: usize) {
        self.entries.remove(id);
        self.unindex(id);
        self.record(event, retention);
    }

    /// The entry `id`.
    pub fn entry(&self, id: &str) -> Option<Entry> {
        self.entries.get(id).cloned()
    }

    /// [`DirectoryStore::page`](crate::DirectoryStore::page).
    pub fn page(&self, offset: u64, limit: u64, now: UnixMillis) -> Page {
        let live = || self.entries.values().filter(|entry| !entry.expired_at(now));
        let total = u64::try_from(live().count()).unwrap_or(u64::MAX);
        let entries = live()
            .skip(usize::try_from(offset).unwrap_or(usize::MAX))
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .cloned()
            .collect();
        Page::new(entries, total, self.latest)
    }

    /// [`DirectoryStore::scan`](crate::DirectoryStore::scan).
    pub fn scan(&self, after: Option<&str>, limit: u64, now: UnixMillis) -> Vec<Entry> {
        let from = after.map_or(Bound::Unbounded, |id| Bound::Excluded(id.to_owned()));
        self.entries
            .range((from, Bound::Unbounded))
            .map(|(_, entry)| entry)
            .filter(|entry| !entry.expired_at(now))
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .cloned()
            .collect()
    }

    /// [`DirectoryStore::count`](crate::DirectoryStore::count).
    pub fn count(&self, holder: Option<Holder<'_>>) -> (u64, u64) {
        let total = u64::try_from(self.entries.len()).unwrap_or(u64::MAX);
        (total, self.held(holder))
    }

    /// [`DirectoryStore::expired`](crate::DirectoryStore::expired).
    pub fn expired(&self, now: UnixMillis, max: usize) -> Vec<(String, u64)> {
        let mut expired: Vec<(UnixMillis, &Entry)> = self
            .entries
            .values()
            .filter_map(|entry| entry.expires.filter(|at| *at <= now).map(|at| (at, entry)))
            .collect();
        expired.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.id.cmp(&b.1.id)));
        expired
            .into_iter()
            .take(max)
            .map(|(_, entry)| (entry.id.clone(), entry.revision))
            .collect()
    }

    /// [`DirectoryStore::events_after`](crate::DirectoryStore::events_after).
    pub fn events_after(&self, after: u64, max: usize) -> EventsAfter {
        let events = self
            .events
            .iter()
            .filter(|event| event.id > after)
            .take(max)
            .cloned()
            .collect();
        EventsAfter::new(
            events,
            self.events.front().map(|event| event.id),
            self.latest,
        )
    }

    /// [`DirectoryStore::find`](crate::DirectoryStore::find).
    pub fn find(&self, keys: &[CapabilityKey], now: UnixMillis, limit: u64) -> Vec<String> {
        let Some((first, rest)) = keys.split_first() else {
            return Vec::new();
        };
        let Some(candidates) = self.index.get(first) else {
            return Vec::new();
        };
        candidates
            .iter()
            .filter(|id| {
                rest.iter().all(|key| {
                    self.index
                        .get(key)
                        .is_some_and(|ids| ids.contains(id.as_str()))
                })
            })
            .filter(|id| {
                self.entries
                    .get(id.as_str())
                    .is_some_and(|entry| !entry.expired_at(now))
            })
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .cloned()
            .collect()
    }

    fn matches(&self, id: &str, expect: Expect) -> bool {
        match (self.entries.get(id), expect) {
            (None, Expect::Absent) => true,
            (Some(entry), Expect::Revision(revision)) => entry.revision == revision,
            _ => false,
        }
    }

    /// How many entries `holder` holds.
    fn held(&self, holder: Option<Holder<'_>>) -> u64 {
        let held = self
            .entries
            .values()
            .filter(|entry| match holder {
                Some(Holder::Owner(did)) => entry.owner.as_deref() == Some(did),
                Some(Holder::Client(client)) => entry.client.as_deref() == Some(client),
                None => false,
            })
            .count();
        u64::try_from(held).unwrap_or(u64::MAX)
    }

    fn unindex(&mut self, id: &str) {
        for key in self.keys.remove(id).unwrap_or_default() {
            if let Some(ids) = self.index.get_mut(&key) {
                ids.remove(id);
                if ids.is_empty() {
                    self.index.remove(&key);
                }
            }
        }
    }

    fn record(&mut self, event: ThingEvent, retention: usize) {
        self.latest = self.latest.max(event.id);
        self.events.push_back(event);
        while self.events.len() > retention {
            self.events.pop_front();
        }
    }
}
