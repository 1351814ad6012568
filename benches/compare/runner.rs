//! The "wasmbox library" column of the comparison harness (`compare.py`): runs each
//! workload many times through ONE warm Engine + Sandbox — the way an embedder uses
//! wasmbox — and prints the latency of every run as JSON.
//!
//! Each `Sandbox::run` creates a fresh Store and instance from the pre-initialised
//! snapshot and drops it afterwards, so "sandbox creation" is inside every sample; the
//! Engine, the compiled guest and the tool registry are built once, before timing.
//!
//! Input (stdin): `{"lang": "python"|"js", "runs": N, "budget_ms": B,
//!                  "workloads": [{"name": "...", "code": "..."}]}`
//! Output (stdout): `{"<name>": {"samples_ms": [...], "value": <first run's value>}}`, or
//! `{"<name>": {"error": "..."}}` when the workload did not run cleanly.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use wasmbox::{Engine, EngineConfig, Runtime, Sandbox, Scope, Tool, Tools};

/// However fast a workload is, take at least this many samples (p50/p99 need some).
const MIN_RUNS: usize = 5;

fn main() {
    let spec: Value = serde_json::from_reader(std::io::stdin()).expect("a JSON spec on stdin");
    let runs = spec["runs"].as_u64().unwrap_or(100) as usize;
    let budget = Duration::from_millis(spec["budget_ms"].as_u64().unwrap_or(5_000));
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let runtime = match spec["lang"].as_str() {
        Some("js") => Runtime::javascript(&engine),
        _ => Runtime::python(&engine),
    }
    .expect("the guests are built: run `cargo xtask guests`");
    let mut tools = Tools::new();
    tools
        .register(Tool::new("add", "Adds a and b", json!({"type": "object"}), |args| async move {
            Ok(json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)))
        }))
        .expect("valid tool");
    let sandbox = Sandbox::new(runtime, tools).scope(Scope::only(["add"]));
    // Two workers, like the machine's two cores; each run is awaited before the next
    // starts, so this measures latency, not throughput.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio");

    let mut report = serde_json::Map::new();
    for workload in spec["workloads"].as_array().expect("workloads") {
        let name = workload["name"].as_str().expect("name");
        let code = workload["code"].as_str().expect("code");
        let result = rt.block_on(measure(&sandbox, code, runs, budget));
        report.insert(name.to_owned(), result);
    }
    println!("{}", Value::Object(report));
}

async fn measure(sandbox: &Sandbox, code: &str, runs: usize, budget: Duration) -> Value {
    // One untimed run first: it warms caches and tells us whether the workload works at
    // all, so an error path is never timed as if it were the workload.
    let first = sandbox.run(code).await;
    if !first.is_ok() {
        return json!({ "error": format!("{:?}: {:?}", first.status, first.error) });
    }
    let mut samples_ms = Vec::with_capacity(runs);
    let started = Instant::now();
    while samples_ms.len() < runs && (samples_ms.len() < MIN_RUNS || started.elapsed() < budget) {
        let t = Instant::now();
        let outcome = sandbox.run(code).await;
        samples_ms.push(t.elapsed().as_secs_f64() * 1e3);
        if !outcome.is_ok() {
            return json!({ "error": format!("{:?}: {:?}", outcome.status, outcome.error) });
        }
    }
    json!({ "samples_ms": samples_ms, "value": first.value })
}
