//! `wasmbox:sandbox/files` (WIT 0.1.1) over the run's inode tree: a second view on the
//! tree `wasi:filesystem` serves, for guests whose language has no file API over WASI
//! (the JavaScript guest's `fs`). Whole-file calls by path, no descriptors or streams.
//!
//! # Security
//! Every call goes through the tree's own rules, so this view can do nothing the WASI one
//! cannot: the same byte quota and file cap, read-only `/` and `/input`, no links. Paths
//! are resolved from `/` whether or not they start with `/` (there is no other directory
//! to be relative to), and a `..` above `/` is `not-permitted`, as from a WASI descriptor
//! of `/`. A `write` is all or nothing: past the quota it stores no byte and leaves no
//! new file behind.

use std::time::{SystemTime, UNIX_EPOCH};

use wasmtime::component::{HasData, Linker};

use super::tree::{FsFault, Ino, NodeType, Tree, ROOT};
use super::{VfsCtxView, VfsView};
use crate::bindings::wasmbox::sandbox::files::{self, DirEntry, EntryKind, FileStat, FsError};

/// The `HasData` marker of the `files` import.
struct SandboxFiles;

impl HasData for SandboxFiles {
    type Data<'a> = VfsCtxView<'a>;
}

/// Adds the `wasmbox:sandbox/files` import to `linker`.
///
/// # Errors
/// When the import's functions cannot be defined (a host bug).
pub(crate) fn add_to_linker<T: VfsView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    files::add_to_linker::<T, SandboxFiles>(linker, T::vfs)
}

fn fs_error(fault: FsFault) -> FsError {
    match fault {
        FsFault::NoEntry => FsError::NoEntry,
        FsFault::Exist => FsError::Exists,
        FsFault::NotDirectory => FsError::NotDirectory,
        FsFault::IsDirectory => FsError::IsDirectory,
        FsFault::NotEmpty => FsError::NotEmpty,
        FsFault::ReadOnly => FsError::ReadOnly,
        FsFault::NotPermitted => FsError::NotPermitted,
        // No descriptors here: a node that vanished between two steps of one call
        // cannot happen under the lock, and would be a bad argument if it did.
        FsFault::Invalid | FsFault::BadDescriptor => FsError::Invalid,
        FsFault::NameTooLong => FsError::NameTooLong,
        FsFault::NoSpace => FsError::NoSpace,
        FsFault::FileTooLarge => FsError::TooLarge,
    }
}

/// `path` as the tree resolves it from `/`: without its leading slashes, `.` for `/`.
fn from_root(path: &str) -> Result<&str, FsFault> {
    if path.is_empty() {
        return Err(FsFault::NoEntry);
    }
    match path.trim_start_matches('/') {
        "" => Ok("."),
        relative => Ok(relative),
    }
}

fn resolve(tree: &Tree, path: &str) -> Result<Ino, FsFault> {
    tree.resolve(ROOT, from_root(path)?)
}

fn nanos(time: SystemTime) -> u64 {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
}

fn entry_kind(node_type: NodeType) -> EntryKind {
    match node_type {
        NodeType::Directory => EntryKind::Directory,
        NodeType::File => EntryKind::File,
    }
}

/// Replaces or extends the file at `path` with `data`, creating it if missing; on any
/// failure the tree is as it was.
fn write(tree: &mut Tree, path: &str, data: &[u8], append: bool) -> Result<(), FsFault> {
    let (dir, name) = tree.resolve_parent(ROOT, from_root(path)?)?;
    let (ino, created) = match tree.lookup(dir, name) {
        Some(ino) if tree.node_type(ino) == Some(NodeType::Directory) => return Err(FsFault::IsDirectory),
        Some(ino) => (ino, false),
        None => (tree.create_file(dir, name)?, true),
    };
    let old_len = tree.size(ino)?;
    let written = if append {
        tree.write(ino, old_len, data)
    } else {
        // Writing over the old bytes before cutting them keeps a failed write from
        // leaving the file emptied: growing is the only step that can fail.
        tree.write(ino, 0, data).and_then(|()| tree.set_size(ino, data.len() as u64))
    };
    if written.is_err() && created {
        // Nothing else holds the new file: unlinking it frees its count again.
        let _ = tree.unlink_file(dir, name);
    }
    written
}

/// Removes the file or the empty directory at `path`.
fn remove(tree: &mut Tree, path: &str) -> Result<(), FsFault> {
    let (dir, name) = tree.resolve_parent(ROOT, from_root(path)?)?;
    let ino = tree.lookup(dir, name).ok_or(FsFault::NoEntry)?;
    match tree.node_type(ino) {
        Some(NodeType::Directory) => tree.remove_dir(dir, name),
        _ => tree.unlink_file(dir, name),
    }
}

fn mkdir(tree: &mut Tree, path: &str) -> Result<(), FsFault> {
    let relative = from_root(path)?;
    if relative == "." {
        return Err(FsFault::Exist);
    }
    let (dir, name) = tree.resolve_parent(ROOT, relative)?;
    tree.create_dir(dir, name).map(drop)
}

fn rename(tree: &mut Tree, from: &str, to: &str) -> Result<(), FsFault> {
    let (old_dir, old_name) = tree.resolve_parent(ROOT, from_root(from)?)?;
    let (new_dir, new_name) = tree.resolve_parent(ROOT, from_root(to)?)?;
    tree.rename(old_dir, old_name, new_dir, new_name)
}

impl VfsCtxView<'_> {
    /// Runs `op` on the run's tree (built now if this is its first use).
    fn with_tree<R>(&mut self, op: impl FnOnce(&mut Tree) -> Result<R, FsFault>) -> Result<R, FsError> {
        let tree = self.vfs.tree().clone();
        let mut tree = tree.lock();
        op(&mut tree).map_err(fs_error)
    }
}

impl files::Host for VfsCtxView<'_> {
    async fn read(&mut self, path: String) -> Result<Vec<u8>, FsError> {
        self.with_tree(|tree| {
            let ino = resolve(tree, &path)?;
            let (bytes, _) = tree.read(ino, 0, u64::MAX)?;
            Ok(bytes.to_vec())
        })
    }

    async fn write(&mut self, path: String, data: Vec<u8>, append: bool) -> Result<(), FsError> {
        self.with_tree(|tree| write(tree, &path, &data, append))
    }

    async fn read_dir(&mut self, path: String) -> Result<Vec<DirEntry>, FsError> {
        self.with_tree(|tree| {
            let ino = resolve(tree, &path)?;
            let entries = tree.list(ino)?;
            Ok(entries.into_iter().map(|(name, node_type)| DirEntry { name, kind: entry_kind(node_type) }).collect())
        })
    }

    async fn stat(&mut self, path: String) -> Result<FileStat, FsError> {
        self.with_tree(|tree| {
            let stat = tree.stat(resolve(tree, &path)?)?;
            Ok(FileStat {
                kind: entry_kind(stat.node_type),
                size: stat.size,
                modified_ns: nanos(stat.modified),
                accessed_ns: nanos(stat.accessed),
            })
        })
    }

    async fn remove(&mut self, path: String) -> Result<(), FsError> {
        self.with_tree(|tree| remove(tree, &path))
    }

    async fn mkdir(&mut self, path: String) -> Result<(), FsError> {
        self.with_tree(|tree| mkdir(tree, &path))
    }

    async fn rename(&mut self, old_path: String, new_path: String) -> Result<(), FsError> {
        self.with_tree(|tree| rename(tree, &old_path, &new_path))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn tree(max_bytes: u64, max_files: u64) -> Tree {
        let input: Arc<[u8]> = Arc::from(&b"a,b\n1,2\n"[..]);
        Tree::new(max_bytes, max_files, [("data.csv", &input)])
    }

    fn read(tree: &Tree, path: &str) -> Result<Vec<u8>, FsFault> {
        let ino = resolve(tree, path)?;
        Ok(tree.read(ino, 0, u64::MAX)?.0.to_vec())
    }

    #[test]
    fn paths_resolve_from_the_root_with_or_without_a_slash_and_never_above_it() {
        let tree = tree(1 << 20, 16);
        assert_eq!(read(&tree, "/input/data.csv").unwrap(), b"a,b\n1,2\n");
        assert_eq!(read(&tree, "input/data.csv").unwrap(), b"a,b\n1,2\n");
        assert_eq!(read(&tree, "//tmp/../input/./data.csv").unwrap(), b"a,b\n1,2\n");
        for escape in ["/../etc/passwd", "..", "/tmp/../../etc/passwd", "../input/data.csv"] {
            assert_eq!(read(&tree, escape), Err(FsFault::NotPermitted), "{escape}");
        }
        assert_eq!(read(&tree, "/etc/passwd"), Err(FsFault::NoEntry));
        assert_eq!(read(&tree, ""), Err(FsFault::NoEntry));
        assert_eq!(resolve(&tree, "/"), Ok(ROOT));
    }

    #[test]
    fn writes_replace_or_append_and_the_read_only_mounts_refuse_them() {
        let mut tree = tree(1 << 20, 16);
        write(&mut tree, "/output/a.txt", b"hello world", false).unwrap();
        write(&mut tree, "/output/a.txt", b"bye", false).unwrap();
        assert_eq!(read(&tree, "/output/a.txt").unwrap(), b"bye");
        write(&mut tree, "output/a.txt", b"!", true).unwrap();
        assert_eq!(read(&tree, "/output/a.txt").unwrap(), b"bye!");
        assert_eq!(tree.used_bytes(), 4);
        assert_eq!(write(&mut tree, "/input/data.csv", b"x", false), Err(FsFault::ReadOnly));
        assert_eq!(write(&mut tree, "/input/new.csv", b"x", false), Err(FsFault::ReadOnly));
        assert_eq!(write(&mut tree, "/new.txt", b"x", false), Err(FsFault::ReadOnly));
        assert_eq!(write(&mut tree, "/output", b"x", false), Err(FsFault::IsDirectory));
        assert_eq!(write(&mut tree, "/output/missing/a", b"x", false), Err(FsFault::NoEntry));
        assert_eq!(remove(&mut tree, "/input/data.csv"), Err(FsFault::ReadOnly));
        assert_eq!(mkdir(&mut tree, "/input/d"), Err(FsFault::ReadOnly));
        assert_eq!(rename(&mut tree, "/input/data.csv", "/tmp/x"), Err(FsFault::ReadOnly));
    }

    #[test]
    fn a_write_past_the_quota_or_the_file_cap_changes_nothing() {
        let mut tree = tree(10, 2);
        write(&mut tree, "/tmp/a", b"12345678", false).unwrap();
        assert_eq!(write(&mut tree, "/tmp/a", b"123456789012", false), Err(FsFault::NoSpace));
        assert_eq!(read(&tree, "/tmp/a").unwrap(), b"12345678", "a failed replace keeps the old bytes");
        assert_eq!(write(&mut tree, "/tmp/a", b"abc", true), Err(FsFault::NoSpace));
        assert_eq!(write(&mut tree, "/tmp/b", b"abc", false), Err(FsFault::NoSpace));
        assert_eq!(resolve(&tree, "/tmp/b"), Err(FsFault::NoEntry), "no empty file is left behind");
        assert_eq!((tree.used_bytes(), tree.used_files()), (8, 1));
        write(&mut tree, "/tmp/b", b"ab", false).unwrap();
        assert_eq!(write(&mut tree, "/tmp/c", b"", false), Err(FsFault::NoSpace), "the file cap");
        assert_eq!(mkdir(&mut tree, "/tmp/d"), Err(FsFault::NoSpace));
        remove(&mut tree, "/tmp/a").unwrap();
        assert_eq!((tree.used_bytes(), tree.used_files()), (2, 1));
        mkdir(&mut tree, "/tmp/d").unwrap();
    }

    #[test]
    fn directories_are_made_listed_and_removed_only_when_empty() {
        let mut tree = tree(1 << 20, 16);
        mkdir(&mut tree, "/output/charts").unwrap();
        assert_eq!(mkdir(&mut tree, "/output/charts"), Err(FsFault::Exist));
        assert_eq!(mkdir(&mut tree, "/"), Err(FsFault::Exist));
        write(&mut tree, "/output/charts/a.svg", b"<svg/>", false).unwrap();
        let names: Vec<_> = tree.list(resolve(&tree, "/").unwrap()).unwrap().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["input", "output", "tmp"]);
        assert_eq!(remove(&mut tree, "/output/charts"), Err(FsFault::NotEmpty));
        rename(&mut tree, "/output/charts/a.svg", "/output/b.svg").unwrap();
        remove(&mut tree, "/output/charts").unwrap();
        assert_eq!(tree.output_files(), [("b.svg".to_owned(), b"<svg/>".to_vec())]);
        assert_eq!(remove(&mut tree, "/output/charts"), Err(FsFault::NoEntry));
    }
}
