//! Diagnostics on standard error: errors as one line, the node's log lines for `serve`, or
//! a spinner showing the current phase of a connection for `call` (on a terminal only).

use std::fmt::Debug;
use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use tracing::field::{Field, Visit};
use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// An error and its causes as one line, `what: why: why`, each said once (an error whose
/// message already quotes its cause is not followed by the cause again).
pub fn error_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// Logs to standard error, filtered by `RUST_LOG` or else by `default` (e.g.
/// `"concord_node=info,warn"`).
pub fn init_log(default: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

/// A spinner on standard error naming the phase a connection is in: what we set, then
/// each step the node reports. Hidden unless standard error is a terminal; with `RUST_LOG`
/// set, the node's log lines are shown instead.
#[derive(Debug)]
pub struct Spinner {
    bar: Option<ProgressBar>,
}

impl Spinner {
    /// Starts the spinner (or the log, or nothing) with `phase`.
    pub fn start(phase: &str) -> Self {
        if std::env::var_os("RUST_LOG").is_some() {
            init_log("warn");
            return Self { bar: None };
        }
        if !std::io::stderr().is_terminal() {
            return Self { bar: None };
        }
        let bar = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            bar.set_style(style);
        }
        bar.set_message(phase.to_owned());
        bar.enable_steady_tick(Duration::from_millis(100));
        let layer = PhaseLayer { bar: bar.clone() }
            .with_filter(Targets::new().with_target("concord_node", Level::INFO));
        let _ = tracing_subscriber::registry().with(layer).try_init();
        Self { bar: Some(bar) }
    }

    /// Shows `phase`.
    pub fn set(&self, phase: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(phase.to_owned());
        }
    }

    /// Removes the spinner.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Turns the node's events into the spinner's message.
struct PhaseLayer {
    bar: ProgressBar,
}

impl<S: tracing::Subscriber> Layer<S> for PhaseLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _context: Context<'_, S>) {
        let mut message = MessageField::default();
        event.record(&mut message);
        if !message.0.is_empty() {
            self.bar.set_message(message.0);
        }
    }
}

/// The `message` field of an event.
#[derive(Default)]
struct MessageField(String);

impl Visit for MessageField {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            value.clone_into(&mut self.0);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}
