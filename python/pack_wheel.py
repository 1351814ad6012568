"""Packs the wheel `cargo xtask test` installs, from an extension cargo already built.

Users build the wheel with maturin (docs/python.md). CI cannot: `maturin build` resolves
the features of this package alone, which differ from the workspace test build's, and
would compile wasmtime a second time. `cargo test --workspace` builds the same extension
as the example `wasmbox_native` (python/Cargo.toml), inside its own invocation; this
script lays it out as maturin does: the `wasmbox/` package, the extension as
`wasmbox/_native.abi3.so`, and the dist-info (METADATA, WHEEL, RECORD).

    python3 python/pack_wheel.py target/debug/examples/libwasmbox_native.so target/python/wheels
"""

from __future__ import annotations

import base64
import hashlib
import pathlib
import re
import sys
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent
TAG = "cp310-abi3-linux_x86_64"


def version() -> str:
    workspace = (ROOT.parent / "Cargo.toml").read_text()
    match = re.search(r'^\[workspace\.package\][^\[]*?^version = "([^"]+)"', workspace, re.M | re.S)
    if not match:
        raise SystemExit("no [workspace.package] version in Cargo.toml")
    return match.group(1)


def metadata(version: str) -> str:
    project = (ROOT / "pyproject.toml").read_text()
    description = re.search(r'^description = "([^"]*)"', project, re.M)
    requires = re.search(r'^requires-python = "([^"]*)"', project, re.M)
    lines = [
        "Metadata-Version: 2.1",
        "Name: wasmbox",
        f"Version: {version}",
        f"Summary: {description.group(1) if description else ''}",
        "License: Apache-2.0",
        f"Requires-Python: {requires.group(1) if requires else '>=3.10'}",
        "Provides-Extra: pydantic",
        "Requires-Dist: pydantic>=2; extra == 'pydantic'",
        "Description-Content-Type: text/markdown",
        "",
        (ROOT / "README.md").read_text(),
    ]
    return "\n".join(lines)


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main(extension: str, out_dir: str) -> None:
    v = version()
    dist_info = f"wasmbox-{v}.dist-info"
    files: list[tuple[str, bytes]] = []
    for path in sorted((ROOT / "wasmbox").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files.append((path.relative_to(ROOT).as_posix(), path.read_bytes()))
    files.append(("wasmbox/_native.abi3.so", pathlib.Path(extension).read_bytes()))
    files.append((f"{dist_info}/METADATA", metadata(v).encode()))
    wheel = f"Wheel-Version: 1.0\nGenerator: wasmbox pack_wheel.py\nRoot-Is-Purelib: false\nTag: {TAG}\n"
    files.append((f"{dist_info}/WHEEL", wheel.encode()))
    record = "\n".join([record_line(n, d) for n, d in files] + [f"{dist_info}/RECORD,,", ""])
    files.append((f"{dist_info}/RECORD", record.encode()))

    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"wasmbox-{v}-{TAG}.whl"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    print(target)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
