//! `sourceHello` / `destinationHello`: the handshake messages that open a session.
//!
//! Only the `metaProtocol` part is interpreted here; every other field (ids, DIDs,
//! key shares of the secure channel) is preserved untouched in [`Hello::extra`].

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::hash::ProtocolHash;
use crate::text::TextPosition;

mod limits;

pub use limits::HelloLimits;

/// The meta-protocol version this crate implements.
pub const META_PROTOCOL_VERSION: MetaVersion = MetaVersion { major: 1, minor: 0 };

/// A meta-protocol version, `major.minor` (e.g. `1.0`). Ordered numerically.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MetaVersion {
    /// Incompatible changes (e.g. a wider frame header).
    pub major: u16,
    /// Compatible additions.
    pub minor: u16,
}

impl fmt::Display for MetaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl FromStr for MetaVersion {
    type Err = HelloError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || HelloError::InvalidValue {
            field: "metaProtocol.version",
            value: text.chars().take(32).collect(),
            expected: "a version like \"1.0\"",
        };
        let (major, minor) = text.split_once('.').unwrap_or((text, "0"));
        let number = |part: &str| {
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid());
            }
            part.parse::<u16>().map_err(|_| invalid())
        };
        Ok(Self {
            major: number(major)?,
            minor: number(minor)?,
        })
    }
}

impl Serialize for MetaVersion {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MetaVersion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// An optional meta-protocol capability. The base flow (protocolNegotiation,
/// codeGeneration, application protocol) is mandatory and not listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// PT 2 frames: natural-language data exchange.
    NaturalLanguageProtocol,
    /// PT 3 frames: verification traffic.
    VerificationProtocol,
    /// `naturalLanguageNegotiation` meta messages.
    NaturalLanguageNegotiation,
    /// `testCasesNegotiation` meta messages.
    TestCasesNegotiation,
    /// `fixErrorNegotiation` meta messages.
    FixErrorNegotiation,
    /// The end-to-end encrypted channel under the frames (Concord's Noise XX channel,
    /// WebSocket subprotocol `concord-noise-xx.1`). Not a meta message: when both hellos
    /// list it and the session is plain, the channel was stripped on the way.
    EncryptedChannel,
}

impl Capability {
    /// Every capability, in the order the spec lists them (ours last).
    pub const ALL: [Capability; 6] = [
        Self::NaturalLanguageProtocol,
        Self::VerificationProtocol,
        Self::NaturalLanguageNegotiation,
        Self::TestCasesNegotiation,
        Self::FixErrorNegotiation,
        Self::EncryptedChannel,
    ];

    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Self::NaturalLanguageProtocol => "naturalLanguageProtocol",
            Self::VerificationProtocol => "verificationProtocol",
            Self::NaturalLanguageNegotiation => "naturalLanguageNegotiation",
            Self::TestCasesNegotiation => "testCasesNegotiation",
            Self::FixErrorNegotiation => "fixErrorNegotiation",
            Self::EncryptedChannel => "encryptedChannel",
        }
    }

    /// The capability with this wire name, if it is one we know.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|capability| capability.name() == name)
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of optional capabilities. Serialises as the array of wire names in spec order;
/// unknown names are ignored when deserialising (forward compatibility).
///
/// ```
/// use concord_proto::{Capabilities, Capability};
///
/// let ours = Capabilities::all();
/// let theirs: Capabilities = [Capability::TestCasesNegotiation].into_iter().collect();
/// let session = ours.intersection(theirs);
/// assert!(session.contains(Capability::TestCasesNegotiation));
/// assert!(!session.contains(Capability::FixErrorNegotiation));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Capabilities(u8);

impl Capabilities {
    /// No optional capability: the base flow only.
    pub fn none() -> Self {
        Self(0)
    }

    /// Every optional capability.
    pub fn all() -> Self {
        Capability::ALL.into_iter().collect()
    }

    /// Whether `capability` is in the set.
    pub fn contains(self, capability: Capability) -> bool {
        self.0 & capability.bit() != 0
    }

    /// Adds `capability`.
    pub fn insert(&mut self, capability: Capability) {
        self.0 |= capability.bit();
    }

    /// Removes `capability`.
    pub fn remove(&mut self, capability: Capability) {
        self.0 &= !capability.bit();
    }

    /// The capabilities both sets hold: what a session may use.
    pub fn intersection(self, other: Self) -> Self {
        Self(self.0 & other.0)
    }

    /// The capabilities in the set, in spec order.
    pub fn iter(self) -> impl Iterator<Item = Capability> {
        Capability::ALL
            .into_iter()
            .filter(move |capability| self.contains(*capability))
    }
}

impl FromIterator<Capability> for Capabilities {
    fn from_iter<I: IntoIterator<Item = Capability>>(iter: I) -> Self {
        let mut set = Self::none();
        for capability in iter {
            set.insert(capability);
        }
        set
    }
}

impl fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl Serialize for Capabilities {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter().map(Capability::name))
    }
}

/// Which side of the handshake a hello comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum HelloKind {
    /// Sent by the side that opens the connection.
    #[serde(rename = "sourceHello")]
    Source,
    /// The answer of the side that accepted it.
    #[serde(rename = "destinationHello")]
    Destination,
}

impl HelloKind {
    /// The wire name (`sourceHello` / `destinationHello`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Source => "sourceHello",
            Self::Destination => "destinationHello",
        }
    }
}

/// The `metaProtocol` object of a hello.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MetaProtocolHello {
    /// The highest meta-protocol version the sender supports.
    pub version: MetaVersion,
    /// Concord extension: every version the sender supports, when more than `version`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub supported_versions: Vec<MetaVersion>,
    /// The optional capabilities the sender supports (absent on the wire = none).
    pub supported_capabilities: Capabilities,
    /// 0-RTT: the hash of a protocol agreed before (`protocolHash` accepted as a synonym).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_protocol_hash: Option<ProtocolHash>,
    /// Consensus protocols proposed by URI, in the sender's order of preference.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub candidate_protocols: Vec<String>,
    /// The consensus protocol the responder selected from the source's candidates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selected_protocol: Option<String>,
    /// Fields of `metaProtocol` this crate does not interpret, kept as received.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl MetaProtocolHello {
    /// A `metaProtocol` object for our version with the given capabilities and nothing else.
    pub fn new(capabilities: Capabilities) -> Self {
        Self {
            version: META_PROTOCOL_VERSION,
            supported_versions: Vec::new(),
            supported_capabilities: capabilities,
            used_protocol_hash: None,
            candidate_protocols: Vec::new(),
            selected_protocol: None,
            extra: Map::new(),
        }
    }

    /// Every version the sender supports: `supportedVersions` if given, else just `version`.
    pub fn versions(&self) -> Vec<MetaVersion> {
        if self.supported_versions.is_empty() {
            vec![self.version]
        } else {
            self.supported_versions.clone()
        }
    }
}

/// A `sourceHello` or `destinationHello` message (sent as the first WebSocket text frame).
///
/// ```
/// use concord_proto::{Capabilities, Hello, HelloKind, MetaProtocolHello};
///
/// let hello = Hello::new(HelloKind::Source, "k3j5h2g1f0d9s8a7", MetaProtocolHello::new(Capabilities::all()));
/// let text = hello.encode();
/// assert!(text.contains(r#""type":"sourceHello""#));
/// assert_eq!(Hello::decode(&text)?, hello);
/// # Ok::<(), concord_proto::HelloError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hello {
    /// Version of the handshake message format (`"1.0"`): a received hello must carry a
    /// version of major [`META_PROTOCOL_VERSION`]`.major`.
    pub version: String,
    /// Source or destination.
    #[serde(rename = "type")]
    pub kind: HelloKind,
    /// The sender's id for this message: required, non-empty, bounded
    /// ([`HelloLimits::max_message_id_len`]).
    pub message_id: String,
    /// The meta-protocol part: version, capabilities, 0-RTT hash, consensus protocols.
    pub meta_protocol: MetaProtocolHello,
    /// Every other field (ids, DIDs, key shares…), preserved as received.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Why a text is not a valid hello.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HelloError {
    /// Not JSON.
    #[error("hello is not valid JSON at {position}: {message}")]
    Json {
        /// Where in the text.
        position: TextPosition,
        /// What the JSON parser found.
        message: String,
    },
    /// A required field is absent.
    #[error("hello: missing required field `{0}`")]
    MissingField(&'static str),
    /// A field has the wrong JSON type.
    #[error("hello: field `{field}` must be {expected}")]
    WrongType {
        /// Dotted path of the field.
        field: &'static str,
        /// What it must be.
        expected: &'static str,
    },
    /// A field's value is outside its domain.
    #[error("hello: field `{field}` has invalid value {value:?}: expected {expected}")]
    InvalidValue {
        /// Dotted path of the field.
        field: &'static str,
        /// The value found (truncated).
        value: String,
        /// What the field accepts.
        expected: &'static str,
    },
    /// The hello's format `version` is not one this crate speaks.
    #[error("hello: format version {got:?} is not one we speak: we speak {speaks}.x")]
    UnsupportedVersion {
        /// The version received (truncated).
        got: String,
        /// The major version we speak.
        speaks: u16,
    },
    /// The hello, or one of its fields, is larger than its limit ([`HelloLimits`]).
    #[error("hello: {field} is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// Dotted path of the field; `(hello)` for the whole text, `(extra fields)` for
        /// the uninterpreted fields together.
        field: &'static str,
        /// Its size in bytes.
        size: usize,
        /// The limit in force.
        limit: usize,
    },
    /// A list of the hello (or its uninterpreted fields) has more entries than its limit.
    #[error("hello: {field} has {count} entries, over the limit of {limit}")]
    TooMany {
        /// Dotted path of the list; `(extra fields)` for the uninterpreted fields.
        field: &'static str,
        /// How many entries it has.
        count: usize,
        /// The limit in force.
        limit: usize,
    },
}

impl Hello {
    /// A hello with format version `1.0`, the given id and meta-protocol part, and no extras.
    pub fn new(kind: HelloKind, message_id: &str, meta_protocol: MetaProtocolHello) -> Self {
        Self {
            version: "1.0".to_owned(),
            kind,
            message_id: message_id.to_owned(),
            meta_protocol,
            extra: Map::new(),
        }
    }

    /// Encodes the hello as compact JSON text.
    pub fn encode(&self) -> String {
        // Only strings, arrays and maps with string keys: serialisation cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Decodes a hello within the default [`HelloLimits`], checking every interpreted
    /// field and naming the one that is wrong.
    pub fn decode(text: &str) -> Result<Self, HelloError> {
        Self::decode_with_limits(text, &HelloLimits::default())
    }

    /// Decodes a hello within `limits` (the whole text's size is checked before parsing).
    pub fn decode_with_limits(text: &str, limits: &HelloLimits) -> Result<Self, HelloError> {
        HelloLimits::check_len("(hello)", text, limits.max_text_size)?;
        let value: Value = serde_json::from_str(text).map_err(|error| HelloError::Json {
            position: TextPosition::of_json_error(text, &error).unwrap_or(TextPosition::START),
            message: error.to_string(),
        })?;
        Self::from_json_with_limits(value, limits)
    }

    /// Builds a hello from a parsed JSON value, within the default [`HelloLimits`] (all
    /// but `max_text_size`: the text was parsed already).
    pub fn from_json(value: Value) -> Result<Self, HelloError> {
        Self::from_json_with_limits(value, &HelloLimits::default())
    }

    fn from_json_with_limits(value: Value, limits: &HelloLimits) -> Result<Self, HelloError> {
        let Value::Object(mut object) = value else {
            return Err(HelloError::WrongType {
                field: "(message)",
                expected: "a JSON object",
            });
        };
        let version = take_string(&mut object, "version", "version")?;
        check_format_version(&version)?;
        let kind = match take_string(&mut object, "type", "type")?.as_str() {
            "sourceHello" => HelloKind::Source,
            "destinationHello" => HelloKind::Destination,
            other => {
                return Err(HelloError::InvalidValue {
                    field: "type",
                    value: other.chars().take(32).collect(),
                    expected: "sourceHello or destinationHello",
                })
            }
        };
        let message_id = take_string(&mut object, "messageId", "messageId")?;
        HelloLimits::check_len("messageId", &message_id, limits.max_message_id_len)?;
        if message_id.is_empty() {
            return Err(HelloError::InvalidValue {
                field: "messageId",
                value: message_id,
                expected: "a non-empty id",
            });
        }
        let meta_protocol = match object.remove("metaProtocol") {
            None => return Err(HelloError::MissingField("metaProtocol")),
            Some(Value::Object(meta)) => decode_meta_protocol(meta, limits)?,
            Some(_) => {
                return Err(HelloError::WrongType {
                    field: "metaProtocol",
                    expected: "an object",
                })
            }
        };
        limits.check_extras(&object, &meta_protocol.extra)?;
        Ok(Self {
            version,
            kind,
            message_id,
            meta_protocol,
            extra: object,
        })
    }
}

impl<'de> Deserialize<'de> for Hello {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_json(value).map_err(serde::de::Error::custom)
    }
}

/// The hello's format `version` must be of the major version we speak.
fn check_format_version(version: &str) -> Result<(), HelloError> {
    let speaks = META_PROTOCOL_VERSION.major;
    match version.parse::<MetaVersion>() {
        Ok(parsed) if parsed.major == speaks => Ok(()),
        _ => Err(HelloError::UnsupportedVersion {
            got: version.chars().take(32).collect(),
            speaks,
        }),
    }
}

/// The array at `key` of `meta` (absent or null: empty), at most `limit` entries long.
fn take_array(
    meta: &mut Map<String, Value>,
    key: &str,
    field: &'static str,
    expected: &'static str,
    limit: usize,
) -> Result<Vec<Value>, HelloError> {
    match meta.remove(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => {
            HelloLimits::check_count(field, items.len(), limit)?;
            Ok(items)
        }
        Some(_) => Err(HelloError::WrongType { field, expected }),
    }
}

/// Each entry of `items` as a string of at most `limit` bytes.
fn strings(
    items: Vec<Value>,
    field: &'static str,
    expected: &'static str,
    limit: usize,
) -> Result<Vec<String>, HelloError> {
    items
        .into_iter()
        .map(|item| match item {
            Value::String(text) => {
                HelloLimits::check_len(field, &text, limit)?;
                Ok(text)
            }
            _ => Err(HelloError::WrongType { field, expected }),
        })
        .collect()
}

fn decode_meta_protocol(
    mut meta: Map<String, Value>,
    limits: &HelloLimits,
) -> Result<MetaProtocolHello, HelloError> {
    let version = take_string(&mut meta, "version", "metaProtocol.version")?;
    HelloLimits::check_len("metaProtocol.version", &version, limits.max_string_len)?;
    let version = version.parse()?;
    const VERSIONS: &str = "metaProtocol.supportedVersions";
    const VERSION_LIST: &str = "an array of version strings";
    let supported_versions = strings(
        take_array(
            &mut meta,
            "supportedVersions",
            VERSIONS,
            VERSION_LIST,
            limits.max_versions,
        )?,
        VERSIONS,
        VERSION_LIST,
        limits.max_string_len,
    )?
    .iter()
    .map(|text| text.parse::<MetaVersion>())
    .collect::<Result<_, _>>()?;
    const CAPABILITIES: &str = "metaProtocol.supportedCapabilities";
    const CAPABILITY_LIST: &str = "an array of strings";
    let supported_capabilities = strings(
        take_array(
            &mut meta,
            "supportedCapabilities",
            CAPABILITIES,
            CAPABILITY_LIST,
            limits.max_capabilities,
        )?,
        CAPABILITIES,
        CAPABILITY_LIST,
        limits.max_string_len,
    )?
    .iter()
    // Unknown capability names are ignored: a newer peer may know more.
    .filter_map(|name| Capability::from_name(name))
    .collect();
    let hash_value = match (meta.remove("usedProtocolHash"), meta.remove("protocolHash")) {
        (Some(value), _) | (None, Some(value)) => Some(value),
        (None, None) => None,
    };
    let used_protocol_hash = match hash_value {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => {
            Some(
                text.parse::<ProtocolHash>()
                    .map_err(|_| HelloError::InvalidValue {
                        field: "metaProtocol.usedProtocolHash",
                        value: text.chars().take(80).collect(),
                        expected: "64 hex digits, optionally prefixed `sha256:`",
                    })?,
            )
        }
        Some(_) => {
            return Err(HelloError::WrongType {
                field: "metaProtocol.usedProtocolHash",
                expected: "a string",
            })
        }
    };
    const CANDIDATES: &str = "metaProtocol.candidateProtocols";
    const URI_LIST: &str = "an array of protocol URIs";
    let candidate_protocols = strings(
        take_array(
            &mut meta,
            "candidateProtocols",
            CANDIDATES,
            URI_LIST,
            limits.max_candidate_protocols,
        )?,
        CANDIDATES,
        URI_LIST,
        limits.max_string_len,
    )?;
    if candidate_protocols.iter().any(String::is_empty) {
        return Err(HelloError::WrongType {
            field: CANDIDATES,
            expected: URI_LIST,
        });
    }
    let selected_protocol = match meta.remove("selectedProtocol") {
        None | Some(Value::Null) => None,
        Some(Value::String(uri)) => {
            HelloLimits::check_len("metaProtocol.selectedProtocol", &uri, limits.max_string_len)?;
            Some(uri)
        }
        Some(_) => {
            return Err(HelloError::WrongType {
                field: "metaProtocol.selectedProtocol",
                expected: "a protocol URI string",
            })
        }
    };
    Ok(MetaProtocolHello {
        version,
        supported_versions,
        supported_capabilities,
        used_protocol_hash,
        candidate_protocols,
        selected_protocol,
        extra: meta,
    })
}

fn take_string(
    object: &mut Map<String, Value>,
    key: &str,
    field: &'static str,
) -> Result<String, HelloError> {
    match object.remove(key) {
        None => Err(HelloError::MissingField(field)),
        Some(Value::String(text)) => Ok(text),
        Some(_) => Err(HelloError::WrongType {
            field,
            expected: "a string",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_seed_examples_and_keeps_extras() {
        let hello = Hello::decode(
            r#"{"version":"1.0","type":"sourceHello","messageId":"m-1","sessionId":"s-1",
                "metaProtocol":{"version":"1.0",
                  "supportedCapabilities":["naturalLanguageProtocol","quantumTeleport","fixErrorNegotiation"],
                  "protocolHash":"sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
                  "candidateProtocols":["https://example.com/protocol/1.0","https://example.com/protocol/2.0"]}}"#,
        )
        .unwrap();
        assert_eq!(hello.kind, HelloKind::Source);
        assert_eq!(hello.extra["sessionId"], "s-1");
        let meta = &hello.meta_protocol;
        assert_eq!(
            meta.supported_capabilities,
            [
                Capability::NaturalLanguageProtocol,
                Capability::FixErrorNegotiation
            ]
            .into_iter()
            .collect()
        );
        assert_eq!(meta.used_protocol_hash, Some(ProtocolHash::of_text("abc")));
        assert_eq!(meta.candidate_protocols.len(), 2);
        // Re-encoded with our spelling of the hash field, without the unknown capability.
        let again = Hello::decode(&hello.encode()).unwrap();
        assert_eq!(again, hello);
        assert!(hello.encode().contains(r#""usedProtocolHash":"ba7816bf"#));
    }

    #[test]
    fn a_peer_without_capabilities_has_none() {
        let hello = Hello::decode(
            r#"{"version":"1.0","type":"destinationHello","messageId":"m-1","metaProtocol":{"version":"1.0"}}"#,
        )
        .unwrap();
        assert_eq!(
            hello.meta_protocol.supported_capabilities,
            Capabilities::none()
        );
    }

    #[test]
    fn errors_name_the_field() {
        let decode = |text: &str| Hello::decode(text).unwrap_err();
        assert_eq!(
            decode(r#"{"type":"sourceHello","messageId":"m-1","metaProtocol":{}}"#),
            HelloError::MissingField("version")
        );
        assert_eq!(
            decode(r#"{"version":"1.0","type":"sourceHello","messageId":"m-1"}"#),
            HelloError::MissingField("metaProtocol")
        );
        assert_eq!(
            decode(r#"{"version":"1.0","type":"sourceHello","messageId":"m-1","metaProtocol":{}}"#),
            HelloError::MissingField("metaProtocol.version")
        );
        assert!(matches!(
            decode(r#"{"version":"1.0","type":"hello","metaProtocol":{"version":"1.0"}}"#),
            HelloError::InvalidValue { field: "type", .. }
        ));
        assert!(matches!(
            decode(
                r#"{"version":"1.0","type":"sourceHello","messageId":"m-1","metaProtocol":{"version":"one"}}"#
            ),
            HelloError::InvalidValue {
                field: "metaProtocol.version",
                ..
            }
        ));
        assert!(matches!(
            decode(
                r#"{"version":"1.0","type":"sourceHello","messageId":"m-1","metaProtocol":{"version":"1.0","usedProtocolHash":"1234567890abcdef..."}}"#
            ),
            HelloError::InvalidValue {
                field: "metaProtocol.usedProtocolHash",
                ..
            }
        ));
        assert!(matches!(
            decode(
                r#"{"version":"1.0","type":"sourceHello","messageId":"m-1","metaProtocol":{"version":"1.0","supportedCapabilities":"all"}}"#
            ),
            HelloError::WrongType {
                field: "metaProtocol.supportedCapabilities",
                ..
            }
        ));
        assert!(matches!(decode("{"), HelloError::Json { .. }));
    }

    /// Columns count characters, as in every other position: the `x` is the 7th character
    /// of its line (serde_json says column 9, counting the three bytes of 名).
    #[test]
    fn a_json_fault_is_placed_in_characters() {
        let error = Hello::decode("{\"名\": x}").unwrap_err();
        assert!(matches!(
            error,
            HelloError::Json {
                position: TextPosition { line: 1, column: 7 },
                ..
            }
        ));
        assert!(error
            .to_string()
            .starts_with("hello is not valid JSON at line 1, column 7: "));
    }

    #[test]
    fn versions_order_numerically() {
        let v = |text: &str| text.parse::<MetaVersion>().unwrap();
        assert!(v("1.10") > v("1.9"));
        assert_eq!(v("2"), MetaVersion { major: 2, minor: 0 });
        assert!("1.".parse::<MetaVersion>().is_err());
        assert!("99999.0".parse::<MetaVersion>().is_err());
    }
}
