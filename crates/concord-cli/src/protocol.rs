//! `concord protocol …`: protocol documents and their hashes.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use concord_proto::ProtocolHash;

use crate::input::read_bytes;

/// Commands on protocol documents.
#[derive(Debug, Subcommand)]
pub enum ProtocolCommand {
    /// Print the protocol hash (the 0-RTT identifier): SHA-256 of the exact bytes.
    ///
    /// Example: `concord protocol hash product-info.md`
    Hash {
        /// The protocol document; standard input when omitted or `-`.
        file: Option<PathBuf>,
    },
}

/// Runs one `concord protocol` command.
pub fn run(command: ProtocolCommand) -> anyhow::Result<ExitCode> {
    match command {
        ProtocolCommand::Hash { file } => {
            let document = read_bytes(file.as_deref())?;
            println!("{}", ProtocolHash::of_bytes(&document));
            Ok(ExitCode::SUCCESS)
        }
    }
}
