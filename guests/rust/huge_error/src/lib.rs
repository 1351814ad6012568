//! Test guest: fails with an error as large as its input asks (`{"bytes": N}`), with no
//! cap of its own — the host must cap it, and a result too large for the host to take in
//! one hostcall is the guest's `error`, not the host's `internal`.

use serde_json::Value;
use wasmbox_guest::RunError;

fn run(_code: &str, input: Value) -> Result<Value, RunError> {
    let bytes = input["bytes"].as_u64().unwrap_or(1 << 20) as usize;
    let mut error = RunError::exception("HugeError", "m".repeat(bytes));
    if let RunError::Exception(e) = &mut error {
        e.traceback = "t".repeat(bytes);
    }
    Err(error)
}

wasmbox_guest::export_runner!(run);
