//! Who is calling, and who answers: the node's DID (`did:wba`), DID authentication of the
//! WebSocket upgrade (RFC 9421 HTTP Message Signatures or the legacy `DIDWba` header, as the
//! reference ANP SDK writes them), the Noise channel under the frames, and who may call what.
//!
//! - [`Security`] is the node's policy: whether sessions must be encrypted and
//!   authenticated, how it signs when it connects, how it resolves DID documents.
//! - `resolve` fetches and checks peers' DID documents (HTTPS only, bounded, cached).
//! - `upgrade` checks a caller's credentials before a WebSocket exists (401 with ANP's
//!   challenge when they fail) and signs our own upgrade requests.
//! - `secure` runs the Noise handshake over the WebSocket and seals every message after it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use concord_identity::{Allow, Caller, Identity, Keys, NonceLog, ReplayCache, Service, TimeWindow};
use concord_store::NonceStore;

pub(crate) use error::{IdentitySetupError, NonceError, PeerCheckError};

mod error;
pub(crate) mod resolve;
pub(crate) mod secure;
mod slots;
pub(crate) mod upgrade;

pub use resolve::ResolverSettings;

/// Whether sessions run in the Noise channel (`concord-noise-xx.1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Encryption {
    /// Never: every session is plain (frames readable by anyone on the path unless TLS).
    Off,
    /// Encrypted whenever the peer speaks it; plain with a peer that cannot (the reference
    /// SDK). A requester refuses plain with a provider whose description says it speaks it
    /// (a stripped offer is a downgrade).
    #[default]
    Preferred,
    /// Encrypted or nothing: a provider refuses a plain upgrade, a requester a plain peer.
    Required,
}

/// Whether a provider accepts callers without a DID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Authentication {
    /// Anonymous callers may call the actions that allow [`Allow::Anyone`] (the default for
    /// every action); credentials, when sent, must be valid.
    #[default]
    Optional,
    /// Every session is DID-authenticated; an upgrade without credentials gets 401.
    Required,
}

/// Which of ANP's two header forms this node signs its upgrade requests with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SignatureForm {
    /// RFC 9421 `Signature-Input`/`Signature` (ANP's current profile).
    #[default]
    HttpSignatures,
    /// `Authorization: DIDWba …` (ANP's legacy header).
    LegacyDidWba,
}

/// The node's security policy: the defaults suit a node facing strangers with an identity
/// (encrypted when possible, anonymous callers allowed only where an action allows them).
///
/// ```
/// use concord_node::{Authentication, Encryption, Security};
///
/// let strict = Security {
///     encryption: Encryption::Required,
///     authentication: Authentication::Required,
///     ..Security::default()
/// };
/// assert_eq!(strict.time_window.max_age.as_secs(), 300);
/// ```
#[derive(Debug, Clone)]
pub struct Security {
    /// Whether sessions are encrypted.
    pub encryption: Encryption,
    /// Whether callers must prove a DID.
    pub authentication: Authentication,
    /// How this node signs when it connects (with an identity).
    pub signature_form: SignatureForm,
    /// How long a signature is good for: `created` at most `max_skew` ahead and `max_age`
    /// old (ANP's 60 s and 300 s).
    pub time_window: TimeWindow,
    /// Nonces remembered against replay (each for `replay_ttl`): past this many, new
    /// credentials are refused (503) rather than old nonces forgotten.
    pub replay_capacity: usize,
    /// How long a nonce is remembered (ANP's 6 minutes).
    pub replay_ttl: Duration,
    /// At most this many of the remembered nonces are one DID's (1,000): a DID signing
    /// fresh nonces as fast as it can gets 429 once it holds them, and fills nobody else's
    /// room.
    pub replay_per_did: usize,
    /// Upgrades from one client address (an IPv4 address or an IPv6 /64) whose credentials
    /// are being checked at once (4): one more gets 429, so that nobody holds the DID
    /// document fetches others need.
    pub max_authentications_per_address: usize,
    /// Whether a caller may authenticate with ANP's legacy `Authorization: DIDWba` header
    /// (default `false`: such an upgrade gets 401 with ANP's challenge, whose
    /// `Accept-Signature` names the RFC 9421 form, ANP's current one).
    ///
    /// The risk when `true`: the legacy header signs only the host name of the service it
    /// was made for (its nonce, timestamp and DID), not the port, path or endpoint. A
    /// header a caller sent to any service on the same host name (another agent on another
    /// port, or a hostile one that kept it) verifies here too, once, within the signature
    /// window ([`time_window`](Self::time_window)), unless that service is a node sharing
    /// this node's store (accepted nonces are recorded there): each store remembers its own
    /// nonces only. Turn it on only for old
    /// clients that cannot sign RFC 9421, on a host name no other service shares.
    pub legacy_didwba: bool,
    /// Resolving peers' DID documents.
    pub resolver: ResolverSettings,
    /// The Noise channel rekeys after this many records each way…
    pub rekey_after_records: u64,
    /// …or after this long.
    pub rekey_after: Duration,
    /// The DID the peer this node connects to must prove (default none): its description
    /// must name it (`concord:did`) and offer the encrypted channel, whose key proves it;
    /// else the connection is refused ([`ConnectError::Security`](crate::ConnectError::Security)).
    /// For a requester that looked the peer up by its DID (in a directory): a description
    /// found there could send it anywhere.
    pub expect_peer_did: Option<String>,
}

impl Default for Security {
    fn default() -> Self {
        Self {
            encryption: Encryption::default(),
            authentication: Authentication::default(),
            signature_form: SignatureForm::default(),
            time_window: TimeWindow::default(),
            replay_capacity: 100_000,
            replay_ttl: Duration::from_secs(360),
            replay_per_did: 1_000,
            max_authentications_per_address: 4,
            legacy_didwba: false,
            resolver: ResolverSettings::default(),
            rekey_after_records: 1 << 16,
            rekey_after: Duration::from_secs(600),
            expect_peer_did: None,
        }
    }
}

impl Security {
    /// Refuses settings that would open a hole: no room for a nonce, or nonces forgotten
    /// while the signatures that carried them are still good (a replay would pass).
    fn check(&self) -> Result<(), IdentitySetupError> {
        if self.replay_capacity == 0 || self.replay_per_did == 0 {
            return Err(IdentitySetupError::NoReplayRoom);
        }
        if self.max_authentications_per_address == 0 {
            return Err(IdentitySetupError::NoAuthentications);
        }
        let window = self.time_window.max_age + self.time_window.max_skew;
        if self.replay_ttl < window {
            return Err(IdentitySetupError::ReplayTtlTooShort {
                replay_ttl: self.replay_ttl,
                window,
            });
        }
        if self.time_window.max_age.is_zero() {
            return Err(IdentitySetupError::NoMaxAge);
        }
        Ok(())
    }
}

/// The path segments of a node's DID before its `e1_` fingerprint:
/// `did:wba:host%3Aport:agents:e1_…`, served at `/agents/e1_…/did.json`.
pub(crate) const DID_PATH: &[&str] = &["agents"];

/// The host and port in the DID of a node serving at `base_url`: its host name, or
/// `localhost` for a loopback (or unspecified) address; another IP address is refused, as a
/// `did:wba` DID names a host.
///
/// ```
/// use concord_node::did_location;
///
/// assert_eq!(did_location("http://127.0.0.1:8080/"), Ok(("localhost".to_owned(), Some(8080))));
/// assert_eq!(did_location("https://shop.example/"), Ok(("shop.example".to_owned(), None)));
/// assert!(did_location("http://192.0.2.7/").unwrap_err().to_string().contains("IP address"));
/// ```
pub fn did_location(base_url: &str) -> Result<(String, Option<u16>), DidLocationError> {
    let url = url::Url::parse(base_url).map_err(|error| DidLocationError::NotAUrl {
        base_url: base_url.to_owned(),
        error,
    })?;
    let host = match url.host() {
        Some(url::Host::Domain(domain)) => domain.to_owned(),
        Some(url::Host::Ipv4(ip)) if ip.is_loopback() || ip.is_unspecified() => {
            "localhost".to_owned()
        }
        Some(url::Host::Ipv6(ip)) if ip.is_loopback() || ip.is_unspecified() => {
            "localhost".to_owned()
        }
        Some(_) => {
            return Err(DidLocationError::IpAddress {
                base_url: base_url.to_owned(),
            })
        }
        None => {
            return Err(DidLocationError::NoHost {
                base_url: base_url.to_owned(),
            })
        }
    };
    Ok((host, url.port()))
}

/// Why a node's URL gives no `did:wba` host (see [`did_location`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DidLocationError {
    /// The URL does not parse.
    #[error("{base_url:?}: {error}")]
    NotAUrl {
        /// The URL given.
        base_url: String,
        /// Why it does not parse.
        error: url::ParseError,
    },
    /// The URL names an IP address other than a loopback or unspecified one.
    #[error("{base_url:?}: a did:wba DID names a host, not an IP address: give the host name the node is reached at")]
    IpAddress {
        /// The URL given.
        base_url: String,
    },
    /// The URL has no host.
    #[error("{base_url:?} has no host")]
    NoHost {
        /// The URL given.
        base_url: String,
    },
}

/// A node's identity at run time: its keys, its DID once it has one (set at build time, or
/// fixed where it first serves), the resolver, the replay cache and who may call what.
pub(crate) struct NodeIdentity {
    /// The node's keys while it has no DID yet (they move into `identity` where it first
    /// serves). Neither: the node has no identity (it connects anonymously, and serves
    /// without authentication or encryption).
    pending_keys: Mutex<Option<Keys>>,
    /// The node's DID and its keys, once known.
    identity: OnceLock<Arc<Identity>>,
    /// Our DID document as served, built (and signed) once.
    own_document: OnceLock<axum::body::Bytes>,
    /// A static key for the Noise channel when the node has no identity (an anonymous
    /// requester still gets an encrypted channel).
    anonymous_static: [u8; 32],
    pub(crate) security: Security,
    pub(crate) resolver: resolve::Resolver,
    /// The nonces accepted while their signatures could be valid (a [`ReplayCache`] unless
    /// [`NodeBuilder::nonce_log`](crate::NodeBuilder::nonce_log) gave another).
    replay: Arc<dyn NonceLog>,
    /// Where accepted nonces are kept across restarts (the node's store unless
    /// [`NodeBuilder::nonce_store`](crate::NodeBuilder::nonce_store) gave another).
    nonces: Arc<dyn NonceStore>,
    /// Upgrades whose credentials are being checked, per client address.
    pub(crate) authenticating: upgrade::InFlight,
    /// Who may call each action (absent: anyone).
    access: HashMap<String, Allow>,
}

impl std::fmt::Debug for NodeIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeIdentity")
            .field("did", &self.identity.get().map(|identity| identity.did()))
            .field("security", &self.security)
            .field("access", &self.access)
            .finish_non_exhaustive()
    }
}

impl NodeIdentity {
    pub(crate) fn new(
        keys: Option<Keys>,
        identity: Option<Identity>,
        security: Security,
        access: HashMap<String, Allow>,
        tls: Arc<rustls::ClientConfig>,
        nonces: Arc<dyn NonceStore>,
        replay: Option<Arc<dyn NonceLog>>,
    ) -> Result<Self, IdentitySetupError> {
        security.check()?;
        let resolver = resolve::Resolver::new(security.resolver.clone(), tls)?;
        let cell = OnceLock::new();
        let keys = match identity {
            Some(identity) => {
                let _ = cell.set(Arc::new(identity));
                None
            }
            None => keys,
        };
        let replay = replay.unwrap_or_else(|| {
            Arc::new(
                ReplayCache::new(security.replay_capacity, security.replay_ttl)
                    .per_did(security.replay_per_did),
            )
        });
        // The nonces accepted before a restart, while their signatures could still be good:
        // replays until they expire, beside the capacity for new ones (agents sharing the
        // store may have recorded more between them than one cache holds).
        let kept = nonces
            .unexpired_nonces(upgrade::now_unix())
            .map_err(IdentitySetupError::Nonces)?;
        for used in kept {
            match concord_identity::Did::parse(&used.did) {
                Ok(did) => replay.restore(&did, &used.nonce, used.recorded),
                Err(error) => {
                    tracing::warn!(did = %used.did, %error, "a stored nonce's DID does not parse; skipped")
                }
            }
        }
        Ok(Self {
            pending_keys: Mutex::new(keys),
            identity: cell,
            own_document: OnceLock::new(),
            anonymous_static: Keys::generate().agreement_secret(),
            security,
            resolver,
            replay,
            nonces,
            authenticating: upgrade::InFlight::default(),
            access,
        })
    }

    /// The node's identity, once it has a DID.
    pub(crate) fn identity(&self) -> Option<&Arc<Identity>> {
        self.identity.get()
    }

    /// Fixes the node's DID from the URL it serves at (`http://127.0.0.1:8080/` gives
    /// `did:wba:localhost%3A8080:agents:e1_…`: an IP address cannot be a did:wba host), unless
    /// it has one; puts its own document in the resolver's cache.
    pub(crate) fn settle_did(
        &self,
        base_url: &str,
        kind: crate::describe::ThingKind,
    ) -> Result<Option<Arc<Identity>>, String> {
        let mut pending = self
            .pending_keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if pending.is_some() && self.identity.get().is_none() {
            let (host, port) = did_location(base_url).map_err(|error| error.to_string())?;
            let Some(keys) = pending.take() else {
                return Ok(None);
            };
            let identity =
                Identity::new(keys, &host, port, DID_PATH).map_err(|error| error.to_string())?;
            let _ = self.identity.set(Arc::new(identity));
        }
        drop(pending);
        let identity = self.identity.get().cloned();
        if let Some(identity) = &identity {
            if self.own_document.get().is_none() {
                let bytes = serde_json::to_vec_pretty(&self.document(identity, base_url, kind))
                    .map_err(|error| error.to_string())?;
                let document = concord_identity::read_document(
                    &bytes,
                    identity.did(),
                    &concord_identity::DidDocumentLimits::default(),
                )
                .map_err(|error| format!("our own DID document: {error}"))?;
                self.resolver.insert_own(Arc::new(document));
                let _ = self.own_document.set(axum::body::Bytes::from(bytes));
            }
        }
        Ok(identity)
    }

    /// Our DID document as served (once the DID is settled).
    pub(crate) fn own_document(&self) -> Option<&axum::body::Bytes> {
        self.own_document.get()
    }

    /// Our DID document, naming as services our ANP agent description (`#ad`,
    /// `AgentDescription`: `ad.json`) and our Thing Description (`#td`, W3C WoT Discovery's
    /// DID introduction: `WotThing`, or `WotDirectory` for a directory, at
    /// `/.well-known/wot`).
    pub(crate) fn document(
        &self,
        identity: &Identity,
        base_url: &str,
        kind: crate::describe::ThingKind,
    ) -> serde_json::Value {
        let created = concord_identity::format_iso8601(upgrade::now_unix());
        let at = |path: &str| crate::binding::http_url(base_url, path);
        identity.document(
            &created,
            &[
                Service {
                    id_fragment: "ad".to_owned(),
                    kind: "AgentDescription".to_owned(),
                    endpoint: at(crate::binding::wellknown::anp::AD_PATH),
                },
                Service {
                    id_fragment: "td".to_owned(),
                    kind: kind.did_service().to_owned(),
                    endpoint: at(crate::describe::DESCRIPTION_PATH),
                },
            ],
        )
    }

    /// Who may call `action`.
    pub(crate) fn allow(&self, action: &str) -> &Allow {
        static ANYONE: Allow = Allow::Anyone;
        self.access.get(action).unwrap_or(&ANYONE)
    }

    /// Whether `caller` may call `action`.
    pub(crate) fn permits(&self, caller: &Caller, action: &str) -> bool {
        if self.security.authentication == Authentication::Required
            && matches!(caller, Caller::Anonymous)
        {
            return false;
        }
        self.allow(action).permits(caller)
    }

    /// Whether `caller` may call any of `actions`.
    pub(crate) fn permits_any<'a>(
        &self,
        caller: &Caller,
        mut actions: impl Iterator<Item = &'a str>,
    ) -> bool {
        actions.any(|action| self.permits(caller, action))
    }

    /// Records `did`'s accepted `nonce` in the store (until the replay cache would forget
    /// it), before the upgrade that carried it is answered: `Ok(false)` when the store
    /// already holds it (a replay another process accepted).
    pub(crate) async fn persist_nonce(
        &self,
        did: &concord_identity::Did,
        nonce: &str,
        now: i64,
    ) -> Result<bool, NonceError> {
        let store = Arc::clone(&self.nonces);
        let (did, nonce) = (did.to_string(), nonce.to_owned());
        let ttl = i64::try_from(self.security.replay_ttl.as_secs()).unwrap_or(i64::MAX);
        let expires = now.saturating_add(ttl);
        tokio::task::spawn_blocking(move || store.record_nonce(&did, &nonce, now, expires))
            .await
            .map_err(NonceError::Writer)?
            .map_err(NonceError::Store)
    }

    /// The nonce log.
    pub(crate) fn replay(&self) -> &dyn NonceLog {
        &*self.replay
    }

    /// Our Noise static key: the DID's keyAgreement key, else the anonymous one.
    pub(crate) fn noise_static(&self) -> [u8; 32] {
        self.identity
            .get()
            .map_or(self.anonymous_static, |identity| {
                identity.keys().agreement_secret()
            })
    }

    /// The Noise channel's settings for frames up to `max_frame_size`.
    pub(crate) fn channel_config(&self, max_frame_size: usize) -> concord_secure::ChannelConfig {
        concord_secure::ChannelConfig {
            max_record: max_frame_size,
            rekey_after_records: self.security.rekey_after_records,
            rekey_after: self.security.rekey_after,
            ..concord_secure::ChannelConfig::default()
        }
    }

    /// Whether this node offers or accepts the Noise channel at all.
    pub(crate) fn speaks_noise(&self) -> bool {
        self.security.encryption != Encryption::Off
    }
}
