//! The demo told for people, step by step as it happens, then a summary.

use std::io;
use std::time::Duration;

use concord_llm::LlmConfig;
use concord_node::Server;

use super::summary::{phases, Discovery, Summary};
use super::{Batch, Connected, CONSENSUS_URI};
use crate::output::outln;
use crate::protocols::list_or_none;
use crate::session_report::short;

/// Prints the narrative on standard output, or nothing (for `--json`).
#[derive(Debug, Clone, Copy)]
pub struct Narrator {
    enabled: bool,
}

impl Narrator {
    /// A narrator that prints when `enabled`.
    pub fn new(enabled: bool) -> Self {
        Self { enabled }
    }

    /// Prints one step (a line or more), when enabled.
    pub fn say(&self, text: impl std::fmt::Display) -> io::Result<()> {
        if self.enabled {
            outln!("{text}")?;
        }
        Ok(())
    }

    /// The two agents.
    pub fn start(
        &self,
        server: &Server,
        requester_did: Option<&str>,
        llm: Option<&LlmConfig>,
    ) -> io::Result<()> {
        let mode = match llm {
            Some(llm) => format!(
                "the LLM {} at {} when the rules cannot settle a step",
                llm.model, llm.base_url
            ),
            None => "deterministic negotiation and code (no LLM, no API key)".to_owned(),
        };
        self.say(format!(
            "Concord demo: two agents on loopback, {mode}.\n\
             Provider \"Product agent\" serves getProductInfo at {}; requester \"Shopper\" has an empty store.\n",
            server.url()
        ))?;
        match (server.did(), requester_did) {
            (Some(provider), Some(requester)) => self.say(format!(
                "Identities: provider {provider}\n            requester {requester}\n\
                 Every upgrade is signed (ANP DID-WBA, RFC 9421) and checked against the signer's \
                 DID document; every session is end-to-end encrypted (Noise XX, each side's DID \
                 key); getProductInfo admits authenticated callers only.\n"
            ))?,
            _ => self.say("Identities: none (--plain): anonymous, unencrypted sessions.\n")?,
        }
        Ok(())
    }

    /// Step 1.
    pub fn discovery(&self, discovery: &Discovery) -> io::Result<()> {
        self.say(format!(
            "1. Discovery: GET {} ({} bytes, {})\n   \
             agent {:?}, actions: {}; endpoint {}\n   \
             capabilities: {}\n",
            discovery.url,
            discovery.bytes,
            human(discovery.elapsed),
            discovery.title,
            discovery.actions.join(", "),
            discovery.endpoint,
            discovery.capabilities.join(", "),
        ))?;
        Ok(())
    }

    /// Step 2: the full negotiation's transcript.
    pub fn negotiated(&self, connected: &Connected) -> io::Result<()> {
        let report = &connected.report;
        self.say(
            "2. Negotiation, code generation and test cases (the requester's transcript; \
             → sent, ← received):",
        )?;
        self.frames(connected)?;
        self.say(format!(
            "   agreed protocol {} in {} negotiation messages over {} round trips; \
             our code: {}; the peer's code passed {} agreed test case(s); \
             {} LLM call(s); ready after {}\n",
            short(&report.hash.to_string()),
            report.negotiation_messages(),
            report.negotiation_round_trips(),
            list_or_none(&report.code_origins),
            report.verified_cases,
            report.llm_calls,
            human(report.setup),
        ))?;
        Ok(())
    }

    /// Step 3: the calls.
    pub fn batch(&self, batch: &Batch) -> io::Result<()> {
        let latencies = &batch.latencies;
        self.say(format!(
            "3. {} calls over the negotiated protocol ({} in flight, no LLM): {} ok, {} failed in {}\n   \
             {:.0} calls/s; latency p50 {}, p90 {}, p99 {}, max {}",
            latencies.count() + batch.failed,
            batch.concurrency,
            latencies.count(),
            batch.failed,
            human(batch.wall),
            batch.calls_per_second(),
            human(latencies.percentile(50.0)),
            human(latencies.percentile(90.0)),
            human(latencies.percentile(99.0)),
            human(latencies.max()),
        ))?;
        for failure in &batch.failures {
            self.say(format!("   failed: {failure}"))?;
        }
        self.say("")?;
        Ok(())
    }

    /// Step 4: the 0-RTT reconnect.
    pub fn resumed(&self, connected: &Connected) -> io::Result<()> {
        self.say("4. Reconnect with 0-RTT: the requester offers the stored protocol's hash in its hello:")?;
        self.frames(connected)?;
        self.settled_with_no_negotiation(connected)
    }

    /// Step 5: the consensus connection.
    pub fn consensus(&self, connected: &Connected) -> io::Result<()> {
        self.say(format!(
            "5. Consensus protocol: protocol {} registered as {CONSENSUS_URI} on the provider \
             and on a new requester (whose store holds nothing else); the provider's \
             description now advertises it, and the new requester offers it in its hello:",
            short(&connected.report.hash.to_string())
        ))?;
        self.frames(connected)?;
        self.settled_with_no_negotiation(connected)
    }

    /// How a connection with no negotiation was settled, and its first call.
    fn settled_with_no_negotiation(&self, connected: &Connected) -> io::Result<()> {
        self.say(format!(
            "   {}: {} negotiation messages, {} LLM calls; first call answered after {}\n",
            connected.report.settled_text(),
            connected.report.negotiation_messages(),
            connected.report.llm_calls,
            human(connected.time_to_first_call),
        ))
    }

    fn frames(&self, connected: &Connected) -> io::Result<()> {
        if let Some(channel) = &connected.report.channel {
            self.say(format!("   session: {channel}"))?;
        }
        for frame in &connected.report.frames {
            self.say(format!("   {}", frame.render()))?;
        }
        Ok(())
    }

    /// The summary tables.
    pub fn summary(&self, summary: &Summary) -> io::Result<()> {
        self.say("Summary")?;
        self.say(
            "  phases of the full negotiation (the requester's transcript, to the millisecond):",
        )?;
        for phase in phases(&summary.negotiated) {
            let ms = phase.duration.as_secs_f64() * 1e3;
            self.say(format!("    {:<34} {ms:>6.0} ms", phase.name))?;
        }
        self.say(format!(
            "\n  {:<18} {:<11} {:>9} {:>12} {:>10} {:>8} {:>19}",
            "connection",
            "settled by",
            "messages",
            "round trips",
            "LLM calls",
            "tokens",
            "time to first call"
        ))?;
        for (name, connected) in [
            ("full negotiation", &summary.negotiated),
            ("0-RTT reconnect", &summary.resumed),
            ("consensus", &summary.consensus),
        ] {
            let report = &connected.report;
            self.say(format!(
                "  {name:<18} {:<11} {:>9} {:>12} {:>10} {:>8} {:>19}",
                report.settled_by(),
                report.negotiation_messages(),
                report.round_trips(),
                report.llm_calls,
                report.tokens_in + report.tokens_out,
                human(connected.time_to_first_call),
            ))?;
        }
        self.say(
            "  (round trips before the first call: description, WebSocket upgrade, hello, and the negotiation's)",
        )?;
        let latencies = &summary.batch.latencies;
        self.say(format!(
            "\n  {} calls: {:.0} calls/s, latency p50 {}, p90 {}, p99 {} ({} in flight)",
            latencies.count() + summary.batch.failed,
            summary.batch.calls_per_second(),
            human(latencies.percentile(50.0)),
            human(latencies.percentile(90.0)),
            human(latencies.percentile(99.0)),
            summary.batch.concurrency,
        ))?;
        let (calls, tokens_in, tokens_out) = summary.llm_totals();
        if summary.llm_configured {
            self.say(format!(
                "  LLM, both agents: {calls} call(s), {tokens_in} tokens in, {tokens_out} out"
            ))?;
        } else {
            self.say("  LLM: none configured; every step was deterministic")?;
        }
        let build = if cfg!(debug_assertions) {
            "debug build; a release build is several times faster"
        } else {
            "release build"
        };
        self.say(format!("  total {} ({build})", human(summary.total)))?;
        Ok(())
    }
}

/// A duration for people: `0.42 ms`, `12.3 ms`, `123 ms`, `1.23 s`.
pub fn human(duration: Duration) -> String {
    let ms = duration.as_secs_f64() * 1e3;
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else if ms < 100.0 {
        format!("{ms:.1} ms")
    } else if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{:.2} s", ms / 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human(Duration::from_micros(420)), "0.42 ms");
        assert_eq!(human(Duration::from_micros(12_340)), "12.3 ms");
        assert_eq!(human(Duration::from_millis(123)), "123 ms");
        assert_eq!(human(Duration::from_millis(1234)), "1.23 s");
        assert_eq!(short("40340f2e33af383066"), "40340f2e33af…");
    }
}
