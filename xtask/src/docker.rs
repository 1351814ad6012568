//! The Docker engine and worker image for the `docker` isolation tests, and
//! `cargo xtask docker-image`.
//!
//! The image is built from scratch, not pulled: it holds only the worker binary's ELF
//! interpreter, its shared libraries and `/etc/ld.so.cache`, copied from this host (what
//! bubblewrap binds into its empty root, too). So its C library is the one the binary
//! was linked against, it is a few MB, it is built in a second without a registry, and
//! a worker that escaped wasm finds no shell or tool in it. The tar is kept under
//! target/docker/ with a stamp of its inputs, so a re-run with the image loaded does
//! nothing, and one with a fresh engine only imports it again.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use crate::{apt_install, run};

/// `wasmbox::DEFAULT_DOCKER_IMAGE`: the image docker isolation runs by default.
pub const IMAGE: &str = "wasmbox-worker";
/// Changes when the recipe below does, so an image from an older recipe is rebuilt.
const RECIPE: &str = "wasmbox-worker image v1: interpreter, libraries, ld.so.cache";
/// Where the library looks for the docker CLI (host/src/isolation/docker.rs).
const DOCKER_CANDIDATES: [&str; 2] = ["/usr/bin/docker", "/usr/local/bin/docker"];
const DOCKERD: &str = "/usr/sbin/dockerd";

/// Makes docker isolation testable here where that is cheap: as root on Debian,
/// installs docker.io and starts `dockerd` if no engine answers; then builds and loads
/// the worker image for `wasmbox`. Anything missing is said loudly and is not an error:
/// the docker tests then skip (and are not required).
pub fn prepare_for_tests(root: &Path, wasmbox: &Path) -> Result<()> {
    if !cfg!(target_os = "linux") {
        return Ok(());
    }
    let Some(docker) = engine(root)? else { return Ok(()) };
    build_image(root, &docker, wasmbox)
}

/// `cargo xtask docker-image [BINARY]`: builds and loads the worker image for `binary`
/// (default: the debug `wasmbox`, built first), starting an engine as the tests do.
pub fn image_command(root: &Path, binary: Option<PathBuf>) -> Result<()> {
    let binary = match binary {
        Some(binary) => std::fs::canonicalize(&binary).with_context(|| format!("{}", binary.display()))?,
        None => {
            run(crate::cargo().args(["build", "--quiet", "-p", "wasmbox-cli"]))?;
            root.join("target/debug/wasmbox")
        }
    };
    let Some(docker) = engine(root)? else { bail!("no docker engine to load the image into (see above)") };
    build_image(root, &docker, &binary)
}

/// The docker CLI once its engine answers, installing and starting one where allowed.
fn engine(root: &Path) -> Result<Option<PathBuf>> {
    let skip = |reason: String| {
        eprintln!("xtask: SKIPPING docker (its isolation tests, its image): {reason}");
        Ok(None)
    };
    if let Some(docker) = docker_cli() {
        if answers(&docker).is_ok() {
            return Ok(Some(docker));
        }
    }
    let is_root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    if !is_root {
        return skip("no docker engine answers, and starting one needs root".into());
    }
    if !Path::new(DOCKERD).is_file() || docker_cli().is_none() {
        if let Err(err) = apt_install(&["docker.io"]) {
            return skip(format!("could not install docker.io: {err:#}"));
        }
    }
    let Some(docker) = docker_cli() else { return skip("docker.io installed no docker CLI".into()) };
    if answers(&docker).is_err() {
        start_dockerd(root)?;
    }
    // dockerd takes a few seconds to set up its storage and networks.
    let started = Instant::now();
    loop {
        match answers(&docker) {
            Ok(()) => return Ok(Some(docker)),
            Err(reason) if started.elapsed() > Duration::from_secs(60) => {
                return skip(format!(
                    "dockerd did not answer within 60 s (log: {}): {reason}",
                    root.join("target/docker/dockerd.log").display()
                ))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(250)),
        }
    }
}

/// Starts dockerd in the background, in a process group of its own, logging to
/// target/docker/dockerd.log. It keeps running after xtask exits, for the next run.
fn start_dockerd(root: &Path) -> Result<()> {
    use std::os::unix::process::CommandExt;
    let dir = root.join("target/docker");
    std::fs::create_dir_all(&dir)?;
    let log = std::fs::File::create(dir.join("dockerd.log"))?;
    eprintln!("xtask: starting {DOCKERD} (log: {})", dir.join("dockerd.log").display());
    Command::new(DOCKERD)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting {DOCKERD}"))?;
    Ok(())
}

fn docker_cli() -> Option<PathBuf> {
    DOCKER_CANDIDATES.iter().map(PathBuf::from).find(|path| path.is_file())
}

/// Whether the engine answers `docker version`.
fn answers(docker: &Path) -> Result<(), String> {
    let output = Command::new(docker)
        .args(["version", "--format", "{{.Server.Version}}"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).trim().to_owned())
    }
}

/// Builds the image for `binary` and loads it as [`IMAGE`], unless the engine already
/// has the image these inputs made.
fn build_image(root: &Path, docker: &Path, binary: &Path) -> Result<()> {
    let dir = root.join("target/docker");
    std::fs::create_dir_all(&dir)?;
    let files = runtime_files(binary)?;
    let mut hasher = Sha256::new();
    hasher.update(RECIPE);
    for file in &files {
        hasher.update(file.to_string_lossy().as_bytes());
        hasher.update([0]);
        hasher.update(std::fs::read(file).with_context(|| format!("reading {}", file.display()))?);
    }
    let fingerprint = hex::encode(hasher.finalize());
    let stamp = dir.join(format!("{IMAGE}.stamp"));
    let tar = dir.join(format!("{IMAGE}.tar"));
    let loaded = image_id(docker, IMAGE);
    let recorded = std::fs::read_to_string(&stamp).unwrap_or_default();
    let same_inputs = recorded.split_whitespace().next() == Some(fingerprint.as_str());
    if same_inputs && loaded.is_some() && recorded.split_whitespace().nth(1) == loaded.as_deref() {
        eprintln!("xtask: docker image {IMAGE} is up to date");
        return Ok(());
    }
    if !same_inputs || !tar.is_file() {
        let mut command = Command::new("tar");
        // Symlinks are followed, so each file lands at the path the loader looks for;
        // owner and times are fixed, so the same files make the same layer.
        command.args(["--create", "--dereference", "--owner=0", "--group=0", "--numeric-owner", "--mtime=@0"]);
        command.arg("--file").arg(&tar).args(["--directory", "/"]);
        command.args(files.iter().map(|file| file.strip_prefix("/").unwrap_or(file)));
        run(&mut command)?;
    }
    let started = Instant::now();
    let output = Command::new(docker)
        .args(["import", "--message", "wasmbox worker: the worker binary's loader and libraries"])
        .arg(&tar)
        .arg(IMAGE)
        .output()
        .context("running docker import")?;
    if !output.status.success() {
        bail!("docker import {} failed: {}", tar.display(), String::from_utf8_lossy(&output.stderr).trim());
    }
    let id = image_id(docker, IMAGE).context("docker import loaded no image")?;
    std::fs::write(&stamp, format!("{fingerprint} {id}\n"))?;
    if let Some(old) = loaded.filter(|old| *old != id) {
        // The image this one replaces, now untagged; kept if a container still uses it.
        let _ = Command::new(docker).args(["image", "rm", &old]).output();
    }
    eprintln!("xtask: loaded docker image {IMAGE} ({id}, {} files) in {:.1?}", files.len(), started.elapsed());
    Ok(())
}

fn image_id(docker: &Path, image: &str) -> Option<String> {
    let output = Command::new(docker).args(["image", "inspect", "--format", "{{.Id}}", image]).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// The ELF interpreter and shared libraries of `binary` as `ldd` resolves them, and the
/// loader's cache, sorted.
fn runtime_files(binary: &Path) -> Result<Vec<PathBuf>> {
    let output = Command::new("ldd").arg(binary).output().context("running ldd")?;
    let listing = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!("ldd {} failed: {}{}", binary.display(), listing, String::from_utf8_lossy(&output.stderr));
    }
    let mut files = vec![PathBuf::from("/etc/ld.so.cache")];
    for line in listing.lines() {
        if line.contains("not found") {
            bail!("{}: a shared library is not found: {}", binary.display(), line.trim());
        }
        // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)`, `/lib64/ld-linux-x86-64.so.2 (0x…)`;
        // the vDSO has no path.
        if let Some(path) = line.split_whitespace().find(|word| word.starts_with('/')) {
            files.push(PathBuf::from(path));
        }
    }
    if files.len() == 1 {
        bail!("{} links no shared libraries: a static binary needs no image but an empty one", binary.display());
    }
    files.sort();
    files.dedup();
    Ok(files)
}
