//! `concord demo`: two agents on loopback in one process, the whole flow: discovery →
//! negotiation → code generation → test cases → many calls → a 0-RTT reconnect → a
//! consensus-protocol connection; then the seed's WeatherAgent with every LMOS interaction
//! pattern over one negotiated interface session ([`patterns`]); a transcript of the frames
//! and a summary with timings.
//! Temporary stores, no network beyond loopback, no API key (an LLM only with `--llm`).
//! Each agent has a DID of its own (`did:wba:localhost…`): every upgrade is signed and
//! checked, every session is end-to-end encrypted (Noise), and the provider's action is for
//! authenticated callers only (`--plain` runs the same flow without identities).

mod catalogue;
mod latency;
mod llm_part;
mod narrate;
mod patterns;
mod summary;

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use clap::Args;
use concord_llm::LlmConfig;
use concord_node::{Allow, Connection, Keys, Node, NodeBuilder, Security, Server, Settlement};
use concord_proto::{ProtocolHash, Role};
use concord_store::{NewConsensus, Store};
use serde_json::Value;
use tempfile::TempDir;

use crate::llm;
use crate::output;
use crate::runtime;
use crate::session_report::SessionReport;
use latency::Latencies;
use summary::Summary;

/// The URI the negotiated protocol is registered under for the consensus connection.
pub const CONSENSUS_URI: &str = "https://protocols.example/concord-demo/product-info/1.0";

/// `concord demo`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  concord demo
  concord demo --json
  CONCORD_LLM_BASE_URL=http://127.0.0.1:11434/v1 CONCORD_LLM_MODEL=llama3.1 concord demo --llm

Everything runs in this process on 127.0.0.1 with temporary stores that are removed at
the end. Without --llm the negotiation and the code are deterministic and no API key is
needed. Each agent gets a fresh DID (did:wba on localhost, its document served by the agent
itself): upgrades are signed (ANP DID-WBA, RFC 9421), sessions end-to-end encrypted (Noise
XX), and the action admits authenticated callers only; --plain runs without identities.
The last section serves the seed's WeatherAgent and shows the five LMOS interaction patterns
over ONE negotiated interface session: request-reply, a long-running action's progress,
fire-and-forget feeding a subscription (publish-subscribe), property read and observe, and
a voice stream (50 frames, credit flow, round-trip percentiles); then a 0-RTT reconnect
that resumes the subscription.
With --llm a last section goes where the rules stop: a foreign candidate they cannot map
(the product named `sku`), handler code written by the model and checked on the agreed
cases in the sandbox (wrong code refused and fed back), that candidate negotiated with the
model on both sides, and a natural-language question through `ask`; each step with its LLM
calls, tokens, time and outcome. The model being wrong is an outcome, not a failure.
Exits 1 when a call fails or a reconnect does not skip the negotiation, 2 when a step cannot
run.")]
pub struct DemoArgs {
    /// Give both agents the LLM configured by CONCORD_LLM_BASE_URL, CONCORD_LLM_API_KEY,
    /// CONCORD_LLM_MODEL (or OPENAI_*): it settles what the rules cannot and writes code
    /// no template fits. Default: deterministic, no LLM.
    #[arg(long)]
    llm: bool,
    /// Print a machine-readable summary (JSON) instead of the narrative.
    #[arg(long)]
    json: bool,
    /// Run without identities: anonymous, plain sessions (as a node without keys serves).
    #[arg(long)]
    plain: bool,
    /// Calls to make over the negotiated protocol.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    calls: u32,
    /// Calls in flight at once over the one connection.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    concurrency: u32,
}

/// Runs `concord demo`.
pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let llm = if args.llm {
        Some(llm::from_env()?)
    } else {
        None
    };
    runtime::block_on(demo(args, llm))?
}

/// An agent with its store in a temporary directory (removed when it is dropped).
struct Agent {
    node: Node,
    _dir: TempDir,
}

/// Whether the agents have identities, and the LLM they share.
struct Setup<'a> {
    llm: Option<&'a LlmConfig>,
    identities: bool,
}

impl Setup<'_> {
    fn agent(&self, builder: NodeBuilder) -> anyhow::Result<Agent> {
        let dir = tempfile::Builder::new()
            .prefix("concord-demo-")
            .tempdir()
            .context("cannot create a temporary data directory")?;
        let mut builder = builder.data_dir(dir.path());
        if let Some(llm) = self.llm {
            builder = builder.llm(llm.clone());
        }
        if self.identities {
            // On loopback the DID documents are served over http:// (the resolver's test
            // mode); anywhere else they are fetched over HTTPS only.
            let mut security = Security::default();
            security.resolver.allow_loopback_http = true;
            builder = builder.keys(Keys::generate()).security(security);
        }
        Ok(Agent {
            node: builder.build()?,
            _dir: dir,
        })
    }

    /// A requester that serves nothing but its DID document (so that its DID resolves), as
    /// an agent's own node does; `None` without identities.
    async fn host_did(&self, agent: &Agent) -> anyhow::Result<Option<Server>> {
        if !self.identities {
            return Ok(None);
        }
        let server = agent
            .node
            .serve("127.0.0.1:0")
            .await
            .context("cannot serve a requester's DID document on 127.0.0.1")?;
        Ok(Some(server))
    }
}

/// A connection's setup and its first call.
#[derive(Debug)]
pub struct Connected {
    /// What the setup cost.
    pub report: SessionReport,
    /// When `connect` was called.
    pub started_at: SystemTime,
    /// From `connect` to the first call's output.
    pub time_to_first_call: Duration,
    /// The first call's output.
    pub first_output: Value,
}

/// The batch of calls over the negotiated protocol.
#[derive(Debug)]
pub struct Batch {
    /// Latencies of the calls that succeeded.
    pub latencies: Latencies,
    /// Why the others failed (at most a few kept).
    pub failures: Vec<String>,
    /// How many failed.
    pub failed: usize,
    /// Wall time of the batch.
    pub wall: Duration,
    /// Calls in flight at once.
    pub concurrency: u32,
}

impl Batch {
    /// The calls that succeeded per second of the batch's wall time.
    pub fn calls_per_second(&self) -> f64 {
        let seconds = self.wall.as_secs_f64();
        if seconds > 0.0 {
            self.latencies.count() as f64 / seconds
        } else {
            0.0
        }
    }
}

async fn demo(args: DemoArgs, llm: Option<LlmConfig>) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let narrate = narrate::Narrator::new(!args.json);
    let setup = Setup {
        llm: llm.as_ref(),
        identities: !args.plain,
    };
    let mut provider = Node::builder("Product agent")
        .description("Product information for a small shop (the seeds' product-info agent).")
        .action(catalogue::action(), catalogue::answer);
    if setup.identities {
        provider = provider.allow(catalogue::ACTION, Allow::Authenticated);
    }
    let provider = setup.agent(provider)?;
    let requester = setup.agent(Node::builder("Shopper"))?;
    let server = provider
        .node
        .serve("127.0.0.1:0")
        .await
        .context("cannot serve the provider on 127.0.0.1")?;
    let requester_server = setup.host_did(&requester).await?;
    narrate.start(&server, requester.node.did().as_deref(), llm.as_ref())?;

    let discovery = summary::discover(&server.description_url()).await?;
    narrate.discovery(&discovery)?;

    let connected = connect_and_call(&requester.node, server.url(), "full negotiation").await;
    let (connection, first) = connected?;
    let batch = call_many(&connection, args.calls, args.concurrency).await;
    connection.close().await;
    let negotiated = first.finish(&connection, &requester.node).await;
    narrate.negotiated(&negotiated)?;
    narrate.batch(&batch)?;

    let (connection, first) =
        connect_and_call(&requester.node, server.url(), "the 0-RTT reconnect").await?;
    connection.close().await;
    let resumed = first.finish(&connection, &requester.node).await;
    narrate.resumed(&resumed)?;

    let fresh = setup.agent(Node::builder("New shopper"))?;
    let fresh_server = setup.host_did(&fresh).await?;
    register_consensus(
        &provider.node,
        &requester.node,
        &fresh.node,
        negotiated.report.hash,
    )
    .await?;
    let (connection, first) =
        connect_and_call(&fresh.node, server.url(), "the consensus connection").await?;
    connection.close().await;
    let consensus = first.finish(&connection, &fresh.node).await;
    narrate.consensus(&consensus)?;

    let patterns = patterns::run(&setup, &requester.node, narrate).await?;
    let llm_part = llm_part::run(&setup, &provider.node, &server, narrate).await?;

    server.shutdown().await.context("stopping the provider")?;
    for hosting in [requester_server, fresh_server].into_iter().flatten() {
        hosting.shutdown().await.context("stopping a requester")?;
    }
    let summary = Summary {
        discovery,
        negotiated,
        batch,
        resumed,
        consensus,
        llm_configured: llm.is_some(),
        usage: [&requester.node, &fresh.node, &provider.node]
            .iter()
            .filter_map(|node| node.llm().map(|client| client.usage().summary()))
            .chain(llm_part.usage.iter().copied())
            .collect(),
        total: started.elapsed(),
    };
    if args.json {
        let mut json = summary.to_json();
        if let Value::Object(fields) = &mut json {
            fields.insert("patterns".to_owned(), patterns.to_json());
            fields.insert("llmPart".to_owned(), llm_part.to_json());
        }
        output::json(&json)?;
    } else {
        narrate.summary(&summary)?;
    }
    // Nothing the user gave can be wrong here: a step that did not happen as it should
    // means the demo could not run (exit 2), said on one line after the summary.
    let mut failed = Vec::new();
    if summary.batch.failed > 0 {
        failed.push(format!("{} call(s) failed", summary.batch.failed));
    }
    if summary.resumed.report.settlement != Settlement::Resumed {
        failed.push("the reconnect did not resume with 0-RTT".to_owned());
    }
    if !matches!(
        summary.consensus.report.settlement,
        Settlement::Consensus { .. }
    ) {
        failed.push("the new requester did not connect through the consensus protocol".to_owned());
    }
    failed.extend(patterns.problems);
    failed.extend(llm_part.problems);
    if !failed.is_empty() {
        anyhow::bail!("the demo did not complete: {}", failed.join("; "));
    }
    Ok(ExitCode::SUCCESS)
}

/// A connection whose setup is done and whose first call answered; its report is read
/// once it is closed.
struct FirstCall {
    started_at: SystemTime,
    time_to_first_call: Duration,
    first_output: Value,
}

impl FirstCall {
    async fn finish(self, connection: &Connection, node: &Node) -> Connected {
        Connected {
            report: SessionReport::of(connection.info(), node.store()).await,
            started_at: self.started_at,
            time_to_first_call: self.time_to_first_call,
            first_output: self.first_output,
        }
    }
}

/// Connects to the provider and makes the first call, timing both.
async fn connect_and_call(
    node: &Node,
    url: &str,
    what: &str,
) -> anyhow::Result<(Connection, FirstCall)> {
    let started_at = SystemTime::now();
    let started = Instant::now();
    let connection = node
        .connect(url, catalogue::ACTION)
        .await
        .with_context(|| format!("{what} failed"))?;
    let first_output = connection
        .call(catalogue::ACTION, catalogue::input(0))
        .await
        .with_context(|| format!("the first call of {what} failed"))?;
    let first = FirstCall {
        started_at,
        time_to_first_call: started.elapsed(),
        first_output,
    };
    Ok((connection, first))
}

/// Makes `calls` calls, `concurrency` at a time, checking each answer names the product
/// asked for.
async fn call_many(connection: &Connection, calls: u32, concurrency: u32) -> Batch {
    let calls = calls as usize;
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.min(calls as u32) {
        let connection = connection.clone();
        let next = Arc::clone(&next);
        workers.spawn(async move {
            let mut latencies = Vec::new();
            let mut failures = Vec::new();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= calls {
                    break;
                }
                let input = catalogue::input(n);
                let sent = Instant::now();
                match connection.call(catalogue::ACTION, input.clone()).await {
                    Ok(output) if output["productId"] == input["productId"] => {
                        latencies.push(sent.elapsed());
                    }
                    Ok(output) => failures.push(format!("asked for {input}, got {output}")),
                    Err(error) => failures.push(error.to_string()),
                }
            }
            (latencies, failures)
        });
    }
    let mut latencies = Vec::with_capacity(calls);
    let mut failures = Vec::new();
    while let Some(joined) = workers.join_next().await {
        match joined {
            Ok((mut ok, mut failed)) => {
                latencies.append(&mut ok);
                failures.append(&mut failed);
            }
            Err(error) => failures.push(format!("a calling task failed: {error}")),
        }
    }
    let wall = started.elapsed();
    let failed = calls - latencies.len();
    failures.truncate(5);
    Batch {
        latencies: Latencies::new(latencies),
        failures,
        failed,
        wall,
        concurrency,
    }
}

/// Registers the negotiated protocol as a consensus protocol: on the provider with its
/// provider code, and on a fresh requester with the requester code the first requester
/// generated and verified.
async fn register_consensus(
    provider: &Node,
    requester: &Node,
    fresh: &Node,
    hash: ProtocolHash,
) -> anyhow::Result<()> {
    let provider_store = Arc::clone(provider.store());
    let requester_store = Arc::clone(requester.store());
    let fresh_store = Arc::clone(fresh.store());
    tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        let (document, provider_code) = stored_code(&provider_store, &hash, Role::Provider)?;
        let (_, requester_code) = stored_code(&requester_store, &hash, Role::Requester)?;
        provider_store.add_consensus(
            &NewConsensus::new(CONSENSUS_URI, document.clone())
                .with_handler(Role::Provider, provider_code),
        )?;
        fresh_store.add_consensus(
            &NewConsensus::new(CONSENSUS_URI, document)
                .with_handler(Role::Requester, requester_code),
        )?;
        Ok(())
    })
    .await
    .context("the store task failed")?
    .context("cannot register the consensus protocol")
}

/// A stored protocol's document and one side's handler module.
fn stored_code(store: &Store, hash: &ProtocolHash, role: Role) -> anyhow::Result<(String, String)> {
    let protocol = store
        .protocol(hash)?
        .with_context(|| format!("the {} did not store protocol {hash}", role.name()))?;
    let code = protocol
        .handlers
        .get(role)
        .with_context(|| format!("the {} stored no handler for {hash}", role.name()))?
        .to_owned();
    Ok((protocol.document, code))
}
