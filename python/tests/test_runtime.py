"""The runtime client (cosched.runtime) against a real `cosched up`, as root: submit, status, kill and history, and
DataFrames whose column types do not depend on their values."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from cosched import CoschedError
from cosched.runtime import JOB_COLUMNS, Client


def wait_for(what: str, check, timeout_s: float = 30.0):
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result is not None and (not isinstance(result, bool) or result):
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout_s} s")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def controller(cosched_bin: Path) -> Iterator[Client]:
    if os.geteuid() != 0:
        print("SKIPPED test_runtime: needs root (cgroups, a controller's state directory)", file=sys.stderr)
        pytest.skip("needs root")
    folder = Path(tempfile.mkdtemp(prefix="cosched-py-runtime-"))
    node = f"py{uuid.uuid4().hex[:8]}"
    socket = folder / "sock"
    args = [str(cosched_bin), "up", "--node", node, "--monitor", "off", "--state-dir", str(folder / "state")]
    log = open(folder / "up.log", "wb")
    env = {**os.environ, "COSCHED_CONFIG": "none"}  # the test's settings, never the host's
    daemon = subprocess.Popen([*args, "--socket", str(socket)], stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env)
    client = Client(socket)

    def agent_connected():
        try:
            return any(node["connected"] for node in client._ask({"op": "status"})["nodes"])
        except CoschedError:
            return False

    wait_for("the controller to answer and its agent to connect", agent_connected)
    yield client
    for job in client.status().query("state in ['queued', 'running', 'suspended']")["job"]:
        client.kill(int(job))
    wait_for("every job to end", lambda: bool(client.status().query("state in ['running', 'suspended']").empty))
    daemon.kill()
    daemon.wait()
    for root in (Path("/sys/fs/cgroup/cosched") / node, Path("/sys/fs/cgroup/freezer/cosched") / node):
        for folder_path, _, _ in sorted(os.walk(root, topdown=False)):
            try:
                os.rmdir(folder_path)
            except OSError:
                pass


def assert_typed(frame: pd.DataFrame) -> None:
    assert list(frame.columns) == list(JOB_COLUMNS)
    assert {c: str(t) for c, t in frame.dtypes.items()} == JOB_COLUMNS


def test_a_job_is_submitted_named_and_found_in_status_and_history(controller: Client) -> None:
    job = controller.submit(["sh", "-c", "exit 3"], name="py-exit", time_limit_s=600)
    def ended_row():
        history = controller.history(jobs=[job])
        return history.iloc[0] if not history.empty and history["state"].iloc[0] == "failed" else None

    ended = wait_for("the job to end", ended_row)
    assert (ended["name"], ended["exit_code"], ended["time_limit_s"]) == ("py-exit", 3, 600)
    assert ended["reason"] == "exited with status 3"
    assert ended["user"] == "root" and ended["ended"] >= ended["submitted"]
    assert_typed(controller.history(jobs=[job]))
    assert_typed(controller.status())


def test_a_killed_job_ends_killed_and_an_empty_table_keeps_its_types(controller: Client) -> None:
    job = controller.submit(["sleep", "300"])
    assert controller.kill(job) in ("killing", "killed")
    wait_for("the kill", lambda: bool(controller.history(jobs=[job])["state"].iloc[0] == "killed"))
    nothing = controller.history(jobs=[job], states=["finished"])
    assert nothing.empty
    assert_typed(nothing)
    week = controller.history(since="now-7days", users=["root"])
    assert job in set(week["job"])


def test_refusals_are_errors_with_the_controllers_reason(controller: Client) -> None:
    with pytest.raises(CoschedError, match="no job 999999|job 999999"):
        controller.kill(999_999)
    with pytest.raises(CoschedError, match="unknown user"):
        controller.history(users=["no-such-user-here"])
    with pytest.raises(CoschedError, match="list of words"):
        controller.submit("sleep 1")  # type: ignore[arg-type]
    with pytest.raises(CoschedError, match="socket"):
        Client("/nonexistent/cosched.sock").status()


def test_output_files_take_the_tasks_output(controller: Client, tmp_path: Path) -> None:
    job = controller.submit(
        ["sh", "-c", "echo out $COSCHED_RANK; echo err >&2"], tasks=2, cwd=tmp_path, output="o-%j.%t", error="e-%j"
    )
    wait_for("the job to end", lambda: list(controller.history(jobs=[job])["state"]) == ["finished"])
    assert [(tmp_path / f"o-{job}.{rank}").read_text() for rank in range(2)] == ["out 0\n", "out 1\n"]
    assert (tmp_path / f"e-{job}").read_text() == "err\nerr\n"
    with pytest.raises(CoschedError, match="unknown escape %A"):
        controller.submit(["true"], output="x-%A")
