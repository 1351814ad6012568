//! The inode tree: directories and files in host memory, with the byte quota and the
//! file-count cap, and the path rules that keep every lookup inside it. No wasmtime
//! types: `tests.rs` checks every rule without a guest.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

/// An inode number. Never reused within a tree, so a stale number finds nothing.
pub(crate) type Ino = u64;

/// The root directory `/`: read-only, holding the three mounts.
pub(crate) const ROOT: Ino = 0;
/// Where the host's input files are: read-only.
pub(crate) const INPUT_DIR: &str = "input";
/// What the guest leaves here is returned with the outcome.
pub(crate) const OUTPUT_DIR: &str = "output";
/// Scratch space, dropped with the run.
pub(crate) const TMP_DIR: &str = "tmp";

/// The longest name of one directory entry, as on Linux.
pub(crate) const MAX_NAME_BYTES: usize = 255;
/// The longest path a guest may pass, as Linux's `PATH_MAX`.
pub(crate) const MAX_PATH_BYTES: usize = 4096;
/// How deep directories may nest below `/`: it bounds the names of output files and the
/// walks over the tree.
pub(crate) const MAX_DEPTH: usize = 64;

/// Why a tree operation failed; each maps to one WASI `error-code` (and errno).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FsFault {
    /// ENOENT.
    #[error("no such file or directory")]
    NoEntry,
    /// EEXIST.
    #[error("file exists")]
    Exist,
    /// ENOTDIR.
    #[error("not a directory")]
    NotDirectory,
    /// EISDIR.
    #[error("is a directory")]
    IsDirectory,
    /// ENOTEMPTY.
    #[error("directory not empty")]
    NotEmpty,
    /// EROFS: `/`, `/input` and everything in it.
    #[error("read-only file system")]
    ReadOnly,
    /// EPERM: absolute paths, `..` above the descriptor, links.
    #[error("operation not permitted")]
    NotPermitted,
    /// EINVAL.
    #[error("invalid argument")]
    Invalid,
    /// ENAMETOOLONG: a name, a path or a nesting depth past its cap.
    #[error("file name too long")]
    NameTooLong,
    /// ENOSPC: the byte quota or the file-count cap.
    #[error("no space left on device")]
    NoSpace,
    /// EBADF: a descriptor without the right (reading a write-only file).
    #[error("bad file descriptor")]
    BadDescriptor,
    /// EFBIG: an offset past what a file can hold.
    #[error("file too large")]
    FileTooLarge,
}

/// What a path names, for `stat` and directory listings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeType {
    Directory,
    File,
}

/// A file's bytes: shared with the host (an input file, never written) or the guest's own.
#[derive(Debug)]
enum Content {
    Shared(Arc<[u8]>),
    Owned(Vec<u8>),
}

impl Content {
    fn bytes(&self) -> &[u8] {
        match self {
            Content::Shared(bytes) => bytes,
            Content::Owned(bytes) => bytes,
        }
    }
}

#[derive(Debug)]
enum Kind {
    File(Content),
    Dir(BTreeMap<String, Ino>),
}

#[derive(Debug)]
struct Node {
    kind: Kind,
    parent: Ino,
    /// Whether its data (a file) or its entries (a directory) may change.
    writable: bool,
    /// How deep below `/` it is (the root is 0).
    depth: usize,
    /// Open descriptors and streams: an unlinked node lives until the last one closes.
    open: u32,
    /// Still reachable from `/`.
    linked: bool,
    /// Whether it counts against the quota and the file cap (the guest made it).
    counted: bool,
    modified: SystemTime,
    accessed: SystemTime,
}

/// A node's metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NodeStat {
    pub(crate) node_type: NodeType,
    pub(crate) size: u64,
    pub(crate) modified: SystemTime,
    pub(crate) accessed: SystemTime,
}

/// One run's filesystem: `/` (read-only) holding `/input` (read-only, the host's files),
/// `/output` and `/tmp` (writable), within `max_bytes` of file data and `max_files`
/// files and directories made by the guest.
#[derive(Debug)]
pub(crate) struct Tree {
    nodes: HashMap<Ino, Node>,
    next_ino: Ino,
    max_bytes: u64,
    used_bytes: u64,
    max_files: u64,
    used_files: u64,
    output: Ino,
}

impl Tree {
    /// An empty tree with the three mounts, `inputs` (relative paths, already checked by
    /// [`check_relative_name`]) under `/input`.
    pub(crate) fn new<'a>(
        max_bytes: u64,
        max_files: u64,
        inputs: impl IntoIterator<Item = (&'a str, &'a Arc<[u8]>)>,
    ) -> Tree {
        let now = SystemTime::now();
        let mut tree = Tree {
            nodes: HashMap::new(),
            next_ino: ROOT,
            max_bytes,
            used_bytes: 0,
            max_files,
            used_files: 0,
            output: 0,
        };
        let root = tree.insert(Kind::Dir(BTreeMap::new()), ROOT, false, 0, false, now);
        debug_assert_eq!(root, ROOT);
        let input = tree.add_entry(ROOT, INPUT_DIR, Kind::Dir(BTreeMap::new()), false, false, now);
        tree.output = tree.add_entry(ROOT, OUTPUT_DIR, Kind::Dir(BTreeMap::new()), true, false, now);
        tree.add_entry(ROOT, TMP_DIR, Kind::Dir(BTreeMap::new()), true, false, now);
        for (name, bytes) in inputs {
            let mut dir = input;
            let mut parts = name.split('/').peekable();
            while let Some(part) = parts.next() {
                let existing = tree.entries(dir).and_then(|entries| entries.get(part).copied());
                if parts.peek().is_none() {
                    // A later input of the same name replaces an earlier one; a name that
                    // is already a directory is left as it is (InputFiles refuses both).
                    if existing.is_none() {
                        let kind = Kind::File(Content::Shared(Arc::clone(bytes)));
                        tree.add_entry(dir, part, kind, false, false, now);
                    }
                } else {
                    dir = match existing {
                        Some(ino) if tree.node_type(ino) == Some(NodeType::Directory) => ino,
                        Some(_) => break,
                        None => tree.add_entry(dir, part, Kind::Dir(BTreeMap::new()), false, false, now),
                    };
                }
            }
        }
        tree
    }

    fn insert(&mut self, kind: Kind, parent: Ino, writable: bool, depth: usize, counted: bool, now: SystemTime) -> Ino {
        let ino = self.next_ino;
        self.next_ino += 1;
        let node = Node { kind, parent, writable, depth, open: 0, linked: true, counted, modified: now, accessed: now };
        self.nodes.insert(ino, node);
        ino
    }

    fn add_entry(&mut self, dir: Ino, name: &str, kind: Kind, writable: bool, counted: bool, now: SystemTime) -> Ino {
        let depth = self.nodes.get(&dir).map_or(0, |node| node.depth + 1);
        let ino = self.insert(kind, dir, writable, depth, counted, now);
        if let Some(Node { kind: Kind::Dir(entries), modified, .. }) = self.nodes.get_mut(&dir) {
            entries.insert(name.to_owned(), ino);
            *modified = now;
        }
        ino
    }

    fn node(&self, ino: Ino) -> Result<&Node, FsFault> {
        self.nodes.get(&ino).ok_or(FsFault::BadDescriptor)
    }

    fn node_mut(&mut self, ino: Ino) -> Result<&mut Node, FsFault> {
        self.nodes.get_mut(&ino).ok_or(FsFault::BadDescriptor)
    }

    fn entries(&self, ino: Ino) -> Option<&BTreeMap<String, Ino>> {
        match self.nodes.get(&ino).map(|node| &node.kind) {
            Some(Kind::Dir(entries)) => Some(entries),
            _ => None,
        }
    }

    /// File data made by the guest, in bytes (what the quota counts).
    #[cfg(test)]
    pub(crate) fn used_bytes(&self) -> u64 {
        self.used_bytes
    }

    /// Files and directories made by the guest (what the file cap counts).
    #[cfg(test)]
    pub(crate) fn used_files(&self) -> u64 {
        self.used_files
    }

    pub(crate) fn node_type(&self, ino: Ino) -> Option<NodeType> {
        self.nodes.get(&ino).map(|node| match node.kind {
            Kind::Dir(_) => NodeType::Directory,
            Kind::File(_) => NodeType::File,
        })
    }

    /// Whether the node's data (a file) or entries (a directory) may change.
    pub(crate) fn is_writable(&self, ino: Ino) -> bool {
        self.nodes.get(&ino).is_some_and(|node| node.writable)
    }

    /// A descriptor or stream holds `ino` open.
    pub(crate) fn retain(&mut self, ino: Ino) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.open = node.open.saturating_add(1);
        }
    }

    /// A descriptor or stream let go of `ino`; an unlinked node goes with its last one.
    pub(crate) fn release(&mut self, ino: Ino) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.open = node.open.saturating_sub(1);
            if node.open == 0 && !node.linked {
                self.free(ino);
            }
        }
    }

    fn free(&mut self, ino: Ino) {
        if let Some(node) = self.nodes.remove(&ino) {
            if node.counted {
                self.used_files = self.used_files.saturating_sub(1);
                if let Kind::File(content) = &node.kind {
                    self.used_bytes = self.used_bytes.saturating_sub(content.bytes().len() as u64);
                }
            }
        }
    }

    /// Takes `ino` out of its directory; it is freed now or when its last holder closes.
    fn unlink(&mut self, parent: Ino, name: &str, ino: Ino) {
        let now = SystemTime::now();
        if let Some(Node { kind: Kind::Dir(entries), modified, .. }) = self.nodes.get_mut(&parent) {
            entries.remove(name);
            *modified = now;
        }
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.linked = false;
            if node.open == 0 {
                self.free(ino);
            }
        }
    }

    /// Resolves `path` relative to the directory `base`. WASI's rule, which keeps a
    /// lookup inside the tree of its descriptor: an absolute path, or a `..` that would
    /// climb above `base`, is `NotPermitted`. There are no links to follow.
    pub(crate) fn resolve(&self, base: Ino, path: &str) -> Result<Ino, FsFault> {
        let components = split(path)?;
        let mut stack = vec![base];
        for component in components {
            let dir = *stack.last().unwrap_or(&base);
            self.walk(&mut stack, dir, component)?;
        }
        Ok(*stack.last().unwrap_or(&base))
    }

    fn walk(&self, stack: &mut Vec<Ino>, dir: Ino, component: &str) -> Result<(), FsFault> {
        let entries = self.entries(dir).ok_or(FsFault::NotDirectory)?;
        match component {
            "." => {}
            ".." => {
                if stack.len() == 1 {
                    return Err(FsFault::NotPermitted);
                }
                stack.pop();
            }
            name => stack.push(*entries.get(name).ok_or(FsFault::NoEntry)?),
        }
        Ok(())
    }

    /// Resolves all of `path` but its last component: the directory it names an entry
    /// of, and the entry's name (never `.` or `..`).
    pub(crate) fn resolve_parent<'p>(&self, base: Ino, path: &'p str) -> Result<(Ino, &'p str), FsFault> {
        let mut components = split(path)?;
        let name = components.pop().ok_or(FsFault::NoEntry)?;
        if name == "." || name == ".." {
            return Err(FsFault::Invalid);
        }
        if name.len() > MAX_NAME_BYTES {
            return Err(FsFault::NameTooLong);
        }
        let mut stack = vec![base];
        for component in components {
            let dir = *stack.last().unwrap_or(&base);
            self.walk(&mut stack, dir, component)?;
        }
        let dir = *stack.last().unwrap_or(&base);
        self.entries(dir).ok_or(FsFault::NotDirectory)?;
        Ok((dir, name))
    }

    /// The entry `name` of directory `dir`, if any.
    pub(crate) fn lookup(&self, dir: Ino, name: &str) -> Option<Ino> {
        self.entries(dir).and_then(|entries| entries.get(name).copied())
    }

    /// Checks that `dir` can take a new entry, and the file cap.
    fn check_new_entry(&self, dir: Ino) -> Result<usize, FsFault> {
        let node = self.node(dir)?;
        if !node.writable {
            return Err(FsFault::ReadOnly);
        }
        if !node.linked {
            return Err(FsFault::NoEntry);
        }
        if node.depth + 1 > MAX_DEPTH {
            return Err(FsFault::NameTooLong);
        }
        if self.used_files >= self.max_files {
            return Err(FsFault::NoSpace);
        }
        Ok(node.depth + 1)
    }

    /// Creates an empty file `name` in `dir`.
    pub(crate) fn create_file(&mut self, dir: Ino, name: &str) -> Result<Ino, FsFault> {
        self.create(dir, name, Kind::File(Content::Owned(Vec::new())))
    }

    /// Creates an empty directory `name` in `dir`.
    pub(crate) fn create_dir(&mut self, dir: Ino, name: &str) -> Result<Ino, FsFault> {
        self.create(dir, name, Kind::Dir(BTreeMap::new()))
    }

    fn create(&mut self, dir: Ino, name: &str, kind: Kind) -> Result<Ino, FsFault> {
        check_name(name)?;
        if self.lookup(dir, name).is_some() {
            return Err(FsFault::Exist);
        }
        self.check_new_entry(dir)?;
        self.used_files += 1;
        Ok(self.add_entry(dir, name, kind, true, true, SystemTime::now()))
    }

    /// Removes the file `name` from `dir`.
    pub(crate) fn unlink_file(&mut self, dir: Ino, name: &str) -> Result<(), FsFault> {
        let ino = self.lookup(dir, name).ok_or(FsFault::NoEntry)?;
        if self.node_type(ino) == Some(NodeType::Directory) {
            return Err(FsFault::IsDirectory);
        }
        if !self.node(dir)?.writable {
            return Err(FsFault::ReadOnly);
        }
        self.unlink(dir, name, ino);
        Ok(())
    }

    /// Removes the empty directory `name` from `dir`.
    pub(crate) fn remove_dir(&mut self, dir: Ino, name: &str) -> Result<(), FsFault> {
        let ino = self.lookup(dir, name).ok_or(FsFault::NoEntry)?;
        let entries = self.entries(ino).ok_or(FsFault::NotDirectory)?;
        if !self.node(dir)?.writable {
            return Err(FsFault::ReadOnly);
        }
        if !entries.is_empty() {
            return Err(FsFault::NotEmpty);
        }
        self.unlink(dir, name, ino);
        Ok(())
    }

    /// Moves `old_dir/old_name` to `new_dir/new_name`, replacing a file there, or an
    /// empty directory when moving a directory.
    pub(crate) fn rename(&mut self, old_dir: Ino, old_name: &str, new_dir: Ino, new_name: &str) -> Result<(), FsFault> {
        let ino = self.lookup(old_dir, old_name).ok_or(FsFault::NoEntry)?;
        check_name(new_name)?;
        if !self.node(old_dir)?.writable || !self.node(new_dir)?.writable {
            return Err(FsFault::ReadOnly);
        }
        if !self.node(new_dir)?.linked {
            return Err(FsFault::NoEntry);
        }
        let moving_dir = self.node_type(ino) == Some(NodeType::Directory);
        if moving_dir {
            // Not into itself or below it.
            let mut at = new_dir;
            loop {
                if at == ino {
                    return Err(FsFault::Invalid);
                }
                if at == ROOT {
                    break;
                }
                at = self.node(at)?.parent;
            }
        }
        let replaced = self.lookup(new_dir, new_name);
        if replaced == Some(ino) {
            return Ok(());
        }
        if let Some(target) = replaced {
            match (moving_dir, self.entries(target)) {
                (false, Some(_)) => return Err(FsFault::IsDirectory),
                (true, None) => return Err(FsFault::NotDirectory),
                (true, Some(entries)) if !entries.is_empty() => return Err(FsFault::NotEmpty),
                _ => {}
            }
        }
        let new_depth = self.node(new_dir)?.depth + 1;
        if moving_dir && new_depth + self.subtree_height(ino) > MAX_DEPTH {
            return Err(FsFault::NameTooLong);
        }
        if let Some(target) = replaced {
            self.unlink(new_dir, new_name, target);
        }
        let now = SystemTime::now();
        if let Some(Node { kind: Kind::Dir(entries), modified, .. }) = self.nodes.get_mut(&old_dir) {
            entries.remove(old_name);
            *modified = now;
        }
        if let Some(Node { kind: Kind::Dir(entries), modified, .. }) = self.nodes.get_mut(&new_dir) {
            entries.insert(new_name.to_owned(), ino);
            *modified = now;
        }
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.parent = new_dir;
        }
        self.set_depths(ino, new_depth);
        Ok(())
    }

    /// How many levels of directories lie below `ino` (0 for a file or an empty one).
    fn subtree_height(&self, ino: Ino) -> usize {
        let base = self.nodes.get(&ino).map_or(0, |node| node.depth);
        let mut height = 0;
        let mut pending = vec![ino];
        while let Some(at) = pending.pop() {
            if let Some(node) = self.nodes.get(&at) {
                height = height.max(node.depth - base);
                if let Kind::Dir(entries) = &node.kind {
                    pending.extend(entries.values().copied());
                }
            }
        }
        height
    }

    fn set_depths(&mut self, ino: Ino, depth: usize) {
        let mut pending = vec![(ino, depth)];
        while let Some((at, depth)) = pending.pop() {
            if let Some(node) = self.nodes.get_mut(&at) {
                node.depth = depth;
                if let Kind::Dir(entries) = &node.kind {
                    pending.extend(entries.values().map(|&child| (child, depth + 1)));
                }
            }
        }
    }

    /// A node's metadata.
    pub(crate) fn stat(&self, ino: Ino) -> Result<NodeStat, FsFault> {
        let node = self.node(ino)?;
        let (node_type, size) = match &node.kind {
            Kind::Dir(entries) => (NodeType::Directory, entries.len() as u64),
            Kind::File(content) => (NodeType::File, content.bytes().len() as u64),
        };
        Ok(NodeStat { node_type, size, modified: node.modified, accessed: node.accessed })
    }

    /// Sets a writable node's times (`None` leaves one as it is).
    pub(crate) fn set_times(
        &mut self,
        ino: Ino,
        accessed: Option<SystemTime>,
        modified: Option<SystemTime>,
    ) -> Result<(), FsFault> {
        let node = self.node_mut(ino)?;
        if !node.writable {
            return Err(FsFault::ReadOnly);
        }
        if let Some(accessed) = accessed {
            node.accessed = accessed;
        }
        if let Some(modified) = modified {
            node.modified = modified;
        }
        Ok(())
    }

    /// A directory's entries, in name order.
    pub(crate) fn list(&self, ino: Ino) -> Result<Vec<(String, NodeType)>, FsFault> {
        let entries = self.entries(ino).ok_or(FsFault::NotDirectory)?;
        Ok(entries
            .iter()
            .map(|(name, &child)| (name.clone(), self.node_type(child).unwrap_or(NodeType::File)))
            .collect())
    }

    /// Up to `len` bytes of a file from `offset`, and whether they reach its end.
    pub(crate) fn read(&self, ino: Ino, offset: u64, len: u64) -> Result<(&[u8], bool), FsFault> {
        let node = self.node(ino)?;
        let Kind::File(content) = &node.kind else {
            return Err(FsFault::IsDirectory);
        };
        let bytes = content.bytes();
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(bytes.len());
        let end = start.saturating_add(usize::try_from(len).unwrap_or(usize::MAX)).min(bytes.len());
        Ok((&bytes[start..end], end == bytes.len()))
    }

    /// A file's size.
    pub(crate) fn size(&self, ino: Ino) -> Result<u64, FsFault> {
        Ok(self.stat(ino)?.size)
    }

    /// The owned bytes of a writable file, after checking that it may grow to `new_len`
    /// within the quota (a hole counts like written bytes).
    fn grow_to(&mut self, ino: Ino, new_len: u64) -> Result<&mut Vec<u8>, FsFault> {
        let max_bytes = self.max_bytes;
        let used_bytes = self.used_bytes;
        let node = self.nodes.get_mut(&ino).ok_or(FsFault::BadDescriptor)?;
        if !node.writable {
            return Err(FsFault::ReadOnly);
        }
        let Kind::File(content) = &mut node.kind else {
            return Err(FsFault::IsDirectory);
        };
        let Content::Owned(bytes) = content else {
            return Err(FsFault::ReadOnly);
        };
        let old_len = bytes.len() as u64;
        if new_len > old_len {
            let growth = new_len - old_len;
            if used_bytes.saturating_add(growth) > max_bytes {
                return Err(FsFault::NoSpace);
            }
            usize::try_from(new_len).map_err(|_| FsFault::FileTooLarge)?;
            self.used_bytes += growth;
        } else {
            self.used_bytes = self.used_bytes.saturating_sub(old_len - new_len);
        }
        node.modified = SystemTime::now();
        Ok(bytes)
    }

    /// Writes `data` at `offset`, all of it or nothing.
    pub(crate) fn write(&mut self, ino: Ino, offset: u64, data: &[u8]) -> Result<(), FsFault> {
        let end = offset.checked_add(data.len() as u64).ok_or(FsFault::FileTooLarge)?;
        let old_len = self.size(ino)?;
        let bytes = self.grow_to(ino, end.max(old_len))?;
        let start = offset as usize;
        if bytes.len() < start + data.len() {
            bytes.resize(start + data.len(), 0);
        }
        bytes[start..start + data.len()].copy_from_slice(data);
        Ok(())
    }

    /// Truncates or extends (with zeros) a file to `len` bytes.
    pub(crate) fn set_size(&mut self, ino: Ino, len: u64) -> Result<(), FsFault> {
        let bytes = self.grow_to(ino, len)?;
        bytes.resize(len as usize, 0);
        if len == 0 {
            bytes.shrink_to_fit();
        }
        Ok(())
    }

    /// The files under `/output`, by their path relative to it, in name order. Empty
    /// directories are left out.
    pub(crate) fn output_files(&self) -> Vec<(String, Vec<u8>)> {
        let mut files = Vec::new();
        let mut pending = vec![(self.output, String::new())];
        while let Some((dir, prefix)) = pending.pop() {
            let Some(entries) = self.entries(dir) else { continue };
            for (name, &child) in entries.iter().rev() {
                let path = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
                match self.nodes.get(&child).map(|node| &node.kind) {
                    Some(Kind::Dir(_)) => pending.push((child, path)),
                    Some(Kind::File(content)) => files.push((path, content.bytes().to_vec())),
                    None => {}
                }
            }
        }
        files.sort_by(|a, b| a.0.cmp(&b.0));
        files
    }
}

/// The components of a guest path, after the checks every path gets.
fn split(path: &str) -> Result<Vec<&str>, FsFault> {
    if path.len() > MAX_PATH_BYTES {
        return Err(FsFault::NameTooLong);
    }
    if path.is_empty() {
        return Err(FsFault::NoEntry);
    }
    if path.starts_with('/') {
        return Err(FsFault::NotPermitted);
    }
    if path.contains('\0') {
        return Err(FsFault::Invalid);
    }
    Ok(path.split('/').filter(|part| !part.is_empty()).collect())
}

/// A new entry's name: not empty, no `/` or NUL, not `.` or `..`, within the length cap.
fn check_name(name: &str) -> Result<(), FsFault> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(FsFault::Invalid);
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(FsFault::NameTooLong);
    }
    Ok(())
}

/// Whether `name` is a path the tree can give an output file: components within
/// [`MAX_NAME_BYTES`], none empty, `.` or `..` or holding NUL, at most [`MAX_DEPTH`] of
/// them. (Unlike input names, a guest's may hold a backslash.)
pub(crate) fn is_output_name(name: &str) -> bool {
    let mut depth = 0;
    name.split('/').all(|part| {
        depth += 1;
        !part.is_empty() && part != "." && part != ".." && !part.contains('\0') && part.len() <= MAX_NAME_BYTES
    }) && depth <= MAX_DEPTH
}

/// Checks a relative path as the host names an input file or as an output file is
/// named: components of at most [`MAX_NAME_BYTES`], none empty, `.` or `..`, no NUL or
/// backslash, at most [`MAX_DEPTH`] of them below the mount.
pub(crate) fn check_relative_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("the name is empty");
    }
    if name.len() > MAX_PATH_BYTES {
        return Err("the name is longer than 4096 bytes");
    }
    if name.contains(['\0', '\\']) {
        return Err("the name contains a NUL or a backslash");
    }
    let mut depth = 0;
    for part in name.split('/') {
        depth += 1;
        if part.is_empty() || part == "." || part == ".." {
            return Err("the name has an empty, `.` or `..` component (or starts with `/`)");
        }
        if part.len() > MAX_NAME_BYTES {
            return Err("a component of the name is longer than 255 bytes");
        }
    }
    if depth >= MAX_DEPTH {
        return Err("the name nests too deep");
    }
    Ok(())
}
