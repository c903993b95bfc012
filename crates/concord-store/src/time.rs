//! Timestamps on disk: integer milliseconds since the Unix epoch.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the epoch (negative before it), saturating far outside ±292 million years.
pub(crate) fn to_millis(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_millis()).map_or(i64::MIN, |ms| -ms),
    }
}

/// The time `millis` after (or before) the epoch, if the platform can represent it.
pub(crate) fn from_millis(millis: i64) -> Option<SystemTime> {
    let offset = Duration::from_millis(millis.unsigned_abs());
    if millis >= 0 {
        UNIX_EPOCH.checked_add(offset)
    } else {
        UNIX_EPOCH.checked_sub(offset)
    }
}

/// The current time on disk.
pub(crate) fn now_millis() -> i64 {
    to_millis(SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_to_the_millisecond() {
        for millis in [0, 1, -1, 1_700_000_000_123, -86_400_000] {
            let time = from_millis(millis).unwrap();
            assert_eq!(to_millis(time), millis);
        }
    }

    #[test]
    fn unrepresentable_times_are_none_not_a_panic() {
        // SystemTime on Unix spans ±i64 seconds, so i64 milliseconds always fit; the
        // function must still never panic on the extremes.
        let _ = from_millis(i64::MAX);
        let _ = from_millis(i64::MIN);
    }
}
