//! What the node's benchmarks print beside their figures, shared by each bench binary.

use std::time::Duration;

/// A duration as people read it: microseconds below a millisecond, else milliseconds.
pub fn human(duration: Duration) -> String {
    let micros = duration.as_secs_f64() * 1e6;
    if micros < 1000.0 {
        format!("{micros:.0} µs")
    } else {
        format!("{:.2} ms", micros / 1000.0)
    }
}

/// The 1-minute load average, when the system says.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}
