//! `wasmbox._native`: the extension module under the `wasmbox` Python package.
//!
//! It holds one [`Engine`] per process, made on first use (`configure_engine` sets its
//! settings before that), one [`Runtime`] per language, and one tokio runtime whose
//! threads drive the runs that `run_async` starts. A sync `run` drives its run on the
//! caller's thread with the GIL released, waking every 50 ms (`blocking::drive`) to let Python
//! handle signals: Ctrl-C cancels the run and raises `KeyboardInterrupt`.
//!
//! Only the crate's public API is used; the Python-facing classes, schema derivation
//! and the integrations are the pure-Python part of the package (`wasmbox/*.py`).

#![deny(missing_docs)]
// Its tests are the pytest suite against the built wheel (python/tests/). `cargo test
// --all-targets` still builds the library as a test harness; empty, it costs nothing
// beside the two builds of the extension (the library, and the example CI packs).
#![cfg(not(test))]

mod blocking;
mod convert;
mod exit_guard;
mod files;
mod live_output;
mod loop_completions;
mod outcome;
mod session;
mod tool_thread;
mod tools;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple, PyType};
use serde_json::Value;
use wasmbox::{CancelToken, Engine, EngineConfig, Isolation, Limits, RunRequest, Runtime, Sandbox, Scope, Tools};

use live_output::PyOutputSink;
use loop_completions::{Done, LoopCompletions, RunFuture};
use outcome::PyOutcome;
use tools::{ToolSpec, RUN_LOOP};

/// The engine's settings until it is made; `None` once it is.
static ENGINE_CONFIG: Mutex<Option<EngineConfig>> = Mutex::new(None);
static ENGINE: OnceLock<Engine> = OnceLock::new();
static PYTHON: OnceLock<Runtime> = OnceLock::new();
static JAVASCRIPT: OnceLock<Runtime> = OnceLock::new();
static TOKIO: OnceLock<tokio::runtime::Runtime> = OnceLock::new();

/// A Python exception class of `wasmbox._errors`, raised with `message`.
fn error(py: Python<'_>, class: &str, message: impl Into<String>) -> PyErr {
    let class = py.import("wasmbox._errors").and_then(|m| m.getattr(class)).and_then(|c| Ok(c.cast_into::<PyType>()?));
    match class {
        Ok(class) => PyErr::from_type(class, message.into()),
        Err(err) => err,
    }
}

/// The exception for a setup error of the crate.
fn setup_error(py: Python<'_>, err: &wasmbox::Error) -> PyErr {
    let class = match err {
        wasmbox::Error::Isolation { .. } => "IsolationError",
        wasmbox::Error::GuestNotBuilt { .. } => "GuestNotBuiltError",
        wasmbox::Error::Cache { .. } => "CacheError",
        wasmbox::Error::InvalidComponent(_)
        | wasmbox::Error::UnsupportedImport { .. }
        | wasmbox::Error::ReadGuest { .. } => "GuestError",
        _ => "EngineError",
    };
    error(py, class, err.to_string())
}

fn tokio_runtime() -> &'static tokio::runtime::Runtime {
    TOKIO.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("wasmbox")
            .on_thread_start(blocking::on_runtime_thread)
            .build()
            .expect("the tokio runtime starts (threads and a timer)")
    })
}

/// The process's engine, made on first use.
fn engine(py: Python<'_>) -> PyResult<&'static Engine> {
    if let Some(engine) = ENGINE.get() {
        return Ok(engine);
    }
    let config = ENGINE_CONFIG.lock().map_err(|_| error(py, "EngineError", "engine lock poisoned"))?.clone();
    let made = py.detach(|| ENGINE.get_or_try_init_compat(|| Engine::new(config.unwrap_or_default())));
    made.map_err(|e| setup_error(py, &e))
}

/// `OnceLock::get_or_try_init` is not stable: a lock around the first initialisation.
trait TryInit<T> {
    fn get_or_try_init_compat<E>(&self, init: impl FnOnce() -> Result<T, E>) -> Result<&T, E>;
}

impl<T> TryInit<T> for OnceLock<T> {
    fn get_or_try_init_compat<E>(&self, init: impl FnOnce() -> Result<T, E>) -> Result<&T, E> {
        static INIT: Mutex<()> = Mutex::new(());
        if let Some(value) = self.get() {
            return Ok(value);
        }
        let _one_at_a_time = INIT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(value) = self.get() {
            return Ok(value);
        }
        let value = init()?;
        Ok(self.get_or_init(|| value))
    }
}

/// A tool as `wasmbox.Tool._spec` hands it over.
type ToolTuple<'py> = (String, String, Bound<'py, PyAny>, Py<PyAny>, bool, Option<u64>, bool);

/// How a built-in guest's runtime is loaded.
type LoadRuntime = fn(&Engine) -> Result<Runtime, wasmbox::Error>;

/// The runtime of `language`, loaded (and on a cold cache compiled) on first use.
fn runtime(py: Python<'_>, language: &str) -> PyResult<Runtime> {
    let engine = engine(py)?;
    let (cell, load): (&OnceLock<Runtime>, LoadRuntime) = match language {
        "python" => (&PYTHON, Runtime::python),
        "javascript" | "js" => (&JAVASCRIPT, Runtime::javascript),
        other => {
            let message = format!("unknown language `{other}`: expected \"python\" or \"javascript\"");
            return Err(error(py, "ConfigurationError", message));
        }
    };
    let loaded = py.detach(|| cell.get_or_try_init_compat(|| load(engine)).cloned());
    loaded.map_err(|e| setup_error(py, &e))
}

/// Sets the settings of the process's engine; only before the first sandbox is made.
#[pyfunction]
#[pyo3(signature = (*, cache_dir=None, max_concurrent_runs=None, max_queued_runs=None, queue_timeout_ms=None, epoch_tick_ms=None, fuel_metering=None, pooling=None, prepared_instances=None))]
#[allow(clippy::too_many_arguments)]
fn configure_engine(
    py: Python<'_>,
    cache_dir: Option<PathBuf>,
    max_concurrent_runs: Option<usize>,
    max_queued_runs: Option<usize>,
    queue_timeout_ms: Option<u64>,
    epoch_tick_ms: Option<u64>,
    fuel_metering: Option<bool>,
    pooling: Option<bool>,
    prepared_instances: Option<usize>,
) -> PyResult<()> {
    if ENGINE.get().is_some() {
        return Err(error(
            py,
            "ConfigurationError",
            "the engine is already running: configure it before the first Sandbox",
        ));
    }
    let mut config = EngineConfig::default();
    if let Some(dir) = cache_dir {
        config.cache_dir = dir;
    }
    config.max_concurrent_runs = max_concurrent_runs.unwrap_or(config.max_concurrent_runs);
    config.max_queued_runs = max_queued_runs.unwrap_or(config.max_queued_runs);
    config.queue_timeout_ms = queue_timeout_ms.unwrap_or(config.queue_timeout_ms);
    config.epoch_tick_ms = epoch_tick_ms.unwrap_or(config.epoch_tick_ms);
    config.fuel_metering = fuel_metering.unwrap_or(config.fuel_metering);
    config.pooling = pooling.unwrap_or(config.pooling);
    config.prepared_instances = prepared_instances.unwrap_or(config.prepared_instances);
    // `Engine::new` refuses it too, but only at the first Sandbox and as an `EngineError`.
    if config.prepared_instances > wasmbox::MAX_PREPARED_INSTANCES {
        let message = format!("prepared_instances must be at most {}", wasmbox::MAX_PREPARED_INSTANCES);
        return Err(error(py, "ConfigurationError", message));
    }
    *ENGINE_CONFIG.lock().map_err(|_| error(py, "EngineError", "engine lock poisoned"))? = Some(config);
    Ok(())
}

/// The default limits, as a dict of the Rust `Limits` fields.
#[pyfunction]
fn default_limits(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let value = serde_json::to_value(Limits::default()).map_err(|e| PyValueError::new_err(e.to_string()))?;
    convert::to_py(py, &value)
}

/// Parses and validates limits given as a dict; raises `LimitsError`.
fn parse_limits(py: Python<'_>, limits: &Bound<'_, PyAny>) -> PyResult<Limits> {
    let value = convert::from_py(limits)?;
    let limits: Limits = serde_json::from_value(value).map_err(|e| error(py, "LimitsError", e.to_string()))?;
    limits.validate().map_err(|e| error(py, "LimitsError", e.to_string()))?;
    Ok(limits)
}

/// Checks limits given as a dict, raising `LimitsError` for the first bad field.
#[pyfunction]
fn validate_limits(py: Python<'_>, limits: &Bound<'_, PyAny>) -> PyResult<()> {
    parse_limits(py, limits).map(drop)
}

/// A run configuration (the Rust `wasmbox::Sandbox`), made by `wasmbox.Sandbox`.
#[pyclass(frozen, module = "wasmbox._native")]
struct NativeSandbox {
    sandbox: Arc<Sandbox>,
    /// Whether it has a sync tool that runs off the run's thread (src/tool_thread.rs).
    pooled_tools: bool,
}

#[pymethods]
impl NativeSandbox {
    /// `tools` holds `(name, description, args_schema, function, is_async, timeout_ms, inline)`;
    /// `scope` is `"all"`, `"none"` or a list of names; `limits` a dict of `Limits` fields.
    #[new]
    #[pyo3(signature = (language, tools, scope, limits, isolation, worker_program=None))]
    fn new(
        py: Python<'_>,
        language: &str,
        tools: Vec<Bound<'_, PyTuple>>,
        scope: &Bound<'_, PyAny>,
        limits: &Bound<'_, PyAny>,
        isolation: &str,
        worker_program: Option<PathBuf>,
    ) -> PyResult<Self> {
        let limits = parse_limits(py, limits)?;
        let scope = if let Ok(word) = scope.extract::<String>() {
            match word.as_str() {
                "all" => Scope::All,
                "none" => Scope::None,
                other => {
                    let message = format!("scope `{other}`: expected \"all\", \"none\" or a list of tool names");
                    return Err(error(py, "ConfigurationError", message));
                }
            }
        } else {
            Scope::only(scope.extract::<Vec<String>>()?)
        };
        let isolation: Isolation =
            isolation.parse().map_err(|e: wasmbox::UnknownIsolation| error(py, "ConfigurationError", e.to_string()))?;
        let mut registry = Tools::new();
        let mut pooled_tools = false;
        for spec in tools {
            let (name, description, schema, function, is_async, timeout_ms, inline): ToolTuple<'_> = spec.extract()?;
            pooled_tools |= !is_async && !inline;
            let args_schema = convert::from_py(&schema)?;
            let spec = ToolSpec { name, description, args_schema, function, is_async, timeout_ms, inline };
            registry.register(tools::tool(spec)).map_err(|e| error(py, "ToolRegistrationError", e.to_string()))?;
        }
        let runtime = runtime(py, language)?;
        let sandbox = Sandbox::new(runtime, registry).scope(scope).limits(limits);
        let sandbox = match isolation {
            Isolation::InProcess => sandbox,
            isolation => {
                let options = wasmbox::worker::WorkerOptions { program: worker_program, ..Default::default() };
                py.detach(|| sandbox.isolation_with(isolation, options)).map_err(|e| setup_error(py, &e))?
            }
        };
        Ok(NativeSandbox { sandbox: Arc::new(sandbox), pooled_tools })
    }

    /// Runs `code` to its outcome on this thread, the GIL released, calling
    /// `on_output(stream, text)` as the guest writes; `files` (`{name: bytes or str}`)
    /// are under the guest's `/input`. Ctrl-C cancels the run and raises
    /// `KeyboardInterrupt`.
    #[pyo3(signature = (code, input, on_output=None, files=None))]
    fn run(
        &self,
        py: Python<'_>,
        code: &str,
        input: &Bound<'_, PyAny>,
        on_output: Option<Py<PyAny>>,
        files: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyOutcome> {
        let input = convert::from_py(input)?;
        let files = files::input_files(files)?;
        let token = CancelToken::new();
        let (request, sink) = request(code.to_owned(), input, token.clone(), on_output);
        let request = request.files(files);
        let _finish = FinishOutput(sink);
        let _in_flight = tool_thread::RunInFlight::start(self.pooled_tools);
        let outcome = blocking::drive(py, self.sandbox.run_with(request), Some(&token))?;
        Ok(PyOutcome::new(outcome))
    }

    /// Starts `code` and returns its [`RunFuture`], which the caller awaits on
    /// `event_loop` (its async tools run there too). The run goes on on the package's
    /// tokio threads, and its outcome reaches the loop through `completions` (`None`:
    /// through `call_soon_threadsafe`; src/loop_completions.rs). With `eager`, its first
    /// slice runs here first, the GIL released: the loop waits until the run finishes or
    /// first waits (a tool call, an epoch tick), and a run that finishes so is not handed
    /// to another thread at all. `on_output(stream, text)` is called as the guest writes,
    /// from the thread running it. `files` as for `run`.
    #[pyo3(signature = (code, input, event_loop, completions, on_output=None, files=None, eager=false))]
    #[allow(clippy::too_many_arguments)]
    fn start(
        &self,
        py: Python<'_>,
        code: String,
        input: &Bound<'_, PyAny>,
        event_loop: Py<PyAny>,
        completions: Option<Bound<'_, LoopCompletions>>,
        on_output: Option<Py<PyAny>>,
        files: Option<&Bound<'_, PyAny>>,
        eager: bool,
    ) -> PyResult<Py<RunFuture>> {
        let input = convert::from_py(input)?;
        let files = files::input_files(files)?;
        let token = CancelToken::new();
        let future = Py::new(py, RunFuture::new(event_loop.clone_ref(py), token.clone(), false))?;
        let done = Done::new(completions, future.clone_ref(py));
        let (request, sink) = request(code, input, token, on_output);
        let sandbox = Arc::clone(&self.sandbox);
        let in_flight = tool_thread::RunInFlight::start(self.pooled_tools);
        let run = async move {
            let outcome = sandbox.run_with(request.files(files)).await;
            drop(in_flight);
            drop(FinishOutput(sink));
            outcome
        };
        launch(py, run, event_loop, &future, done, eager)?;
        Ok(future)
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.sandbox)
    }
}

/// The run's request, with `on_output` as its sink when given.
fn request(
    code: String,
    input: Value,
    cancel: CancelToken,
    on_output: Option<Py<PyAny>>,
) -> (RunRequest, Option<Arc<PyOutputSink>>) {
    let request = RunRequest::new(code).input(input).cancel(cancel);
    match on_output {
        None => (request, None),
        Some(callback) => {
            let sink = Arc::new(PyOutputSink::new(callback));
            (request.output_sink(Arc::clone(&sink) as Arc<dyn wasmbox::OutputSink>), Some(sink))
        }
    }
}

/// Passes on what the sink held back when the run is over, however it ended.
struct FinishOutput(Option<Arc<PyOutputSink>>);

impl Drop for FinishOutput {
    fn drop(&mut self) {
        if let Some(sink) = &self.0 {
            sink.finish();
        }
    }
}

/// Starts `work` (a run or a session step, and what must happen once it ends) for
/// `run_async`, with `event_loop` as its loop for async tools. With `eager` it is polled
/// once on this thread first, and a `work` that ends there settles `future` at once;
/// otherwise it goes on on the shared runtime, and `done` hands its outcome to the loop.
fn launch(
    py: Python<'_>,
    work: impl Future<Output = wasmbox::Outcome> + Send + 'static,
    event_loop: Py<PyAny>,
    future: &Py<RunFuture>,
    done: Done,
    eager: bool,
) -> PyResult<()> {
    let event_loop = Arc::new(event_loop);
    let mut work = Box::pin(RUN_LOOP.scope(Arc::clone(&event_loop), work));
    if eager {
        if let Poll::Ready(outcome) = py.detach(|| poll_once(work.as_mut())) {
            return RunFuture::settle(future.bind(py), Bound::new(py, PyOutcome::new(outcome))?);
        }
    }
    let counted = blocking::AsyncRun::start();
    tokio_runtime().spawn(async move {
        let outcome = work.await;
        drop(counted);
        done.finish(outcome, event_loop);
    });
    Ok(())
}

/// Polls `work` once on this thread, in the shared runtime's context (its timers, its
/// blocking pool), with a waker that does nothing: work still pending is spawned on
/// that runtime next, which polls it again at once. A pooled tool call spins briefly for
/// its answer, as under a sync `run`, so that a quick one does not end the poll.
fn poll_once<F: Future>(work: Pin<&mut F>) -> Poll<F::Output> {
    let _context = tokio_runtime().enter();
    blocking::as_driver(|| work.poll(&mut Context::from_waker(Waker::noop())))
}

/// Runs `code` `iterations` times through the Rust API alone, from this thread, and
/// returns the seconds it took: the baseline of `benches/python_overhead.py`, built
/// exactly as the extension is.
#[pyfunction]
#[pyo3(name = "_rust_baseline")]
fn rust_baseline(py: Python<'_>, sandbox: &NativeSandbox, code: &str, iterations: u32) -> PyResult<f64> {
    let sandbox = Arc::clone(&sandbox.sandbox);
    let runtime = tokio_runtime();
    let (elapsed, failed) = py.detach(|| {
        let started = std::time::Instant::now();
        let mut failed = None;
        for _ in 0..iterations {
            let outcome = runtime.block_on(sandbox.run(code));
            if !outcome.is_ok() && failed.is_none() {
                failed = Some(format!("{:?}", outcome.error));
            }
        }
        (started.elapsed().as_secs_f64(), failed)
    });
    match failed {
        Some(error) => Err(PyValueError::new_err(format!("the baseline run failed: {error}"))),
        None => Ok(elapsed),
    }
}

/// Registers a Rust tool `add(a, b)` (the benches' W2 tool) in a sandbox for the
/// baseline: the same tool the Rust benches call.
#[pyfunction]
#[pyo3(name = "_rust_add_sandbox")]
fn rust_add_sandbox(py: Python<'_>, language: &str) -> PyResult<NativeSandbox> {
    let mut registry = Tools::new();
    let add =
        wasmbox::Tool::new("add", "Adds a and b", serde_json::json!({"type": "object"}), |args: Value| async move {
            Ok(serde_json::json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)))
        });
    registry.register(add).map_err(|e| error(py, "ToolRegistrationError", e.to_string()))?;
    let sandbox = Sandbox::new(runtime(py, language)?, registry).scope(Scope::All);
    Ok(NativeSandbox { sandbox: Arc::new(sandbox), pooled_tools: false })
}

/// Versions of the built-in guests, as `{name: {runtime, built_with, wit}}`.
#[pyfunction]
fn guest_versions(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let versions = PyDict::new(py);
    for guest in wasmbox::BuiltinGuest::ALL {
        let entry = PyDict::new(py);
        match guest.versions() {
            Ok(v) => {
                entry.set_item("runtime", v.runtime)?;
                entry.set_item("built_with", v.built_with)?;
                entry.set_item("wit", v.wit)?;
            }
            Err(err) => entry.set_item("error", err.to_string())?,
        }
        versions.set_item(guest.name(), entry)?;
    }
    Ok(versions)
}

#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<NativeSandbox>()?;
    module.add_class::<loop_completions::RunFuture>()?;
    module.add_class::<LoopCompletions>()?;
    module.add_class::<session::NativeSession>()?;
    module.add_class::<PyOutcome>()?;
    module.add_class::<outcome::PyErrorDetail>()?;
    module.add_class::<outcome::PyCapturedOutput>()?;
    module.add_class::<outcome::PyToolCallRecord>()?;
    module.add_class::<outcome::PyStats>()?;
    module.add_function(wrap_pyfunction!(configure_engine, module)?)?;
    module.add_function(wrap_pyfunction!(default_limits, module)?)?;
    module.add_function(wrap_pyfunction!(validate_limits, module)?)?;
    module.add_function(wrap_pyfunction!(guest_versions, module)?)?;
    module.add_function(wrap_pyfunction!(rust_baseline, module)?)?;
    module.add_function(wrap_pyfunction!(rust_add_sandbox, module)?)?;
    module.add_function(wrap_pyfunction!(exit_guard::shutdown, module)?)?;
    module.add("ISOLATION_NAMES", wasmbox::ISOLATION_NAMES.to_vec())?;
    Ok(())
}
