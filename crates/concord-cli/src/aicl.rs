//! `concord aicl …`: AICL text to and from JSON, and message checks.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Subcommand;
use concord_aicl::{json, Error, Message, ParseOptions, Value};

use crate::input::read_bytes;
use crate::output::outln;

/// Commands on AICL (LightAICL v1.0) text.
#[derive(Debug, Subcommand)]
pub enum AiclCommand {
    /// Convert JSON to AICL.
    ///
    /// Objects with exactly `dtype`, `shape` and `data` (a tensor dtype, its
    /// dimensions, the numbers flat or nested) become tensors. Exits 1 if the JSON
    /// is invalid or has no AICL form (`null`, integers beyond 64 bits).
    #[command(after_help = "\
Examples:
  echo '{\"tool\": \"web_scraper\"}' | concord aicl encode --pretty
  concord aicl encode message.json > message.aicl")]
    Encode {
        /// The JSON file; standard input when omitted or `-`.
        file: Option<PathBuf>,
        /// One entry per line, indented, as in the whitepaper.
        #[arg(long)]
        pretty: bool,
    },
    /// Convert AICL to JSON (tensors as `{"dtype", "shape", "data"}`).
    ///
    /// Exits 1, printing the AICL error code and position, if the text is not
    /// AICL or holds a value JSON cannot carry (NaN, infinity).
    #[command(after_help = "\
Examples:
  concord aicl decode message.aicl --pretty
  concord aicl decode --lenient < llm-answer.txt")]
    Decode {
        /// The AICL file; standard input when omitted or `-`.
        file: Option<PathBuf>,
        /// Indented JSON.
        #[arg(long)]
        pretty: bool,
        /// Accept text around the value, comments, trailing commas, loose scalars.
        #[arg(long)]
        lenient: bool,
    },
    /// Check an AICL message: syntax, header, the fields its msg_type requires.
    ///
    /// Exits 0 printing the message type, or 1 printing the AICL error code, the
    /// position and what was wrong.
    #[command(after_help = "\
Examples:
  concord aicl check request.aicl
  concord aicl check request.aicl --reply    # on failure, also the AICL error reply")]
    Check {
        /// The AICL file; standard input when omitted or `-`.
        file: Option<PathBuf>,
        /// Accept text around the message, comments, trailing commas, loose scalars.
        #[arg(long)]
        lenient: bool,
        /// On failure, also print the AICL `error` message answering it, on standard output.
        #[arg(long)]
        reply: bool,
    },
}

/// Runs one `concord aicl` command.
pub fn run(command: AiclCommand) -> anyhow::Result<ExitCode> {
    match command {
        AiclCommand::Encode { file, pretty } => encode(file.as_deref(), pretty),
        AiclCommand::Decode {
            file,
            pretty,
            lenient,
        } => decode(file.as_deref(), pretty, &options(lenient)),
        AiclCommand::Check {
            file,
            lenient,
            reply,
        } => check(file.as_deref(), &options(lenient), reply),
    }
}

fn options(lenient: bool) -> ParseOptions {
    if lenient {
        ParseOptions::lenient()
    } else {
        ParseOptions::strict()
    }
}

/// `concord: error 1001 INVALID_TENSOR at line 1, column 16 (byte 15): …`
fn report(error: &Error) {
    let place = error
        .position()
        .map(|position| format!(" at {position}"))
        .unwrap_or_default();
    eprintln!("concord: error {}{place}: {}", error.code(), error.kind());
}

fn encode(file: Option<&Path>, pretty: bool) -> anyhow::Result<ExitCode> {
    let input = read_bytes(file)?;
    let json: serde_json::Value = match serde_json::from_slice(&input) {
        Ok(json) => json,
        Err(error) => {
            eprintln!("concord: the input is not valid JSON: {error}");
            return Ok(ExitCode::from(1));
        }
    };
    let value = match json::from_json(&json) {
        Ok(value) => value,
        Err(error) => {
            report(&error);
            return Ok(ExitCode::from(1));
        }
    };
    if pretty {
        outln!("{value:#}")?;
    } else {
        outln!("{value}")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn decode(file: Option<&Path>, pretty: bool, options: &ParseOptions) -> anyhow::Result<ExitCode> {
    let input = read_bytes(file)?;
    let converted = concord_aicl::from_slice_with::<Value>(&input, options)
        .and_then(|value| json::to_json(&value));
    let json = match converted {
        Ok(json) => json,
        Err(error) => {
            report(&error);
            return Ok(ExitCode::from(1));
        }
    };
    let text = if pretty {
        serde_json::to_string_pretty(&json)
    } else {
        serde_json::to_string(&json)
    }
    .context("cannot write JSON")?;
    outln!("{text}")?;
    Ok(ExitCode::SUCCESS)
}

fn check(file: Option<&Path>, options: &ParseOptions, reply: bool) -> anyhow::Result<ExitCode> {
    let input = read_bytes(file)?;
    let checked = match std::str::from_utf8(&input) {
        Ok(text) => Message::parse_with(text, options),
        // Not UTF-8: let the parser say where.
        Err(_) => concord_aicl::from_slice_with(&input, options).and_then(Message::from_value),
    };
    match checked {
        Ok(message) => {
            outln!(
                "ok: {} message, session {}",
                message.msg_type(),
                message.session_id()
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            report(&error);
            if reply {
                let session = concord_aicl::from_slice_with::<Value>(&input, options)
                    .ok()
                    .and_then(|value| value.get("session_id")?.as_str().map(str::to_owned))
                    .unwrap_or_else(|| "unknown".to_owned());
                outln!("{}", Message::error_reply(session, &error).to_text())?;
            }
            Ok(ExitCode::from(1))
        }
    }
}
