//! What the discovery documents read of a Thing Description (as JSON: an agent's own, or
//! one a directory holds, already validated): its title, description, base, the
//! meta-protocol's endpoint, versions and DID, its actions.

use serde_json::Value;

pub(crate) use crate::describe::DESCRIPTION_PATH;

/// The description's title (empty when absent: a valid description has one).
pub(crate) fn title(td: &Value) -> &str {
    td.get("title").and_then(Value::as_str).unwrap_or_default()
}

/// The description's `description`, when it has a non-empty one.
pub(crate) fn description(td: &Value) -> Option<&str> {
    td.get("description")
        .and_then(Value::as_str)
        .filter(|text| !text.is_empty())
}

/// The description's `base` URL.
pub(crate) fn base(td: &Value) -> Option<&str> {
    td.get("base").and_then(Value::as_str)
}

/// `path` under `base`: `http://host:port/path`.
pub(crate) fn url(base: &str, path: &str) -> String {
    crate::binding::http_url(base, path)
}

fn meta(td: &Value) -> Option<&Value> {
    td.get("concord:metaProtocol")
}

/// The agent's DID (`concord:metaProtocol`'s `concord:did`).
pub(crate) fn did(td: &Value) -> Option<&str> {
    meta(td)?.get("concord:did").and_then(Value::as_str)
}

/// The meta-protocol endpoint (`concord:endpoint`).
pub(crate) fn endpoint(td: &Value) -> Option<&str> {
    meta(td)?.get("concord:endpoint").and_then(Value::as_str)
}

/// The meta-protocol versions the agent speaks, in its order.
pub(crate) fn meta_versions(td: &Value) -> Vec<&str> {
    meta(td)
        .and_then(|meta| meta.get("concord:versions"))
        .and_then(Value::as_array)
        .map(|versions| versions.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The description's `version.instance`, when it has one.
pub(crate) fn version(td: &Value) -> Option<&str> {
    td.get("version")?.get("instance").and_then(Value::as_str)
}

/// The description's actions, by name, in its order.
pub(crate) fn actions(td: &Value) -> impl Iterator<Item = (&str, &Value)> {
    td.get("actions")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(name, action)| (name.as_str(), action))
}

/// The names of the security schemes in force by default (`security`: a name or a list).
pub(crate) fn default_security(td: &Value) -> Vec<&str> {
    names(td.get("security"))
}

/// The security schemes an affordance's forms name, where they name any.
pub(crate) fn form_security(affordance: &Value) -> Vec<&str> {
    affordance
        .get("forms")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|form| names(form.get("security")))
        .collect()
}

/// A `security` member's scheme names: a string or an array of strings.
fn names(security: Option<&Value>) -> Vec<&str> {
    match security {
        Some(Value::String(name)) => vec![name.as_str()],
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}
