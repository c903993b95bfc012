//! `GET /.well-known/agent-descriptions` on a directory (ANP-08): the registered agents
//! ANP peers can reach, one item per registered description of an ANP agent (a Concord
//! agent with a DID: `{"@type": "ad:AgentDescription", "name", "@id": <its ad.json>}`),
//! a page of the directory's listing at a time (`offset` and `limit` as `/things` takes
//! them, at most `max_page_size` descriptions), with `next` while more remain. A page
//! leaves out the registered Things that are no ANP agent, so it may hold fewer items than
//! its `limit`; `next` still follows the listing. The body carries a strong `ETag`; an
//! `If-None-Match` naming it gets 304.

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use concord_directory::{ListFormat, ListQuery, Listing};

use super::request::{answer, refused};
use super::things::Paging;
use super::DirectoryState;
use crate::binding::wellknown::anp::{self, AGENT_DESCRIPTIONS_PATH};
use crate::binding::wellknown::{Document, JSON_LD};

/// The collection page of the directory's listing.
pub(super) async fn list(
    State(state): State<Arc<DirectoryState>>,
    RawQuery(raw): RawQuery,
    request: HeaderMap,
) -> Response {
    let mut query = match Paging::of(raw.as_deref()).query() {
        Ok(query) => query,
        Err(error) => return refused(&error, AGENT_DESCRIPTIONS_PATH),
    };
    query.format = ListFormat::Array;
    let result = state
        .run(move |directory, now| directory.list(&query, now))
        .await;
    let url = state.http.site.http_url(AGENT_DESCRIPTIONS_PATH);
    answer(
        result,
        AGENT_DESCRIPTIONS_PATH,
        |listing| match Document::new(&page(&url, &listing), JSON_LD) {
            Ok(document) => document.answer(&request),
            Err(error) => {
                tracing::error!(%error, "cannot write the agent descriptions page");
                super::request::Failed.answer(AGENT_DESCRIPTIONS_PATH)
            }
        },
    )
}

/// `listing` as an ANP-08 `CollectionPage` at `url` (with this page's query).
fn page(url: &str, listing: &Listing) -> serde_json::Value {
    let this = ListQuery::new(listing.offset, Some(listing.limit), ListFormat::Array);
    let items = listing
        .things
        .iter()
        .filter_map(anp::collection_item)
        .collect();
    let next = listing
        .next
        .map(|next| format!("{url}?{}", next.to_query_string()));
    anp::collection_page(
        &format!("{url}?{}", this.to_query_string()),
        items,
        next.as_deref(),
    )
}
