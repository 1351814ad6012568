//! Handing a `run_async` outcome (or a session step's) to the asyncio loop that awaits it.
//!
//! The run ends on one of the extension's tokio threads. asyncio's own way of taking a
//! result from another thread, `loop.call_soon_threadsafe(...)`, needs the GIL on that
//! thread (a tokio worker then waits for it while the loop's thread runs Python, and
//! drives no other run meanwhile) and two more steps on the loop (the callback's handle,
//! then the one that settles the future). So where the loop can watch a file descriptor
//! (`loop.add_reader`: the selector loops on Unix, uvloop), each loop gets a
//! [`LoopCompletions`]: a queue of finished runs and a non-blocking pipe whose read end
//! the loop watches. The thread that finished a run pushes the outcome and writes one byte, without
//! the GIL; the loop, woken by it, calls the [`LoopCompletions`] itself, which settles the
//! runs' futures on the loop thread. Measured against `call_soon_threadsafe`, that is a few
//! µs a run less (docs/performance.md, "The Python package"): most of what is left is
//! waking the worker and then the loop's thread.
//!
//! Elsewhere (Windows, whose default `ProactorEventLoop` has no `add_reader`, or any loop
//! without it) the Python side passes a callable instead and the outcome goes through
//! `call_soon_threadsafe` as before: [`Done::Callback`].

use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::exit_guard;
use crate::outcome::PyOutcome;

/// How a run started from asyncio hands over its outcome.
pub(crate) enum Done {
    /// `on_done(outcome)`, called with the GIL on the thread that finished the run.
    Callback(Py<PyAny>),
    /// The loop's [`LoopCompletions`] settles `future` with the outcome.
    Settle { completions: Arc<Completions>, future: Py<PyAny> },
}

impl Done {
    /// `on_done` is a callable, or a tuple `(LoopCompletions, future)`.
    pub(crate) fn from_py(on_done: Bound<'_, PyAny>) -> PyResult<Done> {
        if let Ok(pair) = on_done.cast::<PyTuple>() {
            let (completions, future): (Bound<'_, LoopCompletions>, Bound<'_, PyAny>) = pair.extract()?;
            return Ok(Done::Settle { completions: Arc::clone(&completions.get().shared), future: future.unbind() });
        }
        if !on_done.is_callable() {
            return Err(PyTypeError::new_err("on_done must be a callable or (LoopCompletions, future)"));
        }
        Ok(Done::Callback(on_done.unbind()))
    }

    /// Hands `outcome` over; `event_loop` (the run's loop, kept for its async tools) is
    /// released where the GIL is held.
    pub(crate) fn finish(self, outcome: wasmbox::Outcome, event_loop: Arc<Py<PyAny>>) {
        match self {
            Done::Callback(on_done) => {
                exit_guard::attach(|py| {
                    let outcome = PyOutcome::new(outcome);
                    if let Err(err) = on_done.call1(py, (outcome,)) {
                        err.write_unraisable(py, None);
                    }
                    drop(event_loop);
                });
            }
            Done::Settle { completions, future } => completions.push(Finished { future, outcome, event_loop }),
        }
    }
}

/// A run whose future the loop has yet to settle.
struct Finished {
    future: Py<PyAny>,
    outcome: wasmbox::Outcome,
    event_loop: Arc<Py<PyAny>>,
}

/// What the extension's threads and one loop share.
pub(crate) struct Completions {
    state: Mutex<Queue>,
    wake: wake::Pair,
}

#[derive(Default)]
struct Queue {
    finished: Vec<Finished>,
    /// A byte was written since the loop last took the queue: no need for another.
    signalled: bool,
}

impl Completions {
    /// Called on the thread that finished a run, without the GIL.
    fn push(&self, finished: Finished) {
        let signal = {
            let mut queue = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            queue.finished.push(finished);
            !std::mem::replace(&mut queue.signalled, true)
        };
        // After the lock: the loop takes the queue after it has read the bytes, so a byte
        // written now is either read before a take that sees this run, or wakes it again.
        if signal {
            self.wake.signal();
        }
    }

    fn take(&self) -> Vec<Finished> {
        self.wake.drain();
        let mut queue = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        queue.signalled = false;
        std::mem::take(&mut queue.finished)
    }
}

/// One loop's completion queue: `loop.add_reader(completions.fileno(), completions)`.
/// Made only where it works (Unix); elsewhere its constructor raises
/// `NotImplementedError`.
#[pyclass(frozen, module = "wasmbox._native")]
pub(crate) struct LoopCompletions {
    shared: Arc<Completions>,
}

#[pymethods]
impl LoopCompletions {
    #[new]
    fn new() -> PyResult<Self> {
        let wake = wake::Pair::new()?;
        Ok(LoopCompletions { shared: Arc::new(Completions { state: Mutex::default(), wake }) })
    }

    /// The descriptor the loop watches.
    fn fileno(&self) -> i64 {
        self.shared.wake.fileno()
    }

    /// The loop's reader callback: settles the futures of the runs that finished.
    fn __call__(&self, py: Python<'_>) {
        for Finished { future, outcome, event_loop } in self.shared.take() {
            let future = future.bind(py);
            // A future whose task was cancelled is done already.
            let pending = future.call_method0(intern!(py, "done")).and_then(|done| done.is_truthy()).map(|done| !done);
            let settled = match pending {
                Ok(true) => Py::new(py, PyOutcome::new(outcome))
                    .and_then(|outcome| future.call_method1(intern!(py, "set_result"), (outcome,)).map(drop)),
                Ok(false) => Ok(()),
                Err(err) => Err(err),
            };
            if let Err(err) = settled {
                err.write_unraisable(py, Some(future));
            }
            drop(event_loop);
        }
    }
}

#[cfg(unix)]
mod wake {
    //! A pipe, non-blocking at both ends: the loop watches the read end, runs write to
    //! the other. (Not a socket pair: nothing in the core path needs Unix sockets.)

    use std::io::{self, ErrorKind, PipeReader, PipeWriter, Read, Write};
    use std::os::fd::{AsFd, AsRawFd};

    use pyo3::exceptions::PyOSError;
    use pyo3::PyResult;

    pub(super) struct Pair {
        read: PipeReader,
        write: PipeWriter,
    }

    impl Pair {
        pub(super) fn new() -> PyResult<Self> {
            let made = io::pipe().and_then(|(read, write)| {
                set_nonblocking(&read)?;
                set_nonblocking(&write)?;
                Ok(Pair { read, write })
            });
            made.map_err(|e| PyOSError::new_err(format!("a pipe for run completions: {e}")))
        }

        pub(super) fn fileno(&self) -> i64 {
            i64::from(self.read.as_raw_fd())
        }

        /// One byte for the loop. A full pipe (`WouldBlock`) has bytes for it already.
        pub(super) fn signal(&self) {
            let _ = (&self.write).write(&[1]);
        }

        /// Reads every byte written so far.
        pub(super) fn drain(&self) {
            let mut buffer = [0u8; 64];
            loop {
                match (&self.read).read(&mut buffer) {
                    Ok(0) => return,
                    Ok(_) => {}
                    Err(err) if err.kind() == ErrorKind::Interrupted => {}
                    Err(_) => return,
                }
            }
        }
    }

    /// Sets `O_NONBLOCK` on `end`: the loop's reader must not wait for a byte, nor a
    /// run's thread for room in the pipe (std has no setter for pipes).
    fn set_nonblocking(end: &impl AsFd) -> io::Result<()> {
        let fd = end.as_fd().as_raw_fd();
        // SAFETY: `fcntl` with `F_GETFL`/`F_SETFL` reads and sets the status flags of a
        // descriptor that `end` owns and keeps open across both calls; no memory is passed.
        #[allow(unsafe_code)]
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above.
        #[allow(unsafe_code)]
        let set = unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) };
        if set < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(not(unix))]
mod wake {
    //! No pipe to watch here: the constructor refuses, and runs go through
    //! `call_soon_threadsafe`.

    use pyo3::exceptions::PyNotImplementedError;
    use pyo3::PyResult;

    pub(super) enum Pair {}

    impl Pair {
        pub(super) fn new() -> PyResult<Self> {
            Err(PyNotImplementedError::new_err("run completions through a watched pipe need Unix"))
        }

        pub(super) fn fileno(&self) -> i64 {
            match *self {}
        }

        pub(super) fn signal(&self) {
            match *self {}
        }

        pub(super) fn drain(&self) {
            match *self {}
        }
    }
}
