//! The Python spelling: a stub module in which `tools` is a class instance with one
//! method per tool, spelled as the Python guest (guests/python/app.py) is called.
//!
//! - `tools.<name>(**kwargs)` for a name the guest's `tools` object answers as an
//!   attribute; any other name (`get-sum`, `a.b`, `class`, `_x`) by subscript,
//!   `tools["get-sum"](...)`, typed with a `Protocol` per tool and `__getitem__` overloads.
//! - Keyword arguments when every property can be one; otherwise (a property named
//!   `from`, `first-name` or `self`, or arguments that are not an object) one positional
//!   dict, which the guest accepts as well, typed with a functional `TypedDict`.
//! - Nested objects are `TypedDict`s, optional keys `NotRequired[...]`, enums
//!   `Literal[...]`; `from __future__ import annotations` lets types refer to each other
//!   in any order, and the functional form's types are strings for the same reason.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde_json::Value;

use crate::doc_text::{comment_lines, python_docstring_body, quoted};
use crate::identifiers::{python_attribute, python_field, python_parameter};
use crate::schema_type::{reachable_objects, Extra, Field, ObjectDef, ObjectId, SchemaType};
use crate::tool_model::{Catalogue, ToolModel};

/// What the module says about calling, returning and failing, before any tool.
const HEADER: &str = r#""""The tools this run may call, as Python stubs generated from their JSON Schemas.

Call a tool with keyword arguments, `result = tools.name(arg=value)`; `await
tools.name(...)` works too (top-level await is allowed; the calls in one asyncio.gather
run at the same time). A tool whose name is not a Python identifier is called by subscript,
`tools["get-sum"](a=1, b=2)`. One dict of arguments works for any tool,
`tools.name({"from": "x"})`, and is how to pass keys that are not identifiers. Leave an
optional argument out rather than passing None, unless its type allows None. A result
is plain JSON: dict, list, str, int, float, bool or None.

The run's value is what you pass to `output(value)` (at most once), else the value of
the last expression statement, else None. print() goes to stdout. Values must be JSON:
a set, bytes, NaN or a cycle is an error naming its path.

A call that returns no result raises a ToolError subclass, which the code may catch:
ToolDenied, ToolBudgetExhausted, ToolInvalidArgs, ToolFailed or ToolTimeout (`e.kind`
says which, `e.tool` names the tool). `INPUT` holds the run's input; `list_tools()`
describes the tools below.
"""

from __future__ import annotations

from typing import Any, Callable, Literal, Never, NotRequired, Protocol, TypedDict, overload


class ToolError(Exception):
    """A tool call that did not return a result. `kind` says why (see the subclasses)."""

    kind: str = "error"
    message: str
    tool: str | None


class ToolDenied(ToolError):
    """The tool is unknown or not allowed in this run."""

    kind = "denied"


class ToolBudgetExhausted(ToolError):
    """A budget of this run (number of calls, result bytes) is spent."""

    kind = "budget_exhausted"


class ToolInvalidArgs(ToolError):
    """The host refused the arguments (size, depth, schema)."""

    kind = "invalid_args"


class ToolFailed(ToolError):
    """The tool ran and failed."""

    kind = "failed"


class ToolTimeout(ToolError):
    """The tool did not answer in time."""

    kind = "timeout"


def output(value: Any) -> None:
    """Sets the run's value. May be called at most once."""


INPUT: Any
"""The run's JSON input."""


def list_tools() -> list[dict[str, Any]]:
    """The tools this run may call: [{name, description, args_schema}], sorted by name."""
"#;

/// A signature longer than this puts each parameter on a line of its own.
const MAX_ONE_LINE_SIGNATURE: usize = 100;

/// How one tool is called.
enum Form<'c> {
    /// `tools.x(a=1, b=2)`, with `**extra` when other keys are allowed.
    Keywords { fields: &'c [Field], extra: Option<(String, &'c SchemaType)> },
    /// `tools.x({"from": 1})`.
    Dict { ty: &'c SchemaType, optional: bool },
}

fn form<'c>(tool: &'c ToolModel<'_>, objects: &'c [ObjectDef]) -> Form<'c> {
    match &tool.args {
        SchemaType::Any => Form::Keywords { fields: &[], extra: Some(("kwargs".to_owned(), &tool.args)) },
        SchemaType::Map(values) => Form::Keywords { fields: &[], extra: Some(("kwargs".to_owned(), values)) },
        SchemaType::Object(id) if objects[*id].fields.iter().all(|f| python_parameter(&f.name)) => {
            let object = &objects[*id];
            let extra = match &object.extra {
                Extra::Allowed(ty) => {
                    let taken = |name: &str| object.fields.iter().any(|f| f.name == name);
                    let name = ["kwargs", "extra", "more"]
                        .into_iter()
                        .map(str::to_owned)
                        .chain((2..).map(|n| format!("kwargs{n}")))
                        .find(|name| !taken(name))
                        .unwrap_or_default();
                    Some((name, ty))
                }
                _ => None,
            };
            Form::Keywords { fields: &object.fields, extra }
        }
        SchemaType::Object(id) => {
            Form::Dict { ty: &tool.args, optional: objects[*id].fields.iter().all(|f| !f.required) }
        }
        other => Form::Dict { ty: other, optional: false },
    }
}

/// The whole stub module for `catalogue`'s tools.
pub(crate) fn module(catalogue: &mut Catalogue<'_>) -> String {
    let all: Vec<usize> = (0..catalogue.tools.len()).collect();
    let mut out = String::from(HEADER);
    out.push_str(&declarations(catalogue, &all));
    out.push_str("\n\ntools: Tools\n\"\"\"The tools this run may call.\"\"\"\n");
    out
}

/// The types, protocol and `Tools` class of the tools at `which`, without the header:
/// valid after the imports of [`module`].
pub(crate) fn fragment(catalogue: &mut Catalogue<'_>, which: usize) -> String {
    declarations(catalogue, &[which]).trim_start().to_owned()
}

/// How the code calls the tool: `tools.echo(message=...)`, `tools["get-sum"](a=..., b=...)`.
pub(crate) fn call_example(catalogue: &Catalogue<'_>, which: usize) -> String {
    let tool = &catalogue.tools[which];
    let callee = callee(&tool.summary.name);
    let arguments = match form(tool, &catalogue.objects) {
        Form::Keywords { fields, .. } => {
            fields.iter().filter(|f| f.required).map(|f| format!("{}=...", f.name)).collect::<Vec<_>>().join(", ")
        }
        Form::Dict { ty: SchemaType::Object(id), .. } => {
            let keys = catalogue.objects[*id].fields.iter().filter(|f| f.required);
            format!("{{{}}}", keys.map(|f| format!("{}: ...", quoted(&f.name))).collect::<Vec<_>>().join(", "))
        }
        Form::Dict { .. } => "...".to_owned(),
    };
    format!("{callee}({arguments})")
}

fn callee(name: &str) -> String {
    if python_attribute(name) {
        format!("tools.{name}")
    } else {
        format!("tools[{}]", quoted(name))
    }
}

fn declarations(catalogue: &mut Catalogue<'_>, which: &[usize]) -> String {
    // Protocol names come from the module's namer, before the read-only rendering below.
    let protocols: Vec<Option<String>> = which
        .iter()
        .map(|&i| {
            let tool = &catalogue.tools[i];
            if python_attribute(&tool.summary.name) {
                None
            } else {
                let base = format!("{}Tool", tool.base);
                Some(catalogue.namer.unique(&base, "Tool"))
            }
        })
        .collect();
    let catalogue = &*catalogue;
    let objects = &catalogue.objects;

    let forms: Vec<Form> = which.iter().map(|&i| form(&catalogue.tools[i], objects)).collect();
    let mut roots: Vec<&SchemaType> = Vec::new();
    for form in &forms {
        match form {
            Form::Keywords { fields, extra } => {
                roots.extend(fields.iter().map(|f| &f.ty));
                roots.extend(extra.iter().map(|(_, ty)| *ty));
            }
            Form::Dict { ty, .. } => roots.push(ty),
        }
    }
    let used: BTreeSet<ObjectId> = reachable_objects(objects, &roots);

    let mut out = String::new();
    for &id in &used {
        out.push_str("\n\n");
        typed_dict(&mut out, &objects[id], objects);
    }
    for ((&i, form), protocol) in which.iter().zip(&forms).zip(&protocols) {
        if let Some(protocol) = protocol {
            let _ = write!(out, "\n\nclass {protocol}(Protocol):\n");
            method(&mut out, catalogue, i, form, "__call__");
        }
    }

    out.push_str(
        "\n\nclass Tools:\n    \"\"\"`tools`: call `tools.name(...)`, or `tools[\"name\"](...)` for any name.\"\"\"\n",
    );
    let subscripted: Vec<(&str, &str)> = which
        .iter()
        .zip(&protocols)
        .filter_map(|(&i, p)| p.as_deref().map(|p| (catalogue.tools[i].summary.name.as_str(), p)))
        .collect();
    // Before the tools' methods, so that a tool named `overload` cannot shadow the
    // decorator while the class body runs.
    out.push('\n');
    if subscripted.is_empty() {
        out.push_str("    def __getitem__(self, name: str) -> Callable[..., Any]:\n        \"\"\"`tools[\"name\"]`: the tool of that name, for names that are not identifiers.\"\"\"\n");
    } else {
        for (name, protocol) in subscripted {
            let _ = write!(
                out,
                "    @overload\n    def __getitem__(self, name: Literal[{}]) -> {protocol}: ...\n",
                quoted(name)
            );
        }
        out.push_str("    @overload\n    def __getitem__(self, name: str) -> Callable[..., Any]: ...\n");
    }
    for ((&i, form), protocol) in which.iter().zip(&forms).zip(&protocols) {
        if protocol.is_none() {
            out.push('\n');
            method(&mut out, catalogue, i, form, &catalogue.tools[i].summary.name);
        }
    }
    if which.len() == catalogue.tools.len() {
        for name in &catalogue.duplicates {
            let _ = writeln!(out, "    # {} is listed again; the first listing is the one above.", quoted(name));
        }
    }
    out
}

/// One tool as a method of `Tools` (or `__call__` of its protocol).
fn method(out: &mut String, catalogue: &Catalogue<'_>, which: usize, form: &Form, name: &str) {
    let tool = &catalogue.tools[which];
    let objects = &catalogue.objects;
    let mut params = vec!["self".to_owned()];
    match form {
        Form::Keywords { fields, extra } => {
            if !fields.is_empty() {
                params.push("*".to_owned());
            }
            for field in fields.iter() {
                let ty = py_type(&field.ty, objects);
                params.push(if field.required {
                    format!("{}: {ty}", field.name)
                } else {
                    let default = match field.doc.default.as_ref().and_then(py_literal) {
                        Some(default) => default,
                        None if field.doc.default_hidden => "...".to_owned(),
                        None => "None".to_owned(),
                    };
                    format!("{}: {ty} = {default}", field.name)
                });
            }
            if let Some((name, ty)) = extra {
                params.push(format!("**{name}: {}", py_type(ty, objects)));
            }
        }
        Form::Dict { ty, optional } => {
            let ty = py_type(ty, objects);
            params.push(if *optional { format!("args: {ty} = {{}}") } else { format!("args: {ty}") });
            params.push("/".to_owned());
        }
    }
    let one_line = format!("    def {name}({}) -> Any:", params.join(", "));
    if one_line.chars().count() <= MAX_ONE_LINE_SIGNATURE {
        out.push_str(&one_line);
        out.push('\n');
    } else {
        let _ = writeln!(out, "    def {name}(");
        for param in &params {
            let _ = writeln!(out, "        {param},");
        }
        out.push_str("    ) -> Any:\n");
    }

    let mut doc = String::new();
    if !tool.description.is_empty() {
        doc.push_str(&tool.description);
        doc.push_str("\n\n");
    }
    let _ = write!(doc, "Call: {}", call_example(catalogue, which));
    let documented: Vec<&Field> = match form {
        Form::Keywords { fields, .. } => fields.iter().collect(),
        Form::Dict { ty: SchemaType::Object(id), .. } => objects[*id].fields.iter().collect(),
        Form::Dict { .. } => Vec::new(),
    };
    let lines: Vec<String> = documented
        .iter()
        .filter_map(|f| {
            field_note(f, matches!(form, Form::Dict { .. }))
                .map(|note| format!("    {}: {}", f.name, note.replace('\n', "\n        ")))
        })
        .collect();
    if !lines.is_empty() {
        doc.push_str(if matches!(form, Form::Dict { .. }) { "\n\nKeys of args:\n" } else { "\n\nArgs:\n" });
        doc.push_str(&lines.join("\n"));
    }
    let _ = write!(out, "        \"\"\"{}\n        \"\"\"\n", python_docstring_body(&doc, "        "));
}

/// What a field's schema says beyond its type: description, constraints, and the
/// default unless the signature shows it.
fn field_note(field: &Field, with_default: bool) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(text) = &field.doc.description {
        parts.push(text.clone());
    }
    let mut extras = field.doc.notes.clone();
    if let Some(default) = field.doc.default.as_ref().filter(|_| with_default).and_then(py_literal) {
        extras.push(format!("default {default}"));
    }
    if !extras.is_empty() {
        parts.push(format!("({})", extras.join("; ")));
    }
    (!parts.is_empty()).then(|| parts.join(" "))
}

fn typed_dict(out: &mut String, object: &ObjectDef, objects: &[ObjectDef]) {
    let functional = !object.fields.iter().all(|f| python_field(&f.name));
    let field_type = |field: &Field| {
        let ty = py_type(&field.ty, objects);
        if field.required {
            ty
        } else {
            format!("NotRequired[{ty}]")
        }
    };
    let comments = |field: &Field, indent: &str| -> String {
        field_note(field, true).map(|note| comment(&note, indent)).unwrap_or_default()
    };
    let extra_comment = match &object.extra {
        Extra::Allowed(ty) => Some(format!("# Other keys are allowed too (values: {}).", py_type(ty, objects))),
        _ => None,
    };
    if functional {
        if let Some(text) = &object.description {
            out.push_str(&comment(text, ""));
        }
        let _ = writeln!(out, "{} = TypedDict({}, {{", object.name, quoted(&object.name));
        for field in &object.fields {
            out.push_str(&comments(field, "    "));
            let _ = writeln!(out, "    {}: {},", quoted(&field.name), quoted(&field_type(field)));
        }
        if let Some(comment) = extra_comment {
            let _ = writeln!(out, "    {comment}");
        }
        out.push_str("})\n");
        return;
    }
    let _ = writeln!(out, "class {}(TypedDict):", object.name);
    let mut empty = true;
    if let Some(text) = &object.description {
        let _ = writeln!(out, "    \"\"\"{}\n    \"\"\"\n", python_docstring_body(text, "    "));
        empty = false;
    }
    for field in &object.fields {
        out.push_str(&comments(field, "    "));
        let _ = writeln!(out, "    {}: {}", field.name, field_type(field));
        empty = false;
    }
    if let Some(comment) = extra_comment {
        let _ = writeln!(out, "    {comment}");
    }
    if empty {
        out.push_str("    pass\n");
    }
}

/// `text` as `#` comment lines at `indent`.
fn comment(text: &str, indent: &str) -> String {
    comment_lines(text)
        .iter()
        .map(|line| if line.is_empty() { format!("{indent}#\n") } else { format!("{indent}# {line}\n") })
        .collect()
}

/// The Python annotation for `ty`.
pub(crate) fn py_type(ty: &SchemaType, objects: &[ObjectDef]) -> String {
    match ty {
        SchemaType::Any => "Any".to_owned(),
        SchemaType::Never => "Never".to_owned(),
        SchemaType::Null => "None".to_owned(),
        SchemaType::Bool => "bool".to_owned(),
        SchemaType::Integer => "int".to_owned(),
        SchemaType::Number => "float".to_owned(),
        SchemaType::String => "str".to_owned(),
        SchemaType::Literals(values) => {
            // Literal[...] takes str, int, bool and None; a float is spelled by its type.
            let mut spelled = Vec::new();
            let mut has_float = false;
            for value in values {
                match value {
                    Value::Number(n) if !(n.is_i64() || n.is_u64()) => has_float = true,
                    other => spelled.extend(py_literal(other)),
                }
            }
            let mut parts = Vec::new();
            if !spelled.is_empty() {
                parts.push(format!("Literal[{}]", spelled.join(", ")));
            }
            if has_float {
                parts.push("float".to_owned());
            }
            parts.join(" | ")
        }
        SchemaType::Array(item) => format!("list[{}]", py_type(item, objects)),
        SchemaType::Tuple(items) if items.is_empty() => "tuple[()]".to_owned(),
        SchemaType::Tuple(items) => {
            format!("tuple[{}]", items.iter().map(|t| py_type(t, objects)).collect::<Vec<_>>().join(", "))
        }
        SchemaType::Map(value) => format!("dict[str, {}]", py_type(value, objects)),
        SchemaType::Object(id) => objects.get(*id).map_or_else(|| "Any".to_owned(), |o| o.name.clone()),
        SchemaType::Union(members) => members.iter().map(|t| py_type(t, objects)).collect::<Vec<_>>().join(" | "),
    }
}

/// `value` as a Python literal, when it is short enough to show.
fn py_literal(value: &Value) -> Option<String> {
    let text = match value {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => quoted(s),
        Value::Array(items) => format!("[{}]", items.iter().map(py_literal).collect::<Option<Vec<_>>>()?.join(", ")),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| Some(format!("{}: {}", quoted(k), py_literal(v)?)))
                .collect::<Option<Vec<_>>>()?
                .join(", ")
        ),
    };
    (text.chars().count() <= 120).then_some(text)
}
