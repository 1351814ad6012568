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
    let path = wasmbox::builtin_guest_path(name);
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
