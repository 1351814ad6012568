//! Host memory per idle instance: RSS and PSS of this process (from
//! `/proc/self/smaps_rollup`) with 1, 50 and 500 runs parked at once inside a tool call,
//! for Python and JS, then 1,000 Python runs parked at once on an engine admitting
//! 1,000.
//!
//! `cargo bench -p wasmbox-benches --bench memory [-- [python|js] [--counts 1,50,500]
//! [--thousand N]]`. `WASMBOX_BENCH_POOLING=0` uses the on-demand instance allocator.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::{watch, Notify};
use wasmbox::{Engine, EngineConfig, Limits, Runtime, Sandbox, Scope, Status, Tool, ToolFailure, Tools};

/// RSS, PSS and their anonymous/private parts, in KiB.
#[derive(Clone, Copy, Debug, Default)]
struct Memory {
    rss: u64,
    pss: u64,
    private: u64,
}

fn memory() -> Memory {
    let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").expect("/proc/self/smaps_rollup");
    let field = |name: &str| {
        rollup
            .lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok()))
            .unwrap_or(0)
    };
    Memory { rss: field("Rss:"), pss: field("Pss:"), private: field("Private_Clean:") + field("Private_Dirty:") }
}

fn mib(kib: i64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

/// A sandbox whose `park` tool counts the runs waiting in it and waits for `release`.
struct Parking {
    sandbox: Sandbox,
    parked: Arc<AtomicUsize>,
    arrived: Arc<Notify>,
    release: watch::Sender<u64>,
}

fn parking(runtime: Runtime) -> Parking {
    let parked = Arc::new(AtomicUsize::new(0));
    let arrived = Arc::new(Notify::new());
    let (release, released) = watch::channel(0u64);
    let mut tools = Tools::new();
    let (count, notify) = (Arc::clone(&parked), Arc::clone(&arrived));
    tools
        .register(Tool::new("park", "Waits until released", json!({"type": "object"}), move |_| {
            let (count, notify, mut released) = (Arc::clone(&count), Arc::clone(&notify), released.clone());
            async move {
                let generation = *released.borrow_and_update();
                count.fetch_add(1, Ordering::SeqCst);
                notify.notify_one();
                released.wait_for(|g| *g > generation).await.map_err(|_| ToolFailure::new("gone"))?;
                Ok(json!(1))
            }
        }))
        .expect("valid tool");
    // Parked runs wait for the last of up to 1,000 to start (seconds on 2 cores).
    let limits = Limits { timeout_ms: 300_000, tool_timeout_ms: 300_000, ..Limits::default() };
    Parking { sandbox: Sandbox::new(runtime, tools).scope(Scope::All).limits(limits), parked, arrived, release }
}

/// Starts `n` runs of `code`, waits until all are parked, measures, releases them.
async fn parked(p: &Parking, code: &'static str, n: usize) -> (Memory, Duration, usize) {
    p.parked.store(0, Ordering::SeqCst);
    let started = Instant::now();
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let sandbox = p.sandbox.clone();
            tokio::spawn(async move { sandbox.run(code).await })
        })
        .collect();
    while p.parked.load(Ordering::SeqCst) < n {
        // A run that ended without parking (e.g. refused) would stall the wait.
        let finished_early = tasks.iter().filter(|t| t.is_finished()).count();
        if p.parked.load(Ordering::SeqCst) + finished_early >= n {
            break;
        }
        let _ = tokio::time::timeout(Duration::from_millis(50), p.arrived.notified()).await;
    }
    let to_start = started.elapsed();
    let measured = memory();
    p.release.send_modify(|g| *g += 1);
    let (mut ok, mut reported) = (0, false);
    for task in tasks {
        let outcome = task.await.expect("run task");
        if outcome.status == Status::Ok {
            ok += 1;
        } else if !reported {
            reported = true;
            eprintln!("a run ended {}: {:?}", outcome.status, outcome.error);
        }
    }
    (measured, to_start, ok)
}

fn main() {
    let mut languages = Vec::new();
    let mut counts = vec![1, 50, 500];
    let mut thousand = 1000;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "python" | "js" => languages.push(arg),
            "--counts" => {
                counts = it.next().expect("--counts 1,50").split(',').map(|c| c.parse().expect("count")).collect()
            }
            "--thousand" => thousand = it.next().and_then(|v| v.parse().ok()).expect("--thousand N"),
            _ => {}
        }
    }
    if languages.is_empty() {
        languages = vec!["python".into(), "js".into()];
    }
    let pooling = std::env::var("WASMBOX_BENCH_POOLING").map_or(true, |v| v != "0");
    let max = counts.iter().copied().max().unwrap_or(1).max(thousand);
    let engine =
        Engine::new(EngineConfig { pooling, max_concurrent_runs: max, ..EngineConfig::default() }).expect("engine");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio");
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let vm_size = status.lines().find(|l| l.starts_with("VmSize:")).unwrap_or("VmSize: ?");
    println!(
        "Idle instances parked in a tool call, {} allocator, engine admitting {max} runs ({}) (MiB)",
        if pooling { "pooling" } else { "on-demand" },
        vm_size.split_whitespace().collect::<Vec<_>>().join(" ")
    );
    println!(
        "{:<7} {:>9} {:>8} {:>8} {:>9} {:>10} {:>10} {:>9}",
        "guest", "instances", "RSS", "PSS", "private", "ΔPSS/inst", "ΔRSS/inst", "start s"
    );
    for language in &languages {
        let (runtime, code) = match language.as_str() {
            "python" => (Runtime::python(&engine), "tools.park()"),
            _ => (Runtime::javascript(&engine), "return await tools.park()"),
        };
        let p = parking(runtime.expect("the guests are built: run `cargo xtask guests`"));
        rt.block_on(async {
            // One run first, so that the measurements start from a warm engine.
            parked(&p, code, 1).await;
            let base = memory();
            println!(
                "{:<7} {:>9} {:>8} {:>8} {:>9} {:>10} {:>10} {:>9}",
                language,
                0,
                mib(base.rss as i64),
                mib(base.pss as i64),
                mib(base.private as i64),
                "",
                "",
                ""
            );
            for &n in &counts {
                let (m, took, ok) = parked(&p, code, n).await;
                assert_eq!(ok, n, "{n} parked {language} runs: only {ok} ended ok");
                let per = |now: u64, then: u64| format!("{:.2}", (now as f64 - then as f64) / 1024.0 / n as f64);
                println!(
                    "{:<7} {:>9} {:>8} {:>8} {:>9} {:>10} {:>10} {:>9.2}",
                    language,
                    n,
                    mib(m.rss as i64),
                    mib(m.pss as i64),
                    mib(m.private as i64),
                    per(m.pss, base.pss),
                    per(m.rss, base.rss),
                    took.as_secs_f64()
                );
            }
            if language == "python" && thousand > 0 {
                let (m, took, ok) = parked(&p, code, thousand).await;
                println!(
                    "{thousand} Python instances at once: {ok} ok, all parked after {:.2} s, RSS {} MiB, PSS {} MiB",
                    took.as_secs_f64(),
                    mib(m.rss as i64),
                    mib(m.pss as i64)
                );
            }
        });
    }
}
