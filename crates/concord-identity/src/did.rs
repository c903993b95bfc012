//! `did:wba` DIDs: `did:wba:` host [`%3A` port] (`:` segment)*, and where their documents live.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Longest DID accepted, in bytes.
pub const MAX_DID_LEN: usize = 2048;
const PREFIX: &str = "did:wba:";

/// Why a text is not a `did:wba` DID we accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DidError {
    /// The text does not start with `did:wba:`.
    #[error("not a did:wba DID: {text:?} does not start with \"did:wba:\"")]
    NotDidWba {
        /// The start of the offending text (at most 64 characters).
        text: String,
    },
    /// The DID is longer than [`MAX_DID_LEN`].
    #[error("DID is {len} bytes long, more than the {max} accepted")]
    TooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The host part is not a DNS name.
    #[error("DID host {host:?} is not a DNS name: {detail}")]
    BadHost {
        /// The host as written.
        host: String,
        /// What is wrong with it.
        detail: &'static str,
    },
    /// The host is an IPv4 or IPv6 literal, which did:wba does not allow.
    #[error("DID host {host:?} is an IP address; did:wba needs a DNS name")]
    IpHost {
        /// The host as written.
        host: String,
    },
    /// The port (after `%3A`) is not a number in 1..=65535.
    #[error("DID port {port:?} is not a number in 1..=65535")]
    BadPort {
        /// The port as written.
        port: String,
    },
    /// A path segment is empty or holds a character outside unreserved / percent-encoded.
    #[error("DID path segment {index} ({segment:?}) is not allowed: {detail}")]
    BadSegment {
        /// Position of the segment after the host (0-based).
        index: usize,
        /// The segment as written (at most 64 characters).
        segment: String,
        /// What is wrong with it.
        detail: &'static str,
    },
}

/// A validated `did:wba` DID, kept exactly as written.
///
/// Grammar: `did:wba:` host [`%3A` port] (`:` segment)*, where host is a DNS name (letters,
/// digits, `-`, `.`; never an IP literal), port is 1..=65535 and each segment is non-empty and
/// made of unreserved characters (`A-Z a-z 0-9 - . _ ~`) or percent-encodings (not of `/`, `\`
/// or `.`, and not `.`/`..`, so a segment never walks the document path); at most 2 KiB.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Did(String);

fn clip(text: &str) -> String {
    text.chars().take(64).collect()
}

impl Did {
    /// Parses and validates a DID (see the type's grammar).
    pub fn parse(text: &str) -> Result<Did, DidError> {
        if text.len() > MAX_DID_LEN {
            return Err(DidError::TooLong {
                len: text.len(),
                max: MAX_DID_LEN,
            });
        }
        let rest = text
            .strip_prefix(PREFIX)
            .ok_or_else(|| DidError::NotDidWba { text: clip(text) })?;
        let mut parts = rest.split(':');
        let authority = parts.next().unwrap_or_default();
        let (host, port) = split_port(authority)?;
        check_host(host)?;
        if let Some(port) = port {
            parse_port(port)?;
        }
        for (index, segment) in parts.enumerate() {
            check_segment(index, segment)?;
        }
        Ok(Did(text.to_owned()))
    }

    /// Builds `did:wba:host[%3Aport][:segment…]` and validates it.
    pub fn from_parts(host: &str, port: Option<u16>, path: &[&str]) -> Result<Did, DidError> {
        let mut text = format!("{PREFIX}{host}");
        if let Some(port) = port {
            text.push_str(&format!("%3A{port}"));
        }
        for segment in path {
            text.push(':');
            text.push_str(segment);
        }
        Did::parse(&text)
    }

    /// The DID as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn authority(&self) -> &str {
        self.0[PREFIX.len()..].split(':').next().unwrap_or_default()
    }

    /// The host (without the port).
    pub fn host(&self) -> &str {
        split_port(self.authority())
            .map(|(h, _)| h)
            .unwrap_or_default()
    }

    /// The port, when the DID names one (`%3A` port).
    pub fn port(&self) -> Option<u16> {
        let (_, port) = split_port(self.authority()).ok()?;
        port.and_then(|p| parse_port(p).ok())
    }

    /// The path segments after the host, as written (still percent-encoded).
    pub fn path(&self) -> Vec<&str> {
        self.0[PREFIX.len()..].split(':').skip(1).collect()
    }

    /// The 43-character fingerprint when the last segment is `e1_<fingerprint>`.
    pub fn e1_fingerprint(&self) -> Option<&str> {
        let last = self.path().pop()?;
        let fp = last.strip_prefix("e1_")?;
        (fp.len() == 43
            && fp
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'))
        .then_some(fp)
    }

    /// Whether the last segment names the `k1_` (secp256k1) profile.
    pub fn is_k1(&self) -> bool {
        self.path().last().is_some_and(|s| s.starts_with("k1_"))
    }

    /// Where the document lives: `scheme://host[:port]/path…/did.json`, or
    /// `/.well-known/did.json` without path. `scheme` is `https` in production, `http` only in
    /// a loopback test mode (the caller decides).
    pub fn document_url(&self, scheme: &str) -> String {
        let mut url = format!("{scheme}://{}", self.host());
        if let Some(port) = self.port() {
            url.push_str(&format!(":{port}"));
        }
        url.push_str(&self.document_path());
        url
    }

    /// The path part of [`Did::document_url`], e.g. `/user/alice/did.json`.
    pub fn document_path(&self) -> String {
        let path = self.path();
        if path.is_empty() {
            "/.well-known/did.json".to_owned()
        } else {
            format!("/{}/did.json", path.join("/"))
        }
    }
}

fn split_port(authority: &str) -> Result<(&str, Option<&str>), DidError> {
    let lower = authority.to_ascii_lowercase();
    match lower.find("%3a") {
        Some(at) => Ok((&authority[..at], Some(&authority[at + 3..]))),
        None => Ok((authority, None)),
    }
}

fn parse_port(port: &str) -> Result<u16, DidError> {
    let bad = || DidError::BadPort { port: clip(port) };
    if port.is_empty()
        || port.len() > 5
        || !port.bytes().all(|c| c.is_ascii_digit())
        || port.starts_with('0')
    {
        return Err(bad());
    }
    match port.parse::<u32>() {
        Ok(n) if (1..=65535).contains(&n) => u16::try_from(n).map_err(|_| bad()),
        _ => Err(bad()),
    }
}

fn check_host(host: &str) -> Result<(), DidError> {
    let bad = |detail| DidError::BadHost {
        host: clip(host),
        detail,
    };
    if host.is_empty() {
        return Err(bad("empty"));
    }
    if host.len() > 253 {
        return Err(bad("longer than 253 bytes"));
    }
    if host.starts_with('[') || host.contains(':') {
        return Err(DidError::IpHost { host: clip(host) });
    }
    if !host
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.')
    {
        return Err(bad("only letters, digits, '-' and '.' are allowed"));
    }
    let labels: Vec<&str> = host.split('.').collect();
    for label in &labels {
        if label.is_empty() {
            return Err(bad("empty label"));
        }
        if label.len() > 63 {
            return Err(bad("label longer than 63 bytes"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(bad("label starts or ends with '-'"));
        }
    }
    // A host whose last label is numeric (decimal or 0x-hex) is read as an IPv4 address by
    // URL parsers ("127.0.0.1", "2130706433", "0x7f.1").
    let last = labels.last().copied().unwrap_or_default();
    let hex = last
        .strip_prefix("0x")
        .or_else(|| last.strip_prefix("0X"))
        .is_some_and(|h| h.bytes().all(|c| c.is_ascii_hexdigit()));
    if last.bytes().all(|c| c.is_ascii_digit()) || hex {
        return Err(DidError::IpHost { host: clip(host) });
    }
    Ok(())
}

fn check_segment(index: usize, segment: &str) -> Result<(), DidError> {
    let bad = |detail| DidError::BadSegment {
        index,
        segment: clip(segment),
        detail,
    };
    if segment.is_empty() {
        return Err(bad("empty"));
    }
    if segment == "." || segment == ".." {
        return Err(bad("dot segments are not allowed"));
    }
    let bytes = segment.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .ok_or_else(|| bad("truncated percent-encoding"))?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return Err(bad("bad percent-encoding"));
            }
            let upper = [hex[0].to_ascii_uppercase(), hex[1].to_ascii_uppercase()];
            if matches!(&upper, b"2F" | b"5C" | b"2E" | b"00") {
                return Err(bad("percent-encoded '/', '\\', '.' or NUL is not allowed"));
            }
            i += 3;
        } else if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~') {
            i += 1;
        } else {
            return Err(bad(
                "only unreserved characters and percent-encodings are allowed",
            ));
        }
    }
    Ok(())
}

impl fmt::Display for Did {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Did {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Did({:?})", self.0)
    }
}

impl FromStr for Did {
    type Err = DidError;
    fn from_str(s: &str) -> Result<Did, DidError> {
        Did::parse(s)
    }
}

impl AsRef<str> for Did {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Serialize for Did {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Did {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Did, D::Error> {
        let text = String::deserialize(deserializer)?;
        Did::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn document_urls_follow_the_spec() {
        let d = Did::parse("did:wba:example.com").unwrap();
        assert_eq!(
            d.document_url("https"),
            "https://example.com/.well-known/did.json"
        );
        assert_eq!(d.path(), Vec::<&str>::new());
        let d = Did::parse("did:wba:h%3A3000:user:alice").unwrap();
        assert_eq!(
            d.document_url("https"),
            "https://h:3000/user/alice/did.json"
        );
        assert_eq!(d.document_path(), "/user/alice/did.json");
        assert_eq!(d.host(), "h");
        assert_eq!(d.port(), Some(3000));
        assert_eq!(d.path(), vec!["user", "alice"]);
    }

    #[test]
    fn from_parts_matches_parse() {
        let d = Did::from_parts("localhost", Some(8080), &["agents", "x"]).unwrap();
        assert_eq!(d.as_str(), "did:wba:localhost%3A8080:agents:x");
        assert_eq!(d.port(), Some(8080));
    }

    #[test]
    fn refuses_bad_dids() {
        for bad in [
            "did:web:example.com",
            "did:wba:",
            "did:wba:127.0.0.1",
            "did:wba:2130706433",
            "did:wba:0x7f.1",
            "did:wba:[::1]",
            "did:wba:::1",
            "did:wba:exa_mple.com",
            "did:wba:example.com%3A0",
            "did:wba:example.com%3A65536",
            "did:wba:example.com%3A080",
            "did:wba:example.com%3A",
            "did:wba:example.com::alice",
            "did:wba:example.com:..",
            "did:wba:example.com:a%2Fb",
            "did:wba:example.com:a%2e%2e",
            "did:wba:example.com:a/b",
            "did:wba:example.com:a b",
            "did:wba:example.com:a%zz",
            "did:wba:-example.com",
            "did:wba:example..com",
            "did:wba:example.com.",
        ] {
            assert!(Did::parse(bad).is_err(), "{bad} accepted");
        }
        let long = format!("did:wba:example.com:{}", "a".repeat(MAX_DID_LEN));
        assert!(matches!(Did::parse(&long), Err(DidError::TooLong { .. })));
        assert!(matches!(
            Did::parse("did:wba:10.0.0.1"),
            Err(DidError::IpHost { .. })
        ));
    }

    #[test]
    fn e1_fingerprint_is_the_last_segment() {
        let fp = "A".repeat(43);
        let d = Did::parse(&format!("did:wba:example.com:agents:e1_{fp}")).unwrap();
        assert_eq!(d.e1_fingerprint(), Some(fp.as_str()));
        assert_eq!(
            Did::parse("did:wba:example.com:e1_short")
                .unwrap()
                .e1_fingerprint(),
            None
        );
        assert!(Did::parse("did:wba:example.com:user:k1_abc")
            .unwrap()
            .is_k1());
    }

    #[test]
    fn serde_is_a_string() {
        let d = Did::parse("did:wba:example.com:a").unwrap();
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(json, "\"did:wba:example.com:a\"");
        assert_eq!(serde_json::from_str::<Did>(&json).unwrap(), d);
        assert!(serde_json::from_str::<Did>("\"did:wba:1.2.3.4\"").is_err());
    }

    proptest! {
        #[test]
        fn parse_display_round_trips(
            labels in proptest::collection::vec("[a-z][a-z0-9-]{0,10}[a-z0-9]", 1..4),
            port in proptest::option::of(1u16..),
            segments in proptest::collection::vec("[A-Za-z0-9_~-]{1,12}", 0..5),
        ) {
            let host = labels.join(".");
            let segs: Vec<&str> = segments.iter().map(String::as_str).collect();
            let did = Did::from_parts(&host, port, &segs).unwrap();
            let again: Did = did.to_string().parse().unwrap();
            prop_assert_eq!(&again, &did);
            prop_assert_eq!(again.host(), host.as_str());
            prop_assert_eq!(again.port(), port);
            prop_assert_eq!(again.path(), segs);
        }

        #[test]
        fn parse_never_panics(text in "did:wba:\\PC{0,80}") {
            let _ = Did::parse(&text);
        }
    }
}
