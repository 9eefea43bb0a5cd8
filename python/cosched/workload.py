"""Workloads as DataFrames: SWF traces read, written, generated, summarised and fitted.

A workload is a DataFrame with one row per job and the 18 fields of the
Standard Workload Format as columns (:data:`SWF_COLUMNS`, in the format's
order; -1 is "unknown", as in SWF). Its header lines (``; Key: value``) travel
in ``df.attrs["swf_header"]``. The checks are the CLI's: a bad value is refused
with the SWF reader's message and the row's number (from 1).

>>> from cosched import workload
>>> jobs = workload.generate(jobs=200, procs=64, load=0.7, seed=3)
>>> workload.write(jobs, "mine.swf.gz")
>>> print(workload.summary(workload.read("mine.swf.gz")))
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pandas as pd

from . import _native
from ._flags import SettingValue, settings_doc, to_flags

__all__ = ["SWF_COLUMNS", "HyperErlangFit", "fit", "generate", "read", "summary", "write"]

#: The SWF fields, in file order, as column names.
SWF_COLUMNS: list[str] = [
    "job_number",
    "submit_time",
    "wait_time",
    "run_time",
    "allocated_processors",
    "average_cpu_time",
    "used_memory",
    "requested_processors",
    "requested_time",
    "requested_memory",
    "status",
    "user_id",
    "group_id",
    "executable",
    "queue",
    "partition",
    "preceding_job",
    "think_time",
]

_INTEGER_COLUMNS = [c for c in SWF_COLUMNS if c not in ("submit_time", "wait_time", "run_time", "average_cpu_time")]

Workload = pd.DataFrame
PathLike = str | os.PathLike[str]


def _frame(trace: _native.Trace) -> Workload:
    df = pd.DataFrame(trace.rows, columns=SWF_COLUMNS)
    integral = [c for c in _INTEGER_COLUMNS if len(df) and (df[c] % 1 == 0).all()]
    df[integral] = df[integral].astype("int64")
    df.attrs["swf_header"] = list(trace.header)
    df.attrs["description"] = trace.description
    df.attrs["skipped_bad_lines"] = list(trace.skipped_bad_lines)
    df.attrs["unusable"] = [tuple(u) for u in trace.unusable]
    return df


def _rows(df: Workload) -> tuple[list[str], list[list[float]]]:
    missing = [c for c in SWF_COLUMNS if c not in df.columns]
    if missing:
        raise _native.CoschedError(f"the workload has no column {', '.join(missing)} (see cosched.workload.SWF_COLUMNS)")
    rows = df[SWF_COLUMNS].to_numpy(dtype=float).tolist()
    return list(df.attrs.get("swf_header", [])), rows


def read(path: PathLike, *, skip_bad_lines: bool = False) -> Workload:
    """Read an SWF trace, plain or gzip (``cosched workload inspect``'s reader).

    ``skip_bad_lines=True`` skips malformed lines (their numbers in ``df.attrs["skipped_bad_lines"]``)
    instead of raising :class:`cosched.CoschedError` at the first. Jobs that are well formed but
    cannot be simulated are left out and listed in ``df.attrs["unusable"]``.
    """
    return _frame(_native.workload_read(os.fspath(path), skip_bad_lines))


def write(df: Workload, path: PathLike) -> None:
    """Write a workload as SWF (gzip when the name ends in ``.gz``): checked first, then all or nothing."""
    header, rows = _rows(df)
    _native.workload_write(os.fspath(path), header, rows)


def generate(**settings: SettingValue) -> Workload:
    """Generate a workload, as ``cosched workload generate`` does.

    Settings (keyword = default; the flags of ``cosched workload generate``):

    {settings}
    """
    return _frame(_native.workload_generate(to_flags(settings)))


def summary(df: Workload, *, procs: int | None = None) -> str:
    """What ``cosched workload inspect`` prints: sizes, run times, arrivals and offered load on ``procs`` CPUs
    (default: the header's MaxProcs, else the widest job)."""
    header, rows = _rows(df)
    return _native.workload_summary(header, rows, procs)


@dataclass(frozen=True)
class HyperErlangFit:
    """The model fitted to a workload, as ``cosched workload fit`` saves it by default (shared arrivals)."""

    #: The parameter file's text, which ``generate(model="hyper-erlang", params=FILE)`` reads back.
    parameters: str
    #: The fit, readable (what ``cosched workload fit`` prints).
    description: str

    def save(self, path: PathLike) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.parameters)


def fit(df: Workload, *, procs: int | None = None) -> HyperErlangFit:
    """Fit a model to a workload, as ``cosched workload fit`` does (shared arrivals, daily cycle)."""
    header, rows = _rows(df)
    parameters, description = _native.workload_fit(header, rows, procs)
    return HyperErlangFit(parameters=parameters, description=description)


generate.__doc__ = (generate.__doc__ or "").replace("{settings}", settings_doc("workload generate").lstrip())
