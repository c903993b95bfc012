//! Reading the actions a peer publishes in its agent description.

use concord_describe::{ActionAffordance, Thing};
use serde_json::Value;

use crate::action::{empty_object, ActionSpec};

impl ActionSpec {
    /// The action `name` as an agent description declares it: its input and output data
    /// schemas as JSON Schemas (an absent schema means "no data": an empty object).
    pub fn from_affordance(name: &str, affordance: &ActionAffordance) -> Self {
        let schema = |schema: Option<Value>| schema.unwrap_or_else(empty_object);
        Self {
            name: name.to_owned(),
            description: affordance
                .annotations
                .description
                .clone()
                .or_else(|| affordance.annotations.title.clone())
                .unwrap_or_default(),
            input: schema(affordance.input.as_ref().map(|input| input.to_json())),
            output: schema(affordance.output.as_ref().map(|output| output.to_json())),
        }
    }
}

/// Every action a description publishes, in document order.
///
/// ```
/// use concord_describe::{ActionBuilder, ThingBuilder};
/// use concord_negotiate::published_actions;
/// use serde_json::json;
///
/// let thing = ThingBuilder::agent("Product agent")
///     .action(
///         "getProductInfo",
///         ActionBuilder::new("https://shop.example.com/products")
///             .input(json!({"type": "object", "properties": {"productId": {"type": "string"}}}))
///             .output(json!({"title": "ProductInfo", "type": "object"})),
///     )
///     .build()
///     .unwrap();
/// let actions = published_actions(&thing);
/// assert_eq!(actions[0].name, "getProductInfo");
/// assert_eq!(actions[0].input["properties"]["productId"]["type"], "string");
/// ```
pub fn published_actions(thing: &Thing) -> Vec<ActionSpec> {
    thing
        .actions
        .iter()
        .flatten()
        .map(|(name, affordance)| ActionSpec::from_affordance(name, affordance))
        .collect()
}
