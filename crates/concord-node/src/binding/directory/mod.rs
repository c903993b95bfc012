//! A W3C WoT Discovery Thing Description Directory served over HTTP
//! ([`NodeBuilder::directory`](crate::NodeBuilder::directory)): the directory's rules are
//! `concord-directory`'s ([`Directory`], over a `DirectoryStore`); this binding reads the
//! requests within their bounds, finds the caller, runs the rule on the blocking pool and
//! writes the answer. Its routes sit behind the node's admission (connections and the
//! per-address request budget, 429 with `Retry-After`).
//!
//! | route | answer |
//! |---|---|
//! | `GET`/`HEAD /things?offset=&limit=&format=array\|collection` | 200 `application/ld+json`: a page in code-point order of id (at most `max_page_size`), `Link: </things?…>; rel="next"` while more remain, `Link: </things>; rel="canonical"; etag="…"` on every page |
//! | `POST /things` | 201 + `Location: /things/{id}`, a TD without `id` registered under a new `urn:uuid:` |
//! | `PUT /things/{id}` | 201 registered, 204 replaced |
//! | `GET /things/{id}` | 200 `application/td+json`, the enriched TD |
//! | `PATCH /things/{id}` | 204; `application/merge-patch+json` only (415 else), the result validated |
//! | `DELETE /things/{id}` | 204 |
//! | `GET /events`, `/events/{thing_created\|thing_updated\|thing_deleted}?diff=true` | Server-Sent Events (`events.rs`) |
//! | `GET /search/jsonpath?query=` | 200 `application/json`, the nodes an RFC 9535 query selects |
//! | `GET /.well-known/agent-descriptions?offset=&limit=` | 200 `application/ld+json`: ANP-08's `CollectionPage` of the registered ANP agents' `ad.json` (`agents.rs`) |
//! | `GET /search/capability?action=&property=&event=&input=&output=&lmos=&consensus=&consensus-hash=&did=&type=` | 200 `application/ld+json`, the TDs holding every term (`search.rs`) |
//!
//! Any other method answers 405 with `Allow`; every refusal is an RFC 9457 problem
//! (`application/problem+json`): the directory's own (`DirectoryError`, with
//! `validationErrors` for an invalid TD) and the HTTP layer's (413 for a body over
//! `max_td_bytes` before it is read whole, 408, 415, 401 with ANP's challenge). Writes
//! name the caller: a DID proved by an RFC 9421 signature on the request (or a granted
//! bearer token; the legacy `DIDWba` header binds nothing of a write and is refused on
//! one, 401), else the client address; with [`DirectoryService::require_signatures`] an
//! anonymous write is refused (401), and a TD that names a DID (its `id`, or
//! `concord:metaProtocol`'s `concord:did`) is written only by that DID (403). A TD
//! registered by a DID can be changed only by that DID, one registered anonymously only
//! from its client address (403), and the DID a TD names takes it over; each client
//! address, and each DID signing, holds at most `max_entries_per_registrant` TDs (429).
//! The node's `allow` rules govern every route by the directory's affordance names
//! (`access`: 401 with ANP's challenge to an anonymous caller, 403 else). Expired TDs are
//! purged every [`DirectoryService::purge_interval`].

mod access;
mod agents;
mod described;
mod events;
mod gate;
mod request;
mod search;
mod things;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::routing::get;
use axum::Router;
use concord_describe::Form;
use concord_directory::Directory;

use super::http::HttpState;
use super::{Affordance, Binding, Described, Site};
use crate::node::Shared;
pub(crate) use access::AFFORDANCES;
use events::Hub;

/// How often expired TDs are purged unless [`DirectoryService::purge_interval`] says.
pub const DEFAULT_PURGE_INTERVAL: Duration = Duration::from_secs(30);
/// The most expired TDs one purge removes (the next purge takes the rest).
const PURGE_BATCH: usize = 256;

/// A WoT Discovery directory as a node serves it
/// ([`NodeBuilder::directory`](crate::NodeBuilder::directory)): the directory's rules
/// and store, whether writes must be signed, how often expired TDs are purged.
#[derive(Debug, Clone)]
pub struct DirectoryService {
    directory: Directory,
    require_signatures: bool,
    purge_interval: Duration,
}

impl DirectoryService {
    /// Serves `directory` (its limits are its own: `DirectoryLimits`); anonymous writes
    /// allowed, expired TDs purged every [`DEFAULT_PURGE_INTERVAL`].
    pub fn new(directory: Directory) -> Self {
        Self {
            directory,
            require_signatures: false,
            purge_interval: DEFAULT_PURGE_INTERVAL,
        }
    }

    /// Whether every write (`POST`, `PUT`, `PATCH`, `DELETE`) must prove a DID (an RFC
    /// 9421 signature or a granted bearer token): an anonymous one is answered 401 with
    /// ANP's challenge. Reads stay open (unless the node's `allow` rules close them). It also makes each agent
    /// write only its own entry ([`Directory::own_entries_only`]): a TD that names a DID
    /// is written only by that DID (403 otherwise).
    pub fn require_signatures(self, required: bool) -> Self {
        Self {
            directory: self.directory.own_entries_only(required),
            require_signatures: required,
            ..self
        }
    }

    /// How often expired TDs are purged (each with a `thing_deleted` event); a zero
    /// interval is taken as one second.
    pub fn purge_interval(mut self, interval: Duration) -> Self {
        self.purge_interval = interval.max(Duration::from_secs(1));
        self
    }
}

/// What the directory's routes serve with.
pub(crate) struct DirectoryState {
    /// The site and the node, as the HTTP binding's requests are admitted.
    http: HttpState,
    directory: Directory,
    require_signatures: bool,
    /// The live notifications.
    hub: Arc<Hub>,
    /// Turns for JSONPath searches.
    searches: Arc<gate::SearchGate>,
}

impl DirectoryState {
    /// Runs `rule` on the directory on the blocking pool (the store is synchronous).
    async fn run<T: Send + 'static>(
        &self,
        rule: impl FnOnce(&Directory, SystemTime) -> T + Send + 'static,
    ) -> Result<T, request::Failed> {
        let directory = self.directory.clone();
        tokio::task::spawn_blocking(move || rule(&directory, SystemTime::now()))
            .await
            .map_err(|_| request::Failed)
    }
}

/// The directory as a [`Binding`].
struct DirectoryBinding {
    shared: Arc<Shared>,
    service: DirectoryService,
}

/// The directory's binding, when the node serves one.
pub(crate) fn binding(shared: &Arc<Shared>) -> Option<Arc<dyn Binding>> {
    let service = shared.directory.clone()?;
    Some(Arc::new(DirectoryBinding {
        shared: Arc::clone(shared),
        service,
    }))
}

impl Binding for DirectoryBinding {
    fn name(&self) -> &str {
        "WoT Discovery directory"
    }

    fn forms(&self, _site: &Site, _affordance: Affordance<'_>) -> Vec<Form> {
        Vec::new()
    }

    fn routes(&self, site: &Site) -> Router {
        let hub = Hub::new(self.service.directory.clone(), &self.shared.limits);
        let state = Arc::new(DirectoryState {
            http: HttpState {
                site: site.clone(),
                shared: Arc::clone(&self.shared),
            },
            directory: self.service.directory.clone(),
            require_signatures: self.service.require_signatures,
            hub: Arc::clone(&hub),
            searches: gate::SearchGate::new(
                self.shared.limits.directory_searches,
                self.shared.limits.directory_searches_per_address,
            ),
        });
        tokio::spawn(Arc::clone(&hub).run(site.clone()));
        tokio::spawn(purge(
            Arc::clone(&state),
            self.service.purge_interval,
            site.clone(),
        ));
        Router::new()
            .route(
                "/things",
                request::only(
                    access::reading(get(things::list), &state, |_| &["things"])
                        .post(things::create),
                    &["GET", "HEAD", "POST"],
                ),
            )
            .route(
                "/things/{*id}",
                request::only(
                    access::reading(get(things::retrieve), &state, |_| &["retrieveThing"])
                        .put(things::put)
                        .patch(things::patch)
                        .delete(things::delete),
                    &["GET", "HEAD", "PUT", "PATCH", "DELETE"],
                ),
            )
            .route(
                "/events",
                request::only(
                    access::reading(get(events::all), &state, |_| {
                        &["thingCreated", "thingUpdated", "thingDeleted"]
                    }),
                    &["GET", "HEAD"],
                ),
            )
            .route(
                "/events/{kind}",
                request::only(
                    access::reading(get(events::of_kind), &state, access::events_of_kind),
                    &["GET", "HEAD"],
                ),
            )
            .route(
                "/search/jsonpath",
                request::only(
                    access::reading(get(search::jsonpath), &state, |_| &["searchJSONPath"]),
                    &["GET", "HEAD"],
                ),
            )
            .route(
                "/search/capability",
                request::only(
                    access::reading(get(search::capability), &state, |_| &["searchCapability"]),
                    &["GET", "HEAD"],
                ),
            )
            .route(
                crate::binding::wellknown::anp::AGENT_DESCRIPTIONS_PATH,
                request::only(
                    access::reading(get(agents::list), &state, |_| &["things"]),
                    &["GET", "HEAD"],
                ),
            )
            .with_state(state)
    }

    fn described(&self, site: &Site) -> Described {
        // Writes need a DID proved when the directory requires signatures and the node
        // has a DID to describe the scheme with (`didwba_sc`).
        let signed_writes =
            self.service.require_signatures && self.shared.identity.identity().is_some();
        described::directory(site, signed_writes)
    }
}

/// Purges expired TDs every `interval` until the server drains, and wakes the
/// notifications for their `thing_deleted` events.
async fn purge(state: Arc<DirectoryState>, interval: Duration, site: Site) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = site.draining() => return,
        }
        purge_all(&state, &site).await;
    }
}

/// Purges batches of [`PURGE_BATCH`] expired TDs while a batch comes back full (so a
/// short TTL is not held to one batch a tick), waking the notifications after each
/// batch that removed any; stops when the server drains.
async fn purge_all(state: &DirectoryState, site: &Site) {
    loop {
        let purged = state
            .run(|directory, now| directory.purge_expired(now, PURGE_BATCH))
            .await;
        match purged {
            Ok(Ok(0)) => return,
            Ok(Ok(purged)) => {
                tracing::debug!(purged, "expired TDs purged");
                state.hub.wake();
                if purged < PURGE_BATCH as u64 || site.is_draining() {
                    return;
                }
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, "cannot purge expired TDs");
                return;
            }
            Err(request::Failed) => {
                tracing::warn!("the purge task failed");
                return;
            }
        }
    }
}
