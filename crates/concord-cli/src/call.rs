//! `concord call <url> <action> '<json>'`: connect to a peer (discover, negotiate or
//! resume), call one action and print its output.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use concord_node::{CallError, ConnectError, Limits, Node, Want};
use serde_json::{json, Value};

use crate::data_dir::DataDir;
use crate::input::{read_bytes, read_text};
use crate::llm;
use crate::logging::Spinner;
use crate::output;
use crate::runtime;
use crate::session_report::{millis, SessionReport};

/// `concord call`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  concord call http://127.0.0.1:8080 getProductInfo '{\"productId\": \"P12345\"}'
  echo '{\"productId\": \"P2\"}' | concord call http://127.0.0.1:8080 getProductInfo - --json
  concord call https://shop.internal getProductInfo '{\"productId\": \"P2\"}' --ca-cert ca.pem

The first call to a peer negotiates a protocol, generates and verifies its code, and stores
it; later calls resume it with 0-RTT (no negotiation, no LLM). Exit codes: 0 the output was
printed; 1 the peer said no (unknown action, rejected negotiation, an error response, input
that breaks the protocol); 2 the call could not run (bad URL, unreachable peer, timeout).")]
pub struct CallArgs {
    /// The peer: its base URL (`http://host:port`) or its description URL.
    url: String,
    /// The peer's action to call.
    action: String,
    /// The action's input as JSON; `-` reads it from standard input.
    input: String,
    #[command(flatten)]
    data_dir: DataDir,
    /// Print a JSON object: the output, and how the protocol was settled (hash,
    /// settledBy, negotiation messages, round trips, LLM calls, timings).
    #[arg(long)]
    json: bool,
    /// Negotiate (and write code, when no template fits) with the LLM configured by
    /// CONCORD_LLM_BASE_URL, CONCORD_LLM_API_KEY, CONCORD_LLM_MODEL (or OPENAI_*).
    #[arg(long)]
    llm: bool,
    /// How long to wait for the response (e.g. `5s`; default 30s).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    timeout: Option<Duration>,
    /// Propose this protocol document instead of drafting one.
    #[arg(long, value_name = "FILE")]
    propose: Option<PathBuf>,
    /// Also trust the root certificates in this PEM file for an `https://` peer (and its
    /// `wss://` endpoint), on top of the system's: a peer whose certificate a private CA
    /// signed.
    #[arg(long, value_name = "FILE")]
    ca_cert: Option<PathBuf>,
    /// Negotiate as the reference Python implementation (PyPI `anp`) does: first
    /// sequenceId 1 instead of 0, and an `accepted` echo. For a provider built on that SDK.
    #[arg(long)]
    reference_compatible: bool,
}

/// Runs `concord call`.
pub fn run(args: CallArgs) -> anyhow::Result<ExitCode> {
    let (input_text, from) = if args.input == "-" {
        (read_bytes(None)?, "on standard input")
    } else {
        (args.input.clone().into_bytes(), "argument")
    };
    let input: Value = serde_json::from_slice(&input_text)
        .with_context(|| format!("the input ({from}) is not valid JSON"))?;
    let mut want = Want::action(args.action.clone());
    if let Some(path) = &args.propose {
        want = want.propose(read_text(Some(path), "the protocol to propose")?);
    }
    let mut limits = Limits::default();
    if let Some(timeout) = args.timeout {
        if timeout.is_zero() {
            bail!("--timeout must be longer than zero");
        }
        limits.call_timeout = timeout;
    }
    let mut builder = Node::builder("concord call")
        .data_dir(args.data_dir.path()?)
        .limits(limits)
        .reference_compatible(args.reference_compatible);
    if args.llm {
        builder = builder.llm(llm::from_env()?);
    }
    if let Some(path) = &args.ca_cert {
        builder = builder.trust_root_certificates_pem(read_bytes(Some(path))?);
    }
    let node = builder.build().context("cannot set up the requester")?;
    runtime::block_on(call(node, args, want, input))?
}

async fn call(node: Node, args: CallArgs, want: Want, input: Value) -> anyhow::Result<ExitCode> {
    let spinner = Spinner::start(&format!("connecting to {}", args.url));
    let started = Instant::now();
    let connection = match node.connect_with(&args.url, want).await {
        Ok(connection) => connection,
        Err(error) => {
            spinner.finish();
            eprintln!("concord: {error}");
            return Ok(ExitCode::from(connect_exit_code(&error)));
        }
    };
    spinner.set(&format!("calling {}", args.action));
    let call_started = Instant::now();
    let result = connection.call(&args.action, input).await;
    let call_time = call_started.elapsed();
    spinner.set("closing");
    connection.close().await;
    let report = SessionReport::of(connection.info(), node.store()).await;
    spinner.finish();
    let output = match result {
        Ok(output) => output,
        Err(error) => {
            let text = error.to_string();
            let text = match error {
                // A handler's error goes on with the generated module's stack frames,
                // which say nothing to the caller: its first line says what was wrong.
                CallError::InvalidInput(_) | CallError::InvalidResponse(_) => {
                    text.lines().next().unwrap_or_default()
                }
                _ => &text,
            };
            eprintln!("concord: {text}");
            return Ok(ExitCode::from(call_exit_code(&error)));
        }
    };
    if args.json {
        let mut summary = json!({
            "output": output,
            "peer": connection.info().peer,
            "action": args.action,
        });
        if let (Value::Object(summary), Value::Object(report)) = (&mut summary, report.to_json()) {
            summary.extend(report);
            // The setup time goes with the others.
            let setup = summary.remove("setupMs");
            summary.insert(
                "timings".to_owned(),
                json!({
                    "setupMs": setup,
                    "callMs": millis(call_time),
                    "totalMs": millis(started.elapsed()),
                }),
            );
        }
        output::json(&summary)?;
    } else {
        output::json(&output)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// 1 when the peer (or what it published) said no; 2 when we could not get an answer.
pub fn connect_exit_code(error: &ConnectError) -> u8 {
    match error {
        ConnectError::InvalidDescription { .. }
        | ConnectError::NoEndpoint { .. }
        | ConnectError::UnknownAction { .. }
        | ConnectError::Hello { .. }
        | ConnectError::Handshake { .. }
        | ConnectError::Binding(_)
        | ConnectError::Closed(_)
        | ConnectError::Verification(_) => 1,
        _ => 2,
    }
}

/// 1 when the call was answered with an error or its input or answer breaks the protocol;
/// 2 when no answer came.
pub fn call_exit_code(error: &CallError) -> u8 {
    match error {
        CallError::Timeout(_) | CallError::Closed(_) => 2,
        _ => 1,
    }
}
