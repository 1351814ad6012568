//! Instances prepared ahead of runs (`EngineConfig::prepared_instances`): a run on one
//! behaves exactly as on an instance instantiated for it (nothing of another run, the
//! same memory and fuel accounting, every limit), a burst beyond the prepared set still
//! runs, and `0` turns preparing off. A run on a prepared instance reports an
//! `instantiate_time_us` of 0, which is how these tests tell the two paths apart; each
//! test repeats its run until one took a prepared instance, checking every run.

use std::time::Duration;

use serde_json::{json, Value};
use wasmbox::{
    CancelToken, Engine, EngineConfig, ImportPolicy, Limits, Outcome, Runtime, Sandbox, Scope, SessionConfig, Status,
    Tools, MAX_PREPARED_INSTANCES,
};

use crate::support::{tools, value};

/// Runs on the background thread's timetable: give it this many chances at most.
const ATTEMPTS: usize = 400;

/// Loads a runtime on an engine.
type Load = fn(&Engine) -> Result<Runtime, wasmbox::Error>;

fn engine(prepared_instances: usize, fuel_metering: bool) -> Engine {
    Engine::new(EngineConfig { prepared_instances, fuel_metering, ..EngineConfig::default() }).expect("engine")
}

fn sandbox(engine: &Engine, load: Load, limits: Limits) -> Sandbox {
    Sandbox::new(load(engine).expect("the guests are built"), Tools::new()).limits(limits)
}

fn prepared(outcome: &Outcome) -> bool {
    outcome.stats.instantiate_time_us == 0
}

/// Runs `code` until `count` runs took a prepared instance, checking every outcome
/// (inline or prepared) with `check`; returns the prepared runs' outcomes.
async fn on_prepared(sandbox: &Sandbox, code: &str, count: usize, check: impl Fn(&Outcome)) -> Vec<Outcome> {
    let mut found = Vec::new();
    for _ in 0..ATTEMPTS {
        let outcome = sandbox.run(code).await;
        check(&outcome);
        if prepared(&outcome) {
            found.push(outcome);
            if found.len() == count {
                return found;
            }
        }
        // Leaves the background thread time to prepare the next instance.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("only {} of {ATTEMPTS} runs took a prepared instance", found.len());
}

/// What a run leaves in the interpreter's globals is not there in the next run, in
/// either language, on prepared instances as on inline ones.
#[tokio::test(flavor = "multi_thread")]
async fn no_run_sees_what_another_left_in_its_globals() {
    let engine = engine(2, false);
    let python = sandbox(&engine, Runtime::python, Limits::default());
    let code = "import builtins, sys\nseen = [hasattr(builtins, 'leak'), hasattr(sys, 'leak')]\n\
                builtins.leak = sys.leak = 'secret'\nseen";
    on_prepared(&python, code, 3, |outcome| assert_eq!(value(outcome), json!([false, false]), "{outcome:?}")).await;

    let js = sandbox(&engine, Runtime::javascript, Limits::default());
    let code = "const seen = ['leak' in globalThis, typeof Math.leak];\n\
                globalThis.leak = 'secret'; Math.leak = 'secret';\nreturn seen;";
    on_prepared(&js, code, 3, |outcome| assert_eq!(value(outcome), json!([false, "undefined"]), "{outcome:?}")).await;
}

/// Fuel and peak memory count the instantiation on a prepared instance as they do
/// inline: the same code reports the same figures on both, a budget of exactly what the
/// inline run used is enough on a prepared instance, and half of it is not.
#[tokio::test(flavor = "multi_thread")]
async fn prepared_runs_count_fuel_and_memory_as_inline_runs() {
    let languages: [(Load, &str); 2] = [
        (Runtime::python, "sum(range(100))"),
        (Runtime::javascript, "let s = 0;\nfor (let i = 0; i < 100; i++) s += i;\nreturn s;"),
    ];
    for (load, code) in languages {
        let inline = sandbox(&engine(0, true), load, Limits::default()).run(code).await;
        assert_eq!(value(&inline), json!(4950), "{inline:?}");
        assert!(!prepared(&inline));
        let (fuel, peak) = (inline.stats.fuel_used, inline.stats.peak_memory_bytes);
        assert!(fuel > 0 && peak > 0, "{inline:?}");

        let engine = engine(2, true);
        let exact = Limits { fuel: Some(fuel), max_memory_bytes: peak, ..Limits::default() };
        on_prepared(&sandbox(&engine, load, exact), code, 2, |outcome| {
            assert_eq!(value(outcome), json!(4950), "{outcome:?}");
            assert_eq!((outcome.stats.fuel_used, outcome.stats.peak_memory_bytes), (fuel, peak));
        })
        .await;
        let short = Limits { fuel: Some(fuel / 2), ..Limits::default() };
        on_prepared(&sandbox(&engine, load, short), code, 1, |outcome| {
            assert_eq!(outcome.status, Status::FuelExhausted, "{outcome:?}");
        })
        .await;
    }
}

/// The memory limit holds on a prepared instance (a breach is latched even when the
/// guest catches its `MemoryError`), and a limit below what a prepared instance already
/// holds sends the run down the inline path, which ends it as it always did.
#[tokio::test(flavor = "multi_thread")]
async fn the_memory_limit_holds_on_prepared_instances() {
    let engine = engine(2, false);
    let limits = Limits { max_memory_bytes: 48 << 20, ..Limits::default() };
    let code = "try:\n    b = bytearray(64 << 20)\nexcept MemoryError:\n    pass\n'swallowed'";
    on_prepared(&sandbox(&engine, Runtime::python, limits), code, 2, |outcome| {
        assert_eq!(outcome.status, Status::MemoryExhausted, "{outcome:?}");
        assert!(outcome.stats.peak_memory_bytes <= 48 << 20, "{outcome:?}");
    })
    .await;

    let tiny = sandbox(&engine, Runtime::python, Limits { max_memory_bytes: 1 << 20, ..Limits::default() });
    let on_inline_engine = sandbox(&self::engine(0, false), Runtime::python, tiny.current_limits().clone());
    let expected = on_inline_engine.run("1 + 1").await;
    assert_eq!(expected.status, Status::MemoryExhausted, "{expected:?}");
    for _ in 0..20 {
        let outcome = tiny.run("1 + 1").await;
        assert!(!prepared(&outcome), "an instance holding more than the limit was used");
        assert_eq!((outcome.status, outcome.error), (expected.status, expected.error.clone()));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The deadline and cancellation stop a guest running on a prepared instance.
#[tokio::test(flavor = "multi_thread")]
async fn timeout_and_cancellation_stop_prepared_instances() {
    let engine = engine(2, false);
    let limits = Limits { timeout_ms: 200, ..Limits::default() };
    on_prepared(&sandbox(&engine, Runtime::javascript, limits), "while (true) {}", 1, |outcome| {
        assert_eq!(outcome.status, Status::Timeout, "{outcome:?}");
    })
    .await;

    let python = sandbox(&engine, Runtime::python, Limits::default());
    for _ in 0..ATTEMPTS {
        let cancel = CancelToken::new();
        let canceller = {
            let cancel = cancel.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                cancel.cancel();
            })
        };
        let outcome = python.run_cancellable("while True:\n    pass", &Value::Null, &cancel).await;
        canceller.await.unwrap();
        assert_eq!(outcome.status, Status::Cancelled, "{outcome:?}");
        if prepared(&outcome) {
            return;
        }
    }
    panic!("no cancelled run took a prepared instance");
}

/// More runs at once than there are prepared instances: those that find none
/// instantiate inline, and every run answers.
#[tokio::test(flavor = "multi_thread")]
async fn a_burst_beyond_the_prepared_set_still_runs() {
    let engine = engine(1, false);
    let python = sandbox(&engine, Runtime::python, Limits::default());
    on_prepared(&python, "1 + 1", 1, |outcome| assert_eq!(value(outcome), json!(2))).await;
    let runs: Vec<_> = (0..12)
        .map(|i| {
            let python = python.clone();
            tokio::spawn(async move { python.run(&format!("{i} * 2")).await })
        })
        .collect();
    for (i, run) in runs.into_iter().enumerate() {
        let outcome = run.await.unwrap();
        assert_eq!(value(&outcome), json!(i * 2), "{outcome:?}");
    }
}

/// A session opens on a prepared instance when one is ready, as a run does (the engine's
/// metrics count where each fresh instance came from), and finds nothing that an earlier
/// session left in the interpreter, while its own steps keep what they define.
#[tokio::test(flavor = "multi_thread")]
async fn sessions_open_on_prepared_instances() {
    let engine = engine(2, false);
    let languages: [(Load, &str, &str); 2] = [
        (Runtime::python, "import builtins\nbuiltins.leak = 'secret'", "import builtins\nhasattr(builtins, 'leak')"),
        (Runtime::javascript, "globalThis.leak = 'secret'", "return 'leak' in globalThis"),
    ];
    for (load, leave, check) in languages {
        let sandbox = sandbox(&engine, load, Limits::default());
        let mut on_prepared = 0;
        for _ in 0..ATTEMPTS {
            let before = engine.metrics();
            let session = sandbox.session(SessionConfig::default()).await.expect("a session");
            let after = engine.metrics();
            let opened = (
                after.instances_prepared - before.instances_prepared,
                after.instances_inline - before.instances_inline,
            );
            assert!(opened == (1, 0) || opened == (0, 1), "one fresh instance per session: {opened:?}");
            assert_eq!(value(&session.run(check).await), json!(false), "nothing of an earlier session");
            assert_eq!(session.run(leave).await.status, Status::Ok);
            assert_eq!(value(&session.run(check).await), json!(true), "a step keeps what it defines");
            drop(session);
            on_prepared += opened.0;
            if on_prepared == 3 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(on_prepared, 3, "three sessions opened on prepared instances in {ATTEMPTS} attempts");
    }
}

/// `prepared_instances: 0` turns preparing off: every run instantiates its instance.
#[tokio::test(flavor = "multi_thread")]
async fn zero_prepared_instances_turns_preparing_off() {
    let engine = engine(0, false);
    let js = sandbox(&engine, Runtime::javascript, Limits::default());
    for _ in 0..20 {
        let outcome = js.run("return 1;").await;
        assert_eq!(value(&outcome), json!(1));
        assert!(!prepared(&outcome), "{outcome:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let session = js.session(SessionConfig::default()).await.expect("a session");
    assert_eq!(value(&session.run("return 2").await), json!(2));
    let metrics = engine.metrics();
    assert_eq!((metrics.instances_prepared, metrics.instances_inline), (0, 21), "20 runs and a session, all inline");
    let refused =
        Engine::new(EngineConfig { prepared_instances: MAX_PREPARED_INSTANCES + 1, ..EngineConfig::default() });
    assert!(matches!(refused, Err(wasmbox::Error::Engine(_))), "{refused:?}");
}

/// A guest that calls a tool while it is instantiated (a core start function calling
/// `tools.call("add", {"a": 1, "b": 2})`), then calls `tools.call(code, input)` in its
/// run: the 0.1.0 guest of `wit_versions.rs` with a start function added after its
/// imports are wired.
fn guest_calling_a_tool_while_instantiated(engine: &Engine) -> Runtime {
    let text = include_str!("guest_wit_0_1_0.wat")
        .replace(
            r#"(data (i32.const 16) "tool refused")"#,
            r#"(data (i32.const 16) "tool refused") (data (i32.const 64) "add") (data (i32.const 80) "{\"a\": 1, \"b\": 2}")"#,
        )
        .replace(
            "  (type (;3;) (result string (error 2)))",
            r#"  (core module $starter
    (import "actual" "0" (func $call (param i32 i32 i32 i32 i32)))
    (func $start (call $call (i32.const 64) (i32.const 3) (i32.const 80) (i32.const 16) (i32.const 512)))
    (start $start))
  (core instance $starter (instantiate $starter (with "actual" (instance $actual))))
  (type (;3;) (result string (error 2)))"#,
        );
    let bytes = wat::parse_str(text).expect("valid WAT");
    Runtime::from_bytes_with(engine, "starter", &bytes, ImportPolicy::Strict).expect("the guest loads")
}

/// A guest whose instantiation calls the host is never run on a prepared instance: the
/// call made while preparing would be missing from the run's trail (it went to the
/// placeholder broker). Every run instantiates inline and its trail has both calls.
#[tokio::test(flavor = "multi_thread")]
async fn a_guest_that_calls_the_host_while_instantiated_is_not_prepared() {
    let engine = engine(2, false);
    let sandbox = Sandbox::new(guest_calling_a_tool_while_instantiated(&engine), tools()).scope(Scope::only(["add"]));
    for _ in 0..20 {
        let outcome = sandbox.run_with_input("add", &json!({"a": 2, "b": 40})).await;
        assert_eq!(outcome.value, Some(json!(42)), "{outcome:?}");
        let calls: Vec<_> = outcome.tool_calls.iter().map(|call| call.tool.as_str()).collect();
        assert_eq!(calls, ["add", "add"], "the call made while instantiating is the run's: {outcome:?}");
        assert!(!prepared(&outcome), "{outcome:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
