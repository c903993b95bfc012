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

/// The nodes `path` selects in `things`, at most `max_query_results`.
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
    Ok(nodes.all().into_iter().cloned().collect())
}
