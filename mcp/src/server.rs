//! The MCP server: `run_python`, `run_javascript`, `search_tools` and `end_session`.
//!
//! Each run tool's description carries typed stubs of every tool in the run's scope (in
//! the tool's language), how to return a value and the error classes; its result is the
//! run's outcome (`structuredContent` and text, `isError` unless `ok`). The catalogue is
//! the command tools plus the downstream servers' tools; when a downstream server changes
//! its tools, the catalogue is rebuilt before the next run and connected clients get
//! `tools/list_changed`. A run tool's optional `session` names a session of the client's
//! ([`crate::sessions`]) whose next step the code is.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ProgressToken, ServerCapabilities, ServerConfig, Tool as McpTool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::{json, Value};
use wasmbox::{CancelToken, RunRequest, Sandbox, Scope, ToolSummary, Tools};

use crate::downstream::{Downstream, Refused};
use crate::progress::OutputProgress;
use crate::report;
use crate::sessions::ClientSessions;

/// The run tool for Python code.
pub const RUN_PYTHON: &str = "run_python";
/// The run tool for JavaScript code.
pub const RUN_JAVASCRIPT: &str = "run_javascript";
/// The tool that finds tools by name or description.
pub const SEARCH_TOOLS: &str = "search_tools";
/// The tool that ends a named session of the run tools.
pub const END_SESSION: &str = "end_session";
/// Past this many bytes of stubs, a run tool's description names the tools and leaves
/// their signatures to `search_tools`.
pub const MAX_STUB_BYTES: usize = 16 * 1024;
/// The most matches `search_tools` returns.
pub const MAX_SEARCH_RESULTS: usize = 50;

/// A guest language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Language {
    /// CPython.
    Python,
    /// SpiderMonkey.
    JavaScript,
}

/// Builds the sandbox that runs one language's code with a given catalogue of tools:
/// the runtime, limits and isolation (the CLI builds it from `run`'s flags). The server
/// sets the scope.
pub type SandboxFactory = Arc<dyn Fn(Language, Tools) -> Result<Sandbox, wasmbox::Error> + Send + Sync>;

/// The MCP server of `wasmbox mcp`. Cheap to clone: every clone shares the catalogue,
/// the sandboxes, the downstream servers and the named sessions; each HTTP session of
/// MCP gets a server with sessions of its own.
#[derive(Clone)]
pub struct CodeModeServer {
    shared: Arc<Shared>,
    sessions: Arc<ClientSessions>,
}

impl std::fmt::Debug for CodeModeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeModeServer").field("scope", &self.shared.scope).finish_non_exhaustive()
    }
}

struct Shared {
    base: Tools,
    downstream: Option<Arc<Downstream>>,
    scope: Scope,
    factory: SandboxFactory,
    catalogue: Mutex<Option<Arc<Catalogue>>>,
    /// Connected clients, told when the catalogue changes.
    peers: Mutex<Vec<Peer<RoleServer>>>,
}

/// The tools of one downstream generation and the sandboxes built over them.
struct Catalogue {
    generation: u64,
    tools: Tools,
    /// The tools in scope, as the stubs and search see them.
    in_scope: Vec<ToolSummary>,
    refused: Vec<Refused>,
    sandboxes: Mutex<[Option<Sandbox>; 2]>,
}

/// Why the server could not serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The HTTP address is not a loopback address.
    #[error("--http must be a loopback address (127.0.0.1 or [::1]), not {0}: the endpoint has no authentication")]
    NotLoopback(SocketAddr),
    /// Binding or accepting failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The client never completed the MCP handshake.
    #[error("the MCP handshake failed: {0}")]
    Handshake(String),
}

impl CodeModeServer {
    /// A server whose runs may call the tools of `base` and of `downstream` that `scope`
    /// allows, in sandboxes from `factory`. Call from within a tokio runtime: it starts a
    /// task that tells clients when a downstream server changes its tools.
    pub fn new(base: Tools, downstream: Option<Arc<Downstream>>, scope: Scope, factory: SandboxFactory) -> Self {
        let server = CodeModeServer {
            shared: Arc::new(Shared {
                base,
                downstream,
                scope,
                factory,
                catalogue: Mutex::new(None),
                peers: Mutex::new(Vec::new()),
            }),
            sessions: Arc::default(),
        };
        if let Some(downstream) = &server.shared.downstream {
            tokio::spawn(announce_changes(Arc::downgrade(&server.shared), downstream.changes()));
        }
        server
    }

    /// Serves one client over stdin and stdout until it disconnects.
    ///
    /// # Errors
    /// The client did not complete the handshake.
    pub async fn serve_stdio(self) -> Result<(), ServeError> {
        self.serve_stream(tokio::io::stdin(), tokio::io::stdout()).await
    }

    /// Serves one client over a pair of byte streams until it disconnects.
    ///
    /// # Errors
    /// The client did not complete the handshake.
    pub async fn serve_stream<R, W>(self, read: R, write: W) -> Result<(), ServeError>
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let running =
            rmcp::serve_server(self, (read, write)).await.map_err(|e| ServeError::Handshake(e.to_string()))?;
        let _ = running.waiting().await;
        Ok(())
    }

    /// Serves streamable HTTP at `http://ADDR/mcp` (any path answers) until the process
    /// ends, calling `ready` with the bound address (the port, when `addr`'s was 0).
    ///
    /// # Errors
    /// `addr` is not a loopback address, or cannot be bound.
    pub async fn serve_http(self, addr: SocketAddr, ready: impl FnOnce(SocketAddr)) -> Result<(), ServeError> {
        use hyper_util::rt::TokioIo;
        use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
        use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

        if !addr.ip().is_loopback() {
            return Err(ServeError::NotLoopback(addr));
        }
        let listener = tokio::net::TcpListener::bind(addr).await?;
        ready(listener.local_addr()?);
        let service = StreamableHttpService::new(
            // Session names belong to the client that opened them.
            move || Ok(CodeModeServer { shared: Arc::clone(&self.shared), sessions: Arc::default() }),
            Arc::new(LocalSessionManager::default()),
            // Loopback hosts only (the default), against DNS rebinding.
            StreamableHttpServerConfig::default(),
        );
        let service = hyper_util::service::TowerToHyperService::new(service);
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of descriptors, say: keep serving the connections there are.
                    tracing::warn!("accepting an HTTP connection failed: {err}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let service = service.clone();
            tokio::spawn(async move {
                let connection =
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
                if let Err(err) = connection.await {
                    tracing::debug!("HTTP connection ended: {err}");
                }
            });
        }
    }

    /// The catalogue of the current downstream generation, built on first use.
    fn catalogue(&self) -> Arc<Catalogue> {
        let generation = self.shared.downstream.as_ref().map_or(0, |d| *d.changes().borrow());
        let mut current = self.shared.catalogue.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(catalogue) = current.as_ref().filter(|c| c.generation == generation) {
            return Arc::clone(catalogue);
        }
        let mut tools = self.shared.base.clone();
        let mut refused = Vec::new();
        if let Some(downstream) = &self.shared.downstream {
            let (offered, not_offered) = downstream.tools();
            refused = not_offered;
            for tool in offered {
                let name = tool.name().to_owned();
                if let Err(err) = tools.register(tool) {
                    tracing::warn!(tool = %name, "MCP tool not offered: {err}");
                    refused.push(Refused { server: String::new(), tool: name, reason: err.to_string() });
                }
            }
        }
        let in_scope = tools
            .iter()
            .filter(|tool| self.shared.scope.allows(tool.name()))
            .map(|tool| ToolSummary {
                name: tool.name().to_owned(),
                description: tool.description().to_owned(),
                args_schema: tool.args_schema().to_string(),
            })
            .collect();
        let catalogue =
            Arc::new(Catalogue { generation, tools, in_scope, refused, sandboxes: Mutex::new([None, None]) });
        *current = Some(Arc::clone(&catalogue));
        catalogue
    }

    fn sandbox(&self, catalogue: &Catalogue, language: Language) -> Result<Sandbox, wasmbox::Error> {
        let slot = match language {
            Language::Python => 0,
            Language::JavaScript => 1,
        };
        let mut sandboxes = catalogue.sandboxes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(sandbox) = &sandboxes[slot] {
            return Ok(sandbox.clone());
        }
        let sandbox = (self.shared.factory)(language, catalogue.tools.clone())?.scope(self.shared.scope.clone());
        sandboxes[slot] = Some(sandbox.clone());
        Ok(sandbox)
    }

    /// The tools this server offers, with descriptions for the current catalogue.
    pub fn tool_list(&self) -> Vec<McpTool> {
        let catalogue = self.catalogue();
        let unavailable = self.unavailable_note(&catalogue);
        let run_schema = |what: &str| {
            object(json!({
                "type": "object",
                "properties": {
                    "code": {"type": "string", "description": what},
                    "input": {"description": "Any JSON value, visible to the code as INPUT (JS: the global INPUT)."},
                    "session": {
                        "type": "string",
                        "pattern": "^[A-Za-z0-9_.-]{1,64}$",
                        "description": "Keeps state across calls: calls with the same session name run in one \
                            interpreter, so variables, imports, functions and files persist. Omit it for a fresh \
                            interpreter. A session ends when a call breaches a limit (timeout, memory, output), \
                            after 5 idle minutes, after an hour, or with end_session; the next call then says \
                            so, and the call after it starts the name anew."
                    }
                },
                "required": ["code"],
                "additionalProperties": false
            }))
        };
        let python = McpTool::new(
            RUN_PYTHON,
            run_description(Language::Python, &catalogue.in_scope, &unavailable),
            run_schema("Python 3 source. The value of the last expression statement, or output(value), is the result."),
        );
        let javascript = McpTool::new(
            RUN_JAVASCRIPT,
            run_description(Language::JavaScript, &catalogue.in_scope, &unavailable),
            run_schema("JavaScript: the body of an async function. `return value` or output(value) gives the result."),
        );
        let search = McpTool::new(
            SEARCH_TOOLS,
            "Finds tools the code of run_python and run_javascript can call, by words of their name or \
             description, and returns their typed signatures (Python and TypeScript).",
            object(json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Words to look for."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_RESULTS, "default": 10}
                },
                "required": ["query"],
                "additionalProperties": false
            })),
        );
        let end_session = McpTool::new(
            END_SESSION,
            "Ends a session of run_python or run_javascript (see their `session` argument), freeing its \
             interpreter.",
            object(json!({
                "type": "object",
                "properties": {"session": {"type": "string", "description": "The session's name."}},
                "required": ["session"],
                "additionalProperties": false
            })),
        );
        vec![python, javascript, search, end_session]
    }

    fn unavailable_note(&self, catalogue: &Catalogue) -> String {
        let mut lines = Vec::new();
        if let Some(downstream) = &self.shared.downstream {
            for status in downstream.status() {
                if let Some(reason) = status.down {
                    lines.push(format!("- the MCP server `{}` is unavailable: {reason}", status.name));
                }
            }
        }
        for refused in &catalogue.refused {
            lines.push(format!("- `{}` is not offered: {}", refused.tool, refused.reason));
        }
        lines.join("\n")
    }

    /// Runs the code of `args`, stopped when `ct` completes (the client cancelled), its
    /// output sent to the client as it comes when the request carried a progress token
    /// ([`crate::progress`]).
    async fn run(
        &self,
        language: Language,
        args: JsonObject,
        ct: impl std::future::Future<Output = ()>,
        progress: Option<(Peer<RoleServer>, ProgressToken)>,
    ) -> CallToolResult {
        let Some(Value::String(code)) = args.get("code") else {
            return failure("`code` must be a string of source code");
        };
        let input = args.get("input").cloned().unwrap_or(Value::Null);
        match args.get("session") {
            None => {}
            Some(Value::String(name)) => return self.step(language, name, code, &input, ct, progress).await,
            Some(_) => return failure("`session` must be a string"),
        }
        let catalogue = self.catalogue();
        let sandbox = match self.sandbox(&catalogue, language) {
            Ok(sandbox) => sandbox,
            Err(err) => {
                tracing::error!("building the sandbox failed: {err}");
                return failure(&format!("the sandbox could not be set up: {err}"));
            }
        };
        let request = RunRequest::new(code.as_str()).input(input);
        let outcome = reporting(request, ct, progress, |request| sandbox.run_with(request)).await;
        report::run_result(&outcome)
    }

    /// Runs `code` as the next step of the client's session `name`, opened on first use,
    /// its output sent as progress like a run's.
    async fn step(
        &self,
        language: Language,
        name: &str,
        code: &str,
        input: &Value,
        ct: impl std::future::Future<Output = ()>,
        progress: Option<(Peer<RoleServer>, ProgressToken)>,
    ) -> CallToolResult {
        let open = self.sessions.get_or_open(name, language, || {
            self.sandbox(&self.catalogue(), language).map_err(|err| {
                tracing::error!("building the sandbox failed: {err}");
                format!("the sandbox could not be set up: {err}")
            })
        });
        let session = match open.await {
            Ok(session) => session,
            Err(message) => return failure(&message),
        };
        // A cancelled step ends its session.
        let request = RunRequest::new(code).input(input.clone());
        let outcome = reporting(request, ct, progress, |request| session.run_with(request)).await;
        self.sessions.after_step(name, &session, &outcome);
        report::run_result(&outcome)
    }

    fn end_session(&self, args: &JsonObject) -> CallToolResult {
        let Some(Value::String(name)) = args.get("session") else {
            return failure("`session` must be a string");
        };
        if self.sessions.end(name) {
            CallToolResult::success(vec![ContentBlock::text(format!("ended the session `{name}`"))])
        } else {
            failure(&format!("there is no open session `{name}`"))
        }
    }

    fn search(&self, args: &JsonObject) -> CallToolResult {
        let Some(Value::String(query)) = args.get("query") else {
            return failure("`query` must be a string");
        };
        let limit = args.get("limit").and_then(Value::as_u64).unwrap_or(10).clamp(1, MAX_SEARCH_RESULTS as u64);
        let catalogue = self.catalogue();
        let found: Vec<ToolSummary> =
            wasmbox_stubs::search(&catalogue.in_scope, query, limit as usize).into_iter().cloned().collect();
        let names: Vec<&str> = found.iter().map(|t| t.name.as_str()).collect();
        let python = wasmbox_stubs::python(&found);
        let typescript = wasmbox_stubs::typescript(&found);
        let text = if found.is_empty() {
            format!("No tool matches `{query}`.")
        } else {
            format!("{} tools match.\n\nPython:\n{python}\n\nTypeScript:\n{typescript}\n", found.len())
        };
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        result.structured_content = Some(json!({"tools": names, "python": python, "typescript": typescript}));
        result
    }
}

/// The outcome of `run(request)`, cancelled when `ct` completes (the client sent
/// notifications/cancelled: the run ends `cancelled`, and its tool calls in flight are
/// dropped, downstream ones cancelled), its output sent to the client as it comes when
/// the call carried a progress token ([`crate::progress`]).
async fn reporting<F>(
    request: RunRequest,
    ct: impl std::future::Future<Output = ()>,
    progress: Option<(Peer<RoleServer>, ProgressToken)>,
    run: impl FnOnce(RunRequest) -> F,
) -> wasmbox::Outcome
where
    F: std::future::Future<Output = wasmbox::Outcome>,
{
    let cancel = CancelToken::new();
    let mut request = request.cancel(cancel.clone());
    let progress = progress.map(|(peer, token)| OutputProgress::start(peer, token));
    if let Some(progress) = &progress {
        request = request.output_sink(progress.sink());
    }
    let run = run(request);
    tokio::pin!(run);
    let outcome = tokio::select! {
        outcome = &mut run => outcome,
        () = ct => {
            cancel.cancel();
            run.await
        }
    };
    if let Some(progress) = progress {
        progress.finish().await;
    }
    outcome
}

/// A run tool's description: what the code can call, typed, and how to use it.
fn run_description(language: Language, in_scope: &[ToolSummary], unavailable: &str) -> String {
    let (stubs, intro, returning, errors) = match language {
        Language::Python => (
            wasmbox_stubs::python(in_scope),
            "Runs Python 3 (CPython 3.14, most of the standard library) in a WebAssembly sandbox with no \
             host files (a scratch /tmp of its own), network or environment, and returns its outcome: \
             status, value, stdout, stderr, error with traceback, and the tool calls it made.",
            "Return a value with `output(value)` or by ending with an expression; print() goes to stdout. \
             Values are JSON. Call a tool as `tools.NAME(arg=...)` (or `await tools.NAME(...)`; \
             the calls in one asyncio.gather run at the same time).",
            "A refused or failed call raises a `ToolError` subclass: `ToolDenied`, `ToolBudgetExhausted`, \
             `ToolInvalidArgs`, `ToolFailed` (the tool itself failed), `ToolTimeout`; `e.kind` names it.",
        ),
        Language::JavaScript => (
            wasmbox_stubs::typescript(in_scope),
            "Runs JavaScript (SpiderMonkey, no fetch; Intl for en, en-GB, de, fr, es, it, pt, nl, ja, zh) in a \
             WebAssembly sandbox with no host files (`fs`, also `require('fs')`, with Node's functions over \
             a scratch /tmp of its own), network or environment, and returns its outcome: status, value, stdout, \
             stderr, error with stack, and the tool calls it made.",
            "The code is the body of an async function: `return value` or `output(value)` gives the result; \
             console.log goes to stdout. Values are JSON. Call a tool as `await tools.NAME({arg: ...})`; \
             the calls in one Promise.all run at the same time.",
            "A refused or failed call throws a `ToolError` subclass: `ToolDenied`, `ToolBudgetExhausted`, \
             `ToolInvalidArgs`, `ToolFailed` (the tool itself failed), `ToolTimeout`; `e.kind` names it.",
        ),
    };
    let mut text = format!("{intro}\n\n");
    if !in_scope.is_empty() && stubs.len() <= MAX_STUB_BYTES {
        // The stubs open with how to call, how to return a value and the error classes.
        text.push_str("The code can call these tools, and no others:\n\n");
        text.push_str(&stubs);
        text.push('\n');
    } else {
        text.push_str(&format!("{returning}\n{errors}\n\n"));
        if in_scope.is_empty() {
            text.push_str("No tools are available to the code.\n");
        } else {
            let names: Vec<&str> = in_scope.iter().map(|t| t.name.as_str()).collect();
            text.push_str(&format!(
                "The code can call {} tools: {}. `{SEARCH_TOOLS}` gives their signatures.\n",
                names.len(),
                names.join(", ")
            ));
        }
    }
    if !unavailable.is_empty() {
        text.push_str(&format!("\nNot available now:\n{unavailable}\n"));
    }
    text
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        _ => JsonObject::new(),
    }
}

fn failure(message: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.to_owned())])
}

/// Tells connected clients `tools/list_changed` whenever the downstream catalogue changes.
async fn announce_changes(shared: std::sync::Weak<Shared>, mut changes: tokio::sync::watch::Receiver<u64>) {
    while changes.changed().await.is_ok() {
        let Some(shared) = shared.upgrade() else { return };
        let peers: Vec<Peer<RoleServer>> = {
            let mut peers = shared.peers.lock().unwrap_or_else(|e| e.into_inner());
            peers.retain(|peer| !peer.is_transport_closed());
            peers.clone()
        };
        for peer in peers {
            if let Err(err) = peer.notify_tool_list_changed().await {
                tracing::debug!("telling a client its tools changed failed: {err}");
            }
        }
    }
}

impl ServerHandler for CodeModeServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build())
            .with_server_info(Implementation::new("wasmbox", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Write one script that calls many tools: run_python or run_javascript run it in a sandbox; \
                 their descriptions list the tools the code can call, search_tools finds more.",
            )
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.shared.peers.lock().unwrap_or_else(|e| e.into_inner()).push(context.peer);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tool_list()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let progress = context.meta.get_progress_token().map(|token| (context.peer.clone(), token));
        let result = match request.name.as_ref() {
            RUN_PYTHON => self.run(Language::Python, args, context.ct.cancelled(), progress).await,
            RUN_JAVASCRIPT => self.run(Language::JavaScript, args, context.ct.cancelled(), progress).await,
            SEARCH_TOOLS => self.search(&args),
            END_SESSION => self.end_session(&args),
            other => {
                return Err(ErrorData::invalid_params(Cow::Owned(format!("no tool named `{other}`")), None));
            }
        };
        Ok(result.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(name: &str) -> ToolSummary {
        let schema =
            json!({"type": "object", "properties": {"city": {"type": "string", "description": "x".repeat(400)}}});
        ToolSummary { name: name.into(), description: "Looks something up".into(), args_schema: schema.to_string() }
    }

    #[test]
    fn a_run_description_carries_stubs_until_they_are_too_large() {
        let few: Vec<ToolSummary> = (0..3).map(|i| summary(&format!("tool_{i}"))).collect();
        let text = run_description(Language::Python, &few, "");
        assert!(text.contains("class ToolError"), "{text}");
        assert!(text.contains("tool_2"), "{text}");
        let typescript = run_description(Language::JavaScript, &few, "- `x` is down");
        assert!(typescript.contains("Promise<"), "{typescript}");
        assert!(typescript.ends_with("Not available now:\n- `x` is down\n"), "{typescript}");

        let many: Vec<ToolSummary> = (0..200).map(|i| summary(&format!("tool_{i}"))).collect();
        assert!(wasmbox_stubs::python(&many).len() > MAX_STUB_BYTES);
        let text = run_description(Language::Python, &many, "");
        assert!(!text.contains("class ToolError"), "the stubs were inlined");
        assert!(text.contains("tool_199") && text.contains(SEARCH_TOOLS), "{text}");
        assert!(text.contains("ToolInvalidArgs"), "the error classes are named without the stubs: {text}");
        assert!(run_description(Language::Python, &[], "").contains("No tools are available"));
    }
}
