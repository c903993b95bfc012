//! Who the requester is, for every command that connects to a peer (`concord call`,
//! `subscribe`, `stream`, `read`, `write`): the data directory's DID identity at
//! `--did-host` or anonymous, how it signs, and how peers' DIDs on localhost resolve.

use std::path::Path;

use clap::Args;
use concord_node::{Identity, NodeBuilder, Security, SignatureForm};

/// The requester's identity flags, shared by the commands that connect to a peer.
#[derive(Debug, Args)]
pub struct CallerArgs {
    /// Sign the call as the data directory's identity, whose DID names this host (and
    /// port): `agents.example.com`, `localhost:8080`. Its DID document must be served
    /// there (`concord serve`, or `concord identity export` on your own server).
    #[arg(long, value_name = "HOST[:PORT]", conflicts_with = "anonymous")]
    did_host: Option<String>,
    /// Call anonymously, even with an identity and --did-host.
    #[arg(long)]
    anonymous: bool,
    /// How to sign: `http-signatures` (RFC 9421, the default) or `didwba` (ANP's legacy
    /// `Authorization: DIDWba` header, for old peers; a Concord agent refuses it unless its
    /// `[security] legacy_didwba` is on).
    #[arg(long, value_name = "FORM", value_parser = ["http-signatures", "didwba"], requires = "did_host")]
    signature: Option<String>,
    /// Test mode: resolve DIDs on `localhost` on this machine, over the scheme the peer
    /// was reached at (else https:// or else plain http://; the peer's, to check its Noise
    /// key). Implied when the peer's URL is a
    /// loopback address (127.0.0.1, [::1], localhost): a local agent's DID names
    /// `localhost`. Other DIDs resolve over HTTPS only.
    #[arg(long)]
    resolve_loopback_over_http: bool,
}

impl CallerArgs {
    /// Sets up `builder` to connect to the peer at `url` as these flags say: its security
    /// (DIDs on localhost resolved over this machine's loopback for a loopback peer or
    /// with --resolve-loopback-over-http, the signature form) and its identity, the data
    /// directory's keys at --did-host. Anonymous otherwise, said once on standard error
    /// (unless `quiet`: `--json` says `signedAs: null` instead) when the data directory
    /// has an identity that was not used. With `peer_did`, the peer must prove that DID
    /// (the target was looked up by it in a directory), else the connection is refused.
    ///
    /// # Errors
    /// Wrong (exit 1) when --did-host names no host for a DID or there are no keys to
    /// sign with; could not run when the keys cannot be read.
    pub fn apply(
        &self,
        builder: NodeBuilder,
        url: &str,
        peer_did: Option<&str>,
        data_dir: &Path,
        quiet: bool,
    ) -> anyhow::Result<NodeBuilder> {
        let mut security = Security {
            expect_peer_did: peer_did.map(str::to_owned),
            ..Security::default()
        };
        // A peer called on a loopback address is reached over this machine's own loopback:
        // its localhost DID document is fetched the same way (production DIDs: HTTPS only).
        security.resolver.allow_loopback_http =
            self.resolve_loopback_over_http || is_loopback_url(url);
        if self.signature.as_deref() == Some("didwba") {
            security.signature_form = SignatureForm::LegacyDidWba;
        }
        let builder = builder.security(security);
        match self.signer(data_dir)? {
            Signer::Identity(identity) => Ok(builder.identity(*identity)),
            Signer::Anonymous { note } => {
                if let (Some(note), false) = (note, quiet) {
                    crate::output::note(note);
                }
                Ok(builder)
            }
        }
    }

    /// The identity the calls are signed as: the data directory's keys at `--did-host`,
    /// unless `--anonymous` or there are no keys (an error with --did-host: it asked for a
    /// signature).
    fn signer(&self, data_dir: &Path) -> anyhow::Result<Signer> {
        if self.anonymous {
            return Ok(Signer::Anonymous { note: None });
        }
        let keys = crate::identity::load(data_dir)?;
        match (keys, &self.did_host) {
            (Some(keys), Some(location)) => {
                let (host, port) = did_host(location)?;
                let identity = Identity::new(keys, &host, port, &["agents"]).map_err(|error| {
                    crate::output::Wrong::error(format!(
                        "--did-host {location:?}: no did:wba DID for this host: {error}"
                    ))
                })?;
                Ok(Signer::Identity(Box::new(identity)))
            }
            (None, Some(_)) => Err(crate::output::Wrong::error(format!(
                "--did-host: no identity to sign with in {}: `concord identity new` or start \
                 `concord serve` once",
                data_dir.display()
            ))),
            (Some(_), None) => Ok(Signer::Anonymous {
                note: Some(
                    "calling anonymously: give --did-host HOST[:PORT] (where this identity's \
                     DID document is served) to sign as it"
                        .to_owned(),
                ),
            }),
            (None, None) => Ok(Signer::Anonymous { note: None }),
        }
    }
}

/// Who the calls are made as.
enum Signer {
    /// Signed as this identity.
    Identity(Box<Identity>),
    /// Anonymous; `note` says why when the data directory has an identity that was not
    /// used (no --did-host).
    Anonymous { note: Option<String> },
}

/// `HOST[:PORT]` of `--did-host` (a loopback IP address named `localhost`, as a node names
/// itself); a URL is read as the node's base URL.
fn did_host(location: &str) -> anyhow::Result<(String, Option<u16>)> {
    if location.contains("://") {
        return crate::identity::host_port_of_url(location);
    }
    let wrong = |why: &str| crate::output::Wrong::error(format!("--did-host {location:?}: {why}"));
    let (host, port) = match location.rsplit_once(':') {
        Some(("", _)) => return Err(wrong("no host")),
        // A bare IPv6 address has colons but no port.
        Some((host, port)) if !host.is_empty() && !port.contains(']') && !host.ends_with(':') => {
            let port: u16 = port
                .parse()
                .ok()
                .filter(|port| *port > 0)
                .ok_or_else(|| wrong("the port is not a number from 1 to 65535"))?;
            (host, Some(port))
        }
        _ => (location, None),
    };
    if host.is_empty() {
        return Err(wrong("no host"));
    }
    let url = match port {
        Some(port) => format!("http://{host}:{port}/"),
        None => format!("http://{host}/"),
    };
    let (host, _) = crate::identity::host_port_of_url(&url)
        .map_err(|_| wrong("not a host name (a did:wba DID names a host, not an IP address)"))?;
    Ok((host, port))
}

/// Whether `url` is on this machine's loopback (`127.0.0.0/8`, `[::1]`, `localhost`): an
/// agent served there has a localhost DID whose document it serves there too (over HTTPS
/// when it serves TLS, else HTTP).
fn is_loopback_url(url: &str) -> bool {
    let Ok(url) = url::Url::parse(url) else {
        return false;
    };
    match url.host() {
        Some(url::Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn did_host_takes_a_host_and_an_optional_port() {
        let parsed = |text: &str| did_host(text).map_err(|error| error.to_string());
        assert_eq!(
            parsed("agents.example.com"),
            Ok(("agents.example.com".to_owned(), None))
        );
        assert_eq!(
            parsed("localhost:8080"),
            Ok(("localhost".to_owned(), Some(8080)))
        );
        assert_eq!(
            parsed("127.0.0.1:8080"),
            Ok(("localhost".to_owned(), Some(8080)))
        );
        assert_eq!(
            parsed("http://127.0.0.1:9000/"),
            Ok(("localhost".to_owned(), Some(9000)))
        );
        assert!(parsed("localhost:0").unwrap_err().contains("port"));
        assert!(parsed("localhost:http").unwrap_err().contains("port"));
        assert!(parsed("192.0.2.1:8080")
            .unwrap_err()
            .contains("not a host name"));
        assert!(parsed(":8080").unwrap_err().contains("no host"));
    }

    #[test]
    fn loopback_peers_are_recognised() {
        for url in [
            "http://127.0.0.1:8080",
            "http://127.0.0.2:8080/.well-known/wot",
            "http://[::1]:9000/",
            "http://LOCALHOST:1/",
            "https://localhost:8443/",
        ] {
            assert!(is_loopback_url(url), "{url}");
        }
        for url in ["https://shop.example/", "http://192.0.2.1/", "not a url"] {
            assert!(!is_loopback_url(url), "{url}");
        }
    }
}
