//! Search: `GET /search/jsonpath?query=` (RFC 9535 over the TDs as one array, the W3C
//! spec's informative JSONPath API, tdd-search-jsonpath) and `GET /search/capability`,
//! Concord's "who can do this": every query parameter is a term, and the answer holds the
//! TDs matching all of them.
//!
//! | parameter | matches a TD with |
//! |---|---|
//! | `action=NAME` | an action `NAME` |
//! | `property=NAME` | a property `NAME` |
//! | `event=NAME` | an event `NAME` |
//! | `input=FIELD` | an action whose input schema has a field `FIELD` (at any depth) |
//! | `output=FIELD` | an action whose output schema has a field `FIELD` |
//! | `field=FIELD` | a field of an action's input or output schema, either side (`CapabilityKind::Field`) |
//! | `lmos=TERM` or `lmos=TERM=VALUE` | an `lmos:` term (with that scalar value) |
//! | `consensus=URI` | a consensus protocol with that URI |
//! | `consensus-hash=HEX` | a consensus protocol with that hash |
//! | `did=DID` | the agent's DID (`concord:metaProtocol`'s `concord:did`) |
//! | `type=TYPE` | `TYPE` in its `@type` |
//!
//! A JSONPath search takes a turn first: at most `Limits::directory_searches` run at once
//! over the node and `Limits::directory_searches_per_address` for one client address; one
//! more is refused at once, 429 (its address's share) or 503 (the node's), with
//! `Retry-After`.
//!
//! A parameter may repeat (`action=a&action=b`: both). The answer (200,
//! `application/ld+json`) is `{"@context", "@type": "ThingCollection", "total", "members",
//! "truncated"}`: at most `max_capability_results` TDs in code-point order of id,
//! `truncated: true` when more matched, and then no `total` (the number of matches is not
//! counted past the cut). No term, more than `max_capability_terms`, an
//! empty one, an unknown parameter or one over `max_query_bytes`: 400.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, RawQuery, State};
use axum::http::Uri;
use axum::response::Response;
use concord_directory::{CapabilityKind, CapabilityQuery, DirectoryError, DISCOVERY_CONTEXT};
use serde_json::{json, Value};

use super::request::{answer, client_of, json_answer, parameters, refused};
use super::DirectoryState;

/// `GET /search/jsonpath?query=` (tdd-search-jsonpath-method, tdd-search-jsonpath-parameter,
/// tdd-search-jsonpath-response): 200 `application/json`, the nodes selected.
pub(super) async fn jsonpath(
    State(state): State<Arc<DirectoryState>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    RawQuery(raw): RawQuery,
    uri: Uri,
) -> Response {
    let instance = uri.path();
    let query = match parameters(raw.as_deref())
        .into_iter()
        .find(|(name, _)| name == "query")
    {
        Some((_, query)) => query,
        None => {
            let error = DirectoryError::InvalidQuery {
                reason: "the `query` parameter (a JSONPath expression) is missing".to_owned(),
            };
            return refused(&error, instance);
        }
    };
    let turn = match state.searches.enter(client_of(remote)) {
        Ok(turn) => turn,
        Err(busy) => return busy.answer(instance),
    };
    // The turn goes with the search: held until it ends, even if the caller went away.
    let result = state
        .run(move |directory, now| {
            let started = Instant::now();
            let found = directory.search_jsonpath(&query, now, &mut || started.elapsed());
            drop(turn);
            found
        })
        .await;
    answer(result, instance, |nodes| {
        json_answer("application/json", &Value::Array(nodes))
    })
}

/// `GET /search/capability?…`: the TDs holding every term.
pub(super) async fn capability(
    State(state): State<Arc<DirectoryState>>,
    RawQuery(raw): RawQuery,
    uri: Uri,
) -> Response {
    let instance = uri.path();
    let query = match capability_query(raw.as_deref()) {
        Ok(query) => query,
        Err(error) => return refused(&error, instance),
    };
    let result = state
        .run(move |directory, now| directory.search_capabilities(&query, now))
        .await;
    answer(result, instance, |matches| {
        let mut body = json!({
            "@context": DISCOVERY_CONTEXT,
            "@type": "ThingCollection",
            "members": matches.things,
            "truncated": matches.truncated,
        });
        // `total` is the number of matches: known only when the answer holds them all.
        if !matches.truncated {
            body["total"] = json!(matches.things.len());
        }
        json_answer("application/ld+json", &body)
    })
}

/// The terms of a capability search's query string.
fn capability_query(raw: Option<&str>) -> Result<CapabilityQuery, DirectoryError> {
    let mut query = CapabilityQuery::new();
    for (name, value) in parameters(raw) {
        let kind =
            CapabilityKind::from_name(&name).ok_or_else(|| DirectoryError::InvalidQuery {
                reason: format!(
                    "`{name}` is not a capability term: action, property, event, input, \
                     output, field (input or output), lmos, consensus, consensus-hash, did or \
                     type"
                ),
            })?;
        query = query.and(kind, value);
    }
    Ok(query)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capability_query_reads_every_term_and_refuses_an_unknown_one() {
        let query = capability_query(Some("action=getWeather&field=city&did=did%3Awba%3Ax"))
            .expect("a query");
        assert_eq!(
            query,
            CapabilityQuery::new()
                .and(CapabilityKind::Action, "getWeather")
                .and(CapabilityKind::Field, "city")
                .and(CapabilityKind::Did, "did:wba:x")
        );
        let refused = capability_query(Some("colour=red")).expect_err("refused");
        assert!(refused.to_string().contains("`colour`"), "{refused}");
    }
}
