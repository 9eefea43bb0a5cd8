"""A study's runs spread over a Dask cluster: the same results, byte for byte, whatever the number of workers.

>>> import cosched.dask
>>> result = cosched.dask.study("e2", jobs=150, replications=3)   # a LocalCluster on this machine's cores
>>> result.points

Every run of an experiment's design is an independent, deterministic simulation
(its seed fixes its workload and its model), so the runs can go anywhere and
come back in any order: they are put back in the design's order and the
study's rules applied as ``cosched study eN`` applies them (E1 leaves out a
scheme above the load where it saturated). With ``dask-jobqueue`` the same
code runs on a Slurm cluster (docs/python.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import StudyResult, _native
from ._flags import SettingValue, to_flags

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["study"]


def _run_runs(experiment: str, flags: list[str], indices: list[int]) -> str:
    """On a worker: these runs of the design, as a shard document (the text `cosched study --shard` writes)."""
    return _native.study_runs(experiment, flags, indices)


def study(
    experiment: str,
    *,
    client: Client | None = None,
    runs_per_task: int = 1,
    args: Sequence[str] = (),
    **settings: SettingValue,
) -> StudyResult:
    """Run an experiment of the reference study with its runs as Dask tasks.

    ``client``: a ``dask.distributed.Client``; by default a ``LocalCluster`` of one single-threaded
    worker process per core is started for the call and closed after it. ``runs_per_task`` groups
    runs into fewer, longer tasks (a task's runs share its worker's cores). The settings are
    :func:`cosched.study`'s; the result equals its result, and ``cosched study EXPERIMENT``'s
    tables, byte for byte.
    """
    if runs_per_task < 1:
        raise _native.CoschedError(f"runs_per_task must be at least 1, got {runs_per_task}")
    flags = [*args, *to_flags(settings)]
    runs = _native.study_design_size(experiment, flags)  # checks the settings before any cluster starts
    tasks = [list(range(first, min(first + runs_per_task, runs))) for first in range(0, runs, runs_per_task)]
    if client is None:
        from distributed import Client, LocalCluster

        with LocalCluster(threads_per_worker=1, processes=True) as cluster, Client(cluster) as own:
            shards = _gather(own, experiment, flags, tasks)
    else:
        shards = _gather(client, experiment, flags, tasks)
    return StudyResult._of(_native.study_assemble(experiment, flags, shards))


def _gather(client: Client, experiment: str, flags: list[str], tasks: list[list[int]]) -> list[str]:
    futures = client.map(_run_runs, [experiment] * len(tasks), [flags] * len(tasks), tasks)
    return client.gather(futures)
