//! Downstream MCP servers as wasmbox tools.
//!
//! [`Downstream::start`] starts every server of a [`McpConfig`] once, concurrently, each
//! within its start-up deadline, and lists its tools. Each allowed tool becomes an
//! ordinary [`wasmbox::Tool`] (see [`Downstream::tools`]): its guest name comes from
//! [`crate::names`], its argument schema is the server's `inputSchema`, so the broker
//! checks scope, budgets and the schema, audits and redacts every call before the
//! server sees it, exactly as for any other tool.
//!
//! A call's result is the server's `structuredContent` when present, else its single
//! text block parsed as JSON, else the text, else the content list as JSON; a result
//! with `isError` is the guest's `ToolError` carrying the server's text. When the broker
//! drops a call (its deadline, the run's deadline, a cancelled run), rmcp tells the
//! server with `notifications/cancelled`.
//!
//! A server that cannot be started, does not finish the handshake in time, speaks
//! something that is not MCP, or exits later is *down*: its tools fail with a message
//! saying so (the tools an explicit allowlist names are registered anyway, so the model
//! learns why), and nothing else is affected. A server that announces
//! `notifications/tools/list_changed` is listed again, and [`Downstream::changes`] ticks.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientConfig, ContentBlock, Implementation, ProtocolVersion};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceError, ServiceExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, watch};
use wasmbox::{Tool, ToolFailure};

use crate::config::{McpConfig, ServerSpec, ToolAllowlist, TransportSpec, DEFAULT_STARTUP_TIMEOUT_MS};
use crate::names;

/// How many lines of a stdio server's stderr are kept for the log when it stops.
const STDERR_TAIL_LINES: usize = 20;

/// The downstream servers of one `wasmbox mcp` process, started once.
pub struct Downstream {
    servers: Vec<Arc<Server>>,
    changes: watch::Sender<u64>,
}

impl std::fmt::Debug for Downstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.servers.iter().map(|s| s.name.as_str()).collect();
        f.debug_struct("Downstream").field("servers", &names).finish_non_exhaustive()
    }
}

/// One server: its configuration and whether it is up.
struct Server {
    name: String,
    allow: ToolAllowlist,
    call_timeout: Option<Duration>,
    state: RwLock<State>,
    stderr_tail: Mutex<VecDeque<String>>,
}

enum State {
    Up { peer: Peer<RoleClient>, tools: Vec<rmcp::model::Tool> },
    Down(String),
}

/// What one server is doing, for descriptions and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerStatus {
    /// Its configured name.
    pub name: String,
    /// `None` when it is up; else why it is down.
    pub down: Option<String>,
}

/// A downstream tool that is not offered, and why (a name collision, a schema the
/// broker cannot compile).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The server's configured name.
    pub server: String,
    /// The tool's name on that server.
    pub tool: String,
    /// Why.
    pub reason: String,
}

type Connect =
    Box<dyn FnOnce(Listener) -> BoxFuture<'static, Result<RunningService<RoleClient, Listener>, Failure>> + Send>;

/// Why a server is down: what the model and the guest may read, and the whole story for
/// the log. The transport's own words can quote a URL with credentials in it, or a
/// path, so they go only to the log.
struct Failure {
    shown: String,
    detail: String,
}

impl Failure {
    fn new(shown: &str, detail: impl std::fmt::Display) -> Self {
        Failure { shown: shown.to_owned(), detail: format!("{shown}: {detail}") }
    }
}

/// Collects servers to start; [`DownstreamBuilder::start`] starts them.
#[derive(Default)]
pub struct DownstreamBuilder {
    pending: Vec<(Arc<Server>, Duration, Connect)>,
}

impl std::fmt::Debug for DownstreamBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DownstreamBuilder").field("servers", &self.pending.len()).finish()
    }
}

impl DownstreamBuilder {
    /// No servers yet.
    pub fn new() -> Self {
        DownstreamBuilder::default()
    }

    /// Adds a configured server.
    pub fn server(&mut self, name: &str, spec: &ServerSpec) -> &mut Self {
        let server = Server::new(name, spec.tools.clone(), spec.call_timeout);
        let connect: Connect = match spec.transport.clone() {
            TransportSpec::Stdio { command, args, env, cwd } => {
                let server = Arc::clone(&server);
                Box::new(move |listener| {
                    Box::pin(async move {
                        let mut child = tokio::process::Command::new(&command);
                        // Killed with its handle even when the runtime is shutting down,
                        // where rmcp's asynchronous kill on drop would never run.
                        child.args(&args).current_dir(&cwd).env_clear().kill_on_drop(true);
                        // Like a command tool, a server gets PATH and what its entry sets.
                        child.envs(std::env::var_os("PATH").map(|path| ("PATH", path))).envs(&env);
                        let (transport, stderr) = rmcp::transport::TokioChildProcess::builder(child)
                            .stderr(std::process::Stdio::piped())
                            .spawn()
                            .map_err(|e| {
                                Failure::new("it could not be started", format!("`{}`: {e}", command.display()))
                            })?;
                        if let Some(stderr) = stderr {
                            tokio::spawn(server.keep_stderr(stderr));
                        }
                        listener.serve(transport).await.map_err(handshake_failed)
                    })
                })
            }
            TransportSpec::Http { url, headers } => Box::new(move |listener| {
                Box::pin(async move {
                    let mut custom = std::collections::HashMap::new();
                    for (name, value) in headers {
                        let name = http::HeaderName::try_from(name.as_str()).map_err(|e| {
                            Failure::new("a header of its entry is not valid", format!("`{name}`: {e}"))
                        })?;
                        let value = http::HeaderValue::try_from(value.as_str()).map_err(|e| {
                            Failure::new("a header of its entry is not valid", format!("`{name}`'s value: {e}"))
                        })?;
                        custom.insert(name, value);
                    }
                    let config =
                        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                            url.as_str(),
                        )
                        .custom_headers(custom);
                    let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
                    listener.serve(transport).await.map_err(handshake_failed)
                })
            }),
        };
        self.pending.push((server, spec.startup_timeout, connect));
        self
    }

    /// Adds a server reached over a pair of byte streams (an in-memory pipe, a socket
    /// the caller opened).
    pub fn stream<R, W>(&mut self, name: &str, tools: ToolAllowlist, read: R, write: W) -> &mut Self
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let server = Server::new(name, tools, None);
        let connect: Connect = Box::new(move |listener| {
            Box::pin(async move { listener.serve((read, write)).await.map_err(handshake_failed) })
        });
        self.pending.push((server, Duration::from_millis(DEFAULT_STARTUP_TIMEOUT_MS), connect));
        self
    }

    /// Starts every server concurrently and waits until each is up or down. Never
    /// fails: a server that cannot start is down, with the reason.
    pub async fn start(self) -> Arc<Downstream> {
        let (changes, _) = watch::channel(0);
        let (refresh_tx, refresh_rx) = mpsc::unbounded_channel();
        let starts = self.pending.into_iter().enumerate().map(|(index, (server, deadline, connect))| {
            let listener = Listener { index, refresh: refresh_tx.clone() };
            async move {
                server.connect(deadline, connect(listener)).await;
                server
            }
        });
        let servers = futures::future::join_all(starts).await;
        let downstream = Arc::new(Downstream { servers, changes });
        tokio::spawn(refresh_on_notice(Arc::downgrade(&downstream), refresh_rx));
        downstream
    }
}

/// Lists a server's tools again each time it says they changed.
async fn refresh_on_notice(downstream: std::sync::Weak<Downstream>, mut notices: mpsc::UnboundedReceiver<usize>) {
    while let Some(index) = notices.recv().await {
        let Some(downstream) = downstream.upgrade() else { return };
        let Some(server) = downstream.servers.get(index) else { continue };
        let peer = match &*server.state.read().unwrap_or_else(|e| e.into_inner()) {
            State::Up { peer, .. } => peer.clone(),
            State::Down(_) => continue,
        };
        let listed =
            tokio::time::timeout(Duration::from_millis(DEFAULT_STARTUP_TIMEOUT_MS), peer.list_all_tools()).await;
        match listed {
            Ok(Ok(tools)) => {
                tracing::info!(server = %server.name, tools = tools.len(), "MCP server changed its tools");
                let mut state = server.state.write().unwrap_or_else(|e| e.into_inner());
                if let State::Up { tools: current, .. } = &mut *state {
                    *current = tools;
                }
            }
            Ok(Err(err)) => tracing::warn!(server = %server.name, "listing the changed tools failed: {err}"),
            Err(_) => tracing::warn!(server = %server.name, "listing the changed tools timed out"),
        }
        downstream.changes.send_modify(|generation| *generation += 1);
    }
}

/// Why a server did not complete the handshake: a category for the model and the guest,
/// the transport's own words (without rmcp's transport type names) for the log.
fn handshake_failed(err: rmcp::service::ClientInitializeError) -> Failure {
    use rmcp::service::ClientInitializeError as E;
    match err {
        E::ConnectionClosed(context) => Failure::new(
            "it closed the connection during the MCP handshake (it exited, or is not an MCP server)",
            context,
        ),
        E::TransportError { error, .. } => {
            let mut reason = error.error.to_string();
            let mut source = error.error.source();
            // reqwest's "error sending request" says why only in its sources.
            while let Some(inner) = source {
                reason = format!("{reason}: {inner}");
                source = inner.source();
            }
            Failure::new("it could not be reached", reason)
        }
        other => Failure::new("it did not complete the MCP handshake", other),
    }
}

impl Server {
    fn new(name: &str, allow: ToolAllowlist, call_timeout: Option<Duration>) -> Arc<Self> {
        Arc::new(Server {
            name: name.to_owned(),
            allow,
            call_timeout,
            state: RwLock::new(State::Down("it has not started yet".into())),
            stderr_tail: Mutex::new(VecDeque::new()),
        })
    }

    fn down(&self) -> Option<String> {
        match &*self.state.read().unwrap_or_else(|e| e.into_inner()) {
            State::Up { .. } => None,
            State::Down(reason) => Some(reason.clone()),
        }
    }

    fn set_down(&self, reason: String) {
        *self.state.write().unwrap_or_else(|e| e.into_inner()) = State::Down(reason);
    }

    /// Connects and lists the tools within `deadline`; then watches the connection, so
    /// that a server that stops is marked down.
    async fn connect(
        self: &Arc<Self>,
        deadline: Duration,
        connecting: BoxFuture<'static, Result<RunningService<RoleClient, Listener>, Failure>>,
    ) {
        let started = async {
            let running = connecting.await?;
            let tools =
                running.peer().list_all_tools().await.map_err(|e| Failure::new("listing its tools failed", e))?;
            Ok::<_, Failure>((running, tools))
        };
        let failure = match tokio::time::timeout(deadline, started).await {
            Ok(Ok((running, tools))) => return self.watch(running, tools),
            Ok(Err(failure)) => failure,
            Err(_) => {
                let shown = format!("it did not start and list its tools within {} ms", deadline.as_millis());
                Failure { detail: shown.clone(), shown }
            }
        };
        let tail: Vec<String> = self.stderr_tail.lock().unwrap_or_else(|e| e.into_inner()).iter().cloned().collect();
        tracing::warn!(server = %self.name, stderr = %tail.join("\n"), "MCP server is down: {}", failure.detail);
        self.set_down(failure.shown);
    }

    /// Marks the server up, and down again when its connection ends.
    fn watch(self: &Arc<Self>, running: RunningService<RoleClient, Listener>, tools: Vec<rmcp::model::Tool>) {
        *self.state.write().unwrap_or_else(|e| e.into_inner()) = State::Up { peer: running.peer().clone(), tools };
        let server = Arc::clone(self);
        tokio::spawn(async move {
            let quit = running.waiting().await;
            let tail: Vec<String> =
                server.stderr_tail.lock().unwrap_or_else(|e| e.into_inner()).iter().cloned().collect();
            tracing::warn!(server = %server.name, ?quit, stderr = %tail.join("\n"), "MCP server stopped");
            server.set_down("it stopped (its connection closed)".into());
        });
    }

    /// Sends the server's stderr to the log, keeping its last lines for when it stops.
    fn keep_stderr(self: &Arc<Self>, stderr: impl AsyncRead + Unpin + Send + 'static) -> BoxFuture<'static, ()> {
        let server = Arc::clone(self);
        Box::pin(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(server = %server.name, "stderr: {line}");
                let mut tail = server.stderr_tail.lock().unwrap_or_else(|e| e.into_inner());
                if tail.len() == STDERR_TAIL_LINES {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        })
    }

    async fn call(&self, tool: &str, args: Value) -> Result<Value, ToolFailure> {
        let peer = match &*self.state.read().unwrap_or_else(|e| e.into_inner()) {
            State::Up { peer, .. } => peer.clone(),
            State::Down(reason) => {
                return Err(ToolFailure::new(format!("the MCP server `{}` is not available: {reason}", self.name)))
            }
        };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        if let Value::Object(object) = args {
            params = params.with_arguments(object);
        }
        // Dropping this future (a deadline, a cancelled run) makes rmcp send
        // `notifications/cancelled` for the request.
        match peer.call_tool(params).await {
            Ok(result) => result_value(result),
            Err(ServiceError::McpError(error)) => {
                Err(ToolFailure::new(format!("the MCP server `{}` refused the call: {}", self.name, error.message)))
            }
            Err(err @ (ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
                tracing::warn!(server = %self.name, "MCP call failed: {err}");
                Err(ToolFailure::new(format!("the MCP server `{}` is not available: it stopped", self.name)))
            }
            Err(err) => Err(ToolFailure::new(format!("the MCP server `{}` failed: {err}", self.name))),
        }
    }
}

/// The guest's value of a downstream result: `structuredContent` when present, else a
/// single text block parsed as JSON, else the text, else the content list as JSON. A
/// result with `isError` is a failure carrying the server's text.
pub fn result_value(result: CallToolResult) -> Result<Value, ToolFailure> {
    let texts: Vec<&str> = result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.as_str()).collect();
    let all_text = texts.len() == result.content.len() && !texts.is_empty();
    if result.is_error == Some(true) {
        let message = if !texts.is_empty() {
            texts.join("\n")
        } else if let Some(structured) = &result.structured_content {
            structured.to_string()
        } else {
            "the tool reported an error without a message".to_owned()
        };
        return Err(ToolFailure::new(message));
    }
    if let Some(structured) = result.structured_content {
        return Ok(structured);
    }
    match texts[..] {
        [text] if all_text => Ok(serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))),
        _ if all_text => Ok(Value::String(texts.join("\n"))),
        _ => Ok(content_list(&result.content)),
    }
}

fn content_list(content: &[ContentBlock]) -> Value {
    serde_json::to_value(content).unwrap_or(Value::Array(Vec::new()))
}

impl Downstream {
    /// Starts every server of `config` (see [`DownstreamBuilder::start`]).
    pub async fn start(config: &McpConfig) -> Arc<Downstream> {
        let mut builder = DownstreamBuilder::new();
        for (name, spec) in &config.servers {
            builder.server(name, spec);
        }
        builder.start().await
    }

    /// Each server and whether it is up.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.servers.iter().map(|s| ServerStatus { name: s.name.clone(), down: s.down() }).collect()
    }

    /// Ticks each time a server's tools were listed again after it said they changed, so
    /// a holder of [`Downstream::tools`] knows to ask again.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The allowed tools of every server as wasmbox tools, and the ones refused. A
    /// server that is down offers the tools its allowlist names (they fail, saying
    /// why); with `["*"]` it offers none.
    pub fn tools(&self) -> (Vec<Tool>, Vec<Refused>) {
        struct Offer {
            server: Arc<Server>,
            tool: String,
            description: String,
            schema: Value,
        }
        let mut offers = Vec::new();
        for server in &self.servers {
            match &*server.state.read().unwrap_or_else(|e| e.into_inner()) {
                State::Up { tools, .. } => {
                    for tool in tools.iter().filter(|t| server.allow.allows(&t.name)) {
                        let description = match (&tool.title, &tool.description) {
                            (_, Some(description)) => description.to_string(),
                            (Some(title), None) => title.clone(),
                            (None, None) => String::new(),
                        };
                        offers.push(Offer {
                            server: Arc::clone(server),
                            tool: tool.name.to_string(),
                            description,
                            schema: Value::Object(tool.input_schema.as_ref().clone()),
                        });
                    }
                }
                State::Down(reason) => {
                    if let ToolAllowlist::Only(names) = &server.allow {
                        for name in names {
                            offers.push(Offer {
                                server: Arc::clone(server),
                                tool: name.clone(),
                                description: format!(
                                    "(unavailable: the MCP server `{}` is down: {reason})",
                                    server.name
                                ),
                                schema: serde_json::json!({"type": "object"}),
                            });
                        }
                    }
                }
            }
        }
        let assigned = names::assign(offers.iter().map(|o| (o.server.name.as_str(), o.tool.as_str())));
        let names: BTreeMap<(&str, &str), &Result<String, String>> =
            assigned.iter().map(|a| ((a.server, a.tool), &a.name)).collect();
        let (mut tools, mut refused) = (Vec::new(), Vec::new());
        let mut probe = wasmbox::Tools::new();
        for offer in &offers {
            let name = match names[&(offer.server.name.as_str(), offer.tool.as_str())] {
                Ok(name) => name.clone(),
                Err(reason) => {
                    refused.push(Refused {
                        server: offer.server.name.clone(),
                        tool: offer.tool.clone(),
                        reason: reason.clone(),
                    });
                    continue;
                }
            };
            let (server, remote) = (Arc::clone(&offer.server), offer.tool.clone());
            let mut tool = Tool::new(name, offer.description.clone(), offer.schema.clone(), move |args| {
                let (server, remote) = (Arc::clone(&server), remote.clone());
                async move { server.call(&remote, args).await }
            });
            if let Some(timeout) = offer.server.call_timeout {
                tool = tool.with_timeout(timeout);
            }
            // The broker compiles the schema when the tool is registered: find out here
            // which schemas it refuses, so one odd tool does not cost a whole catalogue.
            if let Err(err) = probe.register(tool.clone()) {
                refused.push(Refused {
                    server: offer.server.name.clone(),
                    tool: offer.tool.clone(),
                    reason: err.to_string(),
                });
                continue;
            }
            tools.push(tool);
        }
        for refusal in &refused {
            tracing::warn!(server = %refusal.server, tool = %refusal.tool, "MCP tool not offered: {}", refusal.reason);
        }
        (tools, refused)
    }
}

/// The client side of one connection: answers as wasmbox and hears `list_changed`.
struct Listener {
    index: usize,
    refresh: mpsc::UnboundedSender<usize>,
}

impl ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.refresh.send(self.index);
    }

    fn get_info(&self) -> ClientConfig {
        // The newest version with an `initialize` handshake: a session, in which a
        // server sends `list_changed` as a plain notification.
        ClientConfig::new(Default::default(), Implementation::new("wasmbox", env!("CARGO_PKG_VERSION")))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn results_map_structured_then_json_text_then_text_then_the_list() {
        let structured = CallToolResult::structured(json!({"t": 1}));
        assert_eq!(result_value(structured).unwrap(), json!({"t": 1}));
        let json_text = CallToolResult::success(vec![ContentBlock::text("[1, 2]")]);
        assert_eq!(result_value(json_text).unwrap(), json!([1, 2]));
        let text = CallToolResult::success(vec![ContentBlock::text("The sum is 3.")]);
        assert_eq!(result_value(text).unwrap(), json!("The sum is 3."));
        let two = CallToolResult::success(vec![ContentBlock::text("a"), ContentBlock::text("b")]);
        assert_eq!(result_value(two).unwrap(), json!("a\nb"));
        let image = CallToolResult::success(vec![ContentBlock::text("see"), ContentBlock::image("AAAA", "image/png")]);
        let list = result_value(image).unwrap();
        assert_eq!(list[1]["type"], "image", "{list}");
        assert_eq!(list[1]["mimeType"], "image/png", "{list}");
        let failed = CallToolResult::error(vec![ContentBlock::text("no such city")]);
        assert_eq!(result_value(failed).unwrap_err().0, "no such city");
    }
}
