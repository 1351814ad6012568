//! Errors of the embedding API. Runs never return these: a run always ends in an
//! [`Outcome`](crate::Outcome). These cover setting things up.

use std::path::PathBuf;

/// Why an engine or a runtime could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// wasmtime refused the engine configuration.
    #[error("could not create the wasm engine: {0}")]
    Engine(String),
    /// The guest component file could not be read.
    #[error("could not read guest component {path}: {source}")]
    ReadGuest {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A built-in guest is not in this build (its crate was compiled from a checkout where
    /// `cargo xtask guests` had not run), or `WASMBOX_GUEST_DIR` names a directory
    /// without it (see [`BuiltinGuest::file`](crate::BuiltinGuest::file)).
    #[error("the {language} guest is not built: {reason}")]
    GuestNotBuilt {
        /// The guest's name (`python`, `js`).
        language: String,
        /// Why, and what to do about it.
        reason: String,
    },
    /// The bytes are not a component that targets the `wasmbox:sandbox` world, or
    /// compiling it failed.
    #[error("invalid guest component: {0}")]
    InvalidComponent(String),
    /// The component imports something a wasmbox guest is not given; checked before it
    /// is linked (see [`ImportPolicy`](crate::ImportPolicy)).
    #[error("guest component {guest} imports `{import}`, which {reason}")]
    UnsupportedImport {
        /// The guest's name (the file stem, or the name it was loaded under).
        guest: String,
        /// The import, as the component names it (`wasi:filesystem/preopens@0.2.0`).
        import: String,
        /// Why it is refused, and what to do about it.
        reason: String,
    },
    /// The precompile cache could not be created or written, or is not private to this
    /// user (see [`EngineConfig::cache_dir`](crate::EngineConfig::cache_dir)).
    #[error("cannot use the precompile cache in {dir}: {reason}")]
    Cache {
        /// The cache directory.
        dir: PathBuf,
        /// What failed.
        reason: String,
    },
    /// The requested isolation cannot be provided here; nothing falls back to a weaker one.
    #[error("isolation `{isolation}` is not available: {reason}")]
    Isolation {
        /// The isolation asked for (`worker`, `bwrap`, `docker`, `seatbelt`).
        isolation: &'static str,
        /// Why, and what to do about it.
        reason: String,
    },
}
