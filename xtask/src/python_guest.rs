//! Building the Python guest (guests/python/app.py) with componentize-py, with the
//! time-zone database it carries and, for `cargo xtask python-guest`, pure-Python
//! packages from PyPI.
//!
//! componentize-py puts into the component only what the interpreter holds once app.py
//! has been imported at build time: no files. So:
//! - `tzdata` (pinned: [`TZDATA`]) is installed into a folder of its own under
//!   target/guest-tools and put on the build's path; app.py reads its zone files at
//!   build time into the snapshot, and zoneinfo finds them there.
//! - Added packages are installed the same way (pure-Python wheels for the guest's
//!   CPython, with their dependencies), and a generated module, `_wasmbox_packages`,
//!   beside them imports every one of their modules at build time (app.py imports it
//!   when it is on the path).
//!
//! Installed folders are keyed by what they hold (the requirement strings and the
//! guest's CPython): pip runs once per set of pins.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use crate::{build_guest_from, build_python_native_module, run, COMPONENTIZE_PY, CPYTHON_VERSION};

/// The time-zone database inside the Python guest: PyPI's `tzdata`, IANA's zones.
pub const TZDATA: &str = "tzdata==2026.6";

/// The package CI builds a guest with, to test [`command`]'s way of adding packages:
/// small and pure Python (`target/guests/python_tabulate.wasm`).
const EXAMPLE_PACKAGE: &str = "tabulate==0.9.0";

/// The name of the generated module that imports the added packages at build time
/// (app.py imports it when present).
const PACKAGES_MODULE: &str = "_wasmbox_packages";

/// What [`crate::build_guests`]' fingerprint of the Python guest includes besides its
/// files: the tools and data the component is built from.
pub fn pins() -> String {
    format!("{COMPONENTIZE_PY} {TZDATA}")
}

/// Builds the Python guest into `out`: app.py, the C module, [`TZDATA`], and the
/// folders of `packages` (each from [`install_packages`]).
pub fn componentize(root: &Path, packages: &[PathBuf], out: &Path) -> Result<()> {
    let native = build_python_native_module(root)?;
    let tzdata = install_packages(root, &[TZDATA], false)?;
    let mut command = Command::new(root.join("target/guest-tools/venv/bin/componentize-py"));
    command.args(["-d", "wit", "-w", "code-runner", "componentize", "app", "-p", "guests/python", "-p"]).arg(native);
    // The added packages come first: a package that brings its own tzdata wins.
    for dir in packages.iter().chain([&tzdata]) {
        command.arg("-p").arg(dir);
    }
    run(command.arg("-o").arg(out))
}

/// `target/guests/python_tabulate.wasm`: the Python guest with [`EXAMPLE_PACKAGE`] added,
/// as `cargo xtask python-guest --with tabulate==0.9.0` builds it; rebuilt only when its
/// inputs change.
pub fn build_example(root: &Path) -> Result<()> {
    let out = root.join("target/guests/python_tabulate.wasm");
    build_guest_from(
        root,
        "python_tabulate",
        &["wit", "guests/python"],
        &format!("{} {EXAMPLE_PACKAGE}", pins()),
        || {
            let packages = install_packages(root, &[EXAMPLE_PACKAGE], true)?;
            componentize(root, &[packages], &out)
        },
    )
}

/// `cargo xtask python-guest --with SPEC [--with SPEC …] -o OUT.wasm`: the Python guest
/// with pure-Python packages from PyPI added (docs/guests.md, "Adding Python packages").
pub fn command(root: &Path, invoked_from: &Path, args: &[String]) -> Result<()> {
    const USAGE: &str = "usage: cargo xtask python-guest --with REQUIREMENT [--with REQUIREMENT ...] -o OUT.wasm";
    let mut specs = Vec::new();
    let mut out = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--with" => specs.push(args.next().context(USAGE)?.as_str()),
            "-o" | "--output" => out = Some(PathBuf::from(args.next().context(USAGE)?)),
            other => bail!("unexpected argument {other:?}\n{USAGE}"),
        }
    }
    let Some(out) = out else { bail!("{USAGE}") };
    if specs.is_empty() {
        bail!("name at least one package with --with (the guest without any is `cargo xtask guests`)\n{USAGE}");
    }
    // Relative to where the command was run, not to the workspace root xtask works in.
    let out = invoked_from.join(out);
    crate::setup_guests(root)?;
    let packages = install_packages(root, &specs, true)?;
    componentize(root, &[packages], &out)?;
    eprintln!(
        "xtask: built {} with {}; run it with `wasmbox run CODE --guest {}`",
        out.display(),
        specs.join(", "),
        out.display()
    );
    Ok(())
}

/// Installs `specs` (pip requirement strings) for the guest's CPython into a folder
/// under target/guest-tools/python-packages keyed by them, unless it is there already;
/// with `generated_module`, also [`PACKAGES_MODULE`], which imports every module they
/// installed. Answers the folder.
///
/// Only wheels that any platform can use are taken (`py3-none-any`): a package that
/// needs a C extension has no wasm32-wasi wheel on PyPI, and pip says so.
pub fn install_packages(root: &Path, specs: &[&str], generated_module: bool) -> Result<PathBuf> {
    let key = format!("{CPYTHON_VERSION}\n{generated_module}\n{}", specs.join("\n"));
    let name = hex::encode(&Sha256::digest(key.as_bytes())[..8]);
    let base = root.join("target/guest-tools/python-packages");
    let dir = base.join(&name);
    let stamp = dir.join(".wasmbox-installed");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == key) {
        return Ok(dir);
    }
    // Into a fresh folder, renamed when complete: an interrupted install is not taken
    // for a finished one.
    let partial = base.join(format!("{name}.partial"));
    for stale in [&partial, &dir] {
        if stale.exists() {
            std::fs::remove_dir_all(stale)?;
        }
    }
    let (major_minor, _) = CPYTHON_VERSION.rsplit_once('.').context("CPYTHON_VERSION is major.minor.patch")?;
    let mut pip = Command::new(root.join("target/guest-tools/venv/bin/pip"));
    pip.args(["install", "--quiet", "--disable-pip-version-check", "--no-compile", "--only-binary=:all:"])
        .args(["--implementation", "py", "--abi", "none", "--platform", "any", "--python-version", major_minor])
        .arg("--target")
        .arg(&partial);
    if !generated_module {
        pip.arg("--no-deps");
    }
    run(pip.args(specs))?;
    if generated_module {
        let modules = installed_modules(&partial)?;
        std::fs::write(partial.join(format!("{PACKAGES_MODULE}.py")), packages_module(specs, &modules)?)?;
    }
    std::fs::write(partial.join(".wasmbox-installed"), &key)?;
    std::fs::rename(&partial, &dir)?;
    Ok(dir)
}

/// The modules (dotted names) the distributions installed in `dir` hold, from their
/// wheels' RECORD files: every `.py` file under an importable name, except test suites
/// and `__main__` modules, which nothing imports.
fn installed_modules(dir: &Path) -> Result<Vec<String>> {
    let mut modules = BTreeSet::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if !path.file_name().unwrap_or_default().to_string_lossy().ends_with(".dist-info") {
            continue;
        }
        let record = std::fs::read_to_string(path.join("RECORD"))
            .with_context(|| format!("reading {}/RECORD", path.display()))?;
        for line in record.lines() {
            // A path with a comma would be quoted (CSV); no module has one in its name.
            let Some(stem) = line.split(',').next().and_then(|file| file.strip_suffix(".py")) else { continue };
            let mut parts: Vec<&str> = stem.split('/').collect();
            if parts.last() == Some(&"__init__") {
                parts.pop();
            }
            let importable = |part: &&str| {
                part.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
                    && part.chars().all(|c| c.is_alphanumeric() || c == '_')
            };
            let skipped = |part: &&str| matches!(*part, "tests" | "test" | "__main__");
            if !parts.is_empty() && parts.iter().all(importable) && !parts.iter().any(skipped) {
                modules.insert(parts.join("."));
            }
        }
    }
    if modules.is_empty() {
        bail!("the packages installed into {} hold no Python module", dir.display());
    }
    Ok(modules.into_iter().collect())
}

/// The text of [`PACKAGES_MODULE`]: imports `modules` at build time, keeping what
/// imported (`MODULES`) and why the others did not (`FAILED`, also printed then).
fn packages_module(specs: &[&str], modules: &[String]) -> Result<String> {
    // JSON strings are Python string literals too.
    let list = |items: Vec<String>| -> Result<String> {
        let quoted = items.iter().map(serde_json::to_string).collect::<Result<Vec<_>, _>>()?;
        Ok(if quoted.is_empty() { "()".into() } else { format!("({},)", quoted.join(", ")) })
    };
    Ok(format!(
        r#""""Generated by `cargo xtask python-guest`: imports every module of the packages
added to this guest while componentize-py builds it, since only what is imported then
is inside the component."""

import importlib
import sys

REQUESTED = {requested}
MODULES = []
FAILED = {{}}
for _name in {modules}:
    try:
        importlib.import_module(_name)
    except Exception as _error:
        FAILED[_name] = "%s: %s" % (type(_error).__name__, _error)
        print("wasmbox: %s is not in the guest: %s" % (_name, FAILED[_name]), file=sys.stderr)
    else:
        MODULES.append(_name)
MODULES = tuple(MODULES)
"#,
        requested = list(specs.iter().map(|s| s.to_string()).collect())?,
        modules = list(modules.to_vec())?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wheel's RECORD names the modules to import: packages and their submodules, not
    /// scripts, metadata, caches, test suites or `__main__`.
    #[test]
    fn installed_modules_come_from_the_wheels_record() {
        let dir = std::env::temp_dir().join(format!("wasmbox-xtask-record-{}", std::process::id()));
        let info = dir.join("demo-1.0.dist-info");
        std::fs::create_dir_all(&info).unwrap();
        std::fs::write(
            info.join("RECORD"),
            "../../bin/demo,sha256=x,10\n\
             demo/__init__.py,sha256=x,10\n\
             demo/core.py,sha256=x,10\n\
             demo/__main__.py,sha256=x,10\n\
             demo/tests/__init__.py,sha256=x,10\n\
             demo/tests/test_core.py,sha256=x,10\n\
             demo/__pycache__/core.cpython-311.pyc,,\n\
             demo/data/table.csv,sha256=x,10\n\
             demo/2to3.py,sha256=x,10\n\
             single.py,sha256=x,10\n\
             demo-1.0.dist-info/RECORD,,\n",
        )
        .unwrap();
        let modules = installed_modules(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(modules.unwrap(), ["demo", "demo.core", "single"]);
    }

    #[test]
    fn the_generated_module_quotes_names_as_python_strings() {
        let text = packages_module(&["tabulate==0.9.0"], &["tabulate".into(), "tabulate.version".into()]).unwrap();
        assert!(text.contains(r#"REQUESTED = ("tabulate==0.9.0",)"#), "{text}");
        assert!(text.contains(r#"for _name in ("tabulate", "tabulate.version",):"#), "{text}");
    }
}
