//! The README's rules for every command, pinned: exit 0 when done, 1 when the input was
//! checked and found wrong (or the peer said no), 2 when the command could not run; and
//! every failure is exactly one line on standard error, starting `concord: `.
//!
//! For each subcommand: one success, one checked-and-wrong, one could-not-run. Then `--llm`:
//! an LLM that cannot be reached (a closed port) stops every command that takes the flag
//! with exit 2 naming its URL; one that answers (the scripted server) is used.

mod support;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use concord_llm_script::{ScriptServer, Step};
use serde_json::json;
use support::*;

/// A file that does not exist.
const MISSING: &str = "/nonexistent/concord-exit-codes";

/// Asserts `output` exited with `code`, and that a failure said so in exactly one line of
/// standard error starting `concord: `. `case` names the command in the message.
fn exits(case: &str, output: &Output, code: i32) {
    assert_eq!(
        output.code, code,
        "{case}: exit code\nstdout: {}\nstderr: {}",
        output.stdout, output.stderr
    );
    if code != 0 {
        assert!(
            output.stderr.starts_with("concord: ")
                && output.stderr.ends_with('\n')
                && output.stderr.lines().count() == 1,
            "{case}: standard error is not one `concord: ` line: {:?}",
            output.stderr
        );
    }
}

/// `concord <args>`, with standard input `stdin`.
fn concord_stdin(args: &[&str], stdin: &str) -> Output {
    run(concord().args(args).write_stdin(stdin.to_owned()))
}

/// `concord <args> <path> <rest>`.
fn concord_path(args: &[&str], path: &Path, rest: &[&str]) -> Output {
    run(concord().args(args).arg(path).args(rest))
}

/// A temporary file holding `text`.
fn temp_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// An address on loopback that nothing listens on.
fn closed_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{address}/v1")
}

/// A valid AICL `data_query` message with `msg_type` as its type.
fn aicl_message(msg_type: &str) -> String {
    format!(
        "[d: [s:protocol]:[s:LightAICL], [s:session_id]:[s:s1], [s:msg_type]:[s:{msg_type}], \
         [s:query]:[s:weather]]"
    )
}

#[test]
fn aicl() {
    exits(
        "aicl encode",
        &concord_stdin(&["aicl", "encode"], r#"{"a": 1}"#),
        0,
    );
    exits(
        "aicl encode, not JSON",
        &concord_stdin(&["aicl", "encode"], "{not json"),
        1,
    );
    exits(
        "aicl encode, missing file",
        &concord_stdin(&["aicl", "encode", MISSING], ""),
        2,
    );

    exits(
        "aicl decode",
        &concord_stdin(&["aicl", "decode"], "[i:42]"),
        0,
    );
    exits(
        "aicl decode, not AICL",
        &concord_stdin(&["aicl", "decode"], "[i:4x]"),
        1,
    );
    exits(
        "aicl decode, missing file",
        &concord_stdin(&["aicl", "decode", MISSING], ""),
        2,
    );

    let valid = aicl_message("data_query");
    exits("aicl check", &concord_stdin(&["aicl", "check"], &valid), 0);
    let missing_field = valid.replace(", [s:query]:[s:weather]", "");
    let output = concord_stdin(&["aicl", "check"], &missing_field);
    exits("aicl check, no query", &output, 1);
    assert!(output.stderr.contains("2001"), "{}", output.stderr);
    exits(
        "aicl check, missing file",
        &concord_stdin(&["aicl", "check", MISSING], ""),
        2,
    );
    exits(
        "aicl check, bad flag",
        &concord_stdin(&["aicl", "check", "--strictly"], ""),
        2,
    );
}

#[test]
fn aicl_check_refuses_an_unknown_msg_type_unless_lenient() {
    let unknown = aicl_message("teleport");
    let output = concord_stdin(&["aicl", "check"], &unknown);
    exits("aicl check, unknown msg_type", &output, 1);
    assert!(
        output.stderr.contains("error 1000") && output.stderr.contains("`teleport`"),
        "{}",
        output.stderr
    );
    let output = concord_stdin(&["aicl", "check", "--lenient"], &unknown);
    exits("aicl check --lenient, unknown msg_type", &output, 0);
    assert_eq!(output.stdout, "ok: teleport message, session s1\n");
}

#[test]
fn aicl_and_context_help_document_the_formats() {
    for args in [
        &["aicl", "--help"][..],
        &["aicl", "check", "--help"],
        &["aicl", "encode", "--help"],
        &["aicl", "decode", "--help"],
    ] {
        let output = run(concord().args(args));
        exits(&args.join(" "), &output, 0);
        for expected in [
            "[s:protocol]:[s:LightAICL], [s:session_id]:[s:…], [s:msg_type]:[s:…]",
            "task_request        task, constraints (optional: deadline)",
            "result              data or content (optional: metadata)",
            "refuses a msg_type not in this list",
            "bool, int8, uint8, int16, uint16, int32, uint32, int64, uint64, float16, bfloat16, float32, float64",
        ] {
            assert!(
                output.stdout.contains(expected),
                "{args:?}: {expected:?} missing from:\n{}",
                output.stdout
            );
        }
    }
    for args in [
        &["context", "--help"][..],
        &["context", "render", "--help"],
        &["context", "get", "--help"],
    ] {
        let output = run(concord().args(args));
        exits(&args.join(" "), &output, 0);
        for expected in [
            r#"{"type": "data", "data": any JSON, "schema"?: JSON Schema, "kind"?: "…", "description"?: "…"}"#,
            "`_instance`",
            "`†kind.path`",
        ] {
            assert!(
                output.stdout.contains(expected),
                "{args:?}: {expected:?} missing from:\n{}",
                output.stdout
            );
        }
    }
}

#[test]
fn context() {
    let dir = tempfile::tempdir().unwrap();
    let context = json!([
        {"type": "data", "kind": "user", "data": {"name": "Ada", "age": "thirty"},
         "schema": {"properties": {"age": {"type": "string"}}}}
    ]);
    let valid = temp_file(dir.path(), "context.json", &context.to_string());
    let mut broken = context.clone();
    broken[0]["schema"]["properties"]["age"]["type"] = json!("number");
    broken[0]["schema"]["properties"]["name"] = json!({"type": "number"});
    let violating = temp_file(dir.path(), "violating.json", &broken.to_string());

    exits(
        "context render",
        &concord_path(&["context", "render"], &valid, &[]),
        0,
    );
    let output = concord_path(&["context", "render"], &violating, &[]);
    exits("context render, two schema violations", &output, 1);
    assert!(
        output.stderr.contains("2 schema violations"),
        "{}",
        output.stderr
    );
    exits(
        "context render, missing file",
        &concord_path(&["context", "render"], Path::new(MISSING), &[]),
        2,
    );

    exits(
        "context get",
        &concord_path(&["context", "get"], &valid, &["†user.name"]),
        0,
    );
    exits(
        "context get, missing reference",
        &concord_path(&["context", "get"], &valid, &["†user.city"]),
        1,
    );
    exits(
        "context get, missing file",
        &concord_path(&["context", "get"], Path::new(MISSING), &["†user.name"]),
        2,
    );
}

#[test]
fn describe() {
    let agent = fixture("product-agent.json");
    exits(
        "describe validate",
        &concord_path(&["describe", "validate"], &agent, &[]),
        0,
    );
    let output = concord_stdin(&["describe", "validate", "-"], r#"{"title": 3}"#);
    exits("describe validate, invalid", &output, 1);
    assert!(output.stdout.contains("-: invalid"), "{}", output.stdout);
    let output = run(concord()
        .args(["describe", "validate", MISSING])
        .arg(format!("{MISSING}-too")));
    exits("describe validate, two missing files", &output, 2);

    exits(
        "describe new",
        &concord_stdin(&["describe", "new", "--title", "X"], ""),
        0,
    );
    let output = concord_stdin(&["describe", "new", "--title", "X", "--id", "notauri"], "");
    exits("describe new --id notauri", &output, 1);
    assert!(output.stdout.is_empty());
    exits(
        "describe new, no title",
        &concord_stdin(&["describe", "new"], ""),
        2,
    );
}

#[test]
fn protocol() {
    let dir = tempfile::tempdir().unwrap();
    let agent = fixture("product-agent.json");
    let draft = |action: &str| {
        run(concord()
            .args(["protocol", "draft", "--action", action, "--description"])
            .arg(&agent))
    };
    exits("protocol draft", &draft("getProductInfo"), 0);
    let output = draft("nope");
    exits("protocol draft --action nope", &output, 1);
    assert!(
        output.stderr.contains("publishes no action `nope`"),
        "{}",
        output.stderr
    );
    let output = run(concord().args([
        "protocol",
        "draft",
        "--action",
        "getProductInfo",
        "--description",
        MISSING,
    ]));
    exits("protocol draft, missing description", &output, 2);
    let invalid = temp_file(dir.path(), "invalid.json", r#"{"title": 3}"#);
    let output = run(concord()
        .args([
            "protocol",
            "draft",
            "--action",
            "getProductInfo",
            "--description",
        ])
        .arg(&invalid));
    exits("protocol draft, invalid description", &output, 1);

    let candidate = drafted_protocol();
    let judge = |candidate: &str| {
        run(concord()
            .args(["protocol", "judge", "--description"])
            .arg(&agent)
            .write_stdin(candidate.to_owned()))
    };
    exits("protocol judge, accepted", &judge(&candidate), 0);
    let output =
        judge(&candidate.replace("\"const\": \"getProductInfo\"", "\"const\": \"placeOrder\""));
    exits("protocol judge, rejected", &output, 1);
    assert_eq!(
        output.json()["status"],
        "rejected",
        "the decision is still printed"
    );
    let output = run(concord()
        .args(["protocol", "judge", "--description"])
        .arg(&agent)
        .arg(MISSING));
    exits("protocol judge, missing candidate", &output, 2);

    exits(
        "protocol hash",
        &concord_stdin(&["protocol", "hash"], "abc"),
        0,
    );
    exits(
        "protocol hash, missing file",
        &concord_stdin(&["protocol", "hash", MISSING], ""),
        2,
    );
}

#[test]
fn handler() {
    let dir = tempfile::tempdir().unwrap();
    let protocol = seed_protocol();
    let generate = |protocol: &Path, role: &str| {
        concord_path(
            &["handler", "generate"],
            protocol,
            &["--role", role, "--action", "getProductInfo"],
        )
    };
    let output = generate(&protocol, "requester");
    exits("handler generate", &output, 0);
    let module = temp_file(dir.path(), "requester.js", &output.stdout);
    exits(
        "handler generate, no template fits",
        &generate(&seed("seed-based-on-uri.zh.md"), "provider"),
        1,
    );
    exits(
        "handler generate, missing protocol",
        &generate(Path::new(MISSING), "provider"),
        2,
    );

    let run_module = |module: &Path, input: &str| {
        concord_path(&["handler", "run"], module, &["encodeRequest", input])
    };
    let request = r#"{"messageId": "m1", "input": {"productId": "P1"}}"#;
    exits("handler run", &run_module(&module, request), 0);
    exits(
        "handler run, the handler throws",
        &run_module(&module, r#"{"messageId": "m1", "input": {}}"#),
        1,
    );
    exits(
        "handler run, missing module",
        &run_module(Path::new(MISSING), request),
        2,
    );

    let cases = seed("seed-test-cases.zh.md");
    let test = |extra: &[&OsStr]| {
        run(concord()
            .args(["handler", "test"])
            .arg(&protocol)
            .arg(&cases)
            .args(extra))
    };
    exits("handler test", &test(&[]), 0);
    let wrong = fixture("handler-wrong-provider.js");
    let output = test(&[OsStr::new("--provider"), wrong.as_os_str()]);
    exits("handler test, a failing case", &output, 1);
    assert!(
        output.stderr.contains("1 of 2 test case(s) failed"),
        "{}",
        output.stderr
    );
    exits(
        "handler test, missing module",
        &test(&[OsStr::new("--provider"), OsStr::new(MISSING)]),
        2,
    );
}

#[test]
fn registry_and_protocols() {
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().as_os_str();
    let registry = |args: &[&OsStr]| {
        run(concord()
            .arg("registry")
            .arg("--data-dir")
            .arg(data_dir)
            .args(args))
    };
    let uri = OsStr::new("https://protocols.example/product-info/1.0");
    let add = OsStr::new("add");
    let seed = seed_protocol();
    let action = [OsStr::new("--action"), OsStr::new("getProductInfo")];
    let output = registry(&[add, uri, seed.as_os_str(), action[0], action[1]]);
    exits("registry add", &output, 0);
    let not_json = temp_file(data.path(), "action.json", "{");
    let output = registry(&[
        add,
        uri,
        seed.as_os_str(),
        OsStr::new("--action-schema"),
        not_json.as_os_str(),
    ]);
    exits("registry add, an action that is not JSON", &output, 1);
    exits(
        "registry add, missing document",
        &registry(&[add, uri, OsStr::new(MISSING), action[0], action[1]]),
        2,
    );
    exits("registry list", &registry(&[OsStr::new("list")]), 0);
    exits(
        "registry remove, unknown URI",
        &registry(&[OsStr::new("remove"), OsStr::new("urn:nothing")]),
        1,
    );
    exits(
        "registry remove",
        &registry(&[OsStr::new("remove"), uri]),
        0,
    );

    let protocols = |args: &[&str]| {
        run(concord()
            .arg("protocols")
            .arg("--data-dir")
            .arg(data_dir)
            .args(args))
    };
    exits("protocols list", &protocols(&["list"]), 0);
    exits(
        "protocols show, unknown hash",
        &protocols(&["show", "deadbeef"]),
        1,
    );
    exits("protocols show, no selector", &protocols(&["show"]), 2);

    let transcripts = |args: &[&str]| {
        run(concord()
            .arg("transcripts")
            .arg("--data-dir")
            .arg(data_dir)
            .args(args))
    };
    exits("transcripts list", &transcripts(&["list"]), 0);
    exits(
        "transcripts show, unknown id",
        &transcripts(&["show", "99999"]),
        1,
    );
    exits("transcripts show, no id", &transcripts(&["show"]), 2);
}

#[test]
fn call_and_serve() {
    let data = tempfile::tempdir().unwrap();
    let served = Served::example(&data.path().join("served"));
    let client_dir = data.path().join("client");
    let output = call_product(&served.url, r#"{"productId": "P12345"}"#, &client_dir, &[]);
    exits("call", &output, 0);
    let output = run(concord()
        .args(["call", &served.url, "launchRocket", "{}", "--data-dir"])
        .arg(&client_dir));
    exits("call, unknown action", &output, 1);
    let output = call_product(&closed_port(), r#"{"productId": "P1"}"#, &client_dir, &[]);
    exits("call, unreachable peer", &output, 2);
    let (code, _) = served.interrupt();
    assert_eq!(code, 0, "serve ends with 0 on Ctrl-C");

    let (_dir, config) = write_config("[agent]\ntitle = 3\n");
    let output = run(concord().arg("serve").arg("--config").arg(&config));
    exits("serve, a wrong configuration", &output, 1);
    let output = run(concord().args(["serve", "--config", MISSING]));
    exits("serve, missing configuration", &output, 2);
}

#[test]
fn llm() {
    exits(
        "llm check, unreachable",
        &run(concord().args(["llm", "check", "--base-url", &closed_port()])),
        2,
    );
    exits(
        "llm check, not an http URL",
        &run(concord().args(["llm", "check", "--base-url", "ftp://example.com/v1"])),
        2,
    );
    exits(
        "llm check, no base URL",
        &run(concord().args(["llm", "check"])),
        2,
    );
}

#[test]
fn demo() {
    exits("demo", &run(concord().args(["demo", "--calls", "5"])), 0);
    exits(
        "demo, zero calls",
        &run(concord().args(["demo", "--calls", "0"])),
        2,
    );
}

/// The commands that take `--llm`, each with an LLM that cannot be reached: exit 2 at once,
/// naming the URL, before anything else is done.
#[test]
fn an_unreachable_llm_stops_every_command_that_asks_for_one() {
    let base_url = closed_port();
    let data = tempfile::tempdir().unwrap();
    let agent = fixture("product-agent.json");
    let protocol = seed_protocol();
    let mut commands: Vec<(&str, assert_cmd::Command)> = Vec::new();
    let mut command = concord();
    command
        .args([
            "protocol",
            "draft",
            "--llm",
            "--action",
            "getProductInfo",
            "--description",
        ])
        .arg(&agent);
    commands.push(("protocol draft --llm", command));
    let mut command = concord();
    command
        .args(["protocol", "judge", "--llm", "--description"])
        .arg(&agent)
        .write_stdin(drafted_protocol());
    commands.push(("protocol judge --llm", command));
    let mut command = concord();
    command
        .args(["handler", "generate", "--llm", "--role", "requester"])
        .args(["--action", "getProductInfo"])
        .arg(&protocol);
    commands.push(("handler generate --llm", command));
    let mut command = concord();
    command
        .args(["registry", "--data-dir"])
        .arg(data.path())
        .args(["add", "urn:x:product-info", "--llm"])
        .args(["--action", "getProductInfo"])
        .arg(&protocol);
    commands.push(("registry add --llm", command));
    let mut command = concord();
    command
        .args([
            "call",
            "http://127.0.0.1:9/",
            "getProductInfo",
            "{}",
            "--llm",
            "--data-dir",
        ])
        .arg(data.path());
    commands.push(("call --llm", command));
    let mut command = concord();
    command.args(["demo", "--llm", "--calls", "5"]);
    commands.push(("demo --llm", command));

    let host = base_url
        .trim_start_matches("http://")
        .trim_end_matches("/v1");
    for (case, mut command) in commands {
        let output = run(command
            .env("CONCORD_LLM_BASE_URL", &base_url)
            .env("CONCORD_LLM_MODEL", "test-model"));
        exits(case, &output, 2);
        assert!(
            output.stderr.contains("the LLM cannot be used") && output.stderr.contains(host),
            "{case}: {}",
            output.stderr
        );
    }
}

/// A reachable LLM passes the probe (which asks the model nothing) and is used.
#[tokio::test(flavor = "multi_thread")]
async fn a_reachable_llm_passes_the_probe_and_is_used() {
    let answer = json!({"status": "accepted"});
    let server = ScriptServer::start([Step::content(answer.to_string())])
        .await
        .unwrap();
    let base_url = server.base_url();
    let agent = fixture("product-agent.json");
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().to_owned();
    let (judged, generated, registered) = tokio::task::spawn_blocking(move || {
        let llm = |command: &mut assert_cmd::Command| -> Output {
            run(command
                .env("CONCORD_LLM_BASE_URL", &base_url)
                .env("CONCORD_LLM_MODEL", "test-model"))
        };
        (
            llm(concord()
                .args(["protocol", "judge", "--llm", "--description"])
                .arg(&agent)
                .write_stdin("# Requirement\nGet product info, in prose only.\n")),
            // The template fits: the LLM is checked, then not asked.
            llm(concord()
                .args(["handler", "generate", "--llm", "--role", "requester"])
                .args(["--action", "getProductInfo"])
                .arg(seed_protocol())),
            llm(concord()
                .args(["registry", "--data-dir"])
                .arg(&data_dir)
                .args(["add", "urn:x:product-info", "--llm"])
                .args(["--action", "getProductInfo"])
                .arg(seed_protocol())),
        )
    })
    .await
    .unwrap();
    exits("protocol judge --llm", &judged, 0);
    assert_eq!(judged.json()["decidedBy"]["policy"], "llm");
    exits("handler generate --llm", &generated, 0);
    exits("registry add --llm", &registered, 0);
    assert_eq!(server.requests().len(), 1, "only the judge asked the model");
}

/// An LLM that answers the probe but fails the call itself: the command could not run
/// (exit 2), on one line, not "the input is wrong".
#[tokio::test(flavor = "multi_thread")]
async fn an_llm_failing_mid_run_exits_2() {
    let server = ScriptServer::start([Step::status(400, r#"{"error": {"message": "no"}}"#)])
        .await
        .unwrap();
    let base_url = server.base_url();
    let agent = fixture("product-agent.json");
    let output = tokio::task::spawn_blocking(move || {
        run(concord()
            .args(["protocol", "judge", "--llm", "--description"])
            .arg(&agent)
            .write_stdin("# Requirement\nGet product info, in prose only.\n")
            .env("CONCORD_LLM_BASE_URL", &base_url)
            .env("CONCORD_LLM_MODEL", "test-model"))
    })
    .await
    .unwrap();
    exits("protocol judge --llm, the LLM answers 400", &output, 2);
    assert!(output.stderr.contains("HTTP 400"), "{}", output.stderr);
}

/// `concord serve` with an LLM configured that cannot be reached: the operator asked for
/// it, so the agent does not start (exit 2, naming the URL).
#[test]
fn serve_with_an_unreachable_llm_does_not_start() {
    let base_url = closed_port();
    let (_dir, config) = temp_config(&format!(
        "\n[llm]\nbase_url = {base_url:?}\nmodel = \"test-model\"\n"
    ));
    let output = run(concord().arg("serve").arg("--config").arg(&config));
    exits("serve, unreachable LLM", &output, 2);
    assert!(
        output.stderr.contains("the LLM cannot be used"),
        "{}",
        output.stderr
    );
}

#[test]
fn serve_with_nats_unreachable_does_not_start() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = format!("nats://{}", listener.local_addr().unwrap());
    drop(listener);
    let text = config_text(&format!(
        "\n[cluster]\nnats = [{closed:?}]\ntimeout = \"500ms\"\n"
    ))
    .replace(
        "data_dir = \"data\"",
        "data_dir = \"data\"\npublic_url = \"http://127.0.0.1:9/\"",
    );
    let (dir, config) = write_config(&text);
    // A replica makes no keys of its own (that is exit 1, before NATS is tried).
    let made = run(concord()
        .args(["identity", "new", "--data-dir"])
        .arg(dir.path().join("data")));
    exits("identity new", &made, 0);
    let output = run(concord().arg("serve").arg("--config").arg(&config));
    exits("serve, NATS unreachable", &output, 2);
    assert!(
        output.stderr.contains("`cluster.nats`") && output.stderr.contains(&closed),
        "{}",
        output.stderr
    );
}
