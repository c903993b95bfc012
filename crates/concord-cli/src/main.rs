//! `concord`: the command-line front end of the Concord agent runtime.
//!
//! Each command group lives in its own module, which exposes a clap
//! `Subcommand` enum and a `run` function returning the process exit code.
//! Exit codes: 0 success, 1 the input was checked and found wrong (invalid
//! document, failed test, missing reference), 2 the command could not run
//! (bad arguments, unreadable file).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod agent_config;
mod aicl;
mod call;
mod consensus;
mod context;
mod data_dir;
mod demo;
mod describe;
mod handler;
mod input;
mod logging;
mod protocol;
mod protocols;
mod registry;
mod runtime;
mod serve;
mod session_report;

/// Concord: agents that negotiate the protocol they speak.
#[derive(Debug, Parser)]
#[command(name = "concord", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Convert between AICL and JSON, and check AICL messages.
    #[command(subcommand)]
    Aicl(aicl::AiclCommand),
    /// Render data-message contexts for an LLM and resolve `†` variables.
    #[command(subcommand)]
    Context(context::ContextCommand),
    /// Validate and write agent descriptions (LMOS Agent Description Format, WoT TD 1.1).
    #[command(subcommand)]
    Describe(describe::DescribeCommand),
    /// Generate, run and test protocol handler modules (sandboxed JavaScript).
    #[command(subcommand)]
    Handler(handler::HandlerCommand),
    /// Work with protocol documents (candidate protocols).
    #[command(subcommand)]
    Protocol(protocol::ProtocolCommand),
    /// Run an agent node serving the actions of a configuration file.
    Serve(serve::ServeArgs),
    /// Call a peer agent's action: discover, negotiate (or resume with 0-RTT), call.
    Call(call::CallArgs),
    /// Watch two agents find each other, negotiate, generate and verify code, and talk.
    Demo(demo::DemoArgs),
    /// List, show and forget the protocols negotiated and stored.
    Protocols(protocols::ProtocolsArgs),
    /// Register, list and remove consensus protocols (known by URI, used with no negotiation).
    Registry(registry::RegistryArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Aicl(command) => aicl::run(command),
        Command::Context(command) => context::run(command),
        Command::Describe(command) => describe::run(command),
        Command::Handler(command) => handler::run(command),
        Command::Protocol(command) => protocol::run(command),
        Command::Serve(args) => serve::run(args),
        Command::Call(args) => call::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Protocols(args) => protocols::run(args),
        Command::Registry(args) => registry::run(args),
    };
    match outcome {
        Ok(code) => code,
        Err(error) => {
            eprintln!("concord: {error:#}");
            ExitCode::from(2)
        }
    }
}
