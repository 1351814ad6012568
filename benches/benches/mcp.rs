//! What MCP adds, on the host: one downstream MCP tool call through the broker against
//! the same tool as a plain `Tool`, and one `run_python` round trip from an MCP client
//! against the same run made directly. Both ends are rmcp over in-memory pipes, so
//! the difference is the protocol's cost (JSON-RPC framing, serde, rmcp's dispatch on
//! both sides), not a process's or a network's; the tool itself does nothing.
//!
//! ```sh
//! WASMBOX_CACHE_DIR=target/wasmbox-cache cargo bench --profile dev \
//!   --config 'profile.dev.package.wasmbox-host.opt-level=2' --config 'profile.dev.package.wasmbox-mcp.opt-level=2' \
//!   -p wasmbox-benches --bench mcp
//! ```
//! (the dev profile with the wasmbox crates optimised too: it reuses the workspace's
//! wasmtime instead of building a release copy; docs/performance.md has the figures).

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, JsonObject, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool as McpTool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use wasmbox::{BrokerCtx, Engine, EngineConfig, Limits, Runtime, Sandbox, Scope, Tool, Tools};
use wasmbox_mcp::{CodeModeServer, DownstreamBuilder, Language, SandboxFactory, ToolAllowlist};

/// A server with one tool, `echo`, that answers its arguments as structured content.
#[derive(Clone)]
struct Echo;

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let Value::Object(schema) = json!({"type": "object"}) else { unreachable!() };
        Ok(ListToolsResult::with_all_items(vec![McpTool::new("echo", "Echoes its arguments", schema)]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        Ok(CallToolResult::structured(args).into())
    }
}

fn unbounded() -> Limits {
    Limits { max_tool_calls: u32::MAX, max_cumulative_result_bytes: u64::MAX, ..Limits::default() }
}

fn tool_call(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio");
    tool_call_on(c, &rt, "tool_call");
    // One thread: the protocol's own work, without the wake-ups across worker threads.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio");
    tool_call_on(c, &rt, "tool_call_one_thread");
}

fn tool_call_on(c: &mut Criterion, rt: &tokio::runtime::Runtime, group: &str) {
    let downstream = rt.block_on(async {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            let (read, write) = tokio::io::split(theirs);
            if let Ok(running) = Echo.serve((read, write)).await {
                let _ = running.waiting().await;
            }
        });
        let (read, write) = tokio::io::split(ours);
        let mut builder = DownstreamBuilder::new();
        builder.stream("fixture", ToolAllowlist::All, read, write);
        builder.start().await
    });
    let mut tools = Tools::new();
    for tool in downstream.tools().0 {
        tools.register(tool).expect("the fixture's tool");
    }
    tools.register(Tool::new("echo", "Echoes", json!({"type": "object"}), |args| async move { Ok(args) })).unwrap();
    let tools = Arc::new(tools);
    let args = r#"{"city": "Paris", "days": 3}"#;
    let mut broker = BrokerCtx::new(Arc::clone(&tools), Scope::All, unbounded());
    c.bench_function(&format!("mcp/{group}/plain_tool"), |b| {
        b.iter(|| rt.block_on(broker.call("echo", args)).expect("ok"));
    });
    let mut broker = BrokerCtx::new(tools, Scope::All, unbounded());
    c.bench_function(&format!("mcp/{group}/downstream_mcp"), |b| {
        b.iter(|| rt.block_on(broker.call("fixture__echo", args)).expect("ok"));
    });
}

fn run_python(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio");
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let python = Runtime::python(&engine).expect("the guests are built: run `cargo xtask guests`");
    let direct = Sandbox::new(python.clone(), Tools::new());
    c.bench_function("mcp/run_python/direct", |b| {
        b.iter(|| assert!(rt.block_on(direct.run("1 + 1")).is_ok()));
    });
    let client = rt.block_on(async {
        let factory: SandboxFactory = Arc::new(move |language, tools| {
            assert_eq!(language, Language::Python);
            Ok(Sandbox::new(python.clone(), tools))
        });
        let server = CodeModeServer::new(Tools::new(), None, Scope::None, factory);
        let (client_end, server_end) = tokio::io::duplex(1 << 20);
        tokio::spawn(async move {
            let (read, write) = tokio::io::split(server_end);
            let _ = server.serve_stream(read, write).await;
        });
        let (read, write) = tokio::io::split(client_end);
        ().serve((read, write)).await.expect("the client connects")
    });
    let mut args = JsonObject::new();
    args.insert("code".into(), json!("1 + 1"));
    let request = CallToolRequestParams::new("run_python").with_arguments(args);
    c.bench_function("mcp/run_python/mcp_client", |b| {
        b.iter(|| {
            let result = rt.block_on(client.peer().call_tool(request.clone())).expect("answered");
            assert_eq!(result.is_error, Some(false));
        });
    });
}

criterion_group!(benches, tool_call, run_python);
criterion_main!(benches);
