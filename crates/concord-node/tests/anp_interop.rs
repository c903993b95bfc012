//! Interoperability with the reference implementation: a requester built on the Python SDK
//! (PyPI `anp` 1.0.7, `anp.meta_protocol.MetaProtocol`) negotiates with a Concord provider
//! node and calls it, live, over the node's WebSocket endpoint.
//!
//! It needs that SDK: `CONCORD_ANP_PYTHON` names a Python with `anp==1.0.7`, `openai` and
//! `websockets` installed (`.ci/run` makes one in `~/.cache/concord-venv` and runs this
//! test with `--ignored`). The SDK drafts its candidate with an LLM: the scripted
//! OpenAI-compatible server of `concord-llm-script` answers it, on loopback.

use std::path::Path;
use std::time::Duration;

use concord_fixtures::catalogue;
use concord_llm_script::{ScriptServer, Step};
use concord_negotiate::{DeterministicNegotiator, Need};
use concord_node::Node;
use serde_json::{json, Value};

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/interop/anp_requester.py"
);

#[tokio::test]
#[ignore = "needs Python with the reference SDK: set CONCORD_ANP_PYTHON (`.ci/run` does)"]
async fn the_reference_python_requester_negotiates_with_and_calls_a_concord_provider() {
    let python = std::env::var("CONCORD_ANP_PYTHON")
        .expect("CONCORD_ANP_PYTHON: a Python with anp==1.0.7, openai and websockets");
    // The SDK's LLM drafts the protocol; ours is scripted to answer with the protocol the
    // rules would draft for the provider's action, which the provider accepts at once.
    let need = Need {
        action: catalogue::ACTION.to_owned(),
        ..Need::default()
    };
    let candidate = DeterministicNegotiator::new()
        .draft_now(&need, &catalogue::action())
        .unwrap();
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
    let run = tokio::process::Command::new(&python)
        .arg(Path::new(SCRIPT))
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
