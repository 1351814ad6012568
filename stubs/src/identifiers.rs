//! Which names each guest language can spell bare, and the type names the stubs make up.
//!
//! Only ASCII identifiers count as bare names: Python normalises non-ASCII identifiers
//! (NFKC), so `tools.ﬁle` would call a tool named `file`, and a stub that shows a name
//! the guest does not send is worse than one that shows a subscript.

use std::collections::HashSet;

/// Python's hard keywords: never an attribute or parameter name.
const PYTHON_KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
    "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal",
    "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
];

/// Names the JavaScript guest never answers with a tool (guests/js/core.js, `isToolName`):
/// `then` and `toJSON` would change how `await` and `JSON.stringify` treat `tools`, and
/// `Object.prototype`'s own names keep their usual meaning. Names starting with `_` are
/// refused too (see [`js_reachable`]).
const JS_NOT_TOOLS: &[&str] = &[
    "then",
    "toJSON",
    "constructor",
    "hasOwnProperty",
    "isPrototypeOf",
    "propertyIsEnumerable",
    "toLocaleString",
    "toString",
    "valueOf",
];

/// Names a generated type must not take: what the stubs themselves declare or import,
/// and the globals a TypeScript interface of the same name would merge into.
const RESERVED_TYPE_NAMES: &[&str] = &[
    // Python: the stub's imports, constants and declarations
    "Any",
    "Callable",
    "Literal",
    "Never",
    "NotRequired",
    "Protocol",
    "TypedDict",
    "None",
    "True",
    "False",
    "Tools",
    "ToolError",
    "ToolDenied",
    "ToolBudgetExhausted",
    "ToolInvalidArgs",
    "ToolFailed",
    "ToolTimeout",
    "INPUT",
    // TypeScript: standard globals (ES2022) that an interface would merge with
    "Array",
    "ArrayBuffer",
    "Awaited",
    "BigInt",
    "Boolean",
    "DataView",
    "Date",
    "Error",
    "Exclude",
    "Extract",
    "Function",
    "Infinity",
    "Intl",
    "Iterable",
    "JSON",
    "Map",
    "Math",
    "NaN",
    "NonNullable",
    "Number",
    "Object",
    "Omit",
    "Partial",
    "Pick",
    "Promise",
    "PromiseLike",
    "Proxy",
    "Readonly",
    "Record",
    "Reflect",
    "RegExp",
    "Required",
    "ReturnType",
    "Set",
    "String",
    "Symbol",
    "TextDecoder",
    "TextEncoder",
    "URL",
    "Uint8Array",
    "WeakMap",
    "WeakSet",
];

/// `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn is_ascii_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_python_keyword(name: &str) -> bool {
    PYTHON_KEYWORDS.contains(&name)
}

/// Whether the Python guest reaches the tool as `tools.<name>`: its `tools` object answers
/// only public attributes, and a keyword is a syntax error there.
pub(crate) fn python_attribute(name: &str) -> bool {
    is_ascii_identifier(name) && !is_python_keyword(name) && !name.starts_with('_')
}

/// Whether `name` can be a keyword argument of a stub method (`self` is the method's own;
/// `__debug__` cannot be bound).
pub(crate) fn python_parameter(name: &str) -> bool {
    python_field(name) && name != "self"
}

/// Whether `name` can be a field of a class-syntax `TypedDict`.
pub(crate) fn python_field(name: &str) -> bool {
    is_ascii_identifier(name) && !is_python_keyword(name) && name != "__debug__"
}

/// Whether `name` can be written bare as a JavaScript property (`tools.name`, `{name: 1}`).
/// Reserved words are fine as property names.
pub(crate) fn js_property(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// Whether the JavaScript guest's `tools` object answers `name` with a tool at all.
pub(crate) fn js_reachable(name: &str) -> bool {
    !name.starts_with('_') && !JS_NOT_TOOLS.contains(&name)
}

/// `get-sum` → `GetSum`, `oldText` → `OldText`: ASCII letters and digits of each word,
/// the first letter raised. Empty when `name` has none; prefixed with `T` when it would
/// start with a digit.
pub(crate) fn pascal_case(name: &str) -> String {
    let mut out = String::new();
    for word in name.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()) {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            out.push(first.to_ascii_uppercase());
            out.extend(chars);
        }
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'T');
    }
    out
}

/// Hands out type names, each once per stub module.
pub(crate) struct TypeNamer {
    taken: HashSet<String>,
}

/// Longest generated type name before a numeric suffix; deep nesting would otherwise
/// make names as long as the path to them.
const MAX_TYPE_NAME_CHARS: usize = 60;

impl TypeNamer {
    /// A namer with the reserved names taken.
    pub(crate) fn new() -> Self {
        TypeNamer { taken: RESERVED_TYPE_NAMES.iter().map(|s| (*s).to_owned()).collect() }
    }

    /// `base` (or `fallback` when `base` is empty), with `2`, `3`, … appended when taken.
    pub(crate) fn unique(&mut self, base: &str, fallback: &str) -> String {
        let mut stem = if base.is_empty() { fallback.to_owned() } else { base.to_owned() };
        stem.truncate(MAX_TYPE_NAME_CHARS); // ASCII only: pascal_case keeps nothing else
        let mut name = stem.clone();
        let mut n = 2u64;
        while self.taken.contains(&name) {
            name = format!("{stem}{n}");
            n += 1;
        }
        self.taken.insert(name.clone());
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings() {
        assert!(python_attribute("get_sum"));
        assert!(!python_attribute("get-sum"));
        assert!(!python_attribute("a.b"));
        assert!(!python_attribute("class"));
        assert!(!python_attribute("_private"));
        assert!(!python_attribute("café"));
        assert!(python_attribute("match"), "soft keywords are names");
        assert!(!python_parameter("self"));
        assert!(!python_parameter("__debug__"));
        assert!(python_field("self"));
        assert!(js_property("delete") && js_property("$x") && !js_property("get-sum") && !js_property("1a"));
        assert!(!js_reachable("then") && !js_reachable("_x") && !js_reachable("toString") && js_reachable("get-sum"));
    }

    #[test]
    fn names() {
        assert_eq!(pascal_case("get-sum"), "GetSum");
        assert_eq!(pascal_case("a.b"), "AB");
        assert_eq!(pascal_case("oldText"), "OldText");
        assert_eq!(pascal_case("3d"), "T3d");
        assert_eq!(pascal_case("ü"), "");
        let mut namer = TypeNamer::new();
        assert_eq!(namer.unique("Address", "T"), "Address");
        assert_eq!(namer.unique("Address", "T"), "Address2");
        assert_eq!(namer.unique("Promise", "T"), "Promise2", "a global is never redeclared");
        assert_eq!(namer.unique("None", "T"), "None2", "Python's constants are not class names");
        assert_eq!(namer.unique("", "Type"), "Type");
    }
}
