//! The node's own description: an LMOS agent (WoT TD 1.1) with Concord's extension.

use std::sync::{Mutex, PoisonError};

use axum::body::Bytes;
use concord_describe::{
    ActionBuilder, ConsensusProtocol, MetaProtocol, SecurityScheme, ThingBuilder,
};
use concord_identity::Caller;
use concord_proto::Role;
use concord_store::Integrity;

use crate::node::Shared;
use crate::storage::StoreFailure;

/// The name of the DID-WBA scheme in the description's `securityDefinitions`.
const DIDWBA_SCHEME: &str = "didwba_sc";

/// Path of the description.
pub(crate) const DESCRIPTION_PATH: &str = "/.well-known/wot";
/// Path of the meta-protocol WebSocket.
pub(crate) const ENDPOINT_PATH: &str = "/concord";
/// Media type of a Thing Description.
pub(crate) const TD_MEDIA_TYPE: &str = "application/td+json";

/// A server's description: its actions, the WebSocket endpoint, the capabilities this node
/// really has, and the consensus protocols it holds provider code for. Everything but the
/// consensus protocols is fixed for the server's life, so the document is built (and
/// validated) once, and again only when the consensus protocols in the store change.
#[derive(Debug)]
pub(crate) struct Description {
    base_url: String,
    /// The consensus protocols the last document lists, and the document.
    built: Mutex<Option<(Vec<ConsensusProtocol>, Bytes)>>,
}

impl Description {
    pub(crate) fn new(base_url: String) -> Self {
        Self {
            base_url,
            built: Mutex::new(None),
        }
    }

    /// The description as served now.
    pub(crate) async fn bytes(&self, shared: &Shared) -> Result<Bytes, String> {
        let consensus = consensus_protocols(shared).await?;
        let mut built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((listed, bytes)) = built.as_ref() {
            if *listed == consensus {
                return Ok(bytes.clone());
            }
        }
        let bytes = Bytes::from(build(shared, &self.base_url, consensus.clone())?);
        *built = Some((consensus, bytes.clone()));
        Ok(bytes)
    }
}

/// The consensus protocols the description lists: those the store holds intact, with
/// provider code.
async fn consensus_protocols(shared: &Shared) -> Result<Vec<ConsensusProtocol>, String> {
    Ok(shared
        .store
        .run(|store| store.list_consensus())
        .await
        .map_err(|error: StoreFailure| error.to_string())?
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
    base_url: &str,
    consensus: Vec<ConsensusProtocol>,
) -> Result<Vec<u8>, String> {
    let endpoint = websocket_url(base_url);
    let mut meta =
        MetaProtocol::new(endpoint.clone()).with_capabilities(shared.provider_capabilities());
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
    // What a caller must prove, per action: nothing (`nosec_sc`) where anonymous callers
    // may call, a DID (`didwba_sc`) elsewhere. The description's default is `nosec_sc` when
    // any action is open (the others name `didwba_sc` on their forms), else `didwba_sc`.
    let open = |name: &str| identity.permits(&Caller::Anonymous, name);
    let any_open = shared.actions.specs().iter().any(|spec| open(&spec.name));
    if did.is_some() {
        let didwba = SecurityScheme::extension(
            "concord:didwba",
            "ANP DID-WBA: sign the WebSocket upgrade with your did:wba DID (RFC 9421 Signature-Input/Signature over @method @target-uri @authority, or Authorization: DIDWba)",
        );
        builder = if any_open {
            builder
                .security("nosec_sc", SecurityScheme::nosec())
                .security_definition(DIDWBA_SCHEME, didwba)
        } else {
            builder.security(DIDWBA_SCHEME, didwba)
        };
    }
    if let Some(id) = &shared.id {
        builder = builder.id(id.clone());
    }
    if let Some(description) = &shared.persona.description {
        builder = builder.description(description.clone());
    }
    for spec in shared.actions.specs() {
        let mut action = ActionBuilder::new(endpoint.clone())
            .input(spec.input.clone())
            .output(spec.output.clone());
        if !spec.description.is_empty() {
            action = action.description(spec.description.clone());
        }
        if did.is_some() && any_open && !open(&spec.name) {
            action = action.security(&[DIDWBA_SCHEME]);
        }
        builder = builder.action(spec.name.clone(), action);
    }
    let thing = builder
        .meta_protocol(meta)
        .build()
        .map_err(|invalid| invalid.to_string())?;
    serde_json::to_vec_pretty(&thing).map_err(|error| error.to_string())
}

/// Checks a description `id` the way the node's served description will be checked
/// (it must be an absolute URI such as `urn:uuid:…` or `https://…`); `Err` says what is wrong.
///
/// ```
/// assert!(concord_node::check_description_id("Shop", "urn:uuid:6f1d3a7a-1f97-4e6b-b45f-f3c2e1c84c77").is_ok());
/// assert!(concord_node::check_description_id("Shop", "shop").unwrap_err().contains("relative reference"));
/// ```
pub fn check_description_id(title: &str, id: &str) -> Result<(), String> {
    ThingBuilder::agent(title)
        .id(id)
        .build()
        .map(drop)
        .map_err(|invalid| {
            invalid
                .report
                .errors()
                .next()
                .map_or_else(|| invalid.to_string(), |problem| problem.message.clone())
        })
}

/// `http://host:port/` → `ws://host:port/concord` (`https` → `wss`).
pub(crate) fn websocket_url(base_url: &str) -> String {
    let (scheme, rest) = match base_url.split_once("://") {
        Some(("https", rest)) => ("wss", rest),
        Some((_, rest)) => ("ws", rest),
        None => ("ws", base_url),
    };
    format!("{scheme}://{}{ENDPOINT_PATH}", rest.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_follows_the_base_url() {
        assert_eq!(
            websocket_url("http://127.0.0.1:8080/"),
            "ws://127.0.0.1:8080/concord"
        );
        assert_eq!(
            websocket_url("https://agent.example.com"),
            "wss://agent.example.com/concord"
        );
    }
}
