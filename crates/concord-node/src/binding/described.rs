//! What a binding adds to the description beside its forms on the node's affordances
//! ([`Described`]), and the check made when the node starts serving: its affordances'
//! names are its own and its forms name defined security schemes.

use std::collections::BTreeSet;

use concord_describe::{
    ActionBuilder, EventBuilder, PropertyBuilder, SecurityScheme, ThingBuilder,
};

use super::{Bindings, Site};
use crate::error::NodeError;
use crate::node::Shared;

/// What one binding adds to the description ([`Binding::described`](super::Binding::described)):
/// context URIs and `@type`s of the Thing, and affordances the binding alone serves, each
/// with the binding's forms.
///
/// ```
/// use concord_describe::{Form, PropertyBuilder};
/// use concord_node::Described;
/// use serde_json::json;
///
/// let mut described = Described::default();
/// described.contexts.push("https://www.w3.org/2022/wot/discovery".into());
/// described.types.push("ThingDirectory".into());
/// described.properties.push((
///     "things".into(),
///     PropertyBuilder::with_forms([Form::new("/things")], json!({"type": "array"})).read_only(),
/// ));
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Described {
    /// Context URIs added to `@context` after the TD context and the prefixes.
    pub contexts: Vec<String>,
    /// Types added to `@type` after the node's own (`lmos:Agent`).
    pub types: Vec<String>,
    /// Properties the binding serves, by name.
    pub properties: Vec<(String, PropertyBuilder)>,
    /// Actions the binding serves, by name.
    pub actions: Vec<(String, ActionBuilder)>,
    /// Events the binding serves, by name.
    pub events: Vec<(String, EventBuilder)>,
}

impl Described {
    /// `builder` with these contexts, types and affordances added.
    pub(crate) fn apply(self, mut builder: ThingBuilder) -> ThingBuilder {
        for context in self.contexts {
            builder = builder.context(context);
        }
        for kind in self.types {
            builder = builder.also_type(kind);
        }
        for (name, property) in self.properties {
            builder = builder.property(name, property);
        }
        for (name, action) in self.actions {
            builder = builder.action(name, action);
        }
        for (name, event) in self.events {
            builder = builder.event(name, event);
        }
        builder
    }

    /// Every affordance name.
    fn names(&self) -> impl Iterator<Item = &str> {
        let properties = self.properties.iter().map(|(name, _)| name);
        let actions = self.actions.iter().map(|(name, _)| name);
        let events = self.events.iter().map(|(name, _)| name);
        properties.chain(actions).chain(events).map(String::as_str)
    }
}

/// `Ok` when no binding's own affordance takes a name of the node's interface or of
/// another binding's, and what each describes passes the description's validator with
/// the security schemes `defined` (the node's and the bindings'), so a form naming
/// another is refused here, not at the first request for the description.
pub(crate) fn check_described(
    shared: &Shared,
    site: &Site,
    bindings: &Bindings,
    defined: &BTreeSet<String>,
) -> Result<(), NodeError> {
    let interface = &shared.interface;
    let mut taken: BTreeSet<String> = interface
        .actions
        .keys()
        .chain(interface.properties.keys())
        .chain(interface.events.keys())
        .cloned()
        .collect();
    for binding in bindings.iter() {
        let refused = |why: String| {
            NodeError::Config(format!(
                "the binding `{}` cannot be served: {why}",
                binding.name()
            ))
        };
        let described = binding.described(site);
        for name in described.names() {
            if !taken.insert(name.to_owned()) {
                return Err(refused(format!(
                    "its affordance `{name}` has the name of one the node or another binding describes"
                )));
            }
        }
        let mut test = ThingBuilder::agent("described");
        for scheme in defined {
            test = test.security_definition(scheme.clone(), SecurityScheme::nosec());
        }
        described
            .apply(test)
            .build()
            .map_err(|invalid| refused(format!("what it describes is refused: {invalid}")))?;
    }
    Ok(())
}
