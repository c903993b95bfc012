//! `concord describe …`: agent descriptions (LMOS Agent Description Format on WoT TD 1.1).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use concord_describe::{MetaProtocol, Report, ThingBuilder};
use serde_json::json;

use crate::input::read_bytes;
use crate::logging::error_line;
use crate::output::{self, outln, Wrong};

/// Commands on agent descriptions.
#[derive(Debug, Subcommand)]
pub enum DescribeCommand {
    /// Validate agent descriptions strictly (TD 1.1, LMOS terms, Concord's extension).
    ///
    /// Prints each problem as `FILE:LINE:COLUMN: error[KIND] at POINTER: MESSAGE`, then a
    /// verdict per file. Exits 0 when every file is valid (warnings are printed but allowed),
    /// 1 when any file is invalid, 2 when a file cannot be read; standard error then has one
    /// line naming them.
    #[command(after_help = "\
Examples:
  concord describe validate weather-agent.json
  concord describe validate agents/*.json --json
  curl -s http://127.0.0.1:8080/.well-known/wot | concord describe validate -")]
    Validate {
        /// The description files; `-` reads standard input.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print one JSON array with a report per file instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print a valid skeleton agent description to start from.
    ///
    /// Exits 1, naming the problem, when the arguments do not make a valid description (an
    /// `--id` that is not an absolute URI, an `--endpoint` that is not a `ws://`/`wss://` URL).
    #[command(after_help = "\
Examples:
  concord describe new --title WeatherAgent --endpoint wss://weather.example.com/concord
  concord describe new --title Scraper --tool --id urn:uuid:6f1c2e0a-8b7d-4c39-9a51-2d4e8f0b3c71")]
    New {
        /// The agent's title.
        #[arg(long)]
        title: String,
        /// The agent's identifier (a URI such as urn:uuid:...).
        #[arg(long)]
        id: Option<String>,
        /// The WebSocket URL of the agent's meta-protocol endpoint (adds Concord's extension).
        #[arg(long)]
        endpoint: Option<String>,
        /// Describe a tool (`lmos:Tool`) rather than an agent.
        #[arg(long)]
        tool: bool,
    },
}

/// Runs one `concord describe` command.
pub fn run(command: DescribeCommand) -> anyhow::Result<ExitCode> {
    match command {
        DescribeCommand::Validate { files, json } => validate(&files, json),
        DescribeCommand::New {
            title,
            id,
            endpoint,
            tool,
        } => new(title, id, endpoint, tool),
    }
}

/// `describe validate`: a report per file, then the exit code.
fn validate(files: &[PathBuf], json: bool) -> anyhow::Result<ExitCode> {
    let mut invalid = Vec::new();
    let mut unreadable = Vec::new();
    let mut reports = Vec::new();
    for file in files {
        let name = file.display().to_string();
        let report = match read_bytes(Some(file)) {
            Ok(bytes) => concord_describe::validate(&bytes),
            Err(error) => {
                let line = error_line(&error);
                if json {
                    reports.push(json!({"file": name, "error": line}));
                }
                unreadable.push(line);
                continue;
            }
        };
        if !report.is_valid() {
            invalid.push(name.clone());
        }
        if json {
            let mut entry = serde_json::to_value(&report)?;
            entry["file"] = json!(name);
            reports.push(entry);
        } else {
            print_report(file, &report)?;
        }
    }
    if json {
        output::json(&reports)?;
    }
    if !unreadable.is_empty() {
        anyhow::bail!("{}", unreadable.join("; "));
    }
    if !invalid.is_empty() {
        return Err(Wrong::error(format!(
            "{} of {} description{} invalid: {}",
            invalid.len(),
            files.len(),
            if files.len() == 1 { " is" } else { "s are" },
            invalid.join(", ")
        )));
    }
    Ok(ExitCode::SUCCESS)
}

/// One file's problems and verdict, as text.
fn print_report(file: &Path, report: &Report) -> anyhow::Result<()> {
    let name = file.display();
    for problem in report.errors().chain(report.warnings()) {
        if problem.position.is_some() {
            outln!("{name}:{problem}")?;
        } else {
            outln!("{name}: {problem}")?;
        }
    }
    let verdict = match (report.error_count(), report.warning_count()) {
        (0, 0) => "valid".to_owned(),
        (0, warnings) => format!("valid, {warnings} warning{}", plural(warnings)),
        (errors, warnings) => format!(
            "invalid, {errors} error{}, {warnings} warning{}",
            plural(errors),
            plural(warnings)
        ),
    };
    outln!("{name}: {verdict}")?;
    Ok(())
}

/// `s` unless `count` is 1.
fn plural(count: usize) -> &'static str {
    if count == 1 {
        ""
    } else {
        "s"
    }
}

/// `describe new`: a skeleton description.
fn new(
    title: String,
    id: Option<String>,
    endpoint: Option<String>,
    tool: bool,
) -> anyhow::Result<ExitCode> {
    let mut builder = if tool {
        ThingBuilder::tool(title)
    } else {
        ThingBuilder::agent(title)
    };
    if let Some(id) = id {
        builder = builder.id(id);
    }
    if let Some(endpoint) = endpoint {
        builder = builder.meta_protocol(MetaProtocol::new(endpoint));
    }
    let thing = builder.build().map_err(|error| {
        Wrong::error(format!(
            "these arguments do not make a valid description: {error}"
        ))
    })?;
    output::json(&thing)?;
    Ok(ExitCode::SUCCESS)
}
