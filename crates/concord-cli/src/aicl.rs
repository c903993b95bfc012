//! `concord aicl …`: AICL text to and from JSON, and message checks.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Subcommand;
use concord_aicl::{json, DType, Error, ErrorKind, Message, MsgType, ParseOptions, Value};

use crate::input::read_bytes;
use crate::output::{note, outln};

/// The message types LightAICL v1.0 defines, in the whitepaper's order.
const MSG_TYPES: [&str; 6] = [
    "task_request",
    "data_query",
    "tool_call",
    "result",
    "error",
    "protocol_negotiate",
];

/// The message format, for `concord aicl --help` and each subcommand's: the header, the
/// fields per `msg_type` and the tensor dtypes, from `concord_aicl` itself.
pub fn format_help() -> String {
    let mut types = String::new();
    for name in MSG_TYPES {
        let msg_type = MsgType::from_name(name);
        let required: Vec<String> = msg_type
            .required_fields()
            .iter()
            .map(|choice| choice.join(" or "))
            .collect();
        let optional = msg_type.optional_fields();
        let optional = if optional.is_empty() {
            String::new()
        } else {
            format!(" (optional: {})", optional.join(", "))
        };
        types.push_str(&format!("  {name:<19} {}{optional}\n", required.join(", ")));
    }
    let dtypes: Vec<&str> = DType::ALL.iter().map(|dtype| dtype.name()).collect();
    format!(
        "\
An AICL message is a dictionary whose first three entries are its header, in this order:
  [d: [s:protocol]:[s:LightAICL], [s:session_id]:[s:…], [s:msg_type]:[s:…], …]
then the fields its msg_type requires:
{types}\
Strict mode (the default) refuses a msg_type not in this list, a header out of order and text
around the message; --lenient accepts them (the header is moved first) and checks only the
header of a msg_type it does not know.
Values: [s:text] [i:-42] [f:3.14] [b:true] [l: v, …] [d: [s:key]:v, …] [t:dtype:shape:base85].
Tensor dtypes: {}.
In JSON a tensor is {{\"dtype\", \"shape\", \"data\"}} (data flat or nested).
Error codes: 1000 PROTOCOL_ERROR, 1001 INVALID_TENSOR, 2001 MISSING_FIELD, 3001
TOOL_UNAVAILABLE, 4001 DATA_FORMAT_ERROR.
Exit codes: 0 done; 1 the input is not what it should be (the AICL error code, position and
reason on one line on standard error); 2 the input cannot be read.",
        dtypes.join(", ")
    )
}

/// `concord aicl --help`: the message format and examples.
pub fn long_help() -> String {
    help_with(
        "\
Examples:
  concord aicl encode message.json --pretty
  concord aicl check request.aicl --reply",
    )
}

/// [`format_help`] followed by a subcommand's `examples`.
fn help_with(examples: &str) -> String {
    format!("{}\n\n{examples}", format_help())
}

/// Commands on AICL (LightAICL v1.0) text.
#[derive(Debug, Subcommand)]
pub enum AiclCommand {
    /// Convert JSON to AICL.
    ///
    /// Objects with exactly `dtype`, `shape` and `data` (a tensor dtype, its
    /// dimensions, the numbers flat or nested) become tensors. Exits 1 if the JSON
    /// is invalid or has no AICL form (`null`, integers beyond 64 bits).
    #[command(after_help = ENCODE_EXAMPLES, after_long_help = help_with(ENCODE_EXAMPLES))]
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
    #[command(after_help = DECODE_EXAMPLES, after_long_help = help_with(DECODE_EXAMPLES))]
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
    /// position and what was wrong. In strict mode (the default) a msg_type LightAICL
    /// v1.0 does not define is an error (1000 PROTOCOL_ERROR); `--lenient` accepts it,
    /// checking only its header.
    #[command(after_help = CHECK_EXAMPLES, after_long_help = help_with(CHECK_EXAMPLES))]
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

/// `concord aicl encode --help`'s examples.
const ENCODE_EXAMPLES: &str = "\
Examples:
  echo '{\"tool\": \"web_scraper\"}' | concord aicl encode --pretty
  concord aicl encode message.json > message.aicl";

/// `concord aicl decode --help`'s examples.
const DECODE_EXAMPLES: &str = "\
Examples:
  concord aicl decode message.aicl --pretty
  concord aicl decode --lenient < llm-answer.txt";

/// `concord aicl check --help`'s examples.
const CHECK_EXAMPLES: &str = "\
Examples:
  concord aicl check request.aicl
  concord aicl check request.aicl --lenient  # also a msg_type LightAICL v1.0 does not define
  concord aicl check request.aicl --reply    # on failure, also the AICL error reply";

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

/// Strict or lenient parsing.
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
    note(format!("error {}{place}: {}", error.code(), error.kind()));
}

/// `aicl encode`: JSON to AICL.
fn encode(file: Option<&Path>, pretty: bool) -> anyhow::Result<ExitCode> {
    let input = read_bytes(file)?;
    let json: serde_json::Value = match serde_json::from_slice(&input) {
        Ok(json) => json,
        Err(error) => {
            note(format!("the input is not valid JSON: {error}"));
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

/// `aicl decode`: AICL to JSON.
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

/// `aicl check`: one message, strictly unless `options` is lenient.
fn check(file: Option<&Path>, options: &ParseOptions, reply: bool) -> anyhow::Result<ExitCode> {
    let input = read_bytes(file)?;
    let checked = match std::str::from_utf8(&input) {
        Ok(text) => Message::parse_with(text, options),
        // Not UTF-8: let the parser say where.
        Err(_) => concord_aicl::from_slice_with(&input, options).and_then(Message::from_value),
    }
    .and_then(|message| known_type(message, options));
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

/// In strict mode, refuses a message whose `msg_type` LightAICL v1.0 does not define (the
/// library keeps it as [`MsgType::Other`], so that a newer peer's message still parses).
fn known_type(message: Message, options: &ParseOptions) -> Result<Message, Error> {
    if options.mode != ParseOptions::strict().mode || message.msg_type().is_known() {
        return Ok(message);
    }
    Err(Error::new(ErrorKind::BadHeader {
        field: "msg_type",
        reason: format!(
            "`{}` is not a message type of LightAICL v1.0 ({}); --lenient accepts it",
            message.msg_type(),
            MSG_TYPES.join(", ")
        ),
    }))
}
