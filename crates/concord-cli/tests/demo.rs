//! `concord demo`: the whole flow in one process, deterministic by default, and with
//! `--llm` against a scripted OpenAI-compatible server on loopback.

mod support;

use concord_llm_script::{ScriptServer, Step};
use serde_json::{json, Value};
use support::*;

/// The frames of a connection as `direction action status`, meta frames only.
fn meta_frames(connection: &Value) -> Vec<String> {
    connection["frames"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|frame| frame["pt"] == 0)
        .map(|frame| {
            format!(
                "{} {} {}",
                frame["direction"].as_str().unwrap(),
                frame["action"].as_str().unwrap(),
                frame["status"].as_str().unwrap_or("-")
            )
        })
        .collect()
}

#[test]
fn the_json_summary_reports_every_step() {
    let output = run(concord().args(["demo", "--json"]));
    assert_eq!(output.code, 0, "{}{}", output.stdout, output.stderr);
    let summary = output.json();

    assert_eq!(summary["llm"]["configured"], false);
    assert_eq!(summary["llm"]["calls"], 0);
    assert_eq!(summary["discovery"]["title"], "Product agent");
    assert_eq!(
        summary["discovery"]["actions"],
        serde_json::json!(["getProductInfo"])
    );

    let negotiated = &summary["connections"]["negotiated"];
    assert_eq!(negotiated["settledBy"], "negotiated");
    let frames = meta_frames(negotiated);
    for expected in [
        "sent protocolNegotiation negotiating",
        "received protocolNegotiation accepted",
        "sent codeGeneration generated",
        "received codeGeneration generated",
    ] {
        assert!(
            frames.contains(&expected.to_owned()),
            "{expected}: {frames:#?}"
        );
    }
    assert!(
        frames
            .iter()
            .any(|f| f.contains("testCasesNegotiation accepted")),
        "{frames:#?}"
    );
    assert_eq!(
        negotiated["negotiationMessages"].as_u64().unwrap() as usize,
        negotiated["frames"].as_array().unwrap().len() - 2
    );
    assert!(negotiated["verifiedCases"].as_u64().unwrap() >= 1);
    assert_eq!(negotiated["firstOutput"]["productName"], "Laptop");
    // Every connection is authenticated and end-to-end encrypted, and says so.
    for name in ["negotiated", "resumed", "consensus"] {
        let channel = summary["connections"][name]["channel"]
            .as_str()
            .unwrap_or_default();
        assert!(
            channel.starts_with("Noise_XX_25519_ChaChaPoly_BLAKE2s; peer proved did:wba:localhost")
                && channel.contains("; we signed as did:wba:localhost"),
            "{name}: {channel}"
        );
    }

    let calls = &summary["calls"];
    assert_eq!(calls["count"], 1000);
    assert_eq!(calls["ok"], 1000, "{calls:#}");
    assert_eq!(calls["failed"], 0);
    assert!(calls["perSecond"].as_f64().unwrap() > 0.0);
    let latency = &calls["latencyMs"];
    let (p50, p90, p99) = (
        latency["p50"].as_f64().unwrap(),
        latency["p90"].as_f64().unwrap(),
        latency["p99"].as_f64().unwrap(),
    );
    assert!(0.0 < p50 && p50 <= p90 && p90 <= p99, "{latency}");

    let resumed = &summary["connections"]["resumed"];
    assert_eq!(resumed["settledBy"], "resumed");
    assert_eq!(resumed["hash"], negotiated["hash"]);
    assert_eq!(resumed["offeredHash"], negotiated["hash"]);
    assert_eq!(resumed["negotiationMessages"], 0, "{resumed:#}");
    assert_eq!(resumed["roundTrips"]["negotiation"], 0);
    assert_eq!(resumed["llm"]["calls"], 0);

    let consensus = &summary["connections"]["consensus"];
    assert_eq!(consensus["settledBy"], "consensus");
    assert_eq!(
        consensus["consensusUri"],
        "https://protocols.example/concord-demo/product-info/1.0"
    );
    assert_eq!(consensus["hash"], negotiated["hash"]);
    assert_eq!(consensus["negotiationMessages"], 0, "{consensus:#}");
    let hellos = consensus["frames"].as_array().unwrap();
    assert!(
        hellos[0]["detail"]
            .as_str()
            .unwrap()
            .starts_with("candidateProtocols ["),
        "{hellos:#?}"
    );
    assert!(hellos[1]["detail"]
        .as_str()
        .unwrap()
        .starts_with("selectedProtocol "));

    for name in ["negotiated", "resumed", "consensus"] {
        assert!(summary["timeToFirstCallMs"][name].as_f64().unwrap() > 0.0);
    }
    let phases: Vec<&str> = summary["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|phase| phase["name"].as_str().unwrap())
        .collect();
    assert_eq!(phases.first(), Some(&"discovery and WebSocket"));
    assert!(phases.contains(&"protocol negotiation"), "{phases:?}");
    assert!(phases.contains(&"code generation"), "{phases:?}");
    assert_eq!(phases.last(), Some(&"first call"));
}

#[test]
fn the_narrative_shows_the_frames_and_the_summary() {
    let output = run(concord().args(["demo", "--calls", "50", "--concurrency", "4"]));
    assert_eq!(output.code, 0, "{}{}", output.stdout, output.stderr);
    let text = &output.stdout;
    for expected in [
        "Identities: provider did:wba:localhost%3A",
        "session: Noise_XX_25519_ChaChaPoly_BLAKE2s; peer proved did:wba:localhost",
        "1. Discovery: GET http://127.0.0.1:",
        "→  hello             sourceHello",
        "←  PT0 meta          protocolNegotiation     seq 1  accepted",
        "PT3 verification",
        "3. 50 calls over the negotiated protocol (4 in flight, no LLM): 50 ok, 0 failed",
        "usedProtocolHash",
        "0-RTT: resumed the stored protocol: 0 negotiation messages, 0 LLM calls",
        "selectedProtocol https://protocols.example/concord-demo/product-info/1.0",
        "full negotiation   negotiated",
        "0-RTT reconnect    resumed             0",
        "consensus          consensus           0",
        "LLM: none configured",
    ] {
        assert!(
            text.contains(expected),
            "{expected:?} missing from:\n{text}"
        );
    }
}

#[test]
fn llm_without_a_configured_llm_is_refused() {
    let output = run(concord().args(["demo", "--llm"]));
    output.says(2, "--llm needs an LLM");
    let output = run(concord().args(["demo", "--calls", "0"]));
    assert_eq!(output.code, 2);
}

/// The module the scripted model writes for the `sku` candidate: `sku` to our `productId`.
const SKU_MODULE: &str = r#"
function decodeRequest(message) {
  return { messageId: message.messageId, input: { productId: message.sku } };
}
function encodeResponse(answer) {
  if (answer.error !== undefined) {
    return { messageId: answer.messageId, type: "RESPONSE",
             status: { code: answer.error.code, message: answer.error.message } };
  }
  return { messageId: answer.messageId, type: "RESPONSE",
           status: { code: 200, message: "OK" }, productInfo: answer.result };
}
"#;

fn module(source: &str) -> Step {
    Step::content(json!({ "module": source }).to_string()).usage(900, 80)
}

#[tokio::test(flavor = "multi_thread")]
async fn with_llm_the_rules_settle_the_flow_and_a_last_section_goes_where_they_stop() {
    // The rules settle every step of the main flow, so the LLM is asked only in the --llm
    // section, in this order: the handler for the `sku` candidate (a module missing a function,
    // refused by the sandbox, then a right one), the provider judging that candidate and
    // writing its handler, and the answer to a natural-language question.
    let script = ScriptServer::start([
        module("function decodeRequest(message) { return peer.sku; }"),
        module(SKU_MODULE),
        Step::content(r#"{"status": "accepted"}"#).usage(1200, 6),
        module(SKU_MODULE),
        Step::content("getProductInfo: send a productId, get the price.").usage(400, 12),
    ])
    .await
    .unwrap();
    let base_url = script.base_url();
    let output = tokio::task::spawn_blocking(move || {
        run(concord()
            .args(["demo", "--json", "--llm", "--calls", "20"])
            .env("CONCORD_LLM_BASE_URL", base_url)
            .env("CONCORD_LLM_MODEL", "scripted"))
    })
    .await
    .unwrap();
    assert_eq!(output.code, 0, "{}{}", output.stdout, output.stderr);
    let summary = output.json();
    assert_eq!(summary["llm"]["configured"], true);
    // Every request the model got is counted (each answered on its first attempt).
    assert_eq!(
        summary["llm"]["calls"].as_u64().unwrap() as usize,
        script.requests().len()
    );
    assert_eq!(script.requests().len(), 5);
    let capabilities = summary["discovery"]["capabilities"].to_string();
    assert!(
        capabilities.contains("naturalLanguageNegotiation"),
        "{capabilities}"
    );
    assert_eq!(summary["connections"]["negotiated"]["llm"]["calls"], 0);
    assert_eq!(summary["connections"]["resumed"]["llm"]["calls"], 0);
    assert_eq!(summary["calls"]["ok"], 20);

    let part = &summary["llmPart"];
    assert_eq!(
        part["rules"],
        "a counter-proposal (they cannot take it as written)"
    );
    let handler = &part["handler"];
    assert_eq!(handler["outcome"], "generated", "{handler}");
    assert_eq!(handler["refused"], 1, "the incomplete module was refused");
    assert_eq!(handler["origin"], "LLM (attempt 2)");
    assert_eq!(handler["cost"]["llmCalls"], 2);
    assert_eq!(handler["cost"]["tokensIn"], 1800);
    // The refusal was fed back: the second prompt quotes why the first module failed.
    let second = script.requests()[1].body.to_string();
    assert!(
        second.contains("does not define function `encodeResponse`"),
        "{second}"
    );
    let negotiation = &part["negotiation"];
    assert_eq!(negotiation["outcome"], "negotiated", "{negotiation}");
    assert!(negotiation["verifiedCases"].as_u64().unwrap() >= 2);
    assert!(
        negotiation["call"]
            .as_str()
            .unwrap()
            .contains("\"productName\":\"Laptop\""),
        "{negotiation}"
    );
    assert_eq!(negotiation["cost"]["llmCalls"], 2);
    let ask = &part["ask"];
    assert_eq!(ask["outcome"], "answered");
    assert_eq!(
        ask["answer"],
        "getProductInfo: send a productId, get the price."
    );
    assert_eq!(ask["cost"]["tokensIn"], 400);
}

#[test]
fn plain_runs_the_same_flow_without_identities() {
    let output = run(concord().args(["demo", "--plain", "--json", "--calls", "20"]));
    assert_eq!(output.code, 0, "{}{}", output.stdout, output.stderr);
    let summary: Value = serde_json::from_str(&output.stdout).unwrap();
    for name in ["negotiated", "resumed", "consensus"] {
        let channel = summary["connections"][name]["channel"]
            .as_str()
            .unwrap_or_default();
        assert!(
            channel.starts_with("plain; we called anonymously"),
            "{name}: {channel}"
        );
    }
    assert_eq!(summary["connections"]["resumed"]["settledBy"], "resumed");
}
