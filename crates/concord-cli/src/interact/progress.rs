//! `concord call` on an action that is not request-reply: a long-running action's progress
//! (a progress bar on a terminal, or one JSON line per update), a fire-and-forget action
//! (`sent`), over an interface session for that one action.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use concord_describe::InteractionMode;
use concord_node::{ActionUpdate, Node};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};

use super::interrupt::Interrupts;
use super::{action, Described};
use crate::output::{self, outln};

/// Steps of the progress bar (progress 0–1 is shown in tenths of a percent).
const BAR_STEPS: u64 = 1000;
/// Characters of the partial output shown beside the bar.
const PARTIAL_CHARS: usize = 60;
/// How long Ctrl-C waits for a long-running action's id, to cancel the action.
const ID_WAIT: Duration = Duration::from_secs(5);

/// What `concord call` does once it knows the action's mode.
#[derive(Debug)]
pub struct Call<'a> {
    /// The peer's URL.
    pub url: &'a str,
    /// Its description, fetched already.
    pub described: &'a Described,
    /// The action.
    pub action: &'a str,
    /// Its input.
    pub input: Value,
    /// One JSON line per update.
    pub json: bool,
}

/// Calls a progress or notify action over an interface session; `mode` is what the
/// description says. A stream action is refused here: `concord stream` pipes it.
pub async fn call(node: &Node, call: Call<'_>, mode: InteractionMode) -> anyhow::Result<ExitCode> {
    if mode == InteractionMode::Stream {
        return Err(output::Wrong::error(format!(
            "`{}` is a stream action: use `concord stream {} {}`",
            call.action, call.url, call.action
        )));
    }
    let connection =
        match super::connect_described(node, call.url, call.described, &[call.action]).await {
            Ok(connection) => connection,
            Err(code) => return Ok(code),
        };
    let exit = if mode == InteractionMode::Notify {
        match connection.notify(call.action, call.input).await {
            Ok(()) if call.json => {
                outln!("{}", json!({"type": "sent"}))?;
                ExitCode::SUCCESS
            }
            Ok(()) => {
                outln!("sent")?;
                ExitCode::SUCCESS
            }
            Err(error) => super::failed(call.action, &error),
        }
    } else {
        follow(&connection, &call).await?
    };
    connection.close().await;
    Ok(exit)
}

/// Follows a long-running action to its end. Ctrl-C cancels it before exiting 130: at
/// once when its id is known, else once the id comes (waiting at most [`ID_WAIT`]); a
/// second Ctrl-C exits at once. Either way the user is told whether the action may run on.
async fn follow(
    connection: &concord_node::Connection,
    call: &Call<'_>,
) -> anyhow::Result<ExitCode> {
    // One stream for the whole call: a press while none is awaited is not lost.
    let mut interrupts = Interrupts::listen()?;
    // Set by the first Ctrl-C: until when to wait for the action's id to cancel it.
    let mut cancel_by: Option<Instant> = None;
    let request = connection.call_with_progress(call.action, call.input.clone());
    tokio::pin!(request);
    let requested = loop {
        tokio::select! {
            requested = &mut request => break requested,
            () = interrupts.next() => {
                if cancel_by.is_some() {
                    return Ok(not_sent(call));
                }
                cancel_by = Some(Instant::now() + ID_WAIT);
                waiting_for_id(call);
            }
            () = sleep_until(cancel_by), if cancel_by.is_some() => return Ok(not_sent(call)),
        }
    };
    let mut run = match requested {
        Ok(run) => run,
        Err(error) => return Ok(super::failed(call.action, &error)),
    };
    let bar = (!call.json && std::io::stderr().is_terminal()).then(|| progress_bar(call.action));
    let clear = || {
        if let Some(bar) = &bar {
            bar.finish_and_clear();
        }
    };
    let mut action_id: Option<String> = None;
    loop {
        let update = tokio::select! {
            update = run.next() => update,
            () = interrupts.next() => {
                clear();
                if let Some(id) = &action_id {
                    return Ok(cancel(connection, call, id, &mut interrupts).await);
                }
                if cancel_by.is_some() {
                    output::note(format_args!(
                        "{}: not waiting for its action id; {}",
                        call.action,
                        action::may_run_on(call.url, None)
                    ));
                    return Ok(ExitCode::from(action::INTERRUPTED));
                }
                cancel_by = Some(Instant::now() + ID_WAIT);
                waiting_for_id(call);
                continue;
            }
            () = sleep_until(cancel_by), if cancel_by.is_some() => {
                output::note(format_args!(
                    "{}: no action id came within {} s; {}",
                    call.action,
                    ID_WAIT.as_secs(),
                    action::may_run_on(call.url, None)
                ));
                return Ok(ExitCode::from(action::INTERRUPTED));
            }
        };
        let Some(update) = update else { break };
        if call.json {
            outln!("{}", update_line(&update))?;
            output::flush()?;
        }
        match update {
            ActionUpdate::Started { action_id: id } => {
                if cancel_by.is_some() {
                    return Ok(cancel(connection, call, &id, &mut interrupts).await);
                }
                if let Some(bar) = &bar {
                    bar.set_message(format!("{} ({id})", call.action));
                }
                action_id = Some(id);
            }
            ActionUpdate::Progress { progress, partial } => {
                if let Some(bar) = &bar {
                    bar.set_position(bar_position(progress));
                    if let Some(partial) = &partial {
                        bar.set_message(short_json(partial));
                    }
                }
            }
            ActionUpdate::Done(result) => {
                clear();
                return Ok(match result {
                    Ok(value) => {
                        if !call.json {
                            output::json(&value)?;
                        }
                        ExitCode::SUCCESS
                    }
                    Err(error) => super::failed(call.action, &error),
                });
            }
            _ => {}
        }
    }
    clear();
    output::note(format_args!(
        "{}: the updates ended with no result",
        call.action
    ));
    Ok(ExitCode::from(2))
}

/// Cancels the call's action `id` after Ctrl-C (see [`action::cancel_on_interrupt`]).
async fn cancel(
    connection: &concord_node::Connection,
    call: &Call<'_>,
    id: &str,
    interrupts: &mut Interrupts,
) -> ExitCode {
    action::cancel_on_interrupt(connection, (call.url, call.action), id, interrupts).await
}

/// Says that Ctrl-C waits for the action's id to cancel the action.
fn waiting_for_id(call: &Call<'_>) {
    output::note(format_args!(
        "interrupted: {} has no action id yet; it is cancelled once it has one (waiting up \
         to {} s; Ctrl-C again to exit at once)",
        call.action,
        ID_WAIT.as_secs()
    ));
}

/// Interrupted before the request was handed to the connection: it was never sent.
fn not_sent(call: &Call<'_>) -> ExitCode {
    output::note(format_args!(
        "{}: interrupted before the request was sent; the action does not run",
        call.action
    ));
    ExitCode::from(action::INTERRUPTED)
}

/// Sleeps until `deadline`; never wakes without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}

/// One update as a JSON line: `{"type": "started" | "progress" | "done" | "failed", …}`.
pub fn update_line(update: &ActionUpdate) -> Value {
    match update {
        ActionUpdate::Started { action_id } => json!({"type": "started", "actionId": action_id}),
        ActionUpdate::Progress { progress, partial } => {
            let mut line = json!({"type": "progress", "progress": progress});
            if let (Some(partial), Value::Object(fields)) = (partial, &mut line) {
                fields.insert("partial".to_owned(), partial.clone());
            }
            line
        }
        ActionUpdate::Done(Ok(output)) => json!({"type": "done", "output": output}),
        ActionUpdate::Done(Err(error)) => {
            json!({"type": "failed", "error": super::error_json(error)})
        }
        _ => json!({"type": "unknown"}),
    }
}

/// The bar on standard error: `[####    ] 40% partial output`.
fn progress_bar(action: &str) -> ProgressBar {
    let bar = ProgressBar::new(BAR_STEPS);
    if let Ok(style) = ProgressStyle::with_template("{bar:30} {percent:>3}% {msg} ({elapsed})") {
        bar.set_style(style);
    }
    bar.set_message(action.to_owned());
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

/// Progress 0–1 in bar steps (a peer's value outside is clamped).
fn bar_position(progress: f64) -> u64 {
    if progress.is_nan() {
        return 0;
    }
    (progress.clamp(0.0, 1.0) * BAR_STEPS as f64).round() as u64
}

/// `value` as compact JSON, cut to a line beside the bar.
fn short_json(value: &Value) -> String {
    let text = output::one_line(&value.to_string());
    if text.chars().count() <= PARTIAL_CHARS {
        return text;
    }
    let mut cut: String = text.chars().take(PARTIAL_CHARS - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_become_json_lines() {
        let started = ActionUpdate::Started {
            action_id: "a1".to_owned(),
        };
        assert_eq!(
            update_line(&started),
            json!({"type": "started", "actionId": "a1"})
        );
        let halfway = ActionUpdate::Progress {
            progress: 0.5,
            partial: Some(json!({"daysDone": 2})),
        };
        assert_eq!(
            update_line(&halfway),
            json!({"type": "progress", "progress": 0.5, "partial": {"daysDone": 2}})
        );
        let bare = ActionUpdate::Progress {
            progress: 1.0,
            partial: None,
        };
        assert_eq!(
            update_line(&bare),
            json!({"type": "progress", "progress": 1.0})
        );
        let done = ActionUpdate::Done(Ok(json!({"city": "Oslo"})));
        assert_eq!(
            update_line(&done),
            json!({"type": "done", "output": {"city": "Oslo"}})
        );
        let failed = ActionUpdate::Done(Err(concord_node::CallError::Closed("gone".to_owned())));
        let line = update_line(&failed);
        assert_eq!(line["type"], "failed");
        assert_eq!(line["error"]["code"], "closed");
    }

    #[test]
    fn the_bar_clamps_what_the_peer_says() {
        assert_eq!(bar_position(0.5), 500);
        assert_eq!(bar_position(-1.0), 0);
        assert_eq!(bar_position(7.0), BAR_STEPS);
        assert_eq!(bar_position(f64::NAN), 0);
        assert_eq!(short_json(&json!({"a": 1})), r#"{"a":1}"#);
        assert_eq!(
            short_json(&json!("x".repeat(100))).chars().count(),
            PARTIAL_CHARS
        );
    }
}
