//! `concord llm check`: probes an OpenAI-compatible server before an agent relies on it —
//! the models it lists, one tiny structured (JSON Schema) request, and how fast it writes.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use concord_llm::{ChatRequest, LlmClient, LlmConfig, LlmError, Message, ENV_API_KEY};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::output::{self, Wrong};
use crate::runtime::block_on;

/// How long listing the models may take.
const MODELS_TIMEOUT: Duration = Duration::from_secs(10);

/// The most tokens the speed request asks for.
const SPEED_TOKENS: u32 = 48;

/// `concord llm …`.
#[derive(Debug, Subcommand)]
pub enum LlmCommand {
    /// Probe an OpenAI-compatible server: the models it lists, one tiny structured request
    /// (`response_format` with a JSON Schema), and tokens per second. Prints JSON; exit 0
    /// when the structured answer was right, 1 when the server answered wrongly, 2 when it
    /// could not be used.
    #[command(after_help = "\
Examples:
  concord llm check --base-url http://127.0.0.1:11434/v1 --model llama3.2   # Ollama
  concord llm check --base-url http://127.0.0.1:8080/v1                      # llama-server

The API key, if the server needs one, comes from CONCORD_LLM_API_KEY (never an argument).")]
    Check(CheckArgs),
}

/// `concord llm check`'s arguments.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The URL `/chat/completions` and `/models` are appended to.
    #[arg(long, value_name = "URL")]
    base_url: String,
    /// The model to ask (default: the first the server lists).
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
    /// How long each request may take, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    timeout: u64,
}

/// The structured answer asked for.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sum {
    sum: i64,
}

/// Runs `concord llm …`.
pub fn run(command: LlmCommand) -> anyhow::Result<ExitCode> {
    match command {
        LlmCommand::Check(args) => block_on(check(args))?,
    }
}

async fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let timeout = Duration::from_secs(args.timeout.max(1));
    let mut config = LlmConfig::new(&args.base_url, args.model.as_deref().unwrap_or("unknown"))
        .with_request_timeout(timeout)
        .with_max_retries(0)
        .with_temperature(0.0)
        .with_seed(1);
    if let Some(key) = std::env::var(ENV_API_KEY)
        .ok()
        .filter(|key| !key.is_empty())
    {
        config = config.with_api_key(key);
    }
    let client = LlmClient::new(config.clone())?;
    let models = match client.models(MODELS_TIMEOUT).await {
        Ok(models) => models,
        // Some servers list nothing (404); the chat request below still says if they work.
        Err(LlmError::HttpStatus { status: 404, .. }) => Vec::new(),
        Err(error) => {
            return Err(
                anyhow::Error::new(error).context(format!("{} cannot be used", args.base_url))
            )
        }
    };
    let model = match (args.model, models.first()) {
        (Some(model), _) => model,
        (None, Some(first)) => first.clone(),
        (None, None) => {
            return Err(anyhow::anyhow!(
                "{} lists no model: name one with --model",
                args.base_url
            ))
        }
    };
    config.model = model.clone();
    let client = LlmClient::new(config)?;

    let structured = ChatRequest::new(vec![
        Message::system(r#"Answer with JSON only: {"sum": <integer>}."#),
        Message::user("What is 2 + 3?"),
    ])
    .with_max_tokens(24)
    .with_json_schema(
        "sum",
        json!({
            "type": "object",
            "properties": {"sum": {"type": "integer", "minimum": -1000, "maximum": 1000}},
            "required": ["sum"],
            "additionalProperties": false
        }),
    );
    let started = Instant::now();
    let answered = client.complete_json::<Sum>(structured).await;
    let seconds = started.elapsed().as_secs_f64();
    let (structured_report, right) = match &answered {
        Ok(completion) => (
            json!({
                "format": completion.format.as_str(),
                "answer": completion.value.sum,
                "right": completion.value.sum == 5,
                "corrected": completion.corrected,
                "seconds": round(seconds),
            }),
            completion.value.sum == 5,
        ),
        Err(error @ (LlmError::InvalidJson { .. } | LlmError::Truncated { .. })) => (
            json!({"error": error.to_string(), "seconds": round(seconds)}),
            false,
        ),
        Err(error) => {
            return Err(anyhow::anyhow!(
                "{} (model {model}) cannot be used: {error}",
                args.base_url
            ))
        }
    };

    // Speed: a short free-text answer, its completion tokens over its wall time.
    let speed_request = ChatRequest::new(vec![Message::user(
        "Count from 1 to 100, separated by spaces.",
    )])
    .with_max_tokens(SPEED_TOKENS);
    let started = Instant::now();
    let speed = match client.chat(speed_request).await {
        Ok(response) => {
            let seconds = started.elapsed().as_secs_f64();
            let tokens = response.usage.map_or(0, |usage| usage.completion_tokens);
            json!({
                "completionTokens": tokens,
                "seconds": round(seconds),
                "tokensPerSecond": if seconds > 0.0 { round(tokens as f64 / seconds) } else { 0.0 },
            })
        }
        Err(error) => json!({"error": error.to_string()}),
    };
    let usage = client.usage().summary();
    let report = json!({
        "baseUrl": args.base_url,
        "models": models,
        "model": model,
        "structured": structured_report,
        "speed": speed,
        "usage": {
            "calls": usage.calls,
            "promptTokens": usage.prompt_tokens,
            "completionTokens": usage.completion_tokens,
            "jsonSchemaCalls": usage.json_schema_calls,
            "promptOnlyCalls": usage.prompt_only_calls,
        },
    });
    output::json(&report)?;
    if right {
        Ok(ExitCode::SUCCESS)
    } else {
        let why = structured_report
            .get("error")
            .and_then(Value::as_str)
            .map_or_else(
                || "the structured answer is wrong (2 + 3)".to_owned(),
                str::to_owned,
            );
        Err(Wrong::error(format!("{model}: {why}")))
    }
}

/// `value` to three decimals.
fn round(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}
