//! `wasmbox` — run untrusted Python in a wasm sandbox, with tools and limits.
//!
//! Exit codes reflect the outcome's status: 0 ok, 1 error (the code raised), 2 usage or
//! invalid request, 3 timeout, 4 fuel_exhausted, 5 memory_exhausted, 6 output_limit,
//! 7 tool_limit, 8 rejected, 9 cancelled, 10 crashed, 70 internal.

mod command_tool;
mod describe_tools;
mod file_flags;
mod live_output;
mod mcp_command;
mod repl;
mod sandbox_flags;
mod terminal_text;

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use tracing_subscriber::EnvFilter;
use wasmbox::worker::WorkerConfig;
use wasmbox::{BuiltinGuest, Engine, EngineConfig, ImportPolicy, Isolation, Outcome, RunRequest, Runtime, Status};

#[derive(Parser)]
#[command(
    name = "wasmbox",
    version,
    long_version = long_version(),
    about = "Run untrusted code in a WebAssembly sandbox, with tools and limits"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log more on stderr: `-v` adds the library's audit events (one JSON line per run
    /// and tool call, target `wasmbox::audit`), `-vv` debug and `-vvv` trace events of
    /// wasmbox. Without it, warnings and errors only. RUST_LOG (tracing's `EnvFilter`
    /// syntax, e.g. `wasmbox::audit=info,wasmtime=debug`), when set, replaces this.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
}

#[derive(Subcommand)]
enum Command {
    /// Run a script and print its output and value.
    Run(Box<RunArgs>),
    /// A session: a prompt on a terminal, JSON lines on a pipe (`{"code": ...}` in, the
    /// step's outcome out); what a step defines is there in the next (docs/sessions.md).
    Repl(Box<repl::ReplArgs>),
    /// Compile a guest into the precompile cache now, so the first run is fast.
    Precompile {
        /// The guest language.
        #[arg(long, value_enum, default_value = "python")]
        lang: Lang,
        /// A custom guest component instead of the built-in one.
        #[arg(long)]
        guest: Option<PathBuf>,
        /// Accept a custom guest that imports the WASI filesystem or sockets (it gets neither).
        #[arg(long, requires = "guest")]
        allow_inert_wasi: bool,
        /// Compile for fuel-metered runs (what `run --fuel` uses).
        #[arg(long)]
        fuel_metering: bool,
    },
    /// Print the tools of a tools file as the guest code's author sees them: a JSON
    /// catalogue, Python stubs or TypeScript declarations, typed from their schemas.
    DescribeTools(describe_tools::DescribeToolsArgs),
    /// Serve MCP (stdio, or streamable HTTP with --http): tools that run Python and
    /// JavaScript calling the tools of --tools and of --servers' MCP servers (docs/mcp.md).
    Mcp(Box<mcp_command::McpArgs>),
    /// Show which `--isolation` choices this host can provide, and why not.
    Isolation,
    /// Serve runs for a parent process over stdin/stdout (what `--isolation worker`
    /// starts; not for interactive use).
    Worker {
        /// The parent's engine settings, as `WorkerConfig::to_args` writes them.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Lang {
    Python,
    Js,
}

impl Lang {
    fn name(self) -> &'static str {
        match self {
            Lang::Python => "python",
            Lang::Js => "js",
        }
    }

    fn builtin(self) -> BuiltinGuest {
        match self {
            Lang::Python => BuiltinGuest::Python,
            Lang::Js => BuiltinGuest::JavaScript,
        }
    }

    fn from_path(path: &Path) -> Option<Lang> {
        match path.extension()?.to_str()? {
            "py" => Some(Lang::Python),
            "js" | "mjs" => Some(Lang::Js),
            _ => None,
        }
    }
}

#[derive(clap::Args)]
struct RunArgs {
    /// The script to run, or `-` for stdin.
    file: PathBuf,
    /// The script's language (default: from the file extension, else python).
    #[arg(long, value_enum)]
    lang: Option<Lang>,
    /// A custom guest component targeting the wasmbox:sandbox world; the script is
    /// its `code`. It may import only what guests get (see docs/guests.md).
    #[arg(long)]
    guest: Option<PathBuf>,
    /// Accept a custom guest that imports the WASI filesystem or sockets: it gets the run's
    /// in-memory files (/input, /output, /tmp; no host directory) and no network, for a
    /// language runtime that links them anyway.
    #[arg(long, requires = "guest")]
    allow_inert_wasi: bool,
    /// JSON input, visible to the script as INPUT.
    #[arg(long)]
    input: Option<String>,
    /// A host file the script can read at /input/NAME (default NAME: the file's name).
    /// Repeatable. The script's files live in memory; it reaches no host path.
    #[arg(long = "input-file", value_name = "PATH[:NAME]")]
    input_files: Vec<String>,
    /// After the run, write the files the script left in /output into DIR (created if
    /// missing): only inside DIR, names sanitised, never through a symbolic link.
    #[arg(long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
    #[command(flatten)]
    sandbox: sandbox_flags::SandboxArgs,
    /// Print the whole outcome as JSON instead of the script's output.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    if let Command::Worker { args } = &cli.command {
        // Before the async runtime starts its threads: no-new-privileges applies to the
        // calling thread and those it creates later. (Bad arguments are reported below.)
        let max_data_bytes = WorkerConfig::from_args(args.iter().cloned()).ok().and_then(|c| c.max_data_bytes);
        if let Err(err) = wasmbox::worker::harden_process(max_data_bytes) {
            return fail(anyhow::Error::from(err).context("hardening the worker process"));
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => return fail(anyhow::Error::from(err)),
    };
    match runtime.block_on(dispatch(cli.command)) {
        Ok(code) => code,
        Err(err) => fail(err),
    }
}

/// Sends `tracing` events (the library's warnings and audit events, the CLI's own) to
/// stderr, filtered by RUST_LOG if set, else by `-v`. Never stdout: that carries the
/// script's output, `--json`'s outcome and the worker protocol.
fn init_logging(verbose: u8) {
    // The library and this binary are both the crate `wasmbox` (module paths
    // `wasmbox::…`), so one directive raises both; other crates stay at warnings.
    let from_flags = match verbose {
        0 => "warn",
        1 => "warn,wasmbox=info",
        2 => "warn,wasmbox=debug",
        _ => "warn,wasmbox=trace",
    };
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => EnvFilter::try_new(&spec).unwrap_or_else(|err| {
            eprintln!("wasmbox: ignoring RUST_LOG ({err}); logging as without it");
            EnvFilter::new(from_flags)
        }),
        _ => EnvFilter::new(from_flags),
    };
    let terminal = std::io::stderr().is_terminal();
    // A subscriber set already (never, in this binary) keeps its place. No colours: on
    // a terminal the writer escapes control characters, which would show them as text.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(move || LogWriter { terminal })
        .with_ansi(false)
        .try_init();
}

/// stderr for log lines. Events carry text a guest or a tool chose (a tool name as the
/// guest sent it, a failing tool's stderr), so on a terminal their control sequences are
/// shown, not obeyed ([`terminal_text`]), as for the guest's own output.
struct LogWriter {
    terminal: bool,
}

impl Write for LogWriter {
    /// tracing-subscriber's fmt layer hands over each event whole, so escaping per call
    /// never splits a character or a sequence.
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        std::io::stderr().lock().write_all(terminal_text::escape_on_terminal(&text, self.terminal).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

fn fail(err: anyhow::Error) -> ExitCode {
    eprintln!("wasmbox: {err:#}");
    ExitCode::from(2)
}

async fn dispatch(command: Command) -> Result<ExitCode> {
    match command {
        Command::Run(args) => run(*args).await,
        Command::Repl(args) => repl::repl(*args).await,
        Command::Mcp(args) => mcp_command::serve(*args).await,
        Command::Isolation => {
            let mut lines = String::new();
            for name in wasmbox::ISOLATION_NAMES {
                let isolation: Isolation = name.parse()?;
                match isolation.check_available() {
                    Ok(()) => lines.push_str(&format!("{name}: available\n")),
                    Err(wasmbox::Error::Isolation { reason, .. }) => {
                        lines.push_str(&format!("{name}: unavailable: {reason}\n"))
                    }
                    Err(other) => lines.push_str(&format!("{name}: unavailable: {other}\n")),
                }
            }
            print_stdout(&lines)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Worker { args } => {
            let config = WorkerConfig::from_args(args)?;
            wasmbox::worker::serve(config, tokio::io::stdin(), tokio::io::stdout()).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Precompile { lang, guest, allow_inert_wasi, fuel_metering } => {
            let engine = Engine::new(EngineConfig { fuel_metering, ..EngineConfig::default() })?;
            load_runtime(&engine, lang, guest.as_deref(), allow_inert_wasi)?;
            let what = guest.map_or_else(|| format!("the {} guest", lang.name()), |path| path.display().to_string());
            eprintln!("wasmbox: {what} is precompiled in {}", engine.cache_dir().display());
            Ok(ExitCode::SUCCESS)
        }
        Command::DescribeTools(args) => {
            print_stdout(&describe_tools::describe(&args)?)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn run(args: RunArgs) -> Result<ExitCode> {
    let code = read_script(&args.file)?;
    let lang = args.lang.or_else(|| Lang::from_path(&args.file)).unwrap_or(Lang::Python);
    let tools = args.sandbox.command_tools()?;
    let scope = sandbox_flags::scope_from(&args.sandbox.allow, &tools)?;
    let plan = args.sandbox.plan()?;
    let input = match &args.input {
        Some(text) => serde_json::from_str(text).context("--input is not valid JSON")?,
        None => serde_json::Value::Null,
    };

    let files = file_flags::read_inputs(&args.input_files)?;

    let engine = plan.engine()?;
    let runtime = load_runtime(&engine, lang, args.guest.as_deref(), args.allow_inert_wasi)?;
    let sandbox = plan.sandbox(runtime, tools)?.scope(scope);
    let request = RunRequest::new(code).input(input).files(files);
    if args.json {
        let outcome = sandbox.run_with(request).await;
        print_stdout(&format!("{}\n", serde_json::to_string_pretty(&outcome)?))?;
        return finish_run(&args, outcome);
    }
    // People see the output as the script writes it; the outcome's copy is not printed
    // again.
    let printer = std::sync::Arc::new(live_output::LivePrinter::new());
    let outcome = sandbox.run_with(request.output_sink(printer.clone())).await;
    printer.finish();
    print_human(&outcome)?;
    finish_run(&args, outcome)
}

/// Writes the run's output files, if asked, and turns its status into the exit code.
fn finish_run(args: &RunArgs, outcome: Outcome) -> Result<ExitCode> {
    if let Some(dir) = &args.output_dir {
        file_flags::write_outputs(dir, &outcome.files)?;
    }
    Ok(ExitCode::from(exit_code(outcome.status)))
}

fn read_script(file: &Path) -> Result<String> {
    if file == Path::new("-") {
        let mut code = String::new();
        std::io::stdin().read_to_string(&mut code).context("reading the script from stdin")?;
        return Ok(code);
    }
    std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))
}

/// `--version`: this binary's version and what its built-in guests run, as recorded
/// when they were built.
fn long_version() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        let mut text = env!("CARGO_PKG_VERSION").to_owned();
        for guest in BuiltinGuest::ALL {
            let line = match guest.versions() {
                Ok(v) => format!("{} guest: {}, built with {}, for {}", guest.name(), v.runtime, v.built_with, v.wit),
                Err(err) => err.to_string(),
            };
            text.push('\n');
            text.push_str(&line);
        }
        if let Some(dir) = std::env::var_os(wasmbox::GUEST_DIR_ENV).filter(|dir| !dir.is_empty()) {
            let dir = Path::new(&dir).display();
            text.push_str(&format!("\n({} is set: runs load the guests in {dir} instead)", wasmbox::GUEST_DIR_ENV));
        }
        text
    })
}

/// Loads the guest, showing progress on a terminal when it must be compiled first. A
/// custom guest gets the strict import check unless `allow_inert_wasi`; the built-in
/// guests link the WASI filesystem and sockets through their libc, and are ours.
fn load_runtime(engine: &Engine, lang: Lang, guest: Option<&Path>, allow_inert_wasi: bool) -> Result<Runtime> {
    let path = match guest {
        Some(path) if !path.is_file() => bail!("no guest component at {}", path.display()),
        Some(path) => path.to_owned(),
        // Unpacked into the cache on its first use, which the progress below covers.
        None => lang.builtin().path(engine)?,
    };
    let policy = if guest.is_none() || allow_inert_wasi { ImportPolicy::AllowInertWasi } else { ImportPolicy::Strict };
    let load = || match guest {
        None => Runtime::builtin(engine, lang.builtin()),
        Some(_) => Runtime::from_file_with(engine, &path, policy),
    };
    // The fast path reads nothing but the file's metadata and the precompiled artifact.
    if path.is_file() {
        if engine.is_precompiled_file(&path) {
            return Ok(load()?);
        }
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        if engine.is_precompiled(&bytes) {
            return Ok(load()?);
        }
    }
    let name = guest.map_or_else(|| lang.name().into(), |path| path.file_stem().unwrap_or_default().to_string_lossy());
    let progress = Progress::start(format!("compiling the {name} guest for this machine (first run only)"));
    let runtime = load();
    progress.finish();
    Ok(runtime?)
}

/// A spinner with the elapsed time on stderr while something slow happens, when stderr
/// is a terminal; nothing at all when it is not (a pipe, a log file).
struct Progress {
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn start(what: String) -> Self {
        if !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let style = indicatif::ProgressStyle::with_template("{spinner} wasmbox: {msg}… {elapsed}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
        let bar = indicatif::ProgressBar::new_spinner().with_style(style).with_message(what);
        bar.enable_steady_tick(Duration::from_millis(100));
        Progress { bar: Some(bar) }
    }

    fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
            eprintln!("wasmbox: {}… done in {:.1?}", bar.message(), bar.elapsed());
        }
    }
}

/// Prints what follows the guest's output, which [`live_output`] printed as it came:
/// a note that it was truncated, the value and the error, as text. All of it is the
/// guest's to choose, so on a terminal its control sequences are shown, not obeyed
/// ([`terminal_text`]); a pipe gets the text unchanged.
fn print_human(outcome: &Outcome) -> Result<()> {
    use terminal_text::escape_on_terminal as shown;
    let terminal = std::io::stdout().is_terminal();
    let mut text = String::new();
    if outcome.stdout.truncated {
        text.push_str("\n[stdout truncated]\n");
    }
    if let Some(value) = outcome.value.as_ref().filter(|v| !v.is_null()) {
        // JSON escapes C0 controls in strings, but not DEL, C1 or bidi controls.
        text.push_str(&format!("{}\n", shown(&value.to_string(), terminal)));
    }
    print_stdout(&text)?;
    let mut err = std::io::stderr().lock();
    let terminal = err.is_terminal();
    if let Some(error) = &outcome.error {
        if !error.traceback.is_empty() {
            write!(err, "{}", shown(&error.traceback, terminal))?;
            if !error.traceback.ends_with('\n') {
                writeln!(err)?;
            }
        }
        let line = format!("{}: {}: {}", outcome.status, error.kind, error.message);
        writeln!(err, "{}", shown(&line, terminal))?;
    }
    Ok(())
}

/// Writes `text` to stdout. A reader that closed its end early (`wasmbox run … | head`)
/// is not an error: the exit code still tells how the run ended.
fn print_stdout(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => Ok(written?),
    }
}

fn exit_code(status: Status) -> u8 {
    match status {
        Status::Ok => 0,
        Status::Error => 1,
        Status::InvalidRequest => 2,
        Status::Timeout => 3,
        Status::FuelExhausted => 4,
        Status::MemoryExhausted => 5,
        Status::OutputLimit => 6,
        Status::ToolLimit => 7,
        Status::Rejected => 8,
        Status::Cancelled => 9,
        Status::Crashed => 10,
        _ => 70,
    }
}
