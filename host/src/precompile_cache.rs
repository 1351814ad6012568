//! The on-disk cache of precompiled guest components.
//!
//! Compiling the CPython component takes many seconds; loading a precompiled artifact with
//! `deserialize_file` (an mmap) takes milliseconds. Artifacts are keyed by the SHA-256
//! of the component bytes *and* the engine's compatibility hash, because fuel, epoch
//! and target settings change the generated code.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

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

/// Why an artifact could not be stored.
pub(crate) enum StoreError {
    /// The component is invalid or failed to compile.
    Compile(wasmtime::Error),
    /// The cache directory could not be written.
    Io(std::io::Error),
}

impl From<std::io::Error> for StoreError {
    fn from(err: std::io::Error) -> Self {
        StoreError::Io(err)
    }
}

/// Where precompiled artifacts live, and how they are named.
#[derive(Clone, Debug)]
pub(crate) struct PrecompileCache {
    dir: PathBuf,
}

impl PrecompileCache {
    pub(crate) fn new(dir: PathBuf) -> Self {
        PrecompileCache { dir }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The artifact path for `component` compiled by `engine`.
    pub(crate) fn artifact_path(&self, engine: &wasmtime::Engine, component: &[u8]) -> PathBuf {
        let mut hasher = Sha256Hasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        hasher.0.update(Sha256::digest(component));
        let key = hex::encode(&hasher.0.finalize()[..20]);
        self.dir.join(format!("{key}.cwasm"))
    }

    /// Loads the artifact at `path`, which this module wrote.
    pub(crate) fn load(
        &self,
        engine: &wasmtime::Engine,
        path: &Path,
    ) -> wasmtime::Result<wasmtime::component::Component> {
        // SAFETY: `deserialize_file` trusts the file to be an artifact produced by
        // `precompile_component` of a compatible engine. Only `store` below writes into
        // this directory (atomically, via rename), the name carries the engine's
        // compatibility hash, and wasmtime itself re-checks the header's version and
        // config before mapping the code. Operators must keep the cache directory
        // writable only by the user running wasmbox, like any directory of executables.
        #[allow(unsafe_code)]
        unsafe {
            wasmtime::component::Component::deserialize_file(engine, path)
        }
    }

    /// Compiles `component` and stores the artifact at `path`, atomically.
    pub(crate) fn store(&self, engine: &wasmtime::Engine, component: &[u8], path: &Path) -> Result<(), StoreError> {
        let artifact = engine.precompile_component(component).map_err(StoreError::Compile)?;
        std::fs::create_dir_all(&self.dir)?;
        let tmp = unique_tmp_path(path);
        std::fs::write(&tmp, &artifact)?;
        // Rename is atomic on one filesystem: a concurrent reader sees the old state or
        // the whole artifact, never half of it. Losing a race to another writer is fine.
        if let Err(err) = std::fs::rename(&tmp, path) {
            let _ = std::fs::remove_file(&tmp);
            if !path.exists() {
                return Err(err.into());
            }
        }
        Ok(())
    }
}

impl PrecompileCache {
    /// Where the file-identity record of `file` for `engine` lives.
    fn file_record_path(&self, engine: &wasmtime::Engine, file: &Path) -> PathBuf {
        let mut hasher = Sha256Hasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        hasher.0.update(file.as_os_str().as_encoded_bytes());
        self.dir.join("by-file").join(hex::encode(&hasher.0.finalize()[..20]))
    }

    /// The artifact of `file` if the file is unchanged since [`Self::remember_file`]
    /// (same absolute path, length and modification time): a cached load then needs
    /// neither to read nor to hash the component, tens of megabytes for an interpreter.
    pub(crate) fn lookup_file(&self, engine: &wasmtime::Engine, file: &Path) -> Option<PathBuf> {
        let file = std::path::absolute(file).ok()?;
        let record = std::fs::read_to_string(self.file_record_path(engine, &file)).ok()?;
        let (identity, artifact) = record.trim_end().rsplit_once(' ')?;
        let artifact = self.dir.join(artifact);
        (identity == file_identity(&file)? && artifact.is_file()).then_some(artifact)
    }

    /// Records that `file`, as it is now, compiles to `artifact`. Best effort: without
    /// the record, the next load just hashes the file again.
    pub(crate) fn remember_file(&self, engine: &wasmtime::Engine, file: &Path, artifact: &Path) {
        let (Ok(file), Some(name)) = (std::path::absolute(file), artifact.file_name()) else { return };
        let Some(identity) = file_identity(&file) else { return };
        let record = self.file_record_path(engine, &file);
        let tmp = unique_tmp_path(&record);
        let written = std::fs::create_dir_all(record.parent().unwrap_or(&self.dir))
            .and_then(|()| std::fs::write(&tmp, format!("{identity} {}\n", name.to_string_lossy())))
            .and_then(|()| std::fs::rename(&tmp, &record));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

/// A file name next to `path` that no other writer uses, in this process or another.
/// Each writer needs its own: threads of one process that store the same artifact at
/// once used to share a name, so one could rename the file into place while another was
/// still writing it, and a reader then mapped a partial artifact.
fn unique_tmp_path(path: &Path) -> PathBuf {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let write = WRITES.fetch_add(1, Ordering::Relaxed);
    path.with_extension(format!("tmp{}-{write}", std::process::id()))
}

/// Length and modification time (ns) of a file: what says "unchanged" without reading it.
fn file_identity(file: &Path) -> Option<String> {
    let meta = std::fs::metadata(file).ok()?;
    let modified = meta.modified().ok()?.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some(format!("{} {}", meta.len(), modified.as_nanos()))
}

/// The default cache directory: `$WASMBOX_CACHE_DIR`, else the platform cache dir.
pub(crate) fn default_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("WASMBOX_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    let base = if cfg!(windows) {
        std::env::var_os("LOCALAPPDATA").map(PathBuf::from)
    } else if cfg!(target_os = "macos") {
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join("Library/Caches"))
    } else {
        std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
    };
    base.unwrap_or_else(std::env::temp_dir).join("wasmbox")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_record_holds_until_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let cache = PrecompileCache::new(dir.path().join("cache"));
        let engine = wasmtime::Engine::default();
        let guest = dir.path().join("guest.wasm");
        std::fs::write(&guest, b"v1").unwrap();
        let artifact = cache.artifact_path(&engine, b"v1");
        assert_eq!(cache.lookup_file(&engine, &guest), None, "never recorded");
        cache.remember_file(&engine, &guest, &artifact);
        assert_eq!(cache.lookup_file(&engine, &guest), None, "the artifact does not exist yet");
        std::fs::create_dir_all(artifact.parent().unwrap()).unwrap();
        std::fs::write(&artifact, b"compiled").unwrap();
        assert_eq!(cache.lookup_file(&engine, &guest), Some(artifact.clone()));
        std::fs::write(&guest, b"v2, longer").unwrap();
        assert_eq!(cache.lookup_file(&engine, &guest), None, "the file changed");
    }

    #[test]
    fn concurrent_stores_of_one_artifact_never_expose_a_partial_file() {
        let dir = tempfile::tempdir().unwrap();
        let cache = PrecompileCache::new(dir.path().join("cache"));
        let engine = wasmtime::Engine::default();
        // Quick to compile but slow to write (8 MiB of data): the window in which a shared
        // name let one thread move another's half-written file into place.
        let data = "a".repeat(8 << 20);
        let component = format!(r#"(component (core module (memory 128) (data (i32.const 0) "{data}")))"#);
        let component = component.into_bytes(); // text: wasmtime parses it
        let path = cache.artifact_path(&engine, &component);
        std::thread::scope(|threads| {
            for _ in 0..8 {
                threads.spawn(|| {
                    for _ in 0..3 {
                        assert!(cache.store(&engine, &component, &path).is_ok());
                        cache.load(&engine, &path).expect("a whole artifact");
                    }
                });
            }
        });
        let left: Vec<_> = std::fs::read_dir(cache.dir()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, [path.file_name().unwrap()], "no temporary file is left behind");
    }

    #[test]
    fn key_depends_on_component_and_engine_config() {
        let cache = PrecompileCache::new(PathBuf::from("/cache"));
        let plain = wasmtime::Engine::default();
        let mut config = wasmtime::Config::new();
        config.consume_fuel(true);
        let fueled = wasmtime::Engine::new(&config).unwrap();
        let a = cache.artifact_path(&plain, b"component a");
        assert_eq!(a, cache.artifact_path(&plain, b"component a"));
        assert_ne!(a, cache.artifact_path(&plain, b"component b"));
        assert_ne!(a, cache.artifact_path(&fueled, b"component a"));
    }
}
