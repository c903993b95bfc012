//! The node-wide bound on negotiation work: judging, drafting, diagnosing, code generation
//! with its test run. Many sessions negotiating at once (hostile ones, say) take turns for
//! the CPU instead of all allocating at once; a session waits within its step's deadline.
//!
//! When the last piece of work running ends, the memory the work freed is handed back to
//! the operating system (glibc keeps freed memory in its arenas otherwise: 32 large
//! candidates judged at once left about 1 GB held).

use std::sync::{Arc, OnceLock};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::node::Shared;

impl Shared {
    /// Waits for a turn to do negotiation work (`Limits::max_concurrent_negotiation_work`).
    pub(crate) async fn enter_work(&self) -> Turn {
        self.code
            .gate
            .enter(self.limits.max_concurrent_negotiation_work)
            .await
    }
}

/// Turns for negotiation work, `Limits::max_concurrent_negotiation_work` of them, made on
/// first use (the node's limits never change).
#[derive(Debug, Default)]
pub(crate) struct WorkGate {
    turns: OnceLock<(Arc<Semaphore>, usize)>,
}

/// One turn; the next waiting piece of work starts when it is dropped.
#[derive(Debug)]
pub(crate) struct Turn {
    permit: Option<OwnedSemaphorePermit>,
    semaphore: Arc<Semaphore>,
    turns: usize,
}

impl WorkGate {
    /// Waits for a turn among `turns` (the first call fixes the number).
    pub(crate) async fn enter(&self, turns: usize) -> Turn {
        let (semaphore, turns) = self
            .turns
            .get_or_init(|| {
                let turns = turns.min(Semaphore::MAX_PERMITS);
                (Arc::new(Semaphore::new(turns)), turns)
            })
            .clone();
        // The semaphore is never closed: it lives as long as the gate.
        let permit = Arc::clone(&semaphore).acquire_owned().await.ok();
        Turn {
            permit,
            semaphore,
            turns,
        }
    }

    /// Turns free now (all of them before the first use).
    #[cfg(test)]
    fn free(&self) -> Option<usize> {
        self.turns
            .get()
            .map(|(semaphore, _)| semaphore.available_permits())
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        drop(self.permit.take());
        if self.semaphore.available_permits() == self.turns {
            crate::memory::give_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn work_beyond_the_turns_waits_for_one() {
        let gate = Arc::new(WorkGate::default());
        assert_eq!(gate.free(), None);
        let first = gate.enter(2).await;
        let second = gate.enter(2).await;
        assert_eq!(gate.free(), Some(0));
        let waiting = tokio::spawn({
            let gate = Arc::clone(&gate);
            async move { gate.enter(2).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "a third piece of work ran at once");
        drop(first);
        let third = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the waiting work never got the freed turn")
            .unwrap();
        assert_eq!(gate.free(), Some(0));
        drop((second, third));
        assert_eq!(gate.free(), Some(2));
    }
}
