//! `cargo xtask` — the project's build steps that need more than cargo: pip, npm,
//! rustup. Kept out of build.rs so that building the host never touches the network.
//!
//! - `cargo xtask setup`  — install what every step needs: what the guests need (the
//!   wasm32-wasip2 target, a venv with componentize-py, node and npm, clang) and what
//!   only `test` needs (the Windows and macOS targets and C toolchain of the cross-check,
//!   bubblewrap, the MCP end-to-end tests' pinned Python SDK and npm server under
//!   target/mcp-tools).
//! - `cargo xtask guests` — install what the guests need and build the guest components
//!   into `target/guests/`: the built-in Python and JS guests, the Rust guests of
//!   guests/rust, and the examples; and compress the built-in two into their crates,
//!   guest-bundles/ (what the host crate and binary carry).
//! - `cargo xtask demo`   — guests + run the demo (Python snippets calling tools).
//! - `cargo xtask test`   — setup + guests + fmt + Windows/macOS `cargo check` + clippy
//!   + `cargo package` of the published crates + every test + the Python package's wheel
//!     and its pytest suite (python/, in target/python).
//! - `cargo xtask cross-check` — only the Windows/macOS `cargo check` (after setup).
//! - `cargo xtask fuzz-smoke` — build the fuzz targets of fuzz/ (nightly, cargo-fuzz) and
//!   run each for a few seconds (`WASMBOX_FUZZ_SECONDS`, default 10). Not part of `test`:
//!   see docs/fuzzing.md.
//! - `cargo xtask python` — only `test`'s Python package step (after `cargo xtask guests`):
//!   the workspace's test build, which builds the extension, then the wheel, its venv and
//!   its pytest suite.
//! - `cargo xtask python-guest --with REQUIREMENT … -o OUT.wasm` — the Python guest with
//!   pure-Python packages from PyPI added (docs/guests.md, "Adding Python packages").
//! - `cargo xtask docker-image [BINARY]` — build the `docker` isolation's worker image
//!   from the `wasmbox` binary's loader and libraries and load it into the engine.

mod docker;
mod guest_bundles;
mod mcp_partners;
mod python_guest;
mod python_package;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

/// componentize-py is pinned: the guest's snapshot and CPython version come from it.
const COMPONENTIZE_PY: &str = "componentize-py==0.25.1";
/// The CPython that [`COMPONENTIZE_PY`] builds in (checked against the built guest).
const CPYTHON_VERSION: &str = "3.14.0";

/// Host and CLI are `cargo check`ed for these too, so code that only builds on Linux
/// cannot land (the worker wrappers have Windows- and macOS-only parts).
const CROSS_CHECK_TARGETS: [&str; 2] = ["x86_64-pc-windows-msvc", "aarch64-apple-darwin"];

fn main() -> Result<()> {
    let task = std::env::args().nth(1).unwrap_or_default();
    let root = workspace_root();
    let invoked_from = std::env::current_dir()?;
    std::env::set_current_dir(&root)?;
    match task.as_str() {
        "setup" => setup(&root),
        "guests" => setup_guests(&root).and_then(|()| build_guests(&root, Guests::All)),
        "demo" => {
            setup_guests(&root)?;
            build_guests(&root, Guests::BuiltIn)?;
            run(cargo()
                .args(["run", "--quiet", "--example", "demo", "-p", "wasmbox-host"])
                .env("WASMBOX_CACHE_DIR", cache_dir(&root)))
        }
        "test" => test(&root),
        "cross-check" => cross_check(&root),
        "docker-image" => docker::image_command(&root, std::env::args_os().nth(2).map(PathBuf::from)),
        "fuzz-smoke" => fuzz_smoke(&root),
        "python-guest" => python_guest::command(&root, &invoked_from, &std::env::args().skip(2).collect::<Vec<_>>()),
        // Only the Python package's step of `test`, after the test build that makes the
        // extension and the CLI it uses.
        // The same test build as `test`'s (flags and wrapper), so neither rebuilds the other;
        // its default targets, as `test`'s `cargo test --workspace` runs them, because that
        // is what builds the examples (the extension among them) as examples: with
        // `--all-targets` they are built as tests, and the `.so` packed would be stale.
        "python" => run(linted(cargo()).args(["test", "--workspace", "--no-run", "--quiet"]))
            .and_then(|()| python_package::test(&root, &root.join("target/debug/wasmbox"))),
        _ => bail!("usage: cargo xtask <setup|guests|demo|test|cross-check|fuzz-smoke|python|python-guest|docker-image [BINARY]>"),
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

/// `command` (a cargo) compiling the workspace's own crates with clippy's driver and
/// warnings denied, as `cargo clippy -- -D warnings` does (the same driver and the same
/// `CLIPPY_ARGS` it passes), but while building them for real: a separate `cargo clippy`
/// would check every dependency, wasmtime and Cranelift included, a second time, which
/// was a large share of CI. Every cargo run that should reuse this build must be
/// `linted` too (the wrapper is part of the workspace crates' fingerprints); nested
/// cargo runs in tests remove both variables.
fn linted(mut command: Command) -> Command {
    let driver = std::env::var_os("CARGO")
        .map(PathBuf::from)
        .map(|cargo| cargo.with_file_name(format!("clippy-driver{}", std::env::consts::EXE_SUFFIX)))
        .filter(|driver| driver.is_file())
        .unwrap_or_else(|| PathBuf::from("clippy-driver"));
    command.env("RUSTC_WORKSPACE_WRAPPER", driver).env("CLIPPY_ARGS", "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__");
    command
}

/// The test binary of `cli/tests/outside_checkout.rs`, which `cargo xtask test` runs
/// beside the rest, and its tests, which the rest skips.
const OUTSIDE_CHECKOUT_TEST: &str = "outside_checkout";
const OUTSIDE_CHECKOUT_TESTS: [&str; 2] = [
    "a_host_crate_outside_the_workspace_runs_python_and_javascript_with_a_tool",
    "the_installed_binary_runs_python_and_javascript_from_any_directory",
];

/// [`run`], with the command's output printed only once it ended.
fn run_quietly(command: &mut Command) -> Result<()> {
    eprintln!("xtask: running {command:?} (its output follows when it ends)");
    let started = Instant::now();
    let output = command.output().with_context(|| format!("could not start {command:?}"))?;
    eprintln!("xtask: output of {command:?}:");
    std::io::Write::write_all(&mut std::io::stderr(), &output.stdout)?;
    std::io::Write::write_all(&mut std::io::stderr(), &output.stderr)?;
    if !output.status.success() {
        bail!("{command:?} failed with {}", output.status);
    }
    eprintln!("xtask: {:.0?} for {command:?}", started.elapsed());
    Ok(())
}

fn run(command: &mut Command) -> Result<()> {
    eprintln!("xtask: running {command:?}");
    let started = Instant::now();
    let status = command.status().with_context(|| format!("could not start {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed with {status}");
    }
    // Where CI's time goes, step by step (the budget is in the README).
    let elapsed = started.elapsed();
    if elapsed.as_secs() >= 5 {
        let args: Vec<_> = command.get_args().take(4).map(|arg| arg.to_string_lossy()).collect();
        eprintln!("xtask: {elapsed:.0?} for {} {}", command.get_program().to_string_lossy(), args.join(" "));
    }
    Ok(())
}

/// Installs what every step needs: [`setup_guests`], then what only `test` adds (the
/// cross-check's rustup targets and C toolchain, bubblewrap for the isolation tests).
/// The MCP partners are installed by `test` itself, beside the cross-check.
fn setup(root: &Path) -> Result<()> {
    setup_guests(root)?;
    run(Command::new("rustup").args(["target", "add"]).args(CROSS_CHECK_TARGETS))?;
    if cfg!(target_os = "linux") {
        let mut missing = Vec::new();
        // The `bwrap` isolation tests run wherever bubblewrap can create namespaces.
        if !["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"].iter().any(|p| Path::new(p).is_file()) {
            missing.push("bubblewrap");
        }
        // The cross-check's C toolchain (see `cross_check_c_env`); setup_guests has
        // installed clang.
        for (program, package) in [("llvm-lib", "llvm"), ("llvm-ar", "llvm")] {
            if Command::new(program).arg("--version").output().is_err() && !missing.contains(&package) {
                missing.push(package);
            }
        }
        if !Path::new(MINGW_INCLUDE).join("windows.h").is_file() {
            missing.push("mingw-w64-x86-64-dev");
        }
        if !missing.is_empty() {
            apt_install(&missing)?;
        }
    }
    Ok(())
}

/// Installs what building the guests (and so `demo`) needs, and no more: the
/// wasm32-wasip2 target (rust-toolchain.toml lists it, but a toolchain installed before
/// it did lacks it), a venv with the pinned componentize-py, node and npm, and clang
/// for the Python guest's C module (see `build_python_native_module`).
fn setup_guests(root: &Path) -> Result<()> {
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
    if cfg!(target_os = "linux") && Command::new("clang").arg("--version").output().is_err() {
        apt_install(&["clang"])?;
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

/// Asks the built CLI (`wasmbox isolation`, the library's own probes) which isolations
/// this host provides, and says loudly which wrapper tests will skip.
fn available_isolations(wasmbox: &Path) -> Result<Vec<String>> {
    let output = Command::new(wasmbox).arg("isolation").output().context("running `wasmbox isolation`")?;
    let report = String::from_utf8_lossy(&output.stdout);
    eprint!("xtask: isolation on this host:\n{report}");
    let available: Vec<String> =
        report.lines().filter_map(|line| line.strip_suffix(": available")).map(str::to_owned).collect();
    for wrapper in ["bwrap", "docker"] {
        if !available.iter().any(|name| name == wrapper) {
            eprintln!("xtask: SKIPPING the {wrapper} isolation tests: it is unavailable on this host (see above)");
        }
    }
    Ok(available)
}

/// `cargo check` for every [`CROSS_CHECK_TARGETS`], into target/<triple>/ of the one
/// target dir: the host and the Python package everywhere (the package has Linux-only
/// code behind `cfg` with stand-ins elsewhere; PyO3's abi3 needs no Python of the target
/// to check), the CLI (and the MCP crate under it) for the non-Unix target only. The CLI
/// has no platform code of its own; what it could get wrong is a Unix-only API, which
/// Windows catches, and on macOS its dependencies would only be checked once more
/// (docs/performance.md, "CI"). Without the `compiler`
/// feature: checking Cranelift for two more targets was a large share of the step, and
/// only one call of the host needs it (`precompile_cache::compile`), which has no
/// platform code.
fn cross_check(root: &Path) -> Result<()> {
    for target in CROSS_CHECK_TARGETS {
        let mut check = cargo();
        check.args(["check", "--quiet"]).args(cross_check_selection(target));
        run(check.envs(cross_check_c_env(root, target)?))?;
    }
    Ok(())
}

/// The packages, features and target [`cross_check`] checks for `target`. Every package
/// selected must leave the host's `compiler` feature to its default features, which
/// `--no-default-features` turns off (the test `the_cross_check_leaves_cranelift_out`).
fn cross_check_selection(target: &str) -> Vec<&str> {
    let mut selection = vec!["--no-default-features", "--target", target, "-p", "wasmbox-host", "-p", "wasmbox-python"];
    if target.contains("windows") {
        selection.extend(["-p", "wasmbox-cli"]);
    }
    selection
}

/// Windows API headers from mingw-w64 (Debian/Ubuntu `mingw-w64-x86-64-dev`).
const MINGW_INCLUDE: &str = "/usr/share/mingw-w64/include";

/// `cargo check` for Windows and macOS from Linux. Checking never links, but build
/// scripts still run, and two of wasmtime's compile a C file for the target with `cc`:
/// `wasmtime-internal-fiber` (Windows: `GetCurrentFiber` from <windows.h>) and
/// `wasmtime` (all targets: a weak-symbol helper that needs only `NULL` from
/// <stdlib.h>). The host's gcc can do neither, so:
/// - Windows: clang with mingw-w64's Windows headers. Those only parse in clang's GNU
///   mode, so the shim is compiled for `x86_64-w64-windows-gnu` — the same x64 ABI and
///   COFF object format as MSVC — and archived with `llvm-lib`. (The MSVC SDK itself
///   cannot be installed on Linux without accepting Microsoft's licence, as `xwin` does.)
/// - macOS: Apple's SDK is not redistributable, so clang compiles for
///   `arm64-apple-macosx` against no system headers at all (`-nostdlibinc`; clang's own
///   stdint.h/stdbool.h/stddef.h suffice) plus a one-line <stdlib.h> that supplies `NULL`
///   from <stddef.h>; archived with `llvm-ar`.
///
/// The objects are never linked, only checked for. On a macOS or Windows host the
/// native toolchain is used instead, as is any `CC_<target>` the caller already set.
fn cross_check_c_env(root: &Path, target: &str) -> Result<Vec<(String, String)>> {
    let suffix = target.replace('-', "_");
    if !cfg!(target_os = "linux") || std::env::var_os(format!("CC_{suffix}")).is_some() {
        return Ok(Vec::new());
    }
    let (cflags, archiver) = match target {
        "x86_64-pc-windows-msvc" => {
            if !Path::new(MINGW_INCLUDE).join("windows.h").is_file() {
                bail!("{MINGW_INCLUDE}/windows.h is missing: install mingw-w64-x86-64-dev (cargo xtask setup does)");
            }
            (format!("--target=x86_64-w64-windows-gnu -isystem {MINGW_INCLUDE}"), "llvm-lib")
        }
        "aarch64-apple-darwin" => {
            let include = root.join("target/cross-check/darwin-include");
            std::fs::create_dir_all(&include)?;
            std::fs::write(
                include.join("stdlib.h"),
                "/* cargo xtask: macOS cross-check without the SDK; see cross_check_c_env. */\n#include <stddef.h>\n",
            )?;
            let include = include.to_str().context("the workspace path is not UTF-8")?;
            if include.contains(char::is_whitespace) {
                bail!("CFLAGS cannot hold the include path {include:?}, which has whitespace");
            }
            (format!("-nostdlibinc -isystem {include}"), "llvm-ar")
        }
        other => bail!("no cross-check C toolchain for {other}"),
    };
    Ok(vec![
        (format!("CC_{suffix}"), "clang".into()),
        (format!("CFLAGS_{suffix}"), cflags),
        (format!("AR_{suffix}"), archiver.into()),
    ])
}

/// Which guests [`build_guests`] builds.
#[derive(Clone, Copy, PartialEq)]
enum Guests {
    /// The Python and JS guests the host embeds: all the demo needs.
    BuiltIn,
    /// Those, the docs' examples, the Python guest with a package added and the Rust
    /// guests: what the tests use.
    All,
}

fn build_guests(root: &Path, which: Guests) -> Result<()> {
    build_builtin_guests(root)?;
    match which {
        Guests::BuiltIn => Ok(()),
        Guests::All => build_test_guests(root),
    }
}

/// The lock file of guests/js, which pins componentize-js and the FormatJS packages.
fn js_lock(root: &Path) -> Result<String> {
    Ok(std::fs::read_to_string(root.join("guests/js/package-lock.json"))?)
}

/// Installs exactly what the JS lock file pins with `npm ci`, again whenever the lock
/// file changes (a copy of it marks the installed tree).
fn install_componentize_js(root: &Path, lock: &str) -> Result<()> {
    let installed = root.join("guests/js/node_modules/.wasmbox-installed-lock.json");
    if !root.join(COMPONENTIZE_JS_CLI).is_file() || std::fs::read_to_string(&installed).ok().as_deref() != Some(lock) {
        run(Command::new("npm").args(["ci", "--silent", "--no-audit", "--no-fund", "--prefix", "guests/js"]))?;
        std::fs::write(&installed, lock)?;
    }
    Ok(())
}

/// The Python and JS guests the host embeds, built side by side (each build keeps one
/// core busy), then compressed into their bundle crates.
fn build_builtin_guests(root: &Path) -> Result<()> {
    let out_dir = root.join("target/guests");
    std::fs::create_dir_all(&out_dir)?;
    let lock = js_lock(root)?;
    std::thread::scope(|scope| {
        let python = scope.spawn(|| {
            build_guest(root, "python", &python_guest::pins(), || {
                python_guest::componentize(root, &[], &out_dir.join("python.wasm"))
            })
        });
        let js = build_guest(root, "js", &lock, || {
            install_componentize_js(root, &lock)?;
            run(Command::new("node").arg("guests/js/build.mjs").arg(out_dir.join("js.wasm")))
        });
        python.join().map_err(|_| anyhow::anyhow!("building the Python guest panicked"))?.and(js)
    })?;
    bundle_builtin_guests(root, &lock)
}

/// What the tests use besides the built-in guests: the Python guest with a package from
/// PyPI added (as users build theirs), the docs' examples and the Rust guests.
fn build_test_guests(root: &Path) -> Result<()> {
    let out_dir = root.join("target/guests");
    let lock = js_lock(root)?;
    python_guest::build_example(root)?;
    build_examples(root, &out_dir, &lock, || install_componentize_js(root, &lock))?;
    build_rust_guests(root, &out_dir)
}

/// Compresses the built-in guests into their bundle crates (guest-bundles/), which the
/// host crate depends on: what makes an installed `wasmbox` carry them.
fn bundle_builtin_guests(root: &Path, js_lock: &str) -> Result<()> {
    guest_bundles::check_cpython_version(root, CPYTHON_VERSION)?;
    let componentize_py = COMPONENTIZE_PY.replace("==", " ");
    let python = guest_bundles::Versions { runtime: format!("CPython {CPYTHON_VERSION}"), built_with: componentize_py };
    guest_bundles::write(root, "python", &python)?;
    let componentize_js = guest_bundles::npm_locked_version(js_lock, "@bytecodealliance/componentize-js")?;
    let js = guest_bundles::Versions {
        runtime: "SpiderMonkey in StarlingMonkey".into(),
        built_with: format!("componentize-js {componentize_js}"),
    };
    guest_bundles::write(root, "js", &js)
}

/// The Python guest's C extension module, all of guests/python/native in one shared
/// library: componentize-py makes every shared library a core module of its own, and
/// each costs every run its instantiation.
const PYTHON_NATIVE_MODULE: &str = "_wasmbox_native";

/// Compiles the C files of guests/python/native into the CPython extension module
/// [`PYTHON_NATIVE_MODULE`] for the Python guest in a folder of its own, which
/// componentize-py links into the component beside its libpython. Answers that folder.
/// (`.abi3.so`: it calls only the stable ABI and PEP 445's allocator interface; it also
/// reads one-digit ints in place, checked against CPython when the module loads.)
///
/// componentize-py links extensions as wasm shared libraries (position-independent code
/// with a `dylink.0` section). Debian 12's clang 14 emits position-independent wasm only
/// for Emscripten triples (newer clangs for WASI too), so the files are compiled for
/// `wasm32-unknown-emscripten`: the same wasm32 C ABI, and they are freestanding, so no
/// Emscripten or WASI library is involved. The linker is the Rust toolchain's own
/// `rust-lld`, which every rustup toolchain has; what the module takes from libpython
/// and the libc stays an import for componentize-py to resolve.
fn build_python_native_module(root: &Path) -> Result<PathBuf> {
    let out = root.join("target/guests/python-native");
    if out.exists() {
        std::fs::remove_dir_all(&out)?;
    }
    std::fs::create_dir_all(&out)?;
    let mut objects = Vec::new();
    for entry in std::fs::read_dir(root.join("guests/python/native"))? {
        let source = entry?.path();
        if source.extension().is_none_or(|ext| ext != "c") {
            continue;
        }
        let object = out.join(source.with_extension("o").file_name().unwrap_or_default());
        run(Command::new("clang")
            .args(["--target=wasm32-unknown-emscripten", "-O2", "-fPIC", "-ffreestanding", "-fvisibility=hidden"])
            .args(["-Wall", "-Wextra", "-Werror", "-c", "-o"])
            .arg(&object)
            .arg(&source))?;
        objects.push(object);
    }
    objects.sort();
    run(Command::new(rust_lld()?)
        .args(["-flavor", "wasm", "--experimental-pic", "-shared", "--unresolved-symbols=import-dynamic", "-O2"])
        .arg("-o")
        .arg(out.join(format!("{PYTHON_NATIVE_MODULE}.abi3.so")))
        .args(&objects))?;
    for object in objects {
        std::fs::remove_file(object)?;
    }
    Ok(out)
}

/// The `rust-lld` of the toolchain running this build.
fn rust_lld() -> Result<PathBuf> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(&rustc).arg("-vV").output().context("running rustc -vV")?;
    let info = String::from_utf8_lossy(&output.stdout);
    let host = info.lines().find_map(|line| line.strip_prefix("host: ")).context("rustc -vV names no host")?;
    let sysroot =
        Command::new(&rustc).args(["--print", "sysroot"]).output().context("running rustc --print sysroot")?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim());
    let lld = sysroot.join(format!("lib/rustlib/{host}/bin/rust-lld"));
    if !lld.is_file() {
        bail!("{} is missing: the Python guest's C module is linked with the Rust toolchain's rust-lld", lld.display());
    }
    Ok(lld)
}

/// componentize-js's command line, installed by `npm ci` in guests/js.
const COMPONENTIZE_JS_CLI: &str = "guests/js/node_modules/@bytecodealliance/componentize-js/src/cli.js";

/// The worked examples of docs/guests.md in Python and JavaScript, built exactly as the
/// document says (its Rust example is guests/rust/batch).
fn build_examples(root: &Path, out_dir: &Path, js_lock: &str, install_js: impl Fn() -> Result<()>) -> Result<()> {
    build_guest_from(root, "python_batch", &["wit", "guests/examples/python_batch"], COMPONENTIZE_PY, || {
        run(Command::new(root.join("target/guest-tools/venv/bin/componentize-py"))
            .args(["-d", "wit", "-w", "code-runner", "componentize", "app", "-p", "guests/examples/python_batch", "-o"])
            .arg(out_dir.join("python_batch.wasm")))
    })?;
    build_guest_from(root, "js_batch", &["wit", "guests/examples/js_batch"], js_lock, || {
        install_js()?;
        // From the example's folder: componentize-js maps the working directory into
        // its build-time engine, and that should hold only the example.
        run(Command::new("node")
            .current_dir(root.join("guests/examples/js_batch"))
            .arg(root.join(COMPONENTIZE_JS_CLI))
            .args(["batch.js", "--wit", "../../../wit", "-n", "code-runner", "-d", "http", "fetch-event", "-o"])
            .arg(out_dir.join("js_batch.wasm")))
    })
}

/// Builds the Rust guests (every folder of the guests/rust workspace) for wasm32-wasip2
/// and copies each to `target/guests/<folder>.wasm`. Cargo decides what is stale.
fn build_rust_guests(root: &Path, out_dir: &Path) -> Result<()> {
    let target_dir = root.join("target/guests-rust");
    run(cargo()
        .args(["build", "--quiet", "--release", "--locked", "--target", "wasm32-wasip2"])
        .args(["--manifest-path", "guests/rust/Cargo.toml", "--target-dir"])
        .arg(&target_dir))?;
    for name in rust_guest_names(root)? {
        let built = target_dir.join(format!("wasm32-wasip2/release/{name}.wasm"));
        std::fs::copy(&built, out_dir.join(format!("{name}.wasm")))
            .with_context(|| format!("copying {}", built.display()))?;
    }
    Ok(())
}

/// The folders of guests/rust that hold a crate: one guest each.
fn rust_guest_names(root: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(root.join("guests/rust"))? {
        let path = entry?.path();
        if path.join("Cargo.toml").is_file() {
            names.push(path.file_name().unwrap_or_default().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// Builds `target/guests/<name>.wasm` with `build` unless its inputs (wit/, the guest's
/// folder, `pins`) are unchanged since the last build.
fn build_guest(root: &Path, name: &str, pins: &str, build: impl FnOnce() -> Result<()>) -> Result<()> {
    build_guest_from(root, name, &["wit", &format!("guests/{name}")], pins, build)
}

/// Builds `target/guests/<name>.wasm` with `build` unless `inputs` (folders under the
/// root) and `pins` are unchanged since the last build.
fn build_guest_from(
    root: &Path,
    name: &str,
    inputs: &[&str],
    pins: &str,
    build: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let out = root.join(format!("target/guests/{name}.wasm"));
    let stamp = root.join(format!("target/guests/{name}.stamp"));
    let inputs = fingerprint(&inputs.iter().map(|dir| root.join(dir)).collect::<Vec<_>>(), pins)?;
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

/// The cargo-fuzz targets of fuzz/ (docs/fuzzing.md).
const FUZZ_TARGETS: [&str; 4] = ["worker_frame", "json_guard", "import_check", "broker_call"];

/// Builds the fuzz targets and runs each from its seeds for a few seconds. fuzz/ is a
/// workspace of its own, built by nightly into fuzz/target: a build of its own of
/// wasmtime, with sanitizer instrumentation, which is why `test` does not do this.
fn fuzz_smoke(root: &Path) -> Result<()> {
    let seconds = std::env::var("WASMBOX_FUZZ_SECONDS").unwrap_or_else(|_| "10".into());
    // rustup's `cargo`, which understands `+nightly`, not the pinned toolchain's own.
    let nightly_cargo = || {
        let mut cargo = Command::new("cargo");
        cargo.arg("+nightly").current_dir(root).env_remove("RUSTUP_TOOLCHAIN").env_remove("CARGO_TARGET_DIR");
        cargo
    };
    if nightly_cargo().args(["fuzz", "--version"]).output().map_or(true, |o| !o.status.success()) {
        run(nightly_cargo().args(["install", "cargo-fuzz", "--locked"]))?;
    }
    run(nightly_cargo().args(["fuzz", "build"]))?;
    for target in FUZZ_TARGETS {
        let corpus = root.join("fuzz/corpus").join(target);
        std::fs::create_dir_all(&corpus)?;
        run(nightly_cargo()
            .args(["fuzz", "run", target])
            .arg(&corpus)
            .arg(root.join("fuzz/seeds").join(target))
            .arg("--")
            .arg(format!("-max_total_time={seconds}")))?;
    }
    Ok(())
}

/// The crates a user can depend on or install, packaged together: `wasmbox` depends
/// on the two guest bundles, which are not on a registry yet. The guest SDK
/// (`wasmbox-guest`) is published too, from the guests' workspace.
const PUBLISHED_CRATES: [&str; 6] =
    ["wasmbox-guest-python", "wasmbox-guest-js", "wasmbox-host", "wasmbox-stubs", "wasmbox-mcp", "wasmbox-cli"];

/// `cargo package` of [`PUBLISHED_CRATES`] and the guest SDK: their metadata is
/// complete, every path dependency has a version, and what each needs to build (the WIT
/// package, the licence, the readme) is inside it. Not verified, which would build
/// wasmtime without vendor/'s patch; the `guest_sdk` CLI test builds a guest against the
/// SDK's package.
fn package(root: &Path) -> Result<()> {
    let mut command = cargo();
    command.args(["package", "--quiet", "--no-verify", "--allow-dirty"]).current_dir(root);
    for name in PUBLISHED_CRATES {
        command.args(["-p", name]);
    }
    run(&mut command)?;
    run(cargo()
        .args(["package", "--quiet", "--no-verify", "--allow-dirty", "-p", "wasmbox-guest"])
        .args(["--manifest-path", "guests/rust/Cargo.toml", "--target-dir"])
        .arg(root.join("target/guests-rust"))
        .current_dir(root))
}

/// The guest SDK's unit tests, natively: it is a member of the guests' workspace, whose
/// release build for wasm32-wasip2 already compiled the bindings generator for this
/// host, so only the SDK and its runtime dependencies are compiled here. Linted as the
/// test build is.
fn test_guest_sdk(root: &Path) -> Result<()> {
    let host = Command::new("rustc").args(["--print", "host-tuple"]).output().context("running rustc")?;
    let host = String::from_utf8(host.stdout).context("rustc's host tuple")?;
    run(linted(cargo())
        .args(["test", "--quiet", "--release", "--locked", "-p", "wasmbox-guest", "--target", host.trim()])
        .args(["--manifest-path", "guests/rust/Cargo.toml", "--target-dir"])
        .arg(root.join("target/guests-rust"))
        .current_dir(root))
}

fn test(root: &Path) -> Result<()> {
    let started = Instant::now();
    setup(root)?;
    // The cross-check keeps both cores busy; the guest builds mostly one (Python and Node
    // tools) and the MCP partners' install waits on the network, so they overlap it
    // rather than wait. It needs no guest: a check runs nothing, and a bundle crate
    // builds without its guest. (The bundle crates must be written before anything
    // *builds* the host.) Different target dirs: no cargo lock between them.
    std::thread::scope(|scope| {
        let check = scope.spawn(|| cross_check(root));
        // The MCP end-to-end tests' client and servers, and the Python package's test venv
        // (pip and npm, pinned, under target/).
        let rest = mcp_partners::install(root)
            .and_then(|()| python_package::prepare_venv(root))
            .and_then(|()| build_guests(root, Guests::All))
            .and_then(|()| run(cargo().args(["fmt", "--all", "--check"])))
            .and_then(|()| run(cargo().args(["fmt", "--all", "--check"]).current_dir(root.join("guests/rust"))));
        check.join().map_err(|_| anyhow::anyhow!("the cross-check panicked"))?.and(rest)
    })?;
    package(root)?;
    run(cargo()
        .args(["clippy", "--quiet", "--release", "--locked", "--target", "wasm32-wasip2"])
        .args(["--manifest-path", "guests/rust/Cargo.toml", "--target-dir"])
        .arg(root.join("target/guests-rust"))
        .args(["--", "-D", "warnings"]))?;
    test_guest_sdk(root)?;
    run(Command::new("python3").arg("guests/python/test_app_native.py"))?;
    run(Command::new("node").arg("guests/js/test_runner_native.mjs"))?;
    run(Command::new("node").arg("guests/js/test_bindings_native.mjs"))?;
    run(Command::new("node").arg("guests/js/test_intl_native.mjs"))?;
    // Build every target first (linting as it compiles: `linted`), then run the `wasmbox`
    // binary that build produced: a separate `cargo run -p wasmbox-cli` would resolve
    // features differently and rebuild half the dependency tree.
    // `--timings`: target/cargo-timings/ keeps where the build's time went.
    run(linted(cargo()).args(["test", "--workspace", "--all-targets", "--no-run", "--quiet", "--timings"]))?;
    let wasmbox = root.join("target/debug/wasmbox");
    let precompile = |args: &[&str]| {
        run(Command::new(&wasmbox).arg("precompile").args(args).env("WASMBOX_CACHE_DIR", cache_dir(root)))
    };
    // Compile each guest once, up front: otherwise the first tests of every test binary
    // would all compile it at the same time on a cold cache.
    for lang in ["python", "js"] {
        precompile(&["--lang", lang])?;
        // The fuel-budget tests run on a metering engine, which compiles its own code.
        precompile(&["--lang", lang, "--fuel-metering"])?;
    }
    // The docs' Python and JS examples are as large as the built-in guests.
    // So is the Python guest with a package added.
    for example in ["python_batch", "js_batch", "python_tabulate"] {
        let path = root.join(format!("target/guests/{example}.wasm"));
        precompile(&["--allow-inert-wasi", "--guest", &path.to_string_lossy()])?;
    }
    docker::prepare_for_tests(root, &wasmbox)?;
    let available = available_isolations(&wasmbox)?;
    let tests = || {
        let mut tests = linted(cargo());
        tests.env("WASMBOX_CACHE_DIR", cache_dir(root));
        if available.iter().any(|name| name == "bwrap") {
            // Then the bwrap tests must run, not skip.
            tests.env("WASMBOX_REQUIRE_BWRAP", "1");
        }
        if available.iter().any(|name| name == "docker") {
            // Likewise the docker tests.
            tests.env("WASMBOX_REQUIRE_DOCKER", "1");
        }
        // setup installed the MCP partners: their tests must run, not skip.
        tests.env("WASMBOX_REQUIRE_MCP_PARTNERS", "1");
        tests
    };
    // cli/tests/outside_checkout.rs spends its time building a crate outside the
    // workspace; the other test binaries, run one after another, leave cores idle
    // waiting on guests, processes and timeouts. So it runs beside them, its output
    // held back until it ends. (Cargo holds the target dir's lock only while building.)
    let mut outside = tests();
    // `--workspace`, not `-p wasmbox-cli`: features unify over the packages selected, and
    // the CLI's alone would rebuild wasmtime and everything above it.
    // `--nocapture`: its notes (how long the outside crate took, how many crates it
    // compiled, whether the checkout was hidden) belong in CI's log.
    outside.args(["test", "--quiet", "--workspace", "--test", OUTSIDE_CHECKOUT_TEST, "--", "--nocapture"]);
    let mut rest = tests();
    rest.args(["test", "--workspace", "--", "--exact"]);
    for name in OUTSIDE_CHECKOUT_TESTS {
        rest.args(["--skip", name]);
    }
    std::thread::scope(|scope| {
        let outside = scope.spawn(move || run_quietly(&mut outside));
        // The Python package's wheel, installed into a venv of its own, and its pytest
        // suite: beside the outside-checkout test too, which takes the longest.
        let rest = run(&mut rest).and_then(|()| python_package::test(root, &wasmbox));
        outside.join().map_err(|_| anyhow::anyhow!("the outside-checkout test's thread panicked"))?.and(rest)
    })?;
    eprintln!("xtask: all checks passed in {:.0?}", started.elapsed());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests `cargo xtask test` runs beside the rest are those the rest skips: a test
    /// added to the file, or renamed, would otherwise run twice.
    #[test]
    fn the_skipped_tests_are_the_outside_checkout_tests() {
        let path = workspace_root().join(format!("cli/tests/{OUTSIDE_CHECKOUT_TEST}.rs"));
        let source = std::fs::read_to_string(&path).unwrap();
        let mut names: Vec<&str> = source
            .split("#[test]")
            .skip(1)
            .filter_map(|after| after.trim_start().strip_prefix("fn ")?.split('(').next())
            .collect();
        names.sort_unstable();
        let mut expected = OUTSIDE_CHECKOUT_TESTS.to_vec();
        expected.sort_unstable();
        assert_eq!(names, expected, "{}", path.display());
    }

    /// A package of the cross-check that asked for the host's `compiler` feature itself
    /// (as the Python package's dependency once did) would bring Cranelift back into
    /// the check for both targets, silently: the check still passes, only slower.
    #[test]
    fn the_cross_check_leaves_cranelift_out() {
        for target in CROSS_CHECK_TARGETS {
            let tree = cargo()
                .args(["tree", "--quiet", "--offline", "--edges", "normal", "--prefix", "none", "--format", "{p}"])
                .args(cross_check_selection(target))
                .current_dir(workspace_root())
                .output()
                .unwrap();
            assert!(tree.status.success(), "{}", String::from_utf8_lossy(&tree.stderr));
            let tree = String::from_utf8(tree.stdout).unwrap();
            let packages: Vec<&str> = tree.lines().filter_map(|line| line.split(' ').next()).collect();
            assert!(packages.contains(&"wasmtime"), "no wasmtime in the {target} check's graph:\n{tree}");
            for compiler in ["cranelift-codegen", "wasmtime-internal-cranelift"] {
                assert!(!packages.contains(&compiler), "the {target} check compiles {compiler}:\n{tree}");
            }
        }
    }

    /// `linted` must fail a build on a clippy warning: its `CLIPPY_ARGS` spelling is
    /// clippy's private protocol, so a clippy that changed it would silently stop
    /// linting CI's test build.
    #[test]
    fn linted_builds_fail_on_a_clippy_warning() {
        let dir = std::env::temp_dir().join(format!("xtask-linted-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(
            dir.join("Cargo.toml"),
            "[package]\nname = \"linted_probe\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
        )
        .unwrap();
        let build = |body: &str| {
            std::fs::write(dir.join("src/lib.rs"), body).unwrap();
            linted(cargo())
                .args(["build", "--quiet", "--offline"])
                .current_dir(&dir)
                .env("CARGO_TARGET_DIR", dir.join("target"))
                .output()
                .unwrap()
        };
        let clean = build("/// Doubles.\npub fn double(x: u32) -> u32 {\n    x * 2\n}\n");
        // clippy::needless_return, a warn-by-default style lint.
        let warned = build("/// Doubles.\npub fn double(x: u32) -> u32 {\n    return x * 2;\n}\n");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(clean.status.success(), "{}", String::from_utf8_lossy(&clean.stderr));
        assert!(!warned.status.success(), "a clippy warning did not fail the linted build");
        assert!(String::from_utf8_lossy(&warned.stderr).contains("needless_return"));
    }
}
