//! The thin async driver around one sans-IO [`Session`]: it moves frames between the
//! WebSocket and the session, hands slow work (negotiator steps, code generation, test
//! runs, action calls, LLM answers) to tasks and feeds their results back, and ends the
//! session cleanly whatever happens.
//!
//! One task per WebSocket runs [`Driver::run`]; nothing else touches its session.

mod end;
mod gate;
mod interact;
mod plan;
mod prepare;
pub(crate) mod provider;
mod requester;
mod work;

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use concord_negotiate::Accounting;
use concord_proto::{
    CloseReason, EstablishedProtocol, Event, Preparation, ProtocolHash, Role, Session,
};
use concord_store::Direction;
use futures_util::task::AtomicWaker;
use tokio::sync::{mpsc, watch};
use tracing::Instrument;

pub(crate) use gate::WorkGate;
pub(crate) use requester::{Command, RequesterParts, Target};
pub(crate) use work::Work;

use crate::code::{CodeInfo, ProtocolCode};
use crate::config::human;
use crate::node::Shared;
use crate::shed::Registration;
use crate::transcripts::Recorder;
use crate::transport::{Incoming, Transport, TransportError};

/// How long we keep reading after sending a close frame, so the peer gets our reason.
pub(crate) const CLOSE_LINGER: Duration = Duration::from_secs(2);
/// How many of our recent messages a diagnosis looks at.
const RECENT_MESSAGES: usize = 8;
/// Most frames, results or calls handled in one go before our frames are flushed.
const BATCH: usize = 64;

/// The protocol in force, as settled.
#[derive(Debug, Clone)]
pub(crate) struct Settled {
    pub(crate) hash: ProtocolHash,
    /// The protocol's text; a driver empties it once our code in force holds the same
    /// text (shared by every session running that code), and reads it through
    /// `Driver::protocol_text`.
    pub(crate) document: String,
    pub(crate) how: Settlement,
}

/// How a session's protocol was settled.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Settlement {
    /// Negotiated in this session.
    Negotiated,
    /// Reused by 0-RTT: no negotiation, no LLM.
    Resumed,
    /// A consensus protocol both sides hold, selected in the hello.
    Consensus {
        /// The protocol's URI.
        uri: String,
    },
}

/// Why the session ends.
#[derive(Debug)]
pub(crate) enum Cause {
    /// The state machine closed (rejection, timeout, violation, code failure…).
    Session(CloseReason),
    /// The peer closed the WebSocket (or it dropped).
    PeerClosed { code: Option<u16>, reason: String },
    /// A message over the size limit.
    TooLarge { limit: usize },
    /// The WebSocket failed.
    Transport(String),
    /// The peer broke the WebSocket binding (a text frame after the hello).
    Binding(String),
    /// The node is shutting down.
    Shutdown,
    /// No frame either way for the idle timeout.
    Idle(Duration),
    /// The peer sent nothing, not even a pong, within this after our ping.
    Unresponsive(Duration),
    /// The node was full and gave this session's slot, silent longest, to a newcomer
    /// (`holder`: its place in the holders' budget, to a new holder).
    Shed { holder: bool },
    /// Our application ended it (with a reason for the peer).
    Local(String),
    /// Requester: the peer's code fails the agreed test cases and was not fixed.
    Verification(String),
}

/// What a driver is started with.
pub(crate) struct Start<T> {
    pub(crate) transport: T,
    pub(crate) session: Session,
    pub(crate) shared: Arc<Shared>,
    pub(crate) peer: String,
    pub(crate) recorder: Recorder,
    /// The protocol, our code and the agreed test cases, when the hello settled it (0-RTT
    /// or consensus).
    pub(crate) settled: Option<(Settled, ProtocolCode, Option<String>)>,
    /// Provider: when the node wants the session to end, and why.
    pub(crate) shutdown: Option<watch::Receiver<StopSignal>>,
    /// Provider: where the session says when it is idle (and holds its slot).
    pub(crate) shed: Option<Registration>,
    pub(crate) requester: Option<RequesterParts>,
    /// Provider: who is calling (the DID the upgrade proved, or anonymous).
    pub(crate) caller: concord_identity::Caller,
    /// Provider: the client address the caller's action calls count against (a
    /// requester's, like its `caller`, is unused).
    pub(crate) client: crate::admission::ClientKey,
}

/// The driver of one session.
pub(crate) struct Driver<T: Transport> {
    transport: T,
    /// Whether the transport may have a message for us (see [`ReadGate`]).
    read_gate: Arc<ReadGate>,
    /// The waker the transport's reads are polled with: it opens `read_gate`.
    read_waker: Waker,
    session: Session,
    shared: Arc<Shared>,
    peer: String,
    recorder: Option<Recorder>,
    /// Results of slow work, boxed: an unbounded channel allocates its first block of 32
    /// slots at once, and a session holds it all its life (32 pointers, not 32 results).
    work_tx: mpsc::UnboundedSender<Box<Work>>,
    work_rx: mpsc::UnboundedReceiver<Box<Work>>,
    shutdown: Option<watch::Receiver<StopSignal>>,
    shed: Option<Registration>,
    /// What `shed` was last told: since when the session may be shed, or busy (`None`).
    said_idle: Option<Instant>,
    /// Whether the peer has sent a frame since the hellos.
    heard_from_peer: bool,
    last_activity: Instant,
    /// When the peer last sent a frame (a pong does not count): shedding picks the
    /// session silent longest.
    last_heard: Instant,
    /// When the peer last sent anything, a pong included (liveness).
    last_contact: Instant,
    /// Provider: when we pinged the peer and have heard nothing since.
    ping_sent: Option<Instant>,
    /// Provider: a ping is to go out with the next flush.
    ping_due: bool,
    /// Provider: the session does not read (its calls in flight at `max_calls_in_flight`),
    /// so a pong would wait unread: no ping deadline runs meanwhile.
    reading_paused: bool,
    settled: Option<Settled>,
    /// Our code in force (announced).
    code: Option<ProtocolCode>,
    /// Our newest code, generated and not yet announced.
    fresh: Option<ProtocolCode>,
    /// The generation of our code running now (its number and task), aborted when a newer
    /// one starts (a superseded generation would hold a work turn for nothing); dropped
    /// when its result arrives (the handle keeps the task's memory).
    generating: Option<(u32, tokio::task::AbortHandle)>,
    /// What follows agreement and when to give up (`concord_proto::Preparation`): the
    /// driver executes its commands (`plan.rs`). Boxed: a session's task holds the driver
    /// all its life, and an idle session needs the policy seldom.
    prep: Box<Preparation>,
    /// Our recent application and verification messages, for diagnosing error reports.
    sent: VecDeque<Vec<u8>>,
    /// How each generation of our code came to be.
    code_info: Vec<CodeInfo>,
    accounting: Accounting,
    ever_ready: bool,
    /// Whether the peer has an error report of ours pending.
    reported: bool,
    /// Set when the session must end for a reason outside the state machine.
    stop: Option<Cause>,
    /// Set when the state machine closed.
    closed: Option<CloseReason>,
    role: RoleState,
    /// The interaction layer, once an interface protocol is in force.
    interact: Option<interact::Interact>,
}

enum RoleState {
    Requester(Box<requester::RequesterState>),
    Provider(provider::ProviderState),
}

impl<T: Transport> Driver<T> {
    pub(crate) fn new(start: Start<T>) -> Self {
        let (work_tx, work_rx) = mpsc::unbounded_channel();
        let role = match start.requester {
            Some(parts) => RoleState::Requester(Box::new(requester::RequesterState::new(parts))),
            None => RoleState::Provider(provider::ProviderState::new(start.caller, start.client)),
        };
        let role_name = start.session.role();
        let capabilities = start.session.capabilities();
        let limits = start.shared.limits.preparation_limits();
        let (settled, code, prep) = match start.settled {
            Some((settled, code, test_cases)) => (
                Some(settled),
                Some(code),
                Box::new(Preparation::settled(
                    role_name,
                    capabilities,
                    limits,
                    test_cases,
                )),
            ),
            None => (
                None,
                None,
                Box::new(Preparation::new(role_name, capabilities, limits)),
            ),
        };
        let read_gate = Arc::new(ReadGate::default());
        let mut driver = Self {
            transport: start.transport,
            read_waker: Waker::from(Arc::clone(&read_gate)),
            read_gate,
            session: start.session,
            shared: start.shared,
            peer: start.peer,
            recorder: Some(start.recorder),
            work_tx,
            work_rx,
            shutdown: start.shutdown,
            shed: start.shed,
            said_idle: None,
            heard_from_peer: false,
            last_activity: Instant::now(),
            last_heard: Instant::now(),
            last_contact: Instant::now(),
            ping_sent: None,
            ping_due: false,
            reading_paused: false,
            settled,
            code,
            fresh: None,
            generating: None,
            prep,
            sent: VecDeque::new(),
            code_info: Vec::new(),
            accounting: Accounting::default(),
            ever_ready: false,
            reported: false,
            stop: None,
            closed: None,
            role,
            interact: None,
        };
        driver.share_protocol_text();
        driver.install_interact();
        driver
    }

    /// The text of the protocol in force.
    pub(super) fn protocol_text(&self) -> Option<&str> {
        let settled = self.settled.as_ref()?;
        match &self.code {
            Some(code) if settled.document.is_empty() => Some(code.document()),
            _ => Some(&settled.document),
        }
    }

    /// Drops our copy of the protocol's text when our code in force holds the same text:
    /// an idle session then keeps none of its own.
    pub(super) fn share_protocol_text(&mut self) {
        if let (Some(settled), Some(code)) = (&mut self.settled, &self.code) {
            if !settled.document.is_empty() && settled.document == code.document() {
                settled.document = String::new();
            }
        }
    }

    /// Runs the session to its end.
    ///
    /// Not an `async fn`: the future it returns is the session's loop itself, not one that
    /// holds the driver and then the loop holding it again (a session's task is as large as
    /// this future for as long as the session lives). The driver is boxed: an `async fn`
    /// keeps its by-value `self` twice (the argument, and the binding it is moved into), and
    /// a session would hold its driver twice all its life.
    pub(crate) fn run(self) -> impl std::future::Future<Output = ()> + Send {
        let span = tracing::info_span!(
            "session",
            role = self.session.role().name(),
            peer = %self.peer
        );
        Box::new(self).drive().instrument(span)
    }

    async fn drive(mut self: Box<Self>) {
        self.start_requester();
        // One timer for every deadline, armed only when the earliest deadline moves
        // earlier: activity pushes the idle deadline later on every frame, and the timer
        // then fires early once and is re-armed, instead of being re-armed on every frame.
        let mut timer = Box::pin(tokio::time::sleep_until(Instant::now().into()));
        let mut armed: Option<Instant> = None;
        let cause = loop {
            while let Some(event) = self.session.poll_event() {
                self.on_event(event);
            }
            let pumped = self.pump_interact();
            let written = self.take_unwritten();
            let flushed = self.flush_unless_shed().await;
            interact::settle_written(written, &pumped, &flushed);
            if let Err(error) = flushed {
                break match error {
                    TransportError::TooLarge { limit } => Cause::TooLarge { limit },
                    TransportError::Other(error) => Cause::Transport(error),
                };
            }
            if let Some(reason) = self.closed.take() {
                break Cause::Session(reason);
            }
            if let Some(cause) = self.stop.take() {
                break cause;
            }
            self.note_reading();
            if let Some(deadline) = self.next_deadline() {
                if armed.is_none_or(|armed| deadline < armed) {
                    timer.as_mut().reset(deadline.into());
                    armed = Some(deadline);
                }
            }
            self.say_whether_idle();
            let may_read = self.may_read();
            tokio::select! {
                cause = stop_requested(&mut self.shutdown) => self.stop = Some(cause),
                incoming = self.read_gate.recv(&mut self.transport, &self.read_waker), if may_read => {
                    self.on_incoming(incoming);
                    self.take_more_incoming();
                }
                Some(work) = self.work_rx.recv() => {
                    self.on_work(*work);
                    self.take_more_work();
                }
                command = next_command(&mut self.role) => {
                    self.on_command(command);
                    self.take_more_commands();
                }
                wake = interact::next_wake(&mut self.interact) => {
                    if let interact::Wake::Stream(command) = wake {
                        self.on_stream_command(command);
                    }
                }
                () = &mut timer, if armed.is_some() => {
                    armed = None;
                    self.on_deadline();
                }
            }
        };
        // Boxed: the end's own state (close, linger, transcript) is allocated when the
        // session ends, instead of being part of the loop's future all its life.
        Box::pin((*self).end(cause)).await;
    }

    // ----- batching: what is already there is handled before the next flush -----------

    fn take_more_incoming(&mut self) {
        for _ in 0..BATCH {
            if self.stop.is_some() {
                return;
            }
            // Handle each frame's events before reading the next: a request counts
            // against the calls in flight at once.
            while let Some(event) = self.session.poll_event() {
                self.on_event(event);
            }
            if !self.may_read() {
                return;
            }
            match self.try_recv() {
                Poll::Ready(incoming) => self.on_incoming(incoming),
                Poll::Pending => return,
            }
        }
    }

    fn take_more_work(&mut self) {
        for _ in 0..BATCH {
            match self.work_rx.try_recv() {
                Ok(work) => self.on_work(*work),
                Err(_) => return,
            }
        }
    }

    fn take_more_commands(&mut self) {
        for _ in 0..BATCH {
            let RoleState::Requester(state) = &mut self.role else {
                return;
            };
            match state.commands.try_recv() {
                Ok(command) => self.on_command(Some(command)),
                Err(_) => return,
            }
        }
    }

    // ----- I/O ---------------------------------------------------------------------------

    /// The transport's next message without registering the session's task (see
    /// [`ReadGate::recv`]).
    fn try_recv(&mut self) -> Poll<Option<Result<Incoming, TransportError>>> {
        self.read_gate
            .try_recv(&mut self.transport, &self.read_waker)
    }

    /// [`Driver::flush`], unless the session is shed meanwhile: a shed session whose peer
    /// reads nothing (its writes blocked) would otherwise keep its slot from the newcomer
    /// it was shed for until the write gave up. What was not written is dropped with the
    /// session.
    async fn flush_unless_shed(&mut self) -> Result<(), TransportError> {
        let mut shutdown = self.shutdown.take();
        let flushed = tokio::select! {
            flushed = self.flush() => flushed,
            cause = shed_requested(&mut shutdown) => {
                self.stop = Some(cause);
                Ok(())
            }
        };
        self.shutdown = shutdown;
        flushed
    }

    async fn flush(&mut self) -> Result<(), TransportError> {
        if self.ping_due {
            self.ping_due = false;
            let limit = self.shared.limits.pong_timeout;
            match tokio::time::timeout(limit, self.transport.send_ping()).await {
                Ok(result) => result?,
                Err(_) => {
                    return Err(TransportError::Other(format!(
                        "the peer read nothing for {}",
                        human(limit)
                    )))
                }
            }
            self.ping_sent = Some(Instant::now());
        }
        let mut sent_any = false;
        while let Some(frame) = self.session.poll_transmit() {
            if let Some(recorder) = &self.recorder {
                recorder.frame(Direction::Sent, &frame);
            }
            self.transport.feed_binary(frame).await?;
            sent_any = true;
        }
        if sent_any {
            self.last_activity = Instant::now();
            match tokio::time::timeout(self.shared.limits.idle_timeout, self.transport.flush())
                .await
            {
                Ok(result) => result?,
                Err(_) => {
                    return Err(TransportError::Other(format!(
                        "the peer read nothing for {}",
                        human(self.shared.limits.idle_timeout)
                    )))
                }
            }
        }
        Ok(())
    }

    fn on_incoming(&mut self, incoming: Option<Result<Incoming, TransportError>>) {
        match incoming {
            None => {
                self.stop = Some(Cause::PeerClosed {
                    code: None,
                    reason: "the connection dropped".to_owned(),
                });
            }
            Some(Err(TransportError::TooLarge { limit })) => {
                self.stop = Some(Cause::TooLarge { limit });
            }
            Some(Err(TransportError::Other(error))) => self.stop = Some(Cause::Transport(error)),
            Some(Ok(Incoming::Pong)) => {
                self.last_contact = Instant::now();
                self.ping_sent = None;
            }
            Some(Ok(Incoming::Binary(bytes))) => {
                let now = Instant::now();
                self.last_activity = now;
                self.last_heard = now;
                self.last_contact = now;
                self.ping_sent = None;
                self.heard_from_peer = true;
                if let Some(recorder) = &self.recorder {
                    recorder.frame(Direction::Received, &bytes);
                }
                self.session.handle_frame(now, bytes);
            }
            Some(Ok(Incoming::Text(_))) => {
                self.stop = Some(Cause::Binding(
                    "a text frame after the hello: every later frame must be binary [header][data]"
                        .to_owned(),
                ));
            }
            Some(Ok(Incoming::Close(frame))) => {
                let (code, reason) = match frame {
                    Some((code, reason)) => (Some(code), reason),
                    None => (None, String::new()),
                };
                self.stop = Some(Cause::PeerClosed { code, reason });
            }
        }
    }

    /// Whether to read the peer's next frame now (back-pressure on action calls).
    fn may_read(&self) -> bool {
        match &self.role {
            RoleState::Provider(state) => {
                let interacting = match &self.interact {
                    Some(interact::Interact::Provider(interact)) => interact.in_flight,
                    _ => 0,
                };
                state.in_flight + interacting < self.shared.limits.max_calls_in_flight
            }
            RoleState::Requester(_) => true,
        }
    }

    /// Provider: notes whether the session reads the peer now. While it does not (busy
    /// with `max_calls_in_flight` calls), the peer's pongs wait unread, so liveness is not
    /// judged; once it reads again, its calls running until then count as contact and
    /// a ping already sent has its whole `pong_timeout` from then.
    fn note_reading(&mut self) {
        let reading = self.may_read();
        if reading && self.reading_paused {
            let now = Instant::now();
            self.last_contact = now;
            if self.ping_sent.is_some() {
                self.ping_sent = Some(now);
            }
        }
        self.reading_paused = !reading;
    }

    fn next_deadline(&self) -> Option<Instant> {
        let idle = self
            .is_idle()
            .then(|| self.last_activity + self.shared.limits.idle_timeout);
        [
            self.session.poll_timeout(),
            idle,
            self.prep.poll_timeout(),
            self.interact_deadline(),
            self.ping_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Provider: when to ping the silent peer, or, pinged, when to give up on it (none
    /// while the session does not read: the pong would not be seen).
    fn ping_deadline(&self) -> Option<Instant> {
        if !matches!(self.role, RoleState::Provider(_)) || self.ping_due || self.reading_paused {
            return None;
        }
        let limits = &self.shared.limits;
        Some(match self.ping_sent {
            None => self.last_contact + limits.ping_interval,
            Some(sent) => sent + limits.pong_timeout,
        })
    }

    /// Tells the node, when it changed, since when this (provider) session may be shed:
    /// no call of its running, ready or still waiting for the requester's first frame,
    /// counted from the peer's last frame. A subscription, an observation or a stream
    /// does not keep a session from being shed (a subscriber resumes from its last event
    /// id); a call running does. Gives its place among the holders back once it holds
    /// nothing.
    fn say_whether_idle(&mut self) {
        if self.shed.is_none() {
            return;
        }
        self.release_hold();
        let calls = match &self.role {
            RoleState::Provider(state) => state.in_flight + self.interact_calls(),
            RoleState::Requester(_) => return,
        };
        let sheddable = calls == 0 && (self.session.is_ready() || !self.heard_from_peer);
        let since = sheddable.then_some(self.last_heard);
        if since != self.said_idle {
            if let Some(shed) = &self.shed {
                shed.set_idle(since);
            }
            self.said_idle = since;
        }
    }

    /// A ready session with nothing in flight either way.
    fn is_idle(&self) -> bool {
        self.session.is_ready()
            && match &self.role {
                RoleState::Provider(state) => state.in_flight == 0,
                RoleState::Requester(state) => state.is_idle(),
            }
            && self
                .interact
                .as_ref()
                .is_none_or(interact::Interact::is_idle)
    }

    fn on_deadline(&mut self) {
        let now = Instant::now();
        if self
            .session
            .poll_timeout()
            .is_some_and(|deadline| deadline <= now)
        {
            self.session.handle_timeout(now);
        }
        if self.is_idle() && self.last_activity + self.shared.limits.idle_timeout <= now {
            self.stop = Some(Cause::Idle(self.shared.limits.idle_timeout));
        }
        if self.ping_deadline().is_some_and(|deadline| deadline <= now) {
            match self.ping_sent {
                None => self.ping_due = true,
                Some(_) => {
                    self.stop = Some(Cause::Unresponsive(self.shared.limits.pong_timeout));
                }
            }
        }
        if self
            .prep
            .poll_timeout()
            .is_some_and(|deadline| deadline <= now)
        {
            self.prep.handle_timeout(now);
            self.execute_preparation();
        }
        self.interact_timeout(now);
    }

    // ----- events ------------------------------------------------------------------------

    fn on_event(&mut self, event: Event) {
        match event {
            Event::CandidateReceived {
                candidate,
                modification_summary,
                replaces,
                ..
            } => self.spawn_judge(prepare::ReceivedCandidate {
                candidate,
                summary: modification_summary,
                replaces,
            }),
            Event::ProtocolAgreed { hash, document } => self.on_agreed(hash, document),
            Event::PeerCodeReady => tracing::debug!("the peer's code is ready"),
            Event::TestCasesReceived { test_cases, .. } => {
                self.prep.test_cases_received();
                self.spawn_judge_test_cases(test_cases);
            }
            Event::TestCasesAgreed { test_cases } => {
                tracing::info!("test cases agreed");
                self.prep.test_cases_agreed(Instant::now(), test_cases);
                self.execute_preparation();
            }
            Event::TestCasesRejected { by, reason } => {
                tracing::warn!(
                    ?by,
                    reason = reason.as_deref().unwrap_or(""),
                    "test cases rejected; going on without them"
                );
                self.prep.test_cases_dropped(Instant::now());
                self.execute_preparation();
            }
            Event::ErrorReported { error_description } => self.spawn_diagnose(error_description),
            Event::FixAccepted => {
                self.reported = false;
                tracing::info!("the peer accepted our error report and regenerates its code");
            }
            Event::FixRejected { reason } => {
                self.reported = false;
                self.on_fix_rejected(reason);
            }
            Event::Ready { protocol } => self.on_ready(protocol),
            Event::NaturalLanguageRequest {
                message_id,
                message,
            } => self.spawn_answer(Some(message_id), message),
            Event::NaturalLanguageResponse {
                message_id,
                message,
            } => self.on_natural_language_response(&message_id, Ok(message)),
            Event::NaturalLanguageTimedOut { message_id } => {
                self.on_natural_language_response(&message_id, Err(()));
            }
            Event::Application(bytes) if self.is_interface_session() => {
                self.on_interact_frame(&bytes);
            }
            Event::Application(bytes) => match self.session.role() {
                Role::Provider => self.on_request(&bytes),
                Role::Requester => self.on_response(&bytes),
            },
            Event::NaturalLanguage(text) => {
                if self.session.role() == Role::Provider && self.shared.llm().is_some() {
                    self.spawn_answer(None, text);
                } else {
                    tracing::info!(text = %text, "natural-language message from the peer");
                }
            }
            Event::Verification(bytes) => match self.session.role() {
                Role::Provider => self.on_verification_request(&bytes),
                Role::Requester => self.on_verification_response(&bytes),
            },
            Event::Closed(reason) => self.closed = Some(reason),
            other => tracing::debug!(?other, "event ignored"),
        }
    }

    fn on_agreed(&mut self, hash: ProtocolHash, document: String) {
        tracing::info!(%hash, "protocol agreed");
        let interface = crate::interface::is_interface(&document);
        self.settled = Some(Settled {
            hash,
            document,
            how: Settlement::Negotiated,
        });
        // An interface protocol has no handler to test: the layer is native code and the
        // payloads are checked against the document's schemas.
        self.prep.agreed(Instant::now(), interface);
        self.execute_preparation();
    }

    fn on_ready(&mut self, protocol: EstablishedProtocol) {
        let first = !self.ever_ready;
        self.ever_ready = true;
        let protocol = match &protocol {
            EstablishedProtocol::Negotiated { hash, .. } => format!("negotiated {hash}"),
            EstablishedProtocol::Resumed { hash } => format!("resumed {hash}"),
            EstablishedProtocol::Consensus { uri } => format!("consensus {uri}"),
        };
        tracing::info!(%protocol, first, "ready");
        // A protocol settled in the hello gets its use noted; the requester verifies the
        // peer's code or reports the connection ready.
        self.prep.ready(Instant::now(), first);
        self.execute_preparation();
        // Calls made while the peer regenerated its code go out now.
        self.send_waiting();
    }
}

/// Whether a session's transport may have a message: the waker its reads are polled with.
/// Open at first and after every message read; shut when a read found nothing (the
/// transport then holds this waker, and wakes it when there is more to read). Reads are
/// cancel-safe and a dropped read leaves its registration in the socket, so a shut gate
/// means nothing can be read until it is woken.
#[derive(Debug)]
struct ReadGate {
    woken: AtomicBool,
    /// The session's task, woken with the gate.
    task: AtomicWaker,
}

impl ReadGate {
    /// The transport's next message, read only when the transport may have one: after it
    /// answered, or once it woke the gate (data arrived, or the connection ended). The
    /// session's loop waits on this every time round, whatever woke it (a call, a result,
    /// a timer); reading then would cost a read attempt for nothing each time (tungstenite
    /// zero-fills its read buffer before every attempt, and the runtime checks the
    /// socket's readiness). `waker` is this gate's.
    async fn recv<T: Transport>(
        &self,
        transport: &mut T,
        waker: &Waker,
    ) -> Option<Result<Incoming, TransportError>> {
        std::future::poll_fn(|cx| {
            self.task.register(cx.waker());
            self.try_recv(transport, waker)
        })
        .await
    }

    /// One read attempt if the gate is open; wakes the task registered last when it
    /// opens again.
    fn try_recv<T: Transport>(
        &self,
        transport: &mut T,
        waker: &Waker,
    ) -> Poll<Option<Result<Incoming, TransportError>>> {
        if !self.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        let mut cx = Context::from_waker(waker);
        let recv = std::pin::pin!(transport.recv());
        match recv.poll(&mut cx) {
            Poll::Ready(incoming) => {
                // More may be buffered already: the next attempt reads.
                self.woken.store(true, Ordering::Release);
                Poll::Ready(incoming)
            }
            // The transport holds our waker: it opens the gate when it has more.
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Default for ReadGate {
    fn default() -> Self {
        Self {
            woken: AtomicBool::new(true),
            task: AtomicWaker::new(),
        }
    }
}

impl Wake for ReadGate {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// Resolves with the cause once the node signals that the session must end.
async fn stop_requested(shutdown: &mut Option<watch::Receiver<StopSignal>>) -> Cause {
    let Some(receiver) = shutdown else {
        return std::future::pending().await;
    };
    let signal = receiver
        .wait_for(|signal| *signal != StopSignal::Running)
        .await
        .map(|signal| *signal);
    match signal {
        Ok(StopSignal::Shed) => Cause::Shed { holder: false },
        Ok(StopSignal::ShedHolder) => Cause::Shed { holder: true },
        Ok(_) => Cause::Shutdown,
        // The server is gone without saying stop: keep serving this session.
        Err(_) => std::future::pending().await,
    }
}

/// Resolves once the session is shed (not on any other stop: a draining server's sessions
/// write what they owe first).
async fn shed_requested(shutdown: &mut Option<watch::Receiver<StopSignal>>) -> Cause {
    let Some(receiver) = shutdown else {
        return std::future::pending().await;
    };
    let signal = receiver
        .wait_for(|signal| matches!(signal, StopSignal::Shed | StopSignal::ShedHolder))
        .await
        .map(|signal| *signal);
    match signal {
        Ok(StopSignal::ShedHolder) => Cause::Shed { holder: true },
        Ok(_) => Cause::Shed { holder: false },
        Err(_) => std::future::pending().await,
    }
}

/// What a provider session's node wants of it: one signal, so that the session's loop
/// waits on one channel for every reason to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopSignal {
    /// Serve on.
    Running,
    /// The node is shutting down (its calls are answered, or the grace is over).
    Shutdown,
    /// The node is full and gives this idle session's slot to a newcomer.
    Shed,
    /// The holders' budget is full and gives this session's place to a new holder.
    ShedHolder,
}

impl StopSignal {
    /// Asks the session behind `sender` to stop for `reason`, unless it was already asked
    /// (the first reason stays).
    pub(crate) fn send(sender: &watch::Sender<StopSignal>, reason: StopSignal) {
        sender.send_if_modified(|signal| {
            let running = *signal == StopSignal::Running;
            if running {
                *signal = reason;
            }
            running
        });
    }
}

async fn next_command(role: &mut RoleState) -> Option<Command> {
    match role {
        RoleState::Requester(state) => state.commands.recv().await,
        RoleState::Provider(_) => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::mem::size_of;

    /// The size of the future `function` returns.
    fn future_size<A, F: std::future::Future>(_: fn(A) -> F) -> usize {
        size_of::<F>()
    }

    #[test]
    fn an_idle_session_task_stays_small() {
        // A session's task is this future for as long as the session lives: 10,000 idle
        // sessions hold 10,000 of them. It held the driver three times over (8 KiB) when
        // `run` was an `async fn` and the end was awaited inline.
        type Provider = super::Driver<axum::extract::ws::WebSocket>;
        let run = future_size(Provider::run);
        let driver = size_of::<Provider>();
        assert!(
            run <= driver + 2560,
            "the session future is {run} bytes for a {driver}-byte driver"
        );
    }

    /// A loopback WebSocket: our client end (the node's own transport) and the server's.
    async fn loopback() -> (
        crate::transport::ClientSocket,
        tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
    ) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        let accept = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            tokio_tungstenite::accept_async(tcp).await.unwrap()
        });
        let (client, _) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .unwrap();
        (client, accept.await.unwrap())
    }

    fn binary(incoming: Option<Result<super::Incoming, super::TransportError>>) -> Vec<u8> {
        match incoming {
            Some(Ok(super::Incoming::Binary(bytes))) => bytes.to_vec(),
            other => panic!("expected a binary message, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn the_read_gate_reads_what_arrives_and_nothing_in_between() {
        use futures_util::SinkExt;
        use std::sync::Arc;
        use std::task::{Poll, Waker};
        use tokio_tungstenite::tungstenite::Message;

        let (mut client, mut server) = loopback().await;
        let gate = Arc::new(super::ReadGate::default());
        let waker = Waker::from(Arc::clone(&gate));

        // Nothing sent: the first attempt reads and finds nothing, and shuts the gate.
        assert!(gate.try_recv(&mut client, &waker).is_pending());
        assert!(!gate.woken.load(std::sync::atomic::Ordering::Acquire));
        // Shut, it does not read: a message already in the socket waits for the wake.
        server.send(Message::binary(vec![1u8])).await.unwrap();
        let message = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            gate.recv(&mut client, &waker),
        )
        .await
        .expect("the transport woke the gate");
        assert_eq!(binary(message), [1]);

        // A burst arrives in one socket read: every message is read back to back, the
        // gate staying open after each, without waiting for another wake.
        for n in 2u8..10 {
            server.feed(Message::binary(vec![n])).await.unwrap();
        }
        server.flush().await.unwrap();
        let mut got = Vec::new();
        while got.len() < 8 {
            let message = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                gate.recv(&mut client, &waker),
            )
            .await
            .expect("a burst is read to its end");
            got.extend(binary(message));
        }
        assert_eq!(got, (2u8..10).collect::<Vec<_>>());

        // The peer closing opens the gate too.
        assert!(matches!(gate.try_recv(&mut client, &waker), Poll::Pending));
        server.close(None).await.unwrap();
        let closed = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            gate.recv(&mut client, &waker),
        )
        .await
        .expect("the close woke the gate");
        assert!(
            matches!(closed, Some(Ok(super::Incoming::Close(_))) | None),
            "{closed:?}"
        );
    }
}
