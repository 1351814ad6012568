"""The package's tests run against the wheel installed into a fresh venv
(`cargo xtask test`: target/python/venv), never against this source tree."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _installed_package() -> None:
    import wasmbox

    # An import of python/wasmbox (the source tree) would have no extension module; an
    # import from anywhere but the venv would not test the wheel.
    assert os.path.realpath(wasmbox.__file__).startswith(os.path.realpath(os.environ.get("VIRTUAL_ENV", "/nonexistent"))), (
        f"wasmbox imported from {wasmbox.__file__}, not from the test venv: run the tests with `cargo xtask test`"
    )
