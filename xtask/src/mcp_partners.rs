//! The MCP partners of `wasmbox mcp`'s end-to-end tests (cli/tests/mcp.rs): the official
//! Python SDK in a venv and `@modelcontextprotocol/server-everything` from npm, both
//! pinned in cli/tests/mcp (requirements.txt; package.json and its package-lock.json,
//! installed with `npm ci`). They go under target/mcp-tools with a stamp of the pins, so
//! a second `cargo xtask test` installs nothing.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use crate::run;

/// Where the pins live, under the workspace root.
const PINS: &str = "cli/tests/mcp";
/// Where the partners are installed, under the workspace root.
const INSTALL: &str = "target/mcp-tools";

/// Installs the partners unless the stamp says the pinned versions are there.
pub fn install(root: &Path) -> Result<()> {
    let pins = root.join(PINS);
    let dir = root.join(INSTALL);
    let mut hasher = Sha256::new();
    for file in ["requirements.txt", "package.json", "package-lock.json"] {
        let path = pins.join(file);
        hasher.update(file);
        hasher.update(std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?);
    }
    let key = hex::encode(hasher.finalize());
    let stamp = dir.join("stamp");
    let python = dir.join("venv/bin/python");
    let everything = dir.join("npm/node_modules/.bin/mcp-server-everything");
    if python.is_file() && everything.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == key) {
        eprintln!("xtask: the MCP test partners are up to date");
        return Ok(());
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir.join("npm"))?;
    run(Command::new("python3").arg("-m").arg("venv").arg(dir.join("venv")))?;
    run(Command::new(dir.join("venv/bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
        .arg(pins.join("requirements.txt")))?;
    // `npm ci` installs exactly the lock file, into the folder that holds it.
    for file in ["package.json", "package-lock.json"] {
        std::fs::copy(pins.join(file), dir.join("npm").join(file))?;
    }
    run(Command::new("npm").args(["ci", "--silent", "--no-audit", "--no-fund", "--prefix"]).arg(dir.join("npm")))?;
    std::fs::write(&stamp, key)?;
    Ok(())
}
