//! `seatbelt` isolation (macOS): the worker under `/usr/bin/sandbox-exec` with the
//! deny-default profile in `worker.sbpl`. The profile goes in with `-p` (its text) and
//! every path with `-D NAME=path`; the only text added to the profile is one rule per
//! read-only path that names its parameter (`READ_ONLY_0`, ...), never the path.
//!
//! `sandbox-exec` applies the profile and then executes the worker in the same process,
//! so the worker's own limits apply as under every other wrapper: its arguments carry
//! the run's memory cap, which it sets as its `RLIMIT_DATA` before serving
//! (`harden_worker_process`). The profile allows no `fork`, which is what bounds its
//! processes here (macOS counts `RLIMIT_NPROC` per account, see hardening.rs).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{IsolationError, LaunchPlan, WorkerLaunch};

const NAME: &str = "seatbelt";
const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";
/// The deny-default worker profile.
const PROFILE: &str = include_str!("worker.sbpl");

/// `/usr/bin/sandbox-exec`, on macOS where it exists; elsewhere fails closed.
pub(crate) fn seatbelt_available() -> Result<PathBuf, IsolationError> {
    if !cfg!(target_os = "macos") {
        return Err(unavailable("Seatbelt (sandbox-exec) exists only on macOS".into()));
    }
    let program = PathBuf::from(SANDBOX_EXEC);
    if !program.is_file() {
        return Err(unavailable(format!("{SANDBOX_EXEC} is missing")));
    }
    Ok(program)
}

pub(super) fn plan(launch: &WorkerLaunch) -> Result<LaunchPlan, IsolationError> {
    let program = seatbelt_available()?;
    // Seatbelt matches resolved paths (/var is /private/var), so resolve them first.
    let resolved = WorkerLaunch {
        worker_program: canonical(&launch.worker_program)?,
        read_only_paths: launch.read_only_paths.iter().map(|p| canonical(p)).collect::<Result<_, _>>()?,
        ..launch.clone()
    };
    Ok(LaunchPlan { program, args: args(&resolved), env: Vec::new(), kill_plan: None })
}

/// The `sandbox-exec` argv (after the program): the profile, its parameters, then the
/// worker and its arguments.
fn args(launch: &WorkerLaunch) -> Vec<OsString> {
    let mut args = vec![OsString::from("-p"), OsString::from(profile(launch.read_only_paths.len()))];
    let mut define = |name: &str, path: &Path| {
        let mut value = OsString::from(name);
        value.push("=");
        value.push(path);
        args.extend([OsString::from("-D"), value]);
    };
    define("WORKER", &launch.worker_program);
    for (index, path) in launch.read_only_paths.iter().enumerate() {
        define(&format!("READ_ONLY_{index}"), path);
    }
    args.push(launch.worker_program.clone().into());
    args.extend(launch.worker_args.iter().cloned());
    args
}

/// `worker.sbpl` plus a read-only rule per path parameter. Mapping executable is
/// allowed because wasmtime maps precompiled guests from the cache as code.
fn profile(read_only_paths: usize) -> String {
    let mut profile = PROFILE.to_owned();
    for index in 0..read_only_paths {
        profile.push_str(&format!("(allow file-read* file-map-executable (subpath (param \"READ_ONLY_{index}\")))\n"));
    }
    profile
}

fn canonical(path: &Path) -> Result<PathBuf, IsolationError> {
    std::fs::canonicalize(path).map_err(|e| IsolationError::InvalidLaunch {
        isolation: NAME,
        reason: format!("cannot resolve {}: {e}", path.display()),
    })
}

fn unavailable(reason: String) -> IsolationError {
    IsolationError::Unavailable { isolation: NAME, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_passes_paths_only_as_parameters() {
        let tricky = PathBuf::from("/Users/me/x\") (allow default) (\"/cache");
        let launch = WorkerLaunch {
            worker_program: PathBuf::from("/Applications/wasmbox.app/wasmbox"),
            worker_args: vec![
                "worker".into(),
                "--cache-dir".into(),
                tricky.clone().into(),
                "--max-data-bytes".into(),
                "805306368".into(),
            ],
            read_only_paths: vec![tricky.clone(), PathBuf::from("/Users/me/guest.wasm")],
            memory_limit_bytes: 1 << 30,
            name: "w".into(),
        };
        let args = args(&launch);
        let expected_profile = format!(
            "{PROFILE}(allow file-read* file-map-executable (subpath (param \"READ_ONLY_0\")))\n\
             (allow file-read* file-map-executable (subpath (param \"READ_ONLY_1\")))\n"
        );
        let expected: Vec<OsString> = [
            "-p",
            &expected_profile,
            "-D",
            "WORKER=/Applications/wasmbox.app/wasmbox",
            "-D",
            "READ_ONLY_0=/Users/me/x\") (allow default) (\"/cache",
            "-D",
            "READ_ONLY_1=/Users/me/guest.wasm",
            "/Applications/wasmbox.app/wasmbox",
            "worker",
            "--cache-dir",
            "/Users/me/x\") (allow default) (\"/cache",
            // The worker's own RLIMIT_DATA, which it sets under the profile.
            "--max-data-bytes",
            "805306368",
        ]
        .map(OsString::from)
        .into();
        assert_eq!(args, expected);
        // The profile text never holds a path the caller chose.
        assert!(!args[1].to_string_lossy().contains("/Users"));
    }

    #[test]
    fn profile_denies_by_default_and_grants_no_network_or_writes() {
        let rules: Vec<&str> =
            PROFILE.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with(';')).collect();
        let rules = rules.join("\n");
        assert!(rules.starts_with("(version 1)\n(deny default)"), "{rules}");
        assert!(!rules.contains("network"), "{rules}");
        assert!(!rules.contains("file-write*"), "{rules}");
        assert!(!rules.contains("mach-lookup"), "{rules}");
        assert!(!rules.contains("process-fork"), "{rules}");
        assert!(!rules.contains("(allow default)"), "{rules}");
        // Balanced parentheses, so sandbox-exec can parse it.
        let depth = rules.chars().try_fold(0i32, |depth, c| {
            let depth = depth + i32::from(c == '(') - i32::from(c == ')');
            (depth >= 0).then_some(depth)
        });
        assert_eq!(depth, Some(0));
    }

    #[cfg(not(target_os = "macos"))]
    #[test]
    fn fails_closed_off_macos() {
        let launch = WorkerLaunch {
            worker_program: PathBuf::from("/usr/bin/true"),
            worker_args: Vec::new(),
            read_only_paths: Vec::new(),
            memory_limit_bytes: 1 << 30,
            name: "w".into(),
        };
        let error = super::super::plan(&super::super::Isolation::Seatbelt, &launch).unwrap_err();
        assert_eq!(
            error.to_string(),
            "isolation `seatbelt` is not available on this host: Seatbelt (sandbox-exec) exists only on macOS"
        );
    }
}
