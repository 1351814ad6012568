//! One engine-owned thread that advances the wasmtime epoch at a fixed period.
//!
//! Deadlines are wall-clock instants checked whenever the epoch ticks past a Store's
//! deadline, so the tick period bounds how late a timeout can fire. The thread stops
//! and is joined when the ticker is dropped (no global timer singleton).

use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

/// Advances `engine`'s epoch every `period` until dropped.
pub(crate) struct EpochTicker {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    pub(crate) fn start(engine: wasmtime::Engine, period: Duration) -> std::io::Result<Self> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new().name("wasmbox-epoch".into()).spawn(move || {
            // A message or a closed channel both mean stop.
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(period) {
                engine.increment_epoch();
            }
        })?;
        Ok(EpochTicker { stop: Some(stop), thread: Some(thread) })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
