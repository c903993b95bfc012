//! Interoperability with the reference implementation, live, both ways: a requester built on
//! the Python SDK (PyPI `anp` 1.0.7, `anp.meta_protocol.MetaProtocol`) negotiates with a
//! Concord provider node and calls it; a Concord requester discovers a provider built on the
//! SDK, negotiates with it and calls it.
//!
//! They need that SDK: `CONCORD_ANP_PYTHON` names a Python with `anp==1.0.7`, `openai` and
//! `websockets` installed (`.ci/run` makes one in `~/.cache/concord-venv` and runs this
//! test with `--ignored`). The SDK drafts its candidate with an LLM: the scripted
//! OpenAI-compatible server of `concord-llm-script` answers it, on loopback.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use concord_fixtures::catalogue;
use concord_llm_script::{ScriptServer, Step};
use concord_negotiate::{DeterministicNegotiator, Need};
use concord_node::Node;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

const REQUESTER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/interop/anp_requester.py"
);
const PROVIDER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/anp_provider.py");

/// The Python with the SDK.
fn python() -> String {
    std::env::var("CONCORD_ANP_PYTHON")
        .expect("CONCORD_ANP_PYTHON: a Python with anp==1.0.7, openai and websockets")
}

/// The protocol our rules draft for the catalogue's action (what each side accepts).
fn catalogue_protocol() -> String {
    let need = Need {
        action: catalogue::ACTION.to_owned(),
        ..Need::default()
    };
    DeterministicNegotiator::new()
        .draft_now(&need, &catalogue::action())
        .unwrap()
}

#[tokio::test]
#[ignore = "needs Python with the reference SDK: set CONCORD_ANP_PYTHON (`.ci/run` does)"]
async fn the_reference_python_requester_negotiates_with_and_calls_a_concord_provider() {
    // The SDK's LLM drafts the protocol; ours is scripted to answer with the protocol the
    // rules would draft for the provider's action, which the provider accepts at once.
    let candidate = catalogue_protocol();
    let llm = ScriptServer::start([Step::content(candidate.clone())])
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let provider = Node::builder("Product agent")
        .action(catalogue::action(), catalogue::answer)
        .data_dir(dir.path())
        .build()
        .unwrap();
    let server = provider.serve("127.0.0.1:0").await.unwrap();

    let request = json!({
        "messageId": "anp-request-1",
        "type": "REQUEST",
        "action": catalogue::ACTION,
        "productId": "P2",
    });
    let run = tokio::process::Command::new(python())
        .arg(Path::new(REQUESTER))
        .arg(server.endpoint())
        .arg(llm.base_url())
        .arg(request.to_string())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the Python requester finished within 60 s")
        .expect("the Python requester ran");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|error| panic!("{error}: {stdout}\n{stderr}"));

    // Our destinationHello, read by a peer that knows no hello.
    assert_eq!(report["destinationHello"]["type"], "destinationHello");
    // The SDK's candidate (its sequenceId 1) was accepted as it stood, in one round.
    let received = report["received"].as_array().unwrap();
    let answer = &received[0];
    assert_eq!(answer["action"], "protocolNegotiation", "{report:#}");
    assert_eq!(answer["status"], "accepted", "{report:#}");
    assert_eq!(answer["sequenceId"], 2, "{report:#}");
    assert_eq!(answer["candidateProtocols"], candidate.as_str());
    assert_eq!(llm.requests().len(), 1, "one LLM call, the SDK's draft");
    // Both sides said `generated`, and the SDK's requester was answered per the protocol.
    assert!(
        received
            .iter()
            .any(|m| m["action"] == "codeGeneration" && m["status"] == "generated"),
        "{report:#}"
    );
    assert_eq!(report["codeGenerated"], true);
    let response = &report["response"];
    assert_eq!(response["messageId"], "anp-request-1", "{report:#}");
    assert_eq!(response["type"], "RESPONSE");
    assert_eq!(response["status"]["code"], 200);
    assert_eq!(response["productInfo"]["productName"], "Mouse");
    // The provider stored the agreed protocol under its hash, ready for a 0-RTT resume.
    let stored = provider.store().list_protocols().unwrap();
    assert_eq!(stored.len(), 1);
}

#[tokio::test]
#[ignore = "needs Python with the reference SDK: set CONCORD_ANP_PYTHON (`.ci/run` does)"]
async fn a_concord_requester_negotiates_with_and_calls_the_reference_python_provider() {
    // The provider's description, as a Concord node would publish the catalogue's action,
    // naming a placeholder host the Python provider replaces with its address.
    let dir = tempfile::tempdir().unwrap();
    let describer = Node::builder("Product agent (Python anp SDK)")
        .action(catalogue::action(), catalogue::answer)
        .public_url("http://anp-provider.invalid/")
        .data_dir(dir.path().join("describer"))
        .build()
        .unwrap();
    let served = describer.serve("127.0.0.1:0").await.unwrap();
    let local = format!("http://{}/.well-known/wot", served.local_addr());
    let description = reqwest::get(local).await.unwrap().text().await.unwrap();
    assert!(
        description.contains("ws://anp-provider.invalid/concord"),
        "{description}"
    );
    served.shutdown().await.unwrap();
    let description_file = dir.path().join("description.json");
    std::fs::write(&description_file, description).unwrap();

    // The SDK judges our candidate with its LLM: scripted to accept.
    let llm = ScriptServer::start([Step::content(r#"{"status": "accepted"}"#)])
        .await
        .unwrap();
    let mut provider = tokio::process::Command::new(python())
        .arg(Path::new(PROVIDER))
        .arg(&description_file)
        .arg(llm.base_url())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(provider.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("the Python provider started within 60 s")
        .unwrap()
        .expect("the Python provider printed its address");
    let url = first.strip_prefix("listening ").unwrap().to_owned();

    // The SDK's provider answers our first message with sequenceId 2 whatever it carried:
    // the node numbers as the SDK does (first sequenceId 1), so 2 is in step.
    let requester = Node::builder("Requester")
        .reference_compatible(true)
        .data_dir(dir.path().join("requester"))
        .build()
        .unwrap();
    let connection = requester.connect(&url, catalogue::ACTION).await.unwrap();
    let output = connection
        .call(catalogue::ACTION, json!({"productId": "P2"}))
        .await
        .unwrap();
    assert_eq!(output["productName"], "Mouse");
    assert_eq!(output["price"], 19.5);
    let info = connection.info();
    assert_eq!(info.settlement, concord_node::Settlement::Negotiated);
    assert_eq!(
        info.capabilities.iter().count(),
        0,
        "the SDK announces no capability"
    );
    assert_eq!(
        info.verified_cases, 0,
        "no test cases with a peer that has none"
    );
    connection.close().await;

    // The SDK's one LLM call, as SPEC-NOTES §5 describes it: a JSON object answer, with
    // the capability tool offered in the same call.
    let requests = llm.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["response_format"]["type"], "json_object");
    assert_eq!(
        requests[0].body["tools"][0]["function"]["name"],
        "get_capability_info"
    );
    // Our candidate reached it whole, and is the protocol both sides stored.
    let agreed = requester.store().protocol(&info.hash).unwrap().unwrap();
    let prompt = requests[0].messages()[1]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(prompt.contains(&agreed.document), "{prompt}");
}
