//! `concord context …`: render data-message contexts and resolve variables.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use clap::Subcommand;
use concord_context::{Context, Expression, InstanceId, Resolution, View};

use crate::input::read_bytes;
use crate::output;

/// Commands on contexts: JSON arrays of text, data, input, state and peer messages.
#[derive(Debug, Subcommand)]
pub enum ContextCommand {
    /// Print the chat messages (`[{role, content}]`) the LLM would see.
    ///
    /// Data messages of one identity are merged into one block. Exits 1 if
    /// messages cannot be merged or merged data violates its schema (the
    /// rendering is still printed; violations go to standard error).
    #[command(after_help = "\
Examples:
  concord context render context.json
  concord context render context.json --instance ①")]
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
    #[command(after_help = "\
Examples:
  concord context get context.json '†user.name'
  concord context get context.json '†input.topic || †state.topic' --instance ①")]
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

/// Runs one `concord context` command.
pub fn run(command: ContextCommand) -> anyhow::Result<ExitCode> {
    match command {
        ContextCommand::Render { file, instance } => {
            let Some(context) = load(&file)? else {
                return Ok(ExitCode::from(1));
            };
            let view = view(&context, &file, instance.as_deref())?;
            let chat = match context.render(&view) {
                Ok(chat) => chat,
                Err(error) => {
                    eprintln!("concord: {}: {error}", file.display());
                    return Ok(ExitCode::from(1));
                }
            };
            output::json(&chat)?;
            match context.validate(&view) {
                Ok(violations) if violations.is_empty() => Ok(ExitCode::SUCCESS),
                Ok(violations) => {
                    for violation in violations {
                        eprintln!("concord: {}: schema violation: {violation}", file.display());
                    }
                    Ok(ExitCode::from(1))
                }
                Err(error) => {
                    eprintln!("concord: {}: {error}", file.display());
                    Ok(ExitCode::from(1))
                }
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
                    eprintln!("concord: {}: {pending}", file.display());
                    Ok(ExitCode::from(1))
                }
                Err(error) => {
                    eprintln!("concord: {}: {error}", file.display());
                    Ok(ExitCode::from(1))
                }
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
            eprintln!("concord: {}: {error}", file.display());
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
