//! What one run's Store holds: WASI, the broker, the memory guard and the run clock.

use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::broker::link::{BrokerCtxView, BrokerView, GuestBroker};
use crate::cancel::CancelToken;

/// Table growth beyond this many elements is refused; CPython needs a few thousand.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// Enforces `max_memory_bytes` over all of a guest's linear memories together and
/// latches the first refusal, because CPython turns a refused `memory.grow` into a
/// catchable `MemoryError` that guest code may swallow.
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

    fn table_growing(&mut self, _current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// The Store data of one run.
pub(crate) struct RunState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
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
}
