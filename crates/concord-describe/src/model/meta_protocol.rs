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

use std::fmt;
use std::str::FromStr;

use concord_proto::ProtocolHash;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
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
    pub versions: Vec<ProtocolVersion>,
    /// Optional meta-protocol capabilities; the base flow (protocol negotiation, code
    /// generation, application protocol) is always supported and never listed.
    #[serde(
        rename = "concord:capabilities",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub capabilities: Option<Vec<Capability>>,
    /// Consensus protocols the agent speaks without negotiation.
    #[serde(
        rename = "concord:consensusProtocols",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub consensus_protocols: Option<Vec<ConsensusProtocol>>,
    /// Every other term, kept as written.
    #[serde(flatten)]
    pub extensions: Map<String, Value>,
}

impl MetaProtocol {
    /// An endpoint speaking meta-protocol 1.0 with no optional capability.
    pub fn new(endpoint: impl Into<String>) -> Self {
        Self {
            endpoint: endpoint.into(),
            versions: vec![ProtocolVersion::V1_0],
            capabilities: None,
            consensus_protocols: None,
            extensions: Map::new(),
        }
    }

    /// The endpoint as a URL.
    pub fn endpoint_url(&self) -> Result<url::Url, url::ParseError> {
        url::Url::parse(&self.endpoint)
    }

    /// Whether the agent listed `capability`.
    pub fn supports(&self, capability: &Capability) -> bool {
        self.capabilities
            .as_deref()
            .unwrap_or_default()
            .contains(capability)
    }

    /// The highest version both this agent and `ours` speak.
    ///
    /// ```
    /// use concord_describe::{MetaProtocol, ProtocolVersion};
    ///
    /// let mut theirs = MetaProtocol::new("wss://agent.example.com/concord");
    /// theirs.versions.push("1.2".parse()?);
    /// let ours = ["1.0".parse()?, "1.2".parse()?, "2.0".parse()?];
    /// assert_eq!(theirs.highest_common_version(&ours), Some("1.2".parse()?));
    /// # Ok::<(), concord_describe::ProtocolVersionError>(())
    /// ```
    pub fn highest_common_version(&self, ours: &[ProtocolVersion]) -> Option<ProtocolVersion> {
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

/// A meta-protocol version, `MAJOR.MINOR` (`"1.0"`). Ordered, so the highest common one
/// is a `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProtocolVersion {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl ProtocolVersion {
    /// Version 1.0, the current meta-protocol version (ANP 06 draft).
    pub const V1_0: ProtocolVersion = ProtocolVersion { major: 1, minor: 0 };
}

/// Why a string is not a `MAJOR.MINOR` version.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a meta-protocol version: expected MAJOR.MINOR in decimal without leading zeros, such as 1.0")]
pub struct ProtocolVersionError(String);

impl FromStr for ProtocolVersion {
    type Err = ProtocolVersionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        fn part(digits: &str) -> Option<u32> {
            let canonical = !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit())
                && (digits == "0" || !digits.starts_with('0'));
            canonical.then(|| digits.parse().ok()).flatten()
        }
        let error = || ProtocolVersionError(text.to_owned());
        let (major, minor) = text.split_once('.').ok_or_else(error)?;
        Ok(Self {
            major: part(major).ok_or_else(error)?,
            minor: part(minor).ok_or_else(error)?,
        })
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl Serialize for ProtocolVersion {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ProtocolVersion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// An optional meta-protocol capability (SPEC-NOTES §1.3). Names this version does not
/// know are kept as [`Capability::Unknown`]; peers ignore them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// `naturalLanguageProtocol`: messages of header type 2 (natural language).
    NaturalLanguageProtocol,
    /// `verificationProtocol`: messages of header type 3 (verification).
    VerificationProtocol,
    /// `naturalLanguageNegotiation`.
    NaturalLanguageNegotiation,
    /// `testCasesNegotiation`.
    TestCasesNegotiation,
    /// `fixErrorNegotiation`.
    FixErrorNegotiation,
    /// A name this version does not know.
    Unknown(String),
}

impl Capability {
    /// The capabilities this version knows.
    pub const KNOWN: [Capability; 5] = [
        Capability::NaturalLanguageProtocol,
        Capability::VerificationProtocol,
        Capability::NaturalLanguageNegotiation,
        Capability::TestCasesNegotiation,
        Capability::FixErrorNegotiation,
    ];

    /// The name as written.
    pub fn name(&self) -> &str {
        match self {
            Capability::NaturalLanguageProtocol => "naturalLanguageProtocol",
            Capability::VerificationProtocol => "verificationProtocol",
            Capability::NaturalLanguageNegotiation => "naturalLanguageNegotiation",
            Capability::TestCasesNegotiation => "testCasesNegotiation",
            Capability::FixErrorNegotiation => "fixErrorNegotiation",
            Capability::Unknown(name) => name,
        }
    }

    /// Reads a name; unknown names become [`Capability::Unknown`].
    pub fn from_name(name: &str) -> Self {
        Self::KNOWN
            .into_iter()
            .find(|c| c.name() == name)
            .unwrap_or_else(|| Capability::Unknown(name.to_owned()))
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Capability {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Capability {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Ok(Capability::from_name(&name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_strictly_and_order() {
        assert_eq!("1.0".parse(), Ok(ProtocolVersion::V1_0));
        assert!("10.2".parse::<ProtocolVersion>().unwrap() > "9.9".parse().unwrap());
        for bad in [
            "1", "1.", ".1", "01.0", "1.00", "1.0.0", "v1.0", "-1.0", "1.+0", "",
        ] {
            assert!(bad.parse::<ProtocolVersion>().is_err(), "{bad}");
        }
    }

    #[test]
    fn capabilities_keep_unknown_names() {
        assert_eq!(
            Capability::from_name("testCasesNegotiation"),
            Capability::TestCasesNegotiation
        );
        let unknown = Capability::from_name("telepathy");
        assert_eq!(unknown, Capability::Unknown("telepathy".into()));
        assert_eq!(serde_json::to_string(&unknown).unwrap(), "\"telepathy\"");
    }
}
