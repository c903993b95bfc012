//! Instants: `SystemTime` in, Unix milliseconds stored, RFC 3339 date-times on the wire
//! (tdd-absolute-time: the offset is never left out).

use std::time::{SystemTime, UNIX_EPOCH};

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::store::UnixMillis;

/// `at` in Unix milliseconds (before 1970: negative; beyond `i64`: saturated).
pub fn unix_millis(at: SystemTime) -> UnixMillis {
    match at.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_millis()).map_or(i64::MIN, |ms| -ms),
    }
}

/// `ms` as an RFC 3339 date-time in UTC (`2026-12-03T15:21:07.123Z`); `None` outside
/// the years 1..=9999.
pub fn rfc3339(ms: UnixMillis) -> Option<String> {
    let at = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()?;
    at.format(&Rfc3339).ok()
}

/// An RFC 3339 date-time (its offset required) in Unix milliseconds.
pub fn parse_rfc3339(text: &str) -> Option<UnixMillis> {
    let at = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).ok()
}
