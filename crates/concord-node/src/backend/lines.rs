//! What an `exec` command prints on stdout, read as it arrives: progress lines
//! (`{"progress": 0.4, "partial": {…}}`, in progress mode) and event lines (`{"event":
//! "name", "data": {…}}`, any mode) are acted on at once and dropped; everything else is
//! kept, and what is kept holds the answer: all of it when it is one JSON document, else its
//! last non-empty line (the lines before it are reported and ignored).

use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::backend::{describe_json_error, preview};
use crate::interact::{ProgressReporter, PublishError, Publisher};

/// Why a line a command printed was ignored. Reported in our log (`warn`), never fatal.
#[derive(Debug, PartialEq, thiserror::Error)]
pub(crate) enum BadLine {
    /// A progress line whose `progress` is not a number from 0 to 1.
    #[error("its `progress` is not a number from 0 to 1: {0}")]
    BadProgress(String),
    /// A progress line from an action that is not long-running.
    #[error("a progress line, but the action does not report progress (mode `progress`)")]
    NotProgressMode,
    /// An event line whose `event` is not a string.
    #[error("its `event` is not a string")]
    BadEventName,
    /// The event was not published.
    #[error("the event `{event}` was not published: {reason}")]
    NotPublished {
        /// The event's name.
        event: String,
        /// Why.
        reason: PublishError,
    },
    /// The action has no publisher: it was called outside a node (a node gives its
    /// actions its publisher when it is built, `Action::attach`).
    #[error("the event `{0}` was not published: the action has no publisher")]
    NoPublisher(String),
    /// A line before the last that is neither a progress nor an event line.
    #[error("line {line} is not a progress or event line ({reason}); it starts: {start}")]
    Stray {
        /// Its number, from 1.
        line: usize,
        /// Why it is not one.
        reason: String,
        /// Its start.
        start: String,
    },
}

/// Where progress and event lines go.
#[derive(Debug, Default)]
pub(crate) struct Control {
    /// Set in progress mode.
    pub(crate) progress: Option<ProgressReporter>,
    /// The serving node's publisher (none outside a node).
    pub(crate) publisher: Option<Publisher>,
}

/// A line as a control line, when it is one: an object whose members are `progress` (and
/// optionally `partial`), or `event` (and optionally `data`).
enum Line {
    Progress {
        progress: f64,
        partial: Option<Value>,
    },
    Event {
        name: String,
        data: Value,
    },
}

fn control_line(object: &Map<String, Value>) -> Option<Result<Line, BadLine>> {
    let only = |allowed: &[&str]| object.keys().all(|key| allowed.contains(&key.as_str()));
    if object.contains_key("progress") && only(&["progress", "partial"]) {
        let progress = object.get("progress").and_then(Value::as_f64);
        return Some(match progress {
            Some(progress) if (0.0..=1.0).contains(&progress) => Ok(Line::Progress {
                progress,
                partial: object.get("partial").cloned(),
            }),
            _ => Err(BadLine::BadProgress(
                object
                    .get("progress")
                    .map(Value::to_string)
                    .unwrap_or_default(),
            )),
        });
    }
    if object.contains_key("event") && only(&["event", "data"]) {
        return Some(match object.get("event") {
            Some(Value::String(name)) => Ok(Line::Event {
                name: name.clone(),
                data: object.get("data").cloned().unwrap_or(Value::Null),
            }),
            _ => Err(BadLine::BadEventName),
        });
    }
    None
}

impl Control {
    /// Acts on `line` when it is a control line: `true` when it was one (acted on or
    /// reported), `false` when it belongs to the answer.
    fn take(&self, line: &[u8]) -> bool {
        let trimmed = line.trim_ascii();
        if !trimmed.starts_with(b"{") {
            return false;
        }
        let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(trimmed) else {
            return false;
        };
        let Some(line) = control_line(&object) else {
            return false;
        };
        if let Err(problem) = line.and_then(|line| self.act(line)) {
            report(&problem);
        }
        true
    }

    fn act(&self, line: Line) -> Result<(), BadLine> {
        match line {
            Line::Progress { progress, partial } => match &self.progress {
                Some(reporter) => {
                    reporter.report(progress, partial);
                    Ok(())
                }
                None => Err(BadLine::NotProgressMode),
            },
            Line::Event { name, data } => {
                let Some(publisher) = &self.publisher else {
                    return Err(BadLine::NoPublisher(name));
                };
                publisher
                    .publish(&name, data)
                    .map(drop)
                    .map_err(|reason| BadLine::NotPublished {
                        event: name,
                        reason,
                    })
            }
        }
    }
}

/// Logs a line that was ignored.
pub(crate) fn report(problem: &BadLine) {
    tracing::warn!(%problem, "a line the action's command printed was ignored");
}

/// What was read from stdout.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Kept {
    /// Everything but the control lines.
    pub(crate) bytes: Vec<u8>,
    /// Whether more than the limit was to be kept (reading stopped there).
    pub(crate) truncated: bool,
}

/// Reads `stream` to its end (or until it printed more than `limit` bytes, control lines
/// included), acting on control lines of at most `max_line` bytes as they arrive.
pub(crate) async fn read_lines(
    mut stream: impl AsyncRead + Unpin,
    limit: usize,
    max_line: usize,
    control: &Control,
) -> std::io::Result<Kept> {
    let mut reader = LineReader {
        kept: Kept::default(),
        line: Vec::new(),
        long: false,
        limit,
        max_line,
    };
    let mut buffer = vec![0; 8192];
    let mut printed = 0usize;
    loop {
        let read = stream.read(&mut buffer).await?;
        let Some(bytes) = buffer.get(..read).filter(|bytes| !bytes.is_empty()) else {
            break;
        };
        printed = printed.saturating_add(bytes.len());
        if printed > limit {
            reader.kept.truncated = true;
            return Ok(reader.kept);
        }
        reader.feed(bytes, control);
        if reader.kept.truncated {
            return Ok(reader.kept);
        }
    }
    reader.end(control);
    Ok(reader.kept)
}

struct LineReader {
    kept: Kept,
    /// The line being read.
    line: Vec<u8>,
    /// Whether the line being read grew past `max_line` (it went to `kept`).
    long: bool,
    limit: usize,
    max_line: usize,
}

impl LineReader {
    fn feed(&mut self, mut bytes: &[u8], control: &Control) {
        while !bytes.is_empty() {
            let (part, rest, ended) = match bytes.iter().position(|&byte| byte == b'\n') {
                Some(at) => (&bytes[..=at], &bytes[at + 1..], true),
                None => (bytes, &[][..], false),
            };
            bytes = rest;
            if self.long {
                self.keep(part);
            } else {
                self.line.extend_from_slice(part);
                if self.line.len() > self.max_line && !ended {
                    let line = std::mem::take(&mut self.line);
                    self.keep(&line);
                    self.long = true;
                }
            }
            if ended {
                self.end_line(control);
            }
            if self.kept.truncated {
                return;
            }
        }
    }

    fn end_line(&mut self, control: &Control) {
        let line = std::mem::take(&mut self.line);
        if !self.long && (line.len() > self.max_line || !control.take(&line)) {
            self.keep(&line);
        }
        self.long = false;
    }

    fn end(&mut self, control: &Control) {
        if !self.line.is_empty() || self.long {
            self.end_line(control);
        }
    }

    fn keep(&mut self, bytes: &[u8]) {
        if self.kept.bytes.len() + bytes.len() > self.limit {
            self.kept.truncated = true;
            return;
        }
        self.kept.bytes.extend_from_slice(bytes);
    }
}

/// The answer in what was kept: all of it when it is one JSON document (or when it has
/// fewer than two non-empty lines), else its last non-empty line; the lines before that are
/// reported and ignored.
pub(crate) fn answer_part(kept: &[u8]) -> &[u8] {
    if serde_json::from_slice::<serde::de::IgnoredAny>(kept).is_ok() {
        return kept;
    }
    let lines: Vec<(usize, &[u8])> = kept
        .split(|&byte| byte == b'\n')
        .enumerate()
        .filter(|(_, line)| !line.trim_ascii().is_empty())
        .collect();
    let Some(((_, last), before)) = lines.split_last() else {
        return kept;
    };
    if before.is_empty() {
        return kept;
    }
    for (number, line) in before {
        let reason = match serde_json::from_slice::<Value>(line) {
            Ok(_) => "it is JSON, but not the last line".to_owned(),
            Err(error) => describe_json_error(&error, line),
        };
        report(&BadLine::Stray {
            line: number + 1,
            reason,
            start: preview(line),
        });
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(text: &str, limit: usize, max_line: usize) -> Kept {
        read_lines(text.as_bytes(), limit, max_line, &Control::default())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn control_lines_are_taken_out_and_the_rest_is_kept() {
        let text = "{\"progress\": 0.5}\n{\"event\": \"e\", \"data\": {}}\n{\"name\": \"x\"}\n";
        let kept = read(text, 1 << 20, 1024).await;
        assert_eq!(kept.bytes, b"{\"name\": \"x\"}\n");
        assert!(!kept.truncated);
        // Without a final newline, too.
        let kept = read("{\"progress\": 1}\n42", 1 << 20, 1024).await;
        assert_eq!(kept.bytes, b"42");
    }

    #[tokio::test]
    async fn a_line_past_the_line_limit_is_kept_not_parsed() {
        let line = format!(
            "{{\"progress\": 0.5, \"partial\": \"{}\"}}\n",
            "x".repeat(100)
        );
        let kept = read(&line, 1 << 20, 32).await;
        assert_eq!(kept.bytes, line.as_bytes());
        let kept = read(&line, 50, 32).await;
        assert!(kept.truncated);
    }

    #[tokio::test]
    async fn control_lines_count_against_the_output_limit() {
        // A command that floods progress lines, each taken out, still stops at the limit.
        let flood = "{\"progress\": 0.5}\n".repeat(1_000);
        let kept = read(&flood, 4096, 1024).await;
        assert!(kept.truncated);
        assert!(kept.bytes.is_empty());
        let kept = read(&flood, flood.len(), 1024).await;
        assert!(!kept.truncated);
    }

    #[test]
    fn the_answer_is_the_whole_document_or_the_last_line() {
        assert_eq!(answer_part(b"{\n  \"a\": 1\n}\n"), b"{\n  \"a\": 1\n}\n");
        assert_eq!(answer_part(b"warming up\n{\"a\": 1}\n"), b"{\"a\": 1}");
        assert_eq!(answer_part(b"not json"), b"not json");
        assert_eq!(answer_part(b""), b"");
    }

    #[test]
    fn control_lines_are_recognised_by_their_members_only() {
        let parse = |text: &str| {
            let Value::Object(object) = serde_json::from_str(text).unwrap() else {
                panic!()
            };
            control_line(&object).map(|line| line.map(|_| ()))
        };
        assert!(matches!(
            parse(r#"{"progress": 0.4, "partial": {}}"#),
            Some(Ok(()))
        ));
        assert!(matches!(parse(r#"{"event": "e"}"#), Some(Ok(()))));
        assert!(matches!(
            parse(r#"{"progress": 2}"#),
            Some(Err(BadLine::BadProgress(_)))
        ));
        assert!(matches!(
            parse(r#"{"event": 3}"#),
            Some(Err(BadLine::BadEventName))
        ));
        assert!(parse(r#"{"progress": 0.4, "city": "Oslo"}"#).is_none());
        assert!(parse(r#"{"name": "x"}"#).is_none());
    }

    #[test]
    fn a_progress_line_outside_progress_mode_or_an_event_without_publisher_is_reported() {
        let control = Control::default();
        assert!(control.take(b"{\"progress\": 0.1}\n"));
        assert_eq!(
            control.act(Line::Progress {
                progress: 0.1,
                partial: None
            }),
            Err(BadLine::NotProgressMode)
        );
        assert_eq!(
            control.act(Line::Event {
                name: "e".into(),
                data: Value::Null
            }),
            Err(BadLine::NoPublisher("e".into()))
        );
    }
}
