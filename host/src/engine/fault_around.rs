//! A pool slot that resets in place keeps every page mapped for its life, so the pages
//! the kernel maps around each read fault ("fault-around") would stay with the slot,
//! resident and walked by every reset's scan, though no run asked for them. The
//! vendored wasmtime registers each slot's image with userfaultfd, which turns that off
//! (vendor/README.md, "No fault-around in images"). These tests run on the engine's own
//! configuration (pooling), where the kernel and the build allow the in-place reset.

use super::{Engine, EngineConfig};
use wasmtime::{Instance, Module, PoolingAllocationConfig as Pool, Store};

/// Host pages of image: the data segment fills them with ones.
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

/// An engine on the host's own configuration, with its cache in a temp dir.
fn pooled_engine() -> (Engine, tempfile::TempDir) {
    let cache = tempfile::tempdir().unwrap();
    let config =
        EngineConfig { cache_dir: cache.path().to_path_buf(), prepared_instances: 0, ..EngineConfig::default() };
    (Engine::new(config).unwrap(), cache)
}

/// A module whose memory's first [`IMAGE_PAGES`] host pages are image, all ones, with
/// a reader and a writer of single bytes.
fn image_module(engine: &Engine) -> Module {
    let data = "\\01".repeat(IMAGE_PAGES * rustix::param::page_size());
    let wat = format!(
        r#"(module
            (memory (export "memory") 1)
            (data (i32.const 0) "{data}")
            (func (export "read") (param i32) (result i32)
                local.get 0
                i32.load8_u)
            (func (export "write") (param i32 i32)
                local.get 0
                local.get 1
                i32.store8))"#
    );
    Module::new(engine.wasmtime(), wat).unwrap()
}

/// `module` instantiated in a store of its own.
fn instantiate(engine: &Engine, module: &Module) -> (Store<()>, Instance) {
    let mut store = Store::new(engine.wasmtime(), ());
    store.set_epoch_deadline(u64::MAX / 2);
    let instance = Instance::new(&mut store, module, &[]).unwrap();
    (store, instance)
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

    let (engine, _cache) = pooled_engine();
    let (mut store, instance) = instantiate(&engine, &image_module(&engine));
    let memory = instance.get_memory(&mut store, "memory").unwrap();
    let base = memory.data_ptr(&store).cast_const();
    assert_eq!(present(base, IMAGE_PAGES), vec![false; IMAGE_PAGES], "the image was touched before the read");

    let read = instance.get_typed_func::<i32, i32>(&mut store, "read").unwrap();
    let fourth = i32::try_from(3 * rustix::param::page_size()).unwrap();
    assert_eq!(read.call(&mut store, fourth).unwrap(), 1);
    let mut expected = vec![false; IMAGE_PAGES];
    expected[3] = true;
    assert_eq!(present(base, IMAGE_PAGES), expected, "pages mapped after reading the fourth");
}

/// Set in the child process of [`where_userfaultfd_is_refused_slots_still_reset`].
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const REFUSED_CHILD: &str = "WASMBOX_TEST_USERFAULTFD_REFUSED";

/// Where userfaultfd is refused (Docker's default seccomp profile refuses it to a
/// container without `CAP_SYS_PTRACE`), images are left unregistered and the pool still
/// resets its slots in place: a run's write is gone in the next instance. The refusal is
/// a seccomp filter in a child process (this test binary again), so that it holds before
/// the process first asks for userfaultfd.
#[test]
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn where_userfaultfd_is_refused_slots_still_reset() {
    if std::env::var_os(REFUSED_CHILD).is_some() {
        refuse_userfaultfd();
        assert_eq!(Pool::wasmbox_check_pagemap_query("dirty", true), None, "userfaultfd was not refused");
        assert!(Pool::is_pagemap_scan_available(), "the scan went with userfaultfd");
        let (engine, _cache) = pooled_engine();
        // One module: its instances share the image, so each slot resets in place.
        let module = image_module(&engine);
        let page = i32::try_from(rustix::param::page_size()).unwrap();
        for run in 0..3 {
            let (mut store, instance) = instantiate(&engine, &module);
            let read = instance.get_typed_func::<i32, i32>(&mut store, "read").unwrap();
            let write = instance.get_typed_func::<(i32, i32), ()>(&mut store, "write").unwrap();
            assert_eq!(read.call(&mut store, 2 * page).unwrap(), 1, "run {run} found an earlier run's write");
            write.call(&mut store, (2 * page, 7)).unwrap();
            assert_eq!(read.call(&mut store, 2 * page).unwrap(), 7);
        }
        return;
    }
    if !images_are_registered() {
        return;
    }
    let name = "engine::fault_around::where_userfaultfd_is_refused_slots_still_reset";
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads", "1"])
        .env(REFUSED_CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&child.stdout);
    let stderr = String::from_utf8_lossy(&child.stderr);
    assert!(child.status.success(), "the child failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "the child ran no test:\n{stdout}");
}

/// Installs a seccomp filter on this thread (and the threads it starts) under which
/// `userfaultfd` fails with `EPERM`, as Docker's default profile makes it fail.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn refuse_userfaultfd() {
    #[cfg(target_arch = "x86_64")]
    const AUDIT_ARCH: u32 = 0xC000_003E;
    #[cfg(target_arch = "aarch64")]
    const AUDIT_ARCH: u32 = 0xC000_00B7;
    const LOAD_WORD: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JUMP_IF_EQUAL: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const RETURN: u16 = 0x06; // BPF_RET | BPF_K
    let instruction = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let userfaultfd = u32::try_from(libc::SYS_userfaultfd).unwrap();
    let mut program = [
        // `struct seccomp_data`: the system call's number at 0, the architecture at 4.
        instruction(LOAD_WORD, 0, 0, 4),
        instruction(JUMP_IF_EQUAL, 0, 3, AUDIT_ARCH),
        instruction(LOAD_WORD, 0, 0, 0),
        instruction(JUMP_IF_EQUAL, 0, 1, userfaultfd),
        instruction(RETURN, 0, 0, libc::SECCOMP_RET_ERRNO | u32::try_from(libc::EPERM).unwrap()),
        instruction(RETURN, 0, 0, libc::SECCOMP_RET_ALLOW),
    ];
    let filter = libc::sock_fprog { len: u16::try_from(program.len()).unwrap(), filter: program.as_mut_ptr() };
    // SAFETY: `filter` points to `program`, which outlives the calls; the kernel copies it.
    #[allow(unsafe_code)]
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        assert_eq!(libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &filter), 0);
    }
}
