//! Throughput: W1 (`1 + 1`) runs per second with N runs in flight on one engine, for
//! Python and JS, plus what each run costs the process (CPU split user/kernel, minor
//! page faults) and the process's resident memory before and after each cell, so that a
//! miss can be explained and growth over many runs is seen.
//!
//! `cargo bench -p wasmbox-benches --bench throughput [-- [python|js] [--concurrency N]
//! [--seconds S] [--runs N]]` (defaults: both languages, concurrency 1, 2, 4 and 8, 5 s
//! each; `--runs` ends each cell after N runs instead, whatever the time).
//! `WASMBOX_BENCH_POOLING=0` uses the on-demand instance allocator;
//! `WASMBOX_BENCH_PREPARED=N` prepares N instances ahead per runtime instead of the
//! default (`0`: every run instantiates inline).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmbox::{Engine, EngineConfig, Runtime, Sandbox, Tools};
use wasmbox_benches::WORKLOADS;

/// User and system CPU time and minor faults of this process so far.
#[derive(Clone, Copy)]
struct Usage {
    user: Duration,
    system: Duration,
    minor_faults: u64,
}

fn usage() -> Usage {
    // /proc/self/stat: fields after the parenthesised command; minflt is field 10,
    // utime 14, stime 15 (clock ticks, 100 per second on Linux).
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields[n - 3].parse::<u64>().expect("number");
    let ticks = |t: u64| Duration::from_millis(t * 10);
    Usage { minor_faults: field(10), user: ticks(field(14)), system: ticks(field(15)) }
}

/// This process's resident set in MiB (`VmRSS` of /proc/self/status).
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kib / 1024.0
}

struct Args {
    languages: Vec<String>,
    concurrency: Vec<usize>,
    seconds: f64,
    /// Ends each cell after this many runs instead of after `seconds`.
    runs: Option<u64>,
}

fn args() -> Args {
    let mut args = Args { languages: Vec::new(), concurrency: Vec::new(), seconds: 5.0, runs: None };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--concurrency" => args.concurrency.push(it.next().and_then(|v| v.parse().ok()).expect("--concurrency N")),
            "--seconds" => args.seconds = it.next().and_then(|v| v.parse().ok()).expect("--seconds S"),
            "--runs" => args.runs = Some(it.next().and_then(|v| v.parse().ok()).expect("--runs N")),
            "python" | "js" => args.languages.push(arg),
            _ => {} // `--bench` and other flags cargo passes
        }
    }
    if args.languages.is_empty() {
        args.languages = vec!["python".into(), "js".into()];
    }
    if args.concurrency.is_empty() {
        args.concurrency = vec![1, 2, 4, 8];
    }
    args
}

fn main() {
    let args = args();
    let pooling = std::env::var("WASMBOX_BENCH_POOLING").map_or(true, |v| v != "0");
    let max_in_flight = args.concurrency.iter().copied().max().unwrap_or(1);
    let prepared_instances = std::env::var("WASMBOX_BENCH_PREPARED")
        .map_or(wasmbox::DEFAULT_PREPARED_INSTANCES, |v| v.parse().expect("WASMBOX_BENCH_PREPARED is a number"));
    let config = EngineConfig {
        pooling,
        max_concurrent_runs: max_in_flight.max(64),
        prepared_instances,
        ..EngineConfig::default()
    };
    let engine = Engine::new(config).expect("engine");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio");
    let allocator = if pooling { "pooling" } else { "on-demand" };
    let length = match args.runs {
        Some(runs) => format!("{runs} runs"),
        None => format!("{} s", args.seconds),
    };
    println!("W1 throughput, {allocator} allocator, {prepared_instances} prepared per runtime, {length} per cell");
    println!(
        "{:<7} {:>8} {:>9} {:>9} {:>9} {:>10} {:>9} {:>11} {:>17}",
        "guest",
        "in flight",
        "runs/s",
        "p50 ms",
        "p99 ms",
        "CPU ms/run",
        "kernel %",
        "faults/run",
        "RSS MiB before>after"
    );
    for language in &args.languages {
        let (runtime, code) = match language.as_str() {
            "python" => (Runtime::python(&engine), WORKLOADS[0].python),
            _ => (Runtime::javascript(&engine), WORKLOADS[0].js),
        };
        let sandbox = Sandbox::new(runtime.expect("the guests are built: run `cargo xtask guests`"), Tools::new());
        for &in_flight in &args.concurrency {
            // Warm up: every slot the cell will use has been used once.
            rt.block_on(async {
                let warm: Vec<_> = (0..in_flight * 4)
                    .map(|_| {
                        let sandbox = sandbox.clone();
                        tokio::spawn(async move { assert!(sandbox.run(code).await.is_ok()) })
                    })
                    .collect();
                for task in warm {
                    task.await.expect("warm-up run");
                }
            });
            let end = match args.runs {
                Some(runs) => End::Runs(runs),
                None => End::After(Duration::from_secs_f64(args.seconds)),
            };
            let cell = measure(&rt, &sandbox, code, in_flight, end);
            println!(
                "{:<7} {:>8} {:>9.0} {:>9.2} {:>9.2} {:>10.2} {:>9.0} {:>11.0} {:>10.1}>{:.1}",
                language,
                in_flight,
                cell.runs_per_s,
                cell.p50_ms,
                cell.p99_ms,
                cell.cpu_ms_per_run,
                cell.kernel_pct,
                cell.faults_per_run,
                cell.rss_before_mib,
                cell.rss_after_mib
            );
        }
    }
}

struct Cell {
    runs_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    cpu_ms_per_run: f64,
    kernel_pct: f64,
    faults_per_run: f64,
    rss_before_mib: f64,
    rss_after_mib: f64,
}

/// When a cell ends.
#[derive(Clone, Copy)]
enum End {
    After(Duration),
    Runs(u64),
}

/// `in_flight` tasks each run W1 back to back until the cell ends.
fn measure(rt: &tokio::runtime::Runtime, sandbox: &Sandbox, code: &'static str, in_flight: usize, end: End) -> Cell {
    // Runs claimed so far, for `End::Runs`.
    let runs = Arc::new(AtomicU64::new(0));
    let rss_before_mib = rss_mib();
    let before = usage();
    let started = Instant::now();
    let latencies: Vec<Duration> = rt.block_on(async {
        let tasks: Vec<_> = (0..in_flight)
            .map(|_| {
                let (sandbox, runs) = (sandbox.clone(), Arc::clone(&runs));
                tokio::spawn(async move {
                    let mut latencies = Vec::new();
                    loop {
                        let more = match end {
                            End::After(duration) => started.elapsed() < duration,
                            // Each task claims its run before making it, so the cell makes exactly N.
                            End::Runs(total) => runs.fetch_add(1, Ordering::Relaxed) < total,
                        };
                        if !more {
                            break;
                        }
                        let t = Instant::now();
                        let outcome = sandbox.run(code).await;
                        latencies.push(t.elapsed());
                        assert!(outcome.is_ok(), "{outcome:?}");
                    }
                    latencies
                })
            })
            .collect();
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.expect("run task"));
        }
        all
    });
    let elapsed = started.elapsed();
    let after = usage();
    let rss_after_mib = rss_mib();
    let mut latencies = latencies;
    latencies.sort();
    let n = latencies.len().max(1) as f64;
    let pct = |p: f64| latencies[((latencies.len() as f64 - 1.0) * p) as usize].as_secs_f64() * 1e3;
    let (user, system) = ((after.user - before.user).as_secs_f64(), (after.system - before.system).as_secs_f64());
    Cell {
        runs_per_s: n / elapsed.as_secs_f64(),
        p50_ms: pct(0.5),
        p99_ms: pct(0.99),
        cpu_ms_per_run: (user + system) * 1e3 / n,
        kernel_pct: if user + system > 0.0 { 100.0 * system / (user + system) } else { 0.0 },
        faults_per_run: (after.minor_faults - before.minor_faults) as f64 / n,
        rss_before_mib,
        rss_after_mib,
    }
}
