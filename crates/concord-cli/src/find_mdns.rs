//! `concord find --mdns`: the Things and directories announced on the local network with
//! DNS-SD (`_wot._tcp`, W3C WoT Discovery's introduction), and with `--action`,
//! `--property`, `--event` or `--field` those whose descriptions (fetched from the URL each
//! announces, bounded in size and time) match every one.

use std::process::ExitCode;
use std::time::Duration;

use concord_node::{CapabilityQuery, FoundThing};
use futures_util::stream::{self, StreamExt};
use serde_json::{json, Value};

use crate::output::{self, outln};

/// The largest description fetched from an announced Thing.
const MAX_DESCRIPTION_BYTES: usize = 1024 * 1024;
/// How long fetching one announced Thing's description may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// How many announced Things' descriptions are fetched at once: at most
/// `MAX_ANNOUNCED` / this × [`FETCH_TIMEOUT`] in all when every one stalls.
const FETCHES_AT_ONCE: usize = 16;

/// What `concord find --mdns` was asked.
pub struct MdnsFind {
    /// How long to listen for announcements.
    pub wait: Duration,
    /// Directories only (`_directory._sub._wot._tcp`).
    pub directories: bool,
    /// The criteria an announced Thing's description must all meet.
    pub query: CapabilityQuery,
    /// Print JSON instead of a table.
    pub json: bool,
}

/// One announced Thing, with its description when the criteria needed it.
struct Announced {
    thing: FoundThing,
    matches: Vec<(&'static str, String)>,
    description: Option<Value>,
}

/// Runs `concord find --mdns`.
pub fn run(find: MdnsFind) -> anyhow::Result<ExitCode> {
    let criteria = !find.query.is_empty();
    let announced = crate::runtime::block_on(async {
        let things = concord_node::browse_mdns(find.wait, find.directories).await?;
        if things.len() == concord_node::MAX_ANNOUNCED {
            output::note(format!(
                "the first {} announced are kept; the others were ignored",
                concord_node::MAX_ANNOUNCED
            ));
        }
        if !criteria {
            let announced = things.into_iter().map(|thing| Announced {
                thing,
                matches: Vec::new(),
                description: None,
            });
            return Ok::<_, anyhow::Error>(announced.collect());
        }
        // Fetched a few at once, each within its timeout; the answers in announcement order.
        let fetched: Vec<(FoundThing, anyhow::Result<Value>)> = stream::iter(things)
            .map(|thing| async move {
                let td = fetch(&thing.description_url()).await;
                (thing, td)
            })
            .buffered(FETCHES_AT_ONCE)
            .collect()
            .await;
        let mut announced = Vec::new();
        for (thing, td) in fetched {
            match td {
                Ok(td) => {
                    if let Some(matches) = meets(&td, &find.query) {
                        announced.push(Announced {
                            thing,
                            matches,
                            description: Some(td),
                        });
                    }
                }
                Err(error) => {
                    output::note(format!("skipped {}: {error}", thing.description_url()));
                }
            }
        }
        Ok(announced)
    })??;
    if find.json {
        let found: Vec<Value> = announced
            .iter()
            .map(|found| {
                let thing = &found.thing;
                json!({
                    "name": thing.fullname,
                    "type": thing.kind,
                    "url": thing.description_url(),
                    "host": thing.host,
                    "addresses": thing.addresses,
                    "port": thing.port,
                    "matches": found.matches.iter()
                        .map(|(kind, name)| json!({"kind": kind, "name": name}))
                        .collect::<Vec<_>>(),
                    "description": found.description,
                })
            })
            .collect();
        output::json(&found)?;
    } else if !announced.is_empty() {
        table(&announced)?;
    }
    if announced.is_empty() {
        let what = if find.directories {
            "directory"
        } else {
            "Thing"
        };
        let criteria = if criteria { " that matches" } else { "" };
        output::note(format!(
            "no {what}{criteria} announced on the local network within {}",
            humantime::format_duration(find.wait)
        ));
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// The affordances of `td` matching the query, when it meets every criterion: holds every
/// term of the query among the keys the directory would index it under
/// (`concord_directory::keys_of`), the rule a directory's capability search applies.
fn meets(td: &Value, query: &CapabilityQuery) -> Option<Vec<(&'static str, String)>> {
    let keys = concord_directory::keys_of(td);
    query
        .terms()
        .terms
        .into_iter()
        .map(|mut term| {
            if term.kind == concord_directory::CapabilityKind::ConsensusHash {
                term.value = term.value.to_ascii_lowercase();
            }
            term
        })
        .all(|term| keys.contains(&term))
        .then(|| crate::find::matches(td, query))
}

/// The description at `url`: at most [`MAX_DESCRIPTION_BYTES`], within [`FETCH_TIMEOUT`].
async fn fetch(url: &str) -> anyhow::Result<Value> {
    let client = reqwest::Client::builder().timeout(FETCH_TIMEOUT).build()?;
    let mut response = client.get(url).send().await?.error_for_status()?;
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > MAX_DESCRIPTION_BYTES {
            anyhow::bail!("the description is over {MAX_DESCRIPTION_BYTES} bytes");
        }
        body.extend_from_slice(&chunk);
    }
    Ok(serde_json::from_slice(&body)?)
}

/// The table: instance name, type, description URL, the affordances that matched.
fn table(announced: &[Announced]) -> anyhow::Result<()> {
    let rows: Vec<[String; 4]> = announced
        .iter()
        .map(|found| {
            let matched: Vec<String> = found
                .matches
                .iter()
                .map(|(kind, name)| format!("{kind}:{}", output::one_line(name)))
                .collect();
            [
                // Announced by anyone on the network: no control characters reach the
                // terminal.
                output::one_line(&found.thing.fullname),
                output::one_line(&found.thing.kind),
                output::one_line(&found.thing.description_url()),
                matched.join(" "),
            ]
        })
        .collect();
    let headers = ["name", "type", "description", "matches"];
    let width = |column: usize| {
        rows.iter()
            .map(|row| row[column].chars().count())
            .chain([headers[column].len()])
            .max()
            .unwrap_or(0)
    };
    let (name, kind, url) = (width(0), width(1), width(2));
    for row in std::iter::once(headers.map(str::to_owned)).chain(rows) {
        outln!(
            "{:<name$}  {:<kind$}  {:<url$}  {}",
            row[0],
            row[1],
            row[2],
            row[3]
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_announced_description_meets_a_query_as_a_directory_would_match_it() {
        let td = json!({
            "actions": {"quote": {
                "input": {"properties": {"sku": {}}, "examples": [{"properties": {"coupon": {}}}]},
                "output": {"properties": {"price": {}}},
            }},
            "events": {"priceChanged": {}},
        });
        let query = |change: &dyn Fn(&mut CapabilityQuery)| {
            let mut query = CapabilityQuery::default();
            change(&mut query);
            query
        };
        let quote = vec![("action", "quote".to_owned())];
        assert_eq!(
            meets(&td, &query(&|q| q.field = Some("price".into()))),
            Some(quote.clone())
        );
        assert_eq!(
            meets(&td, &query(&|q| q.input = Some("sku".into()))),
            Some(quote)
        );
        // A name in the schema's examples is no field; criteria combine with AND.
        assert_eq!(
            meets(&td, &query(&|q| q.field = Some("coupon".into()))),
            None
        );
        assert_eq!(meets(&td, &query(&|q| q.output = Some("sku".into()))), None);
        assert_eq!(
            meets(
                &td,
                &query(&|q| {
                    q.event = Some("priceChanged".into());
                    q.action = Some("ship".into());
                })
            ),
            None
        );
    }
}
