//! A reverse proxy that terminates TLS in front of a node, as nginx or Caddy would, with a
//! private CA, for tests of `https://` descriptions and `wss://` endpoints.
//!
//! ```no_run
//! # async fn run(node_addr: std::net::SocketAddr) -> Result<(), Box<dyn std::error::Error>> {
//! use concord_fixtures::tls::{PrivateCa, TlsProxy};
//!
//! let ca = PrivateCa::for_localhost()?;
//! let proxy = TlsProxy::bind(&ca).await?;
//! let public_url = proxy.url(); // https://localhost:PORT/, to give the node as its public URL
//! proxy.forward_to(node_addr);
//! // Peers given `ca.pem()` as a trusted root reach the node at `public_url`.
//! # Ok(()) }
//! ```

use std::net::SocketAddr;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

/// Why the CA or the proxy could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsSetupError {
    /// Generating a key or a certificate failed.
    #[error("cannot make the test certificates: {0}")]
    Certificate(#[from] rcgen::Error),
    /// rustls refused the certificate chain or key.
    #[error("cannot configure TLS: {0}")]
    Tls(#[from] rustls::Error),
    /// The proxy's port could not be bound.
    #[error("cannot bind the proxy: {0}")]
    Bind(#[from] std::io::Error),
    /// The certificates this module made did not read back as PEM.
    #[error("cannot read the test certificates back: {0}")]
    Pem(#[from] rustls::pki_types::pem::Error),
}

/// A CA made for one test, and a certificate it signed for `localhost` and `127.0.0.1`.
pub struct PrivateCa {
    ca_pem: String,
    chain_pem: String,
    key_pem: String,
}

impl PrivateCa {
    /// A new CA and a server certificate for `localhost` and `127.0.0.1` signed by it.
    ///
    /// # Errors
    /// [`TlsSetupError::Certificate`] when generating them fails.
    pub fn for_localhost() -> Result<Self, TlsSetupError> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "Concord test CA");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
        let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
        let mut leaf_params = CertificateParams::new(names)?;
        leaf_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let leaf_key = KeyPair::generate()?;
        let leaf = leaf_params.signed_by(&leaf_key, &ca)?;
        Ok(Self {
            ca_pem: ca.pem(),
            chain_pem: format!("{}{}", leaf.pem(), ca.pem()),
            key_pem: leaf_key.serialize_pem(),
        })
    }

    /// The CA's certificate, PEM: what a peer must trust.
    pub fn pem(&self) -> &str {
        &self.ca_pem
    }

    /// The server's certificate chain (its certificate, then the CA's), PEM.
    pub fn chain_pem(&self) -> &str {
        &self.chain_pem
    }

    /// The server certificate's private key, PEM (PKCS #8).
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }
}

/// A bound TLS proxy, not yet forwarding.
pub struct TlsProxy {
    listener: TcpListener,
    acceptor: TlsAcceptor,
}

impl TlsProxy {
    /// Binds `127.0.0.1:0` and prepares TLS with the CA's `localhost` certificate.
    ///
    /// # Errors
    /// [`TlsSetupError::Tls`] or [`TlsSetupError::Bind`].
    pub async fn bind(ca: &PrivateCa) -> Result<Self, TlsSetupError> {
        let chain = CertificateDer::pem_slice_iter(ca.chain_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()?;
        let key = PrivateKeyDer::from_pem_slice(ca.key_pem.as_bytes())?;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        Ok(Self {
            listener: TcpListener::bind("127.0.0.1:0").await?,
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }

    /// `https://localhost:PORT/`, the URL peers use.
    pub fn url(&self) -> String {
        let port = self.listener.local_addr().map_or(0, |addr| addr.port());
        format!("https://localhost:{port}/")
    }

    /// Accepts connections in a task, each decrypted and copied to and from `backend`.
    pub fn forward_to(self, backend: SocketAddr) {
        tokio::spawn(async move {
            while let Ok((tcp, _)) = self.listener.accept().await {
                let acceptor = self.acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    if let Ok(mut plain) = TcpStream::connect(backend).await {
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                    }
                });
            }
        });
    }
}
