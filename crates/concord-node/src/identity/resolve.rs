//! Resolving a peer's DID document (`did:wba`): fetched over HTTPS from the host the DID
//! names, checked by [`concord_identity::read_document`] against that DID, and cached.
//!
//! A DID is named by a stranger, so fetching its document must not become a way to reach
//! what the node can reach and the stranger cannot (SSRF), nor a way to tie the node up:
//!
//! - HTTPS only. Plain HTTP only in loopback test mode
//!   ([`ResolverSettings::allow_loopback_http`]), and then only for DIDs on `localhost` or
//!   `*.localhost`, which go to `127.0.0.1` without any lookup, over the scheme that host
//!   and port last answered on (or that our own request to it used: a node that serves TLS
//!   itself answers HTTPS, others HTTP), else HTTPS first, then HTTP.
//! - Every address a host name resolves to must be public: one loopback, private,
//!   link-local, unique-local, shared (CGNAT), multicast, documentation or otherwise
//!   reserved address (IPv4-mapped and other IPv4-embedding IPv6 forms included) refuses
//!   the whole host ([`ResolveError::PrivateAddress`]). The check runs in the HTTP client's
//!   own DNS resolver, so the addresses checked are the addresses connected to.
//! - No redirect is followed ([`ResolveError::Redirect`]), no proxy is taken from the
//!   environment.
//! - The body is refused as soon as it exceeds [`ResolverSettings::max_document_bytes`]
//!   (a `Content-Length` over it before any byte is read). A host must connect (TCP and
//!   TLS) within [`ResolverSettings::connect_timeout`] and answer (status and headers)
//!   within [`ResolverSettings::first_byte_timeout`]; the whole fetch has
//!   [`ResolverSettings::timeout`].
//! - Fetches are bounded node-wide ([`ResolverSettings::max_concurrent`]), per registrable
//!   domain of the DID host ([`ResolverSettings::max_concurrent_per_host`]: the DIDs of
//!   `a.evil.example` and `b.evil.example` share `evil.example`'s slots, by the Public
//!   Suffix List) and per client address whose upgrade asked for them
//!   ([`ResolverSettings::max_concurrent_per_address`]: each caller holds its own
//!   address's slot, so an address out of slots is refused alone); concurrent requests for
//!   one DID share one fetch.
//! - Good documents are cached ([`ResolverSettings::cache_ttl`]), failures too
//!   ([`ResolverSettings::failure_cache_ttl`]), each in at most
//!   [`ResolverSettings::cache_capacity`] entries, so a flood of bad DIDs costs one fetch
//!   each per failure TTL and never pushes good documents out.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use concord_identity::{read_document, Did, DidDocumentError, DidDocumentLimits, VerifiedDocument};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{ACCEPT, LOCATION};
use tokio::sync::{OnceCell, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::slots::KeyedSlots;
use super::IdentitySetupError;
use crate::admission::ClientKey;
use crate::config::human;

/// The media types asked for.
const ACCEPT_DID_DOCUMENT: &str = "application/did+json, application/json";

/// How many characters of a redirect's `Location` an error keeps.
const MAX_LOCATION_CHARS: usize = 200;

/// How the node resolves peers' DID documents. The defaults suit a node facing strangers.
///
/// ```
/// use concord_node::ResolverSettings;
///
/// let settings = ResolverSettings::default();
/// assert!(!settings.allow_loopback_http);
/// assert_eq!(settings.max_document_bytes, 64 * 1024);
/// assert_eq!(settings.timeout.as_secs(), 5);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolverSettings {
    /// Loopback test mode: DIDs on `localhost` or `*.localhost` resolve on `127.0.0.1`, over
    /// the scheme that host and port answered on before (`https://` when a TLS server
    /// answers there, else `http://`; HTTPS tried first when nothing is known yet); every
    /// other DID still over HTTPS only, to public addresses only. Default `false`: a
    /// `localhost` DID is refused.
    pub allow_loopback_http: bool,
    /// The largest DID document read, in bytes. Default 64 KiB.
    pub max_document_bytes: usize,
    /// The whole fetch (connect, headers, body) of one document; also the longest wait for
    /// a free fetch slot. Default 5 s.
    pub timeout: Duration,
    /// The longest a DID host may take to accept the connection (TCP, and the TLS
    /// handshake), so that a host that never answers holds a fetch slot briefly
    /// (a timeout naming the connection); the later deadlines still apply.
    /// Default 2 s.
    pub connect_timeout: Duration,
    /// The longest from a fetch's start to the answer's status and headers (its first
    /// byte); the body then has what is left of [`timeout`](Self::timeout), which applies
    /// whatever this is. Default 3 s.
    pub first_byte_timeout: Duration,
    /// How long a good document is cached. Default 300 s.
    pub cache_ttl: Duration,
    /// How long a failure is cached, so a DID that failed is not fetched again before.
    /// Default 10 s.
    pub failure_cache_ttl: Duration,
    /// How many documents are cached (and, separately, how many failures): past it, the
    /// expired entries go, then the one used longest ago. Default 1,024.
    pub cache_capacity: usize,
    /// How many documents are fetched at once, node-wide; more wait (at most
    /// [`timeout`](Self::timeout)). Default 32.
    pub max_concurrent: usize,
    /// How many documents are fetched at once for DIDs under one registrable domain (the
    /// DID host's domain by the Public Suffix List: `a.evil.example` and `b.evil.example`
    /// are `evil.example`; a host with none, such as `localhost`, is its own), so that one
    /// peer minting hosts cannot take every fetch slot; more wait (at most
    /// [`timeout`](Self::timeout)). Default 4.
    pub max_concurrent_per_host: usize,
    /// How many of the node's fetch slots the upgrades of one client address (an IPv4
    /// address or an IPv6 /64) hold at once, so that a few addresses cannot take them all;
    /// more wait (at most [`timeout`](Self::timeout)). Default 2.
    pub max_concurrent_per_address: usize,
}

impl Default for ResolverSettings {
    fn default() -> Self {
        Self {
            allow_loopback_http: false,
            max_document_bytes: 64 * 1024,
            timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
            first_byte_timeout: Duration::from_secs(3),
            cache_ttl: Duration::from_secs(300),
            failure_cache_ttl: Duration::from_secs(10),
            cache_capacity: 1024,
            max_concurrent: 32,
            max_concurrent_per_host: 4,
            max_concurrent_per_address: 2,
        }
    }
}

impl ResolverSettings {
    /// Refuses a setting with which the resolver could never work.
    fn check(&self) -> Result<(), IdentitySetupError> {
        let positive = [
            ("max_document_bytes", self.max_document_bytes),
            ("cache_capacity", self.cache_capacity),
            ("max_concurrent", self.max_concurrent),
            ("max_concurrent_per_host", self.max_concurrent_per_host),
            (
                "max_concurrent_per_address",
                self.max_concurrent_per_address,
            ),
        ];
        for (name, value) in positive {
            if value == 0 {
                return Err(IdentitySetupError::ResolverZero { name });
            }
        }
        for (name, value) in [
            ("max_concurrent", self.max_concurrent),
            ("max_concurrent_per_host", self.max_concurrent_per_host),
            (
                "max_concurrent_per_address",
                self.max_concurrent_per_address,
            ),
        ] {
            if value > Semaphore::MAX_PERMITS {
                return Err(IdentitySetupError::ResolverTooLarge {
                    name,
                    max: Semaphore::MAX_PERMITS,
                });
            }
        }
        for (name, value) in [
            ("timeout", self.timeout),
            ("connect_timeout", self.connect_timeout),
            ("first_byte_timeout", self.first_byte_timeout),
        ] {
            if value.is_zero() {
                return Err(IdentitySetupError::ResolverZero { name });
            }
        }
        Ok(())
    }
}

/// Which fetch limit was reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Capacity {
    /// [`ResolverSettings::max_concurrent`].
    Node(usize),
    /// [`ResolverSettings::max_concurrent_per_host`] for this registrable domain.
    Domain {
        /// The DID host's registrable domain.
        domain: String,
        /// The limit.
        limit: usize,
    },
    /// [`ResolverSettings::max_concurrent_per_address`] for the calling client address.
    Address {
        /// The limit.
        limit: usize,
    },
}

impl fmt::Display for Capacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Node(limit) => write!(f, "the node's {limit} concurrent fetches"),
            Self::Domain { domain, limit } => {
                write!(f, "the {limit} concurrent fetches allowed under {domain}")
            }
            Self::Address { limit } => {
                write!(
                    f,
                    "the {limit} concurrent fetches allowed for one client address"
                )
            }
        }
    }
}

/// Which of a fetch's deadlines passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Deadline {
    /// [`ResolverSettings::connect_timeout`].
    Connect,
    /// [`ResolverSettings::first_byte_timeout`].
    FirstByte,
    /// [`ResolverSettings::timeout`].
    Whole,
}

impl fmt::Display for Deadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Connect => "no connection",
            Self::FirstByte => "no answer",
            Self::Whole => "no complete DID document",
        })
    }
}

/// Why a DID document was not resolved.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ResolveError {
    /// A DID on `localhost` (or `*.localhost`), whose document would be fetched over plain
    /// HTTP, while loopback test mode is off.
    #[error(
        "{did}: a localhost DID's document is fetched over plain HTTP, which only loopback \
         test mode allows"
    )]
    NotHttps {
        /// The DID.
        did: Did,
    },
    /// The DID's host resolves to (or is) an address the node does not connect to.
    #[error(
        "DID host {host} resolves to {address}, a loopback, private or reserved address: \
         not connected to"
    )]
    PrivateAddress {
        /// The DID's host.
        host: String,
        /// The first refused address.
        address: IpAddr,
    },
    /// The DID's host could not be resolved.
    #[error("DID host {host} could not be resolved: {detail}")]
    Dns {
        /// The DID's host.
        host: String,
        /// Why.
        detail: String,
    },
    /// The request failed (connection, TLS, HTTP).
    #[error("fetching {url}: {detail}")]
    Fetch {
        /// The document's URL.
        url: String,
        /// Why.
        detail: String,
    },
    /// The answer's status was not a success.
    #[error("{url} answered HTTP {status}")]
    Status {
        /// The document's URL.
        url: String,
        /// The HTTP status.
        status: u16,
    },
    /// The answer was a redirect, which is never followed.
    #[error("{url} answered HTTP {status} to {location}: redirects are not followed")]
    Redirect {
        /// The document's URL.
        url: String,
        /// The HTTP status (3xx).
        status: u16,
        /// Where it pointed (its first characters, printable only).
        location: String,
    },
    /// The document is larger than [`ResolverSettings::max_document_bytes`].
    #[error("{url}: the DID document exceeds {limit} bytes")]
    TooLarge {
        /// The document's URL.
        url: String,
        /// The limit, in bytes.
        limit: usize,
    },
    /// No connection, answer or complete document within its deadline.
    #[error("{url}: {deadline} within {}", human(*after))]
    Timeout {
        /// The document's URL.
        url: String,
        /// Which deadline passed.
        deadline: Deadline,
        /// The deadline.
        after: Duration,
    },
    /// The document was fetched but is not a valid document of the DID.
    #[error("the DID document of {did} is not valid: {source}")]
    Document {
        /// The DID.
        did: Did,
        /// What is wrong with it.
        source: DidDocumentError,
    },
    /// No fetch slot was free within [`ResolverSettings::timeout`].
    #[error("resolving {did}: {capacity} were all taken for {}", human(*waited))]
    Busy {
        /// The DID.
        did: Did,
        /// Which limit was reached.
        capacity: Capacity,
        /// How long it waited.
        waited: Duration,
    },
}

impl ResolveError {
    /// What a peer may be told about the failure of its own DID: no address, path or
    /// internal detail of ours.
    pub(crate) fn public_reason(&self) -> String {
        match self {
            Self::NotHttps { .. } => "a localhost DID's document is fetched over plain HTTP, \
                                      which this node does not allow"
                .to_owned(),
            Self::PrivateAddress { .. } => "your DID's host resolves to a loopback, private or \
                                            reserved address, which this node does not connect to"
                .to_owned(),
            Self::Dns { .. } => "your DID's host could not be resolved".to_owned(),
            Self::Fetch { .. } => {
                "your DID document could not be fetched (no HTTPS answer)".to_owned()
            }
            Self::Status { status, .. } => {
                format!("your DID document could not be fetched (HTTP {status})")
            }
            Self::Redirect { status, .. } => format!(
                "your DID document could not be fetched (HTTP {status}: redirects are not \
                 followed)"
            ),
            Self::TooLarge { limit, .. } => {
                format!("your DID document exceeds {limit} bytes")
            }
            Self::Timeout {
                deadline, after, ..
            } => format!(
                "your DID document could not be fetched: {deadline} within {}",
                human(*after)
            ),
            Self::Document { source, .. } => format!("your DID document is not valid: {source}"),
            Self::Busy { .. } => {
                "this node is fetching too many DID documents; try again shortly".to_owned()
            }
        }
    }
}

/// A resolution's outcome, as cached and shared.
type Outcome = Result<Arc<VerifiedDocument>, ResolveError>;

/// Resolves peers' DID documents: cheap to clone (one shared state), `Send + Sync`.
#[derive(Clone)]
pub(crate) struct Resolver {
    inner: Arc<Inner>,
}

struct Inner {
    settings: ResolverSettings,
    client: reqwest::Client,
    limits: DidDocumentLimits,
    cache: Mutex<Cache>,
    /// The fetch in flight for each DID; the callers of one DID wait on the same cell.
    in_flight: Mutex<HashMap<Did, Arc<OnceCell<Outcome>>>>,
    node_slots: Arc<Semaphore>,
    /// Fetch slots per registrable domain of the DID host.
    domain_slots: KeyedSlots<String>,
    /// Fetch slots per client address whose upgrade asked for them.
    address_slots: KeyedSlots<ClientKey>,
    /// Loopback test mode: the scheme each `localhost` host and port answered on.
    loopback_schemes: Mutex<HashMap<String, Scheme>>,
}

/// The scheme a loopback DID's document is fetched over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Https,
    Http,
}

impl Scheme {
    fn as_str(self) -> &'static str {
        match self {
            Self::Https => "https",
            Self::Http => "http",
        }
    }

    fn other(self) -> Self {
        match self {
            Self::Https => Self::Http,
            Self::Http => Self::Https,
        }
    }
}

impl Resolver {
    /// A resolver with `settings`, verifying HTTPS with `tls` (the node's client
    /// configuration, `crate::tls::client_config`).
    ///
    /// # Errors
    /// A setting that is zero (or too large for a semaphore), or an HTTP client that could
    /// not be built.
    pub(crate) fn new(
        settings: ResolverSettings,
        tls: Arc<rustls::ClientConfig>,
    ) -> Result<Self, IdentitySetupError> {
        Self::with_lookup(settings, tls, Arc::new(system_lookup))
    }

    /// [`new`](Self::new) with `lookup` for host names (the system's resolver in the node).
    fn with_lookup(
        settings: ResolverSettings,
        tls: Arc<rustls::ClientConfig>,
        lookup: Lookup,
    ) -> Result<Self, IdentitySetupError> {
        settings.check()?;
        let mut config = (*tls).clone();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let dns = GuardedDns {
            loopback_http: settings.allow_loopback_http,
            lookup,
        };
        let client = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .tls_backend_preconfigured(config)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(dns)
            .build()
            .map_err(IdentitySetupError::ResolverClient)?;
        let limits = DidDocumentLimits {
            max_bytes: settings.max_document_bytes,
            ..DidDocumentLimits::default()
        };
        Ok(Self {
            inner: Arc::new(Inner {
                cache: Mutex::new(Cache::new(settings.cache_capacity)),
                in_flight: Mutex::new(HashMap::new()),
                node_slots: Arc::new(Semaphore::new(settings.max_concurrent)),
                domain_slots: KeyedSlots::new(settings.max_concurrent_per_host),
                address_slots: KeyedSlots::new(settings.max_concurrent_per_address),
                loopback_schemes: Mutex::new(HashMap::new()),
                client,
                limits,
                settings,
            }),
        })
    }

    /// The verified document of `did` ([`concord_identity::read_document`] against `did`),
    /// from the cache or fetched; a resolve asked for by the upgrade of `client` holds one
    /// of that address's fetch slots while it waits, its own even when it joins a fetch
    /// another caller started (`None`: our own request, such as checking a provider we
    /// called).
    ///
    /// # Errors
    /// Why it could not be fetched or is not a valid document of `did` (failures are
    /// cached for [`ResolverSettings::failure_cache_ttl`], except
    /// [`ResolveError::Busy`]).
    pub(crate) async fn resolve(
        &self,
        did: &Did,
        client: Option<ClientKey>,
    ) -> Result<Arc<VerifiedDocument>, ResolveError> {
        if let Some(cached) = self.inner.cached(did) {
            return cached;
        }
        // The address's slot is this caller's own, taken before it joins the flight shared
        // by every caller of `did`: an address out of slots is refused alone, never a
        // caller from another address waiting on the same DID.
        let wait = self.inner.settings.timeout;
        let _address_slot = match client {
            Some(client) => Some(
                self.inner
                    .address_slots
                    .acquire(client, wait)
                    .await
                    .ok_or_else(|| ResolveError::Busy {
                        did: did.clone(),
                        capacity: Capacity::Address {
                            limit: self.inner.address_slots.limit(),
                        },
                        waited: wait,
                    })?,
            ),
            None => None,
        };
        let flight = self.inner.flight(did);
        flight
            .get_or_init(|| self.inner.fetch_and_remember(did, &flight))
            .await
            .clone()
    }

    /// Puts a document we hold ourselves in the cache (our own DID: no fetch to
    /// ourselves). It never expires and is never evicted; a later one for the same DID
    /// replaces it.
    pub(crate) fn insert_own(&self, document: Arc<VerifiedDocument>) {
        self.inner.lock_cache().insert_own(document);
    }

    /// We reached the host and port of `did` ourselves over `url` (a peer's description,
    /// whose DID names that origin): in loopback test mode, a `localhost` DID's document is
    /// then fetched over the same scheme first (`https://` for `https` or `wss`, else
    /// `http://`), with no attempt over the other. Nothing for any other DID.
    pub(crate) fn reached_over(&self, did: &Did, url: &str) {
        let scheme = if url.starts_with("https://") || url.starts_with("wss://") {
            Scheme::Https
        } else {
            Scheme::Http
        };
        if self.inner.settings.allow_loopback_http && is_localhost(&did.host().to_ascii_lowercase())
        {
            self.inner.remember_scheme(did, scheme);
        }
    }
}

impl Inner {
    fn lock_cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn cached(&self, did: &Did) -> Option<Outcome> {
        self.lock_cache().get(did, Instant::now())
    }

    /// The cell of the fetch in flight for `did`, a new one if none is.
    fn flight(&self, did: &Did) -> Arc<OnceCell<Outcome>> {
        let mut in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Arc::clone(in_flight.entry(did.clone()).or_default())
    }

    /// Fetches `did`'s document (unless a fetch that just ended cached it) and caches the
    /// outcome. `flight` leaves the in-flight map when this ends, cancelled or not: a
    /// caller still waiting on it runs the fetch again itself.
    async fn fetch_and_remember(&self, did: &Did, flight: &Arc<OnceCell<Outcome>>) -> Outcome {
        let _landing = Landing {
            in_flight: &self.in_flight,
            did,
            flight,
        };
        if let Some(cached) = self.cached(did) {
            return cached;
        }
        let outcome = self.fetch(did).await;
        match &outcome {
            Ok(document) => {
                let expires = Instant::now() + self.settings.cache_ttl;
                self.lock_cache()
                    .documents
                    .insert(did, Arc::clone(document), expires);
            }
            Err(ResolveError::Busy { .. }) => {}
            Err(error) => {
                tracing::debug!(%did, %error, "DID document not resolved");
                let expires = Instant::now() + self.settings.failure_cache_ttl;
                self.lock_cache()
                    .failures
                    .insert(did, error.clone(), expires);
            }
        }
        outcome
    }

    async fn fetch(&self, did: &Did) -> Outcome {
        let host = did.host().to_ascii_lowercase();
        let loopback = is_localhost(&host);
        if loopback && !self.settings.allow_loopback_http {
            return Err(ResolveError::NotHttps { did: did.clone() });
        }
        let wait = self.settings.timeout;
        let domain = registrable_domain(&host);
        let _domain_slot = self
            .domain_slots
            .acquire(domain.clone(), wait)
            .await
            .ok_or_else(|| ResolveError::Busy {
                did: did.clone(),
                capacity: Capacity::Domain {
                    domain,
                    limit: self.domain_slots.limit(),
                },
                waited: wait,
            })?;
        let _node_slot = self.node_slot(did).await?;
        if !loopback {
            return self.fetch_over(did, Scheme::Https.as_str()).await;
        }
        // A DID on localhost (test mode only) may be served by a node with TLS or without:
        // the scheme it answered on before, else HTTPS first, then plain HTTP when no TLS
        // server answers.
        let first = self.known_scheme(did).unwrap_or(Scheme::Https);
        let mut outcome = Err(ResolveError::NotHttps { did: did.clone() });
        for scheme in [first, first.other()] {
            outcome = self.fetch_over(did, scheme.as_str()).await;
            if !matches!(outcome, Err(ResolveError::Fetch { .. })) {
                if !matches!(outcome, Err(ResolveError::Timeout { .. })) {
                    self.remember_scheme(did, scheme);
                }
                break;
            }
        }
        outcome
    }

    /// The scheme `did`'s host and port answered on, when known.
    fn known_scheme(&self, did: &Did) -> Option<Scheme> {
        self.lock_schemes().get(&authority(did)).copied()
    }

    /// Remembers the scheme `did`'s host and port answered on (at most
    /// [`ResolverSettings::cache_capacity`] hosts and ports: past it, one goes).
    fn remember_scheme(&self, did: &Did, scheme: Scheme) {
        let key = authority(did);
        let mut schemes = self.lock_schemes();
        if !schemes.contains_key(&key) && schemes.len() >= self.settings.cache_capacity {
            let some = schemes.keys().next().cloned();
            if let Some(some) = some {
                schemes.remove(&some);
            }
        }
        schemes.insert(key, scheme);
    }

    fn lock_schemes(&self) -> std::sync::MutexGuard<'_, HashMap<String, Scheme>> {
        self.loopback_schemes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Fetches and reads `did`'s document over `scheme`.
    async fn fetch_over(&self, did: &Did, scheme: &str) -> Outcome {
        let url = did.document_url(scheme);
        let parsed = url::Url::parse(&url).map_err(|error| ResolveError::Fetch {
            url: url.clone(),
            detail: error.to_string(),
        })?;
        // The HTTP client resolves names through `GuardedDns`, but connects to an address
        // directly: a host the URL parser reads as one is refused (`Did` already refuses
        // them; this keeps the guard whole whatever a DID lets through).
        if !matches!(parsed.host(), Some(url::Host::Domain(_))) {
            return Err(ResolveError::Fetch {
                url,
                detail: "the URL's host is not a DNS name".to_owned(),
            });
        }
        let after = self.settings.timeout;
        let bytes = tokio::time::timeout(after, self.download(parsed, &url))
            .await
            .map_err(|_| ResolveError::Timeout {
                url: url.clone(),
                deadline: Deadline::Whole,
                after,
            })??;
        read_document(&bytes, did, &self.limits)
            .map(Arc::new)
            .map_err(|source| ResolveError::Document {
                did: did.clone(),
                source,
            })
    }

    /// One of the node's fetch slots, waiting at most the timeout.
    async fn node_slot(&self, did: &Did) -> Result<OwnedSemaphorePermit, ResolveError> {
        let waited = self.settings.timeout;
        match tokio::time::timeout(waited, Arc::clone(&self.node_slots).acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            // The semaphore is never closed; a closed one is as good as a full one.
            Ok(Err(_)) | Err(_) => Err(ResolveError::Busy {
                did: did.clone(),
                capacity: Capacity::Node(self.settings.max_concurrent),
                waited,
            }),
        }
    }

    /// The body at `url`, bounded by `max_document_bytes`.
    async fn download(&self, parsed: url::Url, url: &str) -> Result<Vec<u8>, ResolveError> {
        let limit = self.settings.max_document_bytes;
        let first_byte = self.settings.first_byte_timeout;
        let sent = self
            .client
            .get(parsed)
            .header(ACCEPT, ACCEPT_DID_DOCUMENT)
            .send();
        let mut response = tokio::time::timeout(first_byte, sent)
            .await
            .map_err(|_| ResolveError::Timeout {
                url: url.to_owned(),
                deadline: Deadline::FirstByte,
                after: first_byte,
            })?
            .map_err(|error| send_error(url, error, self.settings.connect_timeout))?;
        let status = response.status();
        if status.is_redirection() {
            let location = response.headers().get(LOCATION).map_or_else(
                || "(no Location)".to_owned(),
                |value| printable(value.as_bytes()),
            );
            return Err(ResolveError::Redirect {
                url: url.to_owned(),
                status: status.as_u16(),
                location,
            });
        }
        if !status.is_success() {
            return Err(ResolveError::Status {
                url: url.to_owned(),
                status: status.as_u16(),
            });
        }
        let too_large = || ResolveError::TooLarge {
            url: url.to_owned(),
            limit,
        };
        let announced = response.content_length().unwrap_or(0);
        if announced > u64::try_from(limit).unwrap_or(u64::MAX) {
            return Err(too_large());
        }
        let mut body = Vec::with_capacity(usize::try_from(announced).unwrap_or(limit).min(limit));
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| ResolveError::Fetch {
                url: url.to_owned(),
                detail: concord_llm::with_causes(&error.without_url()),
            })?
        {
            if body.len().saturating_add(chunk.len()) > limit {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// Takes a fetch's cell out of the in-flight map when the fetch ends (or is cancelled),
/// unless another cell replaced it.
struct Landing<'a> {
    in_flight: &'a Mutex<HashMap<Did, Arc<OnceCell<Outcome>>>>,
    did: &'a Did,
    flight: &'a Arc<OnceCell<Outcome>>,
}

impl Drop for Landing<'_> {
    fn drop(&mut self) {
        let mut in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if in_flight
            .get(self.did)
            .is_some_and(|cell| Arc::ptr_eq(cell, self.flight))
        {
            in_flight.remove(self.did);
        }
    }
}

/// The error of a request that got no answer: a refusal of `GuardedDns` keeps its type, a
/// connection not made within `connect_timeout` is a [`ResolveError::Timeout`].
fn send_error(url: &str, error: reqwest::Error, connect_timeout: Duration) -> ResolveError {
    if error.is_connect() && error.is_timeout() {
        return ResolveError::Timeout {
            url: url.to_owned(),
            deadline: Deadline::Connect,
            after: connect_timeout,
        };
    }
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(&error);
    while let Some(cause) = next {
        if let Some(failure) = cause.downcast_ref::<DnsFailure>() {
            return match failure {
                DnsFailure::Private { host, address } => ResolveError::PrivateAddress {
                    host: host.clone(),
                    address: *address,
                },
                DnsFailure::Lookup { host, detail } => ResolveError::Dns {
                    host: host.clone(),
                    detail: detail.clone(),
                },
            };
        }
        next = cause.source();
    }
    ResolveError::Fetch {
        url: url.to_owned(),
        detail: concord_llm::with_causes(&error.without_url()),
    }
}

/// The first characters of a header value, control characters dropped.
fn printable(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_LOCATION_CHARS)
        .collect()
}

/// The registrable domain of `host` (lowercase) by the Public Suffix List
/// (`a.evil.example` → `evil.example`, `x.y.example.co.uk` → `example.co.uk`); a host that
/// has none (a public suffix itself, or a single label such as `localhost`) is its own.
fn registrable_domain(host: &str) -> String {
    psl::domain_str(host).unwrap_or(host).to_owned()
}

/// `did`'s host (lowercase) and port, as `host:port` (or `host`).
fn authority(did: &Did) -> String {
    let host = did.host().to_ascii_lowercase();
    match did.port() {
        Some(port) => format!("{host}:{port}"),
        None => host,
    }
}

/// Whether `host` (lowercase) is `localhost` or under it.
fn is_localhost(host: &str) -> bool {
    host == "localhost" || host.ends_with(".localhost")
}

/// A lookup of a host name's addresses.
type Lookup = Arc<
    dyn Fn(&str) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>> + Send + Sync,
>;

/// The system's resolver (`getaddrinfo` through tokio).
fn system_lookup(host: &str) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>> {
    let host = host.to_owned();
    Box::pin(async move {
        let addresses = tokio::net::lookup_host((host.as_str(), 0)).await?;
        Ok(addresses.map(|address| address.ip()).collect())
    })
}

/// The HTTP client's DNS resolver: public addresses only (loopback test mode: `localhost`
/// names are `127.0.0.1`, looked up nowhere).
struct GuardedDns {
    loopback_http: bool,
    lookup: Lookup,
}

/// Why [`GuardedDns`] gave no address; read back from the HTTP client's error.
#[derive(Debug, thiserror::Error)]
enum DnsFailure {
    #[error("{host} resolves to {address}, which is not a public address")]
    Private { host: String, address: IpAddr },
    #[error("{host}: {detail}")]
    Lookup { host: String, detail: String },
}

impl Resolve for GuardedDns {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_ascii_lowercase();
        if self.loopback_http && is_localhost(&host) {
            let loopback: Addrs =
                Box::new(std::iter::once(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))));
            return Box::pin(std::future::ready(Ok(loopback)));
        }
        let lookup = (self.lookup)(&host);
        Box::pin(async move {
            let addresses = lookup.await.map_err(|error| DnsFailure::Lookup {
                host: host.clone(),
                detail: error.to_string(),
            })?;
            let addresses = public_only(&host, addresses)?;
            let addresses: Addrs = Box::new(
                addresses
                    .into_iter()
                    .map(|address| SocketAddr::new(address, 0)),
            );
            Ok(addresses)
        })
    }
}

/// `addresses` when there are some and every one is public; else the first that is not.
fn public_only(host: &str, addresses: Vec<IpAddr>) -> Result<Vec<IpAddr>, DnsFailure> {
    if addresses.is_empty() {
        return Err(DnsFailure::Lookup {
            host: host.to_owned(),
            detail: "no address".to_owned(),
        });
    }
    match addresses.iter().find(|address| !is_public(**address)) {
        Some(address) => Err(DnsFailure::Private {
            host: host.to_owned(),
            address: *address,
        }),
        None => Ok(addresses),
    }
}

/// Whether `address` is a public unicast address.
fn is_public(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(address) => is_public_v4(address),
        IpAddr::V6(address) => is_public_v6(address),
    }
}

/// IPv4 blocks that are not public unicast (network, prefix length).
const NOT_PUBLIC_V4: [(u32, u32); 15] = [
    (0x0000_0000, 8),  // 0.0.0.0/8: "this network", unspecified
    (0x0a00_0000, 8),  // 10.0.0.0/8: private
    (0x6440_0000, 10), // 100.64.0.0/10: shared address space (CGNAT)
    (0x7f00_0000, 8),  // 127.0.0.0/8: loopback
    (0xa9fe_0000, 16), // 169.254.0.0/16: link-local
    (0xac10_0000, 12), // 172.16.0.0/12: private
    (0xc000_0000, 24), // 192.0.0.0/24: IETF protocol assignments
    (0xc000_0200, 24), // 192.0.2.0/24: documentation (TEST-NET-1)
    (0xc058_6300, 24), // 192.88.99.0/24: 6to4 relay anycast (deprecated)
    (0xc0a8_0000, 16), // 192.168.0.0/16: private
    (0xc612_0000, 15), // 198.18.0.0/15: benchmarking
    (0xc633_6400, 24), // 198.51.100.0/24: documentation (TEST-NET-2)
    (0xcb00_7100, 24), // 203.0.113.0/24: documentation (TEST-NET-3)
    (0xe000_0000, 4),  // 224.0.0.0/4: multicast
    (0xf000_0000, 4),  // 240.0.0.0/4: reserved, and the broadcast 255.255.255.255
];

fn is_public_v4(address: Ipv4Addr) -> bool {
    let bits = u32::from(address);
    !NOT_PUBLIC_V4
        .iter()
        .any(|&(network, prefix)| (bits ^ network) >> (32 - prefix) == 0)
}

fn is_public_v6(address: Ipv6Addr) -> bool {
    if let Some(embedded) = embedded_v4(address) {
        return is_public_v4(embedded);
    }
    let segments = address.segments();
    // Global unicast is 2000::/3; everything else (loopback, unspecified, unique-local
    // fc00::/7, link-local fe80::/10, multicast ff00::/8, …) is not public.
    let global_unicast = segments[0] & 0xe000 == 0x2000;
    // 2001::/23: IETF protocol assignments (Teredo, benchmarking, ORCHID, …).
    let protocol_assignments = segments[0] == 0x2001 && segments[1] < 0x0200;
    // 2001:db8::/32 and 3fff::/20: documentation.
    let documentation = (segments[0] == 0x2001 && segments[1] == 0x0db8)
        || (segments[0] == 0x3fff && segments[1] < 0x1000);
    global_unicast && !protocol_assignments && !documentation
}

/// The IPv4 address an IPv6 address stands for: IPv4-mapped `::ffff:a.b.c.d`,
/// IPv4-compatible `::a.b.c.d` (`::` and `::1` included, which map to refused blocks),
/// NAT64 `64:ff9b::a.b.c.d` and 6to4 `2002:aabb:ccdd::/48`.
fn embedded_v4(address: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = address.segments();
    let v4 = |high: u16, low: u16| Ipv4Addr::from((u32::from(high) << 16) | u32::from(low));
    match s {
        [0, 0, 0, 0, 0, 0xffff, high, low] | [0, 0, 0, 0, 0, 0, high, low] => Some(v4(high, low)),
        [0x64, 0xff9b, 0, 0, 0, 0, high, low] => Some(v4(high, low)),
        [0x2002, high, low, ..] => Some(v4(high, low)),
        _ => None,
    }
}

/// The cached documents and failures, and our own documents.
struct Cache {
    own: HashMap<Did, Arc<VerifiedDocument>>,
    documents: Bounded<Arc<VerifiedDocument>>,
    failures: Bounded<ResolveError>,
}

impl Cache {
    fn new(capacity: usize) -> Self {
        Self {
            own: HashMap::new(),
            documents: Bounded::new(capacity),
            failures: Bounded::new(capacity),
        }
    }

    fn get(&mut self, did: &Did, now: Instant) -> Option<Outcome> {
        if let Some(document) = self.own.get(did) {
            return Some(Ok(Arc::clone(document)));
        }
        if let Some(document) = self.documents.get(did, now) {
            return Some(Ok(document));
        }
        self.failures.get(did, now).map(Err)
    }

    fn insert_own(&mut self, document: Arc<VerifiedDocument>) {
        let did = document.did().clone();
        self.documents.entries.remove(&did);
        self.failures.entries.remove(&did);
        self.own.insert(did, document);
    }
}

/// A map of at most `capacity` entries, each with an expiry.
struct Bounded<T> {
    capacity: usize,
    entries: HashMap<Did, Entry<T>>,
    /// Counts uses, to find the entry used longest ago.
    clock: u64,
}

struct Entry<T> {
    value: T,
    expires: Instant,
    used: u64,
}

impl<T: Clone> Bounded<T> {
    fn new(capacity: usize) -> Self {
        Self {
            capacity,
            entries: HashMap::new(),
            clock: 0,
        }
    }

    fn tick(&mut self) -> u64 {
        self.clock = self.clock.wrapping_add(1);
        self.clock
    }

    /// The value of `did` unless it expired (then it goes).
    fn get(&mut self, did: &Did, now: Instant) -> Option<T> {
        let tick = self.tick();
        let entry = self.entries.get_mut(did)?;
        if entry.expires <= now {
            self.entries.remove(did);
            return None;
        }
        entry.used = tick;
        Some(entry.value.clone())
    }

    /// Inserts (or replaces) `did`'s value; when full, the expired entries go first, then
    /// the one used longest ago.
    fn insert(&mut self, did: &Did, value: T, expires: Instant) {
        let tick = self.tick();
        if !self.entries.contains_key(did) && self.entries.len() >= self.capacity {
            let now = Instant::now();
            self.entries.retain(|_, entry| entry.expires > now);
            if self.entries.len() >= self.capacity {
                let oldest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, entry)| entry.used)
                    .map(|(did, _)| did.clone());
                if let Some(oldest) = oldest {
                    self.entries.remove(&oldest);
                }
            }
        }
        self.entries.insert(
            did.clone(),
            Entry {
                value,
                expires,
                used: tick,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant as StdInstant;

    use axum::body::{Body, Bytes};
    use axum::http::{header, StatusCode};
    use axum::response::{IntoResponse, Response};
    use concord_identity::{Identity, Keys};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    const CREATED: &str = "2025-01-01T00:00:00Z";

    fn tls() -> Arc<rustls::ClientConfig> {
        Arc::new(crate::tls::client_config(vec![]).unwrap())
    }

    /// Loopback test mode, with a short timeout.
    fn test_mode() -> ResolverSettings {
        ResolverSettings {
            allow_loopback_http: true,
            timeout: Duration::from_secs(3),
            ..ResolverSettings::default()
        }
    }

    fn identity(host: &str, port: u16) -> Identity {
        Identity::new(Keys::generate(), host, Some(port), &["agents"]).unwrap()
    }

    fn document_bytes(identity: &Identity) -> Bytes {
        Bytes::from(serde_json::to_vec(&identity.document(CREATED, &[])).unwrap())
    }

    fn did_json(bytes: Bytes) -> Response {
        ([(header::CONTENT_TYPE, "application/did+json")], bytes).into_response()
    }

    /// A server on 127.0.0.1 answering every request with `answer(path)`, counting them.
    struct Site {
        port: u16,
        hits: Arc<AtomicUsize>,
    }

    async fn listen() -> (TcpListener, u16) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        (listener, port)
    }

    fn serve<F, Fut>(listener: TcpListener, answer: F) -> Site
    where
        F: Fn(String) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Response> + Send + 'static,
    {
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&hits);
        let router = axum::Router::new().fallback(move |request: axum::extract::Request| {
            counted.fetch_add(1, Ordering::SeqCst);
            answer(request.uri().path().to_owned())
        });
        tokio::spawn(async move { axum::serve(listener, router).await });
        Site { port, hits }
    }

    /// A site serving `identity`'s document at its DID's path (404 elsewhere).
    async fn site_of(host: &str) -> (Site, Identity) {
        let (listener, port) = listen().await;
        let identity = identity(host, port);
        let path = identity.did().document_path();
        let bytes = document_bytes(&identity);
        let site = serve(listener, move |asked: String| {
            let answer = if asked == path {
                did_json(bytes.clone())
            } else {
                StatusCode::NOT_FOUND.into_response()
            };
            async move { answer }
        });
        (site, identity)
    }

    #[tokio::test]
    async fn a_good_document_resolves_in_test_mode_then_comes_from_the_cache() {
        let (site, identity) = site_of("localhost").await;
        let resolver = Resolver::new(test_mode(), tls()).unwrap();
        let first = resolver.resolve(identity.did(), None).await.unwrap();
        assert_eq!(first.did(), identity.did());
        assert_eq!(site.hits.load(Ordering::SeqCst), 1);
        let second = resolver.resolve(identity.did(), None).await.unwrap();
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(
            site.hits.load(Ordering::SeqCst),
            1,
            "a cache hit fetches nothing"
        );
    }

    #[tokio::test]
    async fn a_subdomain_of_localhost_goes_to_loopback_in_test_mode() {
        let (site, identity) = site_of("agent.localhost").await;
        let resolver = Resolver::new(test_mode(), tls()).unwrap();
        assert!(resolver.resolve(identity.did(), None).await.is_ok());
        assert_eq!(site.hits.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn production_mode_refuses_a_localhost_did_without_a_request() {
        let (site, identity) = site_of("localhost").await;
        let resolver = Resolver::new(ResolverSettings::default(), tls()).unwrap();
        let error = resolver.resolve(identity.did(), None).await.unwrap_err();
        assert!(
            matches!(&error, ResolveError::NotHttps { did } if did == identity.did()),
            "{error}"
        );
        assert!(!error.public_reason().contains("127.0.0.1"));
        assert_eq!(site.hits.load(Ordering::SeqCst), 0);
    }

    /// A lookup answering `addresses` for every name.
    fn lookup_to(addresses: Vec<IpAddr>) -> Lookup {
        Arc::new(move |_host: &str| {
            let addresses = addresses.clone();
            Box::pin(async move { Ok(addresses) })
        })
    }

    #[tokio::test]
    async fn a_host_resolving_to_a_private_address_is_never_connected_to() {
        // The DID names a public-looking host whose DNS answers loopback (or a private
        // address next to a public one): the guard in the client's resolver refuses it,
        // in test mode too (only localhost names are loopback there).
        for (settings, answer) in [
            (
                ResolverSettings::default(),
                vec![IpAddr::from([127, 0, 0, 1])],
            ),
            (
                test_mode(),
                vec![
                    IpAddr::from([93, 184, 216, 34]),
                    IpAddr::from([10, 0, 0, 7]),
                ],
            ),
            (
                ResolverSettings::default(),
                vec!["::ffff:127.0.0.1".parse().unwrap()],
            ),
        ] {
            let (site, identity) = site_of("rebind.example").await;
            let refused = answer
                .iter()
                .copied()
                .find(|address| !is_public(*address))
                .unwrap();
            let resolver = Resolver::with_lookup(settings, tls(), lookup_to(answer)).unwrap();
            let error = resolver.resolve(identity.did(), None).await.unwrap_err();
            match &error {
                ResolveError::PrivateAddress { host, address } => {
                    assert_eq!(host, "rebind.example");
                    assert_eq!(*address, refused);
                }
                other => panic!("expected PrivateAddress, got {other:?}"),
            }
            let reason = error.public_reason();
            assert!(!reason.contains(&refused.to_string()), "{reason}");
            assert_eq!(site.hits.load(Ordering::SeqCst), 0);
        }
    }

    #[tokio::test]
    async fn a_failed_lookup_is_a_dns_error() {
        let failing: Lookup =
            Arc::new(|_host: &str| Box::pin(async { Err(io::Error::other("no such host")) }));
        let did = Did::parse(&format!(
            "did:wba:nowhere.example:agents:e1_{}",
            "a".repeat(43)
        ))
        .unwrap();
        let resolver = Resolver::with_lookup(ResolverSettings::default(), tls(), failing).unwrap();
        let error = resolver.resolve(&did, None).await.unwrap_err();
        assert!(
            matches!(&error, ResolveError::Dns { host, detail } if host == "nowhere.example" && detail.contains("no such host")),
            "{error:?}"
        );
        let empty =
            Resolver::with_lookup(ResolverSettings::default(), tls(), lookup_to(vec![])).unwrap();
        let error = empty.resolve(&did, None).await.unwrap_err();
        assert!(
            matches!(&error, ResolveError::Dns { detail, .. } if detail == "no address"),
            "{error:?}"
        );
    }

    #[tokio::test]
    async fn an_endless_body_is_refused_as_soon_as_it_passes_the_limit() {
        let (listener, port) = listen().await;
        let identity = identity("localhost", port);
        let site = serve(listener, |_path: String| async {
            let chunk = Bytes::from(vec![b' '; 16 * 1024]);
            let endless =
                futures_util::stream::repeat_with(move || Ok::<_, io::Error>(chunk.clone()));
            Body::from_stream(endless).into_response()
        });
        let resolver = Resolver::new(test_mode(), tls()).unwrap();
        let started = StdInstant::now();
        let error = resolver.resolve(identity.did(), None).await.unwrap_err();
        assert!(
            matches!(&error, ResolveError::TooLarge { limit, .. } if *limit == 64 * 1024),
            "{error:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(site.hits.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn an_announced_50_mib_body_is_refused_before_it_is_read() {
        // A raw server: the headers announce 50 MiB, then nothing comes. Refused on the
        // headers, long before the timeout.
        let (listener, port) = listen().await;
        let identity = identity("localhost", port);
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut stream, _)) = listener.accept().await {
                // The request first (a small GET), then the headers.
                let mut request = [0_u8; 4096];
                let _ = stream.read(&mut request).await;
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/did+json\r\n\
                            content-length: 52428800\r\n\r\n";
                let _ = stream.write_all(head.as_bytes()).await;
                held.push(stream);
            }
        });
        let resolver = Resolver::new(test_mode(), tls()).unwrap();
        let started = StdInstant::now();
        let error = resolver.resolve(identity.did(), None).await.unwrap_err();
        assert!(matches!(&error, ResolveError::TooLarge { .. }), "{error:?}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn a_server_that_never_answers_times_out() {
        let (listener, port) = listen().await;
        let identity = identity("localhost", port);
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        let settings = ResolverSettings {
            timeout: Duration::from_millis(300),
            ..test_mode()
        };
        let resolver = Resolver::new(settings, tls()).unwrap();
        let started = StdInstant::now();
        let error = resolver.resolve(identity.did(), None).await.unwrap_err();
        let elapsed = started.elapsed();
        assert!(
            matches!(&error, ResolveError::Timeout { after, .. } if *after == Duration::from_millis(300)),
            "{error:?}"
        );
        assert!(elapsed >= Duration::from_millis(300), "{elapsed:?}");
        assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
        assert!(
            error.public_reason().contains("300 ms"),
            "{}",
            error.public_reason()
        );
    }

    #[tokio::test]
    async fn a_redirect_to_another_origin_is_not_followed() {
        let (other, _) = site_of("localhost").await;
        let (listener, port) = listen().await;
        let identity = identity("localhost", port);
        let elsewhere = format!("http://localhost:{}/agents/did.json", other.port);
        let location = elsewhere.clone();
        let site = serve(listener, move |_path: String| {
            let location = location.clone();
            async move { (StatusCode::FOUND, [(header::LOCATION, location)]).into_response() }
        });
        let resolver = Resolver::new(test_mode(), tls()).unwrap();
        let error = resolver.resolve(identity.did(), None).await.unwrap_err();
        match &error {
            ResolveError::Redirect {
                status, location, ..
            } => {
                assert_eq!(*status, 302);
                assert_eq!(*location, elsewhere);
            }
            other => panic!("expected Redirect, got {other:?}"),
        }
        assert_eq!(site.hits.load(Ordering::SeqCst), 1);
        assert_eq!(other.hits.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_document_of_another_did_is_refused() {
        let (listener, port) = listen().await;
        let asked = identity("localhost", port);
        let other = identity("localhost", port);
        let bytes = document_bytes(&other);
        let _site = serve(listener, move |_path: String| {
            let answer = did_json(bytes.clone());
            async move { answer }
        });
        let resolver = Resolver::new(test_mode(), tls()).unwrap();
        let error = resolver.resolve(asked.did(), None).await.unwrap_err();
        assert!(
            matches!(
                &error,
                ResolveError::Document { did, source: DidDocumentError::IdMismatch { .. } } if did == asked.did()
            ),
            "{error:?}"
        );
        assert!(error
            .public_reason()
            .starts_with("your DID document is not valid"));
    }

    #[tokio::test]
    async fn a_404_is_a_status_error_cached_for_the_failure_ttl() {
        let (listener, port) = listen().await;
        let identity = identity("localhost", port);
        let site = serve(listener, |_path: String| async {
            StatusCode::NOT_FOUND.into_response()
        });
        let settings = ResolverSettings {
            failure_cache_ttl: Duration::from_millis(400),
            ..test_mode()
        };
        let resolver = Resolver::new(settings, tls()).unwrap();
        let error = resolver.resolve(identity.did(), None).await.unwrap_err();
        assert!(
            matches!(&error, ResolveError::Status { status: 404, .. }),
            "{error:?}"
        );
        assert_eq!(
            error.public_reason(),
            "your DID document could not be fetched (HTTP 404)"
        );
        let again = resolver.resolve(identity.did(), None).await.unwrap_err();
        assert!(matches!(again, ResolveError::Status { status: 404, .. }));
        assert_eq!(site.hits.load(Ordering::SeqCst), 1, "the failure is cached");
        tokio::time::sleep(Duration::from_millis(450)).await;
        let _ = resolver.resolve(identity.did(), None).await.unwrap_err();
        assert_eq!(site.hits.load(Ordering::SeqCst), 2, "…for its TTL only");
    }

    #[tokio::test]
    async fn concurrent_resolves_of_one_did_share_one_fetch() {
        let (listener, port) = listen().await;
        let identity = identity("localhost", port);
        let bytes = document_bytes(&identity);
        let site = serve(listener, move |_path: String| {
            let answer = did_json(bytes.clone());
            async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                answer
            }
        });
        let resolver = Resolver::new(test_mode(), tls()).unwrap();
        let resolves = (0..10).map(|_| {
            let resolver = resolver.clone();
            let did = identity.did().clone();
            tokio::spawn(async move { resolver.resolve(&did, None).await })
        });
        for resolved in futures_util::future::join_all(resolves).await {
            assert!(resolved.unwrap().is_ok());
        }
        assert_eq!(site.hits.load(Ordering::SeqCst), 1);
        assert!(resolver.inner.in_flight.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_cancelled_resolve_leaves_nothing_behind() {
        let (identities, _) = slow_site(1, Duration::from_millis(300)).await;
        let did = identities[0].did();
        let resolver = Resolver::new(test_mode(), tls()).unwrap();
        let cancelled =
            tokio::time::timeout(Duration::from_millis(50), resolver.resolve(did, None));
        assert!(cancelled.await.is_err(), "the fetch takes 300 ms");
        assert!(resolver.inner.in_flight.lock().unwrap().is_empty());
        assert!(resolver.inner.domain_slots.is_empty());
        assert_eq!(resolver.inner.node_slots.available_permits(), 32);
        assert!(resolver.resolve(did, None).await.is_ok());
    }

    /// Serves the documents of `count` identities on one port, each after `delay`,
    /// recording the most requests in progress at once.
    async fn slow_site(count: usize, delay: Duration) -> (Vec<Identity>, Arc<AtomicUsize>) {
        let (listener, port) = listen().await;
        let identities: Vec<Identity> = (0..count).map(|_| identity("localhost", port)).collect();
        let documents: Arc<HashMap<String, Bytes>> = Arc::new(
            identities
                .iter()
                .map(|identity| (identity.did().document_path(), document_bytes(identity)))
                .collect(),
        );
        let current = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let most_seen = Arc::clone(&most);
        serve(listener, move |path: String| {
            let documents = Arc::clone(&documents);
            let current = Arc::clone(&current);
            let most = Arc::clone(&most_seen);
            async move {
                let now = current.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                current.fetch_sub(1, Ordering::SeqCst);
                match documents.get(&path) {
                    Some(bytes) => did_json(bytes.clone()),
                    None => StatusCode::NOT_FOUND.into_response(),
                }
            }
        });
        (identities, most)
    }

    async fn resolve_all(resolver: &Resolver, identities: &[Identity]) {
        let resolves = identities.iter().map(|identity| {
            let resolver = resolver.clone();
            let did = identity.did().clone();
            tokio::spawn(async move { resolver.resolve(&did, None).await })
        });
        for resolved in futures_util::future::join_all(resolves).await {
            assert!(resolved.unwrap().is_ok());
        }
    }

    #[tokio::test]
    async fn fetches_are_bounded_per_host_and_node_wide() {
        let (identities, most) = slow_site(10, Duration::from_millis(150)).await;
        let resolver = Resolver::new(test_mode(), tls()).unwrap();
        resolve_all(&resolver, &identities).await;
        assert_eq!(most.load(Ordering::SeqCst), 4, "at most 4 per host");
        assert!(resolver.inner.domain_slots.is_empty());

        let (identities, most) = slow_site(6, Duration::from_millis(150)).await;
        let settings = ResolverSettings {
            max_concurrent: 2,
            ..test_mode()
        };
        let resolver = Resolver::new(settings, tls()).unwrap();
        resolve_all(&resolver, &identities).await;
        assert_eq!(most.load(Ordering::SeqCst), 2, "at most 2 node-wide");
    }

    #[tokio::test]
    async fn no_free_slot_within_the_timeout_is_busy_and_not_cached() {
        let (site, identity) = site_of("localhost").await;
        let settings = ResolverSettings {
            max_concurrent: 1,
            timeout: Duration::from_millis(200),
            ..test_mode()
        };
        let resolver = Resolver::new(settings, tls()).unwrap();
        let taken = Arc::clone(&resolver.inner.node_slots)
            .acquire_owned()
            .await
            .unwrap();
        let error = resolver.resolve(identity.did(), None).await.unwrap_err();
        assert!(
            matches!(
                &error,
                ResolveError::Busy {
                    capacity: Capacity::Node(1),
                    ..
                }
            ),
            "{error:?}"
        );
        assert_eq!(site.hits.load(Ordering::SeqCst), 0);
        drop(taken);
        assert!(
            resolver.resolve(identity.did(), None).await.is_ok(),
            "Busy is not cached"
        );
        assert_eq!(site.hits.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_caller_joining_a_fetch_of_its_did_is_not_refused_for_another_address_busy() {
        let (site, identity) = site_of("localhost").await;
        let settings = ResolverSettings {
            max_concurrent_per_address: 1,
            timeout: Duration::from_millis(300),
            ..test_mode()
        };
        let resolver = Resolver::new(settings, tls()).unwrap();
        let attacker = ClientKey::of("127.0.0.2".parse().unwrap());
        let victim = ClientKey::of("127.0.0.1".parse().unwrap());
        // The attacker's address holds its only slot (a DID on a host that never answers)…
        let held = resolver
            .inner
            .address_slots
            .acquire(attacker, Duration::from_millis(10))
            .await
            .unwrap();
        // …and it claims the victim's DID, first; the victim's own upgrade comes next.
        let claimed = {
            let resolver = resolver.clone();
            let did = identity.did().clone();
            tokio::spawn(async move { resolver.resolve(&did, Some(attacker)).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        let served = resolver.resolve(identity.did(), Some(victim)).await;
        assert!(served.is_ok(), "{served:?}");
        let refused = claimed.await.unwrap();
        assert!(
            matches!(
                &refused,
                Err(ResolveError::Busy {
                    capacity: Capacity::Address { limit: 1 },
                    ..
                })
            ),
            "{refused:?}"
        );
        drop(held);
        assert_eq!(site.hits.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn our_own_document_is_never_fetched() {
        // Nothing listens on the DID's port.
        let (listener, port) = listen().await;
        drop(listener);
        let identity = identity("localhost", port);
        let document = read_document(
            &document_bytes(&identity),
            identity.did(),
            &DidDocumentLimits::default(),
        )
        .unwrap();
        let resolver = Resolver::new(test_mode(), tls()).unwrap();
        resolver.insert_own(Arc::new(document));
        let resolved = resolver.resolve(identity.did(), None).await.unwrap();
        assert_eq!(resolved.did(), identity.did());
    }

    #[test]
    fn zero_settings_are_refused() {
        for settings in [
            ResolverSettings {
                max_document_bytes: 0,
                ..ResolverSettings::default()
            },
            ResolverSettings {
                cache_capacity: 0,
                ..ResolverSettings::default()
            },
            ResolverSettings {
                max_concurrent: 0,
                ..ResolverSettings::default()
            },
            ResolverSettings {
                max_concurrent_per_host: 0,
                ..ResolverSettings::default()
            },
            ResolverSettings {
                timeout: Duration::ZERO,
                ..ResolverSettings::default()
            },
            ResolverSettings {
                connect_timeout: Duration::ZERO,
                ..ResolverSettings::default()
            },
            ResolverSettings {
                first_byte_timeout: Duration::ZERO,
                ..ResolverSettings::default()
            },
            ResolverSettings {
                max_concurrent_per_address: 0,
                ..ResolverSettings::default()
            },
            ResolverSettings {
                max_concurrent: usize::MAX,
                ..ResolverSettings::default()
            },
        ] {
            let error = Resolver::new(settings, tls()).err().unwrap().to_string();
            assert!(error.starts_with("resolver "), "{error}");
        }
    }

    /// Serves the documents of `count` identities on hosts `host(n)` of one port, each
    /// after `delay`, recording the most requests in progress at once.
    async fn slow_hosts(
        count: usize,
        host: impl Fn(usize) -> String,
        delay: Duration,
    ) -> (Vec<Identity>, Arc<AtomicUsize>) {
        let (listener, port) = listen().await;
        let identities: Vec<Identity> = (0..count).map(|n| identity(&host(n), port)).collect();
        let documents: Arc<HashMap<String, Bytes>> = Arc::new(
            identities
                .iter()
                .map(|identity| (identity.did().document_path(), document_bytes(identity)))
                .collect(),
        );
        let current = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let most_seen = Arc::clone(&most);
        serve(listener, move |path: String| {
            let documents = Arc::clone(&documents);
            let current = Arc::clone(&current);
            let most = Arc::clone(&most_seen);
            async move {
                let now = current.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                current.fetch_sub(1, Ordering::SeqCst);
                match documents.get(&path) {
                    Some(bytes) => did_json(bytes.clone()),
                    None => StatusCode::NOT_FOUND.into_response(),
                }
            }
        });
        (identities, most)
    }

    #[test]
    fn hosts_of_one_registrable_domain_share_it() {
        for (host, domain) in [
            ("a.evil.example", "evil.example"),
            ("x.y.evil.example", "evil.example"),
            ("shop.example.co.uk", "example.co.uk"),
            ("a.evil.localhost", "evil.localhost"),
            ("localhost", "localhost"),
            ("co.uk", "co.uk"),
        ] {
            assert_eq!(registrable_domain(host), domain, "{host}");
        }
    }

    #[tokio::test]
    async fn hosts_minted_under_one_domain_share_its_fetch_slots() {
        // Ten hosts under `evil.localhost`: one domain, so at most 4 fetches at once.
        let (identities, most) = slow_hosts(
            10,
            |n| format!("h{n}.evil.localhost"),
            Duration::from_millis(150),
        )
        .await;
        let resolver = Resolver::new(test_mode(), tls()).unwrap();
        resolve_all(&resolver, &identities).await;
        assert_eq!(most.load(Ordering::SeqCst), 4, "at most 4 per domain");
        assert!(resolver.inner.domain_slots.is_empty());
    }

    #[tokio::test]
    async fn one_client_address_holds_its_share_of_the_fetch_slots() {
        // Six DIDs on six domains, all asked for by one client address: 2 at once.
        let (identities, most) = slow_hosts(
            6,
            |n| format!("agent.d{n}.localhost"),
            Duration::from_millis(150),
        )
        .await;
        let resolver = Resolver::new(test_mode(), tls()).unwrap();
        let client = ClientKey::of(IpAddr::from([127, 0, 0, 2]));
        let resolves = identities.iter().map(|identity| {
            let resolver = resolver.clone();
            let did = identity.did().clone();
            tokio::spawn(async move { resolver.resolve(&did, Some(client)).await })
        });
        for resolved in futures_util::future::join_all(resolves).await {
            assert!(resolved.unwrap().is_ok());
        }
        assert_eq!(most.load(Ordering::SeqCst), 2, "at most 2 per address");
        assert!(resolver.inner.address_slots.is_empty());
    }

    #[tokio::test]
    async fn a_full_address_share_is_busy_for_that_address_only() {
        let (_site, identity) = site_of("localhost").await;
        let settings = ResolverSettings {
            max_concurrent_per_address: 1,
            timeout: Duration::from_millis(200),
            ..test_mode()
        };
        let resolver = Resolver::new(settings, tls()).unwrap();
        let attacker = ClientKey::of(IpAddr::from([127, 0, 0, 2]));
        let _held = resolver
            .inner
            .address_slots
            .acquire(attacker, Duration::from_millis(10))
            .await
            .unwrap();
        let error = resolver
            .resolve(identity.did(), Some(attacker))
            .await
            .unwrap_err();
        assert!(
            matches!(
                &error,
                ResolveError::Busy {
                    capacity: Capacity::Address { limit: 1 },
                    ..
                }
            ),
            "{error:?}"
        );
        let other = ClientKey::of(IpAddr::from([127, 0, 0, 1]));
        assert!(resolver.resolve(identity.did(), Some(other)).await.is_ok());
    }

    /// A server on 127.0.0.1 that accepts connections and never writes a byte.
    async fn silent() -> u16 {
        let (listener, port) = listen().await;
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        port
    }

    #[tokio::test]
    async fn a_host_that_never_answers_frees_its_slot_at_the_first_byte_deadline() {
        let identity = identity("localhost", silent().await);
        let settings = ResolverSettings {
            first_byte_timeout: Duration::from_millis(300),
            ..test_mode()
        };
        let resolver = Resolver::new(settings, tls()).unwrap();
        let error = resolver.resolve(identity.did(), None).await.unwrap_err();
        assert!(
            matches!(
                &error,
                ResolveError::Timeout { deadline: Deadline::Connect | Deadline::FirstByte, after, .. }
                    if *after < Duration::from_secs(3)
            ),
            "{error:?}"
        );
        assert_eq!(resolver.inner.node_slots.available_permits(), 32);
    }

    #[tokio::test]
    async fn a_tls_handshake_that_never_ends_is_a_connect_timeout() {
        let identity = identity("localhost", silent().await);
        let settings = ResolverSettings {
            connect_timeout: Duration::from_millis(200),
            ..test_mode()
        };
        let resolver = Resolver::new(settings, tls()).unwrap();
        let error = resolver.resolve(identity.did(), None).await.unwrap_err();
        assert!(
            matches!(
                &error,
                ResolveError::Timeout { deadline: Deadline::Connect, after, .. }
                    if *after == Duration::from_millis(200)
            ),
            "{error:?}"
        );
        assert!(error
            .public_reason()
            .contains("no connection within 200 ms"));
    }

    /// A plain HTTP server on 127.0.0.1 answering every request with `document`, counting
    /// the connections that opened with a TLS handshake (first byte 0x16) and the
    /// requests answered.
    async fn plain_counting(
        port_for: impl FnOnce(u16) -> Bytes,
    ) -> (u16, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        let (listener, port) = listen().await;
        let document = port_for(port);
        let handshakes = Arc::new(AtomicUsize::new(0));
        let answered = Arc::new(AtomicUsize::new(0));
        let (tls_seen, answers) = (Arc::clone(&handshakes), Arc::clone(&answered));
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut request = Vec::new();
                let mut buffer = [0_u8; 1024];
                while !request.windows(4).any(|window| window == b"\r\n\r\n") {
                    match stream.read(&mut buffer).await {
                        Ok(0) | Err(_) => break,
                        Ok(read) => request.extend_from_slice(&buffer[..read]),
                    }
                    if request.first() == Some(&0x16) {
                        tls_seen.fetch_add(1, Ordering::SeqCst);
                        break;
                    }
                }
                if request.first() == Some(&0x16) {
                    continue;
                }
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/did+json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n",
                    document.len()
                );
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(&document).await;
                answers.fetch_add(1, Ordering::SeqCst);
            }
        });
        (port, handshakes, answered)
    }

    #[tokio::test]
    async fn a_loopback_host_reached_over_http_is_resolved_with_no_tls_attempt() {
        let mut made = None;
        let (port, handshakes, answered) = plain_counting(|port| {
            let identity = identity("localhost", port);
            let bytes = document_bytes(&identity);
            made = Some(identity);
            bytes
        })
        .await;
        let identity = made.unwrap();
        let resolver = Resolver::new(test_mode(), tls()).unwrap();
        resolver.reached_over(
            identity.did(),
            &format!("http://127.0.0.1:{port}/.well-known/wot"),
        );
        assert!(resolver.resolve(identity.did(), None).await.is_ok());
        assert_eq!(answered.load(Ordering::SeqCst), 1);
        assert_eq!(handshakes.load(Ordering::SeqCst), 0, "no HTTPS attempt");
    }

    #[tokio::test]
    async fn a_loopback_host_is_fetched_over_the_scheme_it_answered_on_before() {
        let mut made = Vec::new();
        let (port, handshakes, answered) = plain_counting(|port| {
            let identity = identity("localhost", port);
            let bytes = document_bytes(&identity);
            made.push(identity);
            bytes
        })
        .await;
        let identity = made.pop().unwrap();
        // Another DID on the same host and port (its document is the first's: refused,
        // but over HTTP, which answered).
        let other = Identity::new(Keys::generate(), "localhost", Some(port), &["agents"]).unwrap();
        let resolver = Resolver::new(test_mode(), tls()).unwrap();
        assert!(resolver.resolve(identity.did(), None).await.is_ok());
        assert_eq!(handshakes.load(Ordering::SeqCst), 1, "HTTPS first, once");
        let error = resolver.resolve(other.did(), None).await.unwrap_err();
        assert!(matches!(error, ResolveError::Document { .. }), "{error:?}");
        assert_eq!(answered.load(Ordering::SeqCst), 2);
        assert_eq!(
            handshakes.load(Ordering::SeqCst),
            1,
            "then HTTP straight away"
        );
    }

    #[tokio::test]
    async fn a_public_host_is_never_tried_over_http_whatever_was_reached() {
        let did = Did::parse(&format!(
            "did:wba:shop.example:agents:e1_{}",
            "a".repeat(43)
        ))
        .unwrap();
        let resolver = Resolver::with_lookup(
            test_mode(),
            tls(),
            lookup_to(vec![IpAddr::from([127, 0, 0, 1])]),
        )
        .unwrap();
        resolver.reached_over(&did, "http://shop.example/.well-known/wot");
        assert!(resolver.inner.loopback_schemes.lock().unwrap().is_empty());
        let error = resolver.resolve(&did, None).await.unwrap_err();
        assert!(
            matches!(error, ResolveError::PrivateAddress { .. }),
            "{error:?}"
        );
    }

    fn ips(addresses: &[&str]) -> Vec<IpAddr> {
        addresses.iter().map(|text| text.parse().unwrap()).collect()
    }

    #[test]
    fn the_dns_filter_passes_public_addresses_only() {
        let public = ips(&[
            "93.184.216.34",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "2606:2800:220:1:248:1893:25c8:1946",
            "2a00:1450:4001:80b::200e",
            "::ffff:93.184.216.34",
            "64:ff9b::808:808",
            "2002:5db8:d822::1",
        ]);
        assert_eq!(public_only("example.com", public.clone()).unwrap(), public);

        let refused = ips(&[
            // IPv4
            "0.0.0.0",
            "0.1.2.3",
            "127.0.0.1",
            "127.255.255.254",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "198.51.100.1",
            "203.0.113.1",
            "198.18.0.1",
            "198.19.255.255",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            // IPv6
            "::",
            "::1",
            "fc00::1",
            "fd12:3456:789a::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
            "2001:db8::1",
            "3fff::1",
            "2001::1",
            "100::1",
            // IPv4 inside IPv6
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:192.168.0.1",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "2002:7f00:1::1",
            "2002:c0a8:101::1",
        ]);
        for address in refused {
            let error = public_only("example.com", vec![address]).unwrap_err();
            assert!(
                matches!(error, DnsFailure::Private { address: refused, .. } if refused == address),
                "{address} passed"
            );
            // One bad address among good ones refuses the host.
            let mixed = vec![public[0], address, public[6]];
            assert!(
                matches!(public_only("example.com", mixed), Err(DnsFailure::Private { address: refused, .. }) if refused == address),
                "{address} passed among public ones"
            );
        }
        assert!(matches!(
            public_only("example.com", vec![]),
            Err(DnsFailure::Lookup { .. })
        ));
    }

    #[test]
    fn the_cache_is_bounded_and_forgets_expired_then_least_used_entries() {
        let did = |n: usize| Did::parse(&format!("did:wba:example.com:user{n}")).unwrap();
        let now = Instant::now();
        let later = now + Duration::from_secs(60);
        let mut bounded: Bounded<usize> = Bounded::new(2);
        bounded.insert(&did(1), 1, later);
        bounded.insert(&did(2), 2, later);
        assert_eq!(bounded.get(&did(1), now), Some(1));
        bounded.insert(&did(3), 3, later);
        assert_eq!(bounded.entries.len(), 2);
        assert_eq!(bounded.get(&did(2), now), None, "the least used went");
        assert_eq!(bounded.get(&did(1), now), Some(1));
        assert_eq!(bounded.get(&did(3), now), Some(3));

        // An expired entry goes first, whatever its use.
        bounded.insert(&did(1), 1, now);
        bounded.insert(&did(4), 4, later);
        assert_eq!(bounded.get(&did(3), now), Some(3));
        assert_eq!(bounded.get(&did(4), now), Some(4));
        assert_eq!(bounded.get(&did(1), now), None);
        // Past its expiry, an entry is gone.
        assert_eq!(bounded.get(&did(3), later), None);
        assert!(!bounded.entries.contains_key(&did(3)));
    }

    #[test]
    fn reasons_for_a_peer_name_no_address_or_url() {
        let url = "http://localhost:1234/agents/x/did.json".to_owned();
        let errors = [
            ResolveError::Fetch {
                url: url.clone(),
                detail: "connection refused (os error 111) at 127.0.0.1:1234".to_owned(),
            },
            ResolveError::Dns {
                host: "internal.corp".to_owned(),
                detail: "10.0.0.1".to_owned(),
            },
            ResolveError::Redirect {
                url: url.clone(),
                status: 301,
                location: "http://10.0.0.1/".to_owned(),
            },
            ResolveError::TooLarge {
                url: url.clone(),
                limit: 65536,
            },
        ];
        for error in errors {
            let reason = error.public_reason();
            assert!(!reason.contains("127.0.0.1"), "{reason}");
            assert!(!reason.contains("10.0.0.1"), "{reason}");
            assert!(!reason.contains("localhost"), "{reason}");
            assert!(!reason.contains("internal.corp"), "{reason}");
        }
    }
}
