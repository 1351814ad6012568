//! Per-run latency of the Python and JS guests on a warm engine (instantiate + run + drop)
//! for the workloads W1–W6 of `lib.rs`, and the host-side cost of one broker call.
//!
//! `cargo bench -p wasmbox-benches` (build the guest first: `cargo xtask guests`).
//! `WASMBOX_BENCH_POOLING=0` runs them on the on-demand instance allocator instead of
//! the default pool, and `WASMBOX_BENCH_PREPARED=N` with N instances prepared ahead per
//! runtime instead of the default (`0`: every run instantiates inline), for
//! before/after comparisons.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use wasmbox::{Engine, EngineConfig, Runtime, Sandbox, Scope, Tool, Tools};
use wasmbox_benches::{Workload, WORKLOADS};

/// The engine configuration of every bench: the default, or on-demand allocation when
/// `WASMBOX_BENCH_POOLING=0`, and `WASMBOX_BENCH_PREPARED` instances prepared ahead.
fn engine_config() -> EngineConfig {
    let pooling = std::env::var("WASMBOX_BENCH_POOLING").map_or(true, |v| v != "0");
    let prepared_instances = std::env::var("WASMBOX_BENCH_PREPARED")
        .map_or(wasmbox::DEFAULT_PREPARED_INSTANCES, |v| v.parse().expect("WASMBOX_BENCH_PREPARED is a number"));
    EngineConfig { pooling, prepared_instances, ..EngineConfig::default() }
}

fn sandbox(runtime: impl Fn(&Engine) -> Result<Runtime, wasmbox::Error>) -> Sandbox {
    sandbox_on(engine_config(), runtime)
}

fn sandbox_on(config: EngineConfig, runtime: impl Fn(&Engine) -> Result<Runtime, wasmbox::Error>) -> Sandbox {
    let engine = Engine::new(config).expect("engine");
    let runtime = runtime(&engine).expect("the guests are built: run `cargo xtask guests`");
    let mut tools = Tools::new();
    tools
        .register(Tool::new("add", "Adds a and b", json!({"type": "object"}), |args| async move {
            Ok(json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)))
        }))
        .expect("valid tool");
    Sandbox::new(runtime, tools).scope(Scope::All)
}

fn python_runs(c: &mut Criterion) {
    bench_language(c, "python", Runtime::python, |w| w.python);
}

fn js_runs(c: &mut Criterion) {
    bench_language(c, "js", Runtime::javascript, |w| w.js);
}

fn bench_language(
    c: &mut Criterion,
    language: &str,
    runtime: fn(&Engine) -> Result<Runtime, wasmbox::Error>,
    code: fn(&Workload) -> &'static str,
) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio");
    let sandbox = sandbox(runtime);
    let mut group = c.benchmark_group(language);
    // Instantiate only: the guest's own measure of the instantiation inside W1 runs
    // (fresh Store, `InstancePre::instantiate_async`), without the call and the drop;
    // on an engine that prepares nothing ahead, since a run on a prepared instance
    // reports 0 (the background thread pays this instead).
    let trivial = code(&WORKLOADS[0]);
    let inline = sandbox_on(EngineConfig { prepared_instances: 0, ..engine_config() }, runtime);
    group.bench_function("instantiate", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let sandbox = inline.clone();
            async move {
                let mut total = std::time::Duration::ZERO;
                for _ in 0..iters {
                    let outcome = sandbox.run(trivial).await;
                    total += std::time::Duration::from_micros(outcome.stats.instantiate_time_us);
                }
                total
            }
        })
    });
    for workload in &WORKLOADS {
        let code = code(workload);
        // Fail loudly rather than timing an error path.
        let outcome = rt.block_on(sandbox.run(code));
        assert!(outcome.is_ok(), "{}: {outcome:?}", workload.name);
        // W4–W6 take tens to hundreds of milliseconds per run: criterion's default 100
        // samples would take minutes on 2 cores, and 10 samples already give a stable median.
        let slow = outcome.stats.wall_time_us > 20_000;
        group.sample_size(if slow { 10 } else { 100 });
        group.bench_function(workload.name, |b| b.to_async(&rt).iter(|| sandbox.run(code)));
    }
    group.finish();
}

/// The host side of one tool call alone (no wasm): what the broker adds per call.
fn broker_call(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio");
    let mut tools = Tools::new();
    tools
        .register(Tool::new("add", "Adds a and b", json!({"type": "object"}), |args| async move {
            Ok(json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)))
        }))
        .expect("valid tool");
    let tools = std::sync::Arc::new(tools);
    // A broker is a run's: it keeps every call in the run's trail. One broker for all of
    // criterion's millions of calls would time a binary search over a trail no run has
    // (most of the figure, and memory without end), so each broker makes at most
    // CALLS_PER_RUN calls; only the calls are timed.
    const CALLS_PER_RUN: u64 = 1_000;
    let limits = wasmbox::Limits { max_tool_calls: CALLS_PER_RUN as u32, ..wasmbox::Limits::default() };
    c.bench_function("broker/one_call", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                let mut broker = wasmbox::BrokerCtx::new(std::sync::Arc::clone(&tools), Scope::All, limits.clone());
                let calls = CALLS_PER_RUN.min(iters - done);
                let started = Instant::now();
                for _ in 0..calls {
                    rt.block_on(broker.call("add", r#"{"a": 1, "b": 2}"#)).expect("ok");
                }
                timed += started.elapsed();
                done += calls;
            }
            timed
        });
    });
}

criterion_group!(benches, broker_call, python_runs, js_runs);
criterion_main!(benches);
