//! `cargo xtask` — the project's build steps that need more than cargo: pip, npm,
//! rustup. Kept out of build.rs so that building the host never touches the network.
//!
//! - `cargo xtask setup`  — install what the other steps need (rustup target, venv, node).
//! - `cargo xtask guests` — build the guest components into `target/guests/`.
//! - `cargo xtask demo`   — setup + guests + run the demo (Python snippets calling tools).
//! - `cargo xtask test`   — setup + guests + fmt + clippy + every test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

/// componentize-py is pinned: the guest's snapshot and CPython version come from it.
const COMPONENTIZE_PY: &str = "componentize-py==0.25.1";

fn main() -> Result<()> {
    let task = std::env::args().nth(1).unwrap_or_default();
    let root = workspace_root();
    std::env::set_current_dir(&root)?;
    match task.as_str() {
        "setup" => setup(&root),
        "guests" => setup(&root).and_then(|()| build_guests(&root)),
        "demo" => {
            setup(&root)?;
            build_guests(&root)?;
            run(cargo()
                .args(["run", "--quiet", "--example", "demo", "-p", "wasmbox"])
                .env("WASMBOX_CACHE_DIR", cache_dir(&root)))
        }
        "test" => test(&root),
        _ => bail!("usage: cargo xtask <setup|guests|demo|test>"),
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_owned()
}

/// One precompile cache for every test binary and the demo, inside target/ so a
/// `cargo clean` also clears it.
fn cache_dir(root: &Path) -> PathBuf {
    root.join("target/wasmbox-cache")
}

fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

fn run(command: &mut Command) -> Result<()> {
    eprintln!("xtask: running {command:?}");
    let status = command.status().with_context(|| format!("could not start {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed with {status}");
    }
    Ok(())
}

fn setup(root: &Path) -> Result<()> {
    run(Command::new("rustup").args(["target", "add", "wasm32-wasip2"]))?;
    let venv = root.join("target/guest-tools/venv");
    let componentize = venv.join("bin/componentize-py");
    let installed = Command::new(&componentize).arg("--version").output().is_ok_and(|o| {
        o.status.success()
            && String::from_utf8_lossy(&o.stdout).contains(COMPONENTIZE_PY.trim_start_matches("componentize-py=="))
    });
    if !installed {
        let mut make_venv = Command::new("python3");
        make_venv.arg("-m").arg("venv").arg(&venv);
        if run(&mut make_venv).is_err() {
            // Debian's system Python ships venv separately.
            apt_install(&["python3-venv"])?;
            run(&mut make_venv)?;
        }
        run(Command::new(venv.join("bin/pip")).args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            COMPONENTIZE_PY,
        ]))?;
    }
    if Command::new("npm").arg("--version").output().is_err() {
        apt_install(&["nodejs", "npm"])?;
    }
    Ok(())
}

/// Installs Debian packages; only where apt-get exists and we are root.
fn apt_install(packages: &[&str]) -> Result<()> {
    let root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    if !root || Command::new("apt-get").arg("--version").output().is_err() {
        bail!("please install {packages:?} with your package manager");
    }
    run(Command::new("apt-get").args(["update", "-qq"]))?;
    run(Command::new("apt-get").args(["install", "-y", "-qq"]).args(packages))
}

fn build_guests(root: &Path) -> Result<()> {
    let out_dir = root.join("target/guests");
    std::fs::create_dir_all(&out_dir)?;
    build_guest(root, "python", COMPONENTIZE_PY, || {
        run(Command::new(root.join("target/guest-tools/venv/bin/componentize-py"))
            .args(["-d", "wit", "-w", "code-runner", "componentize", "app", "-p", "guests/python", "-o"])
            .arg(out_dir.join("python.wasm")))
    })?;
    let lock = std::fs::read_to_string(root.join("guests/js/package-lock.json"))?;
    build_guest(root, "js", &lock, || {
        // The lock file pins componentize-js; `npm ci` installs exactly it.
        if !root.join("guests/js/node_modules/@bytecodealliance/componentize-js").is_dir() {
            run(Command::new("npm").args(["ci", "--silent", "--no-audit", "--no-fund", "--prefix", "guests/js"]))?;
        }
        run(Command::new("node").arg("guests/js/build.mjs").arg(out_dir.join("js.wasm")))
    })
}

/// Builds `target/guests/<name>.wasm` with `build` unless its inputs (wit/, the guest's
/// folder, `pins`) are unchanged since the last build.
fn build_guest(root: &Path, name: &str, pins: &str, build: impl FnOnce() -> Result<()>) -> Result<()> {
    let out = root.join(format!("target/guests/{name}.wasm"));
    let stamp = root.join(format!("target/guests/{name}.stamp"));
    let inputs = fingerprint(&[root.join("wit"), root.join("guests").join(name)], pins)?;
    if out.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == inputs) {
        eprintln!("xtask: {name} guest is up to date");
        return Ok(());
    }
    let started = Instant::now();
    build()?;
    std::fs::write(&stamp, inputs)?;
    let size = std::fs::metadata(&out)?.len();
    eprintln!("xtask: built {} ({:.1} MB) in {:.1?}", out.display(), size as f64 / 1e6, started.elapsed());
    Ok(())
}

/// A hash of every file under `dirs` (names and contents) plus `extra`.
fn fingerprint(dirs: &[PathBuf], extra: &str) -> Result<String> {
    let mut files = Vec::new();
    for dir in dirs {
        collect_files(dir, &mut files)?;
    }
    files.sort();
    let mut hasher = Sha256::new();
    hasher.update(extra);
    for file in files {
        hasher.update(file.to_string_lossy().as_bytes());
        hasher.update(std::fs::read(&file)?);
    }
    Ok(hex::encode(hasher.finalize()))
}

fn collect_files(dir: &Path, files: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name == "__pycache__" || name == "node_modules" || name.starts_with("test_") {
            continue;
        }
        if path.is_dir() {
            collect_files(&path, files)?;
        } else {
            files.push(path);
        }
    }
    Ok(())
}

fn test(root: &Path) -> Result<()> {
    let started = Instant::now();
    setup(root)?;
    build_guests(root)?;
    run(cargo().args(["fmt", "--all", "--check"]))?;
    run(cargo().args(["clippy", "--workspace", "--all-targets", "--quiet", "--", "-D", "warnings"]))?;
    run(Command::new("python3").arg("guests/python/test_app_native.py"))?;
    run(Command::new("node").arg("guests/js/test_runner_native.mjs"))?;
    // Compile each guest once, up front: otherwise the first tests of every test binary
    // would all compile it at the same time on a cold cache.
    for lang in ["python", "js"] {
        run(cargo()
            .args(["run", "--quiet", "-p", "wasmbox-cli", "--", "precompile", "--lang", lang])
            .env("WASMBOX_CACHE_DIR", cache_dir(root)))?;
    }
    run(cargo().args(["test", "--workspace"]).env("WASMBOX_CACHE_DIR", cache_dir(root)))?;
    eprintln!("xtask: all checks passed in {:.0?}", started.elapsed());
    Ok(())
}
