//! Latency percentiles and throughput of a batch of calls.

use std::time::Duration;

/// Per-call latencies of a batch, sorted.
#[derive(Debug, Clone)]
pub struct Latencies {
    sorted: Vec<Duration>,
}

impl Latencies {
    /// The latencies of the calls of a batch, in any order.
    pub fn new(mut latencies: Vec<Duration>) -> Self {
        latencies.sort_unstable();
        Self { sorted: latencies }
    }

    /// How many calls were measured.
    pub fn count(&self) -> usize {
        self.sorted.len()
    }

    /// The `p`th percentile (nearest rank), `p` in 0–100; zero with no calls.
    pub fn percentile(&self, p: f64) -> Duration {
        if self.sorted.is_empty() {
            return Duration::ZERO;
        }
        let rank = (p / 100.0 * self.sorted.len() as f64).ceil() as usize;
        self.sorted[rank.clamp(1, self.sorted.len()) - 1]
    }

    /// The slowest call.
    pub fn max(&self) -> Duration {
        self.sorted.last().copied().unwrap_or_default()
    }

    /// The mean latency.
    pub fn mean(&self) -> Duration {
        match u32::try_from(self.sorted.len()) {
            Ok(0) | Err(_) => Duration::ZERO,
            Ok(count) => self.sorted.iter().sum::<Duration>() / count,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let latencies = Latencies::new((1..=100).rev().map(Duration::from_millis).collect());
        assert_eq!(latencies.percentile(50.0), Duration::from_millis(50));
        assert_eq!(latencies.percentile(90.0), Duration::from_millis(90));
        assert_eq!(latencies.percentile(99.0), Duration::from_millis(99));
        assert_eq!(latencies.percentile(0.0), Duration::from_millis(1));
        assert_eq!(latencies.max(), Duration::from_millis(100));
        assert_eq!(latencies.mean(), Duration::from_micros(50_500));
        let one = Latencies::new(vec![Duration::from_millis(7)]);
        assert_eq!(one.percentile(99.0), Duration::from_millis(7));
        assert_eq!(Latencies::new(Vec::new()).percentile(50.0), Duration::ZERO);
    }
}
