//! The Things API: `GET`/`HEAD /things` (the listing, paged), `POST /things`, and
//! `GET`/`PUT`/`PATCH`/`DELETE /things/{id}`.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use concord_directory::{DirectoryError, ListFormat, ListQuery, Listing, Registrant};

use super::request::{self, admit_write, answer, json_answer, media_type, parameters, refused};
use super::DirectoryState;

/// The listing's path, as its links name it.
const THINGS: &str = "/things";
/// The media types a TD is sent as.
const TD_TYPES: &[&str] = &[
    "application/td+json",
    "application/json",
    "application/ld+json",
];
/// The one media type of a partial update (RFC 7396).
const MERGE_PATCH: &[&str] = &["application/merge-patch+json"];
/// How many fresh ids a `POST` draws before it gives up (a taken `urn:uuid` is a
/// conflict; a second one is as likely as a failing random source).
const ID_DRAWS: usize = 3;

/// `?offset=&limit=&format=` as written (numbers are checked here, to name them).
#[derive(Debug, Default)]
pub(super) struct Paging {
    offset: Option<String>,
    limit: Option<String>,
    format: Option<String>,
}

impl Paging {
    /// The paging parameters of a query string (others are ignored).
    pub(super) fn of(raw: Option<&str>) -> Self {
        let mut paging = Self::default();
        for (name, value) in parameters(raw) {
            match name.as_str() {
                "offset" => paging.offset = Some(value),
                "limit" => paging.limit = Some(value),
                "format" => paging.format = Some(value),
                _ => {}
            }
        }
        paging
    }

    pub(super) fn query(&self) -> Result<ListQuery, DirectoryError> {
        let number = |name: &str, value: &Option<String>| -> Result<Option<u64>, DirectoryError> {
            value
                .as_deref()
                .map(|text| {
                    text.parse::<u64>()
                        .map_err(|_| DirectoryError::InvalidPaging {
                            reason: format!(
                                "{name} must be a non-negative integer, found `{text}`"
                            ),
                        })
                })
                .transpose()
        };
        let format = match &self.format {
            Some(format) => ListFormat::parse(format)?,
            None => ListFormat::Array,
        };
        Ok(ListQuery::new(
            number("offset", &self.offset)?.unwrap_or(0),
            number("limit", &self.limit)?,
            format,
        ))
    }
}

/// `GET`/`HEAD /things` (tdd-things-list-method, tdd-things-list-resp): one page, with
/// the `next` and `canonical` links (tdd-things-list-pagination-header-nextlink,
/// tdd-things-list-pagination-header-canonicallink).
pub(super) async fn list(
    State(state): State<Arc<DirectoryState>>,
    RawQuery(raw): RawQuery,
) -> Response {
    let query = match Paging::of(raw.as_deref()).query() {
        Ok(query) => query,
        Err(error) => return refused(&error, THINGS),
    };
    let result = state
        .run(move |directory, now| directory.list(&query, now))
        .await;
    answer(result, THINGS, |listing| listing_answer(&listing))
}

/// A page with its links.
fn listing_answer(listing: &Listing) -> Response {
    let mut response = json_answer("application/ld+json", &listing.body(THINGS));
    let mut links = vec![format!(
        "<{THINGS}>; rel=\"canonical\"; etag=\"{}\"",
        listing.etag
    )];
    if let Some(next) = &listing.next {
        links.insert(
            0,
            format!("<{THINGS}?{}>; rel=\"next\"", next.to_query_string()),
        );
    }
    let headers = response.headers_mut();
    for link in links {
        if let Ok(value) = link.parse() {
            headers.append(header::LINK, value);
        }
    }
    response
}

/// `POST /things` (tdd-things-create-anonymous-td): 201 with `Location`
/// (tdd-things-create-anonymous-td-resp).
pub(super) async fn create(State(state): State<Arc<DirectoryState>>, request: Request) -> Response {
    let write = match admit_write(&state, request, &["createAnonymousThing"]).await {
        Ok(write) => write,
        Err(answer) => return answer,
    };
    if let Err(answer) = media_type(&write.headers, TD_TYPES, &write.path) {
        return answer.into_response();
    }
    let mut result = Err(request::Failed);
    for _ in 0..ID_DRAWS {
        let mut random = [0u8; 16];
        if getrandom::getrandom(&mut random).is_err() {
            break;
        }
        let (body, did, client) = (write.body.clone(), write.did.clone(), write.client.clone());
        result = state
            .run(move |directory, now| {
                let who = registrant(did.as_deref(), &client);
                directory.create(&body, random, &who, now)
            })
            .await;
        if !matches!(result, Ok(Err(DirectoryError::Conflict { .. }))) {
            break;
        }
    }
    // Woken whether the creation was written or refused: a refusal at a bound may have
    // purged expired TDs first, whose `thing_deleted` events are recorded.
    if result.is_ok() {
        state.hub.wake();
    }
    answer(result, &write.path, |id| {
        let location = format!("{THINGS}/{id}");
        (StatusCode::CREATED, [(header::LOCATION, location)]).into_response()
    })
}

/// `GET /things/{id}` (tdd-things-retrieve): 200 `application/td+json`
/// (tdd-things-retrieve-resp-content-type).
pub(super) async fn retrieve(
    State(state): State<Arc<DirectoryState>>,
    Path(id): Path<String>,
    uri: Uri,
) -> Response {
    let result = state
        .run(move |directory, now| directory.get(&id, now))
        .await;
    answer(result, uri.path(), |td| {
        json_answer("application/td+json", &td)
    })
}

/// `PUT /things/{id}` (tdd-things-create-known-td, tdd-things-update): 201 when it
/// registered the TD (tdd-things-create-known-td-resp), 204 when it replaced it
/// (tdd-things-update-resp).
pub(super) async fn put(
    State(state): State<Arc<DirectoryState>>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    let write = match admit_write(&state, request, &["createThing", "updateThing"]).await {
        Ok(write) => write,
        Err(answer) => return answer,
    };
    if let Err(answer) = media_type(&write.headers, TD_TYPES, &write.path) {
        return answer.into_response();
    }
    let (body, did, client) = (write.body, write.did, write.client);
    let result = state
        .run(move |directory, now| {
            let who = registrant(did.as_deref(), &client);
            directory.put(&id, &body, &who, now)
        })
        .await;
    written(&state, result, &write.path, |outcome| {
        StatusCode::from_u16(outcome.status())
            .unwrap_or(StatusCode::NO_CONTENT)
            .into_response()
    })
}

/// `PATCH /things/{id}` (tdd-things-update-partial): `application/merge-patch+json` only
/// (tdd-things-update-partial-contenttype), the result validated
/// (tdd-things-update-partial-partialtd); 204 (tdd-things-update-partial-resp).
pub(super) async fn patch(
    State(state): State<Arc<DirectoryState>>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    let write = match admit_write(&state, request, &["partiallyUpdateThing"]).await {
        Ok(write) => write,
        Err(answer) => return answer,
    };
    if write.headers.get(header::CONTENT_TYPE).is_none() {
        return media_type_missing(&write.path);
    }
    if let Err(answer) = media_type(&write.headers, MERGE_PATCH, &write.path) {
        return answer.into_response();
    }
    let (body, did, client) = (write.body, write.did, write.client);
    let result = state
        .run(move |directory, now| {
            let who = registrant(did.as_deref(), &client);
            directory.patch(&id, &body, &who, now)
        })
        .await;
    written(&state, result, &write.path, |()| {
        StatusCode::NO_CONTENT.into_response()
    })
}

/// `DELETE /things/{id}` (tdd-things-delete): 204 (tdd-things-delete-resp).
pub(super) async fn delete(
    State(state): State<Arc<DirectoryState>>,
    Path(id): Path<String>,
    request: Request,
) -> Response {
    let write = match admit_write(&state, request, &["deleteThing"]).await {
        Ok(write) => write,
        Err(answer) => return answer,
    };
    let (did, client) = (write.did, write.client);
    let result = state
        .run(move |directory, now| {
            let who = registrant(did.as_deref(), &client);
            directory.delete(&id, &who, now)
        })
        .await;
    written(&state, result, &write.path, |()| {
        StatusCode::NO_CONTENT.into_response()
    })
}

/// A write's answer; the notifications are woken whenever the rule ran, written or
/// refused: a write refused at a bound (429, 503) or a `PUT` over an expired TD may have
/// purged expired TDs first, and their `thing_deleted` events are not to wait for the
/// next write or purge (a wake with nothing new reads nothing).
fn written<T>(
    state: &DirectoryState,
    result: Result<Result<T, DirectoryError>, request::Failed>,
    instance: &str,
    done: impl FnOnce(T) -> Response,
) -> Response {
    if result.is_ok() {
        state.hub.wake();
    }
    answer(result, instance, done)
}

/// Who writes: the DID proved, else the client address alone.
fn registrant<'a>(did: Option<&'a str>, client: &'a str) -> Registrant<'a> {
    match did {
        Some(did) => Registrant::did(did, client),
        None => Registrant::client(client),
    }
}

/// 415: a merge patch must say it is one.
fn media_type_missing(instance: &str) -> Response {
    crate::binding::ProblemResponse::new(
        415,
        "Unsupported media type",
        "a partial update needs Content-Type: application/merge-patch+json",
    )
    .with_type("urn:concord:http:unsupported-media-type")
    .with_header("accept", MERGE_PATCH[0])
    .with_instance(instance)
    .into_response()
}
