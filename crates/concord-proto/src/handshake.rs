//! Pure decisions of the hello exchange: version, capabilities, 0-RTT and consensus protocols.
//!
//! ```
//! use concord_proto::handshake::{self, KnownProtocols, LocalOffer, ProtocolChoice};
//! use concord_proto::Capabilities;
//!
//! let document = "# Requirement\nGet product info\n";
//! let mut provider_store = KnownProtocols::default();
//! let hash = provider_store.insert_document(document);
//!
//! let offer = LocalOffer::new(Capabilities::all());
//! let source = handshake::source_hello(&offer, "aaaaaaaaaaaaaaaa", Some(hash), &[]);
//! let (destination, provider_side) =
//!     handshake::answer_source_hello(&offer, &source, &provider_store, "bbbbbbbbbbbbbbbb")?;
//! let requester_side = handshake::accept_destination_hello(&offer, &source, &destination)?;
//! assert_eq!(provider_side.protocol, ProtocolChoice::Resume(hash));
//! assert_eq!(requester_side, provider_side);
//! # Ok::<(), concord_proto::handshake::HandshakeError>(())
//! ```

use std::collections::{BTreeSet, HashMap};

use crate::hash::ProtocolHash;
use crate::hello::{
    Capabilities, Hello, HelloKind, MetaProtocolHello, MetaVersion, META_PROTOCOL_VERSION,
};

/// What this agent brings to a handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalOffer {
    /// Meta-protocol versions we speak (any order).
    pub versions: Vec<MetaVersion>,
    /// Optional capabilities we really support.
    pub capabilities: Capabilities,
}

impl LocalOffer {
    /// Our one version (`1.0`) with the given capabilities.
    pub fn new(capabilities: Capabilities) -> Self {
        Self {
            versions: vec![META_PROTOCOL_VERSION],
            capabilities,
        }
    }

    fn meta_protocol(&self) -> MetaProtocolHello {
        let mut meta = MetaProtocolHello::new(self.capabilities);
        meta.version = self
            .versions
            .iter()
            .copied()
            .max()
            .unwrap_or(META_PROTOCOL_VERSION);
        if self.versions.len() > 1 {
            let mut versions = self.versions.clone();
            versions.sort_unstable();
            versions.dedup();
            meta.supported_versions = versions;
        }
        meta
    }
}

/// How a session's application protocol is settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolChoice {
    /// No shortcut: negotiate with `protocolNegotiation` messages.
    Negotiate,
    /// 0-RTT: both sides hold the protocol with this hash and its code.
    Resume(ProtocolHash),
    /// Both sides support this consensus protocol (by URI) and its code.
    Consensus(String),
}

/// The outcome of a handshake: everything a [`Session`](crate::Session) needs to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agreement {
    /// The meta-protocol version both speak (the highest common one).
    pub version: MetaVersion,
    /// The optional capabilities both support.
    pub capabilities: Capabilities,
    /// How the application protocol is settled.
    pub protocol: ProtocolChoice,
}

/// What the local store can vouch for when answering a hello.
///
/// Implementations must answer `true` only for protocols whose stored document
/// reproduces the hash and whose handler code they hold: a hash we cannot
/// reproduce from content we hold is never trusted.
pub trait ProtocolStore {
    /// Whether we hold the protocol with this hash (document and code).
    fn holds_protocol(&self, hash: &ProtocolHash) -> bool;
    /// Whether we support the consensus protocol at this URI (document and code).
    fn supports_consensus(&self, uri: &str) -> bool;
}

/// An in-memory [`ProtocolStore`]: documents by their hash, and consensus protocol URIs.
#[derive(Debug, Clone, Default)]
pub struct KnownProtocols {
    documents: HashMap<ProtocolHash, String>,
    consensus: BTreeSet<String>,
}

impl KnownProtocols {
    /// Stores a protocol document and returns its hash (computed here, so it always matches).
    pub fn insert_document(&mut self, document: &str) -> ProtocolHash {
        let hash = ProtocolHash::of_text(document);
        self.documents.insert(hash, document.to_owned());
        hash
    }

    /// Declares support for a consensus protocol URI.
    pub fn insert_consensus(&mut self, uri: &str) {
        self.consensus.insert(uri.to_owned());
    }

    /// The document stored under `hash`.
    pub fn document(&self, hash: &ProtocolHash) -> Option<&str> {
        self.documents.get(hash).map(String::as_str)
    }
}

impl ProtocolStore for KnownProtocols {
    fn holds_protocol(&self, hash: &ProtocolHash) -> bool {
        self.documents
            .get(hash)
            .is_some_and(|document| hash.matches(document))
    }

    fn supports_consensus(&self, uri: &str) -> bool {
        self.consensus.contains(uri)
    }
}

/// Why a handshake cannot conclude.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// A hello of the other kind arrived (e.g. a `sourceHello` answering ours).
    #[error("expected a {expected} but received a {received}")]
    WrongKind {
        /// The kind we expected.
        expected: &'static str,
        /// The kind received.
        received: &'static str,
    },
    /// No meta-protocol version in common.
    #[error("no common meta-protocol version: we speak {ours}, the peer speaks {theirs}")]
    NoCommonVersion {
        /// Our versions, comma-separated.
        ours: String,
        /// The peer's versions, comma-separated.
        theirs: String,
    },
    /// The destination confirmed a 0-RTT hash we did not offer.
    #[error("destinationHello confirms protocol hash {0} that our sourceHello did not offer")]
    UnofferedHash(ProtocolHash),
    /// The destination selected a consensus protocol we did not offer.
    #[error("destinationHello selects protocol {0:?} that our sourceHello did not offer")]
    UnofferedProtocol(String),
    /// The destination both confirmed a 0-RTT hash and selected a consensus protocol.
    #[error("destinationHello both confirms a protocol hash and selects a consensus protocol")]
    AmbiguousProtocol,
}

/// The highest version both sides speak.
///
/// ```
/// use concord_proto::handshake::choose_version;
/// use concord_proto::MetaVersion;
///
/// let v = |s: &str| s.parse::<MetaVersion>().unwrap();
/// assert_eq!(choose_version(&[v("1.0")], &[v("1.0"), v("2.0")]).unwrap(), v("1.0"));
/// assert!(choose_version(&[v("1.0")], &[v("2.0")]).is_err());
/// ```
pub fn choose_version(
    ours: &[MetaVersion],
    theirs: &[MetaVersion],
) -> Result<MetaVersion, HandshakeError> {
    ours.iter()
        .filter(|version| theirs.contains(version))
        .max()
        .copied()
        .ok_or_else(|| HandshakeError::NoCommonVersion {
            ours: join(ours),
            theirs: join(theirs),
        })
}

fn join(versions: &[MetaVersion]) -> String {
    versions
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `sourceHello` an initiator sends: our versions and capabilities, the hash of a
/// protocol to resume (0-RTT), and consensus protocol URIs in order of preference.
pub fn source_hello(
    offer: &LocalOffer,
    message_id: &str,
    resume: Option<ProtocolHash>,
    consensus: &[String],
) -> Hello {
    let mut meta = offer.meta_protocol();
    meta.used_protocol_hash = resume;
    meta.candidate_protocols = consensus.to_vec();
    Hello::new(HelloKind::Source, message_id, meta)
}

/// The responder's side: checks a `sourceHello`, decides the session, and builds the
/// `destinationHello` to send back.
///
/// A 0-RTT hash we hold wins; otherwise the first consensus URI (in the source's order)
/// we support; otherwise a normal negotiation follows.
pub fn answer_source_hello(
    offer: &LocalOffer,
    source: &Hello,
    store: &impl ProtocolStore,
    message_id: &str,
) -> Result<(Hello, Agreement), HandshakeError> {
    if source.kind != HelloKind::Source {
        return Err(HandshakeError::WrongKind {
            expected: HelloKind::Source.name(),
            received: source.kind.name(),
        });
    }
    let theirs = &source.meta_protocol;
    let version = choose_version(&offer.versions, &theirs.versions())?;
    let protocol = match theirs.used_protocol_hash {
        Some(hash) if store.holds_protocol(&hash) => ProtocolChoice::Resume(hash),
        _ => theirs
            .candidate_protocols
            .iter()
            .find(|uri| store.supports_consensus(uri))
            .map_or(ProtocolChoice::Negotiate, |uri| {
                ProtocolChoice::Consensus(uri.clone())
            }),
    };
    let mut meta = offer.meta_protocol();
    meta.version = version;
    match &protocol {
        ProtocolChoice::Resume(hash) => meta.used_protocol_hash = Some(*hash),
        ProtocolChoice::Consensus(uri) => meta.selected_protocol = Some(uri.clone()),
        ProtocolChoice::Negotiate => {}
    }
    let agreement = Agreement {
        version,
        capabilities: offer
            .capabilities
            .intersection(theirs.supported_capabilities),
        protocol,
    };
    Ok((
        Hello::new(HelloKind::Destination, message_id, meta),
        agreement,
    ))
}

/// The initiator's side: checks the `destinationHello` against the `sourceHello` we sent.
pub fn accept_destination_hello(
    offer: &LocalOffer,
    sent: &Hello,
    destination: &Hello,
) -> Result<Agreement, HandshakeError> {
    if destination.kind != HelloKind::Destination {
        return Err(HandshakeError::WrongKind {
            expected: HelloKind::Destination.name(),
            received: destination.kind.name(),
        });
    }
    let theirs = &destination.meta_protocol;
    let version = choose_version(&offer.versions, &theirs.versions())?;
    let protocol = match (&theirs.used_protocol_hash, &theirs.selected_protocol) {
        (Some(_), Some(_)) => return Err(HandshakeError::AmbiguousProtocol),
        (Some(hash), None) => {
            if sent.meta_protocol.used_protocol_hash != Some(*hash) {
                return Err(HandshakeError::UnofferedHash(*hash));
            }
            ProtocolChoice::Resume(*hash)
        }
        (None, Some(uri)) => {
            if !sent.meta_protocol.candidate_protocols.contains(uri) {
                return Err(HandshakeError::UnofferedProtocol(uri.clone()));
            }
            ProtocolChoice::Consensus(uri.clone())
        }
        (None, None) => ProtocolChoice::Negotiate,
    };
    Ok(Agreement {
        version,
        capabilities: offer
            .capabilities
            .intersection(theirs.supported_capabilities),
        protocol,
    })
}
