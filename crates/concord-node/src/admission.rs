//! Who gets in: TCP connections at once (all and per client address), new connections per
//! address per second (a token bucket), sessions per address, and the WebSockets waiting
//! for their hello (a budget of their own whose oldest member is shed for a newcomer).
//! Every count is held by a guard that gives it back when dropped; per-address entries
//! go when nothing holds them and their bucket is full again, so the table stays bounded.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::config::Limits;

pub(crate) mod accept;
mod log;
mod requests;

pub(crate) use log::RefusalLog;

/// A client address as the limits see it: an IPv4 address, or the /64 prefix of an IPv6
/// address (one host usually holds a whole /64). IPv4-mapped IPv6 addresses are IPv4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ClientKey {
    V4(u32),
    V6Prefix(u64),
}

impl ClientKey {
    pub(crate) fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(ip) => Self::V4(u32::from(ip)),
            IpAddr::V6(ip) => match ip.to_ipv4_mapped() {
                Some(ip) => Self::V4(u32::from(ip)),
                None => Self::V6Prefix((u128::from(ip) >> 64) as u64),
            },
        }
    }

    /// The address as a peer's name in the store and transcripts: `ws://203.0.113.7`,
    /// `ws://[2001:db8:1:2::]/64`.
    pub(crate) fn label(self) -> String {
        match self {
            Self::V4(ip) => format!("ws://{}", std::net::Ipv4Addr::from(ip)),
            Self::V6Prefix(prefix) => {
                let network = std::net::Ipv6Addr::from(u128::from(prefix) << 64);
                format!("ws://[{network}]/64")
            }
        }
    }
}

/// Why a new connection or session was refused: each says which limit and for how long
/// the client should wait.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    #[error("this node holds at most {limit} connections at once; try again later")]
    Connections { limit: usize },
    #[error("this node holds at most {limit} connections at once from one address; close one or try again later")]
    ConnectionsPerAddress { limit: usize },
    #[error("this node takes at most {rate} new connections per second from one address (bursts of {burst}); slow down")]
    Rate { rate: u32, burst: u32 },
    #[error("this node tracks too many client addresses at once; try again later")]
    Addresses,
    #[error("this node serves at most {limit} sessions at once from one address; close one or try again later")]
    SessionsPerAddress { limit: usize },
    #[error("this node answers at most {rate} HTTP requests per second from one address (bursts of {burst}); slow down")]
    Requests { rate: u32, burst: u32 },
}

impl Refusal {
    /// 429 when the client itself is over its share, 503 when the node is full.
    pub(crate) fn status(&self) -> u16 {
        match self {
            Self::Connections { .. } | Self::Addresses => 503,
            Self::ConnectionsPerAddress { .. }
            | Self::Rate { .. }
            | Self::SessionsPerAddress { .. }
            | Self::Requests { .. } => 429,
        }
    }

    /// Seconds the client should wait (`Retry-After`).
    pub(crate) fn retry_after(&self) -> u64 {
        1
    }

    /// A short name for logs and aggregation.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Self::Connections { .. } => "max_connections",
            Self::ConnectionsPerAddress { .. } => "max_connections_per_address",
            Self::Rate { .. } => "connection_rate_per_address",
            Self::Addresses => "client_addresses",
            Self::SessionsPerAddress { .. } => "max_sessions_per_address",
            Self::Requests { .. } => "request_rate_per_address",
        }
    }
}

/// One client address's counts and connection bucket.
#[derive(Debug)]
struct Entry {
    connections: usize,
    sessions: usize,
    tokens: f64,
    refilled: Instant,
}

impl Entry {
    fn refill(&mut self, now: Instant, rate: f64, burst: f64) {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(burst);
        self.refilled = now;
    }

    /// Nothing held and the bucket full again: the entry says nothing a new one would not.
    fn is_spent(&self, now: Instant, rate: f64, burst: f64) -> bool {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.connections == 0 && self.sessions == 0 && self.tokens + elapsed * rate >= burst
    }
}

#[derive(Debug, Default)]
struct Table {
    connections: usize,
    clients: HashMap<ClientKey, Entry>,
    last_sweep: Option<Instant>,
    pending: BTreeMap<u64, oneshot::Sender<()>>,
    next_pending: u64,
}

/// The admission state of one server.
#[derive(Debug)]
pub(crate) struct Admission {
    max_connections: usize,
    max_connections_per_address: usize,
    max_sessions_per_address: usize,
    max_pending_hellos: usize,
    rate: f64,
    burst: f64,
    rate_limit: (u32, u32),
    /// Client addresses tracked at once at most; a sweep runs when there are more than
    /// half as many.
    max_clients: usize,
    table: Mutex<Table>,
    /// HTTP requests per address, over all its connections.
    requests: requests::RequestBudget,
}

/// The shortest time between two sweeps of spent entries.
const SWEEP_INTERVAL: Duration = Duration::from_millis(100);

impl Admission {
    pub(crate) fn new(limits: &Limits) -> Arc<Self> {
        Arc::new(Self {
            max_connections: limits.max_connections,
            max_connections_per_address: limits.max_connections_per_address,
            max_sessions_per_address: limits.max_sessions_per_address,
            max_pending_hellos: limits.max_pending_hellos,
            rate: f64::from(limits.connection_rate_per_address),
            burst: f64::from(limits.connection_burst_per_address),
            rate_limit: (
                limits.connection_rate_per_address,
                limits.connection_burst_per_address,
            ),
            max_clients: limits.max_connections.saturating_mul(4).max(1024),
            table: Mutex::new(Table::default()),
            requests: requests::RequestBudget::new(limits),
        })
    }

    /// Spends one HTTP request (on any route, on a new or a kept-alive connection) of
    /// `key`'s address, or says it is over its budget.
    pub(crate) fn request(&self, key: ClientKey) -> Result<(), Refusal> {
        self.requests.take(key, Instant::now())
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // The table's invariants hold between statements: a panic elsewhere leaves it usable.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits a new TCP connection from `remote`, or says which limit refuses it.
    pub(crate) fn connect(
        self: &Arc<Self>,
        remote: SocketAddr,
    ) -> Result<ConnectionGuard, Refusal> {
        let key = ClientKey::of(remote.ip());
        let now = Instant::now();
        let mut table = self.table();
        if table.clients.len() >= self.max_clients / 2
            && table
                .last_sweep
                .is_none_or(|last| now.saturating_duration_since(last) >= SWEEP_INTERVAL)
        {
            let (rate, burst) = (self.rate, self.burst);
            table
                .clients
                .retain(|_, entry| !entry.is_spent(now, rate, burst));
            table.last_sweep = Some(now);
        }
        if table.connections >= self.max_connections {
            return Err(Refusal::Connections {
                limit: self.max_connections,
            });
        }
        if !table.clients.contains_key(&key) && table.clients.len() >= self.max_clients {
            return Err(Refusal::Addresses);
        }
        let entry = table.clients.entry(key).or_insert(Entry {
            connections: 0,
            sessions: 0,
            tokens: self.burst,
            refilled: now,
        });
        entry.refill(now, self.rate, self.burst);
        if entry.connections >= self.max_connections_per_address {
            return Err(Refusal::ConnectionsPerAddress {
                limit: self.max_connections_per_address,
            });
        }
        if entry.tokens < 1.0 {
            let (rate, burst) = self.rate_limit;
            return Err(Refusal::Rate { rate, burst });
        }
        entry.tokens -= 1.0;
        entry.connections += 1;
        table.connections += 1;
        Ok(ConnectionGuard {
            admission: Arc::clone(self),
            key,
        })
    }

    /// Takes a session slot for `key`'s address (held while the session waits for its hello
    /// and while it runs), or refuses it when the address holds its share.
    pub(crate) fn session(self: &Arc<Self>, key: ClientKey) -> Result<SessionGuard, Refusal> {
        let mut table = self.table();
        let Some(entry) = table.clients.get_mut(&key) else {
            // Only a connection admitted here asks, and it holds its entry.
            return Err(Refusal::Addresses);
        };
        if entry.sessions >= self.max_sessions_per_address {
            return Err(Refusal::SessionsPerAddress {
                limit: self.max_sessions_per_address,
            });
        }
        entry.sessions += 1;
        Ok(SessionGuard {
            admission: Arc::clone(self),
            key,
        })
    }

    /// Enters a WebSocket into the budget of those waiting for their hello. When the budget
    /// is full, the oldest waiting is told to go (its [`PendingHello::shed`] resolves).
    pub(crate) fn pending_hello(self: &Arc<Self>) -> PendingHello {
        let (tell, shed) = oneshot::channel();
        let mut table = self.table();
        while table.pending.len() >= self.max_pending_hellos {
            match table.pending.pop_first() {
                // A waiter already gone is simply dropped.
                Some((_, oldest)) => {
                    let _ = oldest.send(());
                }
                None => break,
            }
        }
        let id = table.next_pending;
        table.next_pending += 1;
        table.pending.insert(id, tell);
        PendingHello {
            admission: Arc::clone(self),
            id,
            shed,
        }
    }

    /// WebSockets waiting for their hello now.
    pub(crate) fn pending(&self) -> usize {
        self.table().pending.len()
    }

    /// TCP connections held now.
    pub(crate) fn connections(&self) -> usize {
        self.table().connections
    }

    /// Client addresses tracked now (for tests of the table's bound).
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.table().clients.len()
    }

    fn release(&self, key: ClientKey, connection: bool) {
        let now = Instant::now();
        let mut table = self.table();
        if connection {
            table.connections = table.connections.saturating_sub(1);
        }
        let Some(entry) = table.clients.get_mut(&key) else {
            return;
        };
        if connection {
            entry.connections = entry.connections.saturating_sub(1);
        } else {
            entry.sessions = entry.sessions.saturating_sub(1);
        }
        if entry.is_spent(now, self.rate, self.burst) {
            table.clients.remove(&key);
        }
    }
}

/// One admitted TCP connection; dropping it gives the connection back.
#[derive(Debug)]
pub(crate) struct ConnectionGuard {
    admission: Arc<Admission>,
    key: ClientKey,
}

impl ConnectionGuard {
    /// The client address this connection counts against.
    pub(crate) fn key(&self) -> ClientKey {
        self.key
    }
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.admission.release(self.key, true);
    }
}

/// One session slot of an address; dropping it gives the slot back.
#[derive(Debug)]
pub(crate) struct SessionGuard {
    admission: Arc<Admission>,
    key: ClientKey,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        self.admission.release(self.key, false);
    }
}

/// A WebSocket waiting for its hello; dropping it leaves the budget.
#[derive(Debug)]
pub(crate) struct PendingHello {
    admission: Arc<Admission>,
    id: u64,
    shed: oneshot::Receiver<()>,
}

impl PendingHello {
    /// Resolves when a newer WebSocket took this one's place in the budget.
    pub(crate) async fn shed(&mut self) {
        if (&mut self.shed).await.is_err() {
            // Never shed (the sender is only dropped with the entry this guard removes).
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for PendingHello {
    fn drop(&mut self) {
        self.admission.table().pending.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_connections: 4,
            max_connections_per_address: 2,
            max_sessions_per_address: 1,
            max_pending_hellos: 2,
            connection_rate_per_address: 1,
            connection_burst_per_address: 3,
            ..Limits::default()
        }
    }

    fn at(ip: &str) -> SocketAddr {
        SocketAddr::new(ip.parse().unwrap(), 40000)
    }

    #[test]
    fn ipv6_addresses_key_on_their_64_prefix_and_mapped_ipv4_on_the_address() {
        let a = ClientKey::of("2001:db8:1:2::1".parse().unwrap());
        let b = ClientKey::of("2001:db8:1:2:ffff::9".parse().unwrap());
        let c = ClientKey::of("2001:db8:1:3::1".parse().unwrap());
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(
            ClientKey::of("::ffff:192.0.2.1".parse().unwrap()),
            ClientKey::of("192.0.2.1".parse().unwrap())
        );
    }

    #[test]
    fn connections_are_capped_per_address_and_in_all_and_given_back() {
        let admission = Admission::new(&limits());
        let a1 = admission.connect(at("192.0.2.1")).unwrap();
        let _a2 = admission.connect(at("192.0.2.1")).unwrap();
        assert_eq!(
            admission.connect(at("192.0.2.1")).unwrap_err(),
            Refusal::ConnectionsPerAddress { limit: 2 }
        );
        let _b1 = admission.connect(at("192.0.2.2")).unwrap();
        let _b2 = admission.connect(at("192.0.2.2")).unwrap();
        let refused = admission.connect(at("192.0.2.3")).unwrap_err();
        assert_eq!(refused, Refusal::Connections { limit: 4 });
        assert_eq!(refused.status(), 503);
        drop(a1);
        assert_eq!(admission.connections(), 3);
        assert!(admission.connect(at("192.0.2.3")).is_ok());
    }

    #[test]
    fn the_bucket_refuses_a_burst_over_its_size() {
        let admission = Admission::new(&Limits {
            max_connections_per_address: 100,
            max_connections: 100,
            ..limits()
        });
        for _ in 0..3 {
            drop(admission.connect(at("192.0.2.1")).unwrap());
        }
        let refused = admission.connect(at("192.0.2.1")).unwrap_err();
        assert_eq!(refused, Refusal::Rate { rate: 1, burst: 3 });
        assert_eq!(refused.status(), 429);
        assert!(refused.to_string().contains("per second"), "{refused}");
        // Another address has its own bucket.
        assert!(admission.connect(at("192.0.2.2")).is_ok());
    }

    #[test]
    fn entries_go_when_nothing_holds_them_and_their_bucket_is_full() {
        let admission = Admission::new(&Limits {
            connection_rate_per_address: 1_000_000,
            ..limits()
        });
        let connection = admission.connect(at("192.0.2.1")).unwrap();
        let session = admission.session(connection.key()).unwrap();
        assert_eq!(admission.tracked(), 1);
        drop(session);
        assert_eq!(admission.tracked(), 1, "the connection still holds it");
        std::thread::sleep(Duration::from_millis(5));
        drop(connection);
        assert_eq!(admission.tracked(), 0);
    }

    #[test]
    fn sessions_are_capped_per_address() {
        let admission = Admission::new(&limits());
        let connection = admission.connect(at("192.0.2.1")).unwrap();
        let _session = admission.session(connection.key()).unwrap();
        let refused = admission.session(connection.key()).unwrap_err();
        assert_eq!(refused, Refusal::SessionsPerAddress { limit: 1 });
        assert!(
            refused.to_string().contains("at most 1 sessions"),
            "{refused}"
        );
    }

    #[tokio::test]
    async fn a_full_pending_budget_sheds_its_oldest() {
        let admission = Admission::new(&limits());
        let mut first = admission.pending_hello();
        let mut second = admission.pending_hello();
        assert_eq!(admission.pending(), 2);
        let _third = admission.pending_hello();
        assert_eq!(admission.pending(), 2);
        tokio::time::timeout(Duration::from_secs(1), first.shed())
            .await
            .expect("the oldest is shed");
        assert!(
            tokio::time::timeout(Duration::from_millis(50), second.shed())
                .await
                .is_err(),
            "the second stays"
        );
        drop(first);
        drop(second);
        assert_eq!(admission.pending(), 1);
    }
}
