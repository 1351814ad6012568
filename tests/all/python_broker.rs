//! The broker end to end through the Python guest: nested runs and their scopes,
//! ancestry in the audit trail, admission control, metrics.

use std::sync::{Arc, OnceLock};

use serde_json::{json, Value};
use wasmbox::{
    AuditConfig, AuditEvent, CallStatus, ChannelSink, Engine, EngineConfig, Inherit, Limits, Runtime, Sandbox, Scope,
    Status, Tool, ToolFailure, Tools,
};

use crate::support::{python, tools, value};

/// A sandbox with a `delegate` tool that runs `code` as a nested run inheriting `inherit`.
fn delegating_sandbox(scope: Scope, limits: Limits, sink: Option<Arc<ChannelSink>>) -> Sandbox {
    let nested: Arc<OnceLock<Sandbox>> = Arc::default();
    let mut registry = tools();
    let handle = Arc::clone(&nested);
    registry
        .register(Tool::with_context(
            "delegate",
            "Runs code as a sub-agent",
            json!({"type": "object"}),
            move |args, ctx| {
                let handle = Arc::clone(&handle);
                async move {
                    let sandbox = handle.get().ok_or_else(|| ToolFailure::new("not ready"))?;
                    let inherit = match &args["inherit"] {
                        Value::Array(names) => {
                            Inherit::listed(names.iter().filter_map(|n| n.as_str().map(str::to_owned)))
                        }
                        Value::String(all) if all == "all" => Inherit::All,
                        _ => Inherit::None,
                    };
                    let code = args["code"].as_str().unwrap_or_default();
                    let outcome = sandbox.run_nested(&ctx, code, &Value::Null, &inherit).await;
                    Ok(json!({
                        "status": outcome.status.as_str(),
                        "value": outcome.value,
                        "error": outcome.error.map(|e| e.message),
                        "run_id": outcome.run_id,
                    }))
                }
            },
        ))
        .unwrap();
    let mut sandbox = Sandbox::new(python(), registry).scope(scope).limits(limits);
    if let Some(sink) = sink {
        sandbox =
            sandbox.audit_sink(sink).audit_config(AuditConfig { record_payloads: true, ..AuditConfig::default() });
    }
    let _ = nested.set(sandbox.clone());
    sandbox
}

#[tokio::test]
async fn a_nested_run_gets_at_most_its_parents_scope() {
    let sandbox = delegating_sandbox(Scope::only(["add", "delegate"]), Limits::default(), None);
    let code = r#"
inner = tools.delegate(code="tools.add(a=2, b=3)", inherit=["add"])
wider = tools.delegate(code="tools.secret()", inherit=["secret"])
none = tools.delegate(code="tools.add(a=1, b=1)", inherit="none")
[inner["status"], inner["value"], wider["status"], wider["error"], none["status"]]
"#;
    let result = value(&sandbox.run(code).await);
    assert_eq!(result[0], json!("ok"));
    assert_eq!(result[1], json!(5));
    assert_eq!(result[2], json!("invalid_request"), "listing a tool the parent lacks is refused");
    assert!(result[3].as_str().unwrap().contains("cannot widen"), "{result}");
    assert_eq!(result[4], json!("error"), "inherit none: the nested add is denied");
}

#[tokio::test]
async fn nesting_is_bounded_in_depth() {
    let limits = Limits { max_nesting_depth: 1, ..Limits::default() };
    let sandbox = delegating_sandbox(Scope::All, limits, None);
    let code = r#"
inner = tools.delegate(code="tools.delegate(code='1', inherit='all')", inherit="all")
inner["value"]["status"], inner["value"]["error"]
"#;
    let result = value(&sandbox.run(code).await);
    assert_eq!(result[0], json!("invalid_request"));
    assert!(result[1].as_str().unwrap().contains("max_nesting_depth"), "{result}");
}

#[tokio::test]
async fn ancestry_links_a_nested_runs_calls_to_its_parent_call() {
    let (sink, mut events) = ChannelSink::new(1024);
    let sandbox = delegating_sandbox(Scope::All, Limits::default(), Some(Arc::new(sink)));
    let outcome = sandbox.run("tools.delegate(code=\"tools.add(a=1, b=2)\", inherit=['add'])").await;
    let result = value(&outcome);
    let nested_run_id = result["run_id"].as_str().unwrap().to_owned();

    let mut nested_add = None;
    while let Ok(event) = events.try_recv() {
        if let AuditEvent::ToolCallFinished(record) = event {
            if record.tool == "add" {
                nested_add = Some(record);
            }
        }
    }
    let nested_add = nested_add.expect("the nested add call was audited");
    assert_eq!(nested_add.run_id, nested_run_id);
    assert_eq!(nested_add.ancestry.len(), 1);
    assert_eq!(nested_add.ancestry[0].run_id, outcome.run_id, "its parent is the outer run");
    assert_eq!(nested_add.ancestry[0].call_id, outcome.tool_calls[0].call_id, "…and the delegate call");
    assert_eq!(nested_add.args, Some(json!({"a": 1, "b": 2})));
}

#[tokio::test]
async fn the_run_past_the_admission_bound_is_rejected_and_counted() {
    let config = EngineConfig { max_concurrent_runs: 1, max_queued_runs: 0, ..EngineConfig::default() };
    let engine = Engine::new(config).unwrap();
    let sandbox = Sandbox::new(Runtime::python(&engine).unwrap(), Tools::new());
    let slow = sandbox.clone();
    let first = tokio::spawn(async move { slow.run("import time\ntime.sleep(0.5)\n'first'").await });
    while engine.metrics().runs_running == 0 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let second = sandbox.run("'second'").await;
    assert_eq!(second.status, Status::Rejected);
    assert_eq!(value(&first.await.unwrap()), json!("first"));
    assert_eq!(value(&sandbox.run("'third'").await), json!("third"), "a slot is free again");

    let metrics = engine.metrics();
    assert_eq!(metrics.runs(Status::Rejected), 1);
    assert_eq!(metrics.runs(Status::Ok), 2);
    assert!(metrics.to_prometheus().contains("wasmbox_runs_total{status=\"rejected\"} 1"));
}

#[tokio::test]
async fn engine_metrics_count_tool_calls_by_tool_and_status() {
    let config = EngineConfig::default();
    let engine = Engine::new(config).unwrap();
    let sandbox = Sandbox::new(Runtime::python(&engine).unwrap(), tools()).scope(Scope::only(["add"]));
    sandbox.run("tools.add(a=1, b=2)\ntry:\n    tools.nope()\nexcept ToolError:\n    pass").await;
    let metrics = engine.metrics();
    assert_eq!(metrics.tool_calls("add", CallStatus::Ok), 1);
    assert_eq!(metrics.tool_calls(wasmbox::UNKNOWN_TOOL_LABEL, CallStatus::Denied), 1);
}
