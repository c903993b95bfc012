//! `GET /.well-known/wot`: the description a peer reads before connecting.

use concord_describe::MetaProtocol;
use concord_proto::{Capability, Role};
use concord_store::NewConsensus;

use crate::support::*;

#[tokio::test]
async fn serves_a_valid_description_with_the_endpoint_and_real_capabilities() {
    let agent = provider();
    agent
        .store()
        .add_consensus(
            &NewConsensus::new(
                "https://protocols.example/product-info/v1",
                SEED_PRODUCT_INFO,
            )
            .with_handler(
                Role::Provider,
                "function decodeRequest(m) { return m; } function encodeResponse(r) { return r; }",
            ),
        )
        .unwrap();
    // A registry entry without provider code is not advertised.
    agent
        .store()
        .add_consensus(&NewConsensus::new(
            "https://protocols.example/other/v1",
            "# Other\n",
        ))
        .unwrap();
    let server = serve(&agent).await;
    let response = reqwest::get(server.description_url()).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "application/td+json"
    );
    let bytes = response.bytes().await.unwrap();
    let thing = concord_describe::parse(&bytes).unwrap().thing;
    assert_eq!(thing.title, "Product agent");
    let actions = concord_negotiate::published_actions(&thing);
    assert_eq!(actions.len(), 1);
    assert_eq!(actions[0].name, "getProductInfo");
    assert_eq!(actions[0].input, catalogue::action().input);
    let meta = thing.meta_protocol.unwrap();
    assert_eq!(meta.endpoint, server.endpoint());
    assert!(meta.endpoint.starts_with("ws://127.0.0.1:"));
    assert!(meta.endpoint.ends_with("/concord"));
    assert_eq!(meta.versions, vec![concord_proto::META_PROTOCOL_VERSION]);
    // No LLM: no natural language.
    assert!(meta.supports(Capability::TestCasesNegotiation));
    assert!(meta.supports(Capability::FixErrorNegotiation));
    assert!(meta.supports(Capability::VerificationProtocol));
    assert!(!meta.supports(Capability::NaturalLanguageNegotiation));
    assert!(!meta.supports(Capability::NaturalLanguageProtocol));
    let consensus = meta.consensus_protocols.unwrap();
    assert_eq!(consensus.len(), 1);
    assert_eq!(
        consensus[0].uri,
        "https://protocols.example/product-info/v1"
    );
    assert_eq!(
        consensus[0].hash,
        concord_proto::ProtocolHash::of_text(SEED_PRODUCT_INFO)
    );
}

#[tokio::test]
async fn advertises_natural_language_only_with_an_llm() {
    let llm = concord_llm_script::ScriptServer::start([]).await.unwrap();
    let agent = build(
        concord_node::Node::builder("Talker")
            .action(catalogue::action(), catalogue::answer)
            .llm(concord_llm::LlmConfig::new(
                llm.base_url(),
                "scripted-model",
            )),
    );
    assert!(agent.node.has_llm());
    let server = serve(&agent).await;
    let meta = served_meta(&server).await;
    assert!(meta.supports(Capability::NaturalLanguageNegotiation));
    assert!(meta.supports(Capability::NaturalLanguageProtocol));
    // Serving the description asks the LLM nothing.
    assert!(llm.requests().is_empty());
}

#[tokio::test]
async fn the_description_follows_the_consensus_registry_while_serving() {
    let agent = provider();
    let server = serve(&agent).await;
    let consensus = || async { served_meta(&server).await.consensus_protocols };
    assert_eq!(consensus().await, None);
    assert_eq!(consensus().await, None);
    // A protocol registered while the node serves is listed at the next request.
    let uri = "https://protocols.example/product-info/v1";
    agent
        .store()
        .add_consensus(&NewConsensus::new(uri, SEED_PRODUCT_INFO).with_handler(
            Role::Provider,
            "function decodeRequest(m) { return m; } function encodeResponse(r) { return r; }",
        ))
        .unwrap();
    let listed = consensus().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].uri, uri);
    // And one removed is no longer listed.
    agent.store().remove_consensus(uri).unwrap();
    assert_eq!(consensus().await, None);
}

#[tokio::test]
async fn the_description_has_an_etag_that_follows_the_consensus_registry() {
    let agent = provider();
    let server = serve(&agent).await;
    let client = reqwest::Client::new();
    let get = |etag: Option<String>| {
        let mut request = client.get(server.description_url());
        if let Some(etag) = etag {
            request = request.header("if-none-match", etag);
        }
        request.send()
    };
    let first = get(None).await.unwrap();
    assert_eq!(first.status(), 200);
    assert_eq!(first.headers()["cache-control"], "max-age=60");
    let etag = first.headers()["etag"].to_str().unwrap().to_owned();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
    // Unchanged: 304 with no body, the same tag (weakly compared; among others too).
    for asked in [
        etag.clone(),
        format!("W/{etag}"),
        format!("\"other\", {etag}"),
        "*".to_owned(),
    ] {
        let unchanged = get(Some(asked)).await.unwrap();
        assert_eq!(unchanged.status(), 304);
        assert_eq!(unchanged.headers()["etag"], etag.as_str());
        assert_eq!(unchanged.headers()["cache-control"], "max-age=60");
        assert!(unchanged.bytes().await.unwrap().is_empty());
    }
    assert_eq!(
        get(Some("\"other\"".to_owned())).await.unwrap().status(),
        200
    );
    // A consensus protocol registered while serving: a new tag, the whole description.
    let uri = "https://protocols.example/product-info/v1";
    agent
        .store()
        .add_consensus(&NewConsensus::new(uri, SEED_PRODUCT_INFO).with_handler(
            Role::Provider,
            "function decodeRequest(m) { return m; } function encodeResponse(r) { return r; }",
        ))
        .unwrap();
    let changed = get(Some(etag.clone())).await.unwrap();
    assert_eq!(changed.status(), 200);
    let new_etag = changed.headers()["etag"].to_str().unwrap().to_owned();
    assert_ne!(new_etag, etag);
    let thing = concord_describe::parse(&changed.bytes().await.unwrap())
        .unwrap()
        .thing;
    assert_eq!(
        thing.meta_protocol.unwrap().consensus_protocols.unwrap()[0].uri,
        uri
    );
    // Removed again: the first document, the first tag.
    agent.store().remove_consensus(uri).unwrap();
    assert_eq!(get(Some(etag.clone())).await.unwrap().status(), 304);
}

/// The meta-protocol part of the server's description, as served now.
async fn served_meta(server: &concord_node::Server) -> MetaProtocol {
    served_description(server)
        .await
        .thing
        .meta_protocol
        .unwrap()
}
