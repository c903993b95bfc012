//! The WoT Discovery directory a node serves (`NodeBuilder::directory`), driven over plain
//! HTTP on loopback with reqwest. Each test names the W3C WoT Discovery assertions it
//! checks (`tdd-…`). Strangers play from 127.0.0.2 and up, the legitimate registrant
//! from 127.0.0.1.

use std::sync::Arc;
use std::time::Duration;

use concord_directory::{Directory, DirectoryLimits, MemoryDirectoryStore};
use concord_identity::{sign_request, Identity, RequestTarget};
use concord_node::{DirectoryService, Limits, Node, Server};
use reqwest::header::{CONTENT_TYPE, LINK, LOCATION};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::identity::{document, host, now};
use crate::support::*;

/// A valid TD with this id (none: an anonymous TD) and an action `name`.
fn td(id: Option<&str>, action: &str) -> Value {
    let mut td = json!({
        "@context": "https://www.w3.org/2022/wot/td/v1.1",
        "title": format!("Thing with {action}"),
        "securityDefinitions": {"nosec_sc": {"scheme": "nosec"}},
        "security": "nosec_sc",
        "actions": {action: {
            "input": {"type": "object", "properties": {"city": {"type": "string"}}},
            "forms": [{"href": format!("https://things.example.com/{action}")}]
        }}
    });
    if let Some(id) = id {
        td["id"] = json!(id);
    }
    td
}

/// A directory over a memory store within `directory` limits, on a node with `limits`.
fn directory_node(directory: DirectoryLimits, limits: Limits) -> Agent {
    let store = Arc::new(MemoryDirectoryStore::new());
    let directory = Directory::new(store, directory).unwrap();
    build(
        Node::builder("Directory")
            .directory(DirectoryService::new(directory))
            .limits(limits),
    )
}

async fn served(directory: DirectoryLimits) -> (Agent, Server) {
    let agent = directory_node(directory, quick_limits());
    let server = serve(&agent).await;
    (agent, server)
}

/// An HTTP client whose connections come from `source`.
fn client_from(source: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(source.parse::<std::net::IpAddr>().unwrap())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

fn url(server: &Server, path: &str) -> String {
    format!("{}{}", server.url(), path.trim_start_matches('/'))
}

/// `PUT /things/{id}` of `td` from `client`; the status.
async fn put(client: &reqwest::Client, server: &Server, id: &str, td: &Value) -> StatusCode {
    client
        .put(url(server, &format!("things/{id}")))
        .header(CONTENT_TYPE, "application/td+json")
        .body(td.to_string())
        .send()
        .await
        .unwrap()
        .status()
}

/// The problem of a refused answer, checked to be `application/problem+json` with
/// `status`.
async fn problem(response: reqwest::Response, status: u16) -> Value {
    assert_eq!(response.status().as_u16(), status);
    assert_eq!(response.headers()[CONTENT_TYPE], "application/problem+json");
    let problem: Value = response.json().await.unwrap();
    assert_eq!(problem["status"], status, "{problem}");
    problem
}

/// tdd-things-create-known-td, tdd-things-create-known-td-resp, tdd-things-update,
/// tdd-things-update-resp, tdd-things-retrieve, tdd-things-retrieve-resp,
/// tdd-things-retrieve-resp-content-type, tdd-things-update-partial-mergepatch,
/// tdd-things-update-partial-resp, tdd-things-delete, tdd-things-delete-resp,
/// tdd-registrationinfo-vocab-created, tdd-registrationinfo-vocab-modified.
#[tokio::test]
async fn tdd_things_crud_create_retrieve_update_patch_delete() {
    let (_agent, server) = served(DirectoryLimits::default()).await;
    let client = client_from("127.0.0.1");
    let id = "urn:example:lamp";
    assert_eq!(
        put(&client, &server, id, &td(Some(id), "toggle")).await,
        201
    );
    assert_eq!(put(&client, &server, id, &td(Some(id), "dim")).await, 204);

    let response = client
        .get(url(&server, &format!("things/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()[CONTENT_TYPE], "application/td+json");
    let stored: Value = response.json().await.unwrap();
    assert_eq!(stored["id"], id);
    assert!(stored["actions"]["dim"].is_object(), "{stored}");
    assert!(stored["registration"]["created"].is_string(), "{stored}");
    assert!(stored["registration"]["modified"].is_string(), "{stored}");

    let response = client
        .patch(url(&server, &format!("things/{id}")))
        .header(CONTENT_TYPE, "application/merge-patch+json")
        .body(json!({"title": "Patched lamp"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);
    let stored: Value = client
        .get(url(&server, &format!("things/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stored["title"], "Patched lamp");

    let response = client
        .delete(url(&server, &format!("things/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);
    let response = client
        .get(url(&server, &format!("things/{id}")))
        .send()
        .await
        .unwrap();
    let gone = problem(response, 404).await;
    assert!(gone["detail"].as_str().unwrap().contains(id), "{gone}");
}

/// tdd-things-create-anonymous-td, tdd-things-create-anonymous-td-resp,
/// tdd-things-create-anonymous-id, tdd-anonymous-td-local-uuid,
/// tdd-things-create-known-vs-anonymous.
#[tokio::test]
async fn tdd_things_create_anonymous_td_answers_its_location() {
    let (_agent, server) = served(DirectoryLimits::default()).await;
    let client = client_from("127.0.0.1");
    let response = client
        .post(url(&server, "things"))
        .header(CONTENT_TYPE, "application/td+json")
        .body(td(None, "toggle").to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let location = response.headers()[LOCATION].to_str().unwrap().to_owned();
    assert!(location.starts_with("/things/urn:uuid:"), "{location}");
    let stored: Value = client
        .get(url(&server, &location))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        format!("/things/{}", stored["id"].as_str().unwrap()),
        location
    );

    // A TD with an id is registered with PUT, not POST: refused, nothing stored.
    let response = client
        .post(url(&server, "things"))
        .header(CONTENT_TYPE, "application/td+json")
        .body(td(Some("urn:example:dup"), "toggle").to_string())
        .send()
        .await
        .unwrap();
    let refused = problem(response, 400).await;
    assert!(
        refused["type"].as_str().unwrap().ends_with("id-on-post"),
        "{refused}"
    );
    let response = client
        .get(url(&server, "things/urn:example:dup"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
}

/// tdd-things-list-method, tdd-things-list-resp, tdd-things-list-pagination-limit,
/// tdd-things-list-pagination-header-nextlink, tdd-things-list-pagination-header-nextlink-attr,
/// tdd-things-list-pagination-header-canonicallink, tdd-things-list-pagination-order-default,
/// tdd-things-list-pagination-collection.
#[tokio::test]
async fn tdd_things_list_pages_with_next_and_canonical_links() {
    let (_agent, server) = served(DirectoryLimits::default()).await;
    let client = client_from("127.0.0.1");
    for name in ["c", "a", "e", "b", "d"] {
        let id = format!("urn:example:{name}");
        assert_eq!(
            put(&client, &server, &id, &td(Some(&id), "toggle")).await,
            201
        );
    }
    let mut ids = Vec::new();
    let mut next = Some("things?limit=2".to_owned());
    let mut pages = 0;
    while let Some(page) = next.take() {
        let response = client.get(url(&server, &page)).send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()[CONTENT_TYPE], "application/ld+json");
        let links: Vec<String> = response
            .headers()
            .get_all(LINK)
            .iter()
            .map(|value| value.to_str().unwrap().to_owned())
            .collect();
        assert!(
            links
                .iter()
                .any(|link| link.starts_with("</things>; rel=\"canonical\"; etag=\"")),
            "{links:?}"
        );
        next = links.iter().find_map(|link| {
            link.strip_suffix(">; rel=\"next\"")
                .map(|target| target.trim_start_matches("</").to_owned())
        });
        let body: Value = response.json().await.unwrap();
        ids.extend(
            body.as_array()
                .unwrap()
                .iter()
                .map(|td| td["id"].as_str().unwrap().to_owned()),
        );
        pages += 1;
    }
    assert_eq!(pages, 3);
    assert_eq!(
        ids,
        ["a", "b", "c", "d", "e"].map(|name| format!("urn:example:{name}"))
    );

    let collection: Value = client
        .get(url(&server, "things?limit=2&format=collection"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(collection["@type"], "ThingCollection");
    assert_eq!(collection["total"], 5);
    assert_eq!(collection["members"].as_array().unwrap().len(), 2);
    assert_eq!(
        collection["next"],
        "/things?offset=2&limit=2&format=collection"
    );

    // HEAD: the same headers, no body.
    let response = client.head(url(&server, "things")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()[CONTENT_TYPE], "application/ld+json");
    assert!(response.bytes().await.unwrap().is_empty());

    // Bad paging: a problem naming the parameter.
    let response = client
        .get(url(&server, "things?limit=x"))
        .send()
        .await
        .unwrap();
    let refused = problem(response, 400).await;
    assert!(
        refused["detail"].as_str().unwrap().contains("limit"),
        "{refused}"
    );
}

/// tdd-validation-syntactic, tdd-validation-jsonschema, tdd-validation-result,
/// tdd-validation-response, tdd-validation-response-utf-8: an invalid TD is 400 with
/// `validationErrors` naming the field; a merge patch that makes the TD invalid too
/// (tdd-things-update-partial-partialtd), and the TD is left as it was.
#[tokio::test]
async fn tdd_validation_an_invalid_td_or_patch_is_refused_with_validation_errors() {
    let (_agent, server) = served(DirectoryLimits::default()).await;
    let client = client_from("127.0.0.1");
    let id = "urn:example:bad";
    let mut bad = td(Some(id), "toggle");
    bad.as_object_mut().unwrap().remove("securityDefinitions");
    let response = client
        .put(url(&server, &format!("things/{id}")))
        .header(CONTENT_TYPE, "application/td+json")
        .body(bad.to_string())
        .send()
        .await
        .unwrap();
    let refused = problem(response, 400).await;
    let errors = refused["validationErrors"].as_array().unwrap();
    assert!(!errors.is_empty(), "{refused}");
    assert!(errors[0]["field"].is_string() && errors[0]["description"].is_string());

    // Not JSON at all.
    let response = client
        .put(url(&server, &format!("things/{id}")))
        .header(CONTENT_TYPE, "application/td+json")
        .body("{\"title\": ")
        .send()
        .await
        .unwrap();
    problem(response, 400).await;

    assert_eq!(
        put(&client, &server, id, &td(Some(id), "toggle")).await,
        201
    );
    let response = client
        .patch(url(&server, &format!("things/{id}")))
        .header(CONTENT_TYPE, "application/merge-patch+json")
        .body(json!({"security": null}).to_string())
        .send()
        .await
        .unwrap();
    let refused = problem(response, 400).await;
    assert!(refused["validationErrors"].is_array(), "{refused}");
    let stored: Value = client
        .get(url(&server, &format!("things/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stored["security"], "nosec_sc");

    // A merge patch must say it is one (tdd-things-update-partial-contenttype).
    let response = client
        .patch(url(&server, &format!("things/{id}")))
        .header(CONTENT_TYPE, "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    let refused = problem(response, 415).await;
    assert!(
        refused["detail"].as_str().unwrap().contains("merge-patch"),
        "{refused}"
    );
}

/// A TD over `max_td_bytes` is refused (413) from its `Content-Length`, before it is read;
/// a chunked one as soon as it passes the limit. Other methods answer 405 with `Allow`.
#[tokio::test]
async fn a_td_over_the_size_limit_is_413_and_other_methods_405() {
    let mut limits = DirectoryLimits::default();
    limits.max_td_bytes = 2_000;
    let (_agent, server) = served(limits).await;
    let client = client_from("127.0.0.1");
    let id = "urn:example:big";
    let mut big = td(Some(id), "toggle");
    big["description"] = json!("x".repeat(5_000));
    let response = client
        .put(url(&server, &format!("things/{id}")))
        .header(CONTENT_TYPE, "application/td+json")
        .body(big.to_string())
        .send()
        .await
        .unwrap();
    let refused = problem(response, 413).await;
    assert!(
        refused["detail"].as_str().unwrap().contains("2000"),
        "{refused}"
    );
    let chunks = futures_util::stream::iter(
        (0..10).map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![b' '; 1_000]))),
    );
    let response = client
        .post(url(&server, "things"))
        .header(CONTENT_TYPE, "application/td+json")
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await
        .unwrap();
    problem(response, 413).await;

    let response = client
        .post(url(&server, "things/urn:example:x"))
        .send()
        .await
        .unwrap();
    let refused = problem(response, 405).await;
    let _ = refused;
    let response = client.put(url(&server, "things")).send().await.unwrap();
    assert_eq!(response.status(), 405);
    assert_eq!(response.headers()["allow"], "GET, HEAD, POST");
}

/// tdd-search-jsonpath-method, tdd-search-jsonpath-parameter, tdd-search-jsonpath-response,
/// tdd-search-malformed-query: JSONPath (RFC 9535) over the TDs; a malformed query or one
/// over `max_query_bytes` is 400. Capability search finds who has an action or a field.
#[tokio::test]
async fn tdd_search_jsonpath_and_capability_search() {
    let mut limits = DirectoryLimits::default();
    limits.max_query_bytes = 200;
    let (_agent, server) = served(limits).await;
    let client = client_from("127.0.0.1");
    for (name, action) in [("a", "toggle"), ("b", "getWeather"), ("c", "getWeather")] {
        let id = format!("urn:example:{name}");
        assert_eq!(
            put(&client, &server, &id, &td(Some(&id), action)).await,
            201
        );
    }
    let response = client
        .get(url(&server, "search/jsonpath"))
        .query(&[("query", "$[?@.actions.getWeather].id")])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()[CONTENT_TYPE], "application/json");
    let found: Value = response.json().await.unwrap();
    assert_eq!(found, json!(["urn:example:b", "urn:example:c"]));

    for query in ["$[?@.title ==", "no jsonpath"] {
        let response = client
            .get(url(&server, "search/jsonpath"))
            .query(&[("query", query)])
            .send()
            .await
            .unwrap();
        let refused = problem(response, 400).await;
        assert!(
            refused["type"].as_str().unwrap().ends_with("invalid-query"),
            "{refused}"
        );
    }
    // Evaluated one TD at a time (to check its time between TDs): a position on the root
    // would see one TD, an expensive shape is refused before it runs.
    for query in ["$[0].id", "$..*..*..*", "$[?match(@.title, @.description)]"] {
        let response = client
            .get(url(&server, "search/jsonpath"))
            .query(&[("query", query)])
            .send()
            .await
            .unwrap();
        let refused = problem(response, 400).await;
        assert!(
            refused["type"].as_str().unwrap().ends_with("invalid-query"),
            "{query}: {refused}"
        );
    }
    let long = format!("$[?@.title == '{}']", "x".repeat(300));
    let response = client
        .get(url(&server, "search/jsonpath"))
        .query(&[("query", long.as_str())])
        .send()
        .await
        .unwrap();
    let refused = problem(response, 400).await;
    assert!(
        refused["type"]
            .as_str()
            .unwrap()
            .ends_with("query-too-long"),
        "{refused}"
    );

    let found: Value = client
        .get(url(&server, "search/capability"))
        .query(&[("action", "getWeather"), ("field", "city")])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = found["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|td| td["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["urn:example:b", "urn:example:c"]);
    assert_eq!(found["truncated"], false);
    let response = client
        .get(url(&server, "search/capability"))
        .query(&[("colour", "red")])
        .send()
        .await
        .unwrap();
    problem(response, 400).await;
}

/// A JSONPath search is bounded in time (`max_query_time`, checked between TDs): past it,
/// 400 `search-too-slow` naming how far it got, and the directory goes on serving.
#[tokio::test]
async fn a_jsonpath_search_past_its_time_is_refused_400() {
    let mut limits = DirectoryLimits::default();
    limits.max_query_time = Duration::from_nanos(1);
    let (_agent, server) = served(limits).await;
    let client = client_from("127.0.0.1");
    for name in ["a", "b", "c"] {
        let id = format!("urn:example:{name}");
        assert_eq!(
            put(&client, &server, &id, &td(Some(&id), "toggle")).await,
            201
        );
    }
    let response = client
        .get(url(&server, "search/jsonpath"))
        .query(&[("query", "$..*")])
        .send()
        .await
        .unwrap();
    let refused = problem(response, 400).await;
    assert!(
        refused["type"]
            .as_str()
            .unwrap()
            .ends_with("search-too-slow"),
        "{refused}"
    );
    assert!(
        refused["detail"].as_str().unwrap().contains("of 3 TDs"),
        "{refused}"
    );
    let response = client
        .get(url(&server, "things/urn:example:a"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

/// A capability answer cut at `max_capability_results` says so and gives no `total` (the
/// matches past the cut are not counted); an uncut one gives the number of matches.
#[tokio::test]
async fn a_cut_capability_answer_gives_no_total() {
    let mut limits = DirectoryLimits::default();
    limits.max_capability_results = 1;
    let (_agent, server) = served(limits).await;
    let client = client_from("127.0.0.1");
    for (name, action) in [("a", "toggle"), ("b", "getWeather"), ("c", "getWeather")] {
        let id = format!("urn:example:{name}");
        assert_eq!(
            put(&client, &server, &id, &td(Some(&id), action)).await,
            201
        );
    }
    let search = |action: &'static str| {
        client
            .get(url(&server, "search/capability"))
            .query(&[("action", action)])
            .send()
    };
    let cut: Value = search("getWeather").await.unwrap().json().await.unwrap();
    assert_eq!(cut["truncated"], true);
    assert_eq!(cut["members"].as_array().unwrap().len(), 1);
    assert!(cut.get("total").is_none(), "{cut}");
    let whole: Value = search("toggle").await.unwrap().json().await.unwrap();
    assert_eq!(whole["truncated"], false);
    assert_eq!(whole["total"], 1);
}

/// A costly JSONPath search within every bound of its shape: for each node of a TD, the
/// nodes under it (over [`deep_td`], hundreds of thousands of steps per TD), to select
/// none.
const COSTLY: &str = "$..[?count(@..*) > 1000000]";

/// [`td`] with a member 60 arrays deep, each holding 200 numbers beside the next.
fn deep_td(id: &str) -> Value {
    let mut deep = json!([]);
    for _ in 0..60 {
        let mut level: Vec<Value> = (0..200).map(|n| json!(n)).collect();
        level.push(deep);
        deep = Value::Array(level);
    }
    let mut td = td(Some(id), "toggle");
    td["deep"] = deep;
    td
}

/// One JSONPath search of `query` from `client`: its status and `Retry-After`, or `None`
/// when the client gave up (its own timeout).
async fn search_from(
    client: &reqwest::Client,
    server: &Server,
    query: &str,
) -> Option<(u16, Option<String>)> {
    let response = client
        .get(url(server, "search/jsonpath"))
        .query(&[("query", query)])
        .send()
        .await
        .ok()?;
    let retry = response
        .headers()
        .get("retry-after")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    Some((response.status().as_u16(), retry))
}

/// Strangers firing costly JSONPath searches at once take turns: one address beyond its
/// share gets 429, the node beyond its turns 503, both with `Retry-After`; meanwhile the
/// legitimate caller's search and write from 127.0.0.1 are served.
#[tokio::test]
async fn hostile_searches_take_turns_while_the_legitimate_caller_is_served() {
    let mut limits = quick_limits();
    limits.directory_searches = 2;
    limits.directory_searches_per_address = 1;
    let agent = directory_node(DirectoryLimits::default(), limits);
    let server = serve(&agent).await;
    let client = client_from("127.0.0.1");
    for index in 0..5 {
        let id = format!("urn:example:s{index}");
        assert_eq!(put(&client, &server, &id, &deep_td(&id)).await, 201);
    }
    // One stranger fires four at once: beyond its one turn, 429.
    let stranger = client_from("127.0.0.2");
    let burst =
        futures_util::future::join_all((0..4).map(|_| search_from(&stranger, &server, COSTLY)));
    let legitimate = async {
        // The stranger holds one of the node's two turns: the other is 127.0.0.1's.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let found = search_from(&client, &server, "$[?@.id=='urn:example:s3'].id").await;
        let written = put(
            &client,
            &server,
            "urn:example:late",
            &td(Some("urn:example:late"), "toggle"),
        )
        .await;
        (found, written)
    };
    let (answers, (found, written)) = tokio::join!(burst, legitimate);
    assert_eq!(found.map(|(status, _)| status), Some(200));
    assert_eq!(written, 201);
    let refused: Vec<_> = answers
        .iter()
        .flatten()
        .filter(|(status, _)| *status == 429)
        .collect();
    assert!(!refused.is_empty(), "{answers:?}");
    assert!(
        refused.iter().all(|(_, retry)| retry.is_some()),
        "{answers:?}"
    );
    assert!(
        answers
            .iter()
            .flatten()
            .all(|(status, _)| [200, 429].contains(status)),
        "{answers:?}"
    );

    // Three strangers at once: beyond the node's two turns, 503.
    let strangers: Vec<_> = ["127.0.0.3", "127.0.0.4", "127.0.0.5"]
        .into_iter()
        .map(client_from)
        .collect();
    let answers = futures_util::future::join_all(
        strangers
            .iter()
            .map(|stranger| search_from(stranger, &server, COSTLY)),
    )
    .await;
    let busy: Vec<_> = answers
        .iter()
        .flatten()
        .filter(|(status, _)| *status == 503)
        .collect();
    assert!(!busy.is_empty(), "{answers:?}");
    assert!(busy.iter().all(|(_, retry)| retry.is_some()), "{answers:?}");
}

/// A minimal SSE reader over a reqwest answer: events as (id, data).
struct Events {
    response: reqwest::Response,
    buffer: String,
}

impl Events {
    async fn open(client: &reqwest::Client, target: &str, last: Option<&str>) -> reqwest::Response {
        let mut request = client.get(target).header("accept", "text/event-stream");
        if let Some(last) = last {
            request = request.header("last-event-id", last);
        }
        request.send().await.unwrap()
    }

    fn of(response: reqwest::Response) -> Self {
        assert_eq!(response.status(), 200);
        assert!(response.headers()[CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"));
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The next event (comments skipped), within 10 s: its id, its `event:` type (every
    /// directory event is named: WoT Discovery's thing_created, thing_updated,
    /// thing_deleted) and its data.
    async fn next(&mut self) -> (String, String, Value) {
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                if let Some(end) = self.buffer.find("\n\n") {
                    let block: String = self.buffer.drain(..end + 2).collect();
                    let mut id = None;
                    let mut event = None;
                    let mut data = String::new();
                    for line in block.lines() {
                        if let Some(value) = line.strip_prefix("id:") {
                            id = Some(value.trim().to_owned());
                        } else if let Some(value) = line.strip_prefix("event:") {
                            event = Some(value.trim().to_owned());
                        } else if let Some(value) = line.strip_prefix("data:") {
                            data.push_str(value.trim_start());
                        }
                    }
                    if let Some(id) = id {
                        let event = event.unwrap_or_else(|| panic!("unnamed event: {block}"));
                        return (id, event, serde_json::from_str(&data).unwrap());
                    }
                    continue;
                }
                let chunk = self
                    .response
                    .chunk()
                    .await
                    .unwrap()
                    .expect("the stream ended");
                self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
            }
        })
        .await
        .expect("an event within 10 s")
    }
}

/// tdd-notification-sse, tdd-notification-event-id, tdd-notification-event-types,
/// tdd-notification-data-td-id, tdd-notification-data-create-full,
/// tdd-notification-data-update-id, tdd-notification-data-delete-diff,
/// tdd-notification-filter-type: live events with an id each, replay from
/// `Last-Event-ID`, `diff=true`; an id no longer kept is 410.
#[tokio::test]
async fn tdd_notification_sse_events_resume_from_last_event_id() {
    let mut limits = DirectoryLimits::default();
    limits.event_retention = 4;
    let (_agent, server) = served(limits).await;
    let client = client_from("127.0.0.1");
    let mut all = Events::of(Events::open(&client, &url(&server, "events"), None).await);
    let mut created = Events::of(
        Events::open(
            &client,
            &url(&server, "events/thing_created?diff=true"),
            None,
        )
        .await,
    );
    let id = "urn:example:lamp";
    assert_eq!(
        put(&client, &server, id, &td(Some(id), "toggle")).await,
        201
    );
    assert_eq!(put(&client, &server, id, &td(Some(id), "dim")).await, 204);
    let response = client
        .delete(url(&server, &format!("things/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);

    let (first, event, data) = all.next().await;
    assert_eq!(event, "thing_created");
    assert_eq!(data, json!({"id": id}));
    let (second, event, _) = all.next().await;
    assert_eq!(event, "thing_updated");
    let (third, event, data) = all.next().await;
    assert_eq!(event, "thing_deleted");
    assert_eq!(data, json!({"id": id}));
    let ids: Vec<u64> = [&first, &second, &third]
        .iter()
        .map(|id| id.parse().unwrap())
        .collect();
    assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "{ids:?}");
    let (created_id, event, full) = created.next().await;
    assert_eq!(event, "thing_created");
    assert_eq!(created_id, first);
    assert_eq!(full["title"], "Thing with toggle");
    assert_eq!(full["id"], id);

    // Resuming after the first event replays the two after it.
    let mut resumed =
        Events::of(Events::open(&client, &url(&server, "events"), Some(&first)).await);
    assert_eq!(resumed.next().await.0, second);
    assert_eq!(resumed.next().await.0, third);

    // More writes than the retention keeps: resuming from the first is a gap (410).
    for index in 0..6 {
        let id = format!("urn:example:n{index}");
        assert_eq!(
            put(&client, &server, &id, &td(Some(&id), "toggle")).await,
            201
        );
    }
    let response = Events::open(&client, &url(&server, "events"), Some(&first)).await;
    let gap = problem(response, 410).await;
    assert!(
        gap["type"].as_str().unwrap().ends_with("event-gap"),
        "{gap}"
    );
    let response = Events::open(&client, &url(&server, "events"), Some("999999")).await;
    problem(response, 400).await;
    let response = Events::open(&client, &url(&server, "events/thing_renamed"), None).await;
    problem(response, 404).await;
}

/// A subscriber that never reads, with small queues: it is dropped when its queue fills,
/// and neither the writes nor another subscriber wait for it; a stranger holding its
/// address's share of subscriptions gets 429 for one more, the legitimate reader is served.
#[tokio::test]
async fn a_slow_sse_reader_is_dropped_and_holds_neither_writes_nor_others() {
    let mut limits = quick_limits();
    limits.http_sse_queue = 4;
    limits.http_sse_queue_bytes = 4 * 1024;
    limits.max_holding_sessions_per_address = 3;
    let agent = directory_node(DirectoryLimits::default(), limits);
    let server = serve(&agent).await;
    // The stranger subscribes and never reads its answer's body.
    let stranger = client_from("127.0.0.2");
    let stalled = Events::open(&stranger, &url(&server, "events?diff=true"), None).await;
    assert_eq!(stalled.status(), 200);
    // Another stranger holds its share of subscriptions; one more is 429.
    let hoarder = client_from("127.0.0.3");
    let mut held = Vec::new();
    for _ in 0..3 {
        let response = Events::open(&hoarder, &url(&server, "events"), None).await;
        assert_eq!(response.status(), 200);
        held.push(response);
    }
    let response = Events::open(&hoarder, &url(&server, "events"), None).await;
    let refused = problem(response, 429).await;
    assert!(
        refused["detail"].as_str().unwrap().contains("127.0.0.3"),
        "{refused}"
    );
    let client = client_from("127.0.0.1");
    let mut reader = Events::of(Events::open(&client, &url(&server, "events"), None).await);
    let mut big = td(None, "toggle");
    big["description"] = json!("y".repeat(20_000));
    for index in 0..40 {
        let id = format!("urn:example:s{index:02}");
        big["id"] = json!(id);
        assert_eq!(put(&client, &server, &id, &big).await, 201, "write {index}");
        // The legitimate reader keeps up.
        let (_, _, data) = reader.next().await;
        assert_eq!(data["id"], id);
    }
    // The stalled subscriber was dropped, not held: its answer has ended (after what was
    // already in flight), saying it overflowed.
    let said = tokio::time::timeout(Duration::from_secs(10), stalled.text())
        .await
        .expect("the stalled answer ended")
        .unwrap();
    assert!(said.contains(": overflow"), "{said:.200}");
}

/// A registration flood: strangers on 127.0.0.2 and 127.0.0.3 are held to their
/// per-address quota (429) and the request budget (429 with `Retry-After`), while the
/// legitimate registrant on 127.0.0.1 is served.
#[tokio::test]
async fn a_registration_flood_is_held_to_its_quota_while_the_registrant_is_served() {
    let mut directory = DirectoryLimits::default();
    directory.max_entries_per_registrant = 5;
    let limits = Limits {
        request_rate_per_address: 5,
        request_burst_per_address: 20,
        ..quick_limits()
    };
    let agent = directory_node(directory, limits);
    let server = serve(&agent).await;
    let mut quota = 0;
    let mut budget = 0;
    let mut stored = 0;
    for source in ["127.0.0.2", "127.0.0.3"] {
        let attacker = client_from(source);
        for index in 0..40 {
            let response = attacker
                .post(url(&server, "things"))
                .header(CONTENT_TYPE, "application/td+json")
                .body(td(None, &format!("spam{index}")).to_string())
                .send()
                .await
                .unwrap();
            match response.status().as_u16() {
                201 => stored += 1,
                429 => {
                    assert!(response.headers().contains_key("retry-after"));
                    let said = response.text().await.unwrap();
                    if said.contains("quota-exceeded") {
                        quota += 1;
                    } else {
                        budget += 1;
                    }
                }
                other => panic!("unexpected status {other}"),
            }
        }
    }
    assert_eq!(stored, 10, "5 per address");
    assert!(quota > 0, "the quota refused none ({budget} by the budget)");
    assert!(
        budget > 0,
        "the request budget refused none ({quota} by the quota)"
    );
    let client = client_from("127.0.0.1");
    let id = "urn:example:legit";
    assert_eq!(
        put(&client, &server, id, &td(Some(id), "toggle")).await,
        201
    );
    let response = client
        .get(url(&server, &format!("things/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

/// tdd-self-description (the directory's own TD at `/.well-known/wot`), following the
/// spec's directory Thing Model: `@type` `ThingDirectory`, the `things` property, the
/// CRUD and search actions and the three events, with HTTP forms.
#[tokio::test]
async fn tdd_self_description_types_the_node_a_thing_directory() {
    let (_agent, server) = served(DirectoryLimits::default()).await;
    let validated = served_description(&server).await;
    assert!(validated.report.is_valid(), "{:?}", validated.report);
    let td: Value = serde_json::from_slice(&served_description_bytes(&server).await).unwrap();
    assert!(td["@type"]
        .as_array()
        .unwrap()
        .contains(&json!("ThingDirectory")));
    assert!(td["@context"]
        .as_array()
        .unwrap()
        .contains(&json!("https://www.w3.org/2022/wot/discovery")));
    let things = &td["properties"]["things"]["forms"][0];
    assert_eq!(things["htv:methodName"], "GET");
    assert_eq!(
        things["href"],
        format!("{}things{{?offset,limit,format}}", server.url())
    );
    for (action, method) in [
        ("createThing", "PUT"),
        ("createAnonymousThing", "POST"),
        ("retrieveThing", "GET"),
        ("updateThing", "PUT"),
        ("partiallyUpdateThing", "PATCH"),
        ("deleteThing", "DELETE"),
        ("searchJSONPath", "GET"),
        ("searchCapability", "GET"),
    ] {
        assert_eq!(
            td["actions"][action]["forms"][0]["htv:methodName"], method,
            "{action}"
        );
    }
    // The answers the directory Thing Model names, with their status codes.
    for (action, status) in [
        ("createThing", 201),
        ("createAnonymousThing", 201),
        ("retrieveThing", 200),
        ("updateThing", 204),
        ("partiallyUpdateThing", 204),
        ("deleteThing", 204),
    ] {
        let form = &td["actions"][action]["forms"][0];
        assert_eq!(
            form["response"]["htv:statusCodeValue"], status,
            "{action}: {form}"
        );
        assert_eq!(
            form["additionalResponses"][0]["contentType"], "application/problem+json",
            "{action}"
        );
    }
    assert_eq!(
        td["actions"]["createAnonymousThing"]["forms"][0]["response"]["htv:headers"][0]
            ["htv:fieldName"],
        "Location"
    );
    for event in ["thingCreated", "thingUpdated", "thingDeleted"] {
        let form = &td["events"][event]["forms"][0];
        assert_eq!(form["subprotocol"], "sse", "{event}");
        // The form's contentType is the data's; the answer's is in `response`.
        assert_eq!(form["contentType"], "application/json", "{event}");
        assert_eq!(
            form["response"]["contentType"], "text/event-stream",
            "{event}"
        );
        assert_eq!(
            form["htv:headers"][0]["htv:fieldName"], "Last-Event-ID",
            "{event}"
        );
    }
}

/// Signed writes: with `require_signatures` an anonymous write is 401 with ANP's
/// challenge; a TD registered by one DID (an RFC 9421 signature on the request) cannot be
/// replaced or deleted by another DID (403), and its own DID deletes it.
#[tokio::test]
async fn signed_writes_own_their_entries_and_anonymous_writes_are_refused() {
    let store = Arc::new(MemoryDirectoryStore::new());
    let directory = Directory::new(store, DirectoryLimits::default()).unwrap();
    let agent = build(
        Node::builder("Directory")
            .directory(DirectoryService::new(directory).require_signatures(true))
            .security(loopback_security())
            .limits(quick_limits()),
    );
    let server = serve(&agent).await;
    let client = client_from("127.0.0.1");
    let id = "urn:example:owned";
    let target = url(&server, &format!("things/{id}"));
    let body = td(Some(id), "toggle").to_string();

    let response = client
        .put(&target)
        .header(CONTENT_TYPE, "application/td+json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert!(response
        .headers()
        .get_all("www-authenticate")
        .iter()
        .any(|challenge| challenge.to_str().unwrap().starts_with("DIDWba")));
    problem(response, 401).await;

    let owner = host(document).await;
    let stranger = host(document).await;
    let send = |signer: &Identity, method: &'static str, nonce: &str, body: &str| {
        let signature = sign_request(
            signer,
            &RequestTarget {
                method,
                target_uri: &target,
            },
            body.as_bytes(),
            now(),
            nonce,
        );
        let mut request = client
            .request(method.parse().unwrap(), &target)
            .header(CONTENT_TYPE, "application/td+json")
            .header("signature-input", signature.signature_input)
            .header("signature", signature.signature)
            .body(body.to_owned());
        if let Some(digest) = signature.content_digest {
            request = request.header("content-digest", digest);
        }
        request.send()
    };
    let response = send(&owner.identity, "PUT", "dir-nonce-1", &body)
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let response = send(&stranger.identity, "PUT", "dir-nonce-2", &body)
        .await
        .unwrap();
    let refused = problem(response, 403).await;
    assert!(
        refused["type"].as_str().unwrap().ends_with("not-owner"),
        "{refused}"
    );
    let response = send(&stranger.identity, "DELETE", "dir-nonce-3", "")
        .await
        .unwrap();
    problem(response, 403).await;
    // Reads stay open.
    let response = client.get(&target).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let response = send(&owner.identity, "DELETE", "dir-nonce-4", "")
        .await
        .unwrap();
    assert_eq!(response.status(), 204);
}

/// tdd-registrationinfo-expiry-purge, tdd-registrationinfo-expiry-config: a TD whose
/// `ttl` has run out is purged by the directory's timer, with a `thing_deleted` event; an
/// unexpired one stays.
#[tokio::test]
async fn expired_tds_are_purged_on_a_timer_with_a_deleted_event() {
    let mut limits = DirectoryLimits::default();
    limits.min_ttl = Duration::from_secs(1);
    let store = Arc::new(MemoryDirectoryStore::new());
    let directory = Directory::new(store, limits).unwrap();
    let agent = build(
        Node::builder("Directory")
            .directory(DirectoryService::new(directory).purge_interval(Duration::from_secs(1)))
            .limits(quick_limits()),
    );
    let server = serve(&agent).await;
    let client = client_from("127.0.0.1");
    let mut deleted =
        Events::of(Events::open(&client, &url(&server, "events/thing_deleted"), None).await);
    let brief = "urn:example:brief";
    let mut short = td(Some(brief), "toggle");
    short["registration"] = json!({"ttl": 1});
    assert_eq!(put(&client, &server, brief, &short).await, 201);
    let lasting = "urn:example:lasting";
    assert_eq!(
        put(&client, &server, lasting, &td(Some(lasting), "toggle")).await,
        201
    );

    let (_, _, data) = deleted.next().await;
    assert_eq!(data, json!({"id": brief}));
    let listing: Value = client
        .get(url(&server, "things"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = listing
        .as_array()
        .unwrap()
        .iter()
        .map(|td| td["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [lasting]);
}

/// More expired TDs than one purge batch (256) all go at the first purge, not one batch
/// an interval: the purge loops while a batch comes back full (the interval here is an
/// hour, so only the first tick purges within the test).
#[tokio::test]
async fn a_purge_takes_every_expired_td_not_one_batch_an_interval() {
    let mut limits = DirectoryLimits::default();
    limits.min_ttl = Duration::from_secs(1);
    limits.max_entries_per_registrant = 1_000;
    let store = Arc::new(MemoryDirectoryStore::new());
    let directory = Directory::new(store, limits).unwrap();
    let registrant = concord_directory::Registrant::client("127.0.0.1");
    let past = std::time::SystemTime::now() - Duration::from_secs(600);
    let count = 300;
    for index in 0..count {
        let id = format!("urn:example:short{index}");
        let mut short = td(Some(&id), "toggle");
        short["registration"] = json!({"ttl": 1});
        directory
            .put(&id, &serde_json::to_vec(&short).unwrap(), &registrant, past)
            .unwrap();
    }
    let agent = build(
        Node::builder("Directory")
            .directory(
                DirectoryService::new(directory.clone()).purge_interval(Duration::from_secs(3_600)),
            )
            .limits(quick_limits()),
    );
    let _server = serve(&agent).await;
    let deleted = || {
        directory
            .events_since(0, 10_000)
            .unwrap()
            .iter()
            .filter(|event| event.kind == concord_directory::EventKind::Deleted)
            .count()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while deleted() < count && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        deleted(),
        count,
        "every expired TD purged at the first purge"
    );
}

/// Strangers holding every subscriber place do not keep a newcomer out: the subscriber
/// held longest of the address holding the most is let go (its answer ends) for a
/// subscriber from another address, who is served; a stranger's address holding as many
/// as the newcomer's would is not shed for it.
#[tokio::test]
async fn strangers_holding_every_subscription_are_shed_for_a_newcomer() {
    let mut limits = quick_limits();
    limits.max_holding_sessions = 4;
    limits.max_holding_sessions_per_address = 3;
    let agent = directory_node(DirectoryLimits::default(), limits);
    let server = serve(&agent).await;
    let hoarder = client_from("127.0.0.2");
    let mut held = Vec::new();
    for _ in 0..3 {
        let response = Events::open(&hoarder, &url(&server, "events"), None).await;
        assert_eq!(response.status(), 200);
        held.push(response);
    }
    let other = client_from("127.0.0.3");
    let single = Events::open(&other, &url(&server, "events"), None).await;
    assert_eq!(single.status(), 200);
    // Every place is taken: the legitimate subscriber sheds one of 127.0.0.2's.
    let client = client_from("127.0.0.1");
    let mut reader = Events::of(Events::open(&client, &url(&server, "events"), None).await);
    let mut shed = held.remove(0);
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while shed.chunk().await.unwrap().is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "the oldest of the hoarder's answers ended");
    // Now 127.0.0.2 holds 2, 127.0.0.3 and 127.0.0.1 one each: a newcomer from
    // 127.0.0.4 sheds one of 127.0.0.2's again; 127.0.0.3's single one is never shed.
    let late = client_from("127.0.0.4");
    let response = Events::open(&late, &url(&server, "events"), None).await;
    assert_eq!(response.status(), 200);
    // Four addresses hold one each: a newcomer from 127.0.0.5 finds no address holding
    // more than its own would, so nobody is shed for it: 503.
    let response = Events::open(&client_from("127.0.0.5"), &url(&server, "events"), None).await;
    problem(response, 503).await;
    // The legitimate subscriber is served.
    let id = "urn:example:after-shed";
    assert_eq!(
        put(&client, &server, id, &td(Some(id), "toggle")).await,
        201
    );
    let (_, event, data) = reader.next().await;
    assert_eq!(event, "thing_created");
    assert_eq!(data, json!({"id": id}));
    drop(single);
}

/// The directory's own TD says what each form needs: with a DID and signed writes, the
/// description's default is `nosec_sc` (the reads are open to anyone, though the node's
/// interface has no open affordance), reads name `nosec_sc`, writes `didwba_sc`; without
/// signed writes, writes are open too.
#[tokio::test]
async fn the_directory_td_says_reads_are_open_and_writes_signed_when_required() {
    for require in [true, false] {
        let store = Arc::new(MemoryDirectoryStore::new());
        let directory = Directory::new(store, DirectoryLimits::default()).unwrap();
        let agent = build(
            Node::builder("Directory")
                .directory(DirectoryService::new(directory).require_signatures(require))
                .keys(concord_node::Keys::generate())
                .security(loopback_security())
                .limits(quick_limits()),
        );
        let server = serve(&agent).await;
        let validated = served_description(&server).await;
        assert!(validated.report.is_valid(), "{:?}", validated.report);
        let td: Value = serde_json::from_slice(&served_description_bytes(&server).await).unwrap();
        let default = td["security"].to_string();
        assert!(default.contains("nosec_sc"), "default security {default}");
        let security =
            |affordance: &str, name: &str| td[affordance][name]["forms"][0]["security"].to_string();
        assert!(security("properties", "things").contains("nosec_sc"));
        assert!(security("actions", "retrieveThing").contains("nosec_sc"));
        assert!(security("events", "thingCreated").contains("nosec_sc"));
        let write = if require { "didwba_sc" } else { "nosec_sc" };
        for action in [
            "createThing",
            "createAnonymousThing",
            "updateThing",
            "deleteThing",
        ] {
            assert!(
                security("actions", action).contains(write),
                "{action} (signatures required: {require}): {}",
                security("actions", action)
            );
        }
    }
}

/// A write refused at its quota (429) that purged an expired TD first still wakes the
/// notifications: the `thing_deleted` event reaches a subscriber at once, not at the next
/// purge (an hour here) or the next successful write.
#[tokio::test]
async fn a_refused_write_that_purged_wakes_the_deletion_event() {
    let mut limits = DirectoryLimits::default();
    limits.min_ttl = Duration::from_secs(1);
    limits.max_entries_per_registrant = 1;
    let store = Arc::new(MemoryDirectoryStore::new());
    let directory = Directory::new(store, limits).unwrap();
    let agent = build(
        Node::builder("Directory")
            .directory(DirectoryService::new(directory).purge_interval(Duration::from_secs(3_600)))
            .limits(quick_limits()),
    );
    let server = serve(&agent).await;
    let client = client_from("127.0.0.1");
    let mut deleted =
        Events::of(Events::open(&client, &url(&server, "events/thing_deleted"), None).await);
    // Another address registers a TD that expires in a second.
    let other = client_from("127.0.0.2");
    let brief = "urn:example:brief";
    let mut short = td(Some(brief), "toggle");
    short["registration"] = json!({"ttl": 1});
    assert_eq!(put(&other, &server, brief, &short).await, 201);
    // The registrant holds its quota of one.
    let lasting = "urn:example:lasting";
    assert_eq!(
        put(&client, &server, lasting, &td(Some(lasting), "toggle")).await,
        201
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    // One more is over its quota: the directory purges expired TDs, then refuses.
    let more = "urn:example:more";
    assert_eq!(
        put(&client, &server, more, &td(Some(more), "toggle")).await,
        429
    );
    let (_, event, data) = deleted.next().await;
    assert_eq!(event, "thing_deleted");
    assert_eq!(data, json!({"id": brief}));
}

/// `method` on `target` with `body`, signed by `signer` (RFC 9421) with `nonce`, from
/// `client`.
async fn signed(
    client: &reqwest::Client,
    signer: &Identity,
    method: &'static str,
    target: &str,
    nonce: &str,
    body: &str,
) -> reqwest::Response {
    let signature = sign_request(
        signer,
        &RequestTarget {
            method,
            target_uri: target,
        },
        body.as_bytes(),
        now(),
        nonce,
    );
    let mut request = client
        .request(method.parse().unwrap(), target)
        .header(CONTENT_TYPE, "application/td+json")
        .header("signature-input", signature.signature_input)
        .header("signature", signature.signature)
        .body(body.to_owned());
    if let Some(digest) = signature.content_digest {
        request = request.header("content-digest", digest);
    }
    request.send().await.unwrap()
}

/// The node's `allow` rules decide on the directory's operations by its Thing Model's
/// affordance names: an anonymous caller refused is answered 401 with ANP's challenge, a
/// DID refused 403, a DID allowed is served.
#[tokio::test]
async fn the_allow_rules_govern_the_directory_operations_by_affordance_name() {
    let store = Arc::new(MemoryDirectoryStore::new());
    let directory = Directory::new(store, DirectoryLimits::default()).unwrap();
    let allowed = host(document).await;
    let other = host(document).await;
    let only = |_: &str| {
        concord_node::Allow::Dids(vec![concord_node::DidPattern::parse(
            allowed.identity.did().as_str(),
        )
        .unwrap()])
    };
    let agent = build(
        Node::builder("Directory")
            .directory(DirectoryService::new(directory))
            .allow("createThing", only("createThing"))
            .allow("updateThing", only("updateThing"))
            .allow("searchJSONPath", only("searchJSONPath"))
            .security(loopback_security())
            .limits(quick_limits()),
    );
    let server = serve(&agent).await;
    let stranger = client_from("127.0.0.2");
    let id = "urn:example:guarded";
    let target = url(&server, &format!("things/{id}"));
    let body = td(Some(id), "toggle").to_string();

    // Anonymous: 401 with ANP's challenge, for a write and for a read.
    let response = stranger
        .put(&target)
        .header(CONTENT_TYPE, "application/td+json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert!(response.headers().contains_key("www-authenticate"));
    problem(response, 401).await;
    let search = url(&server, "search/jsonpath?query=%24");
    let response = stranger.get(&search).send().await.unwrap();
    assert!(response.headers().contains_key("www-authenticate"));
    problem(response, 401).await;

    // Another DID: 403.
    let response = signed(
        &stranger,
        &other.identity,
        "PUT",
        &target,
        "allow-nonce-1",
        &body,
    )
    .await;
    problem(response, 403).await;
    let response = signed(
        &stranger,
        &other.identity,
        "GET",
        &search,
        "allow-nonce-2",
        "",
    )
    .await;
    problem(response, 403).await;
    // The DID allowed: served.
    let legit = client_from("127.0.0.1");
    let response = signed(
        &legit,
        &allowed.identity,
        "PUT",
        &target,
        "allow-nonce-3",
        &body,
    )
    .await;
    assert_eq!(response.status(), 201);
    let response = signed(
        &legit,
        &allowed.identity,
        "GET",
        &search,
        "allow-nonce-4",
        "",
    )
    .await;
    assert_eq!(response.status(), 200);
    // An operation no rule names stays open.
    let response = stranger.get(&target).send().await.unwrap();
    assert_eq!(response.status(), 200);
}

/// A TD registered without a signature is changed only from the address that registered
/// it: a stranger from 127.0.0.2 is refused 403.
#[tokio::test]
async fn an_anonymous_entry_is_changed_only_from_its_registrants_address() {
    let (_agent, server) = served(DirectoryLimits::default()).await;
    let owner = client_from("127.0.0.1");
    let stranger = client_from("127.0.0.2");
    let id = "urn:example:anonymous-owned";
    assert_eq!(
        put(&owner, &server, id, &td(Some(id), "toggle")).await,
        StatusCode::CREATED
    );
    assert_eq!(
        put(&stranger, &server, id, &td(Some(id), "mine")).await,
        StatusCode::FORBIDDEN
    );
    let target = url(&server, &format!("things/{id}"));
    let response = stranger.delete(&target).send().await.unwrap();
    problem(response, 403).await;
    let response = stranger
        .patch(&target)
        .header(CONTENT_TYPE, "application/merge-patch+json")
        .body(r#"{"title":"mine"}"#)
        .send()
        .await
        .unwrap();
    problem(response, 403).await;
    assert_eq!(
        put(&owner, &server, id, &td(Some(id), "again")).await,
        StatusCode::NO_CONTENT
    );
    let response = owner.delete(&target).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
}
