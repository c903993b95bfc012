//! The configuration `concord directory serve --config directory.toml` reads: the
//! directory's own description, where it listens and keeps its store (`[node]`, as an
//! agent's), the node's limits (`[limits]`, as an agent's) and the directory's own
//! (`[directory]`: `DirectoryLimits`, whether writes must be signed, how often expired
//! TDs are purged). Every key is optional; a wrong one is refused by key.
//!
//! ```toml
//! [directory]
//! title = "Concord directory"        # its own TD's title
//! id = "urn:uuid:…"                  # optional: its own TD's id
//! description = "Agents of the shop floor."
//! require_signatures = false         # true: every write is signed (did:wba, RFC 9421)
//! purge_interval = "30s"             # how often expired TDs are removed
//! max_td_bytes = 65536               # the largest TD (413 above)
//! max_entries = 10000                # TDs in all (503 above)
//! max_entries_per_registrant = 100   # per DID, or per client address without one (429)
//! min_ttl = "10s"                    # registration.ttl bounds (400 outside)
//! max_ttl = "30days"
//! default_ttl = "1day"               # a TD with no ttl or expires; "none": kept until deleted
//! event_retention = 1000             # events kept for Last-Event-ID replay
//! max_query_bytes = 1024             # the longest JSONPath query (400 above)
//! max_query_results = 1000           # nodes one JSONPath search answers (413 above)
//! max_query_answer_bytes = 4194304   # JSON bytes of one JSONPath answer (413 above)
//! max_query_scan_bytes = 16777216   # TD bytes one JSONPath search reads (503 above)
//! max_query_time = "2s"              # how long one JSONPath search runs (400 past it)
//! max_query_descendants = 2          # `..` segments in one JSONPath query (400 above)
//! max_query_pattern_bytes = 128      # a match()/search() regular expression (400 above)
//! max_page_size = 100                # TDs per listing page
//! max_capability_results = 100       # TDs one capability search answers
//! max_capability_terms = 8           # terms one capability search combines (400 above)
//!
//! [node]
//! listen = "127.0.0.1:8081"
//! data_dir = "directory-data"
//! tls = { certificate = "cert.pem", key = "key.pem" }
//!
//! [limits]
//! request_rate_per_address = 20      # every key of an agent's [limits]
//!
//! [discovery]                        # as an agent's (`discovery_config.rs`)
//! mdns = true                        # announce _directory._sub._wot._tcp (default false)
//!
//! [security]                         # how writers' DIDs are checked, as an agent's:
//! resolve_loopback_over_http = false # test mode: DIDs on localhost resolve over http://
//! legacy_didwba = false              # accept ANP's legacy `Authorization: DIDWba` header
//! resolver_connect_timeout = "2s"    # also resolver_first_byte_timeout,
//!                                    # resolver_max_concurrent_per_address
//! keys_file = "/run/secrets/directory-keys.json" # the DID's keys from this file (mode
//!                                    # 0600, never created), not <data_dir>/identity/keys.json
//! ```
//!
//! `[security]`'s `encryption`, `authentication` and `signature` are an agent's only (its
//! interface sessions and its calls) and are refused here by key.
//!
//! ```toml
//! [cluster]                          # optional: directory replicas behind one address
//! nats = ["nats://10.0.0.5:4222"]    # NATS servers with JetStream: the registrations and
//! #   their events in one stream every replica follows (a registration on one is listed,
//! #   found and reported by every other); NATS unreachable at start: one line naming
//! #   cluster.nats, exit 2, unless start_degraded
//! credentials = "directory.creds"    # optional, as an agent's [cluster]
//! ca_cert = "nats-ca.pem"
//! require_tls = false
//! timeout = "2s"
//! replicas = 1                       # 1 to 5: the stream's JetStream replicas when created
//! stream = "concord_directory"       # the stream's name, one per directory
//! start_degraded = false             # true: NATS unreachable at start is not an error: reads and
//! #   writes of the registrations answer 503 + Retry-After until NATS answers (no restart)
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use concord_directory::DirectoryLimits;
use concord_node::{Limits, Security};
use serde::Deserialize;

use crate::agent_config::{
    syntax_error, ConfigError, Humane, LimitsSection, NodeSection, NodeSettings, Problem,
    SecuritySection,
};

/// Where `concord directory serve` listens when neither the flags nor the file say.
pub const DEFAULT_DIRECTORY_LISTEN: &str = "127.0.0.1:8081";
/// How often expired TDs are purged when the file does not say.
pub const DEFAULT_PURGE_INTERVAL: Duration = concord_node::DEFAULT_PURGE_INTERVAL;
/// The directory's own title when the file does not say.
const DEFAULT_TITLE: &str = "Concord directory";

/// A directory configuration read and checked: everything `concord directory serve` needs
/// beside its flags.
#[derive(Debug)]
pub struct DirectoryConfig {
    /// Its own TD's title.
    pub title: String,
    /// Its own TD's `id`, when given.
    pub id: Option<String>,
    /// Its own TD's description, when given.
    pub description: Option<String>,
    /// `[node]`: where and how it serves (`listen` defaults to
    /// [`DEFAULT_DIRECTORY_LISTEN`] when the file gives none).
    pub node: NodeSettings,
    /// `[limits]`: the node's limits.
    pub limits: Limits,
    /// `[directory]`: the directory's limits.
    pub directory: DirectoryLimits,
    /// Whether every write must carry a did:wba signature.
    pub require_signatures: bool,
    /// How often expired TDs are purged.
    pub purge_interval: Duration,
    /// `[discovery]`: how the directory is found (DNS-SD, the owner its ANP and A2A
    /// documents name), as an agent's.
    pub discovery: crate::discovery_config::Discovery,
    /// `[security]`: how writers' DIDs are resolved and which proofs are accepted.
    pub security: Security,
    /// The identity's key file (`security.keys_file`), read at start; `None`:
    /// `<data_dir>/identity/keys.json`.
    pub keys_file: Option<PathBuf>,
    /// `[cluster]`: the registrations in NATS, shared by the directory's replicas.
    pub cluster: Option<DirectoryCluster>,
}

/// What `[cluster]` configured for a directory: how to reach NATS and the stream's name.
#[derive(Debug, Clone)]
pub struct DirectoryCluster {
    /// The servers, credentials, TLS and operation timeout.
    pub settings: concord_nats::NatsSettings,
    /// The stream of the registrations (`cluster.stream`).
    pub stream: String,
    /// Start while NATS cannot be reached (`cluster.start_degraded`): the registrations
    /// answer 503 until it answers. Without, NATS away at start is exit 2.
    pub start_degraded: bool,
}

/// `[cluster]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterSection {
    #[serde(default)]
    nats: Vec<String>,
    credentials: Option<PathBuf>,
    ca_cert: Option<PathBuf>,
    #[serde(default)]
    require_tls: bool,
    timeout: Option<Humane>,
    replicas: Option<i64>,
    stream: Option<String>,
    #[serde(default)]
    start_degraded: bool,
}

impl ClusterSection {
    fn check(self, base: &Path) -> Result<DirectoryCluster, Problem> {
        let settings = crate::agent_config::NatsConnection {
            nats: self.nats,
            credentials: self.credentials,
            ca_cert: self.ca_cert,
            require_tls: self.require_tls,
            timeout: self.timeout,
            replicas: self.replicas,
            base,
        }
        .check()?;
        let stream = self
            .stream
            .unwrap_or_else(|| concord_nats::DEFAULT_DIRECTORY_STREAM.to_owned());
        concord_nats::check_bucket_name(&stream)
            .map_err(|message| Problem::key("cluster.stream", message))?;
        Ok(DirectoryCluster {
            settings,
            stream,
            start_degraded: self.start_degraded,
        })
    }
}

impl Default for DirectoryConfig {
    fn default() -> Self {
        Self {
            title: DEFAULT_TITLE.to_owned(),
            id: None,
            description: None,
            node: NodeSettings {
                listen: DEFAULT_DIRECTORY_LISTEN.to_owned(),
                data_dir: None,
                public_url: None,
                tls: None,
                shutdown_grace: crate::agent_config::DEFAULT_SHUTDOWN_GRACE,
            },
            limits: Limits::default(),
            directory: DirectoryLimits::default(),
            require_signatures: false,
            purge_interval: DEFAULT_PURGE_INTERVAL,
            discovery: crate::discovery_config::Discovery::default(),
            security: Security::default(),
            keys_file: None,
            cluster: None,
        }
    }
}

impl DirectoryConfig {
    /// Reads and checks the configuration file at `path`.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the file and the key at fault.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let fail = |problem| ConfigError {
            file: path.to_owned(),
            problem,
        };
        let text =
            std::fs::read_to_string(path).map_err(|error| fail(Problem::Unreadable(error)))?;
        let file: File = toml::from_str(&text)
            .map_err(|error| fail(Problem::Syntax(syntax_error(&text, &error))))?;
        let dir = path
            .parent()
            .filter(|dir| !dir.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let base = std::path::absolute(dir).map_err(|error| fail(Problem::Unreadable(error)))?;
        file.check(&base).map_err(fail)
    }
}

/// The file as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    directory: DirectorySection,
    node: Option<NodeSection>,
    #[serde(default)]
    limits: LimitsSection,
    #[serde(default)]
    discovery: crate::discovery_config::DiscoverySection,
    #[serde(default)]
    security: SecuritySection,
    cluster: Option<ClusterSection>,
}

/// `[directory]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DirectorySection {
    title: Option<String>,
    id: Option<String>,
    description: Option<String>,
    require_signatures: Option<bool>,
    purge_interval: Option<Humane>,
    max_td_bytes: Option<usize>,
    max_entries: Option<u64>,
    max_entries_per_registrant: Option<u64>,
    min_ttl: Option<Humane>,
    max_ttl: Option<Humane>,
    /// A duration, or `"none"`.
    default_ttl: Option<String>,
    event_retention: Option<usize>,
    max_query_bytes: Option<usize>,
    max_query_results: Option<usize>,
    max_query_answer_bytes: Option<u64>,
    max_query_scan_bytes: Option<u64>,
    max_query_time: Option<Humane>,
    max_query_descendants: Option<usize>,
    max_query_pattern_bytes: Option<usize>,
    max_page_size: Option<u64>,
    max_capability_results: Option<u64>,
    max_capability_terms: Option<usize>,
}

impl File {
    fn check(self, base: &Path) -> Result<DirectoryConfig, Problem> {
        let defaults = DirectoryConfig::default();
        let section = self.directory;
        let title = section
            .title
            .map(|title| title.trim().to_owned())
            .unwrap_or(defaults.title);
        if title.is_empty() {
            return Err(Problem::key("directory.title", "is empty"));
        }
        if let Some(id) = &section.id {
            concord_node::check_description_id(&title, id)
                .map_err(|message| Problem::key("directory.id", message))?;
        }
        let node = match self.node {
            Some(node) => {
                if node.event_ingest_token.is_some() {
                    return Err(Problem::key(
                        "node.event_ingest_token",
                        "a directory has no event ingest (its events come from its own writes)",
                    ));
                }
                let listen_given = node.listens();
                let mut settings = node.check(base)?;
                if !listen_given {
                    settings.listen = DEFAULT_DIRECTORY_LISTEN.to_owned();
                }
                settings
            }
            None => defaults.node,
        };
        if let Some(key) = self.security.agent_only() {
            return Err(Problem::key(
                key,
                "is an agent's (its sessions and calls): a directory has neither",
            ));
        }
        let keys_file = self.security.keys_file(base)?;
        let security = self.security.check()?;
        let purge_interval = match section.purge_interval {
            Some(interval) if Duration::from(interval).is_zero() => {
                return Err(Problem::key(
                    "directory.purge_interval",
                    "must be longer than zero",
                ))
            }
            Some(interval) => interval.into(),
            None => defaults.purge_interval,
        };
        let mut directory = DirectoryLimits::default();
        macro_rules! given {
            ($($field:ident),+) => {$(
                if let Some(value) = section.$field {
                    directory.$field = value.into();
                }
            )+};
        }
        given!(
            max_td_bytes,
            max_entries,
            max_entries_per_registrant,
            min_ttl,
            max_ttl,
            event_retention,
            max_query_bytes,
            max_query_results,
            max_query_answer_bytes,
            max_query_scan_bytes,
            max_query_time,
            max_query_descendants,
            max_query_pattern_bytes,
            max_page_size,
            max_capability_results,
            max_capability_terms
        );
        if let Some(text) = &section.default_ttl {
            directory.default_ttl = match text.trim() {
                "none" => None,
                duration => Some(humantime::parse_duration(duration).map_err(|error| {
                    Problem::key(
                        "directory.default_ttl",
                        format!(
                            "{text:?} is neither a duration like \"1day\" nor \"none\": {error}"
                        ),
                    )
                })?),
            };
        }
        directory.validate().map_err(|invalid| {
            Problem::key(format!("directory.{}", invalid.name), invalid.reason)
        })?;
        Ok(DirectoryConfig {
            title,
            id: section.id,
            description: section.description,
            node,
            limits: self.limits.check()?,
            directory,
            require_signatures: section.require_signatures.unwrap_or(false),
            purge_interval,
            discovery: self.discovery.check()?,
            security,
            keys_file,
            cluster: self
                .cluster
                .map(|cluster| cluster.check(base))
                .transpose()?,
        })
    }
}

/// The data directory: the flag's, else the file's, else the platform default under
/// `directory/`.
pub fn data_dir(flag: Option<PathBuf>, config: &DirectoryConfig) -> anyhow::Result<PathBuf> {
    use anyhow::Context;
    match flag.or_else(|| config.node.data_dir.clone()) {
        Some(dir) => Ok(dir),
        None => Ok(concord_store::Store::default_dir()
            .context("no data directory configured")?
            .join("directory")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<DirectoryConfig, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("directory.toml");
        std::fs::write(&path, text).unwrap();
        DirectoryConfig::load(&path).map_err(|error| error.problem.to_string())
    }

    #[test]
    fn an_empty_file_takes_the_defaults() {
        let config = load("").unwrap();
        assert_eq!(config.title, DEFAULT_TITLE);
        assert_eq!(config.node.listen, DEFAULT_DIRECTORY_LISTEN);
        assert_eq!(config.directory, DirectoryLimits::default());
        assert!(!config.require_signatures);
        assert_eq!(config.purge_interval, DEFAULT_PURGE_INTERVAL);
    }

    #[test]
    fn every_directory_limit_can_be_set() {
        let config = load(
            r#"
            [directory]
            title = "Shop floor"
            require_signatures = true
            purge_interval = "5s"
            max_td_bytes = 1000
            max_entries = 50
            max_entries_per_registrant = 3
            min_ttl = "1s"
            max_ttl = "1h"
            default_ttl = "none"
            event_retention = 10
            max_query_bytes = 64
            max_query_results = 20
            max_query_answer_bytes = 30
            max_query_scan_bytes = 40
            max_query_time = "250ms"
            max_query_descendants = 1
            max_query_pattern_bytes = 16
            max_page_size = 5
            max_capability_results = 7
            max_capability_terms = 2
            [node]
            listen = "127.0.0.1:0"
            [limits]
            request_rate_per_address = 3
            "#,
        )
        .unwrap();
        let limits = &config.directory;
        assert_eq!(config.title, "Shop floor");
        assert!(config.require_signatures);
        assert_eq!(config.purge_interval, Duration::from_secs(5));
        assert_eq!(limits.max_td_bytes, 1000);
        assert_eq!(limits.max_entries, 50);
        assert_eq!(limits.max_entries_per_registrant, 3);
        assert_eq!(limits.min_ttl, Duration::from_secs(1));
        assert_eq!(limits.max_ttl, Duration::from_secs(3600));
        assert_eq!(limits.default_ttl, None);
        assert_eq!(limits.event_retention, 10);
        assert_eq!(limits.max_query_bytes, 64);
        assert_eq!(limits.max_query_results, 20);
        assert_eq!(limits.max_query_answer_bytes, 30);
        assert_eq!(limits.max_query_scan_bytes, 40);
        assert_eq!(limits.max_query_time, Duration::from_millis(250));
        assert_eq!(limits.max_query_descendants, 1);
        assert_eq!(limits.max_query_pattern_bytes, 16);
        assert_eq!(limits.max_page_size, 5);
        assert_eq!(limits.max_capability_results, 7);
        assert_eq!(limits.max_capability_terms, 2);
        assert_eq!(config.node.listen, "127.0.0.1:0");
        assert_eq!(config.limits.request_rate_per_address, 3);
        assert!(!config.security.resolver.allow_loopback_http);
    }

    #[test]
    fn the_security_keys_of_a_directory_can_be_set() {
        let config = load(
            "[security]\nresolve_loopback_over_http = true\nlegacy_didwba = true\n\
             resolver_connect_timeout = \"500ms\"\nresolver_max_concurrent_per_address = 2\n",
        )
        .unwrap();
        assert!(config.security.resolver.allow_loopback_http);
        assert!(config.security.legacy_didwba);
        assert_eq!(
            config.security.resolver.connect_timeout,
            Duration::from_millis(500)
        );
        assert_eq!(config.security.resolver.max_concurrent_per_address, 2);
    }

    #[test]
    fn a_cluster_is_read_with_its_stream() {
        assert!(load("").unwrap().cluster.is_none());
        let cluster = load("[cluster]\nnats = [\"nats://10.0.0.5:4222\"]\ntimeout = \"500ms\"\n")
            .unwrap()
            .cluster
            .unwrap();
        assert_eq!(cluster.settings.servers, ["nats://10.0.0.5:4222"]);
        assert_eq!(
            cluster.settings.operation_timeout,
            Duration::from_millis(500)
        );
        assert_eq!(cluster.stream, concord_nats::DEFAULT_DIRECTORY_STREAM);
        assert_eq!(cluster.settings.replicas, 1);
        assert!(!cluster.start_degraded);
        let three = load(
            "[cluster]\nnats = [\"nats://10.0.0.5:4222\"]\nreplicas = 3\nstart_degraded = true\n",
        )
        .unwrap()
        .cluster
        .unwrap();
        assert_eq!(three.settings.replicas, 3);
        assert!(three.start_degraded);
    }

    #[test]
    fn each_wrong_key_is_refused_by_name() {
        for (text, key) in [
            ("[directory]\nmax_entries = 0", "directory.max_entries"),
            ("[directory]\nmax_page_size = 0", "directory.max_page_size"),
            (
                "[directory]\nmax_query_answer_bytes = 0",
                "directory.max_query_answer_bytes",
            ),
            (
                "[directory]\nmin_ttl = \"2h\"\nmax_ttl = \"1h\"",
                "directory.min_ttl",
            ),
            (
                "[directory]\ndefault_ttl = \"soon\"",
                "directory.default_ttl",
            ),
            (
                "[directory]\npurge_interval = \"0s\"",
                "directory.purge_interval",
            ),
            ("[directory]\ntitle = \" \"", "directory.title"),
            ("[cluster]\n", "cluster.nats"),
            ("[cluster]\nnats = [\"http://a:4222\"]", "cluster.nats[0]"),
            (
                "[cluster]\nnats = [\"nats://a:4222\"]\nstream = \"a.b\"",
                "cluster.stream",
            ),
            (
                "[cluster]\nnats = [\"nats://a:4222\"]\ntimeout = \"0s\"",
                "cluster.timeout",
            ),
            (
                "[cluster]\nnats = [\"nats://a:4222\"]\nreplicas = 7",
                "cluster.replicas",
            ),
            (
                "[cluster]\nnats = [\"nats://a:4222\"]\ncredentials = \"none.creds\"",
                "cluster.credentials",
            ),
            ("[directory]\nid = \"shop\"", "directory.id"),
            ("[node]\nlisten = \"nowhere\"", "node.listen"),
            (
                "[node]\nevent_ingest_token = \"x\"",
                "node.event_ingest_token",
            ),
            ("[limits]\nmax_sessions = 0", "limits.max_sessions"),
            (
                "[security]\nresolve_loopback_over_http = 1",
                "security.resolve_loopback_over_http",
            ),
            (
                "[security]\nresolver_first_byte_timeout = \"0s\"",
                "security.resolver_first_byte_timeout",
            ),
            (
                "[security]\nencryption = \"required\"",
                "security.encryption",
            ),
            (
                "[security]\nauthentication = \"required\"",
                "security.authentication",
            ),
            ("[security]\nsignature = \"didwba\"", "security.signature"),
            (
                "[security]\nkeys_file = \"none.json\"",
                "security.keys_file",
            ),
            ("[security]\nresolve_loopback = true", "resolve_loopback"),
            ("[directory]\nmax_entrys = 3", "max_entrys"),
        ] {
            let said = load(text).unwrap_err();
            assert!(said.contains(key), "{text}: {said}");
        }
    }

    #[test]
    fn the_discovery_section_announces_the_directory() {
        assert!(!load("").unwrap().discovery.mdns);
        assert!(load("[discovery]\nmdns = true").unwrap().discovery.mdns);
        let said = load("[discovery]\nmdns = 1").unwrap_err();
        assert!(said.contains("discovery.mdns"), "{said}");
    }
}
