//! Streams: bulk throughput over one non-realtime stream (64 KiB writes) beside a raw
//! binary WebSocket pipe of the same bytes, and 20 ms voice frames through the
//! WeatherAgent's `talk` action (realtime, under credit) beside a raw WebSocket echo.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use concord_fixtures::weather::{self, VOICE_FRAME_BYTES};
use concord_node::Connection;
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio::time::MissedTickBehavior;
use tokio_tungstenite::tungstenite::Message;

use crate::servers::SINK;
use crate::BoxError;

/// Bytes of one write.
pub const WRITE: usize = 64 * 1024;
/// A voice frame's period.
pub const FRAME_PERIOD: Duration = Duration::from_millis(20);

/// Sends `total` bytes over one `sink` stream in 64 KiB writes; the time until the
/// provider's count came back.
pub async fn node_stream(connection: &Connection, total: usize) -> Result<Duration, BoxError> {
    let chunk = vec![0x5a_u8; WRITE];
    let started = Instant::now();
    let (sender, mut receiver) = connection.open_stream(SINK, json!({})).await?;
    let mut sent = 0;
    while sent < total {
        sent += sender.send(chunk.clone()).await?;
    }
    sender.finish().await?;
    let mut answer = Vec::new();
    while let Some(bytes) = receiver.next().await {
        answer.extend(bytes?);
    }
    let elapsed = started.elapsed();
    let count = u64::from_be_bytes(
        answer
            .try_into()
            .map_err(|answer: Vec<u8>| format!("the sink answered {} bytes", answer.len()))?,
    );
    if count != sent as u64 {
        return Err(format!("the sink read {count} of {sent} bytes").into());
    }
    Ok(elapsed)
}

/// The same bytes as binary messages to the raw `/sink`, then a text message that asks
/// for the count.
pub async fn raw_stream(base: &str, total: usize) -> Result<Duration, BoxError> {
    let chunk = vec![0x5a_u8; WRITE];
    let started = Instant::now();
    let (mut socket, _) = tokio_tungstenite::connect_async(format!("{base}/sink")).await?;
    let mut sent = 0;
    while sent < total {
        socket.send(Message::Binary(chunk.clone().into())).await?;
        sent += WRITE;
    }
    socket.send(Message::Text("done".into())).await?;
    let answer = loop {
        match socket.next().await.ok_or("the raw sink closed")?? {
            Message::Text(text) => break text,
            _ => continue,
        }
    };
    let elapsed = started.elapsed();
    let count: usize = answer.as_str().parse()?;
    if count != sent {
        return Err(format!("the raw sink read {count} of {sent} bytes").into());
    }
    let _ = socket.close(None).await;
    Ok(elapsed)
}

/// What one voice run measured.
#[derive(Debug, Clone)]
pub struct Voice {
    /// Round trips of the frames that came back, sorted.
    pub round_trips: Vec<Duration>,
    /// Frames the sender dropped for want of credit.
    pub dropped: usize,
    pub frames: usize,
}

impl Voice {
    pub fn percentile(&self, p: f64) -> Duration {
        if self.round_trips.is_empty() {
            return Duration::ZERO;
        }
        let index = ((self.round_trips.len() - 1) as f64 * p).round() as usize;
        self.round_trips[index]
    }

    pub fn lost(&self) -> usize {
        self.frames - self.dropped - self.round_trips.len()
    }
}

/// Frame `sequence`: PCM16 samples, the first one `2 × sequence` (halved by `talk`, it
/// still names the frame), the rest a quiet ramp.
fn frame(sequence: usize) -> Vec<u8> {
    let first = i16::try_from(2 * sequence).unwrap_or(i16::MAX);
    std::iter::once(first)
        .chain((1..VOICE_FRAME_BYTES / 2).map(|i| (i % 512) as i16 * 8))
        .flat_map(i16::to_le_bytes)
        .collect()
}

/// The sequence number of a frame that came back; `halved` when `talk` halved it.
fn sequence_of(frame: &[u8], halved: bool) -> Option<usize> {
    let sample = i16::from_le_bytes([*frame.first()?, *frame.get(1)?]);
    let value = if halved { sample } else { sample / 2 };
    usize::try_from(value).ok()
}

/// Round trips recorded by a reader task as frames come back.
struct Clock {
    sent: Vec<Option<Instant>>,
    round_trips: Vec<Duration>,
}

impl Clock {
    fn new(frames: usize) -> Arc<Mutex<Self>> {
        Arc::new(Mutex::new(Self {
            sent: vec![None; frames],
            round_trips: Vec::with_capacity(frames),
        }))
    }

    fn back(clock: &Mutex<Self>, sequence: Option<usize>) {
        let now = Instant::now();
        let Ok(mut clock) = clock.lock() else { return };
        if let Some(sent) = sequence.and_then(|s| clock.sent.get(s).copied().flatten()) {
            clock.round_trips.push(now - sent);
        }
    }

    fn sent(clock: &Mutex<Self>, sequence: usize) {
        if let Ok(mut clock) = clock.lock() {
            clock.sent[sequence] = Some(Instant::now());
        }
    }

    fn finish(clock: &Mutex<Self>, frames: usize, dropped: usize) -> Voice {
        let mut round_trips = clock
            .lock()
            .map(|clock| clock.round_trips.clone())
            .unwrap_or_default();
        round_trips.sort();
        Voice {
            round_trips,
            dropped,
            frames,
        }
    }
}

fn ticker() -> tokio::time::Interval {
    let mut ticker = tokio::time::interval(FRAME_PERIOD);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticker
}

/// `frames` frames paced at 20 ms through `talk`, each timed until it comes back.
pub async fn node_voice(connection: &Connection, frames: usize) -> Result<Voice, BoxError> {
    let (sender, mut receiver) = connection.open_stream(weather::TALK, json!({})).await?;
    let clock = Clock::new(frames);
    let reader = {
        let clock = Arc::clone(&clock);
        tokio::spawn(async move {
            let mut pending: Vec<u8> = Vec::new();
            while let Some(Ok(bytes)) = receiver.next().await {
                pending.extend(bytes);
                while pending.len() >= VOICE_FRAME_BYTES {
                    let rest = pending.split_off(VOICE_FRAME_BYTES);
                    Clock::back(&clock, sequence_of(&pending, true));
                    pending = rest;
                }
            }
        })
    };
    let mut ticker = ticker();
    let mut dropped = 0;
    for sequence in 0..frames {
        ticker.tick().await;
        Clock::sent(&clock, sequence);
        if sender.send(frame(sequence)).await? == 0 {
            dropped += 1;
        }
    }
    sender.finish().await?;
    tokio::time::timeout(Duration::from_secs(10), reader).await??;
    Ok(Clock::finish(&clock, frames, dropped))
}

/// The floor: the same frames, paced the same, through the raw `/echo`.
pub async fn raw_voice(base: &str, frames: usize) -> Result<Voice, BoxError> {
    let (socket, _) = tokio_tungstenite::connect_async(format!("{base}/echo")).await?;
    let (mut write, mut read) = socket.split();
    let clock = Clock::new(frames);
    let reader = {
        let clock = Arc::clone(&clock);
        tokio::spawn(async move {
            let mut back = 0;
            while let Some(Ok(message)) = read.next().await {
                if let Message::Binary(bytes) = message {
                    Clock::back(&clock, sequence_of(&bytes, false));
                    back += 1;
                    if back == frames {
                        return;
                    }
                }
            }
        })
    };
    let mut ticker = ticker();
    for sequence in 0..frames {
        ticker.tick().await;
        Clock::sent(&clock, sequence);
        write.send(Message::Binary(frame(sequence).into())).await?;
    }
    tokio::time::timeout(Duration::from_secs(10), reader).await??;
    let _ = write.close().await;
    Ok(Clock::finish(&clock, frames, 0))
}
