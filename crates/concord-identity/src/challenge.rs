//! Authentication failures, and the `WWW-Authenticate` challenge that answers them.

use crate::did::DidError;
use crate::document::DidDocumentError;

/// Why a request's DID authentication is refused. Each variant names what was wrong; the
/// challenge sent to the peer ([`challenge`]) carries only a fixed description.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// A header is malformed, too long, or has odd, duplicated or unknown parts.
    #[error("malformed {header} header: {detail}")]
    Malformed {
        /// The header (`Signature-Input`, `Signature`, `Authorization`, …).
        header: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// The `keyid` (or legacy `verification_method`) is missing or not `did#fragment`.
    #[error("invalid key id: {detail}")]
    InvalidKeyId {
        /// What is wrong.
        detail: String,
    },
    /// The DID in the credentials is not a valid did:wba DID.
    #[error("invalid DID in credentials: {0}")]
    InvalidDid(#[from] DidError),
    /// The credentials name another DID than the document that was resolved.
    #[error("credentials name DID {credentials:?} but the document is for {document:?}")]
    DidMismatch {
        /// The document's DID.
        document: String,
        /// The credentials' DID.
        credentials: String,
    },
    /// The key id is not listed in the document's `authentication`.
    #[error("verification method {keyid:?} is not authorized for authentication")]
    NotAuthentication {
        /// The key id.
        keyid: String,
    },
    /// The document, or the key in it, cannot be used.
    #[error("DID document refused: {0}")]
    Document(DidDocumentError),
    /// The body is not covered, the `Content-Digest` is missing or does not match the body.
    #[error("content digest: {detail}")]
    Digest {
        /// What is wrong.
        detail: &'static str,
    },
    /// The signature does not verify.
    #[error("signature does not verify")]
    BadSignature,
    /// `created` (or the legacy timestamp) is older than the window allows.
    #[error("signature created at {created} is too old at {now} (max age {max_age} s)")]
    Expired {
        /// `created` / timestamp (Unix seconds).
        created: i64,
        /// Now.
        now: i64,
        /// The window's max age, seconds.
        max_age: u64,
    },
    /// `expires` has passed.
    #[error("signature expired at {expires}, now is {now}")]
    SignatureExpired {
        /// `expires` (Unix seconds).
        expires: i64,
        /// Now.
        now: i64,
    },
    /// `created` (or the legacy timestamp) is further in the future than the skew allows.
    #[error("signature created at {created} is in the future at {now} (max skew {max_skew} s)")]
    NotYetValid {
        /// `created` / timestamp (Unix seconds).
        created: i64,
        /// Now.
        now: i64,
        /// The window's max skew, seconds.
        max_skew: u64,
    },
    /// The signature carries no nonce.
    #[error("signature carries no nonce")]
    MissingNonce,
    /// The (DID, nonce) was already used.
    #[error("nonce already used by this DID (replay)")]
    Replayed,
    /// This DID holds its whole share of the replay cache; try again later (429).
    #[error("this DID has {limit} recent nonces, its share; try again later")]
    DidNonceQuota {
        /// The share of one DID.
        limit: usize,
    },
    /// The replay cache is full of unexpired nonces; try again later (503).
    #[error("replay cache full ({capacity} nonces); try again later")]
    ReplayCacheFull {
        /// The cache capacity.
        capacity: usize,
    },
}

impl AuthError {
    /// The ANP challenge `error` code: `invalid_request`, `invalid_signature`,
    /// `invalid_timestamp`, `invalid_nonce`, `invalid_did` or `invalid_verification_method`.
    pub fn challenge_error(&self) -> &'static str {
        match self {
            AuthError::Malformed { .. } => "invalid_request",
            AuthError::InvalidKeyId { .. } | AuthError::NotAuthentication { .. } => {
                "invalid_verification_method"
            }
            AuthError::Document(
                DidDocumentError::NotAuthentication { .. } | DidDocumentError::NotEd25519 { .. },
            ) => "invalid_verification_method",
            AuthError::InvalidDid(_) | AuthError::DidMismatch { .. } | AuthError::Document(_) => {
                "invalid_did"
            }
            AuthError::Digest { .. } | AuthError::BadSignature => "invalid_signature",
            AuthError::Expired { .. }
            | AuthError::SignatureExpired { .. }
            | AuthError::NotYetValid { .. } => "invalid_timestamp",
            AuthError::MissingNonce
            | AuthError::Replayed
            | AuthError::ReplayCacheFull { .. }
            | AuthError::DidNonceQuota { .. } => "invalid_nonce",
        }
    }

    /// The HTTP status: 401, except 403 for a key not authorized for authentication (as the
    /// SDK) and 503 when the replay cache is full.
    pub fn status(&self) -> u16 {
        match self {
            AuthError::NotAuthentication { .. }
            | AuthError::Document(DidDocumentError::NotAuthentication { .. }) => 403,
            AuthError::ReplayCacheFull { .. } => 503,
            AuthError::DidNonceQuota { .. } => 429,
            _ => 401,
        }
    }

    /// A fixed description for the peer (no internals).
    fn description(&self) -> &'static str {
        match self {
            AuthError::Malformed { .. } => "Authentication headers are malformed.",
            AuthError::InvalidKeyId { .. } => "Signature-Input keyid is missing or invalid.",
            AuthError::NotAuthentication { .. }
            | AuthError::Document(DidDocumentError::NotAuthentication { .. }) => {
                "Verification method is not authorized for authentication."
            }
            AuthError::Document(DidDocumentError::NotEd25519 { .. }) => {
                "Verification method is not supported."
            }
            AuthError::InvalidDid(_) | AuthError::DidMismatch { .. } | AuthError::Document(_) => {
                "Failed to resolve or validate the DID document."
            }
            AuthError::Digest { .. } => "Content-Digest verification failed.",
            AuthError::BadSignature => "Signature verification failed.",
            AuthError::Expired { .. }
            | AuthError::SignatureExpired { .. }
            | AuthError::NotYetValid { .. } => "Signature timestamp is expired or invalid.",
            AuthError::MissingNonce => "Signature nonce is required.",
            AuthError::Replayed => "Nonce has already been used or expired.",
            AuthError::ReplayCacheFull { .. } => "Server is busy; retry later.",
            AuthError::DidNonceQuota { .. } => {
                "Too many recent requests from this DID; retry later."
            }
        }
    }
}

/// The `Accept-Signature` value the SDK's verifier sends.
pub const ACCEPT_SIGNATURE: &str =
    r#"sig1=("@method" "@target-uri" "@authority" "content-digest");created;expires;nonce;keyid"#;

/// A quoted-string body: `\` and `"` escaped, control characters dropped (no header injection).
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// The challenge headers of a refusal, as the SDK's `_build_challenge_headers`:
/// `WWW-Authenticate: DIDWba realm="…", error="…", error_description="…"` and
/// `Accept-Signature: sig1=("@method" "@target-uri" "@authority" "content-digest");created;expires;nonce;keyid`.
/// The description is fixed per error (no internals); quotes are escaped.
pub fn challenge(realm: &str, error: &AuthError) -> Vec<(&'static str, String)> {
    challenge_with(realm, error.challenge_error(), error.description())
}

/// The same challenge for a refusal that is not an [`AuthError`] (a DID document that
/// cannot be fetched, a caller the policy refuses): `error` is one of the codes
/// [`AuthError::challenge_error`] gives, `description` what the caller may be told.
pub fn challenge_with(realm: &str, error: &str, description: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "WWW-Authenticate",
            format!(
                "DIDWba realm=\"{}\", error=\"{}\", error_description=\"{}\"",
                quote(realm),
                quote(error),
                quote(description)
            ),
        ),
        ("Accept-Signature", ACCEPT_SIGNATURE.to_owned()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenge_is_the_sdk_shape_and_escapes() {
        let headers = challenge("exa\"mple\r\n.com", &AuthError::Replayed);
        assert_eq!(headers[0].0, "WWW-Authenticate");
        assert_eq!(
            headers[0].1,
            "DIDWba realm=\"exa\\\"mple.com\", error=\"invalid_nonce\", error_description=\"Nonce has already been used or expired.\""
        );
        assert_eq!(
            headers[1],
            ("Accept-Signature", ACCEPT_SIGNATURE.to_owned())
        );
        assert_eq!(
            AuthError::NotAuthentication { keyid: "x".into() }.status(),
            403
        );
        assert_eq!(AuthError::BadSignature.status(), 401);
        let e = AuthError::Malformed {
            header: "Signature",
            detail: "secret internals".into(),
        };
        assert!(!challenge("r", &e)[0].1.contains("secret"));
    }
}
