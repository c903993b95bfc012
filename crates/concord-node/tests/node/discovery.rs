//! The discovery documents every agent serves (ANP's `/.well-known/agent-descriptions` and
//! `ad.json`, A2A's agent card) and the services of its DID document, fetched over loopback
//! as a peer would.

use concord_node::{Did, Keys, Node, Owner, Server};
use reqwest::header::{ETAG, IF_NONE_MATCH};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::support::{build, catalogue, loopback_security, quick_limits, serve, Agent};

/// The product provider, with a DID when `keys` is given, and an owner.
fn provider(keys: Option<Keys>) -> Agent {
    let mut builder = Node::builder("Product agent")
        .description("Product information for a small shop.")
        .action(catalogue::action(), catalogue::answer)
        .owner(Owner::organization("Small Shop").with_url("https://shop.example"))
        .security(loopback_security())
        .limits(quick_limits());
    if let Some(keys) = keys {
        builder = builder.keys(keys);
    }
    build(builder)
}

fn at(server: &Server, path: &str) -> String {
    format!("{}{}", server.url(), path.trim_start_matches('/'))
}

async fn get_json(url: &str) -> (reqwest::header::HeaderMap, Value) {
    let response = reqwest::get(url).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{url}");
    let headers = response.headers().clone();
    let body = response.bytes().await.unwrap();
    (headers, serde_json::from_slice(&body).unwrap())
}

#[tokio::test]
async fn an_agent_with_a_did_lists_its_ad_json_and_serves_it_and_its_agent_card() {
    let agent = provider(Some(Keys::generate()));
    let server = serve(&agent).await;
    let did = server.did().unwrap().to_owned();
    let ad_url = at(&server, "ad.json");

    let (headers, page) = get_json(&at(&server, ".well-known/agent-descriptions")).await;
    assert_eq!(headers["content-type"], "application/ld+json");
    assert_eq!(page["@type"], "CollectionPage");
    assert_eq!(
        page["items"],
        json!([{"@type": "ad:AgentDescription", "name": "Product agent", "@id": ad_url}])
    );
    assert!(page.get("next").is_none());

    let (_, ad) = get_json(&ad_url).await;
    assert_eq!(ad["protocolType"], "ANP");
    assert_eq!(ad["type"], "AgentDescription");
    assert_eq!(ad["url"], ad_url);
    assert_eq!(ad["did"], did);
    assert_eq!(ad["description"], "Product information for a small shop.");
    assert_eq!(ad["owner"]["name"], "Small Shop");
    assert_eq!(
        ad["securityDefinitions"]["didwba_sc"],
        json!({"scheme": "didwba", "in": "header", "name": "Authorization"})
    );
    assert_eq!(ad["security"], "didwba_sc");
    assert_eq!(ad["interfaces"][0]["url"], server.endpoint());
    assert_eq!(ad["interfaces"][1]["url"], server.description_url());

    let (_, card) = get_json(&at(&server, ".well-known/agent-card.json")).await;
    assert_eq!(card["name"], "Product agent");
    assert_eq!(card["supportedInterfaces"][0]["url"], server.endpoint());
    assert_eq!(card["skills"][0]["id"], "getProductInfo");
    assert_eq!(card["capabilities"]["streaming"], false);
    assert_eq!(card["provider"]["organization"], "Small Shop");
    assert!(card["securitySchemes"]["didwba_sc"].is_object());
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn each_document_has_a_strong_etag_that_if_none_match_answers_with_304_and_head_too() {
    let agent = provider(Some(Keys::generate()));
    let server = serve(&agent).await;
    let client = reqwest::Client::new();
    for path in [
        ".well-known/agent-descriptions",
        "ad.json",
        ".well-known/agent-card.json",
    ] {
        let url = at(&server, path);
        let first = client.get(&url).send().await.unwrap();
        let etag = first.headers()[ETAG].clone();
        let body = first.bytes().await.unwrap();
        assert!(etag.to_str().unwrap().starts_with('"'), "{path}: {etag:?}");

        let again = client
            .get(&url)
            .header(IF_NONE_MATCH, etag.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED, "{path}");
        assert_eq!(again.headers()[ETAG], etag);
        assert!(again.bytes().await.unwrap().is_empty());

        let other = client
            .get(&url)
            .header(IF_NONE_MATCH, "\"someone-else\"")
            .send()
            .await
            .unwrap();
        assert_eq!(other.status(), StatusCode::OK, "{path}");
        assert_eq!(other.bytes().await.unwrap(), body);

        let head = client.head(&url).send().await.unwrap();
        assert_eq!(head.status(), StatusCode::OK, "{path}");
        assert_eq!(head.headers()[ETAG], etag);
    }
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_agent_without_a_did_lists_no_anp_agent_and_still_has_an_agent_card() {
    let agent = provider(None);
    let server = serve(&agent).await;
    let (_, page) = get_json(&at(&server, ".well-known/agent-descriptions")).await;
    assert_eq!(page["items"], json!([]));
    let ad = reqwest::get(at(&server, "ad.json")).await.unwrap();
    assert_eq!(ad.status(), StatusCode::NOT_FOUND);
    assert!(ad.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/problem+json"));
    let problem: serde_json::Value = ad.json().await.unwrap();
    assert_eq!(problem["status"], 404);
    assert!(problem["detail"].as_str().unwrap().contains("no DID"));
    let (_, card) = get_json(&at(&server, ".well-known/agent-card.json")).await;
    assert_eq!(card["skills"][0]["id"], "getProductInfo");
    assert!(card.get("securitySchemes").is_none());
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_did_document_names_the_ad_json_and_the_thing_description() {
    let agent = provider(Some(Keys::generate()));
    let server = serve(&agent).await;
    let did: Did = server.did().unwrap().parse().unwrap();
    let (_, document) = get_json(&at(&server, &did.document_path())).await;
    let services = document["service"].as_array().unwrap();
    let service = |kind: &str| {
        services
            .iter()
            .find(|service| service["type"] == kind)
            .unwrap_or_else(|| panic!("no {kind} service in {services:?}"))
            .clone()
    };
    assert_eq!(
        service("AgentDescription")["serviceEndpoint"],
        at(&server, "ad.json")
    );
    assert_eq!(
        service("WotThing"),
        json!({"id": format!("{did}#td"), "type": "WotThing", "serviceEndpoint": server.description_url()})
    );
    server.shutdown().await.unwrap();
}

/// How long a browse listens for announcements.
const BROWSE: std::time::Duration = std::time::Duration::from_secs(3);

#[tokio::test]
async fn an_agent_announced_with_dns_sd_is_found_by_browsing_and_gone_after_shutdown() {
    let mut builder = Node::builder("Announced agent")
        .action(catalogue::action(), catalogue::answer)
        .mdns(true);
    builder = builder.limits(quick_limits());
    let agent = build(builder);
    let server = agent.node.serve("0.0.0.0:0").await.unwrap();
    let port = server.local_addr().port();
    let ours = |found: &concord_node::FoundThing| found.port == port;
    let found = concord_node::browse_mdns(BROWSE, false).await.unwrap();
    let thing = found
        .iter()
        .find(|found| ours(found))
        .unwrap_or_else(|| panic!("not found among {found:?}"));
    assert_eq!(thing.kind, "Thing");
    assert_eq!(thing.scheme, "http");
    assert_eq!(thing.td, "/.well-known/wot");
    assert!(thing.fullname.starts_with("Announced agent"), "{thing:?}");
    let description = reqwest::get(thing.description_url()).await.unwrap();
    assert_eq!(description.status(), StatusCode::OK);
    // Not a directory.
    let directories = concord_node::browse_mdns(BROWSE, true).await.unwrap();
    assert!(!directories.iter().any(ours), "{directories:?}");

    server.shutdown().await.unwrap();
    let after = concord_node::browse_mdns(BROWSE, false).await.unwrap();
    assert!(!after.iter().any(ours), "still announced: {after:?}");
}

/// A directory (with a DID, announced with DNS-SD) holding `agents`' descriptions,
/// registered anonymously with `POST /things`.
async fn directory_of(agents: &[&Server]) -> (Agent, Server) {
    use concord_directory::{Directory, DirectoryLimits, MemoryDirectoryStore};
    let directory = Directory::new(
        std::sync::Arc::new(MemoryDirectoryStore::new()),
        DirectoryLimits::default(),
    )
    .unwrap();
    let node = build(
        Node::builder("Directory")
            .directory(concord_node::DirectoryService::new(directory))
            .keys(Keys::generate())
            .mdns(true)
            .limits(quick_limits()),
    );
    let server = node.node.serve("0.0.0.0:0").await.unwrap();
    let client = reqwest::Client::new();
    for agent in agents {
        let td = crate::support::served_description_bytes(agent).await;
        let response = client
            .post(at(&server, "things"))
            .header("content-type", "application/td+json")
            .body(td)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
    }
    (node, server)
}

#[tokio::test]
async fn a_directory_lists_its_registered_anp_agents_page_by_page_and_introduces_itself() {
    let (first, second, plain) = (
        provider(Some(Keys::generate())),
        provider(Some(Keys::generate())),
        provider(None),
    );
    let (first, second, plain) = (
        serve(&first).await,
        serve(&second).await,
        serve(&plain).await,
    );
    let (_directory, server) = directory_of(&[&first, &second, &plain]).await;

    let mut listed = Vec::new();
    let mut pages = 0;
    let mut next = Some(at(&server, ".well-known/agent-descriptions?limit=1"));
    while let Some(url) = next {
        pages += 1;
        assert!(pages <= 3, "more pages than registrations");
        let (headers, page) = get_json(&url).await;
        assert_eq!(headers["content-type"], "application/ld+json");
        assert_eq!(page["@type"], "CollectionPage");
        for item in page["items"].as_array().unwrap() {
            assert_eq!(item["@type"], "ad:AgentDescription");
            assert_eq!(item["name"], "Product agent");
            listed.push(item["@id"].as_str().unwrap().to_owned());
        }
        next = page["next"].as_str().map(str::to_owned);
    }
    assert_eq!(pages, 3);
    listed.sort();
    let mut expected = vec![at(&first, "ad.json"), at(&second, "ad.json")];
    expected.sort();
    assert_eq!(listed, expected, "the agent without a DID is no ANP agent");

    let bad = reqwest::get(at(&server, ".well-known/agent-descriptions?offset=x"))
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);

    // Its DID document introduces a directory, and so does its DNS-SD announcement.
    let did: Did = server.did().unwrap().parse().unwrap();
    let (_, document) = get_json(&at(&server, &did.document_path())).await;
    assert!(
        document["service"]
            .as_array()
            .unwrap()
            .iter()
            .any(|service| service["type"] == "WotDirectory"
                && service["serviceEndpoint"] == server.description_url()),
        "{document:#}"
    );
    let directories = concord_node::browse_mdns(BROWSE, true).await.unwrap();
    let found = directories
        .iter()
        .find(|found| found.port == server.local_addr().port())
        .unwrap_or_else(|| panic!("not announced: {directories:?}"));
    assert_eq!(found.kind, "Directory");
    server.shutdown().await.unwrap();
}
