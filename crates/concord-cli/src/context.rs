//! `concord context …`: render data-message contexts and resolve variables.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use clap::Subcommand;
use concord_context::{Context, Expression, InstanceId, Resolution, View};

use crate::input::read_bytes;
use crate::output::{self, note, Wrong};

/// The context format, for `concord context --help` and each subcommand's.
pub const FORMAT_HELP: &str = "\
A context is a JSON array of messages, oldest first. A data message is
  {\"type\": \"data\", \"data\": any JSON, \"schema\"?: JSON Schema, \"kind\"?: \"…\", \"description\"?: \"…\"}
(no kind means \"data\"; \"input\" and \"state\" are kinds too). `_instance` (e.g. \"①\") makes a
message one instance's own; one without it is global, seen by every instance, and an instance's
message overrides the global one of the same kind. Messages of one identity (kind + _instance)
merge oldest to newest: objects recursively, arrays and scalars replaced, null kept; outputs
say how with `_outputMethod` (set, merge, assign, push, concat). Hidden keys (`_instance`,
`_outputMethod`, `_call`, `_date`) are never shown to the LLM. Text messages
({\"type\": \"text\", \"text\", \"role\"?}) pass through unchanged.
Variables: `†kind.path` (U+2020, a dot path into the merged data of that kind, e.g.
`†user.name`); `A || B` the first that exists; `A && B` all must exist, the value of the last.
A missing variable is an error naming it, never null.
Exit codes: 0 done; 1 the context or the expression's references are wrong (one line on
standard error); 2 a file cannot be read or an argument is malformed.";

/// `concord context --help`: the format and examples.
pub fn long_help() -> String {
    format!(
        "{FORMAT_HELP}\n\n\
Examples:
  concord context render context.json
  concord context get context.json '†user.name'"
    )
}

/// Commands on contexts: JSON arrays of text, data, input, state and peer messages.
#[derive(Debug, Subcommand)]
pub enum ContextCommand {
    /// Print the chat messages (`[{role, content}]`) the LLM would see.
    ///
    /// Data messages of one identity are merged into one block. Exits 1 if
    /// messages cannot be merged or merged data violates its schema (the
    /// rendering is still printed; violations go to standard error).
    #[command(after_help = RENDER_EXAMPLES, after_long_help = format!("{FORMAT_HELP}\n\n{RENDER_EXAMPLES}"))]
    Render {
        /// The context file (a JSON array of messages); `-` for standard input.
        file: PathBuf,
        /// Render what one instance sees (global data merged with its own)
        /// instead of the whole batch.
        #[arg(long, value_name = "ID")]
        instance: Option<String>,
    },
    /// Resolve a variable expression and print its value as JSON.
    ///
    /// Exits 1, naming each missing reference, if it cannot be resolved.
    #[command(after_help = GET_EXAMPLES, after_long_help = format!("{FORMAT_HELP}\n\n{GET_EXAMPLES}"))]
    Get {
        /// The context file (a JSON array of messages); `-` for standard input.
        file: PathBuf,
        /// The expression: `†kind.path`, joined with `||` or `&&`.
        expression: String,
        /// Resolve in one instance's view instead of the global one.
        #[arg(long, value_name = "ID")]
        instance: Option<String>,
    },
}

/// `concord context render --help`'s examples.
const RENDER_EXAMPLES: &str = "\
Examples:
  concord context render context.json
  concord context render context.json --instance ①";

/// `concord context get --help`'s examples.
const GET_EXAMPLES: &str = "\
Examples:
  concord context get context.json '†user.name'
  concord context get context.json '†input.topic || †state.topic' --instance ①";

/// Runs one `concord context` command.
pub fn run(command: ContextCommand) -> anyhow::Result<ExitCode> {
    match command {
        ContextCommand::Render { file, instance } => {
            let Some(context) = load(&file)? else {
                return Ok(ExitCode::from(1));
            };
            let view = view(&context, &file, instance.as_deref())?;
            let chat = context
                .render(&view)
                .map_err(|error| Wrong::error(format!("{}: {error}", file.display())))?;
            output::json(&chat)?;
            match context.validate(&view) {
                Ok(violations) if violations.is_empty() => Ok(ExitCode::SUCCESS),
                Ok(violations) => {
                    let listed: Vec<String> = violations
                        .iter()
                        .map(|violation| output::one_line(&violation.to_string()))
                        .collect();
                    let count = match listed.len() {
                        1 => "schema violation".to_owned(),
                        many => format!("{many} schema violations"),
                    };
                    Err(Wrong::error(format!(
                        "{}: {count}: {}",
                        file.display(),
                        listed.join("; ")
                    )))
                }
                Err(error) => Err(Wrong::error(format!("{}: {error}", file.display()))),
            }
        }
        ContextCommand::Get {
            file,
            expression,
            instance,
        } => {
            let expression: Expression = expression.parse()?;
            let Some(context) = load(&file)? else {
                return Ok(ExitCode::from(1));
            };
            let view = view(&context, &file, instance.as_deref())?;
            match context.resolve(&view, &expression) {
                Ok(Resolution::Ready(value)) => {
                    output::json(&value)?;
                    Ok(ExitCode::SUCCESS)
                }
                Ok(Resolution::Pending(pending)) => {
                    Err(Wrong::error(format!("{}: {pending}", file.display())))
                }
                Err(error) => Err(Wrong::error(format!("{}: {error}", file.display()))),
            }
        }
    }
}

/// Reads a context; `None` (after reporting why) when the file is not one.
fn load(file: &Path) -> anyhow::Result<Option<Context>> {
    let bytes = read_bytes(Some(file))?;
    match Context::from_json(&bytes) {
        Ok(context) => Ok(Some(context)),
        Err(error) => {
            note(format!("{}: {error}", file.display()));
            Ok(None)
        }
    }
}

/// The view named on the command line; an instance must occur in the context.
fn view(context: &Context, file: &Path, instance: Option<&str>) -> anyhow::Result<View> {
    let Some(instance) = instance else {
        return Ok(View::Global);
    };
    let instance = InstanceId::new(instance).context("--instance")?;
    if !context.instances().contains(&&instance) {
        bail!(
            "--instance {instance}: no message in {} has `_instance: {instance}`",
            file.display()
        );
    }
    Ok(View::Instance(instance))
}
