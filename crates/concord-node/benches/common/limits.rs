//! Node limits for benches whose every connection comes from 127.0.0.1.

use std::time::Duration;

use concord_node::Limits;

/// Descriptors kept beyond one per connection (store, runtime, listener, pipes).
pub const SPARE: usize = 256;

/// A provider's limits: room for `sessions` sessions and [`SPARE`], all from 127.0.0.1,
/// opened as fast as the client can, and never closed as idle.
pub fn provider(sessions: usize) -> Limits {
    let room = sessions + SPARE;
    let rate = u32::try_from(room).unwrap_or(u32::MAX);
    Limits {
        max_sessions: room,
        max_sessions_per_address: room,
        max_connections: room,
        max_connections_per_address: room,
        connection_rate_per_address: rate,
        connection_burst_per_address: rate,
        // Each connection fetches the description and upgrades: two requests.
        request_rate_per_address: rate.saturating_mul(2),
        request_burst_per_address: rate.saturating_mul(2),
        max_pending_hellos: room,
        max_pending_hellos_per_address: room,
        // Subscribers and streams, all from one address.
        max_holding_sessions: room,
        max_holding_sessions_per_address: room,
        // One address may use every backend slot, and wait for one.
        max_backend_calls_per_address: Limits::default().max_backend_calls,
        // Its streams and progress actions too.
        max_long_backend_calls: Limits::default().max_backend_calls,
        max_long_backend_calls_per_address: Limits::default().max_backend_calls,
        max_backend_waiting: room,
        max_backend_waiting_per_address: room,
        idle_timeout: Duration::from_secs(3600),
        ..Limits::default()
    }
}

/// A requester's limits: its sessions are never closed as idle.
pub fn requester() -> Limits {
    Limits {
        idle_timeout: Duration::from_secs(3600),
        ..Limits::default()
    }
}
