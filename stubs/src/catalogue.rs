//! The machine-readable catalogue: each tool with its schema and both spellings.

use serde_json::{json, Value};
use wasmbox::ToolSummary;

use crate::python;
use crate::tool_model::Catalogue;
use crate::typescript;

/// See [`crate::json`].
pub(crate) fn catalogue(tools: &[ToolSummary]) -> Value {
    let mut catalogue = Catalogue::read(tools);
    let mut entries = Vec::with_capacity(catalogue.tools.len());
    for i in 0..catalogue.tools.len() {
        let python = json!({
            "call": python::call_example(&catalogue, i),
            "declaration": python::fragment(&mut catalogue, i),
        });
        let typescript = match (typescript::call_example(&catalogue, i), typescript::fragment(&catalogue, i)) {
            (Some(call), Some(declaration)) => json!({"call": call, "declaration": declaration}),
            _ => Value::Null,
        };
        let tool = &catalogue.tools[i];
        let schema = tool.schema.clone().unwrap_or_else(|| Value::String(tool.summary.args_schema.clone()));
        entries.push(json!({
            "name": tool.summary.name,
            "description": tool.summary.description,
            "args_schema": schema,
            "python": python,
            "typescript": typescript,
        }));
    }
    Value::Array(entries)
}
