"""Shared by the Python package's tests: the `cosched` binary the results are compared with."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cosched_bin() -> Path:
    """The CLI built from this checkout ($COSCHED_BIN, else target/debug or target/release): the package must
    give what it gives."""
    candidates = [os.environ.get("COSCHED_BIN")] if os.environ.get("COSCHED_BIN") else []
    candidates += [str(REPO / "target/debug/cosched"), str(REPO / "target/release/cosched")]
    for candidate in candidates:
        if Path(candidate).is_file():
            return Path(candidate)
    pytest.fail(f"no cosched binary: build it (cargo build -p cosched) or set COSCHED_BIN; looked at {candidates}")


@pytest.fixture
def run_cli(cosched_bin: Path):
    """Run the CLI; return its completed process (failures are the test's to judge)."""

    def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(cosched_bin), *args], cwd=cwd, capture_output=True, text=True, timeout=600)

    return run


@pytest.fixture
def ctrl_c_soon():
    """Press Ctrl-C (SIGINT to this process) in half a second. A shell that starts the suite in the background
    leaves SIGINT ignored, and Python then never turns it into KeyboardInterrupt: Python's own handler is put
    back for the test."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
