//! The directory client against a hostile or failing directory: a scripted HTTP server on
//! 127.0.0.2 for the exact failure cases (a huge answer, an endless or looping listing, a
//! next page elsewhere, a silent server, problem details, a directory that is away while an
//! agent registers). The registration tests against the real directory are in
//! `directory_registration.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use concord_node::axum::body::Body;
use concord_node::axum::extract::State;
use concord_node::axum::http::{header, StatusCode, Uri};
use concord_node::axum::response::{IntoResponse, Response};
use concord_node::axum::routing::{get, put};
use concord_node::axum::Router;
use concord_node::{
    Directory, DirectoryClientLimits, DirectoryError, Node, RegistrationSettings, RegistrationState,
};
use serde_json::json;

use crate::support::{build, catalogue, quick_limits};

/// Serves `router` on 127.0.0.2 (the directory is the stranger here); its base URL.
async fn scripted(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = concord_node::axum::serve(listener, router).await;
    });
    format!("http://{addr}/")
}

/// A JSON answer (the node's axum has no `Json`).
fn json_body(value: serde_json::Value) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
}

fn limits(change: impl FnOnce(&mut DirectoryClientLimits)) -> DirectoryClientLimits {
    let mut limits = DirectoryClientLimits::default();
    change(&mut limits);
    limits
}

#[tokio::test]
async fn a_huge_answer_is_cut_at_the_limit() {
    // An endless body with no length, and one that announces a huge length.
    let endless = || async {
        let chunk = bytes::Bytes::from(vec![b' '; 64 * 1024]);
        let stream =
            futures_util::stream::repeat_with(move || Ok::<_, std::io::Error>(chunk.clone()));
        Response::new(Body::from_stream(stream))
    };
    let announced = || async {
        (
            [(header::CONTENT_LENGTH, "10000000000")],
            Body::from_stream(futures_util::stream::pending::<
                Result<bytes::Bytes, std::io::Error>,
            >()),
        )
    };
    let base = scripted(
        Router::new()
            .route("/things", get(endless))
            .route("/things/{id}", get(announced)),
    )
    .await;
    let directory = Directory::new(&base)
        .unwrap()
        .with_limits(limits(|limits| limits.max_response_bytes = 1024 * 1024));
    let error = directory.list().await.unwrap_err();
    assert!(
        matches!(error, DirectoryError::TooLarge { limit, .. } if limit == 1024 * 1024),
        "{error}"
    );
    let error = directory.get("urn:x").await.unwrap_err();
    assert!(matches!(error, DirectoryError::TooLarge { .. }), "{error}");
    assert!(error.is_transient());
}

#[tokio::test]
async fn an_endless_link_chain_stops_at_max_pages() {
    let served = Arc::new(AtomicUsize::new(0));
    let page = |State(served): State<Arc<AtomicUsize>>, uri: Uri| async move {
        served.fetch_add(1, Ordering::SeqCst);
        let n: u64 = uri
            .query()
            .and_then(|query| query.strip_prefix("page="))
            .and_then(|page| page.parse().ok())
            .unwrap_or(0);
        (
            [(
                header::LINK,
                format!("</things?page={}>; rel=\"next\"", n + 1),
            )],
            json_body(json!([{"id": format!("urn:page:{n}"), "title": "T"}])),
        )
    };
    let base = scripted(
        Router::new()
            .route("/things", get(page))
            .with_state(Arc::clone(&served)),
    )
    .await;
    let directory = Directory::new(&base)
        .unwrap()
        .with_limits(limits(|limits| limits.max_pages = 5));
    let error = directory.list().await.unwrap_err();
    assert!(
        matches!(&error, DirectoryError::Pages { reason, .. } if reason.contains("more than 5 pages")),
        "{error}"
    );
    assert_eq!(
        served.load(Ordering::SeqCst),
        5,
        "no page past the limit was asked for"
    );
}

/// A hostile listing: endless pages (`?page=N`), each of `items` entries padded to about
/// `pad` bytes, every one within the per-page bound; counts the pages served.
async fn endless_listing(items: usize, pad: usize) -> (String, Arc<AtomicUsize>) {
    let served = Arc::new(AtomicUsize::new(0));
    let page = move |State(served): State<Arc<AtomicUsize>>, uri: Uri| async move {
        served.fetch_add(1, Ordering::SeqCst);
        let n: u64 = uri
            .query()
            .and_then(|query| query.strip_prefix("page="))
            .and_then(|page| page.parse().ok())
            .unwrap_or(0);
        let padding = "x".repeat(pad / items.max(1));
        let entries: Vec<_> = (0..items)
            .map(|i| json!({"id": format!("urn:page:{n}:{i}"), "title": padding}))
            .collect();
        (
            [(
                header::LINK,
                format!("</things?page={}>; rel=\"next\"", n + 1),
            )],
            json_body(json!(entries)),
        )
    };
    let base = scripted(
        Router::new()
            .route("/things", get(page))
            .with_state(Arc::clone(&served)),
    )
    .await;
    (base, served)
}

#[tokio::test]
async fn a_listing_is_bounded_in_total_bytes_and_entries() {
    // Pages of about 60 KiB, each within a 64 KiB per-page bound: the total stops the read
    // at 256 KiB, long before max_pages (100) would.
    let (base, served) = endless_listing(1, 60 * 1024).await;
    let directory = Directory::new(&base).unwrap().with_limits(limits(|limits| {
        limits.max_response_bytes = 64 * 1024;
        limits.max_listing_bytes = 256 * 1024;
    }));
    let error = directory.list().await.unwrap_err();
    assert!(
        matches!(
            &error,
            DirectoryError::ListingTooLarge { limit: "max_listing_bytes", value, .. }
                if *value == 256 * 1024
        ),
        "{error}"
    );
    assert_eq!(served.load(Ordering::SeqCst), 5, "no page past the total");
    assert!(!error.is_transient());

    // Small pages of 10 entries: the entry bound stops the read at the third page.
    let (base, served) = endless_listing(10, 100).await;
    let directory = Directory::new(&base)
        .unwrap()
        .with_limits(limits(|limits| limits.max_listing_items = 25));
    let error = directory.list().await.unwrap_err();
    assert!(
        matches!(
            &error,
            DirectoryError::ListingTooLarge {
                limit: "max_listing_items",
                value: 25,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(served.load(Ordering::SeqCst), 3, "no page past the total");
}

#[tokio::test]
async fn a_looping_or_foreign_next_link_is_not_followed() {
    let looping = || async {
        (
            [(header::LINK, "</things>; rel=\"next\"")],
            json_body(json!([])),
        )
    };
    let foreign = || async {
        (
            [(header::LINK, "<http://127.0.0.3:9/steal>; rel=\"next\"")],
            json_body(json!([])),
        )
    };
    let base = scripted(Router::new().route("/things", get(looping))).await;
    let error = Directory::new(&base).unwrap().list().await.unwrap_err();
    assert!(
        matches!(&error, DirectoryError::Pages { reason, .. } if reason.contains("links back")),
        "{error}"
    );
    let base = scripted(Router::new().route("/things", get(foreign))).await;
    let error = Directory::new(&base).unwrap().list().await.unwrap_err();
    assert!(
        matches!(&error, DirectoryError::ForeignLink { link, .. } if link.contains("127.0.0.3")),
        "{error}"
    );
}

#[tokio::test]
async fn a_silent_directory_times_out() {
    let silent = || async {
        tokio::time::sleep(Duration::from_secs(60)).await;
        StatusCode::OK
    };
    let base = scripted(Router::new().route("/things", get(silent))).await;
    let directory = Directory::new(&base)
        .unwrap()
        .with_limits(limits(|limits| limits.timeout = Duration::from_millis(300)));
    let error = tokio::time::timeout(Duration::from_secs(20), directory.list())
        .await
        .expect("the client's own timeout ends the request")
        .unwrap_err();
    assert!(matches!(error, DirectoryError::Timeout { .. }), "{error}");
    assert!(error.is_transient());
}

#[tokio::test]
async fn problem_details_are_read_into_the_error() {
    let invalid = || async {
        (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "application/problem+json")],
            (json!({
                "title": "Bad Request",
                "status": 400,
                "detail": "the Thing Description is invalid",
                "validationErrors": [{"field": "/title", "description": "required"}],
            })
            .to_string()),
        )
    };
    let base = scripted(Router::new().route("/things/{id}", put(invalid))).await;
    let directory = Directory::new(&base).unwrap();
    let error = directory
        .register(&json!({"id": "urn:x", "title": "T"}), None)
        .await
        .unwrap_err();
    assert_eq!(error.status(), Some(400));
    assert!(!error.is_transient());
    let problem = error.problem().expect("problem details");
    assert_eq!(problem.validation_errors[0].field, "/title");
    assert!(error.to_string().contains("/title: required"), "{error}");
}

#[tokio::test]
async fn an_agent_serves_while_its_directory_is_away_and_backs_off() {
    let attempts = Arc::new(AtomicUsize::new(0));
    let away = |State(attempts): State<Arc<AtomicUsize>>| async move {
        attempts.fetch_add(1, Ordering::SeqCst);
        (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
        )
            .into_response()
    };
    let base = scripted(
        Router::new()
            .route("/things/{id}", put(away))
            .with_state(Arc::clone(&attempts)),
    )
    .await;
    let mut settings = RegistrationSettings::with_ttl(Duration::from_secs(60));
    settings.first_retry = Duration::from_millis(100);
    settings.max_retry = Duration::from_secs(1);
    let agent = build(
        Node::builder("Product agent")
            .id("urn:uuid:7a0c5a4e-1b0e-4a52-9d8e-0c2b1f3e4d5a")
            .action(catalogue::action(), catalogue::answer)
            .limits(quick_limits())
            .register_with(base.clone())
            .registration(settings),
    );
    let server = agent.node.serve("127.0.0.1:0").await.unwrap();
    // It retries…
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let status = &server.registrations()[0];
        if status.failures >= 2 {
            assert_eq!(status.state, RegistrationState::Pending);
            assert!(
                status
                    .last_error
                    .as_deref()
                    .unwrap_or_default()
                    .contains("503"),
                "{status:?}"
            );
            assert!(status.next_attempt.is_some());
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{status:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // …and serves meanwhile.
    let requester = crate::support::requester();
    let connection = requester.connect(&server, "getProductInfo").await;
    let info = connection
        .call("getProductInfo", json!({"productId": "P12345"}))
        .await
        .unwrap();
    assert!(info.is_object());
    // A shutdown with nothing registered sends no DELETE (the router has no DELETE route,
    // which would answer 405: the shutdown does not wait on it either way).
    server.shutdown().await.unwrap();
    assert!(attempts.load(Ordering::SeqCst) >= 2);
}

#[tokio::test]
async fn a_refused_registration_gives_up() {
    let attempts = Arc::new(AtomicUsize::new(0));
    let refuse = |State(attempts): State<Arc<AtomicUsize>>| async move {
        attempts.fetch_add(1, Ordering::SeqCst);
        StatusCode::FORBIDDEN
    };
    let base = scripted(
        Router::new()
            .route("/things/{id}", put(refuse))
            .with_state(Arc::clone(&attempts)),
    )
    .await;
    let mut settings = RegistrationSettings::with_ttl(Duration::from_secs(60));
    settings.first_retry = Duration::from_millis(50);
    let agent = build(
        Node::builder("Product agent")
            .id("urn:uuid:7a0c5a4e-1b0e-4a52-9d8e-0c2b1f3e4d5b")
            .action(catalogue::action(), catalogue::answer)
            .limits(quick_limits())
            .register_with(base)
            .registration(settings),
    );
    let server = agent.node.serve("127.0.0.1:0").await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while server.registrations()[0].state != RegistrationState::GivenUp {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        1,
        "a refusal is not retried"
    );
    assert!(server.registrations()[0].next_attempt.is_none());
    server.shutdown().await.unwrap();
}

/// Waits (bounded) until the first registration of `server` is in `state`.
async fn wait_for_state(server: &concord_node::Server, state: RegistrationState) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while server.registrations()[0].state != state {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            server.registrations()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An agent with a DID (fresh keys) registering with `base`.
fn agent_with_did(base: String, id: Option<&str>) -> crate::support::Agent {
    let mut settings = RegistrationSettings::with_ttl(Duration::from_secs(60));
    settings.first_retry = Duration::from_millis(50);
    let mut builder = Node::builder("Product agent")
        .keys(concord_node::Keys::generate())
        .security(crate::support::loopback_security())
        .action(catalogue::action(), catalogue::answer)
        .limits(quick_limits())
        .register_with(base)
        .registration(settings);
    if let Some(id) = id {
        builder = builder.id(id);
    }
    build(builder)
}

#[tokio::test]
async fn a_directory_that_cannot_verify_the_did_gets_an_unsigned_registration() {
    // 401 to a signed registration (the challenge this agent cannot meet), 201 unsigned.
    let signed_seen = Arc::new(AtomicUsize::new(0));
    let register = |State(signed_seen): State<Arc<AtomicUsize>>,
                    headers: concord_node::axum::http::HeaderMap| async move {
        if headers.contains_key("signature-input") {
            signed_seen.fetch_add(1, Ordering::SeqCst);
            (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "DIDWba realm=\"directory\"")],
            )
                .into_response()
        } else {
            StatusCode::CREATED.into_response()
        }
    };
    let base = scripted(
        Router::new()
            .route("/things/{id}", put(register))
            .with_state(Arc::clone(&signed_seen)),
    )
    .await;
    let agent = agent_with_did(base, Some("urn:uuid:7a0c5a4e-1b0e-4a52-9d8e-0c2b1f3e4d5c"));
    let server = agent.node.serve("127.0.0.1:0").await.unwrap();
    wait_for_state(&server, RegistrationState::Registered).await;
    let status = &server.registrations()[0];
    assert!(!status.signed, "{status:?}");
    assert_eq!(
        signed_seen.load(Ordering::SeqCst),
        1,
        "signed once, then not"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_403_on_the_agents_did_named_entry_is_a_conflict() {
    let attempts = Arc::new(AtomicUsize::new(0));
    let refuse = |State(attempts): State<Arc<AtomicUsize>>| async move {
        attempts.fetch_add(1, Ordering::SeqCst);
        StatusCode::FORBIDDEN
    };
    let base = scripted(
        Router::new()
            .route("/things/{id}", put(refuse))
            .with_state(Arc::clone(&attempts)),
    )
    .await;
    // No `id`: the entry is named by the agent's DID.
    let agent = agent_with_did(base, None);
    let server = agent.node.serve("127.0.0.1:0").await.unwrap();
    wait_for_state(&server, RegistrationState::Conflict).await;
    let status = &server.registrations()[0];
    assert!(
        status
            .id
            .as_deref()
            .is_some_and(|id| id.starts_with("did:wba:")),
        "{status:?}"
    );
    assert!(
        status
            .last_error
            .as_deref()
            .unwrap_or_default()
            .contains("403"),
        "{status:?}"
    );
    assert!(status.next_attempt.is_none());
    assert_eq!(attempts.load(Ordering::SeqCst), 1, "not retried");
    server.shutdown().await.unwrap();
}
