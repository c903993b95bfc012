//! `concord protocol …`: draft and judge candidate protocols, and hash protocol documents.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use concord_negotiate::{
    published_actions, ActionSpec, Decided, DeterministicNegotiator, JudgeContext, LlmNegotiator,
    Need, NegotiateError, Negotiator, Previous, StepRecord, StructuredOutput,
};
use concord_proto::{Decision, ProtocolHash};
use serde_json::json;

use crate::input::{is_stdin, read_bytes, read_need, read_text};
use crate::llm;
use crate::output::{self, checked, out, outln, Wrong};
use crate::runtime::block_on;

/// Commands on protocol documents.
#[derive(Debug, Subcommand)]
pub enum ProtocolCommand {
    /// Draft a candidate protocol for calling a peer's action (requester side).
    ///
    /// Exits 1 when the description is invalid, does not publish the action, or the need
    /// cannot be met; 2 when a file cannot be read or the LLM cannot be reached.
    #[command(after_help = "\
Examples:
  concord protocol draft --description peer.json --action getProductInfo > candidate.md
  concord protocol draft --description peer.json --action getProductInfo --llm")]
    Draft {
        /// The peer's agent description (JSON).
        #[arg(long)]
        description: PathBuf,
        /// The peer action to call.
        #[arg(long)]
        action: String,
        /// Our need (JSON: `{"action", "input"?: schema, "output"?: schema}`); default: the
        /// action as published.
        #[arg(long)]
        need: Option<PathBuf>,
        /// Draft with the LLM negotiator (CONCORD_LLM_BASE_URL, CONCORD_LLM_API_KEY,
        /// CONCORD_LLM_MODEL, or OPENAI_BASE_URL / OPENAI_API_KEY).
        #[arg(long)]
        llm: bool,
    },
    /// Judge a candidate protocol against our own description (provider side); prints the
    /// decision as JSON: status, candidate, modificationSummary, reason.
    ///
    /// Exits 0 when it accepts or counters, 1 when it rejects (the JSON is printed all the
    /// same; standard error has the reason on one line), 2 when it cannot judge (a file that
    /// cannot be read, an LLM that cannot be reached).
    #[command(after_help = "\
Examples:
  concord protocol judge --description ours.json candidate.md
  concord protocol judge --description ours.json counter.md --previous ours.md --summary 'renamed id' --llm
  concord protocol draft --description ours.json --action getProductInfo | concord protocol judge --description ours.json")]
    Judge {
        /// Our agent description (JSON).
        #[arg(long)]
        description: PathBuf,
        /// The candidate protocol document; standard input when omitted or `-`.
        candidate: Option<PathBuf>,
        /// Judge with the LLM negotiator (configured as for `draft --llm`).
        #[arg(long)]
        llm: bool,
        /// The candidate answers this one of ours (a counter-proposal): the LLM sees both.
        /// (The rules judge a candidate as it stands.)
        #[arg(long, value_name = "FILE", requires = "llm")]
        previous: Option<PathBuf>,
        /// The peer's modificationSummary: what its candidate changes in ours.
        #[arg(long, value_name = "TEXT", requires = "previous")]
        summary: Option<String>,
    },
    /// Print the protocol hash (the 0-RTT identifier): SHA-256 of the exact bytes.
    #[command(after_help = "\
Examples:
  concord protocol hash product-info.md
  concord protocols show 40340f2e --document | concord protocol hash")]
    Hash {
        /// The protocol document; standard input when omitted or `-`.
        file: Option<PathBuf>,
    },
}

/// Runs one `concord protocol` command.
pub fn run(command: ProtocolCommand) -> anyhow::Result<ExitCode> {
    match command {
        ProtocolCommand::Draft {
            description,
            action,
            need,
            llm,
        } => {
            let actions = actions_in(&description)?;
            let Some(peer_action) = actions.iter().find(|a| a.name == action) else {
                return Err(Wrong::error(format!(
                    "{} publishes no action `{action}` (it has: {})",
                    description.display(),
                    names(&actions)
                )));
            };
            let need = match need {
                Some(path) => read_need(&path).map_err(checked)?,
                None => Need {
                    action: action.clone(),
                    ..Need::default()
                },
            };
            let drafted = if llm {
                block_on(draft(&llm_negotiator()?, &need, peer_action))?
            } else {
                block_on(draft(&DeterministicNegotiator::new(), &need, peer_action))?
            };
            let decided = drafted.map_err(negotiate_error)?;
            out!("{}", decided.value)?;
            report_cost(&decided.record);
            Ok(ExitCode::SUCCESS)
        }
        ProtocolCommand::Judge {
            description,
            candidate,
            llm,
            previous,
            summary,
        } => {
            let actions = actions_in(&description)?;
            if previous.as_deref().is_some_and(|path| is_stdin(Some(path)))
                && is_stdin(candidate.as_deref())
            {
                anyhow::bail!("the candidate and --previous cannot both come from standard input");
            }
            let text = read_text(candidate.as_deref(), "the candidate")?;
            let ours = previous
                .map(|path| read_text(Some(&path), "our previous candidate"))
                .transpose()?;
            let previous = Previous {
                our_candidate: ours.as_deref(),
                modification_summary: summary.as_deref(),
            };
            let judged = if llm {
                block_on(judge(&llm_negotiator()?, &actions, &text, previous))?
            } else {
                block_on(judge(
                    &DeterministicNegotiator::new(),
                    &actions,
                    &text,
                    previous,
                ))?
            };
            let decided = judged.map_err(negotiate_error)?;
            let mut output = match &decided.value {
                Decision::Accept => json!({"status": "accepted", "candidate": text}),
                Decision::Counter {
                    candidate,
                    modification_summary,
                } => json!({"status": "negotiating", "candidate": candidate,
                            "modificationSummary": modification_summary}),
                Decision::Reject { reason } => json!({"status": "rejected", "reason": reason}),
            };
            output["decidedBy"] = serde_json::to_value(&decided.record)?;
            output::json(&output)?;
            match &decided.value {
                // The JSON above has the reason as written; standard error has it on one line.
                Decision::Reject { reason } => Err(Wrong::error(format!("rejected: {reason}"))),
                _ => Ok(ExitCode::SUCCESS),
            }
        }
        ProtocolCommand::Hash { file } => {
            let document = read_bytes(file.as_deref())?;
            outln!("{}", ProtocolHash::of_bytes(&document))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Drafts a candidate for `action` with `negotiator`.
async fn draft<N: Negotiator>(
    negotiator: &N,
    need: &Need,
    action: &ActionSpec,
) -> Result<Decided<String>, NegotiateError> {
    negotiator.draft(need, action).await
}

/// Judges `candidate` against our `actions` with `negotiator`.
async fn judge<N: Negotiator>(
    negotiator: &N,
    actions: &[ActionSpec],
    candidate: &str,
    previous: Previous<'_>,
) -> Result<Decided<Decision>, NegotiateError> {
    negotiator
        .judge(JudgeContext::Provider { actions }, candidate, previous)
        .await
}

/// A negotiator's error: the LLM failing is "could not run" (exit 2), said with what the
/// step cost; anything else (a candidate or need that cannot work) is [`Wrong`] (exit 1).
fn negotiate_error(error: NegotiateError) -> anyhow::Error {
    match &error {
        NegotiateError::Llm(step) if step.record.llm_calls > 0 => {
            let cost = cost_text(&step.record);
            anyhow::anyhow!("{error} ({cost})")
        }
        NegotiateError::Llm(_) => anyhow::Error::new(error),
        _ => Wrong::error(error),
    }
}

/// The LLM negotiator configured from the environment (checked to answer).
fn llm_negotiator() -> anyhow::Result<LlmNegotiator> {
    Ok(LlmNegotiator::new(llm::client()?))
}

/// Says on standard error what a step cost, when an LLM was involved.
fn report_cost(record: &StepRecord) {
    if record.llm_calls > 0 {
        eprintln!("concord: {}", cost_text(record));
    }
}

/// What an LLM step cost, and how its JSON was asked for (`json_schema`, `json_object`, or
/// `prompt_only` when the server refused the format) with any corrective retries.
fn cost_text(record: &StepRecord) -> String {
    let format = match record.structured_output {
        Some(StructuredOutput::JsonSchema) => ", structured output: json_schema",
        Some(StructuredOutput::JsonObject) => ", structured output: json_object",
        Some(StructuredOutput::PromptOnly) => {
            ", structured output: prompt_only (the server refused response_format)"
        }
        _ => "",
    };
    let retries = match record.corrective_retries {
        0 => String::new(),
        n => format!(", {n} corrective retr{}", if n == 1 { "y" } else { "ies" }),
    };
    format!(
        "{} LLM call(s), {} tokens in, {} out, {:.1} s{format}{retries}",
        record.llm_calls,
        record.tokens_in,
        record.tokens_out,
        record.wall.as_secs_f64()
    )
}

/// The actions of a validated agent description file.
fn actions_in(path: &Path) -> anyhow::Result<Vec<ActionSpec>> {
    let bytes = read_bytes(Some(path))?;
    let validated = concord_describe::parse(&bytes).map_err(|invalid| {
        Wrong::error(format!(
            "{} is not a valid agent description: {invalid}",
            path.display()
        ))
    })?;
    Ok(published_actions(&validated.thing))
}

/// The actions' names, quoted, for an error.
fn names(actions: &[ActionSpec]) -> String {
    if actions.is_empty() {
        return "no actions".into();
    }
    actions
        .iter()
        .map(|action| format!("`{}`", action.name))
        .collect::<Vec<_>>()
        .join(", ")
}
