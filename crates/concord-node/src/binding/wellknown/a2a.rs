//! The A2A agent card (A2A v1.0, `/.well-known/agent-card.json`), derived from a Thing
//! Description: its name, description, interfaces, version, one skill per action, its
//! capabilities and security. A pure function of the description.

use serde_json::{json, Map, Value};

use super::anp::Owner;
use super::td;

/// Path of the A2A agent card.
pub(crate) const AGENT_CARD_PATH: &str = "/.well-known/agent-card.json";
/// The name of the DID-WBA scheme in the node's description and in the card.
const DIDWBA_SCHEME: &str = "didwba_sc";
/// The payload of a request-reply, progress or notify action, on the meta-protocol.
const JSON_MODE: &str = "application/json";

/// The A2A agent card of the agent `td` describes:
///
/// - `name`, `description` (the description's, else its title), `version` (the
///   description's `version.instance`, else this node's version), `documentationUrl` (the
///   Thing Description);
/// - `supportedInterfaces`: the ANP meta-protocol endpoint (`protocolBinding` `ANP`: A2A's
///   binding names are open, and a Concord agent speaks no A2A binding);
/// - `provider` from `owner`;
/// - `capabilities`: `streaming` when an action streams (`concord:mode` `stream`);
/// - `securitySchemes`: DID-WBA as an HTTP authentication scheme (`Authorization: DIDWba`,
///   or RFC 9421 signatures) when the agent has a DID; `securityRequirements` when every
///   affordance needs it, else on each skill that does;
/// - one skill per action: its name as `id` and `name` (its `title` when set), its
///   description, `tags` (`action` and its mode), and its input and output media types
///   (a stream's content types, else JSON).
pub(crate) fn agent_card(td: &Value, owner: Option<&Owner>) -> Value {
    let name = td::title(td);
    let mut card = Map::new();
    card.insert("name".into(), json!(name));
    card.insert(
        "description".into(),
        json!(td::description(td).unwrap_or(name)),
    );
    let mut interfaces = Vec::new();
    if let Some(endpoint) = td::endpoint(td) {
        let mut interface = json!({"url": endpoint, "protocolBinding": "ANP"});
        if let Some(version) = td::meta_versions(td).first() {
            interface["protocolVersion"] = json!(version);
        }
        interfaces.push(interface);
    }
    card.insert("supportedInterfaces".into(), Value::Array(interfaces));
    if let Some(owner) = owner {
        let mut provider = json!({"organization": owner.name});
        if let Some(url) = &owner.url {
            provider["url"] = json!(url);
        }
        card.insert("provider".into(), provider);
    }
    card.insert(
        "version".into(),
        json!(td::version(td).unwrap_or(env!("CARGO_PKG_VERSION"))),
    );
    if let Some(base) = td::base(td) {
        card.insert(
            "documentationUrl".into(),
            json!(td::url(base, td::DESCRIPTION_PATH)),
        );
    }
    let streaming = td::actions(td).any(|(_, action)| mode(action) == "stream");
    card.insert(
        "capabilities".into(),
        json!({"streaming": streaming, "pushNotifications": false}),
    );
    let did = td::did(td).is_some();
    let everywhere = td::default_security(td) == [DIDWBA_SCHEME];
    if did {
        card.insert(
            "securitySchemes".into(),
            json!({DIDWBA_SCHEME: {"httpAuthSecurityScheme": {
                "scheme": "DIDWba",
                "description": "ANP did:wba: RFC 9421 Signature-Input/Signature signed with the caller's did:wba key (or ANP's legacy Authorization: DIDWba header, where the agent accepts it), verified against the caller's DID document",
            }}}),
        );
        if everywhere {
            card.insert("securityRequirements".into(), requirement());
        }
    }
    card.insert("defaultInputModes".into(), json!([JSON_MODE]));
    card.insert("defaultOutputModes".into(), json!([JSON_MODE]));
    let skills = td::actions(td)
        .map(|(name, action)| {
            let secured = did && !everywhere && td::form_security(action).contains(&DIDWBA_SCHEME);
            skill(name, action, secured)
        })
        .collect();
    card.insert("skills".into(), Value::Array(skills));
    Value::Object(card)
}

/// One skill: an action of the description.
fn skill(name: &str, action: &Value, secured: bool) -> Value {
    let title = action.get("title").and_then(Value::as_str).unwrap_or(name);
    let description = action
        .get("description")
        .and_then(Value::as_str)
        .filter(|text| !text.is_empty())
        .unwrap_or(title);
    let mode = mode(action);
    let stream = action.get("concord:stream");
    let input = stream
        .and_then(|stream| stream.get("concord:contentType"))
        .and_then(Value::as_str);
    let output = stream
        .and_then(|stream| stream.get("concord:outputContentType"))
        .and_then(Value::as_str)
        .or(input);
    let mut skill = json!({
        "id": name,
        "name": title,
        "description": description,
        "tags": ["action", mode],
        "inputModes": [input.unwrap_or(JSON_MODE)],
        "outputModes": [output.unwrap_or(JSON_MODE)],
    });
    if secured {
        skill["securityRequirements"] = requirement();
    }
    skill
}

/// An action's `concord:mode` (`reply` when absent, as a foreign agent's).
fn mode(action: &Value) -> &str {
    action
        .get("concord:mode")
        .and_then(Value::as_str)
        .unwrap_or("reply")
}

/// A2A's security requirement naming the DID-WBA scheme.
fn requirement() -> Value {
    json!([{"schemes": {DIDWBA_SCHEME: {"list": []}}}])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_card_has_a_skill_per_action_and_streams_when_an_action_does() {
        let td = json!({
            "title": "Weather",
            "description": "Forecasts.",
            "base": "http://127.0.0.1:8080/",
            "security": "nosec_sc",
            "concord:metaProtocol": {
                "concord:endpoint": "ws://127.0.0.1:8080/concord",
                "concord:versions": ["1.0"],
                "concord:did": "did:wba:localhost%3A8080:agents:e1_x",
            },
            "actions": {
                "getWeather": {"description": "Today's weather.", "concord:mode": "reply", "forms": [{"href": "ws://127.0.0.1:8080/concord"}]},
                "talk": {"concord:mode": "stream", "concord:stream": {"concord:contentType": "audio/pcm", "concord:initialCredit": 1},
                         "forms": [{"href": "ws://127.0.0.1:8080/concord", "security": "didwba_sc"}]},
            },
        });
        let card = agent_card(&td, Some(&Owner::organization("Met")));
        assert_eq!(card["capabilities"]["streaming"], true);
        assert_eq!(card["provider"], json!({"organization": "Met"}));
        assert_eq!(card["skills"][0]["id"], "getWeather");
        assert_eq!(card["skills"][0]["description"], "Today's weather.");
        assert!(card["skills"][0].get("securityRequirements").is_none());
        assert_eq!(card["skills"][1]["inputModes"], json!(["audio/pcm"]));
        assert_eq!(card["skills"][1]["outputModes"], json!(["audio/pcm"]));
        assert_eq!(card["skills"][1]["securityRequirements"], requirement());
        assert!(card.get("securityRequirements").is_none());
        assert_eq!(
            card["supportedInterfaces"][0]["url"],
            "ws://127.0.0.1:8080/concord"
        );
        assert_eq!(
            card["documentationUrl"],
            "http://127.0.0.1:8080/.well-known/wot"
        );
    }
}
