//! Per-run latency of the Python guest on a warm engine: instantiate + run + drop.
//!
//! `cargo bench -p wasmbox-benches` (build the guest first: `cargo xtask guests`).

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use wasmbox::{Engine, EngineConfig, Runtime, Sandbox, Scope, Tool, Tools};

fn sandbox() -> Sandbox {
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let python = Runtime::python(&engine).expect("the Python guest is built: run `cargo xtask guests`");
    let mut tools = Tools::new();
    tools
        .register(Tool::new("add", "Adds a and b", json!({"type": "object"}), |args| async move {
            Ok(json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)))
        }))
        .expect("valid tool");
    Sandbox::new(python, tools).scope(Scope::All)
}

fn python_runs(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio");
    let sandbox = sandbox();
    let mut group = c.benchmark_group("python");
    for (name, code) in [
        ("w1_trivial", "1 + 1"),
        ("w2_one_tool_call", "tools.add(a=1, b=2)"),
        ("w3_100_tool_calls", "t = 0\nfor i in range(100):\n    t = tools.add(a=t, b=i)\nt"),
    ] {
        // Fail loudly rather than timing an error path.
        let outcome = rt.block_on(sandbox.run(code));
        assert!(outcome.is_ok(), "{name}: {outcome:?}");
        group.bench_function(name, |b| b.to_async(&rt).iter(|| sandbox.run(code)));
    }
    group.finish();
}

criterion_group!(benches, python_runs);
criterion_main!(benches);
