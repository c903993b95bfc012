//! The typed model of an agent description: a TD 1.1 Thing with the LMOS terms and
//! Concord's extension. Every struct keeps unknown terms in a flattened `extensions` map,
//! so documents round-trip without loss.

mod affordance;
mod annotations;
mod form;
mod interaction;
mod lmos;
mod meta_protocol;
mod one_or_many;
mod schema;
mod security;
mod thing;

pub use affordance::{ActionAffordance, EventAffordance, PropertyAffordance};
pub use annotations::Annotations;
pub use form::{AdditionalResponse, ExpectedResponse, Form, FormContext, Operation};
pub use interaction::{InteractionMode, StreamDescription};
pub use lmos::{LmosKind, LmosMetadata, LmosVendor};
pub use meta_protocol::{ConsensusProtocol, MetaProtocol};
pub use one_or_many::OneOrMany;
pub use schema::{DataSchema, DataType};
pub(crate) use security::{is_known_scheme, KNOWN_SCHEMES};
pub use security::{
    AdditionalSecurityScheme, ApiKeySecurityScheme, AutoSecurityScheme, BasicSecurityScheme,
    BearerSecurityScheme, Combination, ComboSecurityScheme, CredentialLocation, DigestQop,
    DigestSecurityScheme, NoSecurityScheme, OAuth2SecurityScheme, PskSecurityScheme, SchemeCommon,
    SecurityScheme,
};
pub use thing::{ContextEntry, Link, Thing, VersionInfo};

/// Texts by BCP 47 language tag (`titles`, `descriptions`).
pub type MultiLanguage = indexmap::IndexMap<String, String>;
