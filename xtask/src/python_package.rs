//! The Python package (python/): pack its wheel and run its pytest suite against the
//! wheel installed into a fresh venv, all under `target/python/`.
//!
//! - The extension: `cargo test --workspace` builds it, as python/Cargo.toml's example
//!   `wasmbox_native`, in the same invocation as the tests, so its dependencies get the
//!   workspace's unified features and it links the tests' build of wasmtime. `maturin
//!   build` (what users run, docs/python.md) resolves this package's features alone,
//!   which differ (dev-dependencies and other members add features to libc, serde,
//!   tokio, ...), and would compile wasmtime a second time.
//! - The wheel: python/pack_wheel.py lays that extension and `python/wasmbox` out as
//!   maturin does, into `target/python/wheels`.
//! - `target/python/venv`: python/requirements-test.txt (pinned: pytest, and the real
//!   chuk-tool-processor and pydantic-ai the integrations are tested against), then the
//!   wheel. The venv is made again only when its requirements change (a stamp file holds
//!   their hash); the wheel is reinstalled only when its files change.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use crate::{cache_dir, run};

/// Makes `venv` with `requirements` installed, unless the stamp says it already has them.
fn venv_with(venv: &Path, requirements: &Path) -> Result<PathBuf> {
    let python = venv.join("bin/python");
    let pins = std::fs::read(requirements).with_context(|| format!("reading {}", requirements.display()))?;
    let stamp_path = venv.join("wasmbox-requirements.sha256");
    let stamp = hex::encode(Sha256::digest(&pins));
    if python.is_file() && std::fs::read_to_string(&stamp_path).is_ok_and(|s| s == stamp) {
        return Ok(python);
    }
    if venv.exists() {
        std::fs::remove_dir_all(venv)?;
    }
    run(Command::new("python3").arg("-m").arg("venv").arg(venv))?;
    run(Command::new(&python)
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r"])
        .arg(requirements))?;
    std::fs::write(&stamp_path, stamp)?;
    Ok(python)
}

/// `target/python/venv` with python/requirements-test.txt installed (what [`test`]
/// needs before the wheel): a step that waits on the network, which `cargo xtask test`
/// runs beside the cross-check.
pub(crate) fn prepare_venv(root: &Path) -> Result<()> {
    venv_with(&root.join("target/python/venv"), &root.join("python/requirements-test.txt")).map(drop)
}

/// Builds the wheel and runs python/tests against it; `wasmbox` is the CLI binary the
/// worker-isolation test uses.
pub(crate) fn test(root: &Path, wasmbox: &Path) -> Result<()> {
    let out = root.join("target/python");
    let extension = root.join("target/debug/examples/libwasmbox_native.so");
    if !extension.is_file() {
        bail!("{} is missing: `cargo test --workspace --no-run` builds it", extension.display());
    }
    let wheels = out.join("wheels");
    if wheels.exists() {
        std::fs::remove_dir_all(&wheels)?;
    }
    run(Command::new("python3").arg(root.join("python/pack_wheel.py")).arg(&extension).arg(&wheels))?;
    let wheel = std::fs::read_dir(&wheels)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .find(|path| path.extension().is_some_and(|ext| ext == "whl"))
        .context("pack_wheel.py wrote no wheel")?;
    eprintln!("xtask: packed {} ({:.1} MB)", wheel.display(), std::fs::metadata(&wheel)?.len() as f64 / 1e6);

    let venv = out.join("venv");
    let python = venv_with(&venv, &root.join("python/requirements-test.txt"))?;
    let installed = venv.join("wasmbox-wheel.sha256");
    let digest = wheel_digest(&wheel)?;
    if !std::fs::read_to_string(&installed).is_ok_and(|s| s == digest) {
        run(Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "--force-reinstall"])
            .arg(&wheel))?;
        std::fs::write(&installed, digest)?;
    }
    // From target/python, so that nothing of python/ is importable but the wheel.
    let status = Command::new(venv.join("bin/pytest"))
        .args(["-q", "-p", "no:cacheprovider", "--rootdir"])
        .arg(root.join("python/tests"))
        .arg(root.join("python/tests"))
        .current_dir(&out)
        .env("VIRTUAL_ENV", &venv)
        .env("WASMBOX_CACHE_DIR", cache_dir(root))
        .env("WASMBOX_WORKER", wasmbox)
        .status()
        .context("could not start pytest")?;
    if !status.success() {
        bail!("the Python package's tests failed ({status})");
    }
    Ok(())
}

/// A hash of what the wheel installs: its files' names and contents, read with Python's
/// zipfile, without the zip's timestamps and without an SBOM a wheel builder may write
/// afresh on every build (nor the RECORD listing its hash).
fn wheel_digest(wheel: &Path) -> Result<String> {
    let script = "import hashlib, sys, zipfile\n\
                  h = hashlib.sha256()\n\
                  z = zipfile.ZipFile(sys.argv[1])\n\
                  for n in sorted(z.namelist()):\n    \
                  if '.dist-info/sboms/' in n or n.endswith('.dist-info/RECORD'): continue\n    \
                  h.update(n.encode()); h.update(z.read(n))\n\
                  print(h.hexdigest())";
    let output = Command::new("python3").arg("-c").arg(script).arg(wheel).output()?;
    if !output.status.success() {
        bail!("could not read {}: {}", wheel.display(), String::from_utf8_lossy(&output.stderr));
    }
    Ok(String::from_utf8(output.stdout)?.trim().to_owned())
}
