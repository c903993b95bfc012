//! `concord protocols list|show|forget`: the negotiated protocols in the store, by hash
//! prefix.

use std::process::ExitCode;
use std::time::SystemTime;

use clap::{Args, Subcommand};
use concord_proto::Role;
use concord_store::{Integrity, Settlement, StoreError};
use serde_json::{json, Value};

use crate::data_dir::DataDir;
use crate::handler::RoleArg;
use crate::output::{self, out, outln};

/// `concord protocols`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  concord protocols list
  concord protocols show 40340f2e --document > product-info.md
  concord protocols forget 40340f2e")]
pub struct ProtocolsArgs {
    #[command(flatten)]
    data_dir: DataDir,
    #[command(subcommand)]
    command: ProtocolsCommand,
}

/// Commands on the stored protocols.
#[derive(Debug, Subcommand)]
pub enum ProtocolsCommand {
    /// List the stored protocols, most recently created first, each with the peer it was
    /// most recently used with (and how many others hold it).
    ///
    /// `resumed` counts the sessions that reused a stored protocol with 0-RTT (no
    /// negotiation); the session that negotiated it, and sessions settled by a consensus
    /// protocol, are not counted. `last resumed` is the latest of them.
    #[command(after_help = "\
Examples:
  concord protocols list
  concord protocols list --json")]
    List {
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Show one protocol: its metadata (every peer it was saved for or used with, the most
    /// recent first; how often it was resumed with 0-RTT) and document (or a handler
    /// module, or its test cases).
    #[command(after_help = "\
Examples:
  concord protocols show 40340f2e
  concord protocols show 40340f2e --document > product-info.md
  concord protocols show 40340f2e --handler requester
  concord protocols show 40340f2e --test-cases")]
    Show {
        /// The protocol's hash, or a unique prefix of at least 8 hex digits.
        hash: String,
        /// Print the document alone, byte for byte (saved to a file, it hashes to the
        /// protocol's hash).
        #[arg(long, conflicts_with_all = ["handler", "test_cases"])]
        document: bool,
        /// Print this side's handler module instead of the document.
        #[arg(long, value_enum, conflicts_with = "test_cases")]
        handler: Option<RoleArg>,
        /// Print the agreed test cases instead of the document.
        #[arg(long)]
        test_cases: bool,
        /// Print everything as one JSON object.
        #[arg(long, conflicts_with_all = ["document", "handler", "test_cases"])]
        json: bool,
    },
    /// Forget a protocol and its peers: it is no longer offered for 0-RTT, so the next
    /// connection to its peers negotiates again.
    #[command(after_help = "\
Examples:
  concord protocols forget 40340f2e")]
    Forget {
        /// The protocol's hash, or a unique prefix of at least 8 hex digits.
        hash: String,
    },
}

/// Runs one `concord protocols` command.
pub fn run(args: ProtocolsArgs) -> anyhow::Result<ExitCode> {
    let store = args.data_dir.open()?;
    match args.command {
        ProtocolsCommand::List { json } => {
            let protocols = store.list_protocols()?;
            if json {
                let list: Vec<Value> = protocols
                    .iter()
                    .map(|protocol| {
                        json!({
                            "hash": protocol.hash.to_string(),
                            "integrity": integrity(&protocol.integrity),
                            "action": protocol.action,
                            "peers": protocol.peers,
                            "settlement": settlement(&protocol.settlement),
                            "handlers": roles(&protocol.handler_roles),
                            "testCases": protocol.has_test_cases,
                            "documentBytes": protocol.document_len,
                            "created": time(protocol.created),
                            "lastResumed": protocol.last_used.map(time),
                            "resumed": protocol.use_count,
                        })
                    })
                    .collect();
                output::json(&list)?;
                return Ok(ExitCode::SUCCESS);
            }
            if protocols.is_empty() {
                eprintln!("concord: no protocols stored in {}", store.path().display());
                return Ok(ExitCode::SUCCESS);
            }
            outln!(
                "{:<12}  {:<10}  {:>7}  {:<20}  {:<20}  peers",
                "hash",
                "settled",
                "resumed",
                "created",
                "last resumed"
            )?;
            for protocol in &protocols {
                let hash = protocol.hash.to_string();
                let settled = if protocol.integrity.is_verified() {
                    settled_kind(&protocol.settlement)
                } else {
                    "CORRUPT"
                };
                outln!(
                    "{:<12}  {settled:<10}  {:>7}  {:<20}  {:<20}  {}",
                    &hash[..12],
                    protocol.use_count,
                    time(protocol.created),
                    protocol.last_used.map_or_else(|| "never".to_owned(), time),
                    peers_in_brief(&protocol.peers)
                )?;
            }
            Ok(ExitCode::SUCCESS)
        }
        ProtocolsCommand::Show {
            hash,
            document,
            handler,
            test_cases,
            json,
        } => {
            let protocol = match store.resolve_protocol(&hash).and_then(|hash| {
                store
                    .protocol(&hash)?
                    .ok_or(StoreError::UnknownProtocol { hash })
            }) {
                Ok(protocol) => protocol,
                Err(error) => return selector_failed(error),
            };
            if let Some(role) = handler {
                let role = match role {
                    RoleArg::Requester => Role::Requester,
                    RoleArg::Provider => Role::Provider,
                };
                return Ok(match protocol.handlers.get(role) {
                    Some(source) => {
                        out!("{source}")?;
                        ExitCode::SUCCESS
                    }
                    None => {
                        eprintln!(
                            "concord: no {} handler module is stored for {}",
                            role.name(),
                            protocol.hash
                        );
                        ExitCode::from(1)
                    }
                });
            }
            if document {
                out!("{}", protocol.document)?;
                return Ok(ExitCode::SUCCESS);
            }
            if test_cases {
                return Ok(match &protocol.test_cases {
                    Some(cases) => {
                        out!("{cases}")?;
                        ExitCode::SUCCESS
                    }
                    None => {
                        eprintln!("concord: no test cases are stored for {}", protocol.hash);
                        ExitCode::from(1)
                    }
                });
            }
            let handler_roles: Vec<Role> = [Role::Requester, Role::Provider]
                .into_iter()
                .filter(|role| protocol.handlers.get(*role).is_some())
                .collect();
            if json {
                let output = json!({
                    "hash": protocol.hash.to_string(),
                    "action": protocol.action,
                    "peers": protocol.peers,
                    "settlement": settlement(&protocol.settlement),
                    "created": time(protocol.created),
                    "lastResumed": protocol.last_used.map(time),
                    "resumed": protocol.use_count,
                    "document": protocol.document,
                    "handlers": {
                        "requester": protocol.handlers.get(Role::Requester),
                        "provider": protocol.handlers.get(Role::Provider),
                    },
                    "testCases": protocol.test_cases,
                });
                output::json(&output)?;
                return Ok(ExitCode::SUCCESS);
            }
            let settled = match &protocol.settlement {
                Settlement::Consensus { uri } => format!("consensus protocol {uri}"),
                _ => "negotiated".to_owned(),
            };
            outln!("hash:        {}", protocol.hash)?;
            outln!("settled:     {settled}")?;
            outln!(
                "action:      {}",
                protocol.action.as_deref().unwrap_or("not recorded")
            )?;
            match protocol.peers.split_first() {
                None => outln!("peers:       none")?,
                Some((latest, older)) => {
                    outln!("peers:       {latest}")?;
                    for peer in older {
                        outln!("             {peer}")?;
                    }
                }
            }
            outln!("created:     {}", time(protocol.created))?;
            outln!(
                "resumed:     {}",
                resumed(protocol.use_count, protocol.last_used)
            )?;
            outln!("handlers:    {}", list_or_none(&roles(&handler_roles)))?;
            outln!(
                "test cases:  {}",
                if protocol.test_cases.is_some() {
                    "stored (--test-cases)"
                } else {
                    "none"
                }
            )?;
            outln!()?;
            out!("{}", protocol.document)?;
            if !protocol.document.ends_with('\n') {
                outln!()?;
            }
            Ok(ExitCode::SUCCESS)
        }
        ProtocolsCommand::Forget { hash } => match store.forget_protocol(&hash) {
            Ok(hash) => {
                outln!("forgot {hash}")?;
                Ok(ExitCode::SUCCESS)
            }
            Err(error) => selector_failed(error),
        },
    }
}

/// How often a stored protocol was reused with 0-RTT, and when last: `never (…)`, `once with
/// 0-RTT, last <time>`, `N times with 0-RTT, last <time>` (the negotiating session itself is
/// not a resumption).
fn resumed(count: u64, last: Option<SystemTime>) -> String {
    let times = match count {
        0 => return "never (0-RTT reuses; the negotiating session is not counted)".to_owned(),
        1 => "once".to_owned(),
        count => format!("{count} times"),
    };
    match last {
        Some(last) => format!("{times} with 0-RTT, last {}", time(last)),
        None => format!("{times} with 0-RTT"),
    }
}

/// Exit 1 for a selector that names no single stored protocol (or a corrupt one); other
/// store failures mean the command could not run.
fn selector_failed(error: StoreError) -> anyhow::Result<ExitCode> {
    match error {
        StoreError::NoMatchingProtocol { .. }
        | StoreError::AmbiguousPrefix { .. }
        | StoreError::PrefixTooShort { .. }
        | StoreError::NotAHashPrefix { .. }
        | StoreError::UnknownProtocol { .. }
        | StoreError::CorruptProtocol { .. } => {
            crate::output::note(&error);
            Ok(ExitCode::from(1))
        }
        other => Err(other.into()),
    }
}

/// A time for people and JSON: RFC 3339 in UTC, to the second.
pub fn time(at: SystemTime) -> String {
    humantime::format_rfc3339_seconds(at).to_string()
}

/// `verified`, or what is wrong.
pub fn integrity(integrity: &Integrity) -> String {
    match integrity {
        Integrity::Verified => "verified".to_owned(),
        Integrity::Corrupt(corruption) => format!("corrupt: {corruption}"),
    }
}

/// Role names.
pub fn roles(roles: &[Role]) -> Vec<String> {
    roles.iter().map(|role| role.name().to_owned()).collect()
}

/// A protocol's peers on one line: the most recent, and how many others (`concord
/// protocols show` lists them all).
fn peers_in_brief(peers: &[String]) -> String {
    match peers {
        [] => "none".to_owned(),
        [only] => only.clone(),
        [latest, others @ ..] => format!("{latest} (+{} more)", others.len()),
    }
}

/// `a, b`, or `none`.
pub fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}

/// `negotiated` or `consensus`.
fn settled_kind(settlement: &Settlement) -> &'static str {
    match settlement {
        Settlement::Consensus { .. } => "consensus",
        _ => "negotiated",
    }
}

/// `{"kind"}`, with the `uri` of a consensus protocol.
fn settlement(settlement: &Settlement) -> Value {
    let mut value = json!({"kind": settled_kind(settlement)});
    if let Settlement::Consensus { uri } = settlement {
        value["uri"] = json!(uri);
    }
    value
}
