//! Test guest: panics. A Rust panic in wasm aborts, which traps the instance; the host
//! must report an `error` of kind `Trap` and keep the panic message from stderr.

use serde_json::Value;
use wasmbox_guest::RunError;

fn run(code: &str, _input: Value) -> Result<Value, RunError> {
    panic!("the trap guest panics on purpose: {code}")
}

wasmbox_guest::export_runner!(run);
