//! `--llm`: the LLM the environment configures, for every command that takes the flag.

use anyhow::anyhow;
use concord_llm::{LlmClient, LlmConfig};

/// The LLM configured by `CONCORD_LLM_*` (or `OPENAI_*`); an error saying what to set
/// when there is none.
pub fn from_env() -> anyhow::Result<LlmConfig> {
    LlmConfig::from_env()?.ok_or_else(|| {
        anyhow!(
            "--llm needs an LLM: set CONCORD_LLM_BASE_URL (and CONCORD_LLM_MODEL, \
             CONCORD_LLM_API_KEY if the server needs one), or OPENAI_API_KEY"
        )
    })
}

/// A client for the LLM [`from_env`] configures.
pub fn client() -> anyhow::Result<LlmClient> {
    Ok(LlmClient::new(from_env()?)?)
}
