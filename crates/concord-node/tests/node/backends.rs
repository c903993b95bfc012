//! The `exec` and `http` backends behind real negotiated protocols: outputs, and every way a
//! backend can fail, each a clear error to the caller while the node keeps serving.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{header, StatusCode};
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

/// The lines logged on this thread while it lives (the tests run on a current-thread
/// runtime, so the node's tasks log here too), at `info` and above, with their spans.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        let logs = Self::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(logs.clone())
            .with_max_level(tracing::Level::INFO)
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// The logged lines that contain `needle`.
    fn lines_with(&self, needle: &str) -> Vec<String> {
        self.text()
            .lines()
            .filter(|line| line.contains(needle))
            .map(str::to_owned)
            .collect()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// What the caller of a backend that failed is told: nothing of the failure.
const FAILED: &str = "the action failed";

#[tokio::test]
async fn exec_runs_a_command_per_call_and_reports_its_failures() {
    let (logs, _guard) = Logs::capture();
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
        (502, FAILED.to_owned())
    );
    assert_eq!(
        remote(call_once(&requester, url, "hang", "x").await),
        (504, "the action did not finish in time".to_owned())
    );
    assert_eq!(
        remote(call_once(&requester, url, "garbage", "x").await),
        (502, FAILED.to_owned())
    );
    let (code, message) = remote(call_once(&requester, url, "wrongShape", "x").await);
    assert_eq!(code, 500);
    assert!(
        message.starts_with("the action's output breaks the protocol:")
            && message.contains("/text"),
        "{message}"
    );
    assert_eq!(
        remote(call_once(&requester, url, "missing", "x").await),
        (502, FAILED.to_owned())
    );
    // Still serving.
    assert_eq!(
        call_once(&requester, url, "echo", "again").await.unwrap(),
        json!({"text": "again"})
    );
    // The details are in our log, each line naming the action.
    for (action, detail) in [
        ("fail", "`sh` exited with code 3: it printed no error report stderr=disk full"),
        ("hang", "`sh` did not finish within 300 ms and was killed"),
        (
            "garbage",
            "`sh` exited with code 0: it printed output that is not JSON (syntax error at line 1, column 2); it starts: \"not json\"",
        ),
        ("missing", "cannot run `/nonexistent/concord-test-program`: "),
    ] {
        let lines = logs.lines_with(detail);
        assert!(
            lines.len() == 1
                && lines[0].contains("WARN")
                && lines[0].contains(&format!("action{{name=\"{action}\"}}")),
            "{action}: {lines:?} in\n{}",
            logs.text()
        );
    }
}

/// A command reports an application error on stdout: an object whose only member is
/// `error` (whatever its exit status), or problem details (when it exits non-zero). Its
/// stderr stays in our log.
#[tokio::test]
async fn exec_reports_application_errors_by_the_convention() {
    let (logs, _guard) = Logs::capture();
    let sh =
        |script: &str| ExecAction::new("sh").args(["-c", &format!("cat >/dev/null; {script}")]);
    let not_found = r#"{"error": {"code": 404, "message": "no such text"}}"#;
    let provider = build(
        Node::builder("Exec agent")
            .limits(quick_limits())
            .action(text_action("errorExit0"), sh(&format!("echo '{not_found}'")))
            .action(
                text_action("errorExit1"),
                sh(&format!("echo '{not_found}'; echo 'lookup missed' >&2; exit 1")),
            )
            .action(
                text_action("problem"),
                sh(r#"echo '{"type": "about:blank", "title": "Gone", "status": 410, "detail": "that text is gone"}'; exit 2"#),
            )
            .action(
                text_action("problemExit0"),
                sh(r#"echo '{"title": "Gone", "status": 410}'"#),
            )
            .action(
                text_action("outOfRange"),
                sh(r#"echo '{"error": {"code": 200, "message": "all fine?"}}'"#),
            )
            .action(
                text_action("notAnInteger"),
                sh(r#"echo '{"error": {"code": "404", "message": "no such text"}}'; exit 1"#),
            )
            .action(
                text_action("leaky"),
                sh("echo 'password=SECRET-7f3a at /srv/shop/db.sqlite' >&2; exit 3"),
            )
            .action(
                text_action("leakyNoJson"),
                sh("echo 'SECRET-7f3a' >&2; echo 'Traceback: SECRET-7f3a'"),
            )
            .action(
                text_action("withErrorMember"),
                sh(r#"echo '{"text": "fine", "error": {"code": 404, "message": "not an error"}}'"#),
            ),
    );
    let server = serve(&provider).await;
    let requester = requester();
    let url = server.url();

    for action in ["errorExit0", "errorExit1"] {
        assert_eq!(
            remote(call_once(&requester, url, action, "x").await),
            (404, "no such text".to_owned()),
            "{action}"
        );
    }
    assert_eq!(
        remote(call_once(&requester, url, "problem", "x").await),
        (410, "that text is gone".to_owned())
    );
    // Problem details from a command that exits 0 are its output, which this protocol
    // refuses (no `text`).
    let (code, message) = remote(call_once(&requester, url, "problemExit0", "x").await);
    assert_eq!(code, 500);
    assert!(
        message.starts_with("the action's output breaks the protocol:"),
        "{message}"
    );
    for action in ["outOfRange", "notAnInteger"] {
        assert_eq!(
            remote(call_once(&requester, url, action, "x").await),
            (502, FAILED.to_owned()),
            "{action}"
        );
    }
    for action in ["leaky", "leakyNoJson"] {
        let (code, message) = remote(call_once(&requester, url, action, "x").await);
        assert_eq!((code, message.as_str()), (502, FAILED), "{action}");
        assert!(!message.contains("SECRET"), "{message}");
    }
    // An output with an `error` member beside others is an output.
    let output = call_once(&requester, url, "withErrorMember", "x")
        .await
        .unwrap();
    assert_eq!(output["text"], "fine");

    // Our log has what the caller was not told, naming the action.
    let logged = |needle: &str, action: &str| {
        let lines = logs.lines_with(needle);
        assert!(
            lines.len() == 1 && lines[0].contains(&format!("action{{name=\"{action}\"}}")),
            "{needle} ({action}): {lines:?} in\n{}",
            logs.text()
        );
        lines[0].clone()
    };
    let line = logged("password=SECRET-7f3a at /srv/shop/db.sqlite", "leaky");
    assert!(
        line.contains("WARN")
            && line.contains("`sh` exited with code 3: it printed no error report"),
        "{line}"
    );
    let line = logged("stderr=SECRET-7f3a", "leakyNoJson");
    assert!(line.contains("\"Traceback: SECRET-7f3a\""), "{line}");
    logged(
        "its error report cannot be used: `error.code` is 200, not an integer from 400 to 599",
        "outOfRange",
    );
    logged(
        "its error report cannot be used: `error.code` is a string, not an integer from 400 to 599",
        "notAnInteger",
    );
    // An application error's stderr is logged too, at `info`.
    let line = logged("stderr=lookup missed", "errorExit1");
    assert!(line.contains("INFO"), "{line}");
}

#[tokio::test]
async fn http_posts_per_call_and_reports_its_failures() {
    let (logs, _guard) = Logs::capture();
    let problem_json = || [(header::CONTENT_TYPE, "application/problem+json")];
    let backend = axum::Router::new()
        .route("/echo", post(|body: String| async move { body }))
        .route(
            "/missing",
            post(move || async move {
                (
                    StatusCode::NOT_FOUND,
                    problem_json(),
                    r#"{"type": "about:blank", "title": "Not Found", "status": 404, "detail": "no such text"}"#,
                )
            }),
        )
        .route(
            "/refused",
            post(|| async {
                (
                    StatusCode::CONFLICT,
                    [(header::CONTENT_TYPE, "application/json")],
                    r#"{"error": {"message": "that text is taken"}}"#,
                )
            }),
        )
        .route(
            "/outOfRange",
            post(move || async move {
                (
                    StatusCode::BAD_REQUEST,
                    problem_json(),
                    r#"{"status": 200, "detail": "fine?"}"#,
                )
            }),
        )
        .route(
            "/broken",
            post(|| async {
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal meltdown at /srv/app/SECRET-db.rs:12",
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
    // A port nobody listens on.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let nowhere = format!("http://{}/nowhere", closed.local_addr().unwrap());
    drop(closed);
    let http = |path: &str| HttpAction::new(&format!("{base}{path}")).unwrap();

    let provider = build(
        Node::builder("HTTP agent")
            .limits(quick_limits())
            .action(text_action("echo"), http("/echo"))
            .action(text_action("missing"), http("/missing"))
            .action(text_action("refused"), http("/refused"))
            .action(text_action("outOfRange"), http("/outOfRange"))
            .action(text_action("broken"), http("/broken"))
            .action(text_action("garbage"), http("/garbage"))
            .action(
                text_action("slow"),
                http("/slow").timeout(Duration::from_millis(300)),
            )
            .action(text_action("nowhere"), HttpAction::new(&nowhere).unwrap()),
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
        remote(call_once(&requester, url, "refused", "x").await),
        (409, "that text is taken".to_owned())
    );
    assert_eq!(
        remote(call_once(&requester, url, "outOfRange", "x").await),
        (502, FAILED.to_owned())
    );
    // A non-JSON error body: its status, and nothing of the body.
    assert_eq!(
        remote(call_once(&requester, url, "broken", "x").await),
        (500, "Internal Server Error".to_owned())
    );
    assert_eq!(
        remote(call_once(&requester, url, "garbage", "x").await),
        (502, FAILED.to_owned())
    );
    assert_eq!(
        remote(call_once(&requester, url, "slow", "x").await),
        (504, "the action did not finish in time".to_owned())
    );
    assert_eq!(
        remote(call_once(&requester, url, "nowhere", "x").await),
        (502, FAILED.to_owned())
    );
    assert!(HttpAction::new("ftp://example.com").is_err());

    // The details are in our log, each line naming the action.
    for (action, detail) in [
        (
            "outOfRange",
            format!("{base}/outOfRange answered 400 Bad Request with an error report that cannot be used: `status` is 200, not an integer from 400 to 599"),
        ),
        (
            "garbage",
            format!("{base}/garbage answered 200 OK with a body that is not JSON (syntax error at line 1, column 1); it starts: \"<html>\""),
        ),
        ("slow", format!("{base}/slow did not answer within 300 ms")),
        ("nowhere", format!("cannot reach {nowhere}: ")),
    ] {
        let lines = logs.lines_with(&detail);
        assert!(
            lines.len() == 1
                && lines[0].contains("WARN")
                && lines[0].contains(&format!("action{{name=\"{action}\"}}")),
            "{action}: {lines:?} in\n{}",
            logs.text()
        );
    }
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
/// trusts the CA, a 502 when it does not (the certificate problem in our log).
#[tokio::test]
async fn an_https_backend_is_trusted_with_its_private_ca() {
    use concord_fixtures::tls::{PrivateCa, TlsProxy};

    let (logs, _guard) = Logs::capture();
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
    // The caller is told it failed; our log says why.
    assert_eq!(
        remote(call_once(&requester, server.url(), "untrusting", "x").await),
        (502, FAILED.to_owned())
    );
    let lines = logs.lines_with("invalid peer certificate: UnknownIssuer");
    assert!(
        lines.len() == 1 && lines[0].contains("action{name=\"untrusting\"}"),
        "{lines:?} in\n{}",
        logs.text()
    );
    assert!(HttpAction::new(&url)
        .unwrap()
        .trust_root_certificates_pem("not a certificate")
        .is_err());
}

fn feedback_event() -> concord_node::Event {
    concord_node::Event::new(json!({
        "type": "object",
        "properties": {"rating": {"type": "integer", "minimum": 1, "maximum": 5}},
        "required": ["rating"]
    }))
}

#[tokio::test]
async fn exec_prints_progress_and_event_lines_before_its_answer() {
    let (logs, _guard) = Logs::capture();
    // The node hands its publisher to the exec actions it serves when it is built.
    let sh = |script: &str| ExecAction::new("sh").args(["-c", script]);
    // A hand-written script: two good progress lines, one out of range, an event its
    // schema refuses, one it accepts, a stray line, then the answer.
    // (Pauses let each report reach the caller before the next one replaces it.)
    let progress_script = r#"cat >/dev/null
sleep 0.3
echo '{"progress": 0.25, "partial": {"text": "a"}}'
sleep 0.3
echo '{"progress": 7}'
echo '{"event": "feedback", "data": {"rating": 9}}'
echo '{"event": "feedback", "data": {"rating": 4}}'
echo 'warming up'
echo '{"progress": 0.75}'
echo '{"text": "done"}'"#;
    let provider = build(
        Node::builder("Lines agent")
            .limits(quick_limits())
            .event("feedback", feedback_event())
            .progress_action(text_action("long"), sh(progress_script))
            .action(
                text_action("reply"),
                sh(r#"cat >/dev/null; echo '{"event": "feedback", "data": {"rating": 2}}'; printf '{\n  "text": "pretty"\n}\n'"#),
            ),
    );
    let server = serve(&provider).await;
    let requester = requester();
    let peer = requester
        .node
        .connect_with(
            server.url(),
            concord_node::Want::interface(["long", "reply", "feedback"]),
        )
        .await
        .unwrap();
    let mut events = peer.subscribe("feedback", None).await.unwrap();
    let mut run = peer
        .call_with_progress("long", json!({"text": "x"}))
        .await
        .unwrap();
    let mut reports = Vec::new();
    let output = loop {
        match run.next().await.unwrap() {
            concord_node::ActionUpdate::Progress { progress, .. } => reports.push(progress),
            concord_node::ActionUpdate::Done(result) => break result.unwrap(),
            _ => {}
        }
    };
    assert_eq!(output, json!({"text": "done"}));
    assert_eq!(reports, [0.25, 0.75]);
    let first = match events.next().await.unwrap() {
        concord_node::Notification::Event { id, data, .. } => {
            assert_eq!(data, json!({"rating": 4}));
            id
        }
        other => panic!("{other:?}"),
    };
    // Request-reply: event lines too; a pretty-printed answer is one JSON document.
    let answer = peer.call("reply", json!({"text": "x"})).await.unwrap();
    assert_eq!(answer, json!({"text": "pretty"}));
    match events.next().await.unwrap() {
        concord_node::Notification::Event { id, data, .. } => {
            assert_eq!((id, data), (first + 1, json!({"rating": 2})));
        }
        other => panic!("{other:?}"),
    }
    // Each bad line reported, none fatal.
    for needle in [
        "its `progress` is not a number from 0 to 1: 7",
        "the event `feedback` was not published",
        "line 1 is not a progress or event line",
    ] {
        let lines = logs.lines_with(needle);
        assert!(
            lines.len() == 1 && lines[0].contains("WARN"),
            "{needle}: {lines:?} in\n{}",
            logs.text()
        );
    }
}

#[tokio::test]
async fn exec_streams_bytes_through_its_stdin_and_stdout() {
    let stream = concord_node::StreamSpec {
        content_type: "text/plain".into(),
        output_content_type: None,
        frame_bytes: 0,
        initial_credit: 4096,
        realtime: false,
    };
    // The input in the environment first, then the requester's bytes in capitals.
    let upper = ExecAction::new("sh").args([
        "-c",
        &format!(
            "printf '%s\\n' \"${}\"; tr a-z A-Z",
            concord_node::STREAM_INPUT_ENV
        ),
    ]);
    let failing = ExecAction::new("sh").args(["-c", "cat >/dev/null; exit 3"]);
    let provider = build(
        Node::builder("Stream agent")
            .limits(quick_limits())
            .stream_action(text_action("upper"), stream.clone(), upper)
            .stream_action(text_action("failing"), stream, failing),
    );
    let server = serve(&provider).await;
    let requester = requester();
    let peer = requester
        .node
        .connect_with(
            server.url(),
            concord_node::Want::interface(["upper", "failing"]),
        )
        .await
        .unwrap();
    let (sender, mut receiver) = peer
        .open_stream("upper", json!({"text": "in"}))
        .await
        .unwrap();
    // More than the initial credit: the flow control carries it through.
    let text = "hello stream ".repeat(1000);
    sender.send(text.clone().into_bytes()).await.unwrap();
    sender.finish().await.unwrap();
    let mut back = Vec::new();
    while let Some(bytes) = receiver.next().await {
        back.extend(bytes.unwrap());
    }
    let back = String::from_utf8(back).unwrap();
    assert_eq!(
        back,
        format!("{{\"text\":\"in\"}}\n{}", text.to_uppercase())
    );

    let (sender, mut receiver) = peer
        .open_stream("failing", json!({"text": "x"}))
        .await
        .unwrap();
    let _ = sender.send(b"bytes".to_vec()).await;
    let _ = sender.finish().await;
    let mut failed = false;
    while let Some(bytes) = receiver.next().await {
        failed |= bytes.is_err();
    }
    assert!(failed, "a command that fails resets the stream");
}

#[tokio::test]
async fn events_are_posted_in_over_http_with_the_token() {
    let with_token = build(
        Node::builder("Ingest agent")
            .limits(quick_limits())
            .event("feedback", feedback_event())
            .event_ingest_token("s3cret-token")
            .action(text_action("echo"), ExecAction::new("cat")),
    );
    let server = serve(&with_token).await;
    let client = reqwest::Client::new();
    let url = format!("{}events/feedback", server.url());
    let post = |url: String, token: Option<&'static str>, body: &'static str| {
        let mut request = client.post(url).body(body);
        if let Some(token) = token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.text().await.unwrap())
        }
    };
    let (status, body) = post(url.clone(), Some("s3cret-token"), r#"{"rating": 3}"#).await;
    assert_eq!(status, 202, "{body}");
    let accepted: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(accepted["id"].as_u64().is_some_and(|id| id > 0), "{body}");
    let (status, body) = post(url.clone(), None, r#"{"rating": 3}"#).await;
    assert_eq!(status, 401, "{body}");
    let (status, _) = post(url.clone(), Some("s3cret-tokeN"), r#"{"rating": 3}"#).await;
    assert_eq!(status, 401);
    let (status, body) = post(url.clone(), Some("s3cret-token"), r#"{"rating": 0}"#).await;
    assert_eq!(status, 400, "{body}");
    let (status, _) = post(
        format!("{}events/nothing", server.url()),
        Some("s3cret-token"),
        "{}",
    )
    .await;
    assert_eq!(status, 404);

    // With an Idempotency-Key a post may be repeated: one event, its first id.
    let keyed = |key: &str, rating: u64| {
        let request = client
            .post(url.clone())
            .header("Authorization", "Bearer s3cret-token")
            .header("Idempotency-Key", key)
            .body(json!({ "rating": rating }).to_string());
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let body: serde_json::Value = response.json().await.unwrap();
            (status, body)
        }
    };
    let (status, first) = keyed("\"delivery-41\"", 4).await;
    assert_eq!(status, 202, "{first}");
    let (status, again) = keyed("\"delivery-41\"", 4).await;
    assert_eq!((status, &again), (202, &first));
    // The bare form is the same key.
    assert_eq!(keyed("delivery-41", 4).await, (202, first.clone()));
    let (status, other) = keyed("delivery-42", 5).await;
    assert_eq!(status, 202, "{other}");
    // Published once: the next id follows the first.
    assert_eq!(other["id"].as_u64(), first["id"].as_u64().map(|id| id + 1));
    for bad in ["\"\"", "\"has space\"", "q\"uote"] {
        let (status, body) = keyed(bad, 4).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    let (status, body) = keyed(&"k".repeat(129), 4).await;
    assert_eq!(status, 400, "{body}");

    // Without a token there is no such route.
    let without = build(
        Node::builder("No ingest")
            .limits(quick_limits())
            .event("feedback", feedback_event())
            .action(text_action("echo"), ExecAction::new("cat")),
    );
    let server = serve(&without).await;
    let (status, _) = post(
        format!("{}events/feedback", server.url()),
        Some("s3cret-token"),
        r#"{"rating": 3}"#,
    )
    .await;
    assert_eq!(status, 404);
    // A token a header cannot carry is refused when the node is built.
    let error = Node::builder("Bad token")
        .event_ingest_token("two words")
        .data_dir(without._dir.path().join("other"))
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("ingest token"), "{error}");
}

/// A command may write far more on stderr than `max_output_bytes` (which bounds what it
/// prints on stdout): stderr is read to its end, its last bytes kept for the log, so the
/// command never blocks on a full pipe and answers in time.
#[tokio::test]
async fn a_command_may_write_much_on_stderr_and_still_answer() {
    let noisy = ExecAction::new("sh")
        .args(["-c", "head -c 2097152 /dev/zero | tr '\\0' x >&2 && cat"])
        .max_output_bytes(64 * 1024)
        .timeout(Duration::from_secs(10));
    let provider = build(
        Node::builder("Noisy agent")
            .limits(quick_limits())
            .action(text_action("noisy"), noisy),
    );
    let server = serve(&provider).await;
    let answer = call_once(&requester(), server.url(), "noisy", "still here").await;
    assert_eq!(answer.unwrap(), json!({"text": "still here"}));
}
