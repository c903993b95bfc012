//! What a connection cost to set up, for people and for `--json`: how the protocol was
//! settled, the frames of its negotiation (from the store's transcript), round trips,
//! LLM calls and tokens, and the setup time.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use concord_node::{ConnectionInfo, Settlement};
use concord_proto::ProtocolHash;
use concord_store::{Direction, FrameContent, FrameKind, Store, Transcript, TranscriptId};
use serde_json::{json, Value};

/// One frame of a negotiation, as shown.
#[derive(Debug, Clone)]
pub struct FrameLine {
    /// Milliseconds since the transcript's first frame.
    pub at_ms: u64,
    /// Which way it went, from the requester's point of view.
    pub direction: Direction,
    /// The hello, or the frame's protocol type.
    pub kind: FrameKind,
    /// The hello's `type` or the meta message's `action`.
    pub name: Option<String>,
    /// The meta message's `sequenceId`.
    pub sequence_id: Option<u64>,
    /// The meta message's `status`.
    pub status: Option<String>,
    /// The length of a frame whose text is not kept (verification, application).
    pub len: Option<u64>,
    /// What a hello settles: the 0-RTT hash offered or accepted, the consensus protocols
    /// offered or the one selected.
    pub detail: Option<String>,
}

impl FrameLine {
    fn of(record: &concord_store::FrameRecord, start: SystemTime) -> Self {
        let at_ms = record.at.duration_since(start).map_or(0, |elapsed| {
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
        });
        let mut line = Self {
            at_ms,
            direction: record.direction,
            kind: record.kind,
            name: None,
            sequence_id: None,
            status: None,
            len: None,
            detail: None,
        };
        match &record.content {
            FrameContent::Text(text) => {
                if let Ok(message) = serde_json::from_str::<Value>(text) {
                    line.name = message["action"]
                        .as_str()
                        .or_else(|| message["type"].as_str())
                        .map(str::to_owned);
                    line.sequence_id = message["sequenceId"].as_u64();
                    line.status = message["status"].as_str().map(str::to_owned);
                    if record.kind == FrameKind::Hello {
                        line.detail = hello_detail(&message["metaProtocol"]);
                    }
                }
                if line.name.is_none() {
                    line.len = u64::try_from(text.len()).ok();
                }
            }
            FrameContent::Binary { len } => line.len = Some(*len),
        }
        line
    }

    /// The protocol type number (`PT`) of the frame; `None` for the hello.
    pub fn protocol_type(&self) -> Option<u8> {
        match self.kind {
            FrameKind::Hello => None,
            FrameKind::Meta => Some(0),
            FrameKind::Application => Some(1),
            FrameKind::NaturalLanguage => Some(2),
            FrameKind::Verification => Some(3),
        }
    }

    /// One line for people: `+12ms  →  PT0 meta  protocolNegotiation  seq 0  negotiating`.
    pub fn render(&self) -> String {
        let arrow = match self.direction {
            Direction::Sent => "→",
            Direction::Received => "←",
        };
        let kind = match self.protocol_type() {
            Some(number) => format!("PT{number} {}", self.kind.name()),
            None => "hello".to_owned(),
        };
        let mut line = format!("{:>+6}ms  {arrow}  {kind:<16}", self.at_ms);
        if let Some(name) = &self.name {
            line.push_str(&format!("  {name:<22}"));
        }
        if let Some(sequence) = self.sequence_id {
            line.push_str(&format!("  seq {sequence}"));
        }
        if let Some(status) = &self.status {
            line.push_str(&format!("  {status}"));
        }
        if let Some(len) = self.len {
            line.push_str(&format!("  ({len} bytes)"));
        }
        if let Some(detail) = &self.detail {
            line.push_str(&format!("  {detail}"));
        }
        line.trim_end().to_owned()
    }

    fn to_json(&self) -> Value {
        let name_key = match self.kind {
            FrameKind::Hello => "type",
            _ => "action",
        };
        json!({
            "atMs": self.at_ms,
            "direction": self.direction.name(),
            "pt": self.protocol_type(),
            "kind": self.kind.name(),
            name_key: self.name,
            "sequenceId": self.sequence_id,
            "status": self.status,
            "bytes": self.len,
            "detail": self.detail,
        })
    }
}

/// What a hello's `metaProtocol` offers or settles, in a few words.
fn hello_detail(meta: &Value) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(hash) = meta["usedProtocolHash"].as_str() {
        parts.push(format!("usedProtocolHash {}", short(hash)));
    }
    if let Some(uris) = meta["candidateProtocols"].as_array() {
        let uris: Vec<&str> = uris.iter().filter_map(Value::as_str).collect();
        parts.push(format!("candidateProtocols [{}]", uris.join(", ")));
    }
    if let Some(uri) = meta["selectedProtocol"].as_str() {
        parts.push(format!("selectedProtocol {uri}"));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// A connection's setup, from its info and its transcript.
#[derive(Debug, Clone)]
pub struct SessionReport {
    /// How the protocol was settled.
    pub settlement: Settlement,
    /// The protocol's hash.
    pub hash: ProtocolHash,
    /// The hash offered for 0-RTT, if any.
    pub offered_hash: Option<ProtocolHash>,
    /// The transcript's frames (hellos, meta, natural-language and verification).
    pub frames: Vec<FrameLine>,
    /// Agreed test cases the peer's code passed.
    pub verified_cases: usize,
    /// LLM calls our side made (negotiation and code).
    pub llm_calls: u64,
    /// Prompt tokens our side sent.
    pub tokens_in: u64,
    /// Completion tokens our side received.
    pub tokens_out: u64,
    /// Where each version of our code came from (`template`, `LLM (attempt n)`).
    pub code_origins: Vec<String>,
    /// From `connect` to ready.
    pub setup: Duration,
    /// The transcript's id in our store.
    pub transcript: Option<i64>,
    /// When the first frame (our sourceHello) was sent.
    pub first_frame_at: Option<SystemTime>,
    /// How the session was protected, as its transcript records it (`Noise_XX_…; peer
    /// proved did:…; we signed as did:…`, or `plain; …`).
    pub channel: Option<String>,
}

impl SessionReport {
    /// The report for a connection whose session has ended (so its transcript is complete),
    /// read from `store`.
    pub async fn of(info: &ConnectionInfo, store: &Arc<Store>) -> Self {
        let transcript = match info.transcript {
            Some(id) => read_transcript(store, id).await,
            None => None,
        };
        let first_frame_at = transcript
            .as_ref()
            .and_then(|transcript| transcript.frames.first())
            .map(|frame| frame.at);
        let frames = transcript
            .as_ref()
            .map(|transcript| {
                let start = transcript
                    .frames
                    .first()
                    .map_or(transcript.summary.started, |frame| frame.at);
                transcript
                    .frames
                    .iter()
                    .map(|frame| FrameLine::of(frame, start))
                    .collect()
            })
            .unwrap_or_default();
        let channel = transcript
            .as_ref()
            .and_then(|transcript| transcript.summary.channel.clone());
        let (negotiation_in, negotiation_out) = info.accounting.tokens();
        Self {
            settlement: info.settlement.clone(),
            hash: info.hash,
            offered_hash: info.offered_hash,
            frames,
            verified_cases: info.verified_cases,
            llm_calls: u64::from(info.accounting.llm_calls())
                + info.code.iter().map(|code| code.llm_calls).sum::<u64>(),
            tokens_in: negotiation_in + info.code.iter().map(|code| code.tokens_in).sum::<u64>(),
            tokens_out: negotiation_out + info.code.iter().map(|code| code.tokens_out).sum::<u64>(),
            code_origins: info.code.iter().map(|code| code.origin.clone()).collect(),
            setup: info.setup_time,
            transcript: info.transcript.map(TranscriptId::get),
            first_frame_at,
            channel,
        }
    }

    /// Frames after the hellos: meta, natural-language and verification messages.
    pub fn negotiation_messages(&self) -> usize {
        self.frames
            .iter()
            .filter(|frame| frame.kind != FrameKind::Hello)
            .count()
    }

    /// Times we waited for the peer over the WebSocket, counted by phase so that the same
    /// flow always counts the same, whichever side's frame happened to arrive first: the
    /// hello exchange (1), each negotiation message we received in answer (protocol, test
    /// cases, fix-error), the code-generation exchange (1, or one per `generated` we
    /// received after a fix) and the verification run (1 when we sent any test case).
    pub fn websocket_round_trips(&self) -> usize {
        let received = |name: &str| {
            self.frames
                .iter()
                .filter(|frame| {
                    frame.direction == Direction::Received && frame.name.as_deref() == Some(name)
                })
                .count()
        };
        let hello = usize::from(
            self.frames
                .iter()
                .any(|frame| frame.kind == FrameKind::Hello),
        );
        let verification = usize::from(self.frames.iter().any(|frame| {
            frame.kind == FrameKind::Verification && frame.direction == Direction::Sent
        }));
        hello
            + received("protocolNegotiation")
            + received("testCasesNegotiation")
            + received("fixErrorNegotiation")
            + received("codeGeneration")
            + verification
    }

    /// Round trips after the hello exchange (0 for 0-RTT and consensus).
    pub fn negotiation_round_trips(&self) -> usize {
        self.websocket_round_trips().saturating_sub(1)
    }

    /// Round trips before the first call: the description (1), the WebSocket upgrade (1),
    /// the hello (1) and the negotiation's.
    pub fn round_trips(&self) -> usize {
        2 + self.websocket_round_trips()
    }

    /// `negotiated`, `resumed` (0-RTT) or `consensus`.
    pub fn settled_by(&self) -> &'static str {
        match self.settlement {
            Settlement::Negotiated => "negotiated",
            Settlement::Resumed => "resumed",
            Settlement::Consensus { .. } => "consensus",
            _ => "other",
        }
    }

    /// How it was settled, for people.
    pub fn settled_text(&self) -> String {
        match &self.settlement {
            Settlement::Resumed => "0-RTT: resumed the stored protocol".to_owned(),
            Settlement::Consensus { uri } => format!("consensus protocol {uri}"),
            _ => self.settled_by().to_owned(),
        }
    }

    /// The report as JSON (camelCase keys).
    pub fn to_json(&self) -> Value {
        json!({
            "settledBy": self.settled_by(),
            "consensusUri": match &self.settlement {
                Settlement::Consensus { uri } => Some(uri),
                _ => None,
            },
            "hash": self.hash.to_string(),
            "offeredHash": self.offered_hash.map(|hash| hash.to_string()),
            "negotiationMessages": self.negotiation_messages(),
            "roundTrips": {
                "total": self.round_trips(),
                "negotiation": self.negotiation_round_trips(),
            },
            "verifiedCases": self.verified_cases,
            "llm": {
                "calls": self.llm_calls,
                "tokensIn": self.tokens_in,
                "tokensOut": self.tokens_out,
            },
            "code": self.code_origins,
            "setupMs": millis(self.setup),
            "transcriptId": self.transcript,
            "channel": self.channel,
            "frames": self.frames.iter().map(FrameLine::to_json).collect::<Vec<_>>(),
        })
    }
}

/// The first 12 hex digits of a hash, for people: `40340f2e33af…`.
pub fn short(hash: &str) -> String {
    format!("{}…", hash.get(..12).unwrap_or(hash))
}

/// Milliseconds, with microsecond precision.
pub fn millis(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1e6).round() / 1e3
}

/// The transcript `id` as `store` holds it.
async fn read_transcript(store: &Arc<Store>, id: TranscriptId) -> Option<Transcript> {
    let store = Arc::clone(store);
    tokio::task::spawn_blocking(move || store.transcript(id))
        .await
        .ok()?
        .ok()?
}
