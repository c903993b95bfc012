//! The WoT HTTP binding every agent serves (`binding/http/`), over real HTTP on loopback:
//! each operation with a plain HTTP client (reqwest, or raw bytes where a chunked or slow
//! body is the point), every refusal as an RFC 9457 problem, the caller's DID proved with
//! an RFC 9421 signature on the request or a granted bearer token, and strangers (from
//! 127.0.0.2 and up) flooding or stalling it while the legitimate caller (127.0.0.1) is
//! served.

use std::net::IpAddr;
use std::time::Duration;

use concord_identity::{sign_request, Did, RequestTarget};
use concord_negotiate::ActionSpec;
use concord_node::{
    ActionError, Allow, BearerGrant, Limits, Node, ProgressReporter, Property, Server,
};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use crate::identity::{document, host, now};
use crate::support::*;

/// A token the tests' provider grants to [`dashboard`].
const TOKEN: &str = "a-long-random-test-token-0123";

/// The DID the bearer token stands for.
fn dashboard() -> Did {
    Did::parse("did:wba:example.com:consumers:dashboard").unwrap()
}

fn object_action(name: &str) -> ActionSpec {
    ActionSpec {
        name: name.into(),
        description: format!("The {name} action."),
        input: json!({"type": "object"}),
        output: json!({"type": "object"}),
    }
}

/// A provider with the catalogue's `getProductInfo` (reply); `record` (notify, answering
/// nothing); `render` (progress: reports half, then answers once `gate` opens); `locked`
/// (reply, for the dashboard's DID only); a writable property `units` and a read-only
/// `model`; the bearer token [`TOKEN`] granted to [`dashboard`].
fn http_provider(limits: Limits, gate: watch::Receiver<bool>) -> Agent {
    let render = move |input: Value, progress: ProgressReporter| {
        let mut gate = gate.clone();
        async move {
            progress.report(0.5, None);
            let _ = gate.wait_for(|open| *open).await;
            Ok::<_, ActionError>(json!({"rendered": input}))
        }
    };
    let units = json!({"type": "string", "enum": ["metric", "imperial"]});
    build(
        Node::builder("Product agent")
            .action(catalogue::action(), catalogue::answer)
            .notify_action(object_action("record"), |_input: Value| async move {
                Ok::<_, ActionError>(Value::Null)
            })
            .progress_action(object_action("render"), render)
            .action(object_action("locked"), |input: Value| async move {
                Ok::<_, ActionError>(input)
            })
            .allow(
                "locked",
                Allow::Dids(vec![concord_node::DidPattern::parse(
                    "did:wba:example.com:consumers:*",
                )
                .unwrap()]),
            )
            .property("units", Property::new(units, json!("metric")).writable())
            .property(
                "model",
                Property::new(json!({"type": "string"}), json!("m1")),
            )
            .http_bearer(BearerGrant::new(TOKEN, dashboard()).unwrap())
            .security(loopback_security())
            .limits(limits),
    )
}

/// An HTTP client whose connections come from `source`.
pub(crate) fn client_from(source: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(source.parse::<IpAddr>().unwrap())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// A JSON body for a request (reqwest's `json` feature is off).
pub(crate) trait JsonBody {
    fn json_body(self, value: &Value) -> Self;
}

impl JsonBody for reqwest::RequestBuilder {
    fn json_body(self, value: &Value) -> Self {
        self.header("content-type", "application/json")
            .body(value.to_string())
    }
}

/// The JSON body of an answer.
pub(crate) async fn value_of(response: reqwest::Response) -> Value {
    serde_json::from_slice(&response.bytes().await.unwrap()).unwrap()
}

/// A problem answer's status, `Content-Type` and body.
async fn problem(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json",
        "a {status} answer"
    );
    (status, value_of(response).await)
}

/// Sends `head` (the request line and headers, without the blank line) then `chunks` as a
/// chunked body from `source`, and reads the answer to its end: its status and text.
async fn chunked(server: &Server, source: &str, head: &str, chunks: &[&[u8]]) -> (u16, String) {
    let mut tcp = tcp_from(source, server).await;
    let head = format!(
        "{head}\r\nHost: {}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        server.local_addr()
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    for chunk in chunks {
        tcp.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
            .await
            .unwrap();
        tcp.write_all(chunk).await.unwrap();
        tcp.write_all(b"\r\n").await.unwrap();
    }
    tcp.write_all(b"0\r\n\r\n").await.unwrap();
    read_answer(&mut tcp).await
}

/// The status and text of the answer on `tcp`, read until the server closes it.
pub(crate) async fn read_answer(tcp: &mut tokio::net::TcpStream) -> (u16, String) {
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), tcp.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (status, text)
}

#[tokio::test]
async fn actions_and_properties_are_served_over_http() {
    let (_gate, closed) = watch::channel(false);
    let provider = http_provider(quick_limits(), closed);
    let server = serve(&provider).await;
    let client = client_from("127.0.0.1");
    let url = |path: &str| format!("{}{path}", server.url());

    // invokeaction on a reply action: 200 with its output.
    let response = client
        .post(url("actions/getProductInfo"))
        .json_body(&catalogue::input(0))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let output = value_of(response).await;
    let id = catalogue::input(0)["productId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(Some(output), catalogue::product(&id));

    // The same with a chunked body, as node-wot sends it.
    let body = catalogue::input(0).to_string();
    let (half, rest) = body.as_bytes().split_at(body.len() / 2);
    let (status, text) = chunked(
        &server,
        "127.0.0.1",
        "POST /actions/getProductInfo HTTP/1.1\r\nContent-Type: application/json",
        &[half, rest],
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(&id), "{text}");

    // A notify action that answers nothing: 204.
    let response = client
        .post(url("actions/record"))
        .json_body(&json!({"seen": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);

    // readproperty, writeproperty (204), readallproperties.
    let units = url("properties/units");
    let response = client.get(&units).send().await.unwrap();
    assert_eq!(value_of(response).await, json!("metric"));
    let response = client
        .put(&units)
        .json_body(&json!("imperial"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);
    let response = client.get(url("properties")).send().await.unwrap();
    assert_eq!(
        value_of(response).await,
        json!({"units": "imperial", "model": "m1"})
    );

    // A value its schema refuses: 400 naming the property; the value is unchanged.
    let response = client
        .put(&units)
        .json_body(&json!("kelvin"))
        .send()
        .await
        .unwrap();
    let (status, said) = problem(response).await;
    assert_eq!(status, 400);
    assert_eq!(said["pointer"], "/", "{said}");
    let response = client.get(&units).send().await.unwrap();
    assert_eq!(value_of(response).await, json!("imperial"));

    // A read-only property written: 405 with Allow.
    let response = client
        .put(url("properties/model"))
        .json_body(&json!("m2"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["allow"], "GET");
    assert_eq!(problem(response).await.0, 405);
}

#[tokio::test]
async fn bad_requests_are_refused_with_problems_naming_the_fault() {
    let (_gate, closed) = watch::channel(false);
    let limits = Limits {
        http_max_body: 1024,
        ..quick_limits()
    };
    let provider = http_provider(limits, closed);
    let server = serve(&provider).await;
    let client = client_from("127.0.0.2");
    let action = format!("{}actions/getProductInfo", server.url());

    // Invalid JSON: 400 naming the line and column.
    let response = client
        .post(&action)
        .header("content-type", "application/json")
        .body("{\n  \"productId\": @\n}")
        .send()
        .await
        .unwrap();
    let (status, said) = problem(response).await;
    assert_eq!(status, 400);
    assert_eq!(
        (said["line"].clone(), said["column"].clone()),
        (json!(2), json!(16)),
        "{said}"
    );

    // A schema violation: 400 naming the JSON pointer.
    let response = client
        .post(&action)
        .json_body(&json!({"productId": 5}))
        .send()
        .await
        .unwrap();
    let (status, said) = problem(response).await;
    assert_eq!(status, 400);
    assert_eq!(said["pointer"], "/productId", "{said}");
    assert_eq!(said["validationErrors"][0]["pointer"], "/productId");

    // A body that is not JSON by its type: 415.
    let response = client
        .post(&action)
        .header("content-type", "text/plain")
        .body("productId=1")
        .send()
        .await
        .unwrap();
    assert_eq!(problem(response).await.0, 415);

    // Over the limit, said up front: 413 before the body is read.
    let response = client
        .post(&action)
        .header("content-type", "application/json")
        .body(vec![b' '; 4096])
        .send()
        .await
        .unwrap();
    let (status, said) = problem(response).await;
    assert_eq!(status, 413);
    assert_eq!(said["limit"], 1024);

    // Over the limit in chunks, with no length said: 413 as well.
    let chunk = [b' '; 512];
    let (status, text) = chunked(
        &server,
        "127.0.0.3",
        "POST /actions/getProductInfo HTTP/1.1\r\nContent-Type: application/json",
        &[&chunk, &chunk, &chunk],
    )
    .await;
    assert_eq!(status, 413, "{text}");

    // A method the resource does not serve: 405 with Allow; an unknown action: 404.
    let response = client.delete(&action).send().await.unwrap();
    assert_eq!(response.headers()["allow"], "POST");
    assert_eq!(problem(response).await.0, 405);
    let response = client
        .post(format!("{}actions/nothing", server.url()))
        .json_body(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(problem(response).await.0, 404);

    // An action for some DIDs only, asked anonymously: 401 with ANP's challenge and a
    // Bearer one (the agent grants tokens), saying how to prove who one is.
    let response = client
        .post(format!("{}actions/locked", server.url()))
        .json_body(&json!({}))
        .send()
        .await
        .unwrap();
    let challenges: Vec<String> = response
        .headers()
        .get_all("www-authenticate")
        .iter()
        .map(|value| value.to_str().unwrap().to_owned())
        .collect();
    assert!(
        challenges.iter().any(|c| c.starts_with("DIDWba")),
        "{challenges:?}"
    );
    assert!(
        challenges.iter().any(|c| c.starts_with("Bearer")),
        "{challenges:?}"
    );
    assert_eq!(problem(response).await.0, 401);
}

#[tokio::test]
async fn a_progress_action_answers_201_with_a_status_resource_to_query_and_cancel() {
    let (gate, closed) = watch::channel(false);
    let provider = http_provider(quick_limits(), closed);
    let server = serve(&provider).await;
    let client = client_from("127.0.0.1");
    let render = format!("{}actions/render", server.url());

    let response = client
        .post(&render)
        .json_body(&json!({"scene": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    assert!(location.starts_with(&render), "{location}");
    // The 201's body is the status resource's object (the Profile's ActionStatus) and its href.
    let created = value_of(response).await;
    assert!(
        ["pending", "running"].contains(&created["status"].as_str().unwrap()),
        "{created}"
    );
    assert!(created["timeRequested"].is_string(), "{created}");
    assert_eq!(created["href"], location.as_str(), "{created}");

    // Queried while it runs: pending or running, its progress once reported.
    let status: Value = value_of(client.get(&location).send().await.unwrap()).await;
    assert!(
        ["pending", "running"].contains(&status["status"].as_str().unwrap()),
        "{status}"
    );
    assert!(status["timeRequested"].is_string(), "{status}");

    // Let it finish: completed with its output, and when it ended.
    gate.send(true).unwrap();
    let mut finished = Value::Null;
    for _ in 0..100 {
        finished = value_of(client.get(&location).send().await.unwrap()).await;
        if finished["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(finished["status"], "completed", "{finished}");
    assert_eq!(finished["output"], json!({"rendered": {"scene": 1}}));
    assert!(finished["timeEnded"].is_string(), "{finished}");

    // Cancelling a finished action: 409.
    let response = client.delete(&location).send().await.unwrap();
    assert_eq!(problem(response).await.0, 409);
    // An id that was never issued: 404.
    let response = client.get(format!("{render}/0123")).send().await.unwrap();
    assert_eq!(problem(response).await.0, 404);
}

#[tokio::test]
async fn a_running_action_is_cancelled_with_delete() {
    let (_gate, closed) = watch::channel(false);
    let provider = http_provider(quick_limits(), closed);
    let server = serve(&provider).await;
    let client = client_from("127.0.0.1");
    let render = format!("{}actions/render", server.url());
    let response = client
        .post(&render)
        .json_body(&json!({}))
        .send()
        .await
        .unwrap();
    let location = response.headers()["location"].to_str().unwrap().to_owned();

    let response = client.delete(&location).send().await.unwrap();
    assert_eq!(response.status(), 204);
    let status: Value = value_of(client.get(&location).send().await.unwrap()).await;
    assert_eq!(status["status"], "failed", "{status}");
    assert_eq!(status["error"]["type"], "urn:concord:interact:cancelled");
}

#[tokio::test]
async fn a_flood_of_progress_actions_meets_the_action_tables_bounds_and_the_caller_is_served() {
    let (_gate, closed) = watch::channel(false);
    let mut limits = quick_limits();
    limits.interaction.max_actions = 8;
    limits.interaction.max_actions_per_caller = 3;
    limits.interaction.reserved_actions = 2;
    let provider = http_provider(limits, closed);
    let server = serve(&provider).await;
    let render = format!("{}actions/render", server.url());

    // Three strangers start actions that never end, ten each.
    let (mut started, mut refused) = (0, 0);
    for source in ["127.0.0.2", "127.0.0.3", "127.0.0.4"] {
        let attacker = client_from(source);
        for _ in 0..10 {
            let response = attacker
                .post(&render)
                .json_body(&json!({}))
                .send()
                .await
                .unwrap();
            match response.status().as_u16() {
                201 => started += 1,
                429 | 503 => {
                    assert!(response.headers().contains_key("retry-after"));
                    let (_, said) = problem(response).await;
                    assert!(said["type"].as_str().unwrap().contains("limit"), "{said}");
                    refused += 1;
                }
                other => panic!("unexpected status {other}"),
            }
        }
    }
    // Each address holds its share (3) until only the reserve is left (8 - 2): the third
    // address, holding none, gets one place of the reserve, then no more.
    assert_eq!(started, 7, "{started} started, {refused} refused");
    assert_eq!(refused, 23);

    // The legitimate caller, holding none, still gets a place.
    let response = client_from("127.0.0.1")
        .post(&render)
        .json_body(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
}

#[tokio::test]
async fn a_body_sent_a_byte_at_a_time_is_cut_off_while_the_caller_is_served() {
    let (_gate, closed) = watch::channel(false);
    let limits = Limits {
        http_body_timeout: Duration::from_secs(2),
        ..quick_limits()
    };
    let provider = http_provider(limits, closed);
    let server = serve(&provider).await;

    // The stranger says 64 bytes are coming, then sends one a second.
    let mut slow = tcp_from("127.0.0.2", &server).await;
    let head = format!(
        "POST /actions/getProductInfo HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n",
        server.local_addr()
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    let dripping = tokio::spawn(async move {
        for _ in 0..10 {
            if slow.write_all(b" ").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        read_answer(&mut slow).await
    });

    // Meanwhile the legitimate caller is served.
    let response = client_from("127.0.0.1")
        .post(format!("{}actions/getProductInfo", server.url()))
        .json_body(&catalogue::input(1))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    let (status, text) = dripping.await.unwrap();
    assert_eq!(status, 408, "{text}");
    assert!(text.contains("http_body_timeout"), "{text}");
}

#[tokio::test]
async fn a_request_signed_with_a_did_or_a_granted_token_calls_as_that_did() {
    let (_gate, closed) = watch::channel(false);
    let provider = http_provider(quick_limits(), closed);
    let server = serve(&provider).await;
    let client = client_from("127.0.0.1");
    let locked = format!("{}actions/locked", server.url());

    // The granted token calls as the dashboard's DID, which `locked` allows.
    let response = client
        .post(&locked)
        .bearer_auth(TOKEN)
        .json_body(&json!({"a": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(value_of(response).await, json!({"a": 1}));

    // A token nobody granted: 401 with ANP's challenge and a Bearer one.
    let response = client
        .post(&locked)
        .bearer_auth("a-token-nobody-was-ever-granted")
        .json_body(&json!({}))
        .send()
        .await
        .unwrap();
    let challenges: Vec<&str> = response
        .headers()
        .get_all("www-authenticate")
        .iter()
        .map(|value| value.to_str().unwrap())
        .collect();
    assert!(
        challenges.iter().any(|c| c.starts_with("DIDWba")),
        "{challenges:?}"
    );
    assert!(
        challenges.iter().any(|c| c.starts_with("Bearer")),
        "{challenges:?}"
    );
    assert_eq!(problem(response).await.0, 401);

    // A DID's RFC 9421 signature over the request (method, URL, body digest): its DID
    // calls. `locked` allows other DIDs only: 403, and `getProductInfo` serves it.
    let signer = host(document).await;
    let body = catalogue::input(2).to_string();
    let url = format!("{}actions/getProductInfo", server.url());
    let sign = |nonce: &str, url: &str, body: &str| {
        let target = RequestTarget {
            method: "POST",
            target_uri: url,
        };
        sign_request(&signer.identity, &target, body.as_bytes(), now(), nonce)
    };
    let send = |headers: concord_identity::SignatureHeaders, url: String, body: String| {
        let mut request = client
            .post(url)
            .header("content-type", "application/json")
            .header("signature-input", headers.signature_input)
            .header("signature", headers.signature)
            .body(body);
        if let Some(digest) = headers.content_digest {
            request = request.header("content-digest", digest);
        }
        request.send()
    };
    let response = send(sign("http-nonce-1", &url, &body), url.clone(), body.clone())
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let response = send(
        sign("http-nonce-2", &locked, "{}"),
        locked.clone(),
        "{}".into(),
    )
    .await
    .unwrap();
    let (status, said) = problem(response).await;
    assert_eq!(status, 403, "{said}");

    // The same signature again: a replay, 401.
    let replayed = sign("http-nonce-1", &url, &body);
    let response = send(replayed, url.clone(), body.clone()).await.unwrap();
    assert!(response.headers().contains_key("www-authenticate"));
    assert_eq!(problem(response).await.0, 401);

    // A signature over another body: 401, never served anonymously.
    let other = sign("http-nonce-3", &url, &body);
    let response = send(other, url.clone(), catalogue::input(3).to_string())
        .await
        .unwrap();
    assert_eq!(problem(response).await.0, 401);
}

#[tokio::test]
async fn the_description_offers_http_forms_that_tell_their_security_and_the_binding_can_be_turned_off(
) {
    let (_gate, closed) = watch::channel(false);
    let provider = http_provider(quick_limits(), closed);
    let server = serve(&provider).await;
    let validated = served_description(&server).await;
    let description: Value = serde_json::to_value(&validated.thing).unwrap();
    let actions = &description["actions"];
    let http_form = |affordance: &Value| {
        affordance["forms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|form| form["href"].as_str().unwrap().starts_with("http"))
            .cloned()
            .unwrap()
    };
    let invoke = http_form(&actions["getProductInfo"]);
    assert_eq!(
        invoke["href"],
        format!("{}actions/getProductInfo", server.url())
    );
    assert_eq!(invoke["htv:methodName"], "POST");
    assert_eq!(invoke["op"], "invokeaction");
    // Every action says whether it is synchronous.
    assert_eq!(actions["getProductInfo"]["synchronous"], true);
    assert_eq!(actions["render"]["synchronous"], false);
    // An affordance anonymous callers may not use names the bearer scheme (no DID here).
    assert_eq!(http_form(&actions["locked"])["security"], "bearer_sc");
    assert_eq!(
        description["securityDefinitions"]["bearer_sc"]["scheme"],
        "bearer"
    );
    let property = http_form(&description["properties"]["units"]);
    assert_eq!(property["htv:methodName"], "GET");
    // `GET /properties` is said by a Thing-level form, which the strict validator accepts.
    let bytes = served_description_bytes(&server).await;
    let report = concord_describe::validate(&bytes);
    let said = report.to_string();
    assert!(report.is_valid(), "{report}");
    assert!(
        !said.contains("forms") && !said.contains("uriVariables"),
        "{report}"
    );
    let raw: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        raw["forms"],
        json!([{"href": format!("{}properties", server.url()), "op": "readallproperties",
                "contentType": "application/json", "htv:methodName": "GET"}]),
        "{raw}"
    );
    let all = client_from("127.0.0.1")
        .get(raw["forms"][0]["href"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert!(value_of(all).await.get("units").is_some());

    // Turned off: no HTTP forms, no routes.
    let off = build(
        Node::builder("Product agent")
            .action(catalogue::action(), catalogue::answer)
            .http_binding(false)
            .limits(quick_limits()),
    );
    let server = serve(&off).await;
    let validated = served_description(&server).await;
    let description: Value = serde_json::to_value(&validated.thing).unwrap();
    let forms = description["actions"]["getProductInfo"]["forms"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(forms.len(), 1, "{forms:?}");
    let response = client_from("127.0.0.1")
        .post(format!("{}actions/getProductInfo", server.url()))
        .json_body(&catalogue::input(0))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
}

/// A provider whose stream action `shout` answers its input's `prefix`, then every chunk
/// of the caller's bytes in capitals, and fails when the caller sends `!`.
fn stream_provider() -> Agent {
    stream_provider_with(quick_limits())
}

/// [`stream_provider`] with `limits`, and a progress action `tally` answering its input
/// at once.
pub(crate) fn stream_provider_with(limits: Limits) -> Agent {
    let stream = concord_node::StreamSpec {
        content_type: "text/plain".into(),
        output_content_type: None,
        frame_bytes: 0,
        initial_credit: 4096,
        realtime: false,
    };
    let spec = ActionSpec {
        name: "shout".into(),
        description: "Answers the caller's bytes in capitals.".into(),
        input: json!({"type": "object", "properties": {"prefix": {"type": "string"}}, "required": ["prefix"]}),
        output: json!({"type": "object"}),
    };
    build(
        Node::builder("Shouter")
            .stream_action(
                spec,
                stream,
                |input: Value, io: concord_node::StreamIo| async move {
                    let concord_node::StreamIo {
                        sender,
                        mut receiver,
                    } = io;
                    let prefix = input["prefix"]
                        .as_str()
                        .unwrap_or_default()
                        .as_bytes()
                        .to_vec();
                    sender
                        .send(prefix)
                        .await
                        .map_err(|e| ActionError::internal(e.to_string()))?;
                    while let Some(chunk) = receiver.next().await {
                        let chunk = chunk.map_err(|e| ActionError::internal(e.to_string()))?;
                        if chunk.contains(&b'!') {
                            return Err(ActionError::bad_request("no shouting marks"));
                        }
                        sender
                            .send(chunk.to_ascii_uppercase())
                            .await
                            .map_err(|e| ActionError::internal(e.to_string()))?;
                    }
                    sender
                        .finish()
                        .await
                        .map_err(|e| ActionError::internal(e.to_string()))?;
                    Ok(json!({}))
                },
            )
            .progress_action(
                object_action("tally"),
                |input: Value, _progress: ProgressReporter| async move {
                    Ok::<_, ActionError>(input)
                },
            )
            .limits(limits),
    )
}

#[tokio::test]
async fn a_stream_action_takes_a_chunked_body_in_and_answers_a_chunked_body_out() {
    let provider = stream_provider();
    let server = serve(&provider).await;
    // The form says the stream's content type.
    let validated = served_description(&server).await;
    let description: Value = serde_json::to_value(&validated.thing).unwrap();
    let forms = description["actions"]["shout"]["forms"]
        .as_array()
        .unwrap()
        .clone();
    let http = forms
        .iter()
        .find(|form| form["href"].as_str().unwrap().starts_with("http"))
        .unwrap();
    assert_eq!(http["contentType"], "text/plain", "{http}");
    // Its input travels in the query: the href's `{?input}`, a URI variable of JSON text,
    // which the strict validator accepts.
    assert_eq!(
        http["href"],
        format!("{}actions/shout{{?input}}", server.url()),
        "{http}"
    );
    let bytes = served_description_bytes(&server).await;
    let report = concord_describe::validate(&bytes);
    let said = report.to_string();
    assert!(report.is_valid(), "{report}");
    assert!(
        !said.contains("forms") && !said.contains("uriVariables"),
        "{report}"
    );
    let raw: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        raw["actions"]["shout"]["uriVariables"]["input"],
        json!({"type": "string", "contentMediaType": "application/json",
               "description": "the action's input, JSON (none: null)"}),
    );

    let (status, text) = chunked(
        &server,
        "127.0.0.1",
        "POST /actions/shout?input=%7B%22prefix%22%3A%22%3E%20%22%7D HTTP/1.1\r\nContent-Type: text/plain",
        &[b"hello ", b"world"],
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("content-type: text/plain"), "{text}");
    assert!(text.contains("transfer-encoding: chunked"), "{text}");
    let (_, body) = text.split_once("\r\n\r\n").unwrap();
    let answered: String = body.split("\r\n").skip(1).step_by(2).collect();
    assert_eq!(answered, "> HELLO WORLD", "{body:?}");
    assert!(body.ends_with("0\r\n\r\n"), "an orderly end: {body:?}");

    // The input its schema refuses: a problem before any stream.
    let (status, text) = chunked(
        &server,
        "127.0.0.2",
        "POST /actions/shout HTTP/1.1",
        &[b"x"],
    )
    .await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("application/problem+json"), "{text}");

    // An action that fails mid-stream: the body is cut short, never ended in order.
    let (status, text) = chunked(
        &server,
        "127.0.0.1",
        "POST /actions/shout?input=%7B%22prefix%22%3A%22%22%7D HTTP/1.1",
        &[b"calm ", b"loud!"],
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(!text.ends_with("0\r\n\r\n"), "{text:?}");
}

#[tokio::test]
async fn a_legacy_didwba_header_is_refused_on_a_write_and_taken_on_a_read() {
    // The legacy header signs the host name only: on a POST it would let anyone who saw it
    // act with its DID on any write within its window. RFC 9421 is needed there.
    let provider = build(
        Node::builder("Product agent")
            .action(catalogue::action(), catalogue::answer)
            .property(
                "model",
                Property::new(json!({"type": "string"}), json!("m1")),
            )
            .security(concord_node::Security {
                legacy_didwba: true,
                ..loopback_security()
            })
            .limits(quick_limits()),
    );
    let server = serve(&provider).await;
    let client = client_from("127.0.0.1");
    let signer = host(document).await;
    let legacy = |nonce: &str| {
        let timestamp = concord_identity::format_iso8601(now());
        let audience = server.local_addr().ip().to_string();
        concord_identity::legacy_authorization(&signer.identity, &audience, nonce, &timestamp)
    };
    let response = client
        .post(format!("{}actions/getProductInfo", server.url()))
        .header("authorization", legacy("legacy-write-0001"))
        .json_body(&catalogue::input(2))
        .send()
        .await
        .unwrap();
    assert!(response.headers().contains_key("www-authenticate"));
    let (status, said) = problem(response).await;
    assert_eq!(status, 401, "{said}");
    assert!(
        said["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("RFC 9421"),
        "{said}"
    );
    // A read with the legacy header is served.
    let response = client
        .get(format!("{}properties/model", server.url()))
        .header("authorization", legacy("legacy-read-0001"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}
