//! The requester's side: discovery, the hello, the session, and calls over it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use concord_describe::Thing;
use concord_negotiate::complexity::SchemaLimits;
use concord_negotiate::{published_actions, Accounting, Need, ProtocolDocument};
use concord_proto::handshake::{self, LocalOffer, ProtocolChoice};
use concord_proto::{Capabilities, Capability, HelloKind, ProtocolHash, Role, Session};
use concord_store::{Direction, HeldBy, Integrity, ResumeQuery, TranscriptId};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_tungstenite::tungstenite;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tracing::Instrument;

use crate::code::{self, CodeInfo, LocalSide};
use crate::config::human;
use crate::describe::DESCRIPTION_PATH;
use crate::driver::{
    Command, Driver, RequesterParts, Settled, Settlement, Start, Target, CLOSE_LINGER,
};
use crate::error::{CallError, ConnectError, DescriptionError};
use crate::hello;
use crate::identity::secure::{self, Channel, SecureSocket};
use crate::identity::{upgrade, Encryption};
use crate::interact::{
    Interaction, Progressing, ReaderQueue, Sink, StreamReceiver, StreamSender, Subscription,
};
use crate::node::{Shared, Want};
use crate::peer_descriptions::{Caching, DescriptionCache, Lookup};
use crate::transcripts::Recorder;
use crate::transport::{self, close_code, websocket_config, ClientSocket, Transport};
use concord_llm::with_causes;

/// Largest description accepted (the validator's own limit).
const MAX_DESCRIPTION_BYTES: usize = 1 << 20;
/// Calls queued to a session before `call` waits.
const COMMAND_QUEUE: usize = 1024;

/// What an established connection speaks and what it cost to set up.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ConnectionInfo {
    /// The peer's description URL.
    pub peer: String,
    /// The meta-protocol endpoint.
    pub endpoint: String,
    /// The action the protocol calls.
    pub action: String,
    /// The protocol's hash (the 0-RTT key).
    pub hash: ProtocolHash,
    /// How the protocol was settled.
    pub settlement: Settlement,
    /// The hash we offered for 0-RTT, if any (offered but not resumed: a miss).
    pub offered_hash: Option<ProtocolHash>,
    /// The optional capabilities both sides support.
    pub capabilities: Capabilities,
    /// Agreed test cases the peer's code passed over the verification protocol.
    pub verified_cases: usize,
    /// Every negotiation step: who decided, LLM calls, tokens, time.
    pub accounting: Accounting,
    /// Each generation of our handler code: template or LLM, cases run, LLM cost.
    pub code: Vec<CodeInfo>,
    /// The negotiation transcript in our store.
    pub transcript: Option<TranscriptId>,
    /// From `connect` (the description's fetch included) or `connect_described` to ready.
    pub setup_time: Duration,
    /// The peer's DID, when its description names one and the encrypted channel proved it
    /// (its Noise key is its DID document's keyAgreement key).
    pub peer_did: Option<String>,
    /// Whether every frame of the session is sealed in the Noise channel.
    pub encrypted: bool,
    /// The DID we signed the upgrade request with, if any (else we called anonymously).
    pub signed_as: Option<String>,
}

/// A peer's description, fetched from its URL and strictly validated by
/// [`Node::describe`](crate::Node::describe): what the peer serves (an action's mode, its
/// properties and events) before connecting, and what
/// [`Node::connect_described`](crate::Node::connect_described) connects with without
/// fetching it again.
///
/// ```no_run
/// # async fn run(node: concord_node::Node) -> Result<(), Box<dyn std::error::Error>> {
/// use concord_node::Want;
///
/// let peer = node.describe("http://127.0.0.1:8080").await?;
/// // What the stream carries (`concord:stream`), before opening it.
/// let frame_bytes = peer
///     .action("talk")
///     .and_then(|talk| talk.stream.as_ref())
///     .map(|stream| stream.frame_bytes);
/// let connection = node.connect_described(&peer, Want::interface(["talk"])).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PeerDescription {
    url: String,
    thing: Thing,
}

impl PeerDescription {
    /// The description URL it was fetched from (a base URL gets `/.well-known/wot`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The description.
    pub fn thing(&self) -> &Thing {
        &self.thing
    }

    /// The description's action `name`, with its mode
    /// ([`interaction_mode`](concord_describe::ActionAffordance::interaction_mode)) and,
    /// for a stream action, what its streams carry.
    pub fn action(&self, name: &str) -> Option<&concord_describe::ActionAffordance> {
        self.thing.actions.as_ref()?.get(name)
    }

    /// The description, kept.
    pub fn into_thing(self) -> Thing {
        self.thing
    }
}

/// What the client knows before the session starts.
#[derive(Debug, Clone)]
pub(crate) struct Known {
    pub(crate) peer: String,
    pub(crate) endpoint: String,
    pub(crate) action: String,
    pub(crate) offered_hash: Option<ProtocolHash>,
    /// The consensus protocols we offer, by URI.
    pub(crate) consensus: Vec<String>,
    pub(crate) started: Instant,
    /// How the session is protected: filled in when the channel is up.
    pub(crate) protection: Protection,
}

/// How a requester's session is protected.
#[derive(Debug, Clone, Default)]
pub(crate) struct Protection {
    pub(crate) peer_did: Option<String>,
    pub(crate) encrypted: bool,
    pub(crate) signed_as: Option<String>,
}

/// A ready connection to a peer's action. Cheap to clone; calls from any clone run
/// concurrently over the one WebSocket, matched to their responses by messageId. The
/// session closes when every clone is dropped, or on [`Connection::close`].
#[derive(Debug, Clone)]
pub struct Connection {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    commands: mpsc::Sender<Command>,
    /// The affordances, on an interface connection.
    interface: Option<concord_interact::Interface>,
    closed: watch::Receiver<Option<String>>,
    info: ConnectionInfo,
    call_timeout: Duration,
    id_prefix: String,
    next_id: AtomicU64,
}

impl Connection {
    /// What the connection speaks and what it cost to set up.
    pub fn info(&self) -> &ConnectionInfo {
        &self.inner.info
    }

    /// Calls the peer's `action` with `input` and returns its output: our handler encodes
    /// the request, the peer's decodes it and runs the action, and back. No LLM is involved.
    ///
    /// # Errors
    /// [`CallError::WrongAction`] when the protocol is for another action,
    /// [`CallError::InvalidInput`] when the input does not make a valid request (nothing is
    /// sent), [`CallError::Remote`] for an error response, [`CallError::InvalidResponse`],
    /// [`CallError::Timeout`] after the call timeout, [`CallError::Closed`].
    pub async fn call(&self, action: &str, input: Value) -> Result<Value, CallError> {
        let inner = &self.inner;
        if inner.interface.is_some() {
            return self
                .ask_interface(Interaction::Invoke {
                    name: action.to_owned(),
                    input,
                })
                .await;
        }
        if action != inner.info.action {
            return Err(CallError::WrongAction {
                action: action.to_owned(),
                protocol_action: inner.info.action.clone(),
            });
        }
        let number = inner.next_id.fetch_add(1, Ordering::Relaxed);
        let message_id = |number| format!("{}{number:08x}", inner.id_prefix);
        let (reply, response) = oneshot::channel();
        let command = Command::Call {
            message_id: message_id(number),
            input,
            reply,
        };
        if inner.commands.send(command).await.is_err() {
            return Err(self.closed_error());
        }
        match tokio::time::timeout(inner.call_timeout, response).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(self.closed_error()),
            Err(_) => {
                let message_id = message_id(number);
                let _ = inner.commands.try_send(Command::Cancel { message_id });
                Err(CallError::Timeout(inner.call_timeout))
            }
        }
    }

    /// Calls a long-running action (described with `synchronous: false`, mode `progress`):
    /// the provider answers with an action id, then progress, then exactly one result.
    /// Needs an interface connection ([`Want::interface`](crate::Want::interface)).
    ///
    /// ```no_run
    /// # async fn run(peer: concord_node::Connection) -> Result<(), concord_node::CallError> {
    /// use concord_node::ActionUpdate;
    /// let mut run = peer.call_with_progress("render", serde_json::json!({"scene": 3})).await?;
    /// while let Some(update) = run.next().await {
    ///     match update {
    ///         ActionUpdate::Progress { progress, .. } => println!("{:.0}%", progress * 100.0),
    ///         ActionUpdate::Done(result) => println!("{:?}", result?),
    ///         _ => {}
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`CallError::Unsupported`] on a one-action connection or for an action the interface
    /// does not cover; [`CallError::Closed`].
    pub async fn call_with_progress(
        &self,
        action: &str,
        input: Value,
    ) -> Result<Progressing, CallError> {
        let (updates, receiver) = mpsc::channel(crate::interact::UPDATES_QUEUE);
        let request = Interaction::Progress {
            name: action.to_owned(),
            input,
        };
        self.interact(request, Sink::Updates(updates)).await?;
        Ok(Progressing {
            updates: receiver,
            action_id: None,
            done: false,
        })
    }

    /// Invokes a fire-and-forget action (mode `notify`): returns once the request was
    /// written to the connection (flushed), so a [`Connection::close`] or drop right after
    /// cannot lose it. A failure the provider reports later is logged.
    ///
    /// # Errors
    /// [`CallError::Unsupported`], [`CallError::InvalidInput`] (nothing is sent),
    /// [`CallError::Closed`] when the session ended before the request was written.
    pub async fn notify(&self, action: &str, input: Value) -> Result<(), CallError> {
        let (sent, answer) = oneshot::channel();
        let request = Interaction::Notify {
            name: action.to_owned(),
            input,
        };
        self.interact(request, Sink::Answer(sent)).await?;
        self.answer(answer).await.map(drop)
    }

    /// The status of a long-running action by its id: `{"status": …, "progress": …,
    /// "output"?: …}`, also after the session that started it dropped.
    ///
    /// # Errors
    /// [`CallError::Remote`] 404 for an unknown id, [`CallError::Unsupported`],
    /// [`CallError::Timeout`], [`CallError::Closed`].
    pub async fn query_action(&self, action_id: &str) -> Result<Value, CallError> {
        self.ask_interface(Interaction::Query {
            action_id: action_id.to_owned(),
        })
        .await
    }

    /// Cancels a long-running action by its id; its updates end with a cancellation.
    ///
    /// # Errors
    /// As [`Connection::query_action`]; 409 when it already finished.
    pub async fn cancel_action(&self, action_id: &str) -> Result<Value, CallError> {
        self.ask_interface(Interaction::Cancel {
            action_id: action_id.to_owned(),
        })
        .await
    }

    /// Reads a property.
    ///
    /// # Errors
    /// [`CallError::Remote`] 404 for a property the provider does not have,
    /// [`CallError::Unsupported`], [`CallError::Timeout`], [`CallError::Closed`].
    pub async fn read_property(&self, name: &str) -> Result<Value, CallError> {
        self.ask_interface(Interaction::Read {
            name: name.to_owned(),
        })
        .await
    }

    /// Writes a property (one the description does not mark `readOnly`).
    ///
    /// # Errors
    /// [`CallError::InvalidInput`] for a value its schema refuses (nothing is sent),
    /// [`CallError::Remote`] 405 for a read-only property, as [`Connection::read_property`].
    pub async fn write_property(&self, name: &str, value: Value) -> Result<(), CallError> {
        self.ask_interface(Interaction::Write {
            name: name.to_owned(),
            value,
        })
        .await
        .map(drop)
    }

    /// Observes a property: a notification per change. Dropping the [`Subscription`] ends it.
    ///
    /// # Errors
    /// As [`Connection::read_property`].
    pub async fn observe_property(&self, name: &str) -> Result<Subscription, CallError> {
        self.subscription(
            name,
            Interaction::Observe {
                name: name.to_owned(),
            },
        )
        .await
    }

    /// Subscribes to an event: every event from now on, or, with `last_seen`, every event
    /// after that one (from the provider's replay buffer, else a [`Notification::Gap`](crate::Notification::Gap) first).
    /// A reader that falls behind this connection's queue (1,024) gets a gap for what it
    /// missed, too.
    /// Dropping the [`Subscription`] ends it.
    ///
    /// ```no_run
    /// # async fn run(peer: concord_node::Connection) -> Result<(), concord_node::CallError> {
    /// let mut feedback = peer.subscribe("userFeedbackReceived", None).await?;
    /// while let Some(notification) = feedback.next().await {
    ///     println!("{notification:?}");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`CallError::Remote`] 404 for an event the provider does not have,
    /// [`CallError::Unsupported`], [`CallError::Timeout`], [`CallError::Closed`].
    pub async fn subscribe(
        &self,
        event: &str,
        last_seen: Option<u64>,
    ) -> Result<Subscription, CallError> {
        self.subscription(
            event,
            Interaction::Subscribe {
                event: event.to_owned(),
                last_seen,
            },
        )
        .await
    }

    /// Subscribes to every event the session covers (`subscribeallevents`): each
    /// [`Notification`](crate::Notification) names its event. No resume: start from now.
    ///
    /// # Errors
    /// [`CallError::Unsupported`], [`CallError::Timeout`], [`CallError::Closed`].
    pub async fn subscribe_all(&self) -> Result<Subscription, CallError> {
        self.subscription("*", Interaction::SubscribeAll).await
    }

    /// Opens a stream action (mode `stream`): bytes both ways, each under the receiver's
    /// credit.
    ///
    /// # Errors
    /// [`CallError::Remote`] when the provider refuses the call, [`CallError::Unsupported`],
    /// [`CallError::InvalidInput`], [`CallError::Timeout`], [`CallError::Closed`].
    pub async fn open_stream(
        &self,
        action: &str,
        input: Value,
    ) -> Result<(StreamSender, StreamReceiver), CallError> {
        let (opened, answer) = oneshot::channel();
        let (incoming, end) = ReaderQueue::new();
        let request = Interaction::Stream {
            name: action.to_owned(),
            input,
        };
        self.interact(request, Sink::Stream { opened, incoming })
            .await?;
        let sender = self.answer(answer).await?;
        let receiver = StreamReceiver::new(sender.id, end, sender.commands.clone());
        Ok((sender, receiver))
    }

    async fn subscription(
        &self,
        name: &str,
        request: Interaction,
    ) -> Result<Subscription, CallError> {
        let (confirmed, answer) = oneshot::channel();
        let (notifications, receiver) = mpsc::channel(crate::interact::NOTIFICATION_QUEUE);
        self.interact(
            request,
            Sink::Subscription {
                confirmed,
                notifications,
            },
        )
        .await?;
        let latest = self.answer(answer).await?;
        Ok(Subscription {
            name: name.to_owned(),
            notifications: receiver,
            room: self.inner.commands.clone(),
            latest,
            last_seen: None,
        })
    }

    /// An interaction answered once.
    async fn ask_interface(&self, request: Interaction) -> Result<Value, CallError> {
        let (reply, answer) = oneshot::channel();
        self.interact(request, Sink::Answer(reply)).await?;
        self.answer(answer).await
    }

    async fn interact(&self, request: Interaction, sink: Sink) -> Result<(), CallError> {
        if self.inner.interface.is_none() {
            return Err(CallError::Unsupported(
                "this connection speaks a one-action protocol; connect with `Want::interface` for properties, events, progress and streams".to_owned(),
            ));
        }
        self.inner
            .commands
            .send(Command::Interact { request, sink })
            .await
            .map_err(|_| self.closed_error())
    }

    /// Waits for an answer within the call timeout.
    async fn answer<T>(
        &self,
        answer: oneshot::Receiver<Result<T, CallError>>,
    ) -> Result<T, CallError> {
        match tokio::time::timeout(self.inner.call_timeout, answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(self.closed_error()),
            Err(_) => Err(CallError::Timeout(self.inner.call_timeout)),
        }
    }

    /// Asks the peer a question in natural language (a `naturalLanguageNegotiation`
    /// REQUEST) and returns its answer. Needs an LLM on both sides.
    ///
    /// # Errors
    /// [`CallError::Unsupported`] when natural-language negotiation was not negotiated,
    /// [`CallError::Timeout`], [`CallError::Closed`].
    pub async fn ask(&self, text: &str) -> Result<String, CallError> {
        let (reply, answer) = oneshot::channel();
        let command = Command::Ask {
            text: text.to_owned(),
            reply,
        };
        if self.inner.commands.send(command).await.is_err() {
            return Err(self.closed_error());
        }
        answer.await.unwrap_or_else(|_| Err(self.closed_error()))
    }

    /// Closes the session and waits until it ended; its transcript (see
    /// [`ConnectionInfo::transcript`]) is then complete, outcome included. What was
    /// asked before the close (a notification not yet written, say) goes out before it.
    pub async fn close(&self) {
        let _ = self
            .inner
            .commands
            .send(Command::Close {
                reason: "closed by the application".to_owned(),
            })
            .await;
        let _ = self.closed().await;
    }

    /// Whether the session has ended.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.borrow().is_some()
    }

    /// Waits until the session ends and says why; its transcript is then complete.
    pub async fn closed(&self) -> String {
        let mut closed = self.inner.closed.clone();
        let reason = closed
            .wait_for(Option::is_some)
            .await
            .map(|reason| reason.clone().unwrap_or_default());
        reason.unwrap_or_else(|_| "the session ended".to_owned())
    }

    fn closed_error(&self) -> CallError {
        let reason = self
            .inner
            .closed
            .borrow()
            .clone()
            .unwrap_or_else(|| "the session ended".to_owned());
        CallError::Closed(reason)
    }
}

/// What the requester brings of its own: instead of the negotiator's drafts, and the
/// protocol it offers for 0-RTT, as stored.
struct Own {
    candidate: Option<String>,
    test_cases: Option<String>,
    /// The protocol read with our 0-RTT offer, used when the peer resumes it.
    prefetched: Option<Stored>,
}

/// Discovery, hello, and the session up to ready. The peer's description comes from the
/// node's cache while HTTP's caching rules allow (`peer_descriptions`), else from its URL
/// (revalidated with its `ETag` when one is held). A connection made with a description
/// used unasked that fails in a way an outdated description explains (its endpoint, DID,
/// actions or channel) is tried once more with the description asked for again.
pub(crate) async fn connect(
    shared: Arc<Shared>,
    url: &str,
    want: Want,
) -> Result<Connection, ConnectError> {
    let started = Instant::now();
    let url = description_url(url)?;
    let (thing, asked) = cached_description(&shared, &url, false).await?;
    let first = connect_to(
        Arc::clone(&shared),
        &url,
        &thing,
        want.clone(),
        started,
        !asked,
    )
    .await;
    match first {
        Ok(connection) => return Ok(connection),
        Err(Attempt::Unlisted) => tracing::debug!(
            "we hold a consensus protocol for this action the cached description does not list: asking for the description again"
        ),
        Err(Attempt::Failed(error)) if !asked && description_may_be_behind(&error) => {
            tracing::info!(%error, "connecting with the cached description failed: asking for it again");
            lock(&shared.descriptions).evict(&url);
        }
        Err(Attempt::Failed(error)) => return Err(error),
    }
    let (thing, _) = cached_description(&shared, &url, true).await?;
    connect_to(shared, &url, &thing, want, started, false)
        .await
        .map_err(Attempt::into_error)
}

/// Why one attempt at a connection did not make it.
enum Attempt {
    /// We hold a consensus protocol for the action with requester code that the
    /// description, used from the cache unasked, does not list: the peer may have added
    /// it since (checked only when asked for).
    Unlisted,
    /// The connection failed.
    Failed(ConnectError),
}

impl From<ConnectError> for Attempt {
    fn from(error: ConnectError) -> Self {
        Self::Failed(error)
    }
}

impl Attempt {
    fn into_error(self) -> ConnectError {
        match self {
            Self::Failed(error) => error,
            Self::Unlisted => ConnectError::Local(
                "the description was asked for again and still does not list our consensus protocol"
                    .to_owned(),
            ),
        }
    }
}

/// Whether a connection's failure may come from a description that changed since it was
/// cached (the peer restarted elsewhere, with other keys, actions or channel), before any
/// session was made: then it is asked for again and the connection tried once more.
fn description_may_be_behind(error: &ConnectError) -> bool {
    matches!(
        error,
        ConnectError::NoEndpoint { .. }
            | ConnectError::UnknownAction { .. }
            | ConnectError::InvalidDescription { .. }
            | ConnectError::Connect { .. }
            | ConnectError::Security { .. }
            | ConnectError::Hello { .. }
            | ConnectError::Handshake { .. }
    )
}

/// The node's description cache, whatever a panicking holder left in it (each of its
/// operations leaves it consistent).
fn lock(cache: &std::sync::Mutex<DescriptionCache>) -> std::sync::MutexGuard<'_, DescriptionCache> {
    cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The hello and the session up to ready, with the peer's description fetched already
/// (`started`: when the connection began, for its setup time).
pub(crate) async fn connect_described(
    shared: Arc<Shared>,
    described: &PeerDescription,
    want: Want,
    started: Instant,
) -> Result<Connection, ConnectError> {
    connect_to(
        shared,
        &described.url,
        &described.thing,
        want,
        started,
        false,
    )
    .await
    .map_err(Attempt::into_error)
}

/// One attempt: the hello and the session up to ready with the description `thing` of
/// `url` (`unasked`: it came from the cache without asking its server in this connect).
async fn connect_to(
    shared: Arc<Shared>,
    url: &str,
    thing: &Thing,
    want: Want,
    started: Instant,
    unasked: bool,
) -> Result<Connection, Attempt> {
    let (mut need, candidate, test_cases, names) = want.into_parts();
    let description_url = url.to_owned();
    let endpoint = thing
        .meta_protocol
        .as_ref()
        .map(|meta| meta.endpoint.clone())
        .ok_or_else(|| ConnectError::NoEndpoint {
            url: description_url.clone(),
        })?;
    let target = match names {
        Some(names) => {
            let offered = crate::describe::interface_of(thing).map_err(|problems| {
                ConnectError::InvalidDescription {
                    url: description_url.clone(),
                    problems,
                }
            })?;
            let wanted: Vec<&str> = names.iter().map(String::as_str).collect();
            let selected = concord_interact::document::select(&offered, &wanted).map_err(|_| {
                ConnectError::UnknownAction {
                    url: description_url.clone(),
                    action: names.join(", "),
                    available: crate::interface::names(&offered),
                }
            })?;
            // Both peers start each direction of a stream with the credit the provider
            // states: a stream we cannot buffer is refused before anything is agreed.
            concord_interact::document::check_credits(&selected, &shared.limits.streams)
                .map_err(|error| ConnectError::Local(error.to_string()))?;
            need.action = crate::interface::need_key(&names);
            Target::Interface(selected)
        }
        None => {
            let actions = published_actions(thing);
            let Some(peer_action) = actions.iter().find(|a| a.name == need.action).cloned() else {
                return Err(ConnectError::UnknownAction {
                    url: description_url,
                    action: need.action,
                    available: actions.into_iter().map(|action| action.name).collect(),
                }
                .into());
            };
            // What we did not say we supply or need is what the peer publishes: our
            // handler maps the protocol's messages, whatever their layout, to and from
            // those schemas.
            need.input.get_or_insert_with(|| peer_action.input.clone());
            need.output
                .get_or_insert_with(|| peer_action.output.clone());
            Target::Action(peer_action)
        }
    };
    let peer = format!("{description_url}#{}", need.action);
    let plan = ChannelPlan::for_peer(&shared, thing, &description_url, &endpoint)?;
    // A provider with a DID resumes and selects consensus protocols only in an
    // authenticated session, so an anonymous requester does not offer them there.
    let provider_has_did = thing
        .meta_protocol
        .as_ref()
        .is_some_and(|meta| meta.did.is_some());
    let span = tracing::info_span!("connect", %peer);
    // What we offer needs one trip to the store and the channel a few round trips to the
    // peer: neither waits for the other.
    let offer_shortcuts = plan.signer.is_some() || !provider_has_did;
    let offers = async {
        if offer_shortcuts {
            shortcuts(&shared, thing, &peer, &need.action, unasked)
                .await
                .map(Some)
        } else {
            Ok(None)
        }
    };
    let (offers, channel) = async { tokio::join!(offers, open_channel(&shared, &endpoint, plan)) }
        .instrument(span.clone())
        .await;
    let offers = match (offers, channel.as_ref()) {
        (Ok(Some(offers)), Ok(_)) if offers.unlisted => {
            if let Ok((socket, _)) = channel {
                dismiss(socket, "the requester asks for the description again");
            }
            return Err(Attempt::Unlisted);
        }
        (Ok(offers), Ok(_)) => offers,
        (Err(error), _) => {
            if let Ok((socket, _)) = channel {
                dismiss(socket, "the requester's store failed");
            }
            return Err(error.into());
        }
        (Ok(_), Err(_)) => None,
    };
    let channel = channel?;
    tracing::debug!(parent: &span, encrypted = channel.1.encrypted, "the channel is open");
    let (resumable, consensus) = match offers {
        Some(offers) => (offers.resumable, offers.consensus),
        None => (None, Vec::new()),
    };
    let offered_hash = resumable.as_ref().map(|resumable| resumable.hash);
    let prefetched = resumable.and_then(|resumable| resumable.stored);
    let known = Known {
        peer: description_url,
        endpoint,
        action: need.action.clone(),
        offered_hash,
        consensus,
        started,
        protection: Protection::default(),
    };
    let own = Own {
        candidate,
        test_cases,
        prefetched,
    };
    Ok(
        start_session(shared, need, own, target, peer, known, channel)
            .instrument(span)
            .await?,
    )
}

/// Closes a channel opened for a session that will not start, in the background (the
/// close waits for the peer's answer).
fn dismiss(mut socket: Channel<ClientSocket>, reason: &'static str) {
    tokio::spawn(async move {
        transport::close(&mut socket, close_code::GOING_AWAY, reason, CLOSE_LINGER).await;
    });
}

/// The hello over the opened channel, and the session up to ready.
async fn start_session(
    shared: Arc<Shared>,
    need: Need,
    own: Own,
    target: Target,
    peer: String,
    mut known: Known,
    (mut socket, protection): (Channel<ClientSocket>, Protection),
) -> Result<Connection, ConnectError> {
    let offered_hash = known.offered_hash;
    let channel = match (&protection.encrypted, &protection.peer_did) {
        (true, Some(did)) => format!("{}; peer proved {did}", concord_secure::NOISE_PATTERN),
        (true, None) => concord_secure::NOISE_PATTERN.to_owned(),
        (false, _) => "plain".to_owned(),
    };
    let channel = match &protection.signed_as {
        Some(did) => format!("{channel}; we signed as {did}"),
        None => format!("{channel}; we called anonymously"),
    };
    known.protection = protection;
    let offer = LocalOffer::new(shared.capabilities);
    let source =
        handshake::source_hello(&offer, &hello::random_id(), offered_hash, &known.consensus);
    let source_text = source.encode();
    // Begun by the recorder's task while the hellos cross; awaited before the driver starts
    // (the connection's info names the transcript).
    let mut recorder = Recorder::start(&shared.transcripts, &peer, Role::Requester, &channel);
    recorder.hello(Direction::Sent, &source_text);
    let sent = socket.send_text(source_text).await;
    tracing::debug!("our hello is sent");
    if let Err(error) = sent {
        let error = ConnectError::Transport(error.to_string());
        recorder
            .finish(concord_store::Outcome::Failed(error.to_string()))
            .await;
        return Err(error);
    }
    let (destination, destination_text) = match hello::read(
        &mut socket,
        HelloKind::Destination,
        shared.limits.hello_timeout,
        &shared.limits.hello,
    )
    .await
    {
        Ok(hello) => hello,
        Err(failure) => {
            if let Some((code, reason)) = failure.close_frame() {
                transport::close(&mut socket, code, &reason, CLOSE_LINGER).await;
            }
            let error = hello_error(failure);
            recorder
                .finish(concord_store::Outcome::Failed(error.to_string()))
                .await;
            return Err(error);
        }
    };
    recorder.hello(Direction::Received, &destination_text);
    let agreement = match handshake::accept_destination_hello(&offer, &source, &destination) {
        Ok(agreement)
            if agreement
                .capabilities
                .contains(Capability::EncryptedChannel)
                && !known.protection.encrypted =>
        {
            let reason = secure::stripped_channel();
            transport::close(&mut socket, close_code::POLICY, &reason, CLOSE_LINGER).await;
            recorder
                .finish(concord_store::Outcome::Failed(reason.clone()))
                .await;
            return Err(ConnectError::Security {
                endpoint: known.endpoint,
                reason,
            });
        }
        Ok(agreement) => agreement,
        Err(error) => {
            let reason = format!("handshake: {error}");
            transport::close(
                &mut socket,
                close_code::PROTOCOL_ERROR,
                &reason,
                CLOSE_LINGER,
            )
            .await;
            recorder
                .finish(concord_store::Outcome::Failed(reason))
                .await;
            return Err(ConnectError::Handshake { cause: error });
        }
    };
    let local = LocalSide::Requester(need.clone());
    let settled =
        match settle_from_store(&shared, &agreement.protocol, &local, own.prefetched).await {
            Ok(settled) => settled,
            Err(error) => {
                let reason = format!("cannot use our stored protocol: {error}");
                transport::close(&mut socket, close_code::INTERNAL, &reason, CLOSE_LINGER).await;
                recorder
                    .finish(concord_store::Outcome::Failed(reason.clone()))
                    .await;
                return Err(ConnectError::Store(reason));
            }
        };
    match &agreement.protocol {
        ProtocolChoice::Negotiate => match offered_hash {
            Some(hash) => {
                tracing::info!(%hash, "0-RTT miss: the peer does not hold our protocol; negotiating")
            }
            None => tracing::info!("negotiating a protocol"),
        },
        ProtocolChoice::Resume(hash) => tracing::info!(%hash, "0-RTT: resuming"),
        ProtocolChoice::Consensus(uri) => tracing::info!(%uri, "consensus protocol selected"),
    }

    recorder.begun().await;
    let session = Session::new(
        Role::Requester,
        &agreement,
        shared.session_config(),
        Instant::now(),
    );
    let (commands, command_receiver) = mpsc::channel(COMMAND_QUEUE);
    let (ready, ready_receiver) = oneshot::channel();
    let (closed_sender, closed) = watch::channel(None);
    let call_timeout = shared.limits.call_timeout;
    let parts = RequesterParts {
        need: need.clone(),
        candidate: own.candidate,
        test_cases: own.test_cases,
        target: target.clone(),
        commands: command_receiver,
        ready,
        closed: closed_sender,
        known,
    };
    let driver = Driver::new(Start {
        transport: socket,
        session,
        shared,
        peer,
        recorder,
        settled: settled.map(|(settled, code)| (settled, code, None)),
        shutdown: None,
        shed: None,
        requester: Some(parts),
        caller: concord_identity::Caller::Anonymous,
        client: crate::admission::ClientKey::of(std::net::Ipv4Addr::UNSPECIFIED.into()),
    });
    tokio::spawn(driver.run());
    let info = ready_receiver.await.unwrap_or_else(|_| {
        Err(ConnectError::Local(
            "the session ended without a result".to_owned(),
        ))
    })?;
    Ok(Connection {
        inner: Arc::new(Inner {
            commands,
            interface: match target {
                Target::Interface(interface) => Some(interface),
                Target::Action(_) => None,
            },
            closed,
            info,
            call_timeout,
            id_prefix: hello::random_id()[..8].to_owned(),
            next_id: AtomicU64::new(1),
        }),
    })
}

/// The peer's description at `url` (a base or description URL), fetched and validated
/// (always asked for: the cache is for connects).
pub(crate) async fn describe(shared: &Shared, url: &str) -> Result<PeerDescription, ConnectError> {
    let url = description_url(url)?;
    let thing = match fetch_description(shared, &shared.http, &url, None).await? {
        Fetched::Body { bytes, .. } => validate(&url, &bytes)?,
        Fetched::NotModified(_) => return Err(not_asked_304(&url)),
    };
    Ok(PeerDescription { url, thing })
}

/// The validated description of `url`: held and fresh (`revalidate` unset), or asked for
/// (with the held `ETag`: a `304` keeps the held one, unvalidated again); whether its
/// server was asked.
async fn cached_description(
    shared: &Shared,
    url: &str,
    revalidate: bool,
) -> Result<(Arc<Thing>, bool), ConnectError> {
    let lookup = lock(&shared.descriptions).lookup(url, Instant::now());
    let held = match lookup {
        Lookup::Fresh(thing) if !revalidate => {
            tracing::debug!("the peer's description is held and fresh");
            return Ok((thing, false));
        }
        Lookup::Fresh(_) => lock(&shared.descriptions).validator(url),
        Lookup::Revalidate { etag, thing } => Some((etag, thing)),
        Lookup::Miss => None,
    };
    let etag = held.as_ref().map(|(etag, _)| etag.as_str());
    let fetched = fetch_description(shared, &shared.description_fetches, url, etag).await;
    let fetched = match fetched {
        Ok(fetched) => fetched,
        Err(error) => {
            // A stale copy is not used when its server cannot be asked.
            lock(&shared.descriptions).evict(url);
            return Err(error);
        }
    };
    match (fetched, held) {
        (Fetched::NotModified(caching), Some((_, thing))) => {
            tracing::debug!("the peer's description is unchanged (304)");
            lock(&shared.descriptions).revalidated(url, &caching, Instant::now());
            Ok((thing, true))
        }
        (Fetched::NotModified(_), None) => Err(not_asked_304(url)),
        (Fetched::Body { bytes, caching }, _) => {
            let thing = match validate(url, &bytes) {
                Ok(thing) => Arc::new(thing),
                Err(error) => {
                    lock(&shared.descriptions).evict(url);
                    return Err(error);
                }
            };
            lock(&shared.descriptions).store(
                url,
                Arc::clone(&thing),
                bytes.len(),
                &caching,
                Instant::now(),
            );
            Ok((thing, true))
        }
    }
}

/// A `304` to a request that named no entity tag.
fn not_asked_304(url: &str) -> ConnectError {
    ConnectError::Fetch {
        url: url.to_owned(),
        reason: "HTTP 304 Not Modified to a request that was not conditional".to_owned(),
    }
}

/// The description in `bytes`, strictly validated.
fn validate(url: &str, bytes: &[u8]) -> Result<Thing, ConnectError> {
    concord_describe::parse(bytes)
        .map(|validated| validated.thing)
        .map_err(|invalid| ConnectError::InvalidDescription {
            url: url.to_owned(),
            problems: DescriptionError::Invalid(invalid.report),
        })
}

/// What a description request gave.
enum Fetched {
    /// A `200`: the description's bytes (not validated yet), and what its headers allow.
    Body { bytes: Vec<u8>, caching: Caching },
    /// A `304` to a conditional request: the held description is current.
    NotModified(Caching),
}

/// The description URL for what the user gave: a base URL (`https://host/`,
/// `https://host/shop/`) gets `.well-known/wot` appended.
fn description_url(url: &str) -> Result<String, ConnectError> {
    let bad = |reason: &str| ConnectError::BadUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let mut parsed = url::Url::parse(url).map_err(|error| bad(&error.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("a peer URL starts with http:// or https://"));
    }
    // A base (its path ends with `/`, a path prefix included) gets the description's path.
    if parsed.path().ends_with('/') {
        let path = format!(
            "{}{}",
            parsed.path(),
            DESCRIPTION_PATH.trim_start_matches('/')
        );
        parsed.set_path(&path);
    }
    Ok(parsed.to_string())
}

/// Asks `client` for the description at `url`, conditionally when `etag` is given
/// (`If-None-Match`).
async fn fetch_description(
    shared: &Shared,
    client: &reqwest::Client,
    url: &str,
    etag: Option<&str>,
) -> Result<Fetched, ConnectError> {
    let failed = |reason: String| ConnectError::Fetch {
        url: url.to_owned(),
        reason,
    };
    let fetch = async {
        let mut request = client
            .get(url)
            .header("accept", "application/td+json, application/json");
        if let Some(etag) = etag {
            request = request.header(reqwest::header::IF_NONE_MATCH, etag);
        }
        let mut response = request
            .send()
            .await
            .map_err(|error| failed(with_causes(&error.without_url())))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_MODIFIED && etag.is_some() {
            return Ok(Fetched::NotModified(Caching::of(response.headers())));
        }
        // Not followed (the client follows none): the origin checks are made against the
        // URL asked for, which must be the one that serves the description.
        if status.is_redirection() {
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .map_or_else(
                    || "no Location".to_owned(),
                    // Its first 256 bytes: it is the peer's text.
                    |location| {
                        let bytes = location.as_bytes();
                        String::from_utf8_lossy(&bytes[..bytes.len().min(256)]).into_owned()
                    },
                );
            return Err(failed(format!(
                "HTTP {status}: redirected to {location}; a description is not fetched \
                 through a redirect (ask for the URL that serves it)"
            )));
        }
        if !status.is_success() {
            return Err(failed(format!("HTTP {status}")));
        }
        let caching = Caching::of(response.headers());
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| failed(with_causes(&error.without_url())))?
        {
            if bytes.len() + chunk.len() > MAX_DESCRIPTION_BYTES {
                return Err(failed(format!(
                    "the description exceeds {MAX_DESCRIPTION_BYTES} bytes"
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Fetched::Body { bytes, caching })
    };
    let limit = shared.limits.hello_timeout;
    tokio::time::timeout(limit, fetch)
        .await
        .map_err(|_| failed(format!("no answer within {}", human(limit))))?
}

/// What we can offer in the hello: a stored protocol for 0-RTT (the one held for this peer,
/// else the one held for this action with another peer, which this peer may hold too:
/// `Store::latest_resumable`), and the consensus protocols both we (with requester code,
/// for this action) and the peer hold, by hash. With `check_listing` (the description came
/// from the cache unasked), in the same trip: whether we hold a consensus protocol for the
/// action that the description does not list (the peer may have added it since).
async fn shortcuts(
    shared: &Shared,
    thing: &Thing,
    peer: &str,
    action: &str,
    check_listing: bool,
) -> Result<Shortcuts, ConnectError> {
    let peer_consensus: Vec<(String, ProtocolHash)> = thing
        .meta_protocol
        .iter()
        .flat_map(|meta| meta.consensus_protocols.iter().flatten())
        .map(|protocol| (protocol.uri.clone(), protocol.hash))
        .collect();
    let peer = peer.to_owned();
    let action = action.to_owned();
    let schema = shared.limits.schema;
    shared
        .store
        .run_state(move |state| {
            let query = ResumeQuery {
                peer: &peer,
                action: &action,
                role: Role::Requester,
            };
            let resume = state.protocols.latest_resumable(&query)?.map(|offer| {
                match &offer.held_by {
                    HeldBy::ThisPeer => {
                        tracing::debug!(hash = %offer.hash, "offering the protocol held for this peer")
                    }
                    HeldBy::OtherPeer { peer } => tracing::debug!(
                        hash = %offer.hash,
                        held_by = %peer,
                        "offering the protocol another peer holds for this action"
                    ),
                }
                offer.hash
            });
            // The offered protocol is read now, in the same trip to the store: when the
            // peer resumes it, the session starts from it with no other trip.
            let resume = match resume {
                Some(hash) => Some(Resumable {
                    hash,
                    stored: state.protocols.protocol(&hash)?.map(|protocol| Stored {
                        settled: Settled {
                            hash: protocol.hash,
                            document: protocol.document,
                            how: Settlement::Resumed,
                        },
                        handler: protocol.handlers.get(Role::Requester).map(str::to_owned),
                    }),
                }),
                None => None,
            };
            let mut consensus = Vec::new();
            for (uri, hash) in &peer_consensus {
                let Some(entry) = state.consensus.consensus(uri)? else {
                    continue;
                };
                if entry.hash == *hash
                    && entry.handlers.get(Role::Requester).is_some()
                    && calls_action(&entry.document, &action, &schema)
                {
                    consensus.push(uri.clone());
                }
            }
            let mut unlisted = false;
            if check_listing {
                for summary in state.consensus.list_consensus()? {
                    let listed = peer_consensus
                        .iter()
                        .any(|(uri, hash)| *uri == summary.uri && *hash == summary.hash);
                    if listed
                        || summary.integrity != Integrity::Verified
                        || !summary.handler_roles.contains(&Role::Requester)
                    {
                        continue;
                    }
                    if let Some(entry) = state.consensus.consensus(&summary.uri)? {
                        if calls_action(&entry.document, &action, &schema) {
                            unlisted = true;
                            break;
                        }
                    }
                }
            }
            Ok(Shortcuts {
                resumable: resume,
                consensus,
                unlisted,
            })
        })
        .await
        .map_err(|error| ConnectError::Store(error.to_string()))
}

/// What a requester may offer in its hello.
struct Shortcuts {
    /// The protocol it offers for 0-RTT, read with the offer.
    resumable: Option<Resumable>,
    /// The consensus protocols both sides hold, by URI.
    consensus: Vec<String>,
    /// We hold a consensus protocol for the action the description does not list.
    unlisted: bool,
}

/// The protocol a requester offers for 0-RTT, read with the offer.
struct Resumable {
    hash: ProtocolHash,
    /// What the store holds under `hash` (`None`: it vanished since the offer was chosen).
    stored: Option<Stored>,
}

/// A stored protocol as a requester starts a session from it.
struct Stored {
    settled: Settled,
    /// Our handler for it, when stored.
    handler: Option<String>,
}

/// Whether a protocol document is for `action` (its request fixes `action` to it, or does
/// not fix it at all).
fn calls_action(document: &str, action: &str, limits: &SchemaLimits) -> bool {
    let Ok(document) = ProtocolDocument::parse_within(document, limits) else {
        return false;
    };
    match document
        .request_schema
        .as_ref()
        .and_then(|schema| schema.pointer("/properties/action/const"))
    {
        Some(Value::String(name)) => name == action,
        _ => true,
    }
}

/// How a requester will reach a provider: whether it signs (and as whom), whether the
/// session is encrypted, and the provider's DID the channel must prove.
pub(crate) struct ChannelPlan {
    signer: Option<Arc<concord_identity::Identity>>,
    /// The provider's DID, when the session is encrypted.
    noise_with: Option<concord_identity::Did>,
}

impl ChannelPlan {
    /// The plan for the provider `thing` (fetched from `description_url`) under our policy.
    fn for_peer(
        shared: &Shared,
        thing: &Thing,
        description_url: &str,
        endpoint: &str,
    ) -> Result<Self, ConnectError> {
        let refuse = |reason: String| ConnectError::Security {
            endpoint: endpoint.to_owned(),
            reason,
        };
        let identity = &shared.identity;
        let meta = thing.meta_protocol.as_ref();
        let did = meta
            .and_then(|meta| meta.did.as_deref())
            .map(|did| {
                concord_identity::Did::parse(did).map_err(|error| {
                    refuse(format!("its description names the DID {did:?}: {error}"))
                })
            })
            .transpose()?;
        let offers_noise = did.is_some()
            && meta
                .and_then(|meta| meta.secure_channels.as_ref())
                .is_some_and(|channels| {
                    channels
                        .iter()
                        .any(|channel| channel == concord_secure::SUBPROTOCOL)
                });
        let noise = match identity.security.encryption {
            Encryption::Off => false,
            Encryption::Required if !offers_noise => {
                return Err(refuse(format!(
                    "our policy requires an encrypted session and the peer's description offers none (no `concord:did` with `{}`)",
                    concord_secure::SUBPROTOCOL
                )))
            }
            _ => offers_noise,
        };
        if let Some(expected) = &identity.security.expect_peer_did {
            match &did {
                Some(did) if did.as_str() == expected && noise => {}
                Some(did) if did.as_str() == expected => {
                    return Err(refuse(format!(
                        "the peer must prove the DID {expected} and its description offers                          no encrypted channel to prove it with"
                    )))
                }
                Some(did) => {
                    return Err(refuse(format!(
                        "the peer must prove the DID {expected} and its description names                          {did}"
                    )))
                }
                None => {
                    return Err(refuse(format!(
                        "the peer must prove the DID {expected} and its description names no DID"
                    )))
                }
            }
        }
        let noise_with = match did {
            Some(did) if noise => {
                check_origin(&did, description_url).map_err(|error| refuse(error.to_string()))?;
                identity.resolver.reached_over(&did, description_url);
                Some(did)
            }
            _ => None,
        };
        // A description that came over HTTPS and names a plain `ws://` endpoint would have
        // our signed upgrade (and, without Noise, the session) cross the network in clear.
        if description_url.starts_with("https://") && endpoint.starts_with("ws://") {
            return Err(refuse(
                "its description came over HTTPS and names a plain ws:// endpoint".to_owned(),
            ));
        }
        Ok(Self {
            signer: identity.identity().cloned(),
            noise_with,
        })
    }
}

/// A provider's DID must name the host we reached it at (`did:wba:shop.example…` for
/// `https://shop.example/`), else anyone serving a description could claim any DID. On
/// loopback, `localhost` and the loopback addresses are one host.
fn check_origin(did: &concord_identity::Did, description_url: &str) -> Result<(), OriginError> {
    let url = url::Url::parse(description_url).map_err(OriginError::Url)?;
    let loopback = |host: &str| {
        host == "localhost"
            || host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    };
    let host = url.host_str().unwrap_or_default();
    let same_host =
        host.eq_ignore_ascii_case(did.host()) || (loopback(host) && loopback(did.host()));
    let same_port = did.port() == url.port();
    if same_host && same_port {
        Ok(())
    } else {
        Err(OriginError::OtherHost {
            did: did.clone(),
            reached: url
                .host_str()
                .map_or_else(String::new, |host| match url.port() {
                    Some(port) => format!("{host}:{port}"),
                    None => host.to_owned(),
                }),
        })
    }
}

/// Why a provider's DID may not be believed for the address we reached it at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
enum OriginError {
    /// The description's address is not a URL.
    #[error("{0}")]
    Url(url::ParseError),
    /// The DID names another host (or port) than the one we reached.
    #[error("its description names the DID {did}, whose host is not {reached}")]
    OtherHost {
        /// The DID the description names.
        did: concord_identity::Did,
        /// The host (and port) we reached, `host:port`.
        reached: String,
    },
}

/// Opens the WebSocket to `endpoint` as `plan` says: the upgrade signed with our DID, the
/// Noise subprotocol offered, then the handshake and the provider's key checked against
/// its DID document.
/// A TCP connection to `uri`'s host and port from the local address `local`
/// ([`NodeBuilder::local_address`](crate::NodeBuilder::local_address)): the first of the
/// host's addresses in `local`'s family.
async fn tcp_from(
    local: std::net::IpAddr,
    uri: &tungstenite::http::Uri,
) -> std::io::Result<tokio::net::TcpStream> {
    let invalid =
        |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, what.to_owned());
    let host = uri
        .host()
        .ok_or_else(|| invalid("the endpoint has no host"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(match uri.scheme_str() {
        Some("wss") => 443,
        _ => 80,
    });
    let remote = tokio::net::lookup_host((host, port))
        .await?
        .find(|address| address.is_ipv4() == local.is_ipv4())
        .ok_or_else(|| {
            invalid("the endpoint's host has no address in the local address's family")
        })?;
    let socket = if local.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.bind(std::net::SocketAddr::new(local, 0))?;
    let stream = socket.connect(remote).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

async fn open_channel(
    shared: &Shared,
    endpoint: &str,
    plan: ChannelPlan,
) -> Result<(Channel<ClientSocket>, Protection), ConnectError> {
    let failed = |reason: String| ConnectError::Connect {
        endpoint: endpoint.to_owned(),
        reason,
    };
    let refuse = |reason: String| ConnectError::Security {
        endpoint: endpoint.to_owned(),
        reason,
    };
    let mut request = endpoint
        .into_client_request()
        .map_err(|error| failed(with_causes(&error)))?;
    let identity = &shared.identity;
    if let Some(signer) = &plan.signer {
        for (name, value) in upgrade::sign(signer, identity.security.signature_form, endpoint) {
            let name = tungstenite::http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|error| failed(error.to_string()))?;
            let value = tungstenite::http::HeaderValue::from_str(&value)
                .map_err(|error| failed(error.to_string()))?;
            request.headers_mut().insert(name, value);
        }
    }
    if plan.noise_with.is_some() {
        request.headers_mut().insert(
            tungstenite::http::header::SEC_WEBSOCKET_PROTOCOL,
            tungstenite::http::HeaderValue::from_static(concord_secure::SUBPROTOCOL),
        );
    }
    let limit = shared.limits.max_frame_size;
    let config = websocket_config(match plan.noise_with {
        Some(_) => secure::sealed_size(limit),
        None => limit,
    });
    let limit = shared.limits.hello_timeout;
    let tls = tokio_tungstenite::Connector::Rustls(Arc::clone(&shared.tls));
    let connecting = async {
        let Some(local) = shared.local_address else {
            return tokio_tungstenite::connect_async_tls_with_config(
                request,
                Some(config),
                true,
                Some(tls),
            )
            .await;
        };
        let stream = tcp_from(local, request.uri())
            .await
            .map_err(tungstenite::Error::Io)?;
        tokio_tungstenite::client_async_tls_with_config(request, stream, Some(config), Some(tls))
            .await
    };
    let (mut socket, response) = match tokio::time::timeout(limit, connecting).await {
        Err(_) => return Err(failed(format!("no connection within {}", human(limit)))),
        Ok(Err(tungstenite::Error::Http(response))) => {
            let body = response
                .body()
                .as_deref()
                .map(|body| String::from_utf8_lossy(body).trim().to_owned())
                .unwrap_or_default();
            return Err(failed(format!("HTTP {}: {body}", response.status())));
        }
        Ok(Err(error)) => return Err(failed(with_causes(&error))),
        Ok(Ok(connected)) => connected,
    };
    let signed_as = plan.signer.as_ref().map(|signer| signer.did().to_string());
    let Some(provider) = plan.noise_with else {
        let protection = Protection {
            peer_did: None,
            encrypted: false,
            signed_as,
        };
        return Ok((Channel::Plain(socket), protection));
    };
    let selected = response
        .headers()
        .get(tungstenite::http::header::SEC_WEBSOCKET_PROTOCOL)
        .and_then(|value| value.to_str().ok());
    if selected != Some(concord_secure::SUBPROTOCOL) {
        let reason = format!(
            "the peer's description offers the encrypted channel `{}` and its endpoint did not select it (a downgrade?)",
            concord_secure::SUBPROTOCOL
        );
        transport::close(&mut socket, close_code::POLICY, &reason, CLOSE_LINGER).await;
        return Err(refuse(reason));
    }
    let our_did = plan.signer.as_ref().map(|signer| signer.did().as_str());
    let prologue = concord_secure::prologue(our_did, provider.as_str());
    let config = identity.channel_config(shared.limits.max_frame_size);
    let handshake = secure::handshake(
        &mut socket,
        concord_secure::Role::Initiator,
        &identity.noise_static(),
        &prologue,
        our_did,
        &config,
        limit,
    )
    .await;
    let (channel, peer) = match handshake {
        Ok(done) => done,
        Err(failure) => {
            if let Some((code, reason)) = failure.close_frame() {
                transport::close(&mut socket, code, &reason, CLOSE_LINGER).await;
            }
            return Err(refuse(failure.to_string()));
        }
    };
    if let Err(reason) = secure::verify_peer(identity, Some(&provider), &peer).await {
        let reason = reason.to_string();
        transport::close(&mut socket, close_code::POLICY, &reason, CLOSE_LINGER).await;
        return Err(refuse(reason));
    }
    let protection = Protection {
        peer_did: Some(provider.to_string()),
        encrypted: true,
        signed_as,
    };
    Ok((
        Channel::Secure(Box::new(SecureSocket::new(socket, channel))),
        protection,
    ))
}

/// Loads the protocol and our code when the hello settled it (0-RTT or consensus).
/// `prefetched`: the protocol read with the 0-RTT offer, used when the peer resumes it.
async fn settle_from_store(
    shared: &Arc<Shared>,
    choice: &ProtocolChoice,
    local: &LocalSide,
    prefetched: Option<Stored>,
) -> Result<Option<(Settled, code::ProtocolCode)>, String> {
    let negotiate = *choice == ProtocolChoice::Negotiate;
    if let (ProtocolChoice::Resume(hash), Some(stored)) = (choice, prefetched) {
        if stored.settled.hash == *hash {
            let handler = stored
                .handler
                .ok_or_else(|| "our handler for it is not stored".to_owned())?;
            let code = code::load(shared, &stored.settled.document, &handler, local)
                .map_err(|error| error.to_string())?;
            return Ok(Some((stored.settled, code)));
        }
    }
    let choice = choice.clone();
    let found = shared
        .store
        .run_state(move |state| {
            Ok(match choice {
                ProtocolChoice::Negotiate => None,
                ProtocolChoice::Resume(hash) => state.protocols.protocol(&hash)?.map(|protocol| {
                    (
                        Settled {
                            hash: protocol.hash,
                            document: protocol.document,
                            how: Settlement::Resumed,
                        },
                        protocol.handlers.get(Role::Requester).map(str::to_owned),
                    )
                }),
                ProtocolChoice::Consensus(uri) => state.consensus.consensus(&uri)?.map(|entry| {
                    (
                        Settled {
                            hash: entry.hash,
                            document: entry.document,
                            how: Settlement::Consensus { uri },
                        },
                        entry.handlers.get(Role::Requester).map(str::to_owned),
                    )
                }),
            })
        })
        .await
        .map_err(|error| error.to_string())?;
    let Some((settled, handler)) = found else {
        return if negotiate {
            Ok(None)
        } else {
            Err("the stored protocol vanished".to_owned())
        };
    };
    let handler = handler.ok_or_else(|| "our handler for it is not stored".to_owned())?;
    let code = code::load(shared, &settled.document, &handler, local)
        .map_err(|error| error.to_string())?;
    Ok(Some((settled, code)))
}

fn hello_error(failure: hello::HelloFailure) -> ConnectError {
    use hello::HelloFailure;
    match failure {
        HelloFailure::Timeout(..) => ConnectError::Timeout(failure.to_string()),
        HelloFailure::PeerClosed { code, reason } => ConnectError::PeerClosed { code, reason },
        HelloFailure::Invalid(_, cause) => ConnectError::Hello { cause },
        HelloFailure::TooLarge { .. } | HelloFailure::Transport(_) => {
            ConnectError::Transport(failure.to_string())
        }
        HelloFailure::Binary(_) | HelloFailure::WrongKind { .. } => {
            ConnectError::Binding(failure.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use concord_negotiate::ActionSpec;

    #[test]
    fn a_base_url_gets_the_well_known_path() {
        assert_eq!(
            description_url("http://127.0.0.1:8080").unwrap(),
            "http://127.0.0.1:8080/.well-known/wot"
        );
        // A base with a path prefix (a public URL behind a proxy).
        assert_eq!(
            description_url("https://agent.example.com/shop/").unwrap(),
            "https://agent.example.com/shop/.well-known/wot"
        );
        assert_eq!(
            description_url("https://agent.example.com/agents/shop.json").unwrap(),
            "https://agent.example.com/agents/shop.json"
        );
        assert!(matches!(
            description_url("ws://agent.example.com/"),
            Err(ConnectError::BadUrl { .. })
        ));
        assert!(matches!(
            description_url("not a url"),
            Err(ConnectError::BadUrl { .. })
        ));
    }

    #[test]
    fn consensus_documents_match_actions_by_their_constant() {
        let document = concord_negotiate::canonical_protocol(
            &ActionSpec {
                name: "getPrice".into(),
                description: String::new(),
                input: serde_json::json!({"type": "object"}),
                output: serde_json::json!({"type": "number"}),
            },
            Duration::from_secs(15),
        );
        assert!(calls_action(
            &document,
            "getPrice",
            &SchemaLimits::default()
        ));
        assert!(!calls_action(
            &document,
            "getProductInfo",
            &SchemaLimits::default()
        ));
        assert!(!calls_action(
            "not a protocol",
            "getPrice",
            &SchemaLimits::default()
        ));
    }
}
