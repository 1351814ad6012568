#!/usr/bin/env python3
"""Side-by-side comparison: the workloads W1–W6 through wasmbox and the alternatives.

    python3 benches/compare/compare.py [--runs 200] [--process-runs 30] [--cell-seconds 6]
                                       [--systems lib,cli,...] [--skip-build]
                                       [--matrix] [--profile release|dev] [--gap-ms 0]

See README.md beside this file for what each column measures. Everything it installs
goes under target/: a venv (target/compare-venv) for pydantic-monty and
chuk-tool-processor, and release builds of the wasmbox CLI and compare-runner.
Only the standard library is used before the venv exists.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import math
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / "target" / "compare-venv"
WORKLOADS_DIR = ROOT / "benches" / "workloads"
# The binaries of the build profile (--profile): release unless told.
WASMBOX_CLI = ROOT / "target" / "release" / "wasmbox"
RUNNER = ROOT / "target" / "release" / "examples" / "compare-runner"
# The precompiled guests are shared with the tests and `cargo xtask demo`: no recompile.
ENV = {**os.environ, "WASMBOX_CACHE_DIR": str(ROOT / "target" / "wasmbox-cache")}
# Pinned so that a committed table can be reproduced; bump them on purpose.
PACKAGES = {"pydantic-monty": "1.4.0", "chuk-tool-processor": "0.26.1"}
LABELS = {
    "w1_trivial": "W1 `1 + 1`",
    "w2_one_tool_call": "W2 one tool call",
    "w3_100_tool_calls": "W3 100 tool calls",
    "w4_cpu_loop": "W4 CPU loop",
    "w5_json": "W5 JSON",
    "w6_stdlib": "W6 stdlib",
}
MIN_RUNS = 5  # even the slowest cell gets enough samples for a median

# The session matrix (--matrix): ten commands of one session, as a REPL user or an agent
# working step by step would type them; one of them calls the `add` tool. The last
# command's value is the check.
SESSION_COMMANDS = {
    "python": [
        "x = 10",
        "def square(n):\n    return n * n",
        "y = square(x)",
        "items = [square(i) for i in range(x)]",
        "total = sum(items)",
        "z = tools.add(a=total, b=y)",
        "name = 'step'",
        "d = {'k': x, 'z': z}",
        "label = name + '-' + str(d['z'])",
        "label",
    ],
    "js": [
        "let x = 10",
        "function square(n) { return n * n }",
        "let y = square(x)",
        "let items = Array.from({length: x}, (_, i) => square(i))",
        "let total = items.reduce((a, b) => a + b, 0)",
        "let z = await tools.add({a: total, b: y})",
        "let name = 'step'",
        "let d = {k: x, z: z}",
        "let label = name + '-' + String(d.z)",
        "return label",
    ],
}
SESSION_VALUE = "step-385"
MATRIX_SYSTEMS = [("lib", "wasmbox library"), ("monty", "Monty"), ("lib_js", "wasmbox library, JS")]

# The columns, in table order: (key, header). The ratio column divides by "lib".
SYSTEMS = [
    ("lib", "wasmbox library"),
    ("cli", "wasmbox CLI"),
    ("python", "python3 -c"),
    ("monty", "Monty"),
    ("chuk_local", "chuk local"),
    ("chuk_bwrap", "chuk bwrap"),
    ("lib_js", "wasmbox library, JS"),
]


class NotAvailable(Exception):
    """A system or cell that cannot be measured; the message is the table's reason."""


# --------------------------------------------------------------------------- set-up


def enter_venv(argv: list[str]) -> None:
    """Re-run this script with the venv's interpreter, creating the venv first.

    If the venv cannot be made (no python3-venv), carry on without it: Monty and chuk
    then show as n/a with the reason, and the other columns are still measured.
    """
    if Path(sys.prefix).resolve() == VENV.resolve() or os.environ.get("COMPARE_NO_VENV"):
        return
    os.environ.setdefault("COMPARE_COMMAND", shlex.join(["python3", *argv]))
    python = VENV / "bin" / "python"
    if not python.exists():
        made = subprocess.run([sys.executable, "-m", "venv", str(VENV)], capture_output=True, text=True)
        if made.returncode != 0:
            os.environ["COMPARE_NO_VENV"] = f"no venv: {made.stderr.strip()[-200:]}"
            return
    os.execv(python, [str(python), __file__, *argv[1:]])


def install_packages() -> dict[str, str]:
    """pip-installs the pinned packages that are missing; returns {package: error}."""
    from importlib import metadata

    if reason := os.environ.get("COMPARE_NO_VENV"):
        return {name: reason for name in PACKAGES}
    errors = {}
    for name, version in PACKAGES.items():
        try:
            if metadata.version(name) == version:
                continue
        except metadata.PackageNotFoundError:
            pass
        print(f"installing {name}=={version} into {VENV.relative_to(ROOT)} ...", file=sys.stderr)
        pip = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", f"{name}=={version}"],
            capture_output=True,
            text=True,
        )
        if pip.returncode != 0:
            errors[name] = "pip install failed: " + (pip.stderr.strip().splitlines() or ["?"])[-1]
    return errors


def use_profile(profile: str) -> None:
    """Points WASMBOX_CLI and RUNNER at `profile`'s build (`dev` is target/debug)."""
    global WASMBOX_CLI, RUNNER
    out = ROOT / "target" / ("debug" if profile == "dev" else profile)
    WASMBOX_CLI, RUNNER = out / "wasmbox", out / "examples" / "compare-runner"


def build(profile: str) -> None:
    """Builds the guests, the CLI and the runner in `profile`, and precompiles both
    guests so that no compile (~20 s) lands inside a timed run."""
    for command in (
        ["cargo", "xtask", "guests"],
        ["cargo", "build", "--profile", profile, "-p", "wasmbox-cli"],
        ["cargo", "build", "--profile", profile, "-p", "wasmbox-benches", "--example", "compare-runner"],
        [str(WASMBOX_CLI), "precompile", "--lang", "python"],
        [str(WASMBOX_CLI), "precompile", "--lang", "js"],
    ):
        print("+", shlex.join(command), file=sys.stderr)
        subprocess.run(command, cwd=ROOT, env=ENV, check=True)


# --------------------------------------------------------------------------- workloads


def load_workloads() -> list[dict]:
    """The workloads of benches/workloads, plus each one's expected value, computed by
    running the Python version in this process (it is our own code, not a guest's)."""
    workloads = []
    for py in sorted(WORKLOADS_DIR.glob("w*.py")):
        code = py.read_text()
        body, last = split_last_line(code)
        scope = {"tools": PlainTools}
        exec(body, scope)
        workloads.append({
            "name": py.stem,
            "label": LABELS.get(py.stem, py.stem),
            "python": code,
            "js": py.with_suffix(".js").read_text(),
            "expected": eval(last, scope),
        })
    return workloads


class PlainTools:
    """`tools.add` for the systems without a tool mechanism: a plain function call."""

    @staticmethod
    def add(a, b):
        return a + b


PLAIN_PRELUDE = "class tools:\n    @staticmethod\n    def add(a, b):\n        return a + b\n"


def split_last_line(code: str) -> tuple[str, str]:
    """Every workload ends with one expression line: its value (see benches/lib.rs)."""
    lines = code.rstrip().split("\n")
    return "\n".join(lines[:-1]), lines[-1]


def same_value(got, expected) -> bool:
    # JS numbers are doubles: W4's sum is exact in Python and rounded in JS.
    if isinstance(got, (int, float)) and isinstance(expected, (int, float)):
        return math.isclose(got, expected, rel_tol=1e-9)
    return got == expected


# --------------------------------------------------------------------------- timing


def time_loop(call, expected, runs: int, budget_s: float) -> dict:
    """Times `call()` up to `runs` times (at least MIN_RUNS, at most ~budget_s seconds).

    One untimed call first: it warms caches and checks the value, so that a broken
    system shows as n/a instead of a fast error path posing as a result.
    """
    first = call()
    if not same_value(first, expected):
        raise NotAvailable(f"wrong value {first!r:.40}")
    samples = []
    started = time.perf_counter()
    while len(samples) < runs and (len(samples) < MIN_RUNS or time.perf_counter() - started < budget_s):
        t = time.perf_counter()
        call()
        samples.append((time.perf_counter() - t) * 1e3)
    return {"samples_ms": samples}


def measure_each(workloads, make_call, runs, budget_s) -> dict:
    """Runs `time_loop` per workload; a cell that cannot run becomes n/a, not a crash."""
    cells = {}
    for w in workloads:
        try:
            cells[w["name"]] = time_loop(make_call(w), w["expected"], runs, budget_s)
        except NotAvailable as e:
            cells[w["name"]] = {"error": str(e)}
        except Exception as e:  # the other system's own error, reported in its cell
            cells[w["name"]] = {"error": f"{type(e).__name__}: {e}"}
    return cells


# --------------------------------------------------------------------------- systems


def measure_lib(workloads, lang: str, args) -> dict:
    """One process, one warm Engine + Sandbox, many runs: see runner.rs."""
    spec = {
        "lang": lang,
        "runs": args.runs,
        "budget_ms": int(args.cell_seconds * 1e3),
        "gap_us": int(args.gap_ms * 1e3),
        "workloads": [{"name": w["name"], "code": w[lang]} for w in workloads],
    }
    done = subprocess.run([str(RUNNER)], input=json.dumps(spec), capture_output=True, text=True, env=ENV)
    if done.returncode != 0:
        raise NotAvailable(f"compare-runner failed: {done.stderr.strip()[-200:]}")
    cells = json.loads(done.stdout)
    inline = []
    for w in workloads:
        cell = cells[w["name"]]
        if "samples_ms" in cell and not same_value(cell["value"], w["expected"]):
            cells[w["name"]] = {"error": f"wrong value {cell['value']!r:.40}"}
        elif "samples_ms" in cell:
            inline.append(f"{w['name'].split()[0]} {cell['inline_instantiations']}/{len(cell['samples_ms'])}")
    gap = f"{args.gap_ms:g} ms between runs; " if args.gap_ms else ""
    cells["_note"] = f"{gap}runs that found no prepared instance: {', '.join(inline)}"
    return cells


def measure_cli(workloads, args) -> dict:
    """`wasmbox run -` as a new process per run: engine set-up, loading the cached
    precompiled guest (mmap) and the run itself are all inside each sample."""
    tools_dir = ROOT / "target" / "compare-tools"
    tools_dir.mkdir(parents=True, exist_ok=True)
    # A command-backed tool is a process per call; jq starts in ~1 ms where python3
    # takes ~15 ms, so prefer it to keep W3 about wasmbox rather than about python3.
    if shutil.which("jq"):
        argv = ["jq", "-c", ".a + .b"]
    else:
        argv = ["python3", "-c", "import json,sys; a = json.load(sys.stdin); print(a['a'] + a['b'])"]
    (tools_dir / "tools.toml").write_text(
        '[[tool]]\nname = "add"\ndescription = "Adds a and b"\nargv = ' + json.dumps(argv) + "\n"
    )
    command = [str(WASMBOX_CLI), "run", "-", "--json", "--tools", str(tools_dir / "tools.toml"), "--allow", "add"]

    def make_call(w):
        def call():
            done = subprocess.run(command, input=w["python"], capture_output=True, text=True, env=ENV)
            if done.returncode != 0:
                raise NotAvailable(f"exit {done.returncode}: {(done.stderr or done.stdout).strip()[-120:]}")
            return json.loads(done.stdout)["value"]

        return call

    cells = measure_each(workloads, make_call, args.process_runs, args.cell_seconds)
    cells["_note"] = f"the `add` tool is a command (`{shlex.join(argv)}`), one process per call"
    return cells


def measure_python(workloads, args) -> dict:
    """A fresh `python3 -c` per run, tools as plain functions: no sandbox at all."""
    python3 = shutil.which("python3") or sys.executable

    def make_call(w):
        body, last = split_last_line(w["python"])
        code = f"{PLAIN_PRELUDE}{body}\nprint(repr({last}))\n"

        def call():
            done = subprocess.run([python3, "-c", code], capture_output=True, text=True, check=True)
            return ast.literal_eval(done.stdout.strip())

        return call

    return measure_each(workloads, make_call, args.process_runs, args.cell_seconds)


def measure_monty(workloads, args) -> dict:
    """pydantic-monty's documented fast path: a pool of warm `monty` worker processes
    (started once, outside timing) and a fresh REPL session checked out per run.
    `tools.add(...)` becomes Monty's host function `add(...)`."""
    from pydantic_monty import Monty

    with Monty(min_processes=1) as pool:

        def make_call(w):
            code = w["python"].replace("tools.add(", "add(")

            def call():
                with pool.checkout() as session:
                    return session.feed_run(code, external_lookup={"add": PlainTools.add})

            return call

        return measure_each(workloads, make_call, args.runs, args.cell_seconds)


def measure_chuk(workloads, args, backend_name: str) -> dict:
    """chuk-tool-processor's IsolatedCodeRunner: a new guest process per run (under
    bwrap for the bubblewrap backend) and a host-side broker serving the tools over a
    unix socket. Its guest calls tools as `await add(...)` and returns with `return`."""
    from chuk_tool_processor.execution.isolation import (
        BubblewrapBackend,
        IsolatedCodeRunner,
        LocalProcessBackend,
    )
    from chuk_tool_processor.registry import get_default_registry

    if backend_name == "bubblewrap":
        backend = BubblewrapBackend()
        if not shutil.which("bwrap"):
            raise NotAvailable("bwrap not installed")
        probe = subprocess.run(["bwrap", "--ro-bind", "/", "/", "true"], capture_output=True, text=True)
        if probe.returncode != 0:
            raise NotAvailable(f"bwrap does not run here: {probe.stderr.strip()}")
    else:
        backend = LocalProcessBackend()

    class AddTool:
        async def execute(self, a, b):
            return a + b

    loop = asyncio.new_event_loop()
    registry = loop.run_until_complete(get_default_registry())
    loop.run_until_complete(registry.register_tool(AddTool, name="add", namespace="bench"))
    # The local backend isolates nothing, so the runner insists on an explicit opt-in.
    runner = IsolatedCodeRunner(
        backend, registry=registry, namespace="bench", allow_no_isolation=backend_name == "local"
    )

    def make_call(w):
        body, last = split_last_line(w["python"].replace("tools.add(", "await add("))
        code = f"{body}\nreturn {last}\n"

        def call():
            result = loop.run_until_complete(runner.run(code))
            if not result.ok:
                raise NotAvailable(f"{result.error_type}: {result.error}")
            return result.value

        return call

    try:
        return measure_each(workloads, make_call, args.process_runs, args.cell_seconds)
    finally:
        loop.close()


# --------------------------------------------------------------------------- session matrix


def matrix_lib(lang: str, args) -> dict:
    """The matrix's wasmbox cells (runner.rs): cold start in new processes, W1 on the
    warm sandbox, and sessions of the ten commands."""
    w1 = (WORKLOADS_DIR / f"w1_trivial.{'js' if lang == 'js' else 'py'}").read_text()

    def runner(spec: dict) -> dict:
        done = subprocess.run([str(RUNNER)], input=json.dumps({"lang": lang, **spec}),
                              capture_output=True, text=True, env=ENV)
        if done.returncode != 0:
            raise NotAvailable(f"compare-runner failed: {done.stderr.strip()[-200:]}")
        return json.loads(done.stdout)

    def cold():
        started = time.perf_counter()
        cell = runner({"mode": "cold", "code": w1})
        process_ms = (time.perf_counter() - started) * 1e3
        if "error" in cell:
            raise NotAvailable(cell["error"])
        return cell["value"], cell["cold_ms"], process_ms

    budget_ms = int(args.cell_seconds * 1e3)
    warm = runner({"runs": args.runs, "budget_ms": budget_ms, "workloads": [{"name": "w1", "code": w1}]})["w1"]
    session = runner({"mode": "session", "commands": SESSION_COMMANDS[lang], "runs": args.runs, "budget_ms": budget_ms})
    return matrix_cells(cold, warm, session)


def matrix_monty(args) -> dict:
    """Monty's cells: cold start in new processes (a pool of one worker started, checked
    out, `1 + 1` fed), `1 + 1` on a fresh session of a warm pool, and the ten commands
    fed to one session checked out of the warm pool."""
    from pydantic_monty import Monty

    cold_script = (
        "import json, sys, time\n"
        "from pydantic_monty import Monty\n"
        "t = time.perf_counter()\n"
        "with Monty(min_processes=1) as pool:\n"
        "    with pool.checkout() as session:\n"
        "        value = session.feed_run('1 + 1')\n"
        "        cold_ms = (time.perf_counter() - t) * 1e3\n"
        "print(json.dumps({'cold_ms': cold_ms, 'value': value}))\n"
    )

    def cold():
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", cold_script], capture_output=True, text=True)
        process_ms = (time.perf_counter() - started) * 1e3
        if done.returncode != 0:
            raise NotAvailable(f"exit {done.returncode}: {done.stderr.strip()[-120:]}")
        cell = json.loads(done.stdout)
        return cell["value"], cell["cold_ms"], process_ms

    commands = [c.replace("tools.add(", "add(") for c in SESSION_COMMANDS["python"]]
    lookup = {"add": PlainTools.add}
    with Monty(min_processes=1) as pool:

        def w1():
            with pool.checkout() as session:
                return session.feed_run("1 + 1")

        warm = timed_samples(w1, args.runs, args.cell_seconds)

        def ten():
            steps, value = [], None
            with pool.checkout() as session:
                for command in commands:
                    t = time.perf_counter()
                    value = session.feed_run(command, external_lookup=lookup)
                    steps.append((time.perf_counter() - t) * 1e3)
            return value, steps

        session = {"samples_ms": [], "step_samples_ms": []}
        try:
            ten()  # untimed, as every cell's first
            started = time.perf_counter()
            while len(session["samples_ms"]) < args.runs and (
                len(session["samples_ms"]) < MIN_RUNS or time.perf_counter() - started < args.cell_seconds
            ):
                t = time.perf_counter()
                session["value"], steps = ten()
                session["samples_ms"].append((time.perf_counter() - t) * 1e3)
                session["step_samples_ms"].extend(steps)
        except Exception as e:
            session = {"error": f"{type(e).__name__}: {e}"}
    return matrix_cells(cold, warm, session)


def timed_samples(call, runs: int, seconds: float) -> dict:
    """The first call untimed (its value is the check), then samples as in measure_each."""
    try:
        value = call()
        samples, started = [], time.perf_counter()
        while len(samples) < runs and (len(samples) < MIN_RUNS or time.perf_counter() - started < seconds):
            t = time.perf_counter()
            call()
            samples.append((time.perf_counter() - t) * 1e3)
        return {"samples_ms": samples, "value": value}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


def matrix_cells(cold, warm: dict, session: dict) -> dict:
    """The matrix's rows for one system; `cold()` is one new process: (value, in-process
    ms, whole-process ms)."""
    cells = {"cold": {"samples_ms": []}, "cold_process": {"samples_ms": []}}
    try:
        for i in range(COLD_RUNS):
            value, cold_ms, process_ms = cold()
            if not same_value(value, 2):
                raise NotAvailable(f"wrong value {value!r:.40}")
            cells["cold"]["samples_ms"].append(cold_ms)
            cells["cold_process"]["samples_ms"].append(process_ms)
    except NotAvailable as e:
        cells["cold"] = cells["cold_process"] = {"error": str(e)}
    if "samples_ms" in warm and not same_value(warm["value"], 2):
        warm = {"error": f"wrong value {warm['value']!r:.40}"}
    cells["warm"] = warm
    if "samples_ms" in session and session.get("value") != SESSION_VALUE:
        session = {"error": f"wrong value {session.get('value')!r:.40}"}
    cells["session"] = session
    cells["step"] = {"samples_ms": session["step_samples_ms"]} if "samples_ms" in session else session
    return cells


COLD_RUNS = 10  # cold starts are a process each: ten give a median
MATRIX_ROWS = [
    ("cold", "cold start: engine or pool, then `1 + 1` (in the new process)"),
    ("cold_process", "cold start: the whole new process"),
    ("warm", "warm run: `1 + 1`, a fresh sandbox or session each"),
    ("session", "ten commands of one session (open, ten steps, close)"),
    ("step", "one of those steps"),
]


def matrix_report(results: dict, columns: list[tuple[str, str]]) -> str:
    lines = ["| | " + " | ".join(title for _, title in columns) + " |", "|" + "---|" * (len(columns) + 1)]
    for row, label in MATRIX_ROWS:
        cells = []
        for key, _ in columns:
            cell = results[key].get(row, {"error": "not measured"})
            if "samples_ms" in cell and cell["samples_ms"]:
                s = cell["samples_ms"]
                cells.append(f"{fmt_ms3(percentile(s, 50))} / {fmt_ms3(percentile(s, 99))} ({len(s)})")
            else:
                cells.append(f"n/a ({short(cell.get('error', 'no samples'))})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fmt_ms3(ms: float) -> str:
    return f"{ms:.3f}" if ms < 1 else fmt_ms(ms)


# --------------------------------------------------------------------------- report


def percentile(samples: list[float], p: float) -> float:
    """Nearest rank: with 20 samples p99 is the slowest one."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def fmt_ms(ms: float) -> str:
    return f"{ms:.2f}" if ms < 10 else f"{ms:.1f}" if ms < 100 else f"{ms:.0f}"


def fmt_ratio(r: float) -> str:
    return f"{r:.2f}×" if r < 10 else f"{r:.0f}×"


def short(reason: str, limit: int = 48) -> str:
    reason = " ".join(reason.split())
    return reason if len(reason) <= limit else reason[: limit - 1] + "…"


def report(workloads, results: dict, columns: list[tuple[str, str]]) -> str:
    header = "| workload | " + " | ".join(title for _, title in columns) + " |"
    lines = [header, "|" + "---|" * (len(columns) + 1)]
    counts = [header.replace("workload", "runs"), lines[1]]
    for w in workloads:
        base = results.get("lib", {}).get(w["name"], {}).get("samples_ms")
        base_p50 = percentile(base, 50) if base else None
        cells, ns = [], []
        for key, _ in columns:
            cell = results[key].get(w["name"], {"error": "not measured"})
            if "samples_ms" in cell:
                s = cell["samples_ms"]
                p50, p99 = percentile(s, 50), percentile(s, 99)
                ratio = f" ({fmt_ratio(p50 / base_p50)})" if base_p50 else ""
                cells.append(f"{fmt_ms(p50)} / {fmt_ms(p99)}{ratio}")
                ns.append(str(len(s)))
            else:
                cells.append(f"n/a ({short(cell['error'])})")
                ns.append("–")
        lines.append(f"| {w['label']} | " + " | ".join(cells) + " |")
        counts.append(f"| {w['label']} | " + " | ".join(ns) + " |")
    return "\n".join(lines) + "\n\nRuns per cell:\n\n" + "\n".join(counts)


def machine_info() -> list[str]:
    def first(path, key):
        try:
            for line in Path(path).read_text().splitlines():
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
        except OSError:
            pass
        return "?"

    python3 = shutil.which("python3") or sys.executable
    pyver = subprocess.run([python3, "--version"], capture_output=True, text=True).stdout.strip()
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
    return [
        f"nproc: {os.cpu_count()}",
        f"CPU: {first('/proc/cpuinfo', 'model name')}",
        f"memory: {first('/proc/meminfo', 'MemTotal')}",
        f"OS: {platform.system()} {platform.release()}",
        f"python3: {pyver} ({python3})",
        f"wasmbox: git {rev.strip()}{' (uncommitted changes)' if dirty.strip() else ''}",
        "load average before the run: " + " ".join(f"{x:.2f}" for x in os.getloadavg()),
    ]


def main() -> None:
    enter_venv(sys.argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200, help="timed runs per cell, in-process systems")
    parser.add_argument("--process-runs", type=int, default=30, help="timed runs per cell, a process per run")
    parser.add_argument("--cell-seconds", type=float, default=6.0, help="stop a cell after this long (≥5 runs)")
    parser.add_argument("--systems", default=",".join(k for k, _ in SYSTEMS), help="comma-separated column keys")
    parser.add_argument("--skip-build", action="store_true", help="use the binaries already built")
    parser.add_argument("--profile", default="release", help="the cargo profile to build and run (dev: target/debug)")
    parser.add_argument("--gap-ms", type=float, default=0.0,
                        help="pause between the library columns' runs (the engine's background thread "
                             "then keeps an instance prepared: the prepared path's latency)")
    parser.add_argument("--matrix", action="store_true",
                        help="the session matrix (cold start, warm run, ten commands of one session) "
                             "of lib, monty and lib_js instead of the workload table")
    args = parser.parse_args()
    command = os.environ.get("COMPARE_COMMAND", shlex.join(["python3", *sys.argv]))
    use_profile(args.profile)

    # The load average before our own build: what else this machine was doing.
    info = machine_info()
    install_errors = install_packages()
    if not args.skip_build:
        build(args.profile)
    if args.matrix:
        return main_matrix(args, info, command, install_errors)
    workloads = load_workloads()
    wanted = args.systems.split(",")
    columns = [(k, title) for k, title in SYSTEMS if k in wanted]
    measures = {
        "lib": lambda: measure_lib(workloads, "python", args),
        "lib_js": lambda: measure_lib(workloads, "js", args),
        "cli": lambda: measure_cli(workloads, args),
        "python": lambda: measure_python(workloads, args),
        "monty": lambda: measure_monty(workloads, args),
        "chuk_local": lambda: measure_chuk(workloads, args, "local"),
        "chuk_bwrap": lambda: measure_chuk(workloads, args, "bubblewrap"),
    }
    needs = {"monty": "pydantic-monty", "chuk_local": "chuk-tool-processor", "chuk_bwrap": "chuk-tool-processor"}
    results = {}
    for key, title in columns:
        print(f"measuring {title} ...", file=sys.stderr)
        started = time.perf_counter()
        try:
            if needs.get(key) in install_errors:
                raise NotAvailable(install_errors[needs[key]])
            results[key] = measure = measures[key]()
        except Exception as e:  # NotAvailable, or a system that could not even start
            reason = str(e) if isinstance(e, NotAvailable) else f"{type(e).__name__}: {e}"
            results[key] = measure = {w["name"]: {"error": reason} for w in workloads}
        print(f"  {time.perf_counter() - started:.1f} s", file=sys.stderr)
        if note := measure.get("_note"):
            print(f"  note: {note}", file=sys.stderr)

    (ROOT / "target" / "compare-results.json").write_text(json.dumps(results))
    print("\n".join(f"- {line}" for line in info))
    print(f"- command: `{command}`\n")
    print("p50 / p99 per run in ms (p50 ÷ wasmbox library's p50); n/a cells say why.\n")
    print(report(workloads, results, columns))
    notes = [f"- {title}: {results[key]['_note']}" for key, title in columns if "_note" in results[key]]
    for key, title in columns:
        for name, cell in results[key].items():
            if isinstance(cell, dict) and "error" in cell and len(cell["error"]) > 48:
                notes.append(f"- {title}, {name}: {cell['error']}")
    if notes:
        print("\nNotes:\n\n" + "\n".join(dict.fromkeys(notes)))


def main_matrix(args, info: list[str], command: str, install_errors: dict[str, str]) -> None:
    wanted = args.systems.split(",")
    columns = [(k, title) for k, title in MATRIX_SYSTEMS if k in wanted]
    measures = {
        "lib": lambda: matrix_lib("python", args),
        "lib_js": lambda: matrix_lib("js", args),
        "monty": lambda: matrix_monty(args),
    }
    results = {}
    for key, title in columns:
        print(f"measuring {title} ...", file=sys.stderr)
        started = time.perf_counter()
        try:
            if key == "monty" and "pydantic-monty" in install_errors:
                raise NotAvailable(install_errors["pydantic-monty"])
            results[key] = measures[key]()
        except Exception as e:
            reason = str(e) if isinstance(e, NotAvailable) else f"{type(e).__name__}: {e}"
            results[key] = {row: {"error": reason} for row, _ in MATRIX_ROWS}
        print(f"  {time.perf_counter() - started:.1f} s", file=sys.stderr)
    (ROOT / "target" / "compare-matrix-results.json").write_text(json.dumps(results))
    print("\n".join(f"- {line}" for line in info))
    print(f"- command: `{command}`\n")
    print("p50 / p99 in ms (samples); n/a cells say why.\n")
    print(matrix_report(results, columns))


if __name__ == "__main__":
    main()
