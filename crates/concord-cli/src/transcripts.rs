//! `concord transcripts list|show|prune`: the sessions' transcripts in the store (every
//! hello and negotiation frame), and keeping them in bounds.

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use clap::{Args, Subcommand};
use concord_store::{
    CheckpointMode, FrameContent, FrameKind, FrameRecord, Outcome, TranscriptId,
    TranscriptRetention, TranscriptSummary,
};
use serde_json::{json, Value};

use crate::data_dir::DataDir;
use crate::output::{self, outln};
use crate::protocols::time;

/// How many characters of a frame's text `transcripts show` prints.
const PREVIEW_CHARS: usize = 100;

/// `concord transcripts`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  concord transcripts list
  concord transcripts show 42
  concord transcripts prune --older-than 7d --keep 1000")]
pub struct TranscriptsArgs {
    #[command(flatten)]
    data_dir: DataDir,
    #[command(subcommand)]
    command: TranscriptsCommand,
}

/// Commands on the stored transcripts.
#[derive(Debug, Subcommand)]
pub enum TranscriptsCommand {
    /// List the transcripts, most recently started first: id, start, our role, how the
    /// session ended (`running` while in progress), frames and bytes recorded, how the
    /// session was protected (`noise` end-to-end encrypted or `plain`, `+did` when the
    /// peer proved its DID, `-` when not recorded), peer.
    #[command(after_help = "\
Examples:
  concord transcripts list
  concord transcripts list --limit 100
  concord transcripts list --json | jq '.[] | select(.outcome == \"failed\")'")]
    List {
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
        /// Most transcripts listed.
        #[arg(long, value_name = "N", default_value_t = 20)]
        limit: usize,
    },
    /// Show one transcript: who, when, how it ended, how the session was protected (the
    /// channel and the peer's DID when authenticated), then its frames in order, each with
    /// its direction, kind and the start of its text (application and verification
    /// frames: their size only).
    #[command(after_help = "\
Examples:
  concord transcripts show 42
  concord transcripts show 42 --json     # every frame's whole text")]
    Show {
        /// The transcript's id (`concord transcripts list`, or `transcriptId` in
        /// `concord call --json`).
        id: TranscriptId,
        /// Print the whole transcript as one JSON object, frames' full text included.
        #[arg(long)]
        json: bool,
    },
    /// Delete finished transcripts (transcripts of sessions in progress are kept), print
    /// how many, then checkpoint the store's write-ahead log so that its file shrinks.
    /// With neither option: those started more than 7 days ago.
    #[command(after_help = "\
Examples:
  concord transcripts prune                      # older than 7 days
  concord transcripts prune --older-than 12h
  concord transcripts prune --keep 100           # the newest 100 finished ones stay
  concord transcripts prune --older-than 30d --keep 10000")]
    Prune {
        /// Delete those started longer ago than this (`7d`, `12h`, `1h 30m`).
        #[arg(long, value_name = "AGE", value_parser = humantime::parse_duration)]
        older_than: Option<Duration>,
        /// Keep only the newest N finished transcripts.
        #[arg(long, value_name = "N")]
        keep: Option<u64>,
    },
}

/// Runs one `concord transcripts` command.
pub fn run(args: TranscriptsArgs) -> anyhow::Result<ExitCode> {
    let store = args.data_dir.open()?;
    match args.command {
        TranscriptsCommand::List { json, limit } => {
            let transcripts = store.list_transcripts(limit)?;
            if json {
                let list: Vec<Value> = transcripts.iter().map(summary_json).collect();
                output::json(&list)?;
                return Ok(ExitCode::SUCCESS);
            }
            if transcripts.is_empty() {
                eprintln!(
                    "concord: no transcripts stored in {}",
                    store.path().display()
                );
                return Ok(ExitCode::SUCCESS);
            }
            outln!(
                "{:>6}  {:<20}  {:<9}  {:<11}  {:>6}  {:>8}  {:<9}  peer",
                "id",
                "started",
                "role",
                "outcome",
                "frames",
                "bytes",
                "channel"
            )?;
            for summary in &transcripts {
                outln!(
                    "{:>6}  {:<20}  {:<9}  {:<11}  {:>6}  {:>8}  {:<9}  {}",
                    summary.id,
                    time(summary.started),
                    summary.role.name(),
                    outcome_name(summary.outcome.as_ref()),
                    summary.frame_count,
                    summary.bytes,
                    channel_short(summary.channel.as_deref()),
                    summary.peer
                )?;
            }
            Ok(ExitCode::SUCCESS)
        }
        TranscriptsCommand::Show { id: parsed, json } => {
            let Some(transcript) = store.transcript(parsed)? else {
                output::note(format_args!(
                    "no transcript has id {parsed} in {}",
                    store.path().display()
                ));
                return Ok(ExitCode::from(1));
            };
            if json {
                let mut value = summary_json(&transcript.summary);
                value["frames"] = transcript.frames.iter().map(frame_json).collect();
                output::json(&value)?;
                return Ok(ExitCode::SUCCESS);
            }
            let summary = &transcript.summary;
            outln!("id:        {}", summary.id)?;
            outln!("peer:      {}", summary.peer)?;
            outln!("role:      {}", summary.role.name())?;
            outln!("started:   {}", time(summary.started))?;
            outln!(
                "finished:  {}",
                summary
                    .finished
                    .map_or_else(|| "not yet (running)".to_owned(), time)
            )?;
            match &summary.outcome {
                None => outln!("outcome:   running")?,
                Some(outcome) => outln!(
                    "outcome:   {}: {}",
                    outcome.name(),
                    crate::output::one_line(&outcome.detail())
                )?,
            }
            outln!(
                "frames:    {} ({} bytes)",
                summary.frame_count,
                summary.bytes
            )?;
            if summary.frames_not_recorded > 0 {
                outln!(
                    "not recorded: {} more frames (beyond the transcript's bound)",
                    summary.frames_not_recorded
                )?;
            }
            match &summary.channel {
                Some(channel) => outln!("channel:   {}", output::one_line(channel))?,
                None => outln!(
                    "channel:   not recorded (a session recorded by an older concord, or one \
                     that ended before it was established)"
                )?,
            }
            outln!()?;
            for (seq, frame) in transcript.frames.iter().enumerate() {
                outln!(
                    "{seq:>4}  {}  {:<8}  {:<16}  {}",
                    humantime::format_rfc3339_millis(frame.at),
                    frame.direction.name(),
                    frame.kind.name(),
                    preview(frame)
                )?;
            }
            if summary.frames_not_recorded > 0 {
                outln!(
                    "{:>4}  … {} more frames not recorded",
                    "",
                    summary.frames_not_recorded
                )?;
            }
            Ok(ExitCode::SUCCESS)
        }
        TranscriptsCommand::Prune { older_than, keep } => {
            let now = SystemTime::now();
            let mut retention = TranscriptRetention::all();
            match (older_than, keep) {
                (None, None) => {
                    retention = retention
                        .older_than(concord_node::Limits::default().transcript_max_age, now)
                }
                (age, keep) => {
                    if let Some(age) = age {
                        retention = retention.older_than(age, now);
                    }
                    if let Some(keep) = keep {
                        retention = retention.keep_newest(keep);
                    }
                }
            }
            let deleted = store.prune_transcripts_by(&retention)?;
            outln!(
                "deleted {deleted} transcript{}",
                if deleted == 1 { "" } else { "s" }
            )?;
            let before = store.wal_bytes().unwrap_or(0);
            let checkpoint = store.checkpoint(CheckpointMode::Truncate)?;
            if checkpoint.complete {
                let after = store.wal_bytes().unwrap_or(0);
                outln!("write-ahead log: {before} bytes before the checkpoint, {after} after")?;
            } else {
                eprintln!(
                    "concord: another process (a running node?) is using the store: the \
                     write-ahead log shrinks at its next checkpoint"
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `agreed`, `rejected`, `failed`, `interrupted`, or `running` for none yet.
fn outcome_name(outcome: Option<&Outcome>) -> &'static str {
    outcome.map_or("running", Outcome::name)
}

/// A transcript without its frames, as JSON.
fn summary_json(summary: &TranscriptSummary) -> Value {
    json!({
        "id": summary.id.get(),
        "peer": summary.peer,
        "role": summary.role.name(),
        "started": time(summary.started),
        "finished": summary.finished.map(time),
        "outcome": outcome_name(summary.outcome.as_ref()),
        "detail": summary.outcome.as_ref().map(Outcome::detail),
        "frameCount": summary.frame_count,
        "framesNotRecorded": summary.frames_not_recorded,
        "bytes": summary.bytes,
        "channel": summary.channel,
    })
}

/// How a session was protected, in a few characters for `transcripts list`: `noise`
/// (a Noise channel) or `plain`, then `+did` when the peer proved its DID;
/// `-` when the store has no channel for it. The full text: `transcripts show`.
fn channel_short(channel: Option<&str>) -> String {
    let Some(channel) = channel else {
        return "-".to_owned();
    };
    let (kind, peer) = channel.split_once(';').unwrap_or((channel, ""));
    let kind = kind.trim();
    let mut short = if kind.starts_with("Noise") {
        "noise".to_owned()
    } else if kind == "plain" {
        "plain".to_owned()
    } else {
        // Something a newer node wrote: its first word, bounded.
        kind.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .take(9)
            .collect::<String>()
            .to_ascii_lowercase()
    };
    if short.is_empty() {
        short.push('?');
    }
    // The provider's words (`peer authenticated as did:…`) or the requester's (`peer
    // proved did:…`): either way the peer's DID was proven.
    if peer.contains("peer authenticated as did:") || peer.contains("peer proved did:") {
        short.push_str("+did");
    }
    short
}

/// A frame as JSON: its whole text; the kept start of a text cut by the store
/// (`"cut": true`) with the whole text's size and SHA-256; or its data length.
fn frame_json(frame: &FrameRecord) -> Value {
    let mut value = json!({
        "direction": frame.direction.name(),
        "kind": frame.kind.name(),
        "at": humantime::format_rfc3339_millis(frame.at).to_string(),
    });
    match &frame.content {
        FrameContent::Text(text) => value["text"] = json!(text),
        FrameContent::Binary { len } => value["bytes"] = json!(len),
    }
    if let Some(cut) = &frame.cut {
        value["cut"] = json!(true);
        value["bytes"] = json!(cut.len);
        value["sha256"] = json!(cut.sha256);
    }
    value
}

/// The start of a frame's text on one line (at most [`PREVIEW_CHARS`] characters, line
/// breaks shown as `⏎`), or the size of its data. A text the store kept cut says so, with
/// the whole text's size and SHA-256.
fn preview(frame: &FrameRecord) -> String {
    match &frame.content {
        FrameContent::Text(text) => match &frame.cut {
            None => text_preview(text, text.len()),
            Some(cut) => format!(
                "{} [cut: {} of {} bytes kept, sha256 {}]",
                text_preview(text, usize::try_from(cut.len).unwrap_or(usize::MAX)),
                text.len(),
                cut.len,
                cut.sha256
            ),
        },
        FrameContent::Binary { len } => match frame.kind {
            FrameKind::Application => format!("({len} bytes of application data)"),
            _ => format!("({len} bytes of data)"),
        },
    }
}

/// `text` on one line, at most [`PREVIEW_CHARS`] characters, followed by `… (len bytes)`
/// when longer (`len`: the whole text's size).
fn text_preview(text: &str, len: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c == '\n' { '⏎' } else { c })
        .filter(|c| !c.is_control())
        .take(PREVIEW_CHARS + 1)
        .collect();
    if flat.chars().count() > PREVIEW_CHARS {
        let cut: String = flat.chars().take(PREVIEW_CHARS).collect();
        format!("{cut}… ({len} bytes)")
    } else {
        flat
    }
}

#[cfg(test)]
mod tests {
    use concord_store::Direction;

    use super::*;

    #[test]
    fn channels_are_shown_short() {
        let cases = [
            (
                Some(
                    "Noise_XX_25519_ChaChaPoly_BLAKE2s; peer authenticated as \
                     did:wba:localhost%3A8080:agents:e1_abc",
                ),
                "noise+did",
            ),
            (
                Some("Noise_XX_25519_ChaChaPoly_BLAKE2s; peer anonymous"),
                "noise",
            ),
            (Some("plain; peer anonymous"), "plain"),
            (
                Some(
                    "Noise_XX_25519_ChaChaPoly_BLAKE2s; peer proved did:wba:localhost%3A1:agents:e1_a; \
                     we signed as did:wba:localhost%3A2:agents:e1_b",
                ),
                "noise+did",
            ),
            (
                Some("Noise_XX_25519_ChaChaPoly_BLAKE2s; we signed as did:wba:x.example:e1_b"),
                "noise",
            ),
            (Some("plain; we called anonymously"), "plain"),
            (
                Some("plain; peer authenticated as did:wba:example.com:e1_x"),
                "plain+did",
            ),
            (Some("Quantum channel; whatever"), "quantum"),
            (Some(""), "?"),
            (None, "-"),
        ];
        for (channel, short) in cases {
            assert_eq!(channel_short(channel), short, "{channel:?}");
        }
    }

    #[test]
    fn previews_are_one_bounded_line() {
        let long = format!("{{\n  \"a\": \"{}\"\n}}", "x".repeat(500));
        let frame = FrameRecord::hello(Direction::Sent, long.clone(), SystemTime::now());
        let shown = preview(&frame);
        assert!(!shown.contains('\n'));
        assert!(shown.starts_with("{⏎  \"a\""), "{shown}");
        assert!(
            shown.ends_with(&format!("… ({} bytes)", long.len())),
            "{shown}"
        );
        assert_eq!(
            shown.chars().take_while(|c| *c != '…').count(),
            PREVIEW_CHARS
        );
        let short = FrameRecord::hello(Direction::Received, "{}", SystemTime::now());
        assert_eq!(preview(&short), "{}");
    }

    #[test]
    fn a_cut_text_shows_what_was_kept_and_what_the_whole_was() {
        let whole = format!("{{\"messageId\":\"{}\"}}", "m".repeat(10_000));
        let frame = FrameRecord::hello_within(Direction::Received, &whole, 4096, SystemTime::now());
        let shown = preview(&frame);
        let hash = concord_proto::ProtocolHash::of_text(&whole).to_string();
        assert!(
            shown.ends_with(&format!(
                "… ({} bytes) [cut: 4096 of {} bytes kept, sha256 {hash}]",
                whole.len(),
                whole.len()
            )),
            "{shown}"
        );
        let value = frame_json(&frame);
        assert_eq!(value["cut"], json!(true));
        assert_eq!(value["bytes"], json!(whole.len()));
        assert_eq!(value["sha256"], json!(hash));
        assert_eq!(value["text"].as_str().map(str::len), Some(4096));
    }
}
