//! The `[discovery]` section of an agent's (or a directory's) configuration: how the node
//! makes itself found beyond its URL.
//!
//! ```toml
//! [discovery]
//! mdns = true                        # announce on the local network with DNS-SD
//! #                                    (`_wot._tcp`, TXT td/type/scheme); default false
//! owner = { name = "Small Shop", url = "https://shop.example", email = "ops@shop.example", type = "Organization" }
//! #   optional: the `owner` of the ANP ad.json and the `provider` of the A2A agent card
//! #   (type: "Organization", the default, or "Person"; url and email optional)
//! ```

use concord_node::{NodeBuilder, Owner};
use serde::Deserialize;
use serde_json::Value;

use crate::agent_config::Problem;

/// `[discovery]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DiscoverySection {
    mdns: Option<Value>,
    owner: Option<OwnerSection>,
}

/// `discovery.owner` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OwnerSection {
    name: String,
    url: Option<String>,
    email: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
}

/// How the node makes itself found, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovery {
    /// Whether it announces itself with DNS-SD (`discovery.mdns`).
    pub mdns: bool,
    /// Who runs it (`discovery.owner`).
    pub owner: Option<Owner>,
}

impl Discovery {
    /// `builder` configured to be found this way.
    pub fn apply(&self, builder: NodeBuilder) -> NodeBuilder {
        let builder = builder.mdns(self.mdns);
        match &self.owner {
            Some(owner) => builder.owner(owner.clone()),
            None => builder,
        }
    }
}

impl DiscoverySection {
    /// The section checked; a problem names its key.
    pub(crate) fn check(self) -> Result<Discovery, Problem> {
        let mdns = match self.mdns {
            None => false,
            Some(Value::Bool(mdns)) => mdns,
            Some(other) => {
                return Err(Problem::key(
                    "discovery.mdns",
                    format!("{other} is not true or false"),
                ))
            }
        };
        let owner = self.owner.map(OwnerSection::check).transpose()?;
        Ok(Discovery { mdns, owner })
    }
}

impl OwnerSection {
    fn check(self) -> Result<Owner, Problem> {
        let name = self.name.trim();
        if name.is_empty() {
            return Err(Problem::key("discovery.owner.name", "is empty"));
        }
        let mut owner = match self.kind.as_deref() {
            None | Some("Organization") => Owner::organization(name),
            Some("Person") => Owner::person(name),
            Some(other) => {
                return Err(Problem::key(
                    "discovery.owner.type",
                    format!("{other:?} is not one of \"Organization\", \"Person\""),
                ))
            }
        };
        if let Some(url) = self.url {
            url::Url::parse(&url).map_err(|error| {
                Problem::key("discovery.owner.url", format!("{url:?}: {error}"))
            })?;
            owner = owner.with_url(url);
        }
        if let Some(email) = self.email {
            if !email.contains('@') {
                return Err(Problem::key(
                    "discovery.owner.email",
                    format!("{email:?} is no e-mail address"),
                ));
            }
            owner = owner.with_email(email);
        }
        Ok(owner)
    }
}
