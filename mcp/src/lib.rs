//! Code mode over MCP: the server behind `wasmbox mcp`, and downstream MCP servers as
//! wasmbox tools.
//!
//! - [`CodeModeServer`] is an MCP server (stdio or streamable HTTP, built on `rmcp`)
//!   with four tools: `run_python` and `run_javascript`, whose descriptions carry typed
//!   stubs of every tool in the run's scope and whose results are the run's outcome
//!   (`structuredContent`, a text block, `isError` unless `ok`), `search_tools`, and
//!   `end_session` for the run tools' named sessions ([`sessions`]).
//! - [`Downstream`] starts the MCP servers of a servers file ([`McpConfig`]) once per
//!   process and offers each allowed tool as an ordinary [`wasmbox::Tool`]: every call
//!   goes through the broker (scope, budgets, the tool's `inputSchema`, audit, redaction)
//!   before the server sees it. Names that are not identifiers are mapped
//!   ([`names`]: `get-sum` of server `everything` is `everything__get_sum`).
//!
//! The core (`wasmbox`) knows nothing of MCP: this crate is a client of its public seams.
//!
//! # Use
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use wasmbox::{Engine, EngineConfig, Runtime, Sandbox, Scope, Tools};
//! use wasmbox_mcp::{CodeModeServer, Downstream, Language, McpConfig};
//!
//! let engine = Engine::new(EngineConfig::default())?;
//! let (python, js) = (Runtime::python(&engine)?, Runtime::javascript(&engine)?);
//! let downstream = Downstream::start(&McpConfig::load("servers.toml".as_ref())?).await;
//! let factory = Arc::new(move |language, tools| {
//!     let runtime = if language == Language::Python { python.clone() } else { js.clone() };
//!     Ok(Sandbox::new(runtime, tools))
//! });
//! CodeModeServer::new(Tools::new(), Some(downstream), Scope::All, factory).serve_stdio().await?;
//! # Ok(()) }
//! ```
//!
//! # Security
//! Downstream servers run as the user, outside the sandbox, with `PATH` and the
//! environment their entry sets; the guest reaches them only through the broker, and
//! only the tools a server's allowlist names. The HTTP endpoint binds loopback
//! addresses only and checks the `Host` header (DNS rebinding). See docs/mcp.md.

#![deny(missing_docs)]

pub mod config;
pub mod downstream;
pub mod names;
pub mod progress;
mod report;
pub mod server;
pub mod sessions;

pub use config::{ConfigError, McpConfig, ServerSpec, ToolAllowlist, TransportSpec};
pub use downstream::{Downstream, DownstreamBuilder, Refused, ServerStatus};
pub use server::{CodeModeServer, Language, SandboxFactory, ServeError};
