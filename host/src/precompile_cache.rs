//! The on-disk cache of precompiled guest components.
//!
//! Compiling a guest takes seconds (CPython: tens of them); loading its precompiled
//! artifact takes milliseconds. An artifact is keyed by the SHA-256 of the component
//! bytes *and* of the engine's compatibility hash, because fuel, epoch and target
//! settings change the generated code.
//!
//! # Security
//! Loading an artifact runs the native code in it, so the cache is guarded like a
//! directory of executables (SECURITY.md, "Precompile cache", says why each rule):
//! - [`PrecompileCache::open`] creates a missing directory `0700` and, on Unix, refuses
//!   one that is a symbolic link, owned by another user or writable by group or others.
//!   The default ([`default_dir`]) never falls back to a shared temporary directory.
//! - Each artifact ends with a seal written with it: an XXH3-128 checksum over its key
//!   and code.
//!   [`PrecompileCache::load`] opens the file once, checks owner and mode on that open
//!   handle, hashes the code through it, and has wasmtime map that same open file (not
//!   the name again). A tampered, truncated or foreign artifact is compiled again,
//!   never run.
//! - Files are written under unguessable names created exclusively (`O_EXCL`: a symlink
//!   planted at the name is an error, never followed), then renamed into place.
//! - A by-file record may only name an artifact of the expected form (hex key).

use std::fmt;
use std::fs::{File, OpenOptions};
use std::hash::Hasher;
use std::io::{self, Read, Write};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use xxhash_rust::xxh3::Xxh3;

use crate::error::Error;

/// Bytes of the SHA-256 prefix that names an artifact (40 hex digits).
const KEY_BYTES: usize = 20;
/// An artifact file is `<key>.artifact`: wasmtime's precompiled component (an ELF file,
/// mapped as it is), then [`SEAL_MAGIC`] and the seal. The name differs from the
/// unsealed `.cwasm` files of older versions, which are never read.
const ARTIFACT_EXTENSION: &str = "artifact";
/// Names the seal format; a file that does not end with it and a seal is not an artifact.
/// (`sealed1` was SHA-256: those artifacts are compiled again.)
const SEAL_MAGIC: &[u8; 16] = b"wasmbox-sealed2\n";
/// Magic plus the XXH3-128 checksum.
const SEAL_BYTES: usize = SEAL_MAGIC.len() + 16;
/// The code is hashed in pieces of this size, each on whichever core is free, and the
/// seal is the hash of the pieces' hashes: checking a guest of tens of megabytes at
/// every start takes a fraction of the time on several cores.
const SEAL_PIECE_BYTES: usize = 4 << 20;
/// How much of a piece one read brings in (where the file is read, not mapped).
#[cfg(not(unix))]
const SEAL_READ_BYTES: usize = 256 << 10;
/// Threads hashing one artifact at most.
const MAX_SEAL_THREADS: usize = 8;
/// Tries at an unused temporary name before giving up: each is 128 random bits, so a
/// clash means something else is wrong.
const TEMP_NAME_TRIES: usize = 4;

/// Feeds `std::hash::Hash` output into SHA-256, so the engine's compatibility hash
/// becomes a stable file name (std's `DefaultHasher` promises no stability).
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        unreachable!("only the full digest is used")
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// The name of one artifact: [`KEY_BYTES`] of SHA-256 in lowercase hex. Only this type
/// is joined to the cache directory, so no name read from disk can escape it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ArtifactKey(String);

impl ArtifactKey {
    /// The key of `component` compiled by `engine`.
    pub(crate) fn of(engine: &wasmtime::Engine, component: &[u8]) -> Self {
        let mut hasher = Sha256Hasher(Sha256::new());
        hash_compatibility(engine, &mut hasher);
        hasher.0.update(Sha256::digest(component));
        ArtifactKey(hex::encode(&hasher.0.finalize()[..KEY_BYTES]))
    }

    /// The key an artifact file name stands for: exactly `<40 lowercase hex>.artifact`.
    fn from_file_name(name: &str) -> Option<Self> {
        let (key, extension) = name.split_once('.')?;
        let hex = key.len() == 2 * KEY_BYTES && key.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        (hex && extension == ARTIFACT_EXTENSION).then(|| ArtifactKey(key.to_owned()))
    }

    fn file_name(&self) -> String {
        format!("{}.{ARTIFACT_EXTENSION}", self.0)
    }

    /// The seal of `code` stored under this key.
    fn seal(&self, code: &[u8]) -> [u8; 16] {
        let pieces = code.chunks(SEAL_PIECE_BYTES).map(|piece| xxhash_rust::xxh3::xxh3_128(piece).to_le_bytes());
        self.seal_of_pieces(code.len() as u64, pieces)
    }

    /// The seal of code of `len` bytes whose pieces hash to `pieces`. The key is
    /// hashed in, so a valid artifact of another component, copied to this name, fails.
    fn seal_of_pieces(&self, len: u64, pieces: impl IntoIterator<Item = [u8; 16]>) -> [u8; 16] {
        let mut digest = Xxh3::new();
        digest.update(SEAL_MAGIC);
        digest.update(self.0.as_bytes());
        digest.update(&len.to_le_bytes());
        for piece in pieces {
            digest.update(&piece);
        }
        digest.digest128().to_le_bytes()
    }

    /// The seal of the first `len` bytes of `file`. Unix hashes the file's pages where
    /// they lie, mapped read-only: reading the artifact into memory first cost more than
    /// hashing it (docs/performance.md, "Precompile cache: the sealed load").
    #[cfg(unix)]
    fn seal_file(&self, file: &File, len: u64) -> io::Result<[u8; 16]> {
        let len = usize::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "the artifact is too large"))?;
        let mapped = MappedFile::new(file, len)?;
        Ok(self.seal_threaded(&mapped))
    }

    /// [`Self::seal`] of a mapped file, its pieces hashed on up to [`MAX_SEAL_THREADS`]
    /// threads. Each thread also fills the page tables of its pieces before hashing them
    /// (Linux), so that the kernel's share of the work, as large as the hashing's for a
    /// file in small page-cache folios, is split across the cores too (docs/performance.md,
    /// "The seal's page tables on the hashing threads").
    #[cfg(unix)]
    fn seal_threaded(&self, mapped: &MappedFile) -> [u8; 16] {
        let code = mapped.bytes();
        let piece_count = code.len().div_ceil(SEAL_PIECE_BYTES);
        let threads = std::thread::available_parallelism().map_or(1, NonZeroUsize::get).clamp(1, MAX_SEAL_THREADS);
        let per_thread = piece_count.div_ceil(threads).max(1);
        let mut pieces = vec![[0u8; 16]; piece_count];
        std::thread::scope(|scope| {
            for (thread, digests) in pieces.chunks_mut(per_thread).enumerate() {
                let code = &code[(thread * per_thread * SEAL_PIECE_BYTES).min(code.len())..];
                scope.spawn(move || {
                    for (digest, piece) in digests.iter_mut().zip(code.chunks(SEAL_PIECE_BYTES)) {
                        MappedFile::map_in(piece);
                        *digest = xxhash_rust::xxh3::xxh3_128(piece).to_le_bytes();
                    }
                });
            }
        });
        self.seal_of_pieces(code.len() as u64, pieces)
    }

    /// The seal of the first `len` bytes of `file`, its pieces hashed on up to
    /// [`MAX_SEAL_THREADS`] threads, each reading its own range of the open file.
    #[cfg(not(unix))]
    fn seal_file(&self, file: &File, len: u64) -> io::Result<[u8; 16]> {
        let piece_count = usize::try_from(len.div_ceil(SEAL_PIECE_BYTES as u64))
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "the artifact is too large"))?;
        let threads = std::thread::available_parallelism().map_or(1, NonZeroUsize::get).clamp(1, MAX_SEAL_THREADS);
        let per_thread = piece_count.div_ceil(threads).max(1);
        let mut pieces = vec![[0u8; 16]; piece_count];
        std::thread::scope(|scope| {
            let hashing: Vec<_> = pieces
                .chunks_mut(per_thread)
                .enumerate()
                .map(|(thread, digests)| {
                    scope.spawn(move || -> io::Result<()> {
                        // Small reads stay in the core's cache between read and hash.
                        let mut buf = vec![0u8; SEAL_READ_BYTES];
                        for (at, digest) in (thread * per_thread..).zip(digests) {
                            let start = at as u64 * SEAL_PIECE_BYTES as u64;
                            let end = len.min(start + SEAL_PIECE_BYTES as u64);
                            let mut piece = Xxh3::new();
                            for offset in (start..end).step_by(SEAL_READ_BYTES) {
                                let block = &mut buf[..(end - offset).min(SEAL_READ_BYTES as u64) as usize];
                                read_exact_at(file, block, offset)?;
                                piece.update(block);
                            }
                            *digest = piece.digest128().to_le_bytes();
                        }
                        Ok(())
                    })
                })
                .collect();
            hashing
                .into_iter()
                .try_for_each(|thread| thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
        })?;
        Ok(self.seal_of_pieces(len, pieces))
    }
}

/// The first bytes of an open file, mapped read-only and private, unmapped on drop.
#[cfg(unix)]
struct MappedFile {
    start: *mut std::ffi::c_void,
    len: usize,
}

#[cfg(unix)]
impl MappedFile {
    fn new(file: &File, len: usize) -> io::Result<Self> {
        if len == 0 {
            return Ok(MappedFile { start: std::ptr::null_mut(), len });
        }
        use rustix::mm::{MapFlags, ProtFlags};
        // SAFETY: a new read-only mapping at an address the kernel picks, of `len` bytes
        // of a file that is at least that long (its length was read from this handle);
        // nothing else in the process refers to the range. It is unmapped on drop.
        #[allow(unsafe_code)]
        let start =
            unsafe { rustix::mm::mmap(std::ptr::null_mut(), len, ProtFlags::READ, MapFlags::PRIVATE, file, 0) }?;
        Ok(MappedFile { start, len })
    }

    /// Fills the page tables for `piece`, a part of some mapping's [`Self::bytes`], in
    /// one pass rather than a fault per page or two (Linux 5.14 and later). Only a hint:
    /// where it fails, reading the piece faults its pages in as before.
    fn map_in(piece: &[u8]) {
        // Pieces start at multiples of SEAL_PIECE_BYTES from the mapping's start, so on
        // a page boundary, as madvise needs.
        // SAFETY: `piece` borrows the bytes of a read-only private file mapping, and
        // populating only fills its page tables: the range reads the same bytes.
        #[cfg(any(target_os = "linux", target_os = "android"))]
        #[allow(unsafe_code)]
        let _ = unsafe {
            rustix::mm::madvise(piece.as_ptr().cast_mut().cast(), piece.len(), rustix::mm::Advice::LinuxPopulateRead)
        };
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let _ = piece;
    }

    fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the mapping is `len` readable bytes and lives as long as `self`. Its
        // bytes change only if the file is written in place, which wasmbox never does and
        // which the owner and mode checks leave to this user and root (the same terms on
        // which wasmtime maps the artifact; SECURITY.md, "Precompile cache"). A file cut
        // short meanwhile would fault (SIGBUS) rather than read stale bytes, as wasmtime's
        // own mapping of it would.
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts(self.start.cast::<u8>(), self.len)
        }
    }
}

#[cfg(unix)]
impl Drop for MappedFile {
    fn drop(&mut self) {
        if self.len != 0 {
            // SAFETY: the mapping `new` made, which no slice outlives (`bytes` borrows self).
            #[allow(unsafe_code)]
            let _ = unsafe { rustix::mm::munmap(self.start, self.len) };
        }
    }
}

/// Why a cached artifact was not used; every case but `Missing` is compiled again.
#[derive(Debug)]
pub(crate) enum Unusable {
    /// No artifact under the key.
    Missing,
    /// It could not be opened or read.
    Io(io::Error),
    /// Another user could have written it (Unix).
    NotPrivate(String),
    /// Its seal is missing or does not match its key and code.
    BadSeal,
    /// Its name was given to another file while it was being loaded.
    #[cfg(unix)]
    Replaced,
    /// wasmtime refused the sealed code (another wasmtime version, say).
    Deserialize(wasmtime::Error),
}

impl fmt::Display for Unusable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unusable::Missing => f.write_str("not cached"),
            Unusable::Io(err) => write!(f, "could not read it: {err}"),
            Unusable::NotPrivate(reason) => write!(f, "refusing it: {reason}"),
            Unusable::BadSeal => f.write_str("its checksum does not match (tampered, truncated or another's)"),
            #[cfg(unix)]
            Unusable::Replaced => f.write_str("it was replaced while it was loaded"),
            Unusable::Deserialize(err) => write!(f, "wasmtime refused it: {err:#}"),
        }
    }
}

/// Why an artifact could not be stored.
pub(crate) enum StoreError {
    /// The component is invalid or failed to compile.
    Compile(wasmtime::Error),
    /// The cache directory could not be written.
    Io(io::Error),
}

impl From<io::Error> for StoreError {
    fn from(err: io::Error) -> Self {
        StoreError::Io(err)
    }
}

/// Where precompiled artifacts live, and how they are named and checked.
#[derive(Clone, Debug)]
pub(crate) struct PrecompileCache {
    dir: PathBuf,
}

impl PrecompileCache {
    /// Opens the cache in `dir`, creating it (and missing parents) `0700` first.
    ///
    /// # Errors
    /// [`Error::Cache`] when it cannot be created, is not a directory, is a symbolic
    /// link, or (Unix) is owned by another user or writable by group or others.
    pub(crate) fn open(dir: PathBuf) -> Result<Self, Error> {
        let refuse = |reason: String| Error::Cache { dir: dir.clone(), reason };
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&dir).map_err(|err| refuse(format!("could not create it: {err}")))?;
        let meta = std::fs::symlink_metadata(&dir).map_err(|err| refuse(err.to_string()))?;
        if meta.file_type().is_symlink() {
            return Err(refuse("it is a symbolic link; name the directory it points to instead".into()));
        }
        if !meta.is_dir() {
            return Err(refuse("it is not a directory".into()));
        }
        check_private(&meta).map_err(refuse)?;
        Ok(PrecompileCache { dir })
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the artifact `key` lives.
    pub(crate) fn artifact_path(&self, key: &ArtifactKey) -> PathBuf {
        self.dir.join(key.file_name())
    }

    /// Loads the artifact `key`, after checking that only this user could have written
    /// it and that its seal matches its key and code. The checks are made on one open
    /// handle, and wasmtime maps that same open file: replacing the name meanwhile
    /// changes nothing (SECURITY.md, "Precompile cache", on what remains).
    pub(crate) fn load(&self, engine: &wasmtime::Engine, key: &ArtifactKey) -> Result<Component, Unusable> {
        let path = self.artifact_path(key);
        let file = match open_private(&path) {
            Err(Unusable::Io(err)) if err.kind() == io::ErrorKind::NotFound => return Err(Unusable::Missing),
            other => other?,
        };
        let len = file.metadata().map_err(Unusable::Io)?.len();
        let code_len = len.checked_sub(SEAL_BYTES as u64).ok_or(Unusable::BadSeal)?;
        let mut seal = [0u8; SEAL_BYTES];
        read_exact_at(&file, &mut seal, code_len).map_err(Unusable::Io)?;
        if seal[..SEAL_MAGIC.len()] != SEAL_MAGIC[..] {
            return Err(Unusable::BadSeal);
        }
        if seal[SEAL_MAGIC.len()..] != key.seal_file(&file, code_len).map_err(Unusable::Io)? {
            return Err(Unusable::BadSeal);
        }
        load_checked(engine, &file, &path)
    }

    /// Compiles `component`, stores the sealed artifact under `key` (atomically: a
    /// reader sees the old file or the whole new one) and loads it from there.
    pub(crate) fn store(
        &self,
        engine: &wasmtime::Engine,
        component: &[u8],
        key: &ArtifactKey,
    ) -> Result<Component, StoreError> {
        let code = compile(engine, component)?;
        let path = self.artifact_path(key);
        if let Err(err) = write_atomically(&path, &[&code, SEAL_MAGIC, &key.seal(&code)]) {
            // Losing a race to another writer is fine (Windows cannot replace a file
            // another process has mapped): what won is checked like any artifact.
            if !path.is_file() {
                return Err(err.into());
            }
        }
        self.load(engine, key).map_err(|unusable| match unusable {
            Unusable::Io(err) => StoreError::Io(err),
            Unusable::Deserialize(err) => StoreError::Compile(err),
            other => StoreError::Io(io::Error::other(format!("the artifact just written is unusable: {other}"))),
        })
    }
}

/// Feeds into `hasher` what makes `engine`'s artifacts loadable by another engine.
fn hash_compatibility(engine: &wasmtime::Engine, hasher: &mut Sha256Hasher) {
    #[cfg(feature = "compiler")]
    std::hash::Hash::hash(&engine.precompile_compatibility_hash(), hasher);
    // wasmtime derives it from the compiler's settings. A build without one makes no
    // engine (`Engine::new` refuses), so no key is ever computed there.
    #[cfg(not(feature = "compiler"))]
    let _ = (engine, hasher);
}

/// `component` compiled for `engine`.
#[cfg(feature = "compiler")]
fn compile(engine: &wasmtime::Engine, component: &[u8]) -> Result<Vec<u8>, StoreError> {
    engine.precompile_component(component).map_err(StoreError::Compile)
}

/// A build without the `compiler` feature makes no engine, so never gets here.
#[cfg(not(feature = "compiler"))]
fn compile(_: &wasmtime::Engine, _: &[u8]) -> Result<Vec<u8>, StoreError> {
    Err(StoreError::Compile(wasmtime::Error::msg("this build has no compiler")))
}

/// Has wasmtime map `file`, which [`PrecompileCache::load`] opened from `path` and
/// checked. Unix names the open file itself (`/proc/self/fd/N` on Linux, `/dev/fd/N`
/// elsewhere), so the bytes mapped are those checked whatever happens to `path`; where
/// that name does not exist (no `/proc`) and on Windows, `path` is mapped, and on Unix
/// then checked to still name the file checked.
fn load_checked(engine: &wasmtime::Engine, file: &File, path: &Path) -> Result<Component, Unusable> {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        let fd = file.as_raw_fd();
        let itself = PathBuf::from(if cfg!(any(target_os = "linux", target_os = "android")) {
            format!("/proc/self/fd/{fd}")
        } else {
            format!("/dev/fd/{fd}")
        });
        if itself.exists() {
            return deserialize_file(engine, &itself).map_err(Unusable::Deserialize);
        }
    }
    load_by_name(engine, file, path)
}

/// [`load_checked`] where the open file has no name of its own: maps `path`, then (Unix)
/// refuses the result unless `path` still names the file checked.
fn load_by_name(engine: &wasmtime::Engine, file: &File, path: &Path) -> Result<Component, Unusable> {
    let loaded = deserialize_file(engine, path).map_err(Unusable::Deserialize)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let identity = |meta: std::fs::Metadata| (meta.dev(), meta.ino());
        let checked = file.metadata().map(identity).map_err(Unusable::Io)?;
        if std::fs::metadata(path).map(identity).ok() != Some(checked) {
            return Err(Unusable::Replaced);
        }
    }
    #[cfg(not(unix))]
    let _ = file;
    Ok(loaded)
}

/// Maps the precompiled component at `path`.
fn deserialize_file(engine: &wasmtime::Engine, path: &Path) -> wasmtime::Result<Component> {
    // SAFETY: `deserialize_file` trusts the file to hold the output of
    // `precompile_component` by a compatible engine (wasmtime itself checks only the
    // header's version and configuration), unchanged for as long as the component lives.
    // `load_checked`'s only caller has just checked this very file: owned by this user,
    // writable by no one else (Unix), and its code matching the seal `store` wrote with
    // it under this key. Artifacts are never modified in place (a new file is renamed
    // over the name), so only this user or root could change the bytes later, and they
    // can already change this program itself.
    #[allow(unsafe_code)]
    unsafe {
        Component::deserialize_file(engine, path)
    }
}

impl PrecompileCache {
    /// Where the file-identity record of `file` for `engine` lives.
    fn file_record_path(&self, engine: &wasmtime::Engine, file: &Path) -> PathBuf {
        let mut hasher = Sha256Hasher(Sha256::new());
        hash_compatibility(engine, &mut hasher);
        hasher.0.update(file.as_os_str().as_encoded_bytes());
        self.dir.join("by-file").join(hex::encode(&hasher.0.finalize()[..KEY_BYTES]))
    }

    /// The artifact of `file` if the file is unchanged since [`Self::remember_file`]
    /// (same absolute path, length and modification time): a cached load then needs
    /// neither to read nor to hash the component. The record is read like an artifact
    /// (only if this user alone could have written it), and names an artifact only by
    /// its key.
    pub(crate) fn lookup_file(&self, engine: &wasmtime::Engine, file: &Path) -> Option<ArtifactKey> {
        let file = std::path::absolute(file).ok()?;
        let record = String::from_utf8(read_private(&self.file_record_path(engine, &file)).ok()?).ok()?;
        let (identity, name) = record.trim_end().rsplit_once(' ')?;
        let key = ArtifactKey::from_file_name(name)?;
        (identity == file_identity(&file)? && self.artifact_path(&key).is_file()).then_some(key)
    }

    /// Records that `file`, as it is now, compiles to the artifact `key`. Best effort:
    /// without the record, the next load just hashes the file again.
    pub(crate) fn remember_file(&self, engine: &wasmtime::Engine, file: &Path, key: &ArtifactKey) {
        let Ok(file) = std::path::absolute(file) else { return };
        let Some(identity) = file_identity(&file) else { return };
        let record = self.file_record_path(engine, &file);
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        let text = format!("{identity} {}\n", key.file_name());
        let written = builder
            .create(record.parent().unwrap_or(&self.dir))
            .and_then(|()| write_atomically(&record, &[text.as_bytes()]));
        if let Err(err) = written {
            tracing::debug!(record = %record.display(), error = %err, "could not record a guest file's artifact");
        }
    }
}

/// Opens the file at `path` if it is a regular file that (Unix) this user owns and group
/// and others cannot write. The checks are made on the open handle, so they hold for
/// what is read through it even if the name is replaced meanwhile.
fn open_private(path: &Path) -> Result<File, Unusable> {
    let file = File::open(path).map_err(Unusable::Io)?;
    let meta = file.metadata().map_err(Unusable::Io)?;
    if !meta.is_file() {
        return Err(Unusable::NotPrivate("it is not a regular file".into()));
    }
    check_private(&meta).map_err(Unusable::NotPrivate)?;
    Ok(file)
}

/// Reads the file at `path` whole, after [`open_private`]'s checks.
fn read_private(path: &Path) -> Result<Vec<u8>, Unusable> {
    let mut bytes = Vec::new();
    open_private(path)?.read_to_end(&mut bytes).map_err(Unusable::Io)?;
    Ok(bytes)
}

/// Fills `buf` from `file` at `offset`, without moving a shared file position (the
/// seal's threads read one open file at once).
#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

/// Fills `buf` from `file` at `offset` (Windows moves the handle's position, which
/// no reader here relies on).
#[cfg(windows)]
fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_read(buf, offset) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(read) => {
                buf = &mut buf[read..];
                offset += read as u64;
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// Unix: refuses what another user owns or group or others may write. Root's cache is
/// held to the same rule: a file another user can change is code they can run as root.
#[cfg(unix)]
fn check_private(meta: &std::fs::Metadata) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let euid = rustix::process::geteuid().as_raw();
    if meta.uid() != euid {
        return Err(format!("it is owned by uid {}, not by this user (uid {euid})", meta.uid()));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(format!("it is writable by group or others (mode {mode:o}); `chmod go-w` it"));
    }
    Ok(())
}

/// Windows: owner and ACL are not checked (SECURITY.md says what the defaults give).
#[cfg(not(unix))]
fn check_private(_meta: &std::fs::Metadata) -> Result<(), String> {
    Ok(())
}

/// Writes `parts` to `path` atomically: into a new file under an unguessable name in the
/// same directory, created exclusively (never opening what is already there, a planted
/// symlink included), `0600` on Unix, then renamed over `path`. Rename is atomic on one
/// filesystem: a concurrent reader sees the old file or the whole new one. Concurrent
/// writers of one artifact each write their own file; the last rename wins.
pub(crate) fn write_atomically(path: &Path, parts: &[&[u8]]) -> io::Result<()> {
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    write_atomically_via(path, parts, || path.with_file_name(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple())))
}

/// [`write_atomically`] with the temporary names `temp_name` gives.
fn write_atomically_via(path: &Path, parts: &[&[u8]], mut temp_name: impl FnMut() -> PathBuf) -> io::Result<()> {
    let mut tries = 0;
    let (tmp, mut file) = loop {
        let tmp = temp_name();
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        match options.open(&tmp) {
            Ok(file) => break (tmp, file),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists && tries + 1 < TEMP_NAME_TRIES => tries += 1,
            Err(err) => return Err(err),
        }
    };
    let written = parts.iter().try_for_each(|part| file.write_all(part)).and_then(|()| {
        drop(file);
        std::fs::rename(&tmp, path)
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Length and modification time (ns) of a file: what says "unchanged" without reading it.
fn file_identity(file: &Path) -> Option<String> {
    let meta = std::fs::metadata(file).ok()?;
    let modified = meta.modified().ok()?.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some(format!("{} {}", meta.len(), modified.as_nanos()))
}

/// The default cache directory: `$WASMBOX_CACHE_DIR`, else the platform's per-user
/// cache directory, else a per-user directory in the temporary directory
/// (`wasmbox-<uid>` on Unix, which [`PrecompileCache::open`] creates `0700` and refuses
/// if someone else made it first). Never a directory shared by all users.
pub(crate) fn default_dir() -> PathBuf {
    default_dir_from(|name| std::env::var_os(name), std::env::temp_dir())
}

/// [`default_dir`] with the environment as `var` and the temporary directory as `temp`.
/// Empty and (for the platform directories) relative values are ignored, as the XDG
/// base directory specification asks.
fn default_dir_from(var: impl Fn(&str) -> Option<std::ffi::OsString>, temp: PathBuf) -> PathBuf {
    if let Some(dir) = var("WASMBOX_CACHE_DIR").filter(|dir| !dir.is_empty()) {
        return PathBuf::from(dir);
    }
    let absolute = |name: &str| var(name).map(PathBuf::from).filter(|path| path.is_absolute());
    let base = if cfg!(windows) {
        absolute("LOCALAPPDATA")
    } else if cfg!(target_os = "macos") {
        absolute("HOME").map(|home| home.join("Library/Caches"))
    } else {
        absolute("XDG_CACHE_HOME").or_else(|| absolute("HOME").map(|home| home.join(".cache")))
    };
    base.map_or_else(|| temp.join(per_user_temp_name()), |base| base.join("wasmbox"))
}

#[cfg(unix)]
fn per_user_temp_name() -> String {
    format!("wasmbox-{}", rustix::process::geteuid().as_raw())
}

/// Windows' temporary directory is already per user (`%LOCALAPPDATA%\Temp`).
#[cfg(not(unix))]
fn per_user_temp_name() -> String {
    "wasmbox".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_record_holds_until_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let cache = PrecompileCache::open(dir.path().join("cache")).unwrap();
        let engine = wasmtime::Engine::default();
        let guest = dir.path().join("guest.wasm");
        std::fs::write(&guest, b"v1").unwrap();
        let key = ArtifactKey::of(&engine, b"v1");
        assert_eq!(cache.lookup_file(&engine, &guest), None, "never recorded");
        cache.remember_file(&engine, &guest, &key);
        assert_eq!(cache.lookup_file(&engine, &guest), None, "the artifact does not exist yet");
        std::fs::write(cache.artifact_path(&key), b"compiled").unwrap();
        assert_eq!(cache.lookup_file(&engine, &guest), Some(key.clone()));
        std::fs::write(&guest, b"v2, longer").unwrap();
        assert_eq!(cache.lookup_file(&engine, &guest), None, "the file changed");
    }

    #[test]
    fn concurrent_stores_of_one_artifact_never_expose_a_partial_file() {
        let dir = tempfile::tempdir().unwrap();
        let cache = PrecompileCache::open(dir.path().join("cache")).unwrap();
        let engine = wasmtime::Engine::default();
        // Quick to compile but slow to write (8 MiB of data): the window in which a shared
        // name let one thread move another's half-written file into place.
        let data = "a".repeat(8 << 20);
        let component = format!(r#"(component (core module (memory 128) (data (i32.const 0) "{data}")))"#);
        let component = component.into_bytes(); // text: wasmtime parses it
        let key = ArtifactKey::of(&engine, &component);
        std::thread::scope(|threads| {
            for _ in 0..8 {
                threads.spawn(|| {
                    for _ in 0..3 {
                        assert!(cache.store(&engine, &component, &key).is_ok());
                        cache.load(&engine, &key).expect("a whole artifact");
                    }
                });
            }
        });
        let left: Vec<_> = std::fs::read_dir(cache.dir()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, [key.file_name().as_str()], "no temporary file is left behind");
    }

    /// An engine over the cache directory `dir`, without the instance pool (tests make many).
    fn engine_in(dir: &Path) -> Result<crate::Engine, crate::Error> {
        crate::Engine::new(crate::EngineConfig {
            cache_dir: dir.to_owned(),
            pooling: false,
            ..crate::EngineConfig::default()
        })
    }

    /// A component (WAT text, which wasmtime parses) exporting one function, `export`,
    /// whose code and data carry a marker naming it.
    fn component(export: &str) -> Vec<u8> {
        format!(
            r#"(component
                (core module $m (memory 1) (data (i32.const 0) "wasmbox-test-marker-{export}") (func (export "f")))
                (core instance $i (instantiate $m))
                (func (export "{export}") (canon lift (core func $i "f"))))"#
        )
        .into_bytes()
    }

    fn exports(engine: &crate::Engine, component: &wasmtime::component::Component) -> Vec<String> {
        component.component_type().exports(engine.wasmtime()).map(|(name, _)| name.to_owned()).collect()
    }

    /// The artifact files in `dir` (not the by-file records), whatever they are named.
    fn artifacts(dir: &Path) -> Vec<PathBuf> {
        let mut found: Vec<_> =
            std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().path()).filter(|path| path.is_file()).collect();
        found.sort();
        found
    }

    fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
        haystack.windows(needle.len()).position(|window| window == needle)
    }

    /// What a load checks (the file, hashed where it lies, its pieces on threads) is the
    /// seal `store` wrote (the bytes in memory), at every length around the pieces' edges,
    /// and one changed byte anywhere changes it.
    #[test]
    fn the_seal_of_a_file_is_the_seal_of_its_bytes() {
        let key = ArtifactKey("0".repeat(2 * KEY_BYTES));
        let other = ArtifactKey("1".repeat(2 * KEY_BYTES));
        let piece = SEAL_PIECE_BYTES;
        let longest = 5 * piece + 3;
        let bytes: Vec<u8> = (0..longest).map(|i| (i * 31 % 251) as u8).collect();
        let dir = tempfile::tempdir().unwrap();
        for len in [0, 1, piece - 1, piece, piece + 1, 2 * piece, 3 * piece + 7, longest] {
            let path = dir.path().join(format!("code-{len}"));
            std::fs::write(&path, &bytes[..len]).unwrap();
            let file = File::open(&path).unwrap();
            let sealed = key.seal(&bytes[..len]);
            assert_eq!(key.seal_file(&file, len as u64).unwrap(), sealed, "length {len}");
            assert_ne!(other.seal(&bytes[..len]), sealed, "the key is in the seal (length {len})");
            if len != 0 {
                for at in [0, len / 2, len - 1] {
                    let mut changed = bytes[..len].to_vec();
                    changed[at] ^= 1;
                    assert_ne!(key.seal(&changed), sealed, "a byte changed at {at} of {len}");
                }
            }
        }
        assert_ne!(key.seal(&bytes[..piece]), key.seal(&bytes[..piece + 1]), "the length is in the seal");
    }

    #[test]
    fn a_tampered_artifact_is_recompiled_not_run() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let engine = engine_in(&cache).unwrap();
        let a = component("a");
        engine.load_component(&a).unwrap();
        let [artifact] = &artifacts(&cache)[..] else { panic!("one artifact") };
        let original = std::fs::read(artifact).unwrap();
        // Change the guest's data as an attacker would change its code: the header and
        // the layout stay valid, so only a checksum notices.
        let at = find(&original, b"wasmbox-test-marker-a").expect("the data segment is in the artifact");
        let mut tampered = original.clone();
        tampered[at..at + 21].copy_from_slice(b"wasmbox-test-marker-X");
        std::fs::write(artifact, &tampered).unwrap();

        let loaded = engine.load_component(&a).unwrap();
        assert_eq!(exports(&engine, &loaded), ["a"]);
        let now = std::fs::read(artifacts(&cache).first().unwrap()).unwrap();
        assert!(find(&now, b"wasmbox-test-marker-X").is_none(), "the tampered artifact was loaded, not recompiled");
        assert!(find(&now, b"wasmbox-test-marker-a").is_some());
    }

    #[test]
    fn a_truncated_artifact_is_recompiled() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let engine = engine_in(&cache).unwrap();
        let a = component("a");
        engine.load_component(&a).unwrap();
        let [artifact] = &artifacts(&cache)[..] else { panic!("one artifact") };
        let whole = std::fs::read(artifact).unwrap();
        for keep in [whole.len() - 1, whole.len() / 2, 40, 0] {
            std::fs::write(artifact, &whole[..keep]).unwrap();
            let loaded = engine.load_component(&a).unwrap();
            assert_eq!(exports(&engine, &loaded), ["a"]);
            assert_eq!(std::fs::read(artifact).unwrap().len(), whole.len(), "rewritten whole after keeping {keep}");
        }
    }

    #[test]
    fn a_foreign_artifact_under_this_components_name_is_recompiled() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let engine = engine_in(&cache).unwrap();
        let (a, b) = (component("a"), component("b"));
        engine.load_component(&a).unwrap();
        let before = artifacts(&cache);
        engine.load_component(&b).unwrap();
        let after = artifacts(&cache);
        let a_path = before.first().unwrap();
        let b_path = after.iter().find(|path| !before.contains(path)).unwrap();
        // A valid artifact of the same engine, with another component's code: both
        // wasmtime's header check and a checksum of the file alone accept it.
        std::fs::copy(b_path, a_path).unwrap();
        let loaded = engine.load_component(&a).unwrap();
        assert_eq!(exports(&engine, &loaded), ["a"], "b's code ran as a");
        // And a raw wasmtime artifact of b (what the cache held before it had a header).
        std::fs::write(a_path, engine.wasmtime().precompile_component(&b).unwrap()).unwrap();
        let loaded = engine.load_component(&a).unwrap();
        assert_eq!(exports(&engine, &loaded), ["a"], "b's code ran as a");
    }

    #[test]
    fn a_file_record_cannot_name_a_path_outside_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let engine = engine_in(&cache).unwrap();
        let guest = dir.path().join("guest.wasm");
        std::fs::write(&guest, component("a")).unwrap();
        engine.load_component_file(&guest).unwrap();
        assert!(engine.is_precompiled_file(&guest));
        let records: Vec<_> = std::fs::read_dir(cache.join("by-file")).unwrap().map(|e| e.unwrap().path()).collect();
        let [record] = &records[..] else { panic!("one record: {records:?}") };
        let text = std::fs::read_to_string(record).unwrap();
        let (identity, name) = text.trim_end().rsplit_once(' ').unwrap();
        // A valid artifact of this very component, but outside the cache directory.
        std::fs::create_dir(dir.path().join("elsewhere")).unwrap();
        std::fs::copy(cache.join(name), dir.path().join("elsewhere").join(name)).unwrap();
        for planted in
            [format!("../elsewhere/{name}"), "../../../../../../../../etc/passwd".to_owned(), "by-file".to_owned()]
        {
            std::fs::write(record, format!("{identity} {planted}\n")).unwrap();
            assert!(!engine.is_precompiled_file(&guest), "the record named {planted}");
            let loaded = engine.load_component_file(&guest).unwrap();
            assert_eq!(exports(&engine, &loaded), ["a"]);
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_planted_at_a_temporary_name_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let engine = engine_in(&cache).unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let a = component("a");
        // Every name the cache has used for its temporary files: the pid and a counter.
        let artifact =
            PrecompileCache::open(cache.clone()).unwrap().artifact_path(&ArtifactKey::of(engine.wasmtime(), &a));
        std::fs::create_dir_all(&cache).unwrap();
        for write in 0..2_000 {
            let planted = artifact.with_extension(format!("tmp{}-{write}", std::process::id()));
            std::os::unix::fs::symlink(&victim, planted).unwrap();
        }
        let loaded = engine.load_component(&a).unwrap();
        assert_eq!(exports(&engine, &loaded), ["a"]);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious", "the cache wrote through a planted symlink");
    }

    #[cfg(unix)]
    #[test]
    fn a_cache_directory_writable_by_others_or_owned_by_another_user_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        std::fs::create_dir(&cache).unwrap();
        for mode in [0o770, 0o707, 0o777] {
            std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = engine_in(&cache).expect_err("a cache directory others can write to");
            assert!(matches!(err, crate::Error::Cache { .. }), "{err}");
            assert!(err.to_string().contains("writable by group or others"), "{err}");
        }
        std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o755)).unwrap();
        engine_in(&cache).expect("readable by others is fine");
        // Tests run as root in CI; another user's directory needs chown.
        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::chown(&cache, Some(65534), Some(65534)).unwrap();
            let err = engine_in(&cache).expect_err("a cache directory owned by nobody");
            assert!(matches!(err, crate::Error::Cache { .. }), "{err}");
            assert!(err.to_string().contains("owned by uid 65534"), "{err}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn an_artifact_writable_by_others_or_owned_by_another_user_is_recompiled() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let engine = engine_in(&cache).unwrap();
        let a = component("a");
        engine.load_component(&a).unwrap();
        let [artifact] = &artifacts(&cache)[..] else { panic!("one artifact") };
        std::fs::set_permissions(artifact, std::fs::Permissions::from_mode(0o666)).unwrap();
        engine.load_component(&a).unwrap();
        let mode = std::fs::metadata(artifact).unwrap().mode();
        assert_eq!(mode & 0o022, 0, "the artifact others could write was used ({mode:o})");
        let euid = rustix::process::geteuid();
        if euid.is_root() {
            std::os::unix::fs::chown(artifact, Some(65534), Some(65534)).unwrap();
            engine.load_component(&a).unwrap();
            assert_eq!(std::fs::metadata(artifact).unwrap().uid(), euid.as_raw(), "nobody's artifact was used");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_temporary_file_is_created_exclusively_never_through_a_symlink() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let target = dir.path().join("artifact");
        let planted = dir.path().join("planted");
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        // Every name taken: the write fails rather than open what is there.
        let err = write_atomically_via(&target, &[b"evil"], || planted.clone()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(!target.exists());
        // The first name taken: the next one is used.
        let mut names = [planted.clone(), dir.path().join("fresh")].into_iter();
        write_atomically_via(&target, &[b"new ", b"bytes"], || names.next().unwrap()).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new bytes");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(
            std::fs::symlink_metadata(&planted).unwrap().file_type().is_symlink(),
            "the planted link is left alone"
        );
        assert_eq!(std::fs::metadata(&target).unwrap().permissions().mode() & 0o777, 0o600);
        // And the real names are fresh each time.
        write_atomically(&target, &[b"again"]).unwrap();
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 3, "no temporary file is left behind: {names:?}");
    }

    #[test]
    fn only_artifact_names_of_the_expected_form_are_keys() {
        let good = "0123456789abcdef0123456789abcdef01234567.artifact";
        assert!(ArtifactKey::from_file_name(good).is_some());
        for bad in [
            "../../etc/passwd",
            "0123456789abcdef0123456789abcdef01234567.cwasm",
            "0123456789ABCDEF0123456789ABCDEF01234567.artifact",
            "0123456789abcdef0123456789abcdef0123456.artifact",
            "0123456789abcdef0123456789abcdef012345678.artifact",
            "0123456789abcdef0123456789abcdef01234567.artifact.tmp",
            "/0123456789abcdef0123456789abcdef0123456.artifact",
            "",
        ] {
            assert_eq!(ArtifactKey::from_file_name(bad), None, "{bad}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_cache_directory_that_is_a_symlink_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let err = engine_in(&link).expect_err("a symlinked cache directory");
        assert!(err.to_string().contains("symbolic link"), "{err}");
        engine_in(&real).expect("the directory itself");
    }

    #[cfg(unix)]
    #[test]
    fn a_missing_cache_directory_is_created_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("a/b/cache");
        engine_in(&cache).unwrap();
        for made in [dir.path().join("a"), dir.path().join("a/b"), cache] {
            assert_eq!(std::fs::metadata(&made).unwrap().permissions().mode() & 0o777, 0o700, "{}", made.display());
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_file_record_another_user_could_write_is_ignored() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let engine = engine_in(&cache).unwrap();
        let guest = dir.path().join("guest.wasm");
        std::fs::write(&guest, component("a")).unwrap();
        engine.load_component_file(&guest).unwrap();
        let records: Vec<_> = std::fs::read_dir(cache.join("by-file")).unwrap().map(|e| e.unwrap().path()).collect();
        let [record] = &records[..] else { panic!("one record: {records:?}") };
        std::fs::set_permissions(record, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(!engine.is_precompiled_file(&guest), "a record others could write was trusted");
        // Loading hashes the file again and writes a private record.
        engine.load_component_file(&guest).unwrap();
        assert!(engine.is_precompiled_file(&guest));
    }

    #[test]
    fn the_default_directory_is_never_shared() {
        use std::ffi::OsString;
        let temp = PathBuf::from("/tmp");
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(key, _)| *key == name).map(|(_, value)| OsString::from(value))
        };
        let fallback = default_dir_from(env(&[]), temp.clone());
        assert_eq!(fallback.parent(), Some(temp.as_path()));
        assert_ne!(fallback, temp.join("wasmbox"), "the shared /tmp/wasmbox");
        #[cfg(unix)]
        assert_eq!(fallback, temp.join(format!("wasmbox-{}", rustix::process::geteuid().as_raw())));
        // Empty and relative values are not directories to use.
        let ignored =
            default_dir_from(env(&[("WASMBOX_CACHE_DIR", ""), ("XDG_CACHE_HOME", "rel"), ("HOME", "")]), temp.clone());
        assert_eq!(ignored, fallback);
        let explicit = default_dir_from(env(&[("WASMBOX_CACHE_DIR", "/srv/cache"), ("HOME", "/home/u")]), temp.clone());
        assert_eq!(explicit, PathBuf::from("/srv/cache"));
        #[cfg(all(unix, not(target_os = "macos")))]
        {
            let home = default_dir_from(env(&[("HOME", "/home/u")]), temp.clone());
            assert_eq!(home, PathBuf::from("/home/u/.cache/wasmbox"));
            let xdg = default_dir_from(env(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/home/u")]), temp);
            assert_eq!(xdg, PathBuf::from("/x/wasmbox"));
        }
    }

    /// Two artifacts in `cache`: `a`'s and `b`'s, each sealed under its own key.
    fn two_artifacts(cache: &Path) -> (crate::Engine, PathBuf, PathBuf) {
        let engine = engine_in(cache).unwrap();
        engine.load_component(&component("a")).unwrap();
        let [a] = &artifacts(cache)[..] else { panic!("one artifact") };
        engine.load_component(&component("b")).unwrap();
        let b = artifacts(cache).into_iter().find(|path| path != a).unwrap();
        (engine, a.clone(), b)
    }

    #[test]
    fn the_file_checked_is_the_file_loaded_whatever_happens_to_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let (engine, a, b) = two_artifacts(&dir.path().join("cache"));
        let file = open_private(&a).unwrap();
        // After the checks, the name is given to another (valid) artifact.
        std::fs::rename(&b, &a).unwrap();
        let loaded = load_checked(engine.wasmtime(), &file, &a).unwrap();
        assert_eq!(exports(&engine, &loaded), ["a"], "the file mapped is not the file checked");
    }

    #[cfg(unix)]
    #[test]
    fn without_a_name_for_the_open_file_a_replaced_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (engine, a, b) = two_artifacts(&dir.path().join("cache"));
        let file = open_private(&a).unwrap();
        assert_eq!(exports(&engine, &load_by_name(engine.wasmtime(), &file, &a).unwrap()), ["a"]);
        std::fs::rename(&b, &a).unwrap();
        assert!(matches!(load_by_name(engine.wasmtime(), &file, &a), Err(Unusable::Replaced)));
    }

    #[test]
    fn key_depends_on_component_and_engine_config() {
        let plain = wasmtime::Engine::default();
        let mut config = wasmtime::Config::new();
        config.consume_fuel(true);
        let fueled = wasmtime::Engine::new(&config).unwrap();
        let a = ArtifactKey::of(&plain, b"component a");
        assert_eq!(a, ArtifactKey::of(&plain, b"component a"));
        assert_ne!(a, ArtifactKey::of(&plain, b"component b"));
        assert_ne!(a, ArtifactKey::of(&fueled, b"component a"));
        assert_eq!(ArtifactKey::from_file_name(&a.file_name()), Some(a));
    }
}
