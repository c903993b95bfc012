//! Stream chunks (whitepaper §8.2): `[s:stream_id]:[s:chunk_3/5]`, `[s:is_final]:[b:false]`.

use super::schema::bad_field;
use crate::error::Result;
use crate::value::{Map, Value};

/// The stream fields of a message.
///
/// `stream_id` is free text; when it has the whitepaper's form `chunk_<n>/<total>`, the
/// position is parsed and checked (1 ≤ n ≤ total, and `is_final` true exactly on the last chunk).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamChunk<'a> {
    /// The `stream_id` text.
    pub stream_id: &'a str,
    /// `(n, total)` when `stream_id` is `chunk_<n>/<total>`.
    pub position: Option<(u64, u64)>,
    /// The `is_final` flag, when present.
    pub is_final: Option<bool>,
}

impl StreamChunk<'_> {
    /// Whether this is the last chunk: `is_final`, else the position, else unknown (`false`).
    pub fn is_last(&self) -> bool {
        self.is_final
            .or(self.position.map(|(n, total)| n == total))
            .unwrap_or(false)
    }
}

/// `chunk_<n>/<total>`.
fn parse_position(stream_id: &str) -> Option<(u64, u64)> {
    let (n, total) = stream_id.strip_prefix("chunk_")?.split_once('/')?;
    let digits = |text: &str| !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit());
    if digits(n) && digits(total) {
        Some((n.parse().ok()?, total.parse().ok()?))
    } else {
        None
    }
}

/// Reads and checks the stream fields; `None` when the message is not part of a stream.
pub(super) fn stream_of(fields: &Map) -> Result<Option<StreamChunk<'_>>> {
    let is_final = match fields.get("is_final") {
        Some(Value::Bool(flag)) => Some(*flag),
        Some(other) => {
            return Err(bad_field(
                "is_final",
                format!("must be a bool `[b:…]`, found a {}", other.kind()),
            ))
        }
        None => None,
    };
    let stream_id = match fields.get("stream_id") {
        Some(Value::String(id)) => id.as_str(),
        Some(other) => {
            return Err(bad_field(
                "stream_id",
                format!("must be a string `[s:…]`, found a {}", other.kind()),
            ))
        }
        None if is_final.is_some() => {
            return Err(bad_field(
                "is_final",
                "is only meaningful with a `stream_id`".to_owned(),
            ))
        }
        None => return Ok(None),
    };
    let position = parse_position(stream_id);
    if let Some((n, total)) = position {
        if n == 0 || n > total {
            return Err(bad_field(
                "stream_id",
                format!("chunk {n}/{total} is out of range (chunks count from 1)"),
            ));
        }
        if let Some(flag) = is_final {
            if flag != (n == total) {
                return Err(bad_field(
                    "is_final",
                    format!("is {flag} on chunk {n} of {total}"),
                ));
            }
        }
    }
    Ok(Some(StreamChunk {
        stream_id,
        position,
        is_final,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(text: &str) -> Map {
        match text.parse::<Value>().unwrap() {
            Value::Dict(map) => map,
            _ => unreachable!(),
        }
    }

    #[test]
    fn whitepaper_chunk() {
        let map = fields("[d:[s:stream_id]:[s:chunk_3/5],[s:is_final]:[b:false]]");
        let chunk = stream_of(&map).unwrap().unwrap();
        assert_eq!(chunk.position, Some((3, 5)));
        assert!(!chunk.is_last());
    }

    #[test]
    fn inconsistent_chunks_are_refused() {
        for text in [
            "[d:[s:stream_id]:[s:chunk_5/5],[s:is_final]:[b:false]]",
            "[d:[s:stream_id]:[s:chunk_6/5]]",
            "[d:[s:stream_id]:[s:chunk_0/5]]",
            "[d:[s:is_final]:[b:true]]",
            "[d:[s:stream_id]:[i:3]]",
        ] {
            assert!(stream_of(&fields(text)).is_err(), "{text}");
        }
        let free = fields("[d:[s:stream_id]:[s:video-42]]");
        assert_eq!(stream_of(&free).unwrap().unwrap().position, None);
    }
}
