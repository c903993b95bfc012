//! `Directory`: an HTTP client of a W3C WoT Discovery Thing Description Directory (TDD):
//! register a description (`PUT /things/{id}`, `POST /things` without an id), refresh it,
//! deregister it, get one, list them all (following `Link: rel="next"`), search with
//! JSONPath (`/search/jsonpath?query=`) or by capability (`/search/capability?…`).
//! Requests are signed with the agent's did:wba identity (RFC 9421) when it has one;
//! every answer is bounded ([`DirectoryClientLimits`]); error answers' problem details are
//! read into [`DirectoryError::Status`].
//!
//! The node registers itself with the directories
//! [`NodeBuilder::register_with`](crate::NodeBuilder::register_with) names: `registrar.rs`
//! executes the rule in `schedule.rs`.

mod error;
mod http;
pub(crate) mod registrar;
mod schedule;

use std::sync::Arc;
use std::time::Duration;

use concord_directory::CapabilityKind;
use concord_identity::Identity;
use reqwest::Method;
use serde_json::Value;
use url::Url;

pub use error::{DirectoryError, Problem, ValidationError};
pub use registrar::{RegistrationState, RegistrationStatus};
pub use schedule::{RegistrationSettings, RegistrationSigning};

use http::{Answer, Request};

/// The discovery context an enriched TD carries (W3C WoT Discovery §6.2).
pub const DISCOVERY_CONTEXT: &str = "https://www.w3.org/2022/wot/discovery";
/// The media type of a merge-patch (RFC 7396).
const MERGE_PATCH: &str = "application/merge-patch+json";

/// Bounds on what a directory may make a client read or wait for. A directory is a
/// stranger too: a huge answer, an endless listing or a silent server is cut at these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DirectoryClientLimits {
    /// The largest answer body read, in bytes (default 8 MiB): beyond it
    /// [`DirectoryError::TooLarge`].
    pub max_response_bytes: usize,
    /// The most pages one listing follows (`Link: rel="next"`, default 100): beyond it
    /// [`DirectoryError::Pages`].
    pub max_pages: usize,
    /// The most bytes one listing reads over all its pages (default 32 MiB): beyond it
    /// [`DirectoryError::ListingTooLarge`], so that pages each within
    /// `max_response_bytes` cannot add up to `max_pages` times as much.
    pub max_listing_bytes: usize,
    /// The most entries one listing gathers over all its pages (default 10 000): beyond it
    /// [`DirectoryError::ListingTooLarge`].
    pub max_listing_items: usize,
    /// How long one request may take, connecting to the last byte of its answer
    /// (default 10 s): beyond it [`DirectoryError::Timeout`].
    pub timeout: Duration,
}

impl Default for DirectoryClientLimits {
    fn default() -> Self {
        Self {
            max_response_bytes: 8 * 1024 * 1024,
            max_pages: 100,
            max_listing_bytes: 32 * 1024 * 1024,
            max_listing_items: 10_000,
            timeout: Duration::from_secs(10),
        }
    }
}

/// What a capability search asks for ([`Directory::search`]): agents matching every
/// criterion given. The directory's route: `GET /search/capability?action=…&property=…&
/// event=…&field=…&input=…&output=…&lmos=…&consensus=…&consensus-hash=…&did=…`, each
/// parameter a term of `concord_directory::CapabilityKind` (`field`: a field of an
/// action's input or output schema, either side, as the directory indexes it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CapabilityQuery {
    /// An action's name.
    pub action: Option<String>,
    /// A property's name.
    pub property: Option<String>,
    /// An event's name.
    pub event: Option<String>,
    /// A field of an action's input or output schema.
    pub field: Option<String>,
    /// A field of an action's input schema.
    pub input: Option<String>,
    /// A field of an action's output schema.
    pub output: Option<String>,
    /// An `lmos:` term (`lmos:name`), or a term and its value (`lmos:name=Acme`).
    pub lmos: Option<String>,
    /// A consensus protocol: its URI, or its hash (64 hex digits).
    pub protocol: Option<String>,
    /// The agent's DID.
    pub did: Option<String>,
}

impl CapabilityQuery {
    /// A query for agents serving the action `name`.
    pub fn action(name: impl Into<String>) -> Self {
        Self {
            action: Some(name.into()),
            ..Self::default()
        }
    }

    /// Whether no criterion is given.
    pub fn is_empty(&self) -> bool {
        self.pairs().next().is_none()
    }

    /// The criteria as the directory's capability terms: the query `concord_directory`
    /// answers (and [`concord_directory::keys_of`] of a description meets when it holds
    /// every term), the one meaning of each criterion for the directory and its clients.
    pub fn terms(&self) -> concord_directory::CapabilityQuery {
        self.kinds().fold(
            concord_directory::CapabilityQuery::new(),
            |query, (kind, value)| query.and(kind, value),
        )
    }

    /// The criteria, as the directory's query parameters (its terms' names).
    fn pairs(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.kinds().map(|(kind, value)| (kind.name(), value))
    }

    /// The criteria, each with the directory's term kind.
    fn kinds(&self) -> impl Iterator<Item = (CapabilityKind, &str)> {
        let protocol = self.protocol.as_deref().map(|protocol| {
            let hash = protocol.len() == 64 && protocol.bytes().all(|b| b.is_ascii_hexdigit());
            if hash {
                (CapabilityKind::ConsensusHash, protocol)
            } else {
                (CapabilityKind::ConsensusUri, protocol)
            }
        });
        [
            (CapabilityKind::Action, &self.action),
            (CapabilityKind::Property, &self.property),
            (CapabilityKind::Event, &self.event),
            (CapabilityKind::Field, &self.field),
            (CapabilityKind::InputField, &self.input),
            (CapabilityKind::OutputField, &self.output),
            (CapabilityKind::Lmos, &self.lmos),
            (CapabilityKind::Did, &self.did),
        ]
        .into_iter()
        .filter_map(|(kind, value)| value.as_deref().map(|value| (kind, value)))
        .chain(protocol)
    }
}

/// Where a description was registered ([`Directory::register`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Registered {
    /// The entry's id: the description's, or the one the directory gave (`Location`).
    pub id: String,
    /// Whether the directory created the entry (201), rather than replaced it (204).
    pub created: bool,
}

/// A client of one W3C WoT Discovery directory.
///
/// ```no_run
/// use concord_node::{CapabilityQuery, Directory};
///
/// # async fn run() -> Result<(), concord_node::DirectoryError> {
/// let directory = Directory::new("http://127.0.0.1:8081/")?;
/// for td in directory.search(&CapabilityQuery::action("getProductInfo")).await? {
///     println!("{} at {}", td["title"], td["base"]);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Directory {
    base: Url,
    request: Request,
}

impl Directory {
    /// A client of the directory at `url` (its base URL: `/things` is joined to it), with
    /// the platform's trusted roots, no identity and [`DirectoryClientLimits::default`].
    ///
    /// # Errors
    /// [`DirectoryError::Url`] for a URL that is not `http://` or `https://`,
    /// [`DirectoryError::Client`] when the HTTP client cannot be built.
    pub fn new(url: &str) -> Result<Self, DirectoryError> {
        let config = crate::tls::client_config(Vec::new())
            .map_err(|error| DirectoryError::Client(error.to_string()))?;
        let http = crate::tls::description_client(config, None)
            .map_err(|error| DirectoryError::Client(error.to_string()))?;
        Self::with_client(url, http)
    }

    /// A client of the directory at `url` that also trusts the root certificates in `pem`
    /// (one or more `BEGIN CERTIFICATE` blocks), on top of the platform's: a directory on
    /// `https://` whose certificate a private CA signed.
    ///
    /// # Errors
    /// As [`Directory::new`]; [`DirectoryError::Client`] naming the PEM when it holds no
    /// certificate or cannot be read.
    pub fn with_roots_pem(url: &str, pem: &[u8]) -> Result<Self, DirectoryError> {
        let roots = crate::tls::parse_roots(pem).map_err(|error| {
            DirectoryError::Client(format!("the root certificates (PEM): {error}"))
        })?;
        let config = crate::tls::client_config(roots)
            .map_err(|error| DirectoryError::Client(error.to_string()))?;
        let http = crate::tls::description_client(config, None)
            .map_err(|error| DirectoryError::Client(error.to_string()))?;
        Self::with_client(url, http)
    }

    /// A client with the node's HTTP client (its trusted roots and local address).
    pub(crate) fn with_client(url: &str, http: reqwest::Client) -> Result<Self, DirectoryError> {
        Ok(Self {
            base: base_url(url)?,
            request: Request::new(http, DirectoryClientLimits::default()),
        })
    }

    /// Signs every request with this identity (RFC 9421 `Signature-Input`/`Signature`, and
    /// `Content-Digest` over a body), as a directory requiring signed writes expects.
    pub fn with_identity(mut self, identity: Arc<Identity>) -> Self {
        self.request.identity = Some(identity);
        self
    }

    /// Bounds what the directory may make this client read or wait for.
    pub fn with_limits(mut self, limits: DirectoryClientLimits) -> Self {
        self.request.limits = limits;
        self
    }

    /// The directory's base URL.
    pub fn url(&self) -> &str {
        self.base.as_str()
    }

    /// Registers `td`: `PUT /things/{id}` when it has an `id` (201 created, 204 replaced),
    /// else `POST /things` (the directory's `Location` gives the id). With a `ttl`, the
    /// description carries the discovery context and `registration.ttl` (whole seconds),
    /// from which the directory computes `expires`; registering again refreshes it.
    ///
    /// # Errors
    /// [`DirectoryError`]: the directory away, slow, refusing (`Status` with its problem
    /// details: `validationErrors` for an invalid description) or answering off the API.
    pub async fn register(
        &self,
        td: &Value,
        ttl: Option<Duration>,
    ) -> Result<Registered, DirectoryError> {
        let body = registration_body(td, ttl);
        let bytes = serde_json::to_vec(&body).map_err(|error| DirectoryError::Invalid {
            url: self.base.to_string(),
            reason: format!("the description cannot be serialised: {error}"),
        })?;
        match body.get("id").and_then(Value::as_str) {
            Some(id) => {
                let url = self.thing_url(id)?;
                let answer = self
                    .request
                    .send(Method::PUT, &url, Some(("application/td+json", bytes)))
                    .await?;
                Ok(Registered {
                    id: id.to_owned(),
                    created: answer.status == 201,
                })
            }
            None => {
                let url = self.join("things")?;
                let answer = self
                    .request
                    .send(Method::POST, &url, Some(("application/td+json", bytes)))
                    .await?;
                let id = answer.location_id(&url)?;
                Ok(Registered { id, created: true })
            }
        }
    }

    /// Refreshes the entry `id` with an empty merge-patch (`PATCH /things/{id}`, `{}`): the
    /// directory computes `expires` again from the entry's `ttl`.
    ///
    /// # Errors
    /// As [`Directory::register`]; `Status` 404 when the entry is gone (expired).
    pub async fn refresh(&self, id: &str) -> Result<(), DirectoryError> {
        let url = self.thing_url(id)?;
        self.request
            .send(Method::PATCH, &url, Some((MERGE_PATCH, b"{}".to_vec())))
            .await
            .map(drop)
    }

    /// Removes the entry `id` (`DELETE /things/{id}`, 204).
    ///
    /// # Errors
    /// As [`Directory::register`]; `Status` 404 when there is no such entry.
    pub async fn deregister(&self, id: &str) -> Result<(), DirectoryError> {
        let url = self.thing_url(id)?;
        self.request
            .send(Method::DELETE, &url, None)
            .await
            .map(drop)
    }

    /// The entry `id`, enriched by the directory (`registration`: `created`, `modified`,
    /// `expires`, `ttl`).
    ///
    /// # Errors
    /// As [`Directory::register`]; `Status` 404 when there is no such entry; `Invalid`
    /// when the answer is not a JSON object.
    pub async fn get(&self, id: &str) -> Result<Value, DirectoryError> {
        let url = self.thing_url(id)?;
        let answer = self.request.send(Method::GET, &url, None).await?;
        let value = answer.json(&url)?;
        if !value.is_object() {
            return Err(DirectoryError::Invalid {
                url: url.to_string(),
                reason: "the answer is not a JSON object (a Thing Description)".to_owned(),
            });
        }
        Ok(value)
    }

    /// Every entry (`GET /things`), following `Link: <…>; rel="next"` page after page up to
    /// [`DirectoryClientLimits::max_pages`], on the directory's own origin only, reading at
    /// most [`DirectoryClientLimits::max_listing_bytes`] and
    /// [`DirectoryClientLimits::max_listing_items`] over all its pages.
    ///
    /// # Errors
    /// As [`Directory::register`]; [`DirectoryError::Pages`] for a listing too long or
    /// going round in circles, [`DirectoryError::ListingTooLarge`] for one too large in
    /// total, [`DirectoryError::ForeignLink`] for a next page elsewhere.
    pub async fn list(&self) -> Result<Vec<Value>, DirectoryError> {
        let first = self.join("things")?;
        let limits = self.request.limits;
        let mut seen = vec![first.clone()];
        let mut url = first.clone();
        let mut things = Vec::new();
        let mut bytes = 0_usize;
        loop {
            let answer = self.request.send(Method::GET, &url, None).await?;
            bytes = bytes.saturating_add(answer.body.len());
            if bytes > limits.max_listing_bytes {
                return Err(DirectoryError::ListingTooLarge {
                    url: first.to_string(),
                    limit: "max_listing_bytes",
                    value: limits.max_listing_bytes,
                });
            }
            things.extend(array_of(answer.json(&url)?, &url)?);
            if things.len() > limits.max_listing_items {
                return Err(DirectoryError::ListingTooLarge {
                    url: first.to_string(),
                    limit: "max_listing_items",
                    value: limits.max_listing_items,
                });
            }
            let Some(next) = answer.next_link(&url)? else {
                return Ok(things);
            };
            if next.origin() != self.base.origin() {
                return Err(DirectoryError::ForeignLink {
                    url: url.to_string(),
                    link: next.to_string(),
                });
            }
            if seen.contains(&next) {
                return Err(DirectoryError::Pages {
                    url: first.to_string(),
                    reason: "links back to a page it already gave".to_owned(),
                });
            }
            if seen.len() >= self.request.limits.max_pages {
                return Err(DirectoryError::Pages {
                    url: first.to_string(),
                    reason: format!("has more than {} pages", self.request.limits.max_pages),
                });
            }
            seen.push(next.clone());
            url = next;
        }
    }

    /// The entries a JSONPath query (RFC 9535) selects (`GET /search/jsonpath?query=…`): the
    /// nodes it selects, as the directory answers them (a JSON array).
    ///
    /// # Errors
    /// As [`Directory::register`]; `Status` 400 with problem details for a query the
    /// directory refuses.
    pub async fn search_jsonpath(&self, query: &str) -> Result<Vec<Value>, DirectoryError> {
        let mut url = self.join("search/jsonpath")?;
        url.query_pairs_mut().append_pair("query", query);
        let answer = self.request.send(Method::GET, &url, None).await?;
        array_of(answer.json(&url)?, &url)
    }

    /// The descriptions of the agents a capability query matches
    /// (`GET /search/capability?…`), in the directory's order.
    ///
    /// # Errors
    /// As [`Directory::register`]; [`DirectoryError::Url`] for a query with no criterion.
    pub async fn search(&self, query: &CapabilityQuery) -> Result<Vec<Value>, DirectoryError> {
        if query.is_empty() {
            return Err(DirectoryError::Url {
                url: self.base.to_string(),
                reason: "a capability search needs at least one criterion".to_owned(),
            });
        }
        let mut url = self.join("search/capability")?;
        url.query_pairs_mut().extend_pairs(query.pairs());
        let answer = self.request.send(Method::GET, &url, None).await?;
        array_of(answer.json(&url)?, &url)
    }

    /// `things/{id}` under the base, the id percent-encoded as one path segment.
    fn thing_url(&self, id: &str) -> Result<Url, DirectoryError> {
        let mut url = self.join("things/")?;
        url.path_segments_mut()
            .map_err(|()| DirectoryError::Url {
                url: self.base.to_string(),
                reason: "cannot be a base".to_owned(),
            })?
            .pop_if_empty()
            .push(id);
        Ok(url)
    }

    fn join(&self, path: &str) -> Result<Url, DirectoryError> {
        self.base.join(path).map_err(|error| DirectoryError::Url {
            url: self.base.to_string(),
            reason: error.to_string(),
        })
    }
}

/// The directory's base URL, ending in `/` so that `things` joins under it.
fn base_url(url: &str) -> Result<Url, DirectoryError> {
    let refuse = |reason: String| DirectoryError::Url {
        url: url.to_owned(),
        reason,
    };
    let mut parsed = Url::parse(url).map_err(|error| refuse(error.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(refuse("not an http:// or https:// URL".to_owned()));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(refuse("has no host".to_owned()));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(refuse("has a query or a fragment".to_owned()));
    }
    if !parsed.path().ends_with('/') {
        let path = format!("{}/", parsed.path());
        parsed.set_path(&path);
    }
    Ok(parsed)
}

/// `td` as registered: with a `ttl`, the discovery context added to `@context` (once) and
/// `registration: {ttl}` (whole seconds, at least 1); a client's `expires` is dropped (the
/// directory computes it).
fn registration_body(td: &Value, ttl: Option<Duration>) -> Value {
    let mut body = td.clone();
    let (Some(ttl), Some(object)) = (ttl, body.as_object_mut()) else {
        return body;
    };
    let context = object
        .entry("@context")
        .or_insert_with(|| Value::String("https://www.w3.org/2022/wot/td/v1.1".to_owned()));
    let has = |value: &Value| value.as_str() == Some(DISCOVERY_CONTEXT);
    match context {
        Value::Array(items) if !items.iter().any(has) => {
            items.push(Value::String(DISCOVERY_CONTEXT.to_owned()));
        }
        Value::String(_) if !has(context) => {
            let first = context.take();
            *context = Value::Array(vec![first, Value::String(DISCOVERY_CONTEXT.to_owned())]);
        }
        _ => {}
    }
    object.insert(
        "registration".to_owned(),
        serde_json::json!({ "ttl": ttl.as_secs().max(1) }),
    );
    body
}

/// The members of a JSON array answer (a listing's page or a search's results); a
/// `ThingCollection` (`format=collection`) gives its `members`.
fn array_of(value: Value, url: &Url) -> Result<Vec<Value>, DirectoryError> {
    match value {
        Value::Array(items) => Ok(items),
        Value::Object(mut object) => match object.remove("members") {
            Some(Value::Array(items)) => Ok(items),
            _ => Err(DirectoryError::Invalid {
                url: url.to_string(),
                reason: "the answer is neither a JSON array nor a collection with `members`"
                    .to_owned(),
            }),
        },
        _ => Err(DirectoryError::Invalid {
            url: url.to_string(),
            reason: "the answer is not a JSON array".to_owned(),
        }),
    }
}

impl Answer {
    /// The id of the entry a `POST` created, from `Location` (`/things/{id}`, relative or
    /// absolute).
    fn location_id(&self, url: &Url) -> Result<String, DirectoryError> {
        let invalid = |reason: &str| DirectoryError::Invalid {
            url: url.to_string(),
            reason: reason.to_owned(),
        };
        let location = self
            .location
            .as_deref()
            .ok_or_else(|| invalid("a 201 without `Location`"))?;
        let target = url
            .join(location)
            .map_err(|_| invalid("a `Location` that is not a URL"))?;
        let id = target
            .path_segments()
            .and_then(|mut segments| segments.next_back())
            .filter(|segment| !segment.is_empty())
            .ok_or_else(|| invalid("a `Location` without an id"))?;
        percent_encoding_decode(id).ok_or_else(|| invalid("a `Location` id that is not UTF-8"))
    }
}

/// A percent-decoded path segment.
fn percent_encoding_decode(segment: &str) -> Option<String> {
    url::form_urlencoded::parse(format!("x={}", segment.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, value)| value.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_url_is_checked_and_made_a_directory() {
        let directory = Directory::new("http://127.0.0.1:8081/tdd").expect("valid");
        assert_eq!(directory.url(), "http://127.0.0.1:8081/tdd/");
        assert_eq!(
            directory.thing_url("urn:uuid:1/2 3").expect("url").as_str(),
            "http://127.0.0.1:8081/tdd/things/urn:uuid:1%2F2%203"
        );
        for bad in ["ftp://x/", "not a url", "http://x/?q=1"] {
            assert!(matches!(
                Directory::new(bad),
                Err(DirectoryError::Url { .. })
            ));
        }
    }

    #[test]
    fn a_registration_carries_the_ttl_and_the_discovery_context() {
        let td = serde_json::json!({
            "@context": "https://www.w3.org/2022/wot/td/v1.1",
            "id": "urn:x",
            "title": "T",
        });
        let body = registration_body(&td, Some(Duration::from_secs(60)));
        assert_eq!(body["registration"]["ttl"], 60);
        assert_eq!(body["@context"][1], DISCOVERY_CONTEXT);
        let again = registration_body(&body, Some(Duration::from_secs(60)));
        assert_eq!(again["@context"].as_array().map(Vec::len), Some(2));
        assert_eq!(registration_body(&td, None), td);
    }

    #[test]
    fn a_capability_query_names_its_criteria() {
        let query = CapabilityQuery {
            input: Some("productId".into()),
            protocol: Some("ab".repeat(32)),
            ..CapabilityQuery::action("getProductInfo")
        };
        let pairs: Vec<_> = query.pairs().collect();
        let hash = "ab".repeat(32);
        assert_eq!(
            pairs,
            [
                ("action", "getProductInfo"),
                ("input", "productId"),
                ("consensus-hash", hash.as_str())
            ]
        );
        let uri = CapabilityQuery {
            protocol: Some("https://protocols.example/p/1".into()),
            ..CapabilityQuery::default()
        };
        assert_eq!(
            uri.pairs().collect::<Vec<_>>(),
            [("consensus", "https://protocols.example/p/1")]
        );
        assert!(CapabilityQuery::default().is_empty());
        let field = CapabilityQuery {
            field: Some("x".into()),
            ..CapabilityQuery::default()
        };
        assert!(!field.is_empty());
        assert_eq!(field.pairs().collect::<Vec<_>>(), [("field", "x")]);
    }

    #[test]
    fn a_location_gives_the_id() {
        let url = Url::parse("http://d/things").expect("url");
        let answer = Answer {
            status: 201,
            body: Vec::new(),
            location: Some("/things/urn:uuid:ab%2Fc".to_owned()),
            links: Vec::new(),
        };
        assert_eq!(answer.location_id(&url).expect("id"), "urn:uuid:ab/c");
    }
}
