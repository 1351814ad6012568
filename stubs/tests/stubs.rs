//! The stubs of real schemas: the tools of two official MCP servers (their `tools/list`
//! answers, in tests/fixtures), a pydantic model as FastMCP sends it, and hand-written
//! schemas for what those lack (names that are not identifiers, keyword properties,
//! hostile input). Generated Python is parsed and run by python3; generated TypeScript
//! is type-checked, with calls written against it, by the TypeScript compiler that
//! `npm ci` in guests/js installs (both skip loudly when absent).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use wasmbox_stubs::ToolSummary;

fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The tools of a `tools/list` answer kept in tests/fixtures.
fn mcp_tools(name: &str) -> Vec<ToolSummary> {
    let Value::Array(tools) = fixture(name) else { panic!("{name} is not a list") };
    tools
        .iter()
        .map(|t| ToolSummary {
            name: t["name"].as_str().unwrap().to_owned(),
            description: t["description"].as_str().unwrap_or_default().to_owned(),
            args_schema: t["inputSchema"].to_string(),
        })
        .collect()
}

fn tool(name: &str, description: &str, schema: Value) -> ToolSummary {
    ToolSummary { name: name.into(), description: description.into(), args_schema: schema.to_string() }
}

fn assert_has(text: &str, expected: &str) {
    assert!(text.contains(expected), "missing:\n{expected}\n--- in ---\n{text}");
}

/// Parses `source` with python3's `ast` and then runs it (on 3.11+, which has `Never`
/// and `NotRequired`), printing what `probe` (Python code run after it) prints.
fn check_python(source: &str, probe: &str) -> Option<String> {
    let checker = format!(
        "import ast, sys\nsrc = sys.stdin.read()\nast.parse(src)\nif sys.version_info >= (3, 11):\n    ns = {{'__name__': 'stubs'}}\n    exec(compile(src, 'stubs', 'exec'), ns)\n    exec({}, ns)\n",
        serde_json::to_string(probe).unwrap()
    );
    let child = Command::new("python3")
        .args(["-c", &checker])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(err) => {
            eprintln!("SKIPPED: the Python check of the stubs needs python3 on PATH ({err})");
            return None;
        }
    };
    child.stdin.take().unwrap().write_all(source.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "python3 refused the stubs:\n{}\n--- stubs ---\n{}",
        String::from_utf8_lossy(&out.stderr),
        numbered(source)
    );
    Some(String::from_utf8(out.stdout).unwrap())
}

fn numbered(source: &str) -> String {
    source.lines().enumerate().map(|(i, l)| format!("{:4} {l}\n", i + 1)).collect()
}

/// guests/js's TypeScript compiler (a dependency of componentize-js, there after
/// `npm ci`), if installed.
fn tsc() -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guests/js/node_modules/.bin/tsc");
    if path.is_file() {
        Some(path)
    } else {
        eprintln!(
            "SKIPPED: type-checking the TypeScript stubs needs {} (`npm ci` in guests/js, which `cargo xtask guests` runs); checking brackets only",
            path.display()
        );
        None
    }
}

/// Type-checks `declarations` followed by `usage` (code in an async function, as guest
/// code runs) in strict mode; without a compiler, checks that brackets balance.
fn check_typescript(declarations: &str, usage: &str) {
    assert_balanced(declarations);
    let Some(tsc) = tsc() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("stubs.ts");
    std::fs::write(&file, format!("{declarations}\nexport async function guest() {{\n{usage}\n}}\n")).unwrap();
    let out = Command::new(&tsc)
        .args(["--noEmit", "--strict", "--target", "es2022", "--lib", "es2022", "--types", ""])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tsc refused the stubs:\n{}{}\n--- stubs.ts ---\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        numbered(&std::fs::read_to_string(&file).unwrap())
    );
}

/// Braces, brackets and parentheses outside strings and comments pair up.
fn assert_balanced(ts: &str) {
    let mut stack = Vec::new();
    let mut chars = ts.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        '\n' => panic!("a string literal runs past its line"),
                        _ => {}
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut previous = ' ';
                for c in chars.by_ref() {
                    if previous == '*' && c == '/' {
                        break;
                    }
                    previous = c;
                }
            }
            '=' if chars.peek() == Some(&'>') => {
                chars.next(); // an arrow, not a bracket
            }
            '(' | '[' | '{' | '<' => stack.push(c),
            ')' | ']' | '}' | '>' => {
                let open = stack.pop().unwrap_or_else(|| panic!("unopened {c}"));
                assert_eq!(Some(open), "([{<".chars().nth(")]}>".find(c).unwrap()), "{open} closed by {c}");
            }
            _ => {}
        }
    }
    assert!(stack.is_empty(), "unclosed {stack:?}");
}

#[test]
fn server_everything_python() {
    let tools = mcp_tools("server-everything.json");
    let py = wasmbox_stubs::python(&tools);
    // hyphenated names are called by subscript, typed by a protocol
    assert_has(&py, "class GetSumTool(Protocol):\n    def __call__(self, *, a: float, b: float) -> Any:\n");
    assert_has(&py, "        Call: tools[\"get-sum\"](a=..., b=...)\n");
    assert_has(&py, "    @overload\n    def __getitem__(self, name: Literal[\"get-sum\"]) -> GetSumTool: ...\n");
    assert_has(&py, "    def echo(self, *, message: str) -> Any:\n        \"\"\"Echoes back the input string\n");
    assert_has(&py, "            message: Message to echo\n");
    // enums, defaults, required first
    assert_has(&py, "    def __call__(\n        self,\n        *,\n        messageType: Literal[\"error\", \"success\", \"debug\"],\n        includeImage: bool = False,\n    ) -> Any:\n");
    assert_has(&py, "            count: Number of resource links to return (1-10) (minimum 1; maximum 10)\n");
    assert_has(&py, "    def __call__(self) -> Any:\n        \"\"\"Returns all environment variables");
    assert_has(&py, "\ntools: Tools\n");
    // the guest's own names, from guests/python/app.py
    for name in ["ToolError", "ToolDenied", "ToolBudgetExhausted", "ToolInvalidArgs", "ToolFailed", "ToolTimeout"] {
        assert_has(&py, &format!("class {name}("));
    }
    assert_has(&py, "def output(value: Any) -> None:\n");
    let probe = "print(sorted(k for k in Tools.__dict__ if not k.startswith('__')), GetSumTool.__call__.__doc__.splitlines()[0])";
    if let Some(out) = check_python(&py, probe) {
        assert_eq!(out, "['echo'] Returns the sum of two numbers\n");
    }
}

#[test]
fn server_everything_typescript() {
    let tools = mcp_tools("server-everything.json");
    let ts = wasmbox_stubs::typescript(&tools);
    assert_has(
        &ts,
        "interface GetSumArgs {\n  /** First number */\n  a: number;\n  /** Second number */\n  b: number;\n}\n",
    );
    assert_has(&ts, "   * Call: await tools[\"get-sum\"]({a: ..., b: ...})\n   */\n  \"get-sum\"(args: GetSumArgs): Promise<unknown>;\n");
    assert_has(&ts, "  echo(args: EchoArgs): Promise<unknown>;\n");
    assert_has(&ts, "  messageType: \"error\" | \"success\" | \"debug\";\n");
    assert_has(&ts, "   * @default false\n   */\n  includeImage?: boolean;\n");
    assert_has(&ts, "  \"get-env\"(args?: GetEnvArgs): Promise<unknown>;\n");
    assert_has(&ts, "declare const tools: Tools;\n");
    assert_has(&ts, "declare class ToolDenied extends ToolError {\n");
    check_typescript(
        &ts,
        r#"
  const sum = await tools["get-sum"]({a: 1, b: 2});
  await tools.echo({message: "hi"});
  await tools["get-annotated-message"]({messageType: "error", includeImage: true});
  await tools["get-env"]();
  // @ts-expect-error: message is required
  await tools.echo({});
  // @ts-expect-error: not one of the enum's values
  await tools["get-annotated-message"]({messageType: "warning"});
  try { await tools.echo({message: "x"}) } catch (e) { if (e instanceof ToolDenied) console.log(e.kind, e.tool) }
  output({sum});
  return INPUT;"#,
    );
}

#[test]
fn filesystem_server_nested_objects_and_arrays() {
    let tools = mcp_tools("server-filesystem.json");
    let py = wasmbox_stubs::python(&tools);
    assert_has(&py, "class EditFileEditsItem(TypedDict):\n    # Text to replace with\n    newText: str\n    # Text to search for - must match exactly\n    oldText: str\n");
    assert_has(
        &py,
        "    def edit_file(self, *, edits: list[EditFileEditsItem], path: str, dryRun: bool = False) -> Any:\n",
    );
    assert_has(&py, "            paths: Array of file paths to read. Each path must be a string pointing to a valid file within allowed directories. (at least 1 items)\n");
    assert_has(&py, "    def list_directory_with_sizes(\n        self,\n        *,\n        path: str,\n        sortBy: Literal[\"name\", \"size\"] = \"name\",\n    ) -> Any:\n");
    assert_has(&py, "excludePatterns: list[str] = []");
    check_python(
        &py,
        "assert 'edit_file' in Tools.__dict__ and EditFileEditsItem.__required_keys__ == {'oldText', 'newText'}",
    );

    let ts = wasmbox_stubs::typescript(&tools);
    assert_has(&ts, "interface EditFileEditsItem {\n  /** Text to replace with */\n  newText: string;\n");
    assert_has(&ts, "  edits: EditFileEditsItem[];\n");
    assert_has(&ts, "  edit_file(args: EditFileArgs): Promise<unknown>;\n");
    assert_has(&ts, "  list_allowed_directories(args?: ListAllowedDirectoriesArgs): Promise<unknown>;\n");
    check_typescript(
        &ts,
        r#"
  await tools.edit_file({path: "/a", edits: [{oldText: "x", newText: "y"}], dryRun: true});
  await tools.list_allowed_directories();
  // @ts-expect-error: an edit needs newText
  await tools.edit_file({path: "/a", edits: [{oldText: "x"}]});"#,
    );
}

#[test]
fn pydantic_defs_refs_recursion_and_optionals() {
    let tools = [tool("create_ticket", "Creates a ticket", fixture("pydantic-create-ticket.json"))];
    let py = wasmbox_stubs::python(&tools);
    assert_has(&py, "class Person(TypedDict):\n    # Full name\n    name: str\n    # (default None)\n    address: NotRequired[Address | None]\n    # (default [])\n    friends: NotRequired[list[Person]]\n");
    assert_has(&py, "class Address(TypedDict):\n    city: str\n    street: str\n    # (default \"FR\")\n    country: NotRequired[str]\n");
    assert_has(&py, "assignee: Person | None = None");
    assert_has(&py, "priority: Literal[\"low\", \"high\"] = \"low\"");
    assert_has(&py, "estimate: int | float | None = None");
    assert_has(&py, "kind: Literal[\"bug\", \"feature\"] = \"bug\"");
    assert_has(&py, "due: str | None = None");
    check_python(&py, "assert set(Person.__annotations__) == {'name', 'address', 'friends'}");
    let ts = wasmbox_stubs::typescript(&tools);
    assert_has(&ts, "interface Person {\n  /** Full name */\n  name: string;\n  /** @default null */\n  address?: Address | null;\n  /** @default [] */\n  friends?: Person[];\n}\n");
    assert_has(&ts, "  priority?: \"low\" | \"high\";\n");
    check_typescript(
        &ts,
        r#"
  await tools.create_ticket({title: "t", assignee: {name: "a", friends: [{name: "b", address: null}]}});
  // @ts-expect-error: a friend needs a name
  await tools.create_ticket({title: "t", assignee: {name: "a", friends: [{}]}});"#,
    );
}

/// Names a guest reaches only by subscript (or not at all), keyword properties, unions,
/// empty schemas and text that tries to break out of its docstring or comment.
fn awkward_tools() -> Vec<ToolSummary> {
    vec![
        tool("a.b", "Dotted.", json!({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]})),
        tool("class", "A keyword.", json!({})),
        tool("_hidden", "Private-looking.", json!(true)),
        tool("then", "Reserved by the JS guest.", json!({"type": "object"})),
        tool(
            "route",
            "Keyword and non-identifier properties: \"\"\"*/ \u{2028} \0 end\"",
            json!({"type": "object", "properties": {
                "from": {"type": "string", "description": "start \"\"\" */"},
                "to": {"type": "string"},
                "self": {"type": "boolean"},
                "first-name": {"type": ["string", "null"]},
            }, "required": ["from"], "additionalProperties": {"type": "number"}}),
        ),
        tool(
            "search",
            "Unions, tuples, maps, consts.",
            json!({"type": "object", "properties": {
                "q": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
                "mode": {"oneOf": [{"const": "fast"}, {"const": "exact"}, {"type": "integer"}]},
                "point": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}], "items": false},
                "tags": {"type": "object", "additionalProperties": {"type": "integer"}},
                "filter": {"type": "object", "properties": {"lang": {"enum": ["py", "js", null, 1.5, true]}}, "additionalProperties": false},
                "kwargs": {"type": "string"},
            }, "additionalProperties": true}),
        ),
        tool("broken", "Not JSON.", json!(null)),
        tool("nothing", "Accepts nothing.", json!(false)),
        tool("overload", "Named like the decorator the stubs use.", json!({})),
        tool("echo", "First.", json!({"type": "object", "properties": {"m": {"type": "string"}}})),
        tool("echo", "Second, ignored.", json!({})),
    ]
    .into_iter()
    .map(|mut t| {
        if t.name == "broken" {
            t.args_schema = "{not json".into();
        }
        t
    })
    .collect()
}

#[test]
fn awkward_names_and_schemas_python() {
    let py = wasmbox_stubs::python(&awkward_tools());
    assert_has(&py, "class ABTool(Protocol):\n    def __call__(self, *, x: int) -> Any:\n");
    assert_has(&py, "Call: tools[\"a.b\"](x=...)");
    assert_has(&py, "class ClassTool(Protocol):\n    def __call__(self, **kwargs: Any) -> Any:\n");
    assert_has(&py, "Call: tools[\"_hidden\"]()");
    assert_has(&py, "    def then(self, **kwargs: Any) -> Any:\n");
    // `from` and `first-name` cannot be keyword arguments: one dict, typed functionally
    assert_has(&py, "RouteArgs = TypedDict(\"RouteArgs\", {\n    # start \"\"\" */\n    \"from\": \"str\",\n");
    assert_has(&py, "    \"first-name\": \"NotRequired[str | None]\",\n");
    assert_has(&py, "    # Other keys are allowed too (values: float).\n})\n");
    assert_has(&py, "    def route(self, args: RouteArgs, /) -> Any:\n");
    assert_has(&py, "Call: tools.route({\"from\": ...})");
    assert_has(&py, "        \"\"\"Keyword and non-identifier properties: \"\"\\\"*/ \\u2028 \\u0000 end\"\n");
    assert_has(&py, "        Keys of args:\n            from: start \"\"\\\" */\n        \"\"\"\n");
    // `kwargs` is a property, so other keys go to the next free name
    assert_has(&py, "        point: tuple[float, float] = None,\n");
    assert_has(&py, "        q: str | list[str] = None,\n");
    assert_has(&py, "        mode: Literal[\"fast\", \"exact\"] | int = None,\n");
    assert_has(&py, "        tags: dict[str, int] = None,\n");
    assert_has(&py, "        **extra: Any,\n");
    assert_has(
        &py,
        "class SearchFilter(TypedDict):\n    lang: NotRequired[Literal[\"py\", \"js\", None, True] | float]\n",
    );
    assert!(!py.contains("class BrokenTool"), "broken is an identifier: a method");
    assert_has(&py, "    def broken(self, **kwargs: Any) -> Any:\n");
    assert_has(&py, "    def nothing(self, args: Never, /) -> Any:\n");
    assert_has(&py, "    def echo(self, *, m: str = None) -> Any:\n        \"\"\"First.\n");
    assert!(!py.contains("Second, ignored."));
    assert_has(&py, "    # \"echo\" is listed again; the first listing is the one above.\n");
    // the overloads come before a method named `overload` shadows the decorator
    let probe = "print(sorted(RouteArgs.__annotations__), callable(Tools.__getitem__), Tools.overload.__name__)";
    if let Some(out) = check_python(&py, probe) {
        assert_eq!(out, "['first-name', 'from', 'self', 'to'] True overload\n");
    }
}

#[test]
fn awkward_names_and_schemas_typescript() {
    let ts = wasmbox_stubs::typescript(&awkward_tools());
    assert_has(&ts, "  \"a.b\"(args: ABArgs): Promise<unknown>;\n");
    assert_has(&ts, "  class(args?: Record<string, unknown>): Promise<unknown>;\n");
    assert_has(&ts, "  // Not callable from JavaScript (the guest keeps this name for itself): \"_hidden\"\n");
    assert_has(&ts, "  // Not callable from JavaScript (the guest keeps this name for itself): \"then\"\n");
    assert_has(&ts, "interface RouteArgs {\n  /** start \"\"\" *\\/ */\n  from: string;\n  \"first-name\"?: string | null;\n  self?: boolean;\n  to?: string;\n  /** Other keys are allowed too (values: number). */\n  [key: string]: unknown;\n}\n");
    assert_has(&ts, "  q?: string | string[];\n");
    assert_has(&ts, "  mode?: \"fast\" | \"exact\" | number;\n");
    assert_has(&ts, "  point?: [number, number];\n");
    assert_has(&ts, "  tags?: Record<string, number>;\n");
    assert_has(&ts, "  lang?: \"py\" | \"js\" | null | 1.5 | true;\n");
    assert_has(&ts, "  nothing(args: never): Promise<unknown>;\n");
    assert_has(&ts, "   * Keyword and non-identifier properties: \"\"\"*\\/     end\"\n");
    check_typescript(
        &ts,
        r#"
  await tools["a.b"]({x: 1});
  await tools.class({anything: [1]});
  await tools.route({from: "a", "first-name": null, extra: 2});
  await tools.search({q: ["a"], mode: "fast", point: [1, 2]});
  // @ts-expect-error: a point has two numbers
  await tools.search({point: [1]});"#,
    );
}

#[test]
fn empty_catalogue() {
    let py = wasmbox_stubs::python(&[]);
    assert_has(&py, "    def __getitem__(self, name: str) -> Callable[..., Any]:\n");
    check_python(&py, "");
    check_typescript(&wasmbox_stubs::typescript(&[]), "output(1);");
    assert_eq!(wasmbox_stubs::json(&[]), json!([]));
}

#[test]
fn hostile_schemas_end_in_bounded_stubs() {
    // each definition used twice by the next: 2^60 nodes if expanded
    let mut defs = serde_json::Map::new();
    for i in 0..60 {
        let next = json!({"$ref": format!("#/$defs/D{}", i + 1)});
        defs.insert(
            format!("D{i}"),
            json!({"anyOf": [{"type": "array", "items": next}, {"type": "object", "additionalProperties": next}]}),
        );
    }
    defs.insert("D60".into(), json!({"type": "string"}));
    let explosive = json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/D0"}}, "$defs": defs});
    // nesting as deep as serde_json parses, and deeper than it does
    let mut deep = json!({"type": "string"});
    for _ in 0..60 {
        deep = json!({"type": "object", "properties": {"a": deep}});
    }
    let too_deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    // many properties, a huge enum, long names
    let wide: serde_json::Map<String, Value> =
        (0..5000).map(|i| (format!("p{i}"), json!({"type": "integer"}))).collect();
    let huge_enum: Vec<Value> = (0..100_000).map(|i| json!(format!("v{i}"))).collect();
    let cyclic = json!({"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"allOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}]}}});
    let mut tools = vec![
        tool("explosive", "", explosive),
        tool("deep", "", deep),
        tool("wide", "", json!({"type": "object", "properties": wide})),
        tool("huge_enum", "", json!({"type": "object", "properties": {"e": {"enum": huge_enum}}})),
        tool("cyclic", "", cyclic),
        tool(
            &"n".repeat(10_000),
            &"d".repeat(1_000_000),
            json!({"type": "object", "properties": {"k".repeat(10_000): {}}}),
        ),
    ];
    tools.push(ToolSummary { name: "too_deep".into(), description: String::new(), args_schema: too_deep });
    let py = wasmbox_stubs::python(&tools);
    let ts = wasmbox_stubs::typescript(&tools);
    let catalogue = wasmbox_stubs::json(&tools);
    for text in [&py, &ts] {
        // the description is cut, the wide object is a mapping, the enum says nothing
        assert!(text.len() < 200_000, "{} bytes", text.len());
    }
    assert_has(&py, "    def wide(self, **kwargs: Any) -> Any:\n");
    assert_has(&py, "    def huge_enum(self, *, e: Any = None) -> Any:\n");
    assert_has(&py, "    def too_deep(self, **kwargs: Any) -> Any:\n");
    assert_has(&py, "    def cyclic(self) -> Any:\n");
    assert_eq!(catalogue.as_array().unwrap().len(), tools.len());
    check_python(&py, "");
    check_typescript(&ts, "");
}

#[test]
fn json_catalogue() {
    let tools = mcp_tools("server-everything.json");
    let catalogue = wasmbox_stubs::json(&tools);
    let entries = catalogue.as_array().unwrap();
    assert_eq!(entries.len(), tools.len());
    let sum = entries.iter().find(|e| e["name"] == "get-sum").unwrap();
    assert_eq!(sum["args_schema"]["required"], json!(["a", "b"]));
    assert_eq!(sum["python"]["call"], "tools[\"get-sum\"](a=..., b=...)");
    assert_eq!(sum["typescript"]["call"], "await tools[\"get-sum\"]({a: ..., b: ...})");
    assert_has(sum["python"]["declaration"].as_str().unwrap(), "class GetSumTool");
    assert_has(sum["typescript"]["declaration"].as_str().unwrap(), "interface GetSumArgs {");
    assert!(!sum["typescript"]["declaration"].as_str().unwrap().contains("EchoArgs"), "one tool's types only");

    // each Python declaration stands alone after the module's imports
    let imports = "from __future__ import annotations\nfrom typing import Any, Callable, Literal, Never, NotRequired, Protocol, TypedDict, overload\n";
    assert_has(&wasmbox_stubs::python(&[]), imports.split_once('\n').unwrap().1);
    for entry in entries {
        check_python(&format!("{imports}{}", entry["python"]["declaration"].as_str().unwrap()), "");
    }

    let odd = wasmbox_stubs::json(&awkward_tools());
    let odd = odd.as_array().unwrap();
    let then = odd.iter().find(|e| e["name"] == "then").unwrap();
    assert_eq!(then["typescript"], Value::Null);
    assert_eq!(then["python"]["call"], "tools.then()");
    let broken = odd.iter().find(|e| e["name"] == "broken").unwrap();
    assert_eq!(broken["args_schema"], "{not json");
    assert_eq!(odd.iter().filter(|e| e["name"] == "echo").count(), 1);
}

#[test]
fn search_ranks_names_then_descriptions() {
    let mut tools = mcp_tools("server-filesystem.json");
    tools.extend(mcp_tools("server-everything.json"));
    let names = |query: &str, limit: usize| -> Vec<String> {
        wasmbox_stubs::search(&tools, query, limit).into_iter().map(|t| t.name.clone()).collect()
    };
    assert_eq!(names("sum", 3), ["get-sum"]);
    assert_eq!(names("get-sum", 1), ["get-sum"]);
    assert_eq!(names("ECHO", 1), ["echo"]);
    // the name itself first; then both words in the name, by name; then one word in it
    let read_file = names("read file", 4);
    assert_eq!(read_file, ["read_file", "read_media_file", "read_multiple_files", "read_text_file"]);
    assert_eq!(names("read file", 4), read_file, "deterministic");
    // plurals match singulars; ties go by name
    assert_eq!(
        names("directory", 5),
        [
            "create_directory",
            "directory_tree",
            "list_allowed_directories",
            "list_directory",
            "list_directory_with_sizes"
        ]
    );
    // the beginning of a word counts; a whole word ("[DIR]" in two descriptions) more
    let dir = names("dir", 10);
    assert_eq!(dir[..2], ["list_directory", "list_directory_with_sizes"]);
    assert!(dir.contains(&"directory_tree".to_owned()), "{dir:?}");
    assert_eq!(names("echo", 10)[0], "echo");
    // description words count too: edit_file's has the word "diff", two others a word
    // beginning with it ("different")
    assert_eq!(names("diff", 10), ["edit_file", "get-resource-links", "move_file"]);
    assert!(names("zebra", 10).is_empty());
    assert_eq!(names("", 2), ["read_file", "read_text_file"], "no words: the first tools");
    assert!(names("file", 0).is_empty());
}

/// docs/stubs.md shows the stubs of `get-sum` and `edit_file`: its Python and TypeScript
/// blocks are what the generators print for them.
#[test]
fn the_docs_examples_are_what_the_generators_print() {
    let docs = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/stubs.md")).unwrap();
    let block = |lang: &str| -> String {
        let start = docs.find(&format!("```{lang}\n")).unwrap_or_else(|| panic!("a {lang} block")) + lang.len() + 4;
        docs[start..start + docs[start..].find("```").unwrap()].to_owned()
    };
    let mut tools: Vec<ToolSummary> =
        mcp_tools("server-everything.json").into_iter().filter(|t| t.name == "get-sum").collect();
    tools.extend(mcp_tools("server-filesystem.json").into_iter().filter(|t| t.name == "edit_file"));
    assert_eq!(tools.len(), 2);
    let py = wasmbox_stubs::python(&tools);
    assert_has(&py, &block("python"));
    let ts = wasmbox_stubs::typescript(&tools);
    // the docs leave out the comment above `interface Tools`
    assert_has(
        &ts.replace(
            "/** `tools`: call `await tools.name({...})`, or `await tools[\"name\"]({...})` for any name. */\n",
            "",
        ),
        &block("ts"),
    );
}

/// `(class, base, doc line, kind)` of each `class Tool…(…)` in Python source: the class
/// line, its docstring's line and the next `kind` assignment.
fn python_error_classes(source: &str) -> Vec<(String, String, String, String)> {
    let lines: Vec<&str> = source.lines().map(str::trim).collect();
    let mut classes = Vec::new();
    for (at, line) in lines.iter().enumerate() {
        let Some(rest) = line.strip_prefix("class Tool") else { continue };
        // `class Tools:` (the stubs' namespace of tools) has no base: not an error class.
        let Some((name, base)) = rest.trim_end_matches("):").split_once('(') else { continue };
        let doc = lines[at + 1].trim_matches('"').to_owned();
        let kind = lines[at + 2..]
            .iter()
            .find_map(|line| line.strip_prefix("kind").and_then(|rest| rest.split('"').nth(1)))
            .expect("a kind");
        classes.push((format!("Tool{name}"), base.to_owned(), doc, kind.to_owned()));
    }
    classes
}

/// `(class, base, doc line)` of each `… class Tool… extends …` in JS or TypeScript source
/// preceded by a one-line `/** … */` doc comment.
fn js_error_classes(source: &str, prefix: &str) -> Vec<(String, String, String)> {
    let lines: Vec<&str> = source.lines().map(str::trim).collect();
    let mut classes = Vec::new();
    for (at, line) in lines.iter().enumerate().skip(1) {
        let Some(rest) = line.strip_prefix(prefix).and_then(|rest| rest.strip_prefix("class Tool")) else { continue };
        let mut words = rest.split_whitespace();
        let name = format!("Tool{}", words.next().unwrap());
        assert_eq!(words.next(), Some("extends"), "{line}");
        let base = words.next().unwrap().to_owned();
        let doc = lines[at - 1].trim_start_matches("/**").trim_end_matches("*/").trim().to_owned();
        classes.push((name, base, doc));
    }
    classes
}

/// The error classes the stubs declare are the ones the guests define: same names,
/// bases, docs and kinds (the stubs restate them, so nothing else keeps them in step).
#[test]
fn the_stubs_error_classes_are_the_guests() {
    let guests = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guests");
    let app = std::fs::read_to_string(guests.join("python/app.py")).unwrap();
    let expected = python_error_classes(&app);
    assert_eq!(expected.len(), 6, "{expected:?}");
    assert_eq!(python_error_classes(&wasmbox_stubs::python(&[])), expected);

    let core = std::fs::read_to_string(guests.join("js/core.js")).unwrap();
    let defined = js_error_classes(&core, "export ");
    let declared = wasmbox_stubs::typescript(&[]);
    assert_eq!(js_error_classes(&declared, "declare "), defined);
    // Kinds: the guest's KINDS list, in TOOL_ERRORS order, and the declarations'.
    let kinds_line = core.lines().find(|line| line.starts_with("const KINDS = [")).expect("core.js's KINDS");
    let kinds: Vec<&str> = kinds_line.split('\'').skip(1).step_by(2).collect();
    let python_kinds: Vec<&str> = expected.iter().map(|(_, _, _, kind)| kind.as_str()).collect();
    assert_eq!(kinds, python_kinds, "the two guests' kinds");
    for ((name, _, _), kind) in defined.iter().zip(&kinds).skip(1) {
        assert_has(&declared, &format!("class {name} extends ToolError {{\n  readonly kind: \"{kind}\";"));
    }
    let union = kinds.iter().map(|kind| format!("\"{kind}\"")).collect::<Vec<_>>().join(" | ");
    assert_has(&declared, &format!("readonly kind: {union};"));
}
