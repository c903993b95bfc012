//! A TD on its way in (size, validation, its `registration` read and taken out) and on its
//! way out (enriched: the discovery context, the local id, `registration`).

use concord_describe::Validator;
use serde_json::{Map, Number, Value};

use crate::clock::{parse_rfc3339, rfc3339};
use crate::error::{DirectoryError, ValidationError};
use crate::limits::DirectoryLimits;
use crate::store::{Entry, UnixMillis};

/// The context every enriched TD carries in its `@context` (tdd-context-injection).
pub const DISCOVERY_CONTEXT: &str = "https://www.w3.org/2022/wot/discovery";

/// A TD read from a request: valid, without `registration`, with its expiry worked out.
#[derive(Debug)]
pub(crate) struct Incoming {
    pub(crate) td: Map<String, Value>,
    pub(crate) ttl_ms: Option<u64>,
    pub(crate) expires: Option<UnixMillis>,
}

impl Incoming {
    pub(crate) fn id(&self) -> Option<&str> {
        self.td.get("id").and_then(Value::as_str)
    }

    /// The DIDs the TD names as its agent's, with where ([`named_dids`]).
    pub(crate) fn named_dids(&self) -> impl Iterator<Item = (&'static str, &str)> {
        named_dids(&self.td)
    }
}

/// The DIDs `td` names as its agent's, with where: its `id` when that is a DID, and
/// `concord:metaProtocol`'s `concord:did` (where concord-describe puts it).
fn named_dids(td: &Map<String, Value>) -> impl Iterator<Item = (&'static str, &str)> {
    let id = td
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| id.starts_with("did:"));
    let meta = td
        .get("concord:metaProtocol")
        .and_then(|meta| meta.get("concord:did"))
        .and_then(Value::as_str);
    [("id", id), ("concord:metaProtocol.concord:did", meta)]
        .into_iter()
        .filter_map(|(field, did)| did.map(|did| (field, did)))
}

/// The DIDs the TD `td` names as its agent's, without repeats: its `id` when that is a
/// DID, and `concord:metaProtocol`'s `concord:did`. A client reaching the agent a
/// directory described expects the peer to prove each of them.
///
/// ```
/// let td = serde_json::json!({
///     "id": "urn:example:shop",
///     "concord:metaProtocol": {"concord:did": "did:wba:shop.example"}
/// });
/// assert_eq!(concord_directory::dids_named(&td), ["did:wba:shop.example"]);
/// ```
pub fn dids_named(td: &Value) -> Vec<&str> {
    let mut dids: Vec<&str> = td
        .as_object()
        .map(|td| named_dids(td).map(|(_, did)| did).collect())
        .unwrap_or_default();
    dids.dedup();
    dids
}

/// Whether the registered TD `td` names `did` as its agent's ([`named_dids`]).
pub(crate) fn names(td: &Value, did: &str) -> bool {
    td.as_object()
        .is_some_and(|td| named_dids(td).any(|(_, named)| named == did))
}

/// Checks the size and validity of a TD's bytes and reads its registration at `now`.
pub(crate) fn read(
    bytes: &[u8],
    limits: &DirectoryLimits,
    validator: &Validator,
    now: UnixMillis,
) -> Result<Incoming, DirectoryError> {
    if bytes.len() > limits.max_td_bytes {
        return Err(DirectoryError::TdTooLarge {
            size: bytes.len(),
            limit: limits.max_td_bytes,
        });
    }
    let report = validator.validate(bytes);
    let errors: Vec<ValidationError> = report
        .errors()
        .map(|problem| ValidationError::new(problem.pointer.clone(), problem.message.clone()))
        .collect();
    if !errors.is_empty() {
        return Err(DirectoryError::InvalidTd { errors });
    }
    let td = match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(td)) => td,
        Ok(_) => {
            return Err(DirectoryError::InvalidTd {
                errors: vec![ValidationError::new("", "a TD is a JSON object")],
            })
        }
        Err(error) => {
            return Err(DirectoryError::InvalidTd {
                errors: vec![ValidationError::new("", error.to_string())],
            })
        }
    };
    registration(td, limits, now)
}

/// Takes `registration` out of `td` and works out its expiry: a `ttl` sets `expires`
/// (a client's `expires` is then ignored), else a client's `expires`, else the default TTL.
fn registration(
    mut td: Map<String, Value>,
    limits: &DirectoryLimits,
    now: UnixMillis,
) -> Result<Incoming, DirectoryError> {
    let given = match td.remove("registration") {
        None => Map::new(),
        Some(Value::Object(given)) => given,
        Some(_) => {
            return Err(DirectoryError::InvalidRegistration {
                field: "registration",
                reason: "must be an object".to_owned(),
            })
        }
    };
    let min = millis(limits.min_ttl);
    let max = millis(limits.max_ttl);
    let (ttl_ms, expires) = if let Some(ttl) = given.get("ttl") {
        let seconds = ttl
            .as_f64()
            .filter(|seconds| seconds.is_finite() && *seconds >= 0.0);
        let Some(seconds) = seconds else {
            return Err(DirectoryError::InvalidRegistration {
                field: "ttl",
                reason: format!("must be a non-negative number of seconds, found {ttl}"),
            });
        };
        let ms = (seconds * 1000.0).ceil();
        if ms < min as f64 || ms > max as f64 {
            return Err(DirectoryError::InvalidRegistration {
                field: "ttl",
                reason: format!(
                    "{seconds} s is outside {} ..= {} s (the directory's limits)",
                    limits.min_ttl.as_secs_f64(),
                    limits.max_ttl.as_secs_f64()
                ),
            });
        }
        // Within max_ttl, which fits: the cast is exact.
        let ms = ms as u64;
        (
            Some(ms),
            Some(now.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX))),
        )
    } else if let Some(expires) = given.get("expires") {
        let at = expires.as_str().and_then(parse_rfc3339);
        let Some(at) = at else {
            return Err(DirectoryError::InvalidRegistration {
                field: "expires",
                reason: format!("must be an RFC 3339 date-time with its offset, found {expires}"),
            });
        };
        let ahead = at.saturating_sub(now);
        if ahead < i64::try_from(min).unwrap_or(i64::MAX)
            || ahead > i64::try_from(max).unwrap_or(i64::MAX)
        {
            return Err(DirectoryError::InvalidRegistration {
                field: "expires",
                reason: format!(
                    "must be {} ..= {} s from now (the directory's limits)",
                    limits.min_ttl.as_secs_f64(),
                    limits.max_ttl.as_secs_f64()
                ),
            });
        }
        (None, Some(at))
    } else if let Some(default) = limits.default_ttl {
        let ms = millis(default);
        (
            Some(ms),
            Some(now.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX))),
        )
    } else {
        (None, None)
    };
    Ok(Incoming {
        td,
        ttl_ms,
        expires,
    })
}

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// `ttl` in seconds as JSON: an integer when whole.
fn seconds(ms: u64) -> Value {
    if ms.is_multiple_of(1000) {
        Value::Number(Number::from(ms / 1000))
    } else {
        Number::from_f64(ms as f64 / 1000.0).map_or(Value::Null, Value::Number)
    }
}

fn time(ms: UnixMillis) -> Value {
    rfc3339(ms).map_or(Value::Null, Value::String)
}

/// The `registration` a client may send back in a merge patch's base: its `ttl`, or the
/// `expires` it set.
pub(crate) fn client_registration(entry: &Entry) -> Option<Value> {
    let mut registration = Map::new();
    match (entry.ttl_ms, entry.expires) {
        (Some(ttl), _) => {
            registration.insert("ttl".to_owned(), seconds(ttl));
        }
        (None, Some(expires)) => {
            registration.insert("expires".to_owned(), time(expires));
        }
        (None, None) => return None,
    }
    Some(Value::Object(registration))
}

/// The enriched TD of `entry`: `@context` with [`DISCOVERY_CONTEXT`], the local `id` of an
/// anonymous TD (tdd-anonymous-td-identifier), and `registration {created, modified,
/// expires, ttl, retrieved}`; `retrieved` is `now` (left out when `None`).
pub fn enrich(entry: &Entry, retrieved: Option<UnixMillis>) -> Value {
    into_enriched(entry.clone(), retrieved)
}

/// [`enrich`], taking the entry: its TD's members move into the answer, nothing is copied.
pub fn into_enriched(entry: Entry, retrieved: Option<UnixMillis>) -> Value {
    let registration = registration_of(&entry, retrieved);
    let mut out = Map::new();
    // `@context` and `id` first (the context is set once the TD's is read), then the TD's
    // members in their order, then `registration`.
    out.insert("@context".to_owned(), Value::Null);
    out.insert("id".to_owned(), Value::String(entry.id));
    let mut given = None;
    if let Value::Object(source) = entry.td {
        for (key, value) in source {
            match key.as_str() {
                "@context" => given = Some(value),
                "id" | "registration" => {}
                _ => {
                    out.insert(key, value);
                }
            }
        }
    }
    let context = match given {
        Some(Value::Array(mut items)) => {
            if !items
                .iter()
                .any(|item| item.as_str() == Some(DISCOVERY_CONTEXT))
            {
                items.push(Value::String(DISCOVERY_CONTEXT.to_owned()));
            }
            Value::Array(items)
        }
        Some(Value::String(context)) if context == DISCOVERY_CONTEXT => Value::String(context),
        Some(other) => Value::Array(vec![other, Value::String(DISCOVERY_CONTEXT.to_owned())]),
        None => Value::String(DISCOVERY_CONTEXT.to_owned()),
    };
    out.insert("@context".to_owned(), context);
    out.insert("registration".to_owned(), registration);
    Value::Object(out)
}

fn registration_of(entry: &Entry, retrieved: Option<UnixMillis>) -> Value {
    let mut registration = Map::new();
    registration.insert("created".to_owned(), time(entry.created));
    registration.insert("modified".to_owned(), time(entry.modified));
    if let Some(expires) = entry.expires {
        registration.insert("expires".to_owned(), time(expires));
    }
    if let Some(ttl) = entry.ttl_ms {
        registration.insert("ttl".to_owned(), seconds(ttl));
    }
    if let Some(retrieved) = retrieved {
        registration.insert("retrieved".to_owned(), time(retrieved));
    }
    Value::Object(registration)
}

#[cfg(test)]
mod enrich_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_enriched_td_has_context_id_then_the_tds_members_in_order_then_registration() {
        let td = json!({"title": "T", "@context": "https://www.w3.org/2022/wot/td/v1.1",
            "id": "urn:ignored", "zeta": 1, "alpha": 2, "registration": {"ttl": 5}});
        let mut entry = Entry::sized("urn:t", td, 0);
        entry.created = 0;
        entry.modified = 1_000;
        entry.ttl_ms = Some(60_000);
        entry.expires = Some(61_000);
        let enriched = into_enriched(entry.clone(), Some(2_000));
        assert_eq!(enrich(&entry, Some(2_000)), enriched);
        let keys: Vec<&str> = enriched
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            ["@context", "id", "title", "zeta", "alpha", "registration"]
        );
        assert_eq!(
            enriched["@context"],
            json!(["https://www.w3.org/2022/wot/td/v1.1", DISCOVERY_CONTEXT])
        );
        assert_eq!(enriched["id"], "urn:t");
        assert_eq!(
            enriched["registration"],
            json!({"created": "1970-01-01T00:00:00Z", "modified": "1970-01-01T00:00:01Z",
                "expires": "1970-01-01T00:01:01Z", "ttl": 60, "retrieved": "1970-01-01T00:00:02Z"})
        );
        for (given, served) in [
            (json!(DISCOVERY_CONTEXT), json!(DISCOVERY_CONTEXT)),
            (
                json!(["a", DISCOVERY_CONTEXT]),
                json!(["a", DISCOVERY_CONTEXT]),
            ),
            (json!({"x": "y"}), json!([{"x": "y"}, DISCOVERY_CONTEXT])),
        ] {
            let entry = Entry::sized("urn:t", json!({"@context": given}), 0);
            assert_eq!(into_enriched(entry, None)["@context"], served);
        }
        let bare = into_enriched(Entry::sized("urn:t", json!({}), 0), None);
        assert_eq!(bare["@context"], DISCOVERY_CONTEXT);
    }
}
