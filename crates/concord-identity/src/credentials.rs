//! What a verifier does with one request: read its DID credentials from the headers, then
//! verify them against the resolved document (pure: `now` and the replay cache are passed in).

use std::fmt;
use std::time::Duration;

use ed25519_dalek::Signature;

pub use crate::challenge::{challenge, challenge_with, AuthError, ACCEPT_SIGNATURE};
use crate::did::Did;
use crate::document::{DidDocumentError, VerifiedDocument};
use crate::encoding::{b64std_decode, b64url_decode};
use crate::http_signature::{content_digest, signature_base, RequestTarget, SignatureParams};
use crate::legacy::signed_hash;
use crate::nonce_log::NonceLog;
use crate::replay::Replay;
use crate::time::parse_iso8601;

/// Longest header value read, in bytes.
pub const MAX_HEADER_BYTES: usize = 4096;
/// Most covered components.
pub const MAX_COMPONENTS: usize = 8;
/// Longest nonce, in bytes.
pub const MAX_NONCE_BYTES: usize = 128;

/// Which form the credentials came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuthScheme {
    /// RFC 9421 `Signature-Input` / `Signature`.
    HttpSignatures,
    /// Legacy `Authorization: DIDWba …`.
    LegacyDidWba,
}

impl fmt::Display for AuthScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AuthScheme::HttpSignatures => "http-signatures",
            AuthScheme::LegacyDidWba => "didwba",
        })
    }
}

/// The accepted age of a signature. `Default`: 300 s old at most, 60 s in the future at most
/// (the SDK's verifier defaults).
///
/// The replay cache's TTL must be at least `max_age + max_skew` (360 s by default, the
/// cache's default), or a signature could be replayed after its nonce was forgotten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWindow {
    /// How old `created` (or the legacy timestamp) may be.
    pub max_age: Duration,
    /// How far in the future `created` may be (clock skew).
    pub max_skew: Duration,
}

impl Default for TimeWindow {
    fn default() -> Self {
        TimeWindow {
            max_age: Duration::from_secs(300),
            max_skew: Duration::from_secs(60),
        }
    }
}

/// A request whose DID authentication verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    /// The caller's DID.
    pub did: Did,
    /// The key that signed, `did#fragment`.
    pub keyid: String,
    /// The form used.
    pub scheme: AuthScheme,
}

/// RFC 9421 credentials, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSignatureCredentials {
    did: Did,
    components: Vec<String>,
    params: SignatureParams,
    signature: Vec<u8>,
}

/// Legacy `DIDWba` credentials, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyCredentials {
    did: Did,
    keyid: String,
    nonce: String,
    timestamp: String,
    timestamp_unix: i64,
    aud_field: bool,
    signature: Vec<u8>,
}

/// The DID credentials a request carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    /// `Signature-Input` + `Signature` (+ `Content-Digest`).
    HttpSignature(HttpSignatureCredentials),
    /// `Authorization: DIDWba …`.
    Legacy(LegacyCredentials),
}

fn malformed(header: &'static str, detail: impl Into<String>) -> AuthError {
    AuthError::Malformed {
        header,
        detail: detail.into(),
    }
}

fn bounded<'h>(header: &'static str, value: Option<&'h str>) -> Result<Option<&'h str>, AuthError> {
    match value {
        Some(v) if v.len() > MAX_HEADER_BYTES => Err(malformed(
            header,
            format!("{} bytes, more than {MAX_HEADER_BYTES}", v.len()),
        )),
        other => Ok(other),
    }
}

fn is_ows(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// A quoted value without escapes: printable ASCII other than `"` and `\`.
fn unquote<'a>(header: &'static str, name: &str, raw: &'a str) -> Result<&'a str, AuthError> {
    let inner = raw
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .ok_or_else(|| malformed(header, format!("parameter {name} is not a quoted string")))?;
    if !inner
        .bytes()
        .all(|c| (0x20..0x7f).contains(&c) && c != b'"' && c != b'\\')
    {
        return Err(malformed(
            header,
            format!("parameter {name} holds a character that is not allowed"),
        ));
    }
    Ok(inner)
}

fn integer(name: &str, raw: &str) -> Result<i64, AuthError> {
    let digits = raw.strip_prefix('-').unwrap_or(raw);
    if digits.is_empty() || digits.len() > 15 || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(malformed(
            "Signature-Input",
            format!("parameter {name} is not an integer"),
        ));
    }
    raw.parse().map_err(|_| {
        malformed(
            "Signature-Input",
            format!("parameter {name} is not an integer"),
        )
    })
}

fn label<'a>(header: &'static str, text: &'a str) -> Result<(String, &'a str), AuthError> {
    let eq = text
        .find('=')
        .ok_or_else(|| malformed(header, "no label"))?;
    let label = &text[..eq];
    if label.is_empty()
        || !label
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
    {
        return Err(malformed(header, "label is not a token"));
    }
    Ok((label.to_owned(), &text[eq + 1..]))
}

fn parse_signature_input(text: &str) -> Result<(String, Vec<String>, SignatureParams), AuthError> {
    const H: &str = "Signature-Input";
    let (label, rest) = label(H, text.trim_matches(is_ows))?;
    let rest = rest
        .strip_prefix('(')
        .ok_or_else(|| malformed(H, "no inner list of components"))?;
    let close = rest
        .find(')')
        .ok_or_else(|| malformed(H, "unterminated component list"))?;
    let mut components: Vec<String> = Vec::new();
    for item in rest[..close].split(' ').filter(|s| !s.is_empty()) {
        let name = item
            .strip_prefix('"')
            .and_then(|r| r.strip_suffix('"'))
            .ok_or_else(|| malformed(H, "a component is not a quoted string"))?;
        let body = name.strip_prefix('@').unwrap_or(name);
        if body.is_empty()
            || !body.bytes().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'_' || c == b'.'
            })
        {
            return Err(malformed(H, "a component name is not a lowercase token"));
        }
        if components.iter().any(|c| c == name) {
            return Err(malformed(H, format!("component {name:?} is listed twice")));
        }
        if components.len() == MAX_COMPONENTS {
            return Err(malformed(
                H,
                format!("more than {MAX_COMPONENTS} components"),
            ));
        }
        components.push(name.to_owned());
    }
    for required in ["@method", "@target-uri", "@authority"] {
        if !components.iter().any(|c| c == required) {
            return Err(malformed(H, format!("component {required} is not covered")));
        }
    }
    let params_text = &rest[close + 1..];
    let (mut created, mut expires, mut nonce, mut keyid) = (None, None, None, None);
    if !params_text.is_empty() {
        let params_text = params_text
            .strip_prefix(';')
            .ok_or_else(|| malformed(H, "junk after the component list"))?;
        for raw in params_text.split(';') {
            let raw = raw.trim_matches(is_ows);
            let (name, value) = raw
                .split_once('=')
                .ok_or_else(|| malformed(H, "a parameter has no value"))?;
            let duplicate = || malformed(H, format!("parameter {name} is duplicated"));
            match name {
                "created" => {
                    if created.replace(integer(name, value)?).is_some() {
                        return Err(duplicate());
                    }
                }
                "expires" => {
                    if expires.replace(integer(name, value)?).is_some() {
                        return Err(duplicate());
                    }
                }
                "nonce" => {
                    let v = unquote(H, name, value)?;
                    if v.len() > MAX_NONCE_BYTES {
                        return Err(malformed(
                            H,
                            format!("nonce longer than {MAX_NONCE_BYTES} bytes"),
                        ));
                    }
                    if nonce.replace(v.to_owned()).is_some() {
                        return Err(duplicate());
                    }
                }
                "keyid" => {
                    if keyid.replace(unquote(H, name, value)?.to_owned()).is_some() {
                        return Err(duplicate());
                    }
                }
                other => {
                    return Err(malformed(
                        H,
                        format!(
                            "unknown parameter {:?}",
                            other.chars().take(32).collect::<String>()
                        ),
                    ))
                }
            }
        }
    }
    let created = created.ok_or_else(|| malformed(H, "parameter created is missing"))?;
    let keyid = keyid.ok_or_else(|| AuthError::InvalidKeyId {
        detail: "keyid is missing".into(),
    })?;
    Ok((
        label,
        components,
        SignatureParams {
            created,
            expires,
            nonce,
            keyid,
        },
    ))
}

fn parse_signature(text: &str) -> Result<(String, Vec<u8>), AuthError> {
    const H: &str = "Signature";
    let (label, rest) = label(H, text.trim_matches(is_ows))?;
    let value = rest
        .strip_prefix(':')
        .and_then(|r| r.strip_suffix(':'))
        .ok_or_else(|| malformed(H, "value is not a byte sequence (:…:)"))?;
    let bytes = b64std_decode(value).ok_or_else(|| malformed(H, "value is not base64"))?;
    Ok((label, bytes))
}

fn keyid_did(keyid: &str) -> Result<Did, AuthError> {
    let (did, fragment) = keyid
        .split_once('#')
        .ok_or_else(|| AuthError::InvalidKeyId {
            detail: "keyid is not did#fragment".into(),
        })?;
    if fragment.is_empty() || fragment.contains('#') {
        return Err(AuthError::InvalidKeyId {
            detail: "keyid fragment is empty or has '#'".into(),
        });
    }
    Ok(Did::parse(did)?)
}

fn parse_legacy(text: &str) -> Result<LegacyCredentials, AuthError> {
    const H: &str = "Authorization";
    let rest = text
        .trim_matches(is_ows)
        .strip_prefix("DIDWba")
        .ok_or_else(|| malformed(H, "scheme is not DIDWba"))?;
    if !rest.starts_with(is_ows) {
        return Err(malformed(H, "no space after DIDWba"));
    }
    let (mut v, mut did, mut nonce, mut timestamp, mut vm, mut signature) =
        (None, None, None, None, None, None);
    for part in rest.split(',') {
        let part = part.trim_matches(is_ows);
        let (name, value) = part
            .split_once('=')
            .ok_or_else(|| malformed(H, "a field has no value"))?;
        let name = name.trim_matches(is_ows).to_ascii_lowercase();
        let value = unquote(H, &name, value.trim_matches(is_ows))?;
        let slot = match name.as_str() {
            "v" => &mut v,
            "did" => &mut did,
            "nonce" => &mut nonce,
            "timestamp" => &mut timestamp,
            "verification_method" => &mut vm,
            "signature" => &mut signature,
            other => {
                return Err(malformed(
                    H,
                    format!(
                        "unknown field {:?}",
                        other.chars().take(32).collect::<String>()
                    ),
                ))
            }
        };
        if slot.replace(value).is_some() {
            return Err(malformed(H, format!("field {name} is duplicated")));
        }
    }
    let missing = |f: &str| malformed(H, format!("field {f} is missing"));
    let did = Did::parse(did.ok_or_else(|| missing("did"))?)?;
    let nonce = nonce.ok_or_else(|| missing("nonce"))?;
    if nonce.is_empty() || nonce.len() > MAX_NONCE_BYTES {
        return Err(malformed(
            H,
            format!("nonce is empty or longer than {MAX_NONCE_BYTES} bytes"),
        ));
    }
    let timestamp = timestamp.ok_or_else(|| missing("timestamp"))?;
    let timestamp_unix = parse_iso8601(timestamp)
        .ok_or_else(|| malformed(H, "timestamp is not an ISO 8601 date-time"))?;
    let vm = vm.ok_or_else(|| missing("verification_method"))?;
    if vm.is_empty()
        || !vm
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~'))
    {
        return Err(AuthError::InvalidKeyId {
            detail: "verification_method is not a fragment".into(),
        });
    }
    let signature = b64url_decode(signature.ok_or_else(|| missing("signature"))?)
        .ok_or_else(|| malformed(H, "signature is not base64url"))?;
    // The SDK: version >= 1.1 signs "aud", earlier (or unparsable) versions "service".
    let aud_field = v.is_none_or(|v| v.parse::<f64>().is_ok_and(|f| f >= 1.1));
    Ok(LegacyCredentials {
        keyid: format!("{did}#{vm}"),
        did,
        nonce: nonce.to_owned(),
        timestamp: timestamp.to_owned(),
        timestamp_unix,
        aud_field,
        signature,
    })
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

fn check_window(created: i64, now: i64, window: &TimeWindow) -> Result<(), AuthError> {
    if created > now.saturating_add(secs(window.max_skew)) {
        return Err(AuthError::NotYetValid {
            created,
            now,
            max_skew: window.max_skew.as_secs(),
        });
    }
    if now.saturating_sub(created) > secs(window.max_age) {
        return Err(AuthError::Expired {
            created,
            now,
            max_age: window.max_age.as_secs(),
        });
    }
    Ok(())
}

fn verify_ed25519(
    key: &ed25519_dalek::VerifyingKey,
    message: &[u8],
    signature: &[u8],
) -> Result<(), AuthError> {
    let bytes: [u8; 64] = signature.try_into().map_err(|_| AuthError::BadSignature)?;
    key.verify_strict(message, &Signature::from_bytes(&bytes))
        .map_err(|_| AuthError::BadSignature)
}

impl Credentials {
    /// Reads the credentials of a request from its headers (`header(name)` is a
    /// case-insensitive lookup returning the value). `Ok(None)` when the request carries
    /// neither `Signature-Input`/`Signature` nor `Authorization: DIDWba`. When both forms are
    /// present the HTTP signature is used (as the SDK). Bounded: each header ≤ 4 KiB, ≤ 8
    /// components, nonce ≤ 128 bytes; unknown, duplicated or odd parts are refused.
    pub fn from_headers<'h>(
        header: impl Fn(&str) -> Option<&'h str>,
    ) -> Result<Option<Credentials>, AuthError> {
        let input = bounded("Signature-Input", header("Signature-Input"))?;
        let signature = bounded("Signature", header("Signature"))?;
        if input.is_some() || signature.is_some() {
            let input = input.ok_or_else(|| {
                malformed("Signature-Input", "missing while Signature is present")
            })?;
            let signature = signature.ok_or_else(|| {
                malformed("Signature", "missing while Signature-Input is present")
            })?;
            let (label_in, components, params) = parse_signature_input(input)?;
            let (label_sig, signature) = parse_signature(signature)?;
            if label_in != label_sig {
                return Err(malformed(
                    "Signature",
                    format!(
                        "label {label_sig:?} does not match the Signature-Input label {label_in:?}"
                    ),
                ));
            }
            let did = keyid_did(&params.keyid)?;
            return Ok(Some(Credentials::HttpSignature(HttpSignatureCredentials {
                did,
                components,
                params,
                signature,
            })));
        }
        match header("Authorization") {
            Some(auth) if auth.trim_start_matches(is_ows).starts_with("DIDWba") => {
                let auth = bounded("Authorization", Some(auth))?.unwrap_or_default();
                Ok(Some(Credentials::Legacy(parse_legacy(auth)?)))
            }
            _ => Ok(None),
        }
    }

    /// The DID the credentials claim.
    pub fn did(&self) -> &Did {
        match self {
            Credentials::HttpSignature(c) => &c.did,
            Credentials::Legacy(c) => &c.did,
        }
    }

    /// The key id claimed, `did#fragment`.
    pub fn keyid(&self) -> &str {
        match self {
            Credentials::HttpSignature(c) => &c.params.keyid,
            Credentials::Legacy(c) => &c.keyid,
        }
    }

    /// The nonce, when there is one.
    pub fn nonce(&self) -> Option<&str> {
        match self {
            Credentials::HttpSignature(c) => c.params.nonce.as_deref(),
            Credentials::Legacy(c) => Some(&c.nonce),
        }
    }

    /// Which form the credentials came in.
    pub fn scheme(&self) -> AuthScheme {
        match self {
            Credentials::HttpSignature(_) => AuthScheme::HttpSignatures,
            Credentials::Legacy(_) => AuthScheme::LegacyDidWba,
        }
    }

    /// What can be checked before anything costly (fetching the signer's DID document):
    /// the time window, a nonce, and that the nonce is not in `replay` already. The
    /// signature is not checked here ([`verify`](Self::verify) checks it, and all of this
    /// again).
    ///
    /// # Errors
    /// [`AuthError::Expired`], [`AuthError::NotYetValid`], [`AuthError::SignatureExpired`],
    /// [`AuthError::MissingNonce`] or [`AuthError::Replayed`].
    pub fn check_fresh(
        &self,
        now_unix: i64,
        window: &TimeWindow,
        replay: &dyn NonceLog,
    ) -> Result<(), AuthError> {
        let nonce = self.fresh_nonce(now_unix, window)?;
        if replay.seen(self.did(), nonce, now_unix) {
            return Err(AuthError::Replayed);
        }
        Ok(())
    }

    /// The nonce, once the time window holds and there is one.
    fn fresh_nonce(&self, now_unix: i64, window: &TimeWindow) -> Result<&str, AuthError> {
        match self {
            Credentials::HttpSignature(c) => {
                check_window(c.params.created, now_unix, window)?;
                if let Some(expires) = c.params.expires {
                    if expires < now_unix {
                        return Err(AuthError::SignatureExpired {
                            expires,
                            now: now_unix,
                        });
                    }
                }
                c.params
                    .nonce
                    .as_deref()
                    .filter(|n| !n.is_empty())
                    .ok_or(AuthError::MissingNonce)
            }
            Credentials::Legacy(c) => {
                check_window(c.timestamp_unix, now_unix, window)?;
                Ok(c.nonce.as_str())
            }
        }
    }

    /// Verifies the credentials against the resolved document: the document is the
    /// credentials' DID's; the key id is listed in `authentication`; the body is covered and
    /// matches `Content-Digest`; the signature; the time window (`created` ≤ now + skew,
    /// now − created ≤ max age, `expires` ≥ now; the legacy timestamp the same); a nonce;
    /// then — only once everything else passed — records (DID, nonce) in `replay`, a second
    /// use being [`AuthError::Replayed`]. `audience` is the legacy `aud`: the host name the
    /// client addressed (Python's `urlparse(url).hostname`).
    #[allow(clippy::too_many_arguments)]
    pub fn verify<'h>(
        &self,
        document: &VerifiedDocument,
        target: &RequestTarget<'_>,
        audience: &str,
        header: impl Fn(&str) -> Option<&'h str>,
        body: &[u8],
        now_unix: i64,
        window: &TimeWindow,
        replay: &dyn NonceLog,
    ) -> Result<Authenticated, AuthError> {
        if document.did() != self.did() {
            return Err(AuthError::DidMismatch {
                document: document.did().to_string(),
                credentials: self.did().to_string(),
            });
        }
        let key = document
            .authentication_key(self.keyid())
            .map_err(|e| match e {
                DidDocumentError::NotAuthentication { keyid } => {
                    AuthError::NotAuthentication { keyid }
                }
                other => AuthError::Document(other),
            })?;
        let nonce = match self {
            Credentials::HttpSignature(c) => {
                let covered = c.components.iter().any(|n| n == "content-digest");
                if !body.is_empty() && !covered {
                    return Err(AuthError::Digest {
                        detail: "the body is not covered by the signature",
                    });
                }
                if covered || !body.is_empty() {
                    let given = bounded("Content-Digest", header("content-digest"))?.ok_or(
                        AuthError::Digest {
                            detail: "Content-Digest header is missing",
                        },
                    )?;
                    if given.trim_matches(is_ows) != content_digest(body) {
                        return Err(AuthError::Digest {
                            detail: "Content-Digest does not match the body",
                        });
                    }
                }
                let base =
                    signature_base(&c.components, target, &header, &c.params).map_err(|name| {
                        malformed(
                            "Signature-Input",
                            format!("covered header {name:?} is missing"),
                        )
                    })?;
                verify_ed25519(key, &base, &c.signature)?;
                self.fresh_nonce(now_unix, window)?
            }
            Credentials::Legacy(c) => {
                let hash = signed_hash(
                    &c.nonce,
                    &c.timestamp,
                    audience,
                    c.did.as_str(),
                    c.aud_field,
                );
                verify_ed25519(key, &hash, &c.signature)?;
                self.fresh_nonce(now_unix, window)?
            }
        };
        replay
            .record(self.did(), nonce, now_unix)
            .map_err(|e| match e {
                Replay::Seen => AuthError::Replayed,
                Replay::Full { capacity } => AuthError::ReplayCacheFull { capacity },
                Replay::DidQuota { limit } => AuthError::DidNonceQuota { limit },
            })?;
        Ok(Authenticated {
            did: self.did().clone(),
            keyid: self.keyid().to_owned(),
            scheme: self.scheme(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_the_sdk_header_forms() {
        let si = r#"sig1=("@method" "@target-uri" "@authority" "content-digest");created=1700000000;expires=1700000300;nonce="abc";keyid="did:wba:example.com:a#key-1""#;
        let (label, components, params) = parse_signature_input(si).unwrap();
        assert_eq!(label, "sig1");
        assert_eq!(components.len(), 4);
        assert_eq!(params.expires, Some(1_700_000_300));
        // Parameters in another order are rebuilt in the fixed order (as the SDK does).
        let shuffled = r#"sig1=("@method" "@target-uri" "@authority");keyid="did:wba:example.com:a#key-1";nonce="abc";created=1700000000"#;
        let (_, c, p) = parse_signature_input(shuffled).unwrap();
        assert_eq!(
            crate::http_signature::serialize_params(&c, &p),
            r#"("@method" "@target-uri" "@authority");created=1700000000;nonce="abc";keyid="did:wba:example.com:a#key-1""#
        );
        let legacy = r#"DIDWba v="1.1", did="did:wba:example.com:a", nonce="n", timestamp="2024-01-01T00:00:00Z", verification_method="key-1", signature="AAAA""#;
        let creds = parse_legacy(legacy).unwrap();
        assert_eq!(creds.keyid, "did:wba:example.com:a#key-1");
        assert!(creds.aud_field);
        let old = legacy.replace("v=\"1.1\"", "v=\"1.0\"");
        assert!(!parse_legacy(&old).unwrap().aud_field);
    }

    proptest! {
        #[test]
        fn header_parser_never_panics(input in "\\PC{0,300}", sig in "\\PC{0,120}", auth in "(DIDWba )?\\PC{0,300}") {
            let _ = Credentials::from_headers(|name: &str| match name {
                "Signature-Input" => Some(input.as_str()),
                "Signature" => Some(sig.as_str()),
                _ => None,
            });
            let _ = Credentials::from_headers(|name: &str| (name == "Authorization").then_some(auth.as_str()));
        }

        #[test]
        fn structured_garbage_never_panics(
            params in proptest::collection::vec("(created|expires|nonce|keyid|x)=(\"[^\"]{0,20}\"|-?[0-9]{0,18}|)", 0..6),
            comps in proptest::collection::vec("\"@?[a-z-]{0,12}\"", 0..10),
        ) {
            let input = format!("sig1=({});{}", comps.join(" "), params.join(";"));
            let _ = Credentials::from_headers(|name: &str| match name {
                "Signature-Input" => Some(input.as_str()),
                "Signature" => Some("sig1=:AAAA:"),
                _ => None,
            });
        }
    }
}
