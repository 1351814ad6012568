//! Custom guests: the Rust guests of guests/rust (an example language and the test
//! guests the limits need), the worked example of docs/guests.md in Rust, Python and
//! JavaScript, and the import check that refuses a component wanting more than the world.
//!
//! The guests are built by `cargo xtask guests`; a test that misses one says so.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use serde_json::{json, Value};
use wasmbox::{BuiltinGuest, Error, ImportPolicy, Limits, Outcome, Runtime, Sandbox, Scope, Status};

use crate::support;

include!(concat!(env!("OUT_DIR"), "/rust_guests.rs"));

// Every folder of guests/rust has a test in `guest` named after it: a new guest
// without one fails to compile (see `mod guest`).
macro_rules! has_a_test {
    ($name:ident) => {
        const _: fn() = $name;
    };
}

/// A test guest's component: `target/guests/<name>.wasm` of this checkout, where
/// `cargo xtask guests` builds it.
fn guest_path(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/guests").join(format!("{name}.wasm"));
    assert!(path.is_file(), "{} is missing: run `cargo xtask guests`", path.display());
    path
}

/// A guest from target/guests, loaded once per test process with `policy`.
fn load(name: &str, policy: ImportPolicy) -> Runtime {
    load_on(&support::engine(), name, policy)
}

fn load_on(engine: &wasmbox::Engine, name: &str, policy: ImportPolicy) -> Runtime {
    static LOADED: OnceLock<Mutex<HashMap<String, Runtime>>> = OnceLock::new();
    let mut loaded = LOADED.get_or_init(Mutex::default).lock().unwrap_or_else(|e| e.into_inner());
    let key = format!("{name} {}", engine.meters_fuel());
    let runtime = loaded.entry(key).or_insert_with(|| {
        Runtime::from_file_with(engine, &guest_path(name), policy).unwrap_or_else(|err| panic!("{err}"))
    });
    runtime.clone()
}

/// A Rust guest: it must pass the strict import check, as any custom guest.
fn rust_guest(name: &str) -> Sandbox {
    Sandbox::new(load(name, ImportPolicy::Strict), support::tools()).scope(Scope::only(["add", "echo", "weather"]))
}

async fn run(sandbox: &Sandbox, code: &str, input: Value) -> Outcome {
    sandbox.run_with_input(code, &input).await
}

fn error_kind(outcome: &Outcome) -> &str {
    outcome.error.as_ref().map_or("", |e| e.kind.as_str())
}

/// One test per Rust guest (see `has_a_test`); more tests of the same guest follow below.
mod guest {
    use super::*;

    foreach_rust_guest!(has_a_test);

    /// The expression language evaluates, calls tools, and reports errors by kind.
    #[tokio::test]
    async fn calc() {
        let calc = rust_guest("calc");
        let input = json!({"n": 4, "items": [3, 1, 2]});
        for (code, expected) in [
            ("1 + 2 * 3", json!(7)),
            ("7 / 2", json!(3.5)),
            ("8 / 2", json!(4)),
            ("-7 % 3", json!(2)),
            ("let x = input.n; x * x", json!(16)),
            ("input.items[-1]", json!(2)),
            ("input.missing", Value::Null),
            ("[for i in input.items if i > 1: i * 10]", json!([30, 20])),
            (r#"{a: 1, "b c": "x" + "y"}"#, json!({"a": 1, "b c": "xy"})),
            ("if len(input.items) == 3 then sum(input.items) else null", json!(6)),
            ("[min(input.items), max(input.items), keys(input)]", json!([1, 3, ["items", "n"]])),
            ("not false and (null or 2)", json!(2)),
            ("1 == 1.0 # a comment", json!(true)),
            ("tools.add(a: 1, b: 2) * 10", json!(30)),
            ("[for t in list_tools(): t.name]", json!(["add", "echo", "weather"])),
            (
                "let temps = [for c in [\"Paris\", \"Oslo\"]: tools.weather(city: c).temp_c];\n\
                 {\"mean\": sum(temps) / len(temps), \"warm\": [for t in temps if t > 10: t]}",
                json!({"mean": 7.75, "warm": [18.5]}),
            ),
        ] {
            let outcome = run(&calc, code, input.clone()).await;
            assert_eq!(support::value(&outcome), expected, "{code}");
        }

        for (code, kind) in [
            ("1 +", "SyntaxError"),
            ("\"open", "SyntaxError"),
            ("let = 1", "SyntaxError"),
            ("nope", "NameError"),
            ("1 / 0", "ZeroDivisionError"),
            ("input.items[5]", "IndexError"),
            ("1 + \"a\"", "TypeError"),
            ("9223372036854775807 * 1e308 * 10", "OverflowError"),
            ("tools.secret()", "ToolDenied"),
            ("tools.weather(city: \"Rome\")", "ToolFailed"),
        ] {
            let outcome = run(&calc, code, input.clone()).await;
            assert_eq!((outcome.status, error_kind(&outcome)), (Status::Error, kind), "{code}: {:?}", outcome.error);
        }
        let outcome = run(&calc, "let a = 1;\na.b", Value::Null).await;
        assert_eq!(outcome.error.unwrap().traceback, "  line 2, column 2\n    a.b\n     ^\n");
    }

    /// The docs' worked example, in Rust.
    #[tokio::test]
    async fn batch() {
        check_batch(&rust_guest("batch")).await;
    }

    /// A guest's error text is capped by the host whatever the guest sends, and one too
    /// large to take in through a single hostcall is the guest's broken contract, an
    /// `error` — never `internal`.
    #[tokio::test]
    async fn huge_error() {
        let guest = rust_guest("huge_error").limits(Limits { max_memory_bytes: 1 << 30, ..Limits::default() });
        let outcome = run(&guest, "", json!({"bytes": 1 << 20})).await;
        assert_eq!((outcome.status, error_kind(&outcome)), (Status::Error, "HugeError"), "{:?}", outcome.error);
        let error = outcome.error.unwrap();
        assert!(error.message.len() <= wasmbox::MAX_ERROR_MESSAGE_BYTES && error.message.ends_with("bytes cut]"));
        assert!(error.traceback.len() <= wasmbox::MAX_ERROR_TRACEBACK_BYTES && error.traceback.starts_with("[… "));
        // Message and traceback of 96 MiB each: more than the Store's 128 MiB a hostcall.
        let outcome = run(&guest, "", json!({"bytes": 96 << 20})).await;
        assert_eq!((outcome.status, error_kind(&outcome)), (Status::Error, "ContractError"), "{:?}", outcome.error);
        let message = outcome.error.unwrap().message;
        assert!(message.contains("component contract") && !message.contains("backtrace"), "{message}");
    }

    /// Unbounded recursion is stopped by wasmtime's stack limit: a trap, so `error`.
    #[tokio::test]
    async fn stack_overflow() {
        let guest = rust_guest("stack_overflow");
        let outcome = run(&guest, "", Value::Null).await;
        assert_eq!((outcome.status, error_kind(&outcome)), (Status::Error, "Trap"), "{:?}", outcome.error);
        assert!(outcome.error.unwrap().message.contains("call stack exhausted"));
        // The engine is healthy and the next run (a fresh instance) is fine.
        assert_eq!(support::value(&run(&guest, "", json!({"depth": 100})).await), json!(100));
    }

    /// Growing past `max_memory_bytes` is `memory_exhausted`, even when the guest
    /// notices the failed allocation and returns normally.
    #[tokio::test]
    async fn memory_growth() {
        let guest = rust_guest("memory_growth").limits(Limits { max_memory_bytes: 32 << 20, ..Limits::default() });
        for input in [json!({"catch": true}), json!({"catch": false})] {
            let outcome = run(&guest, "", input.clone()).await;
            assert_eq!(outcome.status, Status::MemoryExhausted, "{input}: {:?}", outcome.error);
            assert!(outcome.stats.peak_memory_bytes <= 32 << 20, "{}", outcome.stats.peak_memory_bytes);
        }
    }

    /// A loop that never ends is stopped by the deadline.
    #[tokio::test]
    async fn infinite_loop() {
        let guest = rust_guest("infinite_loop").limits(Limits { timeout_ms: 200, ..Limits::default() });
        let outcome = run(&guest, "", Value::Null).await;
        assert_eq!(outcome.status, Status::Timeout, "{:?}", outcome.error);
    }

    /// Calling tools until refused is `tool_limit`, though the guest swallowed the refusal.
    #[tokio::test]
    async fn tool_loop() {
        let guest = rust_guest("tool_loop").limits(Limits { max_tool_calls: 5, ..Limits::default() });
        let outcome = run(&guest, "add", json!({"a": 1, "b": 2})).await;
        assert_eq!(outcome.status, Status::ToolLimit, "{:?}", outcome.error);
        assert_eq!(outcome.value, Some(json!({"calls": 5, "stopped_by": "ToolBudgetExhausted"})));
    }

    /// A pool slot's next run starts from pristine memory: statics from the image,
    /// zero pages and freshly grown heap show no trace of the run before, whether that
    /// run dirtied less than the pool keeps resident (reset in place, hundreds of
    /// disjoint regions) or more (the rest decommitted), and with nothing kept resident.
    #[tokio::test]
    async fn scribble() {
        for keep_resident_bytes in [wasmbox::DEFAULT_KEEP_RESIDENT_BYTES, 0] {
            // An engine of its own, so the pool's residency is this test's alone.
            let config = wasmbox::EngineConfig { max_concurrent_runs: 1, keep_resident_bytes, ..Default::default() };
            let engine = wasmbox::Engine::new(config).expect("engine");
            let runtime = Runtime::from_file_with(&engine, &guest_path("scribble"), ImportPolicy::Strict)
                .unwrap_or_else(|err| panic!("{err} (run `cargo xtask guests`)"));
            let guest = Sandbox::new(runtime, support::tools());
            // Pages of heap: ~4 MiB (within the 16 MiB kept resident) or ~40 MiB (beyond).
            for heap_pages in [1024, 1024, 10_000, 1024, 10_000, 10_000, 1024] {
                let outcome = run(&guest, "", json!({ "heap_pages": heap_pages })).await;
                assert_eq!(outcome.status, Status::Ok, "{:?}", outcome.error);
                let value = outcome.value.expect("a value");
                for trace in ["zeroed_dirty", "patterned_dirty", "heap_dirty"] {
                    assert_eq!(value[trace], 0, "{trace} after {heap_pages} heap pages, keeping {keep_resident_bytes}");
                }
                assert!(value["pages_written"].as_u64().unwrap() > 1000, "{value}");
            }
            // Where the kernel can say which pages a run dirtied, the pool resets those
            // in place and keeps them: then this test covered that path, not only decommit.
            let resident = engine.metrics().pool_resident_bytes;
            if keep_resident_bytes == 0 {
                assert_eq!(resident, 0);
            } else if wasmtime::PoolingAllocationConfig::is_pagemap_scan_available() {
                assert!(resident > 0, "{:?}", engine.metrics());
            } else {
                eprintln!("no PAGEMAP_SCAN here: only the decommit reset was covered");
            }
        }
    }

    /// A panic traps the instance: `error` of kind `Trap`, the panic message in stderr.
    #[tokio::test]
    async fn trap() {
        let outcome = run(&rust_guest("trap"), "boom", Value::Null).await;
        assert_eq!((outcome.status, error_kind(&outcome)), (Status::Error, "Trap"), "{:?}", outcome.error);
        assert!(outcome.stderr.text.contains("the trap guest panics on purpose: boom"), "{:?}", outcome.stderr);
    }
}

/// A pool slot that a heavy run dirtied does not keep the heavy run's pages for the
/// light runs after it, each of whose resets would copy them all back: it lets go of
/// them at once when the heavy run follows light ones, and within 64 resets when the
/// heavy run came first (vendor/README.md, "Letting go of a heavy run's pages").
#[tokio::test]
async fn a_heavy_run_leaves_no_large_resident_set_to_the_light_runs_after_it() {
    if !wasmtime::PoolingAllocationConfig::is_pagemap_scan_available() {
        eprintln!("no PAGEMAP_SCAN here: slots are reset by decommitting, nothing stays resident");
        return;
    }
    // Both runs grow the heap by 10,000 pages (40 MiB), so both resets scan it; the
    // light one writes only the guest's statics (~2.5 MiB), the heavy one also every
    // other page of the heap (~20 MiB, of which the slot keeps 16 MiB).
    const LIGHT: bool = false;
    const HEAVY: bool = true;

    let fresh = fresh_scribble_pool();
    let light = fresh.kept_after(LIGHT).await;
    assert!(light > 0, "the light run's pages are kept resident");
    let bound = 2 * light + (1 << 20);
    fresh.kept_after(LIGHT).await;
    fresh.kept_after(HEAVY).await;
    let after = fresh.kept_after(LIGHT).await;
    assert!(after <= bound, "{after} bytes kept after heavy then light, {light} after light alone");

    let heavy_first = fresh_scribble_pool();
    let heavy = heavy_first.kept_after(HEAVY).await;
    assert!(heavy > bound, "{heavy} bytes kept after the heavy run");
    let mut after = heavy;
    for _ in 0..64 {
        after = heavy_first.kept_after(LIGHT).await;
    }
    assert!(after <= bound, "{after} bytes kept after a heavy run and 64 light ones, {light} after light alone");
}

/// The scribble guest on an engine of its own that runs one run at a time,
/// instantiated and dropped inline, so each run reuses the slot the last one left.
fn fresh_scribble_pool() -> ScribblePool {
    let config = wasmbox::EngineConfig { max_concurrent_runs: 1, prepared_instances: 0, ..Default::default() };
    let engine = wasmbox::Engine::new(config).expect("engine");
    let runtime = Runtime::from_file_with(&engine, &guest_path("scribble"), ImportPolicy::Strict)
        .unwrap_or_else(|err| panic!("{err} (run `cargo xtask guests`)"));
    ScribblePool { guest: Sandbox::new(runtime, support::tools()), engine }
}

struct ScribblePool {
    guest: Sandbox,
    engine: wasmbox::Engine,
}

impl ScribblePool {
    /// Runs the guest, writing its heap or not; the bytes the pool keeps resident
    /// afterwards.
    async fn kept_after(&self, write_heap: bool) -> u64 {
        let outcome = run(&self.guest, "", json!({ "heap_pages": 10_000, "write_heap": write_heap })).await;
        assert_eq!(outcome.status, Status::Ok, "{:?}", outcome.error);
        self.engine.metrics().pool_resident_bytes
    }
}

#[tokio::test]
async fn an_infinite_loop_exhausts_a_fuel_budget() {
    let runtime = load_on(&support::fuel_engine(), "infinite_loop", ImportPolicy::Strict);
    let guest = Sandbox::new(runtime, support::tools()).limits(Limits { fuel: Some(10_000_000), ..Limits::default() });
    let outcome = run(&guest, "", Value::Null).await;
    assert_eq!(outcome.status, Status::FuelExhausted, "{:?}", outcome.error);
}

/// The worked example in Python and JavaScript behaves exactly as the Rust one. Their
/// language runtimes link the WASI filesystem and sockets, hence the policy.
#[tokio::test]
async fn the_batch_example_in_python_and_javascript() {
    for name in ["python_batch", "js_batch"] {
        let runtime = load(name, ImportPolicy::AllowInertWasi);
        check_batch(&Sandbox::new(runtime, support::tools()).scope(Scope::only(["add", "echo", "weather"]))).await;
    }
}

/// What docs/guests.md promises of `batch`, in any language.
async fn check_batch(batch: &Sandbox) {
    let empty = batch.run("").await;
    let code = "add {\"a\": 1, \"b\": 2}\n\n# a comment\necho {\"x\": [1, null]}\n  weather   {\"city\": \"Paris\"}";
    let outcome = batch.run(code).await;
    assert_eq!(support::value(&empty), json!([]));
    assert_eq!(
        support::value(&outcome),
        json!([3, {"x": [1, null]}, {"city": "Paris", "temp_c": 18.5, "sky": "cloudy"}]),
    );
    assert_eq!(outcome.tool_calls.len(), 3);

    let outcome = batch.run("add {\"a\": 1, \"b\": 2}\nadd {nope").await;
    assert_eq!((outcome.status, error_kind(&outcome)), (Status::Error, "SyntaxError"));
    assert!(outcome.error.unwrap().message.starts_with("line 2: the arguments are not JSON"));

    let outcome = batch.run("secret").await;
    assert_eq!((outcome.status, error_kind(&outcome)), (Status::Error, "ToolDenied"), "{:?}", outcome.error);
    let outcome = batch.run("weather {\"city\": \"Rome\"}").await;
    assert_eq!((outcome.status, error_kind(&outcome)), (Status::Error, "ToolFailed"));
    assert!(outcome.error.unwrap().message.contains("unknown city"));
}

/// docs/guests.md shows files of this repository: every block after a
/// `<!-- file: path -->` marker must still be part of that file, so the page shows what
/// is built and tested.
#[test]
fn the_guides_code_blocks_are_the_built_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = std::fs::read_to_string(root.join("docs/guests.md")).expect("docs/guests.md");
    let mut checked = Vec::new();
    for marked in doc.split("<!-- file: ").skip(1) {
        let (path, rest) = marked.split_once(" -->\n```").expect("a marker line, then a code block");
        let body = &rest[rest.find('\n').expect("a fence line") + 1..];
        let block = &body[..body.find("\n```").expect("a closed code block") + 1];
        let file = std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(file.contains(block), "docs/guests.md shows a block of {path} that is not in it:\n{block}");
        checked.push(path);
    }
    assert_eq!(checked.len(), 4, "{checked:?}");
}

// ---- the import check ------------------------------------------------------------

/// A component importing `imports` (as empty instances) and exporting nothing: enough
/// for the import check, which runs before the runner export is looked for.
fn component(imports: &[&str]) -> Vec<u8> {
    let imports: String = imports.iter().map(|name| format!("(import \"{name}\" (instance))\n")).collect();
    wat::parse_str(format!("(component {imports})")).expect("valid WAT")
}

fn load_bytes(bytes: &[u8], policy: ImportPolicy) -> Result<Runtime, Error> {
    Runtime::from_bytes_with(&support::engine(), "wat", bytes, policy)
}

/// The import a load was refused for, or the error if it was refused for something else.
fn refused_import(result: Result<Runtime, Error>) -> String {
    match result {
        Err(Error::UnsupportedImport { import, guest, .. }) => {
            assert_eq!(guest, "wat");
            import
        }
        other => panic!("expected UnsupportedImport, got {other:?}"),
    }
}

#[test]
fn a_component_that_imports_filesystem_preopens_is_refused() {
    let bytes = component(&["wasmbox:sandbox/tools@0.1.0", "wasi:io/streams@0.2.0", "wasi:filesystem/preopens@0.2.0"]);
    let err = load_bytes(&bytes, ImportPolicy::Strict).unwrap_err();
    let message = err.to_string();
    assert!(message.contains("`wasi:filesystem/preopens@0.2.0`") && message.contains("no filesystem"), "{message}");
    assert_eq!(refused_import(Err(err)), "wasi:filesystem/preopens@0.2.0");
    assert_eq!(
        refused_import(load_bytes(&component(&["wasi:sockets/tcp@0.2.0"]), ImportPolicy::Strict)),
        "wasi:sockets/tcp@0.2.0"
    );

    // The inert policy lets the imports through; this component then fails for what it
    // lacks, the runner export.
    let err = load_bytes(&bytes, ImportPolicy::AllowInertWasi).unwrap_err();
    assert!(matches!(&err, Error::InvalidComponent(m) if m.contains("wasmbox:sandbox/runner")), "{err}");
    let err = load_bytes(&component(&["wasmbox:sandbox/tools@0.1.0"]), ImportPolicy::Strict).unwrap_err();
    assert!(matches!(&err, Error::InvalidComponent(_)), "the world's own import passes: {err}");
}

#[test]
fn a_component_for_another_package_version_is_refused() {
    for import in ["wasmbox:sandbox/tools@0.2.0", "wasmbox:sandbox/tools@1.0.0", "wasmbox:sandbox/tools"] {
        let result = load_bytes(&component(&[import]), ImportPolicy::AllowInertWasi);
        assert_eq!(refused_import(result), import);
    }
    let err = load_bytes(&component(&["wasmbox:sandbox/tools@0.2.0"]), ImportPolicy::Strict).unwrap_err();
    assert!(err.to_string().contains("serves 0.1.x"), "{err}");
}

#[test]
fn interfaces_the_host_does_not_provide_are_refused_under_any_policy() {
    for import in ["wasi:http/outgoing-handler@0.2.0", "acme:vault/secrets@1.0.0", "wasi:io/streams@0.3.0"] {
        assert_eq!(refused_import(load_bytes(&component(&[import]), ImportPolicy::AllowInertWasi)), import);
    }
}

/// The built-in Python guest's libc links the WASI filesystem, so it loads only with
/// the inert policy — which is why `Runtime::python` uses it.
#[test]
fn the_python_guest_needs_the_inert_wasi_policy() {
    let engine = support::engine();
    let path = BuiltinGuest::Python.file(&engine).unwrap_or_else(|err| panic!("{err}"));
    let err = Runtime::from_file(&engine, &path).unwrap_err();
    assert!(matches!(&err, Error::UnsupportedImport { import, .. } if import.starts_with("wasi:")), "{err}");
}
