//! A JavaScript session's steps leave nothing behind (issue 24): its memory stays flat
//! over thousands of steps, and a step that needs an event-loop turn costs the same
//! however many steps came before it.
//!
//! The guest once left one pending engine timer per step (its driver's zero-delay tick),
//! which StarlingMonkey keeps, with all its callback reaches, until an event-loop turn
//! runs it; a step that settles in its microtasks takes no such turn. So each step's
//! state stayed reachable (~6 KiB a step: 3,000 steps grew the memory by 9 MiB), and the
//! first step that did take a turn ran every tick left over first, polling all of them
//! on each turn (after 3,000 steps, one `setTimeout(r, 0)` cost 700 M fuel and 6.5 s).

use serde_json::json;
use wasmbox::{Outcome, Runtime, Sandbox, Scope, Session, SessionConfig};

use crate::support::{javascript, javascript_fuel, tools, value};

async fn open(runtime: Runtime) -> Session {
    let sandbox = Sandbox::new(runtime, tools()).scope(Scope::only(["add"]));
    sandbox.session(SessionConfig::default()).await.expect("the session opens")
}

/// Runs `steps` steps that settle in their microtasks (empty code, a value, a tool call)
/// and returns the last outcome.
async fn trivial_steps(session: &Session, steps: usize) -> Outcome {
    let codes = ["", "return 1 + 1", "return await tools.add({a: 1, b: 2})"];
    let mut last = None;
    for i in 0..steps {
        let outcome = session.run(codes[i % codes.len()]).await;
        value(&outcome);
        last = Some(outcome);
    }
    last.expect("at least one step")
}

#[tokio::test]
async fn a_javascript_session_s_memory_does_not_grow_with_its_steps() {
    const MIB: u64 = 1 << 20;
    let session = open(javascript()).await;
    // The first steps may still grow the heap (the old guest's growth showed only after
    // some 1,000 steps, in the room its snapshot's heap had left).
    let before = trivial_steps(&session, 100).await.stats.peak_memory_bytes;
    let after = trivial_steps(&session, 3_000).await.stats.peak_memory_bytes;
    assert!(
        after < before + 2 * MIB,
        "3,000 steps grew the session's memory from {:.1} to {:.1} MiB",
        before as f64 / MIB as f64,
        after as f64 / MIB as f64
    );
}

#[tokio::test]
async fn a_javascript_step_s_event_loop_turn_does_not_pay_for_earlier_steps() {
    let timer = "await new Promise((r) => setTimeout(r, 0)); return 'fired'";
    let session = open(javascript_fuel()).await;
    trivial_steps(&session, 10).await;
    let early = session.run(timer).await;
    assert_eq!(value(&early), json!("fired"));
    trivial_steps(&session, 600).await;
    let late = session.run(timer).await;
    assert_eq!(value(&late), json!("fired"));
    // Fuel is deterministic; the old guest's late step paid some 20 times the early one.
    let (early, late) = (early.stats.fuel_used, late.stats.fuel_used);
    assert!(early > 0, "the fuel engine meters fuel");
    assert!(late < early * 3 / 2, "the timer step cost {early} fuel after 10 steps, {late} after 610");
}
