//! The `exec` and `http` backends behind real negotiated protocols: outputs, and every way a
//! backend can fail, each a clear error to the caller while the node keeps serving.

use std::time::Duration;

use axum::routing::post;
use concord_negotiate::ActionSpec;
use concord_node::{CallError, ExecAction, HttpAction, Node};
use serde_json::{json, Value};

use crate::support::*;

/// An action taking and returning `{"text": string}`.
fn text_action(name: &str) -> ActionSpec {
    let schema = json!({
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"]
    });
    let mut output = schema.clone();
    output["title"] = json!("Echo");
    ActionSpec {
        name: name.into(),
        description: format!("The {name} action."),
        input: schema,
        output,
    }
}

/// Connects for `action`, calls it once with `{"text": text}`, closes.
async fn call_once(
    requester: &Agent,
    url: &str,
    action: &str,
    text: &str,
) -> Result<Value, CallError> {
    let connection = requester.node.connect(url, action).await.unwrap();
    let result = connection.call(action, json!({"text": text})).await;
    connection.close().await;
    result
}

fn remote(result: Result<Value, CallError>) -> (i64, String) {
    match result {
        Err(CallError::Remote { code, message }) => (code, message),
        other => panic!("expected an error response, got {other:?}"),
    }
}

#[tokio::test]
async fn exec_runs_a_command_per_call_and_reports_its_failures() {
    let sh = |script: &str| ExecAction::new("sh").args(["-c", script]);
    let provider = build(
        Node::builder("Exec agent")
            .limits(quick_limits())
            .action(text_action("echo"), sh("cat"))
            .action(text_action("reply"), sh("sed s/hello/goodbye/"))
            .action(
                text_action("fail"),
                sh("cat >/dev/null; echo 'disk full' >&2; exit 3"),
            )
            .action(
                text_action("hang"),
                sh("sleep 30").timeout(Duration::from_millis(300)),
            )
            .action(text_action("garbage"), sh("echo not json"))
            .action(text_action("wrongShape"), sh(r#"echo '{"text": 5}'"#))
            .action(
                text_action("missing"),
                ExecAction::new("/nonexistent/concord-test-program"),
            ),
    );
    let server = serve(&provider).await;
    let requester = requester();
    let url = server.url();

    assert_eq!(
        call_once(&requester, url, "echo", "hello").await.unwrap(),
        json!({"text": "hello"})
    );
    assert_eq!(
        call_once(&requester, url, "reply", "hello world")
            .await
            .unwrap(),
        json!({"text": "goodbye world"})
    );
    assert_eq!(
        remote(call_once(&requester, url, "fail", "x").await),
        (502, "`sh` exited with code 3: disk full".to_owned())
    );
    assert_eq!(
        remote(call_once(&requester, url, "hang", "x").await),
        (
            504,
            "`sh` did not finish within 300 ms and was killed".to_owned()
        )
    );
    let (code, message) = remote(call_once(&requester, url, "garbage", "x").await);
    assert_eq!(code, 502);
    assert_eq!(
        message,
        "`sh` printed output that is not JSON (syntax error at line 1, column 2); it starts: \"not json\""
    );
    let (code, message) = remote(call_once(&requester, url, "wrongShape", "x").await);
    assert_eq!(code, 500);
    assert!(
        message.starts_with("the action's output breaks the protocol:")
            && message.contains("/text"),
        "{message}"
    );
    let (code, message) = remote(call_once(&requester, url, "missing", "x").await);
    assert_eq!(code, 502);
    assert!(
        message.starts_with("cannot run `/nonexistent/concord-test-program`:"),
        "{message}"
    );
    // Still serving.
    assert_eq!(
        call_once(&requester, url, "echo", "again").await.unwrap(),
        json!({"text": "again"})
    );
}

#[tokio::test]
async fn http_posts_per_call_and_reports_its_failures() {
    let backend = axum::Router::new()
        .route("/echo", post(|body: String| async move { body }))
        .route(
            "/missing",
            post(|| async {
                (
                    axum::http::StatusCode::NOT_FOUND,
                    r#"{"message": "no such text"}"#,
                )
            }),
        )
        .route(
            "/broken",
            post(|| async {
                (
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    "internal meltdown",
                )
            }),
        )
        .route("/garbage", post(|| async { "<html>" }))
        .route(
            "/slow",
            post(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "{}"
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, backend).await });
    let http = |path: &str| HttpAction::new(&format!("{base}{path}")).unwrap();

    let provider = build(
        Node::builder("HTTP agent")
            .limits(quick_limits())
            .action(text_action("echo"), http("/echo"))
            .action(text_action("missing"), http("/missing"))
            .action(text_action("broken"), http("/broken"))
            .action(text_action("garbage"), http("/garbage"))
            .action(
                text_action("slow"),
                http("/slow").timeout(Duration::from_millis(300)),
            ),
    );
    let server = serve(&provider).await;
    let requester = requester();
    let url = server.url();

    assert_eq!(
        call_once(&requester, url, "echo", "hello").await.unwrap(),
        json!({"text": "hello"})
    );
    assert_eq!(
        remote(call_once(&requester, url, "missing", "x").await),
        (404, "no such text".to_owned())
    );
    assert_eq!(
        remote(call_once(&requester, url, "broken", "x").await),
        (
            502,
            format!("{base}/broken answered 500 Internal Server Error: \"internal meltdown\"")
        )
    );
    assert_eq!(
        remote(call_once(&requester, url, "garbage", "x").await),
        (
            502,
            format!("{base}/garbage answered 200 OK with a body that is not JSON (syntax error at line 1, column 1); it starts: \"<html>\"")
        )
    );
    assert_eq!(
        remote(call_once(&requester, url, "slow", "x").await),
        (504, format!("{base}/slow did not answer within 300 ms"))
    );
    assert!(HttpAction::new("ftp://example.com").is_err());
}

#[tokio::test]
async fn a_panicking_action_is_a_500_and_the_session_goes_on() {
    let provider = build(
        Node::builder("Fragile agent")
            .action(text_action("shout"), |input: Value| {
                if input["text"] == "now" {
                    panic!("the action broke before its future");
                }
                async move {
                    if input["text"] == "later" {
                        panic!("the action broke");
                    }
                    let text = input["text"].as_str().unwrap_or_default().to_uppercase();
                    Ok::<_, concord_node::ActionError>(json!({ "text": text }))
                }
            })
            .limits(quick_limits()),
    );
    let server = serve(&provider).await;
    let requester = requester();
    let connection = requester.connect(&server, "shout").await;
    for text in ["now", "later"] {
        let error = connection
            .call("shout", json!({ "text": text }))
            .await
            .unwrap_err();
        assert_eq!(
            error,
            CallError::Remote {
                code: 500,
                message: "the action panicked".into()
            }
        );
    }
    let output = connection
        .call("shout", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(output, json!({"text": "HI"}));
}

/// An `https://` backend whose certificate a private CA signed: reached when the action
/// trusts the CA, a 502 naming the certificate problem when it does not.
#[tokio::test]
async fn an_https_backend_is_trusted_with_its_private_ca() {
    use concord_fixtures::tls::{PrivateCa, TlsProxy};

    let backend = axum::Router::new().route("/echo", post(|body: String| async move { body }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let plain = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, backend).await });
    let ca = PrivateCa::for_localhost().unwrap();
    let proxy = TlsProxy::bind(&ca).await.unwrap();
    let url = format!("{}echo", proxy.url());
    proxy.forward_to(plain);

    let trusting = HttpAction::new(&url)
        .unwrap()
        .trust_root_certificates_pem(ca.pem())
        .unwrap();
    let untrusting = HttpAction::new(&url).unwrap();
    let provider = build(
        Node::builder("HTTPS agent")
            .limits(quick_limits())
            .action(text_action("trusting"), trusting)
            .action(text_action("untrusting"), untrusting),
    );
    let server = serve(&provider).await;
    let requester = requester();
    assert_eq!(
        call_once(&requester, server.url(), "trusting", "hello")
            .await
            .unwrap(),
        json!({"text": "hello"})
    );
    let (code, message) = remote(call_once(&requester, server.url(), "untrusting", "x").await);
    assert_eq!(code, 502);
    assert!(
        message.contains("invalid peer certificate: UnknownIssuer"),
        "{message}"
    );
    assert!(HttpAction::new(&url)
        .unwrap()
        .trust_root_certificates_pem("not a certificate")
        .is_err());
}
