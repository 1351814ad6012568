//! The shared wasmtime engine: configuration, the epoch ticker and the precompile cache.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::Component;

use crate::admission::Admission;
use crate::epoch_ticker::EpochTicker;
use crate::error::Error;
use crate::metrics::{Metrics, MetricsSnapshot};
use crate::precompile_cache::{self, ArtifactKey, PrecompileCache, StoreError, Unusable};
use crate::prepared::{Preparer, SPARE_SLOTS_PER_PREPARED};

/// Default epoch period: how late a wall-clock deadline may fire, and how often a
/// running guest gives its tokio worker back to other tasks.
pub const DEFAULT_EPOCH_TICK_MS: u64 = 10;

/// Default bound on runs executing at once per engine.
pub const DEFAULT_MAX_CONCURRENT_RUNS: usize = 64;
/// Default bound on runs waiting for a slot.
pub const DEFAULT_MAX_QUEUED_RUNS: usize = 256;
/// Default time a run may wait for a slot before it is rejected.
pub const DEFAULT_QUEUE_TIMEOUT_MS: u64 = 10_000;
/// Default [`EngineConfig::keep_resident_bytes`]: 16 MiB. A trivial run of either guest
/// dirties a small part of that (docs/performance.md, "Resetting a slot between runs",
/// has the sizes), so 16 MiB also covers runs that build sizeable data; a run that
/// dirties more has the rest discarded and faulted in again by the next run.
pub const DEFAULT_KEEP_RESIDENT_BYTES: usize = 16 << 20;
/// Default [`EngineConfig::prepared_instances`]: two per runtime, so that two runs in
/// flight (or one run and the next) both find one.
pub const DEFAULT_PREPARED_INSTANCES: usize = 2;
/// The most [`EngineConfig::prepared_instances`] an engine accepts: each adds
/// pool slots, and each slot reserves address space.
pub const MAX_PREPARED_INSTANCES: usize = 64;

/// Instance slots in the pool per admitted run. Nested runs (a tool handler starting
/// a run) share their parent's admission slot but each takes an instance of its own:
/// room for a chain of nested runs as deep as the default `max_nesting_depth`. Never
/// fewer than [`MIN_POOL_INSTANCES`].
const POOL_INSTANCES_PER_RUN: u32 = 1 + crate::limits::DEFAULT_MAX_NESTING_DEPTH;
/// The smallest pool, so that an engine admitting one or two runs still has room for
/// their nested runs.
const MIN_POOL_INSTANCES: u32 = 16;

/// How to build an [`Engine`].
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Where precompiled guests are cached. Default: `$WASMBOX_CACHE_DIR`, else the
    /// platform cache directory (`~/.cache/wasmbox` on Linux), else `wasmbox-<uid>` in
    /// the temporary directory; never a directory all users share.
    ///
    /// Artifacts are native code the engine runs, so [`Engine::new`] creates the
    /// directory `0700` if missing and, on Unix, refuses one that is a symbolic link,
    /// owned by another user, or writable by group or others; each artifact is checked
    /// the same way, and against the checksum written with it, before it is loaded
    /// (SECURITY.md, "Precompile cache").
    pub cache_dir: PathBuf,
    /// Epoch period in milliseconds. Default: [`DEFAULT_EPOCH_TICK_MS`].
    pub epoch_tick_ms: u64,
    /// Top-level runs executing at once; more wait in the queue. Nested runs are part
    /// of their parent's slot. Default: [`DEFAULT_MAX_CONCURRENT_RUNS`].
    pub max_concurrent_runs: usize,
    /// Runs that may wait for a slot; the next is `rejected` at once.
    /// Default: [`DEFAULT_MAX_QUEUED_RUNS`].
    pub max_queued_runs: usize,
    /// How long a run may wait for a slot before it is `rejected`.
    /// Default: [`DEFAULT_QUEUE_TIMEOUT_MS`].
    pub queue_timeout_ms: u64,
    /// Instantiate guests from a pool allocated once (wasmtime's pooling allocator,
    /// copy-on-write memory images) instead of mapping every run's memories, tables and
    /// stack afresh. Default `true`: a run then maps nothing of its own, and a slot can
    /// be reset in place (`keep_resident_bytes`); docs/performance.md has the figures.
    /// The pool holds 3 × `max_concurrent_runs` instances, at least 16: nested runs share
    /// their parent's admission slot but take an instance each, and a run tree (a
    /// top-level run and the runs nested in it) holds at most its share, pool ÷
    /// `max_concurrent_runs`, at once, so nesting never takes the instance another
    /// admitted run needs: a nested run past its tree's share ends `rejected` with error
    /// kind `instance_pool`. The pool *reserves*
    /// address space up front, committed only as guests touch it: ~8 GiB per instance
    /// (two 4 GiB memory slots), so ~1.5 TiB for the default 64 runs and ~24 TiB for 1,000,
    /// of the 128 TiB a 64-bit Linux process has. Set `false` where virtual address space
    /// is limited (`ulimit -v`).
    pub pooling: bool,
    /// Count wasm instructions, so that runs can have a deterministic budget
    /// ([`Limits::fuel`](crate::Limits::fuel)). Default `false`: metering updates a
    /// counter throughout the compiled code and checks it at every loop and call, which
    /// makes CPU-bound runs markedly slower (docs/performance.md), and the wall-clock
    /// deadline already bounds every run. It changes the compiled code, so each setting
    /// compiles (and caches) a guest once.
    pub fuel_metering: bool,
    /// With `pooling`, on Linux 6.7+ (the `PAGEMAP_SCAN` ioctl): how much of the memory a
    /// finished run wrote each pool slot keeps mapped, reset by copying the snapshot back
    /// over just those pages, so the slot's next run takes no page faults and no TLB
    /// shootdowns (docs/performance.md has the throughput it gains). The cost is resident
    /// memory kept between runs: up to this much per slot ever used, so after a burst of
    /// N concurrent runs up to N × this stays resident (what a small run leaves dirty,
    /// usually far less). `0` discards everything a run touched instead. Workers
    /// ([`Sandbox::isolation`](crate::Sandbox::isolation)) use the same setting.
    /// Default: [`DEFAULT_KEEP_RESIDENT_BYTES`].
    ///
    /// # Security
    /// Only with the crate feature `pagemap-reset` (its scan finds dirty pages whether
    /// resident or swapped out, so no run sees another's data either way). Without the
    /// feature this setting is ignored and every slot is reset by discarding what the
    /// run touched.
    pub keep_resident_bytes: usize,
    /// How many fresh instances each runtime keeps instantiated ahead of its runs, so
    /// that a run finds its instance ready instead of instantiating it (and a finished
    /// run's instance is dropped, its pool slot reset, after the outcome is returned
    /// rather than before). One background thread per engine does both; a run that
    /// finds none ready, or none that fits its limits, instantiates as before and never
    /// waits for it. Each prepared instance serves exactly one run: nothing is reused
    /// across runs (SECURITY.md, "Prepared instances"). The pool holds 4 ×
    /// `prepared_instances` more slots for them, shared by the engine's runtimes. `0`
    /// turns both off. At most [`MAX_PREPARED_INSTANCES`]. Default:
    /// [`DEFAULT_PREPARED_INSTANCES`].
    pub prepared_instances: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            cache_dir: precompile_cache::default_dir(),
            epoch_tick_ms: DEFAULT_EPOCH_TICK_MS,
            max_concurrent_runs: DEFAULT_MAX_CONCURRENT_RUNS,
            max_queued_runs: DEFAULT_MAX_QUEUED_RUNS,
            queue_timeout_ms: DEFAULT_QUEUE_TIMEOUT_MS,
            pooling: true,
            fuel_metering: false,
            keep_resident_bytes: DEFAULT_KEEP_RESIDENT_BYTES,
            prepared_instances: DEFAULT_PREPARED_INSTANCES,
        }
    }
}

/// One wasmtime engine shared by every runtime and run. Cheap to clone; `Send + Sync`;
/// its epoch thread stops when the last clone is dropped.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<EngineInner>,
}

struct EngineInner {
    wasmtime: wasmtime::Engine,
    cache: PrecompileCache,
    epoch_tick: Duration,
    admission: Admission,
    metrics: Arc<Metrics>,
    fuel_metering: bool,
    keep_resident_bytes: usize,
    nested_runs_per_tree: u32,
    /// Prepares instances ahead of runs and drops finished ones in the background.
    preparer: Preparer,
    // Declared last so it is dropped (and joined) after the rest.
    _ticker: EpochTicker,
}

impl Engine {
    /// Builds an engine: component model, async host calls and epoch interruption on, so
    /// every run is bounded in time; fuel metering when the config asks for it.
    ///
    /// # Errors
    /// [`Error::Engine`] when wasmtime rejects the configuration or the ticker thread
    /// cannot start; [`Error::Cache`] when the cache directory cannot be created or is
    /// not private to this user (see [`EngineConfig::cache_dir`]).
    pub fn new(config: EngineConfig) -> Result<Self, Error> {
        if config.epoch_tick_ms == 0 {
            return Err(Error::Engine("epoch_tick_ms must be greater than zero".into()));
        }
        if !cfg!(feature = "compiler") {
            return Err(Error::Engine(
                "this build of wasmbox has no compiler: it was built without the `compiler` feature, \
                 which only checking the code for other targets leaves out"
                    .into(),
            ));
        }
        if config.prepared_instances > MAX_PREPARED_INSTANCES {
            return Err(Error::Engine(format!("prepared_instances must be at most {MAX_PREPARED_INSTANCES}")));
        }
        let cache = PrecompileCache::open(config.cache_dir)?;
        let mut wasm = wasmtime::Config::new();
        wasm.wasm_component_model(true)
            // Epochs are the wall-clock deadline; fuel is the opt-in deterministic budget.
            // Both change the generated code, hence both are in the cache key.
            .consume_fuel(config.fuel_metering)
            .epoch_interruption(true);
        if config.pooling {
            // Not part of the compiled code: the precompile cache key is unchanged.
            let spare = (config.prepared_instances as u32).saturating_mul(SPARE_SLOTS_PER_PREPARED);
            wasm.allocation_strategy(pool_config(config.max_concurrent_runs, spare, config.keep_resident_bytes));
        }
        let wasmtime = wasmtime::Engine::new(&wasm).map_err(|e| Error::Engine(e.to_string()))?;
        let epoch_tick = Duration::from_millis(config.epoch_tick_ms);
        let ticker = EpochTicker::start(wasmtime.clone(), epoch_tick).map_err(|e| Error::Engine(e.to_string()))?;
        let preparer = Preparer::start(config.prepared_instances).map_err(|e| Error::Engine(e.to_string()))?;
        Ok(Engine {
            inner: Arc::new(EngineInner {
                wasmtime,
                cache,
                epoch_tick,
                admission: Admission::new(
                    config.max_concurrent_runs,
                    config.max_queued_runs,
                    Duration::from_millis(config.queue_timeout_ms),
                ),
                metrics: Arc::default(),
                fuel_metering: config.fuel_metering,
                keep_resident_bytes: config.keep_resident_bytes,
                nested_runs_per_tree: nested_runs_per_tree(config.max_concurrent_runs),
                preparer,
                _ticker: ticker,
            }),
        })
    }

    /// True when this engine counts fuel, so runs may set [`Limits::fuel`](crate::Limits::fuel).
    pub fn meters_fuel(&self) -> bool {
        self.inner.fuel_metering
    }

    /// How many nested runs one run tree may have in flight: its share of the pool
    /// beyond its top-level run's own instance (the same bound without the pool, where
    /// each instance is mapped afresh).
    pub(crate) fn nested_runs_per_tree(&self) -> u32 {
        self.inner.nested_runs_per_tree
    }

    /// [`EngineConfig::keep_resident_bytes`], for the workers this engine starts.
    pub(crate) fn keep_resident_bytes(&self) -> usize {
        self.inner.keep_resident_bytes
    }

    /// The precompile cache directory.
    pub fn cache_dir(&self) -> &Path {
        self.inner.cache.dir()
    }

    /// True when `component` is already precompiled for this engine, so loading it
    /// takes milliseconds rather than a compile of many seconds.
    pub fn is_precompiled(&self, component: &[u8]) -> bool {
        let key = ArtifactKey::of(&self.inner.wasmtime, component);
        self.inner.cache.artifact_path(&key).is_file()
    }

    /// A snapshot of this engine's counters (runs by status, tool calls by tool and
    /// status, runs running and queued, memory the pool keeps resident);
    /// `to_prometheus()` renders it for scraping.
    pub fn metrics(&self) -> MetricsSnapshot {
        let mut snapshot = self.inner.metrics.snapshot();
        if let Some(pool) = self.inner.wasmtime.pooling_allocator_metrics() {
            let bytes = pool.unused_memory_bytes_resident() + pool.unused_table_bytes_resident();
            snapshot.pool_resident_bytes = bytes as u64;
        }
        snapshot
    }

    pub(crate) fn metrics_handle(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    pub(crate) fn admission(&self) -> &Admission {
        &self.inner.admission
    }

    pub(crate) fn wasmtime(&self) -> &wasmtime::Engine {
        &self.inner.wasmtime
    }

    pub(crate) fn preparer(&self) -> &Preparer {
        &self.inner.preparer
    }

    pub(crate) fn epoch_tick(&self) -> Duration {
        self.inner.epoch_tick
    }

    /// True when the component file at `path` is precompiled for this engine and
    /// unchanged since, so [`Runtime::from_file`](crate::Runtime::from_file) loads it in
    /// milliseconds without reading it.
    pub fn is_precompiled_file(&self, path: &Path) -> bool {
        self.inner.cache.lookup_file(&self.inner.wasmtime, path).is_some()
    }

    /// Loads the component file at `path`: straight from its artifact when the file is
    /// unchanged since its last load, else as [`Engine::load_component`].
    pub(crate) fn load_component_file(&self, path: &Path) -> Result<Component, Error> {
        let (engine, cache) = (&self.inner.wasmtime, &self.inner.cache);
        if let Some(key) = cache.lookup_file(engine, path) {
            match cache.load(engine, &key) {
                Ok(loaded) => return Ok(loaded),
                Err(unusable) => self.discard(&key, &unusable),
            }
        }
        let bytes = std::fs::read(path).map_err(|source| Error::ReadGuest { path: path.to_owned(), source })?;
        let (component, key) = self.load_component_at(&bytes)?;
        cache.remember_file(engine, path, &key);
        Ok(component)
    }

    /// Loads `component` from the cache, compiling and storing it first if needed.
    pub(crate) fn load_component(&self, component: &[u8]) -> Result<Component, Error> {
        self.load_component_at(component).map(|(component, _artifact)| component)
    }

    fn load_component_at(&self, component: &[u8]) -> Result<(Component, ArtifactKey), Error> {
        let (engine, cache) = (&self.inner.wasmtime, &self.inner.cache);
        let key = ArtifactKey::of(engine, component);
        match cache.load(engine, &key) {
            Ok(loaded) => return Ok((loaded, key)),
            Err(unusable) => self.discard(&key, &unusable),
        }
        if wasmtime::Engine::detect_precompiled(component).is_some() {
            return Err(Error::InvalidComponent("expected a component, got a precompiled artifact".into()));
        }
        // Validate and compile in one step; a bad component fails here with wasmtime's reason.
        let loaded = cache.store(engine, component, &key).map_err(|err| match err {
            StoreError::Compile(err) => Error::InvalidComponent(format!("{err:#}")),
            StoreError::Io(err) => Error::Cache { dir: cache.dir().to_owned(), reason: err.to_string() },
        })?;
        Ok((loaded, key))
    }

    /// Says why a cached artifact is compiled again: it was damaged, replaced or
    /// written by someone else, never merely missing.
    fn discard(&self, key: &ArtifactKey, unusable: &Unusable) {
        if !matches!(unusable, Unusable::Missing) {
            let path = self.inner.cache.artifact_path(key);
            tracing::warn!(path = %path.display(), reason = %unusable, "compiling again instead of loading a precompiled artifact");
        }
    }
}

/// What one guest instance may take from the pool: what the guests of this repository
/// use, with room to spare (docs/performance.md, "The instance pool", lists each
/// guest's counts, read with wasmtime's `pooling_allocator_metrics`). Core instances
/// are only counted (their metadata is allocated per instance), so that budget is
/// generous; each memory slot reserves ~4 GiB of address space, so custom guests get
/// room for one more memory, not more.
const CORE_INSTANCES_PER_INSTANCE: u32 = 32;
const MEMORIES_PER_INSTANCE: u32 = 2;
const TABLES_PER_INSTANCE: u32 = 4;
/// Elements of the largest table a guest may define or grow to (8 bytes each,
/// reserved per table slot). Both interpreters' tables are a sizeable fraction of
/// wasmtime's default of 20,000 (docs/performance.md, "The instance pool"), which
/// would leave larger custom guests little room.
const TABLE_ELEMENTS: usize = 50_000;
/// The largest `Limits::max_memory_bytes` (4 GiB, all of a 32-bit memory): the Store's
/// limiter enforces each run's own, smaller cap.
const MAX_MEMORY_SIZE: usize = 4 << 30;

/// Guest instances in the pool of an engine admitting `max_concurrent_runs`.
fn pool_instances(max_concurrent_runs: usize) -> u32 {
    let runs = u32::try_from(max_concurrent_runs).unwrap_or(u32::MAX);
    runs.saturating_mul(POOL_INSTANCES_PER_RUN).max(MIN_POOL_INSTANCES)
}

/// Each admitted run tree's share of the pool, less its top-level run's instance: with
/// every tree within its share, the admitted runs never need more than the pool holds.
fn nested_runs_per_tree(max_concurrent_runs: usize) -> u32 {
    let runs = u32::try_from(max_concurrent_runs.max(1)).unwrap_or(u32::MAX);
    (pool_instances(max_concurrent_runs) / runs).saturating_sub(1)
}

/// The pooling allocator sized for `max_concurrent_runs`, plus `spare` instances for
/// those prepared ahead of runs or waiting to be dropped (`prepared.rs`).
fn pool_config(
    max_concurrent_runs: usize,
    spare: u32,
    keep_resident_bytes: usize,
) -> wasmtime::PoolingAllocationConfig {
    let instances = pool_instances(max_concurrent_runs).saturating_add(spare);
    let mut pool = wasmtime::PoolingAllocationConfig::new();
    pool.total_component_instances(instances)
        .total_core_instances(instances.saturating_mul(CORE_INSTANCES_PER_INSTANCE))
        .total_memories(instances.saturating_mul(MEMORIES_PER_INSTANCE))
        .total_tables(instances.saturating_mul(TABLES_PER_INSTANCE))
        // One fiber stack per Store (each run and nested run has its own).
        .total_stacks(instances)
        .max_memories_per_module(2)
        .max_tables_per_module(4)
        .max_memory_size(MAX_MEMORY_SIZE)
        .table_elements(TABLE_ELEMENTS)
        // Metadata sizes are only checked when a component loads, never reserved:
        // generous, so that custom guests bigger than CPython load.
        .max_core_instance_size(8 << 20)
        .max_component_instance_size(64 << 20);
    // Where the kernel has the PAGEMAP_SCAN ioctl (Linux 6.7+), reset a finished run's
    // memory by copying back only the pages it dirtied, keeping them mapped, instead of
    // `madvise`-ing all of it away and taking a page fault again in the next run for
    // every page it touches, each run shooting down the other core's TLB, so that two
    // runs in flight were slower than one (docs/performance.md, "Throughput", has the
    // runs/s before and after). The cost: up to `keep_resident_bytes` of each slot a
    // run dirtied stays resident between runs. Without the ioctl, keeping memory
    // resident would mean copying all of its first `keep_resident_bytes` back after
    // every run: not worth it. Opt-in (feature `pagemap-reset`) because crates.io's
    // wasmtime over-reports dirty pages on some kernels, which is safe but can make the
    // in-place reset slower than discarding; this workspace enables it beside
    // vendor/wasmtime, which does not (vendor/README.md).
    if cfg!(feature = "pagemap-reset")
        && keep_resident_bytes > 0
        && wasmtime::PoolingAllocationConfig::is_pagemap_scan_available()
    {
        pool.linear_memory_keep_resident(keep_resident_bytes)
            .table_keep_resident(keep_resident_bytes)
            .pagemap_scan(wasmtime::Enabled::Yes);
    }
    pool
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("cache_dir", &self.cache_dir()).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod component_imports;

#[cfg(test)]
mod imported_table_segments;

#[cfg(all(test, target_os = "linux"))]
mod fault_around;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every admitted tree within its share never needs more instances than the pool
    /// holds, and the share always fits a chain as deep as the default nesting depth.
    #[test]
    fn run_trees_within_their_share_never_fill_the_pool() {
        for runs in (1..=300).chain([1_000, 10_000]) {
            let share = nested_runs_per_tree(runs);
            let needed = u64::try_from(runs).unwrap() * u64::from(1 + share);
            assert!(needed <= u64::from(pool_instances(runs)), "{runs} runs");
            assert!(share >= crate::limits::DEFAULT_MAX_NESTING_DEPTH, "{runs} runs");
        }
        assert_eq!(nested_runs_per_tree(1), MIN_POOL_INSTANCES - 1);
        assert_eq!(nested_runs_per_tree(0), MIN_POOL_INSTANCES - 1, "no division by zero");
    }

    /// The in-place reset (`pagemap-reset`) trusts the kernel's `PAGEMAP_SCAN` only after
    /// trying the scan on the running kernel (vendor/README.md, "Checking the scan"): the
    /// reset's own scan must report exactly the pages written, and two scans wrong on
    /// every kernel, one that also reports pages only read and one that misses pages
    /// written, are refused.
    #[test]
    #[cfg(target_os = "linux")]
    fn the_dirty_page_scan_is_tried_on_this_kernel_before_it_is_trusted() {
        use wasmtime::PoolingAllocationConfig as Pool;
        let Some(dirty) = Pool::wasmbox_check_pagemap_query("dirty", false) else {
            eprintln!("skipped: this kernel has no PAGEMAP_SCAN (Linux 6.7+); memory is discarded instead");
            assert!(!Pool::is_pagemap_scan_available());
            return;
        };
        assert!(dirty, "the reset's scan does not report exactly the written pages here");
        assert!(Pool::is_pagemap_scan_available());
        assert_eq!(Pool::wasmbox_check_pagemap_query("present", false), Some(false));
        assert_eq!(Pool::wasmbox_check_pagemap_query("zero", false), Some(false));
        assert_eq!(Pool::wasmbox_check_pagemap_query("no such scan", false), None);
    }
}
