//! The async runtime the network commands (`serve`, `call`, `demo`) run on.

use std::future::Future;

use anyhow::Context;

/// Runs `future` to completion on a multi-threaded tokio runtime (the node's sessions,
/// store calls and action backends run as tasks beside it).
pub fn block_on<F: Future>(future: F) -> anyhow::Result<F::Output> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    Ok(runtime.block_on(future))
}
