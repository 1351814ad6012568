//! A pool slot that resets in place keeps every page mapped for its life, so the pages
//! the kernel maps around each read fault ("fault-around") would stay with the slot,
//! resident and walked by every reset's scan, though no run asked for them. The
//! vendored wasmtime registers each slot's image with userfaultfd, which turns that off
//! (vendor/README.md, "No fault-around in images"). These tests run on the engine's own
//! configuration (pooling), where the kernel and the build allow the in-place reset.

use super::{Engine, EngineConfig};
use wasmtime::{Instance, Module, PoolingAllocationConfig as Pool, Store};

/// Host pages of image: the data segment fills them with non-zero bytes.
const IMAGE_PAGES: usize = 8;

/// Whether this build and kernel reset slots in place with images registered; says so
/// on stderr when not.
fn images_are_registered() -> bool {
    if !cfg!(feature = "pagemap-reset") {
        eprintln!("skipped: built without `pagemap-reset` (the workspace's tests enable it)");
        return false;
    }
    if !Pool::is_pagemap_scan_available() {
        eprintln!("skipped: no exact PAGEMAP_SCAN on this kernel; slots are discarded, not kept");
        return false;
    }
    match Pool::wasmbox_check_pagemap_query("dirty", true) {
        Some(true) => true,
        Some(false) => panic!("the reset's scan is not exact on a registered image here"),
        None => {
            eprintln!("skipped: no userfaultfd with asynchronous write-protection for this process");
            false
        }
    }
}

/// Whether each of `pages` host pages from `start` has a page-table entry mapping it
/// (`/proc/self/pagemap`, bit 63).
fn present(start: *const u8, pages: usize) -> Vec<bool> {
    use std::io::{Read, Seek, SeekFrom};
    let page = rustix::param::page_size();
    let mut pagemap = std::fs::File::open("/proc/self/pagemap").unwrap();
    pagemap.seek(SeekFrom::Start((start.addr() / page * 8) as u64)).unwrap();
    let mut entries = vec![0; pages * 8];
    pagemap.read_exact(&mut entries).unwrap();
    entries.chunks(8).map(|entry| u64::from_ne_bytes(entry.try_into().unwrap()) >> 63 == 1).collect()
}

/// A read of one page of a slot's image maps that page and none of its neighbours,
/// though they are all in the page cache; the reset's scan is exact on such a mapping.
#[test]
fn a_read_in_an_image_maps_only_the_page_read() {
    if !images_are_registered() {
        return;
    }
    assert_eq!(Pool::wasmbox_check_pagemap_query("present", true), Some(false));
    assert_eq!(Pool::wasmbox_check_pagemap_query("zero", true), Some(false));

    let cache = tempfile::tempdir().unwrap();
    let config =
        EngineConfig { cache_dir: cache.path().to_path_buf(), prepared_instances: 0, ..EngineConfig::default() };
    let engine = Engine::new(config).unwrap();
    let page = rustix::param::page_size();
    let data = "\\01".repeat(IMAGE_PAGES * page);
    let wat = format!(
        r#"(module
            (memory (export "memory") 1)
            (data (i32.const 0) "{data}")
            (func (export "read") (param i32) (result i32)
                local.get 0
                i32.load8_u))"#
    );
    let module = Module::new(engine.wasmtime(), wat).unwrap();
    let mut store = Store::new(engine.wasmtime(), ());
    store.set_epoch_deadline(u64::MAX / 2);
    let instance = Instance::new(&mut store, &module, &[]).unwrap();
    let memory = instance.get_memory(&mut store, "memory").unwrap();
    let base = memory.data_ptr(&store).cast_const();
    assert_eq!(present(base, IMAGE_PAGES), vec![false; IMAGE_PAGES], "the image was touched before the read");

    let read = instance.get_typed_func::<i32, i32>(&mut store, "read").unwrap();
    let third = i32::try_from(3 * page).unwrap();
    assert_eq!(read.call(&mut store, third).unwrap(), 1);
    let mut expected = vec![false; IMAGE_PAGES];
    expected[3] = true;
    assert_eq!(present(base, IMAGE_PAGES), expected, "pages mapped after reading the fourth");
}
