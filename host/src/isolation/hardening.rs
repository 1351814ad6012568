//! What the worker does to itself before it serves anything: limits that hold even when
//! no OS wrapper is in use (`worker` isolation), and that a worker which escaped wasm
//! cannot raise again (hard limits are lowered too).

use std::io;

/// Open files the worker may hold. It needs its stdio, the runtime's epoll/kqueue and
/// wake-up descriptors, and a few guest and cache files while loading; 64 leaves room.
pub const WORKER_MAX_OPEN_FILES: u64 = 64;

/// Hardens the calling worker process. Call it first thing in `wasmbox worker`, before
/// the async runtime starts threads: `no_new_privs` is per thread (threads created
/// afterwards inherit it).
///
/// - `RLIMIT_CORE` 0: a crashing worker leaves no core file holding guest data.
/// - `RLIMIT_NOFILE` [`WORKER_MAX_OPEN_FILES`].
/// - `RLIMIT_FSIZE` 0: the worker writes no files. The limit applies to regular files
///   only — writes to the stdio pipes are unaffected — but a write to a regular file
///   raises `SIGXFSZ`, so the parent must give the worker pipes (or null) as stdio,
///   never a log file.
/// - Linux: `PR_SET_NO_NEW_PRIVS` (exec cannot gain privileges) and
///   `PR_SET_DUMPABLE` 0 (no ptrace attach by same-uid processes, no core dumps).
///
/// `RLIMIT_AS` is deliberately left alone: wasmtime reserves large virtual ranges for
/// linear memories and guard regions. Memory is capped by the store limits, by the
/// wrapper (`docker --memory`, the Windows Job Object) or by the operator's cgroup.
///
/// On Windows this does nothing: the parent's Job Object carries the limits.
pub fn harden_worker_process() -> io::Result<()> {
    #[cfg(unix)]
    unix::harden()?;
    Ok(())
}

#[cfg(unix)]
mod unix {
    use std::io;

    use rustix::process::{setrlimit, Resource, Rlimit};

    pub(super) fn harden() -> io::Result<()> {
        let cap = |resource, limit: u64| {
            setrlimit(resource, Rlimit { current: Some(limit), maximum: Some(limit) }).map_err(io::Error::from)
        };
        cap(Resource::Core, 0)?;
        cap(Resource::Nofile, super::WORKER_MAX_OPEN_FILES)?;
        cap(Resource::Fsize, 0)?;
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            rustix::thread::set_no_new_privs(true)?;
            rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
        }
        Ok(())
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::io::Write;
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Output};

    /// The hardening is process-wide, so it is tested in a child: this test binary run
    /// again with [`CHILD_ENV`] naming what the child does after hardening itself.
    const CHILD_ENV: &str = "WASMBOX_TEST_HARDENED_CHILD";

    fn run_child(mode: &str) -> Output {
        let exe = std::env::current_exe().unwrap();
        Command::new(exe)
            .args(["--exact", "isolation::hardening::tests::hardened_child", "--nocapture", "--test-threads", "1"])
            .env(CHILD_ENV, mode)
            .output()
            .unwrap()
    }

    #[test]
    fn a_hardened_process_still_runs_wasmtime_and_writes_its_pipe() {
        let output = run_child("wasm");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
        assert!(stdout.contains("hardened child ok: 42"), "{stdout}");
    }

    #[test]
    fn a_hardened_process_is_killed_by_writing_a_regular_file() {
        let output = run_child("write-file");
        assert_eq!(output.status.signal(), Some(rustix::process::Signal::XFSZ.as_raw()), "{output:?}");
    }

    /// The child half; a no-op unless [`CHILD_ENV`] is set.
    #[test]
    fn hardened_child() {
        let Some(mode) = std::env::var_os(CHILD_ENV) else { return };
        // Created before hardening: after it, creating is fine but growing is not.
        let file = tempfile::NamedTempFile::new().unwrap();
        super::harden_worker_process().unwrap();
        let core = rustix::process::getrlimit(rustix::process::Resource::Core);
        assert_eq!((core.current, core.maximum), (Some(0), Some(0)));
        #[cfg(target_os = "linux")]
        assert!(rustix::thread::no_new_privs().unwrap());
        if mode == "write-file" {
            let _ = file.as_file().write_all(b"x");
            unreachable!("SIGXFSZ should have killed this process");
        }
        // A multi-thread runtime with a blocking pool, and wasmtime compiling and
        // running code, all within the file-descriptor cap.
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
        let value = runtime.block_on(async {
            let engine = wasmtime::Engine::default();
            let wat = r#"(module (func (export "answer") (result i32) i32.const 42))"#;
            let module = wasmtime::Module::new(&engine, wat).unwrap();
            tokio::task::spawn_blocking(move || {
                let mut store = wasmtime::Store::new(&engine, ());
                let instance = wasmtime::Instance::new(&mut store, &module, &[]).unwrap();
                let answer = instance.get_typed_func::<(), i32>(&mut store, "answer").unwrap();
                answer.call(&mut store, ()).unwrap()
            })
            .await
            .unwrap()
        });
        let mut out = std::io::stdout().lock();
        writeln!(out, "hardened child ok: {value}").unwrap();
        out.flush().unwrap();
    }
}
