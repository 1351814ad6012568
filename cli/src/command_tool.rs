//! Command-backed tools: an operator-written file (TOML or JSON) that turns programs
//! into tools. A call runs the program with the argument object as JSON on stdin and
//! reads one JSON value from its stdout, under a deadline and an output cap.
//!
//! ```toml
//! [[tool]]
//! name = "weather"
//! description = "Current weather for a city"
//! args_schema = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
//! argv = ["python3", "weather.py"]   # relative paths resolve against this file's folder
//! timeout_ms = 5000                  # optional
//! max_output_bytes = 1048576         # optional
//! env = { API_BASE = "https://example.invalid" }  # optional; nothing else is inherited but PATH
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wasmbox::{Tool, ToolFailure, Tools};

const DEFAULT_TIMEOUT_MS: u64 = 10_000;
const DEFAULT_MAX_OUTPUT_BYTES: u64 = 1 << 20;
/// How much of a failing command's stderr is shown to the guest.
const STDERR_EXCERPT_BYTES: usize = 500;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolsFile {
    #[serde(default)]
    tool: Vec<CommandToolSpec>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommandToolSpec {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default = "any_object")]
    args_schema: Value,
    argv: Vec<String>,
    timeout_ms: Option<u64>,
    max_output_bytes: Option<u64>,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

fn any_object() -> Value {
    serde_json::json!({"type": "object"})
}

/// Reads a tools file (`.json`, else TOML) into a registry.
pub fn load(path: &Path) -> Result<Tools> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading tools file {}", path.display()))?;
    let file: ToolsFile = if path.extension().is_some_and(|e| e == "json") {
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?
    } else {
        toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?
    };
    // Relative programs and the working directory are the tools file's own folder.
    let absolute = std::path::absolute(path)?;
    let base = absolute.parent().map_or_else(|| PathBuf::from("."), Path::to_owned);
    let mut tools = Tools::new();
    for spec in file.tool {
        if spec.argv.is_empty() {
            bail!("tool `{}` in {}: argv must name a program", spec.name, path.display());
        }
        let timeout = Duration::from_millis(spec.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS));
        let tool = command_tool(spec, base.clone()).with_timeout(timeout);
        tools.register(tool).with_context(|| format!("in {}", path.display()))?;
    }
    Ok(tools)
}

fn command_tool(spec: CommandToolSpec, base: PathBuf) -> Tool {
    let (name, description, schema) = (spec.name.clone(), spec.description.clone(), spec.args_schema.clone());
    Tool::new(name, description, schema, move |args| {
        let (spec, base) = (spec.clone(), base.clone());
        async move { run_command(&spec, &base, &args).await }
    })
}

fn resolve_program(program: &str, base: &Path) -> PathBuf {
    let path = Path::new(program);
    // A bare name is looked up on PATH; anything with a separator is file-relative.
    if path.is_relative() && path.components().count() > 1 {
        base.join(path)
    } else {
        path.to_owned()
    }
}

async fn run_command(spec: &CommandToolSpec, base: &Path, args: &Value) -> Result<Value, ToolFailure> {
    let mut command = tokio::process::Command::new(resolve_program(&spec.argv[0], base));
    command
        .args(&spec.argv[1..])
        .current_dir(base)
        .env_clear()
        .envs(std::env::var_os("PATH").map(|path| ("PATH", path)))
        .envs(&spec.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // The broker drops this future on timeout; the child must not outlive it.
        .kill_on_drop(true);
    let mut child = command.spawn().map_err(|e| ToolFailure::new(format!("could not start the tool: {e}")))?;

    let input = args.to_string();
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let cap = spec.max_output_bytes.unwrap_or(DEFAULT_MAX_OUTPUT_BYTES);
    let mut stdout = child.stdout.take().expect("stdout is piped").take(cap + 1);
    let mut stderr = child.stderr.take().expect("stderr is piped").take(STDERR_EXCERPT_BYTES as u64);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let write = async {
        // A tool that exits without reading its input is not an error.
        let _ = stdin.write_all(input.as_bytes()).await;
        drop(stdin);
    };
    let (_, out_read, _) = tokio::join!(write, stdout.read_to_end(&mut out), stderr.read_to_end(&mut err));
    out_read.map_err(|e| ToolFailure::new(format!("reading the tool's output: {e}")))?;
    if out.len() as u64 > cap {
        return Err(ToolFailure::new(format!("the tool wrote more than {cap} bytes")));
    }
    let status = child.wait().await.map_err(|e| ToolFailure::new(format!("waiting for the tool: {e}")))?;
    if !status.success() {
        let excerpt = String::from_utf8_lossy(&err);
        return Err(ToolFailure::new(format!("the tool exited with {status}: {}", excerpt.trim())));
    }
    serde_json::from_slice(&out).map_err(|e| ToolFailure::new(format!("the tool's output is not JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_toml_and_rejects_unknown_fields() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tools.toml");
        std::fs::write(&path, "[[tool]]\nname = \"echo\"\nargv = [\"cat\"]\n").unwrap();
        let tools = load(&path).unwrap();
        assert_eq!(tools.get("echo").unwrap().args_schema(), &any_object());
        std::fs::write(&path, "[[tool]]\nname = \"echo\"\nargv = [\"cat\"]\nargs = 1\n").unwrap();
        assert!(format!("{:#}", load(&path).unwrap_err()).contains("unknown field"));
        std::fs::write(&path, "[[tool]]\nname = \"echo\"\nargv = []\n").unwrap();
        assert!(load(&path).unwrap_err().to_string().contains("argv"));
    }

    #[tokio::test]
    async fn a_command_gets_args_on_stdin_and_answers_json() {
        let spec = CommandToolSpec {
            name: "echo".into(),
            description: String::new(),
            args_schema: any_object(),
            argv: vec!["cat".into()],
            timeout_ms: None,
            max_output_bytes: Some(100),
            env: BTreeMap::new(),
        };
        let args = serde_json::json!({"a": [1, "x"]});
        assert_eq!(run_command(&spec, Path::new("."), &args).await.unwrap(), args);
        let big = serde_json::json!({"a": "x".repeat(200)});
        assert!(run_command(&spec, Path::new("."), &big).await.unwrap_err().0.contains("more than 100 bytes"));
        let failing = CommandToolSpec { argv: vec!["sh".into(), "-c".into(), "echo nope >&2; exit 3".into()], ..spec };
        let err = run_command(&failing, Path::new("."), &args).await.unwrap_err();
        assert!(err.0.contains("nope"), "{err}");
    }
}
