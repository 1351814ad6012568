//! Shared fixtures: one engine and one compiled runtime per guest language per test process.

use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};
use wasmbox::{Engine, EngineConfig, Limits, Outcome, Runtime, Sandbox, Scope, Tool, ToolFailure, Tools};

/// The Python runtime, compiled (or loaded from the precompile cache) once.
pub fn python() -> Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    shared(&RUNTIME, Runtime::python)
}

/// The JavaScript runtime, compiled (or loaded from the precompile cache) once.
pub fn javascript() -> Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    shared(&RUNTIME, Runtime::javascript)
}

/// The Python runtime on the fuel-metering engine.
pub fn python_fuel() -> Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    shared_on(&RUNTIME, fuel_engine(), Runtime::python)
}

/// The JavaScript runtime on the fuel-metering engine.
pub fn javascript_fuel() -> Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    shared_on(&RUNTIME, fuel_engine(), Runtime::javascript)
}

fn shared(cell: &'static OnceLock<Runtime>, load: fn(&Engine) -> Result<Runtime, wasmbox::Error>) -> Runtime {
    shared_on(cell, engine(), load)
}

fn shared_on(
    cell: &'static OnceLock<Runtime>,
    engine: Engine,
    load: fn(&Engine) -> Result<Runtime, wasmbox::Error>,
) -> Runtime {
    cell.get_or_init(|| load(&engine).unwrap_or_else(|err| panic!("{err} (the tests need the guests)"))).clone()
}

/// The engine every runtime of the test process shares (no fuel metering, the default).
pub fn engine() -> Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| Engine::new(EngineConfig::default()).expect("engine")).clone()
}

/// An engine that meters fuel, for the tests of fuel budgets. Its guests are compiled
/// separately (metering changes the code).
pub fn fuel_engine() -> Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE
        .get_or_init(|| Engine::new(EngineConfig { fuel_metering: true, ..EngineConfig::default() }).expect("engine"))
        .clone()
}

/// The tools the tests use, with real behaviour.
pub fn tools() -> Tools {
    let object = json!({"type": "object"});
    let city_schema = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    let mut tools = Tools::new();
    tools
        .register(Tool::new("add", "Adds a and b", object.clone(), |args| async move {
            match (args["a"].as_f64(), args["b"].as_f64()) {
                (Some(a), Some(b)) if args["a"].is_i64() && args["b"].is_i64() => Ok(json!(a as i64 + b as i64)),
                (Some(a), Some(b)) => Ok(json!(a + b)),
                _ => Err(ToolFailure::new("a and b must be numbers")),
            }
        }))
        .unwrap()
        .register(Tool::new("echo", "Returns its arguments", object.clone(), |args| async move { Ok(args) }))
        .unwrap()
        .register(Tool::new("weather", "Weather for a city", city_schema, |args| async move {
            match args["city"].as_str() {
                Some("Paris") => Ok(json!({"city": "Paris", "temp_c": 18.5, "sky": "cloudy"})),
                Some("Oslo") => Ok(json!({"city": "Oslo", "temp_c": -3, "sky": "snow"})),
                _ => Err(ToolFailure::new("unknown city")),
            }
        }))
        .unwrap()
        .register(Tool::new("secret", "Never in scope", object.clone(), |_| async { Ok(json!("leaked")) }))
        .unwrap()
        .register(Tool::new("slow", "Sleeps for ms", object, |args| async move {
            tokio::time::sleep(Duration::from_millis(args["ms"].as_u64().unwrap_or(0))).await;
            Ok(json!("done"))
        }))
        .unwrap();
    tools
}

/// A sandbox with the test tools, all but `secret` in scope.
pub fn sandbox() -> Sandbox {
    Sandbox::new(python(), tools()).scope(Scope::only(["add", "echo", "weather", "slow"]))
}

/// Runs `code` in the default sandbox.
pub async fn run(code: &str) -> Outcome {
    sandbox().run(code).await
}

/// Runs `code` with `limits`.
pub async fn run_limited(code: &str, limits: Limits) -> Outcome {
    sandbox().limits(limits).run(code).await
}

/// Asserts `ok` and returns the value, printing the whole outcome otherwise.
pub fn value(outcome: &Outcome) -> Value {
    assert!(outcome.is_ok(), "expected ok, got {}", serde_json::to_string_pretty(outcome).unwrap());
    outcome.value.clone().expect("ok has a value")
}
