"""Per-run overhead of the Python API over the Rust API, for W1 and W2 (benches/workloads).

Both sides run in the same process, on the same extension build: the Rust side is
`wasmbox._native._rust_baseline`, `Sandbox::run` called from Rust with a Rust `add` tool
(as benches/benches/runs.rs registers it); the Python side is `wasmbox.Sandbox.run` (and
`await run_async`, and `await run_async(..., eager=True)`) with a Python `add` tool,
pooled (the default) and `inline=True`.
Runs alternate, one of each, and the overhead is the median of the pairs' differences.
On a shared VM, run it under `chrt -f 10` so that the other load does not decide when a
woken thread runs.

Run it with the package installed, e.g. from the venv `cargo xtask test` makes::

    WASMBOX_CACHE_DIR=target/wasmbox-cache target/python/venv/bin/python benches/python_overhead.py

Options: ``--runs N``, pairs per workload and API (default 2000); ``--apis`` (default
``run,inline,run_async,eager``; ``eager`` is ``run_async(..., eager=True)``) and
``--languages`` (default ``py,js``) to measure only some cells (the others print as
``nan``); ``--prepared N`` sets the engine's ``prepared_instances`` (0: every run
instantiates its own instance, which keeps a prepared instance from going to the Rust
run of a pair more often than to the Python run when the machine is too busy for the
background thread to keep up). The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import statistics
import time
from collections.abc import Callable

import wasmbox
from wasmbox import _native

WORKLOADS = pathlib.Path(__file__).resolve().parent / "workloads"


def add(a: int, b: int) -> int:
    """Adds a and b."""
    return a + b


def per_run_us(seconds: float, runs: int) -> float:
    return seconds / runs * 1e6


def paired(rust: object, code: str, run: Callable[[], object], runs: int) -> tuple[float, float, float]:
    """Median Rust-API run, median Python-API run, median of the pairs' differences (µs)."""
    rust_us, python_us = [], []
    for _ in range(runs):
        rust_us.append(_native._rust_baseline(rust, code, 1) * 1e6)
        started = time.perf_counter()
        run()
        python_us.append((time.perf_counter() - started) * 1e6)
    diffs = [p - r for p, r in zip(python_us, rust_us)]
    return statistics.median(rust_us), statistics.median(python_us), statistics.median(diffs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000, help="pairs of runs per workload and API")
    parser.add_argument("--apis", default="run,inline,run_async,eager", help="of run, inline, run_async, eager")
    parser.add_argument("--languages", default="py,js", help="of py, js")
    parser.add_argument("--prepared", type=int, help="configure_engine(prepared_instances=N) first")
    args = parser.parse_args()
    apis = set(args.apis.split(","))
    languages = set(args.languages.split(","))
    skipped = (float("nan"), float("nan"), float("nan"))
    if args.prepared is not None:
        wasmbox.configure_engine(prepared_instances=args.prepared)

    print(f"load average {os.getloadavg()[0]:.1f}")
    # Paired: each Python-API run is timed right after one Rust-API run, and the overhead
    # is the median of the pairs' differences, so a busy machine's drift cancels out.
    print(
        f"{'workload':<8} {'Rust API':>9} | {'run':>9} {'+':>7} | {'inline tool':>11} {'+':>7}"
        f" | {'run_async':>9} {'+':>7} | {'eager':>9} {'+':>7}"
    )
    for language, extension in (("python", "py"), ("javascript", "js")):
        if extension not in languages:
            continue
        rust = _native._rust_add_sandbox(language)
        pooled = wasmbox.Sandbox(language, tools=[add], scope="all")
        inline = wasmbox.Sandbox(language, tools=[wasmbox.Tool(add, inline=True)], scope="all")
        for workload in ("w1_trivial", "w2_one_tool_call"):
            code = (WORKLOADS / f"{workload}.{extension}").read_text()
            assert pooled.run(code).is_ok() and inline.run(code).is_ok()
            _native._rust_baseline(rust, code, 50)  # warm every path
            for _ in range(50):
                pooled.run(code)
                inline.run(code)

            r = statistics.median(_native._rust_baseline(rust, code, 1) * 1e6 for _ in range(50))
            if "run" in apis:
                r, p, p_over = paired(rust, code, lambda: pooled.run(code), args.runs)
            else:
                _, p, p_over = skipped
            _, i, i_over = paired(rust, code, lambda: inline.run(code), args.runs) if "inline" in apis else skipped

            async def in_loop(eager: bool) -> tuple[float, float, float]:
                rust_us, python_us = [], []
                for _ in range(args.runs):
                    rust_us.append(_native._rust_baseline(rust, code, 1) * 1e6)
                    started = time.perf_counter()
                    await (pooled.run_async(code, eager=True) if eager else pooled.run_async(code))
                    python_us.append((time.perf_counter() - started) * 1e6)
                diffs = [p - r for p, r in zip(python_us, rust_us)]
                return statistics.median(rust_us), statistics.median(python_us), statistics.median(diffs)

            _, a, a_over = asyncio.run(in_loop(False)) if "run_async" in apis else skipped
            _, e, e_over = asyncio.run(in_loop(True)) if "eager" in apis else skipped
            name = f"{extension} {workload[:2].upper()}"
            print(
                f"{name:<8} {r:>7.1f}µs | {p:>7.1f}µs {p_over:>5.1f}µs | {i:>9.1f}µs {i_over:>5.1f}µs"
                f" | {a:>7.1f}µs {a_over:>5.1f}µs | {e:>7.1f}µs {e_over:>5.1f}µs"
            )
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
