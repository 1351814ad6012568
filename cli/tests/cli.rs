//! End-to-end tests of the `wasmbox` binary with a command-backed tool.
//! Needs the guests (`cargo xtask guests`).

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn wasmbox(dir: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_wasmbox"))
        .args(args)
        .current_dir(dir)
        // A secret in the operator's environment must reach neither guest nor tool.
        .env("WASMBOX_TEST_SECRET", "hunter2")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("wasmbox starts");
    let mut pipe = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        std::io::Write::write_all(&mut pipe, text.as_bytes()).unwrap();
    }
    drop(pipe);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("is not built"),
        "the CLI tests need the Python guest: run `cargo xtask guests`\n{stderr}"
    );
    output
}

fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("tools.toml"),
        r#"
[[tool]]
name = "weather"
description = "Weather for a city"
args_schema = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
argv = ["python3", "./weather.py"]
timeout_ms = 5000

[[tool]]
name = "shout"
description = "Upper-cases text"
argv = ["python3", "-c", "import json,sys; a=json.load(sys.stdin); print(json.dumps(a['text'].upper()))"]
"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("weather.py"),
        "import json, os, sys\nargs = json.load(sys.stdin)\nif args['city'] != 'Paris':\n    sys.exit('unknown city')\nprint(json.dumps({'city': 'Paris', 'temp_c': 18, 'env': sorted(os.environ)}))\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("script.py"), "w = tools.weather(city='Paris')\nprint('it is', w['temp_c'])\n{'temp': w['temp_c'], 'env': w['env'], 'loud': tools.shout(text='hi')}\n").unwrap();
    dir
}

#[test]
fn runs_a_script_that_calls_a_command_tool() {
    let dir = fixture();
    let out = wasmbox(dir.path(), &["run", "script.py", "--tools", "tools.toml", "--allow", "weather,shout"], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.starts_with("it is 18\n"), "{stdout}");
    let value: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(value["temp"], 18);
    assert_eq!(value["loud"], "HI");
    let env = value["env"].as_array().unwrap();
    assert!(env.contains(&serde_json::json!("PATH")), "{env:?}");
    assert!(!env.contains(&serde_json::json!("WASMBOX_TEST_SECRET")), "command tools inherit only PATH: {env:?}");
}

#[test]
fn json_output_and_exit_codes_reflect_the_status() {
    let dir = fixture();
    let out = wasmbox(
        dir.path(),
        &["run", "-", "--json", "--tools", "tools.toml", "--allow", "weather"],
        Some("tools.weather(city='Oslo')"),
    );
    assert_eq!(out.status.code(), Some(1), "a guest error exits 1");
    let outcome: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(outcome["status"], "error");
    assert_eq!(outcome["error"]["kind"], "ToolFailed");
    assert!(outcome["error"]["message"].as_str().unwrap().contains("unknown city"));
    assert_eq!(outcome["tool_calls"][0]["status"], "failed");

    let out = wasmbox(dir.path(), &["run", "-", "--timeout-ms", "200"], Some("while True: pass"));
    assert_eq!(out.status.code(), Some(3), "timeout exits 3");
    let out = wasmbox(dir.path(), &["run", "-", "--memory-mb", "64"], Some("x = 'a' * (1 << 30)"));
    assert_eq!(out.status.code(), Some(5), "memory_exhausted exits 5");
}

/// A reader that closes its end before the outcome is printed (`wasmbox run … | head`)
/// costs neither a panic nor the exit code: it still tells how the run ended.
#[test]
fn a_closed_stdout_is_not_an_error_of_the_run() {
    let dir = fixture();
    for (flags, code, exit) in [(&["--json"][..], "1 + 1", 0), (&[][..], "1 + 1", 0), (&["--json"][..], "1 / 0", 1)] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_wasmbox"))
            .args(["run", "-"])
            .args(flags)
            .current_dir(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("wasmbox starts");
        // Closed before the run can end: the run needs its code from stdin first.
        drop(child.stdout.take());
        let mut stdin = child.stdin.take().unwrap();
        std::io::Write::write_all(&mut stdin, code.as_bytes()).unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(exit), "{flags:?} {code}: {stderr}");
        assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "{flags:?} {code}: {stderr}");
    }
}

#[test]
fn tools_outside_allow_are_denied_and_bad_flags_are_usage_errors() {
    let dir = fixture();
    let out = wasmbox(dir.path(), &["run", "script.py", "--tools", "tools.toml", "--allow", "shout"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ToolDenied"));

    let out = wasmbox(dir.path(), &["run", "script.py", "--allow", "nope"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"));
    let out = wasmbox(dir.path(), &["run", "script.py", "--timeout-ms", "0"], None);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn describe_tools_prints_the_registry() {
    let dir = fixture();
    let out = wasmbox(dir.path(), &["describe-tools", "tools.toml"], None);
    let tools: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tools[1]["name"], "weather");
    assert_eq!(tools[1]["args_schema"]["required"], serde_json::json!(["city"]));
}

#[test]
fn runs_javascript_with_tools() {
    let dir = fixture();
    std::fs::write(dir.path().join("script.js"), "const w = await tools.weather({city: 'Paris'})\nconsole.log('it is', w.temp_c)\nreturn {temp: w.temp_c, loud: await tools.shout({text: 'hi'})}\n").unwrap();
    let out = wasmbox(dir.path(), &["run", "script.js", "--tools", "tools.toml", "--allow", "weather,shout"], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.starts_with("it is 18\n"), "{stdout}");
    assert_eq!(stdout.lines().last().unwrap(), r#"{"loud":"HI","temp":18}"#);
    let out = wasmbox(dir.path(), &["run", "-", "--lang", "js", "--timeout-ms", "200"], Some("while (true) {}"));
    assert_eq!(out.status.code(), Some(3), "timeout exits 3");
}

/// A guest component from target/guests (built by `cargo xtask guests`).
fn guest(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/guests").join(format!("{name}.wasm"));
    assert!(path.is_file(), "{} is missing: run `cargo xtask guests`", path.display());
    path.to_string_lossy().into_owned()
}

fn json_outcome(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    })
}

#[test]
fn custom_rust_guests_run_with_command_tools() {
    let dir = fixture();
    let calc = guest("calc");
    let code =
        "let w = tools.weather(city: \"Paris\"); {\"f\": w.temp_c * 9 / 5 + 32, \"loud\": tools.shout(text: \"hi\")}";
    let out =
        wasmbox(dir.path(), &["run", "-", "--guest", &calc, "--tools", "tools.toml", "--allow", "all"], Some(code));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value, serde_json::json!({"f": 64.4, "loud": "HI"}));

    let out = wasmbox(dir.path(), &["run", "-", "--guest", &calc, "--json"], Some("1 / 0"));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json_outcome(&out)["error"]["kind"], "ZeroDivisionError");

    // The test guests end with the statuses' exit codes.
    let out = wasmbox(dir.path(), &["run", "-", "--guest", &guest("infinite_loop"), "--timeout-ms", "200"], Some(""));
    assert_eq!(out.status.code(), Some(3), "timeout exits 3");
    let out = wasmbox(dir.path(), &["run", "-", "--guest", &guest("trap"), "--json"], Some("boom"));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json_outcome(&out)["error"]["kind"], "Trap");
}

/// The worked example of docs/guests.md, in each language, through the CLI.
#[test]
fn the_batch_example_runs_in_every_language() {
    let dir = fixture();
    let code = "shout {\"text\": \"hi\"}\nweather {\"city\": \"Paris\"}";
    for (name, flags) in
        [("batch", &[][..]), ("python_batch", &["--allow-inert-wasi"][..]), ("js_batch", &["--allow-inert-wasi"][..])]
    {
        let path = guest(name);
        let mut args = vec!["run", "-", "--guest", &path, "--json", "--tools", "tools.toml", "--allow", "all"];
        args.extend(flags);
        let outcome = json_outcome(&wasmbox(dir.path(), &args, Some(code)));
        assert_eq!(outcome["status"], "ok", "{name}: {outcome}");
        assert_eq!(outcome["value"][0], "HI", "{name}");
        assert_eq!(outcome["value"][1]["temp_c"], 18, "{name}");
    }
}

/// A Python guest built with a package from PyPI added, as docs/guests.md ("Adding
/// Python packages") says (`cargo xtask python-guest --with tabulate==0.9.0`; CI's copy
/// is target/guests/python_tabulate.wasm), runs through `--guest`: the package and its
/// lazily imported submodules are inside, and so is the rest of the built-in guest.
#[test]
fn a_python_guest_with_a_package_from_pypi_runs() {
    let dir = fixture();
    let path = guest("python_tabulate");
    let code = "from tabulate import tabulate, version\nimport sys, zoneinfo\n\
                print(tabulate([['Paris', 18]], headers=['city', 'temp_c'], tablefmt='github'))\n\
                [version.__version__, list(sys.modules['app'].PACKAGES), zoneinfo.ZoneInfo('Europe/Paris').key]";
    let out = wasmbox(dir.path(), &["run", "-", "--guest", &path, "--allow-inert-wasi"], Some(code));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.starts_with("| city   |   temp_c |\n|--------|----------|\n| Paris  |       18 |\n"), "{stdout}");
    let value: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(value, serde_json::json!(["0.9.0", ["tabulate", "tabulate.version"], "Europe/Paris"]));
}

#[test]
fn a_guest_that_imports_more_than_the_world_is_refused() {
    let dir = fixture();
    let component = wat::parse_str(
        r#"(component (import "wasmbox:sandbox/tools@0.1.0" (instance)) (import "wasi:filesystem/preopens@0.2.0" (instance)))"#,
    )
    .unwrap();
    std::fs::write(dir.path().join("greedy.wasm"), component).unwrap();
    let out = wasmbox(dir.path(), &["run", "-", "--guest", "greedy.wasm"], Some(""));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("greedy imports `wasi:filesystem/preopens@0.2.0`"), "{stderr}");
    assert!(stderr.contains("--allow-inert-wasi"), "{stderr}");

    // Let through, it is refused for what it lacks instead.
    let out = wasmbox(dir.path(), &["run", "-", "--guest", "greedy.wasm", "--allow-inert-wasi"], Some(""));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("wasmbox:sandbox/runner") && !stderr.contains("preopens"), "{stderr}");
}

/// Waits (at most 10 s) for the process `pid` to be gone.
#[cfg(unix)]
fn wait_until_gone(pid: &str) -> bool {
    let alive = || Command::new("kill").args(["-0", pid]).stderr(Stdio::null()).status().unwrap().success();
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while alive() {
        if std::time::Instant::now() > give_up {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    true
}

#[cfg(unix)]
#[test]
fn a_command_tool_that_times_out_leaves_no_process_behind() {
    let dir = fixture();
    std::fs::write(
        dir.path().join("slow.toml"),
        "[[tool]]\nname = \"slow\"\nargv = [\"sh\", \"-c\", \"sleep 30 & echo $! > grandchild.pid; sleep 30\"]\ntimeout_ms = 3000\n",
    )
    .unwrap();
    let out =
        wasmbox(dir.path(), &["run", "-", "--json", "--tools", "slow.toml", "--allow", "slow"], Some("tools.slow()"));
    let outcome = json_outcome(&out);
    assert_eq!(outcome["tool_calls"][0]["status"], "timeout", "{outcome}");
    let pid = std::fs::read_to_string(dir.path().join("grandchild.pid")).unwrap();
    assert!(wait_until_gone(pid.trim()), "the tool's grandchild {} outlived its timeout", pid.trim());
}

#[test]
fn a_command_tools_failure_shows_the_guest_no_configured_secret() {
    let dir = fixture();
    std::fs::write(
        dir.path().join("leaky.toml"),
        "[[tool]]\nname = \"leaky\"\nargv = [\"sh\", \"-c\", \"echo \\\"bad token $API_TOKEN\\\" >&2; exit 4\"]\nenv = { API_TOKEN = \"tok-hunter2\" }\n",
    )
    .unwrap();
    let out = wasmbox(
        dir.path(),
        &["run", "-", "--json", "--tools", "leaky.toml", "--allow", "leaky"],
        Some("tools.leaky()"),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let outcome = json_outcome(&out);
    assert_eq!(outcome["tool_calls"][0]["status"], "failed", "{outcome}");
    assert!(!text.contains("hunter2"), "{text}");
    assert!(outcome["error"]["message"].as_str().unwrap().contains("exit status: 4"), "{outcome}");
}

/// Guest text with terminal control sequences: clear screen, an OSC 52 clipboard write,
/// a bell, a C1 CSI, and a tab and newlines that must stay.
const HOSTILE_SCRIPT: &str = "import sys\nprint('A\\x1b[2JB\\x1b]52;c;aGk=\\x07C\\x9bD\\tE')\nsys.stderr.write('\\x1b[31mred\\n')\nraise Exception('\\x1b]0;title\\x07boom')\n";

#[cfg(target_os = "linux")]
#[test]
fn guest_text_is_escaped_on_a_terminal_and_raw_in_a_pipe() {
    let dir = fixture();
    std::fs::write(dir.path().join("hostile.py"), HOSTILE_SCRIPT).unwrap();

    let piped = wasmbox(dir.path(), &["run", "hostile.py"], None);
    assert!(piped.stdout.starts_with(b"A\x1b[2JB\x1b]52;c;aGk=\x07C\xc2\x9bD\tE\n"), "a pipe gets the text unchanged");

    // util-linux `script` gives the CLI a terminal for stdout and stderr.
    let command = format!("'{}' run hostile.py", env!("CARGO_BIN_EXE_wasmbox"));
    let out = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("util-linux `script` runs");
    let seen = String::from_utf8_lossy(&out.stdout);
    assert!(seen.contains("A\\x1b[2JB\\x1b]52;c;aGk=\\x07C\\u{9b}D\tE"), "{seen:?}");
    assert!(seen.contains("\\x1b[31mred"), "{seen:?}");
    assert!(seen.contains("\\x1b]0;title\\x07boom"), "{seen:?}");
    assert!(!seen.contains(['\x1b', '\x07', '\u{9b}']), "a control character reached the terminal: {seen:?}");
}

/// `wasmbox repl` on a terminal prints a step's output as `run` does: escaped, so the
/// guest cannot drive the terminal. A bracket a string seems to open waits for the next
/// line, and an empty line ends the entry.
#[cfg(target_os = "linux")]
#[test]
fn repl_escapes_guest_text_on_a_terminal() {
    let dir = fixture();
    let entries = "import sys\nprint('A\\x1b[2JB\\x1b]0;t\\x07C')\n\nsys.stderr.write('\\x1b[31mred\\n')\n\n.exit\n";
    let command = format!("'{}' repl --lang python", env!("CARGO_BIN_EXE_wasmbox"));
    let mut child = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("util-linux `script` runs");
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), entries.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let seen = String::from_utf8_lossy(&out.stdout);
    assert!(seen.contains("A\\x1b[2JB\\x1b]0;t\\x07C"), "{seen:?}");
    assert!(seen.contains("\\x1b[31mred"), "{seen:?}");
    assert!(!seen.contains(['\x1b', '\x07']), "a control character reached the terminal: {seen:?}");
}

#[cfg(unix)]
#[test]
fn without_a_home_the_cache_is_a_private_directory() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let calc = guest("calc");
    let precompile = |tmp: &Path| {
        Command::new(env!("CARGO_BIN_EXE_wasmbox"))
            .args(["precompile", "--guest", &calc])
            .env_clear()
            .env("TMPDIR", tmp)
            .output()
            .unwrap()
    };
    let tmp = tempfile::tempdir().unwrap();
    let uid = std::fs::metadata(tmp.path()).unwrap().uid();
    let out = precompile(tmp.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!tmp.path().join("wasmbox").exists(), "a shared cache directory in the temp dir");
    let private = tmp.path().join(format!("wasmbox-{uid}"));
    let meta = std::fs::symlink_metadata(&private).expect("a per-user cache directory");
    assert!(meta.is_dir() && meta.uid() == uid, "{meta:?}");
    assert_eq!(meta.mode() & 0o777, 0o700);
    assert!(stderr.contains(&*private.to_string_lossy()), "{stderr}");

    // Someone else got there first: refused, not used.
    let squatted = tempfile::tempdir().unwrap();
    let theirs = squatted.path().join(format!("wasmbox-{uid}"));
    std::fs::create_dir(&theirs).unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = precompile(squatted.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("writable by group or others"), "{stderr}");
    std::fs::remove_dir(&theirs).unwrap();
    std::os::unix::fs::symlink(tmp.path(), &theirs).unwrap();
    let out = precompile(squatted.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("symbolic link"), "{stderr}");
}

/// Runs the binary in `dir` with `env` on top of this process's environment, less any
/// RUST_LOG of the caller's (which would decide what is logged).
fn wasmbox_with_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmbox"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("wasmbox starts")
}

#[test]
fn logs_go_to_stderr_by_verbosity_and_stdout_stays_the_same() {
    let dir = fixture();
    let args = ["run", "script.py", "--tools", "tools.toml", "--allow", "weather,shout"];
    let stderr = |out: &Output| String::from_utf8_lossy(&out.stderr).into_owned();
    let quiet = wasmbox_with_env(dir.path(), &args, &[]);
    assert!(quiet.status.success(), "{}", stderr(&quiet));
    assert!(!stderr(&quiet).contains("wasmbox::audit"), "no audit events by default: {}", stderr(&quiet));

    // -v, after the subcommand or before it: the audit events of the run and its calls.
    for verbose_args in [[&args[..], &["-v"]].concat(), [&["-v"], &args[..]].concat()] {
        let verbose = wasmbox_with_env(dir.path(), &verbose_args, &[]);
        let log = stderr(&verbose);
        assert!(verbose.status.success(), "{log}");
        assert!(log.contains("wasmbox::audit") && log.contains(r#""event":"run_finished""#), "{log}");
        assert!(log.contains(r#""event":"tool_call_finished""#) && log.contains(r#""tool":"weather""#), "{log}");
        assert_eq!(verbose.stdout, quiet.stdout, "logging never reaches stdout");
    }

    // RUST_LOG, when set, decides instead of -v.
    let by_env = wasmbox_with_env(dir.path(), &args, &[("RUST_LOG", "wasmbox::audit=info")]);
    assert!(stderr(&by_env).contains(r#""event":"run_started""#), "{}", stderr(&by_env));
    let off = wasmbox_with_env(dir.path(), &[&args[..], &["-v"]].concat(), &[("RUST_LOG", "off")]);
    assert!(!stderr(&off).contains("wasmbox::audit"), "{}", stderr(&off));
    assert_eq!(off.stdout, quiet.stdout);
}

#[test]
fn warnings_are_logged_by_default_with_the_tools_secrets_masked() {
    let dir = fixture();
    std::fs::write(
        dir.path().join("leaky.toml"),
        "[[tool]]\nname = \"leaky\"\nargv = [\"sh\", \"-c\", \"echo \\\"bad token $API_TOKEN\\\" >&2; exit 4\"]\nenv = { API_TOKEN = \"tok-hunter2\" }\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("leaky.py"), "tools.leaky()\n").unwrap();
    let out = wasmbox_with_env(dir.path(), &["run", "leaky.py", "--tools", "leaky.toml", "--allow", "leaky"], &[]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(log.contains("WARN") && log.contains("a command tool failed") && log.contains("bad token"), "{log}");
    assert!(!log.contains("tok-hunter2"), "{log}");
    assert!(!log.contains("wasmbox::audit"), "{log}");
}

/// A failing tool's stderr reaches the log; on a terminal its control sequences are
/// shown, not obeyed, like the guest's own text.
#[cfg(target_os = "linux")]
#[test]
fn log_lines_are_escaped_on_a_terminal() {
    let dir = fixture();
    std::fs::write(
        dir.path().join("noisy.toml"),
        "[[tool]]\nname = \"noisy\"\nargv = [\"sh\", \"-c\", \"printf 'x\\\\033]0;title\\\\007y' >&2; exit 3\"]\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("noisy.py"), "tools.noisy()\n").unwrap();
    let piped = wasmbox_with_env(dir.path(), &["run", "noisy.py", "--tools", "noisy.toml", "--allow", "noisy"], &[]);
    assert!(String::from_utf8_lossy(&piped.stderr).contains("x\x1b]0;title\x07y"), "a pipe gets the log unchanged");

    let command = format!("'{}' run noisy.py --tools noisy.toml --allow noisy", env!("CARGO_BIN_EXE_wasmbox"));
    let out = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(dir.path())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("util-linux `script` runs");
    let seen = String::from_utf8_lossy(&out.stdout);
    assert!(seen.contains("a command tool failed") && seen.contains("x\\x1b]0;title\\x07y"), "{seen:?}");
    assert!(!seen.contains(['\x1b', '\x07']), "a control character reached the terminal: {seen:?}");
}

/// `--input-file` puts host files under the guest's /input, and `--output-dir` writes what
/// it leaves in /output after the run: inside the directory only, names sanitised, no
/// path of the host reachable from the script.
#[test]
fn input_files_in_and_output_files_out() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data.csv"), "a,b\n1,2\n").unwrap();
    std::fs::write(dir.path().join("secret.txt"), "hunter2").unwrap();
    let script = r#"
import os
rows = open('/input/data.csv').read().splitlines()
open('/input/renamed.txt').read()
os.makedirs('/output/sub', exist_ok=True)
open('/output/sub/rows.txt', 'w').write(str(len(rows)))
open('/output/a:b', 'w').write('colon')
seen = []
for p in ['/secret.txt', 'secret.txt', '../secret.txt', '/tmp/../../secret.txt']:
    try:
        open(p).read(); seen.append(p)
    except OSError:
        pass
(sorted(os.listdir('/input')), seen)
"#;
    std::fs::write(dir.path().join("files.py"), script).unwrap();
    let out = dir.path().join("out");
    let output = wasmbox(
        dir.path(),
        &[
            "run",
            "files.py",
            "--input-file",
            "data.csv",
            "--input-file",
            "data.csv:renamed.txt",
            "--output-dir",
            out.to_str().unwrap(),
        ],
        None,
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(stdout.trim(), r#"[["data.csv","renamed.txt"],[]]"#);
    assert_eq!(std::fs::read_to_string(out.join("sub").join("rows.txt")).unwrap(), "2");
    assert_eq!(std::fs::read_to_string(out.join("a_b")).unwrap(), "colon");

    let missing = wasmbox(dir.path(), &["run", "files.py", "--input-file", "nope.csv"], None);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("nope.csv"));
    let bad_name = wasmbox(dir.path(), &["run", "files.py", "--input-file", "data.csv:../x"], None);
    assert!(String::from_utf8_lossy(&bad_name.stderr).contains(".."), "{:?}", bad_name);
}

/// The same from JavaScript, through its `fs` global (guests/js/fs.js).
#[test]
fn javascript_input_files_in_and_output_files_out() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data.csv"), "a,b\n1,2\n").unwrap();
    std::fs::write(dir.path().join("secret.txt"), "hunter2").unwrap();
    let script = r#"
const rows = fs.readFileSync('/input/data.csv', 'utf8').trim().split('\n');
fs.mkdirSync('/output/sub', { recursive: true });
fs.writeFileSync('/output/sub/rows.txt', String(rows.length));
fs.writeFileSync('/output/a:b', 'colon');
const seen = ['/secret.txt', 'secret.txt', '../secret.txt', '/tmp/../../secret.txt'].filter((p) => fs.existsSync(p));
let readOnly;
try { fs.writeFileSync('/input/data.csv', ''); } catch (e) { readOnly = e.code; }
return [fs.readdirSync('/input'), seen, readOnly];
"#;
    std::fs::write(dir.path().join("files.js"), script).unwrap();
    let out = dir.path().join("out");
    let args = ["run", "files.js", "--input-file", "data.csv", "--output-dir", out.to_str().unwrap()];
    let output = wasmbox(dir.path(), &args, None);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(stdout.trim(), r#"[["data.csv"],[],"EROFS"]"#);
    assert_eq!(std::fs::read_to_string(out.join("sub").join("rows.txt")).unwrap(), "2");
    assert_eq!(std::fs::read_to_string(out.join("a_b")).unwrap(), "colon");
}

/// Human mode prints the script's output as it is written (cli/src/live_output.rs), in
/// this process and through a worker: the script prints `ready`, then waits in a tool
/// until the test has read that line and created a marker file. Were the line printed
/// only at the end, the marker would never come, and the run would end `timeout`.
#[test]
fn human_mode_prints_output_while_the_script_runs() {
    use std::io::BufRead;
    for isolation in ["inproc", "worker"] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("tools.toml"),
            r#"
[[tool]]
name = "wait_for_marker"
description = "Returns once the file `marker` exists"
argv = ["sh", "-c", "while [ ! -e marker ]; do sleep 0.05; done; echo true"]
timeout_ms = 60000
"#,
        )
        .unwrap();
        // A tool call times out after the run's tool timeout: try again until the marker
        // is there or the run's deadline ends the script.
        let script = r#"
import sys
print('ready')
print('also on stderr', file=sys.stderr)
while True:
    try:
        seen = tools.wait_for_marker()
        break
    except ToolError:
        pass
print('marker seen:', seen)
"#;
        std::fs::write(dir.path().join("live.py"), script).unwrap();
        let args = ["run", "live.py", "--tools", "tools.toml", "--allow", "all", "--timeout-ms", "120000"];
        let mut child = Command::new(env!("CARGO_BIN_EXE_wasmbox"))
            .args(args)
            .args(["--isolation", isolation])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("wasmbox starts");
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        assert_eq!(first, "ready\n", "{isolation}");
        std::fs::write(dir.path().join("marker"), "").unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
        let stderr = {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut text).unwrap();
            text
        };
        let status = child.wait().unwrap();
        assert!(status.success(), "{isolation}: {status}\n{rest}\n{stderr}");
        assert_eq!(rest, "marker seen: True\n", "{isolation}: printed once, not again at the end");
        assert_eq!(stderr, "also on stderr\n", "{isolation}");
    }
}

/// `wasmbox repl` on a pipe: JSON lines in, one outcome per line out; what a step defines
/// is there in the next, `reset` starts afresh, and a line that is no request says so.
#[test]
fn repl_keeps_state_across_json_lines_steps() {
    let dir = fixture();
    for (lang, define, read) in
        [("python", "x = 41", "x + tools.weather(city='Paris')['temp_c'] * 0"), ("js", "let x = 41", "return x")]
    {
        let input = format!(
            "{}\n{}\nnot json\n{{\"reset\": true}}\n{}\n",
            serde_json::json!({"code": define}),
            serde_json::json!({"code": read, "input": 1}),
            serde_json::json!({"code": read})
        );
        let out =
            wasmbox(dir.path(), &["repl", "--lang", lang, "--tools", "tools.toml", "--allow", "weather"], Some(&input));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let lines: Vec<serde_json::Value> =
            String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 5, "{lines:?}");
        assert_eq!(lines[0]["status"], "ok", "{lines:?}");
        assert_eq!(
            (lines[1]["status"].as_str(), lines[1]["value"].as_f64()),
            (Some("ok"), Some(41.0)),
            "{lang}: {lines:?}"
        );
        assert!(lines[2]["error"].as_str().unwrap().starts_with("not a request"), "{lines:?}");
        assert_eq!(lines[3], serde_json::json!({"reset": "ok"}));
        assert_eq!(lines[4]["status"], "error", "after reset, {lang} has no x: {lines:?}");
    }
}

/// `wasmbox repl --input-file`: every step reads the file under /input, and a step's
/// outcome lists the session's /output.
#[test]
fn repl_steps_read_input_files() {
    let dir = fixture();
    std::fs::write(dir.path().join("n.txt"), "41").unwrap();
    for (lang, write, read) in [
        (
            "python",
            "open('/output/m.txt', 'w').write(open('/input/data/n.txt').read())",
            "open('/output/m.txt').read()",
        ),
        (
            "js",
            "fs.copyFileSync('/input/data/n.txt', '/output/m.txt')",
            "return fs.readFileSync('/output/m.txt', 'utf8')",
        ),
    ] {
        let input = format!("{}\n{}\n", serde_json::json!({"code": write}), serde_json::json!({"code": read}));
        let out = wasmbox(dir.path(), &["repl", "--lang", lang, "--input-file", "n.txt:data/n.txt"], Some(&input));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let lines: Vec<serde_json::Value> =
            String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines[0]["files"], serde_json::json!([{"name": "m.txt", "text": "41"}]), "{lang}: {lines:?}");
        assert_eq!(lines[1]["value"], "41", "{lang}: {lines:?}");
    }
}
