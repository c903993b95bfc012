//! ANP's discovery documents, derived from a Thing Description: the agent description
//! `ad.json` (ANP-07) and the `CollectionPage` of `/.well-known/agent-descriptions` (ANP-08),
//! written as the reference SDK (PyPI `anp` 1.0.7, `anp.fastanp`) writes and reads them.
//! Pure functions of the description: an agent derives its own from the description it
//! serves, a directory one item per registered description.

use serde_json::{json, Map, Value};

use super::td;

/// Path of an agent's ANP agent description, under its base URL.
pub(crate) const AD_PATH: &str = "/ad.json";
/// Path of the ANP discovery collection.
pub(crate) const AGENT_DESCRIPTIONS_PATH: &str = "/.well-known/agent-descriptions";
/// The ANP agent description's version we write (`protocolVersion`), the SDK's default.
const ANP_VERSION: &str = "1.0.0";
/// The name of the DID-WBA scheme in an ANP agent description, as ANP-07 names it.
const DIDWBA_SCHEME: &str = "didwba_sc";

/// Who runs an agent: the `owner` of its ANP agent description and the `provider` of its
/// A2A agent card. Configured with [`NodeBuilder::owner`](crate::NodeBuilder::owner); none
/// by default.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Owner {
    /// Its name (an organisation's or a person's).
    pub name: String,
    /// What it is, as schema.org names it: `Organization` (the default) or `Person`.
    pub kind: String,
    /// Its website, if any.
    pub url: Option<String>,
    /// Its e-mail address, if any.
    pub email: Option<String>,
}

impl Owner {
    /// An organisation named `name`, with no website or e-mail address.
    pub fn organization(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            kind: "Organization".to_owned(),
            url: None,
            email: None,
        }
    }

    /// A person named `name`, with no website or e-mail address.
    pub fn person(name: impl Into<String>) -> Self {
        Self {
            kind: "Person".to_owned(),
            ..Self::organization(name)
        }
    }

    /// The same owner with its website.
    pub fn with_url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// The same owner with its e-mail address.
    pub fn with_email(mut self, email: impl Into<String>) -> Self {
        self.email = Some(email.into());
        self
    }

    /// ANP-07's `owner` object: `{"type", "name", "url"?, "email"?}`.
    fn to_anp(&self) -> Value {
        let mut owner = Map::new();
        owner.insert("type".into(), Value::from(self.kind.clone()));
        owner.insert("name".into(), Value::from(self.name.clone()));
        if let Some(url) = &self.url {
            owner.insert("url".into(), Value::from(url.clone()));
        }
        if let Some(email) = &self.email {
            owner.insert("email".into(), Value::from(email.clone()));
        }
        Value::Object(owner)
    }
}

/// The URL of the ANP agent description of the agent `td` describes: `ad.json` under its
/// `base`, when it is an ANP agent (a Concord agent with a DID: ANP peers authenticate with
/// it). `None` for any other Thing.
pub(crate) fn ad_url(td: &Value) -> Option<String> {
    td::did(td)?;
    Some(td::url(td::base(td)?, AD_PATH))
}

/// The ANP agent description (ANP-07) of the agent `td` describes, `None` when it is no
/// ANP agent ([`ad_url`]):
/// `protocolType`, `protocolVersion`, `type`, `url`, `name`, `did`, `owner` (when given),
/// `description` (the description's, else its title), DID-WBA as its security scheme, and
/// two interfaces: the meta-protocol endpoint and the interface document (the WoT TD).
pub(crate) fn ad_document(td: &Value, owner: Option<&Owner>) -> Option<Value> {
    let url = ad_url(td)?;
    let did = td::did(td)?;
    let base = td::base(td)?;
    let name = td::title(td);
    let mut ad = Map::new();
    ad.insert("protocolType".into(), json!("ANP"));
    ad.insert("protocolVersion".into(), json!(ANP_VERSION));
    ad.insert("type".into(), json!("AgentDescription"));
    ad.insert("url".into(), json!(url));
    ad.insert("name".into(), json!(name));
    ad.insert("did".into(), json!(did));
    if let Some(owner) = owner {
        ad.insert("owner".into(), owner.to_anp());
    }
    ad.insert(
        "description".into(),
        json!(td::description(td).unwrap_or(name)),
    );
    ad.insert(
        "securityDefinitions".into(),
        json!({DIDWBA_SCHEME: {"scheme": "didwba", "in": "header", "name": "Authorization"}}),
    );
    ad.insert("security".into(), json!(DIDWBA_SCHEME));
    let mut interfaces = Vec::new();
    if let Some(endpoint) = td::endpoint(td) {
        let mut meta = json!({
            "type": "StructuredInterface",
            "protocol": "ANP meta-protocol",
            "url": endpoint,
            "description": "The ANP meta-protocol endpoint (a WebSocket of PT-framed messages): negotiate an application protocol for an action, then call it; the interface document's affordances are offered over it.",
        });
        if let Some(version) = td::meta_versions(td).first() {
            meta["version"] = json!(version);
        }
        interfaces.push(meta);
    }
    interfaces.push(json!({
        "type": "StructuredInterface",
        "protocol": "W3C WoT Thing Description",
        "version": "1.1",
        "url": td::url(base, td::DESCRIPTION_PATH),
        "description": "The interface document: every action, property and event with its schemas, its forms and their security.",
    }));
    ad.insert("interfaces".into(), Value::Array(interfaces));
    Some(Value::Object(ad))
}

/// One item of an ANP-08 collection: `{"@type": "ad:AgentDescription", "name", "@id"}`
/// naming the agent's `ad.json`, `None` when `td` describes no ANP agent.
pub(crate) fn collection_item(td: &Value) -> Option<Value> {
    let id = ad_url(td)?;
    Some(json!({
        "@type": "ad:AgentDescription",
        "name": td::title(td),
        "@id": id,
    }))
}

/// An ANP-08 `CollectionPage` at `url` holding `items`, with `next` when more remain.
pub(crate) fn collection_page(url: &str, items: Vec<Value>, next: Option<&str>) -> Value {
    let mut page = json!({
        "@context": {
            "@vocab": "https://schema.org/",
            "did": "https://w3id.org/did#",
            "ad": "https://agent-network-protocol.com/ad#",
        },
        "@type": "CollectionPage",
        "url": url,
        "items": items,
    });
    if let Some(next) = next {
        page["next"] = json!(next);
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(did: Option<&str>) -> Value {
        let mut td = json!({
            "title": "Shop",
            "base": "http://127.0.0.1:8080/",
            "concord:metaProtocol": {
                "concord:endpoint": "ws://127.0.0.1:8080/concord",
                "concord:versions": ["1.0"],
            },
        });
        if let Some(did) = did {
            td["concord:metaProtocol"]["concord:did"] = json!(did);
        }
        td
    }

    #[test]
    fn an_agent_with_a_did_has_an_ad_json_naming_its_endpoint_and_description() {
        let did = "did:wba:localhost%3A8080:agents:e1_x";
        let owner = Owner::organization("Shop Ltd").with_url("https://shop.example");
        let ad = ad_document(&agent(Some(did)), Some(&owner)).unwrap();
        assert_eq!(ad["url"], "http://127.0.0.1:8080/ad.json");
        assert_eq!(ad["did"], did);
        assert_eq!(ad["description"], "Shop");
        assert_eq!(
            ad["owner"],
            json!({"type": "Organization", "name": "Shop Ltd", "url": "https://shop.example"})
        );
        assert_eq!(ad["securityDefinitions"]["didwba_sc"]["in"], "header");
        assert_eq!(ad["interfaces"][0]["url"], "ws://127.0.0.1:8080/concord");
        assert_eq!(ad["interfaces"][0]["version"], "1.0");
        assert_eq!(
            ad["interfaces"][1]["url"],
            "http://127.0.0.1:8080/.well-known/wot"
        );
        assert_eq!(
            collection_item(&agent(Some(did))).unwrap()["@id"],
            "http://127.0.0.1:8080/ad.json"
        );
    }

    #[test]
    fn a_thing_without_a_did_is_no_anp_agent() {
        assert_eq!(ad_document(&agent(None), None), None);
        assert_eq!(collection_item(&agent(None)), None);
        let page = collection_page("http://h/.well-known/agent-descriptions", Vec::new(), None);
        assert_eq!(page["items"], json!([]));
        assert!(page.get("next").is_none());
    }
}
