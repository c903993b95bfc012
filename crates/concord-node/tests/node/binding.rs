//! A binding added through the public seam (`NodeBuilder::binding`): its forms in the
//! served description, its routes served over real HTTP on loopback behind the node's
//! admission (the per-address request budget), a route overlapping the node's refused by
//! name. The legitimate caller is 127.0.0.1; the attacker plays from 127.0.0.2.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use concord_describe::{Form, OneOrMany, Operation};
use concord_node::axum::extract::{ConnectInfo, Path};
use concord_node::axum::routing::{get, post};
use concord_node::axum::Router;
use concord_node::{Affordance, Binding, Limits, Node, NodeError, Site};
use tokio::sync::Notify;

use crate::support::*;

/// A test-only HTTP binding: every action is invoked with `POST /echo/{name}`, which
/// answers the action's name, the caller's address and the body.
struct Echo;

impl Binding for Echo {
    fn name(&self) -> &str {
        "echo"
    }

    fn forms(&self, site: &Site, affordance: Affordance<'_>) -> Vec<Form> {
        match affordance {
            Affordance::Action { name, .. } => {
                let mut form = Form::new(site.http_url(&format!("echo/{name}")));
                form.op = Some(OneOrMany::One(Operation::InvokeAction));
                vec![form]
            }
            _ => Vec::new(),
        }
    }

    fn routes(&self, _: &Site) -> Router {
        Router::new().route(
            "/echo/{name}",
            post(
                |Path(name): Path<String>,
                 ConnectInfo(remote): ConnectInfo<SocketAddr>,
                 body: String| async move {
                    format!("{name} from {} said {body}", remote.ip())
                },
            ),
        )
    }
}

/// A binding with a long answer: `GET /wait` says it is waiting (`entered`), then answers
/// once the server drains.
struct LongPoll {
    entered: Arc<Notify>,
}

impl Binding for LongPoll {
    fn name(&self) -> &str {
        "long poll"
    }

    fn forms(&self, _: &Site, _: Affordance<'_>) -> Vec<Form> {
        Vec::new()
    }

    fn routes(&self, site: &Site) -> Router {
        let (entered, site) = (Arc::clone(&self.entered), site.clone());
        Router::new().route(
            "/wait",
            get(move || async move {
                entered.notify_one();
                site.draining().await;
                assert!(site.is_draining());
                "the node drains"
            }),
        )
    }
}

/// A binding whose route is the node's own description's.
struct Squatter;

impl Binding for Squatter {
    fn name(&self) -> &str {
        "squatter"
    }

    fn forms(&self, _: &Site, _: Affordance<'_>) -> Vec<Form> {
        Vec::new()
    }

    fn routes(&self, _: &Site) -> Router {
        Router::new().route("/.well-known/wot", get(|| async { "not the description" }))
    }
}

fn provider_with_binding(limits: Limits, binding: impl Binding) -> Agent {
    build(
        Node::builder("Product agent")
            .action(catalogue::action(), catalogue::answer)
            .binding(binding)
            .limits(limits),
    )
}

/// An HTTP client whose connections come from `source`.
fn client_from(source: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(source.parse::<IpAddr>().unwrap())
        .timeout(std::time::Duration::from_secs(5))
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_binding_adds_its_forms_to_the_description_and_serves_its_routes() {
    let provider = provider_with_binding(quick_limits(), Echo);
    let server = serve(&provider).await;
    let validated = served_description(&server).await;
    assert_eq!(
        validated.report.warning_count(),
        0,
        "{:?}",
        validated.report
    );
    let action = validated
        .thing
        .actions
        .as_ref()
        .and_then(|actions| actions.get("getProductInfo"))
        .expect("the action is described");
    // The WebSocket's form first, then the added binding's.
    let hrefs: Vec<&str> = action.forms.iter().map(|form| form.href.as_str()).collect();
    let echo = format!("{}echo/getProductInfo", server.url());
    assert_eq!(hrefs, [server.endpoint(), echo.clone()]);
    assert_eq!(
        action.forms[1].op,
        Some(OneOrMany::One(Operation::InvokeAction))
    );

    // The form's href is served, with the caller's address.
    let response = client_from("127.0.0.1")
        .post(&action.forms[1].href)
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.text().await.unwrap(),
        "getProductInfo from 127.0.0.1 said hello"
    );
    // The node's own routes and the WebSocket are still there.
    let mut socket = raw_socket(&server).await;
    hello(&mut socket, None).await;
}

#[tokio::test]
async fn a_bindings_routes_spend_the_per_address_request_budget() {
    let provider = provider_with_binding(
        Limits {
            request_rate_per_address: 1,
            request_burst_per_address: 5,
            ..quick_limits()
        },
        Echo,
    );
    let server = serve(&provider).await;
    let url = format!("{}echo/getProductInfo", server.url());
    let attacker = client_from("127.0.0.2");
    let (mut served, mut refused) = (0, 0);
    for _ in 0..20 {
        let response = attacker.post(&url).body("flood").send().await.unwrap();
        match response.status().as_u16() {
            200 => served += 1,
            429 => {
                assert_eq!(response.headers()["retry-after"], "1");
                let said = response.text().await.unwrap();
                assert!(said.contains("request"), "{said}");
                refused += 1;
            }
            other => panic!("unexpected status {other}"),
        }
    }
    assert!(refused > 0, "20 requests, none refused ({served} served)");
    assert!((5..20).contains(&served), "{served} served");
    // The legitimate caller's address has its own budget, on the binding's route too.
    let response = client_from("127.0.0.1")
        .post(&url)
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn a_binding_whose_routes_overlap_the_nodes_is_refused_by_name() {
    let provider = provider_with_binding(quick_limits(), Squatter);
    let error = provider.node.serve("127.0.0.1:0").await.unwrap_err();
    assert!(matches!(error, NodeError::Config(_)), "{error:?}");
    let said = error.to_string();
    assert!(said.contains("`squatter`"), "{said}");
    assert!(said.contains("/.well-known/wot"), "{said}");
}

#[tokio::test]
async fn a_bindings_long_answer_ends_when_the_server_drains() {
    let entered = Arc::new(Notify::new());
    let binding = LongPoll {
        entered: Arc::clone(&entered),
    };
    let provider = provider_with_binding(quick_limits(), binding);
    let server = serve(&provider).await;
    let url = format!("{}wait", server.url());
    let waiting = tokio::spawn(async move { client_from("127.0.0.1").get(&url).send().await });
    tokio::time::timeout(std::time::Duration::from_secs(5), entered.notified())
        .await
        .expect("the request reached the binding");
    // A grace far longer than the test: the answer ends the drain, not the grace.
    let shutdown = tokio::spawn(server.shutdown_within(std::time::Duration::from_secs(600)));
    let response = waiting.await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "the node drains");
    tokio::time::timeout(std::time::Duration::from_secs(30), shutdown)
        .await
        .expect("the server drained")
        .unwrap()
        .unwrap();
}
