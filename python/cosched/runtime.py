"""The real coscheduler from Python: submit, status, kill and history through the controller's Unix socket.

Tables come back as pandas DataFrames whose columns have fixed types, whatever their values (``Int64`` and
``Float64`` with missing values as ``<NA>``, ``string``, times as UTC ``datetime64``)::

    from cosched.runtime import Client

    cosched = Client()                      # $COSCHED_SOCKET, else /run/cosched/cosched.sock
    job = cosched.submit(["./solver", "in.dat"], tasks=8, name="nightly", time_limit_s=3600)
    cosched.status()                        # the jobs `cosched status` lists
    cosched.history(since="now-7days")      # ended jobs too, as `cosched history`
    cosched.kill(job)

The controller knows the caller from the socket (the kernel's peer credentials), as it knows a user of the CLI:
the same permissions apply. A controller on another host (MUNGE over TCP) is reached with the ``cosched``
command (``--controller``), not from here.
"""

from __future__ import annotations

import json
import os
import pwd
import socket
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from ._native import CoschedError

__all__ = ["Client", "JOB_COLUMNS"]

#: The largest reply read (the controller's own bound on a reply line).
MAX_REPLY_BYTES = 16 << 20
DEFAULT_SOCKET = "/run/cosched/cosched.sock"

#: The columns of :meth:`Client.status` and :meth:`Client.history`, with their pandas types.
JOB_COLUMNS: dict[str, str] = {
    "job": "Int64",
    "name": "string",
    "user": "string",
    "uid": "Int64",
    "class": "string",
    "mode": "string",
    "state": "string",
    "exit_code": "Int64",
    "reason": "string",
    "tasks": "Int64",
    "nodes": "string",
    "cpu_s": "Float64",
    "slice_share": "Float64",
    "time_limit_s": "Int64",
    "in_slot_s": "Float64",
    "submitted": "datetime64[ns, UTC]",
    "started": "datetime64[ns, UTC]",
    "ended": "datetime64[ns, UTC]",
    "command": "string",
}


class Client:
    """A user's connection to a cosched controller on this host, one request per call."""

    def __init__(self, socket_path: str | os.PathLike[str] | None = None, *, timeout_s: float = 60.0) -> None:
        self.socket_path = os.fspath(socket_path or os.environ.get("COSCHED_SOCKET", DEFAULT_SOCKET))
        self.timeout_s = timeout_s

    def submit(
        self,
        command: Sequence[str],
        *,
        tasks: int = 1,
        nodes: int | None = None,
        job_class: str = "batch",
        local: bool = False,
        mpi: bool = False,
        mem_bytes: int = 0,
        name: str = "",
        time_limit_s: int | None = None,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        output: str | None = None,
        error: str | None = None,
        append: bool = False,
    ) -> int:
        """Submit ``command`` as ``cosched submit`` does and return the job's id. The job gets ``env`` (default:
        this process's environment without its ``COSCHED_`` variables) and runs in ``cwd`` (default: here).
        ``output``, ``error`` and ``append`` are ``-o``, ``-e`` and ``--open-mode append``: file name patterns
        (``%j``, ``%t``, ``%N``, ``%u``, ``%x``) opened by each task as the user."""
        if isinstance(command, str) or not command:
            raise CoschedError("command is a list of words, the program first: ['./solver', 'in.dat']")
        environment = dict(os.environ) if env is None else dict(env)
        request: dict[str, Any] = {
            "op": "submit",
            "tasks": tasks,
            "nodes": nodes,
            "class": job_class,
            "mem_bytes": mem_bytes,
            "local": local,
            "mpi": mpi,
            "argv": [str(word) for word in command],
            "cwd": os.fspath(cwd) if cwd is not None else os.getcwd(),
            "env": sorted((k, v) for k, v in environment.items() if not k.startswith("COSCHED_")),
        }
        if name:
            request["name"] = name
        if time_limit_s is not None:
            request["time_limit_s"] = time_limit_s
        files = {"output": output, "error": error}
        if output is not None or error is not None:
            request["output_files"] = {k: v for k, v in files.items() if v is not None} | {"append": append}
        mask = os.umask(0o077)
        os.umask(mask)
        try:
            return int(self._ask({**request, "umask": mask})["job"])
        except CoschedError as e:
            # A controller older than the mask: the job runs with the agent's, as it did.
            if "unknown field" in str(e) and "output_files" in request:
                raise CoschedError(f"{e} (the controller is older than this client: output, error and append need a newer one)") from e
            if "unknown field `umask`" not in str(e):
                raise
            return int(self._ask(request)["job"])

    def kill(self, job: int, *, signal: str | None = None) -> str:
        """End a job as ``cosched kill`` does (SIGTERM, then SIGKILL), or send it only ``signal``; returns what
        the controller says it did ("killing", "killed", or the signal sent)."""
        if signal is not None:
            return str(self._ask({"op": "signal", "job": job, "signal": signal})["signal"])
        return str(self._ask({"op": "kill", "job": job})["state"])

    def status(self) -> pd.DataFrame:
        """The jobs ``cosched status`` lists: those not over, and ended ones for the controller's
        ``--keep-finished-s``; one row per job, columns :data:`JOB_COLUMNS`."""
        return jobs_frame(self._ask({"op": "status"})["jobs"])

    def history(
        self,
        *,
        jobs: Iterable[int] = (),
        users: Iterable[int | str] = (),
        states: Iterable[str] = (),
        since: str | pd.Timestamp | None = None,
        until: str | pd.Timestamp | None = None,
        limit: int | None = None,
    ) -> pd.DataFrame:
        """Jobs as ``cosched history`` lists them (ended ones until the controller's ``--keep-history-days``),
        oldest first. ``since`` keeps jobs that ended at or after it (or are not over), ``until`` jobs submitted
        before it: a Timestamp, or text pandas reads (``"2026-11-01"``, UTC unless it names a zone) or
        ``"now-7days"``-like text as the CLI's -S takes. Users are names or uids."""
        request: dict[str, Any] = {
            "op": "history",
            "jobs": [int(j) for j in jobs],
            "users": [_uid(u) for u in users],
            "states": [s.strip().lower() for s in states],
            "since_unix_ms": _unix_ms(since),
            "until_unix_ms": _unix_ms(until),
        }
        if limit is not None:
            request["limit"] = limit
        return jobs_frame(self._ask(request)["jobs"])

    def _ask(self, request: Mapping[str, Any]) -> dict[str, Any]:
        line = json.dumps(request, separators=(",", ":")).encode() + b"\n"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(self.timeout_s)
            try:
                s.connect(self.socket_path)
            except OSError as e:
                raise CoschedError(f"the controller's socket {self.socket_path}: {e} (is cosched up running?)") from e
            s.sendall(line)
            reply = _read_line(s)
        answer = json.loads(reply)
        if not answer.get("ok"):
            raise CoschedError(str(answer.get("error", "the controller refused the request")))
        return dict(answer.get("data") or {})


def _read_line(s: socket.socket) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = s.recv(1 << 16)
        if not chunk:
            raise CoschedError("the controller closed the connection without a reply")
        newline = chunk.find(b"\n")
        chunks.append(chunk if newline < 0 else chunk[:newline])
        size += len(chunks[-1])
        if size > MAX_REPLY_BYTES:
            raise CoschedError(f"a reply longer than {MAX_REPLY_BYTES} bytes")
        if newline >= 0:
            return b"".join(chunks)


def _uid(user: int | str) -> int:
    if isinstance(user, int) or str(user).isdigit():
        return int(user)
    try:
        return pwd.getpwnam(str(user)).pw_uid
    except KeyError:
        raise CoschedError(f"unknown user {user!r}") from None


def _unix_ms(when: str | pd.Timestamp | None) -> int | None:
    if when is None:
        return None
    text = str(when).strip()
    if isinstance(when, str) and text.startswith("now"):
        offset = text[3:]
        delta = pd.Timedelta(0) if not offset else pd.Timedelta(offset.replace("days", "D").replace("day", "D"))
        stamp = pd.Timestamp.now(tz="UTC") + delta
    else:
        stamp = pd.Timestamp(when)
        stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return int(stamp.value // 1_000_000)


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def jobs_frame(jobs: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The controller's jobs (``status`` or ``history`` JSON) as a DataFrame of :data:`JOB_COLUMNS`, typed the same
    whatever the values (an empty table too)."""
    names = {uid: _user_name(uid) for uid in {int(j["uid"]) for j in jobs}}
    rows = [
        {
            "job": j["id"],
            "name": j.get("name") or None,
            "user": names[int(j["uid"])],
            "uid": j["uid"],
            "class": j["class"],
            "mode": j["mode"],
            "state": j["state"],
            "exit_code": j.get("exit_code"),
            "reason": j.get("error"),
            "tasks": j["tasks"],
            "nodes": ",".join(p["node"] for p in j.get("placement", [])) or None,
            "cpu_s": j["cpu_ns"] / 1e9,
            "slice_share": j["slice_share"],
            "time_limit_s": j.get("time_limit_s"),
            "in_slot_s": j.get("in_slot_ms", 0) / 1e3 if j.get("time_limit_s") is not None else None,
            "submitted": j["submitted_unix_ms"],
            "started": j.get("started_unix_ms"),
            "ended": j.get("ended_unix_ms"),
            "command": j["command"],
        }
        for j in jobs
    ]
    frame = pd.DataFrame(rows, columns=list(JOB_COLUMNS))
    for column, dtype in JOB_COLUMNS.items():
        if dtype.startswith("datetime64"):
            frame[column] = pd.to_datetime(frame[column].astype("Float64"), unit="ms", utc=True).astype(dtype)
        else:
            frame[column] = frame[column].astype(dtype)
    return frame
