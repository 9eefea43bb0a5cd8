"""Admission decided in Python: a Gymnasium environment and a plain callback, over the simulator's own engine.

The simulator runs as :func:`cosched.simulate` does (one scheme, every setting a flag of ``cosched sim``), but
whenever a waiting job could start, the engine stops and asks: which waiting job starts now, and in which row
of the Ousterhout matrix, or does the queue wait for the next arrival or end? The answer is placed by the
scheme's own planner, and the nodes then run it at the OS tick as in any other run. With the first-come
first-served answer the run is byte for byte the CLI's default run (the tests check it).

- :class:`SchedulingEnv`: ``reset(seed)`` / ``step(action)`` in the Gymnasium style, observations as NumPy
  arrays, for learning or any other search.
- :func:`run_policy`: a rule-based policy as a plain function of a :class:`Decision`; returns the
  :class:`~cosched.SimResult` of the run.

docs/python.md ("Policies of your own") shows both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional, Union

import gymnasium
import numpy as np

from . import _native
from . import SimResult
from ._flags import SettingValue, to_flags
from ._native import CoschedError

__all__ = ["Decision", "QueuedJob", "SchedulingEnv", "run_policy", "fcfs"]


@dataclass(frozen=True)
class QueuedJob:
    """A waiting job as a policy sees it."""

    #: The job's position in arrival order, from 0 (the workload's row).
    job: int
    tasks: int
    #: What the job asked for, seconds: SWF field 9 scaled with the run times, else its dedicated time (a
    #: generated workload's jobs ask exactly what they need alone: a perfect estimate).
    requested_s: float
    waited_s: float
    #: Whether it can start now (in some row, for a gang job).
    fits: bool
    #: Per matrix row, whether a gang job fits there now; empty under local scheduling.
    fits_in_row: tuple[bool, ...]


@dataclass(frozen=True)
class Decision:
    """The machine when a waiting job could start."""

    time_s: float
    #: The first waiting jobs in arrival order (at most ``max_queue``); at least one fits.
    queue: tuple[QueuedJob, ...]
    #: Every waiting job, shown or not.
    waiting: int
    running: int
    #: ``matrix[row][cpu]``: the job holding the cell, -1 when free (gang schemes; all free under local ones).
    matrix: tuple[tuple[int, ...], ...]
    #: Processes placed on each CPU of the machine, node by node.
    processes_per_cpu: tuple[int, ...]
    #: Seconds waited so far, summed over every job.
    waited_s_total: float

    @staticmethod
    def _of(view: Any) -> Decision:
        queue = tuple(QueuedJob(j, t, r, w, f, tuple(rows)) for j, t, r, w, f, rows in view.waiting)
        return Decision(
            time_s=view.now_s,
            queue=queue,
            waiting=view.waiting_count,
            running=view.running_jobs,
            matrix=tuple(tuple(row) for row in view.matrix),
            processes_per_cpu=tuple(view.processes_per_cpu),
            waited_s_total=view.waited_s_total,
        )


#: What a policy answers: a :class:`QueuedJob` of the decision to start where the planner fits it first, a
#: ``(QueuedJob, row)`` pair to start it in that matrix row, or ``None`` to wait for the next arrival or end.
Answer = Union[QueuedJob, tuple[QueuedJob, int], None]

#: The most waiting jobs a decision may show (each costs a placement trial per matrix row).
MAX_QUEUE = 4096


def fcfs(decision: Decision) -> Answer:
    """First come, first served: the head of the queue if it fits, else wait (the study's queue)."""
    head = decision.queue[0]
    return head if head.fits else None


def _check_max_queue(max_queue: Any) -> int:
    if isinstance(max_queue, bool) or not isinstance(max_queue, (int, np.integer)) or not 1 <= max_queue <= MAX_QUEUE:
        raise CoschedError(f"max_queue must be a whole number from 1 to {MAX_QUEUE}, not {max_queue!r}")
    return int(max_queue)


def _flags(args: Sequence[str], settings: dict[str, SettingValue], seed: Optional[int]) -> list[str]:
    if "out" in settings:
        raise CoschedError("a policy's run writes nothing: drop out= (the result holds the results)")
    if seed is not None:
        settings = {**settings, "seed": int(seed)}  # reset(seed) overrides the settings' seed
    flags = [*args, *to_flags(settings)]
    if "--quiet" not in flags:
        flags.append("--quiet")
    return flags


def _row(row: Any, rows: int) -> int:
    if isinstance(row, bool) or not isinstance(row, (int, np.integer)) or not 0 <= row < rows:
        raise CoschedError(f"a row is a whole number from 0 to {rows - 1}, not {row!r}")
    return int(row)


def _answer(decision: Decision, answer: Any) -> tuple[Optional[int], Optional[int]]:
    """A policy's answer as (job, row) for the engine, checked to be one of this decision's jobs."""
    if answer is None:
        return None, None
    row = None
    if isinstance(answer, tuple) and len(answer) == 2:
        answer, row = answer
        row = _row(row, len(decision.matrix))
    if not isinstance(answer, QueuedJob) or answer not in decision.queue:
        raise CoschedError(
            f"a policy answers None, a QueuedJob of this decision's queue or (QueuedJob, row), not {answer!r}"
        )
    return answer.job, row


def run_policy(
    policy: Callable[[Decision], Answer],
    *,
    seed: Optional[int] = None,
    max_queue: int = 32,
    args: Sequence[str] = (),
    **settings: SettingValue,
) -> SimResult:
    """Simulate one scheme with ``policy`` deciding admission; the run's :class:`~cosched.SimResult`.

    ``policy(decision)`` is called at every instant a shown waiting job fits, until it waits or nothing shown
    fits; see :data:`Answer`. An answer the decision does not allow (not one of its queued jobs, a job that does
    not fit now or not in that row, waiting while nothing runs) raises :class:`CoschedError`. Settings are those
    of :func:`cosched.simulate` (one scheme; not ``fast`` nor ``backfill``). ``result.document["admission"]``
    names the policy.
    """
    window = _check_max_queue(max_queue)
    run = _native.GymRun(_flags(args, settings, seed), window)
    try:
        step = run.next()
        while isinstance(step, _native.GymView):
            decision = Decision._of(step)
            step = run.choose(*_answer(decision, policy(decision)))
        admission = {"policy": getattr(policy, "__qualname__", repr(policy)), "max_queue": window}
        return SimResult._of(step, admission=admission)
    finally:
        run.close()


class SchedulingEnv(gymnasium.Env):
    """A Gymnasium environment: one simulated run, one decision per step.

    **Observation** (a dict of arrays; ``Q`` = ``max_queue``, ``R`` matrix rows, ``C`` CPUs):

    - ``queue`` (Q, 4) float: per shown waiting job, [tasks, requested s, waited s, fits now]; zero rows past
      the waiting jobs;
    - ``queue_fits_row`` (Q, R) int8: whether the job fits in each row now (gang schemes);
    - ``matrix`` (R, C) int64: the job holding each cell, -1 when free;
    - ``processes_per_cpu`` (C,) int64: the nodes' loads, CPU by CPU;
    - ``state`` (3,) float: [time s, jobs waiting, jobs running].

    **Action**: a queue position (Discrete ``Q + 1``): start the waiting job there, in the planner's first
    fit; ``Q`` waits until the next arrival or end. With ``row_choice=True`` the action is ``(position, row)``
    (MultiDiscrete ``[Q + 1, R + 1]``), ``row == R`` leaving the row to the planner. :meth:`action_masks` says
    which actions the observation allows (sb3-contrib's MaskablePPO reads it); any other raises
    :class:`CoschedError` and changes nothing.

    **Reward**: minus the job-seconds spent waiting since the last step, so an episode's rewards sum to minus
    the total wait of its jobs. The episode ends (``terminated``) when every job has finished, or is cut
    (``truncated``) by ``horizon_s``, when the last reward is 0 (what the unfinished jobs waited after the last
    decision is not known); ``info["result"]`` is then the run's :class:`~cosched.SimResult`.

    **Seeds**: ``reset(seed=s)`` runs the simulation's ``--seed s``; ``reset()`` draws the next seed from the
    environment's generator (seeded by the last ``reset(seed)``, at first by the settings' ``seed`` if given), so
    successive episodes see new workloads, reproducibly. The same seed and the same actions give the same
    episode, byte for byte.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self, *, max_queue: int = 32, row_choice: bool = False, args: Sequence[str] = (), **settings: SettingValue
    ) -> None:
        self.max_queue, self.row_choice = _check_max_queue(max_queue), bool(row_choice)
        self._first_seed = settings.pop("seed", None)
        self._args, self._settings = list(args), dict(settings)
        rows, cpus_per_node = _native.gym_shape(_flags(self._args, self._settings, None))
        self.rows, self.cpus = int(rows), int(sum(cpus_per_node))
        q, r, c = self.max_queue, self.rows, self.cpus
        self.observation_space = gymnasium.spaces.Dict(
            {
                "queue": gymnasium.spaces.Box(0.0, np.inf, (q, 4), np.float64),
                "queue_fits_row": gymnasium.spaces.MultiBinary((q, r)),
                "matrix": gymnasium.spaces.Box(-1, np.iinfo(np.int64).max, (r, c), np.int64),
                "processes_per_cpu": gymnasium.spaces.Box(0, np.iinfo(np.int64).max, (c,), np.int64),
                "state": gymnasium.spaces.Box(0.0, np.inf, (3,), np.float64),
            }
        )
        if self.row_choice:
            self.action_space: gymnasium.spaces.Space = gymnasium.spaces.MultiDiscrete([q + 1, r + 1])
        else:
            self.action_space = gymnasium.spaces.Discrete(q + 1)
        self._run: Any = None
        self._decision: Optional[Decision] = None
        self._waited_s = 0.0

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict[str, Any]] = None):
        """Start a new run (see **Seeds**); the first observation and its info."""
        first = seed is None and self._first_seed is not None
        if first:
            seed = int(self._first_seed)
        super().reset(seed=seed)
        run_seed = int(seed) if seed is not None else int(self.np_random.integers(0, 2**31))
        self.close()
        self._run = _native.GymRun(_flags(self._args, self._settings, run_seed), self.max_queue)
        observation, _, _, _, info = self._observe(self._run.next())
        if first:  # used only once a run started with it: a refused reset leaves it for the next
            self._first_seed = None
        self._waited_s = 0.0  # the first step's reward counts the waits before the first decision too
        return observation, {**info, "seed": run_seed}

    def action_masks(self) -> np.ndarray:
        """Which actions the current observation allows: for a queue position, ``Q + 1`` flags; with
        ``row_choice``, the positions' flags then the rows' (a row is flagged if some fitting job fits there,
        so a pair may still be refused: its job must fit in its row)."""
        q, r, d = self.max_queue, self.rows, self._decision
        positions = np.zeros(q + 1, bool)
        rows = np.zeros(r + 1, bool)
        if d is not None:
            positions[: len(d.queue)] = [job.fits for job in d.queue]
            positions[q] = d.running > 0
            for job in d.queue:
                rows[: len(job.fits_in_row)] |= np.asarray(job.fits_in_row, bool) & job.fits
            rows[r] = True
        return np.concatenate([positions, rows]) if self.row_choice else positions

    def step(self, action: Any):
        """Apply ``action``; (observation, reward, terminated, truncated, info)."""
        if self._run is None or self._decision is None:
            raise CoschedError("no decision is pending: call reset() first")
        position, row = self._action(action)
        if position == self.max_queue:
            answer: Answer = None
        elif position < len(self._decision.queue):
            job = self._decision.queue[position]
            answer = job if row is None else (job, row)
        else:
            shown = len(self._decision.queue)
            raise CoschedError(f"position {position}: the queue shows {shown} jobs ({self.max_queue} waits)")
        return self._observe(self._run.choose(*_answer(self._decision, answer)))

    def _action(self, action: Any) -> tuple[int, Optional[int]]:
        """(position, row or None for the planner's), or why the action is not one of the action space's."""
        a = np.asarray(action)
        shape = (2,) if self.row_choice else ()
        if a.dtype.kind not in "iu" or a.shape != shape or (a < 0).any():
            raise CoschedError(f"an action is {self.action_space}, not {action!r}")
        if not self.row_choice:
            return int(a), None
        position, row = int(a[0]), int(a[1])
        if row > self.rows:
            raise CoschedError(f"row {row}: the matrix has rows 0 to {self.rows - 1} ({self.rows}: the planner's)")
        return position, None if row == self.rows else row

    def close(self) -> None:
        if self._run is not None:
            self._run.close()
        self._run, self._decision = None, None

    def _observe(self, step: Any):
        """(observation, reward, terminated, truncated, info) of the engine's answer."""
        truncated = False
        if isinstance(step, _native.GymView):
            self._decision = Decision._of(step)
            self._check_shape(self._decision)
            waited_s = self._decision.waited_s_total
            info: dict[str, Any] = {"decision": self._decision}
            terminated = False
        else:
            result = SimResult._of(step, admission={"policy": "SchedulingEnv", "max_queue": self.max_queue})
            self.close()
            summary = result.summary.iloc[0]
            truncated = bool(summary.jobs_completed < summary.jobs_submitted)
            waited_s = self._waited_s if truncated else float(result.jobs["wait_s"].sum())
            info = {"result": result}
            terminated = not truncated
        reward, self._waited_s = self._waited_s - waited_s, waited_s
        return self._observation(), reward, terminated, truncated, info

    def _check_shape(self, decision: Decision) -> None:
        """Refuse a run whose machine differs from the one the spaces were made for: the flags are read again at
        every reset, so a machine file (``--machine``) changed since would otherwise reshape the observations."""
        rows, cpus = len(decision.matrix), len(decision.processes_per_cpu)
        if (rows, cpus) != (self.rows, self.cpus):
            self.close()
            raise CoschedError(
                f"this run's machine has {rows} rows and {cpus} CPUs, not the {self.rows} and {self.cpus} the "
                "environment was made with: a machine file it reads changed since; make a new environment"
            )

    def _observation(self) -> dict[str, np.ndarray]:
        q, r, c = self.max_queue, self.rows, self.cpus
        obs = {
            "queue": np.zeros((q, 4)),
            "queue_fits_row": np.zeros((q, r), np.int8),
            "matrix": np.full((r, c), -1, np.int64),
            "processes_per_cpu": np.zeros(c, np.int64),
            "state": np.zeros(3),
        }
        d = self._decision
        if d is None:
            return obs
        for i, job in enumerate(d.queue):
            obs["queue"][i] = (job.tasks, job.requested_s, job.waited_s, float(job.fits))
            obs["queue_fits_row"][i, : len(job.fits_in_row)] = job.fits_in_row
        obs["matrix"][:] = d.matrix
        obs["processes_per_cpu"][:] = d.processes_per_cpu
        obs["state"][:] = (d.time_s, d.waiting, d.running)
        return obs
