//! rmcp on both ends, over in-memory pipes: a fixture MCP server (hyphenated names,
//! `isError`, `structuredContent`, a slow tool, a tool that changes the list) behind
//! [`Downstream`], and an rmcp client calling [`CodeModeServer`]'s tools, whose Python
//! runs call the fixture through the broker. Needs the built-in guests (`cargo xtask
//! guests`) and, to be quick, `WASMBOX_CACHE_DIR=target/wasmbox-cache`.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool as McpTool,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::{ClientHandler, ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use tokio::sync::Notify;
use wasmbox::{Engine, EngineConfig, Limits, Runtime, Sandbox, Scope, Tools};
use wasmbox_mcp::{CodeModeServer, Downstream, DownstreamBuilder, Language, SandboxFactory, ToolAllowlist};

/// What the fixture saw.
#[derive(Default)]
struct Seen {
    sums: AtomicU32,
    slow_started: Notify,
    slow_cancelled: Notify,
    cancelled: AtomicBool,
    grown: AtomicBool,
    /// The client has had `ready\n` as a progress notification.
    ready_seen: Notify,
}

#[derive(Clone)]
struct Fixture {
    seen: Arc<Seen>,
}

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(object) => Arc::new(object),
        _ => unreachable!(),
    }
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let numbers = json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"], "additionalProperties": false});
        let mut tools = vec![
            McpTool::new("get-sum", "Adds a and b", schema(numbers)),
            McpTool::new("fail", "Always fails", schema(json!({"type": "object"}))),
            McpTool::new("weather", "Weather, structured", schema(json!({"type": "object"}))),
            McpTool::new("slow", "Waits until cancelled", schema(json!({"type": "object"}))),
            McpTool::new("grow", "Adds the tool `late-tool`", schema(json!({"type": "object"}))),
            McpTool::new("await-ready", "Waits until the client saw `ready`", schema(json!({"type": "object"}))),
        ];
        if self.seen.grown.load(Ordering::SeqCst) {
            tools.push(McpTool::new("late-tool", "Arrived later", schema(json!({"type": "object"}))));
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let result = match request.name.as_ref() {
            "get-sum" => {
                self.seen.sums.fetch_add(1, Ordering::SeqCst);
                let sum = args["a"].as_f64().unwrap_or(f64::NAN) + args["b"].as_f64().unwrap_or(f64::NAN);
                CallToolResult::success(vec![ContentBlock::text(json!({"sum": sum}).to_string())])
            }
            "fail" => CallToolResult::error(vec![ContentBlock::text("no such city")]),
            "weather" => {
                let mut result = CallToolResult::success(vec![ContentBlock::text("18 degrees, sunny")]);
                result.structured_content = Some(json!({"temp_c": 18, "sky": "sunny"}));
                result
            }
            "slow" => {
                self.seen.slow_started.notify_one();
                context.ct.cancelled().await;
                self.seen.cancelled.store(true, Ordering::SeqCst);
                self.seen.slow_cancelled.notify_one();
                CallToolResult::error(vec![ContentBlock::text("cancelled")])
            }
            "grow" => {
                self.seen.grown.store(true, Ordering::SeqCst);
                let _ = context.peer.notify_tool_list_changed().await;
                CallToolResult::success(vec![ContentBlock::text("grown")])
            }
            "late-tool" => CallToolResult::success(vec![ContentBlock::text("\"late\"")]),
            "await-ready" => {
                self.seen.ready_seen.notified().await;
                CallToolResult::success(vec![ContentBlock::text("\"seen live\"")])
            }
            other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        };
        Ok(result.into())
    }
}

struct Setup {
    seen: Arc<Seen>,
    downstream: Arc<Downstream>,
    client: RunningService<RoleClient, Watcher>,
}

/// The agent's side: counts `tools/list_changed` from the code-mode server, and keeps
/// the progress notifications (message, progress).
#[derive(Clone, Default)]
struct Watcher {
    changed: Arc<Notify>,
    seen: Arc<Seen>,
    progress: Arc<std::sync::Mutex<Vec<(String, f64)>>>,
    progressed: Arc<Notify>,
}

impl ClientHandler for Watcher {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.notify_one();
    }

    // rmcp 3.11's client does not pass a notification's `_meta` on (the stream of each
    // message is checked on the wire by wasmbox-mcp's unit test instead).
    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        let message = params.message.unwrap_or_default();
        let mut progress = self.progress.lock().unwrap();
        let was_ready = progress.iter().map(|(m, _)| m.as_str()).collect::<String>().starts_with("ready\n");
        progress.push((message, params.progress));
        // Once per run (the test clears the list between runs).
        if !was_ready && progress.iter().map(|(m, _)| m.as_str()).collect::<String>().starts_with("ready\n") {
            self.seen.ready_seen.notify_one();
        }
        drop(progress);
        self.progressed.notify_one();
    }
}

fn engine() -> Engine {
    Engine::new(EngineConfig::default()).expect("an engine")
}

/// The fixture as downstream server `fixture` (every tool allowed) beside a server
/// `gone` whose pipe closes at once, and a client of a code-mode server over them.
async fn setup(scope: Scope, limits: Limits) -> Setup {
    let seen = Arc::new(Seen::default());
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let fixture = Fixture { seen: Arc::clone(&seen) };
    tokio::spawn(async move {
        let (read, write) = tokio::io::split(theirs);
        if let Ok(running) = rmcp::serve_server(fixture, (read, write)).await {
            let _ = running.waiting().await;
        }
    });
    let (gone, closed) = tokio::io::duplex(64);
    drop(closed);
    let mut builder = DownstreamBuilder::new();
    let (read, write) = tokio::io::split(ours);
    builder.stream("fixture", ToolAllowlist::All, read, write);
    let (read, write) = tokio::io::split(gone);
    builder.stream("gone", ToolAllowlist::Only(BTreeSet::from(["lookup".to_owned()])), read, write);
    let downstream = builder.start().await;

    let engine = engine();
    let python = Runtime::python(&engine).expect("the Python guest: run `cargo xtask guests`");
    let javascript = Runtime::javascript(&engine).expect("the JS guest: run `cargo xtask guests`");
    let factory: SandboxFactory = Arc::new(move |language, tools| {
        let runtime = if language == Language::Python { python.clone() } else { javascript.clone() };
        Ok(Sandbox::new(runtime, tools).limits(limits.clone()))
    });
    let server = CodeModeServer::new(Tools::new(), Some(Arc::clone(&downstream)), scope, factory);
    let (client_end, server_end) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let (read, write) = tokio::io::split(server_end);
        let _ = server.serve_stream(read, write).await;
    });
    let (read, write) = tokio::io::split(client_end);
    let watcher = Watcher { seen: Arc::clone(&seen), ..Watcher::default() };
    let client = watcher.serve((read, write)).await.expect("the client connects");
    Setup { seen, downstream, client }
}

fn run_args(code: &str) -> CallToolRequestParams {
    let mut args = JsonObject::new();
    args.insert("code".into(), json!(code));
    CallToolRequestParams::new("run_python").with_arguments(args)
}

async fn run(setup: &Setup, code: &str) -> (Value, bool) {
    let result = setup.client.peer().call_tool(run_args(code)).await.expect("the call is answered");
    let text = result.content[0].as_text().expect("a text block").text.clone();
    assert!(text.starts_with("status: "), "{text}");
    (result.structured_content.expect("structured content"), result.is_error == Some(true))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_calls_downstream_tools_through_the_broker() {
    let setup = setup(Scope::All, Limits::default()).await;
    let tools = setup.client.peer().list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["run_python", "run_javascript", "search_tools", "end_session"]);
    let description = tools[0].description.as_deref().unwrap();
    assert!(description.contains("fixture__get_sum"), "{description}");
    assert!(description.contains("the MCP server `gone` is unavailable"), "{description}");

    let code = r#"
s = tools.fixture__get_sum(a=1, b=2)
w = tools.fixture__weather()
try:
    tools.fixture__fail()
except ToolError as e:
    failed = [type(e).__name__, str(e)]
try:
    tools.gone__lookup()
except ToolError as e:
    gone = str(e)
print("done")
{"sum": s, "weather": w, "failed": failed, "gone": gone}
"#;
    let (outcome, is_error) = run(&setup, code).await;
    assert!(!is_error, "{outcome}");
    assert_eq!(outcome["status"], "ok");
    let value = &outcome["value"];
    assert_eq!(value["sum"], json!({"sum": 3.0}), "a JSON text block is parsed");
    assert_eq!(value["weather"], json!({"temp_c": 18, "sky": "sunny"}), "structuredContent wins over text");
    assert_eq!(value["failed"], json!(["ToolFailed", "tool `fixture__fail`: no such city"]), "isError is a ToolError");
    assert!(value["gone"].as_str().unwrap().contains("`gone` is not available"), "{value}");
    assert_eq!(outcome["stdout"], "done\n");
    let calls: Vec<&str> =
        outcome["tool_calls"].as_array().unwrap().iter().map(|c| c["tool"].as_str().unwrap()).collect();
    assert_eq!(calls, ["fixture__get_sum", "fixture__weather", "fixture__fail", "gone__lookup"]);

    // An exception is `isError`, with the traceback for the model.
    let (outcome, is_error) = run(&setup, "def f():\n    return 1 / 0\nf()\n").await;
    assert!(is_error);
    assert_eq!(outcome["status"], "error");
    assert_eq!(outcome["error"]["kind"], "ZeroDivisionError");
    assert!(outcome["error"]["traceback"].as_str().unwrap().contains("line 2"), "{outcome}");

    // Search returns the typed signatures of matching tools.
    let mut args = JsonObject::new();
    args.insert("query".into(), json!("sum"));
    let found = setup.client.peer().call_tool(CallToolRequestParams::new("search_tools").with_arguments(args)).await;
    let found = found.unwrap().structured_content.unwrap();
    assert_eq!(found["tools"], json!(["fixture__get_sum"]));
    assert!(found["python"].as_str().unwrap().contains("fixture__get_sum"), "{found}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_violation_and_a_denied_tool_never_reach_the_server() {
    let scope = Scope::only(["fixture__get_sum", "fixture__weather"]);
    let setup = setup(scope, Limits::default()).await;
    let code = r#"
out = []
for call in (lambda: tools.fixture__get_sum(a="one", b=2), lambda: tools.fixture__fail()):
    try:
        call()
    except ToolError as e:
        out.append([type(e).__name__, str(e)])
out
"#;
    let (outcome, _) = run(&setup, code).await;
    let value = &outcome["value"];
    assert_eq!(value[0][0], "ToolInvalidArgs", "{outcome}");
    assert!(value[0][1].as_str().unwrap().contains("`a`"), "{value}");
    assert_eq!(value[1][0], "ToolDenied", "{outcome}");
    assert_eq!(setup.seen.sums.load(Ordering::SeqCst), 0, "the server saw the invalid call");
    let tools = setup.client.peer().list_all_tools().await.unwrap();
    let description = tools[0].description.as_deref().unwrap();
    assert!(!description.contains("fixture__fail"), "an out-of-scope tool is not described: {description}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_timeout_cancels_the_downstream_call() {
    let limits = Limits { tool_timeout_ms: 300, ..Limits::default() };
    let setup = setup(Scope::All, limits).await;
    let code = "try:\n    tools.fixture__slow()\nexcept ToolError as e:\n    r = type(e).__name__\nr\n";
    let (outcome, _) = run(&setup, code).await;
    assert_eq!(outcome["value"], "ToolTimeout", "{outcome}");
    // Bounded only so that a lost notification fails instead of hanging the test.
    tokio::time::timeout(Duration::from_secs(30), setup.seen.slow_cancelled.notified())
        .await
        .unwrap_or_else(|_| assert!(setup.seen.cancelled.load(Ordering::SeqCst), "no notifications/cancelled"));
    assert!(setup.seen.cancelled.load(Ordering::SeqCst));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_cancels_a_run_cancels_its_downstream_call() {
    let setup = setup(Scope::All, Limits::default()).await;
    let peer = setup.client.peer().clone();
    let call = tokio::spawn(async move { peer.call_tool(run_args("tools.fixture__slow()")).await });
    setup.seen.slow_started.notified().await;
    // Dropping the request makes rmcp send notifications/cancelled to the code-mode
    // server, which cancels the run, which drops the downstream call.
    call.abort();
    tokio::time::timeout(Duration::from_secs(30), setup.seen.slow_cancelled.notified())
        .await
        .unwrap_or_else(|_| assert!(setup.seen.cancelled.load(Ordering::SeqCst), "no notifications/cancelled"));
    assert!(setup.seen.cancelled.load(Ordering::SeqCst));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_refreshes_the_catalogue() {
    let setup = setup(Scope::All, Limits::default()).await;
    let mut changes = setup.downstream.changes();
    let (outcome, _) = run(&setup, "tools.fixture__grow()").await;
    assert_eq!(outcome["value"], "grown", "{outcome}");
    tokio::time::timeout(Duration::from_secs(30), changes.changed()).await.expect("a refresh").unwrap();
    // The agent is told too, so it lists the run tools (and their stubs) again.
    let told = setup.client.service().changed.notified();
    tokio::time::timeout(Duration::from_secs(30), told).await.expect("no tools/list_changed reached the client");
    let (outcome, _) = run(&setup, "tools.fixture__late_tool()").await;
    assert_eq!(outcome["value"], "late", "{outcome}");
    let tools = setup.client.peer().list_all_tools().await.unwrap();
    assert!(tools[0].description.as_deref().unwrap().contains("fixture__late_tool"));
}

/// rmcp's client puts a progress token on every request: the run's output comes as
/// `notifications/progress` while the code runs. The guest prints `ready`, then waits in
/// a downstream tool until the client has had `ready` as a notification; were the output
/// sent only with the result, the tool would wait until its timeout and fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_output_reaches_the_client_as_progress_while_the_code_runs() {
    let limits = Limits { tool_timeout_ms: 60_000, timeout_ms: 90_000, ..Limits::default() };
    let setup = setup(Scope::All, limits).await;
    let code = "import sys\nprint('ready')\nprint('warn', file=sys.stderr)\nr = tools.fixture__await_ready()\nprint('after')\nr";
    let watcher = setup.client.service();
    // A run, then a step of a named session: both stream.
    for session in [None, Some("live")] {
        watcher.progress.lock().unwrap().clear();
        let outcome = match session {
            None => run(&setup, code).await.0,
            Some(name) => call(&setup, step_args("run_python", name, code)).await.1,
        };
        assert_eq!(outcome["value"], "seen live", "{session:?}: {outcome}");
        let output = (outcome["stdout"].as_str(), outcome["stderr"].as_str());
        assert_eq!(output, (Some("ready\nafter\n"), Some("warn\n")));
        // Every notification precedes the result on the wire, but the client may handle
        // them after it; bounded only so that a lost one fails instead of hanging the test.
        let collected = || -> String { watcher.progress.lock().unwrap().iter().map(|(m, _)| m.as_str()).collect() };
        while collected() != "ready\nwarn\nafter\n" {
            let more = tokio::time::timeout(Duration::from_secs(30), watcher.progressed.notified()).await;
            assert!(more.is_ok(), "{session:?}: notified: {:?}", watcher.progress.lock().unwrap());
        }
        let progress: Vec<f64> = watcher.progress.lock().unwrap().iter().map(|(_, p)| *p).collect();
        assert!(progress.windows(2).all(|w| w[0] < w[1]), "progress increases: {progress:?}");
    }
}

fn step_args(tool: &'static str, session: &str, code: &str) -> CallToolRequestParams {
    let mut args = JsonObject::new();
    args.insert("code".into(), json!(code));
    args.insert("session".into(), json!(session));
    CallToolRequestParams::new(tool).with_arguments(args)
}

/// The text and structured content of a call's result.
async fn call(setup: &Setup, params: CallToolRequestParams) -> (String, Value) {
    let result = setup.client.peer().call_tool(params).await.expect("the call is answered");
    let text = result.content[0].as_text().expect("a text block").text.clone();
    (text, result.structured_content.unwrap_or(Value::Null))
}

/// Calls that name a session run in one interpreter: a downstream tool's result kept
/// in a variable is there in the next call; a step that times out ends the session, the
/// next call says so, and the one after starts the name anew; at most
/// `MAX_SESSIONS` at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_sessions_keep_state_until_they_end() {
    let limits = Limits { timeout_ms: 3_000, ..Limits::default() };
    let setup = setup(Scope::All, limits).await;
    let (_, first) = call(&setup, step_args("run_python", "a", "s = tools.fixture__get_sum(a=1, b=2)")).await;
    assert_eq!(first["status"], "ok", "{first}");
    let (_, second) = call(&setup, step_args("run_python", "a", "s['sum'] + 39")).await;
    assert_eq!(second["value"], 42.0, "{second}");
    // A run without a session does not see it.
    let (fresh, _) = run(&setup, "s").await;
    assert_eq!(fresh["error"]["kind"], "NameError", "{fresh}");

    let (_, timed_out) = call(&setup, step_args("run_python", "a", "while True: pass")).await;
    assert_eq!(timed_out["status"], "timeout", "{timed_out}");
    let (_, ended) = call(&setup, step_args("run_python", "a", "s")).await;
    assert_eq!(ended["error"]["kind"], "session_ended", "{ended}");
    let (_, anew) = call(&setup, step_args("run_python", "a", "s")).await;
    assert_eq!(anew["error"]["kind"], "NameError", "the name starts anew: {anew}");

    for i in 1..wasmbox_mcp::sessions::MAX_SESSIONS {
        let (_, opened) = call(&setup, step_args("run_javascript", &format!("js{i}"), "globalThis.k = 1;")).await;
        assert_eq!(opened["status"], "ok", "{opened}");
    }
    let (text, _) = call(&setup, step_args("run_javascript", "one-too-many", "return 1;")).await;
    assert!(text.contains("open sessions"), "{text}");
    let mut args = JsonObject::new();
    args.insert("session".into(), json!("js1"));
    let (text, _) = call(&setup, CallToolRequestParams::new("end_session").with_arguments(args)).await;
    assert!(text.contains("ended the session `js1`"), "{text}");
    let (_, opened) = call(&setup, step_args("run_javascript", "one-too-many", "return 1;")).await;
    assert_eq!(opened["value"], 1, "{opened}");
    let (text, _) = call(&setup, step_args("run_python", "js2", "1")).await;
    assert!(text.contains("`js2` is a JavaScript session"), "{text}");
    let (text, _) = call(&setup, step_args("run_python", "no spaces", "1")).await;
    assert!(text.contains("`session` must be"), "{text}");
}
