//! Where the LLM is and how patiently to talk to it.

use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use secrecy::SecretString;
use url::Url;

use crate::error::LlmError;
use crate::retry::Backoff;

/// Our variable for the server's base URL (the part before `/chat/completions`).
pub const ENV_BASE_URL: &str = "CONCORD_LLM_BASE_URL";
/// Our variable for the API key.
pub const ENV_API_KEY: &str = "CONCORD_LLM_API_KEY";
/// Our variable for the model name.
pub const ENV_MODEL: &str = "CONCORD_LLM_MODEL";
/// The OpenAI SDKs' variable for the base URL, used when ours is unset.
pub const ENV_OPENAI_BASE_URL: &str = "OPENAI_BASE_URL";
/// The OpenAI SDKs' variable for the API key, used when ours is unset.
pub const ENV_OPENAI_API_KEY: &str = "OPENAI_API_KEY";
/// Our variable for a PEM file of root certificates to trust, on top of the system's, for
/// an `https://` server whose certificate a private CA signed.
pub const ENV_CA_CERT: &str = "CONCORD_LLM_CA_CERT";
/// Our variable for the sampling temperature of requests that set none (e.g. `0`).
pub const ENV_TEMPERATURE: &str = "CONCORD_LLM_TEMPERATURE";
/// Our variable for the sampling seed of requests that set none (an unsigned integer).
pub const ENV_SEED: &str = "CONCORD_LLM_SEED";
/// Our variable for the most answer tokens of requests that set no limit.
pub const ENV_MAX_TOKENS: &str = "CONCORD_LLM_MAX_TOKENS";

/// The base URL when only an API key or a model is configured: OpenAI's.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The model when none is configured.
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";
/// How long one HTTP attempt may take, from sending to the last byte of the answer.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// How many times a failed attempt is retried (so at most 3 attempts).
pub const DEFAULT_MAX_RETRIES: u32 = 2;

/// How to reach an OpenAI-compatible chat-completions server.
///
/// `Debug` never shows the API key:
///
/// ```
/// use concord_llm::LlmConfig;
///
/// let config = LlmConfig::new("http://127.0.0.1:11434/v1", "llama3.1").with_api_key("sk-secret");
/// assert!(!format!("{config:?}").contains("sk-secret"));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LlmConfig {
    /// The URL that `/chat/completions` is appended to, e.g. `https://api.openai.com/v1`,
    /// `http://127.0.0.1:11434/v1` (Ollama) or `http://127.0.0.1:8000/v1` (vLLM, llama.cpp).
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` when set. Local servers usually need none.
    pub api_key: Option<SecretString>,
    /// The model to ask, unless a request names another.
    pub model: String,
    /// How long one attempt may take ([`DEFAULT_REQUEST_TIMEOUT`]).
    pub request_timeout: Duration,
    /// How many times a failed attempt is retried ([`DEFAULT_MAX_RETRIES`]).
    pub max_retries: u32,
    /// How long to wait between attempts ([`Backoff::default`]).
    pub backoff: Backoff,
    /// Root certificates (PEM) trusted on top of the system's, for a server whose
    /// certificate a private CA signed.
    pub root_certificates_pem: Option<Vec<u8>>,
    /// The temperature sent with requests that set none (the server's default when unset).
    pub temperature: Option<f32>,
    /// The seed sent with requests that set none.
    pub seed: Option<u64>,
    /// The `max_tokens` sent with requests that set none.
    pub max_tokens: Option<u32>,
}

impl LlmConfig {
    /// A configuration for `model` at `base_url`, with no API key and the default timeout,
    /// retries and backoff.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        LlmConfig {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
            backoff: Backoff::default(),
            root_certificates_pem: None,
            temperature: None,
            seed: None,
            max_tokens: None,
        }
    }

    /// Sends `temperature` with every request that sets none.
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Sends `seed` with every request that sets none: with temperature 0 and a seed, a
    /// local server answers the same request the same way.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Sends `max_tokens` with every request that sets no limit.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Also trusts these root certificates (PEM) for an `https://` server, on top of the
    /// system's.
    pub fn with_root_certificates_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.root_certificates_pem = Some(pem.into());
        self
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, api_key: impl Into<String>) -> Self {
        self.api_key = Some(SecretString::from(api_key.into()));
        self
    }

    /// Sets how long one attempt may take.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets how many times a failed attempt is retried.
    pub fn with_max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// Sets the waits between attempts.
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Reads the configuration from the process environment; see [`LlmConfig::from_lookup`].
    ///
    /// `Ok(None)` means no LLM is configured, which is normal: Concord then uses its
    /// deterministic path.
    pub fn from_env() -> Result<Option<Self>, LlmError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the configuration through `lookup` (a variable name to its value).
    ///
    /// - base URL: `CONCORD_LLM_BASE_URL`, else `OPENAI_BASE_URL`, else [`DEFAULT_BASE_URL`];
    /// - API key: `CONCORD_LLM_API_KEY`, else `OPENAI_API_KEY` — but the OpenAI key only when
    ///   `CONCORD_LLM_BASE_URL` is unset, so it is never sent to a server that only our
    ///   variable names;
    /// - model: `CONCORD_LLM_MODEL`, else [`DEFAULT_MODEL`];
    /// - timeout, retries and backoff: the defaults;
    /// - request defaults: `CONCORD_LLM_TEMPERATURE` (a number from 0 to 2),
    ///   `CONCORD_LLM_SEED` (an unsigned integer), `CONCORD_LLM_MAX_TOKENS` (a positive
    ///   integer), sent with requests that set none; they do not by themselves configure an
    ///   LLM, and a value that does not parse is an [`LlmError::InvalidConfig`] naming it.
    ///
    /// Empty values count as unset and values are trimmed. When none of the five variables
    /// is set the answer is `Ok(None)`; an invalid base URL is an
    /// [`LlmError::InvalidConfig`] naming the variable it came from.
    ///
    /// ```
    /// use concord_llm::LlmConfig;
    ///
    /// let env = |name: &str| match name {
    ///     "CONCORD_LLM_BASE_URL" => Some("http://127.0.0.1:11434/v1".to_string()),
    ///     "CONCORD_LLM_MODEL" => Some("llama3.1".to_string()),
    ///     "OPENAI_API_KEY" => Some("sk-not-for-ollama".to_string()),
    ///     _ => None,
    /// };
    /// let config = LlmConfig::from_lookup(env).unwrap().expect("configured");
    /// assert_eq!(config.base_url, "http://127.0.0.1:11434/v1");
    /// assert_eq!(config.model, "llama3.1");
    /// assert!(config.api_key.is_none());
    ///
    /// assert!(LlmConfig::from_lookup(|_| None).unwrap().is_none());
    /// ```
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, LlmError> {
        let get = |name: &str| {
            lookup(name)
                .map(|value| value.trim().to_owned())
                .filter(|value| !value.is_empty())
        };
        let ours_base_url = get(ENV_BASE_URL);
        let openai_base_url = get(ENV_OPENAI_BASE_URL);
        let ours_api_key = get(ENV_API_KEY);
        let openai_api_key = get(ENV_OPENAI_API_KEY);
        let model = get(ENV_MODEL);
        if ours_base_url.is_none()
            && openai_base_url.is_none()
            && ours_api_key.is_none()
            && openai_api_key.is_none()
            && model.is_none()
        {
            return Ok(None);
        }

        let api_key = match ours_api_key {
            Some(key) => Some(key),
            None if ours_base_url.is_none() => openai_api_key,
            None => None,
        };
        let (base_url, source) = match (ours_base_url, openai_base_url) {
            (Some(url), _) => (url, ENV_BASE_URL),
            (None, Some(url)) => (url, ENV_OPENAI_BASE_URL),
            (None, None) => (DEFAULT_BASE_URL.to_owned(), "the default base URL"),
        };
        let mut config = LlmConfig::new(base_url, model.unwrap_or_else(|| DEFAULT_MODEL.into()));
        config.api_key = api_key.map(SecretString::from);
        if let Some(path) = get(ENV_CA_CERT) {
            let pem = std::fs::read(&path).map_err(|error| LlmError::InvalidConfig {
                setting: ENV_CA_CERT.into(),
                reason: format!("cannot read {path}: {error}"),
            })?;
            config.root_certificates_pem = Some(pem);
        }
        if let Some(value) = get(ENV_TEMPERATURE) {
            config.temperature = Some(
                value
                    .parse::<f32>()
                    .ok()
                    .filter(|t| (0.0..=2.0).contains(t))
                    .ok_or_else(|| unparsable(ENV_TEMPERATURE, &value, "a number from 0 to 2"))?,
            );
        }
        if let Some(value) = get(ENV_SEED) {
            config.seed = Some(
                value
                    .parse::<u64>()
                    .map_err(|_| unparsable(ENV_SEED, &value, "an unsigned integer"))?,
            );
        }
        if let Some(value) = get(ENV_MAX_TOKENS) {
            config.max_tokens = Some(
                value
                    .parse::<u32>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| unparsable(ENV_MAX_TOKENS, &value, "a positive integer"))?,
            );
        }
        config.check(source, ENV_CA_CERT)?;
        Ok(Some(config))
    }

    /// Checks the configuration and returns the chat-completions URL.
    #[cfg(feature = "client")]
    pub(crate) fn endpoint(&self) -> Result<Url, LlmError> {
        self.check("base_url", "ca_cert")
    }

    /// Checks the configuration the way the client will use it: a non-empty model, a
    /// non-zero request timeout and an `http`/`https` base URL without query or fragment.
    ///
    /// # Errors
    /// [`LlmError::InvalidConfig`] naming the setting (`model`, `request_timeout`, `base_url`).
    ///
    /// ```
    /// use concord_llm::{LlmConfig, LlmError};
    ///
    /// assert!(LlmConfig::new("http://127.0.0.1:11434/v1", "llama3.1").validate().is_ok());
    /// let error = LlmConfig::new("ftp://example.com/", "llama3.1").validate().unwrap_err();
    /// assert!(matches!(error, LlmError::InvalidConfig { setting, .. } if setting == "base_url"));
    /// ```
    pub fn validate(&self) -> Result<(), LlmError> {
        self.check("base_url", "ca_cert").map(drop)
    }

    /// The root certificates trusted on top of the system's (none when unset).
    ///
    /// # Errors
    /// [`LlmError::InvalidConfig`] under `setting` when the PEM holds no certificate.
    pub(crate) fn root_certificates(
        &self,
        setting: &str,
    ) -> Result<Vec<CertificateDer<'static>>, LlmError> {
        let Some(pem) = &self.root_certificates_pem else {
            return Ok(Vec::new());
        };
        parse_root_certificates(pem).map_err(|error| LlmError::InvalidConfig {
            setting: setting.to_owned(),
            reason: error.to_string(),
        })
    }

    /// Checks the configuration and returns the chat-completions URL; a bad base URL is
    /// reported under `base_url_setting`, bad root certificates under `roots_setting`.
    fn check(&self, base_url_setting: &str, roots_setting: &str) -> Result<Url, LlmError> {
        self.root_certificates(roots_setting)?;
        if self.model.trim().is_empty() {
            return Err(LlmError::InvalidConfig {
                setting: "model".into(),
                reason: "the model name is empty".into(),
            });
        }
        if self.request_timeout.is_zero() {
            return Err(LlmError::InvalidConfig {
                setting: "request_timeout".into(),
                reason: "the request timeout is zero".into(),
            });
        }
        let invalid = |reason: String| LlmError::InvalidConfig {
            setting: base_url_setting.to_owned(),
            reason,
        };
        let base = Url::parse(&self.base_url)
            .map_err(|error| invalid(format!("{:?} is not a URL: {error}", self.base_url)))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(invalid(format!(
                "{:?} must be an http or https URL",
                self.base_url
            )));
        }
        if base.query().is_some() || base.fragment().is_some() {
            return Err(invalid(format!(
                "{:?} must not have a query or fragment",
                self.base_url
            )));
        }
        let path = format!("{}/chat/completions", base.path().trim_end_matches('/'));
        let mut endpoint = base;
        endpoint.set_path(&path);
        Ok(endpoint)
    }
}

/// The error for an environment variable whose value does not parse.
fn unparsable(variable: &str, value: &str, wanted: &str) -> LlmError {
    LlmError::InvalidConfig {
        setting: variable.to_owned(),
        reason: format!("{value:?} is not {wanted}"),
    }
}

/// Why a PEM bundle of root certificates cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PemError {
    /// A block is not a readable PEM certificate.
    #[error("not PEM certificates: {0}")]
    NotPem(String),
    /// Text that holds no certificate at all.
    #[error("no `-----BEGIN CERTIFICATE-----` block found")]
    NoCertificate,
}

/// The certificates in a PEM bundle (one or more `BEGIN CERTIFICATE` blocks; nothing but
/// whitespace for none). Used for the LLM's roots and, by the node, for its peers'.
///
/// ```
/// assert_eq!(concord_llm::parse_root_certificates(b"").unwrap().len(), 0);
/// assert!(concord_llm::parse_root_certificates(b"not a certificate").is_err());
/// ```
pub fn parse_root_certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, PemError> {
    let roots = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| PemError::NotPem(error.to_string()))?;
    if roots.is_empty() && !pem.iter().all(u8::is_ascii_whitespace) {
        return Err(PemError::NoCertificate);
    }
    Ok(roots)
}
