//! `--llm`: the LLM the environment configures, for every command that takes the flag,
//! checked at start-up to answer: a command asked to use an LLM that cannot be reached
//! fails at once (exit 2, naming its URL) rather than running without it.

use std::time::Duration;

use anyhow::{anyhow, Context as _};
use concord_llm::{LlmClient, LlmConfig};

/// How long the start-up probe waits for the LLM server to answer.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The LLM configured by `CONCORD_LLM_*` (or `OPENAI_*`), checked to answer ([`probe`]);
/// an error saying what to set when there is none, or which URL cannot be reached.
pub fn from_env() -> anyhow::Result<LlmConfig> {
    let config = LlmConfig::from_env()?.ok_or_else(|| {
        anyhow!(
            "--llm needs an LLM: set CONCORD_LLM_BASE_URL (and CONCORD_LLM_MODEL, \
             CONCORD_LLM_API_KEY if the server needs one), or OPENAI_API_KEY"
        )
    })?;
    probe(&config)?;
    Ok(config)
}

/// A client for the LLM [`from_env`] configures (and has checked).
pub fn client() -> anyhow::Result<LlmClient> {
    Ok(LlmClient::new(from_env()?)?)
}

/// Checks that the LLM `config` names answers ([`LlmClient::probe`]: one `GET
/// {base_url}/models`, no retry, at most [`PROBE_TIMEOUT`]). Runs on a thread of its own,
/// so it may be called from inside or outside an async runtime.
///
/// # Errors
/// The LLM cannot be reached, does not answer in time, or refuses the API key: the error
/// names its URL.
pub fn probe(config: &LlmConfig) -> anyhow::Result<()> {
    let client = LlmClient::new(config.clone())?;
    let checked = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .context("cannot start the async runtime")?;
                runtime
                    .block_on(client.probe(PROBE_TIMEOUT))
                    .map_err(anyhow::Error::new)
            })
            .join()
            .unwrap_or_else(|_| Err(anyhow!("the LLM probe failed")))
    });
    // The error names the URL (without any password in it).
    checked.context("the LLM cannot be used")
}
