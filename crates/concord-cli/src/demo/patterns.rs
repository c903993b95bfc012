//! The demo's last section: the seed's WeatherAgent served whole, and every LMOS
//! interaction pattern over ONE negotiated interface session: request-reply, a
//! long-running action's progress, fire-and-forget feeding publish-subscribe, property
//! read and observe, and a voice stream with credit flow; then a 0-RTT reconnect that
//! resumes the subscription after the last event seen.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context;
use concord_fixtures::weather::{self, VOICE_FRAME_BYTES};
use concord_node::{
    ActionUpdate, Connection, Node, Notification, Settlement, StreamReceiver, StreamSender, Want,
};
use serde_json::{json, Value};

use super::latency::Latencies;
use super::narrate::Narrator;
use super::Setup;
use crate::session_report::{millis, short};

/// Voice frames sent over `talk`: one second of audio.
const FRAMES: usize = 50;
/// A frame's length of audio: frames are sent at this pace, as a microphone gives them.
const FRAME_TIME: Duration = Duration::from_millis(20);
/// How long any one step may take before the demo says it did not happen.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Days of the forecast report (one progress update each).
const FORECAST_DAYS: u64 = 4;

/// What the section saw, for the JSON summary and the checks.
#[derive(Debug)]
pub struct Patterns {
    json: Value,
    /// What did not happen as it should.
    pub problems: Vec<String>,
}

impl Patterns {
    /// The section as JSON.
    pub fn to_json(&self) -> Value {
        self.json.clone()
    }
}

/// Every affordance of the WeatherAgent: one interface, one negotiation.
fn everything() -> Want {
    Want::interface([
        weather::GET_WEATHER,
        weather::FORECAST_REPORT,
        weather::LOG_FEEDBACK,
        weather::TALK,
        weather::MODEL_CONFIGURATION,
        weather::USER_FEEDBACK_RECEIVED,
    ])
}

/// Serves the WeatherAgent and shows the five patterns to `requester` over one session,
/// told by `narrate` as it happens.
pub async fn run(
    setup: &Setup<'_>,
    requester: &Node,
    narrate: Narrator,
) -> anyhow::Result<Patterns> {
    let provider = setup.agent(weather::agent(Node::builder(weather::TITLE)))?;
    let server = provider
        .node
        .serve("127.0.0.1:0")
        .await
        .context("cannot serve the WeatherAgent on 127.0.0.1")?;
    narrate.say(format_args!(
        "Five interaction patterns over ONE interface session: the seed's WeatherAgent at {}",
        server.url()
    ))?;
    let started = Instant::now();
    let peer = step(
        "the interface negotiation",
        requester.connect_with(server.url(), everything()),
    )
    .await??;
    let info = peer.info().clone();
    let mut problems = Vec::new();
    if info.settlement != Settlement::Negotiated {
        problems.push("the interface was not negotiated afresh".to_owned());
    }
    narrate.say(format_args!(
        "  one negotiation: protocol {} (settled by rules, {} LLM calls, {:.1} ms) covers \
         3 actions in 3 modes, a stream, a property and an event",
        short(&info.hash.to_string()),
        info.accounting.llm_calls(),
        millis(info.setup_time),
    ))?;

    let weather = request_reply(&peer, &narrate).await?;
    let forecast = progress(&peer, &narrate).await?;
    let (feedback, mut subscription) = publish_subscribe(&peer, &narrate).await?;
    let model = properties(&peer, &provider.node, &narrate).await?;
    let talk = stream(&peer, &narrate).await?;
    if !talk.matches {
        problems.push("the stream's frames did not come back halved".to_owned());
    }

    // Away and back: the protocol resumes with 0-RTT, the subscription after the last id.
    let last_seen = subscription.last_seen();
    drop(subscription);
    peer.close().await;
    let missed = json!({"rating": 4, "comment": "published while the requester was away"});
    provider
        .node
        .publisher()
        .publish(weather::USER_FEEDBACK_RECEIVED, missed)
        .context("cannot publish userFeedbackReceived")?;
    let reconnect_started = Instant::now();
    let again = step(
        "the 0-RTT reconnect",
        requester.connect_with(server.url(), everything()),
    )
    .await??;
    subscription = step(
        "the resumed subscription",
        again.subscribe(weather::USER_FEEDBACK_RECEIVED, last_seen),
    )
    .await??;
    let resumed_event = step("the missed event", subscription.next()).await?;
    let reconnect_time = reconnect_started.elapsed();
    let resumed = again.info().settlement == Settlement::Resumed;
    if !resumed {
        problems.push("the interface reconnect did not resume with 0-RTT".to_owned());
    }
    if again.info().hash != info.hash {
        problems.push("the reconnect speaks another protocol".to_owned());
    }
    let resumed_id = match &resumed_event {
        Some(Notification::Event { id, .. }) => Some(*id),
        _ => None,
    };
    if resumed_id.is_none() || resumed_id == last_seen {
        problems.push(format!(
            "the resumed subscription did not deliver the missed event: {resumed_event:?}"
        ));
    }
    narrate.say(format_args!(
        "  0-RTT reconnect: {} protocol {} with no negotiation; subscription resumed after #{}: \
         got #{} published while away ({:.1} ms)\n",
        if resumed { "resumed" } else { "did NOT resume" },
        short(&again.info().hash.to_string()),
        last_seen.unwrap_or_default(),
        resumed_id.unwrap_or_default(),
        millis(reconnect_time),
    ))?;
    drop(subscription);
    again.close().await;
    server
        .shutdown()
        .await
        .context("stopping the WeatherAgent")?;

    let json = json!({
        "agent": weather::TITLE,
        "hash": info.hash.to_string(),
        "negotiations": 1,
        "settledBy": if info.settlement == Settlement::Negotiated { "negotiated" } else { "other" },
        "llmCalls": info.accounting.llm_calls(),
        "setupMs": millis(info.setup_time),
        "requestReply": weather,
        "progress": forecast,
        "fireAndForget": feedback,
        "properties": model,
        "stream": talk.json,
        "reconnect": {
            "resumed": resumed,
            "lastSeen": last_seen,
            "resumedEventId": resumed_id,
            "ms": millis(reconnect_time),
        },
        "totalMs": millis(started.elapsed()),
    });
    Ok(Patterns { json, problems })
}

/// `what`, or an error saying it took longer than [`STEP_TIMEOUT`].
async fn step<T>(what: &str, future: impl std::future::Future<Output = T>) -> anyhow::Result<T> {
    tokio::time::timeout(STEP_TIMEOUT, future)
        .await
        .with_context(|| format!("{what} took longer than {STEP_TIMEOUT:?}"))
}

/// 1. getWeather: one request, one response.
async fn request_reply(peer: &Connection, narrate: &Narrator) -> anyhow::Result<Value> {
    let sent = Instant::now();
    let answer = peer
        .call(
            weather::GET_WEATHER,
            json!({"question": "Weather in Lisbon?", "interactionMode": "text"}),
        )
        .await
        .context("getWeather failed")?;
    let took = sent.elapsed();
    narrate.say(format_args!(
        "  1. request-reply      getWeather → {answer} ({:.1} ms)",
        millis(took)
    ))?;
    Ok(json!({"action": weather::GET_WEATHER, "output": answer, "ms": millis(took)}))
}

/// 2. forecastReport: one request, many responses (progress, then the output).
async fn progress(peer: &Connection, narrate: &Narrator) -> anyhow::Result<Value> {
    let sent = Instant::now();
    let mut run = peer
        .call_with_progress(
            weather::FORECAST_REPORT,
            json!({"city": "Oslo", "days": FORECAST_DAYS}),
        )
        .await
        .context("forecastReport failed")?;
    narrate.say(format_args!(
        "  2. progress           forecastReport {{\"city\": \"Oslo\", \"days\": {FORECAST_DAYS}}}"
    ))?;
    let mut updates = Vec::new();
    let output = loop {
        let Some(update) = step("a forecastReport update", run.next()).await? else {
            anyhow::bail!("forecastReport's updates ended with no result");
        };
        updates.push(crate::interact::progress::update_line(&update));
        match update {
            ActionUpdate::Started { action_id } => {
                narrate.say(format_args!("       started, action id {action_id}"))?;
            }
            ActionUpdate::Progress { progress, partial } => narrate.say(format_args!(
                "       {:>3.0}% {}",
                progress * 100.0,
                partial.map(|value| value.to_string()).unwrap_or_default()
            ))?,
            ActionUpdate::Done(result) => break result.context("forecastReport failed")?,
            _ => {}
        }
    };
    let days = output["days"].as_array().map_or(0, Vec::len);
    narrate.say(format_args!(
        "       done: {days} days ({:.1} ms)",
        millis(sent.elapsed())
    ))?;
    Ok(json!({
        "action": weather::FORECAST_REPORT,
        "updates": updates,
        "ms": millis(sent.elapsed()),
    }))
}

/// 3 and 4. logFeedback (fire-and-forget) publishes userFeedbackReceived (publish-subscribe).
async fn publish_subscribe(
    peer: &Connection,
    narrate: &Narrator,
) -> anyhow::Result<(Value, concord_node::Subscription)> {
    let mut subscription = peer
        .subscribe(weather::USER_FEEDBACK_RECEIVED, None)
        .await
        .context("cannot subscribe to userFeedbackReceived")?;
    let feedback = json!({"rating": 5, "comment": "spot on"});
    let sent = Instant::now();
    peer.notify(weather::LOG_FEEDBACK, feedback.clone())
        .await
        .context("logFeedback failed")?;
    narrate.say(format_args!(
        "  3. fire-and-forget    logFeedback {feedback} → sent, no response"
    ))?;
    let notification = step("userFeedbackReceived", subscription.next())
        .await?
        .context("the subscription ended")?;
    let took = sent.elapsed();
    let event = crate::interact::subscribe::notification_line(&notification);
    narrate.say(format_args!(
        "  4. publish-subscribe  userFeedbackReceived {event} ({:.1} ms after the notify)",
        millis(took)
    ))?;
    Ok((
        json!({"action": weather::LOG_FEEDBACK, "event": event, "ms": millis(took)}),
        subscription,
    ))
}

/// Properties: readproperty, then observeproperty and a change on the provider.
async fn properties(
    peer: &Connection,
    provider: &Node,
    narrate: &Narrator,
) -> anyhow::Result<Value> {
    let value = peer
        .read_property(weather::MODEL_CONFIGURATION)
        .await
        .context("cannot read modelConfiguration")?;
    let mut changes = peer
        .observe_property(weather::MODEL_CONFIGURATION)
        .await
        .context("cannot observe modelConfiguration")?;
    let mut changed = value.clone();
    changed["temperature"] = json!(0.7);
    provider
        .publisher()
        .set_property(weather::MODEL_CONFIGURATION, changed)
        .context("cannot change modelConfiguration")?;
    let change = step("the modelConfiguration change", changes.next())
        .await?
        .context("the observation ended")?;
    let change = crate::interact::subscribe::notification_line(&change);
    narrate.say(format_args!(
        "     properties         readproperty modelConfiguration → {value}\n\
         \x20                       observeproperty: {change}"
    ))?;
    Ok(json!({"property": weather::MODEL_CONFIGURATION, "read": value, "observed": change}))
}

/// What the stream did.
struct Talk {
    json: Value,
    matches: bool,
}

/// 5. talk: voice frames in at real-time pace, the volume halved back, under credit.
async fn stream(peer: &Connection, narrate: &Narrator) -> anyhow::Result<Talk> {
    let (sender, receiver) = peer
        .open_stream(weather::TALK, json!({}))
        .await
        .context("cannot open the talk stream")?;
    let frames: Vec<Vec<u8>> = (0..FRAMES).map(voice_frame).collect();
    let sent_at = Mutex::new(Vec::with_capacity(FRAMES));
    let started = Instant::now();
    let (sent, back) = tokio::join!(
        send_frames(sender, &frames, &sent_at),
        receive_frames(receiver)
    );
    let dropped = sent?;
    let (bytes, arrived) = back?;
    let wall = started.elapsed();
    let sent_at = sent_at
        .lock()
        .map(|times| times.clone())
        .unwrap_or_default();
    let round_trips = Latencies::new(
        arrived
            .iter()
            .zip(&sent_at)
            .map(|(back, sent)| back.saturating_duration_since(*sent))
            .collect(),
    );
    let expected: Vec<u8> = frames
        .iter()
        .flat_map(|frame| weather::halve_volume(frame))
        .collect();
    let matches = dropped == 0 && bytes == expected;
    let spec = weather::voice_stream();
    narrate.say(format_args!(
        "  5. stream             talk: {FRAMES} voice frames (20 ms PCM16, {VOICE_FRAME_BYTES} B) \
         in at real-time pace, {} back with the volume halved ({}), {dropped} dropped\n\
         \x20                       credit flow: {} B initial each way, granted again as each side \
         reads; frame round trip p50 {:.2} ms, p99 {:.2} ms ({:.2} s in all)",
        arrived.len(),
        if matches {
            "every sample checked"
        } else {
            "MISMATCH"
        },
        spec.initial_credit,
        millis(round_trips.percentile(50.0)),
        millis(round_trips.percentile(99.0)),
        wall.as_secs_f64(),
    ))?;
    Ok(Talk {
        json: json!({
            "action": weather::TALK,
            "framesSent": FRAMES,
            "framesBack": arrived.len(),
            "dropped": dropped,
            "matches": matches,
            "initialCredit": spec.initial_credit,
            "p50Ms": millis(round_trips.percentile(50.0)),
            "p99Ms": millis(round_trips.percentile(99.0)),
            "ms": millis(wall),
        }),
        matches,
    })
}

/// Frame `n`: a sawtooth, different for each frame.
fn voice_frame(n: usize) -> Vec<u8> {
    (0..VOICE_FRAME_BYTES / 2)
        .flat_map(|i| {
            let sample = i16::try_from((i * 37 + n * 101) % 16_000).unwrap_or(0) - 8_000;
            sample.to_le_bytes()
        })
        .collect()
}

/// Sends the frames at real-time pace, noting when each went; the frames dropped for want
/// of credit (a realtime stream drops rather than queues).
async fn send_frames(
    sender: StreamSender,
    frames: &[Vec<u8>],
    sent_at: &Mutex<Vec<Instant>>,
) -> anyhow::Result<usize> {
    let mut pace = tokio::time::interval(FRAME_TIME);
    let mut dropped = 0;
    for frame in frames {
        pace.tick().await;
        if let Ok(mut times) = sent_at.lock() {
            times.push(Instant::now());
        }
        if sender.send(frame.clone()).await.context("talk: sending")? == 0 {
            dropped += 1;
        }
    }
    sender.finish().await.context("talk: ending our half")?;
    Ok(dropped)
}

/// Every byte back, and when each whole frame of it arrived.
async fn receive_frames(mut receiver: StreamReceiver) -> anyhow::Result<(Vec<u8>, Vec<Instant>)> {
    let mut bytes = Vec::with_capacity(FRAMES * VOICE_FRAME_BYTES);
    let mut arrived = Vec::with_capacity(FRAMES);
    while let Some(chunk) = step("a frame back", receiver.next()).await? {
        bytes.extend(chunk.context("talk: receiving")?);
        while arrived.len() < bytes.len() / VOICE_FRAME_BYTES {
            arrived.push(Instant::now());
        }
    }
    Ok((bytes, arrived))
}
