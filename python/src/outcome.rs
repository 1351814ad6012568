//! `Outcome` and its parts as Python objects: read-only views of the Rust values,
//! converted when a field is read (most callers read two or three fields of a run).

use std::sync::OnceLock;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList};

use crate::convert;

/// `wasmbox.Status` / `wasmbox.CallStatus` members by their word, built once.
fn enum_member<'py>(py: Python<'py>, class: &'static str, word: &str) -> PyResult<Bound<'py, PyAny>> {
    static STATUS: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
    static CALL_STATUS: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
    let cell = if class == "Status" { &STATUS } else { &CALL_STATUS };
    let members = cell.get_or_try_init(py, || -> PyResult<Py<PyDict>> {
        let enum_class = py.import("wasmbox._types")?.getattr(class)?;
        let members = PyDict::new(py);
        for member in enum_class.try_iter()? {
            let member = member?;
            members.set_item(member.getattr("value")?, member)?;
        }
        Ok(members.unbind())
    })?;
    match members.bind(py).get_item(word)? {
        Some(member) => Ok(member),
        // A word this package does not know yet (the Rust enums are non-exhaustive).
        None => Ok(pyo3::types::PyString::new(py, word).into_any()),
    }
}

/// The result of one run (see the Rust `wasmbox::Outcome`).
#[pyclass(frozen, module = "wasmbox._native", name = "Outcome")]
pub(crate) struct PyOutcome {
    pub(crate) inner: wasmbox::Outcome,
    /// The value, converted on first read.
    value: OnceLock<Py<PyAny>>,
}

impl PyOutcome {
    pub(crate) fn new(inner: wasmbox::Outcome) -> Self {
        PyOutcome { inner, value: OnceLock::new() }
    }
}

#[pymethods]
impl PyOutcome {
    /// This run's id.
    #[getter]
    fn run_id(&self) -> &str {
        &self.inner.run_id
    }

    /// How the run ended (`wasmbox.Status`).
    #[getter]
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        enum_member(py, "Status", self.inner.status.as_str())
    }

    /// The run's JSON value as Python data; `None` unless `ok`.
    #[getter]
    fn value(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if let Some(value) = self.value.get() {
            return Ok(value.clone_ref(py));
        }
        let value = match &self.inner.value {
            Some(value) => convert::to_py(py, value)?.unbind(),
            None => py.None(),
        };
        Ok(self.value.get_or_init(|| value).clone_ref(py))
    }

    /// What went wrong, for every status but `ok`.
    #[getter]
    fn error(&self) -> Option<PyErrorDetail> {
        self.inner.error.clone().map(|inner| PyErrorDetail { inner })
    }

    /// Captured standard output.
    #[getter]
    fn stdout(&self) -> PyCapturedOutput {
        PyCapturedOutput { inner: self.inner.stdout.clone() }
    }

    /// Captured standard error.
    #[getter]
    fn stderr(&self) -> PyCapturedOutput {
        PyCapturedOutput { inner: self.inner.stderr.clone() }
    }

    /// Every tool call the guest attempted, in order.
    #[getter]
    fn tool_calls<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let records = self.inner.tool_calls.iter().map(|record| PyToolCallRecord { inner: record.clone() });
        PyList::new(py, records)
    }

    /// The files the guest left under `/output`, `{name: bytes}` in name order.
    #[getter]
    fn files<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::files::output_files(py, &self.inner.files)
    }

    /// What the run cost.
    #[getter]
    fn stats(&self) -> PyStats {
        PyStats { inner: self.inner.stats.clone() }
    }

    /// True when the run ended `ok`.
    fn is_ok(&self) -> bool {
        self.inner.is_ok()
    }

    /// The outcome as JSON text, the same as the Rust crate's serde form.
    fn to_json(&self) -> String {
        serde_json::to_string(&self.inner).unwrap_or_default()
    }

    fn __repr__(&self) -> String {
        let error =
            self.inner.error.as_ref().map_or_else(String::new, |e| format!(", error={}: {}", e.kind, e.message));
        let value = self.inner.value.as_ref().map_or_else(String::new, |v| format!(", value={v}"));
        format!("Outcome(status={}{value}{error})", self.inner.status)
    }
}

/// What went wrong (see the Rust `wasmbox::ErrorDetail`).
#[pyclass(frozen, module = "wasmbox._native", name = "ErrorDetail")]
pub(crate) struct PyErrorDetail {
    inner: wasmbox::ErrorDetail,
}

#[pymethods]
impl PyErrorDetail {
    /// The exception type for guest errors, else the status word or the budget that ran out.
    #[getter]
    fn kind(&self) -> &str {
        &self.inner.kind
    }

    /// A human- and model-readable explanation.
    #[getter]
    fn message(&self) -> &str {
        &self.inner.message
    }

    /// The guest's traceback, when there is one (else empty).
    #[getter]
    fn traceback(&self) -> &str {
        &self.inner.traceback
    }

    fn __repr__(&self) -> String {
        format!("ErrorDetail(kind={:?}, message={:?})", self.inner.kind, self.inner.message)
    }
}

/// Captured text of one output stream.
#[pyclass(frozen, module = "wasmbox._native", name = "CapturedOutput")]
pub(crate) struct PyCapturedOutput {
    inner: wasmbox::CapturedOutput,
}

#[pymethods]
impl PyCapturedOutput {
    /// What the guest wrote, up to the cap.
    #[getter]
    fn text(&self) -> &str {
        &self.inner.text
    }

    /// True when the guest wrote more than the cap.
    #[getter]
    fn truncated(&self) -> bool {
        self.inner.truncated
    }

    fn __str__(&self) -> &str {
        &self.inner.text
    }

    fn __repr__(&self) -> String {
        format!("CapturedOutput(text={:?}, truncated={})", self.inner.text, self.inner.truncated)
    }
}

/// One entry of a run's tool-call trail.
#[pyclass(frozen, module = "wasmbox._native", name = "ToolCallRecord")]
pub(crate) struct PyToolCallRecord {
    inner: wasmbox::ToolCallRecord,
}

#[pymethods]
impl PyToolCallRecord {
    /// The calling run.
    #[getter]
    fn run_id(&self) -> &str {
        &self.inner.run_id
    }

    /// 1-based sequence number of the call within its run.
    #[getter]
    fn call_id(&self) -> u32 {
        self.inner.call_id
    }

    /// The tool name the guest asked for.
    #[getter]
    fn tool(&self) -> &str {
        &self.inner.tool
    }

    /// How the call ended (`wasmbox.CallStatus`).
    #[getter]
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        enum_member(py, "CallStatus", self.inner.status.as_str())
    }

    /// Host time spent on the call.
    #[getter]
    fn duration_ms(&self) -> f64 {
        self.inner.duration_ms
    }

    /// Size of the argument JSON the guest sent.
    #[getter]
    fn args_bytes(&self) -> u64 {
        self.inner.args_bytes
    }

    /// Size of the result JSON handed back.
    #[getter]
    fn result_bytes(&self) -> u64 {
        self.inner.result_bytes
    }

    /// Why the call did not succeed (the text the guest saw).
    #[getter]
    fn message(&self) -> Option<&str> {
        self.inner.message.as_deref()
    }

    fn __repr__(&self) -> String {
        format!("ToolCallRecord(tool={:?}, status={})", self.inner.tool, self.inner.status.as_str())
    }
}

/// What a run cost.
#[pyclass(frozen, module = "wasmbox._native", name = "Stats")]
pub(crate) struct PyStats {
    inner: wasmbox::Stats,
}

#[pymethods]
impl PyStats {
    /// Wall time of the whole run, in microseconds.
    #[getter]
    fn wall_time_us(&self) -> u64 {
        self.inner.wall_time_us
    }

    /// Time spent creating the Store and instantiating the guest, in microseconds.
    #[getter]
    fn instantiate_time_us(&self) -> u64 {
        self.inner.instantiate_time_us
    }

    /// Fuel consumed (0 unless the engine meters fuel).
    #[getter]
    fn fuel_used(&self) -> u64 {
        self.inner.fuel_used
    }

    /// The largest total size of the guest's linear memories seen.
    #[getter]
    fn peak_memory_bytes(&self) -> u64 {
        self.inner.peak_memory_bytes
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.inner)
    }
}
