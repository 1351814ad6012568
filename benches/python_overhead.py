"""Per-run overhead of the Python API over the Rust API, for W1 and W2 (benches/workloads).

Both sides run in the same process, on the same extension build: the Rust side is
`wasmbox._native._rust_baseline`, a loop of `Sandbox::run` calls made from Rust with a
Rust `add` tool (as benches/benches/runs.rs registers it); the Python side is
`wasmbox.Sandbox.run` (and `await run_async`) with a Python `add` tool. Rounds alternate
the two, and the overhead is the difference of the medians per run.

Run it with the package installed, e.g. from the venv `cargo xtask test` makes::

    WASMBOX_CACHE_DIR=target/wasmbox-cache target/python/venv/bin/python benches/python_overhead.py

Options: ``--runs N`` per round (default 300), ``--rounds R`` (default 7).
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
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    print(f"{'workload':<12} {'Rust API':>10} {'Python run':>11} {'overhead':>9} {'run_async':>10} {'overhead':>9}")
    for language, extension in (("python", "py"), ("javascript", "js")):
        rust = _native._rust_add_sandbox(language)
        sandbox = wasmbox.Sandbox(language, tools=[add], scope="all")
        for workload in ("w1_trivial", "w2_one_tool_call"):
            code = (WORKLOADS / f"{workload}.{extension}").read_text()
            assert sandbox.run(code).is_ok()
            _native._rust_baseline(rust, code, 20)  # warm both paths

            async def run_async_loop(n: int) -> float:
                started = time.perf_counter()
                for _ in range(n):
                    await sandbox.run_async(code)
                return time.perf_counter() - started

            rust_us, sync_us, async_us = [], [], []
            for _ in range(args.rounds):
                rust_us.append(per_run_us(_native._rust_baseline(rust, code, args.runs), args.runs))
                started = time.perf_counter()
                for _ in range(args.runs):
                    sandbox.run(code)
                sync_us.append(per_run_us(time.perf_counter() - started, args.runs))
                async_us.append(per_run_us(asyncio.run(run_async_loop(args.runs)), args.runs))
            r, s, a = (statistics.median(x) for x in (rust_us, sync_us, async_us))
            name = f"{language[:2]} {workload[:2].upper()}"
            print(f"{name:<12} {r:>8.1f}µs {s:>9.1f}µs {s - r:>7.1f}µs {a:>8.1f}µs {a - r:>7.1f}µs")


if __name__ == "__main__":
    main()
