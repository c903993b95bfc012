//! `concord read URL PROPERTY` and `concord write URL PROPERTY VALUE`.

use std::process::ExitCode;

use clap::Args;

use super::{Kind, PeerArgs};
use crate::output;

/// `concord read`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  concord read http://127.0.0.1:8080 modelConfiguration
  concord read http://127.0.0.1:8080 modelConfiguration | jq .temperature

Prints the property's value as JSON. Exit codes: 0 read; 1 the peer has no such property
(or refused); 2 the peer could not be reached.")]
pub struct ReadArgs {
    #[command(flatten)]
    peer: PeerArgs,
    /// The property.
    property: String,
}

/// `concord write`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  concord write http://127.0.0.1:8080 volume 7
  concord write http://127.0.0.1:8080 modelConfiguration '{\"modelName\": \"gpt-4o\"}'
  echo '\"night\"' | concord write http://127.0.0.1:8080 theme -

The value is checked against the property's schema before it is sent. Exit codes: 0
written; 1 the value is not JSON or its schema refuses it, the property is read-only or
unknown; 2 the peer could not be reached.")]
pub struct WriteArgs {
    #[command(flatten)]
    peer: PeerArgs,
    /// The property.
    property: String,
    /// The new value as JSON; `-` reads it from standard input.
    value: String,
}

/// Runs `concord read`.
pub fn read(mut args: ReadArgs) -> anyhow::Result<ExitCode> {
    args.peer.settle()?;
    let node = super::requester(&args.peer)?;
    crate::runtime::block_on(async move {
        let described = super::describe(&node, &args.peer.url).await?;
        described.require(&args.property, Kind::Property)?;
        let names = [args.property.as_str()];
        let connection =
            match super::connect_described(&node, &args.peer.url, &described, &names).await {
                Ok(connection) => connection,
                Err(code) => return Ok(code),
            };
        let read = connection.read_property(&args.property).await;
        connection.close().await;
        match read {
            Ok(value) => {
                output::json(&value)?;
                Ok(ExitCode::SUCCESS)
            }
            Err(error) => Ok(super::failed(&args.property, &error)),
        }
    })?
}

/// Runs `concord write`.
pub fn write(mut args: WriteArgs) -> anyhow::Result<ExitCode> {
    args.peer.settle()?;
    let value = super::json_argument(&args.value, "the value")?;
    let node = super::requester(&args.peer)?;
    crate::runtime::block_on(async move {
        let described = super::describe(&node, &args.peer.url).await?;
        described.require(&args.property, Kind::Property)?;
        if !described.is_writable(&args.property) {
            return Err(read_only(&args.property));
        }
        let names = [args.property.as_str()];
        let connection =
            match super::connect_described(&node, &args.peer.url, &described, &names).await {
                Ok(connection) => connection,
                Err(code) => return Ok(code),
            };
        let written = connection.write_property(&args.property, value).await;
        connection.close().await;
        match written {
            Ok(()) => Ok(ExitCode::SUCCESS),
            // The description says it is writable (checked above): whatever the library
            // refuses here (the interface agreed lacks it, or says otherwise) is its to say.
            Err(error) => Ok(super::failed(&args.property, &error)),
        }
    })?
}

/// A write to a read-only property: wrong (exit 1), saying what can be done instead.
fn read_only(property: &str) -> anyhow::Error {
    output::Wrong::error(format!(
        "property `{property}` is read-only: it can be read (`concord read`) but not written"
    ))
}
