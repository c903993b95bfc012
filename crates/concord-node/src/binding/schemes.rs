//! The bindings' security schemes, checked when the node starts serving: a problem is a
//! configuration error naming the binding, never a description that fails its validator
//! at the first request for it.

use std::collections::BTreeSet;

use concord_describe::{InvalidDescription, SecurityScheme, ThingBuilder};

use super::{Affordance, Bindings, Site};
use crate::describe::node_schemes;
use crate::error::NodeError;
use crate::node::Shared;

/// `Ok` when every binding's schemes have names of their own and pass the description's
/// validator, every scheme its forms name is defined (by the node or a binding), and what
/// it describes of its own is valid (`described.rs`).
pub(crate) fn check_schemes(
    shared: &Shared,
    site: &Site,
    bindings: &Bindings,
) -> Result<(), NodeError> {
    let own = node_schemes(shared);
    let mut defined: BTreeSet<String> = own.iter().map(|name| (*name).to_owned()).collect();
    for binding in bindings.iter() {
        let refused = |why: String| {
            NodeError::Config(format!(
                "the binding `{}` cannot be served: {why}",
                binding.name()
            ))
        };
        let schemes = binding.security_schemes();
        for (name, _) in &schemes {
            if !defined.insert(name.clone()) {
                return Err(refused(format!(
                    "its security scheme `{name}` has the name of one the node or another binding defines"
                )));
            }
        }
        check_valid(&own, &schemes)
            .map_err(|invalid| refused(format!("its security schemes are refused: {invalid}")))?;
    }
    for binding in bindings.iter() {
        for form in binding.thing_forms(site) {
            let named = form.security.iter().flat_map(|names| names.as_slice());
            if let Some(missing) = named.into_iter().find(|name| !defined.contains(*name)) {
                return Err(NodeError::Config(format!(
                    "the binding `{}` cannot be served: its Thing-level form ({}) names the security scheme `{missing}`, which neither the node nor a binding defines",
                    binding.name(),
                    form.href
                )));
            }
        }
        for affordance in affordances(&shared.interface) {
            for form in binding.forms(site, affordance) {
                let named = form.security.iter().flat_map(|names| names.as_slice());
                if let Some(missing) = named.into_iter().find(|name| !defined.contains(*name)) {
                    return Err(NodeError::Config(format!(
                        "the binding `{}` cannot be served: its form for `{}` ({}) names the security scheme `{missing}`, which neither the node nor a binding defines",
                        binding.name(),
                        affordance.name(),
                        form.href
                    )));
                }
            }
        }
    }
    super::check_described(shared, site, bindings, &defined)
}

/// `Ok` when a description defining `schemes` beside the node's own passes the validator;
/// `Err` is its report.
fn check_valid(
    own: &[&str],
    schemes: &[(String, SecurityScheme)],
) -> Result<(), InvalidDescription> {
    let mut builder = ThingBuilder::agent("security schemes");
    for name in own {
        builder = builder.security_definition(*name, SecurityScheme::nosec());
    }
    for (name, scheme) in schemes {
        builder = builder.security_definition(name.clone(), scheme.clone());
    }
    builder.build().map(drop)
}

/// Every affordance of `interface`, as bindings are asked for their forms.
fn affordances(interface: &concord_interact::Interface) -> impl Iterator<Item = Affordance<'_>> {
    let properties = interface
        .properties
        .iter()
        .map(|(name, property)| Affordance::Property { name, property });
    let actions = interface
        .actions
        .iter()
        .map(|(name, action)| Affordance::Action { name, action });
    let events = interface
        .events
        .iter()
        .map(|(name, event)| Affordance::Event { name, event });
    properties.chain(actions).chain(events)
}
