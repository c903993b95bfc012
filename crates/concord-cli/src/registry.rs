//! `concord registry add|list|remove`: the consensus registry, protocols known by URI and
//! usable with no negotiation when both agents hold them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::bail;
use clap::{Args, Subcommand};
use concord_handlers::{GenerateError, Generated, Generator};
use concord_negotiate::ActionSpec;
use concord_proto::Role;
use concord_store::NewConsensus;
use serde_json::{json, Value};

use crate::consensus;
use crate::data_dir::DataDir;
use crate::input::{read_action, read_protocol};
use crate::llm;
use crate::logging::error_line;
use crate::output::{self, checked, note, outln, Wrong};
use crate::protocols::{integrity, list_or_none, roles, time};
use crate::runtime;

/// `concord registry`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  concord registry add https://protocols.example/product-info/1.0 product-info.md --action getProductInfo
  concord registry list --json
  concord registry remove https://protocols.example/product-info/1.0")]
pub struct RegistryArgs {
    #[command(flatten)]
    data_dir: DataDir,
    #[command(subcommand)]
    command: RegistryCommand,
}

/// Commands on the consensus registry.
#[derive(Debug, Subcommand)]
pub enum RegistryCommand {
    /// Register a protocol document under a URI, with our handler code for it.
    ///
    /// The requester's module (for `concord call`) is always generated and checked; with
    /// `--action-schema`, the provider's module for that action too (`concord serve` writes
    /// its own for the protocols in its configuration). A peer that publishes the same URI
    /// with the same hash is then called with no negotiation.
    #[command(after_help = "\
Examples:
  concord registry add https://protocols.example/product-info/1.0 product-info.md --action getProductInfo
  concord registry add https://protocols.example/product-info/1.0 product-info.md --action-schema action.json")]
    Add {
        /// The protocol's URI, as peers name it.
        uri: String,
        /// The protocol document (markdown).
        document: PathBuf,
        /// The action the protocol calls, when the document does not fix it.
        #[arg(long)]
        action: Option<String>,
        /// The action we serve with it, as JSON `{"name", "description"?, "input", "output"}`:
        /// also generate the provider's module.
        #[arg(long, value_name = "FILE")]
        action_schema: Option<PathBuf>,
        /// Let an LLM write a module no template fits (CONCORD_LLM_* or OPENAI_*).
        #[arg(long)]
        llm: bool,
    },
    /// List the registered protocols.
    #[command(after_help = "\
Examples:
  concord registry list
  concord registry list --json")]
    List {
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Remove a protocol from the registry.
    #[command(after_help = "\
Examples:
  concord registry remove https://protocols.example/product-info/1.0")]
    Remove {
        /// The protocol's URI.
        uri: String,
    },
}

/// Runs one `concord registry` command.
pub fn run(args: RegistryArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        RegistryCommand::Add {
            uri,
            document,
            action,
            action_schema,
            llm,
        } => add(
            &args.data_dir,
            &uri,
            &document,
            action,
            action_schema.as_deref(),
            llm,
        ),
        RegistryCommand::List { json } => {
            let store = args.data_dir.open()?;
            let entries = store.list_consensus()?;
            if json {
                let list: Vec<Value> = entries
                    .iter()
                    .map(|entry| {
                        json!({
                            "uri": entry.uri,
                            "hash": entry.hash.to_string(),
                            "integrity": integrity(&entry.integrity),
                            "handlers": roles(&entry.handler_roles),
                            "documentBytes": entry.document_len,
                            "added": time(entry.added),
                        })
                    })
                    .collect();
                output::json(&list)?;
                return Ok(ExitCode::SUCCESS);
            }
            if entries.is_empty() {
                note(format!(
                    "no consensus protocols registered in {}",
                    store.path().display()
                ));
                return Ok(ExitCode::SUCCESS);
            }
            outln!("{:<12}  {:<20}  {:<19}  uri", "hash", "added", "handlers")?;
            for entry in &entries {
                let hash = entry.hash.to_string();
                let handlers = if entry.integrity.is_verified() {
                    list_or_none(&roles(&entry.handler_roles))
                } else {
                    "CORRUPT".to_owned()
                };
                outln!(
                    "{:<12}  {:<20}  {handlers:<19}  {}",
                    &hash[..12],
                    time(entry.added),
                    entry.uri
                )?;
            }
            Ok(ExitCode::SUCCESS)
        }
        RegistryCommand::Remove { uri } => {
            let store = args.data_dir.open()?;
            if store.remove_consensus(&uri)? {
                outln!("removed {uri}")?;
                Ok(ExitCode::SUCCESS)
            } else {
                Err(Wrong::error(format!(
                    "no consensus protocol is registered as {uri:?}"
                )))
            }
        }
    }
}

/// `registry add`: generates and checks the handler modules, then registers the document.
fn add(
    data_dir: &DataDir,
    uri: &str,
    path: &Path,
    action: Option<String>,
    action_schema: Option<&Path>,
    llm: bool,
) -> anyhow::Result<ExitCode> {
    if uri.trim().is_empty() {
        bail!("the URI is empty");
    }
    let document = match read_protocol(path)? {
        Ok(document) => document,
        Err(code) => return Ok(code),
    };
    let served: Option<ActionSpec> = action_schema
        .map(read_action)
        .transpose()
        .map_err(checked)?;
    let action = action.or_else(|| served.as_ref().map(|spec| spec.name.clone()));
    if consensus::fixed_action(&document).is_none() && action.is_none() {
        bail!(
            "{} does not fix the action's name (no `const` for `action`): pass --action NAME",
            path.display()
        );
    }
    let mut generator = Generator::new();
    if llm {
        generator = generator.with_llm(llm::client()?);
    }
    let store = data_dir.open()?;
    let generated = runtime::block_on(async {
        let requester = consensus::requester_module(&generator, &document, action.as_deref()).await;
        let provider = match &served {
            Some(spec) => Some(
                consensus::provider_module(&generator, &document, std::slice::from_ref(spec)).await,
            ),
            None => None,
        };
        (requester, provider)
    })?;
    let mut entry = NewConsensus::new(uri, document.text());
    let mut written = Vec::new();
    for (role, module) in [
        (Role::Requester, Some(generated.0)),
        (Role::Provider, generated.1),
    ] {
        match module {
            Some(Ok(module)) => {
                report(role, &module);
                entry = entry.with_handler(role, module.source);
                written.push(role.name().to_owned());
            }
            Some(Err(error)) => {
                let line = format!(
                    "cannot write the {} module: {}",
                    role.name(),
                    error_line(&error)
                );
                return Err(if llm_failed(&error) {
                    anyhow::anyhow!("{line}")
                } else {
                    Wrong::error(line)
                });
            }
            None => {}
        }
    }
    let hash = store.add_consensus(&entry)?;
    outln!(
        "registered {uri}: {hash} (handler code: {})",
        written.join(", ")
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Whether a module could not be written because the LLM could not be asked (exit 2), not
/// because the document is wrong (exit 1).
fn llm_failed(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<GenerateError>(),
            Some(GenerateError::Llm { .. } | GenerateError::Prompt(_))
        )
    })
}

/// Says on standard error, on one line, who wrote a module and what checked it.
fn report(role: Role, module: &Generated) {
    let checked = match module.cases_run {
        0 => "loaded".to_owned(),
        cases => format!("passes {cases} test case(s) drafted from its schemas"),
    };
    note(format!(
        "{} module written by the {}; {checked}",
        role.name(),
        module.origin
    ));
}
