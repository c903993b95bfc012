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
//! this configuration trusts only the given roots, and says so in a warning.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

/// Builds the client configuration; `extra_roots_pem` holds PEM certificates to trust on top
/// of the platform's (empty for none).
///
/// # Errors
/// What is wrong with the PEM or the certificates in it.
pub(crate) fn client_config(extra_roots_pem: &[u8]) -> Result<ClientConfig, String> {
    let extra_roots = CertificateDer::pem_slice_iter(extra_roots_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| format!("trusted root certificates: not PEM certificates: {error}"))?;
    if extra_roots.is_empty() && !extra_roots_pem.iter().all(u8::is_ascii_whitespace) {
        return Err(
            "trusted root certificates: no `-----BEGIN CERTIFICATE-----` block found".to_owned(),
        );
    }
    let mut given = RootCertStore::empty();
    for (index, root) in extra_roots.iter().enumerate() {
        given.add(root.clone()).map_err(|error| {
            format!(
                "trusted root certificates: certificate {}: {error}",
                index + 1
            )
        })?;
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let platform = rustls_platform_verifier::Verifier::new_with_extra_roots(
        extra_roots,
        Arc::clone(&provider),
    );
    config_with(provider, platform, given)
}

/// The configuration with the platform's verifier, or, when the platform has no trust store,
/// with the given roots alone.
fn config_with(
    provider: Arc<CryptoProvider>,
    platform: Result<rustls_platform_verifier::Verifier, rustls::Error>,
    given: RootCertStore,
) -> Result<ClientConfig, String> {
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("TLS protocol versions: {error}"))?;
    let config = match platform {
        // `dangerous()` is how rustls names any verifier of one's own; this one is the
        // platform's standard verification.
        Ok(verifier) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier)),
        Err(error) => {
            tracing::warn!(
                %error,
                given_roots = given.len(),
                "the system's certificate store cannot be used: https:// and wss:// peers are \
                 trusted only when a root given to the node signed their certificate"
            );
            builder.with_root_certificates(given)
        }
    };
    Ok(config.with_no_client_auth())
}

/// The server configuration for serving `https://` and `wss://` directly: the certificate
/// chain (the server's certificate first) and its private key, both PEM.
///
/// # Errors
/// What is wrong with either PEM, or why the key does not fit the certificate.
pub(crate) fn server_config(chain_pem: &[u8], key_pem: &[u8]) -> Result<ServerConfig, String> {
    let chain = CertificateDer::pem_slice_iter(chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| format!("TLS certificate: not PEM certificates: {error}"))?;
    if chain.is_empty() {
        return Err("TLS certificate: no `-----BEGIN CERTIFICATE-----` block found".to_owned());
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|error| format!("TLS private key: not a PEM private key: {error}"))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("TLS protocol versions: {error}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|error| format!("TLS certificate and key: {error}"))?;
    // The node speaks HTTP/1.1 (the WebSocket upgrade needs it).
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_extra_roots_is_the_platforms_trust() {
        assert!(client_config(b"").is_ok());
        assert!(client_config(b"\n  \n").is_ok());
    }

    #[test]
    fn text_that_is_not_a_certificate_is_refused() {
        let error = client_config(b"not a certificate").unwrap_err();
        assert!(
            error.contains("no `-----BEGIN CERTIFICATE-----` block"),
            "{error}"
        );
        let broken = b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
        let error = client_config(broken).unwrap_err();
        assert!(error.contains("not PEM certificates"), "{error}");
        let not_der = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let error = client_config(not_der).unwrap_err();
        assert!(error.contains("certificate 1:"), "{error}");
    }

    #[test]
    fn a_machine_without_a_trust_store_still_gets_a_configuration() {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let missing = Err(rustls::Error::General(
            "No CA certificates were loaded from the system".to_owned(),
        ));
        assert!(config_with(provider, missing, RootCertStore::empty()).is_ok());
    }
}
