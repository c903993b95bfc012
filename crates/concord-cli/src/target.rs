//! Which agent a connecting command (`concord call`, `subscribe`, `stream`, `read`,
//! `write`, `status`, `cancel`) talks to: a URL as given, an agent id (`urn:…`, a DID)
//! looked up in a W3C WoT Discovery directory, or the agent a capability query finds there
//! (`--find`). The one place these commands resolve their target.

use std::path::Path;

use clap::Args;
use concord_node::{CapabilityQuery, Directory};
use serde_json::Value;

use crate::output::Wrong;

/// What stands for the target on the command line when --find is given (`main` puts it
/// there, so that the positionals after the target keep their places).
pub const FOUND: &str = "\u{0}find";

/// The commands whose first positional is the target.
const CONNECTING: [&str; 7] = [
    "call",
    "subscribe",
    "stream",
    "read",
    "write",
    "status",
    "cancel",
];

/// The command line with [`FOUND`] in the target's place when a connecting command is given
/// --find (which stands for the target): `concord call --find getProductInfo getProductInfo
/// '{…}'` reads as `concord call <FOUND> getProductInfo '{…}'`.
pub fn with_found_target(mut args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let connecting = args
        .get(1)
        .and_then(|command| command.to_str())
        .is_some_and(|command| CONNECTING.contains(&command));
    let finds = args
        .iter()
        .skip(2)
        .take_while(|arg| *arg != "--")
        .filter_map(|arg| arg.to_str())
        .any(|arg| arg == "--find" || arg.starts_with("--find="));
    if connecting && finds {
        args.insert(2, FOUND.into());
    }
    args
}

/// The environment variable naming the directory when `--directory` is not given.
pub const DIRECTORY_ENV: &str = "CONCORD_DIRECTORY";

/// How the target is found, shared by the connecting commands.
#[derive(Debug, Clone, Default, Args)]
pub struct TargetArgs {
    /// The W3C WoT Discovery directory (its base URL) that resolves an agent id given as
    /// the target (`urn:…`, `did:…`) or a --find query. Default: $CONCORD_DIRECTORY.
    #[arg(long, value_name = "URL")]
    pub directory: Option<String>,
    /// Talk to the agent this capability query finds in the directory, instead of a target
    /// given (leave the target out): `ACTION`, or `KEY=VALUE` pairs joined by `&` or `,`
    /// with keys action, property, event, field, input, output, lmos, protocol, did
    /// (`--find 'action=getProductInfo&field=productId'`). Refused when several agents
    /// match, unless --first.
    #[arg(long, value_name = "QUERY")]
    pub find: Option<String>,
    /// With --find, take the first agent the directory lists when several match.
    #[arg(long, requires = "find")]
    pub first: bool,
}

impl TargetArgs {
    /// The URL to reach `target` at (the command's positional target, [`FOUND`] with
    /// --find), resolved on a runtime of its own: see [`TargetArgs::resolve`].
    ///
    /// # Errors
    /// As [`TargetArgs::resolve`].
    pub fn settle(&self, target: &str, ca_cert: Option<&Path>) -> anyhow::Result<Settled> {
        if target == FOUND || self.find.is_some() || is_agent_id(target) {
            let target = (target != FOUND).then_some(target);
            return crate::runtime::block_on(self.resolve(target, ca_cert))?;
        }
        Ok(Settled {
            url: target.to_owned(),
            did: None,
        })
    }

    /// The URL to reach the target at: `target` itself when it is an `http(s)://` URL,
    /// else the `base` of the description the directory holds for that id; with --find,
    /// the `base` of the one agent the query finds. With the DID the peer must prove when
    /// the id looked up (or the found description's) is a DID: the directory's
    /// description only says where to go, the peer there must be that agent.
    ///
    /// # Errors
    /// Wrong (exit 1) for no directory to ask, an unknown id, no match or several (without
    /// --first); could not run (exit 2) when the directory cannot be reached.
    pub async fn resolve(
        &self,
        target: Option<&str>,
        ca_cert: Option<&Path>,
    ) -> anyhow::Result<Settled> {
        match (target, &self.find) {
            (Some(_), Some(_)) => Err(Wrong::error(
                "--find stands for the target: leave the agent's URL or id out",
            )),
            (Some(url), None) if is_url(url) => Ok(Settled {
                url: url.to_owned(),
                did: None,
            }),
            (Some(id), _) => {
                let directory = self.directory(&format!("the agent id {id:?}"), ca_cert)?;
                let td = directory
                    .get(id)
                    .await
                    .map_err(|error| match error.status() {
                        Some(404) => Wrong::error(format!(
                            "the directory {} holds no agent {id:?}",
                            directory.url()
                        )),
                        _ => anyhow::Error::new(error),
                    })?;
                Settled::of(&td, id, None)
            }
            (None, Some(query)) => {
                let directory = self.directory("--find", ca_cert)?;
                let query = parse_query(query)?;
                let found = directory.search(&query).await?;
                let td = match found.as_slice() {
                    [] => {
                        return Err(Wrong::error(format!(
                            "no agent in {} matches --find {:?}",
                            directory.url(),
                            self.find.as_deref().unwrap_or_default()
                        )))
                    }
                    [one] => one,
                    [first, ..] if self.first => first,
                    several => {
                        let ids: Vec<&str> = several.iter().map(id_of).take(5).collect();
                        return Err(Wrong::error(format!(
                            "{} agents match --find {:?} ({}{}): narrow the query or give \
                             --first",
                            several.len(),
                            self.find.as_deref().unwrap_or_default(),
                            ids.join(", "),
                            if several.len() > 5 { ", …" } else { "" }
                        )));
                    }
                };
                Settled::of(td, id_of(td), query.did.as_deref())
            }
            (None, None) => Err(Wrong::error(
                "no target: give the agent's URL or id, or --find QUERY",
            )),
        }
    }

    /// The directory client: --directory, else $CONCORD_DIRECTORY.
    fn directory(&self, needs: &str, ca_cert: Option<&Path>) -> anyhow::Result<Directory> {
        let url = self
            .directory
            .clone()
            .or_else(|| std::env::var(DIRECTORY_ENV).ok())
            .filter(|url| !url.trim().is_empty())
            .ok_or_else(|| {
                Wrong::error(format!(
                    "{needs} needs a directory to look it up in: give --directory URL or set \
                     {DIRECTORY_ENV}"
                ))
            })?;
        directory_client(&url, ca_cert)
    }
}

/// Where a connecting command's target is, and who it must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// The URL to connect to.
    pub url: String,
    /// The DID the peer must prove there (`Security::expect_peer_did`): every DID the
    /// lookup named, which is one (the agent id looked up, when it is a DID; the DIDs its
    /// description names, `concord_directory::dids_named`; the `did` of a --find query).
    pub did: Option<String>,
}

impl Settled {
    /// The `base` of the description `td` a directory gave for `id`, and the DID to prove:
    /// `id` when it is one, the DIDs `td` names, and `queried` (a --find query's `did`),
    /// all the same one.
    ///
    /// # Errors
    /// Wrong (exit 1) when they name several DIDs (no peer can prove two), or the TD has
    /// no `base` to connect to.
    fn of(td: &Value, id: &str, queried: Option<&str>) -> anyhow::Result<Self> {
        let mut named: Vec<&str> = Vec::new();
        let candidates = is_did(id)
            .then_some(id)
            .into_iter()
            .chain(concord_directory::dids_named(td))
            .chain(queried);
        for did in candidates {
            if !named.contains(&did) {
                named.push(did);
            }
        }
        if let [_, _, ..] = named.as_slice() {
            return Err(Wrong::error(format!(
                "the description of {id:?} names several DIDs ({}): no agent can prove them \
                 all, so none is reached",
                named.join(", ")
            )));
        }
        Ok(Self {
            url: base_of(td, id)?,
            did: named.first().map(|did| (*did).to_owned()),
        })
    }
}

/// The client of the directory at `url`, also trusting the roots in the PEM file `ca_cert`
/// (`--ca-cert`) when given: a directory on `https://` with a private CA.
///
/// # Errors
/// Wrong (exit 1) for a URL that is not one or a PEM that holds no certificate; could not
/// run (exit 2) when the PEM file cannot be read.
pub fn directory_client(url: &str, ca_cert: Option<&Path>) -> anyhow::Result<Directory> {
    match ca_cert {
        Some(path) => Directory::with_roots_pem(url, &crate::input::read_bytes(Some(path))?)
            .map_err(|error| Wrong::error(format!("{}: {error}", path.display()))),
        None => Directory::new(url).map_err(|error| Wrong::error(error.to_string())),
    }
}

/// Whether the target is an agent's id to look up (`urn:…`, `did:…`); anything else is
/// taken as a URL (and refused as one when it is not).
fn is_agent_id(target: &str) -> bool {
    let scheme = target.get(..4).unwrap_or_default().to_ascii_lowercase();
    scheme == "urn:" || scheme == "did:"
}

/// Whether an agent's id is a DID.
fn is_did(id: &str) -> bool {
    id.get(..4)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("did:"))
}

/// Whether the target is a URL to connect to directly.
fn is_url(target: &str) -> bool {
    let lower = target.get(..8).unwrap_or(target).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// A description's `id`, or `?`.
pub fn id_of(td: &Value) -> &str {
    td.get("id").and_then(Value::as_str).unwrap_or("?")
}

/// Where to reach the agent a description describes: its `base`.
fn base_of(td: &Value, id: &str) -> anyhow::Result<String> {
    td.get("base")
        .and_then(Value::as_str)
        .filter(|base| is_url(base))
        .map(str::to_owned)
        .ok_or_else(|| {
            Wrong::error(format!(
                "the directory's description of {id:?} has no http(s) `base` to reach it at"
            ))
        })
}

/// A --find query: a bare action name, or `KEY=VALUE` pairs joined by `&` or `,`.
///
/// # Errors
/// Wrong (exit 1) for an unknown key, an empty value or no criterion.
pub fn parse_query(text: &str) -> anyhow::Result<CapabilityQuery> {
    let mut query = CapabilityQuery::default();
    let text = text.trim();
    if !text.contains('=') {
        if text.is_empty() {
            return Err(Wrong::error("--find: an empty query"));
        }
        query.action = Some(text.to_owned());
        return Ok(query);
    }
    for pair in text
        .split(['&', ','])
        .filter(|pair| !pair.trim().is_empty())
    {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| Wrong::error(format!("--find: {pair:?} is not KEY=VALUE")))?;
        let value = value.trim();
        if value.is_empty() {
            return Err(Wrong::error(format!("--find: {key} has no value")));
        }
        let slot = match key.trim() {
            "action" => &mut query.action,
            "property" => &mut query.property,
            "event" => &mut query.event,
            "field" => &mut query.field,
            "input" => &mut query.input,
            "output" => &mut query.output,
            "lmos" => &mut query.lmos,
            "protocol" => &mut query.protocol,
            "did" => &mut query.did,
            other => {
                return Err(Wrong::error(format!(
                    "--find: unknown key {other:?} (action, property, event, field, input, \
                     output, lmos, protocol, did)"
                )))
            }
        };
        *slot = Some(value.to_owned());
    }
    Ok(query)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peer_must_prove_every_did_the_lookup_names() {
        let td = |did: Option<&str>| {
            let mut td =
                serde_json::json!({"id": "urn:example:shop", "base": "http://127.0.0.1:9/"});
            if let Some(did) = did {
                td["concord:metaProtocol"] = serde_json::json!({"concord:did": did});
            }
            td
        };
        let shop = "did:wba:shop.example";
        // Found by a urn: id, the DID its description names.
        let settled = Settled::of(&td(Some(shop)), "urn:example:shop", None).expect("one DID");
        assert_eq!(settled.did.as_deref(), Some(shop));
        // Found by --find did=…: the same one.
        let settled = Settled::of(&td(Some(shop)), "urn:example:shop", Some(shop)).expect("one");
        assert_eq!(settled.did.as_deref(), Some(shop));
        // Named nowhere: none to prove.
        let settled = Settled::of(&td(None), "urn:example:shop", None).expect("none");
        assert_eq!(settled.did, None);
        // The query's DID and the description's differ: refused, naming both.
        let refused = Settled::of(&td(Some(shop)), "urn:example:shop", Some("did:wba:other"))
            .expect_err("two DIDs");
        let message = refused.to_string();
        assert!(
            message.contains(shop) && message.contains("did:wba:other"),
            "{message}"
        );
    }

    #[test]
    fn queries_are_read() {
        let query = parse_query("getProductInfo").expect("query");
        assert_eq!(query.action.as_deref(), Some("getProductInfo"));
        let query = parse_query("action=a&field=productId,did=did:wba:x").expect("query");
        assert_eq!(query.action.as_deref(), Some("a"));
        assert_eq!(query.field.as_deref(), Some("productId"));
        assert_eq!(query.did.as_deref(), Some("did:wba:x"));
        assert!(parse_query("colour=red").is_err());
        assert!(parse_query("action=").is_err());
        assert!(parse_query(" ").is_err());
    }

    #[test]
    fn find_takes_the_targets_place() {
        let line = |words: &[&str]| -> Vec<std::ffi::OsString> {
            words.iter().map(std::ffi::OsString::from).collect()
        };
        assert_eq!(
            with_found_target(line(&["concord", "call", "--find", "q", "a", "{}"])),
            line(&["concord", "call", FOUND, "--find", "q", "a", "{}"])
        );
        assert_eq!(
            with_found_target(line(&["concord", "read", "p", "--find=q"])),
            line(&["concord", "read", FOUND, "p", "--find=q"])
        );
        for untouched in [
            &["concord", "call", "http://x/", "a"][..],
            &["concord", "find", "--find", "q"][..],
            &["concord", "call", "http://x/", "a", "--", "--find"][..],
        ] {
            assert_eq!(with_found_target(line(untouched)), line(untouched));
        }
    }
}
