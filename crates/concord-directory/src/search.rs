//! JSONPath search (RFC 9535, by `serde_json_path`) over the enriched TDs, as one array
//! (the query's root): `$[?@.title=='Lamp']` finds whole TDs, `$[*].id` fragments.
//!
//! The query is evaluated on one TD after another, each as the only member of the root
//! array, and the time is checked between them: the nodes are those of the query over
//! all the TDs, grouped by TD in code-point order of id (with a descendant segment at
//! the root, the same nodes in another order: each TD followed by its descendants, where
//! over one array the TDs themselves come first). The shapes that would select other
//! nodes (a position on the root, `$` inside a filter) are refused by [`query_shape`].

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use serde_json_path::JsonPath;

use crate::error::DirectoryError;
use crate::limits::DirectoryLimits;
use crate::query_shape::{self, Shape};
use crate::regex_functions;

/// A query ready to run: parsed, and its shape checked.
#[derive(Debug)]
pub(crate) struct Query {
    path: JsonPath,
    shape: Shape,
}

/// Parses `query` within `max_query_bytes` and checks its shape.
pub(crate) fn compile(query: &str, limits: &DirectoryLimits) -> Result<Query, DirectoryError> {
    if query.len() > limits.max_query_bytes {
        return Err(DirectoryError::QueryTooLong {
            length: query.len(),
            limit: limits.max_query_bytes,
        });
    }
    if query.trim().is_empty() {
        return Err(DirectoryError::InvalidQuery {
            reason: "the JSONPath query is empty".to_owned(),
        });
    }
    let path = JsonPath::parse(query).map_err(|error| DirectoryError::InvalidQuery {
        reason: format!("JSONPath (RFC 9535): {error}"),
    })?;
    let shape = query_shape::check(query, limits)?;
    Ok(Query { path, shape })
}

/// The nodes `query` selects over `roots` (each a one-TD array), at most
/// `max_query_results` of them taking at most `max_query_answer_bytes` of JSON (counted
/// from the selected nodes, by reference, before any is copied), within
/// `max_query_time` as `elapsed` tells it (asked before each TD).
pub(crate) fn run(
    query: &Query,
    roots: &[Arc<Value>],
    limits: &DirectoryLimits,
    elapsed: &mut dyn FnMut() -> Duration,
) -> Result<Vec<Value>, DirectoryError> {
    let selected = regex_functions::with(&query.shape.patterns, || {
        walk(query, roots, limits, elapsed)
    })?;
    let nodes = selected.into_iter().cloned();
    if query.shape.whole_root {
        // `$` selects the root array itself: one node, the TDs.
        return Ok(vec![Value::Array(nodes.flat_map(one_td).collect())]);
    }
    Ok(nodes.collect())
}

/// The nodes `query` selects, TD after TD, within the limits.
fn walk<'a>(
    query: &Query,
    roots: &'a [Arc<Value>],
    limits: &DirectoryLimits,
    elapsed: &mut dyn FnMut() -> Duration,
) -> Result<Vec<&'a Value>, DirectoryError> {
    let mut selected: Vec<&Value> = Vec::new();
    let mut counted = Counted::within(limits.max_query_answer_bytes);
    for (walked, root) in roots.iter().enumerate() {
        if elapsed() > limits.max_query_time {
            return Err(DirectoryError::SearchTooSlow {
                limit: limits.max_query_time,
                walked,
                held: roots.len(),
            });
        }
        let nodes = query.path.query(root);
        // `$` alone is one node, however many TDs it holds.
        let count = if query.shape.whole_root {
            0
        } else {
            selected.len().saturating_add(nodes.len())
        };
        if count > limits.max_query_results {
            return Err(DirectoryError::TooManyResults {
                limit: limits.max_query_results,
            });
        }
        for node in nodes {
            if serde_json::to_writer(&mut counted, node).is_err() {
                return Err(DirectoryError::AnswerTooLarge {
                    limit: limits.max_query_answer_bytes,
                });
            }
            selected.push(node);
        }
    }
    Ok(selected)
}

/// The TD of a one-TD root array.
fn one_td(root: Value) -> Option<Value> {
    match root {
        Value::Array(mut tds) => tds.pop(),
        _ => None,
    }
}

/// A writer that keeps nothing and counts the bytes written, failing past `limit`: so
/// counting a large answer stops at the limit.
struct Counted {
    bytes: u64,
    limit: u64,
}

impl Counted {
    fn within(limit: u64) -> Self {
        Self { bytes: 0, limit }
    }
}

impl std::io::Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let more = u64::try_from(buf.len()).unwrap_or(u64::MAX);
        self.bytes = self.bytes.saturating_add(more);
        if self.bytes > self.limit {
            return Err(std::io::Error::other("over max_query_answer_bytes"));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
