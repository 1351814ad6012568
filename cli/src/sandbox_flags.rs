//! The flags that shape a sandbox — its tools file, scope, limits and isolation — shared
//! by `wasmbox run` and `wasmbox mcp`, so both read them the same way.

use std::path::PathBuf;

use anyhow::{bail, Result};
use wasmbox::worker::WorkerOptions;
use wasmbox::{DockerOptions, Engine, EngineConfig, Isolation, Limits, Runtime, Sandbox, Scope, Tools};

use crate::command_tool;

#[derive(clap::Args)]
pub struct SandboxArgs {
    /// A file of command-backed tools (TOML or JSON).
    #[arg(long)]
    pub tools: Option<PathBuf>,
    /// Tools the script may call, comma-separated, or `all`. Default: none.
    #[arg(long, value_delimiter = ',')]
    pub allow: Vec<String>,
    /// Wall-clock deadline of the run.
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// Memory cap of the guest, in MiB.
    #[arg(long)]
    memory_mb: Option<u64>,
    /// A deterministic fuel budget (thousands per Python loop iteration). Turns on fuel
    /// metering, which makes compute markedly slower; the deadline bounds every run anyway.
    #[arg(long)]
    fuel: Option<u64>,
    /// Ceiling on tool calls.
    #[arg(long)]
    max_tool_calls: Option<u32>,
    /// Where the guest runs: `inproc` (this process), `worker` (a child process),
    /// `bwrap`, `docker` or `seatbelt` (the child under that OS sandbox). A wrapper that
    /// is not available here is an error, never a silent fallback.
    #[arg(long, default_value = "inproc")]
    isolation: Isolation,
    /// The image for `--isolation docker`.
    #[arg(long, default_value = wasmbox::DEFAULT_DOCKER_IMAGE)]
    docker_image: String,
}

/// What the flags decide, ready to build engines and sandboxes from.
#[derive(Clone, Debug)]
pub struct SandboxPlan {
    pub limits: Limits,
    isolation: Isolation,
    worker: WorkerOptions,
}

impl SandboxArgs {
    /// The command tools of `--tools`, or none.
    pub fn command_tools(&self) -> Result<Tools> {
        match &self.tools {
            Some(path) => command_tool::load(path),
            None => Ok(Tools::new()),
        }
    }

    /// The checked limits, isolation and worker settings.
    pub fn plan(&self) -> Result<SandboxPlan> {
        let limits = self.limits();
        limits.validate()?;
        let isolation = match &self.isolation {
            Isolation::Docker(options) => {
                Isolation::Docker(DockerOptions { image: self.docker_image.clone(), ..options.clone() })
            }
            other => other.clone(),
        };
        // This binary serves the worker side too.
        let worker = WorkerOptions { program: Some(std::env::current_exe()?), ..WorkerOptions::default() };
        Ok(SandboxPlan { limits, isolation, worker })
    }

    fn limits(&self) -> Limits {
        let mut limits = Limits::default();
        if let Some(ms) = self.timeout_ms {
            limits.timeout_ms = ms;
        }
        if let Some(mb) = self.memory_mb {
            limits.max_memory_bytes = mb.saturating_mul(1 << 20);
        }
        if let Some(fuel) = self.fuel {
            limits.fuel = Some(fuel);
        }
        if let Some(calls) = self.max_tool_calls {
            limits.max_tool_calls = calls;
        }
        limits
    }
}

impl SandboxPlan {
    /// The engine these runs need (fuel metering only with a fuel budget).
    pub fn engine(&self) -> Result<Engine> {
        Ok(Engine::new(EngineConfig { fuel_metering: self.limits.fuel.is_some(), ..EngineConfig::default() })?)
    }

    /// A sandbox over `runtime` with `tools`, these limits and this isolation; the caller
    /// sets the scope.
    pub fn sandbox(&self, runtime: Runtime, tools: Tools) -> Result<Sandbox, wasmbox::Error> {
        Sandbox::new(runtime, tools)
            .limits(self.limits.clone())
            .isolation_with(self.isolation.clone(), self.worker.clone())
    }
}

/// The scope `--allow` names; every name must be a tool of `tools`.
pub fn scope_from(allow: &[String], tools: &Tools) -> Result<Scope> {
    if allow.iter().any(|a| a == "all") {
        return Ok(Scope::All);
    }
    if let Some(unknown) = allow.iter().find(|name| tools.get(name).is_none()) {
        bail!("--allow names `{unknown}`, which no --tools file defines");
    }
    Ok(Scope::only(allow.iter().cloned()))
}
