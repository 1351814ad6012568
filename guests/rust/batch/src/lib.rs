//! `batch`: the worked example of docs/guests.md, in Rust (the same guest exists in
//! Python and JavaScript under guests/examples/, and one test runs all three).
//!
//! The code is one tool call per line, `<tool> <JSON object of arguments>` (the
//! arguments may be left out); blank lines and `#` comments are skipped. The run's value
//! is the list of results. A line whose arguments are not JSON is a `SyntaxError`; a
//! refused or failed call ends the run as an exception of the matching kind
//! (`ToolDenied`, `ToolFailed`, …).

use serde_json::Value;
use wasmbox_guest::{tools, RunError};

fn run(code: &str, _input: Value) -> Result<Value, RunError> {
    let mut results = Vec::new();
    for (number, line) in code.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, args) = line.split_once(char::is_whitespace).unwrap_or((line, "{}"));
        let args: Value = serde_json::from_str(args)
            .map_err(|e| RunError::syntax(format!("line {}: the arguments are not JSON ({e})", number + 1)))?;
        results.push(tools::call::<_, Value>(name, &args)?);
    }
    Ok(Value::Array(results))
}

wasmbox_guest::export_runner!(run);
