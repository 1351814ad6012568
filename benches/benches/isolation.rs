//! Per-run latency by isolation: in-process, a worker process, and a worker under
//! bubblewrap — each with the worker kept warm across runs and with a fresh worker per
//! run — for W1 (trivial) and W2 (one tool call), Python and JS. Prints p50 / p99.
//!
//! ```text
//! cargo build --release -p wasmbox-cli      # the worker binary
//! cargo bench -p wasmbox-benches --bench isolation
//! ```
//! `WASMBOX_WORKER` overrides the worker binary (default: target/release/wasmbox).
//! A wrapper that is unavailable here (bwrap without user namespaces) is reported and
//! skipped.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;
use wasmbox::worker::WorkerOptions;
use wasmbox::{Engine, EngineConfig, Isolation, Runtime, Sandbox, Scope, Tool, Tools};
use wasmbox_benches::WORKLOADS;

/// Runs per cell after warm-up; a fresh worker costs tens of ms, so keep it modest.
const RUNS: usize = 60;
const WARMUP: usize = 5;

fn worker_program() -> PathBuf {
    let program = std::env::var_os("WASMBOX_WORKER").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/wasmbox").canonicalize().unwrap_or_default()
    });
    assert!(program.is_file(), "no worker binary: run `cargo build --release -p wasmbox-cli` first");
    program
}

fn tools() -> Tools {
    let mut tools = Tools::new();
    tools
        .register(Tool::new("add", "Adds a and b", json!({"type": "object"}), |args| async move {
            Ok(json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)))
        }))
        .expect("valid tool");
    tools
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio");
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let program = worker_program();
    let cells: [(&str, Isolation, usize); 5] = [
        ("inproc", Isolation::InProcess, 0),
        ("worker, warm", Isolation::Worker, 1),
        ("worker, fresh per run", Isolation::Worker, 0),
        ("bwrap, warm", Isolation::Bubblewrap, 1),
        ("bwrap, fresh per run", Isolation::Bubblewrap, 0),
    ];
    println!("| isolation | guest | workload | p50 ms | p99 ms |");
    println!("|---|---|---|---:|---:|");
    type Load = fn(&Engine) -> Result<Runtime, wasmbox::Error>;
    for (language, load) in [("python", Runtime::python as Load), ("js", Runtime::javascript as Load)] {
        let runtime = load(&engine).expect("the guests are built: run `cargo xtask guests`");
        for (label, isolation, warm) in &cells {
            let options =
                WorkerOptions { program: Some(program.clone()), max_idle_workers: *warm, ..WorkerOptions::default() };
            let sandbox = match Sandbox::new(runtime.clone(), tools())
                .scope(Scope::All)
                .isolation_with(isolation.clone(), options)
            {
                Ok(sandbox) => sandbox,
                Err(err) => {
                    println!("| {label} | {language} | – | n/a | n/a |");
                    eprintln!("skipped {label}: {err}");
                    continue;
                }
            };
            for workload in &WORKLOADS[..2] {
                let code = if language == "python" { workload.python } else { workload.js };
                let mut times = Vec::with_capacity(RUNS);
                for i in 0..WARMUP + RUNS {
                    let started = Instant::now();
                    let outcome = rt.block_on(sandbox.run(code));
                    let elapsed = started.elapsed();
                    assert!(outcome.is_ok(), "{label} {language} {}: {outcome:?}", workload.name);
                    if i >= WARMUP {
                        times.push(elapsed);
                    }
                }
                times.sort();
                println!(
                    "| {label} | {language} | {} | {} | {} |",
                    workload.name,
                    ms(percentile(&times, 0.5)),
                    ms(percentile(&times, 0.99))
                );
            }
        }
    }
}
