//! Errors at the node's edge are typed: what was wrong and where is a field, not a
//! sentence to take apart. Their messages are the ones the node always gave.

use concord_fixtures::weather;
use concord_node::{
    check_description_id, check_public_url, Node, Payload, PayloadError, PublicUrlError,
    PublishError,
};
use serde_json::json;

use crate::support::build;

#[tokio::test]
async fn publishing_data_its_schema_refuses_says_which_payload_and_where() {
    let agent = build(weather::agent(Node::builder(weather::TITLE)));
    let publisher = agent.node.publisher();
    let refused = publisher
        .publish(weather::USER_FEEDBACK_RECEIVED, json!({"rating": 9}))
        .unwrap_err();
    let PublishError::Invalid(PayloadError::Invalid {
        payload,
        name,
        pointer,
        ..
    }) = &refused
    else {
        panic!("{refused:?}")
    };
    assert_eq!(*payload, Payload::Event);
    assert_eq!(name, weather::USER_FEEDBACK_RECEIVED);
    assert_eq!(pointer, "/rating");
    assert!(
        refused
            .to_string()
            .starts_with("the data of the event `userFeedbackReceived` is invalid at /rating: "),
        "{refused}"
    );
    assert!(matches!(
        publisher.publish("noSuchEvent", json!({})),
        Err(PublishError::Unknown { .. })
    ));
}

#[test]
fn a_public_url_is_refused_by_kind() {
    let refused = |url: &str| check_public_url(url).unwrap_err();
    assert!(matches!(
        refused("shop.example.com"),
        PublicUrlError::NotAUrl { .. }
    ));
    assert!(matches!(
        refused("ftp://shop.example.com/"),
        PublicUrlError::Scheme { .. }
    ));
    assert!(matches!(
        refused("https://user@shop.example.com/"),
        PublicUrlError::Credentials { .. }
    ));
    let query = refused("https://shop.example.com/?a=1");
    assert!(matches!(query, PublicUrlError::QueryOrFragment { .. }));
    assert_eq!(
        query.to_string(),
        "\"https://shop.example.com/?a=1\" must not have a query or fragment"
    );
}

#[test]
fn a_description_id_is_refused_with_the_validators_report() {
    let refused = check_description_id("Shop", "shop").unwrap_err();
    assert_eq!(refused.id, "shop");
    let problem = refused.report.errors().next().unwrap();
    assert_eq!(problem.pointer, "/id");
    assert_eq!(refused.to_string(), problem.message);
}
