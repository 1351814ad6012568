//! The broker's call path, as a guest reaches it: `BrokerCtx::call` with any name and
//! any argument text, against a small registry with schemas, a projection, a failing
//! tool, a tool whose results grow, and one tool outside the run's scope.
//!
//! Input: a sequence of calls. Each is a selector byte — below 0xC0 it picks a name
//! from `NAMES`, else the name follows, up to a 0 byte — then the argument text up to a
//! 0 byte. Checked, call by call: no panic; a name outside the scope is refused
//! (`Denied`, or `BudgetExhausted` once the attempts run out) and its handler never
//! runs; a result reaches the guest only from a tool in scope, as JSON within the
//! result cap, and only for arguments its schema allows; no more calls succeed than
//! the ceiling allows; the trail records every call up to its bound; the first breach
//! stays latched.

#![no_main]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use wasmbox::{BrokerCtx, CallError, Limits, Scope, Tool, ToolFailure, Tools};

/// Names a selector picks: every tool, the one out of scope, and near misses.
const NAMES: &[&str] = &["add", "echo", "search", "fail", "grow", "danger", "", "Add", "add ", "_add", "echo\n"];
const IN_SCOPE: &[&str] = &["add", "echo", "search", "fail", "grow"];

static DANGER_RAN: AtomicBool = AtomicBool::new(false);

fn registry() -> Arc<Tools> {
    static TOOLS: OnceLock<Arc<Tools>> = OnceLock::new();
    Arc::clone(TOOLS.get_or_init(|| {
        let mut tools = Tools::new();
        let add_schema = json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": false
        });
        let add = Tool::new("add", "a + b", add_schema, |args| async move {
            let (a, b) = (args["a"].as_i64().unwrap_or(0), args["b"].as_i64().unwrap_or(0));
            Ok(json!(a.wrapping_add(b)))
        });
        let echo = Tool::new("echo", "its arguments", json!({"type": "object"}), |args| async move { Ok(args) });
        let search_schema = json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "maxLength": 16},
                "filters": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}}
            },
            "required": ["query"]
        });
        let search = Tool::new("search", "hits", search_schema, |args| async move {
            let query = args["query"].clone();
            Ok(json!({"hits": [{"title": query, "body": "secret body"}, {"title": "two", "score": 2}], "total": 2}))
        })
        .with_projection(["/hits/*/title"])
        .expect("a valid projection");
        let fail = Tool::new("fail", "always fails", json!({"type": "object"}), |args| async move {
            Err(ToolFailure::new(format!("failed on {args}")))
        });
        let grow_schema = json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}});
        let grow = Tool::new("grow", "a string of n bytes", grow_schema, |args| async move {
            let n = args["n"].as_u64().unwrap_or(0).min(1 << 16) as usize;
            Ok(json!("x".repeat(n)))
        });
        let danger = Tool::new("danger", "out of scope", json!({"type": "object"}), |_| async move {
            DANGER_RAN.store(true, Ordering::SeqCst);
            Ok(json!("ran"))
        });
        for tool in [add, echo, search, fail, grow, danger] {
            tools.register(tool).expect("a valid tool");
        }
        Arc::new(tools)
    }))
}

fn limits() -> Limits {
    Limits {
        max_tool_calls: 8,
        max_tool_args_bytes: 512,
        max_json_depth: 8,
        max_tool_result_bytes: 4096,
        max_cumulative_result_bytes: 16 << 10,
        tool_timeout_ms: 5_000,
        ..Limits::default()
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a runtime"))
}

/// Splits off the bytes before the next 0 (or the end) and the rest after it.
fn until_nul(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[]),
    }
}

/// True when `args` is what add's schema allows: an object of exactly integers a and b
/// (for JSON Schema, `1.0` and `1e2` are integers too).
fn valid_add_args(args: &str) -> bool {
    let integer = |v: &Value| v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0);
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(args) else { return false };
    map.len() == 2 && ["a", "b"].iter().all(|k| map.get(*k).is_some_and(integer))
}

fuzz_target!(|data: &[u8]| {
    let limits = limits();
    let attempt_cap = u64::from(limits.max_tool_calls) * 2 + 100;
    let mut broker = BrokerCtx::new(registry(), Scope::only(IN_SCOPE.iter().copied()), limits.clone());
    let mut rest = data;
    let (mut attempts, mut succeeded) = (0u64, 0u32);
    while let Some((&selector, after)) = rest.split_first() {
        let (name, after) = if selector < 0xC0 {
            (NAMES[usize::from(selector) % NAMES.len()].to_owned(), after)
        } else {
            let (name, after) = until_nul(after);
            (String::from_utf8_lossy(name).into_owned(), after)
        };
        let (args, after) = until_nul(after);
        rest = after;
        let args = String::from_utf8_lossy(args);
        let breach_before = broker.breach().cloned();

        let result = runtime().block_on(broker.call(&name, &args));
        attempts += 1;

        match &result {
            Ok(text) => {
                succeeded += 1;
                assert!(IN_SCOPE.contains(&name.as_str()), "{name:?} outside the scope answered");
                assert!(text.len() as u64 <= limits.max_tool_result_bytes, "a result of {} bytes", text.len());
                let value: Value = serde_json::from_str(text).expect("a result is JSON");
                match name.as_str() {
                    "add" => assert!(valid_add_args(&args), "add ran on {args:?}"),
                    "search" => {
                        let hits = value["hits"].as_array().expect("projected hits");
                        assert!(value.as_object().is_some_and(|o| o.len() == 1), "projection kept {value}");
                        assert!(hits.iter().all(|hit| hit.as_object().is_some_and(|o| o.keys().eq(["title"]))));
                    }
                    "fail" => panic!("the failing tool answered {text}"),
                    _ => {}
                }
            }
            Err(CallError::Denied(_)) => {}
            Err(CallError::BudgetExhausted(_)) => {
                assert!(broker.breach().is_some(), "a budget refusal latched nothing");
            }
            Err(err) => {
                assert!(IN_SCOPE.contains(&name.as_str()), "{name:?} outside the scope got past the scope: {err:?}");
            }
        }
        if !IN_SCOPE.contains(&name.as_str()) {
            assert!(
                matches!(result, Err(CallError::Denied(_) | CallError::BudgetExhausted(_))),
                "{name:?} outside the scope: {result:?}"
            );
        }
        assert!(!DANGER_RAN.load(Ordering::SeqCst), "the out-of-scope tool ran");
        assert!(succeeded <= limits.max_tool_calls, "{succeeded} calls succeeded");
        assert_eq!(broker.trail().len() as u64, attempts.min(attempt_cap), "the trail lost or invented calls");
        if let Some(first) = breach_before {
            assert_eq!(broker.breach(), Some(&first), "the latched breach changed");
        }
        for record in broker.trail() {
            assert!(record.args.is_none() && record.result.is_none(), "payloads recorded with recording off");
        }
    }
});
