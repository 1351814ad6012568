//! The benchmark workloads W1–W6, shared by the criterion benches (`benches/runs.rs`)
//! and the side-by-side comparison harness (`compare/`).
//!
//! Each workload is a pair of files in `workloads/`, one per guest language, so the
//! Python harness reads exactly the code that the Rust benches run. Every Python file
//! ends with one expression line: the run's value (REPL style), which the harness
//! turns into a `print` for the systems that have no REPL-style value.

/// One workload: the same task written for each guest language.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    /// Short name, used as the criterion bench id (`w1_trivial`, …).
    pub name: &'static str,
    /// The Python snippet (tools are called as `tools.add(a=…, b=…)`).
    pub python: &'static str,
    /// The JavaScript snippet (the body of an async function).
    pub js: &'static str,
}

macro_rules! workload {
    ($name:literal) => {
        Workload {
            name: $name,
            python: include_str!(concat!("workloads/", $name, ".py")),
            js: include_str!(concat!("workloads/", $name, ".js")),
        }
    };
}

/// W1 `1 + 1`; W2 one tool call; W3 100 sequential tool calls; W4 a CPU loop (sum of
/// i*i below one million); W5 JSON (10,000 dicts through dumps and loads); W6 stdlib
/// (re, datetime, collections over 1,000 log lines).
pub const WORKLOADS: [Workload; 6] = [
    workload!("w1_trivial"),
    workload!("w2_one_tool_call"),
    workload!("w3_100_tool_calls"),
    workload!("w4_cpu_loop"),
    workload!("w5_json"),
    workload!("w6_stdlib"),
];
