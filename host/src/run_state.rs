//! What one run's Store holds: WASI, the in-memory filesystem, the broker, the memory
//! guard and the run clock.

use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::broker::link::{BrokerCtxView, BrokerView, GuestBroker};
use crate::cancel::CancelToken;
use crate::vfs::{Vfs, VfsCtxView, VfsView};

/// Table growth beyond this many elements is refused; CPython needs a few thousand.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;
/// What one table element is counted as against `max_memory_bytes`: the host stores a
/// pointer per element.
const TABLE_ELEMENT_BYTES: usize = std::mem::size_of::<usize>();

/// Enforces `max_memory_bytes` over all of a guest's linear memories and tables together
/// (a table element counts [`TABLE_ELEMENT_BYTES`]) and latches the first refusal,
/// because CPython turns a refused `memory.grow` into a catchable `MemoryError` that
/// guest code may swallow.
pub(crate) struct MemoryGuard {
    max_bytes: usize,
    total_bytes: usize,
    peak_bytes: usize,
    exceeded: bool,
}

impl MemoryGuard {
    pub(crate) fn new(max_bytes: u64) -> Self {
        MemoryGuard {
            max_bytes: usize::try_from(max_bytes).unwrap_or(usize::MAX),
            total_bytes: 0,
            peak_bytes: 0,
            exceeded: false,
        }
    }

    pub(crate) fn exceeded(&self) -> bool {
        self.exceeded
    }

    pub(crate) fn peak_bytes(&self) -> usize {
        self.peak_bytes
    }

    /// True when what this guard has counted so far (an instance instantiated ahead of
    /// its run) fits under `max_bytes`.
    pub(crate) fn fits(&self, max_bytes: u64) -> bool {
        !self.exceeded && u64::try_from(self.total_bytes).is_ok_and(|total| total <= max_bytes)
    }

    /// A guard for a run with `max_bytes` that starts from what this one counted, so
    /// that the run's limit and peak include the memory its instance already holds, as
    /// they would had the run instantiated it. Check [`MemoryGuard::fits`] first.
    pub(crate) fn resumed(&self, max_bytes: u64) -> MemoryGuard {
        MemoryGuard { total_bytes: self.total_bytes, peak_bytes: self.peak_bytes, ..MemoryGuard::new(max_bytes) }
    }
}

impl wasmtime::ResourceLimiter for MemoryGuard {
    fn memory_growing(&mut self, current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        // Called for every memory, including its initial allocation (current == 0), so
        // the running sum is the guest's total linear memory.
        let total = self.total_bytes.saturating_add(desired.saturating_sub(current));
        if total > self.max_bytes {
            self.exceeded = true;
            return Ok(false);
        }
        self.total_bytes = total;
        self.peak_bytes = self.peak_bytes.max(total);
        Ok(true)
    }

    fn table_growing(&mut self, current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        if desired > MAX_TABLE_ELEMENTS {
            self.exceeded = true;
            return Ok(false);
        }
        let growth = desired.saturating_sub(current).saturating_mul(TABLE_ELEMENT_BYTES);
        let current_bytes = current.saturating_mul(TABLE_ELEMENT_BYTES);
        self.memory_growing(current_bytes, current_bytes.saturating_add(growth), None)
    }
}

/// The Store data of one run.
pub(crate) struct RunState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) vfs: Vfs,
    pub(crate) broker: GuestBroker,
    pub(crate) memory: MemoryGuard,
    pub(crate) deadline: Instant,
    pub(crate) cancel: CancelToken,
}

impl WasiView for RunState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl VfsView for RunState {
    fn vfs(&mut self) -> VfsCtxView<'_> {
        VfsCtxView { vfs: &mut self.vfs, table: &mut self.table }
    }
}

impl BrokerView for RunState {
    fn broker(&mut self) -> BrokerCtxView<'_> {
        BrokerCtxView { ctx: &mut self.broker }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter;

    #[test]
    fn memory_cap_spans_all_memories_and_latches() {
        let mut guard = MemoryGuard::new(100);
        assert!(guard.memory_growing(0, 60, None).unwrap());
        assert!(guard.memory_growing(0, 30, None).unwrap());
        assert!(!guard.exceeded());
        assert!(!guard.memory_growing(60, 80, None).unwrap(), "60 + 30 + 20 > 100");
        assert!(guard.exceeded());
        assert!(guard.memory_growing(30, 40, None).unwrap(), "still room for 10");
        assert!(guard.exceeded(), "the breach stays latched");
        assert_eq!(guard.peak_bytes(), 100);
    }

    #[test]
    fn tables_count_against_the_same_cap() {
        let mut guard = MemoryGuard::new(1_000);
        assert!(guard.memory_growing(0, 600, None).unwrap());
        assert!(guard.table_growing(0, 40, None).unwrap(), "40 elements: 320 bytes");
        assert!(!guard.exceeded());
        assert!(!guard.table_growing(40, 80, None).unwrap(), "600 + 640 > 1000");
        assert!(guard.exceeded(), "a refused table growth is latched like a memory one");
        let mut guard = MemoryGuard::new(u64::MAX);
        assert!(!guard.table_growing(0, MAX_TABLE_ELEMENTS + 1, None).unwrap());
    }

    /// The limiter as wasmtime calls it: a module whose `table.grow` would take its
    /// memory and tables past the cap gets -1, and the breach is latched.
    #[test]
    fn wasm_table_growth_is_refused_past_the_memory_cap() {
        let engine = wasmtime::Engine::default();
        let module = wasmtime::Module::new(
            &engine,
            r#"(module
                (memory 1)
                (table 16 funcref)
                (func (export "grow") (param i32) (result i32)
                    (table.grow (ref.null func) (local.get 0))))"#,
        )
        .unwrap();
        // One 64 KiB page plus 16 elements, and room for 1,000 more elements.
        let cap = 65_536 + (16 + 1_000) * TABLE_ELEMENT_BYTES as u64;
        let mut store = wasmtime::Store::new(&engine, MemoryGuard::new(cap));
        store.limiter(|guard| guard);
        let instance = wasmtime::Instance::new(&mut store, &module, &[]).unwrap();
        let grow = instance.get_typed_func::<i32, i32>(&mut store, "grow").unwrap();
        assert_eq!(grow.call(&mut store, 1_000).unwrap(), 16, "within the cap");
        assert!(!store.data().exceeded());
        assert_eq!(grow.call(&mut store, 1).unwrap(), -1, "one element past the cap");
        assert!(store.data().exceeded());
    }
}
