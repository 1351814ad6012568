//! A run's [`Outcome`] as the agent sees it: `structuredContent` with the whole outcome
//! (minus what only operators need) and a text block a model reads at a glance;
//! `isError` for every status but `ok`, so the model sees the traceback and retries.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{json, Value};
use wasmbox::{Outcome, Status};

/// The tool result of one run.
pub fn run_result(outcome: &Outcome) -> CallToolResult {
    let structured = structured(outcome);
    let mut result = CallToolResult::success(vec![ContentBlock::text(text(outcome))]);
    result.structured_content = Some(structured);
    result.is_error = Some(outcome.status != Status::Ok);
    result
}

fn structured(outcome: &Outcome) -> Value {
    let calls: Vec<Value> = outcome
        .tool_calls
        .iter()
        .map(|call| {
            let mut record = json!({
                "tool": call.tool,
                "status": call.status,
                "duration_ms": (call.duration_ms * 1000.0).round() / 1000.0,
            });
            if let Some(message) = &call.message {
                record["message"] = json!(message);
            }
            record
        })
        .collect();
    let mut value = json!({
        "status": outcome.status,
        "value": outcome.value.clone().unwrap_or(Value::Null),
        "stdout": outcome.stdout.text,
        "stderr": outcome.stderr.text,
        "tool_calls": calls,
        "wall_time_ms": outcome.stats.wall_time_us as f64 / 1000.0,
    });
    if outcome.stdout.truncated || outcome.stderr.truncated {
        value["truncated"] = json!({"stdout": outcome.stdout.truncated, "stderr": outcome.stderr.truncated});
    }
    if let Some(error) = &outcome.error {
        value["error"] = json!({"kind": error.kind, "message": error.message, "traceback": error.traceback});
    }
    value
}

/// The outcome as a model reads it: status, value, output, error and traceback, calls.
fn text(outcome: &Outcome) -> String {
    let mut text = format!("status: {}\n", outcome.status);
    if let Some(value) = outcome.value.as_ref().filter(|v| !v.is_null()) {
        text.push_str(&format!("value: {value}\n"));
    }
    for (name, output) in [("stdout", &outcome.stdout), ("stderr", &outcome.stderr)] {
        if !output.text.is_empty() {
            let cut = if output.truncated { " (truncated)" } else { "" };
            text.push_str(&format!("{name}{cut}:\n{}", output.text));
            if !output.text.ends_with('\n') {
                text.push('\n');
            }
        }
    }
    if let Some(error) = &outcome.error {
        if !error.traceback.is_empty() {
            text.push_str(&error.traceback);
            if !error.traceback.ends_with('\n') {
                text.push('\n');
            }
        }
        text.push_str(&format!("error: {}: {}\n", error.kind, error.message));
    }
    if !outcome.tool_calls.is_empty() {
        let calls: Vec<String> = outcome
            .tool_calls
            .iter()
            .map(|c| {
                let status = serde_json::to_value(c.status).ok().and_then(|v| v.as_str().map(str::to_owned));
                format!("{} {}", c.tool, status.unwrap_or_default())
            })
            .collect();
        text.push_str(&format!("tool calls ({}): {}\n", calls.len(), calls.join(", ")));
    }
    text
}
