//! The engine's allocator: Rust's global allocator behind a hard cap that records refusals.
//!
//! QuickJS has a memory limit of its own, but when it refuses an allocation nothing records
//! that it did: the module sees an `InternalError`, or even `null` when the error object itself
//! cannot be allocated, and may catch it. Enforcing the cap here instead makes "the memory
//! limit was hit during this call" a fact the handler reads from the [`Watch`], whatever the
//! module did afterwards.

use std::sync::Arc;

use rquickjs::allocator::{Allocator, RustAllocator};

use crate::watch::Watch;

/// Allocates through [`RustAllocator`] while the usable bytes in use stay within `limit`.
pub(crate) struct CappedAllocator {
    limit: usize,
    used: usize,
    watch: Arc<Watch>,
}

impl CappedAllocator {
    pub(crate) fn new(limit: usize, watch: Arc<Watch>) -> Self {
        Self {
            limit,
            used: 0,
            watch,
        }
    }

    /// Whether `additional` more bytes fit; records a refusal if not.
    fn admit(&self, additional: usize) -> bool {
        let fits = self
            .used
            .checked_add(additional)
            .is_some_and(|total| total <= self.limit);
        if !fits {
            self.watch.refuse_memory();
        }
        fits
    }
}

// SAFETY: every pointer handed out comes from `RustAllocator` (which meets the trait's size and
// alignment contract) and is returned to it; this wrapper only refuses requests and keeps count
// using the block's own usable size, so `dealloc`/`realloc` see exactly what `alloc` returned.
unsafe impl Allocator for CappedAllocator {
    fn alloc(&mut self, size: usize) -> *mut u8 {
        if !self.admit(size) {
            return std::ptr::null_mut();
        }
        let block = RustAllocator.alloc(size);
        if !block.is_null() {
            // SAFETY: `block` was just returned by `RustAllocator`.
            self.used += unsafe { RustAllocator::usable_size(block) };
        }
        block
    }

    fn calloc(&mut self, count: usize, size: usize) -> *mut u8 {
        // `RustAllocator::calloc` panics on overflow: refuse it here instead.
        let Some(total) = count.checked_mul(size) else {
            self.watch.refuse_memory();
            return std::ptr::null_mut();
        };
        if !self.admit(total) {
            return std::ptr::null_mut();
        }
        let block = RustAllocator.calloc(count, size);
        if !block.is_null() {
            // SAFETY: `block` was just returned by `RustAllocator`.
            self.used += unsafe { RustAllocator::usable_size(block) };
        }
        block
    }

    unsafe fn dealloc(&mut self, block: *mut u8) {
        // SAFETY: the caller passes a block this allocator returned.
        unsafe {
            self.used = self.used.saturating_sub(RustAllocator::usable_size(block));
            RustAllocator.dealloc(block);
        }
    }

    unsafe fn realloc(&mut self, block: *mut u8, new_size: usize) -> *mut u8 {
        if block.is_null() {
            return self.alloc(new_size);
        }
        // SAFETY: the caller passes a block this allocator returned.
        let old_size = unsafe { RustAllocator::usable_size(block) };
        if new_size > old_size && !self.admit(new_size - old_size) {
            return std::ptr::null_mut();
        }
        // SAFETY: as above; on failure the old block stays valid and counted.
        unsafe {
            let moved = RustAllocator.realloc(block, new_size);
            if !moved.is_null() {
                self.used = self.used.saturating_sub(old_size) + RustAllocator::usable_size(moved);
            }
            moved
        }
    }

    unsafe fn usable_size(block: *mut u8) -> usize {
        // SAFETY: the caller passes a block this allocator returned.
        unsafe { RustAllocator::usable_size(block) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn refuses_past_the_cap_and_records_it() {
        let watch = Watch::new();
        watch.arm(Duration::from_secs(1));
        let mut allocator = CappedAllocator::new(1024, Arc::clone(&watch));
        let block = allocator.alloc(512);
        assert!(!block.is_null());
        assert!(!watch.memory_refused());
        assert!(allocator.alloc(1024).is_null());
        assert!(watch.memory_refused());
        assert!(allocator.calloc(usize::MAX, 2).is_null());
        // SAFETY: `block` came from this allocator.
        unsafe {
            let grown = allocator.realloc(block, 900);
            assert!(!grown.is_null());
            assert!(allocator.realloc(grown, 4096).is_null());
            allocator.dealloc(grown);
        }
        assert_eq!(allocator.used, 0);
    }
}
