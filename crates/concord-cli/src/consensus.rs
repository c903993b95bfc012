//! Handler code for consensus protocols: a registry entry is only usable by a side whose
//! handler module is stored with it, so registering one means generating and checking that
//! module (the template, or the LLM when one is given and no template fits).

use anyhow::bail;
use concord_handlers::{Generated, Generator, Local};
use concord_negotiate::{ActionSpec, ProtocolDocument};
use concord_sandbox::Role;
use serde_json::Value;

/// The action a protocol's request fixes with a `const` on its `action` field, if any.
pub fn fixed_action(document: &ProtocolDocument) -> Option<&str> {
    document
        .request_schema
        .as_ref()
        .and_then(|schema| schema.pointer("/properties/action/const"))
        .and_then(Value::as_str)
}

/// The requester's module for calling the protocol's action `action` (or the one the
/// protocol fixes), sending and receiving the protocol's fields as they are.
pub async fn requester_module(
    generator: &Generator,
    document: &ProtocolDocument,
    action: Option<&str>,
) -> anyhow::Result<Generated> {
    let name = match (fixed_action(document), action) {
        (Some(fixed), Some(name)) if fixed != name => {
            bail!("the protocol is for the action `{fixed}`, not `{name}`")
        }
        (Some(fixed), _) => fixed.to_owned(),
        (None, Some(name)) => name.to_owned(),
        (None, None) => bail!(
            "the protocol does not fix the action's name (no `const` for `action`): \
             pass --action NAME"
        ),
    };
    let local = Local::from_protocol(document, Role::Requester, &name);
    Ok(generator.generate(document, &local, None).await?)
}

/// The provider's module serving the protocol with whichever of `actions` it calls.
pub async fn provider_module(
    generator: &Generator,
    document: &ProtocolDocument,
    actions: &[ActionSpec],
) -> anyhow::Result<Generated> {
    let Some(local) = Local::provider_for(document, actions) else {
        let names: Vec<&str> = actions.iter().map(|action| action.name.as_str()).collect();
        bail!(
            "the protocol calls none of the actions served ({})",
            names.join(", ")
        );
    };
    Ok(generator.generate(document, &local, None).await?)
}
