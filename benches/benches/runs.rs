//! Per-run latency of the Python guest on a warm engine: instantiate + run + drop.
//!
//! `cargo bench -p wasmbox-benches` (build the guest first: `cargo xtask guests`).

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use wasmbox::{Engine, EngineConfig, Runtime, Sandbox, Scope, Tool, Tools};

fn sandbox(runtime: impl Fn(&Engine) -> Result<Runtime, wasmbox::Error>) -> Sandbox {
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let runtime = runtime(&engine).expect("the guests are built: run `cargo xtask guests`");
    let mut tools = Tools::new();
    tools
        .register(Tool::new("add", "Adds a and b", json!({"type": "object"}), |args| async move {
            Ok(json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)))
        }))
        .expect("valid tool");
    Sandbox::new(runtime, tools).scope(Scope::All)
}

const PYTHON: [(&str, &str); 3] = [
    ("w1_trivial", "1 + 1"),
    ("w2_one_tool_call", "tools.add(a=1, b=2)"),
    ("w3_100_tool_calls", "t = 0\nfor i in range(100):\n    t = tools.add(a=t, b=i)\nt"),
];

const JS: [(&str, &str); 3] = [
    ("w1_trivial", "return 1 + 1"),
    ("w2_one_tool_call", "return await tools.add({a: 1, b: 2})"),
    ("w3_100_tool_calls", "let t = 0\nfor (let i = 0; i < 100; i++) t = await tools.add({a: t, b: i})\nreturn t"),
];

fn python_runs(c: &mut Criterion) {
    bench_language(c, "python", Runtime::python, &PYTHON);
}

fn js_runs(c: &mut Criterion) {
    bench_language(c, "js", Runtime::javascript, &JS);
}

fn bench_language(
    c: &mut Criterion,
    language: &str,
    runtime: fn(&Engine) -> Result<Runtime, wasmbox::Error>,
    workloads: &[(&str, &str)],
) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio");
    let sandbox = sandbox(runtime);
    let mut group = c.benchmark_group(language);
    for &(name, code) in workloads {
        // Fail loudly rather than timing an error path.
        let outcome = rt.block_on(sandbox.run(code));
        assert!(outcome.is_ok(), "{name}: {outcome:?}");
        group.bench_function(name, |b| b.to_async(&rt).iter(|| sandbox.run(code)));
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
    let limits = wasmbox::Limits { max_tool_calls: u32::MAX, ..wasmbox::Limits::default() };
    let mut broker = wasmbox::BrokerCtx::new(tools, Scope::All, limits);
    c.bench_function("broker/one_call", |b| {
        b.iter(|| rt.block_on(broker.call("add", r#"{"a": 1, "b": 2}"#)).expect("ok"));
    });
}

criterion_group!(benches, broker_call, python_runs, js_runs);
criterion_main!(benches);
