//! What the NATS test files share: a runtime per replica, and a connection of its own per
//! replica, as separate processes would have.
#![allow(dead_code)] // each test file uses its own part of this module

use std::time::Duration;

use concord_nats::{Nats, NatsSettings};

/// A runtime for one replica (two workers): dropping it is the replica's process ending.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// One replica's connection to `url`, each operation answering within `timeout`.
pub fn connect(runtime: &tokio::runtime::Runtime, url: String, timeout: Duration) -> Nats {
    let mut settings = NatsSettings::new([url]);
    settings.operation_timeout = timeout;
    runtime.block_on(Nats::connect(&settings)).unwrap()
}
