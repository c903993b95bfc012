//! One meta-protocol session over the WebSocket: the Noise handshake when asked for, the
//! hello (in the budget of WebSockets waiting for one), a session slot, then the driver;
//! and the drain that closes it once its calls are answered.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::ws::WebSocket;
use concord_identity::Caller;
use concord_proto::handshake::{self, LocalOffer, ProtocolChoice};
use concord_proto::{Capability, HelloKind, ProtocolType, Role, Session};
use concord_store::Direction;
use futures_util::future::OptionFuture;
use tokio::sync::{watch, OwnedSemaphorePermit};

use super::{sessions_full, ServerState};
use crate::admission::accept::{self, Ticket};
use crate::admission::{ClientKey, PendingHello, SessionGuard};
use crate::code::{self, LocalSide};
use crate::config::human;
use crate::driver::{Driver, Settled, Settlement, Start, StopSignal, CLOSE_LINGER};
use crate::hello;
use crate::identity::secure::{self, Channel, SecureSocket};
use crate::transcripts::Recorder;
use crate::transport::{self, Incoming, Transport, TransportError};

/// How a session opens: who called (from the upgrade), whether in the Noise channel, and
/// its place among the WebSockets waiting for their hello.
pub(super) struct Opening {
    pub(super) caller: Caller,
    pub(super) noise: bool,
    pub(super) pending: PendingHello,
}

/// What a session holds from admission for as long as it runs: its connection and its
/// address's session slot.
pub(super) struct Admitted {
    pub(super) _ticket: Ticket,
    pub(super) _slot: SessionGuard,
}

/// How the wait for a sourceHello ended.
enum HelloWait {
    Read(Box<Result<(concord_proto::Hello, String), hello::HelloFailure>>),
    /// A newer WebSocket took this one's place among those waiting.
    Shed,
    /// The server stops.
    Stop,
}

/// How long a newcomer waits for the slot of the session it shed.
const SHED_WAIT: Duration = Duration::from_secs(2);

/// A session slot for a peer whose hello is valid: a free one, else the slot of the
/// session whose peer was silent longest (at least `idle_shed_after`) with no call running,
/// which is told to close.
async fn session_slot(state: &ServerState, remote: SocketAddr) -> Option<OwnedSemaphorePermit> {
    if let Ok(permit) = Arc::clone(&state.sessions).try_acquire_owned() {
        return Some(permit);
    }
    let after = state.shared.limits.idle_shed_after;
    let newcomer = ClientKey::of(remote.ip());
    if !state.idle.shed_for(newcomer, after, Instant::now()) {
        return None;
    }
    tracing::info!("the node is full: shed the session silent longest for a newcomer");
    match tokio::time::timeout(SHED_WAIT, Arc::clone(&state.sessions).acquire_owned()).await {
        Ok(Ok(permit)) => Some(permit),
        _ => None,
    }
}

/// One provider session's task: `opening` (from [`open_connection`]), boxed, then the
/// driver's loop, holding `admitted` throughout. The opening's state (the socket before
/// the session took it, the hello, the slot's wait) is freed once the session is open:
/// what the task holds while the session lives is the loop's future only.
pub(super) async fn run_session(
    opening: std::pin::Pin<Box<impl std::future::Future<Output = Option<Start<DrainingSocket>>>>>,
    _admitted: Admitted,
) {
    OptionFuture::from(opening.await.map(|start| Driver::new(start).run())).await;
}

/// Opens one provider session: the hello (in the budget of those waiting for one), then a
/// session permit (held by the session throughout); what the driver starts from, or
/// `None` when the session is not opened (the peer was told why).
pub(super) async fn open_connection(
    socket: WebSocket,
    state: Arc<ServerState>,
    remote: SocketAddr,
    opening: Opening,
) -> Option<Start<DrainingSocket>> {
    let Opening {
        caller,
        noise,
        mut pending,
    } = opening;
    let shared = Arc::clone(&state.shared);
    let limits = &shared.limits;
    let mut stop = state.stop.clone();
    // The Noise handshake first, in the budget of the WebSockets waiting for their hello.
    let mut socket = if noise {
        match Box::pin(secure_channel(
            socket,
            &state,
            &caller,
            &mut pending,
            &mut stop,
        ))
        .await
        {
            Some(channel) => channel,
            None => return None,
        }
    } else {
        Channel::Plain(socket)
    };
    // Boxed, like the session's opening below: an established session's task then holds
    // only the driver's future, not the larger state of the steps before it.
    let wait = Box::pin(async {
        tokio::select! {
            read = hello::read(&mut socket, HelloKind::Source, limits.hello_timeout, &limits.hello) => HelloWait::Read(Box::new(read)),
            () = pending.shed() => HelloWait::Shed,
            () = accept::until_stop(&mut stop) => HelloWait::Stop,
        }
    })
    .await;
    drop(pending);
    let (code, reason) = match wait {
        HelloWait::Read(read) => match *read {
            Ok(hello) => match session_slot(&state, remote).await {
                Some(permit) if !*state.stop.borrow() => {
                    tracing::debug!("the hello is read: answering it");
                    return Box::pin(open_session(socket, &state, remote, hello, permit, caller))
                        .await;
                }
                Some(_) => (
                    transport::close_code::GOING_AWAY,
                    "the node is shutting down".to_owned(),
                ),
                None => {
                    let reason = sessions_full(limits.max_sessions);
                    state.log.refused("max_sessions", remote, &reason);
                    (transport::close_code::TRY_AGAIN_LATER, reason)
                }
            },
            Err(failure) => {
                tracing::info!(%failure, "no session: bad or missing sourceHello");
                match failure.close_frame() {
                    Some(close) => close,
                    None => return None,
                }
            }
        },
        HelloWait::Shed => {
            let reason = format!(
                "{} connections were waiting for their sourceHello; this one waited longest of its address (hello timeout {})",
                limits.max_pending_hellos,
                human(limits.hello_timeout)
            );
            state.log.refused("max_pending_hellos", remote, &reason);
            (transport::close_code::POLICY, reason)
        }
        HelloWait::Stop => (
            transport::close_code::GOING_AWAY,
            "the node is shutting down".to_owned(),
        ),
    };
    transport::close(&mut socket, code, &reason, CLOSE_LINGER).await;
    None
}

/// The Noise channel on `socket` (we respond): the handshake, bound to the caller's DID
/// (or to an anonymous caller) and ours, within the hello timeout; then the caller's static
/// key checked against its DID document. `None` when it failed (the peer was told why).
async fn secure_channel(
    mut socket: WebSocket,
    state: &ServerState,
    caller: &Caller,
    pending: &mut PendingHello,
    stop: &mut watch::Receiver<bool>,
) -> Option<Channel<WebSocket>> {
    let identity = &state.shared.identity;
    let our = state.did.as_ref()?;
    let caller_did = caller.did();
    let prologue = concord_secure::prologue(caller_did.map(|did| did.as_str()), our.did().as_str());
    let config = identity.channel_config(state.shared.limits.max_frame_size);
    let limit = state.shared.limits.hello_timeout;
    let static_key = identity.noise_static();
    let ended = tokio::select! {
        done = secure::handshake(
            &mut socket,
            concord_secure::Role::Responder,
            &static_key,
            &prologue,
            Some(our.did().as_str()),
            &config,
            limit,
        ) => Some(done),
        () = pending.shed() => None,
        () = accept::until_stop(stop) => None,
    };
    let (code, reason) = match ended {
        Some(Ok((channel, peer))) => match secure::verify_peer(identity, caller_did, &peer).await {
            Ok(()) => {
                tracing::debug!(
                    channel = %hex::encode(&peer.handshake_hash[..8]),
                    "encrypted channel established"
                );
                return Some(Channel::Secure(Box::new(SecureSocket::new(
                    socket, channel,
                ))));
            }
            Err(reason) => {
                tracing::info!(%reason, "no session: the Noise peer is not who it said");
                (transport::close_code::POLICY, reason.to_string())
            }
        },
        Some(Err(failure)) => {
            tracing::info!(%failure, "no session: the Noise handshake failed");
            failure.close_frame()?
        }
        None => (
            transport::close_code::GOING_AWAY,
            "the node is shutting down or full of waiting connections".to_owned(),
        ),
    };
    transport::close(&mut socket, code, &reason, CLOSE_LINGER).await;
    None
}

/// Opens an established session: answers the hello and readies what the driver starts
/// from; `None` when the session ended on the way (the peer was told why).
async fn open_session(
    mut socket: Channel<WebSocket>,
    state: &ServerState,
    remote: SocketAddr,
    (mut source, source_text): (concord_proto::Hello, String),
    slot: OwnedSemaphorePermit,
    caller: Caller,
) -> Option<Start<DrainingSocket>> {
    let shared = Arc::clone(&state.shared);
    let peer = peer_label(&caller, remote);
    if matches!(caller, Caller::Anonymous) && state.did.is_some() {
        // A node with an identity resumes (0-RTT) and selects consensus protocols only for
        // a caller who proved a DID: an anonymous one negotiates (its hash or URIs are not
        // even looked up). A node without one is open to all (`nosec`), as it says.
        if source.meta_protocol.used_protocol_hash.take().is_some()
            || !source.meta_protocol.candidate_protocols.is_empty()
        {
            tracing::info!("an anonymous caller offered 0-RTT or consensus; negotiating instead");
        }
        source.meta_protocol.candidate_protocols.clear();
    }
    let encrypted = socket.is_secure();
    let offer = LocalOffer::new(shared.provider_capabilities());
    let message_id = hello::random_id();
    // A protocol resumed lately is resumed again without a trip to the store.
    let resumed_lately = source.meta_protocol.used_protocol_hash.and_then(|hash| {
        let stored = state.resumes().get(&hash, Instant::now())?;
        Some((hash, stored))
    });
    let vouched_now = resumed_lately.is_none();
    let answer = if let Some((hash, stored)) = resumed_lately {
        let view = ResumedLately(hash);
        Ok(
            handshake::answer_source_hello(&offer, &source, &view, &message_id).map(
                |(destination, agreement)| {
                    let stored = (agreement.protocol == ProtocolChoice::Resume(hash))
                        .then(|| Stored::clone(&stored));
                    (destination, agreement, stored)
                },
            ),
        )
    } else {
        let source = source.clone();
        shared
            .store
            .run_state(move |state| {
                let view = state.for_role(Role::Provider);
                let answer = handshake::answer_source_hello(&offer, &source, &view, &message_id);
                for error in view.take_errors() {
                    tracing::warn!(%error, "a stored protocol cannot be used");
                }
                let (destination, agreement) = match answer {
                    Ok(answer) => answer,
                    Err(error) => return Ok(Err(error)),
                };
                let stored = match &agreement.protocol {
                    ProtocolChoice::Negotiate => None,
                    ProtocolChoice::Resume(hash) => {
                        state.protocols.protocol(hash)?.and_then(|protocol| {
                            Some(Stored {
                                handler: protocol.handlers.get(Role::Provider)?.to_owned(),
                                settled: Settled {
                                    hash: protocol.hash,
                                    document: protocol.document,
                                    how: Settlement::Resumed,
                                },
                                test_cases: protocol.test_cases,
                            })
                        })
                    }
                    ProtocolChoice::Consensus(uri) => {
                        state.consensus.consensus(uri)?.and_then(|entry| {
                            Some(Stored {
                                handler: entry.handlers.get(Role::Provider)?.to_owned(),
                                settled: Settled {
                                    hash: entry.hash,
                                    document: entry.document,
                                    how: Settlement::Consensus { uri: uri.clone() },
                                },
                                test_cases: None,
                            })
                        })
                    }
                };
                Ok(Ok((destination, agreement, stored)))
            })
            .await
    };
    let (mut destination, mut agreement, stored) = match answer {
        Ok(Ok(answer)) => answer,
        Ok(Err(error)) => {
            tracing::info!(%error, "no session: the hello exchange cannot conclude");
            let reason = format!("handshake: {error}");
            transport::close(
                &mut socket,
                transport::close_code::PROTOCOL_ERROR,
                &reason,
                CLOSE_LINGER,
            )
            .await;
            return None;
        }
        Err(error) => {
            tracing::error!(%error, "no session: the store failed");
            let reason = "the node's store failed; try again later";
            transport::close(
                &mut socket,
                transport::close_code::INTERNAL,
                reason,
                CLOSE_LINGER,
            )
            .await;
            return None;
        }
    };
    // A protocol the store vouched for still has to load; if it does not, negotiate.
    let mut settled = None;
    if agreement.protocol != ProtocolChoice::Negotiate {
        let loaded = stored
            .ok_or_else(|| "the stored protocol vanished".to_owned())
            .and_then(|stored| {
                let code = code::load(
                    &shared,
                    &stored.settled.document,
                    &stored.handler,
                    &LocalSide::Provider,
                )
                .map_err(|error| error.to_string())?;
                Ok((stored, code))
            });
        match loaded {
            Ok((_, code))
                if !code
                    .actions()
                    .iter()
                    .all(|action| shared.identity.permits(&caller, action)) =>
            {
                tracing::info!(
                    actions = ?code.actions(),
                    "the stored protocol calls an action this caller may not call; negotiating instead"
                );
                destination.meta_protocol.used_protocol_hash = None;
                destination.meta_protocol.selected_protocol = None;
                agreement.protocol = ProtocolChoice::Negotiate;
            }
            Ok((stored, code)) => {
                // The store vouched for it just now: resumed from memory for a while.
                if let (true, ProtocolChoice::Resume(hash)) = (vouched_now, &agreement.protocol) {
                    state
                        .resumes()
                        .insert(*hash, Arc::new(stored.clone()), Instant::now());
                }
                settled = Some((stored.settled, code, stored.test_cases));
            }
            Err(error) => {
                tracing::warn!(%error, "cannot use the stored protocol; negotiating instead");
                destination.meta_protocol.used_protocol_hash = None;
                destination.meta_protocol.selected_protocol = None;
                agreement.protocol = ProtocolChoice::Negotiate;
            }
        }
    }
    match &agreement.protocol {
        ProtocolChoice::Negotiate => match source.meta_protocol.used_protocol_hash {
            Some(hash) => {
                tracing::info!(%hash, "0-RTT miss: we do not hold this protocol; negotiating")
            }
            None => tracing::info!("negotiating a protocol"),
        },
        ProtocolChoice::Resume(hash) => tracing::info!(%hash, "0-RTT: resuming a stored protocol"),
        ProtocolChoice::Consensus(uri) => tracing::info!(%uri, "consensus protocol selected"),
    }
    if agreement
        .capabilities
        .contains(Capability::EncryptedChannel)
        && !encrypted
    {
        let reason = secure::stripped_channel();
        tracing::warn!(%reason, "no session");
        transport::close(
            &mut socket,
            transport::close_code::POLICY,
            &reason,
            CLOSE_LINGER,
        )
        .await;
        return None;
    }
    let channel = channel_summary(encrypted, &caller);
    let recorder = Recorder::start(&shared.transcripts, &peer, Role::Provider, &channel);
    recorder.hello(Direction::Received, &source_text);
    let destination_text = destination.encode();
    recorder.hello(Direction::Sent, &destination_text);
    if let Err(error) = socket.send_text(destination_text).await {
        tracing::info!(%error, "the peer left during the hello");
        recorder
            .finish(concord_store::Outcome::Failed(format!(
                "the peer left during the hello: {error}"
            )))
            .await;
        return None;
    }
    let session = Session::new(
        Role::Provider,
        &agreement,
        shared.session_config(),
        Instant::now(),
    );
    let (pending, calls) = watch::channel(0);
    let (close, closing) = watch::channel(StopSignal::Running);
    let close = Arc::new(close);
    tokio::spawn(close_when_drained(
        state.stop.clone(),
        state.close.clone(),
        calls,
        Arc::clone(&close),
    ));
    Some(Start {
        transport: DrainingSocket {
            socket,
            stop: state.stop.clone(),
            pending,
        },
        session,
        shared,
        peer,
        recorder,
        settled,
        shutdown: Some(closing),
        shed: Some(
            state
                .idle
                .register(Some(slot), close, ClientKey::of(remote.ip())),
        ),
        requester: None,
        caller,
        client: crate::admission::ClientKey::of(remote.ip()),
    })
}

/// How a session is protected, as its transcript records it.
fn channel_summary(encrypted: bool, caller: &Caller) -> String {
    let channel = if encrypted {
        concord_secure::NOISE_PATTERN
    } else {
        "plain"
    };
    match caller.did() {
        Some(did) => format!("{channel}; peer authenticated as {did}"),
        None => format!("{channel}; peer anonymous"),
    }
}

/// Tells one session to close (`session`) once the server drains (`stop`) and the
/// session's calls have all been answered (`calls` at zero), or once the server closes
/// everything (`close`). Ends with the session.
async fn close_when_drained(
    mut stop: watch::Receiver<bool>,
    mut close: watch::Receiver<bool>,
    mut calls: watch::Receiver<usize>,
    session: Arc<watch::Sender<StopSignal>>,
) {
    let drained = async {
        if stop.wait_for(|stop| *stop).await.is_err() {
            // The server is gone without saying stop: keep serving this session.
            std::future::pending::<()>().await;
        }
        // An error: the session's socket is gone, so is the session.
        let _ = calls.wait_for(|running| *running == 0).await;
    };
    let closed = async {
        if close.wait_for(|close| *close).await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = drained => {}
        () = closed => {}
        () = session.closed() => return,
    }
    // A session already shed keeps that reason.
    StopSignal::send(&session, StopSignal::Shutdown);
}

/// A provider session's WebSocket, counting the calls it has taken and not yet answered
/// (application requests in, application responses out), so that a draining server
/// closes the session only once they are answered. While the server drains it takes no
/// new request: one that arrives is dropped unread.
pub(super) struct DrainingSocket {
    socket: Channel<WebSocket>,
    stop: watch::Receiver<bool>,
    pending: watch::Sender<usize>,
}

/// Whether a frame carries an application message (a request in, a response out).
fn is_application(frame: &[u8]) -> bool {
    frame
        .first()
        .is_some_and(|&header| ProtocolType::from_header(header) == ProtocolType::Application)
}

impl Transport for DrainingSocket {
    async fn recv(&mut self) -> Option<Result<Incoming, TransportError>> {
        loop {
            let incoming = Transport::recv(&mut self.socket).await?;
            if let Ok(Incoming::Binary(frame)) = &incoming {
                if is_application(frame) {
                    if *self.stop.borrow() {
                        tracing::debug!("a request arrived while the node drains; not taken");
                        continue;
                    }
                    // Nobody waits for a count to grow: no wake-up (the value changes
                    // all the same; `close_when_drained` reads it when it looks).
                    self.pending.send_if_modified(|running| {
                        *running += 1;
                        false
                    });
                }
            }
            return Some(incoming);
        }
    }

    async fn feed_binary(&mut self, bytes: Vec<u8>) -> Result<(), TransportError> {
        if is_application(&bytes) {
            // Only a drain waits for the count, and only for zero: it is woken when the
            // count reaches zero while the server drains. A count that reached zero before
            // the drain began is read as zero by `close_when_drained` (it looks after it
            // saw the drain begin, and this change came first).
            let stop = &self.stop;
            self.pending.send_if_modified(|running| {
                *running = running.saturating_sub(1);
                *running == 0 && *stop.borrow()
            });
        }
        Transport::feed_binary(&mut self.socket, bytes).await
    }

    async fn send_text(&mut self, text: String) -> Result<(), TransportError> {
        Transport::send_text(&mut self.socket, text).await
    }

    async fn flush(&mut self) -> Result<(), TransportError> {
        Transport::flush(&mut self.socket).await
    }

    async fn send_close(&mut self, code: u16, reason: String) -> Result<(), TransportError> {
        Transport::send_close(&mut self.socket, code, reason).await
    }

    async fn send_ping(&mut self) -> Result<(), TransportError> {
        Transport::send_ping(&mut self.socket).await
    }
}

/// A protocol the store holds, as read for a session.
/// A stored protocol as the provider resumes it: what was settled, our handler, the
/// agreed test cases.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    settled: Settled,
    handler: String,
    test_cases: Option<String>,
}

/// The store's answer for a protocol resumed lately ([`ServerState::resumes`]): it holds
/// that one hash (a held hash is resumed before any consensus protocol is looked at).
struct ResumedLately(concord_proto::ProtocolHash);

impl handshake::ProtocolStore for ResumedLately {
    fn holds_protocol(&self, hash: &concord_proto::ProtocolHash) -> bool {
        *hash == self.0
    }

    fn supports_consensus(&self, _uri: &str) -> bool {
        false
    }
}

/// Who the peer is, for the store (its share of protocols, `protocol_max_per_peer`) and
/// transcripts: the DID it proved on the upgrade, else its client address as admission
/// counts it (`ws://203.0.113.7`, `ws://[2001:db8:1:2::]/64`: one host usually holds a
/// whole IPv6 /64): the port a client connects from is a new ephemeral one each time and
/// says nothing about who it is. A DID a hello merely claims is not believed (it would
/// let anyone take another's stored protocols).
fn peer_label(caller: &Caller, remote: SocketAddr) -> String {
    match caller.did() {
        Some(did) => did.to_string(),
        None => ClientKey::of(remote.ip()).label(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_is_its_proved_did_or_its_host_never_its_ephemeral_port() {
        let v4: SocketAddr = "203.0.113.7:51234".parse().unwrap();
        let v6: SocketAddr = "[2001:db8::1]:51234".parse().unwrap();
        assert_eq!(peer_label(&Caller::Anonymous, v4), "ws://203.0.113.7");
        assert_eq!(peer_label(&Caller::Anonymous, v6), "ws://[2001:db8::]/64");
        // One IPv6 /64 is one peer, as admission counts it; another /64 is another.
        let same_64: SocketAddr = "[2001:db8::ffff:1:2:3]:51234".parse().unwrap();
        let next_64: SocketAddr = "[2001:db8:0:1::1]:51234".parse().unwrap();
        assert_eq!(
            peer_label(&Caller::Anonymous, same_64),
            "ws://[2001:db8::]/64"
        );
        assert_eq!(
            peer_label(&Caller::Anonymous, next_64),
            "ws://[2001:db8:0:1::]/64"
        );
        let mapped: SocketAddr = "[::ffff:203.0.113.7]:51234".parse().unwrap();
        assert_eq!(peer_label(&Caller::Anonymous, mapped), "ws://203.0.113.7");
        let did = concord_identity::Did::parse("did:wba:agents.example:alice").unwrap();
        assert_eq!(
            peer_label(&Caller::Authenticated(did.clone()), v4),
            did.as_str()
        );
    }
}
