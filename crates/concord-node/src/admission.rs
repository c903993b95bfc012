//! Who gets in: TCP connections at once (all and per client address), new connections per
//! address per second (a token bucket), sessions per address, and the WebSockets waiting
//! for their hello (a budget of their own, with a share per address: when it is full, a
//! newcomer sheds the oldest waiting of the address holding the most, never one from
//! another address younger than a floor).
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

/// `203.0.113.7`, or `2001:db8:0:1::/64`: how logs and the node's per-caller counts name a
/// client address.
impl std::fmt::Display for ClientKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Self::V4(ip) => write!(f, "{}", std::net::Ipv4Addr::from(ip)),
            Self::V6Prefix(prefix) => {
                write!(
                    f,
                    "{}/64",
                    std::net::Ipv6Addr::from(u128::from(prefix) << 64)
                )
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
    #[error("this node holds at most {limit} connections waiting for their sourceHello from one address; say hello on those or try again later")]
    PendingHellosPerAddress { limit: usize },
    #[error("this node holds at most {limit} connections waiting for their sourceHello, all of them new; try again later")]
    PendingHellos { limit: usize },
    #[error("this node answers at most {rate} HTTP requests per second from one address (bursts of {burst}); slow down")]
    Requests { rate: u32, burst: u32 },
}

impl Refusal {
    /// 429 when the client itself is over its share, 503 when the node is full.
    pub(crate) fn status(&self) -> u16 {
        match self {
            Self::Connections { .. } | Self::Addresses | Self::PendingHellos { .. } => 503,
            Self::ConnectionsPerAddress { .. }
            | Self::Rate { .. }
            | Self::SessionsPerAddress { .. }
            | Self::PendingHellosPerAddress { .. }
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
            Self::PendingHellosPerAddress { .. } => "max_pending_hellos_per_address",
            Self::PendingHellos { .. } => "max_pending_hellos",
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

/// One WebSocket waiting for its hello: whose, since when, and how to tell it to go.
#[derive(Debug)]
struct Waiting {
    key: ClientKey,
    since: Instant,
    tell: oneshot::Sender<()>,
}

#[derive(Debug, Default)]
struct Table {
    connections: usize,
    clients: HashMap<ClientKey, Entry>,
    last_sweep: Option<Instant>,
    /// The WebSockets waiting for their hello, oldest first.
    pending: BTreeMap<u64, Waiting>,
    /// How many of them each address holds (no entry for none).
    pending_per_address: HashMap<ClientKey, usize>,
    next_pending: u64,
}

impl Table {
    /// The oldest waiting of `key`'s address, younger than `latest` or not.
    fn oldest_of(&self, key: ClientKey) -> Option<(u64, Instant)> {
        self.pending
            .iter()
            .find(|(_, waiting)| waiting.key == key)
            .map(|(id, waiting)| (*id, waiting.since))
    }

    /// The address holding the most waiting WebSockets, other than `except` (ties: the
    /// one whose oldest waited longest), with how many it holds.
    fn heaviest_other(&self, except: ClientKey) -> Option<(ClientKey, usize)> {
        let most = self
            .pending_per_address
            .iter()
            .filter(|(key, _)| **key != except)
            .map(|(_, count)| *count)
            .max()?;
        // Oldest first: the first of the heaviest addresses met is the one that waited longest.
        self.pending
            .values()
            .find(|waiting| {
                waiting.key != except && self.pending_per_address.get(&waiting.key) == Some(&most)
            })
            .map(|waiting| (waiting.key, most))
    }

    /// Tells the waiting WebSocket `id` to go and forgets it.
    fn shed(&mut self, id: u64) {
        if let Some(waiting) = self.pending.remove(&id) {
            self.forget_pending(waiting.key);
            // A waiter already gone is simply dropped.
            let _ = waiting.tell.send(());
        }
    }

    fn forget_pending(&mut self, key: ClientKey) {
        if let Some(count) = self.pending_per_address.get_mut(&key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.pending_per_address.remove(&key);
            }
        }
    }
}

/// The admission state of one server.
#[derive(Debug)]
pub(crate) struct Admission {
    max_connections: usize,
    max_connections_per_address: usize,
    max_sessions_per_address: usize,
    max_pending_hellos: usize,
    max_pending_hellos_per_address: usize,
    pending_hello_shed_after: Duration,
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
            max_pending_hellos_per_address: limits.pending_hellos_per_address_in_force(),
            pending_hello_shed_after: limits.pending_hello_shed_after_in_force(),
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

    /// Enters a WebSocket from `key`'s address into the budget of those waiting for their
    /// hello, or refuses it: 429 when its address holds its share
    /// (`max_pending_hellos_per_address`) while other addresses' WebSockets wait too, 503 when the budget is full of WebSockets from
    /// other addresses that have not waited `pending_hello_shed_after` yet. When the
    /// budget is full, the oldest waiting of the address holding the most is told to go
    /// (its [`PendingHello::shed`] resolves): the newcomer's own, when its address holds
    /// at least as many as any other; else another address's, at once when that address
    /// holds at least two more than the newcomer's (more than its part), else only once
    /// it has waited the floor. An address reconnecting in a loop thus sheds its own, not
    /// another's caller in the middle of its handshake, and addresses holding many cannot
    /// keep the others out by reopening their sockets before the floor.
    pub(crate) fn pending_hello(self: &Arc<Self>, key: ClientKey) -> Result<PendingHello, Refusal> {
        let now = Instant::now();
        let mut table = self.table();
        let own = table.pending_per_address.get(&key).copied().unwrap_or(0);
        // The share binds only while other addresses wait too: one caller's burst (many
        // sessions opened at once) is not refused on an otherwise quiet node, and a
        // newcomer from another address sheds from the heaviest below.
        let others = table.pending.len().saturating_sub(own);
        if own >= self.max_pending_hellos_per_address && others > 0 {
            return Err(Refusal::PendingHellosPerAddress {
                limit: self.max_pending_hellos_per_address,
            });
        }
        while table.pending.len() >= self.max_pending_hellos {
            let own = table.pending_per_address.get(&key).copied().unwrap_or(0);
            let other = table
                .heaviest_other(key)
                .filter(|(_, count)| *count > own)
                .and_then(|(heaviest, count)| {
                    let (id, since) = table.oldest_of(heaviest)?;
                    // Holding more than the newcomer's address would with it, the
                    // heaviest address has more than its part: the floor does not
                    // protect it (else a few addresses reopening their sockets before
                    // the floor would keep every other address out).
                    let beyond_its_part = count > own + 1;
                    let waited = now.saturating_duration_since(since);
                    (beyond_its_part || waited >= self.pending_hello_shed_after).then_some(id)
                });
            let victim = match other {
                Some(id) => id,
                None => match table.oldest_of(key) {
                    Some((id, _)) => id,
                    None => {
                        return Err(Refusal::PendingHellos {
                            limit: self.max_pending_hellos,
                        })
                    }
                },
            };
            table.shed(victim);
        }
        let (tell, shed) = oneshot::channel();
        let id = table.next_pending;
        table.next_pending += 1;
        table.pending.insert(
            id,
            Waiting {
                key,
                since: now,
                tell,
            },
        );
        *table.pending_per_address.entry(key).or_insert(0) += 1;
        Ok(PendingHello {
            admission: Arc::clone(self),
            id,
            shed,
        })
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
        let mut table = self.admission.table();
        if let Some(waiting) = table.pending.remove(&self.id) {
            table.forget_pending(waiting.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_key_names_an_ipv4_address_or_an_ipv6_slash_64() {
        let key = |ip: &str| ClientKey::of(ip.parse().unwrap()).to_string();
        assert_eq!(key("203.0.113.7"), "203.0.113.7");
        assert_eq!(key("::ffff:203.0.113.7"), "203.0.113.7");
        assert_eq!(key("2001:db8:0:1::7"), "2001:db8:0:1::/64");
        assert_eq!(key("2001:db8:0:1:ffff::9"), key("2001:db8:0:1::7"));
    }

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
        let key = ClientKey::of(at("192.0.2.1").ip());
        let mut first = admission.pending_hello(key).unwrap();
        let mut second = admission.pending_hello(key).unwrap();
        assert_eq!(admission.pending(), 2);
        let _third = admission.pending_hello(key).unwrap();
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

    #[tokio::test]
    async fn a_full_pending_budget_sheds_from_the_address_holding_most_at_once() {
        let admission = Admission::new(&Limits {
            max_pending_hellos: 4,
            max_pending_hellos_per_address: 3,
            pending_hello_shed_after: Duration::from_secs(30),
            ..limits()
        });
        let (attacker, caller, third) = (
            ClientKey::of(at("192.0.2.1").ip()),
            ClientKey::of(at("192.0.2.2").ip()),
            ClientKey::of(at("192.0.2.3").ip()),
        );
        // Alone, an address's burst may go past its share.
        let burst: Vec<_> = (0..4)
            .map(|_| admission.pending_hello(attacker).unwrap())
            .collect();
        drop(burst);
        assert_eq!(admission.pending(), 0);
        let mut caller_waiting = admission.pending_hello(caller).unwrap();
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(admission.pending_hello(attacker).unwrap());
        }
        // Its share is taken while another address waits: a fourth is refused, 429.
        let refused = admission.pending_hello(attacker).unwrap_err();
        assert_eq!(refused, Refusal::PendingHellosPerAddress { limit: 3 });
        assert_eq!(refused.status(), 429);
        assert_eq!(admission.pending(), 4);
        // Full, and the attacker's are younger than the floor, but it holds more than its
        // part: the newcomer sheds the attacker's oldest at once, not the caller.
        let _third = admission.pending_hello(third).unwrap();
        tokio::time::timeout(Duration::from_secs(1), held[0].shed())
            .await
            .expect("the oldest of the heaviest address is shed");
        assert!(
            tokio::time::timeout(Duration::from_millis(50), caller_waiting.shed())
                .await
                .is_err(),
            "the caller stays"
        );
        assert_eq!(admission.pending(), 4);
        // The attacker reopening sheds its own, whatever their age.
        let again = admission.pending_hello(attacker).unwrap();
        tokio::time::timeout(Duration::from_secs(1), held[1].shed())
            .await
            .expect("the attacker's own oldest is shed");
        drop(held);
        drop(again);
        assert_eq!(admission.pending(), 2);
        assert!(!admission
            .table()
            .pending_per_address
            .contains_key(&attacker));
    }

    #[tokio::test]
    async fn the_floor_protects_an_address_holding_no_more_than_its_part() {
        let admission = Admission::new(&Limits {
            max_pending_hellos: 3,
            max_pending_hellos_per_address: 3,
            pending_hello_shed_after: Duration::from_millis(200),
            ..limits()
        });
        let keys: Vec<_> = ["192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"]
            .iter()
            .map(|address| ClientKey::of(at(address).ip()))
            .collect();
        // Three addresses hold one each: a fourth's newcomer would hold as many.
        let mut held: Vec<_> = keys[..3]
            .iter()
            .map(|key| admission.pending_hello(*key).unwrap())
            .collect();
        let refused = admission.pending_hello(keys[3]).unwrap_err();
        assert_eq!(refused, Refusal::PendingHellos { limit: 3 });
        assert_eq!(refused.status(), 503);
        tokio::time::sleep(Duration::from_millis(250)).await;
        // Past the floor: the oldest goes.
        let _fourth = admission.pending_hello(keys[3]).unwrap();
        tokio::time::timeout(Duration::from_secs(1), held[0].shed())
            .await
            .expect("the oldest past the floor is shed");
        assert!(
            tokio::time::timeout(Duration::from_millis(50), held[1].shed())
                .await
                .is_err(),
            "the second stays"
        );
    }
}
