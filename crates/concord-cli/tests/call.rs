//! `concord call` against `concord serve`: negotiation on the first call, 0-RTT on the
//! second (a signed caller's: 0-RTT only in an authenticated session), who may call what,
//! and the exit codes and messages of what can go wrong.

mod support;

use std::ffi::OsStr;

use support::*;

fn serve() -> (Served, tempfile::TempDir) {
    let data = tempfile::tempdir().unwrap();
    (Served::example(data.path()), data)
}

#[test]
fn the_first_call_negotiates_and_the_second_resumes_with_0_rtt() {
    let (served, _config) = provider("");
    let signer = Signer::start();
    let call_json = |url: &str, input: &str, data_dir: &std::path::Path| {
        let mut options = vec![OsStr::new("--json")];
        options.extend(signer.args());
        call_product(url, input, data_dir, &options)
    };
    let requester = &signer.data_dir;

    let first = call_json(&served.url, r#"{"productId": "P12345"}"#, requester.path());
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    // Signed, so nothing is said about calling anonymously.
    assert_eq!(first.stderr, "");
    let first = first.json();
    // Signed as the requester's DID, in a Noise channel that proved the provider's.
    assert_eq!(first["signedAs"], signer.did.as_str(), "{first:#}");
    assert_eq!(
        first["peerDid"],
        served.did.as_deref().unwrap(),
        "{first:#}"
    );
    assert_eq!(first["encrypted"], true, "{first:#}");
    assert_eq!(first["output"]["productName"], "Laptop");
    assert_eq!(first["action"], "getProductInfo");
    assert_eq!(first["settledBy"], "negotiated", "{first:#}");
    assert!(first["offeredHash"].is_null());
    assert!(
        first["negotiationMessages"].as_u64().unwrap() >= 6,
        "{first:#}"
    );
    assert!(
        first["roundTrips"]["negotiation"].as_u64().unwrap() >= 2,
        "{first:#}"
    );
    assert!(first["verifiedCases"].as_u64().unwrap() >= 1, "{first:#}");
    assert_eq!(first["llm"]["calls"], 0);
    assert_eq!(first["code"], serde_json::json!(["template"]));
    let frames: Vec<String> = first["frames"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|frame| {
            Some(format!(
                "{} {} {}",
                frame["direction"].as_str()?,
                frame["action"].as_str()?,
                frame["status"].as_str()?
            ))
        })
        .collect();
    assert!(
        frames.contains(&"received protocolNegotiation accepted".to_owned()),
        "{frames:?}"
    );
    assert!(
        frames.iter().any(|f| f.starts_with("sent codeGeneration")),
        "{frames:?}"
    );
    for key in ["setupMs", "callMs", "totalMs"] {
        assert!(first["timings"][key].as_f64().unwrap() > 0.0, "{first:#}");
    }

    let second = call_json(&served.url, r#"{"productId": "P2"}"#, requester.path());
    assert_eq!(second.code, 0, "{}{}", second.stdout, second.stderr);
    let second = second.json();
    assert_eq!(second["output"]["currency"], "EUR");
    assert_eq!(second["settledBy"], "resumed", "{second:#}");
    assert_eq!(second["hash"], first["hash"]);
    assert_eq!(second["offeredHash"], first["hash"]);
    assert_eq!(second["negotiationMessages"], 0, "{second:#}");
    assert_eq!(second["roundTrips"]["negotiation"], 0);
    assert_eq!(second["llm"]["calls"], 0);
    assert_eq!(second["code"], serde_json::json!([]));
    let kinds: Vec<&str> = second["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|frame| frame["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["hello", "hello"]);

    // Anonymous (--anonymous, or no --did-host): no 0-RTT offered, negotiated again.
    let anonymous = call_product(
        &served.url,
        r#"{"productId": "P2"}"#,
        requester.path(),
        &[OsStr::new("--json"), OsStr::new("--anonymous")],
    );
    assert_eq!(anonymous.code, 0, "{}", anonymous.stderr);
    let anonymous = anonymous.json();
    assert!(anonymous["signedAs"].is_null(), "{anonymous:#}");
    assert_eq!(anonymous["encrypted"], true, "{anonymous:#}");
    assert!(anonymous["offeredHash"].is_null(), "{anonymous:#}");
    // Without --did-host, a requester that has an identity says once that it calls
    // anonymously; the human summary says how the session was protected.
    let plain = call_product(&served.url, r#"{"productId": "P2"}"#, requester.path(), &[]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    assert_eq!(plain.json()["productName"], "Mouse");
    assert_eq!(
        plain.stderr.matches("calling anonymously").count(),
        1,
        "{}",
        plain.stderr
    );
    assert!(
        plain
            .stderr
            .contains("session: encrypted (Noise); peer did:wba:localhost"),
        "{}",
        plain.stderr
    );
}

#[test]
fn an_action_for_authenticated_callers_takes_any_proven_did() {
    let signer = Signer::start();
    let (served, _config) = provider("allow = \"authenticated\"\n");
    let input = r#"{"productId": "P2"}"#;
    let signed = signed_call_json(&served.url, input, &signer);
    assert_eq!(signed.code, 0, "{}{}", signed.stdout, signed.stderr);
    assert_eq!(signed.json()["output"]["productName"], "Mouse");
    let stranger = tempfile::tempdir().unwrap();
    let refused = call_product(&served.url, input, stranger.path(), &[]);
    assert_eq!(refused.code, 1, "{}{}", refused.stdout, refused.stderr);
    assert!(
        refused.stderr.contains("401") && refused.stderr.lines().count() == 1,
        "{}",
        refused.stderr
    );
}

#[test]
fn an_action_is_called_only_by_whom_it_allows() {
    let signer = Signer::start();
    let (served, _config) = provider(&format!("allow = [{:?}]\n", signer.did));
    let stranger = tempfile::tempdir().unwrap();
    let input = r#"{"productId": "P2"}"#;

    // The DID it allows: answered.
    let mut options = vec![OsStr::new("--json")];
    options.extend(signer.args());
    let allowed = call_product(&served.url, input, signer.data_dir.path(), &options);
    assert_eq!(allowed.code, 0, "{}{}", allowed.stdout, allowed.stderr);
    assert_eq!(allowed.json()["signedAs"], signer.did.as_str());

    // Anyone else: refused (1), saying why without internals, and nothing ran.
    let refused = call_product(&served.url, input, stranger.path(), &[]);
    assert_eq!(refused.code, 1, "{}{}", refused.stdout, refused.stderr);
    assert_eq!(refused.stdout, "");
    let refused = call_product(
        &served.url,
        input,
        signer.data_dir.path(),
        &[OsStr::new("--anonymous")],
    );
    assert_eq!(refused.code, 1, "{}{}", refused.stdout, refused.stderr);

    // --did-host without an identity to sign with: 1, before connecting.
    call_product(
        &served.url,
        input,
        stranger.path(),
        &[OsStr::new("--did-host"), OsStr::new("localhost:1")],
    )
    .fails(1, "no identity to sign with");
}

#[test]
fn the_input_can_come_from_standard_input_and_plain_output_is_the_output() {
    let (served, _data) = serve();
    let requester = tempfile::tempdir().unwrap();
    let output = run(concord()
        .args([
            "call",
            &served.description,
            "getProductInfo",
            "-",
            "--data-dir",
        ])
        .arg(requester.path())
        .write_stdin(r#"{"productId": "P2"}"#));
    assert_eq!(output.code, 0, "{}", output.stderr);
    let product = output.json();
    assert_eq!(product["productName"], "Mouse");
    assert!(product.get("settledBy").is_none());
}

#[test]
fn what_goes_wrong_has_an_exit_code_and_says_what_in_one_line() {
    let (served, _data) = serve();
    let requester = tempfile::tempdir().unwrap();
    let call = |args: &[&str]| {
        run(concord()
            .arg("call")
            .args(args)
            .arg("--data-dir")
            .arg(requester.path()))
    };
    let url = served.url.as_str();

    // The peer does not publish the action: 1.
    call(&[url, "getPrice", r#"{"productId": "P2"}"#])
        .fails(1, "publishes no action `getPrice` (it has: getProductInfo)");
    // The backend says no (the script answers an unknown product with its error object,
    // code 404): 1, with the script's message and nothing of its stderr.
    let output = call(&[url, "getProductInfo", r#"{"productId": "P404"}"#]);
    output.fails(1, "the peer answered 404");
    assert!(
        output.stderr.contains("no product P404") && !output.stderr.contains("unknown product id"),
        "{}",
        output.stderr
    );
    // Input the action's schema refuses is refused before sending, naming the action and
    // where, as every mode says it: 1.
    let invalid =
        "getProductInfo: invalid input: the input of the action `getProductInfo` is invalid at /";
    call(&[url, "getProductInfo", r#"{"productId": 7}"#]).fails(
        1,
        &format!("{invalid}productId: 7 is not of type \"string\""),
    );
    call(&[url, "getProductInfo", "{}"]).fails(
        1,
        &format!("{invalid}: \"productId\" is a required property"),
    );
    call(&[url, "getProductInfo", "[1]"])
        .fails(1, &format!("{invalid}: [1] is not of type \"object\""));
    // Input that is not JSON, as an argument or on standard input: 2.
    call(&[url, "getProductInfo", "{productId: P2}"]).fails(
        2,
        "the input (argument) is not valid JSON: key must be a string at line 1 column 2",
    );
    run(concord()
        .args(["call", url, "getProductInfo", "-", "--data-dir"])
        .arg(requester.path())
        .write_stdin("{\"productId\": "))
    .fails(2, "the input (on standard input) is not valid JSON");

    // Nobody listens there: 2.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let unreachable = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    call(&[&unreachable, "getProductInfo", r#"{"productId": "P2"}"#]).fails(
        2,
        &format!("cannot fetch the description at {unreachable}/.well-known/wot"),
    );
    // No agent there: 2.
    call(&[&format!("{url}nothing"), "getProductInfo", "{}"]).fails(2, "HTTP 404 Not Found");
    // Not a peer URL: 2.
    call(&["ws://127.0.0.1:1/", "getProductInfo", "{}"]).fails(2, "is not a peer URL");
    call(&["127.0.0.1:8080", "getProductInfo", "{}"]).fails(2, "is not a peer URL");
    // --llm with no LLM configured, a zero timeout: 2.
    call(&[url, "getProductInfo", "{}", "--llm"]).fails(2, "--llm needs an LLM");
    call(&[url, "getProductInfo", "{}", "--timeout", "0s"])
        .fails(2, "--timeout must be longer than zero");
}

/// `concord serve` behind a reverse proxy that terminates TLS (`node.public_url`), and
/// `concord call https://…` trusting the proxy's private CA with `--ca-cert`.
#[test]
fn a_peer_behind_tls_is_called_over_https_and_wss_with_its_ca() {
    use concord_fixtures::tls::{PrivateCa, TlsProxy};

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let ca = PrivateCa::for_localhost().unwrap();
    let proxy = runtime.block_on(TlsProxy::bind(&ca)).unwrap();
    let public = proxy.url();
    let (dir, config) = write_config(&config_text("").replace(
        "data_dir = \"data\"",
        &format!("data_dir = \"data\"\npublic_url = {public:?}"),
    ));
    let served = Served::start(&[OsStr::new("--config"), config.as_os_str()]);
    assert_eq!(served.url, public);
    assert!(
        served.endpoint.starts_with("wss://localhost:"),
        "{}",
        served.banner
    );
    let _forwarding = runtime.enter();
    proxy.forward_to(served.listening);

    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let requester = tempfile::tempdir().unwrap();
    let input = r#"{"productId": "P2"}"#;
    let trusted = call_product(
        &public,
        input,
        requester.path(),
        &[
            OsStr::new("--json"),
            OsStr::new("--ca-cert"),
            ca_file.as_os_str(),
        ],
    );
    assert_eq!(trusted.code, 0, "{}{}", trusted.stdout, trusted.stderr);
    let report = trusted.json();
    assert_eq!(report["output"]["productName"], "Mouse");
    assert_eq!(report["settledBy"], "negotiated", "{report:#}");

    // The system's trust store alone does not know the private CA.
    call_json(&public, input, requester.path()).fails(2, "invalid peer certificate: UnknownIssuer");
    // A file that holds no certificate is named.
    call_product(
        &public,
        input,
        requester.path(),
        &[OsStr::new("--ca-cert"), config.as_os_str()],
    )
    .fails(2, "no `-----BEGIN CERTIFICATE-----` block found");
}

/// `--reference-compatible` numbers the negotiation as the Python SDK does (first
/// sequenceId 1, an `accepted` echo); without it, the spec's 0 and no echo.
#[test]
fn reference_compatible_numbering_starts_at_one_and_echoes_accepted() {
    let (served, _data) = serve();
    let negotiation = |extra: &[&str]| -> Vec<(String, u64, String)> {
        let requester = tempfile::tempdir().unwrap();
        let mut options = vec![OsStr::new("--json")];
        options.extend(extra.iter().map(OsStr::new));
        let output = call_product(
            &served.url,
            r#"{"productId": "P2"}"#,
            requester.path(),
            &options,
        );
        assert_eq!(output.code, 0, "{}{}", output.stdout, output.stderr);
        output.json()["frames"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|frame| frame["action"] == "protocolNegotiation")
            .map(|frame| {
                (
                    frame["direction"].as_str().unwrap().to_owned(),
                    frame["sequenceId"].as_u64().unwrap(),
                    frame["status"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let spec = negotiation(&[]);
    assert_eq!(
        spec[0],
        ("sent".to_owned(), 0, "negotiating".to_owned()),
        "{spec:?}"
    );
    assert!(!spec
        .iter()
        .any(|(direction, _, status)| direction == "sent" && status == "accepted"));
    let reference = negotiation(&["--reference-compatible"]);
    assert_eq!(
        reference[0],
        ("sent".to_owned(), 1, "negotiating".to_owned()),
        "{reference:?}"
    );
    assert!(
        reference
            .iter()
            .any(|(direction, _, status)| direction == "sent" && status == "accepted"),
        "{reference:?}"
    );
}

/// `concord serve` with `node.tls` serves `https://` and `wss://` itself.
#[test]
fn an_agent_with_a_certificate_is_called_over_https_and_wss() {
    let ca = concord_fixtures::tls::PrivateCa::for_localhost().unwrap();
    let (dir, config) = write_config(&config_text("").replace(
        "data_dir = \"data\"",
        "data_dir = \"data\"\ntls = { certificate = \"chain.pem\", key = \"key.pem\" }",
    ));
    std::fs::write(dir.path().join("chain.pem"), ca.chain_pem()).unwrap();
    std::fs::write(dir.path().join("key.pem"), ca.key_pem()).unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let served = Served::start(&[OsStr::new("--config"), config.as_os_str()]);
    assert!(
        served.url.starts_with("https://127.0.0.1:"),
        "{}",
        served.banner
    );
    assert!(
        served.endpoint.starts_with("wss://127.0.0.1:"),
        "{}",
        served.banner
    );

    let requester = tempfile::tempdir().unwrap();
    let called = call_product(
        &served.url,
        r#"{"productId": "P2"}"#,
        requester.path(),
        &[
            OsStr::new("--json"),
            OsStr::new("--ca-cert"),
            ca_file.as_os_str(),
        ],
    );
    assert_eq!(called.code, 0, "{}{}", called.stdout, called.stderr);
    assert_eq!(called.json()["output"]["productName"], "Mouse");
}

/// JSON lines on standard input (no input argument): one call per line over one session,
/// one output line per input line, in order; a line that is not JSON is reported for that
/// line and the rest go on; exit code 1.
#[test]
fn json_lines_on_standard_input_are_called_over_one_session_in_order() {
    let (served, _data) = serve();
    let requester = tempfile::tempdir().unwrap();
    let lines = "{\"productId\": \"P12345\"}\n{productId: oops}\n\n{\"productId\": \"P2\"}\n";
    let output = run(concord()
        .args(["call", &served.url, "getProductInfo", "--data-dir"])
        .arg(requester.path())
        .write_stdin(lines));
    assert_eq!(output.code, 1, "{}{}", output.stdout, output.stderr);
    let results: Vec<serde_json::Value> = output
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(results.len(), 3, "{}", output.stdout);
    assert_eq!(results[0]["productName"], "Laptop");
    assert_eq!(results[1]["error"]["code"], "invalid-json");
    assert_eq!(results[2]["productName"], "Mouse");
    assert_eq!(output.stderr.lines().count(), 1, "{}", output.stderr);
    assert!(
        output
            .stderr
            .starts_with("concord: line 2: not valid JSON: key must be a string"),
        "{}",
        output.stderr
    );

    // With --json, from a file, several in flight: one object per line, still in order,
    // with the line number, the output or the error, and the latency.
    let file = requester.path().join("inputs.jsonl");
    let mut text = String::new();
    for index in 0..12 {
        let id = match index % 3 {
            0 => "P12345",
            1 => "P404",
            _ => "P2",
        };
        text.push_str(&format!("{{\"productId\": \"{id}\"}}\n"));
    }
    std::fs::write(&file, text).unwrap();
    let output = run(concord()
        .args([
            "call",
            &served.url,
            "getProductInfo",
            "--json",
            "--concurrency",
            "4",
        ])
        .arg("--input")
        .arg(&file)
        .arg("--data-dir")
        .arg(requester.path()));
    assert_eq!(output.code, 1, "{}{}", output.stdout, output.stderr);
    let results: Vec<serde_json::Value> = output
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(results.len(), 12, "{}", output.stdout);
    for (index, result) in results.iter().enumerate() {
        assert_eq!(result["line"], index + 1, "{result}");
        assert!(result["latencyMs"].as_f64().unwrap() >= 0.0, "{result}");
        match index % 3 {
            0 => assert_eq!(result["output"]["productName"], "Laptop", "{result}"),
            1 => {
                assert_eq!(result["error"]["code"], 404, "{result}");
                assert!(result["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("no product P404"));
            }
            _ => assert_eq!(result["output"]["productName"], "Mouse", "{result}"),
        }
    }

    // Every line answered: 0.
    let output = run(concord()
        .args([
            "call",
            &served.url,
            "getProductInfo",
            "--input",
            "-",
            "--data-dir",
        ])
        .arg(requester.path())
        .write_stdin("{\"productId\": \"P2\"}\n{\"productId\": \"P2\"}\n"));
    assert_eq!(output.code, 0, "{}{}", output.stdout, output.stderr);
    assert_eq!(output.stdout.lines().count(), 2, "{}", output.stdout);

    // An input file that cannot be read: 2.
    run(concord()
        .args([
            "call",
            &served.url,
            "getProductInfo",
            "--input",
            "no-such.jsonl",
            "--data-dir",
        ])
        .arg(requester.path()))
    .fails(2, "cannot read no-such.jsonl");
}

/// `--repeat N`: the one input N times over one session, then a summary.
#[test]
fn repeat_sends_the_input_n_times_and_prints_a_summary() {
    let (served, _data) = serve();
    let requester = tempfile::tempdir().unwrap();
    let input = r#"{"productId": "P2"}"#;
    let output = call_product(
        &served.url,
        input,
        requester.path(),
        &[OsStr::new("--repeat"), OsStr::new("50")],
    );
    assert_eq!(output.code, 0, "{}{}", output.stdout, output.stderr);
    assert_eq!(output.stdout.lines().count(), 1, "{}", output.stdout);
    assert!(
        output.stdout.starts_with("50 calls (0 failed) in ")
            && output.stdout.contains("calls/s")
            && output.stdout.contains("p50 ")
            && output.stdout.contains("p99 "),
        "{}",
        output.stdout
    );

    let output = call_product(
        &served.url,
        input,
        requester.path(),
        &[
            OsStr::new("--repeat"),
            OsStr::new("50"),
            OsStr::new("--concurrency"),
            OsStr::new("8"),
            OsStr::new("--json"),
        ],
    );
    assert_eq!(output.code, 0, "{}{}", output.stdout, output.stderr);
    let summary = output.json();
    assert_eq!(summary["calls"], 50);
    assert_eq!(summary["ok"], 50);
    assert_eq!(summary["errors"], 0);
    assert_eq!(summary["concurrency"], 8);
    assert!(
        summary["callsPerSecond"].as_f64().unwrap() > 0.0,
        "{summary}"
    );
    let (p50, p99) = (
        summary["p50Ms"].as_f64().unwrap(),
        summary["p99Ms"].as_f64().unwrap(),
    );
    assert!(p50 > 0.0 && p50 <= p99, "{summary}");

    // Calls answered with an error: 1, and the first error on standard error.
    let output = call_product(
        &served.url,
        r#"{"productId": "P404"}"#,
        requester.path(),
        &[
            OsStr::new("--repeat"),
            OsStr::new("3"),
            OsStr::new("--json"),
        ],
    );
    assert_eq!(output.code, 1, "{}{}", output.stdout, output.stderr);
    assert_eq!(output.json()["errors"], 3);
    output.fails(1, "3 of 3 calls failed; the first: the peer answered 404");

    // --repeat needs one input.
    let output = run(concord()
        .args(["call", &served.url, "getProductInfo", "--repeat", "0", "{}"])
        .arg("--data-dir")
        .arg(requester.path()));
    assert_eq!(output.code, 2, "{}", output.stderr);
}

/// A request-reply action whose input closes its members: a misspelt optional member is
/// refused before anything is sent (not answered as if absent), in the words every mode
/// uses, with exit 1.
#[test]
fn a_misspelt_member_of_a_closed_input_is_refused_naming_the_action_and_where() {
    let examples = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples");
    let (served, _config) = provider(&format!(
        r#"
[[actions]]
name = "lookupProduct"
description = "A product, optionally in a locale."
input = {{ type = "object", properties = {{ productId = {{ type = "string" }}, locale = {{ type = "string" }} }}, required = ["productId"], additionalProperties = false }}
output = {output:?}
exec = {{ command = "sh", args = [{script:?}], timeout = "5s" }}
"#,
        output = examples
            .join("product-info.schema.json")
            .display()
            .to_string(),
        script = examples.join("product-info.sh").display().to_string(),
    ));
    let requester = tempfile::tempdir().unwrap();
    let call = |input: &str| {
        run(concord()
            .args(["call", served.url.as_str(), "lookupProduct", input])
            .arg("--data-dir")
            .arg(requester.path()))
    };
    let found = call(r#"{"productId": "P2", "locale": "fr"}"#);
    assert_eq!(found.code, 0, "{}", found.stderr);
    call(r#"{"productId": "P2", "locael": "fr"}"#).fails(
        1,
        "lookupProduct: invalid input: the input of the action `lookupProduct` is invalid at /: Additional properties are not allowed ('locael' was unexpected)",
    );
}
