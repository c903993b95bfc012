//! The node's own description: an LMOS agent (WoT TD 1.1) with Concord's extension.

use concord_describe::{ActionBuilder, ConsensusProtocol, MetaProtocol, ThingBuilder};
use concord_proto::Role;
use concord_store::Integrity;

use crate::node::Shared;
use crate::storage::StoreFailure;

/// Path of the description.
pub(crate) const DESCRIPTION_PATH: &str = "/.well-known/wot";
/// Path of the meta-protocol WebSocket.
pub(crate) const ENDPOINT_PATH: &str = "/concord";
/// Media type of a Thing Description.
pub(crate) const TD_MEDIA_TYPE: &str = "application/td+json";

/// The description as served: its actions, the WebSocket endpoint, the capabilities this
/// node really has, and the consensus protocols it holds provider code for.
pub(crate) async fn description(shared: &Shared, base_url: &str) -> Result<Vec<u8>, String> {
    let consensus = shared
        .store
        .run(|store| store.list_consensus())
        .await
        .map_err(|error: StoreFailure| error.to_string())?
        .into_iter()
        .filter(|entry| {
            entry.integrity == Integrity::Verified && entry.handler_roles.contains(&Role::Provider)
        })
        .map(|entry| ConsensusProtocol::new(entry.uri, entry.hash))
        .collect::<Vec<_>>();
    let endpoint = websocket_url(base_url);
    let mut meta = MetaProtocol::new(endpoint.clone()).with_capabilities(shared.capabilities);
    if !consensus.is_empty() {
        meta.consensus_protocols = Some(consensus);
    }
    let mut builder = ThingBuilder::agent(shared.persona.title.clone()).base(base_url);
    if let Some(id) = &shared.id {
        builder = builder.id(id.clone());
    }
    if let Some(description) = &shared.persona.description {
        builder = builder.description(description.clone());
    }
    for spec in &shared.persona.actions {
        let mut action = ActionBuilder::new(endpoint.clone())
            .input(spec.input.clone())
            .output(spec.output.clone());
        if !spec.description.is_empty() {
            action = action.description(spec.description.clone());
        }
        builder = builder.action(spec.name.clone(), action);
    }
    let thing = builder
        .meta_protocol(meta)
        .build()
        .map_err(|invalid| invalid.to_string())?;
    serde_json::to_vec_pretty(&thing).map_err(|error| error.to_string())
}

/// Checks a description `id` the way the served description will be checked: `Err` says
/// what is wrong with it (it must be an absolute URI).
pub(crate) fn check_id(title: &str, id: &str) -> Result<(), String> {
    ThingBuilder::agent(title)
        .id(id)
        .build()
        .map(drop)
        .map_err(|invalid| {
            let reason = invalid
                .report
                .errors()
                .next()
                .map_or_else(|| invalid.to_string(), |problem| problem.message.clone());
            format!("the description's id {id:?}: {reason}")
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
