//! JSONPath search (RFC 9535, by `serde_json_path`) over the enriched TDs, as one array
//! (the query's root): `$[?@.title=='Lamp']` finds whole TDs, `$[*].id` fragments.

use serde_json::Value;
use serde_json_path::JsonPath;

use crate::error::DirectoryError;
use crate::limits::DirectoryLimits;

/// Parses `query` within `max_query_bytes`.
pub(crate) fn compile(query: &str, limits: &DirectoryLimits) -> Result<JsonPath, DirectoryError> {
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
    JsonPath::parse(query).map_err(|error| DirectoryError::InvalidQuery {
        reason: format!("JSONPath (RFC 9535): {error}"),
    })
}

/// The nodes `path` selects in `things`, at most `max_query_results` of them taking at most
/// `max_query_answer_bytes` of JSON: the sizes are counted from the selected nodes, by
/// reference, before any is copied.
pub(crate) fn run(
    path: &JsonPath,
    things: &Value,
    limits: &DirectoryLimits,
) -> Result<Vec<Value>, DirectoryError> {
    let nodes = path.query(things);
    if nodes.len() > limits.max_query_results {
        return Err(DirectoryError::TooManyResults {
            limit: limits.max_query_results,
        });
    }
    let nodes = nodes.all();
    let mut counted = Counted::within(limits.max_query_answer_bytes);
    for node in &nodes {
        if serde_json::to_writer(&mut counted, node).is_err() {
            return Err(DirectoryError::AnswerTooLarge {
                limit: limits.max_query_answer_bytes,
            });
        }
    }
    Ok(nodes.into_iter().cloned().collect())
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
