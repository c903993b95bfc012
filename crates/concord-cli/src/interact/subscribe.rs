//! `concord subscribe URL NAME`: an event's notifications (or an observed property's
//! changes) as JSON lines until Ctrl-C; a dropped connection is reconnected (0-RTT) and
//! the subscription resumed after the last event seen.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use concord_node::{CallError, Connection, Node, Notification, Settlement, Subscription};
use serde_json::{json, Value};

use super::PeerArgs;
use crate::output::{self, outln};

/// Longest wait between two reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// `concord subscribe`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  concord subscribe http://127.0.0.1:8080 userFeedbackReceived
  concord subscribe http://127.0.0.1:8080 userFeedbackReceived --from 41 --count 10
  concord subscribe http://127.0.0.1:8080 modelConfiguration --property

Each notification is one JSON line on standard output:
  {\"event\": NAME, \"id\": N, \"data\": …}          an event (each event's ids go up by 1)
  {\"gap\": {\"event\": NAME, \"from\": A, \"to\": B}}  events A..=B are lost to us (the
                                                 provider's replay buffer no longer holds them)
  {\"property\": NAME, \"id\": N, \"value\": …}      an observed property's new value

It runs until Ctrl-C (exit 0), or --count notifications. When the connection drops it
reconnects (resuming the stored protocol with 0-RTT), waiting --reconnect-delay, doubled
after each failure up to 5 s, at most --reconnect-attempts times in a row, and resumes an
event subscription after the last id seen (a property is observed afresh). A provider that
restarted numbers its events above every id it used before (they start from its clock):
the resumed subscription starts with a gap line for the ids between the last one seen and
its first event (what it published before it restarted and we did not see is lost). A
provider whose numbering went back (its clock was stepped back, or it numbers its events
from 1 again) refuses to resume after an id it never reached: the event is then followed
afresh, from the provider's current position, and a line on standard error says so (what
it published in between is lost to us, as after a gap).

Exit codes: 0 stopped (Ctrl-C, --count); 1 the peer refused (no such event or property);
2 the peer could not be reached, or the reconnections failed.")]
pub struct SubscribeArgs {
    #[command(flatten)]
    peer: PeerArgs,
    /// The event (or, with --property, the property) to follow. A name the description
    /// has only as a property is observed as one.
    name: String,
    /// Resume after this event id: every event after it is replayed (or a gap says
    /// which are lost).
    #[arg(long, value_name = "ID")]
    from: Option<u64>,
    /// Observe the property NAME: a line per change.
    #[arg(long, conflicts_with = "from")]
    property: bool,
    /// Stop after N notifications.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// Reconnection attempts in a row after the connection drops (0: do not reconnect).
    #[arg(long, value_name = "N", default_value_t = 10)]
    reconnect_attempts: u32,
    /// The first wait before reconnecting (doubled after each failed attempt, up to 5 s).
    #[arg(long, value_name = "DURATION", default_value = "200ms",
          value_parser = humantime::parse_duration)]
    reconnect_delay: Duration,
}

/// What is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Event,
    Property,
}

/// Runs `concord subscribe`.
pub fn run(mut args: SubscribeArgs) -> anyhow::Result<ExitCode> {
    args.peer.settle()?;
    let node = super::requester(&args.peer)?;
    crate::runtime::block_on(async move {
        tokio::select! {
            exit = subscribe(&node, &args) => exit,
            _ = tokio::signal::ctrl_c() => Ok(ExitCode::SUCCESS),
        }
    })?
}

async fn subscribe(node: &Node, args: &SubscribeArgs) -> anyhow::Result<ExitCode> {
    let described = super::describe(node, &args.peer.url).await?;
    // A name the description has only as a property is observed as one.
    let property_only = !described.has_event(&args.name) && described.has_property(&args.name);
    let target = if args.property || property_only {
        Target::Property
    } else {
        Target::Event
    };
    described.require(
        &args.name,
        match target {
            Target::Event => super::Kind::Event,
            Target::Property => super::Kind::Property,
        },
    )?;
    let mut last_seen = args.from;
    let mut printed = 0u64;
    let mut reconnected = false;
    let names = [args.name.as_str()];
    let mut connection =
        match super::connect_described(node, &args.peer.url, &described, &names).await {
            Ok(connection) => connection,
            Err(code) => return Ok(code),
        };
    loop {
        let mut subscription = match follow(&connection, target, &args.name, last_seen).await {
            Ok(subscription) => subscription,
            Err(CallError::Closed(_)) => match reconnect(node, args, last_seen).await? {
                Some(again) => {
                    connection = again;
                    reconnected = true;
                    continue;
                }
                None => return Ok(ExitCode::from(2)),
            },
            // After a reconnect, the provider's ids are below the last one seen (a clock
            // stepped back, a provider that numbers its events from 1): follow afresh.
            Err(CallError::Remote { code: 409, .. })
                if reconnected && target == Target::Event && last_seen.is_some() =>
            {
                let seen = last_seen.unwrap_or_default();
                output::note(format_args!(
                    "gap: the provider's ids for `{}` went back (it never reached id {seen}): \
                     following from its current position; what it published since it went back \
                     is lost to us",
                    args.name
                ));
                last_seen = None;
                continue;
            }
            Err(error) => return Ok(super::failed(&args.name, &error)),
        };
        while let Some(notification) = subscription.next().await {
            outln!("{}", notification_line(&notification))?;
            crate::output::flush()?;
            if let Notification::Event { id, .. } | Notification::Gap { to: id, .. } = notification
            {
                last_seen = Some(id);
            }
            printed += 1;
            if args.count.is_some_and(|count| printed >= count) {
                drop(subscription);
                connection.close().await;
                return Ok(ExitCode::SUCCESS);
            }
        }
        match reconnect(node, args, last_seen).await? {
            Some(again) => {
                connection = again;
                reconnected = true;
            }
            None => return Ok(ExitCode::from(2)),
        }
    }
}

/// Subscribes to the event (after `last_seen`) or observes the property.
async fn follow(
    connection: &Connection,
    target: Target,
    name: &str,
    last_seen: Option<u64>,
) -> Result<Subscription, CallError> {
    match target {
        Target::Event => connection.subscribe(name, last_seen).await,
        Target::Property => connection.observe_property(name).await,
    }
}

/// Reconnects after the connection dropped, with backoff; `None` once the attempts are
/// spent (said on standard error).
async fn reconnect(
    node: &Node,
    args: &SubscribeArgs,
    last_seen: Option<u64>,
) -> anyhow::Result<Option<Connection>> {
    let resume = last_seen.map_or_else(String::new, |id| format!(", resuming after id {id}"));
    output::note(format_args!("the connection dropped; reconnecting{resume}"));
    let mut delay = args.reconnect_delay;
    for attempt in 1..=args.reconnect_attempts {
        tokio::time::sleep(delay).await;
        // The description again (the provider may have restarted with another), then the
        // same whole interface as the first connection: the stored protocol resumes.
        let connected = match node.describe(&args.peer.url).await {
            Ok(peer) => {
                let described = super::Described::new(peer);
                super::whole_interface(node, &described, &[args.name.as_str()]).await
            }
            Err(error) => Err(error),
        };
        match connected {
            Ok(connection) => {
                let how = if connection.info().settlement == Settlement::Resumed {
                    "0-RTT resume"
                } else {
                    "negotiated again"
                };
                output::note(format_args!("reconnected ({how}, attempt {attempt})"));
                return Ok(Some(connection));
            }
            Err(error) => {
                output::note(format_args!(
                    "reconnection attempt {attempt} of {}: {error}",
                    args.reconnect_attempts
                ));
            }
        }
        delay = (delay * 2).min(MAX_BACKOFF);
    }
    output::note(format_args!(
        "gave up after {} reconnection attempts",
        args.reconnect_attempts
    ));
    Ok(None)
}

/// One notification as a JSON line.
pub fn notification_line(notification: &Notification) -> Value {
    match notification {
        Notification::Event { event, id, data } => {
            json!({"event": event, "id": id, "data": data})
        }
        Notification::Gap { event, from, to } => {
            json!({"gap": {"event": event, "from": from, "to": to}})
        }
        Notification::PropertyChanged { name, id, value } => {
            json!({"property": name, "id": id, "value": value})
        }
        _ => json!({"unknown": format!("{notification:?}")}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_become_json_lines() {
        let event = Notification::Event {
            event: "fed".to_owned(),
            id: 3,
            data: json!({"rating": 5}),
        };
        assert_eq!(
            notification_line(&event),
            json!({"event": "fed", "id": 3, "data": {"rating": 5}})
        );
        let gap = Notification::Gap {
            event: "fed".to_owned(),
            from: 1,
            to: 2,
        };
        assert_eq!(
            notification_line(&gap),
            json!({"gap": {"event": "fed", "from": 1, "to": 2}})
        );
        let change = Notification::PropertyChanged {
            name: "model".to_owned(),
            id: 1,
            value: json!("x"),
        };
        assert_eq!(
            notification_line(&change),
            json!({"property": "model", "id": 1, "value": "x"})
        );
    }
}
