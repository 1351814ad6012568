"""Per-run overhead of the Python API over the Rust API, for W1 and W2 (benches/workloads).

Both sides run in the same process, on the same extension build: the Rust side is
`wasmbox._native._rust_baseline`, `Sandbox::run` called from Rust with a Rust `add` tool
(as benches/benches/runs.rs registers it); the Python side is `wasmbox.Sandbox.run` (and
`await run_async`) with a Python `add` tool. Runs alternate, one of each, and the
overhead is the median of the pairs' differences.

Run it with the package installed, e.g. from the venv `cargo xtask test` makes::

    WASMBOX_CACHE_DIR=target/wasmbox-cache target/python/venv/bin/python benches/python_overhead.py

Option: ``--runs N``, pairs per workload and API (default 2000).
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import statistics
import time

import wasmbox
from wasmbox import _native

WORKLOADS = pathlib.Path(__file__).resolve().parent / "workloads"


def add(a: int, b: int) -> int:
    """Adds a and b."""
    return a + b


def per_run_us(seconds: float, runs: int) -> float:
    return seconds / runs * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000, help="pairs of runs per workload and API")
    args = parser.parse_args()

    # Paired: each Python-API run is timed right after one Rust-API run, and the overhead
    # is the median of the pairs' differences, so a busy machine's drift cancels out.
    print(f"{'workload':<8} {'Rust API':>10} {'run':>10} {'overhead':>9} {'run_async':>10} {'overhead':>9}")
    for language, extension in (("python", "py"), ("javascript", "js")):
        rust = _native._rust_add_sandbox(language)
        sandbox = wasmbox.Sandbox(language, tools=[add], scope="all")
        for workload in ("w1_trivial", "w2_one_tool_call"):
            code = (WORKLOADS / f"{workload}.{extension}").read_text()
            assert sandbox.run(code).is_ok()
            _native._rust_baseline(rust, code, 50)  # warm both paths
            for _ in range(50):
                sandbox.run(code)

            rust_sync, python_sync, cpu_diff = [], [], []
            for _ in range(args.runs):
                cpu = time.process_time()
                rust_sync.append(_native._rust_baseline(rust, code, 1) * 1e6)
                cpu_rust = time.process_time() - cpu
                cpu = time.process_time()
                started = time.perf_counter()
                sandbox.run(code)
                python_sync.append((time.perf_counter() - started) * 1e6)
                cpu_diff.append((time.process_time() - cpu - cpu_rust) * 1e6)

            async def paired_async() -> tuple[list[float], list[float]]:
                rust_us, python_us = [], []
                for _ in range(args.runs):
                    rust_us.append(_native._rust_baseline(rust, code, 1) * 1e6)
                    started = time.perf_counter()
                    await sandbox.run_async(code)
                    python_us.append((time.perf_counter() - started) * 1e6)
                return rust_us, python_us

            rust_async, python_async = asyncio.run(paired_async())
            # The process's CPU time (every thread), which a busy machine inflates less
            # than wall time: a mean, as the clock's resolution is coarse.
            cpu_overhead = statistics.mean(cpu_diff)
            median = statistics.median
            sync_overhead = median(p - r for p, r in zip(python_sync, rust_sync))
            async_overhead = median(p - r for p, r in zip(python_async, rust_async))
            name = f"{extension} {workload[:2].upper()}"
            print(
                f"{name:<8} {median(rust_sync):>8.1f}µs {median(python_sync):>8.1f}µs {sync_overhead:>7.1f}µs"
                f" {median(python_async):>8.1f}µs {async_overhead:>7.1f}µs   (CPU, run: {cpu_overhead:.1f}µs)"
            )


if __name__ == "__main__":
    main()
