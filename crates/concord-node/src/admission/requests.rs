//! HTTP requests per client address: a token bucket per address that every request on
//! every route spends from, kept-alive connections included (the connection bucket only
//! counts new connections). Entries whose bucket is full again say nothing a new one would
//! not, and are swept so that the table stays bounded.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::admission::{ClientKey, Refusal};
use crate::config::Limits;

/// The shortest time between two sweeps of full buckets.
const SWEEP_INTERVAL: Duration = Duration::from_millis(100);

/// One address's bucket of requests.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    refilled: Instant,
}

#[derive(Debug, Default)]
struct Table {
    buckets: HashMap<ClientKey, Bucket>,
    last_sweep: Option<Instant>,
}

/// The request budget of one server: `request_rate_per_address` per second on average,
/// `request_burst_per_address` at once.
#[derive(Debug)]
pub(crate) struct RequestBudget {
    rate: f64,
    burst: f64,
    limit: (u32, u32),
    /// Addresses tracked at most (as many as the admission table tracks); full buckets
    /// are swept when there are more than half as many, and a new address beyond it is
    /// refused as the admission table refuses one.
    max_tracked: usize,
    table: Mutex<Table>,
}

impl RequestBudget {
    pub(crate) fn new(limits: &Limits) -> Self {
        Self {
            rate: f64::from(limits.request_rate_per_address),
            burst: f64::from(limits.request_burst_per_address),
            limit: (
                limits.request_rate_per_address,
                limits.request_burst_per_address,
            ),
            max_tracked: limits.max_connections.saturating_mul(4).max(1024),
            table: Mutex::new(Table::default()),
        }
    }

    /// Spends one request of `key`'s address, or says it is over its budget.
    pub(crate) fn take(&self, key: ClientKey, now: Instant) -> Result<(), Refusal> {
        let (rate, burst) = (self.rate, self.burst);
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        if table.buckets.len() >= self.max_tracked / 2
            && table
                .last_sweep
                .is_none_or(|last| now.saturating_duration_since(last) >= SWEEP_INTERVAL)
        {
            table
                .buckets
                .retain(|_, bucket| bucket.level(now, rate) < burst);
            table.last_sweep = Some(now);
        }
        if !table.buckets.contains_key(&key) && table.buckets.len() >= self.max_tracked {
            return Err(Refusal::Addresses);
        }
        let bucket = table.buckets.entry(key).or_insert(Bucket {
            tokens: burst,
            refilled: now,
        });
        bucket.tokens = bucket.level(now, rate).min(burst);
        bucket.refilled = now;
        if bucket.tokens < 1.0 {
            let (rate, burst) = self.limit;
            return Err(Refusal::Requests { rate, burst });
        }
        bucket.tokens -= 1.0;
        Ok(())
    }

    /// Addresses tracked now (for tests of the table's bound).
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .buckets
            .len()
    }
}

impl Bucket {
    /// Tokens at `now`, before capping at the burst.
    fn level(&self, now: Instant, rate: f64) -> f64 {
        self.tokens + now.saturating_duration_since(self.refilled).as_secs_f64() * rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(rate: u32, burst: u32) -> RequestBudget {
        RequestBudget::new(&Limits {
            request_rate_per_address: rate,
            request_burst_per_address: burst,
            max_connections: 1,
            ..Limits::default()
        })
    }

    fn key(last: u8) -> ClientKey {
        ClientKey::of(std::net::IpAddr::from([192, 0, 2, last]))
    }

    #[test]
    fn a_burst_over_the_bucket_is_refused_and_refills_at_the_rate() {
        let budget = budget(10, 3);
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(budget.take(key(1), start), Ok(()));
        }
        let refused = budget.take(key(1), start).unwrap_err();
        assert_eq!(refused, Refusal::Requests { rate: 10, burst: 3 });
        assert_eq!(refused.status(), 429);
        // Another address has its own bucket.
        assert_eq!(budget.take(key(2), start), Ok(()));
        // A tenth of a second gives one request back.
        let later = start + Duration::from_millis(100);
        assert_eq!(budget.take(key(1), later), Ok(()));
        assert!(budget.take(key(1), later).is_err());
    }

    #[test]
    fn full_buckets_are_swept_beyond_the_table_bound() {
        let budget = budget(1000, 2);
        let start = Instant::now();
        for last in 0..=255 {
            for third in 0..3u8 {
                let ip = std::net::IpAddr::from([10, third, 0, last]);
                budget.take(ClientKey::of(ip), start).unwrap();
            }
        }
        assert_eq!(budget.tracked(), 768);
        // A second later every bucket is full again: the next request sweeps them.
        budget.take(key(1), start + Duration::from_secs(1)).unwrap();
        assert_eq!(budget.tracked(), 1);
    }
}
