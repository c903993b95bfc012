//! DID authentication of the WebSocket upgrade, both sides: a provider checks the caller's
//! credentials before any WebSocket exists (a failure is 401 with ANP's `WWW-Authenticate`
//! challenge, and nothing else runs), a requester signs its upgrade request.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use concord_identity::{AuthError, AuthScheme, Caller, Credentials, Identity, RequestTarget};

use super::{NodeIdentity, SignatureForm};
use crate::admission::ClientKey;

/// Seconds since the Unix epoch now.
pub(crate) fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX)
        })
}

/// A refused upgrade: its status, ANP's challenge and a one-line reason.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    /// What the log says (may name more than the peer is told).
    pub(crate) log: String,
    /// ANP's challenge headers (`WWW-Authenticate`, `Accept-Signature`).
    challenge: Vec<(&'static str, String)>,
    reason: String,
}

impl Refusal {
    fn unauthorized(realm: &str, error: &str, reason: String, log: String) -> Self {
        Self {
            status: StatusCode::UNAUTHORIZED,
            log,
            challenge: concord_identity::challenge_with(realm, error, &reason),
            reason,
        }
    }

    fn auth(realm: &str, error: &AuthError) -> Self {
        let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::UNAUTHORIZED);
        Self {
            status,
            log: error.to_string(),
            challenge: concord_identity::challenge(realm, error),
            reason: error.to_string(),
        }
    }

    /// Legacy `Authorization: DIDWba` credentials on a node that accepts RFC 9421 ones only
    /// (`Security::legacy_didwba` off): the challenge's `Accept-Signature` names the form
    /// to use.
    fn legacy_off(realm: &str, did: &concord_identity::Did) -> Self {
        Self::unauthorized(
            realm,
            "invalid_request",
            "this node accepts ANP's RFC 9421 HTTP Message Signatures only (Signature-Input and \
             Signature, as Accept-Signature shows); the legacy Authorization: DIDWba header is \
             not accepted"
                .to_owned(),
            format!("{did}: a legacy DIDWba header, and legacy_didwba is off"),
        )
    }

    /// Legacy `Authorization: DIDWba` credentials on a request that writes: they sign the
    /// host name only, nothing of the method, path or body, so anyone who saw them could
    /// replay them on another write within their time window; RFC 9421 is needed.
    fn legacy_on_write(realm: &str, did: &concord_identity::Did, method: &str) -> Self {
        Self::unauthorized(
            realm,
            "invalid_request",
            format!(
                "a {method} request needs ANP's RFC 9421 HTTP Message Signatures (Signature-Input \
                 and Signature, covering the method, the URL and the body); the legacy \
                 Authorization: DIDWba header binds none of them and is accepted on reads only"
            ),
            format!("{did}: a legacy DIDWba header on a {method} request"),
        )
    }

    /// A bearer token that no grant holds (`granting`: whether the node grants any): 401
    /// with ANP's challenge and a `Bearer` one.
    pub(crate) fn invalid_bearer(realm: &str, granting: bool) -> Self {
        let reason = if granting {
            "this bearer token is not one this agent grants"
        } else {
            "this agent grants no bearer tokens: sign the request with your DID (ANP DID-WBA)"
        };
        let mut refusal = Self::unauthorized(
            realm,
            "invalid_token",
            reason.to_owned(),
            "an unknown bearer token".to_owned(),
        );
        if granting {
            refusal.challenge.push((
                "WWW-Authenticate",
                format!("Bearer realm=\"{realm}\", error=\"invalid_token\""),
            ));
        }
        refusal
    }

    /// An anonymous caller of an HTTP route the `allow` rules keep for proved callers: 401
    /// with ANP's challenge, and a `Bearer` one when the agent grants tokens (`granting`).
    pub(crate) fn anonymous(realm: &str, granting: bool) -> Self {
        let mut refusal = Self::unauthorized(
            realm,
            "invalid_request",
            "this affordance serves callers that prove who they are: sign the request with your DID (ANP DID-WBA)".to_owned(),
            "an anonymous caller of an affordance for proved callers".to_owned(),
        );
        if granting {
            refusal
                .challenge
                .push(("WWW-Authenticate", format!("Bearer realm=\"{realm}\"")));
        }
        refusal
    }

    /// A caller the policy does not let call anything here.
    pub(crate) fn forbidden(realm: &str, caller: &Caller) -> Self {
        match caller {
            Caller::Anonymous => Self::unauthorized(
                realm,
                "invalid_request",
                "this node serves authenticated callers only: sign the upgrade with your DID (ANP DID-WBA)".into(),
                "an anonymous caller, and no action is open to anonymous callers".into(),
            ),
            Caller::Authenticated(did) => Self {
                status: StatusCode::FORBIDDEN,
                log: format!("{did} may call no action here"),
                challenge: Vec::new(),
                reason: format!("{did} is not allowed to call any action of this node"),
            },
        }
    }

    /// The node requires the Noise channel and the upgrade did not offer it.
    pub(crate) fn encryption_required() -> Self {
        Self {
            status: StatusCode::UPGRADE_REQUIRED,
            log: "a plain upgrade, and the node requires encryption".into(),
            challenge: Vec::new(),
            reason: format!(
                "this node requires an end-to-end encrypted session: offer the WebSocket subprotocol `{}`",
                concord_secure::SUBPROTOCOL
            ),
        }
    }
}

impl Refusal {
    /// The refusal as an HTTP binding answers it: a problem with the same status and ANP's
    /// challenge headers (`Retry-After` on 429 and 503).
    pub(crate) fn into_problem(self) -> crate::binding::ProblemResponse {
        let title = match self.status {
            StatusCode::UNAUTHORIZED => "Unauthorized",
            StatusCode::FORBIDDEN => "Forbidden",
            StatusCode::TOO_MANY_REQUESTS => "Too many requests",
            _ => "Refused",
        };
        let mut problem =
            crate::binding::ProblemResponse::new(self.status.as_u16(), title, self.reason)
                .with_type("urn:concord:http:unauthenticated");
        for (name, value) in &self.challenge {
            problem = problem.with_header(name, value);
        }
        problem
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut response = (self.status, format!("{}\n", self.reason)).into_response();
        let headers = response.headers_mut();
        for (name, value) in &self.challenge {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                headers.insert(name, value);
            }
        }
        if self.status == StatusCode::UPGRADE_REQUIRED {
            headers.insert(
                header::SEC_WEBSOCKET_PROTOCOL,
                HeaderValue::from_static(concord_secure::SUBPROTOCOL),
            );
        }
        if matches!(
            self.status,
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS
        ) {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

/// Our meta-protocol endpoint as the description names it: what a caller's signature must
/// cover. Never rebuilt from the request's `Host`: a signature a caller made for another
/// node (a hostile one it called) must not verify here.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// `ws://…/concord` or `wss://…/concord`.
    websocket: String,
    /// The same as `http://…` or `https://…` (how some clients name the URL they sign).
    http: String,
    /// Its host: the legacy header's audience and the challenge's realm.
    host: String,
}

impl Endpoint {
    /// The endpoint of a node whose description's base is `base_url`.
    pub(crate) fn of(base_url: &str) -> Self {
        let websocket = crate::binding::websocket::websocket_url(base_url);
        let http = match websocket.split_once("://") {
            Some(("wss", rest)) => format!("https://{rest}"),
            Some((_, rest)) => format!("http://{rest}"),
            None => websocket.clone(),
        };
        let host = url::Url::parse(base_url)
            .ok()
            .and_then(|url| url.host_str().map(str::to_owned))
            .unwrap_or_default();
        Self {
            websocket,
            http,
            host,
        }
    }

    /// The realm of our challenges: our host.
    pub(crate) fn realm(&self) -> &str {
        &self.host
    }
}

/// Checks the credentials an upgrade request from `client` carries: `Anonymous` when it
/// carries none, the caller's DID when they verify (for our `endpoint`: signature, key, time
/// window, fresh nonce), else a refusal naming the fault.
pub(crate) async fn authenticate(
    identity: &NodeIdentity,
    endpoint: &Endpoint,
    client: ClientKey,
    headers: &HeaderMap,
) -> Result<Caller, Refusal> {
    let signed = Signed {
        method: "GET",
        targets: &[&endpoint.websocket, &endpoint.http],
        body: b"",
    };
    verify_request(identity, endpoint.realm(), client, headers, &signed).await
}

/// What a request's signature must cover: its method, the URI it was sent to (any of
/// `targets`: how the description names it), its body.
pub(crate) struct Signed<'a> {
    pub(crate) method: &'a str,
    pub(crate) targets: &'a [&'a str],
    pub(crate) body: &'a [u8],
}

/// Whether a request with `method` writes (anything but `GET`, `HEAD` and `OPTIONS`): the
/// legacy `DIDWba` header, which binds nothing of the request, is refused on it.
fn writes(method: &str) -> bool {
    !matches!(method, "GET" | "HEAD" | "OPTIONS")
}

/// Checks the DID credentials a request from `client` carries, for `signed` and our
/// `realm` (our host): `Anonymous` when it carries none, the caller's DID when they verify
/// (signature, key, time window, then a fresh nonce in the node's log and its store), else
/// a refusal naming the fault (401 with ANP's challenge, 429 or 503 when the nonce log is
/// full).
pub(crate) async fn verify_request(
    identity: &NodeIdentity,
    realm: &str,
    client: ClientKey,
    headers: &HeaderMap,
    signed: &Signed<'_>,
) -> Result<Caller, Refusal> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let credentials = match Credentials::from_headers(header) {
        Ok(None) => return Ok(Caller::Anonymous),
        Ok(Some(credentials)) => credentials,
        Err(error) => return Err(Refusal::auth(realm, &error)),
    };
    if credentials.scheme() == AuthScheme::LegacyDidWba && !identity.security.legacy_didwba {
        return Err(Refusal::legacy_off(realm, credentials.did()));
    }
    if credentials.scheme() == AuthScheme::LegacyDidWba && writes(signed.method) {
        return Err(Refusal::legacy_on_write(
            realm,
            credentials.did(),
            signed.method,
        ));
    }
    let now = now_unix();
    let window = &identity.security.time_window;
    // Stale, nonce-less or replayed credentials are refused before any document is
    // fetched for them.
    let fresh = credentials.check_fresh(now, window, identity.replay());
    fresh.map_err(|error| Refusal::auth(realm, &error))?;
    let did = credentials.did().clone();
    let document = identity
        .resolver
        .resolve(&did, Some(client))
        .await
        .map_err(|error| {
            Refusal::unauthorized(
                realm,
                "invalid_did",
                error.public_reason(),
                format!("{did}: {error}"),
            )
        })?;
    let mut last = None;
    for target_uri in signed.targets {
        let target = RequestTarget {
            method: signed.method,
            target_uri,
        };
        let verified = credentials.verify(
            &document,
            &target,
            realm,
            header,
            signed.body,
            now,
            window,
            identity.replay(),
        );
        match verified {
            Ok(authenticated) => {
                return persisted(identity, realm, &credentials, now)
                    .await
                    .map(|()| Caller::Authenticated(authenticated.did))
            }
            Err(AuthError::BadSignature) => last = Some(AuthError::BadSignature),
            Err(error) => return Err(Refusal::auth(realm, &error)),
        }
    }
    Err(Refusal::auth(
        realm,
        &last.unwrap_or(AuthError::BadSignature),
    ))
}

/// Records the nonce of credentials that just verified in the store, before the upgrade is
/// answered, so that they are refused after a restart too: a store that cannot record it
/// refuses the upgrade (503, as a full replay cache does) rather than accept a nonce it may
/// forget.
async fn persisted(
    identity: &NodeIdentity,
    realm: &str,
    credentials: &Credentials,
    now: i64,
) -> Result<(), Refusal> {
    let Some(nonce) = credentials.nonce() else {
        return Err(Refusal::auth(realm, &AuthError::MissingNonce));
    };
    match identity.persist_nonce(credentials.did(), nonce, now).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(Refusal::auth(realm, &AuthError::Replayed)),
        Err(error) => {
            let busy = AuthError::ReplayCacheFull {
                capacity: identity.security.replay_capacity,
            };
            Err(Refusal {
                status: StatusCode::SERVICE_UNAVAILABLE,
                log: format!("{}: cannot record its nonce: {error}", credentials.did()),
                challenge: concord_identity::challenge(realm, &busy),
                reason: "this node cannot record your nonce right now; try again later".to_owned(),
            })
        }
    }
}

/// Upgrades whose credentials are being checked, per client address: a bound on the DID
/// document fetches one address can have the node make at once.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    counts: std::sync::Mutex<std::collections::HashMap<ClientKey, usize>>,
}

/// One upgrade's place in [`InFlight`], given back when dropped.
pub(crate) struct InFlightGuard<'a> {
    in_flight: &'a InFlight,
    key: ClientKey,
}

impl InFlight {
    /// A place for `key`'s next check, unless it has `limit` running.
    pub(crate) fn enter(&self, key: ClientKey, limit: usize) -> Option<InFlightGuard<'_>> {
        let mut counts = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = counts.entry(key).or_insert(0);
        if *count >= limit {
            return None;
        }
        *count += 1;
        Some(InFlightGuard {
            in_flight: self,
            key,
        })
    }
}

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        let mut counts = self
            .in_flight
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.key);
            }
        }
    }
}

impl Refusal {
    /// One address has as many upgrades being authenticated as it may.
    pub(crate) fn too_many_authentications(limit: usize) -> Self {
        Self {
            status: StatusCode::TOO_MANY_REQUESTS,
            log: format!("{limit} upgrades from this address are being authenticated"),
            challenge: Vec::new(),
            reason: format!(
                "{limit} upgrades from your address are being authenticated already; try again in a second"
            ),
        }
    }
}

/// A random nonce: 16 bytes from the OS, in hex.
pub(crate) fn nonce() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::getrandom(&mut bytes).is_err() {
        // No OS randomness: a nonce must still differ from every other.
        bytes = fastrand::u128(..).to_le_bytes();
    }
    hex::encode(bytes)
}

/// The headers that sign our upgrade request to `endpoint` (`ws://…` or `wss://…`).
pub(crate) fn sign(
    identity: &Identity,
    form: SignatureForm,
    endpoint: &str,
) -> Vec<(String, String)> {
    match form {
        SignatureForm::LegacyDidWba => {
            let audience = url::Url::parse(endpoint)
                .ok()
                .and_then(|url| url.host_str().map(str::to_owned))
                .unwrap_or_default();
            let timestamp = concord_identity::format_iso8601(now_unix());
            vec![(
                "Authorization".to_owned(),
                concord_identity::legacy_authorization(identity, &audience, &nonce(), &timestamp),
            )]
        }
        _ => {
            let target = RequestTarget {
                method: "GET",
                target_uri: endpoint,
            };
            let signed =
                concord_identity::sign_request(identity, &target, b"", now_unix(), &nonce());
            let mut headers = vec![
                ("Signature-Input".to_owned(), signed.signature_input),
                ("Signature".to_owned(), signed.signature),
            ];
            if let Some(digest) = signed.content_digest {
                headers.push(("Content-Digest".to_owned(), digest));
            }
            headers
        }
    }
}
