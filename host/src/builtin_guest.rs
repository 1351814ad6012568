//! The built-in guests, CPython and JavaScript (SpiderMonkey), ship inside this crate:
//! each is a dependency crate (`wasmbox-guest-python`, `wasmbox-guest-js`) holding the
//! component compressed with zstd and the manifest written when it was built. The first
//! [`Runtime::python`](crate::Runtime::python) or
//! [`Runtime::javascript`](crate::Runtime::javascript) of a cache directory unpacks the
//! component into `<cache_dir>/builtin/` (pure-Rust zstd); from then on it is a guest
//! file like any other, so its precompiled artifact is found by the file's record, and a
//! worker process ([`Sandbox::isolation`](crate::Sandbox::isolation)) loads the same file.
//!
//! `WASMBOX_GUEST_DIR` ([`GUEST_DIR_ENV`]) replaces them with `python.wasm` and `js.wasm`
//! from that directory, for developing the guests themselves.
//!
//! # Use
//! ```no_run
//! # fn demo() -> Result<(), wasmbox::Error> {
//! use wasmbox::{BuiltinGuest, Engine, EngineConfig};
//! let engine = Engine::new(EngineConfig::default())?;
//! for guest in BuiltinGuest::ALL {
//!     let versions = guest.versions()?;
//!     println!("{}: {} ({})", guest.name(), versions.runtime, versions.built_with);
//!     println!("  unpacked at {}", guest.file(&engine)?.display());
//! }
//! # Ok(()) }
//! ```
//!
//! # Security
//! The unpacked file is checked against the SHA-256 recorded when the guest was built
//! before it can be compiled: when it is written, and whenever the engine has no artifact
//! recorded for it. A load that finds the file's record does not read the file (which is
//! what makes it take milliseconds): the artifact it loads is sealed and keyed by the
//! bytes it was compiled from, which were checked then. The directory is the precompile
//! cache's, private to this user (SECURITY.md, "Built-in guests").

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::engine::Engine;
use crate::error::Error;
use crate::precompile_cache;

/// The environment variable naming a directory whose `python.wasm` and `js.wasm` replace
/// the built-in guests (for developing them: `cargo xtask guests` builds them into
/// `target/guests`).
pub const GUEST_DIR_ENV: &str = "WASMBOX_GUEST_DIR";

/// The subdirectory of the cache directory that holds the unpacked guests.
const UNPACKED_DIR: &str = "builtin";
/// Hex digits of the SHA-256 in an unpacked guest's file name: a new guest gets a new
/// file, so a file already recorded in the precompile cache is never rewritten under it.
const NAME_HASH_DIGITS: usize = 16;

/// A guest that ships with wasmbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BuiltinGuest {
    /// CPython ([`Runtime::python`](crate::Runtime::python)).
    Python,
    /// JavaScript on SpiderMonkey ([`Runtime::javascript`](crate::Runtime::javascript)).
    JavaScript,
}

/// What a built-in guest runs and what built it, as recorded when it was built.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GuestVersions {
    /// What runs the code, with its version: `CPython 3.14.0`.
    pub runtime: String,
    /// The tool that made the component, with its version: `componentize-py 0.25.1`.
    pub built_with: String,
    /// The WIT package the guest targets: `wasmbox:sandbox@0.1.1`.
    pub wit: String,
}

/// The manifest `cargo xtask guests` writes beside a compressed guest.
#[derive(Deserialize)]
struct Manifest {
    sha256: String,
    bytes: u64,
    runtime: String,
    built_with: String,
    wit: String,
}

/// A built-in guest as this build carries it.
struct Bundle {
    compressed: &'static [u8],
    sha256: [u8; 32],
    bytes: u64,
    manifest: Manifest,
}

impl BuiltinGuest {
    /// Every built-in guest.
    pub const ALL: [BuiltinGuest; 2] = [BuiltinGuest::Python, BuiltinGuest::JavaScript];

    /// Its short name, which is also its file's stem: `python`, `js`.
    pub fn name(self) -> &'static str {
        match self {
            BuiltinGuest::Python => "python",
            BuiltinGuest::JavaScript => "js",
        }
    }

    /// What the guest built into this crate runs and what built it (whatever
    /// [`GUEST_DIR_ENV`] says: it describes the guest that ships, not a replacement).
    ///
    /// # Errors
    /// [`Error::GuestNotBuilt`] when this build carries no such guest.
    pub fn versions(self) -> Result<GuestVersions, Error> {
        let manifest = self.bundle()?.manifest;
        Ok(GuestVersions { runtime: manifest.runtime, built_with: manifest.built_with, wit: manifest.wit })
    }

    /// The guest's component file: `$WASMBOX_GUEST_DIR/<name>.wasm` when that is set,
    /// else the built-in component unpacked into `engine`'s cache directory, which this
    /// does on first use (a fraction of a second) and checks as the module doc says.
    ///
    /// # Errors
    /// As [`BuiltinGuest::path`]; [`Error::Cache`] when the cache directory cannot be
    /// written; [`Error::InvalidComponent`] when the carried guest does not decompress to
    /// what its manifest records.
    pub fn file(self, engine: &Engine) -> Result<PathBuf, Error> {
        self.file_from(engine, guest_dir_from_env())
    }

    /// [`BuiltinGuest::file`] with `guest_dir` as `WASMBOX_GUEST_DIR`.
    fn file_from(self, engine: &Engine, guest_dir: Option<OsString>) -> Result<PathBuf, Error> {
        let (path, bundle) = self.locate(engine, guest_dir)?;
        let Some(bundle) = bundle else { return Ok(path) };
        if path.is_file() {
            if engine.is_precompiled_file(&path) {
                return Ok(path);
            }
            match std::fs::read(&path) {
                Ok(bytes) if bundle.is(&bytes) => return Ok(path),
                Ok(_) => {
                    tracing::warn!(path = %path.display(), "an unpacked built-in guest was changed; unpacking it again")
                }
                Err(err) => tracing::warn!(path = %path.display(), error = %err, "unpacking a built-in guest again"),
            }
        }
        self.unpack(&bundle, &path)?;
        Ok(path)
    }

    /// Where [`BuiltinGuest::file`] finds or puts the guest's file, without unpacking it:
    /// `$WASMBOX_GUEST_DIR/<name>.wasm`, else `<cache_dir>/builtin/<name>-<SHA-256
    /// prefix>.wasm`, which may not exist yet.
    ///
    /// # Errors
    /// [`Error::GuestNotBuilt`] when this build carries no such guest, or
    /// `WASMBOX_GUEST_DIR` names a directory without it; [`Error::InvalidComponent`]
    /// when the carried guest's manifest is unreadable.
    pub fn path(self, engine: &Engine) -> Result<PathBuf, Error> {
        self.locate(engine, guest_dir_from_env()).map(|(path, _)| path)
    }

    /// The guest's path, and the bundle to unpack there unless there is a `guest_dir`.
    fn locate(self, engine: &Engine, guest_dir: Option<OsString>) -> Result<(PathBuf, Option<Bundle>), Error> {
        if let Some(dir) = guest_dir {
            let path = Path::new(&dir).join(format!("{}.wasm", self.name()));
            if !path.is_file() {
                let reason = format!("{GUEST_DIR_ENV} is set, and {} does not exist", path.display());
                return Err(self.not_built(reason));
            }
            return Ok((path, None));
        }
        let bundle = self.bundle()?;
        let file_name = format!("{}-{}.wasm", self.name(), &bundle.manifest.sha256[..NAME_HASH_DIGITS]);
        Ok((engine.cache_dir().join(UNPACKED_DIR).join(file_name), Some(bundle)))
    }

    /// Decompresses the guest, checks it against its manifest and writes it to `path`
    /// atomically (a concurrent reader sees no file or the whole of it).
    fn unpack(self, bundle: &Bundle, path: &Path) -> Result<(), Error> {
        let dir = path.parent().unwrap_or(path);
        let component = bundle.decompress().map_err(|reason| {
            Error::InvalidComponent(format!("the built-in {} guest is damaged: {reason}", self.name()))
        })?;
        let cache_error = |err: std::io::Error| Error::Cache { dir: dir.to_owned(), reason: err.to_string() };
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir).map_err(cache_error)?;
        precompile_cache::write_atomically(path, &[&component]).map_err(cache_error)
    }

    /// The compressed guest and its manifest, as this build carries them.
    fn bundle(self) -> Result<Bundle, Error> {
        let carried = match self {
            BuiltinGuest::Python => wasmbox_guest_python::BUNDLE.map(|b| (b.compressed, b.manifest)),
            BuiltinGuest::JavaScript => wasmbox_guest_js::BUNDLE.map(|b| (b.compressed, b.manifest)),
        };
        let Some((compressed, manifest)) = carried else {
            return Err(self.not_built(format!(
                "this wasmbox was compiled from a checkout where `cargo xtask guests` had not run; \
                 run it there and build again (or set {GUEST_DIR_ENV} to a directory with {}.wasm)",
                self.name()
            )));
        };
        let damaged = |reason: String| {
            Error::InvalidComponent(format!("the built-in {} guest's manifest is unreadable: {reason}", self.name()))
        };
        let manifest: Manifest = serde_json::from_str(manifest).map_err(|err| damaged(err.to_string()))?;
        let mut sha256 = [0u8; 32];
        hex::decode_to_slice(&manifest.sha256, &mut sha256).map_err(|err| damaged(format!("sha256: {err}")))?;
        Ok(Bundle { compressed, sha256, bytes: manifest.bytes, manifest })
    }

    fn not_built(self, reason: String) -> Error {
        Error::GuestNotBuilt { language: self.name().into(), reason }
    }
}

/// `WASMBOX_GUEST_DIR`, unless unset or empty.
fn guest_dir_from_env() -> Option<OsString> {
    std::env::var_os(GUEST_DIR_ENV).filter(|dir| !dir.is_empty())
}

impl Bundle {
    /// True when `component` is the one this bundle records.
    fn is(&self, component: &[u8]) -> bool {
        component.len() as u64 == self.bytes && Sha256::digest(component)[..] == self.sha256
    }

    /// The component, checked against the manifest.
    fn decompress(&self) -> Result<Vec<u8>, String> {
        let decoder = ruzstd::decoding::StreamingDecoder::new(self.compressed).map_err(|err| err.to_string())?;
        let capacity = usize::try_from(self.bytes).map_err(|err| err.to_string())?;
        let mut component = Vec::with_capacity(capacity);
        // One byte past the recorded length is enough to tell that it is longer.
        decoder.take(self.bytes.saturating_add(1)).read_to_end(&mut component).map_err(|err| err.to_string())?;
        if !self.is(&component) {
            return Err("it does not decompress to the component its manifest records (SHA-256 and length)".into());
        }
        Ok(component)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bundle of `component`, compressed by ruzstd's own encoder (xtask uses libzstd;
    /// both write standard zstd frames).
    fn bundle_of(component: &[u8], recorded: &[u8]) -> Bundle {
        let compressed = ruzstd::encoding::compress_to_vec(component, ruzstd::encoding::CompressionLevel::Fastest);
        let sha256: [u8; 32] = Sha256::digest(recorded).into();
        let manifest = Manifest {
            sha256: hex::encode(sha256),
            bytes: recorded.len() as u64,
            runtime: "test".into(),
            built_with: "test".into(),
            wit: "wasmbox:sandbox@0.1.0".into(),
        };
        Bundle { compressed: Vec::leak(compressed), sha256, bytes: recorded.len() as u64, manifest }
    }

    #[test]
    fn a_bundle_decompresses_only_to_what_its_manifest_records() {
        let component = b"(component) padded to more than one zstd block ".repeat(4096);
        assert_eq!(bundle_of(&component, &component).decompress().unwrap(), component);
        let mut other = component.clone();
        other[100] ^= 1;
        assert!(bundle_of(&other, &component).decompress().is_err(), "same length, other bytes");
        assert!(bundle_of(&component, &component[..component.len() - 1]).decompress().is_err(), "longer");
        let mut longer = component.clone();
        longer.push(b'!');
        assert!(bundle_of(&component, &longer).decompress().is_err(), "shorter");
        let mut damaged = bundle_of(&component, &component);
        damaged.compressed = &damaged.compressed[..damaged.compressed.len() / 2];
        assert!(damaged.decompress().is_err(), "truncated");
    }

    /// The first use unpacks the guest into the cache; later ones find it there, unless
    /// it was changed; a guest directory replaces it, and must hold it.
    #[test]
    #[cfg(unix)]
    fn the_guest_is_unpacked_once_and_again_only_when_changed() {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::EngineConfig { cache_dir: dir.path().join("cache"), pooling: false, ..Default::default() };
        let engine = Engine::new(config).unwrap();
        let guest = BuiltinGuest::JavaScript;
        let bundle = guest.bundle().unwrap_or_else(|err| panic!("{err}"));
        let identity = |path: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(path).unwrap());

        let path = guest.file_from(&engine, None).unwrap();
        assert_eq!(path, guest.path(&engine).unwrap());
        assert_eq!(path.parent(), Some(dir.path().join("cache/builtin").as_path()));
        assert!(bundle.is(&std::fs::read(&path).unwrap()));
        let unpacked = identity(&path);
        assert_eq!(guest.file_from(&engine, None).unwrap(), path);
        assert_eq!(identity(&path), unpacked, "not written again");

        let mut changed = std::fs::read(&path).unwrap();
        let middle = changed.len() / 2;
        changed[middle] ^= 1;
        std::fs::write(&path, &changed).unwrap();
        assert_eq!(guest.file_from(&engine, None).unwrap(), path);
        assert!(bundle.is(&std::fs::read(&path).unwrap()), "unpacked again");

        let guest_dir = dir.path().join("guests");
        let missing = guest.file_from(&engine, Some(guest_dir.clone().into_os_string())).unwrap_err();
        assert!(matches!(&missing, Error::GuestNotBuilt { reason, .. } if reason.contains(GUEST_DIR_ENV)), "{missing}");
        std::fs::create_dir(&guest_dir).unwrap();
        std::fs::write(guest_dir.join("js.wasm"), b"a guest in development").unwrap();
        let developed = guest.file_from(&engine, Some(guest_dir.clone().into_os_string())).unwrap();
        assert_eq!(developed, guest_dir.join("js.wasm"));
    }

    /// The bundle crates' manifests parse, and each guest decompresses to what its
    /// manifest records. Needs the guests (`cargo xtask guests`), as the message says.
    #[test]
    fn the_carried_guests_are_whole() {
        for guest in BuiltinGuest::ALL {
            let bundle = guest.bundle().unwrap_or_else(|err| panic!("{err}"));
            assert_eq!(bundle.decompress().unwrap().len() as u64, bundle.bytes, "{}", guest.name());
            let versions = guest.versions().unwrap();
            assert!(versions.wit.starts_with("wasmbox:sandbox@"), "{versions:?}");
        }
    }
}
