//! Turns for JSONPath searches: each walks every TD on a blocking thread, so at most
//! `Limits::directory_searches` run at once over the node and
//! `Limits::directory_searches_per_address` for one client address. A search with no turn
//! free is refused at once (429 when its address holds its share, else 503), both with
//! `Retry-After`: a few addresses cannot fill tokio's blocking pool with searches and
//! stall every other directory operation. A turn is owned, so that it is held until the
//! search on the blocking thread ends, even when its caller went away.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::binding::ProblemResponse;

/// The seconds a refused search is told to wait.
const RETRY_AFTER_SECONDS: u64 = 1;

/// The node's turns for JSONPath searches.
pub(super) struct SearchGate {
    all: Arc<Semaphore>,
    all_limit: usize,
    per_address: usize,
    addresses: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// A search's turn: both permits, given back when it is dropped.
pub(super) struct SearchTurn {
    gate: Arc<SearchGate>,
    client: String,
    address: Arc<Semaphore>,
    permits: Option<(OwnedSemaphorePermit, OwnedSemaphorePermit)>,
}

/// Why a search has no turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Busy {
    /// Its address runs `directory_searches_per_address` searches (429).
    Address(usize),
    /// The node runs `directory_searches` searches (503).
    Node(usize),
}

impl SearchGate {
    /// `all` turns over the node, `per_address` for one address (each at least 1, as
    /// `Limits::validate` checks; clamped to what a semaphore holds).
    pub(super) fn new(all: usize, per_address: usize) -> Arc<Self> {
        let all = all.clamp(1, Semaphore::MAX_PERMITS);
        Arc::new(Self {
            all: Arc::new(Semaphore::new(all)),
            all_limit: all,
            per_address: per_address.clamp(1, Semaphore::MAX_PERMITS),
            addresses: Mutex::new(HashMap::new()),
        })
    }

    /// A turn for a search from `client` (its client key), or why there is none now.
    pub(super) fn enter(self: &Arc<Self>, client: String) -> Result<SearchTurn, Busy> {
        let mut addresses = self.lock();
        let address = Arc::clone(
            addresses
                .entry(client.clone())
                .or_insert_with(|| Arc::new(Semaphore::new(self.per_address))),
        );
        let mut turn = SearchTurn {
            gate: Arc::clone(self),
            client,
            address,
            permits: None,
        };
        drop(addresses);
        let Ok(mine) = Arc::clone(&turn.address).try_acquire_owned() else {
            return Err(Busy::Address(self.per_address));
        };
        let Ok(node) = Arc::clone(&self.all).try_acquire_owned() else {
            return Err(Busy::Node(self.all_limit));
        };
        turn.permits = Some((mine, node));
        Ok(turn)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Semaphore>>> {
        // The map is changed in single inserts and removals: a panic leaves it whole.
        self.addresses
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for SearchTurn {
    fn drop(&mut self) {
        let mut addresses = self.gate.lock();
        drop(self.permits.take());
        // Clones are made under this lock: the map's and ours alone mean no one else
        // holds or is taking a turn of this address.
        if Arc::strong_count(&self.address) == 2 {
            addresses.remove(&self.client);
        }
    }
}

impl Busy {
    /// The answer: 429 or 503 with `Retry-After`, naming the limit.
    pub(super) fn answer(self, instance: &str) -> Response {
        let (status, title, detail, limit) = match self {
            Busy::Address(limit) => (
                429,
                "Too many searches from this address",
                format!(
                    "this address runs {limit} JSONPath searches already \
                     (the node's directory_searches_per_address)"
                ),
                limit,
            ),
            Busy::Node(limit) => (
                503,
                "Directory busy searching",
                "the directory runs as many JSONPath searches as it takes at once \
                 (the node's directory_searches)"
                    .to_owned(),
                limit,
            ),
        };
        ProblemResponse::new(status, title, detail)
            .with_type("urn:concord:directory:search-busy")
            .with_extension("limit", json!(limit))
            .with_header("retry-after", &RETRY_AFTER_SECONDS.to_string())
            .with_instance(instance)
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_are_shared_per_address_and_over_the_node_and_given_back() {
        let gate = SearchGate::new(2, 1);
        let first = gate.enter("127.0.0.2".to_owned()).expect("a turn");
        assert_eq!(
            gate.enter("127.0.0.2".to_owned()).err(),
            Some(Busy::Address(1))
        );
        let second = gate.enter("127.0.0.3".to_owned()).expect("a turn");
        assert_eq!(
            gate.enter("127.0.0.4".to_owned()).err(),
            Some(Busy::Node(2))
        );
        drop(first);
        drop(second);
        assert!(gate.lock().is_empty(), "no address kept without a turn");
        assert!(gate.enter("127.0.0.2".to_owned()).is_ok());
    }
}
