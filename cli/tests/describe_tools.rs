//! `wasmbox describe-tools` on examples/tools.toml: the Python stubs (checked by python3's
//! parser), the TypeScript declarations, the JSON catalogue and `--search`. Runs no
//! guest, so it needs no `cargo xtask guests`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn describe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmbox"))
        .arg("describe-tools")
        .args(args)
        .current_dir(repo_root())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("wasmbox starts")
}

fn stdout_of(out: &Output) -> String {
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn python_stubs_of_the_examples() {
    let py = stdout_of(&describe(&["--tools", "examples/tools.toml", "--format", "pyi"]));
    // required keyword arguments, typed from the schema, and how to call the tool
    assert!(py.contains("    def convert(self, *, to: str, unit: str, value: float) -> Any:\n"), "{py}");
    assert!(py.contains("        Call: tools.convert(to=..., unit=..., value=...)\n"), "{py}");
    assert!(py.contains("    def now(self) -> Any:\n"), "{py}");
    assert!(py.contains("class ToolDenied(ToolError):"), "{py}");
    let parser = Command::new("python3")
        .args(["-c", "import ast, sys; ast.parse(sys.stdin.read())"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let Ok(mut parser) = parser else {
        eprintln!("SKIPPED: parsing the stubs needs python3 on PATH");
        return;
    };
    parser.stdin.take().unwrap().write_all(py.as_bytes()).unwrap();
    let out = parser.wait_with_output().unwrap();
    assert!(out.status.success(), "python3 refused the stubs: {}\n{py}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_readmes_stubs_are_what_the_command_prints() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let section = readme.split("\n## Typed stubs of the tools\n").nth(1).expect("README's stubs section");
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let block = section.split("```python\n").nth(1).and_then(|b| b.split("```").next()).expect("a python block");
    let py = stdout_of(&describe(&["--tools", "examples/tools.toml", "--format", "pyi"]));
    assert!(py.contains(block), "README's stubs are not what describe-tools prints:\n{block}\n--- prints ---\n{py}");
}

#[test]
fn typescript_declarations_of_the_examples() {
    let ts = stdout_of(&describe(&["--tools", "examples/tools.toml", "--format", "ts"]));
    assert!(ts.contains("interface ConvertArgs {\n  to: string;\n  unit: string;\n  value: number;\n}\n"), "{ts}");
    assert!(ts.contains("  convert(args: ConvertArgs): Promise<unknown>;\n"), "{ts}");
    assert!(ts.contains("   * Call: await tools.convert({to: ..., unit: ..., value: ...})\n"), "{ts}");
    assert!(ts.contains("  now(args?: NowArgs): Promise<unknown>;\n"), "{ts}");
    assert!(ts.ends_with("declare const tools: Tools;\n"), "{ts}");
}

#[test]
fn json_catalogue_and_search() {
    // the file given without --tools, as before the flag existed; JSON is the default
    let catalogue: serde_json::Value = serde_json::from_str(&stdout_of(&describe(&["examples/tools.toml"]))).unwrap();
    let names: Vec<_> = catalogue.as_array().unwrap().iter().map(|t| t["name"].clone()).collect();
    assert_eq!(names, ["convert", "now"]);
    assert_eq!(catalogue[0]["args_schema"]["required"], serde_json::json!(["value", "unit", "to"]));
    assert_eq!(catalogue[0]["python"]["call"], "tools.convert(to=..., unit=..., value=...)");
    assert_eq!(catalogue[1]["typescript"]["call"], "await tools.now()");

    let found =
        stdout_of(&describe(&["--tools", "examples/tools.toml", "--format", "json", "--search", "current time"]));
    let found: serde_json::Value = serde_json::from_str(&found).unwrap();
    let names: Vec<_> = found.as_array().unwrap().iter().map(|t| t["name"].clone()).collect();
    assert_eq!(names, ["now"]);
    let found = stdout_of(&describe(&["--tools", "examples/tools.toml", "--format", "pyi", "--search", "temperature"]));
    assert!(found.contains("def convert(") && !found.contains("def now("), "{found}");
}

#[test]
fn usage_errors() {
    let out = describe(&["--format", "pyi"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tools FILE"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = describe(&["--tools", "examples/tools.toml", "--format", "rs"]);
    assert_eq!(out.status.code(), Some(2));
    let out = describe(&["--tools", "examples/missing.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.toml"));
}
