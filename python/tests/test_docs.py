"""docs/python.md's example runs as written: every ```python block, in order, in a scratch folder, as a notebook runs
it, block by block in one namespace; and its Dask example alone as a script run with python3, as a user saves it
(Dask's workers then import it). Blocks fenced ```python skip are shown, not run: they need a cluster."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO

PAGE = REPO / "docs" / "python.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.M | re.S)


def check_figure(folder: Path) -> None:
    figure = folder / "response.png"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", "the example's figure was not written"
    assert os.path.getsize(figure) > 10_000


def test_the_python_page_runs_as_a_notebook_runs_it(tmp_path: Path, monkeypatch) -> None:
    blocks = python_blocks(PAGE.read_text())
    assert len(blocks) >= 4, "the page lost its example"
    monkeypatch.chdir(tmp_path)
    # A notebook's cells run as __main__, in one namespace.
    namespace: dict = {"__name__": "__main__"}
    for number, block in enumerate(blocks, start=1):
        code = compile(block, f"{PAGE}: python block {number}", "exec")
        exec(code, namespace)  # noqa: S102 -- the page's own example
    check_figure(tmp_path)


def test_the_dask_example_runs_as_a_script(tmp_path: Path) -> None:
    # Saved on its own and run with python3, as a user runs it: Dask's workers are processes that import the script.
    dask_blocks = [block for block in python_blocks(PAGE.read_text()) if "LocalCluster" in block]
    assert len(dask_blocks) == 1, "the page lost its Dask example"
    script = tmp_path / "example.py"
    script.write_text(dask_blocks[0])
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"python3 example.py failed:\n{done.stdout}\n{done.stderr}"
    assert "mean_response_s" in done.stdout, done.stdout


def test_the_policy_examples_run_as_scripts(tmp_path: Path) -> None:
    # Each saved alone and run with python3: a policy's example needs nothing from the blocks before it.
    blocks = [block for block in python_blocks(PAGE.read_text()) if "cosched.gym" in block]
    assert len(blocks) == 2, "the page lost its policy examples"
    outputs = []
    for number, block in enumerate(blocks, start=1):
        script = tmp_path / f"policy{number}.py"
        script.write_text(block)
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"python3 {script.name} failed:\n{done.stdout}\n{done.stderr}"
        outputs.append(done.stdout)
    assert "shortest first" in outputs[0] and "total reward" in outputs[1], outputs
