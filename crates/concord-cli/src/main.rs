//! `concord`: the command-line front end of the Concord agent runtime.
//!
//! Each command group lives in its own module, which exposes a clap
//! `Subcommand` enum and a `run` function returning the process exit code.
//! Exit codes: 0 success, 1 the input was checked and found wrong (invalid
//! document, failed test, missing reference), 2 the command could not run
//! (bad arguments, unreadable file).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod aicl;
mod context;
mod describe;
mod handler;
mod input;
mod protocol;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Aicl(command) => aicl::run(command),
        Command::Context(command) => context::run(command),
        Command::Describe(command) => describe::run(command),
        Command::Handler(command) => handler::run(command),
        Command::Protocol(command) => protocol::run(command),
    };
    match outcome {
        Ok(code) => code,
        Err(error) => {
            eprintln!("concord: {error:#}");
            ExitCode::from(2)
        }
    }
}
