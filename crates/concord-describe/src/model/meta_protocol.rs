//! Concord's extension (`concord:` prefix, bound to [`crate::CONCORD_NAMESPACE`]): where and
//! how to reach an agent's meta-protocol, and which consensus protocols it already speaks.
//!
//! ```json
//! "concord:metaProtocol": {
//!   "concord:endpoint": "wss://weather.example.com/concord",
//!   "concord:versions": ["1.0"],
//!   "concord:capabilities": ["naturalLanguageNegotiation", "testCasesNegotiation"],
//!   "concord:consensusProtocols": [{
//!     "concord:uri": "https://protocols.example.com/weather/1.0",
//!     "concord:protocolHash": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
//!   }]
//! }
//! ```

use concord_proto::{Capabilities, Capability, MetaVersion, ProtocolHash, META_PROTOCOL_VERSION};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `concord:metaProtocol`: everything a peer needs to pick a protocol before it connects.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MetaProtocol {
    /// WebSocket URL (`ws://` or `wss://`) where the agent accepts meta-protocol sessions.
    #[serde(rename = "concord:endpoint")]
    pub endpoint: String,
    /// Meta-protocol versions the agent speaks (at least one); a session uses the highest
    /// both sides speak.
    #[serde(rename = "concord:versions")]
    pub versions: Vec<MetaVersion>,
    /// The optional meta-protocol capabilities, by name as written (absent stays absent).
    /// Names this version does not know are kept, so a description written for a newer
    /// version round-trips unchanged; [`MetaProtocol::capabilities`] reads the known ones.
    /// The base flow (protocol negotiation, code generation, application protocol) is always
    /// supported and never listed.
    #[serde(
        rename = "concord:capabilities",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub capability_names: Option<Vec<String>>,
    /// Consensus protocols the agent speaks without negotiation.
    #[serde(
        rename = "concord:consensusProtocols",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub consensus_protocols: Option<Vec<ConsensusProtocol>>,
    /// The agent's DID (`did:wba:…`): a peer resolves its document to check the key the
    /// agent proves in an encrypted session.
    #[serde(
        rename = "concord:did",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub did: Option<String>,
    /// The encrypted channels the endpoint speaks, by WebSocket subprotocol token
    /// (`concord-noise-xx.1`); absent: plain sessions only.
    #[serde(
        rename = "concord:secureChannels",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub secure_channels: Option<Vec<String>>,
    /// Every other term, kept as written.
    #[serde(flatten)]
    pub extensions: Map<String, Value>,
}

impl MetaProtocol {
    /// An endpoint speaking this version of the meta-protocol
    /// ([`concord_proto::META_PROTOCOL_VERSION`]) with no optional capability.
    pub fn new(endpoint: impl Into<String>) -> Self {
        Self {
            endpoint: endpoint.into(),
            versions: vec![META_PROTOCOL_VERSION],
            capability_names: None,
            consensus_protocols: None,
            did: None,
            secure_channels: None,
            extensions: Map::new(),
        }
    }

    /// The endpoint as a URL.
    pub fn endpoint_url(&self) -> Result<url::Url, url::ParseError> {
        url::Url::parse(&self.endpoint)
    }

    /// Lists `capabilities` (their wire names, in spec order), replacing any listed before.
    ///
    /// ```
    /// use concord_describe::MetaProtocol;
    /// use concord_proto::Capability;
    ///
    /// let meta = MetaProtocol::new("wss://agent.example.com/concord")
    ///     .with_capabilities([Capability::TestCasesNegotiation].into_iter().collect());
    /// assert_eq!(meta.capability_names, Some(vec!["testCasesNegotiation".to_owned()]));
    /// assert!(meta.supports(Capability::TestCasesNegotiation));
    /// ```
    pub fn with_capabilities(mut self, capabilities: Capabilities) -> Self {
        self.capability_names = Some(
            capabilities
                .iter()
                .map(|capability| capability.name().to_owned())
                .collect(),
        );
        self
    }

    /// The capabilities listed that this version knows; unknown names are ignored, as a
    /// peer ignores them.
    ///
    /// ```
    /// use concord_describe::MetaProtocol;
    /// use concord_proto::{Capabilities, Capability};
    ///
    /// let mut meta = MetaProtocol::new("wss://agent.example.com/concord");
    /// meta.capability_names = Some(vec!["fixErrorNegotiation".into(), "telepathy".into()]);
    /// let known: Capabilities = [Capability::FixErrorNegotiation].into_iter().collect();
    /// assert_eq!(meta.capabilities(), known);
    /// ```
    pub fn capabilities(&self) -> Capabilities {
        self.capability_names
            .iter()
            .flatten()
            .filter_map(|name| Capability::from_name(name))
            .collect()
    }

    /// Whether the agent listed `capability`.
    pub fn supports(&self, capability: Capability) -> bool {
        self.capabilities().contains(capability)
    }

    /// The highest version both this agent and `ours` speak.
    ///
    /// ```
    /// use concord_describe::MetaProtocol;
    ///
    /// let mut theirs = MetaProtocol::new("wss://agent.example.com/concord");
    /// theirs.versions.push("1.2".parse()?);
    /// let ours = ["1.0".parse()?, "1.2".parse()?, "2.0".parse()?];
    /// assert_eq!(theirs.highest_common_version(&ours), Some("1.2".parse()?));
    /// # Ok::<(), concord_proto::HelloError>(())
    /// ```
    pub fn highest_common_version(&self, ours: &[MetaVersion]) -> Option<MetaVersion> {
        self.versions
            .iter()
            .filter(|v| ours.contains(v))
            .max()
            .copied()
    }

    /// The consensus protocol with this URI, if the agent lists it.
    pub fn consensus_protocol(&self, uri: &str) -> Option<&ConsensusProtocol> {
        self.consensus_protocols
            .as_deref()
            .unwrap_or_default()
            .iter()
            .find(|p| p.uri == uri)
    }
}

/// A consensus protocol an agent speaks: the URI of one version of a published protocol,
/// and the hash of its document (so a peer can check the copy it holds).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ConsensusProtocol {
    /// URI naming one version of the protocol.
    #[serde(rename = "concord:uri")]
    pub uri: String,
    /// SHA-256 of the protocol document, 64 lowercase hex digits.
    #[serde(rename = "concord:protocolHash")]
    pub hash: ProtocolHash,
    /// Every other term, kept as written.
    #[serde(flatten)]
    pub extensions: Map<String, Value>,
}

impl ConsensusProtocol {
    /// A consensus protocol entry.
    pub fn new(uri: impl Into<String>, hash: ProtocolHash) -> Self {
        Self {
            uri: uri.into(),
            hash,
            extensions: Map::new(),
        }
    }
}
