//! Handing freed heap memory back to the operating system after large releases (the last
//! piece of negotiation work ending, a session that held a large event backlog closing):
//! glibc's allocator otherwise keeps what a burst freed in its arenas, and the process's
//! resident size stays at its peak after the load is gone.

use std::sync::atomic::{AtomicBool, Ordering};

/// A release at least this large is worth a trim (smaller ones are left to the allocator).
pub(crate) const GIVE_BACK_AFTER: usize = 1024 * 1024;

/// Whether a trim is running: releases meanwhile do not start another (it will see what
/// they freed, or the next release will).
static TRIMMING: AtomicBool = AtomicBool::new(false);

/// Hands freed heap memory back to the operating system, off the async threads; at most
/// one trim at a time.
pub(crate) fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        if TRIMMING.swap(true, Ordering::AcqRel) {
            return;
        }
        runtime.spawn_blocking(|| {
            // SAFETY: `malloc_trim` only walks glibc's own arenas under their locks; it
            // takes no pointer of ours and is safe to call from any thread at any time.
            unsafe { libc::malloc_trim(0) };
            TRIMMING.store(false, Ordering::Release);
        });
    }
}
