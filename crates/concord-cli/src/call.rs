//! `concord call <url> <action> [input]`: connect to a peer (discover, negotiate or
//! resume) and call one action: once with one input, once per JSON line of a stream
//! (standard input or `--input FILE`), or `--repeat N` times, all over one session.

use std::io::{BufRead, BufReader, IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use concord_describe::InteractionMode;
use concord_node::{CallError, ConnectError, Connection, ConnectionInfo, Limits, Node, Want};
use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::caller::CallerArgs;
use crate::data_dir::DataDir;
use crate::input::{read_bytes, read_text};
use crate::interact::{self, progress, Affordance, Described, Kind};
use crate::llm;
use crate::logging::Spinner;
use crate::output::{self, outln};
use crate::runtime;
use crate::session_report::{millis, SessionReport};

/// Input lines queued between the reader thread and the calls.
const LINE_QUEUE: usize = 256;

/// `concord call`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  concord call http://127.0.0.1:8080 getProductInfo '{\"productId\": \"P12345\"}'
  echo '{\"productId\": \"P2\"}' | concord call http://127.0.0.1:8080 getProductInfo - --json
  concord call https://shop.internal getProductInfo '{\"productId\": \"P2\"}' --ca-cert ca.pem

Many calls over one session (JSON lines in, one JSON line out per input line, in order):
  printf '%s\\n' '{\"productId\": \"P1\"}' '{\"productId\": \"P2\"}' | concord call http://127.0.0.1:8080 getProductInfo
  concord call http://127.0.0.1:8080 getProductInfo --input ids.jsonl --json --concurrency 8
  concord call http://127.0.0.1:8080 getProductInfo '{\"productId\": \"P2\"}' --repeat 1000 --concurrency 16

The first call to a peer negotiates a protocol, generates and verifies its code, and stores
it; later calls resume it with 0-RTT (no negotiation, no LLM).

Identity: with --did-host, the call is signed (ANP DID-WBA) as the data directory's identity
(`concord identity`), whose DID names that host: did:wba:<host>[%3A<port>]:agents:e1_…; its
DID document must be served there (by `concord serve` with the same data directory, or
`concord identity export` on a web server of your own). Without it, or with --anonymous,
the call is anonymous. The session is end-to-end encrypted (Noise) when the peer speaks it,
its DID proven by the channel (a DID on localhost resolves on this machine, over https://
or http://, only for a peer called at a loopback address, or with
--resolve-loopback-over-http).
  concord call https://shop.example getProductInfo '{\"productId\": \"P2\"}' --did-host agents.example.com
  concord call http://127.0.0.1:9000 getProductInfo '{\"productId\": \"P2\"}' \\
      --did-host localhost:8080     # two local agents: ours serves on 8080 with this data dir

Input: a JSON argument is one call; `-` reads one JSON document from standard input; with
no input argument (standard input not a terminal) or with `--input FILE` (`-` for standard
input) every non-blank line is one call. A line that is not JSON, or whose call fails, gets
`{\"error\": {\"code\", \"message\"}}` on its output line (and a `concord: line N: …` line on
standard error); the rest go on. With --json each output line is
`{\"line\", \"output\" | \"error\", \"latencyMs\"}`. `code` is the peer's status code for an
error response, else one of invalid-json, invalid-input, invalid-response, timeout, closed,
wrong-action, unsupported.

Long-running, fire-and-forget and stream actions (the description's `concord:mode`): a
long-running action shows a progress bar with its partial output on a terminal, and prints
its output at the end; with --json one line per update:
  {\"type\": \"started\", \"actionId\"}, {\"type\": \"progress\", \"progress\": 0.5, \"partial\"},
  {\"type\": \"done\", \"output\"} or {\"type\": \"failed\", \"error\": {\"code\", \"message\"}}.
Ctrl-C cancels a long-running action before exiting (130), once it has its id (waiting
up to 5 s for it); a second Ctrl-C exits at once, saying the action may run on until its
lease ends. `concord status URL ACTION_ID` and `concord cancel URL ACTION_ID` take its id. A
fire-and-forget action prints `sent` once the request was written to the connection (a
request that could not be: an error, exit 2). A stream action: `concord stream`.
  concord call http://127.0.0.1:8080 forecastReport '{\"city\": \"Oslo\"}' --json

Exit codes: 0 every call was answered with an output; 1 the peer said no (unknown action,
rejected negotiation, an error response, input that breaks the protocol, a line that is not
JSON); 2 a call could not run (bad URL, unreachable peer, timeout, connection lost).")]
pub struct CallArgs {
    /// The peer: its base URL (`http://host:port`), its description URL, or its id in the
    /// --directory (`urn:…`, `did:…`); left out with --find.
    #[arg(value_name = "TARGET")]
    url: String,
    #[command(flatten)]
    target: crate::target::TargetArgs,
    /// The peer's action to call.
    action: String,
    /// The action's input as JSON; `-` reads one JSON document from standard input.
    /// Without it, JSON lines are read from standard input (or --input).
    input: Option<String>,
    /// Read one input per line (JSON lines) from this file (`-`: standard input) and call
    /// the action once per line over one session.
    #[arg(long = "input", value_name = "FILE", conflicts_with = "input")]
    input_file: Option<PathBuf>,
    /// Send the (single) input N times over one session and print a summary: calls/s and
    /// p50/p99 latency.
    #[arg(long, value_name = "N", requires = "input",
          value_parser = clap::value_parser!(u64).range(1..))]
    repeat: Option<u64>,
    /// Calls in flight at once over the session (JSON lines and --repeat). Output stays in
    /// input order whatever it is.
    #[arg(long, value_name = "K", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    concurrency: u64,
    #[command(flatten)]
    data_dir: DataDir,
    /// Print JSON: for one call, an object with the output and how the protocol was
    /// settled (hash, settledBy, negotiation messages, round trips, LLM calls, timings);
    /// for JSON lines, one object per line; for --repeat, the summary.
    #[arg(long)]
    json: bool,
    /// Negotiate (and write code, when no template fits) with the LLM configured by
    /// CONCORD_LLM_BASE_URL, CONCORD_LLM_API_KEY, CONCORD_LLM_MODEL (or OPENAI_*).
    #[arg(long)]
    llm: bool,
    /// How long to wait for each response (e.g. `5s`; default 30s).
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
    #[command(flatten)]
    caller: CallerArgs,
}

/// What the calls are made with.
enum Inputs {
    /// One input: one call, or `--repeat` calls.
    One(Value),
    /// JSON lines, read by a thread as they come.
    Lines(tokio::sync::mpsc::Receiver<LineItem>),
}

/// One line of a JSON-lines input, or why reading stopped.
enum LineItem {
    /// Line `number` (from 1) and its JSON, or why it is not JSON.
    Line {
        number: u64,
        input: Result<Value, String>,
    },
    /// The input could not be read any further.
    Unreadable(String),
}

/// Runs `concord call`.
pub fn run(mut args: CallArgs) -> anyhow::Result<ExitCode> {
    let settled = args.target.settle(&args.url, args.ca_cert.as_deref())?;
    args.url = settled.url;
    let inputs = read_inputs(&args)?;
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
    let data_dir = args.data_dir.path()?;
    let builder = Node::builder("concord call")
        .data_dir(&data_dir)
        .limits(limits)
        .reference_compatible(args.reference_compatible);
    // Said once, for people; `--json` carries `signedAs: null` instead.
    let mut builder = args.caller.apply(
        builder,
        &args.url,
        settled.did.as_deref(),
        &data_dir,
        args.json,
    )?;
    if args.llm {
        builder = builder.llm(llm::from_env()?);
    }
    if let Some(path) = &args.ca_cert {
        builder = builder.trust_root_certificates_pem(read_bytes(Some(path))?);
    }
    let node = builder.build().context("cannot set up the requester")?;
    runtime::block_on(async move {
        match (inputs, args.repeat) {
            (Inputs::One(input), None) => call(node, args, want, input).await,
            (Inputs::One(input), Some(times)) => repeat(node, args, want, input, times).await,
            (Inputs::Lines(lines), _) => call_lines(node, args, want, lines).await,
        }
    })?
}

/// How the session is protected, for people: `encrypted (Noise), peer did:…, signed as
/// did:…` or `plain, peer anonymous, anonymous`.
fn session_line(info: &ConnectionInfo) -> String {
    format!(
        "session: {}; peer {}; {}",
        if info.encrypted {
            "encrypted (Noise)"
        } else {
            "plain (not end-to-end encrypted)"
        },
        info.peer_did.as_deref().unwrap_or("without a proven DID"),
        info.signed_as.as_deref().map_or_else(
            || "we called anonymously".to_owned(),
            |did| format!("signed as {did}")
        )
    )
}

/// How the session is protected, for `--json`.
fn session_json(info: &ConnectionInfo) -> Value {
    json!({
        "peerDid": info.peer_did,
        "encrypted": info.encrypted,
        "signedAs": info.signed_as,
    })
}

/// Decides where the input comes from and reads a single one (a stream of lines is read
/// by a thread of its own as the calls go).
fn read_inputs(args: &CallArgs) -> anyhow::Result<Inputs> {
    let one = |bytes: &[u8], from: &str| {
        serde_json::from_slice(bytes)
            .map(Inputs::One)
            .with_context(|| format!("the input ({from}) is not valid JSON"))
    };
    match (&args.input, &args.input_file) {
        (Some(input), _) if input == "-" => one(&read_bytes(None)?, "on standard input"),
        (Some(input), _) => one(input.as_bytes(), "argument"),
        (None, Some(path)) if path.as_os_str() != "-" => {
            let file = std::fs::File::open(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            Ok(Inputs::Lines(read_lines(file, path.display().to_string())))
        }
        (None, Some(_)) => Ok(Inputs::Lines(read_lines(
            std::io::stdin(),
            "standard input".to_owned(),
        ))),
        (None, None) if std::io::stdin().is_terminal() => bail!(
            "no input: give it as an argument (JSON), `-` for one JSON document on standard \
             input, or pipe JSON lines in (or --input FILE)"
        ),
        (None, None) => Ok(Inputs::Lines(read_lines(
            std::io::stdin(),
            "standard input".to_owned(),
        ))),
    }
}

/// Reads `reader` line by line on a thread of its own (reading blocks), parsing each
/// non-blank line as JSON, and queues them: the calls start before the input ends.
fn read_lines(
    reader: impl Read + Send + 'static,
    name: String,
) -> tokio::sync::mpsc::Receiver<LineItem> {
    let (sender, receiver) = tokio::sync::mpsc::channel(LINE_QUEUE);
    std::thread::spawn(move || {
        let mut reader = BufReader::new(reader);
        let mut line = Vec::new();
        let mut number = 0u64;
        loop {
            line.clear();
            let item = match reader.read_until(b'\n', &mut line) {
                Ok(0) => return,
                Ok(_) => {
                    number += 1;
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    LineItem::Line {
                        number,
                        input: serde_json::from_slice(&line)
                            .map_err(|error| format!("not valid JSON: {error}")),
                    }
                }
                Err(error) => LineItem::Unreadable(format!("cannot read {name}: {error}")),
            };
            let last = matches!(item, LineItem::Unreadable(_));
            // The receiver is gone once the calls stopped (the session closed): stop reading.
            if sender.blocking_send(item).is_err() || last {
                return;
            }
        }
    });
    receiver
}

async fn call(node: Node, args: CallArgs, want: Want, input: Value) -> anyhow::Result<ExitCode> {
    let spinner = Spinner::start(&format!("connecting to {}", args.url));
    let started = Instant::now();
    // The description is fetched once: for the action's mode, then to connect with.
    let described = match interact::connecting(&spinner, node.describe(&args.url)).await {
        Ok(peer) => Described::new(peer),
        Err(code) => return Ok(code),
    };
    // The connection's setup time starts after the fetch; `setupMs` includes it.
    let describe_time = started.elapsed();
    if args.propose.is_none() {
        if let Some(mode) = interface_mode(&described, &args.action) {
            spinner.finish();
            let call = progress::Call {
                url: &args.url,
                described: &described,
                action: &args.action,
                input,
                json: args.json,
            };
            return progress::call(&node, call, mode).await;
        }
    }
    // A name the description has as a property or an event, not an action: said so.
    if !described.has(&args.action, Kind::Action) {
        let other =
            described.has(&args.action, Kind::Property) || described.has(&args.action, Kind::Event);
        if other {
            spinner.finish();
            described.require(&args.action, Kind::Action)?;
        }
    }
    let connection = match interact::connecting(
        &spinner,
        connect_for_call(&node, &args, &described, want),
    )
    .await
    {
        Ok(connection) => connection,
        Err(code) => return Ok(code),
    };
    spinner.set(&format!("calling {}", args.action));
    let call_started = Instant::now();
    let result = connection.call(&args.action, input).await;
    let call_time = call_started.elapsed();
    spinner.set("closing");
    connection.close().await;
    let mut report = SessionReport::of(connection.info(), node.store()).await;
    report.setup += describe_time;
    spinner.finish();
    let output = match result {
        Ok(output) => output,
        // Said as every mode says it: `ACTION: what failed`.
        Err(error) => return Ok(interact::failed(&args.action, &error)),
    };
    if args.json {
        let mut summary = json!({
            "output": output,
            "peer": connection.info().peer,
            "action": args.action,
        });
        if let (Value::Object(summary), Value::Object(session)) =
            (&mut summary, session_json(connection.info()))
        {
            summary.extend(session);
        }
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
        crate::output::note(session_line(connection.info()));
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether `concord call` reaches a request-reply action over the peer's whole interface
/// (`interact::whole_interface`: one protocol for every command against the agent, resumed
/// by 0-RTT, whatever the command), rather than a protocol negotiated for the one action:
/// when the peer serves more than request-reply actions (properties, events, other modes:
/// the commands that use them share that protocol) and the call is made by rules (no
/// `--propose`, `--llm` or `--reference-compatible`, which negotiate one action's protocol
/// as the other agent writes it).
fn over_interface(args: &CallArgs, described: &Described) -> bool {
    args.propose.is_none()
        && !args.llm
        && !args.reference_compatible
        && described.has_interface()
        && matches!(
            described.affordance(&args.action),
            Some(Affordance::Action {
                mode: InteractionMode::Reply,
                ..
            })
        )
}

/// Connects for `concord call` to the peer whose description was fetched: over its whole
/// interface ([`over_interface`]), else with `want` (the one action).
async fn connect_for_call(
    node: &Node,
    args: &CallArgs,
    described: &Described,
    want: Want,
) -> Result<Connection, ConnectError> {
    if over_interface(args, described) {
        interact::whole_interface(node, described, &[args.action.as_str()]).await
    } else {
        node.connect_described(described.peer(), want).await
    }
}

/// The action's mode when the peer's description says it is not request-reply
/// (long-running, fire-and-forget or stream): it is called over an interface session.
/// `None` for a request-reply action, and for one the description does not have (the
/// one-action path then says so).
fn interface_mode(described: &Described, action: &str) -> Option<InteractionMode> {
    match described.affordance(action)? {
        Affordance::Action { mode, .. } if mode != InteractionMode::Reply => Some(mode),
        _ => None,
    }
}

/// What a call's error says to the caller: a handler's error goes on with the generated
/// module's stack frames, which say nothing to the caller, so only its first line.
pub(crate) fn error_text(error: &CallError) -> String {
    let text = error.to_string();
    match error {
        CallError::InvalidInput(_) | CallError::InvalidResponse(_) => {
            text.lines().next().unwrap_or_default().to_owned()
        }
        _ => text,
    }
}

/// The `code` of a failed call in the output: the peer's status code for an error
/// response, else a name for what failed here.
pub(crate) fn error_code(error: &CallError) -> Value {
    match error {
        CallError::Remote { code, .. } => json!(code),
        CallError::WrongAction { .. } => json!("wrong-action"),
        CallError::InvalidInput(_) => json!("invalid-input"),
        CallError::InvalidResponse(_) => json!("invalid-response"),
        CallError::Timeout(_) => json!("timeout"),
        CallError::Closed(_) => json!("closed"),
        CallError::Unsupported(_) => json!("unsupported"),
        _ => json!("failed"),
    }
}

/// The error message of a failed call: the peer's own message for an error response.
pub(crate) fn error_message(error: &CallError) -> String {
    match error {
        CallError::Remote { message, .. } => message.clone(),
        _ => error_text(error),
    }
}

/// How one line of input fared.
struct LineResult {
    number: u64,
    /// The output, or the error's code, message, one-line description and exit code.
    outcome: Result<Value, LineError>,
    latency: Duration,
}

struct LineError {
    code: Value,
    message: String,
    line: String,
    exit: u8,
}

impl LineError {
    fn of(error: &CallError) -> Self {
        Self {
            code: error_code(error),
            message: error_message(error),
            line: error_text(error),
            exit: call_exit_code(error),
        }
    }
}

/// The session for many calls, and how many may run at once (`--concurrency`).
async fn connect_for_many(
    node: &Node,
    args: &CallArgs,
    want: Want,
) -> Result<(Connection, usize), ExitCode> {
    let spinner = Spinner::start(&format!("connecting to {}", args.url));
    let described = interact::connecting(&spinner, node.describe(&args.url))
        .await
        .map(Described::new)?;
    let connection =
        interact::connecting(&spinner, connect_for_call(node, args, &described, want)).await?;
    spinner.finish();
    Ok((connection, usize::try_from(args.concurrency).unwrap_or(1)))
}

/// One call per JSON line, `--concurrency` at a time, results printed in input order.
async fn call_lines(
    node: Node,
    args: CallArgs,
    want: Want,
    mut lines: tokio::sync::mpsc::Receiver<LineItem>,
) -> anyhow::Result<ExitCode> {
    // Nothing to call (an empty pipe, `</dev/null`): say so before connecting.
    let Some(first) = lines.recv().await else {
        crate::output::note("no input: the input has no JSON lines");
        return Ok(ExitCode::from(2));
    };
    let (connection, concurrency) = match connect_for_many(&node, &args, want).await {
        Ok(opened) => opened,
        Err(code) => return Ok(code),
    };
    let connection_ref = &connection;
    let action = args.action.as_str();
    let rest = futures_util::stream::unfold(lines, |mut lines| async move {
        lines.recv().await.map(|item| (item, lines))
    });
    let results = futures_util::stream::once(async { first })
        .chain(rest)
        .map(|item| async move {
            match item {
                LineItem::Line { number, input } => {
                    let started = Instant::now();
                    let outcome = match input {
                        Ok(input) => connection_ref
                            .call(action, input)
                            .await
                            .map_err(|error| LineError::of(&error)),
                        Err(message) => Err(LineError {
                            code: json!("invalid-json"),
                            line: message.clone(),
                            message,
                            exit: 1,
                        }),
                    };
                    Ok(LineResult {
                        number,
                        outcome,
                        latency: started.elapsed(),
                    })
                }
                LineItem::Unreadable(message) => Err(message),
            }
        })
        .buffered(concurrency);
    let mut results = std::pin::pin!(results);
    let mut exit = 0u8;
    while let Some(result) = results.next().await {
        let result = match result {
            Ok(result) => result,
            Err(message) => {
                crate::output::note(&message);
                exit = 2;
                break;
            }
        };
        let line = match (&result.outcome, args.json) {
            (Ok(output), false) => output.clone(),
            (Ok(output), true) => json!({
                "line": result.number,
                "output": output,
                "latencyMs": millis(result.latency),
            }),
            (Err(error), _) if error.code == json!("closed") => {
                // The session is gone: the rest of the input cannot be called.
                crate::output::note(format_args!("line {}: {}", result.number, error.line));
                exit = 2;
                break;
            }
            (Err(error), json) => {
                crate::output::note(format_args!("line {}: {}", result.number, error.line));
                exit = exit.max(error.exit);
                let error = json!({"code": error.code, "message": error.message});
                if json {
                    json!({
                        "line": result.number,
                        "error": error,
                        "latencyMs": millis(result.latency),
                    })
                } else {
                    json!({ "error": error })
                }
            }
        };
        outln!("{line}")?;
    }
    connection.close().await;
    Ok(ExitCode::from(exit))
}

/// `--repeat N`: the same input N times, `--concurrency` at a time, then a summary.
async fn repeat(
    node: Node,
    args: CallArgs,
    want: Want,
    input: Value,
    times: u64,
) -> anyhow::Result<ExitCode> {
    let (connection, concurrency) = match connect_for_many(&node, &args, want).await {
        Ok(opened) => opened,
        Err(code) => return Ok(code),
    };
    let connection_ref = &connection;
    let action = args.action.as_str();
    let input_ref = &input;
    let started = Instant::now();
    let calls = futures_util::stream::iter(0..times)
        .map(|_| async move {
            let started = Instant::now();
            let result = connection_ref.call(action, input_ref.clone()).await;
            (started.elapsed(), result)
        })
        .buffer_unordered(concurrency);
    let mut calls = std::pin::pin!(calls);
    let mut latencies = Vec::with_capacity(usize::try_from(times.min(1 << 16)).unwrap_or(0));
    let mut errors = 0u64;
    let mut first_error: Option<CallError> = None;
    let mut exit = 0u8;
    while let Some((latency, result)) = calls.next().await {
        latencies.push(latency);
        if let Err(error) = result {
            errors += 1;
            exit = exit.max(call_exit_code(&error));
            first_error.get_or_insert(error);
        }
    }
    let elapsed = started.elapsed();
    connection.close().await;
    latencies.sort_unstable();
    let p50 = percentile(&latencies, 50);
    let p99 = percentile(&latencies, 99);
    let per_second = times as f64 / elapsed.as_secs_f64().max(1e-9);
    if let Some(error) = &first_error {
        eprintln!(
            "concord: {errors} of {times} calls failed; the first: {}",
            error_text(error)
        );
    }
    if args.json {
        let session = session_json(connection.info());
        output::json(&json!({
            "action": args.action,
            "calls": times,
            "ok": times - errors,
            "errors": errors,
            "concurrency": args.concurrency,
            "totalMs": millis(elapsed),
            "callsPerSecond": (per_second * 10.0).round() / 10.0,
            "p50Ms": millis(p50),
            "p99Ms": millis(p99),
            "maxMs": millis(latencies.last().copied().unwrap_or_default()),
            "peerDid": session["peerDid"],
            "encrypted": session["encrypted"],
            "signedAs": session["signedAs"],
        }))?;
    } else {
        outln!(
            "{times} calls ({errors} failed) in {:.3} s, {} at a time: {per_second:.1} calls/s, \
             p50 {:.3} ms, p99 {:.3} ms",
            elapsed.as_secs_f64(),
            args.concurrency,
            millis(p50),
            millis(p99),
        )?;
        crate::output::note(session_line(connection.info()));
    }
    Ok(ExitCode::from(exit))
}

/// The `pct`th percentile of sorted `latencies` (nearest rank); zero when there are none.
fn percentile(latencies: &[Duration], pct: usize) -> Duration {
    if latencies.is_empty() {
        return Duration::ZERO;
    }
    let rank = (latencies.len() * pct).div_ceil(100).max(1);
    latencies.get(rank - 1).copied().unwrap_or(Duration::ZERO)
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
        // The peer is not the agent whose DID was looked up (`Security::expect_peer_did`).
        ConnectError::Security { reason, .. } if reason.starts_with("the peer must prove") => 1,
        // The peer refused the upgrade: unauthenticated (401) or not allowed (403).
        ConnectError::Connect { reason, .. } if is_refusal(reason) => 1,
        _ => 2,
    }
}

/// Whether a failed upgrade's reason is the peer's refusal of who we are (HTTP 401 or
/// 403), rather than a failure to reach it.
fn is_refusal(reason: &str) -> bool {
    reason.starts_with("HTTP 401") || reason.starts_with("HTTP 403")
}

/// 1 when the call was answered with an error or its input or answer breaks the protocol;
/// 2 when no answer came.
pub fn call_exit_code(error: &CallError) -> u8 {
    match error {
        CallError::Timeout(_) | CallError::Closed(_) => 2,
        _ => 1,
    }
}
