//! The "wasmbox library" column of the comparison harness (`compare.py`): runs each
//! workload many times through ONE warm Engine + Sandbox — the way an embedder uses
//! wasmbox — and prints the latency of every run as JSON.
//!
//! Each `Sandbox::run` creates a fresh Store and instance from the pre-initialised
//! snapshot and drops it afterwards, so "sandbox creation" is inside every sample; the
//! Engine, the compiled guest and the tool registry are built once, before timing.
//!
//! Input (stdin): `{"lang": "python"|"js", "runs": N, "budget_ms": B, "gap_us": G,
//!                  "workloads": [{"name": "...", "code": "..."}]}`; with `gap_us` the
//!                  runner sleeps that long after each run, so the engine's background
//!                  thread can prepare the next instance (the prepared path's latency).
//! Output (stdout): `{"<name>": {"samples_ms": [...], "inline_instantiations": N,
//!                  "value": <first run's value>}}` (N: runs that found no prepared
//!                  instance and instantiated on the request path), or
//! `{"<name>": {"error": "..."}}` when the workload did not run cleanly.
//!
//! Two more modes give the session matrix (cold start, warm run, ten commands of one
//! session), selected by `"mode"`:
//! - `"cold"` with `"code"`: one sample in this new process, from before `Engine::new`
//!   to the first run's outcome (the engine, loading the cached precompiled guest, the
//!   sandbox, the run): `{"cold_ms": ..., "value": ...}`.
//! - `"session"` with `"commands": ["...", ...]`: each sample opens a session, runs the
//!   commands as its steps and drops it: `{"samples_ms": [...], "step_samples_ms": [...],
//!   "value": <the last step's value>}` (one entry per step in the second).

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use wasmbox::{Engine, EngineConfig, Runtime, Sandbox, Scope, SessionConfig, Tool, Tools};

/// However fast a workload is, take at least this many samples (p50/p99 need some).
const MIN_RUNS: usize = 5;

fn main() {
    let spec: Value = serde_json::from_reader(std::io::stdin()).expect("a JSON spec on stdin");
    let runs = spec["runs"].as_u64().unwrap_or(100) as usize;
    let budget = Duration::from_millis(spec["budget_ms"].as_u64().unwrap_or(5_000));
    let cold_started = Instant::now();
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

    match spec["mode"].as_str() {
        Some("cold") => {
            let outcome = rt.block_on(sandbox.run(spec["code"].as_str().expect("code")));
            let cold_ms = cold_started.elapsed().as_secs_f64() * 1e3;
            let result = match outcome.is_ok() {
                true => json!({ "cold_ms": cold_ms, "value": outcome.value }),
                false => json!({ "error": format!("{:?}: {:?}", outcome.status, outcome.error) }),
            };
            println!("{result}");
            return;
        }
        Some("session") => {
            let commands: Vec<&str> =
                spec["commands"].as_array().expect("commands").iter().map(|c| c.as_str().expect("a command")).collect();
            println!("{}", rt.block_on(measure_session(&sandbox, &commands, runs, budget)));
            return;
        }
        _ => {}
    }
    let gap = Duration::from_micros(spec["gap_us"].as_u64().unwrap_or(0));
    let mut report = serde_json::Map::new();
    for workload in spec["workloads"].as_array().expect("workloads") {
        let name = workload["name"].as_str().expect("name");
        let code = workload["code"].as_str().expect("code");
        let result = rt.block_on(measure(&sandbox, code, runs, budget, gap));
        report.insert(name.to_owned(), result);
    }
    println!("{}", Value::Object(report));
}

async fn measure(sandbox: &Sandbox, code: &str, runs: usize, budget: Duration, gap: Duration) -> Value {
    // One untimed run first: it warms caches and tells us whether the workload works at
    // all, so an error path is never timed as if it were the workload.
    let first = sandbox.run(code).await;
    if !first.is_ok() {
        return json!({ "error": format!("{:?}: {:?}", first.status, first.error) });
    }
    let mut samples_ms = Vec::with_capacity(runs);
    // Runs that found no prepared instance and instantiated on the request path.
    let mut inline_instantiations = 0;
    let started = Instant::now();
    while samples_ms.len() < runs && (samples_ms.len() < MIN_RUNS || started.elapsed() < budget) {
        let t = Instant::now();
        let outcome = sandbox.run(code).await;
        samples_ms.push(t.elapsed().as_secs_f64() * 1e3);
        if !outcome.is_ok() {
            return json!({ "error": format!("{:?}: {:?}", outcome.status, outcome.error) });
        }
        inline_instantiations += usize::from(outcome.stats.instantiate_time_us > 0);
        if !gap.is_zero() {
            std::thread::sleep(gap);
        }
    }
    json!({ "samples_ms": samples_ms, "inline_instantiations": inline_instantiations, "value": first.value })
}

/// Samples of a whole session (open, every command as a step, drop) and of each step.
async fn measure_session(sandbox: &Sandbox, commands: &[&str], runs: usize, budget: Duration) -> Value {
    let mut samples_ms = Vec::with_capacity(runs);
    let mut step_samples_ms = Vec::with_capacity(runs * commands.len());
    let mut value = Value::Null;
    let started = Instant::now();
    // One untimed session first, as for the runs: it checks every step and warms caches.
    let mut timed = false;
    while samples_ms.len() < runs && (samples_ms.len() < MIN_RUNS || started.elapsed() < budget) {
        let t = Instant::now();
        let session = match sandbox.session(SessionConfig::default()).await {
            Ok(session) => session,
            Err(error) => return json!({ "error": error.to_string() }),
        };
        let mut steps_ms = Vec::with_capacity(commands.len());
        for command in commands {
            let step = Instant::now();
            let outcome = session.run(command).await;
            steps_ms.push(step.elapsed().as_secs_f64() * 1e3);
            if !outcome.is_ok() {
                return json!({ "error": format!("{command:?}: {:?}: {:?}", outcome.status, outcome.error) });
            }
            value = outcome.value.unwrap_or(Value::Null);
        }
        drop(session);
        if timed {
            samples_ms.push(t.elapsed().as_secs_f64() * 1e3);
            step_samples_ms.extend(steps_ms);
        }
        timed = true;
    }
    json!({ "samples_ms": samples_ms, "step_samples_ms": step_samples_ms, "value": value })
}
