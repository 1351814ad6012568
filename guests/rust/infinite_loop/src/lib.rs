//! Test guest: computes forever, to be stopped by the deadline or the fuel budget.

use serde_json::Value;
use wasmbox_guest::RunError;

fn run(_code: &str, _input: Value) -> Result<Value, RunError> {
    let mut n: u64 = 0;
    loop {
        // Opaque to the optimiser, so the loop really executes instructions.
        n = std::hint::black_box(n.wrapping_add(1));
    }
}

wasmbox_guest::export_runner!(run);
