//! Where a legitimate attempt's time goes, step by step: the description fetched, the
//! WebSocket upgraded and the hello answered (the provider answers it once the session
//! holds a slot), the protocol settled (negotiated, or resumed by 0-RTT), the call
//! answered. The caller's node says when the provider's hello came (its `0-RTT: resuming`
//! or `negotiating a protocol` event): a tracing layer in this process notes the instant
//! for the attempt whose span the event is in. Only the bench is instrumented, not the
//! node.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// The span one legitimate attempt runs in; its field `n` numbers it.
pub const ATTEMPT_SPAN: &str = "attempt";

/// The messages the caller's node logs once the provider's hello is read.
const HELLO_ANSWERED: [&str; 4] = [
    "0-RTT: resuming",
    "negotiating a protocol",
    "0-RTT miss: the peer does not hold our protocol; negotiating",
    "consensus protocol selected",
];

/// The steps of one attempt, in order.
pub const STEPS: [&str; 4] = [
    "description",
    "upgrade + hello answered",
    "protocol settled",
    "call answered",
];

/// When each attempt (by its number) had the provider's hello.
fn hellos() -> &'static Mutex<HashMap<u64, Instant>> {
    static HELLOS: OnceLock<Mutex<HashMap<u64, Instant>>> = OnceLock::new();
    HELLOS.get_or_init(Mutex::default)
}

/// Takes the instant attempt `n` had the provider's hello, if it had it.
pub fn take_hello(n: u64) -> Option<Instant> {
    hellos()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&n)
}

/// The layer noting when an attempt's hello was answered.
pub struct HelloLayer;

/// The attempt number a span carries.
struct AttemptNumber(u64);

#[derive(Default)]
struct Number(Option<u64>);

impl Visit for Number {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "n" {
            self.0 = Some(value);
        }
    }
    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

#[derive(Default)]
struct Message(Option<String>);

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0 = Some(value.to_owned());
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

impl<S> Layer<S> for HelloLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn enabled(&self, metadata: &Metadata<'_>, _: Context<'_, S>) -> bool {
        // Spans of either side (the attempt's, the node's `connect`), and the node's
        // info events: nothing else is looked at.
        *metadata.level() <= Level::INFO
            && (metadata.is_span() || metadata.target().starts_with("concord_node"))
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() != ATTEMPT_SPAN {
            return;
        }
        let mut number = Number::default();
        attrs.record(&mut number);
        if let (Some(n), Some(span)) = (number.0, ctx.span(id)) {
            span.extensions_mut().insert(AttemptNumber(n));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let Some(scope) = ctx.event_scope(event) else {
            return;
        };
        let Some(n) = scope
            .from_root()
            .find_map(|span| span.extensions().get::<AttemptNumber>().map(|a| a.0))
        else {
            return;
        };
        let mut message = Message::default();
        event.record(&mut message);
        if message
            .0
            .is_some_and(|text| HELLO_ANSWERED.iter().any(|m| text.starts_with(m)))
        {
            hellos()
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(n)
                .or_insert_with(Instant::now);
        }
    }
}

/// Installs [`HelloLayer`] as this process's subscriber.
pub fn install() {
    use tracing_subscriber::layer::SubscriberExt;
    let subscriber = tracing_subscriber::registry().with(HelloLayer);
    // A subscriber set already (none is, in this binary) keeps the figures empty.
    let _ = tracing::subscriber::set_global_default(subscriber);
}

/// How far one attempt got: the time each step it finished took, in [`STEPS`] order.
#[derive(Debug, Default, Clone)]
pub struct Steps(pub Vec<Duration>);

/// The steps of many attempts.
#[derive(Debug, Default)]
pub struct StepTimes {
    /// Per step, the times of the attempts that finished it.
    done: [Vec<Duration>; 4],
    /// Per step, the attempts that failed or ran out of time in it.
    stuck: [u32; 4],
}

impl StepTimes {
    /// Counts one attempt's steps; `served` when it finished them all.
    pub fn add(&mut self, steps: &Steps, served: bool) {
        for (times, time) in self.done.iter_mut().zip(&steps.0) {
            times.push(*time);
        }
        if !served {
            let at = steps.0.len().min(STEPS.len() - 1);
            self.stuck[at] += 1;
        }
    }

    /// `step: median / p95 (stuck here: n)` for each step.
    pub fn summary(&self) -> String {
        STEPS
            .iter()
            .zip(&self.done)
            .zip(&self.stuck)
            .map(|((step, times), stuck)| {
                let figure = |q: f64| {
                    quantile(times, q).map_or_else(|| "-".to_owned(), crate::report::human)
                };
                let stuck = if *stuck > 0 {
                    format!(", {stuck} not past it")
                } else {
                    String::new()
                };
                format!("{step} {} / {}{stuck}", figure(0.5), figure(0.95))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The `q` quantile of `times` (nearest rank), if any.
pub fn quantile(times: &[Duration], q: f64) -> Option<Duration> {
    let mut sorted = times.to_vec();
    sorted.sort();
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted.get(rank - 1).copied()
}
