//! `bwrap` isolation (Linux): the worker in new user, pid, ipc, net, uts and cgroup
//! namespaces, on an empty read-only root that holds only the worker binary, its ELF
//! interpreter and shared libraries, `/etc/ld.so.cache`, and the launch's read-only
//! paths, each at its own path; plus a fresh `/proc`, a minimal `/dev` and a private
//! `/tmp`.
//!
//! Why libraries one by one rather than all of `/usr`: a worker that escaped wasm would
//! otherwise find every interpreter and tool of the host to exec. The libraries are the
//! ones the host's dynamic loader resolves for the binary (`<interp> --list <binary>`,
//! what `ldd` does, run with a cleared environment so `LD_*` variables cannot steer it);
//! inside the sandbox the same loader with the same cache resolves the same paths.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{find_program, probe, IsolationError, LaunchPlan, ProbeCache, WorkerLaunch};

const NAME: &str = "bwrap";
/// Where distributions install bubblewrap.
const BWRAP_CANDIDATES: [&str; 3] = ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"];

/// The namespace and process flags every bwrap launch (and the probe) uses.
/// `--unshare-user` on top of `--unshare-all` (which only *tries* one) fails closed
/// where no user namespace can be made; `--disable-userns` (bubblewrap 0.8+) keeps the
/// worker from making nested ones; `--cap-drop ALL` matters when the parent is root.
const SANDBOX_FLAGS: [&str; 11] = [
    "--unshare-all",
    "--unshare-user",
    "--disable-userns",
    "--die-with-parent",
    "--new-session",
    "--clearenv",
    "--cap-drop",
    "ALL",
    "--chdir",
    "/",
    "--proc",
];

static PROBE: ProbeCache = ProbeCache::new();

/// Finds bubblewrap and checks that it can actually create the namespaces here (a
/// container without user namespaces, or a kernel that forbids them, fails). Tests use
/// it to skip loudly; [`plan`] calls it so a launch fails closed with the reason.
pub(crate) fn bwrap_available() -> Result<PathBuf, IsolationError> {
    if !cfg!(target_os = "linux") {
        return Err(unavailable("bubblewrap needs Linux namespaces; this host is not Linux".into()));
    }
    PROBE.get_or_probe(|| {
        let bwrap = find_program(&BWRAP_CANDIDATES).ok_or_else(|| {
            unavailable(format!(
                "bubblewrap is not installed (looked for {}); install the `bubblewrap` package",
                BWRAP_CANDIDATES.join(", ")
            ))
        })?;
        let true_program = find_program(&["/usr/bin/true", "/bin/true"])
            .ok_or_else(|| unavailable("no /usr/bin/true or /bin/true to probe bubblewrap with".into()))?;
        let true_program = true_program.to_string_lossy();
        let mut args: Vec<&str> = SANDBOX_FLAGS.to_vec();
        args.extend(["/proc", "--dev", "/dev", "--ro-bind", "/", "/", "--", &true_program]);
        probe(&bwrap, &args, &[]).map_err(|reason| {
            unavailable(format!(
                "bubblewrap cannot create its namespaces here (are unprivileged user namespaces enabled?): {reason}"
            ))
        })?;
        Ok(bwrap)
    })
}

pub(super) fn plan(launch: &WorkerLaunch) -> Result<LaunchPlan, IsolationError> {
    let bwrap = bwrap_available()?;
    let runtime_files = runtime_files_cached(&launch.worker_program)?;
    Ok(LaunchPlan { program: bwrap, args: args(launch, &runtime_files), env: Vec::new(), kill_plan: None })
}

/// The bwrap argv (after the program) for `launch`, given the files the worker binary
/// needs to start (its interpreter and libraries, from [`runtime_files`]).
fn args(launch: &WorkerLaunch, runtime_files: &[PathBuf]) -> Vec<OsString> {
    let mut args: Vec<OsString> = SANDBOX_FLAGS.iter().map(OsString::from).collect();
    args.extend(["/proc", "--dev", "/dev", "--tmpfs", "/tmp"].map(OsString::from));
    let ro_bind = |args: &mut Vec<OsString>, flag: &str, path: &Path| {
        args.extend([OsString::from(flag), path.into(), path.into()]);
    };
    // The loader's cache is an optimisation (without it ld.so searches its default
    // directories, where the libraries are bound anyway), so it may be missing.
    ro_bind(&mut args, "--ro-bind-try", Path::new("/etc/ld.so.cache"));
    for file in runtime_files {
        ro_bind(&mut args, "--ro-bind", file);
    }
    ro_bind(&mut args, "--ro-bind", &launch.worker_program);
    for path in &launch.read_only_paths {
        ro_bind(&mut args, "--ro-bind", path);
    }
    // The root bwrap builds is a writable tmpfs; nothing needs to write there.
    args.extend(["--remount-ro", "/", "--"].map(OsString::from));
    args.push(launch.worker_program.clone().into());
    args.extend(launch.worker_args.iter().cloned());
    args
}

/// [`runtime_files`], worked out once per worker binary: a pool launching fresh workers
/// would otherwise read its ELF header and run the loader for every launch (~ms each).
/// Keyed by path, size and modification time, so a binary replaced in place is listed
/// again.
fn runtime_files_cached(binary: &Path) -> Result<Vec<PathBuf>, IsolationError> {
    type Identity = (PathBuf, u64, Option<std::time::SystemTime>);
    static LISTED: Mutex<Vec<(Identity, Vec<PathBuf>)>> = Mutex::new(Vec::new());
    let meta = std::fs::metadata(binary)
        .map_err(|e| invalid(format!("cannot read the worker program {}: {e}", binary.display())))?;
    let identity = (binary.to_owned(), meta.len(), meta.modified().ok());
    let listed = || LISTED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, files)) = listed().iter().find(|(known, _)| *known == identity) {
        return Ok(files.clone());
    }
    let files = runtime_files(binary)?;
    let mut listed = listed();
    listed.retain(|(known, _)| known.0 != identity.0);
    listed.push((identity, files.clone()));
    Ok(files)
}

/// The ELF interpreter and shared libraries `binary` needs, as the host's loader
/// resolves them. A static binary needs none.
fn runtime_files(binary: &Path) -> Result<Vec<PathBuf>, IsolationError> {
    let read = |limit: u64| -> Result<Vec<u8>, IsolationError> {
        use std::io::Read;
        let mut bytes = Vec::new();
        std::fs::File::open(binary)
            .and_then(|file| file.take(limit).read_to_end(&mut bytes))
            .map_err(|e| invalid(format!("cannot read the worker program {}: {e}", binary.display())))?;
        Ok(bytes)
    };
    // The headers and the interpreter path sit at the start of every linker's output;
    // the binary itself can be tens of MB, so read the rest only if they do not.
    let interpreter = match elf_interpreter(&read(64 * 1024)?) {
        Ok(interpreter) => Ok(interpreter),
        Err(_) => elf_interpreter(&read(u64::MAX)?),
    };
    let Some(interpreter) = interpreter.map_err(|e| invalid(format!("{}: {e}", binary.display())))? else {
        return Ok(Vec::new());
    };
    let listing = probe(&interpreter, &["--list", &binary.to_string_lossy()], &[])
        .map_err(|reason| invalid(format!("cannot list the shared libraries of {}: {reason}", binary.display())))?;
    let mut files = parse_loader_listing(&listing).map_err(|e| invalid(format!("{}: {e}", binary.display())))?;
    if !files.contains(&interpreter) {
        files.insert(0, interpreter);
    }
    Ok(files)
}

/// `PT_INTERP` of an ELF file (32/64-bit, either byte order), or `None` for a static
/// executable.
fn elf_interpreter(bytes: &[u8]) -> Result<Option<PathBuf>, String> {
    const PT_INTERP: u32 = 3;
    if bytes.len() < 52 || &bytes[..4] != b"\x7fELF" {
        return Err("not an ELF executable".into());
    }
    let wide = match bytes[4] {
        1 => false,
        2 => true,
        _ => return Err("unknown ELF class".into()),
    };
    let big_endian = match bytes[5] {
        1 => false,
        2 => true,
        _ => return Err("unknown ELF byte order".into()),
    };
    let truncated = || "truncated ELF header".to_string();
    let read = |offset: usize, len: usize| -> Result<u64, String> {
        let field = bytes.get(offset..offset + len).ok_or_else(truncated)?;
        let mut value = 0u64;
        for i in 0..len {
            let byte = if big_endian { field[i] } else { field[len - 1 - i] };
            value = value << 8 | u64::from(byte);
        }
        Ok(value)
    };
    let to_usize = |value: u64| usize::try_from(value).map_err(|_| truncated());
    let (phoff, phentsize, phnum) = if wide {
        (read(0x20, 8)?, read(0x36, 2)?, read(0x38, 2)?)
    } else {
        (read(0x1c, 4)?, read(0x2a, 2)?, read(0x2c, 2)?)
    };
    for index in 0..phnum {
        let header = to_usize(phoff + index * phentsize)?;
        if read(header, 4)? != u64::from(PT_INTERP) {
            continue;
        }
        let (offset, size) = if wide {
            (read(header + 0x08, 8)?, read(header + 0x20, 8)?)
        } else {
            (read(header + 0x04, 4)?, read(header + 0x10, 4)?)
        };
        let (offset, size) = (to_usize(offset)?, to_usize(size)?);
        let raw = bytes.get(offset..offset.saturating_add(size)).ok_or_else(truncated)?;
        let raw = raw.split(|&b| b == 0).next().unwrap_or_default();
        let path = PathBuf::from(String::from_utf8(raw.to_vec()).map_err(|_| "non-UTF-8 ELF interpreter path")?);
        if !path.is_absolute() {
            return Err(format!("the ELF interpreter {} is not absolute", path.display()));
        }
        return Ok(Some(path));
    }
    Ok(None)
}

/// Parses `ld.so --list` output (glibc and musl):
/// `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)` and `/lib64/ld-linux-x86-64.so.2 (0x...)`;
/// the vDSO (no path) needs no file.
fn parse_loader_listing(listing: &str) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for line in listing.lines().map(str::trim).filter(|line| !line.is_empty()) {
        let path = match line.split_once(" => ") {
            Some((library, target)) => {
                if target.starts_with("not found") {
                    return Err(format!("the shared library {library} is not found"));
                }
                target
            }
            None => line,
        };
        let path = path.rsplit_once(" (0x").map_or(path, |(path, _)| path).trim();
        if path.starts_with('/') {
            let path = PathBuf::from(path);
            if !files.contains(&path) {
                files.push(path);
            }
        }
    }
    Ok(files)
}

fn unavailable(reason: String) -> IsolationError {
    IsolationError::Unavailable { isolation: NAME, reason }
}

fn invalid(reason: String) -> IsolationError {
    IsolationError::InvalidLaunch { isolation: NAME, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch() -> WorkerLaunch {
        WorkerLaunch {
            worker_program: PathBuf::from("/opt/wasmbox/wasmbox"),
            worker_args: vec!["worker".into(), "--cache-dir".into(), "/var/cache/wasmbox".into()],
            read_only_paths: vec![PathBuf::from("/var/cache/wasmbox"), PathBuf::from("/srv/guest (1).wasm")],
            memory_limit_bytes: 1 << 30,
            name: "w1".into(),
        }
    }

    #[test]
    fn argv_binds_only_the_runtime_files_and_read_only_paths() {
        let runtime = [PathBuf::from("/lib64/ld-linux-x86-64.so.2"), PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6")];
        let expected = [
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--cap-drop",
            "ALL",
            "--chdir",
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
            "--ro-bind-try",
            "/etc/ld.so.cache",
            "/etc/ld.so.cache",
            "--ro-bind",
            "/lib64/ld-linux-x86-64.so.2",
            "/lib64/ld-linux-x86-64.so.2",
            "--ro-bind",
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib/x86_64-linux-gnu/libc.so.6",
            "--ro-bind",
            "/opt/wasmbox/wasmbox",
            "/opt/wasmbox/wasmbox",
            "--ro-bind",
            "/var/cache/wasmbox",
            "/var/cache/wasmbox",
            "--ro-bind",
            "/srv/guest (1).wasm",
            "/srv/guest (1).wasm",
            "--remount-ro",
            "/",
            "--",
            "/opt/wasmbox/wasmbox",
            "worker",
            "--cache-dir",
            "/var/cache/wasmbox",
        ];
        assert_eq!(args(&launch(), &runtime), expected.map(OsString::from));
    }

    #[test]
    fn loader_listings_give_every_library_once() {
        let glibc = "\tlinux-vdso.so.1 (0x00007ffd5a3f2000)\n\
                     \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f0e1c5a0000)\n\
                     \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0e1c3bf000)\n\
                     \t/lib64/ld-linux-x86-64.so.2 (0x00007f0e1d2b4000)\n";
        assert_eq!(
            parse_loader_listing(glibc).unwrap(),
            ["/lib/x86_64-linux-gnu/libgcc_s.so.1", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"]
                .map(PathBuf::from)
        );
        let musl =
            "\t/lib/ld-musl-x86_64.so.1 (0x7f1c)\n\tlibc.musl-x86_64.so.1 => /lib/ld-musl-x86_64.so.1 (0x7f1c)\n";
        assert_eq!(parse_loader_listing(musl).unwrap(), [PathBuf::from("/lib/ld-musl-x86_64.so.1")]);
        let missing = "\tlibfoo.so.1 => not found\n";
        assert_eq!(parse_loader_listing(missing).unwrap_err(), "the shared library libfoo.so.1 is not found");
    }

    #[test]
    fn elf_headers_that_are_not_executables_are_refused() {
        assert!(elf_interpreter(b"#!/bin/sh\necho hi\n").is_err());
        let mut truncated = b"\x7fELF\x02\x01".to_vec();
        truncated.resize(64, 0);
        truncated[0x38] = 5; // five program headers, pointing past the end
        truncated[0x36] = 56;
        truncated[0x20] = 64;
        assert!(elf_interpreter(&truncated).is_err());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_test_binary_has_a_resolvable_interpreter_and_libraries() {
        let exe = std::env::current_exe().unwrap();
        let files = runtime_files(&exe).unwrap();
        let bytes = std::fs::read(&exe).unwrap();
        if let Some(interpreter) = elf_interpreter(&bytes).unwrap() {
            assert!(files.contains(&interpreter), "{files:?}");
            assert!(files.iter().any(|f| f.to_string_lossy().contains("libc")), "{files:?}");
        }
        assert!(files.iter().all(|f| f.is_absolute() && f.exists()), "{files:?}");
    }

    /// The listing is worked out once per binary, and again when the binary changes.
    #[cfg(target_os = "linux")]
    #[test]
    fn runtime_files_are_listed_once_per_binary_identity() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("worker");
        std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
        let listed = runtime_files_cached(&exe).unwrap();
        assert_eq!(listed, runtime_files(&exe).unwrap());

        // Same path, size and mtime but no longer an ELF file: the cached listing stands.
        let len = std::fs::metadata(&exe).unwrap().len();
        let modified = std::fs::metadata(&exe).unwrap().modified().unwrap();
        let file = std::fs::OpenOptions::new().write(true).open(&exe).unwrap();
        file.set_len(0).unwrap();
        file.set_len(len).unwrap();
        file.set_modified(modified).unwrap();
        assert_eq!(runtime_files_cached(&exe).unwrap(), listed);

        // A new mtime is a new binary: listed again, and this one is not an ELF file.
        file.set_modified(modified + std::time::Duration::from_secs(1)).unwrap();
        assert!(runtime_files_cached(&exe).is_err());
    }

    /// Runs a real program under the planned sandbox: it starts with only its own files,
    /// sees an empty environment, no network interfaces but loopback, and cannot write
    /// to the read-only paths.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_planned_launch_really_runs_confined() {
        if let Err(error) = bwrap_available() {
            eprintln!("SKIPPED a_planned_launch_really_runs_confined: {error}");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("guest.wasm");
        std::fs::write(&file, "component").unwrap();
        let shell = PathBuf::from("/bin/sh");
        let script = format!(
            "set -u; env; cat '{f}'; echo; ls /proc/self/ns >/dev/null; cat /proc/net/dev | tail -n +3 | cut -d: -f1; \
             echo x > '{f}' 2>/dev/null && echo WRITABLE; ls /usr/bin 2>/dev/null | head -1; echo done",
            f = file.display()
        );
        let launch = WorkerLaunch {
            worker_program: shell,
            worker_args: vec!["-c".into(), script.into()],
            read_only_paths: vec![file.clone()],
            memory_limit_bytes: 1 << 30,
            name: "t".into(),
        };
        let plan = super::super::plan(&super::super::Isolation::Bubblewrap, &launch).unwrap();
        // `/bin/sh` needs `cat`, `ls`, ... which are not bound: bind coreutils through
        // /usr/bin for this test only, by resolving them like the worker's libraries.
        let mut args = plan.args.clone();
        let tools = ["cat", "ls", "tail", "cut", "env", "head"];
        let dash = args.iter().position(|a| a == "--remount-ro").unwrap();
        for tool in tools {
            let path = PathBuf::from(format!("/usr/bin/{tool}"));
            let mut extra: Vec<OsString> = Vec::new();
            for lib in runtime_files(&path).unwrap() {
                extra.extend(["--ro-bind-try".into(), lib.clone().into(), lib.into()]);
            }
            extra.extend(["--ro-bind".into(), path.clone().into(), path.into()]);
            args.splice(dash..dash, extra);
        }
        let output = std::process::Command::new(&plan.program).args(&args).env_clear().output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{output:?}");
        let lines: Vec<&str> = stdout.lines().collect();
        // `env` runs first: the parent's environment (PATH, HOME, ...) is gone.
        assert!(!lines.iter().any(|l| l.starts_with("PATH=") || l.starts_with("HOME=")), "{stdout}");
        assert!(lines.contains(&"component"), "{stdout}");
        assert!(lines.iter().any(|l| l.trim() == "lo"), "{stdout}");
        assert!(
            !lines.iter().any(|l| l.trim().starts_with("eth") || l.trim().starts_with("en")),
            "network visible: {stdout}"
        );
        assert!(!stdout.contains("WRITABLE"), "{stdout}");
        assert_eq!(lines.last(), Some(&"done"));
        // Only the bound tools exist in /usr/bin.
        assert!(lines.contains(&"cat"), "{stdout}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "component");
    }
}
