//! Session steps (issue 24): the latency of one step on a long-lived session, for a
//! trivial step (W1) and a step with one tool call (W2), in Python and JavaScript, and
//! what opening a session costs (admission, a fresh instance, the opening call).
//!
//! `cargo bench -p wasmbox-benches --bench sessions` (build the guests first: `cargo
//! xtask guests`). Every step of a bench runs on the same session, as a REPL's commands
//! do; the session's idle timeout and lifetime are set high enough that criterion's
//! measurement never ends it. `session_w1` and `session_w2` repeat the same text every
//! step, which a guest may compile once (both built-in guests do); the `_new_text`
//! variants start each step with a comment of its own, so every step is new code, as an
//! agent's usually are.

use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use wasmbox::{Engine, EngineConfig, Runtime, Sandbox, Scope, SessionConfig, Tool, Tools};
use wasmbox_benches::WORKLOADS;

fn sandbox(runtime: fn(&Engine) -> Result<Runtime, wasmbox::Error>) -> Sandbox {
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

/// Long enough for any criterion run: the bench must not time a session that ended.
fn long_session() -> SessionConfig {
    SessionConfig { idle_timeout_ms: 24 * 3600 * 1000, max_lifetime_ms: 24 * 3600 * 1000 }
}

fn python_steps(c: &mut Criterion) {
    bench_language(c, "python", Runtime::python, |w| w.python, "#");
}

fn js_steps(c: &mut Criterion) {
    bench_language(c, "js", Runtime::javascript, |w| w.js, "//");
}

fn bench_language(
    c: &mut Criterion,
    language: &str,
    runtime: fn(&Engine) -> Result<Runtime, wasmbox::Error>,
    code: fn(&wasmbox_benches::Workload) -> &'static str,
    comment: &str,
) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio");
    let sandbox = sandbox(runtime);
    let mut group = c.benchmark_group(language);
    let session = rt.block_on(sandbox.session(long_session())).expect("a session");
    for (name, workload) in [("session_w1", &WORKLOADS[0]), ("session_w2", &WORKLOADS[1])] {
        let code = code(workload);
        // Fail loudly rather than timing an error path.
        let outcome = rt.block_on(session.run(code));
        assert!(outcome.is_ok(), "{name}: {outcome:?}");
        group.bench_function(name, |b| b.to_async(&rt).iter(|| session.run(code)));
        let step = AtomicU64::new(0);
        let new_text = || format!("{comment} step {}\n{code}", step.fetch_add(1, Ordering::Relaxed));
        let outcome = rt.block_on(session.run(&new_text()));
        assert!(outcome.is_ok(), "{name}_new_text: {outcome:?}");
        group.bench_function(format!("{name}_new_text"), |b| {
            b.to_async(&rt).iter(|| {
                let code = new_text();
                let session = &session;
                async move { session.run(&code).await }
            })
        });
    }
    let outcome = rt.block_on(session.run(code(&WORKLOADS[0])));
    assert!(outcome.is_ok(), "the session outlived the bench: {outcome:?}");
    drop(session);
    // Opening (and dropping) a session: what a REPL's first command waits for. Last, as
    // the instances it drops are reset in the background, which would load the steps'
    // measurement.
    group.bench_function("session_open", |b| {
        b.to_async(&rt).iter(|| async { drop(sandbox.session(long_session()).await.expect("a session")) })
    });
    group.finish();
}

criterion_group!(benches, python_steps, js_steps);
criterion_main!(benches);
