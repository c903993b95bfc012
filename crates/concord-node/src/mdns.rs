//! DNS-SD on the local network, as W3C WoT Discovery introduces Things and directories:
//! a node announces `_wot._tcp` (a directory also the subtype `_directory._sub._wot._tcp`)
//! with TXT `td=<path of its description>`, `type=Thing|Directory` and `scheme=http|https`,
//! while it serves ([`NodeBuilder::mdns`](crate::NodeBuilder::mdns), off by default), and
//! withdraws it (a goodbye) when the server drains or is dropped; [`browse_mdns`] finds the
//! Things and directories announced so. Multicast DNS through the `mdns-sd` crate, whose
//! daemon thread does the network work.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use mdns_sd::{ServiceDaemon, ServiceEvent, ServiceInfo};

use crate::describe::ThingKind;

/// The DNS-SD service type of WoT Things (and directories).
pub const WOT_SERVICE: &str = "_wot._tcp.local.";
/// The DNS-SD subtype of WoT Thing Description Directories.
pub const DIRECTORY_SERVICE: &str = "_directory._sub._wot._tcp.local.";
/// The longest DNS label: an instance name is cut to fit.
const MAX_LABEL: usize = 63;

/// Why DNS-SD cannot announce or browse.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MdnsError {
    /// The mDNS daemon refused (no multicast socket, a bad record, the daemon gone).
    #[error("mDNS ({what}): {cause}")]
    Daemon {
        /// What was being done: `start`, `register`, `browse`.
        what: &'static str,
        /// The daemon's error.
        cause: String,
    },
    /// The browsing task ended abnormally.
    #[error("mDNS browsing task: {0}")]
    Task(String),
}

fn daemon_error(what: &'static str) -> impl Fn(mdns_sd::Error) -> MdnsError {
    move |cause| MdnsError::Daemon {
        what,
        cause: cause.to_string(),
    }
}

/// The DNS-SD records a node announces, as content: what [`Announced`] registers, and what
/// a test checks where the network has no multicast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Announcement {
    /// The service type with its subtype, when any: `_wot._tcp.local.` or
    /// `_directory._sub._wot._tcp.local.`.
    pub(crate) service_type: String,
    /// The instance name: the description's title and the port.
    pub(crate) instance: String,
    /// The host name its A/AAAA records name (`concord-<random>.local.`).
    pub(crate) host: String,
    /// The TCP port it serves on.
    pub(crate) port: u16,
    /// The address it listens on; `None` when it listens on every interface (each
    /// interface's own addresses are announced then).
    pub(crate) address: Option<IpAddr>,
    /// The TXT record: `td`, `type`, `scheme`, in that order.
    pub(crate) txt: Vec<(String, String)>,
}

impl Announcement {
    /// The announcement of a node titled `title` of `kind`, serving its description at
    /// `base_url` (its path gives `td=`, its scheme `scheme=`) and listening on `local`.
    pub(crate) fn new(kind: ThingKind, title: &str, base_url: &str, local: SocketAddr) -> Self {
        let (scheme, rest) = base_url.split_once("://").unwrap_or(("http", base_url));
        let path = rest.find('/').map_or("/", |at| &rest[at..]);
        let td = format!(
            "{}{}",
            path.trim_end_matches('/'),
            crate::describe::DESCRIPTION_PATH
        );
        let service_type = match kind {
            ThingKind::Thing => WOT_SERVICE,
            ThingKind::Directory => DIRECTORY_SERVICE,
        };
        let suffix = format!(" ({})", local.port());
        let mut name: String = title.trim().to_owned();
        while name.len() + suffix.len() > MAX_LABEL {
            name.pop();
        }
        Self {
            service_type: service_type.to_owned(),
            instance: format!("{name}{suffix}"),
            host: format!("concord-{:08x}.local.", fastrand::u32(..)),
            port: local.port(),
            address: Some(local.ip()).filter(|ip| !ip.is_unspecified()),
            txt: vec![
                ("td".to_owned(), td),
                ("type".to_owned(), kind.as_str().to_owned()),
                ("scheme".to_owned(), scheme.to_owned()),
            ],
        }
    }

    fn service_info(&self) -> Result<ServiceInfo, MdnsError> {
        let txt: &[(String, String)] = &self.txt;
        let address: Vec<IpAddr> = self.address.into_iter().collect();
        let info = ServiceInfo::new(
            &self.service_type,
            &self.instance,
            &self.host,
            address.as_slice(),
            self.port,
            txt,
        )
        .map_err(daemon_error("record"))?;
        Ok(if self.address.is_none() {
            info.enable_addr_auto()
        } else {
            info
        })
    }
}

/// An announcement on the air: withdrawn (a goodbye packet) when dropped.
pub(crate) struct Announced {
    daemon: ServiceDaemon,
    fullname: String,
}

impl Announced {
    /// Starts announcing `announcement`.
    pub(crate) fn start(announcement: &Announcement) -> Result<Self, MdnsError> {
        let info = announcement.service_info()?;
        let fullname = info.get_fullname().to_owned();
        let daemon = ServiceDaemon::new().map_err(daemon_error("start"))?;
        daemon.register(info).map_err(daemon_error("register"))?;
        Ok(Self { daemon, fullname })
    }
}

impl Drop for Announced {
    fn drop(&mut self) {
        // The daemon takes commands in order: the goodbye goes out before it stops.
        let _ = self.daemon.unregister(&self.fullname);
        let _ = self.daemon.shutdown();
    }
}

impl std::fmt::Debug for Announced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Announced").field(&self.fullname).finish()
    }
}

/// A Thing or directory found on the local network.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FoundThing {
    /// Its DNS-SD instance name (`Product agent (8080)._wot._tcp.local.`).
    pub fullname: String,
    /// Its TXT `type=`: `Thing` or `Directory` (what it said, `Thing` when absent as the
    /// spec's default).
    pub kind: String,
    /// Its host name.
    pub host: String,
    /// Its addresses, IPv4 first.
    pub addresses: Vec<IpAddr>,
    /// Its port.
    pub port: u16,
    /// Its TXT `scheme=` (`http` when absent).
    pub scheme: String,
    /// Its TXT `td=`: the description's path (`/.well-known/wot` when absent).
    pub td: String,
}

impl FoundThing {
    /// The URL of its description: `scheme://address:port/td`, at its first address (its
    /// host name when it announced none).
    pub fn description_url(&self) -> String {
        let host = match self.addresses.first() {
            Some(IpAddr::V6(ip)) => format!("[{ip}]"),
            Some(ip) => ip.to_string(),
            None => self.host.trim_end_matches('.').to_owned(),
        };
        format!(
            "{}://{host}:{}/{}",
            self.scheme,
            self.port,
            self.td.trim_start_matches('/')
        )
    }
}

/// The most Things one browse keeps: announcements of further instances are ignored, so
/// that a flood of them on the local network holds no more memory (and a caller fetching
/// each one's description no more time) than this many.
pub const MAX_ANNOUNCED: usize = 256;

/// The Things (with `directories_only`, the directories) announced on the local network
/// within `wait`, by instance name, at most [`MAX_ANNOUNCED`] of them (the first
/// announced). Runs the mDNS daemon on the blocking pool for `wait`.
///
/// # Errors
/// [`MdnsError`] when the daemon cannot start or browse (no multicast socket).
pub async fn browse_mdns(
    wait: Duration,
    directories_only: bool,
) -> Result<Vec<FoundThing>, MdnsError> {
    tokio::task::spawn_blocking(move || browse_blocking(wait, directories_only))
        .await
        .map_err(|error| MdnsError::Task(error.to_string()))?
}

fn browse_blocking(wait: Duration, directories_only: bool) -> Result<Vec<FoundThing>, MdnsError> {
    let service_type = if directories_only {
        DIRECTORY_SERVICE
    } else {
        WOT_SERVICE
    };
    let daemon = ServiceDaemon::new().map_err(daemon_error("start"))?;
    let events = daemon
        .browse(service_type)
        .map_err(daemon_error("browse"))?;
    let deadline = Instant::now() + wait;
    let mut found = BTreeMap::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match events.recv_timeout(left) {
            Ok(ServiceEvent::ServiceResolved(service)) => {
                let mut addresses: Vec<IpAddr> = service
                    .get_addresses()
                    .iter()
                    .map(|address| address.to_ip_addr())
                    .collect();
                addresses.sort_by_key(|address| (address.is_ipv6(), *address));
                let txt = |key: &str| service.get_property_val_str(key).map(str::to_owned);
                let thing = FoundThing {
                    fullname: service.get_fullname().to_owned(),
                    kind: txt("type").unwrap_or_else(|| ThingKind::Thing.as_str().to_owned()),
                    host: service.get_hostname().to_owned(),
                    addresses,
                    port: service.get_port(),
                    scheme: txt("scheme").unwrap_or_else(|| "http".to_owned()),
                    td: txt("td").unwrap_or_else(|| crate::describe::DESCRIPTION_PATH.to_owned()),
                };
                if found.len() < MAX_ANNOUNCED || found.contains_key(&thing.fullname) {
                    found.insert(thing.fullname.clone(), thing);
                }
            }
            Ok(ServiceEvent::ServiceRemoved(_, fullname)) => {
                found.remove(&fullname);
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let _ = daemon.stop_browse(service_type);
    let _ = daemon.shutdown();
    Ok(found.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_announces_wot_with_its_description_path_type_and_scheme() {
        let local: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let thing = Announcement::new(
            ThingKind::Thing,
            "Product agent",
            "http://127.0.0.1:8080/",
            local,
        );
        assert_eq!(thing.service_type, "_wot._tcp.local.");
        assert_eq!(thing.instance, "Product agent (8080)");
        assert_eq!(thing.port, 8080);
        assert_eq!(thing.address, Some(local.ip()));
        let txt = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            thing.txt,
            txt(&[
                ("td", "/.well-known/wot"),
                ("type", "Thing"),
                ("scheme", "http")
            ])
        );
        let directory = Announcement::new(
            ThingKind::Directory,
            &"D".repeat(100),
            "https://dir.example/tdd/",
            "0.0.0.0:443".parse().unwrap(),
        );
        assert_eq!(directory.service_type, "_directory._sub._wot._tcp.local.");
        assert_eq!(directory.instance.len(), MAX_LABEL);
        assert_eq!(directory.address, None);
        assert_eq!(
            directory.txt,
            txt(&[
                ("td", "/tdd/.well-known/wot"),
                ("type", "Directory"),
                ("scheme", "https")
            ])
        );
        assert!(directory.service_info().is_ok());
    }

    #[test]
    fn a_found_thing_names_its_description_url() {
        let found = FoundThing {
            fullname: "Shop (8080)._wot._tcp.local.".into(),
            kind: "Thing".into(),
            host: "concord-1.local.".into(),
            addresses: vec!["192.0.2.2".parse().unwrap()],
            port: 8080,
            scheme: "http".into(),
            td: "/.well-known/wot".into(),
        };
        assert_eq!(
            found.description_url(),
            "http://192.0.2.2:8080/.well-known/wot"
        );
    }
}
