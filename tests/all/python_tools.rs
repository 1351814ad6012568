//! Tool calls from Python: plain and awaited, errors, scope, trail, list_tools.

use serde_json::json;
use wasmbox::{CallStatus, Limits, Scope, Status};

use crate::support::{run, run_limited, sandbox, value};

#[tokio::test]
async fn sync_and_awaited_tool_calls_return_real_results() {
    let outcome = run("a = tools.add(a=1, b=2)\nb = await tools.add(a=a, b=10)\nc = tools.weather({'city': 'Paris'})\n[a, b, c['temp_c']]").await;
    assert_eq!(value(&outcome), json!([3, 13, 18.5]));
    let trail: Vec<_> = outcome.tool_calls.iter().map(|c| (c.call_id, c.tool.as_str(), c.status)).collect();
    assert_eq!(trail, [(1, "add", CallStatus::Ok), (2, "add", CallStatus::Ok), (3, "weather", CallStatus::Ok)]);
}

#[tokio::test]
async fn asyncio_gather_works_inside_async_def() {
    let code = r#"
import asyncio

async def main():
    cities = ["Paris", "Oslo"]
    results = await asyncio.gather(*[tools.weather(city=c) for c in cities])
    return {r["city"]: r["sky"] for r in results}

output(await main())
"#;
    assert_eq!(value(&run(code).await), json!({"Paris": "cloudy", "Oslo": "snow"}));
    let code = "import asyncio\nasync def main():\n    return await tools.add(a=2, b=3)\nasyncio.run(main())";
    assert_eq!(value(&run(code).await), json!(5));
}

#[tokio::test]
async fn a_denied_tool_is_a_catchable_error() {
    let code = r#"
try:
    tools.secret()
    result = "called"
except ToolDenied as e:
    result = {"kind": e.kind, "is_tool_error": isinstance(e, ToolError), "msg": str(e)}
result
"#;
    let outcome = run(code).await;
    let result = value(&outcome);
    assert_eq!(result["kind"], json!("denied"));
    assert_eq!(result["is_tool_error"], json!(true));
    assert!(result["msg"].as_str().unwrap().contains("not available"), "{result}");
    assert_eq!(outcome.tool_calls[0].status, CallStatus::Denied);
}

#[tokio::test]
async fn an_uncaught_tool_failure_is_a_guest_error() {
    let outcome = run("tools.weather(city='Atlantis')").await;
    assert_eq!(outcome.status, Status::Error);
    let error = outcome.error.unwrap();
    assert_eq!(error.kind, "ToolFailed");
    assert!(error.message.contains("unknown city"), "{}", error.message);
}

#[tokio::test]
async fn nothing_is_in_scope_by_default() {
    let outcome = sandbox().scope(Scope::None).run("[list_tools(), tools.add(a=1, b=2)]").await;
    assert_eq!(outcome.status, Status::Error);
    assert_eq!(outcome.error.unwrap().kind, "ToolDenied");
}

#[tokio::test]
async fn list_tools_shows_only_the_scope() {
    let outcome = sandbox().scope(Scope::only(["add"])).run("list_tools()").await;
    assert_eq!(
        value(&outcome),
        json!([{"name": "add", "description": "Adds a and b", "args_schema": {"type": "object"}}])
    );
}

#[tokio::test]
async fn the_call_ceiling_is_catchable_but_latched() {
    let code = "n = 0\nfor i in range(20):\n    try:\n        tools.add(a=i, b=1)\n        n += 1\n    except ToolBudgetExhausted:\n        pass\nn";
    let outcome = run_limited(code, Limits { max_tool_calls: 10, ..Limits::default() }).await;
    assert_eq!(outcome.status, Status::ToolLimit);
    assert_eq!(outcome.value, Some(json!(10)), "the guest's value is kept");
    assert_eq!(outcome.error.unwrap().kind, "max_tool_calls");
    assert_eq!(outcome.tool_calls.len(), 20);
}

#[tokio::test]
async fn non_json_arguments_are_refused_in_the_guest() {
    let outcome = run("tools.echo(x={1, 2})").await;
    assert_eq!(outcome.status, Status::Error);
    assert!(outcome.error.unwrap().message.contains("$.x"));
    assert!(outcome.tool_calls.is_empty(), "nothing reached the host");
}

#[tokio::test]
async fn a_tool_looked_up_again_is_the_same_tool() {
    // The first lookup caches the tool on `tools`; in the guest's CPython (3.14) a
    // partial kept on the class would be bound to `tools` as a method. Every shape of
    // call after the first goes through the cache.
    let code = "a = tools.add\n[a is tools.add, repr(a), a.name, a(a=1, b=2), tools.add(a=3, b=4), \
                tools.add({'a': 5, 'b': 6}), tools['add'](a=7, b=8), await tools.add(a=9, b=10)]";
    let outcome = run(code).await;
    assert_eq!(value(&outcome), json!([true, "<tool add>", "add", 3, 7, 11, 15, 19]));
    assert_eq!(outcome.tool_calls.len(), 5);
}

#[tokio::test]
async fn many_tool_calls_in_a_loop() {
    let code = "total = 0\nfor i in range(50):\n    total = tools.add(a=total, b=i)\ntotal";
    let outcome = run(code).await;
    assert_eq!(value(&outcome), json!(1225));
    assert_eq!(outcome.tool_calls.len(), 50);
}
