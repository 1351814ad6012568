//! Handing a `run_async` outcome (or a session step's) to the asyncio loop that awaits it.
//!
//! `start` answers a [`RunFuture`]: what the coroutine of `run_async` awaits, in place of
//! an `asyncio.Future`. It speaks the protocol an asyncio `Task` uses with a future (the
//! `_asyncio_future_blocking` flag, `add_done_callback`, `result`, `cancel`), so the
//! awaiting task parks on it, and the run's cancel token is the future's `cancel()`. When
//! the outcome reaches the loop, it calls the task's wake-up callback itself rather than
//! scheduling it with `call_soon` as `Future.set_result` does: the task resumes in the
//! same turn of the loop, not the next one.
//!
//! The run ends on one of the extension's tokio threads. asyncio's own way of taking a
//! result from another thread, `loop.call_soon_threadsafe(...)`, needs the GIL on that
//! thread (a tokio worker then waits for it while the loop's thread runs Python, and
//! drives no other run meanwhile). So where the loop can watch a file descriptor
//! (`loop.add_reader`: the selector loops on Unix, uvloop), each loop gets a
//! [`LoopCompletions`]: a queue of finished runs and a non-blocking pipe whose read end
//! the loop watches. The thread that finished a run pushes the outcome and writes one
//! byte, without the GIL; the loop, woken by it, calls the [`LoopCompletions`] itself,
//! which settles the runs' futures on the loop thread. Measured against
//! `call_soon_threadsafe`, that is a few µs a run less (docs/performance.md, "The Python
//! package"): most of what is left is waking the worker and then the loop's thread.
//!
//! Elsewhere (Windows, whose default `ProactorEventLoop` has no `add_reader`, or any loop
//! without it) the outcome goes through `call_soon_threadsafe`: [`Done::Threadsafe`].

use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::exceptions::{PyException, PyStopIteration};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};
use wasmbox::CancelToken;

use crate::exit_guard;
use crate::outcome::PyOutcome;

/// How a run started from asyncio hands over its outcome.
pub(crate) enum Done {
    /// The loop's [`LoopCompletions`] settles `future` with the outcome.
    Settle { completions: Arc<Completions>, future: Py<RunFuture> },
    /// `loop.call_soon_threadsafe(future._settle, outcome)`, with the GIL, on the thread
    /// that finished the run.
    Threadsafe(Py<RunFuture>),
}

impl Done {
    /// Through `completions` where the loop has them, else `call_soon_threadsafe`.
    pub(crate) fn new(completions: Option<Bound<'_, LoopCompletions>>, future: Py<RunFuture>) -> Done {
        match completions {
            Some(completions) => Done::Settle { completions: Arc::clone(&completions.get().shared), future },
            None => Done::Threadsafe(future),
        }
    }

    /// Hands `outcome` over; `event_loop` (the run's loop, kept for its async tools) is
    /// released where the GIL is held.
    pub(crate) fn finish(self, outcome: wasmbox::Outcome, event_loop: Arc<Py<PyAny>>) {
        match self {
            Done::Threadsafe(future) => {
                exit_guard::attach(|py| {
                    let settle = future.bind(py).getattr(intern!(py, "_settle"));
                    let scheduled = settle.and_then(|settle| {
                        let call_soon =
                            future.get().event_loop.bind(py).getattr(intern!(py, "call_soon_threadsafe"))?;
                        call_soon.call1((settle, PyOutcome::new(outcome)))
                    });
                    // A closed loop (RuntimeError) has nobody waiting any more.
                    if let Err(err) = scheduled {
                        if !err.is_instance_of::<pyo3::exceptions::PyRuntimeError>(py) {
                            err.write_unraisable(py, None);
                        }
                    }
                    drop(event_loop);
                });
            }
            Done::Settle { completions, future } => completions.push(Finished { future, outcome, event_loop }),
        }
    }
}

/// What a run's future is: pending, or how it ended.
enum End {
    Pending,
    Done(Py<PyOutcome>),
    /// Cancelled, with `cancel()`'s message.
    Cancelled(Option<Py<PyAny>>),
}

struct FutureState {
    end: End,
    /// `add_done_callback`'s callbacks with their contexts, in order.
    callbacks: Vec<(Py<PyAny>, Option<Py<PyAny>>)>,
    /// asyncio's `_asyncio_future_blocking`: set when a task is to wait on the future.
    blocking: bool,
}

/// The awaitable of a run (or a session step) started from asyncio: a future as an
/// asyncio `Task` sees one. `cancel()` cancels the run. For a session step
/// (`wait_for_stop`) it answers `False`, so that the task raises its `CancelledError`
/// only when the step has stopped and the outcome woke it.
#[pyclass(frozen, module = "wasmbox._native")]
pub(crate) struct RunFuture {
    event_loop: Py<PyAny>,
    token: CancelToken,
    wait_for_stop: bool,
    state: Mutex<FutureState>,
}

impl RunFuture {
    pub(crate) fn new(event_loop: Py<PyAny>, token: CancelToken, wait_for_stop: bool) -> RunFuture {
        let state = FutureState { end: End::Pending, callbacks: Vec::new(), blocking: false };
        RunFuture { event_loop, token, wait_for_stop, state: Mutex::new(state) }
    }

    fn state(&self) -> MutexGuard<'_, FutureState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Settles the future with `outcome`, on the loop's thread, and calls its callbacks
    /// at once (the awaiting task's wake-up among them). An error a callback raises goes
    /// to `sys.unraisablehook`, but a `KeyboardInterrupt` or `SystemExit` (a task lets
    /// those through) is raised once every callback has been called, as the loop would.
    pub(crate) fn settle(slf: &Bound<'_, RunFuture>, outcome: Bound<'_, PyOutcome>) -> PyResult<()> {
        let callbacks = {
            let mut state = slf.get().state();
            if !matches!(state.end, End::Pending) {
                return Ok(()); // cancelled meanwhile
            }
            state.end = End::Done(outcome.unbind());
            std::mem::take(&mut state.callbacks)
        };
        let py = slf.py();
        let mut fatal = None;
        for (callback, context) in callbacks {
            let called = match context {
                Some(context) => context.call_method1(py, intern!(py, "run"), (callback, slf)),
                None => callback.call1(py, (slf,)),
            };
            if let Err(err) = called {
                if err.is_instance_of::<PyException>(py) {
                    err.write_unraisable(py, Some(slf.as_any()));
                } else if fatal.is_none() {
                    fatal = Some(err);
                }
            }
        }
        fatal.map_or(Ok(()), Err)
    }

    /// `loop.call_soon(callback, self, context=context)`, as asyncio calls the callbacks
    /// of a future that is done already, or cancelled.
    fn call_soon(slf: &Bound<'_, RunFuture>, callback: Py<PyAny>, context: Option<Py<PyAny>>) -> PyResult<()> {
        let py = slf.py();
        let kwargs = PyDict::new(py);
        kwargs.set_item(intern!(py, "context"), context)?;
        let call_soon = slf.get().event_loop.bind(py).getattr(intern!(py, "call_soon"))?;
        call_soon.call((callback, slf), Some(&kwargs)).map(drop)
    }
}

/// `asyncio.CancelledError(message)`, as a future that was cancelled raises it.
fn cancelled_error(py: Python<'_>, message: Option<&Py<PyAny>>) -> PyErr {
    static CANCELLED: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    match (CANCELLED.import(py, "asyncio", "CancelledError"), message) {
        (Ok(class), Some(message)) => PyErr::from_type(class.clone(), (message.clone_ref(py),)),
        (Ok(class), None) => PyErr::from_type(class.clone(), ()),
        (Err(err), _) => err,
    }
}

/// `asyncio.InvalidStateError`, for the result of a future still pending.
fn not_done(py: Python<'_>) -> PyErr {
    static INVALID_STATE: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    match INVALID_STATE.import(py, "asyncio", "InvalidStateError") {
        Ok(class) => PyErr::from_type(class.clone(), "Result is not set."),
        Err(err) => err,
    }
}

#[pymethods]
impl RunFuture {
    fn __await__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// Yields the future itself until it is done (the task waits on it), then ends with
    /// the outcome, or raises `CancelledError`.
    fn __next__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        let py = slf.py();
        let mut state = slf.get().state();
        match &state.end {
            End::Pending => {
                state.blocking = true;
                drop(state);
                Ok(slf)
            }
            End::Done(outcome) => Err(PyStopIteration::new_err((outcome.clone_ref(py),))),
            End::Cancelled(message) => Err(cancelled_error(py, message.as_ref())),
        }
    }

    #[getter(_asyncio_future_blocking)]
    fn blocking(&self) -> bool {
        self.state().blocking
    }

    #[setter(_asyncio_future_blocking)]
    fn set_blocking(&self, blocking: bool) {
        self.state().blocking = blocking;
    }

    fn get_loop(&self, py: Python<'_>) -> Py<PyAny> {
        self.event_loop.clone_ref(py)
    }

    fn done(&self) -> bool {
        !matches!(self.state().end, End::Pending)
    }

    fn cancelled(&self) -> bool {
        matches!(self.state().end, End::Cancelled(_))
    }

    fn result(&self, py: Python<'_>) -> PyResult<Py<PyOutcome>> {
        match &self.state().end {
            End::Done(outcome) => Ok(outcome.clone_ref(py)),
            End::Cancelled(message) => Err(cancelled_error(py, message.as_ref())),
            End::Pending => Err(not_done(py)),
        }
    }

    /// A run never raises for what its guest did: `None` once done.
    fn exception(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.result(py).map(|_| None)
    }

    #[pyo3(signature = (callback, *, context=None))]
    fn add_done_callback(slf: &Bound<'_, Self>, callback: Py<PyAny>, context: Option<Py<PyAny>>) -> PyResult<()> {
        {
            let mut state = slf.get().state();
            if matches!(state.end, End::Pending) {
                state.callbacks.push((callback, context));
                return Ok(());
            }
        }
        RunFuture::call_soon(slf, callback, context)
    }

    fn remove_done_callback(&self, callback: &Bound<'_, PyAny>) -> PyResult<usize> {
        // Compared without the lock held: `==` may run Python code.
        let callbacks = std::mem::take(&mut self.state().callbacks);
        let mut kept = Vec::with_capacity(callbacks.len());
        let mut removed = 0;
        for (registered, context) in callbacks {
            if registered.bind(callback.py()).eq(callback)? {
                removed += 1;
            } else {
                kept.push((registered, context));
            }
        }
        let mut state = self.state();
        kept.append(&mut state.callbacks);
        state.callbacks = kept;
        Ok(removed)
    }

    /// Cancels the run (it stops within an epoch tick). A run's future is cancelled at
    /// once; a session step's stays pending until the step has stopped (`False`: the
    /// awaiting task then raises its `CancelledError` when the outcome wakes it).
    #[pyo3(signature = (msg=None))]
    fn cancel(slf: &Bound<'_, Self>, msg: Option<Py<PyAny>>) -> PyResult<bool> {
        let this = slf.get();
        if !matches!(this.state().end, End::Pending) {
            return Ok(false);
        }
        this.token.cancel();
        if this.wait_for_stop {
            return Ok(false);
        }
        let callbacks = {
            let mut state = this.state();
            state.end = End::Cancelled(msg);
            std::mem::take(&mut state.callbacks)
        };
        for (callback, context) in callbacks {
            RunFuture::call_soon(slf, callback, context)?;
        }
        Ok(true)
    }

    /// Settles the future with `outcome` (the `call_soon_threadsafe` way).
    fn _settle(slf: &Bound<'_, Self>, outcome: Bound<'_, PyOutcome>) -> PyResult<()> {
        RunFuture::settle(slf, outcome)
    }
}

/// A run whose future the loop has yet to settle.
struct Finished {
    future: Py<RunFuture>,
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
        self.push_all(vec![finished]);
    }

    fn push_all(&self, mut finished: Vec<Finished>) {
        let signal = {
            let mut queue = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            queue.finished.append(&mut finished);
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

    /// The loop's reader callback: settles the futures of the runs that finished, which
    /// resumes their tasks. A `KeyboardInterrupt` or `SystemExit` from one of them is
    /// raised to the loop, and the runs not yet settled wait for the next call.
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        let mut finished = self.shared.take().into_iter();
        while let Some(Finished { future, outcome, event_loop }) = finished.next() {
            let settled =
                Bound::new(py, PyOutcome::new(outcome)).and_then(|outcome| RunFuture::settle(future.bind(py), outcome));
            drop(event_loop);
            if let Err(err) = settled {
                if err.is_instance_of::<PyException>(py) {
                    err.write_unraisable(py, Some(future.bind(py).as_any()));
                } else {
                    self.shared.push_all(finished.collect());
                    return Err(err);
                }
            }
        }
        Ok(())
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
