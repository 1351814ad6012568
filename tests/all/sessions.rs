//! Sessions (issue 23): one instance across steps in both built-in guests. State
//! persists; a raise keeps the session; a breached limit, a cancellation or a trap ends
//! it and later steps say so; reset, idle timeout and lifetime; per-step budgets; tool
//! calls across steps; sessions count against admission; 200 sessions at once.

use std::time::Duration;

use serde_json::{json, Value};
use wasmbox::{
    CancelToken, Engine, EngineConfig, Limits, Outcome, Runtime, Sandbox, Scope, Session, SessionConfig, SessionEnd,
    Status,
};

use crate::support::{javascript, python, tools, value};

fn sandbox(runtime: Runtime) -> Sandbox {
    Sandbox::new(runtime, tools()).scope(Scope::only(["add", "echo", "weather", "slow"]))
}

async fn open(runtime: Runtime, limits: Limits) -> Session {
    sandbox(runtime).limits(limits).session(SessionConfig::default()).await.expect("the session opens")
}

fn show(outcome: &Outcome) -> String {
    serde_json::to_string_pretty(outcome).unwrap()
}

/// The step is `rejected` with kind `session_ended`, and its message says `why`.
fn assert_ended(outcome: &Outcome, why: &str) {
    let error = outcome.error.as_ref().expect("an error");
    assert_eq!((outcome.status, error.kind.as_str()), (Status::Rejected, "session_ended"), "{}", show(outcome));
    assert!(error.message.contains(why), "{why:?} not in {:?}", error.message);
}

#[tokio::test]
async fn python_globals_imports_functions_and_classes_persist() {
    let session = open(python(), Limits::default()).await;
    assert_eq!(value(&session.run("x = 41").await), Value::Null);
    let step = "import math\nfrom dataclasses import dataclass\n\
                def f(n):\n    return n + x\n\
                @dataclass\nclass Point:\n    x: int\n    y: int\n\
                f(1)";
    assert_eq!(value(&session.run(step).await), json!(42));
    // No final expression: the value is null, not the previous step's.
    assert_eq!(value(&session.run("y = f(0)").await), Value::Null);
    let uses = "p = Point(3, 4)\n[math.hypot(p.x, p.y), y, type(p).__module__, repr(p)]";
    assert_eq!(value(&session.run(uses).await), json!([5.0, 41, "__main__", "Point(x=3, y=4)"]));
    // Each step has its own INPUT, and the guest's names are there again even if rebound.
    session.run("tools = None\nINPUT = 'stale'").await;
    let outcome = session.run_with_input("[INPUT, tools.add(a=1, b=2)]", &json!({"n": 7})).await;
    assert_eq!(value(&outcome), json!([{"n": 7}, 3]));
}

#[tokio::test]
async fn javascript_top_level_declarations_persist() {
    let session = open(javascript(), Limits::default()).await;
    let first = "let count = 0;\nconst base = 40, [a, {b: renamed = 2}] = [1, {}];\n\
                 function inc() { return ++count; }\nclass Box { constructor(v) { this.v = v; } }\n\
                 var legacy = 'var';\nconst add = async (x) => (await tools.add({a: x, b: base}));";
    assert_eq!(value(&session.run(first).await), Value::Null, "declarations alone");
    assert_eq!(value(&session.run("inc(); inc(); return [count, a, renamed]").await), json!([2, 1, 2]));
    // A closure of step 1 and the name in step 3 are the same binding.
    assert_eq!(value(&session.run("count = 10; return inc()").await), json!(11));
    let uses = "return [new Box(base).v, legacy, await add(2), typeof inc]";
    assert_eq!(value(&session.run(uses).await), json!([40, "var", 42, "function"]));
    // A const stays constant, and declaring the name again in a later step rebinds it.
    let outcome = session.run("base = 1").await;
    assert_eq!(outcome.status, Status::Error, "{}", show(&outcome));
    assert_eq!(value(&session.run("const base = 1; return base").await), json!(1));
    assert_eq!(value(&session.run("return base").await), json!(1));
}

/// Steps of one declaration each, the kind a regular expression names without the
/// tokenizer (guests/js/core.js, `simpleStepNames`), keep their names as the others do.
#[tokio::test]
async fn javascript_one_declaration_steps_persist() {
    let session = open(javascript(), Limits::default()).await;
    for step in [
        "let a = Array.from({length: 3}, (_, i) => i * 2)",
        "const s = 'x, y; z';",
        "function half(n) {\n  return n / 2\n}",
        "class K extends Array { first() { return this[0] } }",
        "var v = a.length / 3",
        "async function g() { return await tools.add({a: 1, b: 2}) }",
    ] {
        assert_eq!(value(&session.run(step).await), Value::Null, "{step}");
    }
    let uses = "return [a, s, half(8), K.from([5]).first(), v, await g()]";
    assert_eq!(value(&session.run(uses).await), json!([[0, 2, 4], "x, y; z", 4, 5, 1, 3]));
    let outcome = session.run("s = 1").await;
    assert_eq!(outcome.status, Status::Error, "a const stays constant: {}", show(&outcome));
}

/// A step's directive prologue applies to that step, as a run's does to the run, also in a
/// step that declares names (which the session starts with a line of its own), and the
/// next step is sloppy again.
/// A JS session keeps the functions it compiled for its last 32 texts (MAX_REUSED_STEPS
/// in guests/js/core.js) and drops the oldest first. Reuse shows in the fuel: a step whose
/// text is kept skips the compile.
#[tokio::test]
async fn javascript_reuses_the_last_32_texts_compiled() {
    let limits = Limits { fuel: Some(u64::MAX / 2), ..Limits::default() };
    let session = open(crate::support::javascript_fuel(), limits).await;
    let text = |i: u64| format!("// text {i:02}\nreturn {i}");
    let fuel = async |i: u64| {
        let outcome = session.run(&text(i)).await;
        assert_eq!(value(&outcome), json!(i), "{}", show(&outcome));
        outcome.stats.fuel_used
    };
    // The session's first call is no step of an earlier text: keep it out of the count.
    assert_eq!(value(&session.run("return 'first'").await), json!("first"));
    let compiled = fuel(0).await;
    let reused = fuel(0).await;
    assert!(reused + 20_000 < compiled, "a kept text costs {reused} fuel, a new one {compiled}");
    let was_reused = |used: u64| used < (compiled + reused) / 2;
    for i in 1..32 {
        fuel(i).await; // texts 0 to 31 are kept
    }
    assert!(was_reused(fuel(0).await), "text 0 is one of the last 32");
    fuel(32).await; // drops text 0, the oldest
    assert!(!was_reused(fuel(0).await), "text 0 was dropped");
    // Text 0 is kept again in place of text 1, the oldest then; text 2 is still kept.
    assert!(was_reused(fuel(2).await), "text 2 is still kept");
    assert!(!was_reused(fuel(1).await), "text 1 was dropped");
}

#[tokio::test]
async fn javascript_use_strict_applies_to_its_step() {
    let strict = "'use strict';\nlet kept = 1;\nundeclared = 2;";
    let assert_strict = |outcome: &Outcome| {
        let error = outcome.error.as_ref().expect("an error");
        assert_eq!((outcome.status, error.kind.as_str()), (Status::Error, "ReferenceError"), "{}", show(outcome));
        assert!(error.traceback.contains("<code>:3:"), "{}", show(outcome));
    };
    assert_strict(&sandbox(javascript()).run(strict).await);
    let session = open(javascript(), Limits::default()).await;
    assert_strict(&session.run(strict).await);
    assert_strict(&session.run("\"use strict\"\n// after the directive\nconst other = 1; alsoUndeclared = 3").await);
    let sloppy = "let later = 1;\nundeclared = 4;\nreturn [kept, other, undeclared]";
    assert_eq!(value(&session.run(sloppy).await), json!([1, 1, 4]));
    // A string that is not a whole statement is no directive.
    let not_a_directive = "'use strict'.length;\nlet s = 'use strict'.length;\nundeclared = 5;\nreturn s";
    assert_eq!(value(&session.run(not_a_directive).await), json!(10));
}

#[tokio::test]
async fn a_step_that_raises_keeps_the_session() {
    for (runtime, define, raise, read) in [
        (python(), "kept = [1]", "kept.append(2)\nraise ValueError('boom')", "kept"),
        (javascript(), "const kept = [1]", "kept.push(2); throw new RangeError('boom')", "return kept"),
    ] {
        let session = open(runtime, Limits::default()).await;
        session.run(define).await;
        let outcome = session.run(raise).await;
        assert_eq!(outcome.status, Status::Error, "{}", show(&outcome));
        assert_eq!(outcome.error.as_ref().unwrap().message, "boom");
        assert_eq!(value(&session.run(read).await), json!([1, 2]));
        assert_eq!(session.end().await, None);
    }
}

#[tokio::test]
async fn python_tracebacks_show_the_step_that_defined_the_function() {
    let session = open(python(), Limits::default()).await;
    session.run("def f():\n    raise ValueError('from step one')").await;
    let outcome = session.run("# step two\n\nf()").await;
    let traceback = &outcome.error.as_ref().unwrap().traceback;
    assert!(traceback.contains("File \"<code-2>\", line 3"), "{traceback}");
    assert!(traceback.contains("File \"<code-1>\", line 2, in f"), "{traceback}");
    assert!(traceback.contains("raise ValueError('from step one')"), "{traceback}");
}

#[tokio::test]
async fn javascript_error_lines_are_the_step_s_own() {
    let session = open(javascript(), Limits::default()).await;
    session.run("let x = 1").await;
    // The same text again runs what the first compiled (with its keep line): same lines.
    for _ in 0..2 {
        let outcome = session.run("let y = 2;\n\nnull.boom").await;
        let traceback = &outcome.error.as_ref().unwrap().traceback;
        assert!(traceback.contains("<code>:3:"), "{traceback}");
    }
    let outcome = session.run("let z = 3;\nlet = = 4").await;
    assert_eq!(outcome.status, Status::Error, "{}", show(&outcome));
    assert_eq!(outcome.error.as_ref().unwrap().kind, "SyntaxError");
    assert!(outcome.error.as_ref().unwrap().traceback.contains("<code>:2:"), "{}", show(&outcome));
    assert_eq!(value(&session.run("return x").await), json!(1), "a syntax error keeps the session");
}

#[tokio::test]
async fn a_timeout_ends_the_session_and_later_steps_say_so() {
    let limits = Limits { timeout_ms: 300, ..Limits::default() };
    for (runtime, spin) in [(python(), "while True: pass"), (javascript(), "for (;;) {}")] {
        let session = open(runtime, limits.clone()).await;
        let outcome = session.run(spin).await;
        assert_eq!(outcome.status, Status::Timeout, "{}", show(&outcome));
        assert_ended(&session.run("1").await, "step 1 ended `timeout`");
        assert!(matches!(session.end().await, Some(SessionEnd::Step { step: 1, status: Status::Timeout, .. })));
    }
}

#[tokio::test]
async fn waiting_on_a_tool_past_the_deadline_ends_the_session() {
    let limits = Limits { timeout_ms: 300, ..Limits::default() };
    let session = open(python(), limits).await;
    let outcome = session.run("tools.slow(ms=5000)").await;
    assert_eq!(outcome.status, Status::Timeout, "{}", show(&outcome));
    assert_ended(&session.run("1").await, "timeout");
}

#[tokio::test]
async fn a_memory_breach_ends_the_session_even_when_caught() {
    let limits = Limits { max_memory_bytes: 64 << 20, ..Limits::default() };
    let session = open(python(), limits).await;
    let outcome = session.run("try:\n    x = bytearray(200 << 20)\nexcept MemoryError:\n    pass").await;
    assert_eq!(outcome.status, Status::MemoryExhausted, "{}", show(&outcome));
    assert_ended(&session.run("1").await, "memory_exhausted");
}

#[tokio::test]
async fn an_output_breach_ends_the_session() {
    let limits = Limits { max_stdout_bytes: 1_000, ..Limits::default() };
    for (runtime, flood) in
        [(python(), "while True: print('x' * 100)"), (javascript(), "for (;;) console.log('x'.repeat(100))")]
    {
        let session = open(runtime, limits.clone()).await;
        // Output is per step: a step under the cap after another under the cap is fine.
        session.run(if flood.starts_with("while") { "print('a' * 600)" } else { "console.log('a'.repeat(600))" }).await;
        let outcome = session
            .run(if flood.starts_with("while") { "print('b' * 600)" } else { "console.log('b'.repeat(600))" })
            .await;
        assert!(outcome.is_ok(), "{}", show(&outcome));
        assert_eq!(outcome.stdout.text, format!("{}\n", "b".repeat(600)));
        let outcome = session.run(flood).await;
        assert_eq!(outcome.status, Status::OutputLimit, "{}", show(&outcome));
        assert_ended(&session.run("1").await, "output_limit");
    }
}

#[tokio::test]
async fn fuel_is_per_step_and_running_out_ends_the_session() {
    let code = "total = 0\nfor i in range(20_000):\n    total += i\ntotal";
    let plenty = Limits { fuel: Some(u64::MAX / 2), ..Limits::default() };
    let measured = sandbox(crate::support::python_fuel()).limits(plenty).run(code).await;
    let used = measured.stats.fuel_used;
    assert!(measured.is_ok() && used > 0, "{}", show(&measured));
    // Room for one step and a half: three steps could not run if the budget spanned them.
    let limits = Limits { fuel: Some(used + used / 2), ..Limits::default() };
    let session =
        sandbox(crate::support::python_fuel()).limits(limits).session(SessionConfig::default()).await.unwrap();
    for _ in 0..3 {
        assert_eq!(value(&session.run(code).await), json!(199_990_000));
    }
    let outcome = session.run("while True: pass").await;
    assert_eq!(outcome.status, Status::FuelExhausted, "{}", show(&outcome));
    assert_ended(&session.run("1").await, "fuel_exhausted");
}

#[tokio::test]
async fn cancelling_a_step_ends_the_session() {
    let session = open(javascript(), Limits::default()).await;
    let cancel = CancelToken::new();
    let stop = tokio::spawn({
        let cancel = cancel.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            cancel.cancel();
        }
    });
    let outcome = session.run_cancellable("for (;;) {}", &Value::Null, &cancel).await;
    stop.await.unwrap();
    assert_eq!(outcome.status, Status::Cancelled, "{}", show(&outcome));
    assert_ended(&session.run("return 1").await, "cancelled");
}

#[tokio::test]
async fn reset_starts_clean_and_revives_an_ended_session() {
    let limits = Limits { timeout_ms: 300, ..Limits::default() };
    let session = open(python(), limits).await;
    session.run("x = 1\nopen('/tmp/f', 'w').write('kept?')").await;
    session.reset().await.unwrap();
    let outcome = session.run("x").await;
    assert_eq!(outcome.error.as_ref().map(|e| e.kind.as_str()), Some("NameError"), "{}", show(&outcome));
    let outcome = session.run("import os\nos.path.exists('/tmp/f')").await;
    assert_eq!(value(&outcome), json!(false), "files are the old instance's too");
    session.run("while True: pass").await;
    assert_ended(&session.run("1").await, "timeout");
    session.reset().await.unwrap();
    assert_eq!(value(&session.run("y = 2\ny").await), json!(2));
}

#[tokio::test]
async fn an_idle_session_ends() {
    let config = SessionConfig { idle_timeout_ms: 200, ..SessionConfig::default() };
    let session = sandbox(python()).session(config).await.unwrap();
    assert_eq!(value(&session.run("x = 1\nx").await), json!(1));
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(session.end().await, Some(SessionEnd::IdleTimeout { idle_timeout_ms: 200 }));
    assert_ended(&session.run("x").await, "idle for 200 ms");
}

#[tokio::test]
async fn a_session_ends_at_its_lifetime_even_mid_step() {
    let config = SessionConfig { max_lifetime_ms: 700, ..SessionConfig::default() };
    let session = sandbox(javascript()).session(config).await.unwrap();
    assert_eq!(value(&session.run("let x = 1; return x").await), json!(1));
    // The step's own deadline (10 s) is cut short by the lifetime.
    let outcome = session.run("for (;;) {}").await;
    assert_eq!(outcome.status, Status::Timeout, "{}", show(&outcome));
    assert_eq!(session.end().await, Some(SessionEnd::Lifetime { max_lifetime_ms: 700 }));
    assert_ended(&session.run("return x").await, "lifetime of 700 ms");
    let refused = session.reset().await.unwrap_err();
    assert_eq!((refused.status, refused.detail.kind.as_str()), (Status::Rejected, "session_ended"));
}

#[tokio::test]
async fn budgets_and_deadlines_are_per_step() {
    let limits = Limits { max_tool_calls: 2, timeout_ms: 1_500, ..Limits::default() };
    let session = open(python(), limits).await;
    for _ in 0..3 {
        // 2 calls and ~1 s of tool waits per step: within each step's budget and deadline.
        let outcome = session.run("[tools.slow(ms=500), tools.slow(ms=500)]").await;
        assert_eq!(value(&outcome), json!(["done", "done"]));
        assert_eq!(outcome.tool_calls.len(), 2, "each step's trail is its own");
    }
    let outcome = session.run("[tools.add(a=1, b=1) for _ in range(3)]").await;
    assert_eq!(outcome.status, Status::ToolLimit, "{}", show(&outcome));
    // Over a tool budget, the instance is fine: the session goes on.
    assert_eq!(value(&session.run("tools.add(a=2, b=3)").await), json!(5));
}

/// Tool calls in a second step use the guest's allocator afresh: the JS binding cached
/// pointers that the engine frees after every export call (bindings/tool_call.js).
#[tokio::test]
async fn tool_calls_work_across_steps() {
    let session = open(javascript(), Limits::default()).await;
    let first = "const r = [await tools.echo({a: 1}), await tools.add({a: 1, b: 2})]; return r";
    assert_eq!(value(&session.run(first).await), json!([{"a": 1}, 3]));
    for i in 0..4 {
        // Fresh allocations first, to land on what the last step freed.
        let step = format!(
            "const junk{i} = Array.from({{length: 2000}}, (_, k) => 'junk' + k + 'x'.repeat(k % 50));\n\
             const w = await tools.weather({{city: 'Paris'}});\n\
             const e = await tools.echo({{big: 'y'.repeat(3000 + {i} * 1000), n: {i}}});\n\
             const s = await tools.add({{a: {i}, b: 2}});\n\
             return [w.sky, e.big.length, e.n, s, junk{i}.length]"
        );
        let outcome = session.run(&step).await;
        assert_eq!(value(&outcome), json!(["cloudy", 3000 + i * 1000, i, i + 2, 2000]), "step {}", i + 2);
    }
    let session = open(python(), Limits::default()).await;
    assert_eq!(value(&session.run("tools.echo(a=1)").await), json!({"a": 1}));
    assert_eq!(
        value(&session.run("[tools.weather(city='Oslo')['sky'], tools.add(a=2, b=2)]").await),
        json!(["snow", 4])
    );
}

#[tokio::test]
async fn a_session_holds_an_admission_slot_until_dropped() {
    let engine =
        Engine::new(EngineConfig { max_concurrent_runs: 1, max_queued_runs: 0, ..EngineConfig::default() }).unwrap();
    let sandbox = sandbox(Runtime::python(&engine).unwrap());
    let session = sandbox.session(SessionConfig::default()).await.unwrap();
    let outcome = sandbox.run("1").await;
    assert_eq!(outcome.status, Status::Rejected, "{}", show(&outcome));
    let refused = sandbox.session(SessionConfig::default()).await.unwrap_err();
    assert_eq!((refused.status, refused.detail.kind.as_str()), (Status::Rejected, "admission"));
    assert_eq!(value(&session.run("2").await), json!(2), "steps do not queue for a slot");
    drop(session);
    assert_eq!(value(&sandbox.run("3").await), json!(3));
}

#[tokio::test]
async fn bad_settings_are_refused() {
    let zero = SessionConfig { idle_timeout_ms: 0, ..SessionConfig::default() };
    let refused = sandbox(python()).session(zero).await.unwrap_err();
    assert_eq!(refused.status, Status::InvalidRequest);
    let limits = Limits { timeout_ms: 0, ..Limits::default() };
    let refused = sandbox(python()).limits(limits).session(SessionConfig::default()).await.unwrap_err();
    assert_eq!((refused.status, refused.detail.kind.as_str()), (Status::InvalidRequest, "invalid_limits"));
}

/// Resident memory of this process, from /proc (Linux); 0 elsewhere.
fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .map(|rest| rest.trim().trim_end_matches("kB").trim());
    kib.and_then(|kib| kib.parse::<u64>().ok()).map_or(0, |kib| kib * 1024)
}

/// 200 sessions at once (100 per guest) on an engine admitting 200, each keeping its
/// own state. The memory each holds is printed (docs/sessions.md has the figures), not
/// asserted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_sessions_at_once() {
    let engine = Engine::new(EngineConfig { max_concurrent_runs: 200, ..EngineConfig::default() }).unwrap();
    let mut sessions = Vec::new();
    for (runtime, set) in [
        (Runtime::python(&engine).unwrap(), "n = INPUT\nn"),
        (Runtime::javascript(&engine).unwrap(), "let n = INPUT; return n"),
    ] {
        let before = resident_bytes();
        let sandbox = Sandbox::new(runtime.clone(), tools());
        for i in 0..100 {
            let session = sandbox.session(SessionConfig::default()).await.unwrap();
            assert_eq!(value(&session.run_with_input(set, &json!(i)).await), json!(i));
            sessions.push(session);
        }
        let per_session = resident_bytes().saturating_sub(before) / 100;
        println!("{}: {} KiB resident per open session", runtime.name(), per_session / 1024);
    }
    let read = ["n", "return n"];
    for (i, session) in sessions.iter().enumerate() {
        assert_eq!(value(&session.run(read[i / 100]).await), json!(i % 100));
    }
}
