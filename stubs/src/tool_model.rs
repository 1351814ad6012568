//! The tools of one stub module, read once and shared by every spelling of it.

use std::collections::HashSet;

use serde_json::Value;
use wasmbox::ToolSummary;

use crate::doc_text;
use crate::identifiers::{pascal_case, TypeNamer};
use crate::schema_reader::SchemaReader;
use crate::schema_type::{ObjectDef, SchemaType};

/// Largest schema text parsed; a larger one reads as `Any`.
pub(crate) const MAX_SCHEMA_BYTES: usize = 1 << 20;

/// One tool, read.
pub(crate) struct ToolModel<'t> {
    pub summary: &'t ToolSummary,
    /// Its name made into a type-name stem (`get-sum` → `GetSum`).
    pub base: String,
    /// Its description, cut to [`doc_text::MAX_TOOL_DESCRIPTION_CHARS`].
    pub description: String,
    /// The type of its arguments.
    pub args: SchemaType,
    /// The schema parsed, or `None` when it is not JSON (or too large to read).
    pub schema: Option<Value>,
}

/// The tools of one stub module and the object types their arguments name.
pub(crate) struct Catalogue<'t> {
    pub objects: Vec<ObjectDef>,
    pub tools: Vec<ToolModel<'t>>,
    /// Names given again after their first tool; only the first is described.
    pub duplicates: Vec<&'t str>,
    /// Hands out further names (the Python protocol classes) in the same namespace.
    pub namer: TypeNamer,
}

impl<'t> Catalogue<'t> {
    /// Reads every tool's schema, in the order given.
    pub(crate) fn read(tools: &'t [ToolSummary]) -> Self {
        let mut objects = Vec::new();
        let mut namer = TypeNamer::new();
        let mut models = Vec::with_capacity(tools.len());
        let mut duplicates = Vec::new();
        let mut seen = HashSet::new();
        for summary in tools {
            if !seen.insert(summary.name.as_str()) {
                duplicates.push(summary.name.as_str());
                continue;
            }
            let schema = if summary.args_schema.len() <= MAX_SCHEMA_BYTES {
                // serde_json refuses nesting deeper than 128, so this cannot overflow the stack.
                serde_json::from_str::<Value>(&summary.args_schema).ok()
            } else {
                None
            };
            let base = match pascal_case(&summary.name) {
                base if base.is_empty() => "Tool".to_owned(),
                base => base,
            };
            let args = match &schema {
                Some(schema) => SchemaReader::new(&mut objects, &mut namer).read_root(schema, &base),
                None => SchemaType::Any,
            };
            let description = doc_text::truncated(summary.description.trim(), doc_text::MAX_TOOL_DESCRIPTION_CHARS);
            models.push(ToolModel { summary, base, description, args, schema });
        }
        Catalogue { objects, tools: models, duplicates, namer }
    }
}
