//! `concord identity new|show|export`: the agent's `did:wba` identity, kept in the data
//! directory (`<data-dir>/identity/keys.json`, mode 0600): its two key pairs (Ed25519 to
//! sign, X25519 for the Noise channel), the DID a node serving with them has, and the
//! signed DID document, to host on a web server of your own. Secret keys are never
//! printed: there is no export of secrets.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use concord_identity::{Identity, KeyFileError, Keys};
use serde_json::{json, Value};

use crate::data_dir::DataDir;
use crate::output::{self, outln, Wrong};

/// Where a data directory keeps the identity's key file.
pub const KEY_FILE: &str = "identity/keys.json";

/// The path segments of a node's DID before its `e1_` fingerprint (as the node names it:
/// `did:wba:host%3Aport:agents:e1_…`).
const DID_PATH: &[&str] = &["agents"];

/// The address `concord serve` listens on by default, which `identity show` assumes
/// without `--url` or `--host`.
const DEFAULT_URL: &str = "http://127.0.0.1:8080/";

/// The key file of the data directory `data_dir`.
pub fn key_file(data_dir: &Path) -> PathBuf {
    data_dir.join(KEY_FILE)
}

/// The keys kept in `data_dir`, or `None` when it has none yet.
///
/// # Errors
/// The key file exists but cannot be read, is accessible by group or others, or is not a
/// key file: the error names the file (and the mode or field).
pub fn load(data_dir: &Path) -> anyhow::Result<Option<Keys>> {
    let path = key_file(data_dir);
    match Keys::load(&path) {
        Ok(keys) => Ok(Some(keys)),
        Err(KeyFileError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            Ok(None)
        }
        Err(error) => Err(key_file_error(error)),
    }
}

/// A key file that could not be read (exit 2), or was read and is wrong (exit 1: the
/// operator must look at it, it is never replaced silently).
fn key_file_error(error: KeyFileError) -> anyhow::Error {
    match error {
        error @ KeyFileError::Io { .. } => error.into(),
        error => Wrong::error(error),
    }
}

/// The keys kept in `data_dir`, created (and saved, mode 0600) when it has none: what
/// `concord serve` does on its first start. The flag says whether they were created.
pub fn load_or_create(data_dir: &Path) -> anyhow::Result<(Keys, bool)> {
    if let Some(keys) = load(data_dir)? {
        return Ok((keys, false));
    }
    let keys = Keys::generate();
    keys.save(&key_file(data_dir))?;
    Ok((keys, true))
}

/// The keys a node serves with, and the key file `load_or_create` wrote for it (`None`
/// when they were read).
///
/// - `keys_file` given (`security.keys_file`): that file's keys; it is never created or
///   written.
/// - else the data directory's key file; created on a first start, unless `replicated`:
///   replicas (`[cluster]`, of an agent or a directory) must present one DID, so a replica
///   with no keys does not make its own.
///
/// # Errors
/// The keys cannot be read (or written), or a replica has none: the error says how to
/// give them.
pub fn serving_keys(
    data_dir: &Path,
    keys_file: Option<&Path>,
    replicated: bool,
) -> anyhow::Result<(Keys, Option<PathBuf>)> {
    if let Some(path) = keys_file {
        return Ok((Keys::load(path).map_err(key_file_error)?, None));
    }
    if replicated {
        let keys = load(data_dir)?.ok_or_else(|| {
            Wrong::error(format!(
                "replicas ([cluster]) present one DID, and {} does not exist: give every \
                 replica the same keys (`security.keys_file`, or `concord identity new` \
                 once and the file copied to each data directory)",
                key_file(data_dir).display()
            ))
        })?;
        return Ok((keys, None));
    }
    let (keys, created) = load_or_create(data_dir)?;
    Ok((keys, created.then(|| key_file(data_dir))))
}

/// `concord identity`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  concord identity new
  concord identity show --url https://shop.example.com/
  concord identity export --host shop.example.com > did.json

The keys live in <data-dir>/identity/keys.json (mode 0600); `concord serve` creates them on
its first start and uses them: its DID is did:wba:<host>[%3A<port>]:agents:e1_<fingerprint>,
the host of its public URL (`localhost` when it serves on a loopback address).")]
pub struct IdentityArgs {
    #[command(flatten)]
    data_dir: DataDir,
    #[command(subcommand)]
    command: IdentityCommand,
}

/// Where the DID says the document is: a URL, or a host and port.
#[derive(Debug, Clone, Args)]
pub struct Location {
    /// The base URL the node serves at (its public URL, or `http://127.0.0.1:8080/`: a
    /// loopback address is named `localhost` in the DID, as the node does).
    #[arg(long, value_name = "URL", conflicts_with = "host")]
    url: Option<String>,
    /// The host name the DID names (where its document is served over HTTPS).
    #[arg(long, value_name = "HOST")]
    host: Option<String>,
    /// The port after the host (none: 443).
    #[arg(long, value_name = "N", requires = "host", value_parser = clap::value_parser!(u16).range(1..))]
    port: Option<u16>,
}

impl Location {
    /// The host and port of the DID: from `--url` (loopback addresses named `localhost`),
    /// `--host`/`--port`, else `default`'s.
    fn host_port(&self, default: Option<&str>) -> anyhow::Result<(String, Option<u16>)> {
        if let Some(host) = &self.host {
            return Ok((loopback_named(host), self.port));
        }
        let url = match (&self.url, default) {
            (Some(url), _) => url.as_str(),
            (None, Some(url)) => url,
            (None, None) => return Err(Wrong::error(
                "say where the DID document will be served: --url URL or --host HOST [--port N]",
            )),
        };
        host_port_of_url(url)
    }
}

/// The host and port a DID names for a node serving at `url`: an IP loopback (or
/// unspecified) address becomes `localhost`, as the node does; another IP address is
/// refused (a `did:wba` DID names a host).
pub fn host_port_of_url(url: &str) -> anyhow::Result<(String, Option<u16>)> {
    concord_node::did_location(url).map_err(|why| Wrong::error(format!("--url {why}")))
}

/// `host`, with a loopback IP address named `localhost`.
fn loopback_named(host: &str) -> String {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<std::net::IpAddr>() {
        Ok(ip) if ip.is_loopback() || ip.is_unspecified() => "localhost".to_owned(),
        _ => host.to_owned(),
    }
}

/// Commands on the agent's identity.
#[derive(Debug, Subcommand)]
pub enum IdentityCommand {
    /// Create the identity's keys (Ed25519 and X25519) in the data directory. Refuses to
    /// replace existing keys without --force (the DID changes with them: peers that allow
    /// the old DID no longer know this agent).
    #[command(after_help = "\
Examples:
  concord identity new
  concord identity new --data-dir ./data
  concord identity new --force      # a new DID: the old keys are gone")]
    New {
        /// Replace the keys that exist.
        #[arg(long)]
        force: bool,
    },
    /// Show the DID the node would have at a location, its e1 fingerprint, its public keys
    /// (multibase), where its DID document is served, and the key file. Never a secret.
    #[command(after_help = "\
Examples:
  concord identity show                            # as `concord serve` on 127.0.0.1:8080
  concord identity show --url http://127.0.0.1:9000/
  concord identity show --host agents.example.com --json")]
    Show {
        #[command(flatten)]
        location: Location,
        /// Print a JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Print the signed DID document (JSON) of the identity at a location, to serve at the
    /// URL `identity show` names (e.g. for an agent that calls without serving). Public
    /// keys only: there is no export of secret keys.
    #[command(after_help = "\
Examples:
  concord identity export --host agents.example.com > did.json
  concord identity export --url https://agents.example.com:8443/ > did.json
  concord identity export --host agents.example.com --port 8443 | jq .id")]
    Export {
        #[command(flatten)]
        location: Location,
    },
}

/// Runs one `concord identity` command.
pub fn run(args: IdentityArgs) -> anyhow::Result<ExitCode> {
    let data_dir = args.data_dir.path()?;
    let path = key_file(&data_dir);
    match args.command {
        IdentityCommand::New { force } => {
            if !force {
                match load(&data_dir) {
                    Ok(None) => {}
                    Ok(Some(keys)) => {
                        return Err(Wrong::error(format!(
                            "an identity exists already: {} (fingerprint e1_{}); \
                             --force replaces it (the DID changes)",
                            path.display(),
                            keys.fingerprint()
                        )))
                    }
                    Err(error) => {
                        return Err(Wrong::error(format!(
                            "{}; --force replaces the key file",
                            crate::logging::error_line(&error)
                        )))
                    }
                }
            }
            let keys = Keys::generate();
            keys.save(&path)?;
            outln!("created:     {}", path.display())?;
            outln!("fingerprint: e1_{}", keys.fingerprint())?;
            eprintln!(
                "concord: `concord identity show --url <where the node serves>` names its DID"
            );
            Ok(ExitCode::SUCCESS)
        }
        IdentityCommand::Show { location, json } => {
            let identity = identity_at(&data_dir, &location, Some(DEFAULT_URL))?;
            let facts = facts(&identity, &path);
            if json {
                output::json(&facts)?;
                return Ok(ExitCode::SUCCESS);
            }
            let text = |key: &str| facts[key].as_str().unwrap_or_default().to_owned();
            outln!("did:          {}", text("did"))?;
            outln!("fingerprint:  {}", text("fingerprint"))?;
            outln!(
                "ed25519:      {}  (authentication, {})",
                facts["authentication"]["publicKeyMultibase"]
                    .as_str()
                    .unwrap_or_default(),
                facts["authentication"]["id"].as_str().unwrap_or_default()
            )?;
            outln!(
                "x25519:       {}  (keyAgreement, {})",
                facts["keyAgreement"]["publicKeyMultibase"]
                    .as_str()
                    .unwrap_or_default(),
                facts["keyAgreement"]["id"].as_str().unwrap_or_default()
            )?;
            outln!("document:     {}", text("documentUrl"))?;
            outln!("key file:     {}", text("keyFile"))?;
            Ok(ExitCode::SUCCESS)
        }
        IdentityCommand::Export { location } => {
            let identity = identity_at(&data_dir, &location, None)?;
            output::json(&identity.document(&now_iso8601(), &[]))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The identity of the keys in `data_dir` at `location`.
fn identity_at(
    data_dir: &Path,
    location: &Location,
    default: Option<&str>,
) -> anyhow::Result<Identity> {
    let Some(keys) = load(data_dir)? else {
        return Err(Wrong::error(format!(
            "no identity yet in {}: `concord identity new` or start `concord serve` once",
            data_dir.display()
        )));
    };
    let (host, port) = location.host_port(default)?;
    Identity::new(keys, &host, port, DID_PATH)
        .map_err(|error| Wrong::error(format!("no did:wba DID for host {host:?}: {error}")))
}

/// What `identity show` says, as JSON: public facts only.
fn facts(identity: &Identity, key_file: &Path) -> Value {
    // The document's own verification methods: the keys exactly as peers read them.
    let document = identity.document(&now_iso8601(), &[]);
    let method = |relationship: &str| -> Value {
        let id = document[relationship][0].as_str().unwrap_or_default();
        document["verificationMethod"]
            .as_array()
            .and_then(|methods| methods.iter().find(|method| method["id"] == id))
            .map(|method| {
                json!({
                    "id": method["id"],
                    "type": method["type"],
                    "publicKeyMultibase": method["publicKeyMultibase"],
                })
            })
            .unwrap_or(Value::Null)
    };
    let did = identity.did();
    json!({
        "did": did.as_str(),
        "fingerprint": format!("e1_{}", identity.keys().fingerprint()),
        "authentication": method("authentication"),
        "keyAgreement": method("keyAgreement"),
        "documentUrl": did.document_url("https"),
        "keyFile": key_file.display().to_string(),
    })
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ` (the document's `created`).
fn now_iso8601() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_url_names_localhost_and_keeps_its_port() {
        let cases = [
            ("http://127.0.0.1:8080/", ("localhost", Some(8080))),
            ("http://[::1]:9000/", ("localhost", Some(9000))),
            ("http://0.0.0.0:9000/", ("localhost", Some(9000))),
            ("https://agents.example.com/", ("agents.example.com", None)),
            (
                "https://agents.example.com:443/",
                ("agents.example.com", None),
            ),
            (
                "https://agents.example.com:8443/x/",
                ("agents.example.com", Some(8443)),
            ),
        ];
        for (url, (host, port)) in cases {
            let (found_host, found_port) = host_port_of_url(url).unwrap();
            assert_eq!((found_host.as_str(), found_port), (host, port), "{url}");
        }
        let error = host_port_of_url("http://192.0.2.1:8080/").unwrap_err();
        assert!(error.to_string().contains("not an IP address"), "{error}");
        assert!(host_port_of_url("not a url").is_err());
        assert_eq!(loopback_named("127.0.0.1"), "localhost");
        assert_eq!(loopback_named("[::1]"), "localhost");
        assert_eq!(loopback_named("shop.example"), "shop.example");
    }

    #[test]
    fn serving_keys_come_from_the_key_file_and_a_replica_makes_none() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let secret = dir.path().join("secret/keys.json");
        let shared = Keys::generate();
        shared.save(&secret).unwrap();
        // A key file given: its keys, nothing created in the data directory.
        for replicated in [false, true] {
            let (keys, created) = serving_keys(&data, Some(&secret), replicated).unwrap();
            assert_eq!(keys.fingerprint(), shared.fingerprint());
            assert!(created.is_none());
            assert!(!key_file(&data).exists());
        }
        let error = serving_keys(&data, Some(&dir.path().join("none.json")), false).unwrap_err();
        assert!(error.to_string().contains("none.json"), "{error}");
        // A replica with no keys of its own does not make a DID of its own (exit 1).
        let error = serving_keys(&data, None, true).unwrap_err();
        assert!(error.downcast_ref::<Wrong>().is_some(), "{error}");
        assert!(error.to_string().contains("security.keys_file"), "{error}");
        assert!(!key_file(&data).exists());
        // One agent on one machine: created on the first start, then read.
        let (created_keys, created) = serving_keys(&data, None, false).unwrap();
        assert_eq!(created, Some(key_file(&data)));
        let (keys, created) = serving_keys(&data, None, true).unwrap();
        assert!(created.is_none());
        assert_eq!(keys.fingerprint(), created_keys.fingerprint());
    }

    #[test]
    fn keys_are_created_once_and_loaded_after() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load(dir.path()).unwrap().is_none());
        let (created, fresh) = load_or_create(dir.path()).unwrap();
        assert!(fresh);
        let (loaded, fresh) = load_or_create(dir.path()).unwrap();
        assert!(!fresh);
        assert_eq!(created.fingerprint(), loaded.fingerprint());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(key_file(dir.path()))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
            // A key file others can read is refused, naming it (exit 1).
            std::fs::set_permissions(key_file(dir.path()), std::fs::Permissions::from_mode(0o644))
                .unwrap();
            let error = load(dir.path()).unwrap_err();
            assert!(error.downcast_ref::<Wrong>().is_some(), "{error}");
            assert!(error.to_string().contains("keys.json"), "{error}");
        }
    }

    #[test]
    fn show_says_public_facts_only() {
        let identity = Identity::new(Keys::generate(), "localhost", Some(8080), DID_PATH).unwrap();
        let keys = identity.keys();
        let facts = facts(&identity, Path::new("/d/identity/keys.json"));
        let did = facts["did"].as_str().unwrap();
        assert!(
            did.starts_with("did:wba:localhost%3A8080:agents:e1_"),
            "{did}"
        );
        assert_eq!(facts["fingerprint"], format!("e1_{}", keys.fingerprint()));
        assert_eq!(facts["authentication"]["id"], format!("{did}#key-1"));
        assert!(facts["authentication"]["publicKeyMultibase"]
            .as_str()
            .unwrap()
            .starts_with("z6Mk"));
        assert_eq!(facts["keyAgreement"]["id"], format!("{did}#key-3"));
        assert!(facts["documentUrl"]
            .as_str()
            .unwrap()
            .starts_with("https://localhost:8080/agents/e1_"));
        // Public facts only: nothing else.
        let keys_said: Vec<&String> = facts.as_object().unwrap().keys().collect();
        assert_eq!(
            keys_said,
            [
                "did",
                "fingerprint",
                "authentication",
                "keyAgreement",
                "documentUrl",
                "keyFile"
            ]
        );
    }
}
