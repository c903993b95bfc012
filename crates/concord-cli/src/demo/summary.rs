//! What the demo measured: the discovery, the three connections, the batch of calls, the
//! phases of the full negotiation, LLM use; as JSON for `--json`.

use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use concord_llm::UsageSummary;
use concord_negotiate::published_actions;
use concord_store::FrameKind;
use serde_json::{json, Value};

use super::{Batch, Connected};
use crate::session_report::{millis, FrameLine};

/// What the requester learns from the provider's description.
#[derive(Debug, Clone)]
pub struct Discovery {
    /// The description's URL.
    pub url: String,
    /// The agent's title.
    pub title: String,
    /// The actions it publishes.
    pub actions: Vec<String>,
    /// Its meta-protocol endpoint.
    pub endpoint: String,
    /// The optional capabilities it advertises.
    pub capabilities: Vec<String>,
    /// The consensus protocols it advertises.
    pub consensus_protocols: usize,
    /// The description's size.
    pub bytes: usize,
    /// How long fetching and validating it took.
    pub elapsed: Duration,
}

/// Fetches and validates the description at `url`.
pub async fn discover(url: &str) -> anyhow::Result<Discovery> {
    let client = reqwest::Client::new();
    let started = Instant::now();
    let bytes = client
        .get(url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .with_context(|| format!("cannot fetch the description at {url}"))?
        .bytes()
        .await
        .with_context(|| format!("cannot read the description at {url}"))?;
    let thing = concord_describe::parse(&bytes)
        .map_err(|invalid| anyhow!("the description at {url} is invalid: {invalid}"))?
        .thing;
    let meta = thing
        .meta_protocol
        .as_ref()
        .with_context(|| format!("the description at {url} has no meta-protocol endpoint"))?;
    Ok(Discovery {
        url: url.to_owned(),
        title: thing.title.clone(),
        actions: published_actions(&thing)
            .into_iter()
            .map(|action| action.name)
            .collect(),
        endpoint: meta.endpoint.clone(),
        capabilities: meta.capability_names.clone().unwrap_or_default(),
        consensus_protocols: meta.consensus_protocols.as_ref().map_or(0, Vec::len),
        bytes: bytes.len(),
        elapsed: started.elapsed(),
    })
}

/// One step of the full negotiation, from the requester's transcript and clock.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    /// What happened.
    pub name: &'static str,
    /// How long it took.
    pub duration: Duration,
}

/// The phases of a connection up to its first call: each ends at a milestone (the last
/// frame of its kind in the transcript, or our own clock), and lasts from the previous one.
pub fn phases(connected: &Connected) -> Vec<Phase> {
    let report = &connected.report;
    let first = report
        .first_frame_at
        .and_then(|at| at.duration_since(connected.started_at).ok())
        .unwrap_or_default();
    let offset = |frame: &FrameLine| first + Duration::from_millis(frame.at_ms);
    let last = |matches: &dyn Fn(&FrameLine) -> bool| {
        report
            .frames
            .iter()
            .filter(|f| matches(f))
            .map(offset)
            .max()
    };
    let first_frame = report.frames.first().map(offset);
    let milestones: [(&'static str, Option<Duration>); 8] = [
        ("discovery and WebSocket", first_frame),
        (
            "hello",
            last(&|f| f.name.as_deref() == Some("destinationHello")),
        ),
        (
            "protocol negotiation",
            last(&|f| f.name.as_deref() == Some("protocolNegotiation")),
        ),
        (
            "test cases negotiation",
            last(&|f| f.name.as_deref() == Some("testCasesNegotiation")),
        ),
        (
            "code generation",
            last(&|f| f.name.as_deref() == Some("codeGeneration")),
        ),
        (
            "verification on the peer's code",
            last(&|f| f.kind == FrameKind::Verification),
        ),
        ("ready", Some(report.setup)),
        ("first call", Some(connected.time_to_first_call)),
    ];
    let mut phases = Vec::new();
    let mut previous = Duration::ZERO;
    for (name, end) in milestones {
        let Some(end) = end else { continue };
        let end = end.max(previous);
        phases.push(Phase {
            name,
            duration: end - previous,
        });
        previous = end;
    }
    phases
}

/// Everything the demo measured.
#[derive(Debug)]
pub struct Summary {
    /// The requester's look at the provider's description.
    pub discovery: Discovery,
    /// The first connection: full negotiation.
    pub negotiated: Connected,
    /// The calls over it.
    pub batch: Batch,
    /// The 0-RTT reconnect.
    pub resumed: Connected,
    /// The fresh requester's consensus connection.
    pub consensus: Connected,
    /// Whether the agents had an LLM.
    pub llm_configured: bool,
    /// Each agent's LLM use (agents with an LLM only).
    pub usage: Vec<UsageSummary>,
    /// The whole demo.
    pub total: Duration,
}

impl Summary {
    /// LLM use over all agents: (calls, prompt tokens, completion tokens).
    pub fn llm_totals(&self) -> (u64, u64, u64) {
        self.usage.iter().fold((0, 0, 0), |(c, i, o), usage| {
            (
                c + usage.calls,
                i + usage.prompt_tokens,
                o + usage.completion_tokens,
            )
        })
    }

    /// The summary as JSON.
    pub fn to_json(&self) -> Value {
        let connection = |connected: &Connected| {
            let mut value = connected.report.to_json();
            value["timeToFirstCallMs"] = json!(millis(connected.time_to_first_call));
            value["firstOutput"] = connected.first_output.clone();
            value
        };
        let latencies = &self.batch.latencies;
        let (calls, tokens_in, tokens_out) = self.llm_totals();
        json!({
            "build": if cfg!(debug_assertions) { "debug" } else { "release" },
            "totalMs": millis(self.total),
            "llm": {
                "configured": self.llm_configured,
                "calls": calls,
                "tokensIn": tokens_in,
                "tokensOut": tokens_out,
            },
            "discovery": {
                "url": self.discovery.url,
                "title": self.discovery.title,
                "actions": self.discovery.actions,
                "endpoint": self.discovery.endpoint,
                "capabilities": self.discovery.capabilities,
                "consensusProtocols": self.discovery.consensus_protocols,
                "bytes": self.discovery.bytes,
                "ms": millis(self.discovery.elapsed),
            },
            "phases": phases(&self.negotiated)
                .iter()
                .map(|phase| json!({"name": phase.name, "ms": millis(phase.duration)}))
                .collect::<Vec<_>>(),
            "connections": {
                "negotiated": connection(&self.negotiated),
                "resumed": connection(&self.resumed),
                "consensus": connection(&self.consensus),
            },
            "timeToFirstCallMs": {
                "negotiated": millis(self.negotiated.time_to_first_call),
                "resumed": millis(self.resumed.time_to_first_call),
                "consensus": millis(self.consensus.time_to_first_call),
            },
            "calls": {
                "count": latencies.count() + self.batch.failed,
                "ok": latencies.count(),
                "failed": self.batch.failed,
                "failures": self.batch.failures,
                "concurrency": self.batch.concurrency,
                "seconds": self.batch.wall.as_secs_f64(),
                "perSecond": self.batch.calls_per_second().round(),
                "latencyMs": {
                    "p50": millis(latencies.percentile(50.0)),
                    "p90": millis(latencies.percentile(90.0)),
                    "p99": millis(latencies.percentile(99.0)),
                    "max": millis(latencies.max()),
                    "mean": millis(latencies.mean()),
                },
            },
        })
    }
}
