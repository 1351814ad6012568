//! What a heavy run leaves behind in the instance pool: W1 latency and the pool's
//! resident bytes on a fresh engine, after a burst of heavy runs (W5, JSON over 10,000
//! dicts) and again after many W1 runs more. Slots reset in place keep the pages their
//! runs dirtied; this shows whether a light run that lands in a slot a heavy run used
//! pays for the heavy run's pages at every reset.
//!
//! `cargo bench -p wasmbox-benches --bench residency [-- [python|js] [--runs N]
//! [--heavy N]]` (defaults: both languages, 2,000 W1 runs a phase, 20 heavy runs).

use std::time::Instant;

use wasmbox::{Engine, EngineConfig, Runtime, Sandbox, Tools};
use wasmbox_benches::WORKLOADS;

struct Args {
    languages: Vec<String>,
    runs: usize,
    heavy: usize,
}

fn args() -> Args {
    let mut args = Args { languages: Vec::new(), runs: 2_000, heavy: 20 };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--runs" => args.runs = it.next().and_then(|v| v.parse().ok()).expect("--runs N"),
            "--heavy" => args.heavy = it.next().and_then(|v| v.parse().ok()).expect("--heavy N"),
            "python" | "js" => args.languages.push(arg),
            _ => {} // `--bench` and other flags cargo passes
        }
    }
    if args.languages.is_empty() {
        args.languages = vec!["python".into(), "js".into()];
    }
    args
}

fn main() {
    let args = args();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio");
    println!("W1 before and after {} heavy (W5) runs, {} W1 runs a phase, one run at a time", args.heavy, args.runs);
    println!("{:<7} {:<22} {:>8} {:>8} {:>14}", "guest", "phase", "p50 ms", "mean ms", "pool MiB kept");
    for language in &args.languages {
        // An engine per language, so the pool's residency is this language's alone.
        let engine = Engine::new(EngineConfig::default()).expect("engine");
        let (runtime, light, heavy) = match language.as_str() {
            "python" => (Runtime::python(&engine), WORKLOADS[0].python, WORKLOADS[4].python),
            _ => (Runtime::javascript(&engine), WORKLOADS[0].js, WORKLOADS[4].js),
        };
        let sandbox = Sandbox::new(runtime.expect("the guests are built: run `cargo xtask guests`"), Tools::new());
        let phase = |name: &str, code: &str, runs: usize| {
            let mut latencies: Vec<f64> = (0..runs)
                .map(|_| {
                    let t = Instant::now();
                    let outcome = rt.block_on(sandbox.run(code));
                    assert!(outcome.is_ok(), "{outcome:?}");
                    t.elapsed().as_secs_f64() * 1e3
                })
                .collect();
            let mean = latencies.iter().sum::<f64>() / latencies.len() as f64;
            latencies.sort_by(f64::total_cmp);
            let p50 = latencies[latencies.len() / 2];
            let kept = engine.metrics().pool_resident_bytes as f64 / (1 << 20) as f64;
            println!("{language:<7} {name:<22} {p50:>8.3} {mean:>8.3} {kept:>14.1}");
        };
        phase("W1, fresh engine", light, args.runs);
        phase("W5 (heavy)", heavy, args.heavy);
        phase("W1 after the heavy runs", light, args.runs);
        phase("W1 once more", light, args.runs);
    }
}
