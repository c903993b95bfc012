//! Who may call: anyone, anyone authenticated, or DIDs matching patterns.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::did::{Did, DidError};

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// No (or no valid) credentials.
    Anonymous,
    /// A caller whose DID authentication verified.
    Authenticated(Did),
}

impl Caller {
    /// The DID the caller proved, if it proved one.
    pub fn did(&self) -> Option<&Did> {
        match self {
            Caller::Anonymous => None,
            Caller::Authenticated(did) => Some(did),
        }
    }
}

/// A rule: who may call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Allow {
    /// Anyone, authenticated or not (the default).
    #[default]
    Anyone,
    /// Any authenticated DID.
    Authenticated,
    /// Authenticated DIDs matching one of the patterns.
    Dids(Vec<DidPattern>),
}

impl Allow {
    /// Whether `caller` may call.
    pub fn permits(&self, caller: &Caller) -> bool {
        match (self, caller) {
            (Allow::Anyone, _) => true,
            (_, Caller::Anonymous) => false,
            (Allow::Authenticated, Caller::Authenticated(_)) => true,
            (Allow::Dids(patterns), Caller::Authenticated(did)) => {
                patterns.iter().any(|p| p.matches(did))
            }
        }
    }
}

/// Why a pattern is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatternError {
    /// The DID (or the prefix before `:*`) is not a valid DID.
    #[error("DID pattern {pattern:?} is not a DID or a DID prefix ending in \":*\": {source}")]
    Did {
        /// The pattern as written (at most 64 characters).
        pattern: String,
        /// Why its DID part is refused.
        #[source]
        source: DidError,
    },
    /// A `*` appears other than as the whole last segment.
    #[error("DID pattern {pattern:?}: '*' is only allowed as the whole last segment (\":*\")")]
    Wildcard {
        /// The pattern as written (at most 64 characters).
        pattern: String,
    },
}

/// An exact DID, or a prefix ending in `:*` that matches DIDs with one or more further
/// segments (on a segment boundary only: `did:wba:example.com:*` matches
/// `did:wba:example.com:alice` but neither `did:wba:example.com` nor
/// `did:wba:example.com%3A8080:alice`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DidPattern {
    did: Did,
    prefix: bool,
}

impl DidPattern {
    /// Parses a pattern.
    pub fn parse(text: &str) -> Result<DidPattern, PatternError> {
        let clip = || text.chars().take(64).collect::<String>();
        let (base, prefix) = match text.strip_suffix(":*") {
            Some(base) => (base, true),
            None => (text, false),
        };
        if base.contains('*') {
            return Err(PatternError::Wildcard { pattern: clip() });
        }
        let did = Did::parse(base).map_err(|source| PatternError::Did {
            pattern: clip(),
            source,
        })?;
        Ok(DidPattern { did, prefix })
    }

    /// Whether `did` matches.
    pub fn matches(&self, did: &Did) -> bool {
        if self.prefix {
            did.as_str()
                .strip_prefix(self.did.as_str())
                .is_some_and(|rest| rest.len() > 1 && rest.starts_with(':'))
        } else {
            did == &self.did
        }
    }
}

impl fmt::Display for DidPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.prefix {
            write!(f, "{}:*", self.did)
        } else {
            write!(f, "{}", self.did)
        }
    }
}

impl FromStr for DidPattern {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DidPattern::parse(s)
    }
}

impl Serialize for DidPattern {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DidPattern {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        DidPattern::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn did(s: &str) -> Did {
        Did::parse(s).unwrap()
    }

    #[test]
    fn patterns_match_on_segment_boundaries() {
        let p = DidPattern::parse("did:wba:example.com:*").unwrap();
        assert!(p.matches(&did("did:wba:example.com:alice")));
        assert!(p.matches(&did("did:wba:example.com:agents:bob")));
        assert!(!p.matches(&did("did:wba:example.com")));
        assert!(!p.matches(&did("did:wba:example.com%3A8080:alice")));
        assert!(!p.matches(&did("did:wba:example.community:alice")));
        let exact = DidPattern::parse("did:wba:example.com:alice").unwrap();
        assert!(exact.matches(&did("did:wba:example.com:alice")));
        assert!(!exact.matches(&did("did:wba:example.com:alice:x")));
        assert_eq!(p.to_string(), "did:wba:example.com:*");
        assert!(DidPattern::parse("did:wba:example.com:a*").is_err());
        assert!(DidPattern::parse("did:wba:*").is_err());
        assert!(DidPattern::parse("did:wba:1.2.3.4:*").is_err());
    }

    #[test]
    fn allow_rules() {
        let alice = Caller::Authenticated(did("did:wba:example.com:alice"));
        assert!(Allow::default().permits(&Caller::Anonymous));
        assert!(!Allow::Authenticated.permits(&Caller::Anonymous));
        assert!(Allow::Authenticated.permits(&alice));
        let rule = Allow::Dids(vec!["did:wba:example.com:*".parse().unwrap()]);
        assert!(rule.permits(&alice));
        assert!(!rule.permits(&Caller::Authenticated(did("did:wba:other.org:alice"))));
        assert!(!rule.permits(&Caller::Anonymous));
        let json =
            serde_json::to_string(&DidPattern::parse("did:wba:example.com:*").unwrap()).unwrap();
        assert_eq!(json, "\"did:wba:example.com:*\"");
        let back: DidPattern = serde_json::from_str(&json).unwrap();
        assert!(back.matches(&did("did:wba:example.com:x")));
    }
}
