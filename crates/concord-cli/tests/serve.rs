//! `concord serve`: the example configuration and temporary ones on 127.0.0.1:0, a
//! consensus protocol from the configuration, graceful shutdown, and bad configurations.

mod support;

use std::ffi::OsStr;
use std::path::PathBuf;

use support::*;

#[test]
fn the_example_configuration_serves_until_ctrl_c() {
    let data = tempfile::tempdir().unwrap();
    let served = Served::example(data.path());
    assert!(
        served.url.starts_with("http://127.0.0.1:"),
        "{}",
        served.banner
    );
    assert!(
        served.endpoint.starts_with("ws://127.0.0.1:"),
        "{}",
        served.banner
    );
    assert!(served.endpoint.ends_with("/concord"), "{}", served.banner);
    assert!(
        served
            .banner
            .contains("serving \"Product agent\": 1 action(s): getProductInfo"),
        "{}",
        served.banner
    );
    assert!(
        served.banner.contains("LLM:         none"),
        "{}",
        served.banner
    );
    // Its DID: created on the first start (the key file named), `localhost` for a loopback
    // address, what `concord identity show` says for that URL, its document served.
    let port = served.listening.port();
    let did = served.did.clone().expect("a did: line");
    assert!(
        did.starts_with(&format!("did:wba:localhost%3A{port}:agents:e1_")),
        "{}",
        served.banner
    );
    assert!(
        served
            .stderr()
            .contains("created the agent's identity keys")
            && served.stderr().contains("identity/keys.json"),
        "{}",
        served.stderr()
    );
    let shown = run(concord()
        .args([
            "identity",
            "show",
            "--json",
            "--url",
            &served.url,
            "--data-dir",
        ])
        .arg(data.path()))
    .json();
    assert_eq!(shown["did"], did.as_str());
    let fingerprint = shown["fingerprint"].as_str().unwrap();
    let document: serde_json::Value = serde_json::from_str(&http_get(&format!(
        "{}agents/{fingerprint}/did.json",
        served.url
    )))
    .unwrap();
    assert_eq!(document["id"], did.as_str());

    let requester = tempfile::tempdir().unwrap();
    let output = run(concord()
        .args([
            "call",
            &served.url,
            "getProductInfo",
            r#"{"productId": "P3"}"#,
        ])
        .arg("--data-dir")
        .arg(requester.path()));
    assert_eq!(output.code, 0, "{}{}", output.stdout, output.stderr);
    let product = output.json();
    assert_eq!(product["productName"], "Monitor");
    assert_eq!(product["price"], 349);

    let served_at = served.listening;
    let (code, log) = served.interrupt();
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("shutting down"), "{log}");
    // The session and the protocol the provider stored are in its data dir.
    let output = run(concord()
        .args(["protocols", "list", "--json", "--data-dir"])
        .arg(data.path()));
    let list = output.json();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["handlers"], serde_json::json!(["provider"]));

    // Started again on the same port with the same data dir: the same DID, keys not
    // created again.
    let listen = served_at.to_string();
    let again = Served::start(&[
        OsStr::new("--config"),
        example_config().as_os_str(),
        OsStr::new("--listen"),
        OsStr::new(&listen),
        OsStr::new("--data-dir"),
        data.path().as_os_str(),
    ]);
    assert_eq!(again.did.as_deref(), Some(did.as_str()), "{}", again.banner);
    assert!(
        !again.stderr().contains("created the agent's identity keys"),
        "{}",
        again.stderr()
    );
}

#[test]
fn a_configured_consensus_protocol_is_advertised_and_selected() {
    let uri = "https://protocols.example/product-info/seed";
    let document = seed_protocol();
    let (dir, config) = temp_config(&format!(
        "\n[[consensus]]\nuri = {uri:?}\ndocument = {:?}\n\n[limits]\ncall_timeout = \"5s\"\n\
         [security]\nresolve_loopback_over_http = true\n",
        document.display().to_string()
    ));
    let served = Served::start(&[OsStr::new("--config"), config.as_os_str()]);
    assert!(
        served.banner.contains(&format!("consensus:   {uri} ")),
        "{}",
        served.banner
    );
    // `node.data_dir` is relative to the configuration's directory.
    assert!(dir.path().join("data").is_dir());

    // A requester holding the same document under the same URI selects it in the hello
    // (signed: consensus protocols only in an authenticated session).
    let signer = Signer::start();
    let requester = &signer.data_dir;
    let output = run(concord()
        .args(["registry", "add", uri])
        .arg(&document)
        .args(["--action", "getProductInfo", "--data-dir"])
        .arg(requester.path()));
    assert_eq!(output.code, 0, "{}{}", output.stdout, output.stderr);
    let output = signed_call_json(&served.url, r#"{"productId": "P12345"}"#, &signer);
    assert_eq!(output.code, 0, "{}{}", output.stdout, output.stderr);
    let report = output.json();
    assert_eq!(report["settledBy"], "consensus", "{report:#}");
    assert_eq!(report["consensusUri"], uri);
    assert_eq!(report["negotiationMessages"], 0);
    assert_eq!(report["output"]["productName"], "Laptop");
    assert!(
        served.logged("consensus protocol selected"),
        "{}",
        served.stderr()
    );
}

#[test]
fn what_serve_cannot_do_exits_2_saying_it_once() {
    let first_data = tempfile::tempdir().unwrap();
    let first = Served::example(first_data.path());
    let taken = first
        .url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let data = tempfile::tempdir().unwrap();
    let serve = |listen: &str, data_dir: &std::path::Path| {
        run(concord()
            .args(["serve", "--config"])
            .arg(example_config())
            .args(["--listen", listen, "--data-dir"])
            .arg(data_dir))
    };
    // A port in use.
    let output = serve(&taken, data.path());
    output.fails(2, &format!("cannot serve on {taken}: "));
    assert_eq!(
        output.stderr.matches("Address already in use").count(),
        1,
        "{}",
        output.stderr
    );
    // Not an address.
    let output = serve("8080", data.path());
    output.fails(2, "cannot serve on 8080: ");
    assert_eq!(
        output.stderr.matches("invalid socket address").count(),
        1,
        "{}",
        output.stderr
    );
    // A store that cannot be created (its directory would be under a file).
    let file = data.path().join("file");
    std::fs::write(&file, "").unwrap();
    let output = serve("127.0.0.1:0", &file.join("store"));
    output.fails(2, "cannot create the data directory");
    assert_eq!(
        output.stderr.matches("cannot create").count(),
        1,
        "{}",
        output.stderr
    );
}

#[test]
fn the_description_carries_the_configured_id() {
    let id = "urn:uuid:6f1c2e0a-8b7d-4c39-9a51-2d4e8f0b3c71";
    let text = config_text("").replace(
        "title = \"Test shop\"",
        &format!("title = \"Test shop\"\nid = {id:?}"),
    );
    let (_dir, config) = write_config(&text);
    let served = Served::start(&[OsStr::new("--config"), config.as_os_str()]);
    assert!(
        served.banner.contains(&format!("id:          {id}\n")),
        "{}",
        served.banner
    );
    let description = http_get(&served.description);
    let thing: serde_json::Value = serde_json::from_str(&description).unwrap();
    assert_eq!(thing["id"], id, "{thing:#}");
    assert_eq!(thing["title"], "Test shop");
    // What is served is a valid description.
    let output = run_with_stdin(&["describe", "validate", "-"], description);
    assert_eq!(output.code, 0, "{}{}", output.stdout, output.stderr);
}

#[test]
fn a_command_path_is_relative_to_the_configuration_wherever_serve_runs() {
    // The configuration is in a directory below the working directory; its command is a
    // path relative to it, and the command runs in that directory.
    let cwd = tempfile::tempdir().unwrap();
    let agent = cwd.path().join("agent");
    std::fs::create_dir(&agent).unwrap();
    let script = agent.join("product-info.sh");
    std::fs::copy(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/product-info.sh"),
        &script,
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let text = config_text("").replace(
        &format!(
            "command = \"sh\", args = [{:?}]",
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("examples/product-info.sh")
                .display()
                .to_string()
        ),
        "command = \"./product-info.sh\"",
    );
    assert!(text.contains("./product-info.sh"), "{text}");
    std::fs::write(agent.join("agent.toml"), text).unwrap();
    let served = Served::start_in(
        cwd.path(),
        &[OsStr::new("--config"), OsStr::new("agent/agent.toml")],
    );
    let requester = tempfile::tempdir().unwrap();
    let output = call_json(&served.url, r#"{"productId": "P2"}"#, requester.path());
    assert_eq!(output.code, 0, "{}{}", output.stdout, output.stderr);
    assert_eq!(output.json()["output"]["productName"], "Mouse");
}

#[test]
fn bad_configurations_exit_1_naming_the_key_in_one_line() {
    let in_agent = |line: &str| {
        config_text("").replace(
            "title = \"Test shop\"",
            &format!("title = \"Test shop\"\n{line}"),
        )
    };
    let cases: Vec<(String, &str)> = vec![
        (
            config_text("[limits]\ncall_timeout = \"soon\"\n"),
            "\"soon\" is not a duration",
        ),
        (
            config_text("[limits]\nmax_sessions = 0\n"),
            "`limits.max_sessions`: must be greater than zero",
        ),
        (
            config_text("[security]\nencryption = \"maybe\"\n"),
            "`security.encryption`: \"maybe\" is not one of \"off\", \"preferred\", \"required\"",
        ),
        (
            config_text("allow = \"friends\"\n"),
            "`actions[0].allow`: \"friends\": expected \"anyone\", \"authenticated\"",
        ),
        (
            config_text("[security]\nsignatures = \"didwba\"\n"),
            "unknown field `signatures`",
        ),
        (
            config_text("[limits]\nmax_session = 3\n"),
            "line 16, column 1: unknown field `max_session`, expected one of",
        ),
        (
            in_agent("titel = \"Typo\""),
            "line 3, column 1: unknown field `titel`, expected one of `title`, `id`, `description`",
        ),
        (
            config_text("[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"CONCORD_TEST_UNSET_KEY\"\n"),
            "`llm.api_key_env`: the environment variable CONCORD_TEST_UNSET_KEY is not set",
        ),
        (
            config_text("[[consensus]]\nuri = \"u\"\ndocument = \"missing.md\"\n"),
            "`consensus[0].document`: cannot read",
        ),
        (
            config_text("[[actions]]\nname = \"getProductInfo\"\ninput = true\noutput = true\nhttp = { url = \"http://127.0.0.1:9/\" }\n"),
            "`actions[1].name`: the action `getProductInfo` is configured twice",
        ),
        (
            in_agent("id = \"shop 1\""),
            "`agent.id`: `id` contains U+0020, which a URI must percent-encode",
        ),
        (
            in_agent("id = \"shops/1\""),
            "`agent.id`: `id` is a relative reference",
        ),
        (
            config_text("").replace("command = \"sh\"", "command = \"concord-no-such-command\""),
            "`actions[0].exec.command`: `concord-no-such-command` is not a command found in PATH",
        ),
        (
            config_text("").replace("command = \"sh\"", "command = \"bin/missing.sh\""),
            "missing.sh is not an executable file",
        ),
        ("[agent]\ntitle = \n".to_owned(), "line 2, column 9: "),
        ("[agent]\n".to_owned(), "missing field `title`"),
        (
            "[agent]\ntitle = \"T\"\n[[actions]]\nname = \"a\"\ninput = true\noutput = true\n".to_owned(),
            "`actions[0]`: the action `a` has no backend: give `exec` or `http`",
        ),
    ];
    for (text, expected) in cases {
        let (_dir, config) = write_config(&text);
        let output = run(concord().arg("serve").arg("--config").arg(&config));
        output.fails(1, expected);
        assert!(
            output
                .stderr
                .starts_with(&format!("concord: {}: ", config.display())),
            "{}",
            output.stderr
        );
    }
    // A file that cannot be read: the command cannot run.
    let dir = tempfile::tempdir().unwrap();
    run(concord()
        .arg("serve")
        .arg("--config")
        .arg(dir.path().join("nowhere.toml")))
    .fails(2, "nowhere.toml: cannot read it");
}

/// Inline JSON Schemas keep the order they are written in (TOML tables are not sorted):
/// the served description lists `[actions.input]` properties as the file does.
#[test]
fn inline_schemas_are_served_in_the_order_written() {
    let text = config_text("").replace(
        "input = { type = \"object\", properties = { productId = { type = \"string\" } }, required = [\"productId\"] }\n",
        "",
    ) + r#"
[actions.input]
type = "object"
required = ["productId"]

[actions.input.properties.productId]
type = "string"

[actions.input.properties.locale]
type = "string"

[actions.input.properties.currency]
type = "string"

[actions.input.properties.amount]
type = "integer"
"#;
    let (_dir, config) = write_config(&text);
    let served = Served::start(&[OsStr::new("--config"), config.as_os_str()]);
    let description: serde_json::Value =
        serde_json::from_str(&http_get(&served.description)).unwrap();
    let input = &description["actions"]["getProductInfo"]["input"];
    let keys: Vec<&str> = input["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("no input properties in {description:#}"))
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["productId", "locale", "currency", "amount"],
        "{input:#}"
    );
    let top: Vec<&str> = input
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let (type_at, properties_at) = (
        top.iter().position(|key| *key == "type").unwrap(),
        top.iter().position(|key| *key == "properties").unwrap(),
    );
    assert!(type_at < properties_at, "{top:?}");
}

/// Ctrl-C drains: a call running when it comes still gets its answer, then the agent
/// stops with 0.
#[test]
fn ctrl_c_lets_a_call_in_flight_finish() {
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples");
    let (dir, config) = temp_config("");
    let slow = dir.path().join("slow.sh");
    let started = dir.path().join("started");
    // The action says when it runs (a marker file), then takes a second.
    std::fs::write(
        &slow,
        format!(
            "input=$(cat)\necho > {:?}\nsleep 1\nprintf '%s' \"$input\" | sh {:?}\n",
            started.display().to_string(),
            examples.join("product-info.sh").display().to_string()
        ),
    )
    .unwrap();
    let text = std::fs::read_to_string(&config).unwrap();
    let text = text
        .replace(
            &format!(
                "{:?}",
                examples.join("product-info.sh").display().to_string()
            ),
            &format!("{:?}", slow.display().to_string()),
        )
        .replace("[node]\n", "[node]\nshutdown_grace = \"5s\"\n");
    std::fs::write(&config, text).unwrap();
    let served = Served::start(&[OsStr::new("--config"), config.as_os_str()]);
    let requester = tempfile::tempdir().unwrap();
    // The first call negotiates (and takes the action's second).
    let first = call_product(&served.url, r#"{"productId": "P2"}"#, requester.path(), &[]);
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    // The second resumes at once and is in the action when Ctrl-C comes.
    std::fs::remove_file(&started).unwrap();
    let second = process()
        .args([
            "call",
            &served.url,
            "getProductInfo",
            r#"{"productId": "P3"}"#,
        ])
        .arg("--data-dir")
        .arg(requester.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Ctrl-C once the second call is in the action.
    let waited = std::time::Instant::now();
    while !started.exists() {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(60),
            "the second call never reached the action"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (code, log) = served.interrupt();
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("shutting down (1 session(s) open)"), "{log}");
    let second = second.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&second.stdout);
    assert!(
        second.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let product: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(product["productName"], "Monitor");
}

#[test]
fn a_signed_upgrade_accepted_before_kill_9_is_refused_after_the_restart() {
    let signer = Signer::start();
    let (served, dir) = provider("");
    let endpoint = served.endpoint.clone();
    let listening = served.listening.to_string();
    let headers = signer.upgrade_headers(&endpoint, "kill-9-nonce-0001");
    let accepted = raw_upgrade(&endpoint, &headers);
    assert!(accepted.starts_with("HTTP/1.1 101"), "{accepted}");
    // kill -9 (`Served` is killed when dropped), then the same agent on the same address.
    drop(served);
    let config = dir.path().join("agent.toml");
    let restarted = Served::start(&[
        OsStr::new("--config"),
        config.as_os_str(),
        OsStr::new("--listen"),
        OsStr::new(&listening),
    ]);
    assert_eq!(restarted.endpoint, endpoint);
    let replayed = raw_upgrade(&endpoint, &headers);
    assert!(replayed.starts_with("HTTP/1.1 401"), "{replayed}");
    assert!(replayed.contains("error=\"invalid_nonce\""), "{replayed}");
}
