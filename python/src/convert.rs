//! JSON values across the language boundary: the run's input and value, a tool's
//! arguments and result. Converted directly between `serde_json::Value` and Python
//! objects, without a JSON text in between.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// Nesting beyond this is refused before the broker's own depth cap sees it: it keeps
/// the recursion below from exhausting the stack on a self-referencing structure.
const MAX_DEPTH: usize = 256;

/// A JSON value as a Python object (`dict`, `list`, `str`, `int`, `float`, `bool`, `None`).
pub(crate) fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (key, item) in map {
                dict.set_item(key, to_py(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// A Python object as a JSON value. Plain data converts directly; anything else goes
/// through `wasmbox._convert.to_jsonable` once (pydantic models, dataclasses, enums,
/// dates). NaN, infinities, non-string keys and unknown types are a `TypeError`
/// naming where in the value they are (`$.items[3]`).
pub(crate) fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    convert(obj, &mut String::from("$"), 0, true)
}

fn convert(obj: &Bound<'_, PyAny>, path: &mut String, depth: usize, fallback: bool) -> PyResult<Value> {
    if depth > MAX_DEPTH {
        return Err(PyTypeError::new_err(format!("value at {path} is nested more than {MAX_DEPTH} deep")));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    // bool before int: `True` is an `int` too.
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::from(i));
        }
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(Value::from(u));
        }
        return Err(PyTypeError::new_err(format!("integer at {path} does not fit in 64 bits")));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        let f = f.value();
        return Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| PyTypeError::new_err(format!("{f} at {path} is not a JSON number")));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_str()?.to_owned()));
    }
    if let Ok(dict) = obj.cast::<PyDict>() {
        let mut map = Map::new();
        for (key, item) in dict.iter() {
            let key = key
                .cast::<PyString>()
                .map_err(|_| PyTypeError::new_err(format!("object at {path} has a key that is not a str")))?
                .to_str()?
                .to_owned();
            let len = path.len();
            path.push('.');
            path.push_str(&key);
            let value = convert(&item, path, depth + 1, true)?;
            path.truncate(len);
            map.insert(key, value);
        }
        return Ok(Value::Object(map));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let mut items = Vec::new();
        for (index, item) in obj.try_iter()?.enumerate() {
            let len = path.len();
            path.push_str(&format!("[{index}]"));
            items.push(convert(&item?, path, depth + 1, true)?);
            path.truncate(len);
        }
        return Ok(Value::Array(items));
    }
    let type_name = obj.get_type().name().map_or_else(|_| "?".to_owned(), |n| n.to_string());
    let not_json = || {
        PyTypeError::new_err(format!("{type_name} at {path} is not JSON (a dict, list, str, int, float, bool or None)"))
    };
    if fallback {
        let py = obj.py();
        return match jsonable_hook(py)?.call1(py, (obj,)) {
            Ok(plain) => convert(plain.bind(py), path, depth + 1, false),
            Err(err) if err.is_instance_of::<PyTypeError>(py) => Err(not_json()),
            Err(err) => Err(err),
        };
    }
    Err(not_json())
}

/// `wasmbox._convert.to_jsonable`, looked up once.
fn jsonable_hook(py: Python<'_>) -> PyResult<&Py<PyAny>> {
    static HOOK: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    HOOK.get_or_try_init(py, || Ok(py.import("wasmbox._convert")?.getattr("to_jsonable")?.unbind()))
}
