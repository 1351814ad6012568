//! Test guest: proves that a pool slot's next run starts from pristine memory.
//!
//! Each run first looks for traces of an earlier run, then leaves some of its own:
//! - `ZEROED`, a zero-initialised static (its pages are not in the memory image);
//! - `PATTERNED`, a static initialised to `INITIAL` (its pages come from the image's
//!   data segment, so a reset must restore them, not zero them);
//! - a zeroed heap allocation past the initial memory, which the allocator takes from
//!   `memory.grow` and trusts to be zero without clearing it.
//!
//! Every other page is written, so the dirty set is hundreds of disjoint regions
//! (wasmtime's reset scans them 64 at a time). The run returns what it found and what
//! it wrote; the host's test asserts it found nothing, run after run.
//!
//! Input: `heap_pages` (default 1024), how many pages of heap to allocate, and
//! `write_heap` (default true): false reserves them without touching them (and so
//! cannot check them: `heap_dirty` is null), so a light run can span the memory a
//! heavy run before it dirtied.

use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

use serde_json::{json, Value};
use wasmbox_guest::RunError;

const PAGE: usize = 4096;
const ZEROED_PAGES: usize = 1024;
/// Smaller: its initial contents are part of the component.
const PATTERNED_PAGES: usize = 256;
const INITIAL: u8 = 0xA5;
const MARK: u8 = 0x5A;

static ZEROED: [AtomicU8; ZEROED_PAGES * PAGE] = [const { AtomicU8::new(0) }; ZEROED_PAGES * PAGE];
static PATTERNED: [AtomicU8; PATTERNED_PAGES * PAGE] = [const { AtomicU8::new(INITIAL) }; PATTERNED_PAGES * PAGE];

fn run(_code: &str, input: Value) -> Result<Value, RunError> {
    let heap_pages = input["heap_pages"].as_u64().unwrap_or(1024) as usize;
    let write_heap = input["write_heap"].as_bool().unwrap_or(true);

    let zeroed_dirty = ZEROED.iter().filter(|b| b.load(Relaxed) != 0).count();
    let patterned_dirty = PATTERNED.iter().filter(|b| b.load(Relaxed) != INITIAL).count();
    if !write_heap {
        // Grows memory as far as the allocation below would, without a byte of it
        // touched: zeroing or checking it would dirty or map its pages.
        std::hint::black_box(Vec::<u8>::with_capacity(heap_pages * PAGE));
    }
    let mut heap = vec![0u8; if write_heap { heap_pages * PAGE } else { 0 }];
    let heap_dirty = std::hint::black_box(&heap).iter().filter(|b| **b != 0).count();

    let mut pages_written = 0;
    for page in (0..ZEROED_PAGES).step_by(2) {
        ZEROED[page * PAGE].store(MARK, Relaxed);
        pages_written += 1;
    }
    for page in (0..PATTERNED_PAGES).step_by(2) {
        PATTERNED[page * PAGE + PAGE - 1].store(MARK, Relaxed);
        pages_written += 1;
    }
    for page in (0..heap.len() / PAGE).step_by(2) {
        heap[page * PAGE + 7] = MARK;
        pages_written += 1;
    }
    std::hint::black_box(&heap);

    Ok(json!({
        "zeroed_dirty": zeroed_dirty,
        "patterned_dirty": patterned_dirty,
        "heap_dirty": if write_heap { json!(heap_dirty) } else { Value::Null },
        "pages_written": pages_written,
    }))
}

wasmbox_guest::export_runner!(run);
