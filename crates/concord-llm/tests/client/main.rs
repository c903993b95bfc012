//! End-to-end tests of the client against the scripted server on loopback.

mod config;
mod json;
mod request_shape;
mod retries;
mod structured;
mod timeouts;
mod tool_calls;
mod usage;

use std::time::Duration;

use concord_llm::{Backoff, LlmClient, LlmConfig};
use concord_llm_script::ScriptServer;

/// The API key the tests configure; it must never show up in errors or debug output.
const KEY: &str = "sk-test-0123456789";

/// A configuration for `server` with a key, a 5 s timeout, 2 retries and millisecond backoff.
fn config(server: &ScriptServer) -> LlmConfig {
    LlmConfig::new(server.base_url(), "test-model")
        .with_api_key(KEY)
        .with_request_timeout(Duration::from_secs(5))
        .with_max_retries(2)
        .with_backoff(Backoff::new(
            Duration::from_millis(1),
            Duration::from_millis(5),
        ))
}

fn client(server: &ScriptServer) -> LlmClient {
    LlmClient::new(config(server)).unwrap()
}
