"""docs/python.md's example runs as written: every ```python block, in order, in one namespace, in a scratch folder
(blocks fenced ```python skip are shown, not run: they need a cluster)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from conftest import REPO

PAGE = REPO / "docs" / "python.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.M | re.S)


def test_the_python_page_runs_as_written(tmp_path: Path, monkeypatch) -> None:
    blocks = python_blocks(PAGE.read_text())
    assert len(blocks) >= 4, "the page lost its example"
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for number, block in enumerate(blocks, start=1):
        code = compile(block, f"{PAGE}: python block {number}", "exec")
        exec(code, namespace)  # noqa: S102 -- the page's own example
    figure = tmp_path / "response.png"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", "the example's figure was not written"
    assert os.path.getsize(figure) > 10_000
