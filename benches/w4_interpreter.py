#!/usr/bin/env python3
"""W4 inside the interpreter: the Python guest's CPU loop against native CPython, and a
libpython post-processed by binaryen's wasm-opt (docs/performance.md, "W4: the interpreter").

    # time W4 in guests built into directories (each holds a python.wasm), alternating
    python3 benches/w4_interpreter.py time target/guests target/w4-opt --rounds 4 --runs 5

    # write DIR/python.wasm: target/guests/python.wasm with its libpython run through wasm-opt
    python3 benches/w4_interpreter.py optimize target/guests/python.wasm target/w4-opt \
        --wasm-opt guests/js/node_modules/.bin/wasm-opt --passes=-O3

    # the component's core modules (index, size, name)
    python3 benches/w4_interpreter.py modules target/guests/python.wasm

`time` runs the loop through `wasmbox run` (default `target/debug/wasmbox`, the guest
chosen with WASMBOX_GUEST_DIR, precompiled first) and reports per guest: the loop's time
as the guest's `time.perf_counter()` sees it (wall), and the CPU time of the whole
`wasmbox run` process (user + system, from wait4) minus that of a `1 + 1` run, so what
the loop alone cost the CPU. On a shared VM wall times swing with the neighbours; the CPU
column is the one to compare. Native CPython runs the same loop with `time.thread_time()`.

`optimize` replaces one core module of the component (libpython: the module that exports
`_PyEval_EvalFrameDefault`) by wasm-opt's output; nothing else in the component refers to
a module by byte offset, so splicing the section is enough. The features are those
componentize-py's libpython uses (extended-const for its GOT initialisers).
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

LOOP = "sum(i * i for i in range(1_000_000))"
TIMED = f"import time\nt0 = time.perf_counter()\n{LOOP}\n(time.perf_counter() - t0) * 1000\n"
TRIVIAL = "1 + 1\n"
WASM_OPT_FEATURES = [
    "--enable-bulk-memory", "--enable-mutable-globals", "--enable-sign-ext",
    "--enable-nontrapping-float-to-int", "--enable-reference-types", "--enable-multivalue",
    "--enable-extended-const",
]


def leb128(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def encode_leb128(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def core_modules(component: bytes) -> list[tuple[int, int, int]]:
    """(section start, payload start, payload end) of each top-level core module."""
    if component[4:8] != b"\x0d\x00\x01\x00":
        sys.exit("not a component (wrong preamble)")
    found, pos = [], 8
    while pos < len(component):
        section_id = component[pos]
        size, payload = leb128(component, pos + 1)
        if section_id == 1:
            found.append((pos, payload, payload + size))
        pos = payload + size
    return found


def module_name(module: bytes) -> str:
    """The dylink library name, guessed from the module's name section, else ''."""
    marker = module.rfind(b"\x04name")
    if marker < 0:
        return ""
    pos = marker + 5
    if pos < len(module) and module[pos] == 0:  # module-name subsection
        _, pos = leb128(module, pos + 1)
        length, pos = leb128(module, pos)
        return module[pos:pos + length].decode("utf-8", "replace")
    return ""


def libpython_index(component: bytes) -> int:
    hits = [k for k, (_, start, end) in enumerate(core_modules(component))
            if b"_PyEval_EvalFrameDefault" in component[start:end] and b"dylink.0" in component[start:start + 64]]
    if len(hits) != 1:
        sys.exit(f"expected one libpython module, found {hits}")
    return hits[0]


def cmd_modules(args: argparse.Namespace) -> None:
    data = open(args.component, "rb").read()
    for k, (_, start, end) in enumerate(core_modules(data)):
        print(k, end - start, module_name(data[start:end]))


def cmd_optimize(args: argparse.Namespace) -> None:
    data = open(args.component, "rb").read()
    index = libpython_index(data)
    section, start, end = core_modules(data)[index]
    os.makedirs(args.out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "libpython.wasm"), os.path.join(tmp, "libpython.opt.wasm")
        open(src, "wb").write(data[start:end])
        subprocess.run([args.wasm_opt, *WASM_OPT_FEATURES, *args.passes.split(), src, "-o", dst], check=True)
        new = open(dst, "rb").read()
    out = data[:section] + b"\x01" + encode_leb128(len(new)) + new + data[end:]
    path = os.path.join(args.out_dir, "python.wasm")
    open(path, "wb").write(out)
    print(f"{path}: module {index} {end - start} -> {len(new)} bytes, component {len(data)} -> {len(out)}")


def run(argv: list[str], env: dict) -> tuple[float, str]:
    """The process's CPU seconds (user + system, of the reaped child) and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        sys.exit(f"{' '.join(argv)} failed: {proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, proc.stdout


def time_guest(wasmbox: str, guest_dir: str, runs: int, scripts: dict[str, str]) -> dict:
    env = dict(os.environ, WASMBOX_GUEST_DIR=os.path.abspath(guest_dir))
    loop_wall, loop_cpu, trivial_cpu = [], [], []
    for _ in range(runs):
        for kind in ("w4", "w1"):
            cpu, out = run([wasmbox, "run", scripts[kind], "--json"], env)
            outcome = json.loads(out)
            if outcome["status"] != "ok":
                sys.exit(f"{guest_dir}: {outcome}")
            if kind == "w4":
                loop_wall.append(float(outcome["value"]))
                loop_cpu.append(cpu * 1000)
            else:
                trivial_cpu.append(cpu * 1000)
    return {
        "wall_ms": statistics.median(loop_wall),
        "cpu_ms": statistics.median(loop_cpu) - statistics.median(trivial_cpu),
    }


def native(python: str) -> tuple[str, float]:
    """The interpreter's version and its best of 5 loops, in CPU ms."""
    code = ("import platform\n"
            f"import time\nbest = 1e9\nfor _ in range(5):\n    t = time.thread_time(); {LOOP}\n"
            "    best = min(best, time.thread_time() - t)\nprint(platform.python_version(), best * 1000)")
    version, best = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return version, float(best)


def cmd_time(args: argparse.Namespace) -> None:
    env = dict(os.environ)
    env.setdefault("WASMBOX_CACHE_DIR", os.path.abspath("target/wasmbox-cache"))
    os.environ.update(env)
    for guest_dir in args.guest_dirs:
        subprocess.run([args.wasmbox, "precompile", "--lang", "python"],
                       env=dict(env, WASMBOX_GUEST_DIR=os.path.abspath(guest_dir)), check=True)
    with tempfile.TemporaryDirectory() as tmp:
        scripts = {"w4": os.path.join(tmp, "w4.py"), "w1": os.path.join(tmp, "w1.py")}
        open(scripts["w4"], "w").write(TIMED)
        open(scripts["w1"], "w").write(TRIVIAL)
        for r in range(1, args.rounds + 1):
            cells = [f"round {r}"]
            for guest_dir in args.guest_dirs:
                t = time_guest(args.wasmbox, guest_dir, args.runs, scripts)
                cells.append(f"{guest_dir}: loop {t['wall_ms']:.1f} ms wall, {t['cpu_ms']:.1f} ms CPU")
            for python in args.native:
                version, best = native(python)
                cells.append(f"native {version}: {best:.1f} ms CPU")
            cells.append(f"load {os.getloadavg()[0]:.1f}")
            print(" | ".join(cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("modules", help="list the component's core modules")
    p.add_argument("component")
    p.set_defaults(func=cmd_modules)
    p = sub.add_parser("optimize", help="run libpython through wasm-opt")
    p.add_argument("component")
    p.add_argument("out_dir")
    p.add_argument("--wasm-opt", default=shutil.which("wasm-opt") or "wasm-opt")
    p.add_argument("--passes", default="-O3", help="wasm-opt's passes and options, one string")
    p.set_defaults(func=cmd_optimize)
    p = sub.add_parser("time", help="time W4 in each guest directory, alternating")
    p.add_argument("guest_dirs", nargs="+")
    p.add_argument("--wasmbox", default="target/debug/wasmbox")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--native", action="append", default=[], help="a native python3 to time too (repeatable)")
    p.set_defaults(func=cmd_time)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
