//! Driving a future to its end on the caller's thread, as sync `run` and session steps
//! do: the GIL is released while it runs, and every [`SIGNAL_POLL`] the thread takes the
//! GIL back for a moment so Python can handle signals. Ctrl-C cancels the run (or step)
//! through its token and raises `KeyboardInterrupt` once it stopped. While it waits for
//! a sync tool's answer, the thread spins briefly before it parks ([`spin_until`]).

use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use wasmbox::CancelToken;

use crate::tokio_runtime;

/// How often a sync run lets Python look at pending signals (Ctrl-C).
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// How long the thread driving a sync run spins (yielding its CPU) for an answer from
/// another thread before it parks: waking a parked thread again costs about as much as
/// a quick tool call itself (docs/performance.md, "The Python package").
const SPIN_FOR_ANSWER: Duration = Duration::from_micros(100);

/// On a thread inside [`drive`], waits up to [`SPIN_FOR_ANSWER`] for `ready`, yielding
/// its CPU meanwhile. The driving thread polls only its caller's run, so it would park
/// until the answer came: a quick answer is taken without waking it again. A tokio
/// worker spins too, but only while the runs it could be driving instead are this one
/// alone ([`AsyncRun`]): with more in flight it would hold them up. Elsewhere it
/// returns at once. Whether it spun.
pub(crate) fn spin_until(ready: impl Fn() -> bool) -> bool {
    let driving = DRIVING.with(Cell::get);
    if !driving && !(ON_WORKER.with(Cell::get) && ASYNC_RUNS.load(Ordering::Relaxed) <= 1) {
        return false;
    }
    let until = Instant::now() + SPIN_FOR_ANSWER;
    while !ready() && Instant::now() < until {
        std::thread::yield_now();
    }
    true
}

thread_local! {
    /// Whether this thread is inside [`drive`].
    static DRIVING: Cell<bool> = const { Cell::new(false) };
    /// Whether this thread is one of the shared runtime's ([`on_runtime_thread`]).
    static ON_WORKER: Cell<bool> = const { Cell::new(false) };
}

/// The runs and steps started from asyncio that are in progress ([`AsyncRun`]).
static ASYNC_RUNS: AtomicUsize = AtomicUsize::new(0);

/// Marks the calling thread as one of the shared runtime's (its `on_thread_start`).
/// Its blocking-pool threads are marked too, but they poll no run but a nested sync
/// run's, inside [`drive`].
pub(crate) fn on_runtime_thread() {
    ON_WORKER.with(|on| on.set(true));
}

/// One run or step started from asyncio, counted while it is in progress.
pub(crate) struct AsyncRun(());

impl AsyncRun {
    pub(crate) fn start() -> Self {
        ASYNC_RUNS.fetch_add(1, Ordering::Relaxed);
        AsyncRun(())
    }
}

impl Drop for AsyncRun {
    fn drop(&mut self) {
        ASYNC_RUNS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Calls `f` as if inside [`drive`]: a pooled tool call that `f` polls spins for its
/// answer ([`spin_until`]). For the first poll of an eager `run_async`, whose thread (the
/// loop's) waits for it anyway.
pub(crate) fn as_driver<R>(f: impl FnOnce() -> R) -> R {
    let _driving = Driving::enter();
    f()
}

/// Marks this thread as inside [`drive`] until dropped.
struct Driving;

impl Driving {
    fn enter() -> Self {
        DRIVING.with(|driving| driving.set(true));
        Driving
    }
}

impl Drop for Driving {
    fn drop(&mut self) {
        DRIVING.with(|driving| driving.set(false));
    }
}

/// Drives `future` on this thread with the GIL released, looking at pending signals
/// every [`SIGNAL_POLL`]. On Ctrl-C, `cancel` (when given) is cancelled and the future
/// driven to its end (a step ends within an epoch tick); without one the future is
/// dropped. Either way the `KeyboardInterrupt` is raised.
pub(crate) fn drive<T: Send>(
    py: Python<'_>,
    future: impl Future<Output = T> + Send,
    cancel: Option<&CancelToken>,
) -> PyResult<T> {
    let runtime = tokio_runtime();
    let mut future = pin!(future);
    loop {
        let finished = py.detach(|| {
            let _driving = Driving::enter();
            runtime.block_on(async {
                tokio::select! {
                    value = &mut future => Some(value),
                    () = tokio::time::sleep(SIGNAL_POLL) => None,
                }
            })
        });
        if let Some(value) = finished {
            return Ok(value);
        }
        if let Err(interrupt) = py.check_signals() {
            if let Some(token) = cancel {
                token.cancel();
                py.detach(|| runtime.block_on(&mut future));
            }
            return Err(interrupt);
        }
    }
}
