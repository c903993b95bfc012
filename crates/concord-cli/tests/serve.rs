//! `concord serve`: the example configuration and temporary ones on 127.0.0.1:0, a
//! consensus protocol from the configuration, graceful shutdown, and bad configurations.

mod support;

use std::ffi::OsStr;

use support::*;

#[test]
fn the_example_configuration_serves_until_ctrl_c() {
    let data = tempfile::tempdir().unwrap();
    let served = Served::start(&[
        OsStr::new("--config"),
        example_config().as_os_str(),
        OsStr::new("--listen"),
        OsStr::new("127.0.0.1:0"),
        OsStr::new("--data-dir"),
        data.path().as_os_str(),
    ]);
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
}

#[test]
fn a_configured_consensus_protocol_is_advertised_and_selected() {
    let uri = "https://protocols.example/product-info/seed";
    let document = seed_protocol();
    let (dir, config) = temp_config(&format!(
        "\n[[consensus]]\nuri = {uri:?}\ndocument = {:?}\n\n[limits]\ncall_timeout = \"5s\"\n",
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

    // A requester holding the same document under the same URI selects it in the hello.
    let requester = tempfile::tempdir().unwrap();
    let output = run(concord()
        .args(["registry", "add", uri])
        .arg(&document)
        .args(["--action", "getProductInfo", "--data-dir"])
        .arg(requester.path()));
    assert_eq!(output.code, 0, "{}{}", output.stdout, output.stderr);
    let output = call_json(&served.url, r#"{"productId": "P12345"}"#, requester.path());
    assert_eq!(output.code, 0, "{}{}", output.stdout, output.stderr);
    let report = output.json();
    assert_eq!(report["settledBy"], "consensus", "{report:#}");
    assert_eq!(report["consensusUri"], uri);
    assert_eq!(report["negotiationMessages"], 0);
    assert_eq!(report["output"]["productName"], "Laptop");
    assert!(
        served.stderr().contains("consensus protocol selected"),
        "{}",
        served.stderr()
    );
}

#[test]
fn a_port_in_use_is_an_error_that_names_it() {
    let first = Served::start(&[
        OsStr::new("--config"),
        example_config().as_os_str(),
        OsStr::new("--listen"),
        OsStr::new("127.0.0.1:0"),
        OsStr::new("--data-dir"),
        tempfile::tempdir().unwrap().path().as_os_str(),
    ]);
    let taken = first
        .url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let data = tempfile::tempdir().unwrap();
    let output = run(concord()
        .args(["serve", "--config"])
        .arg(example_config())
        .args(["--listen", &taken, "--data-dir"])
        .arg(data.path()));
    assert_eq!(output.code, 2, "{}", output.stderr);
    assert!(
        output.stderr.contains(&format!("cannot serve on {taken}")),
        "{}",
        output.stderr
    );
}

#[test]
fn bad_configurations_exit_1_naming_the_key() {
    let cases: &[(&str, &str)] = &[
        (
            "[limits]\ncall_timeout = \"soon\"\n",
            "\"soon\" is not a duration",
        ),
        (
            "[limits]\nmax_sessions = 0\n",
            "`limits.max_sessions`: must be greater than zero",
        ),
        ("[limits]\nmax_session = 3\n", "unknown field `max_session`"),
        (
            "[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"CONCORD_TEST_UNSET_KEY\"\n",
            "`llm.api_key_env`: the environment variable CONCORD_TEST_UNSET_KEY is not set",
        ),
        (
            "[[consensus]]\nuri = \"u\"\ndocument = \"missing.md\"\n",
            "`consensus[0].document`: cannot read",
        ),
        (
            "[[actions]]\nname = \"getProductInfo\"\ninput = true\noutput = true\nhttp = { url = \"http://127.0.0.1:9/\" }\n",
            "`actions[1].name`: the action `getProductInfo` is configured twice",
        ),
    ];
    for (extra, expected) in cases {
        let (_dir, config) = temp_config(extra);
        let output = run(concord().arg("serve").arg("--config").arg(&config));
        assert_eq!(output.code, 1, "{extra}: {}", output.stderr);
        assert!(
            output.stderr.contains(expected) && output.stderr.contains("agent.toml"),
            "{extra}: {:?} does not say {expected:?}",
            output.stderr
        );
    }
    // A syntax error names the line.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agent.toml");
    std::fs::write(&config, "[agent]\ntitle = \n").unwrap();
    let output = run(concord().arg("serve").arg("--config").arg(&config));
    assert_eq!(output.code, 1, "{}", output.stderr);
    assert!(output.stderr.contains("line 2"), "{}", output.stderr);
    // A missing title, a missing backend.
    std::fs::write(&config, "[agent]\n").unwrap();
    let output = run(concord().arg("serve").arg("--config").arg(&config));
    assert_eq!(output.code, 1);
    assert!(
        output.stderr.contains("missing field `title`"),
        "{}",
        output.stderr
    );
    std::fs::write(
        &config,
        "[agent]\ntitle = \"T\"\n[[actions]]\nname = \"a\"\ninput = true\noutput = true\n",
    )
    .unwrap();
    let output = run(concord().arg("serve").arg("--config").arg(&config));
    assert_eq!(output.code, 1);
    assert!(
        output
            .stderr
            .contains("`actions[0]`: the action `a` has no backend: give `exec` or `http`"),
        "{}",
        output.stderr
    );
    // A file that cannot be read: the command cannot run.
    let output = run(concord()
        .arg("serve")
        .arg("--config")
        .arg(dir.path().join("nowhere.toml")));
    assert_eq!(output.code, 2);
    assert!(
        output.stderr.contains("cannot read it"),
        "{}",
        output.stderr
    );
}
