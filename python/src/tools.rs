//! Python callables as wasmbox tools.
//!
//! A sync callable runs on another thread than the run's: the package's tool thread
//! when it is free (src/tool_thread.rs), else tokio's blocking pool, so a tool that
//! blocks holds up only its own call (the broker's per-call deadline still ends the
//! call; the thread is freed when the function returns). One marked `inline` runs on the thread polling the
//! run instead: no handoff between threads (most of a tool call's cost from Python), but
//! its deadline and the run's cannot end it while it runs. A coroutine function runs on an asyncio loop:
//! the loop of the `run_async` that started the run, else a background loop thread
//! the package starts on first use (`wasmbox._loop`); a call the broker gives up on
//! (deadline, cancelled run) cancels its task. Whatever a tool raises becomes a
//! [`ToolFailure`] the guest sees as `ToolFailed`: `TypeName: message`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;
use serde_json::Value;
use tokio::sync::oneshot;
use wasmbox::{Tool, ToolFailure};

use crate::{convert, exit_guard, tool_thread};

tokio::task_local! {
    /// The asyncio loop of the `run_async` whose run is being polled: its async tools
    /// run there.
    pub(crate) static RUN_LOOP: Arc<Py<PyAny>>;
}

/// What the Python side hands over for one tool.
pub(crate) struct ToolSpec {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) args_schema: Value,
    pub(crate) function: Py<PyAny>,
    pub(crate) is_async: bool,
    pub(crate) timeout_ms: Option<u64>,
    /// A sync function called on the thread polling the run, not on the blocking pool:
    /// no thread handoff, but nothing interrupts it at its deadline.
    pub(crate) inline: bool,
}

/// The wasmbox tool that calls `spec.function`.
pub(crate) fn tool(spec: ToolSpec) -> Tool {
    let function = Arc::new(spec.function);
    let (is_async, inline) = (spec.is_async, spec.inline);
    let tool = Tool::new(spec.name, spec.description, spec.args_schema, move |args: Value| {
        let function = Arc::clone(&function);
        // Read here, while the broker polls this call inside the run's task.
        let run_loop = RUN_LOOP.try_with(Arc::clone).ok();
        async move {
            if is_async {
                call_async(function, args, run_loop).await
            } else if inline {
                call_here(&function, &args)
            } else {
                call_sync(function, args).await
            }
        }
    });
    match spec.timeout_ms {
        Some(ms) => tool.with_timeout(Duration::from_millis(ms)),
        None => tool,
    }
}

/// Calls a sync tool on another thread: the tool thread when it is free, else tokio's
/// blocking pool (src/tool_thread.rs).
async fn call_sync(function: Arc<Py<PyAny>>, args: Value) -> Result<Value, ToolFailure> {
    let (answer, answered) = oneshot::channel();
    let call = move || {
        let _ = answer.send(call_here(&function, &args));
    };
    let handed = match tool_thread::hand(call) {
        Ok(handed) => Some(handed),
        Err(call) => {
            drop(tokio::task::spawn_blocking(call));
            None
        }
    };
    // The thread driving a sync run has nothing else to do until the answer comes. A
    // call the tool thread has not started by the end of that spin goes to the pool.
    if crate::blocking::spin_until(|| !answered.is_empty()) && answered.is_empty() {
        if let Some(call) = handed.and_then(tool_thread::Handed::take_back) {
            drop(tokio::task::spawn_blocking(call));
        }
    }
    // A call that panicked dropped `answer` without sending.
    answered.await.unwrap_or_else(|_| Err(ToolFailure::new("the tool panicked")))
}

/// Calls a sync tool on this thread.
fn call_here(function: &Py<PyAny>, args: &Value) -> Result<Value, ToolFailure> {
    exit_guard::attach(|py| {
        let kwargs = kwargs(py, args).map_err(|e| failure(py, &e))?;
        let result = function.call(py, (), Some(&kwargs)).map_err(|e| failure(py, &e))?;
        convert::from_py(result.bind(py)).map_err(|e| result_failure(py, &e))
    })
    .unwrap_or_else(|| Err(shutting_down()))
}

async fn call_async(
    function: Arc<Py<PyAny>>,
    args: Value,
    run_loop: Option<Arc<Py<PyAny>>>,
) -> Result<Value, ToolFailure> {
    let (sender, receiver) = oneshot::channel();
    let task = exit_guard::attach(|py| -> PyResult<Py<PyAny>> {
        let event_loop = match &run_loop {
            Some(event_loop) => event_loop.clone_ref(py),
            None => background_loop(py)?,
        };
        let coroutine = function.call(py, (), Some(&kwargs(py, &args)?))?;
        let task = asyncio(py)?.getattr("run_coroutine_threadsafe")?.call1((coroutine, event_loop))?;
        let settle = Settle { sender: Mutex::new(Some(sender)) };
        task.call_method1("add_done_callback", (settle,))?;
        Ok(task.unbind())
    });
    let task = match task {
        Some(Ok(task)) => CancelOnDrop(Some(task)),
        Some(Err(err)) => return Err(exit_guard::attach(|py| failure(py, &err)).unwrap_or_else(shutting_down)),
        None => return Err(shutting_down()),
    };
    let result = receiver.await.unwrap_or_else(|_| Err(ToolFailure::new("the tool was cancelled")));
    task.disarm();
    result
}

/// Cancels the asyncio task of a call the broker stopped waiting for.
struct CancelOnDrop(Option<Py<PyAny>>);

impl CancelOnDrop {
    fn disarm(mut self) {
        if let Some(task) = self.0.take() {
            exit_guard::attach(|_py| drop(task));
        }
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            exit_guard::attach(|py| {
                // `concurrent.futures.Future.cancel` hands the cancellation to the loop.
                let _ = task.call_method0(py, "cancel");
            });
        }
    }
}

/// The done-callback of an async tool's task: sends its result to the waiting call.
#[pyclass(frozen)]
struct Settle {
    sender: Mutex<Option<oneshot::Sender<Result<Value, ToolFailure>>>>,
}

#[pymethods]
impl Settle {
    fn __call__(&self, py: Python<'_>, task: &Bound<'_, PyAny>) {
        let result = (|| -> Result<Value, ToolFailure> {
            if task.call_method0("cancelled").and_then(|c| c.extract::<bool>()).unwrap_or(false) {
                return Err(ToolFailure::new("the tool was cancelled"));
            }
            match task.call_method0("result") {
                Ok(value) => convert::from_py(&value).map_err(|e| result_failure(py, &e)),
                Err(err) => Err(failure(py, &err)),
            }
        })();
        if let Some(sender) = self.sender.lock().ok().and_then(|mut s| s.take()) {
            let _ = sender.send(result);
        }
    }
}

fn kwargs<'py>(py: Python<'py>, args: &Value) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    // The broker hands over objects only (its schema check), but a tool registered
    // with a schema that allows anything could still receive another value.
    if let Value::Object(map) = args {
        for (key, value) in map {
            dict.set_item(key, convert::to_py(py, value)?)?;
        }
    }
    Ok(dict)
}

fn shutting_down() -> ToolFailure {
    ToolFailure::new("the Python interpreter is shutting down")
}

/// The guest's view of an exception a tool raised: `TypeName: message`.
fn failure(py: Python<'_>, err: &PyErr) -> ToolFailure {
    let type_name = err.get_type(py).name().map_or_else(|_| "Exception".to_owned(), |n| n.to_string());
    let message = err.value(py).str().map_or_else(|_| String::new(), |s| s.to_string());
    if message.is_empty() {
        ToolFailure::new(type_name)
    } else {
        ToolFailure::new(format!("{type_name}: {message}"))
    }
}

fn result_failure(py: Python<'_>, err: &PyErr) -> ToolFailure {
    let message = err.value(py).str().map_or_else(|_| String::new(), |s| s.to_string());
    ToolFailure::new(format!("the tool's result is not JSON: {message}"))
}

fn asyncio(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    static ASYNCIO: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    Ok(ASYNCIO.get_or_try_init(py, || Ok::<_, PyErr>(py.import("asyncio")?.unbind()))?.bind(py).clone())
}

/// The package's background event loop (started on first use).
fn background_loop(py: Python<'_>) -> PyResult<Py<PyAny>> {
    Ok(py.import("wasmbox._loop")?.getattr("background_loop")?.call0()?.unbind())
}
