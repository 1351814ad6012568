//! Tool calls that overlap (WIT 0.1.2 `start-call` / `await-any`): calls handed to
//! `asyncio.gather` / `create_task` in Python and to `Promise.all` (allSettled, race,
//! any) in JavaScript run at the same time, up to `max_concurrent_tool_calls`; budgets,
//! the trail's order and the run's deadline keep their meaning.
//!
//! Overlap is shown without timing: the `meet` tool answers only once as many calls of
//! it are in flight at once as its barrier has parties, and gives up (a failed call)
//! after a generous wait; calls made one after another can never meet.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use wasmbox::{CallStatus, Limits, Runtime, Sandbox, Scope, Status, Tool, ToolFailure, Tools};

use crate::support::{javascript, python, value};

/// Long enough that only calls that never overlap miss each other.
const PATIENCE: Duration = Duration::from_secs(20);

/// `meet` (a barrier of `parties`), `held` (never answers; each drop of its future is
/// counted in `dropped`) and `echo`; `most_at_once` is the most `meet` calls in flight.
struct Fixture {
    tools: Tools,
    most_at_once: Arc<AtomicU32>,
    dropped: Arc<AtomicU32>,
    dropped_signal: Arc<tokio::sync::Notify>,
}

fn fixture(parties: usize) -> Fixture {
    let barrier = Arc::new(tokio::sync::Barrier::new(parties));
    let (in_flight, most_at_once) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let (dropped, dropped_signal) = (Arc::new(AtomicU32::new(0)), Arc::new(tokio::sync::Notify::new()));
    let object = json!({"type": "object"});
    let mut tools = Tools::new();
    let most = Arc::clone(&most_at_once);
    tools
        .register(Tool::new("meet", "Answers when all parties are in", object.clone(), move |args| {
            let (barrier, in_flight, most) = (Arc::clone(&barrier), Arc::clone(&in_flight), Arc::clone(&most));
            async move {
                most.fetch_max(in_flight.fetch_add(1, Ordering::AcqRel) + 1, Ordering::AcqRel);
                let met = tokio::time::timeout(PATIENCE, barrier.wait()).await;
                in_flight.fetch_sub(1, Ordering::AcqRel);
                match met {
                    Ok(_) => Ok(json!({"met": args["i"]})),
                    Err(_) => Err(ToolFailure::new("the other calls never came")),
                }
            }
        }))
        .unwrap();
    let (count, signal) = (Arc::clone(&dropped), Arc::clone(&dropped_signal));
    tools
        .register(Tool::new("held", "Never answers", object.clone(), move |_| {
            let guard = DropCount(Arc::clone(&count), Arc::clone(&signal));
            async move {
                let _guard = guard;
                std::future::pending::<()>().await;
                Ok(Value::Null)
            }
        }))
        .unwrap();
    tools.register(Tool::new("echo", "Returns its arguments", object, |args| async move { Ok(args) })).unwrap();
    Fixture { tools, most_at_once, dropped, dropped_signal }
}

/// Counts its drops, with the tool future that holds it.
struct DropCount(Arc<AtomicU32>, Arc<tokio::sync::Notify>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::AcqRel);
        self.1.notify_one();
    }
}

fn sandbox(runtime: Runtime, fixture: &Fixture, limits: Limits) -> Sandbox {
    Sandbox::new(runtime, fixture.tools.clone()).scope(Scope::only(["meet", "held", "echo"])).limits(limits)
}

const PY_GATHER_4: &str = "import asyncio\n\
async def main():\n    return await asyncio.gather(*[tools.meet(i=i) for i in range(4)])\n\
asyncio.run(main())";
const JS_ALL_4: &str = "return await Promise.all([0, 1, 2, 3].map((i) => tools.meet({i})))";

fn met_four(outcome: &wasmbox::Outcome) {
    assert_eq!(value(outcome), json!([{"met": 0}, {"met": 1}, {"met": 2}, {"met": 3}]));
    assert_eq!(outcome.tool_calls.iter().map(|c| c.call_id).collect::<Vec<_>>(), [1, 2, 3, 4], "in start order");
    assert!(outcome.tool_calls.iter().all(|c| c.status == CallStatus::Ok));
}

#[tokio::test]
async fn gathered_python_calls_run_at_the_same_time() {
    let fixture = fixture(4);
    met_four(&sandbox(python(), &fixture, Limits::default()).run(PY_GATHER_4).await);
}

#[tokio::test]
async fn javascript_calls_in_promise_all_run_at_the_same_time() {
    let fixture = fixture(4);
    met_four(&sandbox(javascript(), &fixture, Limits::default()).run(JS_ALL_4).await);
}

/// Calls started after the driver went idle with a timer pending (the code awaited a
/// blob read, which StarlingMonkey finishes in a task of its own) are collected at once,
/// not when the timer is due: the code's timer (a minute) is past the run's deadline.
#[tokio::test]
async fn javascript_calls_started_after_a_native_event_are_collected_with_a_timer_pending() {
    let fixture = fixture(2);
    let code = "const t = setTimeout(() => {}, 60_000);\n\
        await new Response(new Blob(['x'])).arrayBuffer();\n\
        const r = await Promise.all([0, 1].map((i) => tools.meet({i})));\n\
        clearTimeout(t);\n\
        return r";
    let outcome = sandbox(javascript(), &fixture, Limits::default()).run(code).await;
    assert_eq!(value(&outcome), json!([{"met": 0}, {"met": 1}]));
}

/// The counter-proof: the same four calls one after another never meet.
#[tokio::test]
async fn calls_one_after_another_do_not_overlap() {
    let fixture = fixture(2);
    let limits = Limits { tool_timeout_ms: 200, ..Limits::default() };
    let outcome = sandbox(python(), &fixture, limits.clone())
        .run("try:\n    tools.meet(i=0)\n    r = 'met'\nexcept ToolError as e:\n    r = e.kind\nr")
        .await;
    // The tool's timeout is latched (status tool_limit) even though the code caught it.
    assert_eq!(outcome.value, Some(json!("timeout")), "{outcome:?}");
    assert_eq!(outcome.error.as_ref().map(|e| e.kind.as_str()), Some("tool_timeout_ms"));
    let outcome = sandbox(javascript(), &fixture, limits)
        .run("for (const i of [0, 1]) try { await tools.meet({i}) } catch (e) { return e.kind }")
        .await;
    assert_eq!(outcome.value, Some(json!("timeout")), "{outcome:?}");
}

/// Past `max_concurrent_tool_calls`, started calls wait for the run's own: never more
/// than the bound in flight, every call answered, no breach.
#[tokio::test]
async fn calls_past_the_concurrency_bound_wait_their_turn() {
    for (runtime, code) in [
        (python(), "import asyncio\nasync def main():\n    return await asyncio.gather(*[tools.meet(i=i) for i in range(6)])\nasyncio.run(main())"),
        (javascript(), "return await Promise.all([0, 1, 2, 3, 4, 5].map((i) => tools.meet({i})))"),
    ] {
        let fixture = fixture(2);
        let limits = Limits { max_concurrent_tool_calls: 2, ..Limits::default() };
        let outcome = sandbox(runtime, &fixture, limits).run(code).await;
        assert_eq!(value(&outcome).as_array().map(Vec::len), Some(6), "{outcome:?}");
        assert_eq!(fixture.most_at_once.load(Ordering::Acquire), 2, "pairs met, no more than two at once");
        assert_eq!(outcome.status, Status::Ok);
    }
}

#[tokio::test]
async fn started_calls_spend_the_run_s_budgets() {
    for (runtime, code) in [
        (
            python(),
            "import asyncio\nasync def main():\n    r = await asyncio.gather(*[tools.echo(i=i) for i in range(5)], return_exceptions=True)\n    return [x if isinstance(x, dict) else x.kind for x in r]\nasyncio.run(main())",
        ),
        (
            javascript(),
            "const r = await Promise.allSettled([0, 1, 2, 3, 4].map((i) => tools.echo({i})));\nreturn r.map((x) => x.status === 'fulfilled' ? x.value : x.reason.kind)",
        ),
    ] {
        let fixture = fixture(1);
        let limits = Limits { max_tool_calls: 3, ..Limits::default() };
        let outcome = sandbox(runtime, &fixture, limits).run(code).await;
        assert_eq!(outcome.status, Status::ToolLimit, "{outcome:?}");
        assert_eq!(outcome.error.as_ref().unwrap().kind, "max_tool_calls");
        let statuses: Vec<CallStatus> = outcome.tool_calls.iter().map(|c| c.status).collect();
        use CallStatus::{BudgetExhausted, Ok};
        assert_eq!(statuses, [Ok, Ok, Ok, BudgetExhausted, BudgetExhausted]);
    }
}

/// A run that times out with calls in flight ends `timeout`, and the tool futures still
/// running are dropped with it.
#[tokio::test]
async fn a_run_that_times_out_drops_the_calls_it_started() {
    for (runtime, code) in [
        (python(), "import asyncio\nasync def main():\n    await asyncio.gather(tools.held(), tools.held())\nasyncio.run(main())"),
        (javascript(), "await Promise.all([tools.held(), tools.held()])"),
    ] {
        let fixture = fixture(1);
        let limits = Limits { timeout_ms: 500, ..Limits::default() };
        let outcome = sandbox(runtime, &fixture, limits).run(code).await;
        assert_eq!(outcome.status, Status::Timeout, "{outcome:?}");
        let dropped = tokio::time::timeout(PATIENCE, async {
            while fixture.dropped.load(Ordering::Acquire) < 2 {
                fixture.dropped_signal.notified().await;
            }
        })
        .await;
        assert!(dropped.is_ok(), "both held calls' futures were dropped");
    }
}
