//! `wasmbox mcp`: the CLI's door to `wasmbox-mcp`. Reads `run`'s sandbox flags (tools
//! file, scope, limits, isolation) and a servers file, starts the downstream servers and
//! serves MCP on stdio or streamable HTTP. Stdout carries only the protocol.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use wasmbox::Scope;
use wasmbox_mcp::{CodeModeServer, Downstream, Language, McpConfig, SandboxFactory};

use crate::sandbox_flags::SandboxArgs;
use crate::{load_runtime, Lang};

#[derive(clap::Args)]
pub struct McpArgs {
    /// Downstream MCP servers (TOML, or the `mcpServers` JSON of desktop agents) whose
    /// allowed tools the code may call, as `<server>__<tool>` (docs/mcp.md).
    #[arg(long)]
    servers: Option<PathBuf>,
    /// Serve streamable HTTP at this loopback address (e.g. 127.0.0.1:8765; port 0
    /// picks one, printed on stderr) instead of stdio.
    #[arg(long)]
    http: Option<SocketAddr>,
    #[command(flatten)]
    sandbox: SandboxArgs,
}

pub async fn serve(args: McpArgs) -> Result<ExitCode> {
    let plan = args.sandbox.plan()?;
    let base = args.sandbox.command_tools()?;
    let downstream = match &args.servers {
        Some(path) => Some(Downstream::start(&McpConfig::load(path)?).await),
        None => None,
    };
    let scope = if args.sandbox.allow.iter().any(|a| a == "all") {
        Scope::All
    } else {
        // Downstream tools come and go (a server that is down, `list_changed`), so a
        // name nothing offers now is a warning, not an error as for `run`.
        let offered = downstream.as_ref().map(|d| d.tools().0).unwrap_or_default();
        for name in &args.sandbox.allow {
            if base.get(name).is_none() && !offered.iter().any(|t| t.name() == name) {
                tracing::warn!("--allow names `{name}`, which no tool offers now");
            }
        }
        Scope::only(args.sandbox.allow.iter().cloned())
    };
    let engine = plan.engine()?;
    let python = load_runtime(&engine, Lang::Python, None, false).context("loading the Python guest")?;
    let javascript = load_runtime(&engine, Lang::Js, None, false).context("loading the JavaScript guest")?;
    let factory: SandboxFactory = Arc::new(move |language, tools| {
        let runtime = if language == Language::Python { python.clone() } else { javascript.clone() };
        plan.sandbox(runtime, tools)
    });
    let server = CodeModeServer::new(base, downstream, scope, factory);
    match args.http {
        Some(addr) => {
            server.serve_http(addr, |bound| eprintln!("wasmbox: serving MCP at http://{bound}/mcp")).await?;
        }
        None => server.serve_stdio().await?,
    }
    Ok(ExitCode::SUCCESS)
}
