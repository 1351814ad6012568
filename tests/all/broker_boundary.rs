//! The broker boundary through the Python guest: guest-chosen tool names cost bounded
//! host memory, nested runs are narrowed by the tools their parent could actually call,
//! a run tree shares one call budget, and one tree cannot take the instance pool from
//! other top-level runs.

use std::sync::{Arc, OnceLock};

use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};
use wasmbox::{
    AuditEvent, CallStatus, ChannelSink, Engine, EngineConfig, Inherit, Limits, Runtime, Sandbox, Scope, Status, Tool,
    ToolFailure, Tools,
};

use crate::support::{python, value};

/// A guest that calls a tool with a 1 MiB name fifty times must leave a trail (and audit
/// events) holding a bounded prefix of each name, not fifty copies of it.
#[tokio::test]
async fn a_huge_tool_name_is_refused_and_its_record_stays_small() {
    let (sink, mut events) = ChannelSink::new(4096);
    let sandbox = Sandbox::new(python(), crate::support::tools()).scope(Scope::All).audit_sink(Arc::new(sink));
    let code = r#"
name = "A" * (1 << 20)
kinds = set()
for i in range(50):
    try:
        getattr(tools, name)()
    except ToolError as e:
        kinds.add(type(e).__name__)
        message_bytes = len(str(e))
sorted(kinds), message_bytes
"#;
    let outcome = sandbox.run(code).await;
    let result = value(&outcome);
    assert_eq!(result[0], json!(["ToolDenied"]), "{result}");
    assert!(result[1].as_u64().unwrap() < 1024, "the guest's message is bounded too: {result}");
    assert_eq!(outcome.tool_calls.len(), 50);
    let trail_name_bytes: usize = outcome.tool_calls.iter().map(|r| r.tool.len()).sum();
    let trail_message_bytes: usize = outcome.tool_calls.iter().map(|r| r.message.as_ref().map_or(0, String::len)).sum();
    assert!(trail_name_bytes <= 50 * 128, "the trail holds {trail_name_bytes} bytes of tool names");
    assert!(trail_message_bytes <= 50 * 1024, "the trail holds {trail_message_bytes} bytes of messages");
    assert!(outcome.tool_calls.iter().all(|r| r.status == CallStatus::Denied && r.tool.contains("1048576 bytes")));

    let mut event_bytes = 0;
    while let Ok(event) = events.try_recv() {
        if matches!(event, AuditEvent::ToolCallStarted { .. } | AuditEvent::ToolCallFinished(_)) {
            event_bytes += serde_json::to_string(&event).unwrap().len();
        }
    }
    assert!(event_bytes <= 100 * 2048, "the audit events hold {event_bytes} bytes");
}

/// A tool that starts `code` in `nested` as a child of the calling run.
fn delegate(nested: Arc<OnceLock<Sandbox>>) -> Tool {
    Tool::with_context("delegate", "Runs code as a sub-agent", json!({"type": "object"}), move |args, ctx| {
        let nested = Arc::clone(&nested);
        async move {
            let sandbox = nested.get().ok_or_else(|| ToolFailure::new("not ready"))?;
            let inherit = match &args["inherit"] {
                Value::Array(names) => Inherit::listed(names.iter().filter_map(|n| n.as_str().map(str::to_owned))),
                _ => Inherit::All,
            };
            let code = args["code"].as_str().unwrap_or_default();
            let outcome = sandbox.run_nested(&ctx, code, &Value::Null, &inherit).await;
            Ok(json!({
                "status": outcome.status.as_str(),
                "value": outcome.value,
                "error": outcome.error.map(|e| e.kind),
            }))
        }
    })
}

fn constant(name: &str, answer: &'static str) -> Tool {
    Tool::new(name, "Answers a constant", json!({"type": "object"}), move |_| async move { Ok(json!(answer)) })
}

/// The parent may call everything of *its* registry; a nested sandbox built on another
/// registry offers `danger` (which the parent never had) and its own `add` (same name,
/// another tool). Neither may be granted; `echo`, the very tool both registries share,
/// may.
#[tokio::test]
async fn a_nested_run_gets_only_the_tools_its_parent_could_call() {
    let mut shared = Tools::new();
    shared.register(constant("echo", "shared echo")).unwrap();

    let mut nested_tools = shared.clone();
    nested_tools.register(constant("danger", "danger!")).unwrap().register(constant("add", "twin add")).unwrap();
    let nested = Sandbox::new(python(), nested_tools).scope(Scope::All);

    let handle: Arc<OnceLock<Sandbox>> = Arc::default();
    let _ = handle.set(nested);
    let mut parent_tools = shared;
    parent_tools.register(constant("add", "parent add")).unwrap().register(delegate(handle)).unwrap();
    let parent = Sandbox::new(python(), parent_tools).scope(Scope::All);

    let probe = r#"
out = []
for name in ["echo", "danger", "add"]:
    try:
        out.append(getattr(tools, name)())
    except ToolError as e:
        out.append(type(e).__name__)
out
"#;
    let code = format!(
        "[tools.delegate(code={probe:?}), tools.delegate(code='1', inherit=['danger']), \
         tools.delegate(code='1', inherit=['add'])]"
    );
    let result = value(&parent.run(&code).await);
    assert_eq!(result[0]["value"], json!(["shared echo", "ToolDenied", "ToolDenied"]), "{result}");
    assert_eq!(result[1]["status"], json!("invalid_request"), "listing `danger` widens the parent: {result}");
    assert_eq!(result[2]["status"], json!("invalid_request"), "the nested `add` is another tool: {result}");
}

/// A parent with a ceiling of 5 calls delegates three times to nested runs that each try
/// 5 calls: the tree as a whole still makes at most 5 (by default the top-level run's
/// `max_tool_calls` is the whole tree's budget).
#[tokio::test]
async fn a_delegate_cannot_multiply_the_parents_call_ceiling() {
    let (sink, mut events) = ChannelSink::new(4096);
    let handle: Arc<OnceLock<Sandbox>> = Arc::default();
    let mut registry = crate::support::tools();
    registry.register(delegate(Arc::clone(&handle))).unwrap();
    let sandbox = Sandbox::new(python(), registry)
        .scope(Scope::All)
        .limits(Limits { max_tool_calls: 5, ..Limits::default() })
        .audit_sink(Arc::new(sink));
    let _ = handle.set(sandbox.clone());
    let inner = "n = 0\nfor i in range(5):\n    try:\n        tools.add(a=1, b=1)\n        n += 1\n    except ToolError:\n        pass\nn";
    let code = format!(
        "out = []\nfor i in range(3):\n    try:\n        out.append(tools.delegate(code={inner:?}))\n    except ToolError as e:\n        out.append(e.kind)\nout"
    );
    let outcome = sandbox.run(&code).await;
    let mut ok_calls = 0;
    while let Ok(event) = events.try_recv() {
        if let AuditEvent::ToolCallFinished(record) = event {
            ok_calls += usize::from(record.status == CallStatus::Ok);
        }
    }
    assert!(ok_calls <= 5, "the tree made {ok_calls} calls: {outcome:?}");
    assert_eq!(outcome.status, Status::ToolLimit, "{outcome:?}");
    assert_eq!(outcome.error.unwrap().kind, "max_tree_tool_calls");
}

/// One top-level run fans out as many parked nested runs as it can; another top-level
/// run admitted by the same engine must still find an instance in the pool.
#[tokio::test(flavor = "multi_thread")]
async fn a_wide_run_tree_leaves_the_pool_to_other_top_level_runs() {
    const NESTED: usize = 15;
    let engine = Engine::new(EngineConfig { max_concurrent_runs: 2, ..EngineConfig::default() }).expect("engine");
    let runtime = Runtime::python(&engine).expect("the Python guest is built");
    let (release, parked) = watch::channel(false);
    let (seen, mut seen_rx) = mpsc::unbounded_channel::<&'static str>();
    let this: Arc<OnceLock<Sandbox>> = Arc::default();
    let mut tools = Tools::new();
    let park_seen = seen.clone();
    tools
        .register(Tool::new("park", "Waits until released", json!({"type": "object"}), move |_| {
            let (mut parked, seen) = (parked.clone(), park_seen.clone());
            async move {
                let _ = seen.send("parked");
                parked.wait_for(|released| *released).await.map_err(|_| ToolFailure::new("gone"))?;
                Ok(json!("released"))
            }
        }))
        .unwrap()
        .register(Tool::with_context("fanout", "Starts parked nested runs", json!({"type": "object"}), {
            let this = Arc::clone(&this);
            move |_, ctx| {
                let (this, seen) = (Arc::clone(&this), seen.clone());
                async move {
                    let sandbox = this.get().ok_or_else(|| ToolFailure::new("not ready"))?.clone();
                    let mut runs = Vec::new();
                    for _ in 0..NESTED {
                        let (sandbox, ctx, seen) = (sandbox.clone(), ctx.clone(), seen.clone());
                        runs.push(tokio::spawn(async move {
                            let outcome = sandbox.run_nested(&ctx, "tools.park()", &Value::Null, &Inherit::All).await;
                            if outcome.status != Status::Ok {
                                let _ = seen.send("refused");
                            }
                            json!([outcome.status.as_str(), outcome.error.map(|e| e.kind).unwrap_or_default()])
                        }));
                    }
                    let mut ended = Vec::new();
                    for run in runs {
                        ended.push(run.await.map_err(|_| ToolFailure::new("nested run panicked"))?);
                    }
                    Ok(Value::Array(ended))
                }
            }
        }))
        .unwrap();
    let limits = Limits { max_concurrent_tool_calls: 64, ..Limits::default() };
    let sandbox = Sandbox::new(runtime, tools).scope(Scope::All).limits(limits);
    let _ = this.set(sandbox.clone());

    let wide = tokio::spawn({
        let sandbox = sandbox.clone();
        async move { sandbox.run("tools.fanout()").await }
    });
    // Every nested run has either parked or been refused.
    for _ in 0..NESTED {
        seen_rx.recv().await.expect("the fanout reports each nested run");
    }
    let other = sandbox.run("6 * 7").await;
    release.send_replace(true);
    let wide = wide.await.unwrap();

    assert_eq!(other.status, Status::Ok, "the other top-level run found the pool taken: {other:?}");
    let ended = value(&wide);
    let ended = ended.as_array().unwrap();
    let parked = ended.iter().filter(|e| *e == &json!(["ok", ""])).count();
    let refused = ended.iter().filter(|e| *e == &json!(["rejected", "instance_pool"])).count();
    assert_eq!(parked + refused, NESTED, "{ended:?}");
    assert!(parked >= 1, "the tree gets its share: {ended:?}");
}
