//! The tree's rules, without wasm; and the two facts of the linking that a guest test
//! would not show.

use std::sync::Arc;

use super::tree::{FsFault, NodeType, Tree, MAX_DEPTH, ROOT};
use super::*;

fn tree(max_bytes: u64, max_files: u64) -> Tree {
    let input: Arc<[u8]> = Arc::from(&b"abc"[..]);
    Tree::new(max_bytes, max_files, [("data.txt", &input), ("sub/deep.txt", &input)])
}

#[test]
fn absolute_paths_and_dot_dot_above_the_base_are_not_permitted() {
    let t = tree(100, 10);
    assert_eq!(t.resolve(ROOT, "/etc/passwd"), Err(FsFault::NotPermitted));
    assert_eq!(t.resolve(ROOT, "/input"), Err(FsFault::NotPermitted));
    assert_eq!(t.resolve(ROOT, ".."), Err(FsFault::NotPermitted));
    assert_eq!(t.resolve(ROOT, "tmp/../../etc"), Err(FsFault::NotPermitted));
    assert_eq!(t.resolve(ROOT, "etc/passwd"), Err(FsFault::NoEntry));
    // `..` below the base is fine; from a descriptor on /tmp, `..` is above its base.
    let tmp = t.resolve(ROOT, "tmp").unwrap();
    assert_eq!(t.resolve(ROOT, "tmp/../input/./data.txt"), t.resolve(ROOT, "input/data.txt"));
    assert_eq!(t.resolve(tmp, ".."), Err(FsFault::NotPermitted));
    assert_eq!(t.resolve(tmp, "../input/data.txt"), Err(FsFault::NotPermitted));
    assert_eq!(t.resolve_parent(tmp, "../x").map(|_| ()), Err(FsFault::NotPermitted));
    assert_eq!(t.resolve(ROOT, "input/data.txt/x"), Err(FsFault::NotDirectory));
    assert_eq!(t.resolve(ROOT, "a\0b"), Err(FsFault::Invalid));
    assert_eq!(t.resolve(ROOT, &"a/".repeat(3000)), Err(FsFault::NameTooLong));
}

#[test]
fn only_output_and_tmp_take_writes() {
    let mut t = tree(100, 10);
    let input = t.resolve(ROOT, "input").unwrap();
    let data = t.resolve(ROOT, "input/data.txt").unwrap();
    assert_eq!(t.create_file(ROOT, "x"), Err(FsFault::ReadOnly));
    assert_eq!(t.create_file(input, "x"), Err(FsFault::ReadOnly));
    assert_eq!(t.write(data, 0, b"z"), Err(FsFault::ReadOnly));
    assert_eq!(t.set_size(data, 0), Err(FsFault::ReadOnly));
    assert_eq!(t.unlink_file(input, "data.txt"), Err(FsFault::ReadOnly));
    assert_eq!(t.remove_dir(ROOT, "tmp"), Err(FsFault::ReadOnly));
    let tmp = t.resolve(ROOT, "tmp").unwrap();
    assert_eq!(t.rename(input, "data.txt", tmp, "d"), Err(FsFault::ReadOnly));
    assert_eq!(t.rename(ROOT, "output", tmp, "o"), Err(FsFault::ReadOnly));
    let output = t.resolve(ROOT, "output").unwrap();
    let file = t.create_file(output, "o.txt").unwrap();
    t.write(file, 0, b"hi").unwrap();
    assert_eq!(t.output_files(), [("o.txt".to_owned(), b"hi".to_vec())]);
}

#[test]
fn the_quota_counts_writes_holes_and_sizes_and_frees_what_is_removed() {
    let mut t = tree(100, 10);
    let tmp = t.resolve(ROOT, "tmp").unwrap();
    let f = t.create_file(tmp, "f").unwrap();
    t.write(f, 0, &[1; 60]).unwrap();
    assert_eq!(t.write(f, 60, &[1; 41]), Err(FsFault::NoSpace), "60 + 41 > 100");
    assert_eq!(t.write(f, 200, &[1]), Err(FsFault::NoSpace), "a hole counts");
    assert_eq!(t.set_size(f, 101), Err(FsFault::NoSpace));
    assert_eq!(t.write(f, u64::MAX, &[1]), Err(FsFault::FileTooLarge));
    t.write(f, 60, &[1; 40]).unwrap();
    assert_eq!(t.used_bytes(), 100);
    t.set_size(f, 10).unwrap();
    assert_eq!(t.used_bytes(), 10);
    // An open file that is unlinked keeps its bytes until its last holder lets go.
    t.retain(f);
    t.unlink_file(tmp, "f").unwrap();
    assert_eq!(t.used_bytes(), 10);
    assert_eq!(t.read(f, 0, 100).unwrap().0.len(), 10);
    t.release(f);
    assert_eq!((t.used_bytes(), t.used_files()), (0, 0));
    assert_eq!(t.stat(f), Err(FsFault::BadDescriptor));
}

#[test]
fn the_file_cap_counts_files_and_directories() {
    let mut t = tree(100, 2);
    let tmp = t.resolve(ROOT, "tmp").unwrap();
    let d = t.create_dir(tmp, "d").unwrap();
    t.create_file(d, "a").unwrap();
    assert_eq!(t.create_file(d, "b"), Err(FsFault::NoSpace));
    assert_eq!(t.create_dir(tmp, "e"), Err(FsFault::NoSpace));
    t.unlink_file(d, "a").unwrap();
    t.create_file(d, "b").unwrap();
}

#[test]
fn renames_replace_files_and_never_move_a_directory_into_itself() {
    let mut t = tree(100, 20);
    let tmp = t.resolve(ROOT, "tmp").unwrap();
    let output = t.resolve(ROOT, "output").unwrap();
    let a = t.create_file(tmp, "a").unwrap();
    t.write(a, 0, b"aa").unwrap();
    let b = t.create_file(output, "b").unwrap();
    t.write(b, 0, b"bbb").unwrap();
    t.rename(tmp, "a", output, "b").unwrap();
    assert_eq!(t.used_bytes(), 2, "the replaced file is freed");
    assert_eq!(t.output_files(), [("b".to_owned(), b"aa".to_vec())]);
    let d = t.create_dir(tmp, "d").unwrap();
    let inner = t.create_dir(d, "inner").unwrap();
    assert_eq!(t.rename(tmp, "d", inner, "x"), Err(FsFault::Invalid));
    assert_eq!(t.rename(output, "b", tmp, "d"), Err(FsFault::IsDirectory));
    t.rename(tmp, "d", output, "moved").unwrap();
    assert_eq!(t.resolve(ROOT, "output/moved/inner"), Ok(inner));
}

#[test]
fn nesting_is_capped() {
    let mut t = tree(100, 1000);
    let mut dir = t.resolve(ROOT, "tmp").unwrap();
    for _ in 1..MAX_DEPTH {
        dir = t.create_dir(dir, "d").unwrap();
    }
    assert_eq!(t.create_dir(dir, "d"), Err(FsFault::NameTooLong));
    assert_eq!(t.node_type(dir), Some(NodeType::Directory));
}

#[test]
fn input_names_are_checked() {
    let mut files = InputFiles::new();
    for bad in ["", "/abs", "a/../b", "..", "a//b", "a\\b", "a\0b", "./a"] {
        assert!(files.insert(bad, b"".to_vec()).is_err(), "{bad:?}");
    }
    files.insert("a/b", b"".to_vec()).unwrap();
    assert!(files.insert("a", b"".to_vec()).is_err(), "a file where a directory is");
    assert!(files.insert("a/b/c", b"".to_vec()).is_err(), "a directory where a file is");
    files.insert("a/b", b"new".to_vec()).unwrap();
    assert_eq!(files.len(), 1);
}

/// The guest's libc asks `filesystem-error-code` what a failed stream write was; a
/// quota refusal must answer ENOSPC (`insufficient-space`), not nothing (EIO).
#[test]
fn a_stream_error_is_classified_by_downcasting() {
    use host::filesystem_error_code_for_test as classify;
    let mut table = ResourceTable::new();
    let mut vfs = Vfs::new(10, 10, InputFiles::new());
    let mut view = VfsCtxView { vfs: &mut vfs, table: &mut table };
    assert_eq!(classify(&mut view, wasmtime::Error::new(FsFault::NoSpace)), Some("insufficient-space"));
    assert_eq!(classify(&mut view, wasmtime::format_err!("no space left on device")), None, "not by its words");
}

/// Our `wasi:filesystem` must be the version wasmtime-wasi registers: otherwise both
/// would be in the linker, and a guest importing the higher one would get the host's.
/// Without shadowing, adding ours next to wasmtime-wasi's is a duplicate definition.
#[test]
fn the_filesystem_shadows_wasmtime_wasis_at_the_same_version() {
    let engine = wasmtime::Engine::default();
    let mut linker = Linker::<crate::run_state::RunState>::new(&engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
    let err = host::add_to_linker(&mut linker).unwrap_err();
    assert!(format!("{err:#}").contains("defined twice"), "{err:#}");
    let mut linker = Linker::<crate::run_state::RunState>::new(&engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
    add_to_linker(&mut linker).unwrap();
}
