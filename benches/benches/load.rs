//! A cached load (issue 6's target: ≤ 10 ms): `Runtime::python` / `Runtime::javascript`
//! on a fresh engine, whose guest the precompile cache already holds. What it times is
//! the cache's checks, the seal over the artifact, and wasmtime mapping it; the engine
//! is made (and the runtime and engine dropped) outside the measurement.
//!
//! `cargo bench -p wasmbox-benches --bench load` (build the guests first: `cargo xtask
//! guests`; the first load of each guest, before the measurement, compiles it if the
//! cache does not hold it yet).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use wasmbox::{Engine, EngineConfig, Runtime};

/// How a runtime is made: `Runtime::python` or `Runtime::javascript`.
type Load = fn(&Engine) -> Result<Runtime, wasmbox::Error>;

fn cached_load(c: &mut Criterion) {
    let mut group = c.benchmark_group("cached_load");
    group.sample_size(30);
    let languages: [(&str, Load); 2] = [("python", Runtime::python), ("js", Runtime::javascript)];
    for (name, runtime) in languages {
        let engine = || Engine::new(EngineConfig::default()).expect("engine");
        runtime(&engine()).expect("the guests are built: run `cargo xtask guests`");
        group.bench_function(name, |b| {
            b.iter_batched(
                engine,
                |engine| {
                    let loaded = runtime(&engine).expect("a cached load");
                    (loaded, engine)
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, cached_load);
criterion_main!(benches);
