//! `concord protocol draft|judge|hash`, deterministic and against a scripted LLM server.

mod support;

use concord_llm_script::{ScriptServer, Step};
use serde_json::{json, Value};
use support::*;

/// `concord protocol judge --description product-agent.json <extra>`, the candidate on
/// standard input, with `env` set.
fn judge_output(candidate: &str, extra: &[&str], env: &[(&str, String)]) -> Output {
    let mut command = concord();
    command
        .args(["protocol", "judge", "--description"])
        .arg(fixture("product-agent.json"))
        .args(extra)
        .write_stdin(candidate.to_owned());
    for (name, value) in env {
        command.env(name, value);
    }
    run(&mut command)
}

/// [`judge_output`]'s decision (JSON) and exit code.
fn judge(candidate: &str, extra: &[&str], env: &[(&str, String)]) -> (Value, i32) {
    let output = judge_output(candidate, extra, env);
    let value = serde_json::from_str(&output.stdout).unwrap_or(Value::Null);
    (value, output.code)
}

/// [`judge`] with `--llm` and `extra`, the LLM being the scripted `server`.
async fn judge_with_llm(server: &ScriptServer, candidate: &str, extra: &[&str]) -> (Value, i32) {
    let env = [
        ("CONCORD_LLM_BASE_URL", server.base_url()),
        ("CONCORD_LLM_MODEL", "test-model".to_owned()),
    ];
    let candidate = candidate.to_owned();
    let mut args = vec!["--llm".to_owned()];
    args.extend(extra.iter().map(|arg| (*arg).to_owned()));
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        judge(&candidate, &args, &env)
    })
    .await
    .unwrap()
}

#[test]
fn a_drafted_protocol_is_accepted_by_the_agent_it_was_drafted_for() {
    let document = drafted_protocol();
    assert!(document.starts_with("# Requirement\nGet product information by product id"));
    assert!(document.contains("\"const\": \"getProductInfo\""));
    let (decision, code) = judge(&document, &[], &[]);
    assert_eq!(code, 0);
    assert_eq!(decision["status"], "accepted");
    assert_eq!(decision["decidedBy"]["policy"], "deterministic");
    assert_eq!(decision["decidedBy"]["llmCalls"], 0);
}

#[test]
fn a_snake_case_candidate_is_accepted_as_written() {
    let candidate = drafted_protocol().replace("\"productId\"", "\"product_id\"");
    let (decision, code) = judge(&candidate, &[], &[]);
    assert_eq!(code, 0);
    assert_eq!(decision["status"], "accepted");
}

#[test]
fn a_candidate_whose_fields_do_not_map_gets_a_counter_proposal() {
    let candidate = drafted_protocol().replacen("\"productId\"", "\"sku\"", 2);
    let (decision, _) = judge(&candidate, &[], &[]);
    assert_eq!(decision["status"], "negotiating");
    let summary = decision["modificationSummary"].as_str().unwrap();
    assert!(
        summary.contains("add request field `productId`, which action `getProductInfo` requires"),
        "{summary}"
    );
    assert!(summary.contains("drop request field `sku`"), "{summary}");
    assert!(decision["candidate"]
        .as_str()
        .unwrap()
        .contains("\"productId\""));
}

#[test]
fn an_unserviceable_candidate_is_rejected_with_a_reason() {
    let candidate =
        drafted_protocol().replace("\"const\": \"getProductInfo\"", "\"const\": \"placeOrder\"");
    let output = judge_output(&candidate, &[], &[]);
    let decision = output.json();
    assert_eq!(
        decision,
        json!({"status": "rejected", "reason": "we have no action `placeOrder`",
        "decidedBy": decision["decidedBy"].clone()})
    );
    // A rejection is the input checked and found wrong: exit 1, the reason on one line.
    output.fails(1, "rejected: we have no action `placeOrder`");
}

#[test]
fn hash_is_sha256_of_the_exact_bytes() {
    let output = run_with_stdin(&["protocol", "hash"], "abc");
    assert_eq!(
        output.stdout,
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n"
    );
}

#[test]
fn draft_needs_a_known_action_and_llm_needs_configuration() {
    let output = run(concord()
        .args(["protocol", "draft", "--action", "fly", "--description"])
        .arg(fixture("product-agent.json")));
    output.fails(1, "publishes no action `fly` (it has: `getProductInfo`)");
    let output = run(concord()
        .args([
            "protocol",
            "draft",
            "--llm",
            "--action",
            "getProductInfo",
            "--description",
        ])
        .arg(fixture("product-agent.json")));
    output.fails(2, "--llm needs an LLM");
}

#[tokio::test(flavor = "multi_thread")]
async fn judge_with_llm_asks_the_configured_server() {
    let answer = json!({"status": "rejected", "reason": "prices must be in EUR"});
    let server = ScriptServer::start([Step::content(answer.to_string()).usage(120, 15)])
        .await
        .unwrap();
    let candidate = "# Requirement\nGet product info, in prose only.\n";
    let (decision, code) = judge_with_llm(&server, candidate, &[]).await;
    assert_eq!(code, 1, "a rejection exits 1: {decision}");
    assert_eq!(decision["status"], "rejected");
    assert_eq!(decision["reason"], "prices must be in EUR");
    assert_eq!(decision["decidedBy"]["policy"], "llm");
    assert_eq!(decision["decidedBy"]["tokensIn"], 120);
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["model"], "test-model");
    // The candidate reached the model only as fenced peer data.
    assert!(requests[0].body.to_string().contains("in prose only"));
}

/// A counter-proposal is judged beside our previous candidate (`--previous`) and the peer's
/// summary (`--summary`): the LLM sees both.
#[tokio::test(flavor = "multi_thread")]
async fn judge_sees_our_previous_candidate_and_the_peers_summary() {
    let server = ScriptServer::start([Step::content(r#"{"status": "accepted"}"#)])
        .await
        .unwrap();
    let ours = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(ours.path(), drafted_protocol()).unwrap();
    let ours_path = ours.path().to_str().unwrap();
    let (decision, code) = judge_with_llm(
        &server,
        "# Requirement\nGet product info, in prose only.\n",
        &["--previous", ours_path, "--summary", "dropped the schemas"],
    )
    .await;
    assert_eq!(code, 0, "{decision}");
    assert_eq!(decision["status"], "accepted");
    let prompt = server.requests()[0].body.to_string();
    assert!(prompt.contains("we proposed last"), "{prompt}");
    // The rules judge a candidate as it stands: `--previous` only with `--llm`.
    let (_, code) = judge(
        "# Requirement\nGet product info.\n",
        &["--previous", ours_path],
        &[],
    );
    assert_eq!(code, 2);
    assert!(prompt.contains("GetProductInfoRequest"), "{prompt}");
    assert!(prompt.contains("dropped the schemas"), "{prompt}");
}

/// An LLM server behind TLS with a private CA: trusted with `CONCORD_LLM_CA_CERT`, refused
/// (with the reason) without it.
#[tokio::test(flavor = "multi_thread")]
async fn an_https_llm_with_a_private_ca_is_trusted_with_concord_llm_ca_cert() {
    use concord_fixtures::tls::{PrivateCa, TlsProxy};

    let answer = json!({"status": "rejected", "reason": "prose only"});
    let server = ScriptServer::start([Step::content(answer.to_string())])
        .await
        .unwrap();
    let ca = PrivateCa::for_localhost().unwrap();
    let proxy = TlsProxy::bind(&ca).await.unwrap();
    let base_url = format!("{}v1", proxy.url());
    proxy.forward_to(server.addr());
    let ca_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(ca_file.path(), ca.pem()).unwrap();
    let ca_path = ca_file.path().to_str().unwrap().to_owned();
    let candidate = "# Requirement\nGet product info, in prose only.\n";

    let env = |with_ca: bool| {
        let mut env = vec![
            ("CONCORD_LLM_BASE_URL", base_url.clone()),
            ("CONCORD_LLM_MODEL", "test-model".to_owned()),
        ];
        if with_ca {
            env.push(("CONCORD_LLM_CA_CERT", ca_path.clone()));
        }
        env
    };
    let (trusted, untrusted) = (env(true), env(false));
    let ((decision, code), refused) = tokio::task::spawn_blocking(move || {
        (
            judge(candidate, &["--llm"], &trusted),
            judge_output(candidate, &["--llm"], &untrusted),
        )
    })
    .await
    .unwrap();
    assert_eq!(code, 1, "a rejection exits 1: {decision}");
    assert_eq!(decision["reason"], "prose only");
    assert_eq!(
        server.requests().len(),
        1,
        "only the trusting call reached it"
    );
    // Refused by the start-up probe: the LLM cannot be used, so the command cannot run.
    refused.fails(2, "invalid peer certificate: UnknownIssuer");
}
