//! `concord`: the command-line front end of the Concord agent runtime.
//!
//! Each command group lives in its own module, which exposes a clap
//! `Subcommand` enum and a `run` function returning the process exit code.
//! Exit codes: 0 success, 1 the input was checked and found wrong (invalid
//! document, failed test, missing reference: an `output::Wrong` error, or a command's own
//! `ExitCode`), 2 the command could not run (bad arguments, unreadable file, an LLM or peer
//! that cannot be reached: any other error). Every error is one line on standard error,
//! `concord: …` (`output::note`). A reader that goes away (`concord … | head`) ends
//! any command quietly with 0, as it ends other Unix tools.
#![deny(clippy::print_stdout)] // standard output goes through `output` (see there)

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod agent_config;
mod aicl;
mod call;
mod caller;
mod consensus;
mod context;
mod data_dir;
mod demo;
mod describe;
mod directory;
mod directory_config;
mod discovery_config;
mod find;
mod find_mdns;
mod handler;
mod identity;
mod input;
mod interact;
mod llm;
mod llm_check;
mod logging;
mod output;
mod protocol;
mod protocols;
mod registry;
mod runtime;
mod serve;
mod session_report;
mod target;
mod transcripts;

/// Concord: agents that negotiate the protocol they speak.
#[derive(Debug, Parser)]
#[command(name = "concord", version, about, long_about = None, after_help = "\
Examples:
  concord demo                     # two agents on loopback: discover, negotiate, 1,000 calls
  concord serve --config crates/concord-cli/examples/product-agent.toml
  concord call http://127.0.0.1:8080 getProductInfo '{\"productId\": \"P12345\"}'
  concord subscribe http://127.0.0.1:8080 userFeedbackReceived
  concord find --directory http://127.0.0.1:8081 --action getProductInfo
  concord call --directory http://127.0.0.1:8081 --find getProductInfo getProductInfo '{\"productId\": \"P1\"}'
  concord protocols list           # what was negotiated, by hash
  concord identity show            # this agent's DID

Every command's --help has examples. Exit codes: 0 done; 1 the input was checked and found
wrong (or the peer said no); 2 the command could not run.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Convert between AICL and JSON, and check AICL messages.
    #[command(
        subcommand,
        after_help = "\
Examples:
  concord aicl encode message.json --pretty
  concord aicl check request.aicl --reply",
        after_long_help = aicl::long_help()
    )]
    Aicl(aicl::AiclCommand),
    /// Render data-message contexts for an LLM and resolve `†` variables.
    #[command(
        subcommand,
        after_help = "\
Examples:
  concord context render context.json
  concord context get context.json '†user.name'",
        after_long_help = context::long_help()
    )]
    Context(context::ContextCommand),
    /// Validate and write agent descriptions (LMOS Agent Description Format, WoT TD 1.1).
    #[command(
        subcommand,
        after_help = "\
Examples:
  concord describe validate weather-agent.json
  concord describe new --title WeatherAgent --endpoint wss://weather.example.com/concord"
    )]
    Describe(describe::DescribeCommand),
    /// Generate, run and test protocol handler modules (sandboxed JavaScript).
    #[command(
        subcommand,
        after_help = "\
Examples:
  concord handler generate product-info.md --role provider --action-schema action.json
  concord handler test product-info.md cases.md"
    )]
    Handler(handler::HandlerCommand),
    /// Check an OpenAI-compatible LLM server: its models, structured output, speed.
    #[command(
        subcommand,
        after_help = "\
Examples:
  concord llm check --base-url http://127.0.0.1:11434/v1 --model llama3.2"
    )]
    Llm(llm_check::LlmCommand),
    /// Work with protocol documents (candidate protocols).
    #[command(
        subcommand,
        after_help = "\
Examples:
  concord protocol draft --description peer.json --action getProductInfo > candidate.md
  concord protocol judge --description ours.json candidate.md
  concord protocol hash candidate.md"
    )]
    Protocol(protocol::ProtocolCommand),
    /// Run an agent node serving the actions of a configuration file.
    Serve(serve::ServeArgs),
    /// Find agents in a W3C WoT Discovery directory: by action, property, event, schema
    /// field, consensus protocol, DID, or JSONPath.
    Find(find::FindArgs),
    /// Run a W3C WoT Discovery directory where agents register and are found.
    #[command(
        subcommand,
        after_help = "\
Examples:
  concord directory serve --listen 127.0.0.1:8081 --data-dir ./directory-data
  concord directory serve --config directory.toml --require-signatures"
    )]
    Directory(directory::DirectoryCommand),
    /// Call a peer agent's action: discover, negotiate (or resume with 0-RTT), call.
    Call(call::CallArgs),
    /// Follow a peer's event (or observed property) as JSON lines, reconnecting when it drops.
    Subscribe(interact::subscribe::SubscribeArgs),
    /// Pipe standard input through a peer's stream action to standard output.
    Stream(interact::stream::StreamArgs),
    /// Read a peer's property.
    Read(interact::property::ReadArgs),
    /// Write a peer's property.
    Write(interact::property::WriteArgs),
    /// Show the status of a peer's long-running action by its id.
    Status(interact::action::StatusArgs),
    /// Cancel a peer's long-running action by its id.
    Cancel(interact::action::CancelArgs),
    /// Watch two agents find each other, negotiate, generate and verify code, and talk.
    Demo(demo::DemoArgs),
    /// List, show and forget the protocols negotiated and stored.
    Protocols(protocols::ProtocolsArgs),
    /// Register, list and remove consensus protocols (known by URI, used with no negotiation).
    Registry(registry::RegistryArgs),
    /// List, show and prune the sessions' transcripts (hellos and negotiation frames).
    Transcripts(transcripts::TranscriptsArgs),
    /// Create and show the agent's DID identity (did:wba), and export its DID document.
    Identity(identity::IdentityArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse_from(target::with_found_target(std::env::args_os().collect())) {
        Ok(cli) => cli,
        Err(error) => return usage_error(&error),
    };
    let outcome = match cli.command {
        Command::Aicl(command) => aicl::run(command),
        Command::Context(command) => context::run(command),
        Command::Describe(command) => describe::run(command),
        Command::Handler(command) => handler::run(command),
        Command::Llm(command) => llm_check::run(command),
        Command::Protocol(command) => protocol::run(command),
        Command::Serve(args) => serve::run(args),
        Command::Find(args) => find::run(args),
        Command::Directory(command) => directory::run(command),
        Command::Call(args) => call::run(args),
        Command::Subscribe(args) => interact::subscribe::run(args),
        Command::Stream(args) => interact::stream::run(args),
        Command::Read(args) => interact::property::read(args),
        Command::Write(args) => interact::property::write(args),
        Command::Status(args) => interact::action::status(args),
        Command::Cancel(args) => interact::action::cancel(args),
        Command::Demo(args) => demo::run(args),
        Command::Protocols(args) => protocols::run(args),
        Command::Registry(args) => registry::run(args),
        Command::Transcripts(args) => transcripts::run(args),
        Command::Identity(args) => identity::run(args),
    };
    match outcome.and_then(|code| Ok(output::flush().map(|()| code)?)) {
        Ok(code) => code,
        Err(error) if output::is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            output::note(logging::error_line(&error));
            output::exit_code(&error)
        }
    }
}

/// Help and version go to standard output (exit 0); an argument error is one line on
/// standard error naming the problem and where to get help (exit 2: nothing was run).
fn usage_error(error: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = error.print();
        return if error.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        };
    }
    let rendered = error.render().to_string();
    // The message, and any lines under it up to the usage (missing arguments, tips).
    let message: Vec<&str> = rendered
        .lines()
        .take_while(|line| !line.starts_with("Usage:"))
        .filter(|line| !line.contains("For more information"))
        .collect();
    let message = output::one_line(&message.join("\n"));
    let first = message.strip_prefix("error: ").unwrap_or(&message);
    let help = rendered
        .lines()
        .rev()
        .find(|line| line.contains("--help"))
        .map(|line| {
            let hint = line.trim().trim_end_matches('.');
            format!(" ({})", hint.replace("For more information, try", "try"))
        })
        .unwrap_or_default();
    output::note(format!("{first}{help}"));
    ExitCode::from(2)
}
