"""The wheel scripts/python-package builds is one abi3 wheel (CPython 3.9 and every later one): its native module
loads and simulates in each other CPython this machine has, not only in the one it was built with."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
OTHER_PYTHONS = ["python3.9", "python3.10", "python3.12", "python3.13"]

# Loads the native module alone (the package's __init__ needs pandas, which a bare interpreter may lack) and runs a
# small simulation through it, as the package does.
PROBE = """
import importlib.machinery, importlib.util, sys
path = sys.argv[1]
loader = importlib.machinery.ExtensionFileLoader("cosched._native", path)
spec = importlib.util.spec_from_file_location("cosched._native", path, loader=loader)
native = importlib.util.module_from_spec(spec)
loader.exec_module(native)
texts = native.simulate(["--jobs", "5", "--nodes", "4", "--schemes", "Local", "--runtime-scale", "0.02", "--quiet"])
print(sys.version_info[:2], native.__version__, texts.summary_csv.splitlines()[0].split(",")[0])
"""


def other_pythons() -> list[str]:
    """Interpreters other than this one that run: on PATH, or pyenv's versions (whose shims refuse to run a
    version that is not selected)."""
    candidates = [p for p in OTHER_PYTHONS if shutil.which(p)]
    candidates += [str(p) for p in sorted(Path.home().glob(".pyenv/versions/3.*/bin/python3"))]
    found: dict[str, str] = {}
    for python in candidates:
        probe = subprocess.run([python, "-c", "import sys; print(sys.version_info[:2] >= (3, 9), sys.version[:4])"],
                               capture_output=True, text=True)
        version = probe.stdout.split()[-1] if probe.returncode == 0 and probe.stdout.startswith("True") else None
        if version and version != sys.version[:4] and version not in found:
            found[version] = python
    return list(found.values())


def built_wheel() -> Path:
    wheels = sorted((REPO / "target" / "wheels").glob("cosched-*.whl"))
    if not wheels:
        pytest.fail("no wheel in target/wheels: scripts/python-package builds it")
    return wheels[-1]


def test_the_wheel_is_tagged_abi3_for_cpython_3_9_and_later() -> None:
    name = built_wheel().name
    assert "-cp39-abi3-" in name, name


def test_the_native_module_simulates_in_every_other_cpython(tmp_path: Path) -> None:
    with zipfile.ZipFile(built_wheel()) as wheel:
        member = next(m for m in wheel.namelist() if m.startswith("cosched/_native") and m.endswith(".so"))
        wheel.extract(member, tmp_path)
    module = tmp_path / member
    found = other_pythons()
    if not found:
        print("SKIPPED test_the_native_module_simulates_in_every_other_cpython: no other CPython", file=sys.stderr)
        pytest.skip("no other CPython on this machine")
    for python in found:
        done = subprocess.run([python, "-c", PROBE, str(module)], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{python}: {done.stderr}"
        assert done.stdout.strip().endswith("scheme"), f"{python}: {done.stdout}"
