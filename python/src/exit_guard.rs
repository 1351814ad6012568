//! Threads of the extension (tokio's workers and blocking pool) enter Python to call
//! tools and to hand outcomes to asyncio. One of them still inside Python when the
//! interpreter finalizes aborts the process (CPython's `PyGILState_Release` check), and
//! with `run_async` that race is the common case: the loop gets the outcome while the
//! thread that sent it is still leaving Python. So every such entry goes through
//! [`attach`], and an `atexit` hook ([`shutdown`]) refuses new entries and waits for the
//! ones in progress before finalization starts.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

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
    Some(Python::attach(f))
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
