//! Two sessions wired back to back with a simulated clock, recording every frame.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use concord_proto::handshake::{Agreement, ProtocolChoice};
use concord_proto::{
    Capabilities, Decision, Event, Frame, MetaMessage, ProtocolType, Role, Session, SessionConfig,
    DEFAULT_MAX_FRAME_SIZE, META_PROTOCOL_VERSION,
};

/// Who sent a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    Requester,
    Provider,
}

/// A requester and a provider, a clock, and the frames that crossed between them.
pub struct Pair {
    pub requester: Session,
    pub provider: Session,
    pub now: Instant,
    /// Every frame delivered so far, in order.
    pub wire: Vec<(From, Vec<u8>)>,
}

pub fn agreement(capabilities: Capabilities, protocol: ProtocolChoice) -> Agreement {
    Agreement {
        version: META_PROTOCOL_VERSION,
        capabilities,
        protocol,
    }
}

impl Pair {
    /// A pair about to negotiate, with every capability and default settings.
    pub fn new() -> Self {
        Self::with(
            agreement(Capabilities::all(), ProtocolChoice::Negotiate),
            SessionConfig::default(),
            SessionConfig::default(),
        )
    }

    pub fn with(agreement: Agreement, requester: SessionConfig, provider: SessionConfig) -> Self {
        let now = Instant::now();
        Self {
            requester: Session::new(Role::Requester, &agreement, requester, now),
            provider: Session::new(Role::Provider, &agreement, provider, now),
            now,
            wire: Vec::new(),
        }
    }

    /// Delivers queued frames both ways until neither side has anything to send.
    pub fn flush(&mut self) {
        loop {
            let mut moved = false;
            while let Some(frame) = self.requester.poll_transmit() {
                self.provider.handle_frame(self.now, frame.clone());
                self.wire.push((From::Requester, frame));
                moved = true;
            }
            while let Some(frame) = self.provider.poll_transmit() {
                self.requester.handle_frame(self.now, frame.clone());
                self.wire.push((From::Provider, frame));
                moved = true;
            }
            if !moved {
                return;
            }
        }
    }

    /// The requester proposes [`PRODUCT_INFO`] and the provider accepts it; every frame
    /// is delivered (events and wire are left for the caller).
    pub fn agree(&mut self) {
        self.requester
            .propose(self.now, PRODUCT_INFO.into())
            .unwrap();
        self.flush();
        self.provider.decide(self.now, Decision::Accept).unwrap();
        self.flush();
    }

    /// Moves the clock forward and fires both sides' deadlines.
    pub fn advance(&mut self, by: Duration) {
        self.now += by;
        self.requester.handle_timeout(self.now);
        self.provider.handle_timeout(self.now);
    }

    pub fn requester_events(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.requester.poll_event()).collect()
    }

    pub fn provider_events(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.provider.poll_event()).collect()
    }

    /// The frames delivered since the last call, as (sender, JSON value) for meta frames
    /// and (sender, "PT n: <data>") strings otherwise.
    pub fn take_wire(&mut self) -> Vec<(From, serde_json::Value)> {
        std::mem::take(&mut self.wire)
            .into_iter()
            .map(|(from, bytes)| (from, describe(&bytes)))
            .collect()
    }
}

/// A frame as JSON: meta frames as their message, data frames as `{"pt": …, "data": …}`.
pub fn describe(bytes: &[u8]) -> serde_json::Value {
    let frame = Frame::decode(bytes, DEFAULT_MAX_FRAME_SIZE).expect("we only send valid frames");
    match frame.protocol_type {
        ProtocolType::Meta => {
            // Round-trip through the checked decoder: everything we send must pass it.
            MetaMessage::decode(frame.data).expect("we only send valid meta messages");
            serde_json::from_slice(frame.data).expect("meta frames are JSON")
        }
        other => serde_json::json!({
            "pt": other.name(),
            "data": String::from_utf8_lossy(frame.data),
        }),
    }
}

pub const PRODUCT_INFO: &str = "# Requirement\nGet product information by id\n";

/// A PT 0 frame carrying `json`, byte for byte as given.
pub fn meta_frame(json: &str) -> Vec<u8> {
    let mut frame = vec![0u8];
    frame.extend_from_slice(json.as_bytes());
    frame
}
