//! The attacks, each a crowd of raw clients from addresses other than the legitimate
//! caller's (127.0.0.2 to 127.0.0.9: Linux routes all of 127/8 to the loopback), that
//! reconnect whenever the provider drops them, until told to stop.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// How many source addresses the attackers spread over.
const ADDRESSES: u8 = 8;

/// Where the attacks aim.
#[derive(Debug, Clone)]
pub struct Target {
    pub addr: SocketAddr,
    pub endpoint: String,
    /// A protocol the provider holds (the legitimate caller's), for 0-RTT hellos.
    pub hash: String,
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
        }
    }

    /// Runs the attack until `stop`; returns how many connections it opened.
    pub async fn run(self, target: Target, stop: watch::Receiver<bool>) -> u64 {
        let opened = Arc::new(AtomicU64::new(0));
        let mut tasks = JoinSet::new();
        let mut spawn = |index: usize, kind: Kind| {
            let (target, stop, opened) = (target.clone(), stop.clone(), Arc::clone(&opened));
            tasks.spawn(client(index, kind, target, stop, opened));
        };
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
}

/// One attacking client: connects from its address, does its kind of harm, and
/// reconnects when dropped (after a short pause when refused), until `stop`.
async fn client(
    index: usize,
    kind: Kind,
    target: Target,
    mut stop: watch::Receiver<bool>,
    opened: Arc<AtomicU64>,
) {
    let source = Ipv4Addr::new(127, 0, 0, 2 + (index % usize::from(ADDRESSES)) as u8);
    while !*stop.borrow() {
        opened.fetch_add(1, Ordering::Relaxed);
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
                _ => {
                    let Ok((socket, _)) =
                        tokio_tungstenite::client_async(target.endpoint.as_str(), tcp).await
                    else {
                        return false;
                    };
                    websocket(kind.clone(), socket, &target.hash, index).await
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

async fn websocket(kind: Kind, mut socket: Socket, hash: &str, index: usize) -> bool {
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
        Kind::IdleTcp | Kind::Slowloris | Kind::Churn => return true,
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
