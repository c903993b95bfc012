//! `concord protocol draft|judge --llm` and `concord llm check` against a real model:
//! llama.cpp's server with SmolLM2-135M-Instruct, started by the shared harness
//! (`interop/llama`), temperature 0 and a fixed seed. The tiny model is often wrong: each
//! test asserts a decision that was checked, or a typed failure, never a hang or a crash.
//! Ignored by default; `.ci/run` runs them.

mod support;

#[path = "../../../interop/llama/harness.rs"]
mod llama;

use std::time::Duration;

use llama::LlamaServer;
use serde_json::Value;
use support::*;

/// Longest a command may run before the test calls it hung (the model writes 20 to 80
/// tokens a second here; no command below asks for more than two answers of 512 tokens).
const HANG: Duration = Duration::from_secs(300);

/// `concord <args>` with the real model configured (and `stdin`), killed after [`HANG`].
fn with_model(server: &LlamaServer, args: &[&str], stdin: &str, max_tokens: u32) -> Output {
    let mut command = concord();
    command
        .args(args)
        .write_stdin(stdin.to_owned())
        .timeout(HANG);
    for (name, value) in server.env(max_tokens) {
        command.env(name, value);
    }
    let output = run(&mut command);
    assert_ne!(output.code, -1, "killed after {HANG:?}: {}", output.stderr);
    output
}

/// The typed failures an LLM step may end in, as the CLI words them.
const STEP_FAILURES: [&str; 6] = [
    "was cut off after",
    "is not the JSON asked for",
    "is not a protocol document",
    "is not a full protocol",
    "that is not a valid JSON Schema",
    "without a non-empty",
];

/// A failed LLM step: exit 2, one line naming the step, a typed failure and what the step
/// cost, no panic.
fn assert_typed_step_failure(output: &Output, step: &str) {
    output.fails(2, &format!("concord: LLM: {step} step: "));
    assert!(
        output.stderr.contains(" LLM call(s), "),
        "{}",
        output.stderr
    );
    assert!(
        STEP_FAILURES
            .iter()
            .any(|typed| output.stderr.contains(typed)),
        "not a typed failure: {}",
        output.stderr
    );
    assert!(!output.stderr.contains("panicked"), "{}", output.stderr);
}

#[test]
#[ignore = "needs a real model: set CONCORD_LLAMA_PYTHON (`.ci/run` does)"]
fn draft_with_the_model_gives_a_full_protocol_or_a_typed_failure() {
    let server = LlamaServer::start();
    let description = fixture("product-agent.json");
    let args = [
        "protocol",
        "draft",
        "--llm",
        "--action",
        "getProductInfo",
        "--description",
        description.to_str().unwrap(),
    ];

    let output = with_model(&server, &args, "", 512);

    // The cost line says what the model was asked and how.
    assert!(output.stderr.contains("LLM call(s)"), "{}", output.stderr);
    assert!(output.stderr.contains("json_schema"), "{}", output.stderr);
    if output.code == 0 {
        // Checked before it was printed: a full protocol whose two schemas compile.
        let document = concord_negotiate::ProtocolDocument::parse(&output.stdout).unwrap();
        assert!(document.request_schema.is_some() && document.response_schema.is_some());
        eprintln!("drafted:\n{}", output.stdout);
    } else {
        assert_typed_step_failure(&output, "draft");
        assert!(
            output.stdout.is_empty(),
            "nothing unchecked printed: {}",
            output.stdout
        );
        eprintln!("typed failure: {}", output.stderr);
    }
}

/// `concord protocol judge --llm` of `candidate` against the product agent.
fn judge_with_model(server: &LlamaServer, candidate: &str) -> Output {
    let description = fixture("product-agent.json");
    let args = [
        "protocol",
        "judge",
        "--llm",
        "--description",
        description.to_str().unwrap(),
    ];
    with_model(server, &args, candidate, 512)
}

/// A decision the CLI printed: its status, and the record of the LLM step behind it.
fn assert_llm_decision(output: &Output) -> Value {
    let decision = output.json();
    let status = decision["status"].as_str().unwrap();
    match status {
        "accepted" => assert_eq!(output.code, 0),
        "negotiating" => {
            assert_eq!(output.code, 0);
            // A counter-proposal was checked: a full protocol, with a summary.
            let counter = decision["candidate"].as_str().unwrap();
            let document = concord_negotiate::ProtocolDocument::parse(counter).unwrap();
            assert!(document.request_schema.is_some() && document.response_schema.is_some());
            assert!(!decision["modificationSummary"]
                .as_str()
                .unwrap()
                .trim()
                .is_empty());
        }
        "rejected" => {
            assert_eq!(output.code, 1);
            assert!(!decision["reason"].as_str().unwrap().trim().is_empty());
        }
        other => panic!("unknown status {other}"),
    }
    let record = &decision["decidedBy"];
    assert_eq!(record["policy"], "llm");
    assert!(record["llmCalls"].as_u64().unwrap() >= 1);
    // Tokens as the server counted them.
    assert!(record["tokensIn"].as_u64().unwrap() > 100, "{record}");
    assert!(record["tokensOut"].as_u64().unwrap() > 0, "{record}");
    assert_eq!(record["structuredOutput"], "json_schema");
    decision
}

#[test]
#[ignore = "needs a real model: set CONCORD_LLAMA_PYTHON (`.ci/run` does)"]
fn judge_with_the_model_decides_or_fails_typed_on_a_candidate_the_rules_accept() {
    let server = LlamaServer::start();

    let output = judge_with_model(&server, &drafted_protocol());

    if output.code == 2 {
        assert_typed_step_failure(&output, "judge");
    } else {
        let decision = assert_llm_decision(&output);
        eprintln!("decision: {}", decision["status"]);
    }
}

/// A candidate written by another agent: its request names the product `sku`, which no
/// naming rule maps to our `productId` (the rules would counter it).
const SKU_CANDIDATE: &str = include_str!("../src/demo/sku-candidate.md");

#[test]
#[ignore = "needs a real model: set CONCORD_LLAMA_PYTHON (`.ci/run` does)"]
fn judge_with_the_model_decides_or_fails_typed_on_a_candidate_the_rules_cannot_map() {
    let server = LlamaServer::start();
    let (rules, _) = {
        let output = run_with_stdin(
            &[
                "protocol",
                "judge",
                "--description",
                fixture("product-agent.json").to_str().unwrap(),
            ],
            SKU_CANDIDATE,
        );
        (output.json(), output.code)
    };
    assert_eq!(
        rules["status"], "negotiating",
        "the rules cannot take it as written"
    );

    let output = judge_with_model(&server, SKU_CANDIDATE);

    if output.code == 2 {
        assert_typed_step_failure(&output, "judge");
    } else {
        let decision = assert_llm_decision(&output);
        eprintln!("decision: {}", decision["status"]);
    }
}

#[test]
#[ignore = "needs a real model: set CONCORD_LLAMA_PYTHON (`.ci/run` does)"]
fn llm_check_lists_the_model_answers_structured_and_measures_speed() {
    let server = LlamaServer::start();

    let output = run(concord()
        .args(["llm", "check", "--base-url", &server.base_url])
        .timeout(HANG));

    assert!(output.code == 0 || output.code == 1, "{}", output.stderr);
    let report = output.json();
    let models = report["models"].as_array().unwrap();
    assert!(
        models.iter().any(|model| model == server.model.as_str()),
        "{report}"
    );
    assert_eq!(report["structured"]["format"], "json_schema", "{report}");
    assert!(
        report["speed"]["tokensPerSecond"].as_f64().unwrap() > 0.0,
        "{report}"
    );
    assert!(report["usage"]["promptTokens"].as_u64().unwrap() > 0);
    eprintln!("{report}");
}
