//! Concord's extension: `concord:metaProtocol` and its terms.

use std::collections::HashSet;

use concord_proto::{Capability, MetaVersion};
use serde_json::{Map, Value};

use super::{formats, Checker};
use crate::model::InteractionMode;
use crate::pointer::Path;
use crate::problem::ProblemKind;
use crate::vocab::{
    CONCORD_ACTION_LEASE, CONCORD_MODE, CONCORD_PREFIX, CONCORD_STREAM, MAX_ACTION_LEASE_SECS,
};

const META_PROTOCOL: &str = "concord:metaProtocol";
const META_PROTOCOL_TERMS: [&str; 6] = [
    "concord:endpoint",
    "concord:versions",
    "concord:capabilities",
    "concord:consensusProtocols",
    "concord:did",
    "concord:secureChannels",
];
/// Longest `concord:did` accepted.
const MAX_DID_LEN: usize = 2048;
const CONSENSUS_PROTOCOL_TERMS: [&str; 2] = ["concord:uri", "concord:protocolHash"];
/// The members of `concord:stream`; any other member is an error.
const STREAM_TERMS: [&str; 5] = [
    "concord:contentType",
    "concord:outputContentType",
    "concord:frameBytes",
    "concord:initialCredit",
    "concord:realtime",
];

/// Reads a `concord:versions` entry: `MAJOR.MINOR` in canonical decimal, which is stricter
/// than [`MetaVersion`]'s own reading (a hello may say `"2"` for 2.0; a published
/// description says exactly `"2.0"`, so that it reads the same everywhere).
fn parse_version(text: &str) -> Result<MetaVersion, String> {
    fn canonical(digits: &str) -> bool {
        !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'))
    }
    let well_formed = text
        .split_once('.')
        .is_some_and(|(major, minor)| canonical(major) && canonical(minor));
    if !well_formed {
        return Err(format!("`{text}` is not a meta-protocol version: expected MAJOR.MINOR in decimal without leading zeros, such as 1.0"));
    }
    text.parse().map_err(|_| {
        format!(
            "`{text}` is not a meta-protocol version: MAJOR and MINOR are each at most {}",
            u16::MAX
        )
    })
}

impl<'v> Checker<'v> {
    pub(super) fn meta_protocol(&mut self, thing: &'v Map<String, Value>, at: &Path<'_>) {
        self.unknown_concord_terms(thing, &[META_PROTOCOL], at);
        let Some(meta) = self.object(thing, META_PROTOCOL, at) else {
            return;
        };
        let at = at.key(META_PROTOCOL);
        self.unknown_concord_terms(meta, &META_PROTOCOL_TERMS, &at);
        self.endpoint(meta, &at);
        self.versions(meta, &at);
        self.capabilities(meta, &at);
        self.consensus_protocols(meta, &at);
        self.did(meta, &at);
        self.secure_channels(meta, &at);
    }

    /// An action's Concord terms: `concord:mode`, for a stream action `concord:stream`, for
    /// a progress action `concord:actionLease`.
    pub(super) fn action_extension(&mut self, action: &'v Map<String, Value>, at: &Path<'_>) {
        self.unknown_concord_terms(
            action,
            &[CONCORD_MODE, CONCORD_STREAM, CONCORD_ACTION_LEASE],
            at,
        );
        let mode = match action.get(CONCORD_MODE) {
            None => Some(InteractionMode::Reply),
            Some(Value::String(name)) => {
                let mode = InteractionMode::from_name(name);
                if mode.is_none() {
                    let known: Vec<&str> = InteractionMode::ALL
                        .into_iter()
                        .map(InteractionMode::name)
                        .collect();
                    self.report(
                        ProblemKind::InvalidValue,
                        &at.key(CONCORD_MODE),
                        format!(
                            "`{}` is not an interaction mode; expected one of {}",
                            name.chars().take(80).collect::<String>(),
                            known.join(", ")
                        ),
                    );
                }
                mode
            }
            Some(other) => {
                self.wrong_type(&at.key(CONCORD_MODE), "an interaction mode (string)", other);
                None
            }
        };
        if mode == Some(InteractionMode::Progress)
            && action.get("synchronous") == Some(&Value::Bool(true))
        {
            self.report(
                ProblemKind::Conflict,
                &at.key("synchronous"),
                "a progress-mode action answers asynchronously; `synchronous` must not be true",
            );
        }
        match (mode, action.get(CONCORD_STREAM)) {
            (Some(InteractionMode::Stream), None) => self.report(
                ProblemKind::MissingTerm,
                &at.key(CONCORD_STREAM),
                "a stream-mode action needs `concord:stream`: what its streams carry and their initial credit",
            ),
            (Some(mode), Some(_)) if mode != InteractionMode::Stream => self.report(
                ProblemKind::Conflict,
                &at.key(CONCORD_STREAM),
                format!("`concord:stream` describes a stream action, but this action's mode is {}", mode.name()),
            ),
            _ => {}
        }
        if action.contains_key(CONCORD_STREAM) {
            self.stream(action, at);
        }
        if let Some(lease) = action.get(CONCORD_ACTION_LEASE) {
            self.action_lease(lease, mode, &at.key(CONCORD_ACTION_LEASE));
        }
    }

    fn action_lease(&mut self, lease: &Value, mode: Option<InteractionMode>, at: &Path<'_>) {
        if lease
            .as_u64()
            .is_none_or(|secs| secs == 0 || secs > MAX_ACTION_LEASE_SECS)
        {
            self.wrong_type(at, "a number of seconds (integer from 1 to 86400)", lease);
        }
        if let Some(mode) = mode.filter(|mode| *mode != InteractionMode::Progress) {
            self.report(
                ProblemKind::Conflict,
                at,
                format!(
                    "`concord:actionLease` is how long a progress action outlives its caller, but this action's mode is {}",
                    mode.name()
                ),
            );
        }
    }

    fn stream(&mut self, action: &'v Map<String, Value>, at: &Path<'_>) {
        let Some(stream) = self.object(action, CONCORD_STREAM, at) else {
            return;
        };
        let at = at.key(CONCORD_STREAM);
        for term in stream.keys() {
            if !STREAM_TERMS.contains(&term.as_str()) {
                self.report(
                    ProblemKind::InvalidValue,
                    &at.key(term),
                    format!(
                        "`{}` is not a member of `concord:stream` (members: {})",
                        term.chars().take(80).collect::<String>(),
                        STREAM_TERMS.join(", ")
                    ),
                );
            }
        }
        for (term, required) in [
            ("concord:contentType", true),
            ("concord:outputContentType", false),
        ] {
            let text = if required {
                self.required_string(stream, term, &at)
            } else {
                self.string(stream, term, &at)
            };
            if let Some(media_type) = text {
                if !formats::is_media_type(media_type) {
                    self.report(
                        ProblemKind::InvalidValue,
                        &at.key(term),
                        format!(
                            "`{}` is not a media type (type/subtype, such as audio/pcm)",
                            media_type.chars().take(80).collect::<String>()
                        ),
                    );
                }
            }
        }
        if let Some(value) = stream.get("concord:frameBytes") {
            if value
                .as_u64()
                .is_none_or(|bytes| u32::try_from(bytes).is_err())
            {
                self.wrong_type(
                    &at.key("concord:frameBytes"),
                    "a byte count (integer from 0 to 4294967295)",
                    value,
                );
            }
        }
        match stream.get("concord:initialCredit") {
            None => self.report(
                ProblemKind::MissingTerm,
                &at.key("concord:initialCredit"),
                "`concord:initialCredit` is required: the bytes of credit each direction starts with",
            ),
            Some(value) if value.as_u64().is_none() => self.wrong_type(
                &at.key("concord:initialCredit"),
                "a byte count (integer from 0 to 18446744073709551615)",
                value,
            ),
            Some(_) => {}
        }
        self.boolean(stream, "concord:realtime", &at);
    }

    fn did(&mut self, meta: &'v Map<String, Value>, at: &Path<'_>) {
        let Some(value) = meta.get("concord:did") else {
            return;
        };
        let at = at.key("concord:did");
        match value {
            Value::String(did)
                if did.starts_with("did:") && did.len() <= MAX_DID_LEN && !did.contains(char::is_whitespace) => {}
            Value::String(did) => self.report(
                ProblemKind::InvalidUri,
                &at,
                format!(
                    "`{}` is not a DID: expected `did:<method>:…` without spaces, at most {MAX_DID_LEN} bytes",
                    did.chars().take(80).collect::<String>()
                ),
            ),
            other => self.wrong_type(&at, "a DID (string)", other),
        }
    }

    fn secure_channels(&mut self, meta: &'v Map<String, Value>, at: &Path<'_>) {
        let Some(channels) = self.array(meta, "concord:secureChannels", at) else {
            return;
        };
        let at = at.key("concord:secureChannels");
        for (i, channel) in channels.iter().enumerate() {
            if !matches!(channel, Value::String(token) if !token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic() && b != b','))
            {
                self.wrong_type(
                    &at.index(i),
                    "a WebSocket subprotocol token (string)",
                    channel,
                );
            }
        }
    }

    fn endpoint(&mut self, meta: &'v Map<String, Value>, at: &Path<'_>) {
        let Some(endpoint) = self.required_string(meta, "concord:endpoint", at) else {
            return;
        };
        let at = at.key("concord:endpoint");
        match formats::absolute_uri(endpoint) {
            Ok(url) if !matches!(url.scheme(), "ws" | "wss") => self.report(
                ProblemKind::InvalidValue,
                &at,
                format!("the meta-protocol endpoint must be a WebSocket URL (ws:// or wss://), found {endpoint}"),
            ),
            Ok(url) if url.host().is_none() => {
                self.report(ProblemKind::InvalidUri, &at, format!("the endpoint {endpoint} has no host"));
            }
            Ok(_) => {}
            Err(why) => self.report(ProblemKind::InvalidUri, &at, format!("the endpoint {why}")),
        }
    }

    fn versions(&mut self, meta: &'v Map<String, Value>, at: &Path<'_>) {
        if !meta.contains_key("concord:versions") {
            self.report(
                ProblemKind::MissingTerm,
                &at.key("concord:versions"),
                "`concord:versions` is required: the meta-protocol versions spoken, such as [\"1.0\"]",
            );
            return;
        }
        let Some(versions) = self.array(meta, "concord:versions", at) else {
            return;
        };
        let at = at.key("concord:versions");
        if versions.is_empty() {
            self.report(
                ProblemKind::Empty,
                &at,
                "`concord:versions` must list at least one version",
            );
        }
        let mut seen = HashSet::new();
        for (i, version) in versions.iter().enumerate() {
            let at = at.index(i);
            let Value::String(text) = version else {
                self.wrong_type(&at, "a version string such as \"1.0\"", version);
                continue;
            };
            match parse_version(text) {
                Ok(parsed) if !seen.insert(parsed) => {
                    self.report(
                        ProblemKind::DuplicateValue,
                        &at,
                        format!("version {text} is listed twice"),
                    );
                }
                Ok(_) => {}
                Err(why) => self.report(ProblemKind::InvalidValue, &at, why),
            }
        }
    }

    fn capabilities(&mut self, meta: &'v Map<String, Value>, at: &Path<'_>) {
        let Some(capabilities) = self.array(meta, "concord:capabilities", at) else {
            return;
        };
        let at = at.key("concord:capabilities");
        let mut seen = HashSet::new();
        for (i, capability) in capabilities.iter().enumerate() {
            let at = at.index(i);
            let Value::String(name) = capability else {
                self.wrong_type(&at, "a capability name (string)", capability);
                continue;
            };
            if !seen.insert(name.as_str()) {
                self.report(
                    ProblemKind::DuplicateValue,
                    &at,
                    format!("capability {name} is listed twice"),
                );
            }
            if Capability::from_name(name).is_none() {
                let known: Vec<&str> = Capability::ALL.into_iter().map(Capability::name).collect();
                self.report(
                    ProblemKind::UnknownCapability,
                    &at,
                    format!(
                        "unknown capability `{name}` (peers ignore it); known: {}",
                        known.join(", ")
                    ),
                );
            }
        }
    }

    fn consensus_protocols(&mut self, meta: &'v Map<String, Value>, at: &Path<'_>) {
        let Some(protocols) = self.array(meta, "concord:consensusProtocols", at) else {
            return;
        };
        let at = at.key("concord:consensusProtocols");
        let mut uris = HashSet::new();
        for (i, protocol) in protocols.iter().enumerate() {
            let at = at.index(i);
            let Value::Object(terms) = protocol else {
                self.wrong_type(
                    &at,
                    "a consensus protocol (object with concord:uri and concord:protocolHash)",
                    protocol,
                );
                continue;
            };
            self.unknown_concord_terms(terms, &CONSENSUS_PROTOCOL_TERMS, &at);
            if let Some(uri) = self.required_string(terms, "concord:uri", &at) {
                if let Err(why) = formats::absolute_uri(uri) {
                    self.report(
                        ProblemKind::InvalidUri,
                        &at.key("concord:uri"),
                        format!("the protocol URI {why}"),
                    );
                }
                if !uris.insert(uri) {
                    self.report(
                        ProblemKind::DuplicateValue,
                        &at.key("concord:uri"),
                        format!("protocol {uri} is listed twice"),
                    );
                }
            }
            if let Some(hash) = self.required_string(terms, "concord:protocolHash", &at) {
                let canonical = hash.len() == 64
                    && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
                if !canonical {
                    self.report(
                        ProblemKind::InvalidValue,
                        &at.key("concord:protocolHash"),
                        format!("the protocol hash must be the SHA-256 of the protocol document as 64 lowercase hex digits (no `sha256:` prefix), found `{hash}`"),
                    );
                }
            }
        }
    }

    /// Warns about `concord:` terms this version does not define.
    fn unknown_concord_terms(
        &mut self,
        terms: &'v Map<String, Value>,
        known: &[&str],
        at: &Path<'_>,
    ) {
        for term in terms.keys() {
            let ours = term
                .strip_prefix(CONCORD_PREFIX)
                .is_some_and(|rest| rest.starts_with(':'));
            if ours && !known.contains(&term.as_str()) {
                self.report(
                    ProblemKind::UnknownExtensionTerm,
                    &at.key(term),
                    format!(
                        "`{term}` is not a term of the Concord vocabulary (known here: {})",
                        known.join(", ")
                    ),
                );
            }
        }
    }
}
