//! Test guest: grows its memory a MiB at a time until the host says no.
//!
//! With `{"catch": true}` as input it notices the failed allocation and returns
//! normally — the host must still report `memory_exhausted`, because it latches the
//! breach instead of trusting the guest. Otherwise the failed allocation aborts (a trap).

use serde_json::{json, Value};
use wasmbox_guest::RunError;

const CHUNK: usize = 1 << 20;

fn run(_code: &str, input: Value) -> Result<Value, RunError> {
    let catch = input["catch"].as_bool().unwrap_or(false);
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut chunk = Vec::new();
        if catch && chunk.try_reserve_exact(CHUNK).is_err() {
            return Ok(json!({ "caught": true, "mib": hoard.len() }));
        }
        chunk.resize(CHUNK, 1);
        hoard.push(chunk);
        // Keeps the allocations observable, so they are not optimised away.
        std::hint::black_box(&mut hoard);
    }
}

wasmbox_guest::export_runner!(run);
