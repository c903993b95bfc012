//! `concord status URL ACTION_ID` and `concord cancel URL ACTION_ID`: a long-running
//! action by the id `concord call` showed (`{"type": "started", "actionId"}`), over the
//! peer's interface (the same protocol as every other command against it).

use std::process::ExitCode;

use clap::Args;
use concord_describe::InteractionMode;
use concord_node::{CallError, Connection};
use serde_json::Value;

use super::interrupt::Interrupts;
use super::{Affordance, Described, PeerArgs};
use crate::output;

/// `concord status`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  concord status http://127.0.0.1:8080 3f2a…c9        # the id `concord call` showed
  concord status http://127.0.0.1:8080 3f2a…c9 | jq -r .status

Prints the action's status as JSON: {\"status\": \"pending\" | \"running\" | \"completed\" |
\"failed\" | \"cancelled\", \"progress\"?, \"output\"?, \"error\"?}. The provider keeps it after the
caller that started it went away. Exit codes: 0 printed; 1 the peer knows no action by this
id (or has no long-running action); 2 the peer could not be reached.")]
pub struct StatusArgs {
    #[command(flatten)]
    peer: PeerArgs,
    /// The action's id (`actionId` in `concord call --json`'s `started` line, or shown
    /// beside the progress bar).
    action_id: String,
}

/// `concord cancel`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  concord cancel http://127.0.0.1:8080 3f2a…c9        # the id `concord call` showed

Cancels a long-running action: the provider stops its work, and its caller (if still
attached) gets the cancellation as the action's end. Prints the provider's answer (the
action's status) as JSON. Ctrl-C during `concord call` on a long-running action cancels it
the same way. Exit codes: 0 cancelled; 1 the peer knows no action by this id, or it had
already finished (409); 2 the peer could not be reached.")]
pub struct CancelArgs {
    #[command(flatten)]
    peer: PeerArgs,
    /// The action's id, as for `concord status`.
    action_id: String,
}

/// Runs `concord status`.
pub fn status(mut args: StatusArgs) -> anyhow::Result<ExitCode> {
    args.peer.settle()?;
    by_id(&args.peer, &args.action_id, |connection, id| async move {
        connection.query_action(&id).await
    })
}

/// Runs `concord cancel`.
pub fn cancel(mut args: CancelArgs) -> anyhow::Result<ExitCode> {
    args.peer.settle()?;
    by_id(&args.peer, &args.action_id, |connection, id| async move {
        connection.cancel_action(&id).await
    })
}

/// Connects to the peer and asks `ask` about the action `action_id`; prints the answer.
fn by_id<F, A>(peer: &PeerArgs, action_id: &str, ask: A) -> anyhow::Result<ExitCode>
where
    A: FnOnce(Connection, String) -> F,
    F: std::future::Future<Output = Result<Value, CallError>>,
{
    let node = super::requester(peer)?;
    crate::runtime::block_on(async move {
        let described = super::describe(&node, &peer.url).await?;
        let long_running = long_running(&described);
        if long_running.is_empty() {
            return Err(output::Wrong::error(
                "the peer's description has no long-running action (`concord:mode` progress): \
                 no action of it has an id",
            ));
        }
        let connection =
            match super::connect_described(&node, &peer.url, &described, &long_running).await {
                Ok(connection) => connection,
                Err(code) => return Ok(code),
            };
        let answer = ask(connection.clone(), action_id.to_owned()).await;
        connection.close().await;
        match answer {
            Ok(value) => {
                output::json(&value)?;
                Ok(ExitCode::SUCCESS)
            }
            Err(error) => Ok(super::failed(action_id, &error)),
        }
    })?
}

/// The description's long-running actions, by name: an action id is one of theirs.
fn long_running(described: &Described) -> Vec<&str> {
    described
        .names_of(super::Kind::Action)
        .into_iter()
        .filter(|name| {
            matches!(
                described.affordance(name),
                Some(Affordance::Action {
                    mode: InteractionMode::Progress,
                    ..
                })
            )
        })
        .collect()
}

/// Cancels the action `action_id` (`action`, of the peer at `url`) over `connection` after
/// an interrupt, saying so on standard error; the next press of `interrupts` gives up at
/// once, saying the action may run on. Exit code 130 either way (interrupted).
pub async fn cancel_on_interrupt(
    connection: &Connection,
    (url, action): (&str, &str),
    action_id: &str,
    interrupts: &mut Interrupts,
) -> ExitCode {
    output::note(format_args!(
        "interrupted: cancelling {action} (action {action_id}); Ctrl-C again to exit at once"
    ));
    tokio::select! {
        cancelled = connection.cancel_action(action_id) => match cancelled {
            Ok(_) => output::note(format_args!("{action}: cancelled (action {action_id})")),
            Err(error) => output::note(format_args!(
                "{action}: cannot cancel action {action_id}: {}; {}",
                crate::call::error_text(&error),
                may_run_on(url, Some(action_id))
            )),
        },
        () = interrupts.next() => output::note(format_args!(
            "{action}: not waiting for the cancellation of action {action_id}; {}",
            may_run_on(url, Some(action_id))
        )),
    }
    ExitCode::from(INTERRUPTED)
}

/// What a user is told of an action left running: it may run on until its lease ends,
/// and how to cancel it (with its id, when known).
pub fn may_run_on(url: &str, action_id: Option<&str>) -> String {
    format!(
        "it may run on until its lease ends; `concord cancel {url} {}` stops it",
        action_id.unwrap_or("ACTION_ID")
    )
}

/// The exit code after Ctrl-C (128 + SIGINT, as a shell reports an interrupted command).
pub const INTERRUPTED: u8 = 130;
