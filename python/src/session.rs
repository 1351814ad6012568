//! Sessions in the Python package: `NativeSession` wraps the crate's [`Session`] for
//! `wasmbox.Session` (wasmbox/_session.py).
//!
//! A sync step runs on the caller's thread with the GIL released, as a sync run does, and
//! Ctrl-C cancels it (which ends the session, as the crate defines); an async step runs
//! on the package's tokio threads with its async tools on the caller's loop. One step at
//! a time: a call while a step runs (from another thread or task) raises
//! `SessionBusyError` instead of queueing behind it, so that a caller who shares a
//! session by mistake learns it at once rather than seeing its steps interleave.
//! `close()` frees the instance and the admission slot; a step still running then is
//! cancelled and the instance is freed when it stops.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyType;
use wasmbox::{CancelToken, Sandbox, Session, SessionConfig, SessionError, Status};

use crate::blocking::drive;
use crate::loop_completions::{Done, LoopCompletions, RunFuture};
use crate::outcome::PyOutcome;
use crate::tool_thread::RunInFlight;
use crate::{convert, FinishOutput, NativeSandbox};

/// A session of a `NativeSandbox`, made by `wasmbox.Sandbox.session`.
#[pyclass(frozen, module = "wasmbox._native")]
pub(crate) struct NativeSession {
    /// `None` once closed.
    session: Mutex<Option<Arc<Session>>>,
    /// Set while a step, a reset or a look at the end is in progress.
    busy: Arc<AtomicBool>,
    /// The token of the step in progress (or of the last one), for `close()`.
    running: Mutex<CancelToken>,
    /// Its sandbox's `pooled_tools` (src/tool_thread.rs).
    pooled_tools: bool,
}

/// Holds a session's busy flag; clears it when dropped.
struct Busy(Arc<AtomicBool>);

impl Busy {
    fn take(py: Python<'_>, flag: &Arc<AtomicBool>) -> PyResult<Busy> {
        match flag.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => Ok(Busy(Arc::clone(flag))),
            Err(_) => Err(crate::error(
                py,
                "SessionBusyError",
                "a step of this session is in progress: a Session runs one step at a time \
                 (await or join it first, or open a session per thread or task)",
            )),
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// The exception for a session that could not open or reset: `IsolationError` or
/// `ConfigurationError` for an unusable configuration, else `SessionError` with the
/// status and kind a run would have had (`rejected`/`admission` when admission control
/// turned it away).
fn session_error(py: Python<'_>, err: &SessionError) -> PyErr {
    let class = match (err.status, err.detail.kind.as_str()) {
        (Status::InvalidRequest, "isolation") => "IsolationError",
        (Status::InvalidRequest, _) => "ConfigurationError",
        _ => return typed_session_error(py, err.to_string(), err.status.as_str(), &err.detail.kind),
    };
    crate::error(py, class, err.to_string())
}

/// A `wasmbox.SessionError(message, status, kind)`.
fn typed_session_error(py: Python<'_>, message: String, status: &str, kind: &str) -> PyErr {
    let class =
        py.import("wasmbox._errors").and_then(|m| m.getattr("SessionError")).and_then(|c| Ok(c.cast_into::<PyType>()?));
    match class {
        Ok(class) => PyErr::from_type(class, (message, status.to_owned(), kind.to_owned())),
        Err(err) => err,
    }
}

#[pymethods]
impl NativeSession {
    /// Opens a session of `sandbox` (admission, instantiation and the guest's opening
    /// call), the GIL released, with `files` (`{name: bytes or str}`) under the guest's
    /// `/input` in every step. Raises `ConfigurationError` for a zero duration,
    /// `IsolationError` for a sandbox with worker isolation, `SessionError` when
    /// admission control refuses it.
    #[new]
    #[pyo3(signature = (sandbox, idle_timeout_ms=None, max_lifetime_ms=None, files=None))]
    fn new(
        py: Python<'_>,
        sandbox: &NativeSandbox,
        idle_timeout_ms: Option<u64>,
        max_lifetime_ms: Option<u64>,
        files: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let mut config = SessionConfig::default();
        config.idle_timeout_ms = idle_timeout_ms.unwrap_or(config.idle_timeout_ms);
        config.max_lifetime_ms = max_lifetime_ms.unwrap_or(config.max_lifetime_ms);
        let files = crate::files::input_files(files)?;
        let pooled_tools = sandbox.pooled_tools;
        let sandbox = Sandbox::clone(&sandbox.sandbox);
        let opened = drive(py, Session::open_with_files(sandbox, config, files), None)?;
        let session = opened.map_err(|err| session_error(py, &err))?;
        Ok(NativeSession {
            session: Mutex::new(Some(Arc::new(session))),
            busy: Arc::new(AtomicBool::new(false)),
            running: Mutex::new(CancelToken::new()),
            pooled_tools,
        })
    }

    /// Runs `code` as the next step on this thread, the GIL released, calling
    /// `on_output(stream, text)` as the guest writes. Ctrl-C cancels the step (ending the
    /// session) and raises `KeyboardInterrupt`.
    #[pyo3(signature = (code, input, on_output=None))]
    fn run(
        &self,
        py: Python<'_>,
        code: &str,
        input: &Bound<'_, PyAny>,
        on_output: Option<Py<PyAny>>,
    ) -> PyResult<PyOutcome> {
        let input = convert::from_py(input)?;
        let _busy = Busy::take(py, &self.busy)?;
        // The token first: a close() from here on either finds the session gone below
        // or cancels this step.
        let token = self.new_token();
        let session = self.open_session(py)?;
        let (request, sink) = crate::request(code.to_owned(), input, token.clone(), on_output);
        let _finish = FinishOutput(sink);
        let _in_flight = RunInFlight::start(self.pooled_tools);
        let outcome = drive(py, session.run_with(request), Some(&token))?;
        Ok(PyOutcome::new(outcome))
    }

    /// Starts `code` as the next step on the package's tokio threads and returns its
    /// [`RunFuture`] at once; `on_output(stream, text)` is called as the guest writes, and
    /// the outcome reaches `event_loop` as for `NativeSandbox.start`, `eager` too. Async
    /// tools run on `event_loop`. Cancelling the future cancels the step, and the awaiting
    /// task hears of it once the step has stopped.
    #[pyo3(signature = (code, input, event_loop, completions, on_output=None, eager=false))]
    #[allow(clippy::too_many_arguments)]
    fn start(
        &self,
        py: Python<'_>,
        code: String,
        input: &Bound<'_, PyAny>,
        event_loop: Py<PyAny>,
        completions: Option<Bound<'_, LoopCompletions>>,
        on_output: Option<Py<PyAny>>,
        eager: bool,
    ) -> PyResult<Py<RunFuture>> {
        let input = convert::from_py(input)?;
        let busy = Busy::take(py, &self.busy)?;
        // The token first: a close() from here on either finds the session gone below
        // or cancels this step.
        let token = self.new_token();
        let session = self.open_session(py)?;
        let future = Py::new(py, RunFuture::new(event_loop.clone_ref(py), token.clone(), true))?;
        let done = Done::new(completions, future.clone_ref(py));
        let (request, sink) = crate::request(code, input, token, on_output);
        let in_flight = RunInFlight::start(self.pooled_tools);
        let step = async move {
            let outcome = session.run_with(request).await;
            drop(in_flight);
            drop(FinishOutput(sink));
            // Free before the caller hears of the outcome, so that its next step can start.
            drop(busy);
            drop(session);
            outcome
        };
        crate::launch(py, step, event_loop, &future, done, eager)?;
        Ok(future)
    }

    /// Starts the session again on a fresh instance, the GIL released.
    fn reset(&self, py: Python<'_>) -> PyResult<()> {
        let _busy = Busy::take(py, &self.busy)?;
        let session = self.open_session(py)?;
        let reset = drive(py, session.reset(), None)?;
        reset.map_err(|err| session_error(py, &err))
    }

    /// Why the session ended (the crate's `SessionEnd`, as text), or `None` while it is
    /// usable.
    fn end(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let _busy = Busy::take(py, &self.busy)?;
        let Some(session) = self.session() else {
            return Ok(Some("the session was closed".to_owned()));
        };
        let end = drive(py, session.end(), None)?;
        Ok(end.map(|end| end.to_string()))
    }

    /// Frees the instance and the admission slot; a step still running is cancelled and
    /// frees them when it stops. Closing twice does nothing.
    fn close(&self, py: Python<'_>) {
        let session = self.session.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
        // The step in progress, if any (else the last step's token, which is spent).
        self.running.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).cancel();
        // The Store is dropped here unless a step still holds the session.
        py.detach(|| drop(session));
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.session().is_none()
    }
}

impl NativeSession {
    fn session(&self) -> Option<Arc<Session>> {
        self.session.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// The session, or `SessionError` (`rejected`, `session_closed`) once closed.
    fn open_session(&self, py: Python<'_>) -> PyResult<Arc<Session>> {
        self.session().ok_or_else(|| {
            typed_session_error(py, "the session is closed".to_owned(), Status::Rejected.as_str(), "session_closed")
        })
    }

    /// A token for the next step, kept for `close()`.
    fn new_token(&self) -> CancelToken {
        let token = CancelToken::new();
        *self.running.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = token.clone();
        token
    }
}
