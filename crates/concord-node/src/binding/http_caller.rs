//! Who calls an HTTP route: a DID proved with ANP's credentials on the request itself
//! (RFC 9421 `Signature-Input`/`Signature`, or the legacy `Authorization: DIDWba` when
//! [`Security::legacy_didwba`](crate::Security::legacy_didwba) allows it), checked as the
//! WebSocket upgrade checks them (time window, the node's `NonceLog` and nonce store, the
//! signer's resolved DID document, at most
//! [`Security::max_authentications_per_address`](crate::Security::max_authentications_per_address)
//! checks per client address at once); or a bearer token the agent grants
//! ([`BearerGrant`]: the token stands for a DID, which the `allow` rules match); else
//! anonymous. Credentials that fail are refused (401 with ANP's `WWW-Authenticate`
//! challenge), never downgraded to anonymous. Which affordance the caller may use is the
//! `allow` rules' decision, through [`ThingAccess`](super::ThingAccess).

use axum::http::HeaderMap;
use concord_identity::{Caller, Did};
use sha2::{Digest, Sha256};

use super::ProblemResponse;
use crate::admission::ClientKey;
use crate::identity::upgrade::{self, Refusal, Signed};
use crate::identity::NodeIdentity;

/// The shortest bearer token a grant takes: 16 characters (a guessable token would let
/// anyone act as the DID it stands for).
pub const MIN_BEARER_TOKEN_LEN: usize = 16;

/// A bearer token an agent grants HTTP consumers without a DID
/// ([`NodeBuilder::http_bearer`](crate::NodeBuilder::http_bearer)): a request with
/// `Authorization: Bearer <token>` calls as `caller`, a DID the agent's `allow` rules name
/// like any other. Only the token's SHA-256 is kept; `Debug` never shows it.
///
/// ```
/// use concord_node::{BearerGrant, Did};
///
/// let caller = Did::parse("did:wba:example.com:consumers:dashboard")?;
/// assert!(BearerGrant::new("a-long-random-secret-1234", caller.clone()).is_ok());
/// assert!(BearerGrant::new("short", caller).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct BearerGrant {
    digest: [u8; 32],
    caller: Did,
}

impl std::fmt::Debug for BearerGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BearerGrant")
            .field("caller", &self.caller.as_str())
            .finish_non_exhaustive()
    }
}

/// Why a bearer token cannot be granted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BearerTokenError {
    /// The token is shorter than [`MIN_BEARER_TOKEN_LEN`].
    #[error("the bearer token for {caller} has {len} characters; at least {min} are needed")]
    TooShort {
        /// The DID it was to stand for.
        caller: String,
        /// Its length.
        len: usize,
        /// [`MIN_BEARER_TOKEN_LEN`].
        min: usize,
    },
    /// The token holds whitespace, a control character or a character beyond ASCII (it
    /// travels in a header).
    #[error("the bearer token for {caller} must be printable ASCII without spaces")]
    NotPrintableAscii {
        /// The DID it was to stand for.
        caller: String,
    },
}

impl BearerGrant {
    /// Grants `token` to call as `caller`.
    ///
    /// # Errors
    /// [`BearerTokenError`] when the token is too short or not printable ASCII.
    pub fn new(token: &str, caller: Did) -> Result<Self, BearerTokenError> {
        if token.len() < MIN_BEARER_TOKEN_LEN {
            return Err(BearerTokenError::TooShort {
                caller: caller.to_string(),
                len: token.len(),
                min: MIN_BEARER_TOKEN_LEN,
            });
        }
        if !token.bytes().all(|byte| byte.is_ascii_graphic()) {
            return Err(BearerTokenError::NotPrintableAscii {
                caller: caller.to_string(),
            });
        }
        Ok(Self {
            digest: Sha256::digest(token.as_bytes()).into(),
            caller,
        })
    }

    /// The DID the token stands for.
    pub fn caller(&self) -> &Did {
        &self.caller
    }
}

/// The request whose caller is asked for: where it comes from, what it asks, what it
/// carries.
pub(crate) struct HttpRequest<'a> {
    pub(crate) client: ClientKey,
    pub(crate) method: &'a str,
    /// The absolute URL the request was sent to, as the description names it (the site's
    /// base URL and the request's path and query): what a signature must cover.
    pub(crate) url: &'a str,
    pub(crate) headers: &'a HeaderMap,
    pub(crate) body: &'a [u8],
}

/// The caller of `request`: a bearer grant's DID, a verified DID, or anonymous; a refusal
/// as a problem (401 with ANP's challenge, 429 when the address has too many checks
/// running, 503 when a nonce cannot be recorded).
pub(crate) async fn identify(
    identity: &NodeIdentity,
    grants: &[BearerGrant],
    request: &HttpRequest<'_>,
) -> Result<Caller, ProblemResponse> {
    let realm = realm_of(request.url);
    if let Some(token) = bearer(request.headers) {
        return granted(grants, token)
            .ok_or_else(|| Refusal::invalid_bearer(&realm, !grants.is_empty()).into_problem());
    }
    let limit = identity.security.max_authentications_per_address;
    let Some(_checking) = identity.authenticating.enter(request.client, limit) else {
        return Err(Refusal::too_many_authentications(limit).into_problem());
    };
    let signed = Signed {
        method: request.method,
        targets: &[request.url],
        body: request.body,
    };
    upgrade::verify_request(identity, &realm, request.client, request.headers, &signed)
        .await
        .map_err(Refusal::into_problem)
}

/// The token of an `Authorization: Bearer …` header.
fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    let value = headers.get(axum::http::header::AUTHORIZATION)?.as_bytes();
    let (scheme, token) = value.split_at(value.iter().position(|b| *b == b' ')?);
    scheme
        .eq_ignore_ascii_case(b"bearer")
        .then(|| token.trim_ascii())
}

/// The DID `token` was granted to, comparing digests in constant time.
fn granted(grants: &[BearerGrant], token: &[u8]) -> Option<Caller> {
    let digest: [u8; 32] = Sha256::digest(token).into();
    let mut found = None;
    for grant in grants {
        let difference = grant
            .digest
            .iter()
            .zip(&digest)
            .fold(0u8, |difference, (a, b)| difference | (a ^ b));
        if difference == 0 && found.is_none() {
            found = Some(Caller::Authenticated(grant.caller.clone()));
        }
    }
    found
}

/// The host of `url`: the realm of our challenges.
fn realm_of(url: &str) -> String {
    url::Url::parse(url)
        .ok()
        .and_then(|url| url.host_str().map(str::to_owned))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn did() -> Did {
        Did::parse("did:wba:example.com:consumers:a").expect("a DID")
    }

    #[test]
    fn a_granted_token_calls_as_its_did_and_another_token_does_not() {
        let grants = [BearerGrant::new("0123456789abcdef-token", did()).expect("a grant")];
        assert_eq!(
            granted(&grants, b"0123456789abcdef-token"),
            Some(Caller::Authenticated(did()))
        );
        assert_eq!(granted(&grants, b"0123456789abcdef-tokeN"), None);
    }

    #[test]
    fn the_bearer_scheme_is_read_in_any_case() {
        let mut headers = HeaderMap::new();
        headers.insert("authorization", "bEaReR  abc".parse().expect("a value"));
        assert_eq!(bearer(&headers), Some(&b"abc"[..]));
        headers.insert("authorization", "DIDWba did=x".parse().expect("a value"));
        assert_eq!(bearer(&headers), None);
    }

    #[test]
    fn a_token_with_a_space_is_refused() {
        let refused = BearerGrant::new("0123456789 abcdef-token", did());
        assert!(matches!(
            refused,
            Err(BearerTokenError::NotPrintableAscii { .. })
        ));
    }
}
