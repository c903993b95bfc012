//! The requester's cache of peers' validated descriptions, by description URL, under
//! HTTP's caching rules (RFC 9111, as a private cache): a description is stored only when
//! its response allows it, served without asking again only while it is fresh (its
//! `max-age`, less its `Age`, capped at [`MAX_FRESHNESS`]), and revalidated with its `ETag`
//! (`If-None-Match`, a `304` keeps the validated description: no second validation) once
//! stale. The cache is bounded ([`CAPACITY`] URLs and [`MAX_BYTES`] of descriptions as
//! served, the least recently used go first) and
//! shared by every connection of the node. It is pure: the caller gives the time.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use concord_describe::Thing;
use reqwest::header::{HeaderMap, AGE, CACHE_CONTROL, ETAG, VARY};

/// URLs whose descriptions are kept at most.
pub(crate) const CAPACITY: usize = 256;
/// The held descriptions' bytes, as served, at most (a description is at most 1 MiB).
pub(crate) const MAX_BYTES: usize = 16 << 20;
/// The longest a description is used without asking its server again, whatever its
/// `max-age` says.
pub(crate) const MAX_FRESHNESS: Duration = Duration::from_secs(3600);
/// The longest `ETag` kept (a peer's text).
const MAX_ETAG_BYTES: usize = 256;

/// What a response allows a private cache to do with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Caching {
    /// Its validator, when it has a (usable) one.
    pub(crate) etag: Option<String>,
    /// How long it is fresh from now (zero: stale at once, revalidated before each use).
    pub(crate) fresh_for: Duration,
    /// Whether it may be stored at all (`no-store`, `Vary: *`, or neither a freshness nor
    /// a validator: not stored).
    pub(crate) storable: bool,
}

impl Caching {
    /// What the headers of a `200` or `304` response allow.
    pub(crate) fn of(headers: &HeaderMap) -> Self {
        let etag = headers
            .get(ETAG)
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
            .filter(|etag| valid_etag(etag))
            .map(str::to_owned);
        let mut no_store = false;
        let mut no_cache = false;
        let mut max_age: Option<u64> = None;
        for value in headers.get_all(CACHE_CONTROL) {
            let Ok(value) = value.to_str() else {
                // Directives we cannot read: nothing may be assumed of them.
                no_store = true;
                continue;
            };
            for directive in value.split(',') {
                let directive = directive.trim();
                let (name, argument) = match directive.split_once('=') {
                    Some((name, argument)) => {
                        (name.trim(), Some(argument.trim().trim_matches('"')))
                    }
                    None => (directive, None),
                };
                match name.to_ascii_lowercase().as_str() {
                    "no-store" => no_store = true,
                    // `no-cache` (with or without field names) and `must-revalidate` once
                    // stale: both mean revalidation before use, which a stale entry gets.
                    "no-cache" => no_cache = true,
                    "max-age" => match argument.and_then(|seconds| seconds.parse::<u64>().ok()) {
                        // Two `max-age`s, or one unreadable: treated as stale (RFC 9111 4.2.1).
                        Some(seconds) if max_age.is_none() => max_age = Some(seconds),
                        _ => no_cache = true,
                    },
                    _ => {}
                }
            }
        }
        let vary_any = headers.get_all(VARY).iter().any(|value| {
            value.to_str().map_or(true, |value| {
                value.split(',').any(|field| field.trim() == "*")
            })
        });
        let age = headers
            .get(AGE)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<u64>().ok())
            .unwrap_or(0);
        let fresh_for = match (no_cache, max_age) {
            (false, Some(seconds)) => {
                Duration::from_secs(seconds.saturating_sub(age)).min(MAX_FRESHNESS)
            }
            _ => Duration::ZERO,
        };
        let storable = !no_store && !vary_any && (etag.is_some() || !fresh_for.is_zero());
        Self {
            etag,
            fresh_for,
            storable,
        }
    }
}

/// An entity tag as RFC 9110 writes it: `"…"` or `W/"…"`, visible ASCII inside.
fn valid_etag(etag: &str) -> bool {
    let quoted = etag.strip_prefix("W/").unwrap_or(etag);
    etag.len() <= MAX_ETAG_BYTES
        && quoted.len() >= 2
        && quoted.starts_with('"')
        && quoted.ends_with('"')
        && quoted[1..quoted.len() - 1]
            .bytes()
            .all(|byte| byte == 0x21 || (0x23..=0x7e).contains(&byte))
}

/// A cached description.
#[derive(Debug, Clone)]
struct Entry {
    thing: Arc<Thing>,
    etag: Option<String>,
    /// Used without asking before this instant.
    fresh_until: Instant,
    /// For the least recently used to go first.
    used: u64,
    /// The description's size as served, counted against [`MAX_BYTES`].
    size: usize,
}

/// What the cache holds for a URL.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lookup {
    /// Fresh: use it without asking.
    Fresh(Arc<Thing>),
    /// Stale with a validator: ask with `If-None-Match: etag`; a `304` keeps `thing`.
    Revalidate { etag: String, thing: Arc<Thing> },
    /// Nothing usable: fetch it.
    Miss,
}

/// Peers' validated descriptions by description URL.
#[derive(Debug)]
pub(crate) struct DescriptionCache {
    entries: HashMap<String, Entry>,
    capacity: usize,
    max_bytes: usize,
    /// The sizes of the held descriptions, summed.
    bytes: usize,
    uses: u64,
}

impl Default for DescriptionCache {
    fn default() -> Self {
        Self::with_limits(CAPACITY, MAX_BYTES)
    }
}

impl DescriptionCache {
    /// An empty cache of at most `capacity` URLs whose descriptions, as served, come to
    /// at most `max_bytes`.
    pub(crate) fn with_limits(capacity: usize, max_bytes: usize) -> Self {
        Self {
            entries: HashMap::new(),
            capacity,
            max_bytes,
            bytes: 0,
            uses: 0,
        }
    }

    /// What is held for `url` at `now`.
    pub(crate) fn lookup(&mut self, url: &str, now: Instant) -> Lookup {
        self.uses += 1;
        let uses = self.uses;
        let Some(entry) = self.entries.get_mut(url) else {
            return Lookup::Miss;
        };
        entry.used = uses;
        if now < entry.fresh_until {
            return Lookup::Fresh(Arc::clone(&entry.thing));
        }
        match &entry.etag {
            Some(etag) => Lookup::Revalidate {
                etag: etag.clone(),
                thing: Arc::clone(&entry.thing),
            },
            None => {
                self.evict(url);
                Lookup::Miss
            }
        }
    }

    /// The held description of `url` and its `ETag`, fresh or not, for a revalidation
    /// asked for before it is due.
    pub(crate) fn validator(&self, url: &str) -> Option<(String, Arc<Thing>)> {
        let entry = self.entries.get(url)?;
        Some((entry.etag.clone()?, Arc::clone(&entry.thing)))
    }

    /// Keeps the description `thing` just validated from a `200` for `url`, `size` bytes
    /// as served (or forgets what was held, when the response may not be stored or is
    /// larger than the whole budget).
    pub(crate) fn store(
        &mut self,
        url: &str,
        thing: Arc<Thing>,
        size: usize,
        caching: &Caching,
        now: Instant,
    ) {
        self.evict(url);
        if !caching.storable || size > self.max_bytes || self.capacity == 0 {
            return;
        }
        self.make_room(size, now);
        self.uses += 1;
        self.bytes += size;
        self.entries.insert(
            url.to_owned(),
            Entry {
                thing,
                etag: caching.etag.clone(),
                fresh_until: now + caching.fresh_for,
                used: self.uses,
                size,
            },
        );
    }

    /// A `304` for `url`: the held description is current, fresh for what the `304` says
    /// (its `ETag`, when it names one, replaces the held one). A `304` that may not be
    /// stored (`no-store`, `Vary: *`, nothing to go by) drops the held copy: the next
    /// connect asks for the whole description.
    pub(crate) fn revalidated(&mut self, url: &str, caching: &Caching, now: Instant) {
        if !caching.storable {
            self.evict(url);
            return;
        }
        if let Some(entry) = self.entries.get_mut(url) {
            entry.fresh_until = now + caching.fresh_for;
            if let Some(etag) = &caching.etag {
                entry.etag = Some(etag.clone());
            }
        }
    }

    /// Forgets `url` (its description led to a connection that failed).
    pub(crate) fn evict(&mut self, url: &str) {
        if let Some(entry) = self.entries.remove(url) {
            self.bytes -= entry.size;
        }
    }

    /// How many URLs are held, and their descriptions' bytes.
    #[cfg(test)]
    pub(crate) fn len(&self) -> (usize, usize) {
        (self.entries.len(), self.bytes)
    }

    /// Makes room for one more description of `size` bytes: drops the stale entries with
    /// no validator, then the least recently used ones until it fits.
    fn make_room(&mut self, size: usize, now: Instant) {
        let full = |cache: &Self| {
            cache.entries.len() >= cache.capacity || cache.bytes + size > cache.max_bytes
        };
        if !full(self) {
            return;
        }
        let useless: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, entry)| now >= entry.fresh_until && entry.etag.is_none())
            .map(|(url, _)| url.clone())
            .collect();
        for url in useless {
            self.evict(&url);
        }
        while full(self) {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, entry)| entry.used)
                .map(|(url, _)| url.clone())
            else {
                return;
            };
            self.evict(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    fn thing(title: &str) -> Arc<Thing> {
        Arc::new(
            concord_describe::ThingBuilder::agent(title)
                .build()
                .expect("a minimal description is valid"),
        )
    }

    fn fresh_for(seconds: u64) -> Caching {
        Caching {
            etag: Some("\"v1\"".to_owned()),
            fresh_for: Duration::from_secs(seconds),
            storable: true,
        }
    }

    #[test]
    fn caching_follows_the_response_headers() {
        let caching = Caching::of(&headers(&[
            ("cache-control", "public, max-age=60"),
            ("etag", "\"abc\""),
        ]));
        assert_eq!(caching.fresh_for, Duration::from_secs(60));
        assert_eq!(caching.etag.as_deref(), Some("\"abc\""));
        assert!(caching.storable);
        // `Age` counts against `max-age`.
        let aged = Caching::of(&headers(&[("cache-control", "max-age=60"), ("age", "50")]));
        assert_eq!(aged.fresh_for, Duration::from_secs(10));
        // `no-cache`: stored, revalidated before every use.
        let no_cache = Caching::of(&headers(&[
            ("cache-control", "no-cache, max-age=60"),
            ("etag", "W/\"x\""),
        ]));
        assert_eq!(no_cache.fresh_for, Duration::ZERO);
        assert!(no_cache.storable);
        // Not stored: `no-store`, `Vary: *`, or nothing to go by.
        assert!(!Caching::of(&headers(&[("cache-control", "no-store, max-age=60")])).storable);
        assert!(!Caching::of(&headers(&[("cache-control", "max-age=60"), ("vary", "*")])).storable);
        assert!(!Caching::of(&headers(&[])).storable);
        assert!(!Caching::of(&headers(&[("etag", "unquoted")])).storable);
        // Two max-ages, or an unreadable one: stale.
        let twice = Caching::of(&headers(&[
            ("cache-control", "max-age=60, max-age=70"),
            ("etag", "\"a\""),
        ]));
        assert_eq!(twice.fresh_for, Duration::ZERO);
        assert_eq!(
            Caching::of(&headers(&[("cache-control", "max-age=soon")])).fresh_for,
            Duration::ZERO
        );
        // Capped.
        let long = Caching::of(&headers(&[("cache-control", "max-age=99999999")]));
        assert_eq!(long.fresh_for, MAX_FRESHNESS);
    }

    #[test]
    fn a_description_is_served_while_fresh_and_revalidated_after() {
        let mut cache = DescriptionCache::default();
        let now = Instant::now();
        let url = "http://a.example/.well-known/wot";
        assert_eq!(cache.lookup(url, now), Lookup::Miss);
        cache.store(url, thing("A"), 10, &fresh_for(60), now);
        assert_eq!(
            cache.lookup(url, now + Duration::from_secs(59)),
            Lookup::Fresh(thing("A"))
        );
        // Never past its validity: at 60 s it must be asked again.
        let later = now + Duration::from_secs(60);
        assert_eq!(
            cache.lookup(url, later),
            Lookup::Revalidate {
                etag: "\"v1\"".to_owned(),
                thing: thing("A")
            }
        );
        // A 304 makes it fresh again for what the 304 says.
        cache.revalidated(url, &fresh_for(10), later);
        assert_eq!(
            cache.lookup(url, later + Duration::from_secs(9)),
            Lookup::Fresh(thing("A"))
        );
        assert!(matches!(
            cache.lookup(url, later + Duration::from_secs(10)),
            Lookup::Revalidate { .. }
        ));
        // Stale with no validator: gone.
        let no_validator = Caching {
            etag: None,
            fresh_for: Duration::from_secs(5),
            storable: true,
        };
        cache.store(url, thing("B"), 10, &no_validator, now);
        assert_eq!(
            cache.lookup(url, now + Duration::from_secs(5)),
            Lookup::Miss
        );
        assert_eq!(cache.len(), (0, 0));
    }

    #[test]
    fn a_response_that_may_not_be_stored_replaces_what_was_held() {
        let mut cache = DescriptionCache::default();
        let now = Instant::now();
        let url = "http://a.example/.well-known/wot";
        cache.store(url, thing("A"), 10, &fresh_for(60), now);
        let no_store = Caching {
            etag: None,
            fresh_for: Duration::ZERO,
            storable: false,
        };
        cache.store(url, thing("B"), 10, &no_store, now);
        assert_eq!(cache.lookup(url, now), Lookup::Miss);
        // A 304 saying no-store drops it too.
        cache.store(url, thing("A"), 10, &fresh_for(0), now);
        cache.revalidated(url, &no_store, now);
        assert_eq!(cache.lookup(url, now), Lookup::Miss);
    }

    #[test]
    fn the_cache_is_bounded_and_drops_the_least_recently_used() {
        let mut cache = DescriptionCache::with_limits(2, 100);
        let now = Instant::now();
        cache.store("a", thing("A"), 10, &fresh_for(60), now);
        cache.store("b", thing("B"), 10, &fresh_for(60), now);
        // `a` used since `b` was stored: `b` goes for `c`.
        assert!(matches!(cache.lookup("a", now), Lookup::Fresh(_)));
        cache.store("c", thing("C"), 10, &fresh_for(60), now);
        assert_eq!(cache.len(), (2, 20));
        assert!(matches!(cache.lookup("a", now), Lookup::Fresh(_)));
        assert_eq!(cache.lookup("b", now), Lookup::Miss);
        assert!(matches!(cache.lookup("c", now), Lookup::Fresh(_)));
        // Replacing a held URL takes no room.
        cache.store("c", thing("C2"), 20, &fresh_for(60), now);
        assert_eq!(cache.len(), (2, 30));
        assert_eq!(cache.lookup("c", now), Lookup::Fresh(thing("C2")));
        // The bytes are bounded too: 90 more need both others gone.
        cache.store("d", thing("D"), 90, &fresh_for(60), now);
        assert_eq!(cache.len(), (1, 90));
        assert_eq!(cache.lookup("a", now), Lookup::Miss);
        assert_eq!(cache.lookup("c", now), Lookup::Miss);
        // One larger than the whole budget is not kept, and what it replaces goes.
        cache.store("d", thing("D2"), 101, &fresh_for(60), now);
        assert_eq!(cache.len(), (0, 0));
        assert_eq!(cache.lookup("d", now), Lookup::Miss);
    }

    #[test]
    fn evicted_descriptions_are_asked_for_again() {
        let mut cache = DescriptionCache::default();
        let now = Instant::now();
        cache.store("a", thing("A"), 10, &fresh_for(60), now);
        cache.store("b", thing("B"), 10, &fresh_for(60), now);
        cache.evict("a");
        assert_eq!(cache.len(), (1, 10));
        assert_eq!(cache.lookup("a", now), Lookup::Miss);
        assert!(matches!(cache.lookup("b", now), Lookup::Fresh(_)));
        // A revalidation asked for before it is due names the held tag.
        assert_eq!(
            cache.validator("b"),
            Some(("\"v1\"".to_owned(), thing("B")))
        );
        assert_eq!(cache.validator("a"), None);
    }
}
