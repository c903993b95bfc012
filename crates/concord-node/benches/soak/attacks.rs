//! The attacks, each a crowd of raw clients from addresses other than the legitimate
//! caller's (127.0.0.2 to 127.0.0.17: Linux routes all of 127/8 to the loopback), that
//! reconnect whenever the provider drops them, until told to stop. The interface attacks
//! resume the provider's interface protocol by hash (0-RTT, as any stranger may on a node
//! without a DID) and write W3C Web Thing Protocol messages by hand. The DID attack signs
//! its upgrades (RFC 9421, as ANP's SDK does) with DIDs on `*.localhost` hosts, which the
//! provider resolves on loopback in its test mode, served by a listener of this process
//! that accepts and never answers.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use concord_fixtures::weather;
use concord_identity::{sign_request, Identity, Keys, RequestTarget};
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use crate::provider::WORK;

/// How many source addresses the attackers spread over.
pub const ADDRESSES: u8 = 16;

/// How long a silent interface client holds its session before it reconnects (so that a
/// client the provider shed comes back).
const HOLD: Duration = Duration::from_secs(5);

/// PT 1 (application) header byte.
const APPLICATION: u8 = 0x40;

/// Where the attacks aim.
#[derive(Debug, Clone)]
pub struct Target {
    pub addr: SocketAddr,
    pub endpoint: String,
    /// A protocol the provider holds (the legitimate caller's), for 0-RTT hellos.
    pub hash: String,
    /// The provider's interface protocol (every affordance), for 0-RTT hellos.
    pub interface_hash: String,
    /// The provider's description URL, for keep-alive fetches.
    pub description_path: String,
}

/// One attack: a name for the table and how to run it.
#[derive(Debug, Clone, Copy)]
pub enum Attack {
    /// WebSockets upgraded that never say hello.
    SilentUpgrades { clients: usize },
    /// A hello, then silence (no proposal).
    HelloThenSilence { clients: usize },
    /// A 0-RTT hello naming the provider's protocol, then silence.
    ResumedThenSilence { clients: usize },
    /// TCP connections that send nothing, and slowloris requests dribbled a byte at a time.
    IdleTcp { silent: usize, dribbling: usize },
    /// Hellos, then a candidate as large as `bytes` made of one huge `enum`.
    LargeCandidates { clients: usize, bytes: usize },
    /// 0-RTT hellos naming the provider's protocol, as fast as they are answered.
    ZeroRttFlood { clients: usize },
    /// Hellos with the largest fields a hello may carry, then proposals at the size
    /// limit, as fast as they are answered: what the store must not keep whole.
    StoreFill { clients: usize },
    /// Connections opened and dropped as fast as possible.
    ConnectionChurn { clients: usize },
    /// WebSockets upgraded that never say hello, all from one address.
    SilentUpgradesFromOne { clients: usize },
    /// Interface sessions that subscribe to the event (or observe the property) and
    /// then neither read nor answer pings.
    SilentSubscribers { clients: usize },
    /// Interface sessions that open a stream and then send and read nothing.
    SilentStreams { clients: usize },
    /// Interface sessions that start long-running actions, as many as they may.
    ActionTableFill { clients: usize },
    /// Interface sessions that invoke the process-backed notify action 20 times a second.
    ProcessFlood { clients: usize },
    /// Kept-alive HTTP connections fetching the description as fast as answered.
    KeepAliveFetches { connections: usize },
    /// Upgrades signed with DIDs whose host accepts and never answers, `per_address` from
    /// each of the [`ADDRESSES`] (as many as the provider lets one address authenticate
    /// at once), each refused one renewed with a DID on a host never used before: the
    /// even addresses' hosts all under `evil.localhost` (one registrable domain), the odd
    /// ones' under `evilN.localhost` (a domain per address, free to mint).
    SilentDidHosts { per_address: usize },
}

impl Attack {
    pub fn name(&self) -> String {
        match *self {
            Self::SilentUpgrades { clients } => format!("{clients} silent upgrades"),
            Self::HelloThenSilence { clients } => format!("{clients} hello, then silence"),
            Self::ResumedThenSilence { clients } => format!("{clients} 0-RTT, then silence"),
            Self::IdleTcp { silent, dribbling } => {
                format!("{silent} idle TCP + {dribbling} slowloris")
            }
            Self::LargeCandidates { clients, bytes } => {
                format!("{clients} x {} KiB candidates", bytes / 1024)
            }
            Self::ZeroRttFlood { clients } => format!("{clients} 0-RTT hello floods"),
            Self::StoreFill { clients } => format!("{clients} store fillers"),
            Self::ConnectionChurn { clients } => format!("{clients} connection churners"),
            Self::SilentUpgradesFromOne { clients } => {
                format!("{clients} silent upgrades from one address")
            }
            Self::SilentSubscribers { clients } => format!("{clients} silent subscribers"),
            Self::SilentStreams { clients } => format!("{clients} silent streams"),
            Self::ActionTableFill { clients } => format!("{clients} action-table fillers"),
            Self::ProcessFlood { clients } => format!("{clients} x 20/s process starters"),
            Self::KeepAliveFetches { connections } => {
                format!("{connections} kept-alive description fetchers")
            }
            Self::SilentDidHosts { per_address } => {
                format!("{ADDRESSES} x {per_address} DIDs on silent hosts")
            }
        }
    }

    /// Whether the attack aims at signed callers (a signed caller runs beside it).
    pub fn against_signed_callers(&self) -> bool {
        matches!(self, Self::SilentDidHosts { .. })
    }

    /// Runs the attack until `stop`; returns how many connections it opened.
    pub async fn run(self, target: Target, stop: watch::Receiver<bool>) -> u64 {
        let opened = Arc::new(AtomicU64::new(0));
        let mut tasks = JoinSet::new();
        let mut spawn_from = |index: usize, addresses: u8, kind: Kind| {
            let (target, stop, opened) = (target.clone(), stop.clone(), Arc::clone(&opened));
            let source = Ipv4Addr::new(127, 0, 0, 2 + (index % usize::from(addresses)) as u8);
            tasks.spawn(client(index, source, kind, target, stop, opened));
        };
        let mut spawn = |index: usize, kind: Kind| spawn_from(index, ADDRESSES, kind);
        match self {
            Self::SilentUpgrades { clients } => {
                (0..clients).for_each(|i| spawn(i, Kind::Upgrade { hello: None }));
            }
            Self::HelloThenSilence { clients } => {
                (0..clients).for_each(|i| spawn(i, Kind::Upgrade { hello: Some(false) }));
            }
            Self::ResumedThenSilence { clients } => {
                (0..clients).for_each(|i| spawn(i, Kind::Upgrade { hello: Some(true) }));
            }
            Self::IdleTcp { silent, dribbling } => {
                (0..silent).for_each(|i| spawn(i, Kind::IdleTcp));
                (0..dribbling).for_each(|i| spawn(i, Kind::Slowloris));
            }
            Self::LargeCandidates { clients, bytes } => {
                let proposal = propose(huge_enum(bytes));
                (0..clients).for_each(|i| spawn(i, Kind::Propose(proposal.clone())));
            }
            Self::ZeroRttFlood { clients } => (0..clients).for_each(|i| spawn(i, Kind::Flood)),
            Self::StoreFill { clients } => (0..clients).for_each(|i| {
                let mut big = hello_value(None, i);
                big["messageId"] = json!("m".repeat(128));
                big["sourceDid"] = json!(format!("did:wba:{}", "x".repeat(2000)));
                let hello = Message::Text(big.to_string().into());
                let proposal = propose(filler(60 * 1024, i));
                spawn(i, Kind::Fill { hello, proposal });
            }),
            Self::ConnectionChurn { clients } => {
                (0..clients).for_each(|i| spawn(i, Kind::Churn));
            }
            Self::SilentUpgradesFromOne { clients } => {
                (0..clients).for_each(|i| spawn_from(i, 1, Kind::Upgrade { hello: None }))
            }
            Self::SilentSubscribers { clients } => (0..clients).for_each(|i| {
                spawn(i, Kind::Interface(Script::Subscribe));
            }),
            Self::SilentStreams { clients } => {
                (0..clients).for_each(|i| spawn(i, Kind::Interface(Script::HoldStream)));
            }
            Self::ActionTableFill { clients } => {
                (0..clients).for_each(|i| spawn(i, Kind::Interface(Script::StartActions)));
            }
            Self::ProcessFlood { clients } => {
                (0..clients).for_each(|i| spawn(i, Kind::Interface(Script::StartProcesses)));
            }
            Self::KeepAliveFetches { connections } => {
                (0..connections).for_each(|i| spawn(i, Kind::KeepAlive));
            }
            Self::SilentDidHosts { per_address } => match silent_host(stop.clone()).await {
                Ok(port) => (0..per_address * usize::from(ADDRESSES))
                    .for_each(|i| spawn(i, Kind::SignedUpgrade { port })),
                Err(error) => eprintln!("soak: no silent DID host: {error}"),
            },
        }
        while tasks.join_next().await.is_some() {}
        opened.load(Ordering::Relaxed)
    }
}

/// What one client does; the messages are built once, before the attack starts, so that
/// making them costs the bench process (which hosts the legitimate caller too) nothing
/// while the attack runs.
#[derive(Debug, Clone)]
enum Kind {
    /// Upgrade; with `Some(resume)` say hello (naming the protocol when `resume`).
    Upgrade {
        hello: Option<bool>,
    },
    IdleTcp,
    Slowloris,
    Propose(Message),
    Flood,
    Fill {
        hello: Message,
        proposal: Message,
    },
    Churn,
    /// A 0-RTT hello naming the interface protocol, then a script.
    Interface(Script),
    /// HTTP/1.1 requests for the description over one kept-alive connection.
    KeepAlive,
    /// An upgrade signed with a new DID on a new host at the silent DID host's `port`.
    SignedUpgrade {
        port: u16,
    },
}

/// What an interface client does once its session is resumed.
#[derive(Debug, Clone, Copy)]
enum Script {
    /// Subscribe to the event (even clients) or observe the property (odd ones), then
    /// read nothing.
    Subscribe,
    /// Open the voice stream, then send and read nothing.
    HoldStream,
    /// Start the long-running action again and again, reading the answers.
    StartActions,
    /// Invoke the process-backed notify action 20 times a second, reading the answers.
    StartProcesses,
}

/// One attacking client: connects from its address, does its kind of harm, and
/// reconnects when dropped (after a short pause when refused), until `stop`.
async fn client(
    index: usize,
    source: Ipv4Addr,
    kind: Kind,
    target: Target,
    mut stop: watch::Receiver<bool>,
    opened: Arc<AtomicU64>,
) {
    while !*stop.borrow() {
        let opening = opened.fetch_add(1, Ordering::Relaxed);
        let round = async {
            let Ok(tcp) = connect_from(source, target.addr).await else {
                return false;
            };
            match &kind {
                Kind::IdleTcp => idle(tcp).await,
                Kind::Slowloris => slowloris(tcp).await,
                Kind::Churn => {
                    drop(tcp);
                    true
                }
                Kind::KeepAlive => keep_alive(tcp, &target.description_path).await,
                Kind::SignedUpgrade { port } => {
                    signed_upgrade(tcp, &target.endpoint, index, opening, *port).await
                }
                _ => {
                    let Ok((socket, _)) =
                        tokio_tungstenite::client_async(target.endpoint.as_str(), tcp).await
                    else {
                        return false;
                    };
                    websocket(kind.clone(), socket, &target, index).await
                }
            }
        };
        let pause = tokio::select! {
            accepted = round => !accepted,
            _ = stop.changed() => return,
        };
        if pause {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(200)) => {}
                _ = stop.changed() => return,
            }
        }
    }
}

async fn connect_from(source: Ipv4Addr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((source, 0)))?;
    socket.connect(to).await
}

/// Holds the connection, sending nothing, until the provider closes it.
async fn idle(mut tcp: TcpStream) -> bool {
    let mut buffer = [0_u8; 1024];
    while matches!(tcp.read(&mut buffer).await, Ok(read) if read > 0) {}
    true
}

/// Sends a request line and headers one byte every half second.
async fn slowloris(mut tcp: TcpStream) -> bool {
    let request = b"GET /.well-known/wot HTTP/1.1\r\nHost: x\r\nX-Padding: ";
    for byte in request.iter().chain(std::iter::repeat(&b'a')) {
        if tcp.write_all(&[*byte]).await.is_err() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    true
}

type Socket = WebSocketStream<TcpStream>;

async fn websocket(kind: Kind, mut socket: Socket, target: &Target, index: usize) -> bool {
    let hash = target.hash.as_str();
    match kind {
        Kind::Upgrade { hello: None } => {}
        Kind::Upgrade {
            hello: Some(resume),
        } => {
            let hash = resume.then_some(hash);
            if socket.send(hello(hash, index)).await.is_err() {
                return true;
            }
        }
        Kind::Propose(proposal) => {
            if socket.send(hello(None, index)).await.is_err()
                || socket.next().await.is_none()
                || socket.send(proposal).await.is_err()
            {
                return true;
            }
        }
        Kind::Flood => {
            let _ = socket.send(hello(Some(hash), index)).await;
            let _ = socket.next().await;
            let _ = socket.close(None).await;
            return true;
        }
        Kind::Fill { hello, proposal } => {
            if socket.send(hello).await.is_err()
                || socket.next().await.is_none()
                || socket.send(proposal).await.is_err()
            {
                return true;
            }
        }
        Kind::Interface(script) => {
            if socket
                .send(hello(Some(&target.interface_hash), index))
                .await
                .is_err()
            {
                return true;
            }
            return interface(script, socket, index).await;
        }
        Kind::IdleTcp
        | Kind::Slowloris
        | Kind::Churn
        | Kind::KeepAlive
        | Kind::SignedUpgrade { .. } => return true,
    }
    // Read (and so answer pings) until the provider ends it.
    while let Some(Ok(message)) = socket.next().await {
        if matches!(message, Message::Close(_)) {
            break;
        }
    }
    true
}

fn hello_value(hash: Option<&str>, index: usize) -> serde_json::Value {
    let mut meta = json!({"version": "1.0", "supportedCapabilities": ["testCasesNegotiation"]});
    if let Some(hash) = hash {
        meta["usedProtocolHash"] = json!(hash);
    }
    json!({
        "version": "1.0", "type": "sourceHello",
        "messageId": format!("attacker{index:08}"), "metaProtocol": meta,
    })
}

fn hello(hash: Option<&str>, index: usize) -> Message {
    Message::Text(hello_value(hash, index).to_string().into())
}

fn propose(candidate: String) -> Message {
    let message = json!({
        "action": "protocolNegotiation", "sequenceId": 0, "status": "negotiating",
        "candidateProtocols": candidate, "modificationSummary": "",
    });
    let mut bytes = vec![0_u8];
    bytes.extend_from_slice(message.to_string().as_bytes());
    Message::Binary(bytes.into())
}

/// A product-info candidate whose `productId` enum makes it about `bytes` long.
fn huge_enum(bytes: usize) -> String {
    let values: Vec<String> = (0..bytes / 10).map(|n| format!("\"P{n:06}\"")).collect();
    candidate(&values.join(","), "Get product information by id.")
}

/// A valid-looking candidate padded with prose to about `bytes`, different per client.
fn filler(bytes: usize, index: usize) -> String {
    let prose = format!("client {index} says: {}", "lorem ipsum ".repeat(bytes / 12));
    candidate("\"P00001\"", &prose)
}

fn candidate(enum_values: &str, requirement: &str) -> String {
    format!(
        "# Requirements\n\n{requirement}\n\n# Request Message Format\n\n```json\n\
         {{\"type\":\"object\",\"properties\":{{\"messageId\":{{\"type\":\"string\"}},\
         \"type\":{{\"const\":\"getProductInfo\"}},\"productId\":{{\"type\":\"string\",\
         \"enum\":[{enum_values}]}}}},\"required\":[\"messageId\",\"type\",\"productId\"]}}\n```\n\n\
         # Response Message Format\n\n```json\n\
         {{\"type\":\"object\",\"properties\":{{\"messageId\":{{\"type\":\"string\"}},\
         \"code\":{{\"type\":\"integer\"}},\"name\":{{\"type\":\"string\"}}}},\
         \"required\":[\"messageId\",\"code\"]}}\n```\n"
    )
}

/// Runs an interface client's script on a session resumed by its hello.
async fn interface(script: Script, mut socket: Socket, index: usize) -> bool {
    // The provider's destination hello (or its refusal).
    if !matches!(socket.next().await, Some(Ok(Message::Text(_)))) {
        return false;
    }
    let correlation = |n: usize| format!("a{index}-{n}");
    match script {
        Script::Subscribe => {
            let request = if index.is_multiple_of(2) {
                json!({"messageType": "request", "operation": "subscribeevent",
                       "name": weather::USER_FEEDBACK_RECEIVED, "correlationID": correlation(0)})
            } else {
                json!({"messageType": "request", "operation": "observeproperty",
                       "name": weather::MODEL_CONFIGURATION, "correlationID": correlation(0)})
            };
            if socket.send(application(&request)).await.is_err() {
                return true;
            }
            // Neither read nor answer pings: hold, then come back.
            tokio::time::sleep(HOLD).await;
            true
        }
        Script::HoldStream => {
            let request = json!({"messageType": "request", "operation": "invokeaction",
                "name": weather::TALK, "correlationID": correlation(0), "input": {}, "streamID": 0});
            if socket.send(application(&request)).await.is_err() {
                return true;
            }
            // Keep the session answering pings but never use the stream.
            let _ = tokio::time::timeout(HOLD, drain(&mut socket)).await;
            true
        }
        Script::StartActions | Script::StartProcesses => {
            let (name, input, every) = match script {
                Script::StartActions => (
                    weather::FORECAST_REPORT,
                    json!({"city": "Oslo", "days": 14}),
                    Duration::from_millis(10),
                ),
                _ => (WORK, json!({"job": index}), Duration::from_millis(50)),
            };
            let (mut sink, mut stream) = socket.split();
            let reading = async { while let Some(Ok(_)) = stream.next().await {} };
            let writing = async {
                for n in 0.. {
                    let request = json!({"messageType": "request", "operation": "invokeaction",
                        "name": name, "correlationID": correlation(n), "input": input});
                    if sink.send(application(&request)).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(every).await;
                }
            };
            tokio::select! {
                () = reading => {}
                () = writing => {}
            }
            true
        }
    }
}

/// Reads (and so answers pings) until the provider ends the session.
async fn drain(socket: &mut Socket) {
    while let Some(Ok(message)) = socket.next().await {
        if matches!(message, Message::Close(_)) {
            break;
        }
    }
}

/// A PT 1 frame carrying one interaction message.
fn application(message: &serde_json::Value) -> Message {
    let mut bytes = vec![APPLICATION];
    bytes.extend_from_slice(message.to_string().as_bytes());
    Message::Binary(bytes.into())
}

/// Requests the description again and again over one connection, reading each answer,
/// until the provider closes it or refuses (then `false`: pause before reconnecting).
async fn keep_alive(tcp: TcpStream, path: &str) -> bool {
    let request = format!("GET {path} HTTP/1.1\r\nHost: soak\r\n\r\n");
    let mut tcp = tokio::io::BufReader::new(tcp);
    loop {
        if tcp.get_mut().write_all(request.as_bytes()).await.is_err() {
            return true;
        }
        let mut status = String::new();
        if tcp.read_line(&mut status).await.unwrap_or(0) == 0 {
            return true;
        }
        let mut length = 0_usize;
        loop {
            let mut line = String::new();
            if tcp.read_line(&mut line).await.unwrap_or(0) == 0 {
                return true;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0_u8; length];
        if tcp.read_exact(&mut body).await.is_err() {
            return true;
        }
        if !status.contains(" 200 ") {
            return false;
        }
    }
}

/// A DID host whose server never answers: a listener on 127.0.0.1 that accepts every
/// connection and holds it, sending nothing, until the peer closes it or `stop` (then it
/// says on standard error how many the provider opened); returns its port.
async fn silent_host(stop: watch::Receiver<bool>) -> std::io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        let mut held = JoinSet::new();
        let mut stopped = stop.clone();
        let mut accepted_count = 0_u64;
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((tcp, _)) = accepted else { continue };
                    accepted_count += 1;
                    held.spawn(idle(tcp));
                }
                Some(_) = held.join_next(), if !held.is_empty() => {}
                _ = stopped.changed() => {
                    eprintln!("soak: the silent DID host was asked {accepted_count} times");
                    return;
                }
            }
        }
    });
    Ok(port)
}

/// The DID host of client `index` for its `opening`-th connection: a host never used
/// before, under `evil.localhost` for the even addresses and under the address's own
/// `evilN.localhost` for the odd ones.
fn did_host(index: usize, opening: u64) -> String {
    let address = index % usize::from(ADDRESSES);
    if address.is_multiple_of(2) {
        format!("h{index}r{opening}.evil.localhost")
    } else {
        format!("h{index}r{opening}.evil{address}.localhost")
    }
}

/// Upgrades with a signature by a new DID on a silent host; holds the session in the
/// (unexpected) case it is admitted. `false` (pause before the next) when refused at once
/// (429: the address already authenticates as many as it may), `true` when the provider
/// held the upgrade and then refused it (renewed at once).
async fn signed_upgrade(
    tcp: TcpStream,
    endpoint: &str,
    index: usize,
    opening: u64,
    port: u16,
) -> bool {
    let Ok(identity) = Identity::new(
        Keys::generate(),
        &did_host(index, opening),
        Some(port),
        &["agents"],
    ) else {
        return false;
    };
    let Ok(mut request) = endpoint.into_client_request() else {
        return false;
    };
    let target = RequestTarget {
        method: "GET",
        target_uri: endpoint,
    };
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
        });
    let nonce = format!("soak-{index}-{opening}");
    let signed = sign_request(&identity, &target, b"", created, &nonce);
    for (name, value) in [
        ("Signature-Input", signed.signature_input),
        ("Signature", signed.signature),
    ] {
        let Ok(value) = HeaderValue::from_str(&value) else {
            return false;
        };
        request.headers_mut().insert(name, value);
    }
    match tokio_tungstenite::client_async(request, tcp).await {
        Ok((mut socket, _)) => {
            drain(&mut socket).await;
            true
        }
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            response.status() != tokio_tungstenite::tungstenite::http::StatusCode::TOO_MANY_REQUESTS
        }
        Err(_) => false,
    }
}
