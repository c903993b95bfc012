//! `concord find`: agents in a W3C WoT Discovery directory, by capability (action,
//! property, event, schema field, consensus protocol, DID), by JSONPath, or all of them.

use std::process::ExitCode;

use clap::Args;
use concord_node::CapabilityQuery;
use serde_json::{json, Value};

use crate::output::{self, outln, Wrong};
use crate::target::{id_of, DIRECTORY_ENV};

/// `concord find`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  concord find --directory http://127.0.0.1:8081 --action getProductInfo
  concord find --directory http://127.0.0.1:8081 --field productId --json | jq -r '.[].base'
  concord find --directory http://127.0.0.1:8081               # every agent registered
  CONCORD_DIRECTORY=http://127.0.0.1:8081 concord find --event priceChanged
  concord find --directory https://directory.internal --ca-cert ca.pem --action getProductInfo
  concord find --directory http://127.0.0.1:8081 --jsonpath '$[?@.title==\"Shop\"]'
  concord call --directory http://127.0.0.1:8081 --find getProductInfo getProductInfo '{\"productId\": \"P1\"}'

Criteria together narrow the search (an agent must match every one); with none, every
agent is listed (following the directory's pages). The directory's capability search is
GET /search/capability?action=…&property=…&event=…&field=…&input=…&output=…&lmos=…&
consensus=…&consensus-hash=…&did=… (field=: a field of an action's input or output schema,
input=/output=: of one side), JSONPath is
GET /search/jsonpath?query=… (RFC 9535), the listing GET /things.

Prints a table: id, title, base URL and the affordances that matched (all of them when no
name was asked for). --json prints a JSON array, one object per agent: {\"id\", \"title\",
\"base\", \"matches\": [{\"kind\", \"name\"}], \"description\"} (the directory's enriched
description, with `registration`); with --jsonpath, the nodes the query selected as the
directory answered them.

--mdns asks the local network instead (DNS-SD `_wot._tcp`, listening --wait, 3s by
default; --directories for directories only): a table of name, type and description URL,
or with --json one object per Thing {\"name\", \"type\", \"url\", \"host\", \"addresses\",
\"port\", \"matches\", \"description\"}; with --action/--property/--event/--field each
announced description is fetched (at most 1 MiB, 5 s) and kept when it matches them all.
  concord find --mdns --action getProductInfo

Exit codes: 0 at least one agent found; 1 none found (or the directory refused the query,
saying why); 2 the directory could not be reached or answered off the API.")]
pub struct FindArgs {
    /// The directory's base URL. Default: $CONCORD_DIRECTORY.
    #[arg(long, value_name = "URL")]
    directory: Option<String>,
    /// Agents serving this action.
    #[arg(long, value_name = "NAME")]
    action: Option<String>,
    /// Agents with this property.
    #[arg(long, value_name = "NAME")]
    property: Option<String>,
    /// Agents publishing this event.
    #[arg(long, value_name = "NAME")]
    event: Option<String>,
    /// Agents with an action whose input or output schema has this field.
    #[arg(long, value_name = "NAME")]
    field: Option<String>,
    /// Agents with this `lmos:` term (`lmos:name`), or term and value (`lmos:name=Acme`).
    #[arg(long, value_name = "TERM[=VALUE]")]
    lmos: Option<String>,
    /// Agents holding this consensus protocol (its URI or its hash).
    #[arg(long, value_name = "URI|HASH")]
    protocol: Option<String>,
    /// The agent with this DID.
    #[arg(long, value_name = "DID")]
    did: Option<String>,
    /// A JSONPath query (RFC 9535) over the directory's descriptions, instead of the
    /// criteria above.
    #[arg(long, value_name = "QUERY",
          conflicts_with_all = ["action", "property", "event", "field", "lmos", "protocol", "did"])]
    jsonpath: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Find the Things announced on the local network with DNS-SD (`_wot._tcp`) instead
    /// of asking a directory; --action, --property, --event and --field fetch each one's
    /// description and keep those that match.
    #[arg(long, conflicts_with_all = ["directory", "jsonpath", "lmos", "protocol", "did"])]
    mdns: bool,
    /// With --mdns: directories only (`_directory._sub._wot._tcp`).
    #[arg(long, requires = "mdns")]
    directories: bool,
    /// With --mdns: how long to listen for announcements.
    #[arg(long, requires = "mdns", value_name = "DURATION", default_value = "3s",
          value_parser = humantime::parse_duration)]
    wait: std::time::Duration,
    /// Also trust the root certificates in this PEM file for an `https://` directory, on
    /// top of the system's: a directory whose certificate a private CA signed.
    #[arg(long, value_name = "FILE")]
    ca_cert: Option<std::path::PathBuf>,
}

/// Runs `concord find`.
pub fn run(args: FindArgs) -> anyhow::Result<ExitCode> {
    if args.mdns {
        let mut query = CapabilityQuery::default();
        query.action.clone_from(&args.action);
        query.property.clone_from(&args.property);
        query.event.clone_from(&args.event);
        query.field.clone_from(&args.field);
        return crate::find_mdns::run(crate::find_mdns::MdnsFind {
            wait: args.wait,
            directories: args.directories,
            query,
            json: args.json,
        });
    }
    let url = args
        .directory
        .clone()
        .or_else(|| std::env::var(DIRECTORY_ENV).ok())
        .filter(|url| !url.trim().is_empty())
        .ok_or_else(|| {
            Wrong::error(format!(
                "no directory: give --directory URL or set {DIRECTORY_ENV}"
            ))
        })?;
    let directory = crate::target::directory_client(&url, args.ca_cert.as_deref())?;
    let mut query = CapabilityQuery::default();
    query.action.clone_from(&args.action);
    query.property.clone_from(&args.property);
    query.event.clone_from(&args.event);
    query.field.clone_from(&args.field);
    query.lmos.clone_from(&args.lmos);
    query.protocol.clone_from(&args.protocol);
    query.did.clone_from(&args.did);
    let found = crate::runtime::block_on(async {
        match &args.jsonpath {
            Some(path) => directory.search_jsonpath(path).await,
            None if query.is_empty() => directory.list().await,
            None => directory.search(&query).await,
        }
    })?
    .map_err(|error| match error.status() {
        // The directory read the query and refused it: its problem details say why.
        Some(400 | 404 | 422) => Wrong::error(error.to_string()),
        _ => anyhow::Error::new(error),
    })?;
    if args.jsonpath.is_some() && !found.iter().all(is_description) {
        output::json(&found)?;
        return Ok(exit(&found, &url));
    }
    if args.json {
        let agents: Vec<Value> = found
            .iter()
            .map(|td| {
                json!({
                    "id": td.get("id"),
                    "title": td.get("title"),
                    "base": td.get("base"),
                    "matches": matches(td, &query)
                        .iter()
                        .map(|(kind, name)| json!({"kind": kind, "name": name}))
                        .collect::<Vec<_>>(),
                    "description": td,
                })
            })
            .collect();
        output::json(&agents)?;
        return Ok(exit(&found, &url));
    }
    if !found.is_empty() {
        table(&found, &query)?;
    }
    Ok(exit(&found, &url))
}

/// 0 when something was found, else 1 with a line saying so.
fn exit(found: &[Value], url: &str) -> ExitCode {
    if found.is_empty() {
        output::note(format!("no agent in {url} matches"));
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Whether a JSONPath result is a whole description (shown in the table) rather than a
/// piece of one.
fn is_description(value: &Value) -> bool {
    value.get("title").is_some_and(Value::is_string) && value.get("@context").is_some()
}

/// The table: id, title, base URL, the affordances that matched.
fn table(found: &[Value], query: &CapabilityQuery) -> anyhow::Result<()> {
    let rows: Vec<[String; 4]> = found
        .iter()
        .map(|td| {
            let text = |key: &str| {
                td.get(key)
                    .and_then(Value::as_str)
                    .map_or_else(|| "-".to_owned(), output::one_line)
            };
            let matched: Vec<String> = matches(td, query)
                .into_iter()
                .map(|(kind, name)| format!("{kind}:{}", output::one_line(&name)))
                .collect();
            [
                output::one_line(id_of(td)),
                text("title"),
                text("base"),
                matched.join(" "),
            ]
        })
        .collect();
    let headers = ["id", "title", "base", "matches"];
    let width = |column: usize| {
        rows.iter()
            .map(|row| row[column].chars().count())
            .chain([headers[column].len()])
            .max()
            .unwrap_or(0)
    };
    let (id, title, base) = (width(0), width(1), width(2));
    outln!(
        "{:<id$}  {:<title$}  {:<base$}  {}",
        headers[0],
        headers[1],
        headers[2],
        headers[3]
    )?;
    for row in &rows {
        outln!(
            "{:<id$}  {:<title$}  {:<base$}  {}",
            row[0],
            row[1],
            row[2],
            row[3]
        )?;
    }
    Ok(())
}

/// The affordances of `td` the query matched, as (kind, name): the one named for an
/// action, property or event criterion, the actions whose schemas have the field; every
/// affordance when the query names none.
pub(crate) fn matches(td: &Value, query: &CapabilityQuery) -> Vec<(&'static str, String)> {
    let names = |kind: &str| -> Vec<String> {
        td.get(kind)
            .and_then(Value::as_object)
            .map(|map| map.keys().cloned().collect())
            .unwrap_or_default()
    };
    let mut found = Vec::new();
    let mut named = false;
    for (kind, key, wanted) in [
        ("action", "actions", &query.action),
        ("property", "properties", &query.property),
        ("event", "events", &query.event),
    ] {
        if let Some(wanted) = wanted {
            named = true;
            if names(key).contains(wanted) {
                found.push((kind, wanted.clone()));
            }
        }
    }
    // A field of either side (`field`), or of one (`input`, `output`): the actions whose
    // schema names it, read as the directory indexes it (`concord_directory`).
    for (wanted, sides) in [
        (&query.field, &["input", "output"][..]),
        (&query.input, &["input"][..]),
        (&query.output, &["output"][..]),
    ] {
        let Some(field) = wanted else { continue };
        named = true;
        for (name, action) in td
            .get("actions")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let has = sides.iter().any(|side| {
                action
                    .get(*side)
                    .is_some_and(|schema| concord_directory::schema_has_field(schema, field))
            });
            if has && !found.contains(&("action", name.clone())) {
                found.push(("action", name.clone()));
            }
        }
    }
    if !named {
        for (kind, key) in [
            ("action", "actions"),
            ("property", "properties"),
            ("event", "events"),
        ] {
            found.extend(names(key).into_iter().map(|name| (kind, name)));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_name_what_the_query_asked_for() {
        let td = json!({
            "actions": {
                "getProductInfo": {"input": {"type": "object", "properties": {"productId": {}}}},
                "ping": {},
            },
            "properties": {"stock": {}},
            "events": {"priceChanged": {}},
        });
        let mut query = CapabilityQuery::default();
        query.field = Some("productId".into());
        assert_eq!(
            matches(&td, &query),
            [("action", "getProductInfo".to_owned())]
        );
        // A field of either side, read from the schema's structure only (not its examples),
        // as the directory indexes it; `input`/`output` for one side.
        let td_sides = json!({"actions": {
            "quote": {
                "input": {"properties": {"sku": {}}, "examples": [{"properties": {"coupon": {}}}]},
                "output": {"properties": {"price": {}}},
            },
        }});
        let quote = [("action", "quote".to_owned())];
        for (field, input, output, expected) in [
            (Some("price"), None, None, &quote[..]),
            (Some("sku"), None, None, &quote[..]),
            (Some("coupon"), None, None, &[][..]),
            (None, Some("sku"), None, &quote[..]),
            (None, Some("price"), None, &[][..]),
            (None, None, Some("price"), &quote[..]),
        ] {
            let mut query = CapabilityQuery::default();
            query.field = field.map(str::to_owned);
            query.input = input.map(str::to_owned);
            query.output = output.map(str::to_owned);
            assert_eq!(matches(&td_sides, &query), expected, "{query:?}");
        }
        let all = matches(&td, &CapabilityQuery::default());
        assert_eq!(all.len(), 4);
        assert!(all.contains(&("event", "priceChanged".to_owned())));
    }
}
