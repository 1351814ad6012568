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
//!
//! The program runs as a process tree ([`ProcessTree`]): at its timeout, or when it
//! exits, whatever it started (a `sh -c` pipeline's processes) is killed with it. Its
//! stderr is read to the end and only its tail kept. When it fails, the guest is told
//! its exit status and the last line of its stderr with every `env` value masked (an API
//! key the tool echoes stays with the operator); the host log gets the masked tail.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use wasmbox::process::ProcessTree;
use wasmbox::{Tool, ToolFailure, Tools, REDACTED};

const DEFAULT_TIMEOUT_MS: u64 = 10_000;
const DEFAULT_MAX_OUTPUT_BYTES: u64 = 1 << 20;
/// How much of a tool's stderr is kept (its end) for the host log; the rest is read
/// and dropped, so a tool never blocks on a full pipe.
const STDERR_TAIL_BYTES: usize = 4096;
/// How much of that, its last line with configured values masked, the guest is shown.
const GUEST_EXCERPT_CHARS: usize = 200;

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
        .stderr(Stdio::piped());
    // The broker drops this future on timeout; dropping the tree kills the tool and
    // everything it started (a `sh -c` pipeline's processes too), not just the tool.
    let mut tree =
        ProcessTree::spawn(&mut command).map_err(|e| ToolFailure::new(format!("could not start the tool: {e}")))?;
    let child = tree.child_mut();
    let (Some(mut stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(ToolFailure::new("the tool's pipes were not created"));
    };

    let input = args.to_string();
    let cap = spec.max_output_bytes.unwrap_or(DEFAULT_MAX_OUTPUT_BYTES);
    let write = async {
        // A tool that exits without reading its input is not an error.
        let _ = stdin.write_all(input.as_bytes()).await;
        drop(stdin);
        Ok(())
    };
    let read = async {
        let mut out = Vec::new();
        // One byte over the cap tells "too much" from "exactly the cap".
        stdout
            .take(cap.saturating_add(1))
            .read_to_end(&mut out)
            .await
            .map_err(|e| ToolFailure::new(format!("reading the tool's output: {e}")))?;
        if out.len() as u64 > cap {
            // Returning early drops the tree, which kills the tool.
            return Err(ToolFailure::new(format!("the tool wrote more than {cap} bytes")));
        }
        Ok(out)
    };
    // Read to the end, whatever the size: a tool blocked on a full stderr pipe never exits.
    let drain = async { Ok(StderrTail::drain(stderr).await) };
    // Waiting also kills what the tool left running, whose open pipes would keep the
    // readers above waiting.
    let wait = async { tree.wait().await.map_err(|e| ToolFailure::new(format!("waiting for the tool: {e}"))) };
    let ((), out, stderr, status) = tokio::try_join!(write, read, drain, wait)?;

    if !status.success() {
        let stderr = stderr.redacted(&spec.env);
        tracing::warn!(tool = %spec.name, %status, stderr = %stderr, "a command tool failed");
        // The guest gets the status and the last line of stderr, with the tool's
        // configured environment values (API keys, say) masked; the log gets the tail.
        let message = match last_line(&stderr, GUEST_EXCERPT_CHARS) {
            Some(line) => format!("the tool exited with {status}: {line}"),
            None => format!("the tool exited with {status}"),
        };
        return Err(ToolFailure::new(message));
    }
    serde_json::from_slice(&out).map_err(|e| ToolFailure::new(format!("the tool's output is not JSON: {e}")))
}

/// The last [`STDERR_TAIL_BYTES`] a tool wrote to stderr; the rest is read and dropped.
struct StderrTail {
    bytes: Vec<u8>,
    /// More was written than kept: the first kept line may be cut.
    cut: bool,
}

impl StderrTail {
    async fn drain(mut stderr: impl AsyncRead + Unpin) -> Self {
        let mut tail = StderrTail { bytes: Vec::new(), cut: false };
        let mut buf = [0u8; 8192];
        // A read error ends the excerpt, not the call: stderr is only for diagnosis.
        while let Ok(read @ 1..) = stderr.read(&mut buf).await {
            tail.bytes.extend_from_slice(&buf[..read]);
            if tail.bytes.len() > 2 * STDERR_TAIL_BYTES {
                tail.bytes.drain(..tail.bytes.len() - STDERR_TAIL_BYTES);
                tail.cut = true;
            }
        }
        if tail.bytes.len() > STDERR_TAIL_BYTES {
            tail.bytes.drain(..tail.bytes.len() - STDERR_TAIL_BYTES);
            tail.cut = true;
        }
        tail
    }

    /// The tail as text, with every configured environment value masked. A cut first
    /// line is dropped: it could end with the end of a secret, which masking would miss.
    fn redacted(&self, env: &BTreeMap<String, String>) -> String {
        let mut text = String::from_utf8_lossy(&self.bytes).into_owned();
        if self.cut {
            text = text.split_once('\n').map_or_else(String::new, |(_, rest)| rest.to_owned());
        }
        let mut secrets: Vec<&str> = env.values().map(String::as_str).filter(|value| !value.is_empty()).collect();
        // Longest first, so a value that contains another is masked whole.
        secrets.sort_by_key(|value| std::cmp::Reverse(value.len()));
        for secret in secrets {
            text = text.replace(secret, REDACTED);
        }
        text
    }
}

/// The last non-blank line of `text`, at most `max_chars` characters (its end kept).
fn last_line(text: &str, max_chars: usize) -> Option<String> {
    let line = text.lines().map(str::trim).rfind(|line| !line.is_empty())?;
    let count = line.chars().count();
    Some(if count > max_chars {
        let tail: String = line.chars().skip(count - max_chars).collect();
        format!("…{tail}")
    } else {
        line.to_owned()
    })
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

    fn shell(script: &str) -> CommandToolSpec {
        CommandToolSpec {
            name: "sh".into(),
            description: String::new(),
            args_schema: any_object(),
            argv: vec!["sh".into(), "-c".into(), script.into()],
            timeout_ms: None,
            max_output_bytes: None,
            env: BTreeMap::new(),
        }
    }

    #[tokio::test]
    async fn a_tool_that_floods_stderr_still_answers() {
        // Far more than a pipe buffer: a reader that stops at its excerpt blocks the tool.
        let spec = shell("head -c 1048576 /dev/zero | tr '\\0' e >&2; echo '{\"ok\": true}'");
        let args = serde_json::json!({});
        let call = run_command(&spec, Path::new("."), &args);
        // Not a speed check: without it a deadlocked tool would hang the test forever.
        let answer = tokio::time::timeout(Duration::from_secs(60), call).await.expect("the tool deadlocked on stderr");
        assert_eq!(answer.unwrap(), serde_json::json!({"ok": true}));
    }

    #[tokio::test]
    async fn the_largest_output_cap_is_accepted() {
        let spec = CommandToolSpec { max_output_bytes: Some(u64::MAX), ..shell("cat") };
        let args = serde_json::json!({"a": 1});
        assert_eq!(run_command(&spec, Path::new("."), &args).await.unwrap(), args);
    }

    #[tokio::test]
    async fn the_guest_never_sees_a_configured_secret_in_stderr() {
        let mut spec = shell("echo \"login failed for token $API_TOKEN\" >&2; echo \"$API_TOKEN\" >&2; exit 3");
        spec.env.insert("API_TOKEN".into(), "hunter2-abc".into());
        let err = run_command(&spec, Path::new("."), &serde_json::json!({})).await.unwrap_err();
        assert!(!err.0.contains("hunter2"), "{err}");
        assert!(err.0.contains("exit status: 3"), "{err}");
    }

    #[test]
    fn a_secret_cut_by_the_tail_is_not_shown_either() {
        let env = BTreeMap::from([("TOKEN".to_owned(), "hunter2-abc".to_owned())]);
        // The tail starts inside the secret: its end could not be recognised.
        let tail = StderrTail { bytes: b"ter2-abc rest\nusing hunter2-abc\nfailed\n".to_vec(), cut: true };
        let text = tail.redacted(&env);
        assert_eq!(text, format!("using {REDACTED}\nfailed\n"));
        assert_eq!(last_line(&text, 200).as_deref(), Some("failed"));
        assert_eq!(last_line("a\nxyz  \n\n", 2).as_deref(), Some("…yz"));
        assert_eq!(last_line(" \n", 2), None);
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_tool_dropped_at_its_timeout_leaves_no_process_behind() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        // `sh` leaves a grandchild: killing only the direct child would orphan it.
        let spec = shell(&format!("sleep 30 & echo $! > '{}'; sleep 30", pid_file.display()));
        let args = serde_json::json!({});
        let call = run_command(&spec, Path::new("."), &args);
        let started = async {
            while std::fs::read_to_string(&pid_file).map_or(true, |text| !text.ends_with('\n')) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        // The broker's timeout drops the call's future, as this select! does.
        tokio::select! {
            answer = call => panic!("the tool answered: {answer:?}"),
            () = started => {}
        }
        let pid = std::fs::read_to_string(&pid_file).unwrap().trim().to_owned();
        let alive = || {
            let kill = std::process::Command::new("kill").args(["-0", &pid]).stderr(Stdio::null()).status();
            kill.unwrap().success()
        };
        let gone = async {
            while alive() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), gone).await.expect("the grandchild outlived the call");
    }
}
