//! Interoperability with the reference implementation, live, both ways, for three actions
//! (`getProductInfo` from the catalogue, `getWeather` and `convertCurrency` defined here):
//!
//! - a requester built on the Python SDK (PyPI `anp` 1.0.7, `anp.meta_protocol.MetaProtocol`)
//!   drafts its candidate the way the SDK's drafting prompt asks (the scripted LLM answers
//!   with a hand-written text from `tests/interop/candidates/requester-*.md`), a Concord
//!   provider with no LLM accepts it as written, and the SDK side calls it per that protocol;
//! - a Concord requester discovers a provider built on the SDK, whose scripted LLM
//!   counter-proposes a protocol written the SDK's way (`provider-*.md`); Concord accepts it
//!   and calls the action through it;
//! - a candidate no action can satisfy is rejected, the SDK's `rejected` echo is survived,
//!   and the provider goes on serving.
//!
//! The Python side validates every application message it sends or receives with
//! `jsonschema` (Draft 2020-12) against the schemas in the agreed markdown
//! (`tests/interop/agreed.py`) and reports every violation; there must be none.
//!
//! They need that SDK: `CONCORD_ANP_PYTHON` names a Python with `anp==1.0.7`, `openai`,
//! `websockets` and `jsonschema` installed (`.ci/run` makes one in `~/.cache/concord-venv`
//! and runs this test with `--ignored`). The SDK's LLM is the scripted OpenAI-compatible
//! server of `concord-llm-script`, on loopback. Every wait is bounded and the Python
//! processes are killed when dropped.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use concord_fixtures::catalogue;
use concord_llm_script::{ScriptServer, Step};
use concord_negotiate::ActionSpec;
use concord_node::{ActionError, CallError, Node, Settlement};
use concord_proto::ProtocolHash;
use concord_store::Outcome;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader, Lines};
use tokio::process::ChildStdout;

const INTEROP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop");
/// Longest one run of the Python requester may take.
const PYTHON_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest a Concord connection (discovery, negotiation, code) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(40);
/// Longest one call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest the Python provider may take to report an event.
const EVENT_TIMEOUT: Duration = Duration::from_secs(30);

const WEATHER: &str = "getWeather";
const CURRENCY: &str = "convertCurrency";

/// The Python with the SDK.
fn python() -> String {
    std::env::var("CONCORD_ANP_PYTHON")
        .expect("CONCORD_ANP_PYTHON: a Python with anp==1.0.7, openai, websockets and jsonschema")
}

fn script(name: &str) -> std::path::PathBuf {
    Path::new(INTEROP).join(name)
}

/// A hand-written candidate of `tests/interop/candidates`.
fn candidate(file: &str) -> String {
    let path = Path::new(INTEROP).join("candidates").join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

// ----- the actions ---------------------------------------------------------------------------

fn weather_action() -> ActionSpec {
    ActionSpec {
        name: WEATHER.into(),
        description: "The current weather in a city.".into(),
        input: json!({
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"]
        }),
        output: json!({
            "title": "Weather",
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "temperatureCelsius": {"type": "number"},
                "conditions": {"type": "string"},
                "humidityPercent": {"type": "integer", "minimum": 0, "maximum": 100}
            },
            "required": ["city", "temperatureCelsius", "conditions", "humidityPercent"]
        }),
    }
}

async fn weather(input: Value) -> Result<Value, ActionError> {
    let city = input["city"].as_str().unwrap_or_default();
    let (temperature, conditions, humidity) = match city {
        "Berlin" => (18.5, "partly cloudy", 62),
        "Lisbon" => (23.0, "sunny", 55),
        _ => return Err(ActionError::not_found(format!("no weather for {city}"))),
    };
    Ok(json!({
        "city": city,
        "temperatureCelsius": temperature,
        "conditions": conditions,
        "humidityPercent": humidity,
    }))
}

fn currency_action() -> ActionSpec {
    ActionSpec {
        name: CURRENCY.into(),
        description: "Converts an amount between two currencies (ISO 4217 codes).".into(),
        input: json!({
            "type": "object",
            "properties": {
                "amount": {"type": "number"},
                "fromCurrency": {"type": "string"},
                "toCurrency": {"type": "string"}
            },
            "required": ["amount", "fromCurrency", "toCurrency"]
        }),
        output: json!({
            "title": "Conversion",
            "type": "object",
            "properties": {
                "amount": {"type": "number"},
                "fromCurrency": {"type": "string"},
                "toCurrency": {"type": "string"},
                "rate": {"type": "number"},
                "convertedAmount": {"type": "number"}
            },
            "required": ["amount", "fromCurrency", "toCurrency", "rate", "convertedAmount"]
        }),
    }
}

async fn convert(input: Value) -> Result<Value, ActionError> {
    let amount = input["amount"].as_f64().unwrap_or_default();
    let from = input["fromCurrency"].as_str().unwrap_or_default();
    let to = input["toCurrency"].as_str().unwrap_or_default();
    let rate = match (from, to) {
        ("EUR", "USD") => 1.25,
        ("USD", "EUR") => 0.8,
        _ => {
            return Err(ActionError::not_found(format!(
                "no rate from {from} to {to}"
            )))
        }
    };
    Ok(json!({
        "amount": amount,
        "fromCurrency": from,
        "toCurrency": to,
        "rate": rate,
        "convertedAmount": amount * rate,
    }))
}

/// A node serving the three actions, with no LLM.
fn three_action_node(title: &str, dir: &Path) -> concord_node::NodeBuilder {
    Node::builder(title)
        .description("Products, weather and currency conversion.")
        .action(catalogue::action(), catalogue::answer)
        .action(weather_action(), weather)
        .action(currency_action(), convert)
        .data_dir(dir)
}

// ----- the SDK as requester ------------------------------------------------------------------

/// A candidate the SDK's requester drafts (its scripted LLM answers the drafting call with
/// the file's text), and the two requests it then sends per that protocol.
struct Drafted {
    file: &'static str,
    requirement: &'static str,
    input_description: &'static str,
    output_description: &'static str,
    /// A request the action answers.
    good: Value,
    /// A request for something the action does not know.
    unknown: Value,
    /// Checks the responses to `good` and to `unknown`.
    check: fn(&Value, &Value),
}

fn drafted_product_info() -> Drafted {
    Drafted {
        file: "requester-product-info-defs.md",
        requirement: "Get product information by product id.",
        input_description: "A product id, such as P2.",
        output_description: "The product's name, description, price and currency.",
        good: json!({"messageType": "getProductInfo", "messageId": "sdk-product-1", "productId": "P2"}),
        unknown: json!({"messageType": "getProductInfo", "messageId": "sdk-product-2", "productId": "P404"}),
        check: |found, missing| {
            assert_eq!(found["code"], 200, "{found}");
            assert_eq!(
                numbers_as_f64(&found["data"]),
                numbers_as_f64(&catalogue::product("P2").unwrap()),
                "{found}"
            );
            assert!(found.get("error").is_none(), "{found}");
            assert_eq!(missing["code"], 404, "{missing}");
            assert_eq!(missing["error"]["message"], "no product P404", "{missing}");
            assert!(missing.get("data").is_none(), "{missing}");
        },
    }
}

fn drafted_weather() -> Drafted {
    Drafted {
        file: "requester-weather-snake-case.md",
        requirement: "Current weather in a city.",
        input_description: "The city's name.",
        output_description: "Temperature in degrees Celsius, conditions, relative humidity.",
        good: json!({"message_type": "get_weather", "message_id": "sdk-weather-1", "city": "Berlin"}),
        unknown: json!({"message_type": "get_weather", "message_id": "sdk-weather-2", "city": "Atlantis"}),
        check: |found, missing| {
            assert_eq!(found["code"], 200, "{found}");
            assert_eq!(
                numbers_as_f64(&found["data"]),
                numbers_as_f64(
                    &json!({"city": "Berlin", "temperature_celsius": 18.5, "conditions": "partly cloudy", "humidity_percent": 62})
                ),
                "{found}"
            );
            assert_eq!(missing["code"], 404, "{missing}");
            assert_eq!(
                missing["error"]["message"], "no weather for Atlantis",
                "{missing}"
            );
            assert!(missing.get("data").is_none(), "{missing}");
        },
    }
}

fn drafted_currency() -> Drafted {
    Drafted {
        file: "requester-currency-nested-params-flat-response.md",
        requirement: "Convert an amount of money between two currencies.",
        input_description: "An amount, a source and a target ISO 4217 currency code.",
        output_description: "The converted amount and the exchange rate applied.",
        good: json!({"messageType": "convertCurrency", "messageId": "sdk-currency-1",
            "params": {"amount": 100.0, "fromCurrency": "EUR", "toCurrency": "USD"}}),
        unknown: json!({"messageType": "convertCurrency", "messageId": "sdk-currency-2",
            "params": {"amount": 100.0, "fromCurrency": "EUR", "toCurrency": "XAU"}}),
        check: |found, missing| {
            assert_eq!(found["code"], 200, "{found}");
            assert_eq!(found["convertedAmount"].as_f64(), Some(125.0), "{found}");
            assert_eq!(found["rate"].as_f64(), Some(1.25), "{found}");
            assert_eq!(found["fromCurrency"], "EUR", "{found}");
            assert_eq!(found["toCurrency"], "USD", "{found}");
            assert_eq!(missing["code"], 404, "{missing}");
            assert_eq!(
                missing["error"]["message"], "no rate from EUR to XAU",
                "{missing}"
            );
            for field in [
                "amount",
                "rate",
                "convertedAmount",
                "fromCurrency",
                "toCurrency",
            ] {
                assert!(missing.get(field).is_none(), "{missing}");
            }
        },
    }
}

/// Runs the SDK's requester against `endpoint`: its LLM drafts `drafted.file`, then it
/// sends `requests` if the protocol is agreed. Returns its report.
async fn sdk_requester(endpoint: &str, drafted: &Drafted, requests: &[&Value]) -> Value {
    let llm = ScriptServer::start([Step::content(candidate(drafted.file))])
        .await
        .unwrap();
    let job = json!({
        "requirement": drafted.requirement,
        "inputDescription": drafted.input_description,
        "outputDescription": drafted.output_description,
        "requests": requests,
    });
    let run = tokio::process::Command::new(python())
        // `agreed.py` is imported: leave no `__pycache__` in the source tree.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .arg(script("anp_requester.py"))
        .arg(endpoint)
        .arg(llm.base_url())
        .arg(job.to_string())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(PYTHON_TIMEOUT, run)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{}: the Python requester took over {PYTHON_TIMEOUT:?}",
                drafted.file
            )
        })
        .expect("the Python requester ran");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}: the Python requester failed: {stderr}\n{stdout}",
        drafted.file
    );
    assert_clean(&stderr, drafted.file);
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|error| panic!("{}: {error}: {stdout}\n{stderr}", drafted.file));
    let llm = llm.requests();
    // The SDK's one LLM call: its drafting prompt, with our requirement.
    assert_eq!(
        llm.len(),
        1,
        "{}: one LLM call, the SDK's draft",
        drafted.file
    );
    let messages = llm[0].messages();
    let system = messages[0]["content"].as_str().unwrap_or_default();
    assert!(
        system.contains("You are a protocol design expert"),
        "{system}"
    );
    let user = messages[1]["content"].as_str().unwrap_or_default();
    assert!(user.contains(drafted.requirement), "{user}");
    report
}

/// No Python traceback, no stack trace the SDK logged for an exception it caught, and no
/// error the SDK logged (it logs, and goes on, when a sequenceId is not the one it expects
/// or an `accepted` carries another text than the one on the table).
fn assert_clean(stderr: &str, what: &str) {
    assert!(
        !stderr.contains("Traceback") && !stderr.contains("Stack trace"),
        "{what}: the Python side raised:\n{stderr}"
    );
    assert!(
        !stderr
            .lines()
            .any(|line| line.starts_with("ERROR:") || line.starts_with("CRITICAL:")),
        "{what}: the SDK logged an error:\n{stderr}"
    );
}

/// The protocolNegotiation messages of a frame list.
fn negotiation(frames: &Value) -> Vec<&Value> {
    frames
        .as_array()
        .unwrap()
        .iter()
        .filter(|frame| frame["action"] == "protocolNegotiation")
        .collect()
}

fn said_generated(frames: &Value) -> bool {
    frames
        .as_array()
        .unwrap()
        .iter()
        .any(|frame| frame["action"] == "codeGeneration" && frame["status"] == "generated")
}

/// The SDK drafted `drafted`, the Concord provider accepted it as written in one round, both
/// sides generated their code, and the two requests were answered per the protocol with no
/// jsonschema violation.
async fn sdk_candidate_is_accepted_and_served(endpoint: &str, drafted: &Drafted) {
    let text = candidate(drafted.file);
    let report = sdk_requester(endpoint, drafted, &[&drafted.good, &drafted.unknown]).await;
    let file = drafted.file;
    // Our destinationHello, read by a peer that knows no hello.
    assert_eq!(report["destinationHello"]["type"], "destinationHello");
    // The SDK's candidate (its sequenceId 1), as its LLM wrote it...
    let sent = negotiation(&report["sent"]);
    assert_eq!(sent[0]["sequenceId"], 1, "{file}: {report:#}");
    assert_eq!(sent[0]["status"], "negotiating", "{file}");
    assert_eq!(sent[0]["candidateProtocols"], text.as_str(), "{file}");
    // ...accepted as it stood, in one round.
    let received = negotiation(&report["received"]);
    assert_eq!(received.len(), 1, "{file}: {report:#}");
    let answer = received[0];
    assert_eq!(answer["status"], "accepted", "{file}: {report:#}");
    assert_eq!(answer["sequenceId"], 2, "{file}: {report:#}");
    assert_eq!(answer["candidateProtocols"], text.as_str(), "{file}");
    assert_eq!(report["agreed"], text.as_str(), "{file}");
    // The SDK echoes `accepted` (with its own stale sequenceId): no harm done.
    assert_eq!(sent.len(), 2, "{file}: {report:#}");
    assert_eq!(sent[1]["status"], "accepted", "{file}: {report:#}");
    // Both sides said `generated`.
    assert!(said_generated(&report["received"]), "{file}: {report:#}");
    assert!(said_generated(&report["sent"]), "{file}: {report:#}");
    assert_eq!(report["codeGenerated"], true, "{file}");
    // Every request and response validated against the agreed schemas.
    assert_eq!(
        report["violations"],
        json!([]),
        "{file}: jsonschema violations: {report:#}"
    );
    let exchanges = report["exchanges"].as_array().unwrap();
    assert_eq!(exchanges.len(), 2, "{file}: {report:#}");
    for exchange in exchanges {
        println!(
            "SDK → Concord, {file}: {} → {}",
            exchange["request"], exchange["response"]
        );
    }
    (drafted.check)(&exchanges[0]["response"], &exchanges[1]["response"]);
}

#[tokio::test]
#[ignore = "needs Python with the reference SDK: set CONCORD_ANP_PYTHON (`.ci/run` does)"]
async fn the_reference_python_requester_drafts_protocols_a_concord_provider_accepts_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let provider = three_action_node("Three-action agent", dir.path())
        .build()
        .unwrap();
    assert!(
        !provider.has_llm(),
        "the provider judges with its rules alone"
    );
    let server = provider.serve("127.0.0.1:0").await.unwrap();

    let drafted = [
        drafted_product_info(),
        drafted_weather(),
        drafted_currency(),
    ];
    for drafted in &drafted {
        sdk_candidate_is_accepted_and_served(&server.endpoint(), drafted).await;
    }

    // The provider stored each agreed protocol, as the SDK wrote it, under its hash, ready
    // for a 0-RTT resume.
    let stored: Vec<ProtocolHash> = provider
        .store()
        .list_protocols()
        .unwrap()
        .into_iter()
        .map(|summary| summary.hash)
        .collect();
    assert_eq!(stored.len(), drafted.len(), "{stored:?}");
    for drafted in &drafted {
        let hash = ProtocolHash::of_text(&candidate(drafted.file));
        assert!(stored.contains(&hash), "{} is not stored", drafted.file);
    }
}

#[tokio::test]
#[ignore = "needs Python with the reference SDK: set CONCORD_ANP_PYTHON (`.ci/run` does)"]
async fn a_concord_provider_rejects_an_unsatisfiable_sdk_candidate_and_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let provider = three_action_node("Three-action agent", dir.path())
        .build()
        .unwrap();
    let server = provider.serve("127.0.0.1:0").await.unwrap();

    // The SDK's candidate requires a `stockLevel` in the product data, which
    // `getProductInfo` never returns: no protocol with that action can satisfy it.
    let file = "requester-product-info-stock-level.md";
    let text = candidate(file);
    let drafted = Drafted {
        file,
        requirement: "Get product information and the stock level by product id.",
        ..drafted_product_info()
    };
    let report = sdk_requester(&server.endpoint(), &drafted, &[]).await;
    let received = negotiation(&report["received"]);
    assert_eq!(received.len(), 1, "{report:#}");
    let answer = received[0];
    assert_eq!(answer["status"], "rejected", "{report:#}");
    assert_eq!(answer["sequenceId"], 2, "{report:#}");
    let reason = answer["modificationSummary"].as_str().unwrap_or_default();
    assert!(
        reason.contains("stockLevel"),
        "the reason names the field: {report:#}"
    );
    // The SDK took the rejection without crashing (the run succeeded, no traceback) and
    // answered it with its own `rejected` echo; it generated no code and sent no request.
    let sent = negotiation(&report["sent"]);
    assert_eq!(sent.len(), 2, "{report:#}");
    assert_eq!(sent[0]["candidateProtocols"], text.as_str());
    assert_eq!(sent[1]["status"], "rejected", "{report:#}");
    assert_eq!(report["negotiated"], false);
    assert!(!said_generated(&report["sent"]), "{report:#}");
    assert_eq!(report["exchanges"], json!([]));
    // We ended the session normally (1000), not as a protocol error, right after our
    // `rejected`: the SDK's echo may find the connection closed (the script records that
    // send's failure rather than raising it into the SDK); nothing else failed to go out.
    assert_eq!(report["closed"]["code"], 1000, "{report:#}");
    for failed in report["sendErrors"].as_array().unwrap() {
        let failed = failed.as_str().unwrap_or_default();
        assert!(failed.starts_with("protocolNegotiation:"), "{report:#}");
    }
    println!(
        "the SDK's rejected echo: {}; undelivered: {}",
        sent[1], report["sendErrors"]
    );

    // The provider's transcript says why, and nothing was stored.
    let outcome = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let transcripts = provider.store().list_transcripts(10).unwrap();
            if let Some(outcome) = transcripts.iter().find_map(|t| t.outcome.clone()) {
                return outcome;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the provider finished the rejected session's transcript within 10 s");
    assert!(
        matches!(&outcome, Outcome::Rejected(reason) if reason.contains("stockLevel")),
        "{outcome:?}"
    );
    assert!(provider.store().list_protocols().unwrap().is_empty());

    // The provider goes on serving: the next SDK candidate, on the same node, is accepted
    // and served.
    sdk_candidate_is_accepted_and_served(&server.endpoint(), &drafted_weather()).await;
    assert_eq!(provider.store().list_protocols().unwrap().len(), 1);
}

// ----- the SDK as provider -------------------------------------------------------------------

/// A counter-proposal the SDK's provider makes (its scripted LLM answers `negotiating` with
/// the file's text), and what a Concord requester gets by calling through it.
struct Countered {
    action: &'static str,
    file: &'static str,
    input: Value,
    output: Value,
    unknown: Value,
    /// The error message of the call with `unknown`.
    not_found: &'static str,
}

fn countered() -> [Countered; 3] {
    [
        Countered {
            action: catalogue::ACTION,
            file: "provider-product-info-snake-case.md",
            input: json!({"productId": "P2"}),
            output: catalogue::product("P2").unwrap(),
            unknown: json!({"productId": "P404"}),
            not_found: "no product P404",
        },
        Countered {
            action: WEATHER,
            file: "provider-weather-params-defs.md",
            input: json!({"city": "Berlin"}),
            output: json!({"city": "Berlin", "temperatureCelsius": 18.5, "conditions": "partly cloudy", "humidityPercent": 62}),
            unknown: json!({"city": "Atlantis"}),
            not_found: "no weather for Atlantis",
        },
        Countered {
            action: CURRENCY,
            file: "provider-currency-flat-error-string.md",
            input: json!({"amount": 100.0, "fromCurrency": "EUR", "toCurrency": "USD"}),
            output: json!({"amount": 100.0, "fromCurrency": "EUR", "toCurrency": "USD", "rate": 1.25, "convertedAmount": 125.0}),
            unknown: json!({"amount": 100.0, "fromCurrency": "EUR", "toCurrency": "XAU"}),
            not_found: "no rate from EUR to XAU",
        },
    ]
}

/// `value` with every number as a float, to compare JSON values by what they mean.
fn numbers_as_f64(value: &Value) -> Value {
    match value {
        Value::Number(number) => json!(number.as_f64()),
        Value::Array(items) => items.iter().map(numbers_as_f64).collect(),
        Value::Object(fields) => fields
            .iter()
            .map(|(name, value)| (name.clone(), numbers_as_f64(value)))
            .collect(),
        other => other.clone(),
    }
}

/// The Python provider's JSON events, one per line, taken by kind.
struct Events {
    lines: Lines<BufReader<ChildStdout>>,
    early: Vec<Value>,
}

impl Events {
    async fn take(&mut self, event: &str) -> Value {
        if let Some(index) = self.early.iter().position(|e| e["event"] == event) {
            return self.early.remove(index);
        }
        loop {
            let line = tokio::time::timeout(EVENT_TIMEOUT, self.lines.next_line())
                .await
                .unwrap_or_else(|_| panic!("no `{event}` event within {EVENT_TIMEOUT:?}"))
                .unwrap()
                .unwrap_or_else(|| panic!("the Python provider ended before a `{event}` event"));
            let value: Value =
                serde_json::from_str(&line).unwrap_or_else(|error| panic!("{error}: {line}"));
            if value["event"] == event {
                return value;
            }
            self.early.push(value);
        }
    }
}

/// Copies a child's stderr to ours and keeps it, to look for tracebacks at the end.
fn keep(stderr: impl AsyncRead + Unpin + Send + 'static) -> Arc<Mutex<String>> {
    let kept = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&kept);
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("anp_provider.py: {line}");
            let mut kept = sink.lock().unwrap();
            kept.push_str(&line);
            kept.push('\n');
        }
    });
    kept
}

#[tokio::test]
#[ignore = "needs Python with the reference SDK: set CONCORD_ANP_PYTHON (`.ci/run` does)"]
async fn a_concord_requester_accepts_and_calls_the_reference_python_providers_counter_proposals() {
    // The provider's description, as a Concord node would publish the three actions,
    // naming a placeholder host the Python provider replaces with its address.
    let dir = tempfile::tempdir().unwrap();
    let describer = three_action_node(
        "Three-action agent (Python anp SDK)",
        &dir.path().join("describer"),
    )
    .public_url("http://anp-provider.invalid/")
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

    // The SDK judges each of our candidates with its LLM: scripted to counter-propose its
    // own protocol for that action, one session after the other.
    let cases = countered();
    let llm = ScriptServer::start(cases.iter().map(|case| {
        Step::content(
            json!({
                "status": "negotiating",
                "candidate_protocol": candidate(case.file),
                "modification_summary": format!(
                    "Rewrote the protocol for {} in our service's conventions.",
                    case.action
                ),
            })
            .to_string(),
        )
    }))
    .await
    .unwrap();
    let mut provider = tokio::process::Command::new(python())
        // `agreed.py` is imported: leave no `__pycache__` in the source tree.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .arg(script("anp_provider.py"))
        .arg(&description_file)
        .arg(llm.base_url())
        .arg(Path::new(INTEROP).join("candidates"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stderr = keep(provider.stderr.take().unwrap());
    let mut lines = BufReader::new(provider.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("the Python provider started within 60 s")
        .unwrap()
        .expect("the Python provider printed its address");
    let url = first.strip_prefix("listening ").unwrap().to_owned();
    let mut events = Events {
        lines,
        early: Vec::new(),
    };

    // The SDK's provider answers our first message with sequenceId 2 whatever it carried:
    // the node numbers as the SDK does (first sequenceId 1), so 2 is in step.
    let requester = Node::builder("Requester")
        .reference_compatible(true)
        .data_dir(dir.path().join("requester"))
        .build()
        .unwrap();
    assert!(!requester.has_llm());
    for case in &cases {
        let file = case.file;
        let foreign = candidate(file);
        let connection =
            tokio::time::timeout(CONNECT_TIMEOUT, requester.connect(&url, case.action))
                .await
                .unwrap_or_else(|_| panic!("{file}: no connection within {CONNECT_TIMEOUT:?}"))
                .unwrap_or_else(|error| panic!("{file}: the connection failed: {error}"));
        let info = connection.info().clone();
        // We agreed on the SDK's counter-proposal as it wrote it, with no LLM.
        assert_eq!(info.settlement, Settlement::Negotiated);
        assert_eq!(info.hash, ProtocolHash::of_text(&foreign), "{file}");
        assert_eq!(info.accounting.llm_calls(), 0, "{file}");
        assert!(info.code.iter().all(|code| code.llm_calls == 0), "{file}");
        assert_eq!(
            info.capabilities.iter().count(),
            0,
            "the SDK announces no capability"
        );
        assert_eq!(
            info.verified_cases, 0,
            "no test cases with a peer that has none"
        );
        let stored = requester.store().protocol(&info.hash).unwrap().unwrap();
        assert_eq!(stored.document, foreign, "{file}");

        // What the SDK's side saw: our candidate (1), its counter-proposal (2), our
        // `accepted` (3), then its echo of `accepted`, carrying its own text and its own
        // last sequenceId (2), with no second LLM call; then `generated` both ways.
        let agreed = events.take("agreed").await;
        assert_eq!(agreed["candidate"], file, "{agreed:#}");
        assert_eq!(agreed["violations"], json!([]), "{file}: {agreed:#}");
        assert_eq!(agreed["codeGenerated"], true, "{file}: {agreed:#}");
        let ours = negotiation(&agreed["received"]);
        let theirs = negotiation(&agreed["sent"]);
        assert_eq!(ours.len(), 2, "{file}: {agreed:#}");
        assert_eq!(
            (&ours[0]["sequenceId"], &ours[0]["status"]),
            (&json!(1), &json!("negotiating"))
        );
        assert_eq!(
            (&ours[1]["sequenceId"], &ours[1]["status"]),
            (&json!(3), &json!("accepted"))
        );
        assert_eq!(ours[1]["candidateProtocols"], foreign.as_str(), "{file}");
        assert_eq!(theirs.len(), 2, "{file}: {agreed:#}");
        assert_eq!(
            (&theirs[0]["sequenceId"], &theirs[0]["status"]),
            (&json!(2), &json!("negotiating"))
        );
        assert_eq!(theirs[0]["candidateProtocols"], foreign.as_str(), "{file}");
        assert!(theirs[0]["modificationSummary"].is_string(), "{file}");
        assert_eq!(
            (&theirs[1]["sequenceId"], &theirs[1]["status"]),
            (&json!(2), &json!("accepted"))
        );
        assert_eq!(theirs[1]["candidateProtocols"], foreign.as_str(), "{file}");
        assert!(said_generated(&agreed["received"]), "{file}: {agreed:#}");
        assert!(said_generated(&agreed["sent"]), "{file}: {agreed:#}");

        // A call: our handler speaks the SDK's layout, and maps the result back onto the
        // action's output as published.
        let output = tokio::time::timeout(
            CALL_TIMEOUT,
            connection.call(case.action, case.input.clone()),
        )
        .await
        .unwrap_or_else(|_| panic!("{file}: the call took over {CALL_TIMEOUT:?}"))
        .unwrap_or_else(|error| panic!("{file}: the call failed: {error}"));
        // JSON numbers compare by value: the handler may write 125.0 as 125.
        assert_eq!(
            numbers_as_f64(&output),
            numbers_as_f64(&case.output),
            "{file}: {output}"
        );
        let exchange = events.take("exchange").await;
        println!(
            "Concord → SDK, {file}: {} → {}",
            exchange["request"], exchange["response"]
        );
        assert_eq!(
            exchange["violations"],
            json!([]),
            "{file}: jsonschema violations: {exchange:#}"
        );
        assert_eq!(exchange["response"]["code"], 200, "{file}: {exchange:#}");

        // An error call: the SDK's 404, as its protocol carries it.
        let error = tokio::time::timeout(
            CALL_TIMEOUT,
            connection.call(case.action, case.unknown.clone()),
        )
        .await
        .unwrap_or_else(|_| panic!("{file}: the call took over {CALL_TIMEOUT:?}"))
        .expect_err("an unknown input is an error");
        assert_eq!(
            error,
            CallError::Remote {
                code: 404,
                message: case.not_found.to_owned()
            },
            "{file}"
        );
        let exchange = events.take("exchange").await;
        println!(
            "Concord → SDK, {file}: {} → {}",
            exchange["request"], exchange["response"]
        );
        assert_eq!(
            exchange["violations"],
            json!([]),
            "{file}: jsonschema violations: {exchange:#}"
        );
        assert_eq!(exchange["response"]["code"], 404, "{file}: {exchange:#}");
        connection.close().await;
    }

    // The SDK's LLM calls, as SPEC-NOTES §5 describes them, one per session: a JSON object
    // answer, the capability tool offered in the same call, our candidate in the prompt.
    let requests = llm.requests();
    assert_eq!(requests.len(), cases.len());
    for (request, case) in requests.iter().zip(&cases) {
        assert_eq!(request.body["response_format"]["type"], "json_object");
        assert_eq!(
            request.body["tools"][0]["function"]["name"],
            "get_capability_info"
        );
        let prompt = request.messages()[1]["content"]
            .as_str()
            .unwrap_or_default();
        assert!(prompt.contains(case.action), "{prompt}");
    }
    drop(events);
    let _ = provider.start_kill();
    let _ = tokio::time::timeout(Duration::from_secs(5), provider.wait()).await;
    assert_clean(&stderr.lock().unwrap(), "anp_provider.py");
}

/// A caller built on the SDK's `anp.authentication` (its own e1 DID, its document served by
/// itself on loopback) signs the WebSocket upgrade to a Concord provider that admits
/// authenticated callers only, in both of ANP's header forms: the provider resolves the
/// SDK's document, verifies the signature, answers the hello, and records the SDK's DID as
/// the peer; the same signed headers replayed get 401 with ANP's `invalid_nonce` challenge.
#[tokio::test]
#[ignore = "needs CONCORD_ANP_PYTHON: a Python with anp==1.0.7 and websockets"]
async fn a_concord_provider_authenticates_the_reference_sdks_did_in_both_header_forms() {
    let dir = tempfile::tempdir().unwrap();
    let mut security = concord_node::Security::default();
    security.resolver.allow_loopback_http = true;
    // The SDK's legacy form is tried too: accepted only where the node turns it on.
    security.legacy_didwba = true;
    let provider = Node::builder("Product agent")
        .data_dir(dir.path())
        .action(catalogue::action(), catalogue::answer)
        .keys(concord_node::Keys::generate())
        .security(security)
        .allow(catalogue::ACTION, concord_node::Allow::Authenticated)
        .build()
        .unwrap();
    let server = provider.serve("127.0.0.1:0").await.unwrap();
    for form in ["http-signatures", "didwba"] {
        let run = tokio::process::Command::new(python())
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .arg(script("anp_did_client.py"))
            .arg(server.endpoint())
            .arg(form)
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(PYTHON_TIMEOUT, run)
            .await
            .unwrap_or_else(|_| panic!("{form}: the SDK caller took over {PYTHON_TIMEOUT:?}"))
            .expect("the SDK caller ran");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{form}: {stderr}\n{stdout}");
        assert_clean(&stderr, form);
        let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
            .unwrap_or_else(|error| panic!("{form}: {error}: {stdout}\n{stderr}"));
        assert_eq!(
            report["destination"]["type"], "destinationHello",
            "{form}: {report:#}"
        );
        assert_eq!(report["replay"]["status"], 401, "{form}: {report:#}");
        let challenge = report["replay"]["challenge"].as_str().unwrap_or_default();
        assert!(
            challenge.starts_with("DIDWba realm=") && challenge.contains("error=\"invalid_nonce\""),
            "{form}: {challenge}"
        );
        // The session's transcript knows the caller by the DID it proved.
        let did = report["did"].as_str().unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let transcripts = provider.store().list_transcripts(100).unwrap();
            if let Some(found) = transcripts.iter().find(|t| t.peer == did) {
                let channel = found.channel.clone().unwrap_or_default();
                assert!(
                    channel.contains(&format!("peer authenticated as {did}")),
                    "{channel}"
                );
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{form}: no transcript for {did}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// ANP and A2A peers read a Concord agent's discovery documents with their own SDKs
/// (`tests/interop/anp_discovery.py`): the reference SDK's crawler follows
/// `/.well-known/agent-descriptions` to the agent's `ad.json`, which its pydantic model
/// `AgentDescription` accepts, its parser finds the two interfaces there, and the DID
/// document the `ad.json` names resolves and verifies as the SDK's resolver checks it, with
/// its `AgentDescription` and `WotThing` services; the A2A SDK's `AgentCard` type (protobuf,
/// unknown fields refused) reads the agent card.
#[tokio::test]
#[ignore = "needs Python with the reference SDK and a2a-sdk: set CONCORD_ANP_PYTHON (`.ci/run` does)"]
async fn the_reference_sdks_read_the_agents_discovery_documents() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Node::builder("Product agent")
        .data_dir(dir.path())
        .description("Product information for a small shop.")
        .action(catalogue::action(), catalogue::answer)
        .keys(concord_node::Keys::generate())
        .owner(concord_node::Owner::organization("Small Shop").with_url("https://shop.example"))
        .build()
        .unwrap();
    let server = provider.serve("127.0.0.1:0").await.unwrap();
    let run = tokio::process::Command::new(python())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .arg(script("anp_discovery.py"))
        .arg(server.url())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(PYTHON_TIMEOUT, run)
        .await
        .unwrap_or_else(|_| panic!("the SDK readers took over {PYTHON_TIMEOUT:?}"))
        .expect("the SDK readers ran");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stderr}\n{stdout}");
    assert_clean(&stderr, "discovery");
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|error| panic!("{error}: {stdout}\n{stderr}"));

    let did = server.did().unwrap();
    let ad_url = format!("{}ad.json", server.url());
    assert_eq!(report["pages"], 1, "{report:#}");
    let agents = report["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 1, "{report:#}");
    let agent = &agents[0];
    assert_eq!(agent["name"], "Product agent");
    let ad = &agent["ad"];
    assert_eq!(ad["url"], ad_url);
    assert_eq!(ad["did"], did);
    assert_eq!(ad["protocolType"], "ANP");
    assert_eq!(ad["owner"]["name"], "Small Shop");
    assert_eq!(
        agent["securityDefinitions"]["didwba_sc"],
        json!({"scheme": "didwba", "in": "header", "name": "Authorization"})
    );
    let interfaces: Vec<&str> = agent["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|interface| interface["url"].as_str().unwrap())
        .collect();
    let description = server.description_url();
    assert_eq!(
        interfaces,
        [server.endpoint().as_str(), description.as_str()],
        "{report:#}"
    );
    let document = &agent["did_document"];
    assert_eq!(document["binding"], true, "{report:#}");
    assert_eq!(document["proof"], true, "{report:#}");
    let services = document["service"].as_array().unwrap();
    assert!(services.iter().any(
        |service| service["type"] == "AgentDescription" && service["serviceEndpoint"] == ad_url
    ));
    assert!(services
        .iter()
        .any(|service| service["type"] == "WotThing" && service["serviceEndpoint"] == description));

    let card = &report["card"];
    assert!(card.get("skipped").is_none(), "{card:#}");
    assert_eq!(card["name"], "Product agent");
    assert_eq!(card["skills"], json!([catalogue::ACTION]));
    assert_eq!(card["interfaces"][0], json!([server.endpoint(), "ANP"]));
    assert_eq!(card["streaming"], false);
    assert_eq!(card["schemes"], json!(["didwba_sc"]));
    server.shutdown().await.unwrap();
}

/// The reference SDK's crawler reads a directory's `/.well-known/agent-descriptions` page by
/// page (`next`, one description a page here) to each registered agent's `ad.json`, and
/// verifies each agent's DID document; the A2A SDK reads the directory's own agent card.
#[tokio::test]
#[ignore = "needs Python with the reference SDK and a2a-sdk: set CONCORD_ANP_PYTHON (`.ci/run` does)"]
async fn the_reference_sdks_crawler_follows_a_directorys_pages_to_each_agent() {
    use concord_directory::{Directory, DirectoryLimits, MemoryDirectoryStore};
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut agents = Vec::new();
    for (index, dir) in dirs[..2].iter().enumerate() {
        let node = Node::builder(format!("Agent {index}"))
            .data_dir(dir.path())
            .action(catalogue::action(), catalogue::answer)
            .keys(concord_node::Keys::generate())
            .build()
            .unwrap();
        let server = node.serve("127.0.0.1:0").await.unwrap();
        agents.push((node, server));
    }
    let mut limits = DirectoryLimits::default();
    limits.max_page_size = 1;
    let directory = Directory::new(Arc::new(MemoryDirectoryStore::new()), limits).unwrap();
    let node = Node::builder("Directory")
        .data_dir(dirs[2].path())
        .directory(concord_node::DirectoryService::new(directory))
        .build()
        .unwrap();
    let server = node.serve("127.0.0.1:0").await.unwrap();
    let client = reqwest::Client::new();
    for (_, agent) in &agents {
        let td = reqwest::get(agent.description_url())
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let created = client
            .post(format!("{}things", server.url()))
            .header("content-type", "application/td+json")
            .body(td)
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), 201);
    }
    let run = tokio::process::Command::new(python())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .arg(script("anp_discovery.py"))
        .arg(server.url())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(PYTHON_TIMEOUT, run)
        .await
        .unwrap_or_else(|_| panic!("the SDK readers took over {PYTHON_TIMEOUT:?}"))
        .expect("the SDK readers ran");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stderr}\n{stdout}");
    assert_clean(&stderr, "directory discovery");
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|error| panic!("{error}: {stdout}\n{stderr}"));
    assert_eq!(report["pages"], 2, "{report:#}");
    let mut dids: Vec<&str> = report["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|agent| {
            assert_eq!(agent["did_document"]["proof"], true, "{report:#}");
            agent["ad"]["did"].as_str().unwrap()
        })
        .collect();
    dids.sort_unstable();
    let mut expected: Vec<&str> = agents.iter().map(|(_, s)| s.did().unwrap()).collect();
    expected.sort_unstable();
    assert_eq!(dids, expected);
    assert_eq!(report["card"]["name"], "Directory", "{report:#}");
    server.shutdown().await.unwrap();
}
