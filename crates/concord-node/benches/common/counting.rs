//! A counting global allocator: the heap bytes and blocks in use, in all and by size class,
//! over the system allocator, once [`start`] has switched it on. A bench's server child
//! switches it on; its client side runs uncounted. Install it in the bench's root with
//! `#[global_allocator] static ALLOCATOR: counting::Counting = counting::Counting;`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

/// Size classes: class `k` holds blocks of 2^(k-1) < size ≤ 2^k.
pub const CLASSES: usize = 40;

/// Counts the heap in use, over the system allocator, once [`start`] was called.
pub struct Counting;

static ON: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);
static BLOCKS: AtomicIsize = AtomicIsize::new(0);
/// Live blocks and bytes by size class.
static CLASS_BLOCKS: [AtomicIsize; CLASSES] = [const { AtomicIsize::new(0) }; CLASSES];
static CLASS_BYTES: [AtomicIsize; CLASSES] = [const { AtomicIsize::new(0) }; CLASSES];

/// Switches counting on, for the rest of the process. Only differences between two
/// [`heap`] readings mean anything: a block allocated before is subtracted when freed.
pub fn start() {
    ON.store(true, Ordering::Relaxed);
}

/// The heap in use, as counted.
#[derive(Debug, Clone)]
pub struct Heap {
    pub bytes: i64,
    pub blocks: i64,
    /// Live (blocks, bytes) per size class.
    pub classes: Vec<(i64, i64)>,
}

/// The heap in use now.
pub fn heap() -> Heap {
    Heap {
        bytes: LIVE.load(Ordering::Relaxed) as i64,
        blocks: BLOCKS.load(Ordering::Relaxed) as i64,
        classes: (0..CLASSES)
            .map(|class| {
                (
                    CLASS_BLOCKS[class].load(Ordering::Relaxed) as i64,
                    CLASS_BYTES[class].load(Ordering::Relaxed) as i64,
                )
            })
            .collect(),
    }
}

fn class_of(size: usize) -> usize {
    (size.next_power_of_two().trailing_zeros() as usize).min(CLASSES - 1)
}

/// Counts `blocks` (1 or -1) of `size` bytes.
fn count(size: usize, blocks: isize) {
    LIVE.fetch_add(blocks * size as isize, Ordering::Relaxed);
    let class = class_of(size);
    CLASS_BLOCKS[class].fetch_add(blocks, Ordering::Relaxed);
    CLASS_BYTES[class].fetch_add(blocks * size as isize, Ordering::Relaxed);
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counters are
// only read for the report.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() && ON.load(Ordering::Relaxed) {
            BLOCKS.fetch_add(1, Ordering::Relaxed);
            count(layout.size(), 1);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        unsafe { System.dealloc(pointer, layout) };
        if ON.load(Ordering::Relaxed) {
            BLOCKS.fetch_sub(1, Ordering::Relaxed);
            count(layout.size(), -1);
        }
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if !moved.is_null() && ON.load(Ordering::Relaxed) {
            count(layout.size(), -1);
            count(new_size, 1);
        }
        moved
    }
}
