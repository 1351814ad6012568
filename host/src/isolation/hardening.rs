//! What the worker does to itself before it serves anything: limits that hold even when
//! no OS wrapper is in use (`worker` isolation), and that a worker which escaped wasm
//! cannot raise again (hard limits are lowered too).
//!
//! The worker sets them itself, from its command line, rather than the parent setting
//! them on the child's pid: under bubblewrap the worker is bwrap's grandchild and under
//! docker not the parent's descendant at all, so only the worker reaches itself in every
//! wrapper (and macOS has no `prlimit`). It does so before it reads its first frame, so
//! no guest input has been seen when the limits are set.

use std::io;

/// Open files the worker may hold. It needs its stdio, the runtime's epoll/kqueue and
/// wake-up descriptors, and a few guest and cache files while loading; 64 leaves room.
pub const WORKER_MAX_OPEN_FILES: u64 = 64;

/// Threads and processes a worker in a user namespace of its own may run beyond one
/// per core (its async runtime starts one thread per core): the runtime's blocking
/// pool, the epoch ticker, bwrap's reaper. See [`harden_worker_process`] for why only
/// there.
pub const WORKER_EXTRA_TASKS: u64 = 64;

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
/// - `RLIMIT_DATA` `max_data_bytes`, when given: the parent passes the run's memory cap
///   plus the worker's own overhead. It counts the process's private writable memory —
///   heap, thread stacks, and the accessible part of each wasm linear memory — but not
///   the address space wasmtime's instance pool only *reserves*, which is why it is
///   `RLIMIT_DATA` and not `RLIMIT_AS`: the pool reserves far more address space than
///   any memory cap (SECURITY.md, "The second wall").
/// - `RLIMIT_NPROC` one per core plus [`WORKER_EXTRA_TASKS`], only when the worker runs
///   in a user namespace of its own (bubblewrap, rootless or user-remapped docker):
///   Linux counts `RLIMIT_NPROC` per user *and user namespace*, so there it counts just
///   the sandbox's threads and processes. Elsewhere it would count every process of the
///   account the parent runs as, and a fixed cap would either be above that count
///   (useless) or below it (the worker cannot start its threads); docker's
///   `--pids-limit` and seatbelt's profile (no `fork`) cap processes there.
/// - Linux: `PR_SET_NO_NEW_PRIVS` (exec cannot gain privileges) and
///   `PR_SET_DUMPABLE` 0 (no ptrace attach by same-uid processes, no core dumps).
///
/// On Windows this does nothing: the parent's Job Object carries the limits.
///
/// # Errors
/// The OS refused a limit (a limit the process already has lower is kept, not raised).
pub fn harden_worker_process(max_data_bytes: Option<u64>) -> io::Result<()> {
    #[cfg(unix)]
    unix::harden(max_data_bytes)?;
    #[cfg(not(unix))]
    let _ = max_data_bytes;
    Ok(())
}

#[cfg(unix)]
mod unix {
    use std::io;

    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

    pub(super) fn harden(max_data_bytes: Option<u64>) -> io::Result<()> {
        cap(Resource::Core, 0)?;
        cap(Resource::Nofile, super::WORKER_MAX_OPEN_FILES)?;
        cap(Resource::Fsize, 0)?;
        if let Some(bytes) = max_data_bytes {
            cap(Resource::Data, bytes)?;
        }
        if in_own_user_namespace() {
            cap(Resource::Nproc, max_tasks())?;
        }
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            rustix::thread::set_no_new_privs(true)?;
            rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
        }
        Ok(())
    }

    /// Lowers `resource` to `limit` (soft and hard), or keeps a lower limit the process
    /// already has: hardening never raises anything.
    fn cap(resource: Resource, limit: u64) -> io::Result<()> {
        let current = getrlimit(resource);
        let lower = |existing: Option<u64>| Some(existing.map_or(limit, |existing| existing.min(limit)));
        let new = Rlimit { current: lower(current.current), maximum: lower(current.maximum) };
        setrlimit(resource, new).map_err(io::Error::from)
    }

    /// The `RLIMIT_NPROC` of a worker in its own user namespace.
    pub(super) fn max_tasks() -> u64 {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        cores + super::WORKER_EXTRA_TASKS
    }

    /// Whether this process is in a user namespace other than the initial one: the
    /// kernel gives the initial namespace the fixed inode number `PROC_USER_INIT_INO`.
    pub(super) fn in_own_user_namespace() -> bool {
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::fs::MetadataExt;
            const PROC_USER_INIT_INO: u64 = 0xEFFF_FFFD;
            // No /proc (or no namespaces): treated as the initial namespace, so the
            // per-account count is never capped by mistake.
            std::fs::metadata("/proc/self/ns/user").is_ok_and(|ns| ns.ino() != PROC_USER_INIT_INO)
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::io::Write;
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Output};

    use rustix::process::{getrlimit, Resource};

    /// The hardening is process-wide, so it is tested in a child: this test binary run
    /// again with [`CHILD_ENV`] naming what the child does after hardening itself.
    const CHILD_ENV: &str = "WASMBOX_TEST_HARDENED_CHILD";
    /// The `RLIMIT_DATA` the "data" child gives itself: what a worker gets for a run
    /// with a 64 MiB memory cap is larger; this is small enough that the test can
    /// reach it.
    const DATA_LIMIT: u64 = 512 << 20;

    fn child_command(wrapper: &[&str]) -> Command {
        let exe = std::env::current_exe().unwrap();
        let mut command = match wrapper.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(exe);
                command
            }
            None => Command::new(exe),
        };
        command.args(["--exact", "isolation::hardening::tests::hardened_child", "--nocapture", "--test-threads", "1"]);
        command
    }

    fn run_child(mode: &str) -> Output {
        child_command(&[]).env(CHILD_ENV, mode).output().unwrap()
    }

    fn assert_child_ok(output: &Output, expected: &str) {
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
        assert!(stdout.contains(expected), "{stdout}");
    }

    #[test]
    fn a_hardened_process_still_runs_wasmtime_and_writes_its_pipe() {
        assert_child_ok(&run_child("wasm"), "hardened child ok: 42");
    }

    #[test]
    fn a_hardened_process_is_killed_by_writing_a_regular_file() {
        let output = run_child("write-file");
        assert_eq!(output.status.signal(), Some(rustix::process::Signal::XFSZ.as_raw()), "{output:?}");
    }

    /// The worker's engine (the instance pool reserving many GiB of address space)
    /// still works under an `RLIMIT_DATA` of a few hundred MiB, while a wasm memory
    /// grown past it and a host allocation past it both fail. (Linux counts mappings
    /// against `RLIMIT_DATA`; not every Unix does.)
    #[cfg(target_os = "linux")]
    #[test]
    fn the_data_limit_holds_the_pooled_engine_to_the_cap() {
        assert_child_ok(&run_child("data"), "data limit holds");
    }

    /// In a user namespace of its own the worker caps its threads and processes, and
    /// the cap counts only that namespace's. As root (whom the kernel exempts from
    /// `RLIMIT_NPROC`) the child runs as `nobody`.
    #[cfg(target_os = "linux")]
    #[test]
    fn in_its_own_user_namespace_the_worker_caps_its_tasks() {
        let unshare = ["/usr/bin/unshare", "--user", "--map-root-user"];
        let root = rustix::process::getuid().is_root();
        let setpriv = ["/usr/bin/setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"];
        let wrapper: Vec<&str> =
            if root { setpriv.iter().chain(&unshare).copied().collect() } else { unshare.to_vec() };
        if !std::path::Path::new(wrapper[0]).is_file() || !std::path::Path::new(unshare[0]).is_file() {
            eprintln!("SKIPPED in_its_own_user_namespace_the_worker_caps_its_tasks: no {wrapper:?} here");
            return;
        }
        let output = child_command(&wrapper).env(CHILD_ENV, "nproc").output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() && stderr.contains("unshare failed") {
            eprintln!("SKIPPED in_its_own_user_namespace_the_worker_caps_its_tasks: no user namespaces: {stderr}");
            return;
        }
        assert_child_ok(&output, "task cap holds");
    }

    /// The child half; a no-op unless [`CHILD_ENV`] is set.
    #[test]
    fn hardened_child() {
        let Some(mode) = std::env::var_os(CHILD_ENV) else { return };
        let mode = mode.to_string_lossy();
        // Created before hardening: after it, creating is fine but growing is not.
        let file = tempfile::NamedTempFile::new().unwrap();
        let data_limit = (mode == "data").then_some(DATA_LIMIT);
        super::harden_worker_process(data_limit).unwrap();
        let core = getrlimit(Resource::Core);
        assert_eq!((core.current, core.maximum), (Some(0), Some(0)));
        #[cfg(target_os = "linux")]
        assert!(rustix::thread::no_new_privs().unwrap());
        match &*mode {
            "write-file" => {
                let _ = file.as_file().write_all(b"x");
                unreachable!("SIGXFSZ should have killed this process");
            }
            "data" => data_child(),
            "nproc" => nproc_child(),
            _ => wasm_child(),
        }
    }

    fn wasm_child() {
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

    fn data_child() {
        let data = getrlimit(Resource::Data);
        assert_eq!((data.current, data.maximum), (Some(DATA_LIMIT), Some(DATA_LIMIT)));
        // The engine a worker builds: pooled, one run at a time.
        let cache = tempfile::tempdir().unwrap();
        let config =
            crate::EngineConfig { cache_dir: cache.path().to_owned(), max_concurrent_runs: 1, ..Default::default() };
        let engine = crate::Engine::new(config).expect("the pooled worker engine builds under RLIMIT_DATA");
        let engine = engine.wasmtime();
        let module = wasmtime::Module::new(engine, r#"(module (memory (export "memory") 1))"#).unwrap();
        let mut store = wasmtime::Store::new(engine, ());
        let instance = wasmtime::Instance::new(&mut store, &module, &[]).unwrap();
        let memory = instance.get_memory(&mut store, "memory").unwrap();
        const PAGE: u64 = 64 << 10;
        // Within the cap: 64 MiB, written to the end.
        memory.grow(&mut store, (64 << 20) / PAGE).expect("growing within the data limit");
        let last = memory.data_size(&store) - 1;
        memory.data_mut(&mut store)[last] = 1;
        // Past it: the pages cannot be made accessible.
        assert!(memory.grow(&mut store, DATA_LIMIT / PAGE).is_err(), "a wasm memory grew past RLIMIT_DATA");
        let mut host = Vec::<u8>::new();
        assert!(host.try_reserve_exact(DATA_LIMIT as usize).is_err(), "the host allocated past RLIMIT_DATA");
        let mut out = std::io::stdout().lock();
        writeln!(out, "data limit holds").unwrap();
        out.flush().unwrap();
    }

    fn nproc_child() {
        assert!(super::unix::in_own_user_namespace(), "the child runs in a user namespace of its own");
        let cap = super::unix::max_tasks();
        let nproc = getrlimit(Resource::Nproc);
        assert_eq!((nproc.current, nproc.maximum), (Some(cap), Some(cap)));
        // Threads count as tasks: start parked ones until the kernel refuses.
        let (release, parked) = std::sync::mpsc::channel::<()>();
        let parked = std::sync::Arc::new(std::sync::Mutex::new(parked));
        let mut threads = Vec::new();
        let refused = loop {
            let parked = std::sync::Arc::clone(&parked);
            match std::thread::Builder::new().stack_size(64 << 10).spawn(move || {
                let _ = parked.lock().map(|receiver| receiver.recv());
            }) {
                Ok(thread) if threads.len() < 4 * cap as usize => threads.push(thread),
                Ok(thread) => {
                    threads.push(thread);
                    break false;
                }
                Err(_) => break true,
            }
        };
        drop(release);
        for thread in threads.drain(..) {
            thread.join().unwrap();
        }
        assert!(refused, "{} threads started under RLIMIT_NPROC {cap}", 4 * cap);
        let mut out = std::io::stdout().lock();
        writeln!(out, "task cap holds").unwrap();
        out.flush().unwrap();
    }
}
