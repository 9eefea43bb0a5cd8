"""cosched from Python: simulate time-sharing schemes for parallel jobs and get pandas DataFrames.

>>> import cosched
>>> result = cosched.simulate(schemes=["local", "gs"], jobs=50)
>>> result.summary[["scheme", "mean_response_s", "delivered_utilization"]]

Every setting is a flag of the ``cosched`` command written as a keyword
(``runtime_scale=0.1`` is ``--runtime-scale 0.1``), parsed by the command's own
parser: the defaults, the checks and the error messages are the CLI's, and a
DataFrame holds what the CLI's CSV file of the same name holds. Simulations run
in-process with the GIL released; Ctrl-C stops them.

- :func:`simulate`: schemes side by side on one workload (``cosched sim``).
- :func:`study`: an experiment of the reference study (``cosched study eN``);
  :func:`cosched.dask.study` spreads its runs over a Dask cluster.
- :mod:`cosched.workload`: SWF traces read, written, generated, summarised, fitted.
- :mod:`cosched.gym`: admission decided in Python, as a callback or a Gymnasium environment.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from collections.abc import Sequence
from typing import Any

import pandas as pd

from . import _native
from ._flags import SettingValue, settings_doc, to_flags
from ._native import CoschedError

__all__ = ["CoschedError", "SimResult", "StudyResult", "simulate", "study", "__version__"]
__version__: str = _native.__version__


#: The pandas type of each kind of column the CLI's tables declare (``cosched_lab::csv::Kind``).
_DTYPES = {"int": "Int64", "float": "Float64", "text": "string", "flag": "boolean"}


def _frame(csv_text: str, kinds: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """A DataFrame of one of the CLI's CSV files, each column typed by what the table declares it holds, never
    by its values: a float column whose values happen to be whole, or a table without rows, keeps its types.
    An empty field is ``<NA>`` (missing, or a non-finite number as the CLI writes it), except in text columns."""
    dtypes = {name: _DTYPES[kind] for name, kind in kinds}
    missing = {name: [""] for name, kind in kinds if kind != "text"}
    return pd.read_csv(
        io.StringIO(csv_text),
        dtype=dtypes,
        keep_default_na=False,
        na_values=missing,
        true_values=["true"],
        false_values=["false"],
        float_precision="round_trip",
    )


@dataclass(frozen=True)
class SimResult:
    """What :func:`simulate` returns: the content of ``cosched sim``'s output folder."""

    #: One row per scheme: ``summary.csv`` (mean response, wait, utilization, saturation, CPU time...).
    summary: pd.DataFrame
    #: One row per finished job per scheme: ``jobs.csv``.
    jobs: pd.DataFrame
    #: ``summary.json``: the command, the workload, every configuration and every run's summary.
    document: dict[str, Any] = field(repr=False)
    #: The exact text of ``summary.csv`` and ``jobs.csv``, byte for byte the CLI's.
    summary_csv: str = field(repr=False)
    jobs_csv: str = field(repr=False)
    #: Per scheme, the exact text of ``batsim/SCHEME_jobs.csv``: its jobs in Batsim's ``jobs.csv`` format, which
    #: evalys reads (``JobSet.from_csv``); docs/batsim.md says what its columns mean when jobs share CPUs.
    batsim_csv: dict[str, str] = field(default_factory=dict, repr=False)
    #: With ``jitter_draws=N``: ``jitter.csv``, each scheme's answer in each draw with its arrivals jittered, beside
    #: its answer on the jobs as given (docs/model.md, "How far to believe one answer"); ``None`` without.
    jitter: pd.DataFrame | None = field(default=None, repr=False)

    @staticmethod
    def _of(texts: Any, **document_extra: Any) -> SimResult:
        """The result of the native module's texts; ``document_extra`` adds entries to ``summary.json``'s."""
        return SimResult(
            summary=_frame(texts.summary_csv, texts.summary_kinds),
            jobs=_frame(texts.jobs_csv, texts.jobs_kinds),
            document={**json.loads(texts.summary_json), **document_extra},
            summary_csv=texts.summary_csv,
            jobs_csv=texts.jobs_csv,
            batsim_csv=dict(texts.batsim_jobs_csv),
            jitter=_frame(texts.jitter_csv, texts.jitter_kinds) if texts.jitter_csv else None,
        )

    def batsim(self, scheme: str) -> pd.DataFrame:
        """A scheme's jobs in Batsim's ``jobs.csv`` format (``allocated_resources`` as text, e.g. ``0-3 8``)."""
        if scheme not in self.batsim_csv:
            raise CoschedError(f"no scheme {scheme!r} in this result; it has {', '.join(self.batsim_csv)}")
        return pd.read_csv(io.StringIO(self.batsim_csv[scheme]), dtype={"allocated_resources": str, "metadata": str})


def simulate(*, args: Sequence[str] = (), progress: bool = False, **settings: SettingValue) -> SimResult:
    """Simulate schemes side by side on one workload, as ``cosched sim`` does, writing nothing.

    ``args`` takes flags as the command line writes them (``["--nodes", "64", "--fast"]``), before the
    keyword settings. ``progress=True`` prints the CLI's progress lines on standard error.
    Raises :class:`CoschedError` with the CLI's message for a bad setting or input.

    Settings (keyword = default; the flags of ``cosched sim``):

    {settings}
    """
    if "out" in settings:
        raise CoschedError("simulate() writes nothing: drop out= (the returned SimResult holds the results)")
    flags = [*args, *to_flags(settings)]
    if not progress and "--quiet" not in flags:
        flags.append("--quiet")
    return SimResult._of(_native.simulate(flags))


@dataclass(frozen=True)
class StudyResult:
    """What :func:`study` returns: the tables of ``cosched study eN``'s output folder."""

    #: One row per run: ``runs.csv``.
    runs: pd.DataFrame
    #: One row per point (means over replications with 95 % intervals): ``points.csv``.
    points: pd.DataFrame
    #: The study's table, ``table.md`` (Markdown), as the CLI prints it.
    table: str = field(repr=False)
    runs_csv: str = field(repr=False)
    points_csv: str = field(repr=False)

    @staticmethod
    def _of(texts: Any) -> StudyResult:
        return StudyResult(
            runs=_frame(texts.runs_csv, texts.runs_kinds),
            points=_frame(texts.points_csv, texts.points_kinds),
            table=texts.table_md,
            runs_csv=texts.runs_csv,
            points_csv=texts.points_csv,
        )


def study(
    experiment: str,
    *,
    args: Sequence[str] = (),
    progress: bool = False,
    out: str | os.PathLike[str] | None = None,
    **settings: SettingValue,
) -> StudyResult:
    """Run an experiment of the reference study (``"e1"`` … ``"e5"``; ``"e1s"``: E1 and E2 under each
    of the model's open choices) on this machine's cores.

    The same runs and results as ``cosched study EXPERIMENT``; :func:`cosched.dask.study` gives the
    same, byte for byte, from a Dask cluster. ``args`` takes flags as the command line writes them,
    before the keyword settings. ``progress=True`` prints the CLI's progress lines on standard error.
    ``out``: also write the folder ``cosched study`` writes (tables, figures, manifest), all or nothing.

    Settings (keyword = default; the flags of ``cosched study eN``):

    {settings}
    """
    flags = [*args, *to_flags(settings)]
    return StudyResult._of(_native.study(experiment, flags, progress, None if out is None else os.fspath(out)))


simulate.__doc__ = (simulate.__doc__ or "").replace("{settings}", settings_doc("sim", left_out=("out", "quiet")).lstrip())
study.__doc__ = (study.__doc__ or "").replace("{settings}", settings_doc("study", left_out=("out", "shard", "quiet")).lstrip())
