//! A compiled guest, linked and ready to instantiate: one per language per engine.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmtime::component::{Component, Linker};

use crate::bindings::CodeRunnerPre;
use crate::broker::link as broker_link;
use crate::builtin_guest::BuiltinGuest;
use crate::engine::Engine;
use crate::error::Error;
use crate::import_check::{self, ImportPolicy};
use crate::prepared::PreparedSet;
use crate::run_state::RunState;
use crate::vfs;

/// The file a runtime was loaded from and its import policy: what a worker process
/// loads to run the same guest. Runtimes built from bytes have none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GuestSource {
    pub(crate) path: PathBuf,
    pub(crate) policy: ImportPolicy,
}

/// A guest component compiled for an [`Engine`], with its imports resolved once
/// (`InstancePre`) so each run only instantiates, and up to
/// [`EngineConfig::prepared_instances`](crate::EngineConfig::prepared_instances) fresh
/// instances kept instantiated ahead of runs, each used by one run. Cheap to clone;
/// `Send + Sync`.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<RuntimeInner>,
}

struct RuntimeInner {
    engine: Engine,
    name: String,
    pre: CodeRunnerPre<RunState>,
    /// Instances of `pre` instantiated ahead of runs.
    prepared: Arc<PreparedSet>,
    /// The file a worker process loads the same guest from.
    source: Option<GuestSource>,
}

impl Runtime {
    /// The CPython guest that ships with wasmbox ([`BuiltinGuest::Python`]).
    ///
    /// # Errors
    /// As [`Runtime::builtin`].
    pub fn python(engine: &Engine) -> Result<Self, Error> {
        Self::builtin(engine, BuiltinGuest::Python)
    }

    /// The JavaScript (SpiderMonkey) guest that ships with wasmbox
    /// ([`BuiltinGuest::JavaScript`]).
    ///
    /// # Errors
    /// As [`Runtime::builtin`].
    pub fn javascript(engine: &Engine) -> Result<Self, Error> {
        Self::builtin(engine, BuiltinGuest::JavaScript)
    }

    /// A guest that ships with wasmbox, loaded from [`BuiltinGuest::file`]: unpacked into
    /// the cache directory on first use, then compiled once for this engine's settings
    /// and cached like any guest file.
    ///
    /// # Errors
    /// As [`BuiltinGuest::file`], then as [`Runtime::from_file`].
    pub fn builtin(engine: &Engine, guest: BuiltinGuest) -> Result<Self, Error> {
        let path = guest.file(engine)?;
        // Their libc imports the WASI filesystem (CPython's also sockets) even when a
        // script uses neither; the WASI context makes both inert.
        let policy = ImportPolicy::AllowInertWasi;
        let component = engine.load_component_file(&path)?;
        Self::link(engine, guest.name(), component, policy, Some(GuestSource { path, policy }))
    }

    /// Loads a component file that targets the `wasmbox:sandbox` world, with the
    /// default [`ImportPolicy::Strict`].
    ///
    /// # Errors
    /// [`Error::ReadGuest`] if unreadable, else as [`Runtime::from_bytes`].
    pub fn from_file(engine: &Engine, path: &Path) -> Result<Self, Error> {
        Self::from_file_with(engine, path, ImportPolicy::Strict)
    }

    /// Like [`Runtime::from_file`], with the given import policy.
    ///
    /// # Errors
    /// As [`Runtime::from_file`].
    pub fn from_file_with(engine: &Engine, path: &Path, policy: ImportPolicy) -> Result<Self, Error> {
        let name = path.file_stem().map_or_else(|| "guest".into(), |s| s.to_string_lossy().into_owned());
        let source = GuestSource { path: std::path::absolute(path).unwrap_or_else(|_| path.to_owned()), policy };
        Self::link(engine, &name, engine.load_component_file(path)?, policy, Some(source))
    }

    /// Loads component bytes: from the precompile cache when present, else compiling
    /// (seconds for a large guest; see [`Engine::is_precompiled`]) and caching them.
    /// Before linking, its imports are checked with [`ImportPolicy::Strict`].
    ///
    /// # Errors
    /// [`Error::InvalidComponent`] when the bytes are not a valid component that
    /// exports the world's runner, or the host's functions do not fit its imports;
    /// [`Error::UnsupportedImport`] when it imports something a guest is not given;
    /// [`Error::Cache`] when the cache is unwritable.
    pub fn from_bytes(engine: &Engine, name: &str, component: &[u8]) -> Result<Self, Error> {
        Self::from_bytes_with(engine, name, component, ImportPolicy::Strict)
    }

    /// Like [`Runtime::from_bytes`], with the given import policy.
    ///
    /// # Errors
    /// As [`Runtime::from_bytes`].
    pub fn from_bytes_with(engine: &Engine, name: &str, component: &[u8], policy: ImportPolicy) -> Result<Self, Error> {
        Self::link(engine, name, engine.load_component(component)?, policy, None)
    }

    /// Checks the component's imports, links them and resolves them once.
    fn link(
        engine: &Engine,
        name: &str,
        component: Component,
        policy: ImportPolicy,
        source: Option<GuestSource>,
    ) -> Result<Self, Error> {
        import_check::check(engine.wasmtime(), &component, name, policy)?;
        let mut linker = Linker::<RunState>::new(engine.wasmtime());
        let invalid = |e: wasmtime::Error| Error::InvalidComponent(format!("{e:#}"));
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(invalid)?;
        // Replaces wasmtime-wasi's filesystem (host directories only) with the run's
        // in-memory one.
        vfs::add_to_linker(&mut linker).map_err(invalid)?;
        broker_link::add_to_linker(&mut linker).map_err(invalid)?;
        let instance_pre = linker.instantiate_pre(&component).map_err(invalid)?;
        let pre = CodeRunnerPre::new(instance_pre).map_err(invalid)?;
        let prepared = engine.preparer().set_for(&pre, engine.meters_fuel());
        let inner = RuntimeInner { engine: engine.clone(), name: name.into(), pre, prepared, source };
        Ok(Runtime { inner: Arc::new(inner) })
    }

    /// A short name for the guest (`python`, or the file stem).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    pub(crate) fn pre(&self) -> &CodeRunnerPre<RunState> {
        &self.inner.pre
    }

    pub(crate) fn prepared(&self) -> &Arc<PreparedSet> {
        &self.inner.prepared
    }

    pub(crate) fn source(&self) -> Option<&GuestSource> {
        self.inner.source.as_ref()
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("name", &self.name()).finish_non_exhaustive()
    }
}
