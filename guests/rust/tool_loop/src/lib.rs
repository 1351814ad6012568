//! Test guest: calls the tool named by the code, with the input as its arguments, until
//! the host refuses a call — then swallows the refusal and returns normally. The host
//! must still report `tool_limit`: it latches the breach instead of trusting the guest.

use serde_json::{json, Value};
use wasmbox_guest::{tools, RunError};

fn run(code: &str, input: Value) -> Result<Value, RunError> {
    let mut calls = 0u64;
    loop {
        match tools::call::<_, Value>(code.trim(), &input) {
            Ok(_) => calls += 1,
            Err(err) => return Ok(json!({ "calls": calls, "stopped_by": err.kind() })),
        }
    }
}

wasmbox_guest::export_runner!(run);
