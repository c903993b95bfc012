//! How long to wait before retrying: exponential backoff with jitter, or what the server asks.

use std::time::Duration;
#[cfg(feature = "client")]
use std::time::SystemTime;

/// The waits between attempts.
///
/// Before retry `n` (1, 2, …) the client waits a random time between half and all of
/// `min(initial × 2ⁿ⁻¹, max)` ([`Backoff::delay`]), unless the server said how long to wait
/// (`Retry-After` or `retry-after-ms`); it then waits that long, and does not retry at all
/// when the server asks for more than `max_retry_after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Backoff {
    /// The base wait before the first retry (default 500 ms).
    pub initial: Duration,
    /// The longest base wait (default 8 s).
    pub max: Duration,
    /// The longest wait the server may ask for and still get a retry (default 60 s).
    pub max_retry_after: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    /// Waits starting at `initial`, doubling up to `max`; `max_retry_after` is the default.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff {
            initial,
            max,
            ..Backoff::default()
        }
    }

    /// Sets the longest server-requested wait that still gets a retry.
    pub fn with_max_retry_after(mut self, max_retry_after: Duration) -> Self {
        self.max_retry_after = max_retry_after;
        self
    }

    /// The wait before retry `retry` (counting from 1), with jitter.
    ///
    /// Only with the `client` feature (the jitter comes from `fastrand`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use concord_llm::Backoff;
    ///
    /// let backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
    /// let third = backoff.delay(3); // base 400 ms
    /// assert!(third >= Duration::from_millis(200) && third <= Duration::from_millis(400));
    /// assert!(backoff.delay(10) <= Duration::from_secs(1));
    /// ```
    #[cfg(feature = "client")]
    #[cfg_attr(docsrs, doc(cfg(feature = "client")))]
    pub fn delay(&self, retry: u32) -> Duration {
        let doublings = retry.saturating_sub(1).min(31);
        let base = self.initial.saturating_mul(1u32 << doublings).min(self.max);
        let half = base / 2;
        let spread = u64::try_from((base - half).as_nanos()).unwrap_or(u64::MAX);
        half + Duration::from_nanos(fastrand::u64(0..=spread))
    }
}

/// The wait a server asked for: `retry-after-ms` (OpenAI's, milliseconds) wins over
/// `Retry-After` (delay-seconds or an HTTP-date, RFC 9110 §10.2.3). Unreadable values are
/// ignored; a date in the past means no wait.
#[cfg(feature = "client")]
pub(crate) fn server_delay(
    retry_after: Option<&str>,
    retry_after_ms: Option<&str>,
    now: SystemTime,
) -> Option<Duration> {
    let from_ms = retry_after_ms.and_then(|value| {
        let millis: f64 = value.trim().parse().ok()?;
        Duration::try_from_secs_f64(millis / 1000.0).ok()
    });
    from_ms.or_else(|| {
        let value = retry_after?.trim();
        match value.parse::<u64>() {
            Ok(seconds) => Some(Duration::from_secs(seconds)),
            Err(_) => {
                let date = httpdate::parse_http_date(value).ok()?;
                Some(date.duration_since(now).unwrap_or(Duration::ZERO))
            }
        }
    })
}

#[cfg(all(test, feature = "client"))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn server_delay_reads_seconds_dates_and_milliseconds() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(
            server_delay(Some("7"), None, now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            server_delay(Some("Sun, 06 Nov 1994 08:50:07 GMT"), None, now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            server_delay(Some("Sun, 06 Nov 1994 08:00:00 GMT"), None, now),
            Some(Duration::ZERO)
        );
        assert_eq!(
            server_delay(Some("7"), Some("250"), now),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            server_delay(Some("7"), Some("-5"), now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(server_delay(Some("soon"), Some("NaN"), now), None);
        assert_eq!(server_delay(None, Some("1e400"), now), None);
        assert_eq!(server_delay(None, None, now), None);
    }

    #[test]
    fn delay_doubles_up_to_the_cap() {
        let backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(350));
        for (retry, base_ms) in [(1, 100), (2, 200), (3, 350), (40, 350), (u32::MAX, 350)] {
            let delay = backoff.delay(retry);
            let base = Duration::from_millis(base_ms);
            assert!(
                delay >= base / 2 && delay <= base,
                "retry {retry}: {delay:?} not in [{:?}, {base:?}]",
                base / 2
            );
        }
    }

    proptest! {
        #[test]
        fn server_delay_never_panics(a in any::<Option<String>>(), b in any::<Option<String>>(), secs in any::<u32>()) {
            let now = SystemTime::UNIX_EPOCH + Duration::from_secs(u64::from(secs));
            let _ = server_delay(a.as_deref(), b.as_deref(), now);
        }

        #[test]
        fn delay_stays_within_bounds(initial_ms in 0u64..10_000_000, max_ms in 0u64..10_000_000, retry in any::<u32>()) {
            let backoff = Backoff::new(Duration::from_millis(initial_ms), Duration::from_millis(max_ms));
            prop_assert!(backoff.delay(retry) <= Duration::from_millis(max_ms));
        }
    }
}
