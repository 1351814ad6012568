//! Threads of the extension (tokio's workers and blocking pool, the tool thread) enter
//! Python to call tools and to hand outcomes to asyncio. One of them still inside Python
//! when the interpreter finalizes aborts the process (CPython's `PyGILState_Release`
//! check), and with `run_async` that race is the common case: the loop gets the outcome
//! while the thread that sent it is still leaving Python. So every such entry goes
//! through [`attach`], and an `atexit` hook ([`shutdown`]) refuses new entries and waits
//! for the ones in progress before finalization starts.
//!
//! A thread that Python did not make has no Python thread state: `Python::attach` makes
//! one on entry and deletes it on exit, and on a tool call that costs more than the
//! call itself (the state's frame stack and caches start cold every time). So the
//! extension's threads keep theirs from their first entry until they end
//! ([`KeptThreadState`]).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pyo3::ffi;
use pyo3::prelude::*;

static SHUTTING_DOWN: AtomicBool = AtomicBool::new(false);
static INSIDE: AtomicUsize = AtomicUsize::new(0);

/// How long interpreter exit waits for threads still inside Python (a tool that blocks
/// may never return).
const EXIT_WAIT: Duration = Duration::from_secs(5);

struct Leave;

impl Drop for Leave {
    fn drop(&mut self) {
        INSIDE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `Python::attach` for the extension's own threads; `None` once the interpreter is
/// shutting down.
pub(crate) fn attach<R>(f: impl FnOnce(Python<'_>) -> R) -> Option<R> {
    // Counted before the flag is read, so that `shutdown` either sees this entry or this
    // entry sees the flag.
    INSIDE.fetch_add(1, Ordering::SeqCst);
    let _leave = Leave;
    if SHUTTING_DOWN.load(Ordering::SeqCst) {
        return None;
    }
    keep_thread_state();
    Some(Python::attach(f))
}

thread_local! {
    static KEPT: KeptThreadState = const { KeptThreadState(Cell::new(std::ptr::null_mut())) };
}

/// The Python thread state one of the extension's threads made on its first entry and
/// keeps, detached, between entries; deleted when the thread ends, unless the
/// interpreter is shutting down by then (finalization frees every thread state).
struct KeptThreadState(Cell<*mut ffi::PyThreadState>);

impl Drop for KeptThreadState {
    fn drop(&mut self) {
        let state = self.0.get();
        if state.is_null() {
            return;
        }
        INSIDE.fetch_add(1, Ordering::SeqCst);
        let _leave = Leave;
        if SHUTTING_DOWN.load(Ordering::SeqCst) {
            return;
        }
        // SAFETY: `state` is this thread's own thread state, made by the
        // `PyGILState_Ensure` in `keep_thread_state` and detached by the
        // `PyEval_SaveThread` after it, and no entry of this thread is in progress (the
        // thread is ending). The interpreter is not finalizing: this entry is counted
        // before the flag was read, so `shutdown` waits for it. Restoring the state
        // takes the GIL; the release that balances that `Ensure` deletes the state and
        // drops the GIL.
        #[allow(unsafe_code)]
        unsafe {
            ffi::PyEval_RestoreThread(state);
            ffi::PyGILState_Release(ffi::PyGILState_STATE::PyGILState_UNLOCKED);
        }
    }
}

/// Gives this thread a Python thread state that outlives the entry being made, unless it
/// has one already (a thread Python made, or one that kept its own). Called by an entry
/// counted in `INSIDE` after it saw no shutdown, so the interpreter is running.
fn keep_thread_state() {
    let _ = KEPT.try_with(|kept| {
        if !kept.0.get().is_null() {
            return;
        }
        // SAFETY: the interpreter is running (see above). A thread without a thread
        // state cannot hold the GIL, so `PyGILState_Ensure` makes this thread's state
        // and takes the GIL, and `PyEval_SaveThread` drops the GIL and detaches the
        // state, which its gilstate count of one keeps alive: the `Python::attach` that
        // follows re-attaches it and leaves it so.
        #[allow(unsafe_code)]
        unsafe {
            if !ffi::PyGILState_GetThisThreadState().is_null() {
                return;
            }
            ffi::PyGILState_Ensure();
            kept.0.set(ffi::PyEval_SaveThread());
        }
    });
}

/// The `atexit` hook: no new entries, and those in progress finish first (up to
/// [`EXIT_WAIT`]).
#[pyfunction]
#[pyo3(name = "_shutdown")]
pub(crate) fn shutdown(py: Python<'_>) {
    SHUTTING_DOWN.store(true, Ordering::SeqCst);
    py.detach(|| {
        let deadline = Instant::now() + EXIT_WAIT;
        while INSIDE.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}
