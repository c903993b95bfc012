use std::collections::HashMap;
use std::time::Duration;

use concord_llm::{
    ExposeSecret, LlmClient, LlmConfig, LlmError, DEFAULT_BASE_URL, DEFAULT_MAX_RETRIES,
    DEFAULT_MODEL, DEFAULT_REQUEST_TIMEOUT,
};

/// Reads the configuration from these variables only.
fn from(vars: &[(&str, &str)]) -> Result<Option<LlmConfig>, LlmError> {
    let env: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    LlmConfig::from_lookup(|name| env.get(name).cloned())
}

fn key(config: &LlmConfig) -> Option<&str> {
    config.api_key.as_ref().map(|key| key.expose_secret())
}

#[test]
fn nothing_set_means_no_llm() {
    assert!(from(&[]).unwrap().is_none());
    assert!(
        from(&[("CONCORD_LLM_BASE_URL", ""), ("OPENAI_API_KEY", "  ")])
            .unwrap()
            .is_none()
    );
    assert!(from(&[("UNRELATED", "x")]).unwrap().is_none());
}

#[test]
fn our_variables_win_over_openais() {
    let config = from(&[
        ("CONCORD_LLM_BASE_URL", "http://127.0.0.1:8000/v1"),
        ("CONCORD_LLM_API_KEY", "ours"),
        ("CONCORD_LLM_MODEL", "qwen"),
        ("OPENAI_BASE_URL", "https://proxy.example/v1"),
        ("OPENAI_API_KEY", "theirs"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(config.base_url, "http://127.0.0.1:8000/v1");
    assert_eq!(key(&config), Some("ours"));
    assert_eq!(config.model, "qwen");
}

#[test]
fn openais_variables_are_the_fallback_with_documented_defaults() {
    let config = from(&[("OPENAI_API_KEY", " sk-abc\n")]).unwrap().unwrap();
    assert_eq!(config.base_url, DEFAULT_BASE_URL);
    assert_eq!(key(&config), Some("sk-abc"));
    assert_eq!(config.model, DEFAULT_MODEL);
    assert_eq!(config.request_timeout, DEFAULT_REQUEST_TIMEOUT);
    assert_eq!(config.max_retries, DEFAULT_MAX_RETRIES);

    let config = from(&[
        ("OPENAI_BASE_URL", "https://proxy.example/v1"),
        ("OPENAI_API_KEY", "sk-abc"),
        ("CONCORD_LLM_MODEL", "gpt-4.1"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(config.base_url, "https://proxy.example/v1");
    assert_eq!(key(&config), Some("sk-abc"));
    assert_eq!(config.model, "gpt-4.1");

    let config = from(&[
        ("OPENAI_BASE_URL", "https://proxy.example/v1"),
        ("CONCORD_LLM_API_KEY", "ours"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(config.base_url, "https://proxy.example/v1");
    assert_eq!(key(&config), Some("ours"));
}

#[test]
fn the_openai_key_never_goes_to_a_server_only_we_name() {
    let config = from(&[
        ("CONCORD_LLM_BASE_URL", "http://127.0.0.1:11434/v1"),
        ("OPENAI_API_KEY", "sk-openai"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(key(&config), None);
}

#[test]
fn a_bad_base_url_names_its_variable() {
    for (vars, variable) in [
        (
            &[("CONCORD_LLM_BASE_URL", "localhost:11434")][..],
            "CONCORD_LLM_BASE_URL",
        ),
        (
            &[("OPENAI_BASE_URL", "ftp://example.com/v1")][..],
            "OPENAI_BASE_URL",
        ),
        (
            &[("CONCORD_LLM_BASE_URL", "http://h/v1?key=1")][..],
            "CONCORD_LLM_BASE_URL",
        ),
    ] {
        let error = from(vars).unwrap_err();
        assert!(
            matches!(&error, LlmError::InvalidConfig { setting, .. } if setting == variable),
            "{error:?}"
        );
    }
}

#[test]
fn the_client_refuses_unusable_settings() {
    for config in [
        LlmConfig::new("http://127.0.0.1:1/v1", " "),
        LlmConfig::new("http://127.0.0.1:1/v1", "m").with_request_timeout(Duration::ZERO),
        LlmConfig::new("not a url", "m"),
    ] {
        let error = LlmClient::new(config).unwrap_err();
        assert!(matches!(error, LlmError::InvalidConfig { .. }), "{error:?}");
    }
}

#[test]
fn not_configured_says_what_to_set() {
    let message = LlmError::NotConfigured.to_string();
    assert!(message.contains("CONCORD_LLM_BASE_URL") && message.contains("OPENAI_API_KEY"));
}
