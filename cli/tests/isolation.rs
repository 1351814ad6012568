//! Runs in worker processes, end to end: `Isolation::Worker` and `Isolation::Bubblewrap`
//! with this crate's `wasmbox` binary as the worker, the faults a worker can have, and
//! wrappers that must fail closed. Needs the guests (`cargo xtask guests`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
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
/// environment of the worker process serving the run; `kill_worker` kills it.
fn tools() -> Tools {
    let object = json!({"type": "object"});
    let mut tools = Tools::new();
    tools.register(Tool::new("echo", "Echoes its arguments", object.clone(), |args| async move { Ok(args) })).unwrap();
    tools.register(Tool::new("secret", "Never in scope", object.clone(), |_| async { Ok(json!("leaked")) })).unwrap();
    tools
        .register(Tool::new("worker_env", "The worker's environment", object.clone(), |_| async {
            let pids = worker_pids();
            let envs: Vec<Value> = pids.iter().map(|pid| json!(environ(*pid))).collect();
            Ok(json!({"workers": pids.len(), "environments": envs}))
        }))
        .unwrap();
    tools
        .register(Tool::new("kill_worker", "Kills the worker", object, |_| async {
            for pid in worker_pids() {
                Command::new("kill").args(["-KILL", &pid.to_string()]).status().expect("kill runs");
            }
            // Wait to be cut off by the crash rather than answer.
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(json!("still here"))
        }))
        .unwrap();
    tools
}

fn sandbox(language: &str, isolation: Isolation, max_idle_workers: usize) -> Result<Sandbox, Error> {
    let options = WorkerOptions { program: Some(worker_program()), max_idle_workers };
    Sandbox::new(runtime(language), tools())
        .scope(Scope::only(["echo", "worker_env", "kill_worker"]))
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

/// The behaviour every worker-backed isolation must have. `wrapper_env` is exactly what
/// the wrapper itself sets in the worker (bwrap always sets `PWD` to the directory it
/// starts the worker in; a container gets its image's variables, not checked here);
/// nothing may come from this process's environment.
async fn check_isolated_runs(isolation: Isolation, wrapper_env: Option<&[&str]>) {
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
        if let Some(expected) = wrapper_env {
            for environment in value["environments"].as_array().unwrap() {
                assert_eq!(environment, &json!(expected), "the worker inherits no environment: {value}");
            }
        }
        assert!(!value.to_string().contains("hunter2"), "the secret leaked: {value}");
    }
}

#[tokio::test]
async fn worker_isolation_runs_both_languages_with_the_broker_in_the_parent() {
    let _serial = SERIAL.lock().await;
    std::env::set_var(SECRET, "hunter2");
    check_isolated_runs(Isolation::Worker, Some(&[])).await;
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
        Ok(_) => check_isolated_runs(Isolation::Bubblewrap, Some(&["PWD=/"])).await,
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
    let options = WorkerOptions { program: Some("/nonexistent/wasmbox".into()), max_idle_workers: 1 };
    let err = Sandbox::new(runtime("python"), Tools::new()).isolation_with(Isolation::Worker, options).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/wasmbox"), "{err}");
    // A runtime made from bytes has no file for a worker to load.
    let wat = wat::parse_str("(component)").unwrap();
    if let Ok(from_bytes) = Runtime::from_bytes(&engine(), "empty", &wat) {
        let err = Sandbox::new(from_bytes, Tools::new()).isolation(Isolation::Worker).unwrap_err();
        assert!(matches!(err, Error::Isolation { .. }), "{err}");
    }
}

/// Docker needs an engine, which most CI machines lack: set WASMBOX_TEST_DOCKER=1 on
/// one that has it. Without an engine, asking for docker must fail closed.
#[tokio::test]
async fn docker_isolation() {
    let _serial = SERIAL.lock().await;
    let docker = Isolation::Docker(wasmbox::DockerOptions::default());
    let wanted = std::env::var_os("WASMBOX_TEST_DOCKER").is_some();
    match sandbox("python", docker.clone(), 1) {
        Ok(_) if wanted => check_isolated_runs(docker, None).await,
        Ok(_) => eprintln!("SKIPPED docker_isolation: an engine is present; set WASMBOX_TEST_DOCKER=1 to run it"),
        Err(err) => {
            assert!(!wanted, "WASMBOX_TEST_DOCKER is set but docker is unavailable: {err}");
            assert!(matches!(&err, Error::Isolation { isolation: "docker", .. }), "{err}");
            eprintln!("SKIPPED docker_isolation (fails closed as it should): {err}");
        }
    }
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
