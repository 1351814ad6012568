//! The built-in guests travel with the crate and the binary: nothing of this checkout's
//! build (target/guests, where `cargo xtask guests` puts the components) is needed to run
//! Python or JavaScript.
//!
//! - A host crate *outside* the workspace (a temp dir, a path dependency on `host/`, a
//!   `[workspace]` of its own, so no `[patch]` of ours and no xtask) runs a Python and a
//!   JavaScript snippet that call a tool, with `WASMBOX_CACHE_DIR` in the temp dir.
//! - The `wasmbox` binary, copied into an empty directory, with `HOME` elsewhere and
//!   `WASMBOX_CACHE_DIR` unset, runs both languages.
//!
//! Each cache starts with the precompiled artifacts of this checkout's cache
//! (target/wasmbox-cache, which `cargo xtask test` fills by compiling the guests the way
//! a first run does), hard-linked: artifacts are keyed by the bytes they were compiled
//! from and by the engine's settings (wasmtime's version among them), so they only ever
//! serve guests the program unpacked itself, compiled by the same wasmtime. The binary
//! uses them; the outside crate, built with crates.io's wasmtime, must not, and compiles
//! its own. Neither the guests' files nor the by-file records are copied: both programs
//! unpack their guests.
//!
//! Where this host allows a mount namespace (Linux: root, or unprivileged user
//! namespaces), both run with an empty tmpfs mounted over the checkout, as if it had been
//! deleted; elsewhere they run beside it, and say so.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("the checkout exists")
}

/// `program args…` with the checkout hidden under an empty tmpfs when this host allows
/// it (`unshare` of a mount namespace), else as it is.
fn without_checkout(program: &Path, args: &[&str]) -> Command {
    let root = repo_root();
    let hidden = ["--mount --map-root-user", "--mount"].into_iter().find(|flags| {
        let probe = Command::new("unshare")
            .args(flags.split(' '))
            .args(["sh", "-c", "mount -t tmpfs tmpfs \"$0\" && test ! -e \"$0/Cargo.toml\""])
            .arg(&root)
            .output();
        probe.is_ok_and(|out| out.status.success())
    });
    // Whatever the program needs must lie outside the checkout.
    let outside = |path: &Path| !path.canonicalize().unwrap_or_else(|_| path.to_owned()).starts_with(&root);
    let Some(flags) = hidden.filter(|_| outside(program) && outside(&std::env::temp_dir())) else {
        eprintln!("NOT hiding the checkout (no mount namespace here): {} runs beside it", program.display());
        let mut command = Command::new(program);
        command.args(args);
        return command;
    };
    let mut command = Command::new("unshare");
    command
        .args(flags.split(' '))
        .args(["sh", "-c", "mount -t tmpfs tmpfs \"$0\" && exec \"$@\""])
        .arg(&root)
        .arg(program)
        .args(args);
    command
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn succeeded(what: &str, output: &Output) {
    assert!(output.status.success(), "{what} failed:\n{}\n{}", text(&output.stdout), text(&output.stderr));
}

const OUTSIDE_MAIN: &str = r#"
use serde_json::json;
use wasmbox::{Engine, EngineConfig, Runtime, Sandbox, Scope, Tool, Tools};

#[tokio::main]
async fn main() {
    let engine = Engine::new(EngineConfig::default()).expect("an engine");
    let mut tools = Tools::new();
    let add = Tool::new("add", "Adds a and b", json!({"type": "object"}), |args| async move {
        Ok(json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)))
    });
    tools.register(add).expect("a tool");
    let snippets = [
        ("python", Runtime::python(&engine), "print('from python')\ntools.add(a=40, b=2)"),
        ("js", Runtime::javascript(&engine), "console.log('from js')\nreturn await tools.add({a: 40, b: 2})"),
    ];
    for (language, runtime, code) in snippets {
        let runtime = runtime.unwrap_or_else(|err| panic!("{language}: {err}"));
        let outcome = Sandbox::new(runtime, tools.clone()).scope(Scope::All).run(code).await;
        println!("{}", json!({"language": language, "outcome": outcome}));
    }
    println!("cache {}", engine.cache_dir().display());
}
"#;

/// Dependencies that only give crates the features they have in the workspace's test
/// build (`cargo test --workspace --all-targets`, which compiles before this test runs),
/// so that their compiled artifacts serve this crate too. Found by comparing the two
/// builds' `cargo +nightly build --unit-graph -Zunstable-options` (docs/performance.md,
/// "CI"): without them, differing features of crates at the bottom of the graph (serde,
/// libc, tokio…) change the hash of nearly every crate above them.
const SAME_FEATURES_AS_THE_WORKSPACE: &str = r#"anyhow = "1"
fnv = "1"
futures = "0.3"
futures-channel = "0.3"
futures-core = "0.3"
futures-sink = "0.3"
futures-util = "0.3"
indexmap = "2"
libc = { version = "0.2", features = ["extra_traits"] }
log = { version = "0.4", features = ["std"] }
rand = "0.10"
regex-automata = { version = "0.4", default-features = false, features = ["dfa-build"] }
serde = { version = "1", features = ["rc"] }
serde_json = { version = "1", features = ["alloc"] }
smallvec = { version = "1", features = ["const_new"] }
tracing-core = "0.1"
typenum = { version = "1", features = ["const-generics"] }
zerocopy = { version = "0.8", features = ["derive"] }

[build-dependencies]
cc = { version = "1", features = ["parallel"] }
"#;

/// Writes the outside host crate into `dir` and builds it; answers the binary.
///
/// It builds into this workspace's own target dir with this workspace's lock file and
/// profile, and asks for the features the workspace's test build unifies on the crates
/// below wasmtime ([`SAME_FEATURES_AS_THE_WORKSPACE`]), so it reuses what that build
/// compiled: only crates.io's wasmtime and wasmtime-environ (not our `[patch]`), what
/// depends on them and the outside crate are compiled, unoptimised but for the compiler. Should the workspace's features drift from
/// that list, the test still passes, compiling more (it prints how many crates). Cargo
/// releases the target dir's lock before it runs tests, so this build does not wait for
/// the `cargo test` running it.
fn build_outside_host_crate(dir: &Path) -> PathBuf {
    let root = repo_root();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            r#"[package]
name = "outside_host"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
wasmbox = {{ path = {host:?}, package = "wasmbox-host" }}
# `fs`: as in the workspace (see SAME_FEATURES_AS_THE_WORKSPACE).
tokio = {{ version = "1", features = ["rt-multi-thread", "macros", "fs"] }}
{SAME_FEATURES_AS_THE_WORKSPACE}
# Not a member of any workspace above it.
[workspace]

# The workspace's profiles, so that the crates both builds share are compiled once.
{profiles}
# The workspace's members get the dev profile, not its "*" override.
[profile.dev.package.wasmbox-guest-python]
opt-level = 0
debug = "line-tables-only"

[profile.dev.package.wasmbox-guest-js]
opt-level = 0
debug = "line-tables-only"

# Compiled for this crate alone: unoptimised, as the run's time goes to the guests and
# to wasmtime's compiler (optimised by the workspace's profiles), not to these.
[profile.dev.package.wasmbox-host]
opt-level = 0
debug = false

[profile.dev.package.wasmtime]
opt-level = 0

# Its build (at the workspace's opt-level 1) was the head of this build's longest chain
# (wasmtime-environ, wasmtime, wasmtime-wasi, the host); unoptimised it builds in half
# the time and makes compiling the two guests only a little slower.
[profile.dev.package.wasmtime-environ]
opt-level = 0

[profile.dev.package.wasmtime-wasi]
opt-level = 0

[profile.dev.package.wasmtime-wasi-io]
opt-level = 0
"#,
            host = root.join("host").to_str().expect("a UTF-8 checkout path"),
            profiles = workspace_profiles(&root),
        ),
    )
    .unwrap();
    std::fs::write(dir.join("src/main.rs"), OUTSIDE_MAIN).unwrap();
    // The workspace's versions (cargo drops what this crate does not use).
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();

    let target_dir = root.join("target");
    let started = Instant::now();
    let output = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--target-dir"])
        .arg(&target_dir)
        .current_dir(dir)
        .env_remove("CARGO_TARGET_DIR")
        // A plain build, not `cargo xtask test`'s clippy-linted one.
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CLIPPY_ARGS")
        .output()
        .expect("cargo starts");
    succeeded("building the outside host crate", &output);
    let stderr = text(&output.stderr);
    let compiled: Vec<&str> = stderr
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("Compiling "))
        .map(|crate_and_version| crate_and_version.split(' ').next().unwrap_or(crate_and_version))
        .collect();
    eprintln!(
        "built the outside host crate in {:.1?}, compiling {} crates: {}",
        started.elapsed(),
        compiled.len(),
        compiled.join(", ")
    );
    let built = target_dir.join(format!("debug/outside_host{}", std::env::consts::EXE_SUFFIX));
    // Out of the checkout, so that it still runs with the checkout hidden.
    let binary = dir.join(built.file_name().expect("a file name"));
    std::fs::copy(&built, &binary).unwrap();
    binary
}

/// The `[profile.*]` tables of the workspace's manifest, which end it.
fn workspace_profiles(root: &Path) -> String {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let start = manifest.find("\n[profile.").expect("the workspace's manifest has profiles");
    let profiles = &manifest[start..];
    let tables = profiles.lines().filter(|line| line.starts_with('['));
    assert!(
        tables.clone().all(|table| table.starts_with("[profile.")),
        "the profiles must end the workspace's manifest"
    );
    assert!(
        ["wasmbox-host]", "wasmtime]", "wasmtime-environ]"]
            .iter()
            .all(|name| !profiles.contains(&format!("package.{name}"))),
        "the outside crate sets those itself"
    );
    profiles.to_owned()
}

/// The outcomes the outside crate printed, by language, and the cache it used.
fn parse_outcomes(stdout: &str) -> (Vec<serde_json::Value>, String) {
    let mut lines = stdout.lines();
    let outcomes = lines.by_ref().take(2).map(|line| serde_json::from_str(line).expect("an outcome")).collect();
    let cache = lines.next().and_then(|line| line.strip_prefix("cache ")).expect("the cache line").to_owned();
    (outcomes, cache)
}

#[test]
fn a_host_crate_outside_the_workspace_runs_python_and_javascript_with_a_tool() {
    let dir = tempfile::tempdir().unwrap();
    let binary = build_outside_host_crate(&dir.path().join("crate"));
    let (home, cache) = (dir.path().join("home"), dir.path().join("cache"));
    std::fs::create_dir(&home).unwrap();
    seed_cache(&repo_root().join("target/wasmbox-cache"), &cache);
    let seeded = artifacts(&cache);

    let started = Instant::now();
    let output = without_checkout(&binary, &[])
        .current_dir(dir.path())
        .env("HOME", &home)
        .env("WASMBOX_CACHE_DIR", &cache)
        .env_remove("WASMBOX_GUEST_DIR")
        .env_remove("XDG_CACHE_HOME")
        .output()
        .expect("the outside crate's binary starts");
    succeeded("the outside crate's binary", &output);
    eprintln!("first run (unpack both guests, load or compile them, run): {:.1?}", started.elapsed());
    let stdout = text(&output.stdout);
    let (outcomes, used_cache) = parse_outcomes(&stdout);
    assert_eq!(Path::new(&used_cache), cache, "{stdout}");
    for (outcome, language) in outcomes.iter().zip(["python", "js"]) {
        assert_eq!(outcome["language"], language, "{stdout}");
        assert_eq!(outcome["outcome"]["status"], "ok", "{stdout}");
        assert_eq!(outcome["outcome"]["value"], 42, "{stdout}");
        assert_eq!(outcome["outcome"]["stdout"]["text"], format!("from {language}\n"), "{stdout}");
        assert_eq!(outcome["outcome"]["tool_calls"][0]["tool"], "add", "{stdout}");
    }
    // Both were unpacked into the cache, and nothing into HOME.
    let unpacked: Vec<String> = std::fs::read_dir(cache.join("builtin"))
        .expect("the unpacked guests")
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for language in ["python", "js"] {
        assert!(unpacked.iter().any(|name| name.starts_with(&format!("{language}-"))), "{unpacked:?}");
    }
    assert_eq!(std::fs::read_dir(&home).unwrap().count(), 0, "HOME is untouched when WASMBOX_CACHE_DIR is set");
    // The workspace's wasmtime (vendor/) writes artifacts that crates.io's, which this
    // crate gets, must not load (vendor/README.md, "Imported tables' element segments"):
    // their keys differ, so the crate compiled both guests beside the seeded artifacts.
    let compiled: Vec<_> = artifacts(&cache).difference(&seeded).cloned().collect();
    assert!(artifacts(&cache).is_superset(&seeded));
    assert_eq!(compiled.len(), 2, "one artifact per guest, compiled by crates.io's wasmtime: {compiled:?}");

    // The second run finds both files and their artifacts: it writes nothing (neither
    // unpacks nor compiles) and answers the same.
    let before = snapshot(&cache);
    let output = without_checkout(&binary, &[]).env("HOME", &home).env("WASMBOX_CACHE_DIR", &cache).output().unwrap();
    succeeded("the outside crate's second run", &output);
    let answers = |outcomes: &[serde_json::Value]| -> Vec<_> {
        outcomes.iter().map(|o| (o["outcome"]["status"].clone(), o["outcome"]["value"].clone())).collect()
    };
    assert_eq!(
        answers(&parse_outcomes(&text(&output.stdout)).0),
        answers(&outcomes),
        "the second run answers as the first"
    );
    assert_eq!(snapshot(&cache), before, "the second run wrote to the cache");
}

/// Every file under `dir` with its length and modification time.
fn snapshot(dir: &Path) -> std::collections::BTreeMap<PathBuf, (u64, std::time::SystemTime)> {
    let mut files = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = std::fs::metadata(&path).unwrap();
        if meta.is_dir() {
            files.extend(snapshot(&path));
        } else {
            files.insert(path, (meta.len(), meta.modified().unwrap()));
        }
    }
    files
}

/// The `wasmbox` binary this test was built with, copied into an empty directory: the
/// bytes `cargo install --path cli` puts in place but for the profile and feature
/// resolution. The guests are embedded the same way in every profile (the bundle crates'
/// `include_bytes!`), and no build has more access to the checkout than another;
/// copying the binary out of target/ is what matters. Running `cargo install` here
/// (`--debug`, this target dir) was tried: resolving the CLI's features alone, it
/// compiled wasmtime once more (docs/performance.md, "CI"). Its default cache (`$HOME/.cache/wasmbox` on Linux) is
/// seeded as the module doc says.
#[test]
fn the_installed_binary_runs_python_and_javascript_from_any_directory() {
    let dir = tempfile::tempdir().unwrap();
    let (bin, home, work) = (dir.path().join("bin"), dir.path().join("home"), dir.path().join("work"));
    for empty in [&bin, &home, &work] {
        std::fs::create_dir(empty).unwrap();
    }
    let binary = bin.join(format!("wasmbox{}", std::env::consts::EXE_SUFFIX));
    std::fs::copy(env!("CARGO_BIN_EXE_wasmbox"), &binary).unwrap();
    let bytes = std::fs::read(&binary).unwrap();
    assert!(
        !bytes.windows(b"target/guests".len()).any(|window| window == b"target/guests"),
        "the binary names a checkout path for its guests"
    );
    let cache =
        if cfg!(target_os = "macos") { home.join("Library/Caches/wasmbox") } else { home.join(".cache/wasmbox") };
    seed_cache(&repo_root().join("target/wasmbox-cache"), &cache);

    let wasmbox = |args: &[&str]| {
        let output = without_checkout(&binary, args)
            .current_dir(&work)
            .env("HOME", &home)
            .env_remove("WASMBOX_CACHE_DIR")
            .env_remove("WASMBOX_GUEST_DIR")
            .env_remove("XDG_CACHE_HOME")
            .output()
            .expect("wasmbox starts");
        succeeded(&format!("wasmbox {args:?}"), &output);
        text(&output.stdout)
    };
    std::fs::write(work.join("tools.toml"), TOOLS).unwrap();
    std::fs::write(work.join("script.py"), "print('from python')\ntools.add(a=40, b=2)\n").unwrap();
    std::fs::write(work.join("script.js"), "console.log('from js')\nreturn await tools.add({a: 40, b: 2})\n").unwrap();
    for language in ["py", "js"] {
        let started = Instant::now();
        let stdout = wasmbox(&["run", &format!("script.{language}"), "--tools", "tools.toml", "--allow", "add"]);
        eprintln!("wasmbox run script.{language}: {:.1?}", started.elapsed());
        let name = if language == "py" { "python" } else { "js" };
        assert_eq!(stdout, format!("from {name}\n42\n"));
    }
    let unpacked = std::fs::read_dir(cache.join("builtin")).expect("unpacked into the default cache").count();
    assert_eq!(unpacked, 2, "both guests unpacked under HOME");
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 3, "nothing written to the working directory");

    let version = wasmbox(&["--version"]);
    for expected in ["python guest: CPython 3.", "js guest: SpiderMonkey", "wasmbox:sandbox@"] {
        assert!(version.contains(expected), "{version}");
    }
}

/// A tool the scripts call: a one-line Python program.
const TOOLS: &str = r#"
[[tool]]
name = "add"
description = "Adds a and b"
argv = ["python3", "-c", "import json, sys; a = json.load(sys.stdin); print(a['a'] + a['b'])"]
"#;

/// The names of the precompiled artifacts directly in `cache`.
fn artifacts(cache: &Path) -> std::collections::BTreeSet<std::ffi::OsString> {
    std::fs::read_dir(cache)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension() == Some(OsStr::new("artifact")))
        .map(|path| path.file_name().unwrap().to_owned())
        .collect()
}

/// Hard-links the precompiled artifacts of `from` (if any) into `to`, created `0700`
/// as the engine wants its cache.
fn seed_cache(from: &Path, to: &Path) {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(to).unwrap();
    let Ok(entries) = std::fs::read_dir(from) else { return };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.extension() == Some(OsStr::new("artifact")) {
            let target = to.join(path.file_name().unwrap());
            if std::fs::hard_link(&path, &target).is_err() {
                std::fs::copy(&path, &target).unwrap();
            }
        }
    }
}
