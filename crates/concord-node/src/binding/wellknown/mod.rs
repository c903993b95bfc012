//! The discovery documents every agent serves beside its description, each derived from
//! the description it serves and rebuilt only when that changes:
//!
//! - `GET /.well-known/agent-descriptions`: ANP-08's `CollectionPage`, one item naming the
//!   agent's `ad.json` when it is an ANP agent (it has a DID), none otherwise (`anp.rs`);
//!   on a node serving a directory, the directory's binding answers it with the registered
//!   agents instead (`binding/directory/agents.rs`);
//! - `GET /ad.json`: the ANP-07 agent description (404 without a DID);
//! - `GET /.well-known/agent-card.json`: the A2A v1.0 agent card (`a2a.rs`).
//!
//! HEAD too; each answer carries a strong `ETag` (`etag.rs`), and a request whose
//! `If-None-Match` names it gets 304. A binding of the node's own with routes and no forms.

pub(crate) mod a2a;
pub(crate) mod anp;
mod etag;
pub(crate) mod td;

use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use concord_describe::Form;
use serde_json::Value;

use super::{Affordance, Binding, ProblemResponse, Site};
use crate::describe::DescriptionHandle;
use crate::node::Shared;

/// Media type of ANP's JSON-LD collection.
pub(crate) const JSON_LD: &str = "application/ld+json";
/// Media type of the agent description and the agent card.
const JSON: &str = "application/json";

/// The discovery documents' binding: routes over the node's description, no forms.
pub(crate) struct WellKnown {
    shared: Arc<Shared>,
    description: DescriptionHandle,
}

impl WellKnown {
    pub(crate) fn new(shared: Arc<Shared>, description: DescriptionHandle) -> Self {
        Self {
            shared,
            description,
        }
    }
}

impl Binding for WellKnown {
    fn name(&self) -> &str {
        "discovery documents"
    }

    fn forms(&self, _site: &Site, _affordance: Affordance<'_>) -> Vec<Form> {
        Vec::new()
    }

    fn routes(&self, site: &Site) -> Router {
        let documents = Arc::new(Documents {
            shared: Arc::clone(&self.shared),
            description: self.description.clone(),
            page_url: site.http_url(anp::AGENT_DESCRIPTIONS_PATH),
            built: Mutex::new(None),
        });
        let routes = Router::new()
            .route(anp::AD_PATH, get(serve_ad))
            .route(a2a::AGENT_CARD_PATH, get(serve_card));
        // A directory lists its registered agents there instead (`directory/agents.rs`).
        let routes = if self.shared.directory.is_some() {
            routes
        } else {
            routes.route(anp::AGENT_DESCRIPTIONS_PATH, get(serve_collection))
        };
        routes.with_state(documents)
    }
}

/// What the routes serve from: the description, and the documents derived from its last
/// version.
struct Documents {
    shared: Arc<Shared>,
    description: DescriptionHandle,
    /// The collection's own URL.
    page_url: String,
    built: Mutex<Option<Arc<Derived>>>,
}

/// The documents derived from one version of the description.
struct Derived {
    /// The description they were derived from.
    source: Bytes,
    collection: Document,
    /// `None` when the agent has no DID.
    ad: Option<Document>,
    card: Document,
}

/// One document as served: its bytes and entity tag.
pub(crate) struct Document {
    body: Bytes,
    etag: HeaderValue,
    media_type: &'static str,
}

impl Document {
    /// `value` as served, as `media_type`, with its entity tag.
    pub(crate) fn new(value: &Value, media_type: &'static str) -> Result<Self, serde_json::Error> {
        let body = Bytes::from(serde_json::to_vec_pretty(value)?);
        Ok(Self {
            etag: etag::of(&body),
            body,
            media_type,
        })
    }

    /// 200 with the document, or 304 when the request's `If-None-Match` names it.
    pub(crate) fn answer(&self, request: &HeaderMap) -> Response {
        let cache = (header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        if etag::matches(request, &self.etag) {
            return (
                StatusCode::NOT_MODIFIED,
                [(header::ETAG, self.etag.clone()), cache],
            )
                .into_response();
        }
        (
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(self.media_type),
                ),
                (header::ETAG, self.etag.clone()),
                cache,
            ],
            self.body.clone(),
        )
            .into_response()
    }
}

impl Documents {
    /// The documents of the description as served now, derived again only when it changed.
    async fn current(&self) -> Result<Arc<Derived>, Response> {
        let source = match self.description.bytes(&self.shared).await {
            Some(Ok(bytes)) => bytes,
            Some(Err(error)) => {
                tracing::error!(%error, "cannot build our description");
                return Err(failure("the node could not build its description"));
            }
            None => {
                return Err(
                    ProblemResponse::new(503, "Shutting down", "the node is shutting down")
                        .into_response(),
                )
            }
        };
        let mut built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(derived) = built.as_ref().filter(|derived| derived.source == source) {
            return Ok(Arc::clone(derived));
        }
        let derived = Arc::new(self.derive(source).map_err(|error| {
            tracing::error!(%error, "cannot write our discovery documents");
            failure("the node could not write its discovery documents")
        })?);
        *built = Some(Arc::clone(&derived));
        Ok(derived)
    }

    fn derive(&self, source: Bytes) -> Result<Derived, serde_json::Error> {
        let td: Value = serde_json::from_slice(&source)?;
        let owner = self.shared.owner.as_ref();
        let items = anp::collection_item(&td).into_iter().collect();
        let collection = anp::collection_page(&self.page_url, items, None);
        Ok(Derived {
            collection: Document::new(&collection, JSON_LD)?,
            ad: anp::ad_document(&td, owner)
                .map(|ad| Document::new(&ad, JSON))
                .transpose()?,
            card: Document::new(&a2a::agent_card(&td, owner), JSON)?,
            source,
        })
    }
}

/// 500 as a problem, naming what failed (the cause is logged, not answered).
fn failure(detail: &str) -> Response {
    ProblemResponse::new(500, "Discovery documents unavailable", detail).into_response()
}

async fn serve_collection(State(documents): State<Arc<Documents>>, request: HeaderMap) -> Response {
    match documents.current().await {
        Ok(derived) => derived.collection.answer(&request),
        Err(refused) => refused,
    }
}

async fn serve_ad(State(documents): State<Arc<Documents>>, request: HeaderMap) -> Response {
    match documents.current().await {
        Ok(derived) => match &derived.ad {
            Some(ad) => ad.answer(&request),
            None => ProblemResponse::new(
                404,
                "No agent description",
                "this agent has no DID: it publishes no ANP agent description",
            )
            .into_response(),
        },
        Err(refused) => refused,
    }
}

async fn serve_card(State(documents): State<Arc<Documents>>, request: HeaderMap) -> Response {
    match documents.current().await {
        Ok(derived) => derived.card.answer(&request),
        Err(refused) => refused,
    }
}
