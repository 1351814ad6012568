//! README.md's CLI section runs as written against examples/: every command of its `sh`
//! block is run from the checkout's root (with `cargo run -p wasmbox-cli --` standing
//! for this build's binary) and checked here, its `text` block is what the first prints,
//! and its `toml` block is part of examples/tools.toml. A command added to the README
//! without a check here, or a check whose command left the README, fails the test.
//! Needs the guests (`cargo xtask guests`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// What the README's commands start with; the test runs the binary cargo built instead.
const CARGO_RUN: &str = "cargo run -p wasmbox-cli --";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The fenced code blocks of `lang` in the README section titled `title`.
fn blocks(readme: &str, title: &str, lang: &str) -> Vec<String> {
    let start = readme.find(&format!("\n## {title}\n")).unwrap_or_else(|| panic!("README has no `## {title}`"));
    let section = &readme[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |end| end + 3)];
    let mut found = Vec::new();
    let mut rest = section;
    let fence = format!("```{lang}\n");
    while let Some(open) = rest.find(&fence) {
        let body = &rest[open + fence.len()..];
        let close = body.find("```").expect("a closed code block");
        found.push(body[..close].to_owned());
        rest = &body[close..];
    }
    found
}

/// `line` without a trailing `# comment` (the commands quote no `#`).
fn command_of(line: &str) -> &str {
    line.split(" #").next().unwrap_or(line).trim()
}

fn run(line: &str) -> Output {
    assert_eq!(line.matches(CARGO_RUN).count(), 1, "a README command the test cannot run: {line}");
    let binary = env!("CARGO_BIN_EXE_wasmbox");
    assert!(!binary.contains('\''), "the binary's path must not hold a quote: {binary}");
    let command = line.replace(CARGO_RUN, &format!("'{binary}'"));
    let output = Command::new("sh")
        .args(["-c", &command])
        .current_dir(repo_root())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("sh runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("is not built"), "the README test needs the guests: run `cargo xtask guests`\n{stderr}");
    output
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Checks the output of the first command: the README's `text` block, give or take the
/// time `now` answered.
fn prints_the_readmes_output(out: &Output, shown: &str) {
    let stdout = text(&out.stdout);
    let (first, value) = stdout.split_once('\n').unwrap_or_else(|| panic!("two lines: {stdout}"));
    let (shown_first, shown_value) = shown.split_once('\n').expect("two lines in the README");
    assert_eq!(first, shown_first);
    let value: serde_json::Value = serde_json::from_str(value).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let mut shown_value: serde_json::Value = serde_json::from_str(shown_value).unwrap();
    let checked_at = value["checked_at"].as_str().unwrap_or_else(|| panic!("`now` answered: {value}"));
    assert!(checked_at.ends_with('Z') && checked_at.len() == "2026-01-01T12:00:00Z".len(), "{checked_at}");
    shown_value["checked_at"] = checked_at.into();
    assert_eq!(value, shown_value);
}

#[test]
fn the_readmes_cli_commands_run_as_written() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let [commands] = &blocks(&readme, "The CLI", "sh")[..] else { panic!("one `sh` block in README's CLI section") };
    let [shown] = &blocks(&readme, "The CLI", "text")[..] else { panic!("one `text` block in README's CLI section") };
    let ok = |out: &Output| assert!(out.status.success(), "{}\n{}", text(&out.stdout), text(&out.stderr));

    type Check<'a> = Box<dyn Fn(&Output) + 'a>;
    let checks: Vec<(&str, Check)> = vec![
        (
            "cargo run -p wasmbox-cli -- run examples/convert.py --tools examples/tools.toml --allow all",
            Box::new(|out| {
                ok(out);
                prints_the_readmes_output(out, shown);
            }),
        ),
        (
            "cargo run -p wasmbox-cli -- run examples/convert.js --tools examples/tools.toml --allow convert --json",
            Box::new(|out| {
                ok(out);
                let outcome: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                assert_eq!(outcome["value"], serde_json::json!({"marathon_mi": 26.218757, "oven_f": 356, "checked_at": null}));
                assert_eq!(outcome["stdout"]["text"], "a marathon is 26.2 mi; 180 °C is 356 °F\n");
                let statuses: Vec<_> =
                    outcome["tool_calls"].as_array().unwrap().iter().map(|c| (c["tool"].clone(), c["status"].clone())).collect();
                assert_eq!(statuses[2], ("now".into(), "denied".into()), "{outcome}");
            }),
        ),
        (
            "cargo run -p wasmbox-cli -- -v run examples/convert.py --tools examples/tools.toml --allow all --isolation worker",
            Box::new(|out| {
                ok(out);
                assert!(text(&out.stdout).starts_with("a marathon is 26.2 mi"), "{}", text(&out.stdout));
                let log = text(&out.stderr);
                assert!(log.contains(r#""event":"run_finished""#) && log.contains(r#""tool":"now""#), "{log}");
            }),
        ),
        (
            "echo 'sum(range(10))' | cargo run -p wasmbox-cli -- run - --timeout-ms 2000 --memory-mb 64",
            Box::new(|out| {
                ok(out);
                assert_eq!(text(&out.stdout), "45\n");
            }),
        ),
        (
            "cargo run -p wasmbox-cli -- describe-tools examples/tools.toml",
            Box::new(|out| {
                ok(out);
                let tools: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                let names: Vec<_> = tools.as_array().unwrap().iter().map(|t| t["name"].clone()).collect();
                assert_eq!(names, ["convert", "now"]);
            }),
        ),
        (
            "cargo run -p wasmbox-cli -- isolation",
            Box::new(|out| {
                ok(out);
                assert!(text(&out.stdout).contains("inproc: available"), "{}", text(&out.stdout));
            }),
        ),
        (
            "cargo run -p wasmbox-cli -- precompile --lang js",
            Box::new(|out| {
                ok(out);
                assert!(text(&out.stderr).contains("the js guest is precompiled"), "{}", text(&out.stderr));
            }),
        ),
    ];

    let in_readme: BTreeSet<&str> = commands.lines().filter(|l| !l.trim().is_empty()).map(command_of).collect();
    let checked: BTreeSet<&str> = checks.iter().map(|(command, _)| *command).collect();
    assert_eq!(in_readme, checked, "README's CLI commands and this test's checks differ");
    for (command, check) in &checks {
        let out = run(command);
        eprintln!("ran: {command}");
        check(&out);
    }
}

#[test]
fn the_readmes_tools_file_is_the_examples() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let tools = std::fs::read_to_string(repo_root().join("examples/tools.toml")).unwrap();
    let [excerpt] = &blocks(&readme, "The CLI", "toml")[..] else { panic!("one `toml` block in README's CLI section") };
    assert!(tools.contains(excerpt.as_str()), "README's tools file is not part of examples/tools.toml:\n{excerpt}");
}
