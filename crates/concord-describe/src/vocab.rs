//! The IRIs and prefixes a description uses.

/// The TD 1.1 context URI: a description's `@context` is this string, or an array starting
/// with it (or with [`TD_1_0_CONTEXT`] followed by it).
pub const TD_1_1_CONTEXT: &str = "https://www.w3.org/2022/wot/td/v1.1";

/// The TD 1.0 context URI, allowed only directly before [`TD_1_1_CONTEXT`].
pub const TD_1_0_CONTEXT: &str = "https://www.w3.org/2019/wot/td/v1";

/// The prefix LMOS terms use (`lmos:Agent`, `lmos:metadata`, ...).
pub const LMOS_PREFIX: &str = "lmos";

/// The LMOS protocol namespace the `lmos` prefix is bound to.
pub const LMOS_NAMESPACE: &str = "https://eclipse.dev/lmos/protocol/v1";

/// The prefix of Concord's own terms (`concord:metaProtocol`, ...).
pub const CONCORD_PREFIX: &str = "concord";

/// The namespace the `concord` prefix must be bound to. Stable: a later, incompatible
/// vocabulary gets a new IRI (`.../ns/v2#`), never a changed meaning under this one.
pub const CONCORD_NAMESPACE: &str = "https://concord.dev/ns/v1#";

/// `@type` of an LMOS agent.
pub const LMOS_AGENT: &str = "lmos:Agent";

/// `@type` of an LMOS tool.
pub const LMOS_TOOL: &str = "lmos:Tool";

/// `@type` of a Thing Model, which is not a Thing Description.
pub(crate) const THING_MODEL_TYPE: &str = "tm:ThingModel";

/// The media type of a Thing Model, as a `rel: "type"` link's `type`.
pub(crate) const THING_MODEL_MEDIA_TYPE: &str = "application/tm+json";

/// An action's `concord:mode` term (how it answers).
pub(crate) const CONCORD_MODE: &str = "concord:mode";

/// An action's `concord:stream` term (what its streams carry).
pub(crate) const CONCORD_STREAM: &str = "concord:stream";

/// A progress action's `concord:actionLease` term: the seconds an unfinished run outlives
/// its caller's connection (it can reconnect and query it meanwhile).
pub(crate) const CONCORD_ACTION_LEASE: &str = "concord:actionLease";

/// The longest `concord:actionLease` accepted: a day, in seconds.
pub const MAX_ACTION_LEASE_SECS: u64 = 86_400;
