//! A run's files as Python values: the `files` mapping a run or a session takes (names
//! under the guest's `/input` to their contents) and `Outcome.files` (what the guest left
//! under `/output`), both `{name: bytes}` as the crate's `InputFiles` and `OutputFile`s.

use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict, PyMapping, PyMemoryView, PyString};
use wasmbox::{InputFiles, OutputFile};

/// `files` (`None`, or a mapping of names to `bytes`, `bytearray`, `memoryview` or `str`,
/// which is stored as UTF-8) as the crate's `InputFiles`. Raises `TypeError` for any
/// other shape and `ValueError` for a name the crate refuses (absolute, `..`, empty, …).
pub(crate) fn input_files(files: Option<&Bound<'_, PyAny>>) -> PyResult<InputFiles> {
    let mut input = InputFiles::new();
    let Some(files) = files.filter(|files| !files.is_none()) else {
        return Ok(input);
    };
    let mapping = files.cast::<PyMapping>().map_err(|_| {
        PyTypeError::new_err(format!("files must be a mapping of names to bytes or str, not {}", type_name(files)))
    })?;
    for item in mapping.items()?.iter() {
        let (name, contents): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
        let name: String = name
            .extract()
            .map_err(|_| PyTypeError::new_err(format!("a file name must be a str, not {}", type_name(&name))))?;
        let bytes: Arc<[u8]> = if let Ok(text) = contents.cast::<PyString>() {
            Arc::from(text.to_str()?.as_bytes())
        } else if let Ok(bytes) = contents.extract::<PyBackedBytes>() {
            Arc::from(&*bytes)
        } else if contents.cast::<PyMemoryView>().is_ok() {
            Arc::from(contents.call_method0("tobytes")?.cast::<PyBytes>()?.as_bytes())
        } else {
            let message = format!("file `{name}`: expected bytes or str, not {}", type_name(&contents));
            return Err(PyTypeError::new_err(message));
        };
        input.insert(name, bytes).map_err(|e| PyValueError::new_err(e.to_string()))?;
    }
    Ok(input)
}

/// The output files as `{name: bytes}`, in name order.
pub(crate) fn output_files<'py>(py: Python<'py>, files: &[OutputFile]) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for file in files {
        dict.set_item(&file.name, PyBytes::new(py, &file.bytes))?;
    }
    Ok(dict)
}

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value.get_type().name().map_or_else(|_| "an unknown type".to_owned(), |name| name.to_string())
}
