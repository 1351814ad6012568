//! Typed stubs of wasmbox tools, generated from their JSON Schemas, for the model that
//! writes the guest code: [`python`] gives a Python stub module (a method per tool with
//! keyword arguments, `TypedDict`s for nested objects, `Literal[...]` for enums), and
//! [`typescript`] TypeScript declarations for the JavaScript guest (an interface per
//! argument object, string-literal unions, optional `?:` properties), each spelled the
//! way its guest really calls a tool (`tools.echo(message="hi")`,
//! `await tools["get-sum"]({a: 1, b: 2})`) and opening with how to return a value and
//! which errors a call raises; [`json`] gives the same as a machine-readable catalogue,
//! and [`search`] finds tools by name and description in a large one. A schema that is
//! not JSON, too large, too deep, cyclic or otherwise beyond what a stub can say reads as
//! `Any` (`unknown`) in the part it cannot say, in time bounded by caps per tool; nothing
//! here panics on any input.
//!
//! ```
//! use wasmbox::ToolSummary;
//!
//! let tools = [ToolSummary {
//!     name: "get-sum".into(),
//!     description: "Adds two numbers".into(),
//!     args_schema: r#"{"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
//!                      "required": ["a", "b"]}"#.into(),
//! }];
//! let py = wasmbox_stubs::python(&tools);
//! assert!(py.contains("def __call__(self, *, a: float, b: float) -> Any:"));
//! assert!(py.contains(r#"Call: tools["get-sum"](a=..., b=...)"#));
//! let ts = wasmbox_stubs::typescript(&tools);
//! assert!(ts.contains(r#""get-sum"(args: GetSumArgs): Promise<unknown>;"#));
//! assert_eq!(wasmbox_stubs::search(&tools, "sum", 5)[0].name, "get-sum");
//! ```
//!
//! `wasmbox describe-tools --format pyi|ts|json` prints these for a tools file;
//! docs/stubs.md shows an example of each.

#![deny(missing_docs)]

mod catalogue;
mod doc_text;
mod identifiers;
mod python;
mod schema_reader;
mod schema_type;
mod search;
mod tool_model;
mod typescript;

pub use search::search;
pub use wasmbox::ToolSummary;

use tool_model::Catalogue;

/// A Python stub module describing `tools` (in the order given; a name given twice is
/// described once): the guest's error classes, `output`, `INPUT` and `list_tools`, a
/// `TypedDict` per object type, and a `Tools` class with a method per tool, whose
/// docstring gives the tool's description, how to call it and what each argument means.
/// The text parses as Python 3.11 and runs (it declares; it calls nothing).
pub fn python(tools: &[ToolSummary]) -> String {
    python::module(&mut Catalogue::read(tools))
}

/// TypeScript declarations describing `tools` for the JavaScript guest: its error
/// classes, `output`, `INPUT` and `listTools`, an interface per object type, and
/// `declare const tools: Tools` with a member per tool. A tool JavaScript cannot call
/// (the guest keeps names such as `then` and `_x` for itself) is named in a comment.
pub fn typescript(tools: &[ToolSummary]) -> String {
    typescript::module(&Catalogue::read(tools))
}

/// The tools as a JSON array, one object per tool (a name given twice once), in the
/// order given:
///
/// ```json
/// {"name": "get-sum", "description": "…", "args_schema": {…},
///  "python": {"call": "tools[\"get-sum\"](a=..., b=...)", "declaration": "…"},
///  "typescript": {"call": "await tools[\"get-sum\"]({a: ..., b: ...})", "declaration": "…"}}
/// ```
///
/// `args_schema` is the schema parsed (its text, as a string, when it is not JSON).
/// A `declaration` is the types and the `Tools` member of that one tool; the Python one
/// is valid Python after the imports of [`python`]'s module. `typescript` is `null` for a
/// tool JavaScript cannot call.
pub fn json(tools: &[ToolSummary]) -> serde_json::Value {
    catalogue::catalogue(tools)
}
