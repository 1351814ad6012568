//! Test guest: recurses without bound until wasmtime's stack limit traps it.

use serde_json::Value;
use wasmbox_guest::RunError;

fn run(_code: &str, input: Value) -> Result<Value, RunError> {
    let depth = input["depth"].as_u64().unwrap_or(u64::MAX);
    Ok(descend(depth).into())
}

#[inline(never)]
fn descend(depth: u64) -> u64 {
    if depth == 0 {
        return 0;
    }
    // Calling through an opaque function pointer keeps the compiler from turning the
    // recursion into a loop, so every level takes a real wasm frame.
    let next: fn(u64) -> u64 = std::hint::black_box(descend);
    next(depth - 1).wrapping_add(1)
}

wasmbox_guest::export_runner!(run);
