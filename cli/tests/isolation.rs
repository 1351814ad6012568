//! Runs in worker processes, end to end: `Isolation::Worker` and `Isolation::Bubblewrap`
//! with this crate's `wasmbox` binary as the worker, the faults a worker can have, and
//! wrappers that must fail closed. Needs the guests (`cargo xtask guests`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{json, Value};
use wasmbox::worker::WorkerOptions;
use wasmbox::{
    CallStatus, CancelToken, Engine, EngineConfig, Error, Isolation, Limits, Outcome, Runtime, Sandbox, Scope, Status,
    Tool, Tools,
};

const SECRET: &str = "WASMBOX_ISOLATION_TEST_SECRET";

/// One test at a time: the tools find "the worker" among this process's descendants.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn engine() -> Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| Engine::new(EngineConfig::default()).expect("engine")).clone()
}

fn runtime(language: &str) -> Runtime {
    let loaded = match language {
        "python" => Runtime::python(&engine()),
        _ => Runtime::javascript(&engine()),
    };
    loaded.unwrap_or_else(|err| panic!("{err} (the tests need the guests: cargo xtask guests)"))
}

fn worker_program() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_wasmbox"))
}

/// `echo` answers; `secret` is registered but never in scope; `worker_env` reports the
/// environment, network interfaces and rlimits of the worker processes serving the
/// sandbox; `kill_worker` kills them and `stop_worker` stops them (SIGSTOP). With
/// `docker`, the workers are the containers' processes, not this process's descendants.
fn tools(docker: bool) -> Tools {
    let object = json!({"type": "object"});
    let workers =
        move || if docker { docker_workers() } else { worker_pids().into_iter().map(|pid| (pid, None)).collect() };
    let mut tools = Tools::new();
    tools.register(Tool::new("echo", "Echoes its arguments", object.clone(), |args| async move { Ok(args) })).unwrap();
    tools.register(Tool::new("secret", "Never in scope", object.clone(), |_| async { Ok(json!("leaked")) })).unwrap();
    tools
        .register(Tool::new("worker_env", "The worker's environment", object.clone(), move |_| async move {
            let (mut envs, mut networks, mut data, mut tasks) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for (pid, _) in workers() {
                let (env, network) = (environ(pid), interfaces(pid));
                let (data_limit, task_limit) = (soft_limit(pid, "Max data size"), soft_limit(pid, "Max processes"));
                // A worker of an earlier sandbox may exit while it is read: leave it out.
                if !Path::new(&format!("/proc/{pid}")).exists() {
                    continue;
                }
                envs.push(json!(env));
                networks.push(json!(network));
                data.push(json!(data_limit));
                tasks.push(json!(task_limit));
            }
            let workers = envs.len();
            Ok(json!({
                "workers": workers,
                "environments": envs,
                "networks": networks,
                "data_limits": data,
                "task_limits": tasks,
            }))
        }))
        .unwrap();
    let signal = move |signal: &'static str| {
        let workers = workers();
        for (pid, _) in &workers {
            Command::new("kill").args([signal, &pid.to_string()]).status().expect("kill runs");
        }
        SIGNALLED.lock().unwrap().clone_from(&workers);
    };
    tools
        .register(Tool::new("kill_worker", "Kills the worker", object.clone(), move |_| async move {
            signal("-KILL");
            // Wait to be cut off by the crash rather than answer.
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(json!("still here"))
        }))
        .unwrap();
    tools
        .register(Tool::new("stop_worker", "Stops the worker", object, move |_| async move {
            signal("-STOP");
            Ok(json!("stopped"))
        }))
        .unwrap();
    tools
}

/// The workers `kill_worker` or `stop_worker` last signalled: pid and container name.
static SIGNALLED: std::sync::Mutex<Vec<(u32, Option<String>)>> = std::sync::Mutex::new(Vec::new());

fn sandbox(language: &str, isolation: Isolation, max_idle_workers: usize) -> Result<Sandbox, Error> {
    let options = WorkerOptions { program: Some(worker_program()), max_idle_workers, ..WorkerOptions::default() };
    let docker = matches!(isolation, Isolation::Docker(_));
    Sandbox::new(runtime(language), tools(docker))
        .scope(Scope::only(["echo", "worker_env", "kill_worker", "stop_worker"]))
        .limits(Limits { timeout_ms: 5_000, ..Limits::default() })
        .isolation_with(isolation, options)
}

/// Processes descended from this one running `wasmbox worker` (under bwrap the worker
/// is a grandchild).
fn worker_pids() -> Vec<u32> {
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { continue };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let is_worker = args.len() > 1 && args[0].ends_with(b"wasmbox") && args[1] == b"worker";
        if is_worker && descends_from(pid, me) {
            found.push(pid);
        }
    }
    found
}

fn descends_from(mut pid: u32, ancestor: u32) -> bool {
    for _ in 0..16 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
        // The command may contain spaces and parentheses; fields resume after the last ')'.
        let Some(ppid) = stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().nth(1)) else { return false };
        let Ok(ppid) = ppid.parse::<u32>() else { return false };
        if ppid == ancestor {
            return true;
        }
        if ppid <= 1 {
            return false;
        }
        pid = ppid;
    }
    false
}

/// The docker CLI, where the library looks for it.
fn docker_cli() -> Option<PathBuf> {
    ["/usr/bin/docker", "/usr/local/bin/docker"].into_iter().map(PathBuf::from).find(|path| path.is_file())
}

fn docker(args: &[&str]) -> String {
    let docker = docker_cli().expect("a docker CLI");
    let output = Command::new(docker).args(args).output().expect("docker runs");
    assert!(output.status.success(), "docker {args:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The running worker containers (named `wasmbox-worker-…` by the pool): the host pid of
/// each one's worker (its pid 1) and the container's name.
fn docker_workers() -> Vec<(u32, Option<String>)> {
    let names = docker(&["ps", "--filter", "name=^wasmbox-worker-", "--format", "{{.Names}}"]);
    let mut workers = Vec::new();
    for name in names.lines().filter(|name| !name.is_empty()) {
        let Some(output) = docker_cli()
            .and_then(|cli| Command::new(cli).args(["inspect", "--format", "{{.State.Pid}}", name]).output().ok())
        else {
            continue;
        };
        // A container may be gone between the two commands (a worker of an earlier
        // test's sandbox, exiting): skip it.
        match String::from_utf8_lossy(&output.stdout).trim().parse::<u32>() {
            Ok(pid) if pid > 0 => workers.push((pid, Some(name.to_owned()))),
            _ => {}
        }
    }
    workers
}

/// The containers, running or not, whose names are among `names`.
fn containers_named(names: &[String]) -> Vec<String> {
    let all = docker(&["ps", "--all", "--filter", "name=^wasmbox-worker-", "--format", "{{.Names}}"]);
    all.lines().filter(|name| names.iter().any(|n| n == name)).map(str::to_owned).collect()
}

/// The network interfaces the process `pid` sees.
fn interfaces(pid: u32) -> Vec<String> {
    let dev = std::fs::read_to_string(format!("/proc/{pid}/net/dev")).unwrap_or_default();
    dev.lines().skip(2).filter_map(|line| line.split(':').next()).map(|name| name.trim().to_owned()).collect()
}

/// The soft limit `name` of `pid` as /proc shows it (`unlimited`, or a number).
fn soft_limit(pid: u32, name: &str) -> String {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap_or_default();
    let line = limits.lines().find(|line| line.starts_with(name)).unwrap_or_default();
    line[name.len().min(line.len())..].split_whitespace().next().unwrap_or("unreadable").to_owned()
}

fn environ(pid: u32) -> Vec<String> {
    let bytes = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    bytes.split(|b| *b == 0).filter(|v| !v.is_empty()).map(|v| String::from_utf8_lossy(v).into_owned()).collect()
}

async fn run(sandbox: &Sandbox, code: &str) -> Outcome {
    sandbox.run(code).await
}

fn assert_status(outcome: &Outcome, status: Status) {
    assert_eq!(outcome.status, status, "{outcome:#?}");
}

/// What a wrapper gives the worker beyond what the plain worker has.
struct Confinement {
    /// The worker's complete environment (`Exactly`), or the names of its variables
    /// (`Names`, when the values vary: a container's `HOSTNAME`). Nothing may come from
    /// this process's environment.
    env: WrapperEnv,
    /// The worker sees no network interface but loopback.
    no_network: bool,
    /// The worker runs in a user namespace of its own, so it caps its tasks.
    own_user_namespace: bool,
}

enum WrapperEnv {
    Exactly(&'static [&'static str]),
    Names(&'static [&'static str]),
}

/// The behaviour every worker-backed isolation must have, and what `confinement`
/// says this one adds. (bwrap always sets `PWD` to the directory it starts the worker
/// in; docker sets `PATH`, `HOSTNAME` and `HOME`.)
async fn check_isolated_runs(isolation: Isolation, confinement: Confinement) {
    for language in ["python", "js"] {
        let sandbox = sandbox(language, isolation.clone(), 1).expect("isolation is available");
        let (call, forbidden, env) = match language {
            "python" => ("tools.echo(n=41)['n'] + 1", "tools.secret()", "tools.worker_env()"),
            _ => (
                "return (await tools.echo({n: 41})).n + 1",
                "return await tools.secret({})",
                "return await tools.worker_env({})",
            ),
        };

        let outcome = run(&sandbox, call).await;
        assert_status(&outcome, Status::Ok);
        assert_eq!(outcome.value, Some(json!(42)));
        assert_eq!(outcome.tool_calls.len(), 1, "the parent keeps the trail");
        assert_eq!(outcome.tool_calls[0].status, CallStatus::Ok);

        // The parent's broker refuses what the scope does not allow, whatever the worker asks.
        let outcome = run(&sandbox, forbidden).await;
        assert_status(&outcome, Status::Error);
        assert_eq!(outcome.tool_calls[0].status, CallStatus::Denied);

        // The worker's environment is empty although this process holds a secret.
        let outcome = run(&sandbox, env).await;
        assert_status(&outcome, Status::Ok);
        let value = outcome.value.unwrap();
        assert!(value["workers"].as_u64() >= Some(1), "a worker serves the run: {value}");
        for environment in value["environments"].as_array().unwrap() {
            match confinement.env {
                WrapperEnv::Exactly(expected) => {
                    assert_eq!(environment, &json!(expected), "the worker inherits no environment: {value}");
                }
                WrapperEnv::Names(expected) => {
                    let mut names: Vec<&str> = environment
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_str().unwrap().split('=').next().unwrap())
                        .collect();
                    names.sort_unstable();
                    assert_eq!(names, expected, "the worker inherits no environment: {value}");
                }
            }
        }
        assert!(!value.to_string().contains("hunter2"), "the secret leaked: {value}");
        if confinement.no_network {
            for network in value["networks"].as_array().unwrap() {
                assert_eq!(network, &json!(["lo"]), "the worker sees a network: {value}");
            }
        }
        // The worker caps its own memory (RLIMIT_DATA) at the run's cap plus its
        // overhead, and in a user namespace of its own its tasks (RLIMIT_NPROC).
        let cap = Limits::default().max_memory_bytes;
        for data in value["data_limits"].as_array().unwrap() {
            let data: u64 = data.as_str().unwrap().parse().unwrap_or_else(|_| panic!("no data limit: {value}"));
            assert!(data > cap && data <= cap + (1 << 30), "RLIMIT_DATA {data} for a {cap}-byte cap: {value}");
        }
        if confinement.own_user_namespace {
            let cores = std::thread::available_parallelism().unwrap().get() as u64;
            let tasks = (cores + wasmbox::WORKER_EXTRA_TASKS).to_string();
            for limit in value["task_limits"].as_array().unwrap() {
                assert_eq!(limit, &json!(tasks), "RLIMIT_NPROC: {value}");
            }
        }
    }
}

#[tokio::test]
async fn worker_isolation_runs_both_languages_with_the_broker_in_the_parent() {
    let _serial = SERIAL.lock().await;
    std::env::set_var(SECRET, "hunter2");
    let plain = Confinement { env: WrapperEnv::Exactly(&[]), no_network: false, own_user_namespace: false };
    check_isolated_runs(Isolation::Worker, plain).await;
}

/// Runs when bubblewrap can create namespaces here, and says so loudly when it cannot;
/// `cargo xtask test` sets WASMBOX_REQUIRE_BWRAP when `wasmbox isolation` found it
/// available, so then a skip is a failure.
#[tokio::test]
async fn bubblewrap_isolation_runs_both_languages() {
    let _serial = SERIAL.lock().await;
    std::env::set_var(SECRET, "hunter2");
    match sandbox("python", Isolation::Bubblewrap, 1) {
        Err(Error::Isolation { reason, .. }) => {
            assert!(std::env::var_os("WASMBOX_REQUIRE_BWRAP").is_none(), "bwrap was required: {reason}");
            eprintln!("SKIPPED bubblewrap_isolation_runs_both_languages: bwrap cannot sandbox here: {reason}");
        }
        Err(other) => panic!("{other}"),
        Ok(_) => {
            let bwrap =
                Confinement { env: WrapperEnv::Exactly(&["PWD=/"]), no_network: true, own_user_namespace: true };
            check_isolated_runs(Isolation::Bubblewrap, bwrap).await;
        }
    }
}

#[tokio::test]
async fn a_worker_killed_mid_run_is_a_crash_and_the_next_run_works() {
    let _serial = SERIAL.lock().await;
    let sandbox = sandbox("python", Isolation::Worker, 1).unwrap();
    let outcome = run(&sandbox, "tools.kill_worker()").await;
    assert_status(&outcome, Status::Crashed);
    assert_eq!(outcome.error.as_ref().unwrap().kind, "worker_crashed");
    let outcome = run(&sandbox, "6 * 7").await;
    assert_status(&outcome, Status::Ok);
    assert_eq!(outcome.value, Some(json!(42)));
}

#[tokio::test]
async fn limits_hold_in_a_worker_and_it_is_reused_after_them() {
    let _serial = SERIAL.lock().await;
    let sandbox = sandbox("python", Isolation::Worker, 1).unwrap();
    let limits = Limits { timeout_ms: 300, ..Limits::default() };
    let limited = sandbox.clone().limits(limits);
    assert_status(&run(&limited, "while True: pass").await, Status::Timeout);
    let memory = Limits { max_memory_bytes: 64 << 20, ..Limits::default() };
    let outcome = run(&sandbox.clone().limits(memory), "x = bytearray(200 * 1024 * 1024)").await;
    assert_status(&outcome, Status::MemoryExhausted);
    let outcome = run(&sandbox, "print('hi')\n1").await;
    assert_status(&outcome, Status::Ok);
    assert_eq!(outcome.stdout.text, "hi\n");
}

#[tokio::test]
async fn a_cancelled_worker_run_ends_cancelled() {
    let _serial = SERIAL.lock().await;
    let sandbox = sandbox("python", Isolation::Worker, 1).unwrap();
    let cancel = CancelToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trigger.cancel();
    });
    let outcome = sandbox.run_cancellable("while True: pass", &Value::Null, &cancel).await;
    assert_status(&outcome, Status::Cancelled);
    assert_status(&run(&sandbox, "1").await, Status::Ok);
}

/// Calls a guest in a worker starts together overlap there too: the parent's broker runs
/// them at the same time (a barrier of four is met only so), in both languages.
#[tokio::test]
async fn started_calls_overlap_in_a_worker() {
    let _serial = SERIAL.lock().await;
    let barrier = Arc::new(tokio::sync::Barrier::new(4));
    let mut tools = Tools::new();
    tools
        .register(Tool::new("meet", "Answers when four calls are in", json!({"type": "object"}), move |args| {
            let barrier = Arc::clone(&barrier);
            async move {
                match tokio::time::timeout(Duration::from_secs(20), barrier.wait()).await {
                    Ok(_) => Ok(args["i"].clone()),
                    Err(_) => Err(wasmbox::ToolFailure::new("the other calls never came")),
                }
            }
        }))
        .unwrap();
    for (language, code) in [
        ("python", "import asyncio\nasync def main():\n    return await asyncio.gather(*[tools.meet(i=i) for i in range(4)])\nasyncio.run(main())"),
        ("js", "return await Promise.all([0, 1, 2, 3].map((i) => tools.meet({i})))"),
    ] {
        let options = WorkerOptions { program: Some(worker_program()), max_idle_workers: 0, ..WorkerOptions::default() };
        let sandbox = Sandbox::new(runtime(language), tools.clone())
            .scope(Scope::only(["meet"]))
            .limits(Limits { timeout_ms: 30_000, ..Limits::default() })
            .isolation_with(Isolation::Worker, options)
            .unwrap();
        let outcome = run(&sandbox, code).await;
        assert_status(&outcome, Status::Ok);
        assert_eq!(outcome.value, Some(json!([0, 1, 2, 3])), "{language}");
        assert_eq!(outcome.tool_calls.iter().map(|c| c.call_id).collect::<Vec<_>>(), [1, 2, 3, 4], "{language}");
    }
}

#[tokio::test]
async fn a_fresh_worker_per_run_works_too() {
    let _serial = SERIAL.lock().await;
    let sandbox = sandbox("js", Isolation::Worker, 0).unwrap();
    for n in 0..3 {
        let outcome = run(&sandbox, &format!("return {n} + 1")).await;
        assert_eq!(outcome.value, Some(json!(n + 1)), "{outcome:#?}");
    }
}

#[test]
fn unavailable_wrappers_fail_closed() {
    let _serial = SERIAL.blocking_lock();
    // Seatbelt exists only on macOS.
    if !cfg!(target_os = "macos") {
        let err = sandbox("python", Isolation::Seatbelt, 1).unwrap_err();
        assert!(matches!(&err, Error::Isolation { isolation: "seatbelt", .. }), "{err}");
    }
    // A worker binary that does not exist is refused up front.
    let options =
        WorkerOptions { program: Some("/nonexistent/wasmbox".into()), max_idle_workers: 1, ..WorkerOptions::default() };
    let err = Sandbox::new(runtime("python"), Tools::new()).isolation_with(Isolation::Worker, options).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/wasmbox"), "{err}");
    // A runtime made from bytes has no file for a worker to load.
    let wat = wat::parse_str("(component)").unwrap();
    if let Ok(from_bytes) = Runtime::from_bytes(&engine(), "empty", &wat) {
        let err = Sandbox::new(from_bytes, Tools::new()).isolation(Isolation::Worker).unwrap_err();
        assert!(matches!(err, Error::Isolation { .. }), "{err}");
    }
}

/// Docker isolation when an engine with the worker image is here, and a loud skip when
/// not; `cargo xtask test` sets WASMBOX_REQUIRE_DOCKER when `wasmbox isolation` found it
/// available (after starting an engine and loading the image where it can), so then a
/// skip is a failure.
fn docker_or_skip(test: &str) -> Option<Isolation> {
    let docker = Isolation::Docker(wasmbox::DockerOptions::default());
    match sandbox("python", docker.clone(), 1) {
        Ok(_) => Some(docker),
        Err(Error::Isolation { isolation: "docker", reason }) => {
            assert!(std::env::var_os("WASMBOX_REQUIRE_DOCKER").is_none(), "docker was required: {reason}");
            eprintln!("SKIPPED {test}: docker isolation is unavailable here: {reason}");
            None
        }
        Err(other) => panic!("{other}"),
    }
}

#[tokio::test]
async fn docker_isolation_runs_both_languages() {
    let _serial = SERIAL.lock().await;
    std::env::set_var(SECRET, "hunter2");
    let Some(docker) = docker_or_skip("docker_isolation_runs_both_languages") else { return };
    let env = WrapperEnv::Names(&["HOME", "HOSTNAME", "PATH"]);
    // Docker makes no user namespace unless the engine is rootless or remaps users.
    check_isolated_runs(docker, Confinement { env, no_network: true, own_user_namespace: false }).await;
}

/// A worker killed mid-run is a crash, and one that hangs mid-run is killed at the
/// deadline; either way its container is removed, not left behind, and the next run
/// gets a fresh one.
#[tokio::test]
async fn a_docker_worker_killed_or_hung_mid_run_leaves_no_container() {
    let _serial = SERIAL.lock().await;
    let Some(docker) = docker_or_skip("a_docker_worker_killed_or_hung_mid_run_leaves_no_container") else { return };
    let sandbox = sandbox("python", docker, 1).unwrap();

    let outcome = run(&sandbox, "tools.kill_worker()").await;
    assert_status(&outcome, Status::Crashed);
    assert_eq!(outcome.error.as_ref().unwrap().kind, "worker_crashed");
    let killed: Vec<String> = SIGNALLED.lock().unwrap().iter().filter_map(|(_, name)| name.clone()).collect();
    assert!(!killed.is_empty(), "no container was killed");
    assert_eq!(containers_named(&killed), Vec::<String>::new(), "the killed worker's container is left");

    // Stopped, the worker never answers: the parent kills the client at the deadline,
    // and only `docker rm -f` removes the container.
    let hung = sandbox.clone().limits(Limits { timeout_ms: 1_000, ..Limits::default() });
    let outcome = run(&hung, "tools.stop_worker()\n1").await;
    assert_status(&outcome, Status::Timeout);
    let stopped: Vec<String> = SIGNALLED.lock().unwrap().iter().filter_map(|(_, name)| name.clone()).collect();
    assert!(!stopped.is_empty() && stopped != killed, "{stopped:?} after {killed:?}");
    assert_eq!(containers_named(&stopped), Vec::<String>::new(), "the hung worker's container is left");

    let outcome = run(&sandbox, "6 * 7").await;
    assert_status(&outcome, Status::Ok);
    assert_eq!(outcome.value, Some(json!(42)));
}

/// An image the engine does not have makes docker isolation unavailable, in the
/// library, in `wasmbox isolation` and for `wasmbox run` (exit 2 with how to build or
/// load it), instead of a run that ends `internal` at launch.
#[test]
fn a_missing_docker_image_is_unavailable_with_how_to_get_one() {
    let _serial = SERIAL.blocking_lock();
    let missing = "wasmbox-test-no-such-image:0";
    let options = wasmbox::DockerOptions { image: missing.into(), ..wasmbox::DockerOptions::default() };
    let err = Isolation::Docker(options.clone()).check_available().unwrap_err();
    let Error::Isolation { isolation: "docker", reason } = &err else { panic!("{err}") };
    let engine_answers = reason.contains(missing);
    if !engine_answers {
        assert!(std::env::var_os("WASMBOX_REQUIRE_DOCKER").is_none(), "docker was required: {reason}");
        eprintln!("SKIPPED the missing-image checks: no docker engine answers here: {reason}");
        return;
    }
    assert!(reason.contains("cargo xtask docker-image"), "{reason}");
    let worker = WorkerOptions { program: Some(worker_program()), ..WorkerOptions::default() };
    let err =
        Sandbox::new(runtime("python"), tools(true)).isolation_with(Isolation::Docker(options), worker).unwrap_err();
    assert!(err.to_string().contains(missing), "{err}");

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.py"), "1\n").unwrap();
    let out = cli(&["run", "--isolation", "docker", "--docker-image", missing, "s.py"], dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr.contains(missing) && stderr.contains("cargo xtask docker-image"), "{stderr}");
}

fn cli(args: &[&str], dir: &Path) -> std::process::Output {
    Command::new(worker_program()).args(args).current_dir(dir).output().expect("wasmbox runs")
}

#[test]
fn the_cli_runs_in_a_worker_and_refuses_unknown_or_unavailable_isolation() {
    let _serial = SERIAL.blocking_lock();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.py"), "print('from the worker')\n21 * 2\n").unwrap();
    let out = cli(&["run", "--isolation", "worker", "s.py"], dir.path());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from the worker\n42\n", "{out:?}");
    assert!(out.status.success());

    let out = cli(&["run", "--isolation", "sideways", "s.py"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("inproc, worker, bwrap, docker, seatbelt"), "{out:?}");

    if !cfg!(target_os = "macos") {
        let out = cli(&["run", "--isolation", "seatbelt", "s.py"], dir.path());
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("seatbelt"), "{out:?}");
    }

    let out = cli(&["isolation"], dir.path());
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("inproc: available\nworker: available\n"), "{report}");
    if !cfg!(target_os = "macos") {
        assert!(report.contains("seatbelt: unavailable: "), "{report}");
    }
}

// ---- What a worker sends back, and when a warm worker is reused (issue 19, items 1–3, 9).

/// What the last `worker_pids` call saw, for runs that end before they can return it.
static LAST_SEEN: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// A sandbox in plain worker processes whose tool `worker_pids` lists the worker
/// processes alive under this test process (and `noop` does nothing).
fn pid_sandbox(language: &str, options: WorkerOptions) -> Sandbox {
    let mut tools = Tools::new();
    tools
        .register(Tool::new("worker_pids", "The live worker processes", json!({"type": "object"}), |_| async {
            let pids = worker_pids();
            LAST_SEEN.lock().unwrap().clone_from(&pids);
            Ok(json!(pids))
        }))
        .unwrap();
    tools
        .register(Tool::new("noop", "Does nothing", json!({"type": "object"}), |_| async { Ok(json!(null)) }))
        .unwrap();
    let options = WorkerOptions { program: Some(worker_program()), ..options };
    Sandbox::new(runtime(language), tools)
        .scope(Scope::All)
        .limits(Limits { timeout_ms: 5_000, ..Limits::default() })
        .isolation_with(Isolation::Worker, options)
        .unwrap()
}

async fn pids_seen(sandbox: &Sandbox, code: &str) -> Vec<u32> {
    let outcome = run(sandbox, code).await;
    let value = outcome.tool_calls.first().and_then(|_| outcome.value.clone()).unwrap_or_else(|| {
        panic!("the run did not report the worker pids: {outcome:#?}");
    });
    serde_json::from_value(value).unwrap()
}

/// Waits until none of `pids` is running (a retired worker exits after `shutdown`).
async fn until_gone(pids: &[u32]) {
    for _ in 0..100 {
        if pids.iter().all(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the retired workers {pids:?} are still running");
}

#[tokio::test]
async fn the_reply_cap_is_the_current_runs_from_its_first_frame() {
    let _serial = SERIAL.lock().await;
    let prints = "print('x' * 5000)\n1";
    // A fresh worker per run: the first frame after the handshake is the run's outcome.
    let fresh = sandbox("python", Isolation::Worker, 0).unwrap();
    let outcome = run(&fresh, prints).await;
    assert_status(&outcome, Status::Ok);
    assert_eq!(outcome.stdout.text.len(), 5001);
    // Warm workers after runs with smaller and with larger caps.
    let warm = sandbox("python", Isolation::Worker, 1).unwrap();
    let small =
        Limits { max_stdout_bytes: 64, max_stderr_bytes: 64, max_result_bytes: 64, ..warm.current_limits().clone() };
    let smaller = warm.clone().limits(small);
    assert_status(&run(&smaller, "1").await, Status::Ok);
    let outcome = run(&warm, "print('x' * 300_000)\n1").await;
    assert_status(&outcome, Status::Ok);
    assert_eq!(outcome.stdout.text.len(), 300_001);
    let outcome = run(&smaller, prints).await;
    assert_status(&outcome, Status::OutputLimit);
    assert_eq!(outcome.stdout.text.len(), 64);
}

#[tokio::test]
async fn guest_exits_and_huge_errors_come_back_from_a_worker_as_capped_errors() {
    let _serial = SERIAL.lock().await;
    let sandbox = sandbox("python", Isolation::Worker, 1).unwrap();
    let outcome = run(&sandbox, "import os\nos._exit(0)").await;
    assert_status(&outcome, Status::Error);
    let error = outcome.error.unwrap();
    assert_eq!(error.kind, "exit");
    assert!(error.message.contains("code 0") && !error.message.contains("backtrace"), "{error:?}");

    let outcome = run(&sandbox, "raise Exception('x' * 10_000_000)").await;
    assert_status(&outcome, Status::Error);
    let error = outcome.error.unwrap();
    assert_eq!(error.kind, "Exception");
    assert!(error.message.len() <= wasmbox::MAX_ERROR_MESSAGE_BYTES, "{}", error.message.len());
    assert!(error.message.ends_with("characters cut]"), "{}", &error.message[error.message.len() - 60..]);
    assert!(error.traceback.len() <= wasmbox::MAX_ERROR_TRACEBACK_BYTES, "{}", error.traceback.len());

    let js = sandbox_js_worker();
    let outcome = run(&js, "throw new Error('x'.repeat(5e7))").await;
    assert_status(&outcome, Status::Error);
    let error = outcome.error.unwrap();
    assert!(error.message.len() <= wasmbox::MAX_ERROR_MESSAGE_BYTES, "{}", error.message.len());
    assert!(error.traceback.len() <= wasmbox::MAX_ERROR_TRACEBACK_BYTES, "{}", error.traceback.len());
}

fn sandbox_js_worker() -> Sandbox {
    sandbox("js", Isolation::Worker, 1).unwrap()
}

#[tokio::test]
async fn a_warm_worker_serves_only_runs_of_its_shape_and_is_retired_after_a_breach() {
    let _serial = SERIAL.lock().await;
    let ask = "tools.worker_pids()";
    let mut all_seen = Vec::new();
    {
        let options = WorkerOptions { max_idle_workers: 1, ..WorkerOptions::default() };
        let sandbox = pid_sandbox("python", options);
        let first = pids_seen(&sandbox, ask).await;
        assert_eq!(first.len(), 1, "one worker serves the run: {first:?}");
        assert_eq!(pids_seen(&sandbox, ask).await, first, "the same shape reuses the warm worker");

        // Other limits: not the warm worker (it stays idle beside the new one).
        let other = sandbox.clone().limits(Limits { max_memory_bytes: 96 << 20, ..sandbox.current_limits().clone() });
        let seen = pids_seen(&other, ask).await;
        assert_eq!(seen.len(), 2, "a new worker beside the idle one: {seen:?}");
        let other_worker: Vec<u32> = seen.into_iter().filter(|pid| !first.contains(pid)).collect();
        until_gone(&first).await; // the idle set holds one: the longest idle worker is retired

        // Another scope (fewer tools): not the warm worker either.
        let narrower = other.clone().scope(Scope::only(["worker_pids"]));
        let seen = pids_seen(&narrower, ask).await;
        assert!(!seen.is_empty() && seen.iter().any(|pid| !other_worker.contains(pid)), "{seen:?} vs {other_worker:?}");
        all_seen.extend(seen.into_iter().chain(other_worker));
    }
    // The sandboxes are gone, and their idle workers with them.
    until_gone(&all_seen).await;

    // A breach retires the worker that served it.
    let breached = pid_sandbox("python", WorkerOptions { max_idle_workers: 1, ..WorkerOptions::default() })
        .limits(Limits { timeout_ms: 500, ..Limits::default() });
    let outcome = run(&breached, "tools.worker_pids()\nwhile True: pass").await;
    assert_status(&outcome, Status::Timeout);
    let served = LAST_SEEN.lock().unwrap().clone();
    assert_eq!(served.len(), 1, "{served:?}");
    until_gone(&served).await;
    let next = pids_seen(&breached, ask).await;
    assert!(next.iter().all(|pid| !served.contains(pid)), "{next:?} vs {served:?}");
}

#[tokio::test]
async fn a_worker_is_retired_after_its_last_allowed_run() {
    let _serial = SERIAL.lock().await;
    let options = WorkerOptions { max_idle_workers: 1, max_runs_per_worker: 2, ..WorkerOptions::default() };
    let sandbox = pid_sandbox("js", options);
    let ask = "return await tools.worker_pids({})";
    let first = pids_seen(&sandbox, ask).await;
    assert_eq!(pids_seen(&sandbox, ask).await, first, "the second run reuses the worker");
    until_gone(&first).await;
    let third = pids_seen(&sandbox, ask).await;
    assert!(third.iter().all(|pid| !first.contains(pid)), "{third:?} vs {first:?}");
    let options = WorkerOptions { max_runs_per_worker: 0, ..WorkerOptions::default() };
    let err = Sandbox::new(runtime("js"), Tools::new()).isolation_with(Isolation::Worker, options).unwrap_err();
    assert!(err.to_string().contains("max_runs_per_worker"), "{err}");
}

/// Input files travel to the worker in the run request and output files come back in the
/// outcome; the parent keeps only what fits the run's file quota.
#[tokio::test]
async fn files_reach_a_worker_and_its_output_files_come_back() {
    let _serial = SERIAL.lock().await;
    let sandbox = sandbox("python", Isolation::Worker, 1).unwrap();
    let mut files = wasmbox::InputFiles::new();
    files.insert("in.bin", vec![0u8, 159, 146, 150]).unwrap();
    let code = "data = open('/input/in.bin', 'rb').read()\n\
                open('/output/out.bin', 'wb').write(data[::-1])\n\
                open('/output/note.txt', 'w').write('hé')\n\
                len(data)";
    let outcome = sandbox.run_with_files(code, &Value::Null, &files, &CancelToken::new()).await;
    assert_status(&outcome, Status::Ok);
    assert_eq!(outcome.value, Some(json!(4)));
    let names: Vec<(&str, &[u8])> = outcome.files.iter().map(|f| (f.name.as_str(), f.bytes.as_slice())).collect();
    assert_eq!(names, [("note.txt", "hé".as_bytes()), ("out.bin", &[150u8, 146, 159, 0][..])]);
}
