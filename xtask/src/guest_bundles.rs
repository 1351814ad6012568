//! Puts the built-in guests into their bundle crates (`guest-bundles/<name>`), so that the
//! `wasmbox` crate and binary carry them: `<name>.wasm.zst`, the component compressed with
//! zstd, and `<name>.wasm.json`, its manifest (SHA-256 and length of the component, what
//! runs inside it and what built it, the WIT package). Both are gitignored; the crates
//! name them in `include`, so `cargo package` ships them.

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

/// zstd's level 19: the highest before the `--ultra` levels, whose windows cost the
/// decoder memory. Neither those nor long-distance matching gain enough on these
/// components to pay for it (docs/performance.md, "Built-in guests inside the binary").
const ZSTD_LEVEL: i32 = 19;

/// crates.io refuses a `.crate` file over 10 MiB; one crate per guest keeps each under
/// it, with this much room for the rest of the crate.
const CRATES_IO_MAX_BYTES: u64 = 10 << 20;
const CRATE_ROOM_BYTES: u64 = 64 << 10;

/// What a bundle's manifest says about the guest besides its bytes.
pub struct Versions {
    /// What runs the code, with its version (`CPython 3.14.0`).
    pub runtime: String,
    /// The tool that built the component, with its version (`componentize-py 0.25.1`).
    pub built_with: String,
}

/// Compresses `target/guests/<name>.wasm` into `guest-bundles/<name>`, unless the bundle
/// there already holds this very component.
pub fn write(root: &Path, name: &str, versions: &Versions) -> Result<()> {
    let source = root.join(format!("target/guests/{name}.wasm"));
    let component = std::fs::read(&source).with_context(|| format!("reading {}", source.display()))?;
    let sha256 = hex::encode(Sha256::digest(&component));
    let manifest = serde_json::json!({
        "name": name,
        "sha256": sha256,
        "bytes": component.len(),
        "runtime": versions.runtime,
        "built_with": versions.built_with,
        "wit": wit_package(root)?,
    });
    let manifest = format!("{}\n", serde_json::to_string_pretty(&manifest)?);
    let dir = root.join("guest-bundles").join(name);
    let (compressed_path, manifest_path) =
        (dir.join(format!("{name}.wasm.zst")), dir.join(format!("{name}.wasm.json")));
    if compressed_path.is_file() && std::fs::read_to_string(&manifest_path).is_ok_and(|old| old == manifest) {
        eprintln!("xtask: {} is up to date", compressed_path.display());
        return Ok(());
    }
    // Neither file while compressing, then the component, then the manifest: the crate's
    // build script takes the pair only when both exist, and `cargo xtask test`'s
    // cross-check may run it meanwhile (it finds neither, which a check accepts).
    let _ = std::fs::remove_file(&manifest_path);
    let _ = std::fs::remove_file(&compressed_path);
    let started = Instant::now();
    let compressed = compress(&component)?;
    let size = compressed.len() as u64 + manifest.len() as u64;
    if size + CRATE_ROOM_BYTES > CRATES_IO_MAX_BYTES {
        bail!(
            "the {name} guest compresses to {:.2} MiB, too close to crates.io's limit of 10 MiB for its crate",
            size as f64 / f64::from(1 << 20)
        );
    }
    std::fs::write(&compressed_path, &compressed)?;
    std::fs::write(&manifest_path, manifest)?;
    eprintln!(
        "xtask: compressed the {name} guest {:.1} MB -> {:.1} MB ({}) in {:.1?}",
        component.len() as f64 / 1e6,
        compressed.len() as f64 / 1e6,
        compressed_path.display(),
        started.elapsed()
    );
    Ok(())
}

/// `bytes` as one zstd frame, compressed on every core.
fn compress(bytes: &[u8]) -> Result<Vec<u8>> {
    let mut encoder = zstd::stream::Encoder::new(Vec::new(), ZSTD_LEVEL)?;
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    encoder.multithread(u32::try_from(workers).unwrap_or(1))?;
    // The decoder then knows the size up front and checks it.
    encoder.set_pledged_src_size(Some(bytes.len() as u64))?;
    encoder.include_checksum(true)?;
    std::io::Write::write_all(&mut encoder, bytes)?;
    Ok(encoder.finish()?)
}

/// The WIT package the guests are built against (`wasmbox:sandbox@0.1.1`), from wit/.
fn wit_package(root: &Path) -> Result<String> {
    let wit = std::fs::read_to_string(root.join("wit/sandbox.wit"))?;
    wit.lines()
        .find_map(|line| line.trim().strip_prefix("package ")?.strip_suffix(';').map(str::to_owned))
        .context("wit/sandbox.wit declares no package")
}

/// The version of `package` that `npm ci` installs from guests/js/package-lock.json.
pub fn npm_locked_version(lock: &str, package: &str) -> Result<String> {
    let lock: serde_json::Value = serde_json::from_str(lock).context("reading guests/js/package-lock.json")?;
    lock["packages"][format!("node_modules/{package}")]["version"]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("guests/js/package-lock.json does not lock {package}"))
}

/// Checks that the built CPython guest is the CPython `version`: its `PY_VERSION`
/// string is in the component, so a componentize-py that brings another CPython fails
/// here until the pin beside it is updated.
pub fn check_cpython_version(root: &Path, version: &str) -> Result<()> {
    let component = std::fs::read(root.join("target/guests/python.wasm"))?;
    let needle = format!("\0{version}\0");
    if !component.windows(needle.len()).any(|window| window == needle.as_bytes()) {
        bail!("target/guests/python.wasm is not CPython {version}: update CPYTHON_VERSION beside COMPONENTIZE_PY");
    }
    Ok(())
}
