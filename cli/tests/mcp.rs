//! End-to-end tests of `wasmbox mcp` against MCP software nobody here wrote: the official
//! Python SDK (PyPI `mcp`) as the client, over stdio and streamable HTTP, and as a
//! downstream server over streamable HTTP and stdio; and the official
//! `@modelcontextprotocol/server-everything` (npm) as a downstream stdio server.
//!
//! `cargo xtask test` installs both under target/mcp-tools (cli/tests/mcp/requirements.txt
//! and package-lock.json pin them) and sets WASMBOX_REQUIRE_MCP_PARTNERS, so that there
//! these tests fail rather than skip when a partner is missing. Needs the guests.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

struct Partners {
    python: PathBuf,
    everything: PathBuf,
    scripts: PathBuf,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// The installed partners, or `None` (a skip) when they are missing and not required.
fn partners() -> Option<Partners> {
    let tools = root().join("target/mcp-tools");
    let partners = Partners {
        python: tools.join("venv/bin/python"),
        everything: tools.join("npm/node_modules/.bin/mcp-server-everything"),
        scripts: root().join("cli/tests/mcp"),
    };
    if partners.python.is_file() && partners.everything.is_file() {
        return Some(partners);
    }
    let missing = "the MCP partners are not installed under target/mcp-tools (`cargo xtask test` installs them)";
    assert!(std::env::var_os("WASMBOX_REQUIRE_MCP_PARTNERS").is_none(), "{missing}");
    eprintln!("skipping: {missing}");
    None
}

/// A child process killed when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The Python SDK's server over streamable HTTP, and its endpoint.
fn python_http_server(partners: &Partners) -> (Killed, String) {
    let mut child = Command::new(&partners.python)
        .arg(partners.scripts.join("server.py"))
        .arg("http")
        .stdout(Stdio::piped())
        .spawn()
        .expect("the Python MCP server starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port: u16 = line.trim().parse().unwrap_or_else(|_| panic!("the server printed {line:?}, not its port"));
    (Killed(child), format!("http://127.0.0.1:{port}/mcp"))
}

/// A servers file naming server-everything (stdio), the Python server (HTTP) and the
/// Python server again over stdio as `fragile` (its `crash` tool ends it).
fn servers_file(dir: &Path, partners: &Partners, python_url: &str) -> PathBuf {
    let text = format!(
        r#"
[servers.everything]
command = {everything:?}
args = ["stdio"]
tools = ["echo", "get-sum", "get-structured-content"]

[servers.py]
url = {python_url:?}
headers = {{ X-Caller = "wasmbox-e2e" }}
tools = ["multiply.numbers", "nap", "cancellations", "caller"]

[servers.fragile]
command = {python:?}
args = [{server:?}, "stdio"]
tools = ["crash", "multiply.numbers"]
"#,
        everything = partners.everything.display().to_string(),
        python = partners.python.display().to_string(),
        server = partners.scripts.join("server.py").display().to_string(),
    );
    let path = dir.join("servers.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs the SDK client with `plan` (see client.py) and returns what it printed.
fn client(partners: &Partners, plan: Value) -> Value {
    let output = Command::new(&partners.python)
        .arg(partners.scripts.join("client.py"))
        .arg(plan.to_string())
        .output()
        .expect("the Python MCP client starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the client failed: {stdout}\n{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"))
}

fn run(tool: &str, code: &str) -> Value {
    json!({"tool": tool, "arguments": {"code": code}})
}

/// A call of `tool` whose code is the next step of session `session`.
fn step(tool: &str, session: &str, code: &str) -> Value {
    json!({"tool": tool, "arguments": {"code": code, "session": session}})
}

fn wasmbox() -> String {
    env!("CARGO_BIN_EXE_wasmbox").to_owned()
}

/// The environment a `wasmbox` started by the client needs: the test's precompile cache.
fn cache_env() -> Value {
    match std::env::var("WASMBOX_CACHE_DIR") {
        Ok(dir) => json!({"WASMBOX_CACHE_DIR": dir}),
        Err(_) => json!({}),
    }
}

#[test]
fn the_python_sdk_runs_code_calling_real_servers_over_stdio() {
    let Some(partners) = partners() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (_python_server, url) = python_http_server(&partners);
    let servers = servers_file(dir.path(), &partners, &url);
    let calls = json!([
        run(
            "run_python",
            r#"
s = tools.everything__get_sum(a=2, b=3)
e = tools.everything__echo(message="hi")
w = tools.everything__get_structured_content(location="Chicago")
m = tools.py__multiply_numbers(a=6, b=7)
c = tools.py__caller()
print("called five tools")
{"sum": s, "echo": e, "weather": w, "product": m, "caller": c}
"#
        ),
        run("run_javascript", "const s = await tools.everything__get_sum({a: 4, b: 5}); return {s};"),
        run(
            "run_python",
            r#"
try:
    tools.everything__get_sum(a="two", b=3)
except ToolError as e:
    r = [type(e).__name__, str(e)]
r
"#
        ),
        run("run_python", "def f():\n    return 1 / 0\nf()\n"),
        // The run's deadline (--timeout-ms) ends the run while the server naps: the
        // call in flight is cancelled downstream, and the server counts it.
        run("run_python", "tools.py__nap(seconds=60)"),
        run("run_python", "tools.py__cancellations()"),
        run(
            "run_python",
            r#"
out = []
for call in (lambda: tools.fragile__crash(), lambda: tools.fragile__multiply_numbers(a=1, b=2)):
    try:
        call()
    except ToolError as e:
        out.append([type(e).__name__, str(e)])
out
"#
        ),
        run("run_python", "tools.everything__get_sum(a=1, b=1)"),
        // Named sessions: state persists from call to call, per language, until ended.
        step("run_python", "s1", "import math\nx = 20"),
        step("run_python", "s1", "math.floor(x * 2.1)"),
        step("run_javascript", "j1", "let n = 40;"),
        step("run_javascript", "j1", "return n + 2;"),
        step("run_javascript", "s1", "return 1;"),
        json!({"tool": "end_session", "arguments": {"session": "s1"}}),
        step("run_python", "s1", "x"),
    ]);
    let command =
        [&wasmbox(), "mcp", "--servers", &servers.display().to_string(), "--allow", "all", "--timeout-ms", "4000"];
    let out = client(&partners, json!({"transport": "stdio", "command": command, "env": cache_env(), "calls": calls}));

    let names: Vec<&str> = out["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["run_python", "run_javascript", "search_tools", "end_session"]);
    let description = out["tools"][0]["description"].as_str().unwrap();
    for tool in ["everything__get_sum", "py__multiply_numbers", "fragile__crash"] {
        assert!(description.contains(tool), "{tool} is not described: {description}");
    }

    let results = out["results"].as_array().unwrap();
    let structured = |i: usize| &results[i]["structuredContent"];
    assert_eq!(results[0]["isError"], false, "{}", results[0]);
    let value = &structured(0)["value"];
    assert_eq!(value["sum"], "The sum of 2 and 3 is 5.", "{value}");
    assert_eq!(value["echo"], "Echo: hi", "{value}");
    assert_eq!(value["weather"]["conditions"], "Light rain / drizzle", "structuredContent: {value}");
    assert_eq!(value["product"], json!({"result": 42}), "{value}");
    assert_eq!(value["caller"], json!({"result": "wasmbox-e2e"}), "the servers file's header: {value}");
    assert_eq!(structured(0)["stdout"], "called five tools\n");
    assert_eq!(structured(0)["tool_calls"].as_array().unwrap().len(), 5);
    assert!(results[0]["content"][0]["text"].as_str().unwrap().starts_with("status: ok"), "{}", results[0]);

    assert_eq!(structured(1)["value"], json!({"s": "The sum of 4 and 5 is 9."}), "{}", results[1]);

    // The broker's words: the schema check refused the call before the server saw it.
    let refused = &structured(2)["value"];
    assert_eq!(refused[0], "ToolInvalidArgs", "{refused}");
    assert!(refused[1].as_str().unwrap().contains("tool `everything__get_sum`"), "{refused}");

    assert_eq!(results[3]["isError"], true);
    assert_eq!(structured(3)["error"]["kind"], "ZeroDivisionError");
    assert!(structured(3)["error"]["traceback"].as_str().unwrap().contains("line 2"), "{}", results[3]);

    assert_eq!(results[4]["isError"], true);
    assert_eq!(structured(4)["status"], "timeout", "{}", results[4]);
    assert_eq!(structured(5)["value"], json!({"result": 1}), "the nap was not cancelled downstream: {}", results[5]);

    let crashed = &structured(6)["value"];
    assert_eq!(crashed[0][0], "ToolFailed", "{crashed}");
    assert_eq!(crashed[1][0], "ToolFailed", "{crashed}");
    assert!(crashed[1][1].as_str().unwrap().contains("`fragile` is not available"), "{crashed}");
    // The engine and the other servers carry on.
    assert_eq!(structured(7)["value"], "The sum of 1 and 1 is 2.", "{}", results[7]);

    assert_eq!(structured(8)["status"], "ok", "{}", results[8]);
    assert_eq!(structured(9)["value"], 42, "{}", results[9]);
    assert_eq!(structured(10)["status"], "ok", "{}", results[10]);
    assert_eq!(structured(11)["value"], 42, "{}", results[11]);
    assert_eq!(results[12]["isError"], true, "{}", results[12]);
    let text = results[12]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("`s1` is a Python session"), "{text}");
    assert_eq!(results[13]["isError"], false, "{}", results[13]);
    // Ended: the name starts anew.
    assert_eq!(structured(14)["error"]["kind"], "NameError", "{}", results[14]);
}

#[test]
fn the_python_sdk_runs_code_over_streamable_http_within_its_scope() {
    let Some(partners) = partners() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (_python_server, url) = python_http_server(&partners);
    let servers = servers_file(dir.path(), &partners, &url);
    // A command tool of a tools file sits beside the downstream ones.
    let tools = dir.path().join("tools.toml");
    let shout = r#"import json,sys; print(json.dumps(json.load(sys.stdin)["text"].upper()))"#;
    std::fs::write(&tools, format!("[[tool]]\nname = \"shout\"\nargv = [\"python3\", \"-c\", {shout:?}]\n")).unwrap();
    let mut child = Command::new(wasmbox())
        .args(["mcp", "--http", "127.0.0.1:0", "--servers"])
        .arg(&servers)
        .arg("--tools")
        .arg(&tools)
        .args(["--allow", "py__multiply_numbers,everything__echo,shout"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("wasmbox starts");
    let stderr = child.stderr.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let server = Killed(child);
    let mut endpoint = None;
    let mut seen = String::new();
    for line in BufReader::new(stderr).lines() {
        let line = line.unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if let Some(at) = line.strip_prefix("wasmbox: serving MCP at ") {
            endpoint = Some(at.to_owned());
            break;
        }
    }
    let endpoint = endpoint.unwrap_or_else(|| panic!("wasmbox mcp --http did not start:\n{seen}"));
    let calls = json!([
        run("run_python", "[tools.py__multiply_numbers(a=3, b=5), tools.shout(text='hi')]"),
        run(
            "run_javascript",
            r#"
try { await tools.everything__get_sum({a: 1, b: 2}); return "called"; }
catch (e) { return [e.constructor.name, e.message]; }
"#
        ),
    ]);
    let out = client(&partners, json!({"transport": "http", "url": endpoint, "calls": calls}));
    drop(server);

    let description = out["tools"][0]["description"].as_str().unwrap();
    assert!(description.contains("py__multiply_numbers") && description.contains("def shout"), "{description}");
    assert!(!description.contains("everything__get_sum"), "an out-of-scope tool is described: {description}");
    let results = out["results"].as_array().unwrap();
    assert_eq!(results[0]["structuredContent"]["value"], json!([{"result": 15}, "HI"]), "{}", results[0]);
    let denied = &results[1]["structuredContent"]["value"];
    assert_eq!(denied[0], "ToolDenied", "{}", results[1]);
    let mut printed = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut printed).unwrap();
    assert_eq!(printed, "", "with --http, stdout carries nothing");
}
