//! `wasi:filesystem@0.2.12` over the inode tree: the bindings, the host traits, and the
//! file streams the WASI `io` host reads and writes.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wasmtime::component::{Linker, Resource, ResourceTableError};
use wasmtime_wasi_io::bytes::Bytes;
use wasmtime_wasi_io::poll::Pollable;
use wasmtime_wasi_io::streams::{
    DynInputStream, DynOutputStream, InputStream, OutputStream, StreamError, StreamResult,
};

use super::tree::{FsFault, Ino, NodeStat, NodeType, ROOT};
use super::{SharedTree, VfsCtxView, VfsFs, VfsView};

mod gen_ {
    wasmtime::component::bindgen!({
        // The crate's copy of wasi:filesystem@0.2.12 and its deps, as wasmtime-wasi
        // 50.0.1 registers it: the same version, so ours shadows it.
        path: "src/vfs/wit",
        world: "wasmbox:vfs/fs",
        // Every operation is in memory and never blocks.
        imports: { default: trappable },
        require_store_data_send: true,
        trappable_error_type: {
            "wasi:filesystem/types.error-code" => super::FsErr,
        },
        with: {
            // Streams and pollables stay wasmtime-wasi's: its io host serves our file
            // streams like any other.
            "wasi:io/poll": wasmtime_wasi_io::bindings::wasi::io::poll,
            "wasi:io/streams": wasmtime_wasi_io::bindings::wasi::io::streams,
            "wasi:io/error": wasmtime_wasi_io::bindings::wasi::io::error,
            "wasi:clocks/wall-clock": wasmtime_wasi::p2::bindings::clocks::wall_clock,
            "wasi:filesystem/types.descriptor": super::Descriptor,
            "wasi:filesystem/types.directory-entry-stream": super::DirIter,
        },
    });
}

use gen_::wasi::filesystem::{preopens, types};
use types::{
    Advice, DescriptorFlags, DescriptorStat, DescriptorType, DirectoryEntry, ErrorCode, Filesize, MetadataHashValue,
    NewTimestamp, OpenFlags, PathFlags,
};
use wasmtime_wasi::p2::bindings::clocks::wall_clock::Datetime;

/// Adds `types` and `preopens` (the caller allows shadowing).
pub(super) fn add_to_linker<T: VfsView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    types::add_to_linker::<T, VfsFs>(linker, T::vfs)?;
    preopens::add_to_linker::<T, VfsFs>(linker, T::vfs)?;
    Ok(())
}

/// A filesystem error: a WASI error code for the guest, or a trap (a host bug, such as a
/// resource of the wrong type).
pub(crate) enum FsErr {
    Code(ErrorCode),
    Trap(wasmtime::Error),
}

type FsResult<T> = Result<T, FsErr>;

impl From<ErrorCode> for FsErr {
    fn from(code: ErrorCode) -> Self {
        FsErr::Code(code)
    }
}

impl From<FsFault> for FsErr {
    fn from(fault: FsFault) -> Self {
        FsErr::Code(error_code(fault))
    }
}

impl From<ResourceTableError> for FsErr {
    fn from(error: ResourceTableError) -> Self {
        FsErr::Trap(error.into())
    }
}

fn error_code(fault: FsFault) -> ErrorCode {
    match fault {
        FsFault::NoEntry => ErrorCode::NoEntry,
        FsFault::Exist => ErrorCode::Exist,
        FsFault::NotDirectory => ErrorCode::NotDirectory,
        FsFault::IsDirectory => ErrorCode::IsDirectory,
        FsFault::NotEmpty => ErrorCode::NotEmpty,
        FsFault::ReadOnly => ErrorCode::ReadOnly,
        FsFault::NotPermitted => ErrorCode::NotPermitted,
        FsFault::Invalid => ErrorCode::Invalid,
        FsFault::NameTooLong => ErrorCode::NameTooLong,
        FsFault::NoSpace => ErrorCode::InsufficientSpace,
        FsFault::BadDescriptor => ErrorCode::BadDescriptor,
        FsFault::FileTooLarge => ErrorCode::FileTooLarge,
    }
}

/// An open file or directory: the `descriptor` resource.
pub struct Descriptor {
    ino: Ino,
    read: bool,
    write: bool,
}

/// A directory listing, taken when it was opened: the `directory-entry-stream` resource.
pub struct DirIter {
    entries: std::vec::IntoIter<DirectoryEntry>,
}

fn descriptor_type(node_type: NodeType) -> DescriptorType {
    match node_type {
        NodeType::Directory => DescriptorType::Directory,
        NodeType::File => DescriptorType::RegularFile,
    }
}

fn datetime(time: SystemTime) -> Datetime {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    Datetime { seconds: since.as_secs(), nanoseconds: since.subsec_nanos() }
}

fn descriptor_stat(stat: NodeStat) -> DescriptorStat {
    DescriptorStat {
        type_: descriptor_type(stat.node_type),
        link_count: 1,
        size: stat.size,
        data_access_timestamp: Some(datetime(stat.accessed)),
        data_modification_timestamp: Some(datetime(stat.modified)),
        status_change_timestamp: Some(datetime(stat.modified)),
    }
}

fn new_time(timestamp: NewTimestamp) -> Option<SystemTime> {
    match timestamp {
        NewTimestamp::NoChange => None,
        NewTimestamp::Now => Some(SystemTime::now()),
        NewTimestamp::Timestamp(at) => {
            UNIX_EPOCH.checked_add(Duration::new(at.seconds, at.nanoseconds.min(999_999_999)))
        }
    }
}

impl VfsCtxView<'_> {
    fn descriptor(&self, fd: &Resource<Descriptor>) -> FsResult<(Ino, bool, bool)> {
        let descriptor = self.table.get(fd)?;
        Ok((descriptor.ino, descriptor.read, descriptor.write))
    }

    /// The directory a path-taking call starts from.
    fn dir(&mut self, fd: &Resource<Descriptor>) -> FsResult<(Ino, SharedTree)> {
        let (ino, ..) = self.descriptor(fd)?;
        let tree = self.vfs.tree().clone();
        if tree.lock().node_type(ino) != Some(NodeType::Directory) {
            return Err(ErrorCode::NotDirectory.into());
        }
        Ok((ino, tree))
    }

    fn open_descriptor(
        &mut self,
        tree: &SharedTree,
        ino: Ino,
        read: bool,
        write: bool,
    ) -> FsResult<Resource<Descriptor>> {
        let fd = self.table.push(Descriptor { ino, read, write })?;
        tree.lock().retain(ino);
        Ok(fd)
    }
}

impl preopens::Host for VfsCtxView<'_> {
    fn get_directories(&mut self) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
        let tree = self.vfs.tree().clone();
        let root = self.open_descriptor(&tree, ROOT, true, false).map_err(|err| match err {
            FsErr::Trap(trap) => trap,
            FsErr::Code(code) => wasmtime::format_err!("opening the root: {code:?}"),
        })?;
        Ok(vec![(root, "/".to_owned())])
    }
}

impl types::Host for VfsCtxView<'_> {
    fn convert_error_code(&mut self, err: FsErr) -> wasmtime::Result<ErrorCode> {
        match err {
            FsErr::Code(code) => Ok(code),
            FsErr::Trap(trap) => Err(trap),
        }
    }

    /// The p1 adapter and wasi-libc turn a failed stream write into an errno through
    /// this: without it a full quota would reach the guest as EIO, not ENOSPC.
    fn filesystem_error_code(&mut self, err: Resource<wasmtime::Error>) -> wasmtime::Result<Option<ErrorCode>> {
        let err = self.table.get(&err)?;
        Ok(err.downcast_ref::<FsFault>().map(|fault| error_code(*fault)))
    }
}

impl types::HostDescriptor for VfsCtxView<'_> {
    fn read_via_stream(&mut self, fd: Resource<Descriptor>, offset: Filesize) -> FsResult<Resource<DynInputStream>> {
        let stream: DynInputStream = Box::new(self.file_stream(&fd, offset, Access::Read)?);
        Ok(self.table.push(stream)?)
    }

    fn write_via_stream(&mut self, fd: Resource<Descriptor>, offset: Filesize) -> FsResult<Resource<DynOutputStream>> {
        self.output_stream(&fd, offset, false)
    }

    fn append_via_stream(&mut self, fd: Resource<Descriptor>) -> FsResult<Resource<DynOutputStream>> {
        self.output_stream(&fd, 0, true)
    }

    fn advise(&mut self, fd: Resource<Descriptor>, _: Filesize, _: Filesize, _: Advice) -> FsResult<()> {
        self.descriptor(&fd)?;
        Ok(())
    }

    fn sync_data(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        self.descriptor(&fd)?;
        Ok(())
    }

    fn get_flags(&mut self, fd: Resource<Descriptor>) -> FsResult<DescriptorFlags> {
        let (ino, read, write) = self.descriptor(&fd)?;
        let tree = self.vfs.tree().clone();
        let tree = tree.lock();
        let mut flags = DescriptorFlags::empty();
        if read {
            flags |= DescriptorFlags::READ;
        }
        if write {
            flags |= DescriptorFlags::WRITE;
        }
        if tree.node_type(ino) == Some(NodeType::Directory) && tree.is_writable(ino) {
            flags |= DescriptorFlags::MUTATE_DIRECTORY;
        }
        Ok(flags)
    }

    fn get_type(&mut self, fd: Resource<Descriptor>) -> FsResult<DescriptorType> {
        let (ino, ..) = self.descriptor(&fd)?;
        let node_type = self.vfs.tree().lock().node_type(ino).ok_or(FsFault::BadDescriptor)?;
        Ok(descriptor_type(node_type))
    }

    fn set_size(&mut self, fd: Resource<Descriptor>, size: Filesize) -> FsResult<()> {
        let (ino, _, write) = self.descriptor(&fd)?;
        if !write {
            return Err(ErrorCode::BadDescriptor.into());
        }
        Ok(self.vfs.tree().lock().set_size(ino, size)?)
    }

    fn set_times(&mut self, fd: Resource<Descriptor>, accessed: NewTimestamp, modified: NewTimestamp) -> FsResult<()> {
        let (ino, ..) = self.descriptor(&fd)?;
        Ok(self.vfs.tree().lock().set_times(ino, new_time(accessed), new_time(modified))?)
    }

    fn read(&mut self, fd: Resource<Descriptor>, length: Filesize, offset: Filesize) -> FsResult<(Vec<u8>, bool)> {
        let (ino, read, _) = self.descriptor(&fd)?;
        if !read {
            return Err(ErrorCode::BadDescriptor.into());
        }
        let tree = self.vfs.tree().clone();
        let tree = tree.lock();
        let (bytes, end) = tree.read(ino, offset, length)?;
        Ok((bytes.to_vec(), end))
    }

    fn write(&mut self, fd: Resource<Descriptor>, buffer: Vec<u8>, offset: Filesize) -> FsResult<Filesize> {
        let (ino, _, write) = self.descriptor(&fd)?;
        if !write {
            return Err(ErrorCode::BadDescriptor.into());
        }
        self.vfs.tree().lock().write(ino, offset, &buffer)?;
        Ok(buffer.len() as Filesize)
    }

    fn read_directory(&mut self, fd: Resource<Descriptor>) -> FsResult<Resource<DirIter>> {
        let (ino, tree) = self.dir(&fd)?;
        let entries = tree.lock().list(ino)?;
        let entries: Vec<DirectoryEntry> = entries
            .into_iter()
            .map(|(name, node_type)| DirectoryEntry { type_: descriptor_type(node_type), name })
            .collect();
        Ok(self.table.push(DirIter { entries: entries.into_iter() })?)
    }

    fn sync(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        self.descriptor(&fd)?;
        Ok(())
    }

    fn create_directory_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let (base, tree) = self.dir(&fd)?;
        let mut tree = tree.lock();
        let (dir, name) = tree.resolve_parent(base, &path)?;
        tree.create_dir(dir, name)?;
        Ok(())
    }

    fn stat(&mut self, fd: Resource<Descriptor>) -> FsResult<DescriptorStat> {
        let (ino, ..) = self.descriptor(&fd)?;
        Ok(descriptor_stat(self.vfs.tree().lock().stat(ino)?))
    }

    fn stat_at(&mut self, fd: Resource<Descriptor>, _: PathFlags, path: String) -> FsResult<DescriptorStat> {
        let (base, tree) = self.dir(&fd)?;
        let tree = tree.lock();
        let ino = tree.resolve(base, &path)?;
        Ok(descriptor_stat(tree.stat(ino)?))
    }

    fn set_times_at(
        &mut self,
        fd: Resource<Descriptor>,
        _: PathFlags,
        path: String,
        accessed: NewTimestamp,
        modified: NewTimestamp,
    ) -> FsResult<()> {
        let (base, tree) = self.dir(&fd)?;
        let mut tree = tree.lock();
        let ino = tree.resolve(base, &path)?;
        Ok(tree.set_times(ino, new_time(accessed), new_time(modified))?)
    }

    /// No hard links: two names for one file would let a name outlive its checks.
    fn link_at(
        &mut self,
        fd: Resource<Descriptor>,
        _: PathFlags,
        _: String,
        new_fd: Resource<Descriptor>,
        _: String,
    ) -> FsResult<()> {
        self.descriptor(&fd)?;
        self.descriptor(&new_fd)?;
        Err(ErrorCode::NotPermitted.into())
    }

    fn open_at(
        &mut self,
        fd: Resource<Descriptor>,
        _: PathFlags,
        path: String,
        open_flags: OpenFlags,
        flags: DescriptorFlags,
    ) -> FsResult<Resource<Descriptor>> {
        let (base, tree) = self.dir(&fd)?;
        let read = flags.contains(DescriptorFlags::READ);
        let write = flags.contains(DescriptorFlags::WRITE);
        let ino = {
            let mut tree = tree.lock();
            let ino = if open_flags.contains(OpenFlags::CREATE) {
                if open_flags.contains(OpenFlags::DIRECTORY) {
                    return Err(ErrorCode::Invalid.into());
                }
                let (dir, name) = tree.resolve_parent(base, &path)?;
                match tree.lookup(dir, name) {
                    Some(_) if open_flags.contains(OpenFlags::EXCLUSIVE) => return Err(ErrorCode::Exist.into()),
                    Some(ino) => ino,
                    None => tree.create_file(dir, name)?,
                }
            } else {
                tree.resolve(base, &path)?
            };
            let node_type = tree.node_type(ino).ok_or(FsFault::NoEntry)?;
            let truncate = open_flags.contains(OpenFlags::TRUNCATE);
            if node_type == NodeType::Directory && (write || truncate) {
                return Err(ErrorCode::IsDirectory.into());
            }
            if node_type == NodeType::File && open_flags.contains(OpenFlags::DIRECTORY) {
                return Err(ErrorCode::NotDirectory.into());
            }
            if (write || truncate) && !tree.is_writable(ino) {
                return Err(ErrorCode::ReadOnly.into());
            }
            if truncate {
                tree.set_size(ino, 0)?;
            }
            ino
        };
        self.open_descriptor(&tree, ino, read || !write, write)
    }

    /// There are no symbolic links, so no path names one.
    fn readlink_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<String> {
        let (base, tree) = self.dir(&fd)?;
        tree.lock().resolve(base, &path)?;
        Err(ErrorCode::Invalid.into())
    }

    fn remove_directory_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let (base, tree) = self.dir(&fd)?;
        let mut tree = tree.lock();
        let (dir, name) = tree.resolve_parent(base, &path)?;
        Ok(tree.remove_dir(dir, name)?)
    }

    fn rename_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path: String,
        new_fd: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        let (old_base, tree) = self.dir(&fd)?;
        let (new_base, _) = self.dir(&new_fd)?;
        let mut tree = tree.lock();
        let (old_dir, old_name) = tree.resolve_parent(old_base, &old_path)?;
        let (new_dir, new_name) = tree.resolve_parent(new_base, &new_path)?;
        Ok(tree.rename(old_dir, old_name, new_dir, new_name)?)
    }

    /// No symbolic links: one could name a path outside the tree, or alias a file.
    fn symlink_at(&mut self, fd: Resource<Descriptor>, _: String, _: String) -> FsResult<()> {
        self.dir(&fd)?;
        Err(ErrorCode::NotPermitted.into())
    }

    fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let (base, tree) = self.dir(&fd)?;
        let mut tree = tree.lock();
        let (dir, name) = tree.resolve_parent(base, &path)?;
        Ok(tree.unlink_file(dir, name)?)
    }

    fn is_same_object(&mut self, fd: Resource<Descriptor>, other: Resource<Descriptor>) -> wasmtime::Result<bool> {
        Ok(self.table.get(&fd)?.ino == self.table.get(&other)?.ino)
    }

    fn metadata_hash(&mut self, fd: Resource<Descriptor>) -> FsResult<MetadataHashValue> {
        let (ino, ..) = self.descriptor(&fd)?;
        Ok(MetadataHashValue { lower: ino, upper: 0 })
    }

    fn metadata_hash_at(
        &mut self,
        fd: Resource<Descriptor>,
        _: PathFlags,
        path: String,
    ) -> FsResult<MetadataHashValue> {
        let (base, tree) = self.dir(&fd)?;
        let ino = tree.lock().resolve(base, &path)?;
        Ok(MetadataHashValue { lower: ino, upper: 0 })
    }

    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        let descriptor = self.table.delete(fd)?;
        if let Some(tree) = &self.vfs.tree {
            tree.lock().release(descriptor.ino);
        }
        Ok(())
    }
}

impl VfsCtxView<'_> {
    fn output_stream(
        &mut self,
        fd: &Resource<Descriptor>,
        offset: u64,
        append: bool,
    ) -> FsResult<Resource<DynOutputStream>> {
        let access = if append { Access::Append } else { Access::Write };
        let stream: DynOutputStream = Box::new(self.file_stream(fd, offset, access)?);
        Ok(self.table.push(stream)?)
    }

    /// A stream over the file `fd` opens, which must allow `access`; the stream keeps
    /// the file's bytes alive (retained) until it is dropped, as an open file does.
    fn file_stream(&mut self, fd: &Resource<Descriptor>, offset: u64, access: Access) -> FsResult<FileStream> {
        let (ino, read, write) = self.descriptor(fd)?;
        let allowed = if access == Access::Read { read } else { write };
        if !allowed {
            return Err(ErrorCode::BadDescriptor.into());
        }
        let tree = self.vfs.tree().clone();
        {
            let mut locked = tree.lock();
            if locked.node_type(ino) != Some(NodeType::File) {
                return Err(ErrorCode::IsDirectory.into());
            }
            locked.retain(ino);
        }
        Ok(FileStream { tree, ino, position: offset, append: access == Access::Append })
    }
}

/// What a stream over a file does with it.
#[derive(Clone, Copy, PartialEq)]
enum Access {
    Read,
    Write,
    Append,
}

impl types::HostDirectoryEntryStream for VfsCtxView<'_> {
    fn read_directory_entry(&mut self, stream: Resource<DirIter>) -> FsResult<Option<DirectoryEntry>> {
        Ok(self.table.get_mut(&stream)?.entries.next())
    }

    fn drop(&mut self, stream: Resource<DirIter>) -> wasmtime::Result<()> {
        self.table.delete(stream)?;
        Ok(())
    }
}

/// Pushes `err` as a stream error and asks [`types::Host::filesystem_error_code`] about it.
#[cfg(test)]
pub(super) fn filesystem_error_code_for_test(view: &mut VfsCtxView<'_>, err: wasmtime::Error) -> Option<&'static str> {
    use types::Host as _;
    let err = view.table.push(err).ok()?;
    let code = view.filesystem_error_code(err).ok()??;
    Some(match code {
        ErrorCode::InsufficientSpace => "insufficient-space",
        _ => "other",
    })
}

/// The most bytes one stream write may carry; the guest splits larger writes.
const STREAM_WRITE_PERMIT: usize = 1 << 20;

/// A stream over one file: what `read-via-stream`, `write-via-stream` and
/// `append-via-stream` return. It holds the file open, so unlinking it while the stream
/// lives keeps its bytes (and their quota) until the stream is dropped.
struct FileStream {
    tree: SharedTree,
    ino: Ino,
    position: u64,
    /// Writes go to the end of the file, wherever that is at the time.
    append: bool,
}

impl Drop for FileStream {
    fn drop(&mut self) {
        self.tree.lock().release(self.ino);
    }
}

/// A stream error the guest sees as the errno of `fault`, through
/// `filesystem-error-code`.
fn stream_fault(fault: FsFault) -> StreamError {
    StreamError::LastOperationFailed(wasmtime::Error::new(fault))
}

#[async_trait::async_trait]
impl Pollable for FileStream {
    /// In memory, always ready.
    async fn ready(&mut self) {}
}

impl InputStream for FileStream {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        let tree = self.tree.lock();
        let (bytes, _) = tree.read(self.ino, self.position, size as u64).map_err(stream_fault)?;
        if bytes.is_empty() && size > 0 {
            return Err(StreamError::Closed);
        }
        self.position += bytes.len() as u64;
        Ok(Bytes::copy_from_slice(bytes))
    }
}

impl OutputStream for FileStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        let mut tree = self.tree.lock();
        if self.append {
            self.position = tree.size(self.ino).map_err(stream_fault)?;
        }
        tree.write(self.ino, self.position, &bytes).map_err(stream_fault)?;
        self.position += bytes.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(STREAM_WRITE_PERMIT)
    }
}
