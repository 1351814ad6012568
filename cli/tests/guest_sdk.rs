//! The guest SDK travels: a guest crate *outside* this workspace, with nothing but a path
//! dependency on the SDK (no xtask, no `wit/` of its own, a `[workspace]` of its own),
//! builds for wasm32-wasip2 with plain cargo, and the `wasmbox` binary runs it with
//! `--guest` and a command tool. Twice: against the checkout's `guest-sdk/`, as
//! docs/guests.md tells a user to, and against the SDK as `cargo package` packages it,
//! which holds no `../wit` to lean on.
//!
//! Building it compiles wit-bindgen and its proc-macro chain. The build shares
//! `target/guests-rust` with `cargo xtask guests` (which builds guests/rust with the same
//! SDK, lock file and release profile), so in CI, where xtask has just built those, it
//! costs only the outside crate itself; the build time is printed on stderr.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

const GUEST_SOURCE: &str = r#"
use serde_json::{json, Value};
use wasmbox_guest::{tools, RunError};

/// The code is a number; the tool `double` doubles it.
fn run(code: &str, input: Value) -> Result<Value, RunError> {
    let n: i64 = code.trim().parse().map_err(|e| RunError::syntax(format!("not a number: {e}")))?;
    let doubled: i64 = tools::call("double", &json!({ "n": n }))?;
    Ok(json!({ "doubled": doubled, "input": input, "wit": wasmbox_guest::WIT_VERSION }))
}

wasmbox_guest::export_runner!(run);
"#;

const TOOLS: &str = r#"
[[tool]]
name = "double"
description = "Doubles n"
args_schema = { type = "object", properties = { n = { type = "integer" } }, required = ["n"] }
argv = ["python3", "-c", "import json, sys; print(json.load(sys.stdin)['n'] * 2)"]
"#;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("the checkout exists")
}

/// A plain cargo, not `cargo xtask test`'s clippy-linted one.
fn cargo() -> Command {
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo.env_remove("RUSTC_WORKSPACE_WRAPPER").env_remove("CLIPPY_ARGS");
    cargo
}

/// The SDK as `cargo package` packages it, unpacked into target/guest-sdk-package/ (a
/// fixed place, so the shared target dir reuses its build).
fn packaged_sdk() -> PathBuf {
    let root = repo_root();
    let package_dir = tempfile::tempdir().unwrap();
    let output = cargo()
        .args(["package", "-p", "wasmbox-guest", "--no-verify", "--allow-dirty"])
        .args(["--manifest-path", "guests/rust/Cargo.toml", "--target-dir"])
        .arg(package_dir.path())
        .current_dir(&root)
        .output()
        .expect("cargo starts");
    assert!(output.status.success(), "cargo package -p wasmbox-guest:\n{}", String::from_utf8_lossy(&output.stderr));
    let crate_file = std::fs::read_dir(package_dir.path().join("package"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|ext| ext == "crate"))
        .expect("a .crate file");
    let unpacked = root.join("target/guest-sdk-package");
    if unpacked.exists() {
        std::fs::remove_dir_all(&unpacked).unwrap();
    }
    std::fs::create_dir_all(&unpacked).unwrap();
    // A .crate is a gzipped tar of one folder, `<name>-<version>/`. Its files carry one
    // fixed old mtime, which cargo would take for "unchanged since the last build" in
    // this fixed place: `-m` stamps them with the time of unpacking instead.
    let status = Command::new("tar")
        .arg("xzmf")
        .arg(&crate_file)
        .arg("--strip-components=1")
        .arg("-C")
        .arg(&unpacked)
        .status()
        .expect("tar runs");
    assert!(status.success(), "unpacking {}", crate_file.display());
    assert!(unpacked.join("wit/sandbox.wit").is_file(), "the package carries no wit/sandbox.wit");
    unpacked
}

/// Writes the outside guest crate, depending on the SDK at `sdk`, into `dir` and builds
/// it; answers the component.
fn build_outside_guest(dir: &Path, sdk: &Path) -> PathBuf {
    let root = repo_root();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            r#"[package]
name = "outside_guest"
version = "0.1.0"
edition = "2021"

[lib]
crate-type = ["cdylib"]

[dependencies]
wasmbox-guest = {{ path = {sdk:?} }}
serde_json = "1"

# Not a member of any workspace above it.
[workspace]

# The profile of guests/rust, so the shared target dir's dependencies are reused.
[profile.release]
opt-level = "s"
"#,
            sdk = sdk.to_str().expect("a UTF-8 checkout path"),
        ),
    )
    .unwrap();
    std::fs::write(dir.join("src/lib.rs"), GUEST_SOURCE).unwrap();
    // The versions guests/rust already builds with (cargo drops the entries this crate
    // does not use), so nothing is resolved anew and the shared artifacts match.
    std::fs::copy(root.join("guests/rust/Cargo.lock"), dir.join("Cargo.lock")).unwrap();

    let target_dir = root.join("target/guests-rust");
    let started = Instant::now();
    let output = cargo()
        .args(["build", "--release", "--target", "wasm32-wasip2", "--target-dir"])
        .arg(&target_dir)
        .current_dir(dir)
        .output()
        .expect("cargo starts");
    assert!(
        output.status.success(),
        "building the outside guest crate failed (it needs the wasm32-wasip2 target: \
         `rustup target add wasm32-wasip2`):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("built the outside guest crate against {} in {:.1?}", sdk.display(), started.elapsed());
    let component = target_dir.join("wasm32-wasip2/release/outside_guest.wasm");
    assert!(component.is_file(), "{} was not written", component.display());
    component
}

fn wasmbox(dir: &Path, cache: &Path, args: &[&str]) -> (Output, serde_json::Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_wasmbox"))
        .args(args)
        .current_dir(dir)
        .env("WASMBOX_CACHE_DIR", cache)
        .output()
        .expect("wasmbox starts");
    let outcome = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}\n{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
    });
    (output, outcome)
}

#[test]
fn a_guest_crate_outside_the_workspace_builds_and_runs_with_a_tool() {
    for sdk in [repo_root().join("guest-sdk"), packaged_sdk()] {
        let crate_dir = tempfile::tempdir().unwrap();
        let component = build_outside_guest(crate_dir.path(), &sdk);
        runs_with_a_tool(&component);
    }
}

fn runs_with_a_tool(component: &Path) {
    let run_dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    std::fs::write(run_dir.path().join("tools.toml"), TOOLS).unwrap();
    std::fs::write(run_dir.path().join("code.txt"), "21\n").unwrap();
    let guest = component.to_str().expect("a UTF-8 path");

    let base = ["run", "code.txt", "--guest", guest, "--tools", "tools.toml", "--json"];
    let (output, outcome) =
        wasmbox(run_dir.path(), cache.path(), &[&base[..], &["--allow", "double", "--input", r#"{"k": 1}"#]].concat());
    assert!(output.status.success(), "{outcome}\n{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(outcome["status"], "ok", "{outcome}");
    assert_eq!(outcome["value"], serde_json::json!({"doubled": 42, "input": {"k": 1}, "wit": "0.1.2"}));
    let calls = outcome["tool_calls"].as_array().expect("a trail of tool calls");
    assert_eq!(calls.len(), 1, "{outcome}");
    assert_eq!(calls[0]["tool"], "double", "{outcome}");

    // Without --allow the call is refused, and the SDK's `?` makes that the run's
    // exception of the built-in guests' kind.
    let (output, outcome) = wasmbox(run_dir.path(), cache.path(), &base);
    assert_eq!(output.status.code(), Some(1), "{outcome}");
    assert_eq!(outcome["error"]["kind"], "ToolDenied", "{outcome}");
}
