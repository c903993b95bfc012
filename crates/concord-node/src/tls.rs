//! The TLS client configuration the node uses for peers' `https://` descriptions and
//! `wss://` endpoints: one `rustls` configuration for both, so a peer is trusted (or not)
//! the same way on both steps. `HttpAction::trust_root_certificates_pem` gives an `https://`
//! backend the same verification; the LLM client has its own roots
//! (`LlmConfig::root_certificates_pem`).
//!
//! Certificates are checked by the platform's verifier (the operating system's trust
//! store), and also against any root certificates the node was given
//! ([`NodeBuilder::trust_root_certificates_pem`](crate::NodeBuilder::trust_root_certificates_pem)),
//! for a private CA or a test. On a machine with no trust store at all (a minimal container)
//! given no root, a node still builds: it can verify no `https://` peer, and says so.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

/// What is wrong with the node's TLS material or configuration. Each message names the
/// material (trusted roots, certificate, private key) and what was wrong with it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum TlsError {
    /// The trusted roots' PEM cannot be read.
    #[error("trusted root certificates: {0}")]
    RootsPem(concord_llm::PemError),
    /// A trusted root is not a usable certificate (`index` counts from 1).
    #[error("trusted root certificates: certificate {index}: {error}")]
    Root {
        /// Which certificate of the PEM, from 1.
        index: usize,
        /// Why rustls refused it.
        error: rustls::Error,
    },
    /// rustls refused its safe default protocol versions.
    #[error("TLS protocol versions: {0}")]
    Versions(rustls::Error),
    /// The HTTP client could not be built.
    #[error("HTTP client: {0}")]
    HttpClient(reqwest::Error),
    /// The server's certificate chain is not PEM certificates.
    #[error("TLS certificate: not PEM certificates: {0}")]
    CertificatePem(rustls::pki_types::pem::Error),
    /// The server's certificate PEM holds no certificate.
    #[error("TLS certificate: no `-----BEGIN CERTIFICATE-----` block found")]
    NoCertificate,
    /// The server's private key is not a PEM private key.
    #[error("TLS private key: not a PEM private key: {0}")]
    KeyPem(rustls::pki_types::pem::Error),
    /// The certificate and the key do not make a server configuration.
    #[error("TLS certificate and key: {0}")]
    CertificateAndKey(rustls::Error),
}

/// The root certificates in `pem` (one or more `BEGIN CERTIFICATE` blocks; nothing but
/// whitespace for none), each checked.
///
/// # Errors
/// What is wrong with the PEM or the certificates in it.
pub(crate) fn parse_roots(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let roots = concord_llm::parse_root_certificates(pem).map_err(TlsError::RootsPem)?;
    // Checked one by one here, so a bad root is named; the platform verifier would refuse
    // it too, but its error would read as a missing trust store.
    for (index, root) in roots.iter().enumerate() {
        RootCertStore::empty()
            .add(root.clone())
            .map_err(|error| TlsError::Root {
                index: index + 1,
                error,
            })?;
    }
    Ok(roots)
}

/// The client configuration: the platform's verifier, also trusting `extra_roots`
/// ([`parse_roots`]).
///
/// # Errors
/// Only when rustls refuses its protocol versions.
pub(crate) fn client_config(
    extra_roots: Vec<CertificateDer<'static>>,
) -> Result<ClientConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let platform = rustls_platform_verifier::Verifier::new_with_extra_roots(
        extra_roots,
        Arc::clone(&provider),
    );
    config_with(provider, platform)
}

/// The configuration with the platform's verifier. The verifier fails only when it has no
/// root at all (no trust store, no root given): the configuration then verifies nothing.
fn config_with(
    provider: Arc<CryptoProvider>,
    platform: Result<rustls_platform_verifier::Verifier, rustls::Error>,
) -> Result<ClientConfig, TlsError> {
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Versions)?;
    let config = match platform {
        // `dangerous()` is how rustls names any verifier of one's own; this one is the
        // platform's standard verification.
        Ok(verifier) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier)),
        Err(error) => {
            tracing::warn!(
                %error,
                "no certificate store and no trusted root given: no https:// or wss:// peer \
                 can be verified"
            );
            builder.with_root_certificates(RootCertStore::empty())
        }
    };
    Ok(config.with_no_client_auth())
}

/// A reqwest client with `config` for HTTPS, offering HTTP/2 (reqwest adds no ALPN to a
/// configuration it is handed). The WebSocket keeps `config` without ALPN: an upgrade
/// needs HTTP/1.1.
pub(crate) fn http_client(config: ClientConfig) -> Result<reqwest::Client, TlsError> {
    client_builder(config).build().map_err(TlsError::HttpClient)
}

/// [`http_client`] for peers' descriptions: it follows no redirect (a `3xx` is the
/// answer), so the description's origin checks (its DID, no `ws://` endpoint from an
/// `https://` description) are made against the URL that served it, as the DID resolver
/// follows none either.
pub(crate) fn description_client(
    config: ClientConfig,
    local_address: Option<std::net::IpAddr>,
) -> Result<reqwest::Client, TlsError> {
    client_builder(config)
        .local_address(local_address)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(TlsError::HttpClient)
}

/// [`description_client`] for the description fetches of `connect`: it keeps no idle
/// connection. A fetched description is kept for its `max-age` (`peer_descriptions`), so
/// a kept-alive connection would sit idle for most of it, holding memory and a descriptor
/// on both sides (one per requester on the provider); a fetch opens its own.
pub(crate) fn description_fetch_client(
    config: ClientConfig,
    local_address: Option<std::net::IpAddr>,
) -> Result<reqwest::Client, TlsError> {
    client_builder(config)
        .local_address(local_address)
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .build()
        .map_err(TlsError::HttpClient)
}

fn client_builder(mut config: ClientConfig) -> reqwest::ClientBuilder {
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    reqwest::Client::builder().tls_backend_preconfigured(config)
}

/// The server configuration for serving `https://` and `wss://` directly: the certificate
/// chain (the server's certificate first) and its private key, both PEM.
///
/// # Errors
/// What is wrong with either PEM, or why the key does not fit the certificate.
pub(crate) fn server_config(chain_pem: &[u8], key_pem: &[u8]) -> Result<ServerConfig, TlsError> {
    let chain = CertificateDer::pem_slice_iter(chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(TlsError::CertificatePem)?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate);
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(TlsError::KeyPem)?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Versions)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(TlsError::CertificateAndKey)?;
    // The node speaks HTTP/1.1 (the WebSocket upgrade needs it).
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_extra_roots_is_the_platforms_trust() {
        assert_eq!(parse_roots(b"").unwrap(), vec![]);
        assert_eq!(parse_roots(b"\n  \n").unwrap(), vec![]);
        assert!(client_config(vec![]).is_ok());
    }

    #[test]
    fn text_that_is_not_a_certificate_is_refused() {
        let error = parse_roots(b"not a certificate").unwrap_err();
        assert!(matches!(error, TlsError::RootsPem(_)), "{error:?}");
        assert!(
            error
                .to_string()
                .contains("no `-----BEGIN CERTIFICATE-----` block"),
            "{error}"
        );
        let broken = b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
        let error = parse_roots(broken).unwrap_err();
        assert!(
            error.to_string().contains("not PEM certificates"),
            "{error}"
        );
        let not_der = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let error = parse_roots(not_der).unwrap_err();
        assert!(
            matches!(error, TlsError::Root { index: 1, .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains("certificate 1:"), "{error}");
    }

    #[test]
    fn a_machine_without_a_trust_store_still_gets_a_configuration() {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let missing = Err(rustls::Error::General(
            "No CA certificates were loaded from the system".to_owned(),
        ));
        assert!(config_with(provider, missing).is_ok());
    }
}
