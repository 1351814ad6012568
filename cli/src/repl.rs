//! `wasmbox repl`: a session (docs/sessions.md) from the command line, for people and
//! scripts. On a terminal it prompts for code, runs each entry as a step and prints its
//! output, value and error as `wasmbox run` does; a line ending in `:`, `\` or `{`, or
//! inside an open bracket, continues until an empty line; `.reset` starts the session
//! again and `.exit` (or end of input) leaves. On a pipe it reads one JSON request per
//! line, `{"code": "...", "input": ...}` or `{"reset": true}`, and writes one JSON line
//! per request: the step's outcome, `{"reset": "ok"}`, or `{"error": "..."}` for a line
//! it could not use.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use anyhow::{Context, Result};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::AsyncBufReadExt;
use wasmbox::{RunRequest, Session, SessionConfig};

use crate::live_output::LivePrinter;
use crate::{file_flags, load_runtime, print_human, sandbox_flags, Lang};

#[derive(clap::Args)]
pub struct ReplArgs {
    /// The language of the session.
    #[arg(long, value_enum, default_value = "python")]
    lang: Lang,
    /// End the session after this long without a step.
    #[arg(long, default_value_t = wasmbox::DEFAULT_SESSION_IDLE_TIMEOUT_MS)]
    idle_timeout_ms: u64,
    /// End the session this long after it started.
    #[arg(long, default_value_t = wasmbox::DEFAULT_SESSION_MAX_LIFETIME_MS)]
    max_lifetime_ms: u64,
    /// A host file every step can read at /input/NAME (default NAME: the file's name), as
    /// for `wasmbox run`. Repeatable. Read once, when the session starts.
    #[arg(long = "input-file", value_name = "PATH[:NAME]")]
    input_files: Vec<String>,
    #[command(flatten)]
    sandbox: sandbox_flags::SandboxArgs,
}

/// One line of the JSON-lines protocol.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    input: Value,
    #[serde(default)]
    reset: bool,
}

pub async fn repl(args: ReplArgs) -> Result<std::process::ExitCode> {
    let files = file_flags::read_inputs(&args.input_files)?;
    let tools = args.sandbox.command_tools()?;
    let scope = sandbox_flags::scope_from(&args.sandbox.allow, &tools)?;
    let plan = args.sandbox.plan()?;
    let engine = plan.engine()?;
    let runtime = load_runtime(&engine, args.lang, None, false)?;
    let sandbox = plan.sandbox(runtime, tools)?.scope(scope);
    let config = SessionConfig { idle_timeout_ms: args.idle_timeout_ms, max_lifetime_ms: args.max_lifetime_ms };
    let session = Session::open_with_files(sandbox, config, files).await.context("starting the session")?;
    if std::io::stdin().is_terminal() {
        interactive(&session, args.lang).await?;
    } else {
        json_lines(&session).await?;
    }
    Ok(std::process::ExitCode::SUCCESS)
}

async fn json_lines(session: &Session) -> Result<()> {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await.context("reading stdin")? {
        if line.trim().is_empty() {
            continue;
        }
        let answer = match serde_json::from_str::<Request>(&line) {
            Err(err) => json!({"error": format!("not a request: {err}")}),
            Ok(Request { reset: true, code: None, .. }) => match session.reset().await {
                Ok(()) => json!({"reset": "ok"}),
                Err(err) => json!({"reset": "failed", "error": err.to_string()}),
            },
            Ok(Request { reset: false, code: Some(code), input }) => {
                serde_json::to_value(session.run_with_input(&code, &input).await)?
            }
            Ok(_) => json!({"error": "a request has either `code` (and `input`) or `reset: true`"}),
        };
        let mut out = std::io::stdout().lock();
        writeln!(out, "{answer}")?;
        out.flush()?;
    }
    Ok(())
}

async fn interactive(session: &Session, lang: Lang) -> Result<()> {
    let (prompt, more) = match lang {
        Lang::Python => (">>> ", "... "),
        Lang::Js => ("> ", "... "),
    };
    eprintln!("wasmbox {} session: .reset starts again, .exit leaves", lang.name());
    let stdin = std::io::stdin();
    let mut entry = String::new();
    loop {
        eprint!("{}", if entry.is_empty() { prompt } else { more });
        std::io::stderr().flush()?;
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim_end_matches(['\n', '\r']);
        if entry.is_empty() {
            match line.trim() {
                "" => continue,
                ".exit" => break,
                ".reset" => {
                    match session.reset().await {
                        Ok(()) => eprintln!("(a fresh session)"),
                        Err(err) => eprintln!("wasmbox: {err}"),
                    }
                    continue;
                }
                _ => {}
            }
        }
        let continued = !entry.is_empty();
        entry.push_str(line);
        entry.push('\n');
        // A first line that opens a block waits for more; once continued, an entry ends
        // at an empty line, whatever brackets it seems to leave open.
        let more = if continued { !line.trim().is_empty() } else { opens_block(&entry) };
        if more {
            continue;
        }
        // As `wasmbox run` prints: live, and escaped on a terminal (the guest's output
        // could otherwise drive the terminal with control sequences).
        let printer = Arc::new(LivePrinter::new());
        let request = RunRequest::new(std::mem::take(&mut entry)).output_sink(printer.clone());
        let outcome = session.run_with(request).await;
        printer.finish();
        print_human(&outcome)?;
    }
    Ok(())
}

/// True when `entry` cannot be complete: its last line ends in `:`, `\` or `{`, or a
/// bracket is still open (strings and comments are not parsed: an empty line ends any
/// entry).
fn opens_block(entry: &str) -> bool {
    let last = entry.trim_end_matches('\n').lines().last().unwrap_or("").trim_end();
    if last.ends_with(':') || last.ends_with('\\') || last.ends_with('{') {
        return true;
    }
    let depth = entry.chars().fold(0i64, |depth, c| match c {
        '(' | '[' | '{' => depth + 1,
        ')' | ']' | '}' => depth - 1,
        _ => depth,
    });
    depth > 0
}

#[cfg(test)]
mod tests {
    use super::opens_block;

    #[test]
    fn an_entry_goes_on_after_a_colon_a_backslash_or_an_open_bracket() {
        assert!(opens_block("def f():\n"));
        assert!(opens_block("x = [1,\n"));
        assert!(opens_block("function f() {\n"));
        assert!(opens_block("total = 1 + \\\n"));
        assert!(!opens_block("x = [1, 2]\n"));
        assert!(!opens_block("print('a:b')\n"));
    }
}
