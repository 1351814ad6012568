//! The pooling instance allocator: an engine's pool holds three instances per concurrent
//! run, at least 16 (nested runs take instances of their own, each run tree at most its
//! share), and a nested run past its share ends `rejected` with kind `instance_pool`
//! instead of failing obscurely.

use std::sync::{Arc, OnceLock};

use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};
use wasmbox::{Engine, EngineConfig, Inherit, Limits, Runtime, Sandbox, Scope, Status, Tool, ToolFailure, Tools};

/// An engine admitting one top-level run: its pool holds 16 instances (the minimum).
const POOL_INSTANCES: usize = 16;

/// A sandbox whose `fanout` tool starts `n` nested runs of `code` at once, each
/// parked in the `park` tool until one of them ends (the one the pool had no room
/// for), then releases them all and returns their statuses and error kinds in
/// completion order.
fn fanout_sandbox(runtime: Runtime) -> Sandbox {
    let this: Arc<OnceLock<Sandbox>> = Arc::default();
    let (release, parked) = watch::channel(false);
    let release = Arc::new(release);
    let mut tools = Tools::new();
    tools
        .register(Tool::new("park", "Waits until released", json!({"type": "object"}), move |_| {
            let mut parked = parked.clone();
            async move {
                parked.wait_for(|released| *released).await.map_err(|_| ToolFailure::new("gone"))?;
                Ok(json!("released"))
            }
        }))
        .unwrap()
        .register(Tool::with_context("fanout", "Starts n parked nested runs", json!({"type": "object"}), {
            let this = Arc::clone(&this);
            move |args, ctx| {
                let (this, release) = (Arc::clone(&this), Arc::clone(&release));
                async move {
                    let sandbox = this.get().ok_or_else(|| ToolFailure::new("not ready"))?.clone();
                    let (done, mut finished) = mpsc::unbounded_channel();
                    let code = args["code"].as_str().unwrap_or_default().to_owned();
                    for _ in 0..args["n"].as_u64().unwrap_or(0) {
                        let (sandbox, ctx, done, code) = (sandbox.clone(), ctx.clone(), done.clone(), code.clone());
                        tokio::spawn(async move {
                            let outcome = sandbox.run_nested(&ctx, &code, &Value::Null, &Inherit::All).await;
                            let kind = outcome.error.map(|e| e.kind).unwrap_or_default();
                            let _ = done.send(json!([outcome.status.as_str(), kind]));
                        });
                    }
                    drop(done);
                    let mut ended = Vec::new();
                    while let Some(outcome) = finished.recv().await {
                        ended.push(outcome);
                        release.send_replace(true);
                    }
                    Ok(Value::Array(ended))
                }
            }
        }))
        .unwrap();
    let limits = Limits { max_concurrent_tool_calls: 64, ..Limits::default() };
    let sandbox = Sandbox::new(runtime, tools).scope(Scope::All).limits(limits);
    let _ = this.set(sandbox.clone());
    sandbox
}

fn small_engine() -> Engine {
    Engine::new(EngineConfig { max_concurrent_runs: 1, ..EngineConfig::default() }).expect("engine")
}

/// 16 live Python instances fit (the top-level run and 15 nested ones, which also
/// shows that CPython's 15 core instances, memories and tables fit the per-instance
/// budget); the 17th instance is refused with a typed outcome, the others finish.
#[tokio::test(flavor = "multi_thread")]
async fn a_full_pool_rejects_the_run_as_instance_pool() {
    let engine = small_engine();
    let sandbox = fanout_sandbox(Runtime::python(&engine).expect("the Python guest is built"));
    let outcome = sandbox.run(&format!("tools.fanout(n={POOL_INSTANCES}, code='tools.park()')")).await;
    assert_eq!(outcome.status, Status::Ok, "{outcome:?}");
    let ended = outcome.value.expect("value");
    let ended = ended.as_array().expect("array");
    assert_eq!(ended.len(), POOL_INSTANCES);
    assert_eq!(ended[0], json!(["rejected", "instance_pool"]), "the first to end is the one refused: {ended:?}");
    assert!(ended[1..].iter().all(|e| e == &json!(["ok", ""])), "{ended:?}");

    // The refused instance left nothing behind: the pool is whole again.
    let again = sandbox.run(&format!("tools.fanout(n={}, code='tools.park()')", POOL_INSTANCES - 1)).await;
    let again = again.value.expect("value");
    assert!(again.as_array().unwrap().iter().all(|e| e == &json!(["ok", ""])), "{again:?}");
}

/// The same for the JavaScript guest (4 core instances each).
#[tokio::test(flavor = "multi_thread")]
async fn a_full_pool_rejects_a_js_run_as_instance_pool() {
    let engine = small_engine();
    let sandbox = fanout_sandbox(Runtime::javascript(&engine).expect("the JS guest is built"));
    let outcome = sandbox
        .run(&format!("return await tools.fanout({{n: {POOL_INSTANCES}, code: 'return await tools.park()'}})"))
        .await;
    assert_eq!(outcome.status, Status::Ok, "{outcome:?}");
    let ended = outcome.value.expect("value");
    let ended = ended.as_array().expect("array");
    assert_eq!(ended[0], json!(["rejected", "instance_pool"]), "{ended:?}");
    assert!(ended[1..].iter().all(|e| e == &json!(["ok", ""])), "{ended:?}");
}

/// Embedders on hosts with little address space can opt out of the pool.
#[tokio::test]
async fn the_on_demand_allocator_runs_the_same_code() {
    let engine = Engine::new(EngineConfig { pooling: false, ..EngineConfig::default() }).expect("engine");
    let sandbox = Sandbox::new(Runtime::python(&engine).expect("the Python guest is built"), Tools::new());
    let outcome = sandbox.run("sum(range(10))").await;
    assert_eq!(outcome.value, Some(json!(45)), "{outcome:?}");
}
