//! The guest's files: a private in-memory filesystem per run, never a host directory.
//!
//! Each run's Store holds a [`Vfs`]: an inode tree in host memory ([`tree`]) with a byte
//! quota (`Limits::max_fs_bytes`) and a file-count cap (`Limits::max_fs_files`), seen by
//! the guest as one preopened directory `/` holding `/input` (the host's [`InputFiles`],
//! read-only), `/output` (returned with the outcome as [`OutputFile`]s) and `/tmp`
//! (scratch). The guest reaches it through `wasi:filesystem@0.2.12`, served here by our
//! own `bindgen!` of that interface: [`add_to_linker`] adds it after wasmtime-wasi's
//! `add_to_linker_async` with shadowing allowed, so it replaces wasmtime-wasi's
//! filesystem (which can only open host directories) and nothing else. It also adds
//! `wasmbox:sandbox/files` ([`sandbox_files`]), whole-file calls on the same tree for
//! guests whose language has no file API over WASI (JavaScript). The WASI context
//! (`wasi.rs`) still preopens no host path; this module opens none either: it names no
//! `std::fs` or `cap_std` item. A run that touches no file pays for an empty `Option`:
//! the tree is built on the guest's first filesystem call.
//!
//! # Security
//! Paths resolve inside the tree only: an absolute path, or a `..` above the descriptor
//! it is resolved from, is `not-permitted`; there are no symbolic or hard links
//! (`symlink-at` and `link-at` are `not-permitted`), so no two names alias one file and
//! no name leads out. Writes past the quota or the file cap fail with
//! `insufficient-space` (ENOSPC) by both write routes (`write` and the output streams),
//! as an ordinary error the guest may handle; SECURITY.md says why that is not latched.

mod files;
mod host;
mod sandbox_files;
#[cfg(test)]
mod tests;
mod tree;

use std::sync::{Arc, Mutex, MutexGuard};

use wasmtime::component::{HasData, Linker, ResourceTable};

pub use files::{InputFileError, InputFiles, OutputFile};
pub(crate) use tree::is_output_name;
use tree::Tree;

/// The tree, shared by the run's descriptors and by its file streams (which the WASI
/// streams host calls without the Store's state).
#[derive(Clone, Debug)]
pub(crate) struct SharedTree(Arc<Mutex<Tree>>);

impl SharedTree {
    fn lock(&self) -> MutexGuard<'_, Tree> {
        // Nothing panics while holding the lock; a poisoned tree is still consistent
        // enough to be dropped with the run.
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One run's filesystem, held by its Store.
#[derive(Debug)]
pub(crate) struct Vfs {
    max_bytes: u64,
    max_files: u64,
    inputs: InputFiles,
    /// Built on the first filesystem call, so a run that uses no file pays nothing.
    tree: Option<SharedTree>,
}

impl Vfs {
    /// A filesystem whose `/input` holds `inputs`, within the given quota and file cap.
    pub(crate) fn new(max_bytes: u64, max_files: u64, inputs: InputFiles) -> Vfs {
        Vfs { max_bytes, max_files, inputs, tree: None }
    }

    fn tree(&mut self) -> &SharedTree {
        let (max_bytes, max_files, inputs) = (self.max_bytes, self.max_files, &self.inputs);
        self.tree
            .get_or_insert_with(|| SharedTree(Arc::new(Mutex::new(Tree::new(max_bytes, max_files, inputs.iter())))))
    }

    /// The files the guest left under `/output`, in name order.
    pub(crate) fn into_outputs(self) -> Vec<OutputFile> {
        self.outputs()
    }

    /// The files under `/output` now, in name order (a session's step returns them and
    /// keeps them).
    pub(crate) fn outputs(&self) -> Vec<OutputFile> {
        match &self.tree {
            None => Vec::new(),
            Some(tree) => {
                tree.lock().output_files().into_iter().map(|(name, bytes)| OutputFile { name, bytes }).collect()
            }
        }
    }
}

/// A borrowed view of a run's filesystem and its resource table, which the bindings'
/// host traits are implemented on.
pub(crate) struct VfsCtxView<'a> {
    pub(crate) vfs: &'a mut Vfs,
    pub(crate) table: &'a mut ResourceTable,
}

/// Projects the filesystem out of a Store's data.
pub(crate) trait VfsView: Send {
    /// The run's filesystem and resource table.
    fn vfs(&mut self) -> VfsCtxView<'_>;
}

/// The `HasData` marker of the filesystem's bindings.
pub(crate) struct VfsFs;

impl HasData for VfsFs {
    type Data<'a> = VfsCtxView<'a>;
}

/// Adds the in-memory `wasi:filesystem` to a linker that already holds wasmtime-wasi's,
/// replacing its `types` and `preopens`, and adds `wasmbox:sandbox/files` on the same
/// tree. The replacement relies on the two being the same WIT version; `tests.rs`
/// (`the_filesystem_shadows_wasmtime_wasis_at_the_same_version`) fails when they drift
/// apart.
///
/// # Errors
/// When the bindings' functions cannot be defined (a host bug).
pub(crate) fn add_to_linker<T: VfsView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let added = host::add_to_linker(linker);
    linker.allow_shadowing(false);
    added?;
    sandbox_files::add_to_linker(linker)
}
