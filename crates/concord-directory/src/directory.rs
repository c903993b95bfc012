//! [`Directory`]: the operations of the W3C WoT Discovery Things API as decisions over a
//! [`DirectoryStore`], each taking `now` and doing no I/O of its own.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use concord_describe::Validator;
use serde_json::Value;

use crate::capability::{keys_of, CapabilityKind, CapabilityMatches, CapabilityQuery};
use crate::clock::unix_millis;
use crate::diff::merge_diff;
use crate::error::DirectoryError;
use crate::event::{EventKind, ThingEvent};
use crate::limits::{DirectoryLimits, InvalidLimit};
use crate::listing::{ListQuery, Listing};
use crate::search;
use crate::snapshot::SearchCache;
use crate::store::{
    Admission, DirectoryStore, Entry, Expect, Holder, Outcome, Removal, UnixMillis, Write,
};
use crate::td::{self, client_registration, enrich, into_enriched, Incoming};

/// How many expired TDs a creation at the `max_entries` limit purges before it counts again.
const PURGE_ON_FULL: usize = 64;

/// Who registers or changes a TD: the DID it proved (if any) and its client address.
/// An entry registered with a DID can be changed only by that DID; one registered without
/// a DID only from the client address that registered it; either also by the DID the
/// TD itself names, proving itself (which takes the entry over). The quota
/// (`max_entries_per_registrant`) counts by client address and, for a signed write, by
/// DID too (both apply); a registrant with neither (`Registrant::default()`, an embedding
/// that registers its own TDs) is bounded by `max_entries` only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Registrant<'a> {
    /// The DID the caller proved.
    pub did: Option<&'a str>,
    /// The caller's address (an IP address, as the HTTP layer sees it).
    pub client: Option<&'a str>,
}

impl<'a> Registrant<'a> {
    /// A caller with no proved identity, from `client`.
    pub fn client(client: &'a str) -> Self {
        Self {
            did: None,
            client: Some(client),
        }
    }

    /// A caller who proved `did`, from `client`.
    pub fn did(did: &'a str, client: &'a str) -> Self {
        Self {
            did: Some(did),
            client: Some(client),
        }
    }

    /// Whose quotas a new registration by it counts against: its DID and its address.
    fn holders(&self) -> [Option<Holder<'a>>; 2] {
        [self.did.map(Holder::Owner), self.client.map(Holder::Client)]
    }

    fn name(&self) -> String {
        match (self.did, self.client) {
            (Some(did), Some(client)) => format!("DID `{did}` or client `{client}`"),
            (Some(did), None) => format!("DID `{did}`"),
            (None, Some(client)) => format!("client `{client}`"),
            (None, None) => "the caller".to_owned(),
        }
    }
}

/// What a `PUT` did (tdd-things-create-known-td-resp, tdd-things-update-resp).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PutOutcome {
    /// The TD was registered: 201 Created.
    Created,
    /// The TD replaced the one registered: 204 No Content.
    Replaced,
}

impl PutOutcome {
    /// The HTTP status: 201 or 204.
    pub fn status(self) -> u16 {
        match self {
            PutOutcome::Created => 201,
            PutOutcome::Replaced => 204,
        }
    }
}

/// A Thing Description Directory's rules over a store.
#[derive(Debug, Clone)]
pub struct Directory {
    store: Arc<dyn DirectoryStore>,
    limits: DirectoryLimits,
    validator: Validator,
    search: Arc<SearchCache>,
    own_entries_only: bool,
}

impl Directory {
    /// A directory over `store` within `limits`.
    ///
    /// # Errors
    /// When a limit cannot work ([`DirectoryLimits::validate`]).
    pub fn new(
        store: Arc<dyn DirectoryStore>,
        limits: DirectoryLimits,
    ) -> Result<Self, InvalidLimit> {
        limits.validate()?;
        let validator = Validator::new().max_bytes(limits.max_td_bytes);
        Ok(Self {
            store,
            limits,
            validator,
            search: Arc::default(),
            own_entries_only: false,
        })
    }

    /// Whether an agent may write only its own entry: when on, a TD that names a DID (its
    /// `id` is a DID, or its `concord:metaProtocol` carries `concord:did`) is created,
    /// replaced or patched only by a writer who proved that DID
    /// ([`DirectoryError::NotNamedWriter`], 403). Off by default; a directory that
    /// requires signed writes turns it on. TDs that name no DID are unaffected. On or off,
    /// a writer who proved a DID never writes a TD naming another DID (403), and the DID a
    /// registered TD names may always change it, taking it over.
    #[must_use]
    pub fn own_entries_only(mut self, on: bool) -> Self {
        self.own_entries_only = on;
        self
    }

    /// Its limits.
    pub fn limits(&self) -> &DirectoryLimits {
        &self.limits
    }

    /// Its store.
    pub fn store(&self) -> &Arc<dyn DirectoryStore> {
        &self.store
    }

    /// `POST /things`: registers an Anonymous TD (tdd-things-create-anonymous-td) under a
    /// new local id, `urn:uuid:` and a version-4 UUID made of `random`
    /// (tdd-things-create-anonymous-id, tdd-anonymous-td-local-uuid); the id, for the
    /// `Location` header of the 201 answer. A TD with an `id` is refused: it is registered
    /// by `PUT` (tdd-things-create-known-vs-anonymous).
    ///
    /// # Errors
    /// [`DirectoryError::IdOnPost`], [`DirectoryError::TdTooLarge`],
    /// [`DirectoryError::InvalidTd`], [`DirectoryError::InvalidRegistration`], the
    /// capacity refusals ([`DirectoryError::DirectoryFull`],
    /// [`DirectoryError::QuotaExceeded`]), [`DirectoryError::Conflict`] when the id is
    /// taken (draw another), or a store failure.
    pub fn create(
        &self,
        td: &[u8],
        random: [u8; 16],
        who: &Registrant<'_>,
        now: SystemTime,
    ) -> Result<String, DirectoryError> {
        let now = unix_millis(now);
        let incoming = td::read(td, &self.limits, &self.validator, now)?;
        if let Some(id) = incoming.id() {
            return Err(DirectoryError::IdOnPost { id: id.to_owned() });
        }
        self.check_named_writer(&incoming, who)?;
        let id = format!(
            "urn:uuid:{}",
            uuid::Builder::from_random_bytes(random).into_uuid()
        );
        self.store_incoming(&id, incoming, None, who, now, Expect::Absent)?;
        Ok(id)
    }

    /// `PUT /things/{id}`: registers the TD (201) or replaces the one registered (204);
    /// the TD's `id` must be `id` (tdd-things-create-known-td, tdd-things-update). A
    /// replaced TD keeps its creation time and owner; its `thing_updated` event carries
    /// the new TD whole (enriched, as its `thing_created` event would), so that a `null`
    /// inside it is not lost to a computed merge patch. A TD expired but not purged yet is
    /// purged (`thing_deleted`) and the `PUT` is a new registration (201), counted against
    /// the registrant's quota.
    ///
    /// # Errors
    /// [`DirectoryError::IdMismatch`], [`DirectoryError::NotOwner`], the errors of
    /// [`create`](Self::create).
    pub fn put(
        &self,
        id: &str,
        td: &[u8],
        who: &Registrant<'_>,
        now: SystemTime,
    ) -> Result<PutOutcome, DirectoryError> {
        let now = unix_millis(now);
        let incoming = td::read(td, &self.limits, &self.validator, now)?;
        if incoming.id() != Some(id) {
            return Err(DirectoryError::IdMismatch {
                expected: id.to_owned(),
                found: incoming.id().map(str::to_owned),
            });
        }
        self.check_named_writer(&incoming, who)?;
        match self.store.entry(id)? {
            Some(entry) if !entry.expired_at(now) => {
                check_owner(&entry, who)?;
                let expect = Expect::Revision(entry.revision);
                self.store_incoming(id, incoming, Some(&entry), who, now, expect)?;
                Ok(PutOutcome::Replaced)
            }
            held => {
                // An expired TD not purged yet is purged now (its `thing_deleted` event),
                // and this is a new registration, within the registrant's quota.
                if let Some(expired) = held {
                    let removal =
                        Removal::new(id, expired.revision, now, self.limits.event_retention);
                    self.written(id, self.store.remove(&removal)?)?;
                }
                self.store_incoming(id, incoming, None, who, now, Expect::Absent)?;
                Ok(PutOutcome::Created)
            }
        }
    }

    /// `PATCH /things/{id}`: applies an RFC 7396 merge patch to the TD (with its
    /// `registration {ttl | expires}`) and validates the result as a new TD
    /// (tdd-things-update-partial-mergepatch, tdd-things-update-partial-partialtd); an
    /// empty patch `{}` refreshes the registration (`expires` from `ttl` again). The
    /// `thing_updated` event carries the patch.
    ///
    /// # Errors
    /// [`DirectoryError::NotFound`], [`DirectoryError::NotOwner`],
    /// [`DirectoryError::InvalidPatch`], [`DirectoryError::IdMismatch`] when the patch
    /// changes the id, and the validation errors of [`put`](Self::put).
    pub fn patch(
        &self,
        id: &str,
        patch: &[u8],
        who: &Registrant<'_>,
        now: SystemTime,
    ) -> Result<(), DirectoryError> {
        let now = unix_millis(now);
        let entry = self.live(id, now)?;
        check_owner(&entry, who)?;
        if patch.len() > self.limits.max_td_bytes {
            return Err(DirectoryError::TdTooLarge {
                size: patch.len(),
                limit: self.limits.max_td_bytes,
            });
        }
        let patch: Value = match serde_json::from_slice(patch) {
            Ok(patch @ Value::Object(_)) => patch,
            Ok(_) => {
                return Err(DirectoryError::InvalidPatch {
                    reason: "a merge patch of a TD must be a JSON object".to_owned(),
                })
            }
            Err(error) => {
                return Err(DirectoryError::InvalidPatch {
                    reason: error.to_string(),
                })
            }
        };
        let mut patched = entry.td.clone();
        if let (Some(object), Some(registration)) =
            (patched.as_object_mut(), client_registration(&entry))
        {
            object.insert("registration".to_owned(), registration);
        }
        json_patch::merge(&mut patched, &patch);
        let bytes = serde_json::to_vec(&patched).map_err(|error| DirectoryError::InvalidPatch {
            reason: error.to_string(),
        })?;
        let incoming = td::read(&bytes, &self.limits, &self.validator, now)?;
        match incoming.id() {
            None if entry.anonymous => {}
            Some(found) if found == id => {}
            found => {
                return Err(DirectoryError::IdMismatch {
                    expected: id.to_owned(),
                    found: found.map(str::to_owned),
                })
            }
        }
        self.check_named_writer(&incoming, who)?;
        let new = self.entry_of(id, incoming, Some(&entry), who, now);
        let keys = keys_of(&new.td);
        let write = Write::new(
            &new,
            &keys,
            Expect::Revision(entry.revision),
            EventKind::Updated,
            Some(&patch),
            self.limits.event_retention,
        );
        self.written(id, self.store.write(&write)?)
    }

    /// `GET /things/{id}`: the enriched TD (tdd-things-retrieve-resp), `retrieved` = `now`.
    ///
    /// # Errors
    /// [`DirectoryError::NotFound`] (also when it has expired), or a store failure.
    pub fn get(&self, id: &str, now: SystemTime) -> Result<Value, DirectoryError> {
        let now = unix_millis(now);
        let entry = self.live(id, now)?;
        Ok(into_enriched(entry, Some(now)))
    }

    /// `DELETE /things/{id}` (tdd-things-delete): removes the TD, with a `thing_deleted`
    /// event.
    ///
    /// # Errors
    /// [`DirectoryError::NotFound`], [`DirectoryError::NotOwner`],
    /// [`DirectoryError::Conflict`], or a store failure.
    pub fn delete(
        &self,
        id: &str,
        who: &Registrant<'_>,
        now: SystemTime,
    ) -> Result<(), DirectoryError> {
        let now = unix_millis(now);
        let entry = self.live(id, now)?;
        check_owner(&entry, who)?;
        let removal = Removal::new(id, entry.revision, now, self.limits.event_retention);
        self.written(id, self.store.remove(&removal)?)
    }

    /// `GET /things`: one page of enriched TDs in ascending code-point order of id
    /// (tdd-things-list-pagination-order-default), at most `max_page_size`, with the
    /// total, the etag and the next page's query while more remain.
    ///
    /// # Errors
    /// [`DirectoryError::InvalidPaging`] for `limit=0`, or a store failure.
    pub fn list(&self, query: &ListQuery, now: SystemTime) -> Result<Listing, DirectoryError> {
        let now = unix_millis(now);
        let limit = match query.limit {
            Some(0) => {
                return Err(DirectoryError::InvalidPaging {
                    reason: "limit must be a positive integer".to_owned(),
                })
            }
            Some(limit) => limit.min(self.limits.max_page_size),
            None => self.limits.max_page_size,
        };
        let page = self.store.page(query.offset, limit, now)?;
        let shown = u64::try_from(page.entries.len()).unwrap_or(u64::MAX);
        let reached = query.offset.saturating_add(shown);
        // The next page repeats the client's own `limit` (W3C: "the same limit argument
        // given on the initial request"), while each page serves at most `max_page_size`.
        let next = (shown > 0 && reached < page.total)
            .then(|| ListQuery::new(reached, query.limit, query.format));
        Ok(Listing {
            things: page
                .entries
                .into_iter()
                .map(|entry| into_enriched(entry, Some(now)))
                .collect(),
            total: page.total,
            etag: format!("r{}-{}", page.revision, page.total),
            offset: query.offset,
            limit,
            next,
            format: query.format,
        })
    }

    /// Purges up to `max` TDs expired at `now`, each with a `thing_deleted` event
    /// (tdd-registrationinfo-expiry-purge); how many went.
    ///
    /// # Errors
    /// When the store fails.
    pub fn purge_expired(&self, now: SystemTime, max: usize) -> Result<u64, DirectoryError> {
        self.purge(unix_millis(now), max)
    }

    /// Up to `max` events after the event `after` (0: from the first), oldest first: what
    /// a client reconnecting with `Last-Event-ID: after` missed (tdd-notification-event-id).
    ///
    /// # Errors
    /// [`DirectoryError::EventGap`] when some of those events are no longer kept,
    /// [`DirectoryError::UnknownEvent`] for an id later than any, or a store failure.
    pub fn events_since(&self, after: u64, max: usize) -> Result<Vec<ThingEvent>, DirectoryError> {
        let held = self.store.events_after(after, max)?;
        if after > held.latest {
            return Err(DirectoryError::UnknownEvent {
                asked: after,
                latest: held.latest,
            });
        }
        let missing = after < held.latest
            && held
                .oldest
                .is_none_or(|oldest| after.saturating_add(1) < oldest);
        if missing {
            return Err(DirectoryError::EventGap {
                asked: after,
                oldest: held.oldest,
            });
        }
        Ok(held.events)
    }

    /// The id of the latest event (0 before any): where a new subscriber starts.
    ///
    /// # Errors
    /// When the store fails.
    pub fn latest_event(&self) -> Result<u64, DirectoryError> {
        Ok(self.store.events_after(u64::MAX, 0)?.latest)
    }

    /// JSONPath search (RFC 9535) over the enriched TDs as one array (the query's root),
    /// within `max_query_bytes`, `max_query_scan_bytes`, `max_query_results`,
    /// `max_query_answer_bytes` and `max_query_time`. The query is evaluated on one TD
    /// after another, each the only member of the root array, and `elapsed` (the time the
    /// search has taken, by the caller's clock) is asked before each: the nodes come
    /// grouped by TD, and a query that selects by position on the root or holds `$` in a
    /// filter is refused. The TDs
    /// are held parsed and enriched between searches (without `registration.retrieved`)
    /// in step with the store's revision: after a write by any process sharing the store,
    /// the next search reads again the TDs the events since name (all of them when those
    /// events are no longer kept); TDs expired since are left out.
    ///
    /// # Errors
    /// [`DirectoryError::QueryTooLong`], [`DirectoryError::InvalidQuery`],
    /// [`DirectoryError::SearchTooBroad`], [`DirectoryError::TooManyResults`],
    /// [`DirectoryError::AnswerTooLarge`], [`DirectoryError::SearchTooSlow`], or a store
    /// failure.
    pub fn search_jsonpath(
        &self,
        query: &str,
        now: SystemTime,
        elapsed: &mut dyn FnMut() -> Duration,
    ) -> Result<Vec<Value>, DirectoryError> {
        let query = search::compile(query, &self.limits)?;
        let snapshot = self
            .search
            .snapshot(self.store.as_ref(), &self.limits, unix_millis(now))?;
        search::run(&query, &snapshot.things, &self.limits, elapsed)
    }

    /// Capability search: the enriched TDs holding every term of `query`, in code-point
    /// order of id, at most `max_capability_results` (the answer says when it was cut).
    ///
    /// # Errors
    /// [`DirectoryError::InvalidQuery`] for no term, too many, or an empty one;
    /// [`DirectoryError::QueryTooLong`] for a term longer than `max_query_bytes`; or a
    /// store failure.
    pub fn search_capabilities(
        &self,
        query: &CapabilityQuery,
        now: SystemTime,
    ) -> Result<CapabilityMatches, DirectoryError> {
        if query.terms.is_empty() || query.terms.len() > self.limits.max_capability_terms {
            return Err(DirectoryError::InvalidQuery {
                reason: format!(
                    "a capability search has 1 ..= {} terms, found {}",
                    self.limits.max_capability_terms,
                    query.terms.len()
                ),
            });
        }
        let mut keys = query.terms.clone();
        for key in &mut keys {
            if key.value.is_empty() {
                return Err(DirectoryError::InvalidQuery {
                    reason: format!("the `{}` term is empty", key.kind.name()),
                });
            }
            if key.value.len() > self.limits.max_query_bytes {
                return Err(DirectoryError::QueryTooLong {
                    length: key.value.len(),
                    limit: self.limits.max_query_bytes,
                });
            }
            if key.kind == CapabilityKind::ConsensusHash {
                key.value = key.value.to_ascii_lowercase();
            }
        }
        let now = unix_millis(now);
        let max = self.limits.max_capability_results;
        let mut ids = self.store.find(&keys, now, max.saturating_add(1))?;
        let truncated = u64::try_from(ids.len()).unwrap_or(u64::MAX) > max;
        ids.truncate(usize::try_from(max).unwrap_or(usize::MAX));
        let things = self
            .store
            .entries(&ids)?
            .into_iter()
            .filter(|entry| !entry.expired_at(now))
            .map(|entry| into_enriched(entry, Some(now)))
            .collect();
        Ok(CapabilityMatches { things, truncated })
    }

    fn live(&self, id: &str, now: UnixMillis) -> Result<Entry, DirectoryError> {
        self.store
            .entry(id)?
            .filter(|entry| !entry.expired_at(now))
            .ok_or_else(|| DirectoryError::NotFound { id: id.to_owned() })
    }

    /// The capacity a new registration by `who` must fit (checked by the store with the
    /// write).
    fn admission<'a>(&self, who: &Registrant<'a>) -> Admission<'a> {
        let [did, client] = who.holders();
        Admission::new(
            self.limits.max_entries,
            did.or(client),
            self.limits.max_entries_per_registrant,
        )
        .also(did.and(client))
    }

    /// Writes a new registration within [`admission`](Self::admission); when the store is
    /// at a bound, purges some expired TDs (they do not keep a new one out) and tries once
    /// more.
    fn admit(
        &self,
        write: &Write<'_>,
        who: &Registrant<'_>,
        now: UnixMillis,
    ) -> Result<(), DirectoryError> {
        let id = write.entry.id.as_str();
        let mut outcome = self.store.write(write)?;
        if matches!(outcome, Outcome::Full | Outcome::OverQuota)
            && self.purge(now, PURGE_ON_FULL)? > 0
        {
            outcome = self.store.write(write)?;
        }
        match outcome {
            Outcome::Full => Err(DirectoryError::DirectoryFull {
                limit: self.limits.max_entries,
            }),
            Outcome::OverQuota => Err(DirectoryError::QuotaExceeded {
                holder: who.name(),
                limit: self.limits.max_entries_per_registrant,
            }),
            outcome => self.written(id, outcome),
        }
    }

    fn purge(&self, now: UnixMillis, max: usize) -> Result<u64, DirectoryError> {
        let mut purged = 0;
        for (id, revision) in self.store.expired(now, max)? {
            let removal = Removal::new(&id, revision, now, self.limits.event_retention);
            if let Outcome::Done(_) = self.store.remove(&removal)? {
                purged += 1;
            }
        }
        Ok(purged)
    }

    /// [`own_entries_only`](Self::own_entries_only): every DID the TD names is the writer's.
    fn check_named_writer(
        &self,
        incoming: &Incoming,
        who: &Registrant<'_>,
    ) -> Result<(), DirectoryError> {
        if who.did.is_none() && !self.own_entries_only {
            return Ok(());
        }
        match incoming
            .named_dids()
            .find(|(_, named)| who.did != Some(*named))
        {
            Some((field, named)) => Err(DirectoryError::NotNamedWriter {
                field,
                named: named.to_owned(),
                writer: who.did.map_or_else(
                    || "a writer who proved no DID".to_owned(),
                    |did| format!("`{did}`"),
                ),
            }),
            None => Ok(()),
        }
    }

    fn entry_of(
        &self,
        id: &str,
        incoming: Incoming,
        previous: Option<&Entry>,
        who: &Registrant<'_>,
        now: UnixMillis,
    ) -> Entry {
        let anonymous = incoming.id().is_none();
        // The DID the TD names, proving itself, takes the entry over (from its address).
        let takes_over = who
            .did
            .is_some_and(|did| incoming.named_dids().any(|(_, named)| named == did));
        let held = previous.filter(|_| !takes_over);
        let td = Value::Object(incoming.td);
        let size = serde_json::to_string(&td).map_or(0, |text| text.len());
        Entry {
            id: id.to_owned(),
            anonymous,
            created: previous.map_or(now, |previous| previous.created),
            modified: now,
            expires: incoming.expires,
            ttl_ms: incoming.ttl_ms,
            owner: held
                .map_or(who.did, |previous| previous.owner.as_deref())
                .map(str::to_owned),
            client: held
                .map_or(who.client, |previous| previous.client.as_deref())
                .map(str::to_owned),
            size: u64::try_from(size).unwrap_or(u64::MAX),
            revision: 0,
            td,
        }
    }

    fn store_incoming(
        &self,
        id: &str,
        incoming: Incoming,
        previous: Option<&Entry>,
        who: &Registrant<'_>,
        now: UnixMillis,
        expect: Expect,
    ) -> Result<(), DirectoryError> {
        let new = self.entry_of(id, incoming, previous, who, now);
        let keys = keys_of(&new.td);
        let (kind, diff) = match previous {
            // A replacement is recorded as the RFC 7396 merge patch from the old TD to
            // the new (members removed are `null`), as the directory's TD declares its
            // updates (`application/merge-patch+json`). Its one limit: a `null` value the
            // new TD holds reads as a removal (RFC 7396 cannot say it).
            Some(previous) => (EventKind::Updated, merge_diff(&previous.td, &new.td)),
            None => (EventKind::Created, enrich(&new, None)),
        };
        let write = Write::new(
            &new,
            &keys,
            expect,
            kind,
            Some(&diff),
            self.limits.event_retention,
        );
        if previous.is_some() {
            self.written(id, self.store.write(&write)?)
        } else {
            self.admit(&write.admitting(self.admission(who)), who, now)
        }
    }

    fn written(&self, id: &str, outcome: Outcome) -> Result<(), DirectoryError> {
        match outcome {
            Outcome::Done(_) => Ok(()),
            // A bound is only asked of a new registration ([`admit`](Self::admit)); any
            // other refusal means the entry was not as expected.
            Outcome::Conflict | Outcome::Full | Outcome::OverQuota => {
                Err(DirectoryError::Conflict { id: id.to_owned() })
            }
        }
    }
}

/// Whether `who` may change `entry`: the DID that registered it; for an entry registered
/// without a DID, a writer from the same client address (an IPv4 address or an IPv6 /64;
/// none for an embedding's own entries); and always the DID the registered TD names,
/// proving itself.
fn check_owner(entry: &Entry, who: &Registrant<'_>) -> Result<(), DirectoryError> {
    let named = who.did.is_some_and(|did| td::names(&entry.td, did));
    let registrant = match entry.owner.as_deref() {
        Some(owner) => who.did == Some(owner),
        None => who.client == entry.client.as_deref(),
    };
    if named || registrant {
        Ok(())
    } else {
        Err(DirectoryError::NotOwner {
            id: entry.id.clone(),
        })
    }
}
