//! The TypeScript spelling: declarations for the JavaScript guest (guests/js/core.js),
//! where `tools.<name>(args)` takes one plain object and returns a promise.
//!
//! Each tool's arguments are an `interface` (`GetSumArgs`), nested objects too, optional
//! properties `?:`, enums string-literal unions. Names that are not identifiers are quoted
//! members, `tools["get-sum"](...)`. Names the guest never answers with a tool (`then`,
//! `toString`, `_x`, …) are listed in a comment, since no JavaScript can call them.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde_json::Value;

use crate::doc_text::{jsdoc_lines, quoted};
use crate::identifiers::{js_property, js_reachable};
use crate::schema_type::{reachable_objects, Extra, ObjectDef, ObjectId, SchemaType};
use crate::tool_model::{Catalogue, ToolModel};

/// What the declarations say about calling, returning and failing, before any tool.
const HEADER: &str = r#"/**
 * The tools this run may call, as TypeScript declarations generated from their JSON
 * Schemas. The code is the body of an async function: call a tool with one object of
 * arguments, `const result = await tools.name({arg: value})`, or
 * `await tools["get-sum"]({a: 1, b: 2})` for a name that is not an identifier; calls
 * can go together in `Promise.all`. Leave an optional property out rather than passing
 * null or undefined, unless its type allows null. A result is plain JSON.
 *
 * The run's value is what the code returns (`return value`), or what it passes to
 * `output(value)` (at most once). console.log goes to stdout. Values must be JSON.
 *
 * A call that returns no result rejects with a ToolError subclass, which the code may
 * catch: ToolDenied, ToolBudgetExhausted, ToolInvalidArgs, ToolFailed or ToolTimeout
 * (`e.kind` says which, `e.tool` names the tool). `INPUT` holds the run's input;
 * `listTools()` describes the tools below.
 */

/** A tool call that did not return a result. `kind` says why (see the subclasses). */
declare class ToolError extends Error {
  readonly kind: "error" | "denied" | "budget_exhausted" | "invalid_args" | "failed" | "timeout";
  readonly tool: string | null;
}
/** The tool is unknown or not allowed in this run. */
declare class ToolDenied extends ToolError {
  readonly kind: "denied";
}
/** A budget of this run (number of calls, result bytes) is spent. */
declare class ToolBudgetExhausted extends ToolError {
  readonly kind: "budget_exhausted";
}
/** The host refused the arguments (size, depth, schema). */
declare class ToolInvalidArgs extends ToolError {
  readonly kind: "invalid_args";
}
/** The tool ran and failed. */
declare class ToolFailed extends ToolError {
  readonly kind: "failed";
}
/** The tool did not answer in time. */
declare class ToolTimeout extends ToolError {
  readonly kind: "timeout";
}

/** log, info and debug write a line to stdout; error, warn and trace to stderr. */
interface Console {
  log(...data: unknown[]): void;
  info(...data: unknown[]): void;
  debug(...data: unknown[]): void;
  error(...data: unknown[]): void;
  warn(...data: unknown[]): void;
  trace(...data: unknown[]): void;
}
declare var console: Console;
declare function setTimeout(handler: () => void, timeout?: number): number;
declare function clearTimeout(id?: number): void;

/** Sets the run's value; may be called at most once. */
declare function output(value: unknown): void;
/** The run's JSON input. */
declare const INPUT: unknown;
/** The tools this run may call: [{name, description, args_schema}], sorted by name. */
declare function listTools(): { name: string; description: string; args_schema: unknown }[];
"#;

/// The whole declaration file for `catalogue`'s tools.
pub(crate) fn module(catalogue: &Catalogue<'_>) -> String {
    let all: Vec<usize> = (0..catalogue.tools.len()).collect();
    let mut out = String::from(HEADER);
    out.push_str(&declarations(catalogue, &all));
    out.push_str("\ndeclare const tools: Tools;\n");
    out
}

/// The interfaces and `Tools` member of one tool, without the header; `None` when
/// JavaScript cannot call it.
pub(crate) fn fragment(catalogue: &Catalogue<'_>, which: usize) -> Option<String> {
    js_reachable(&catalogue.tools[which].summary.name)
        .then(|| declarations(catalogue, &[which]).trim_start().to_owned())
}

/// How the code calls the tool: `await tools.echo({message: ...})`; `None` when
/// JavaScript cannot call it.
pub(crate) fn call_example(catalogue: &Catalogue<'_>, which: usize) -> Option<String> {
    let tool = &catalogue.tools[which];
    if !js_reachable(&tool.summary.name) {
        return None;
    }
    let arguments = match &tool.args {
        SchemaType::Object(id) => {
            let keys: Vec<String> = catalogue.objects[*id]
                .fields
                .iter()
                .filter(|f| f.required)
                .map(|f| format!("{}: ...", property_key(&f.name)))
                .collect();
            if keys.is_empty() {
                String::new()
            } else {
                format!("{{{}}}", keys.join(", "))
            }
        }
        SchemaType::Any | SchemaType::Map(_) => String::new(),
        _ => "...".to_owned(),
    };
    Some(format!("await {}({arguments})", callee(&tool.summary.name)))
}

fn callee(name: &str) -> String {
    if js_property(name) {
        format!("tools.{name}")
    } else {
        format!("tools[{}]", quoted(name))
    }
}

fn property_key(name: &str) -> String {
    if js_property(name) {
        name.to_owned()
    } else {
        quoted(name)
    }
}

/// The parameter list of the tool's member: `args: GetSumArgs`, `args?: …` when every
/// property is optional.
fn parameter(tool: &ToolModel<'_>, objects: &[ObjectDef]) -> String {
    match &tool.args {
        SchemaType::Object(id) if objects[*id].fields.iter().all(|f| !f.required) => {
            format!("args?: {}", ts_type(&tool.args, objects))
        }
        SchemaType::Any => "args?: Record<string, unknown>".to_owned(),
        SchemaType::Map(_) => format!("args?: {}", ts_type(&tool.args, objects)),
        other => format!("args: {}", ts_type(other, objects)),
    }
}

fn declarations(catalogue: &Catalogue<'_>, which: &[usize]) -> String {
    let objects = &catalogue.objects;
    let (callable, unreachable): (Vec<usize>, Vec<usize>) =
        which.iter().partition(|&&i| js_reachable(&catalogue.tools[i].summary.name));
    let roots: Vec<&SchemaType> = callable.iter().map(|&i| &catalogue.tools[i].args).collect();
    let used: BTreeSet<ObjectId> = reachable_objects(objects, &roots);

    let mut out = String::new();
    for &id in &used {
        out.push('\n');
        interface(&mut out, &objects[id], objects);
    }
    out.push_str("\n/** `tools`: call `await tools.name({...})`, or `await tools[\"name\"]({...})` for any name. */\n");
    out.push_str("interface Tools {\n");
    for &i in &callable {
        let tool = &catalogue.tools[i];
        let mut doc = String::new();
        if !tool.description.is_empty() {
            doc.push_str(&tool.description);
            doc.push_str("\n\n");
        }
        let _ = write!(doc, "Call: {}", call_example(catalogue, i).unwrap_or_default());
        jsdoc(&mut out, &doc, "  ");
        let _ =
            writeln!(out, "  {}({}): Promise<unknown>;", property_key(&tool.summary.name), parameter(tool, objects));
    }
    for &i in &unreachable {
        let _ = writeln!(
            out,
            "  // Not callable from JavaScript (the guest keeps this name for itself): {}",
            quoted(&catalogue.tools[i].summary.name)
        );
    }
    if which.len() == catalogue.tools.len() {
        for name in &catalogue.duplicates {
            let _ = writeln!(out, "  // {} is listed again; the first listing is the one above.", quoted(name));
        }
    }
    out.push_str("}\n");
    out
}

fn interface(out: &mut String, object: &ObjectDef, objects: &[ObjectDef]) {
    if let Some(text) = &object.description {
        jsdoc(out, text, "");
    }
    let _ = writeln!(out, "interface {} {{", object.name);
    for field in &object.fields {
        let mut doc: Vec<String> = Vec::new();
        if let Some(text) = &field.doc.description {
            doc.push(text.clone());
        }
        if !field.doc.notes.is_empty() {
            doc.push(format!("({})", field.doc.notes.join("; ")));
        }
        if let Some(default) = &field.doc.default {
            doc.push(format!("@default {default}"));
        } else if field.doc.default_hidden {
            doc.push("(has a default, too long to show)".to_owned());
        }
        if !doc.is_empty() {
            jsdoc(out, &doc.join("\n"), "  ");
        }
        let optional = if field.required { "" } else { "?" };
        let _ = writeln!(out, "  {}{optional}: {};", property_key(&field.name), ts_type(&field.ty, objects));
    }
    if let Extra::Allowed(ty) = &object.extra {
        // An index signature must admit every named property's type, so other keys'
        // own type goes in the comment.
        let _ = writeln!(
            out,
            "  /** Other keys are allowed too (values: {}). */",
            ts_type(ty, objects).replace("*/", "*\\/")
        );
        out.push_str("  [key: string]: unknown;\n");
    }
    out.push_str("}\n");
}

fn jsdoc(out: &mut String, text: &str, indent: &str) {
    let lines = jsdoc_lines(text);
    match lines.as_slice() {
        [] => {}
        [one] => {
            let _ = writeln!(out, "{indent}/** {one} */");
        }
        lines => {
            let _ = writeln!(out, "{indent}/**");
            for line in lines {
                if line.is_empty() {
                    let _ = writeln!(out, "{indent} *");
                } else {
                    let _ = writeln!(out, "{indent} * {line}");
                }
            }
            let _ = writeln!(out, "{indent} */");
        }
    }
}

/// The TypeScript type for `ty`.
pub(crate) fn ts_type(ty: &SchemaType, objects: &[ObjectDef]) -> String {
    match ty {
        SchemaType::Any => "unknown".to_owned(),
        SchemaType::Never => "never".to_owned(),
        SchemaType::Null => "null".to_owned(),
        SchemaType::Bool => "boolean".to_owned(),
        SchemaType::Integer | SchemaType::Number => "number".to_owned(),
        SchemaType::String => "string".to_owned(),
        SchemaType::Literals(values) => values.iter().map(ts_literal).collect::<Vec<_>>().join(" | "),
        SchemaType::Array(item) => {
            let inner = ts_type(item, objects);
            let needs_parens = matches!(**item, SchemaType::Union(_))
                || matches!(&**item, SchemaType::Literals(values) if values.len() > 1);
            if needs_parens {
                format!("({inner})[]")
            } else {
                format!("{inner}[]")
            }
        }
        SchemaType::Tuple(items) => {
            format!("[{}]", items.iter().map(|t| ts_type(t, objects)).collect::<Vec<_>>().join(", "))
        }
        SchemaType::Map(value) => format!("Record<string, {}>", ts_type(value, objects)),
        SchemaType::Object(id) => objects.get(*id).map_or_else(|| "unknown".to_owned(), |o| o.name.clone()),
        SchemaType::Union(members) => {
            // `integer | number` are both `number`.
            let mut spelled: Vec<String> = Vec::new();
            for member in members {
                let text = ts_type(member, objects);
                if !spelled.contains(&text) {
                    spelled.push(text);
                }
            }
            spelled.join(" | ")
        }
    }
}

fn ts_literal(value: &Value) -> String {
    match value {
        Value::String(s) => quoted(s),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => "null".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema_type::Field;

    #[test]
    fn arrays_of_unions_are_parenthesised() {
        let t = SchemaType::Array(Box::new(SchemaType::Union(vec![SchemaType::String, SchemaType::Null])));
        assert_eq!(ts_type(&t, &[]), "(string | null)[]");
        let t = SchemaType::Array(Box::new(SchemaType::Literals(vec![Value::from("a"), Value::from(-1.5)])));
        assert_eq!(ts_type(&t, &[]), "(\"a\" | -1.5)[]");
    }

    #[test]
    fn fields_keep_their_required_flag() {
        let field = |name: &str, required| Field {
            name: name.into(),
            ty: SchemaType::String,
            required,
            doc: Default::default(),
        };
        let object = ObjectDef {
            name: "X".into(),
            description: None,
            fields: vec![field("a", true), field("first-name", false)],
            extra: Extra::Allowed(SchemaType::Integer),
        };
        let mut out = String::new();
        interface(&mut out, &object, &[]);
        assert_eq!(
            out,
            "interface X {\n  a: string;\n  \"first-name\"?: string;\n  /** Other keys are allowed too (values: number). */\n  [key: string]: unknown;\n}\n"
        );
    }
}
