//! The servers file: which downstream MCP servers to start, how to reach them, and which
//! of their tools runs may be given.
//!
//! TOML (`servers.<name>` tables) or JSON (the `mcpServers` object desktop agents use;
//! `servers` is accepted too). A server has either a `command` (stdio) or a `url`
//! (streamable HTTP), and a `tools` allowlist, which is required: `["*"]` offers every
//! tool the server lists, now and after it changes its list.
//!
//! ```toml
//! [servers.everything]
//! command = "node_modules/.bin/mcp-server-everything"   # relative to this file's folder
//! args = ["stdio"]
//! env = { LOG_LEVEL = "warn" }                          # nothing else is inherited but PATH
//! tools = ["echo", "get-sum"]
//!
//! [servers.weather]
//! url = "http://127.0.0.1:8000/mcp"
//! headers = { Authorization = "Bearer …" }
//! tools = ["*"]
//! timeout_ms = 20000            # per call (default: the run's tool_timeout_ms)
//! startup_timeout_ms = 5000     # to connect and list tools (default 10 s)
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// How long a server has, by default, to start, answer `initialize` and list its tools.
pub const DEFAULT_STARTUP_TIMEOUT_MS: u64 = 10_000;

/// A servers file that could not be read or is not valid.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML or JSON of this shape.
    #[error("parsing {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// One server's entry is not usable.
    #[error("server `{server}` in {path}: {message}")]
    Server {
        /// The file.
        path: PathBuf,
        /// The server's name.
        server: String,
        /// What is wrong.
        message: String,
    },
}

/// Every downstream server of a servers file, by name.
#[derive(Debug, Clone, Default)]
pub struct McpConfig {
    /// The servers, by their configured name (which prefixes their tools' names).
    pub servers: BTreeMap<String, ServerSpec>,
}

/// One downstream server.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerSpec {
    /// How to reach it.
    pub transport: TransportSpec,
    /// Which of its tools may become wasmbox tools.
    pub tools: ToolAllowlist,
    /// How long it has to connect and list its tools.
    pub startup_timeout: Duration,
    /// Each call's deadline, when it overrides the run's `tool_timeout_ms`.
    pub call_timeout: Option<Duration>,
}

/// How a downstream server is reached.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TransportSpec {
    /// A child process speaking MCP over its stdin and stdout.
    Stdio {
        /// The program: a bare name is looked up on `PATH`, a path with a separator is
        /// relative to the servers file's folder.
        command: PathBuf,
        /// Its arguments.
        args: Vec<String>,
        /// Its environment besides `PATH` (nothing else of ours is passed on).
        env: BTreeMap<String, String>,
        /// Its working directory (default: the servers file's folder).
        cwd: PathBuf,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint, e.g. `http://127.0.0.1:8000/mcp`.
        url: String,
        /// Headers sent with every request (an `Authorization` header, say).
        headers: BTreeMap<String, String>,
    },
}

/// Which tools of a server are offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolAllowlist {
    /// Every tool it lists (`["*"]`).
    All,
    /// These tools, by the server's own names.
    Only(BTreeSet<String>),
}

impl ToolAllowlist {
    /// True when the server's tool `name` is offered.
    pub fn allows(&self, name: &str) -> bool {
        match self {
            ToolAllowlist::All => true,
            ToolAllowlist::Only(names) => names.contains(name),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default, alias = "mcpServers")]
    servers: BTreeMap<String, RawServer>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    tools: Option<Vec<String>>,
    startup_timeout_ms: Option<u64>,
    timeout_ms: Option<u64>,
    /// The desktop agents' transport tag: `stdio`, `http` or `streamable-http`.
    #[serde(rename = "type")]
    kind: Option<String>,
    /// The desktop agents' switch: a disabled server is left out.
    #[serde(default)]
    disabled: bool,
}

impl McpConfig {
    /// Reads a servers file: JSON when its name ends in `.json`, else TOML.
    ///
    /// # Errors
    /// An unreadable file, a syntax error, an unknown field, or a server without
    /// exactly one of `command` and `url`, without `tools`, or with an unsupported `type`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        let json = path.extension().is_some_and(|e| e == "json");
        let base = std::path::absolute(path)
            .ok()
            .and_then(|p| p.parent().map(Path::to_owned))
            .unwrap_or_else(|| PathBuf::from("."));
        Self::parse(&text, json, &base).map_err(|err| err.at(path))
    }

    /// Parses a servers file's text; relative commands and folders resolve against `base`.
    ///
    /// # Errors
    /// As [`McpConfig::load`].
    pub fn parse(text: &str, json: bool, base: &Path) -> Result<Self, ConfigError> {
        let raw: RawFile = if json {
            serde_json::from_str(text).map_err(|e| parse_error(e.to_string()))?
        } else {
            toml::from_str(text).map_err(|e| parse_error(e.to_string()))?
        };
        let mut servers = BTreeMap::new();
        for (name, server) in raw.servers {
            if server.disabled {
                continue;
            }
            let spec = server.into_spec(base).map_err(|message| ConfigError::Server {
                path: PathBuf::new(),
                server: name.clone(),
                message,
            })?;
            servers.insert(name, spec);
        }
        Ok(McpConfig { servers })
    }
}

fn parse_error(message: String) -> ConfigError {
    ConfigError::Parse { path: PathBuf::new(), message }
}

impl ConfigError {
    fn at(self, file: &Path) -> Self {
        match self {
            ConfigError::Parse { message, .. } => ConfigError::Parse { path: file.to_owned(), message },
            ConfigError::Server { server, message, .. } => {
                ConfigError::Server { path: file.to_owned(), server, message }
            }
            other => other,
        }
    }
}

impl RawServer {
    fn into_spec(self, base: &Path) -> Result<ServerSpec, String> {
        let tools = match self.tools {
            None => {
                return Err("`tools` is required: list the tools runs may call, or [\"*\"] for every one".into());
            }
            Some(names) if names.iter().any(|n| n == "*") => ToolAllowlist::All,
            Some(names) => ToolAllowlist::Only(names.into_iter().collect()),
        };
        if self.command.is_some() && !self.headers.is_empty() {
            return Err("`headers` belong to a `url` server".into());
        }
        let transport = match (self.command, self.url, self.kind.as_deref()) {
            (Some(_), Some(_), _) => return Err("give either `command` or `url`, not both".into()),
            (None, None, _) => return Err("give `command` (a stdio server) or `url` (a streamable HTTP server)".into()),
            (Some(command), None, None | Some("stdio")) => {
                let cwd = self.cwd.map_or_else(|| base.to_owned(), |dir| base.join(dir));
                let program = Path::new(&command);
                // A bare name is looked up on PATH; anything with a separator is file-relative.
                let command = if program.is_relative() && program.components().count() > 1 {
                    base.join(program)
                } else {
                    program.to_owned()
                };
                TransportSpec::Stdio { command, args: self.args, env: self.env, cwd }
            }
            (None, Some(url), None | Some("http" | "streamable-http" | "streamableHttp")) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!("`url` must be an http:// or https:// URL, not `{url}`"));
                }
                if !self.args.is_empty() || !self.env.is_empty() || self.cwd.is_some() {
                    return Err("`args`, `env` and `cwd` belong to a `command` server".into());
                }
                TransportSpec::Http { url, headers: self.headers }
            }
            (_, _, Some(kind)) => {
                return Err(format!(
                    "transport `{kind}` is not supported (stdio and streamable HTTP are; the old SSE transport is not)"
                ))
            }
        };
        Ok(ServerSpec {
            transport,
            tools,
            startup_timeout: Duration::from_millis(self.startup_timeout_ms.unwrap_or(DEFAULT_STARTUP_TIMEOUT_MS)),
            call_timeout: self.timeout_ms.map(Duration::from_millis),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_and_the_desktop_json_shape_give_the_same_servers() {
        let base = Path::new("/etc/agents");
        let toml = r#"
[servers.everything]
command = "bin/server"
args = ["stdio"]
env = { A = "1" }
tools = ["echo", "get-sum"]

[servers.remote]
url = "http://127.0.0.1:9/mcp"
headers = { Authorization = "Bearer x" }
tools = ["*"]
timeout_ms = 100
"#;
        let json = r#"{"mcpServers": {
            "everything": {"command": "bin/server", "args": ["stdio"], "env": {"A": "1"}, "tools": ["echo", "get-sum"]},
            "remote": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer x"}, "tools": ["*"], "timeout_ms": 100},
            "off": {"command": "x", "disabled": true}
        }}"#;
        for config in [McpConfig::parse(toml, false, base).unwrap(), McpConfig::parse(json, true, base).unwrap()] {
            assert_eq!(config.servers.len(), 2);
            let everything = &config.servers["everything"];
            let TransportSpec::Stdio { command, args, env, cwd } = &everything.transport else { panic!() };
            assert_eq!(command, Path::new("/etc/agents/bin/server"));
            assert_eq!((args.as_slice(), env["A"].as_str(), cwd.as_path()), (&["stdio".to_owned()][..], "1", base));
            assert!(everything.tools.allows("get-sum") && !everything.tools.allows("add"));
            let remote = &config.servers["remote"];
            assert!(
                matches!(&remote.transport, TransportSpec::Http { headers, .. } if headers["Authorization"] == "Bearer x")
            );
            assert_eq!(
                (remote.tools.clone(), remote.call_timeout),
                (ToolAllowlist::All, Some(Duration::from_millis(100)))
            );
        }
    }

    #[test]
    fn a_bare_command_is_looked_up_on_path() {
        let config = McpConfig::parse("[servers.a]\ncommand = \"node\"\ntools = []\n", false, Path::new("/x")).unwrap();
        assert!(
            matches!(&config.servers["a"].transport, TransportSpec::Stdio { command, .. } if command == Path::new("node"))
        );
    }

    #[test]
    fn unusable_entries_are_refused_with_the_reason() {
        let base = Path::new("/");
        for (text, expected) in [
            ("[servers.a]\ncommand = \"x\"\n", "`tools` is required"),
            ("[servers.a]\ntools = []\n", "give `command`"),
            ("[servers.a]\ncommand = \"x\"\nurl = \"http://h\"\ntools = []\n", "not both"),
            ("[servers.a]\nurl = \"ftp://h\"\ntools = []\n", "http:// or https://"),
            ("[servers.a]\nurl = \"http://h\"\ntype = \"sse\"\ntools = []\n", "`sse` is not supported"),
            ("[servers.a]\ncommand = \"x\"\ntools = []\nargz = 1\n", "unknown field"),
        ] {
            let err = McpConfig::parse(text, false, base).unwrap_err().to_string();
            assert!(err.contains(expected), "{text}: {err}");
        }
    }
}
