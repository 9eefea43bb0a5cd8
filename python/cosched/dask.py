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

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import StudyResult, _native
from ._flags import SettingValue, to_flags

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["study"]


def _run_shard(experiment: str, flags: list[str], index: int, count: int) -> str:
    """On a worker: shard ``index`` of ``count`` of the design, as the document ``cosched study --shard I/N``
    writes."""
    return _native.study_shard(experiment, flags, index, count)


def study(
    experiment: str,
    *,
    client: Client | None = None,
    runs_per_task: int = 1,
    args: Sequence[str] = (),
    out: str | os.PathLike[str] | None = None,
    **settings: SettingValue,
) -> StudyResult:
    """Run an experiment of the reference study with its runs as Dask tasks.

    ``client``: a ``dask.distributed.Client``; by default a ``LocalCluster`` of one single-threaded
    worker process per core is started for the call and closed after it. Each task is one shard of the
    design (``cosched study --shard I/N``'s slice: runs I, I+N, I+2N...), of ``runs_per_task`` runs
    (at most :data:`MAX_TASKS` tasks). The settings, ``args`` and ``out`` are :func:`cosched.study`'s;
    the result equals its result, and ``cosched study EXPERIMENT``'s files, byte for byte.
    """
    if runs_per_task < 1:
        raise _native.CoschedError(f"runs_per_task must be at least 1, got {runs_per_task}")
    flags = [*args, *to_flags(settings)]
    runs = _native.study_design_size(experiment, flags)  # checks the settings before any cluster starts
    tasks = min(MAX_TASKS, -(-runs // runs_per_task))
    if client is None:
        from distributed import Client, LocalCluster

        with LocalCluster(threads_per_worker=1, processes=True) as cluster, Client(cluster) as own:
            documents = _gather(own, experiment, flags, tasks)
    else:
        documents = _gather(client, experiment, flags, tasks)
    return StudyResult._of(_native.study_merge(documents, None if out is None else os.fspath(out)))


#: The most tasks a study is cut into (the most shards `cosched study --shard` takes).
MAX_TASKS = 10_000


def _gather(client: Client, experiment: str, flags: list[str], tasks: int) -> list[str]:
    indices = range(1, tasks + 1)
    futures = client.map(_run_shard, [experiment] * tasks, [flags] * tasks, indices, [tasks] * tasks)
    return client.gather(futures)
