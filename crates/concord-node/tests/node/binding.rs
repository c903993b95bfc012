//! A binding added through the public seam (`NodeBuilder::binding`): its forms in the
//! served description, its routes served over real HTTP on loopback behind the node's
//! admission (the per-address request budget), a route overlapping the node's refused by
//! name; a binding serving the node's actions and properties through `Site::thing`, with
//! the node's checks (who may call, the schemas, the backend call budget), and its own
//! security schemes. The legitimate caller is 127.0.0.1; the attacker plays from 127.0.0.2.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use concord_describe::{Form, OneOrMany, Operation, PropertyBuilder, SecurityScheme};
use concord_negotiate::ActionSpec;
use concord_node::axum::extract::{ConnectInfo, Path};
use concord_node::axum::http::StatusCode;
use concord_node::axum::routing::{get, post};
use concord_node::axum::Router;
use concord_node::{
    ActionError, Affordance, Allow, Binding, Caller, Described, Limits, Node, NodeError, Property,
    Site, ThingError,
};
use serde_json::json;
use tokio::sync::{watch, Notify};

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

/// A provider serving `binding` beside the WebSocket alone (the node's own WoT HTTP
/// binding off: its forms would come between the WebSocket's and the added binding's).
fn provider_with_binding(limits: Limits, binding: impl Binding) -> Agent {
    build(
        Node::builder("Product agent")
            .action(catalogue::action(), catalogue::answer)
            .http_binding(false)
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

/// A test-only HTTP binding over the node's affordances, through [`Site::thing`] only:
/// `POST /echo/actions/{name}` invokes an action with the JSON body as input, `GET` and
/// `PUT /echo/properties/{name}` read and write a property; an anonymous caller, counted
/// by its client address. A refusal answers [`ThingError::status`] and the error's text.
struct Invoke;

/// An answer of the [`Invoke`] binding.
fn answer(result: Result<serde_json::Value, ThingError>) -> (StatusCode, String) {
    match result {
        Ok(value) => (StatusCode::OK, value.to_string()),
        Err(error) => (
            StatusCode::from_u16(error.status()).unwrap(),
            error.to_string(),
        ),
    }
}

impl Binding for Invoke {
    fn name(&self) -> &str {
        "invoke"
    }

    fn forms(&self, site: &Site, affordance: Affordance<'_>) -> Vec<Form> {
        let (path, op) = match affordance {
            Affordance::Action { name, .. } => {
                (format!("echo/actions/{name}"), Operation::InvokeAction)
            }
            Affordance::Property { name, .. } => {
                (format!("echo/properties/{name}"), Operation::ReadProperty)
            }
            _ => return Vec::new(),
        };
        let mut form = Form::new(site.http_url(&path));
        form.op = Some(OneOrMany::One(op));
        vec![form]
    }

    fn routes(&self, site: &Site) -> Router {
        let thing = Arc::clone(site.thing());
        let (reader, writer) = (Arc::clone(&thing), Arc::clone(&thing));
        Router::new()
            .route(
                "/echo/actions/{name}",
                post(
                    move |Path(name): Path<String>,
                          ConnectInfo(remote): ConnectInfo<SocketAddr>,
                          body: String| async move {
                        let Ok(input) = serde_json::from_str(&body) else {
                            return (StatusCode::BAD_REQUEST, "not JSON".to_owned());
                        };
                        let caller = Caller::Anonymous;
                        answer(thing.invoke(&caller, remote.ip(), &name, input).await)
                    },
                ),
            )
            .route(
                "/echo/properties/{name}",
                get(move |Path(name): Path<String>| async move {
                    answer(reader.read_property(&Caller::Anonymous, &name))
                })
                .put(move |Path(name): Path<String>, body: String| async move {
                    let Ok(value) = serde_json::from_str(&body) else {
                        return (StatusCode::BAD_REQUEST, "not JSON".to_owned());
                    };
                    let written = writer.write_property(&Caller::Anonymous, &name, value);
                    answer(written.map(|()| serde_json::Value::Null))
                }),
            )
    }
}

/// The held action's input schema and output: any object.
fn held_action(name: &str) -> ActionSpec {
    ActionSpec {
        name: name.into(),
        description: format!("The {name} action: answers its input once the gate opens."),
        input: json!({"type": "object"}),
        output: json!({"type": "object"}),
    }
}

/// A provider with the [`Invoke`] binding: the catalogue's `getProductInfo`; `held`, whose
/// calls answer once `gate` turns true; `locked`, for callers that proved a DID only; a
/// writable property `units` and a read-only `model`.
fn provider_with_invoke(limits: Limits, gate: watch::Receiver<bool>) -> Agent {
    let held = move |input: serde_json::Value| {
        let mut gate = gate.clone();
        async move {
            let _ = gate.wait_for(|open| *open).await;
            Ok::<_, ActionError>(input)
        }
    };
    let units = json!({"type": "string", "enum": ["metric", "imperial"]});
    build(
        Node::builder("Product agent")
            .action(catalogue::action(), catalogue::answer)
            .action(held_action("held"), held)
            .action(held_action("locked"), |input| async move { Ok(input) })
            .allow("locked", Allow::Authenticated)
            .property("units", Property::new(units, json!("metric")).writable())
            .property(
                "model",
                Property::new(json!({"type": "string"}), json!("m1")),
            )
            .binding(Invoke)
            .limits(limits),
    )
}

#[tokio::test]
async fn a_binding_invokes_actions_through_the_nodes_checks() {
    let (_gate, closed) = watch::channel(false);
    let provider = provider_with_invoke(quick_limits(), closed);
    let server = serve(&provider).await;
    let client = client_from("127.0.0.1");
    let url = |name: &str| format!("{}echo/actions/{name}", server.url());

    // Served: the catalogue's answer.
    let response = client
        .post(url("getProductInfo"))
        .body(catalogue::input(0).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let said: serde_json::Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert_eq!(
        Some(said),
        catalogue::product(catalogue::input(0)["productId"].as_str().unwrap())
    );

    // Input its schema refuses: 400 naming the field, and the backend never ran.
    let response = client
        .post(url("getProductInfo"))
        .body(r#"{"productId": 5}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let said = response.text().await.unwrap();
    assert!(
        said.contains("/productId") && said.contains("getProductInfo"),
        "{said}"
    );

    // The backend's own error keeps its status.
    let response = client
        .post(url("getProductInfo"))
        .body(r#"{"productId": "nothing"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);

    // An action for callers that proved a DID, asked anonymously: 403.
    let response = client.post(url("locked")).body("{}").send().await.unwrap();
    assert_eq!(response.status(), 403);
    let said = response.text().await.unwrap();
    assert!(said.contains("`locked`"), "{said}");

    // An action the node does not have: 404.
    let response = client.post(url("nothing")).body("{}").send().await.unwrap();
    assert_eq!(response.status(), 404);
}

#[tokio::test]
async fn a_stranger_flooding_a_bindings_action_is_refused_by_the_budget_while_others_are_served() {
    let limits = Limits {
        max_backend_calls: 2,
        max_backend_calls_per_address: 1,
        max_backend_waiting_per_address: 1,
        backend_call_wait: std::time::Duration::from_secs(60),
        ..quick_limits()
    };
    let (gate, closed) = watch::channel(false);
    let provider = provider_with_invoke(limits, closed);
    let server = serve(&provider).await;
    let url = |name: &str| format!("{}echo/actions/{name}", server.url());

    // Six calls at once from 127.0.0.2: one runs (held), one waits, four are refused at
    // once by the address's share of the budget.
    const FLOOD: usize = 6;
    let attacker = client_from("127.0.0.2");
    let (answers, mut answered) = tokio::sync::mpsc::unbounded_channel();
    for n in 0..FLOOD {
        let (attacker, answers, url) = (attacker.clone(), answers.clone(), url("held"));
        tokio::spawn(async move {
            let response = attacker
                .post(url)
                .body(format!("{{\"n\": {n}}}"))
                .send()
                .await;
            let _ = answers.send(response.map(|response| response.status().as_u16()));
        });
    }
    let wait = std::time::Duration::from_secs(30);
    for _ in 0..FLOOD - 2 {
        let status = tokio::time::timeout(wait, answered.recv())
            .await
            .expect("a refusal comes at once")
            .unwrap()
            .unwrap();
        assert!([429, 503].contains(&status), "{status}");
    }

    // The legitimate caller's address is served meanwhile.
    let response = client_from("127.0.0.1")
        .post(url("getProductInfo"))
        .body(catalogue::input(1).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    // The stranger's running and waiting calls are served once the gate opens.
    gate.send_replace(true);
    for _ in 0..2 {
        let status = tokio::time::timeout(wait, answered.recv())
            .await
            .expect("the held calls end")
            .unwrap()
            .unwrap();
        assert_eq!(status, 200);
    }
}

#[tokio::test]
async fn a_binding_reads_and_writes_properties_through_their_schemas() {
    let (_gate, closed) = watch::channel(false);
    let provider = provider_with_invoke(quick_limits(), closed);
    let server = serve(&provider).await;
    let client = client_from("127.0.0.1");
    let url = |name: &str| format!("{}echo/properties/{name}", server.url());

    let response = client.get(url("units")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), r#""metric""#);

    let response = client
        .put(url("units"))
        .body(r#""imperial""#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        provider.node.publisher().property("units"),
        Some(json!("imperial"))
    );
    let response = client.get(url("units")).send().await.unwrap();
    assert_eq!(response.text().await.unwrap(), r#""imperial""#);

    // A value its schema refuses, a read-only property, an unknown one.
    let response = client
        .put(url("units"))
        .body(r#""kelvin""#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let response = client
        .put(url("model"))
        .body(r#""m2""#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 405);
    assert_eq!(
        provider.node.publisher().property("model"),
        Some(json!("m1"))
    );
    let response = client.get(url("nothing")).send().await.unwrap();
    assert_eq!(response.status(), 404);
}

/// A binding whose forms require HTTP basic authentication (`basic_sc`).
struct Basic {
    /// The name it defines the scheme under, if it defines it.
    defines: Option<&'static str>,
}

impl Binding for Basic {
    fn name(&self) -> &str {
        "basic"
    }

    fn forms(&self, site: &Site, affordance: Affordance<'_>) -> Vec<Form> {
        let Affordance::Action { name, .. } = affordance else {
            return Vec::new();
        };
        let mut form = Form::new(site.http_url(&format!("basic/{name}")));
        form.op = Some(OneOrMany::One(Operation::InvokeAction));
        form.security = Some(OneOrMany::One("basic_sc".into()));
        vec![form]
    }

    fn routes(&self, _: &Site) -> Router {
        Router::new()
    }

    fn security_schemes(&self) -> Vec<(String, SecurityScheme)> {
        let scheme: SecurityScheme =
            serde_json::from_value(json!({"scheme": "basic", "in": "header"})).unwrap();
        self.defines
            .map(|name| (name.to_owned(), scheme))
            .into_iter()
            .collect()
    }
}

#[tokio::test]
async fn a_bindings_security_schemes_are_described_and_checked_at_serve() {
    let provider = provider_with_binding(
        quick_limits(),
        Basic {
            defines: Some("basic_sc"),
        },
    );
    let server = serve(&provider).await;
    let validated = served_description(&server).await;
    let td: serde_json::Value =
        serde_json::from_slice(&served_description_bytes(&server).await).unwrap();
    assert_eq!(td["securityDefinitions"]["basic_sc"]["scheme"], "basic");
    let action = &validated.thing.actions.as_ref().unwrap()["getProductInfo"];
    assert_eq!(
        action.forms[1].security,
        Some(OneOrMany::One("basic_sc".into()))
    );

    // A form naming a scheme nobody defines: the node does not serve, naming the binding.
    let provider = provider_with_binding(quick_limits(), Basic { defines: None });
    let error = provider.node.serve("127.0.0.1:0").await.unwrap_err();
    assert!(matches!(error, NodeError::Config(_)), "{error:?}");
    let said = error.to_string();
    assert!(
        said.contains("`basic`") && said.contains("`basic_sc`"),
        "{said}"
    );
    // A scheme under the name of the node's own.
    let provider = provider_with_binding(
        quick_limits(),
        Basic {
            defines: Some("nosec_sc"),
        },
    );
    let error = provider.node.serve("127.0.0.1:0").await.unwrap_err();
    assert!(matches!(error, NodeError::Config(_)), "{error:?}");
    let said = error.to_string();
    assert!(
        said.contains("`basic`") && said.contains("`nosec_sc`"),
        "{said}"
    );
}

/// A binding describing a Thing of its own kind: the WoT Discovery context, the
/// `ThingDirectory` type and a `things` property it alone serves (at `GET /things`).
struct Listing {
    /// The name of its property.
    property: &'static str,
}

impl Binding for Listing {
    fn name(&self) -> &str {
        "listing"
    }

    fn forms(&self, _: &Site, _: Affordance<'_>) -> Vec<Form> {
        Vec::new()
    }

    fn routes(&self, _: &Site) -> Router {
        Router::new().route("/things", get(|| async { "[]" }))
    }

    fn described(&self, site: &Site) -> Described {
        let mut form = Form::new(site.http_url("things"));
        form.op = Some(OneOrMany::One(Operation::ReadProperty));
        let mut described = Described::default();
        described
            .contexts
            .push("https://www.w3.org/2022/wot/discovery".into());
        described.types.push("ThingDirectory".into());
        described.properties.push((
            self.property.into(),
            PropertyBuilder::with_forms([form], json!({"type": "array"})).read_only(),
        ));
        described
    }
}

#[tokio::test]
async fn a_binding_adds_types_and_affordances_of_its_own_to_the_description() {
    let provider = provider_with_binding(quick_limits(), Listing { property: "things" });
    let server = serve(&provider).await;
    let validated = served_description(&server).await;
    assert!(validated.report.is_valid(), "{:?}", validated.report);
    let td: serde_json::Value =
        serde_json::from_slice(&served_description_bytes(&server).await).unwrap();
    assert_eq!(td["@type"], json!(["lmos:Agent", "ThingDirectory"]));
    assert_eq!(
        td["@context"].as_array().unwrap().last().unwrap(),
        "https://www.w3.org/2022/wot/discovery"
    );
    let things = &td["properties"]["things"];
    assert_eq!(things["readOnly"], true);
    assert_eq!(
        things["forms"][0]["href"],
        format!("{}things", server.url())
    );
    // The node's own action is still described, with its WebSocket form.
    assert_eq!(
        td["actions"]["getProductInfo"]["forms"][0]["href"],
        server.endpoint()
    );

    // An affordance under the name of the node's own action: refused at serve, by name.
    let provider = provider_with_binding(
        quick_limits(),
        Listing {
            property: "getProductInfo",
        },
    );
    let error = provider.node.serve("127.0.0.1:0").await.unwrap_err();
    assert!(matches!(error, NodeError::Config(_)), "{error:?}");
    let said = error.to_string();
    assert!(
        said.contains("`listing`") && said.contains("`getProductInfo`"),
        "{said}"
    );
}
