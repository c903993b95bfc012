//! The node's own description: an LMOS agent (WoT TD 1.1) with Concord's extension.

use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Instant;

use axum::body::Bytes;
use concord_describe::{
    ActionBuilder, ConsensusProtocol, EventBuilder, Form, InteractionMode, InvalidDescription,
    MetaProtocol, Operation, PropertyBuilder, SecurityScheme, StreamDescription, Thing,
    ThingBuilder,
};
use concord_identity::Caller;
use concord_interact::{
    ActionAffordance, ActionMode, EventAffordance, Interface, PropertyAffordance, StreamSpec,
};
use concord_negotiate::ActionSpec;
use concord_proto::Role;
use concord_store::Integrity;
use serde_json::{json, Value};

use crate::binding::websocket;
use crate::binding::{Affordance, Bindings, Site};
use crate::error::{DescriptionError, DescriptionIdError};
use crate::node::Shared;
use crate::storage::StoreFailure;

/// The name of the DID-WBA scheme in the description's `securityDefinitions`.
pub(crate) const DIDWBA_SCHEME: &str = "didwba_sc";

/// Path of the description.
pub(crate) const DESCRIPTION_PATH: &str = "/.well-known/wot";
/// Media type of a Thing Description.
pub(crate) const TD_MEDIA_TYPE: &str = "application/td+json";

/// A server's description: its affordances with every binding's forms, the meta-protocol
/// endpoint, the capabilities this node really has, and the consensus protocols it holds
/// provider code for. Everything but the consensus protocols is fixed for the server's
/// life, so the document is built (and validated) once, and again only when the consensus
/// protocols in the store change.
/// Requests arriving together share one read of the consensus registry.
pub(crate) struct Description {
    site: Site,
    /// Who supplies the affordances' forms, in order.
    bindings: Bindings,
    /// The consensus protocols the last document lists, and the document.
    built: Mutex<Option<(Vec<ConsensusProtocol>, Served)>>,
    /// The latest read of the consensus registry: when it began, and what it gave.
    /// Requests take turns on it (an async lock: waiting holds no thread), and one that
    /// finds a read begun after it arrived takes that read's answer, which is as fresh as
    /// its own would be: many requests at once cost one read of the registry (a shared
    /// backend's round trip, or its timeout while it is away), not one each.
    latest_read: tokio::sync::Mutex<Option<(Instant, ConsensusRead)>>,
}

/// A built description and its entity tag (a strong one: the first 128 bits of the
/// document's SHA-256, so it changes with every byte, the consensus list included).
#[derive(Debug, Clone)]
pub(crate) struct Served {
    pub(crate) bytes: Bytes,
    pub(crate) etag: String,
    /// Built without the consensus registry (it could not be read): served with
    /// `no-cache`, so that no requester keeps it once the registry answers.
    pub(crate) provisional: bool,
}

impl Served {
    fn new(bytes: Bytes) -> Self {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(&bytes);
        let etag = format!("\"{}\"", hex::encode(&digest[..16]));
        Self {
            bytes,
            etag,
            provisional: false,
        }
    }
}

/// What one read of the consensus registry gave.
type ConsensusRead = Result<Vec<ConsensusProtocol>, StoreFailure>;

impl Description {
    pub(crate) fn new(site: Site, bindings: Bindings) -> Self {
        Self {
            site,
            bindings,
            built: Mutex::new(None),
            latest_read: tokio::sync::Mutex::new(None),
        }
    }

    /// The description as served now. When the consensus registry cannot be read (a
    /// shared backend away), the last document built is served as it was (its consensus
    /// list may be behind: a caller offering a protocol no longer there is told so in the
    /// hello, as always); with none built yet (a replica started while its shared backend
    /// is away), the description as the node's configuration makes it, listing no consensus
    /// protocol (the registry cannot say which): it is not kept, so the first read of the
    /// registry that succeeds builds the full one.
    pub(crate) async fn bytes(&self, shared: &Shared) -> Result<Bytes, DescriptionBuildError> {
        self.served(shared).await.map(|served| served.bytes)
    }

    /// [`Description::bytes`] with its entity tag.
    pub(crate) async fn served(&self, shared: &Shared) -> Result<Served, DescriptionBuildError> {
        let consensus = match self.consensus(shared).await {
            Ok(consensus) => consensus,
            Err(error) => {
                let error = DescriptionBuildError::Store(error);
                let built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
                return match built.as_ref() {
                    Some((_, served)) => {
                        tracing::warn!(%error, "the consensus registry cannot be read: serving the last description built");
                        Ok(served.clone())
                    }
                    None => {
                        drop(built);
                        tracing::warn!(%error, "the consensus registry cannot be read: serving the description without consensus protocols");
                        build(shared, &self.site, &self.bindings, Vec::new()).map(|bytes| Served {
                            provisional: true,
                            ..Served::new(Bytes::from(bytes))
                        })
                    }
                };
            }
        };
        let mut built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((listed, served)) = built.as_ref() {
            if *listed == consensus {
                return Ok(served.clone());
            }
        }
        let served = Served::new(Bytes::from(build(
            shared,
            &self.site,
            &self.bindings,
            consensus.clone(),
        )?));
        *built = Some((consensus, served.clone()));
        Ok(served)
    }

    /// The consensus protocols the registry holds now: the answer of a read begun after
    /// this call (its own, or one another request began meanwhile).
    async fn consensus(&self, shared: &Shared) -> ConsensusRead {
        let arrived = Instant::now();
        let mut latest = self.latest_read.lock().await;
        if let Some((began, read)) = latest.as_ref() {
            if *began >= arrived {
                return read.clone();
            }
        }
        let began = Instant::now();
        let read = consensus_protocols(shared).await;
        *latest = Some((began, read.clone()));
        read
    }
}

/// The served description as other routes read it (the discovery documents derived from
/// it, `binding/wellknown/`): the bindings are made before the description that lists their
/// forms, so they are handed this and the server sets it once the description exists. It
/// holds the description weakly: the node's own routes own it.
#[derive(Clone, Default)]
pub(crate) struct DescriptionHandle(Arc<OnceLock<Weak<Description>>>);

impl DescriptionHandle {
    /// Points the handle at the server's description (once; later calls change nothing).
    pub(crate) fn set(&self, description: &Arc<Description>) {
        let _ = self.0.set(Arc::downgrade(description));
    }

    /// The description as served now; `None` before the server set it or after it stopped.
    pub(crate) async fn bytes(
        &self,
        shared: &Shared,
    ) -> Option<Result<Bytes, DescriptionBuildError>> {
        let description = self.0.get()?.upgrade()?;
        Some(description.bytes(shared).await)
    }
}

impl std::fmt::Debug for DescriptionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DescriptionHandle")
            .field(&self.0.get().is_some())
            .finish()
    }
}

/// The consensus protocols the description lists: those the store holds intact, with
/// provider code.
async fn consensus_protocols(shared: &Shared) -> ConsensusRead {
    Ok(shared
        .store
        .run_state(|state| state.consensus.list_consensus())
        .await?
        .into_iter()
        .filter(|entry| {
            entry.integrity == Integrity::Verified && entry.handler_roles.contains(&Role::Provider)
        })
        .map(|entry| ConsensusProtocol::new(entry.uri, entry.hash))
        .collect())
}

/// The description listing `consensus`, validated and serialised.
fn build(
    shared: &Shared,
    site: &Site,
    bindings: &Bindings,
    consensus: Vec<ConsensusProtocol>,
) -> Result<Vec<u8>, DescriptionBuildError> {
    let base_url = site.base_url();
    let endpoint = websocket::websocket_url(base_url);
    let mut meta = MetaProtocol::new(endpoint).with_capabilities(shared.provider_capabilities());
    if !consensus.is_empty() {
        meta.consensus_protocols = Some(consensus);
    }
    let identity = &shared.identity;
    let did = identity
        .identity()
        .map(|identity| identity.did().to_string());
    if let Some(did) = &did {
        if identity.speaks_noise() {
            meta.secure_channels = Some(vec![concord_secure::SUBPROTOCOL.to_owned()]);
        }
        meta.did = Some(did.clone());
    }
    let mut builder = ThingBuilder::agent(shared.persona.title.clone()).base(base_url);
    // What a caller must prove, per affordance: nothing (`nosec_sc`) where anonymous callers
    // may call, a DID (`didwba_sc`) elsewhere. The description's default is `nosec_sc` when
    // any affordance is open (the others name `didwba_sc` on their forms), else `didwba_sc`.
    let open = |name: &str| identity.permits(&Caller::Anonymous, name);
    let any_open = any_open(shared);
    if did.is_some() {
        let forms = if identity.security.legacy_didwba {
            "RFC 9421 Signature-Input/Signature over @method @target-uri @authority, or Authorization: DIDWba"
        } else {
            "RFC 9421 Signature-Input/Signature over @method @target-uri @authority"
        };
        let didwba = SecurityScheme::extension(
            "concord:didwba",
            format!(
                "ANP DID-WBA: sign each HTTP request and the WebSocket upgrade with your did:wba DID ({forms})"
            ),
        );
        builder = if any_open {
            builder
                .security("nosec_sc", SecurityScheme::nosec())
                .security_definition(DIDWBA_SCHEME, didwba)
        } else {
            builder.security(DIDWBA_SCHEME, didwba)
        };
    }
    for (name, scheme) in bindings
        .iter()
        .flat_map(|binding| binding.security_schemes())
    {
        builder = builder.security_definition(name, scheme);
    }
    if let Some(id) = &shared.id {
        builder = builder.id(id.clone());
    }
    if let Some(description) = &shared.persona.description {
        builder = builder.description(description.clone());
    }
    let secured = |name: &str| (did.is_some() && any_open && !open(name)).then_some(DIDWBA_SCHEME);
    let lease = shared.limits.interaction.action_lease;
    let forms = |affordance: Affordance<'_>| {
        let forms = bindings
            .iter()
            .flat_map(|binding| binding.forms(site, affordance))
            .collect::<Vec<_>>();
        let variables = bindings
            .iter()
            .flat_map(|binding| binding.uri_variables(affordance))
            .collect::<serde_json::Map<_, _>>();
        (forms, variables)
    };
    for form in bindings
        .iter()
        .flat_map(|binding| binding.thing_forms(site))
    {
        builder = builder.form(form);
    }
    let mut builder = describe_interface(builder, &shared.interface, forms, lease, secured);
    for binding in bindings.iter() {
        builder = binding.described(site).apply(builder);
    }
    let thing = builder
        .meta_protocol(meta)
        .build()
        .map_err(DescriptionBuildError::Invalid)?;
    serde_json::to_vec_pretty(&thing).map_err(DescriptionBuildError::Json)
}

/// Why the node cannot build its own description (answered with 500 and this text).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum DescriptionBuildError {
    /// The store could not list the consensus protocols (logged: the description is then
    /// the last built, or one without consensus protocols, never this error).
    #[error("{0}")]
    Store(StoreFailure),
    /// The description built is not valid (a bug of ours: the validator's report).
    #[error("{0}")]
    Invalid(InvalidDescription),
    /// The description cannot be serialised.
    #[error("{0}")]
    Json(serde_json::Error),
}

/// Whether anonymous callers may use any affordance of the node: one of its interface's,
/// or one a binding describes of its own (a WoT Discovery directory's reads are open to
/// anyone; its forms say what each needs).
fn any_open(shared: &Shared) -> bool {
    shared.directory.is_some()
        || names(&shared.interface).any(|name| shared.identity.permits(&Caller::Anonymous, name))
}

/// The security schemes the description defines of its own: `didwba_sc` with a DID
/// (beside `nosec_sc` when any affordance is open to anonymous callers), else `nosec_sc`.
pub(crate) fn node_schemes(shared: &Shared) -> Vec<&'static str> {
    match shared.identity.identity() {
        Some(_) if any_open(shared) => vec!["nosec_sc", DIDWBA_SCHEME],
        Some(_) => vec![DIDWBA_SCHEME],
        None => vec!["nosec_sc"],
    }
}

/// Every affordance name of `interface`.
fn names(interface: &Interface) -> impl Iterator<Item = &str> {
    interface
        .actions
        .keys()
        .chain(interface.properties.keys())
        .chain(interface.events.keys())
        .map(String::as_str)
}

/// Adds every affordance of `interface` to `builder`, each with the forms `forms` gives it
/// (every binding's, in order) and the URI variables their `href`s use; `secured` names the security scheme an affordance's forms
/// require in place of the description's default, if any.
///
/// - a property: `readOnly` unless writable, `observable` when it is; its schema inline;
/// - an action: `concord:mode`, `synchronous` (`false` for a progress action, which also
///   says the `lease` an unfinished run outlives its caller (`concord:actionLease`),
///   `true` for the others); a stream action `concord:stream`;
/// - an event: its `data` schema.
fn describe_interface<'a>(
    mut builder: ThingBuilder,
    interface: &Interface,
    forms: impl Fn(Affordance<'_>) -> (Vec<Form>, serde_json::Map<String, Value>),
    lease: std::time::Duration,
    secured: impl Fn(&str) -> Option<&'a str>,
) -> ThingBuilder {
    let security = |name: &str| secured(name).map(|scheme| [scheme]);
    for (name, property) in &interface.properties {
        let mut schema = property.schema.clone();
        if let Value::Object(terms) = &mut schema {
            terms.remove("readOnly");
            if !property.description.is_empty() {
                terms.insert(
                    "description".into(),
                    Value::from(property.description.clone()),
                );
            }
        }
        let (property_forms, variables) = forms(Affordance::Property { name, property });
        let mut described = PropertyBuilder::with_forms(property_forms, schema);
        if !variables.is_empty() {
            described = described.uri_variables(Value::Object(variables));
        }
        if !property.writable {
            described = described.read_only();
        }
        if property.observable {
            described = described.observable(true);
        }
        if let Some(scheme) = security(name) {
            described = described.security(&scheme);
        }
        builder = builder.property(name.clone(), described);
    }
    for (name, action) in &interface.actions {
        let (action_forms, variables) = forms(Affordance::Action { name, action });
        let mut described = ActionBuilder::with_forms(action_forms)
            .input(action.input.clone())
            .output(action.output.clone())
            .mode(interaction_mode(action.mode));
        if !action.description.is_empty() {
            described = described.description(action.description.clone());
        }
        if !variables.is_empty() {
            described = described.uri_variables(Value::Object(variables));
        }
        // Every action says whether its invocation answers with its output (the WoT
        // Profile asks it of each): a progress action answers with its status resource.
        described = if action.mode == ActionMode::Progress {
            described.synchronous(false).action_lease(lease.as_secs())
        } else {
            described.synchronous(true)
        };
        if let Some(stream) = &action.stream {
            described = described.stream(stream_description(stream));
        }
        if let Some(scheme) = security(name) {
            described = described.security(&scheme);
        }
        builder = builder.action(name.clone(), described);
    }
    for (name, event) in &interface.events {
        let (event_forms, variables) = forms(Affordance::Event { name, event });
        let mut described = EventBuilder::with_forms(event_forms).data(event.data.clone());
        if !variables.is_empty() {
            described = described.uri_variables(Value::Object(variables));
        }
        if !event.description.is_empty() {
            described = described.description(event.description.clone());
        }
        if let Some(scheme) = security(name) {
            described = described.security(&scheme);
        }
        builder = builder.event(name.clone(), described);
    }
    builder
}

fn interaction_mode(mode: ActionMode) -> InteractionMode {
    match mode {
        ActionMode::Reply => InteractionMode::Reply,
        ActionMode::Progress => InteractionMode::Progress,
        ActionMode::Notify => InteractionMode::Notify,
        ActionMode::Stream => InteractionMode::Stream,
    }
}

fn stream_description(spec: &StreamSpec) -> StreamDescription {
    let mut stream = StreamDescription::new(spec.content_type.clone(), spec.initial_credit);
    stream.output_content_type = spec.output_content_type.clone();
    stream.frame_bytes = spec.frame_bytes;
    stream.realtime = spec.realtime;
    stream
}

/// The interface a peer's description offers: its actions with their mode (`concord:mode`,
/// request-reply when absent, as a foreign agent's) and stream specification, its
/// properties, its events. `Err` says which affordance cannot be used, and why.
pub(crate) fn interface_of(thing: &Thing) -> Result<Interface, DescriptionError> {
    let mut interface = Interface::default();
    for (name, action) in thing.actions.iter().flatten() {
        let spec = ActionSpec::from_affordance(name, action);
        let mode = match action.interaction_mode() {
            InteractionMode::Reply => ActionMode::Reply,
            InteractionMode::Progress => ActionMode::Progress,
            InteractionMode::Notify => ActionMode::Notify,
            InteractionMode::Stream => ActionMode::Stream,
            other => {
                return Err(DescriptionError::UnknownMode {
                    action: name.clone(),
                    mode: other.name(),
                })
            }
        };
        let stream = action.stream.as_ref().map(|stream| StreamSpec {
            content_type: stream.content_type.clone(),
            output_content_type: stream.output_content_type.clone(),
            frame_bytes: stream.frame_bytes,
            initial_credit: stream.initial_credit,
            realtime: stream.realtime,
        });
        if (mode == ActionMode::Stream) != stream.is_some() {
            return Err(DescriptionError::StreamMismatch {
                action: name.clone(),
                mode: mode.as_str(),
            });
        }
        interface.actions.insert(
            name.clone(),
            ActionAffordance {
                description: spec.description,
                input: spec.input,
                output: spec.output,
                mode,
                stream,
            },
        );
    }
    for (name, property) in thing.properties.iter().flatten() {
        let Value::Object(mut schema) = property.schema.to_json() else {
            return Err(DescriptionError::PropertySchema {
                property: name.clone(),
            });
        };
        let description = match schema.remove("description") {
            Some(Value::String(description)) => description,
            _ => String::new(),
        };
        let read_only = schema.remove("readOnly") == Some(Value::Bool(true));
        let offers = |operation: Operation| {
            property.forms.iter().any(|form| match &form.op {
                Some(operations) => operations.as_slice().contains(&operation),
                // A form without `op` offers the TD defaults: readproperty and writeproperty.
                None => operation == Operation::WriteProperty,
            })
        };
        interface.properties.insert(
            name.clone(),
            PropertyAffordance {
                description,
                schema: Value::Object(schema),
                writable: !read_only && offers(Operation::WriteProperty),
                observable: property.observable == Some(true) || offers(Operation::ObserveProperty),
            },
        );
    }
    for (name, event) in thing.events.iter().flatten() {
        let annotations = &event.annotations;
        interface.events.insert(
            name.clone(),
            EventAffordance {
                description: annotations
                    .description
                    .clone()
                    .or_else(|| annotations.title.clone())
                    .unwrap_or_default(),
                data: event
                    .data
                    .as_ref()
                    .map_or_else(|| json!({"type": "object"}), |data| data.to_json()),
            },
        );
    }
    Ok(interface)
}

/// Checks a description `id` the way the node's served description will be checked
/// (it must be an absolute URI such as `urn:uuid:…` or `https://…`); `Err` says what is wrong.
///
/// ```
/// assert!(concord_node::check_description_id("Shop", "urn:uuid:6f1d3a7a-1f97-4e6b-b45f-f3c2e1c84c77").is_ok());
/// let refused = concord_node::check_description_id("Shop", "shop").unwrap_err();
/// assert_eq!(refused.report.errors().next().map(|problem| problem.pointer.as_str()), Some("/id"));
/// assert!(refused.to_string().contains("relative reference"));
/// ```
pub fn check_description_id(title: &str, id: &str) -> Result<(), DescriptionIdError> {
    ThingBuilder::agent(title)
        .id(id)
        .build()
        .map(drop)
        .map_err(|invalid| DescriptionIdError {
            id: id.to_owned(),
            report: invalid.report,
        })
}

/// What a node introduces itself as, on the local network (TXT `type=`) and in its DID
/// document (a `WotThing` or `WotDirectory` service): a Thing (an agent), or a Thing
/// Description Directory when it serves one
/// ([`NodeBuilder::directory`](crate::NodeBuilder::directory)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ThingKind {
    /// A Thing: an agent.
    Thing,
    /// A Thing Description Directory.
    Directory,
}

impl ThingKind {
    /// The TXT `type=` value: `Thing` or `Directory`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Thing => "Thing",
            Self::Directory => "Directory",
        }
    }

    /// The DID document's service type: `WotThing` or `WotDirectory`.
    pub(crate) fn did_service(self) -> &'static str {
        match self {
            Self::Thing => "WotThing",
            Self::Directory => "WotDirectory",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "http://127.0.0.1:8080/";

    /// A WeatherAgent-like interface: a read-only observable property, a request-reply
    /// action, a progress action, a notification action, an event and a stream action.
    fn weather() -> Interface {
        let action = |mode: ActionMode, stream: Option<StreamSpec>| ActionAffordance {
            description: format!("An action in {} mode.", mode.as_str()),
            input: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
            output: json!({"type": "string"}),
            mode,
            stream,
        };
        let mut interface = Interface::default();
        interface
            .actions
            .insert("getWeather".into(), action(ActionMode::Reply, None));
        interface
            .actions
            .insert("forecast".into(), action(ActionMode::Progress, None));
        interface
            .actions
            .insert("feedback".into(), action(ActionMode::Notify, None));
        let talk = StreamSpec {
            content_type: "audio/pcm;rate=24000;channels=1".into(),
            output_content_type: Some("audio/pcm;rate=16000;channels=1".into()),
            frame_bytes: 960,
            initial_credit: 96_000,
            realtime: true,
        };
        interface
            .actions
            .insert("talk".into(), action(ActionMode::Stream, Some(talk)));
        interface.properties.insert(
            "modelConfiguration".into(),
            PropertyAffordance {
                description: "The model the agent uses.".into(),
                schema: json!({"type": "object", "properties": {"modelName": {"type": "string"}, "temperature": {"type": "number"}}}),
                writable: false,
                observable: true,
            },
        );
        interface.properties.insert(
            "units".into(),
            PropertyAffordance {
                description: String::new(),
                schema: json!({"type": "string", "enum": ["metric", "imperial"]}),
                writable: true,
                observable: false,
            },
        );
        interface.events.insert(
            "userFeedbackReceived".into(),
            EventAffordance {
                description: "A user rated an answer.".into(),
                data: json!({"type": "object", "properties": {"rating": {"type": "integer"}}}),
            },
        );
        interface
    }

    /// The description of `interface` as the node builds it, with `locked` needing a DID.
    fn describe(interface: &Interface, locked: &[&str]) -> Thing {
        let endpoint = websocket::websocket_url(BASE);
        let didwba = SecurityScheme::extension("concord:didwba", "sign the upgrade");
        let builder = ThingBuilder::agent("WeatherAgent")
            .base(BASE)
            .security("nosec_sc", SecurityScheme::nosec())
            .security_definition(DIDWBA_SCHEME, didwba);
        let lease = std::time::Duration::from_secs(45);
        let forms = |affordance: Affordance<'_>| {
            let forms = websocket::forms(&endpoint, affordance);
            (forms, serde_json::Map::new())
        };
        describe_interface(builder, interface, forms, lease, |name| {
            locked.contains(&name).then_some(DIDWBA_SCHEME)
        })
        .meta_protocol(MetaProtocol::new(endpoint.clone()))
        .build()
        .unwrap()
    }

    /// The operations of an affordance's forms, in order.
    fn ops(affordance: &Value) -> Vec<String> {
        affordance["forms"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|form| match &form["op"] {
                Value::String(op) => vec![op.clone()],
                Value::Array(ops) => ops
                    .iter()
                    .map(|op| op.as_str().unwrap().to_owned())
                    .collect(),
                _ => Vec::new(),
            })
            .collect()
    }

    #[test]
    fn the_description_tells_the_interface_and_reads_back() {
        let interface = weather();
        let thing = describe(&interface, &["talk"]);
        let text = serde_json::to_vec_pretty(&thing).unwrap();
        let report = concord_describe::validate(&text);
        assert!(
            report.is_valid() && report.warning_count() == 0,
            "{report:?}"
        );
        let td: Value = serde_json::from_slice(&text).unwrap();

        let config = &td["properties"]["modelConfiguration"];
        assert_eq!(
            ops(config),
            ["readproperty", "observeproperty", "unobserveproperty"]
        );
        assert_eq!(config["readOnly"], true);
        assert_eq!(config["observable"], true);
        assert_eq!(config["type"], "object");
        assert_eq!(config["forms"][0]["href"], "ws://127.0.0.1:8080/concord");
        let units = &td["properties"]["units"];
        assert_eq!(ops(units), ["readproperty", "writeproperty"]);
        assert!(units.get("readOnly").is_none());

        let weather = &td["actions"]["getWeather"];
        assert_eq!(ops(weather), ["invokeaction"]);
        assert_eq!(weather["concord:mode"], "reply");
        // Every action says whether it answers with its output.
        assert_eq!(weather["synchronous"], true);
        let forecast = &td["actions"]["forecast"];
        assert_eq!(
            ops(forecast),
            ["invokeaction", "queryaction", "cancelaction"]
        );
        assert_eq!(forecast["synchronous"], false);
        assert_eq!(forecast["concord:actionLease"], 45);
        assert_eq!(forecast["concord:mode"], "progress");
        let feedback = &td["actions"]["feedback"];
        assert_eq!(feedback["concord:mode"], "notify");
        assert_eq!(feedback["synchronous"], true);
        let talk = &td["actions"]["talk"];
        assert_eq!(talk["concord:mode"], "stream");
        assert_eq!(
            talk["concord:stream"],
            json!({
                "concord:contentType": "audio/pcm;rate=24000;channels=1",
                "concord:outputContentType": "audio/pcm;rate=16000;channels=1",
                "concord:frameBytes": 960,
                "concord:initialCredit": 96000,
                "concord:realtime": true
            })
        );
        assert_eq!(talk["forms"][0]["security"], DIDWBA_SCHEME);
        assert!(weather["forms"][0].get("security").is_none());

        let event = &td["events"]["userFeedbackReceived"];
        assert_eq!(ops(event), ["subscribeevent", "unsubscribeevent"]);
        assert_eq!(event["data"]["properties"]["rating"]["type"], "integer");

        let read = concord_describe::parse(&text).unwrap().thing;
        assert_eq!(interface_of(&read), Ok(interface));
    }

    #[test]
    fn a_foreign_description_gives_request_reply_actions() {
        let text = br#"{
            "@context": "https://www.w3.org/2022/wot/td/v1.1",
            "title": "Lamp",
            "securityDefinitions": {"nosec_sc": {"scheme": "nosec"}},
            "security": "nosec_sc",
            "properties": {
                "on": {"type": "boolean", "title": "Switched on", "forms": [{"href": "https://lamp.example.com/on"}]},
                "watts": {"type": "number", "readOnly": true, "observable": true, "forms": [{"href": "https://lamp.example.com/watts"}]}
            },
            "actions": {"fade": {"synchronous": false, "forms": [{"href": "https://lamp.example.com/fade"}]}},
            "events": {"overheated": {"forms": [{"href": "https://lamp.example.com/overheated"}]}}
        }"#;
        let thing = concord_describe::parse(text).unwrap().thing;
        let interface = interface_of(&thing).unwrap();
        let fade = &interface.actions["fade"];
        assert_eq!(fade.mode, ActionMode::Reply);
        assert_eq!(fade.stream, None);
        assert_eq!(fade.input, json!({"type": "object"}));
        let on = &interface.properties["on"];
        assert!(on.writable && !on.observable);
        assert_eq!(
            on.schema,
            json!({"type": "boolean", "title": "Switched on"})
        );
        let watts = &interface.properties["watts"];
        assert!(!watts.writable && watts.observable);
        assert_eq!(watts.schema, json!({"type": "number"}));
        assert_eq!(
            interface.events["overheated"].data,
            json!({"type": "object"})
        );
    }

    /// The description, checked by an independent validator: Python `jsonschema` against the
    /// official TD JSON Schema of `../shared/testdata/td` (its `@context` definition accepts
    /// only the experimental `wot-next` URI, so it is pointed at the TD 1.1 URI, as
    /// concord-describe's cross-check does, with TD 1.1's alternative of the TD 1.0 URI
    /// first, which our descriptions use for older consumers). Needs `CONCORD_ANP_PYTHON`, a Python with
    /// `jsonschema` (`.ci/run` makes one).
    #[test]
    #[ignore = "needs Python with jsonschema: set CONCORD_ANP_PYTHON (`.ci/run` does)"]
    fn the_official_td_schema_accepts_the_description() {
        let python = std::env::var("CONCORD_ANP_PYTHON")
            .expect("CONCORD_ANP_PYTHON: a Python with jsonschema");
        let schema = std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/testdata/td/w3c/td-json-schema-validation.json"
        ));
        if !schema.is_file() {
            // The external test documents are never copied into the repository.
            eprintln!("skipped: {} is absent", schema.display());
            return;
        }
        let thing = describe(&weather(), &["talk"]);
        let dir = tempfile::tempdir().unwrap();
        let td = dir.path().join("weather.td.json");
        std::fs::write(&td, serde_json::to_vec_pretty(&thing).unwrap()).unwrap();
        let script = r##"
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
for name, definition in schema["definitions"].items():
    if name.startswith("thing-context-td-uri-temp"):
        definition["const"] = "https://www.w3.org/2022/wot/td/v1.1"
# TD 1.1's own schema also allows the TD 1.0 URI first, then the TD 1.1 one, then others.
context = schema["definitions"]["thing-context"]["anyOf"]
context.append({
    "type": "array",
    "items": [{"$ref": "#/definitions/thing-context-td-uri-v1"},
              {"$ref": "#/definitions/thing-context-td-uri-temp"}],
    "minItems": 2,
    "additionalItems": context[1]["additionalItems"],
})
td = json.load(open(sys.argv[2]))
validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())
errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(td)]
print("\n".join(errors) if errors else "valid")
sys.exit(1 if errors else 0)
"##;
        let output = std::process::Command::new(python)
            .arg("-c")
            .arg(script)
            .arg(schema)
            .arg(&td)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{said}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(said.trim(), "valid");
    }
}
