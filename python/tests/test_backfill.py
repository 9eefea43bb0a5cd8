"""Backfilling in the simulator against backfilling computed apart, here, by the textbook: EASY by processor
counts, conservative by the lowest processors free for a job's whole requested time.

On one matrix row (`--mpl 1`) gang scheduling is space sharing, so the engine's backfilling over the matrix must
start every job when the textbook rule does, given what the run says each job asked for (its dedicated time, the
estimate when the trace has none) and how long it then ran.
"""

from __future__ import annotations

import csv
import heapq
from pathlib import Path

from conftest import REPO

NASA = REPO / "test-data/swf/NASA-iPSC-1993-3.1-cln.swf.gz"
NODES = 128


def ns(text: str) -> int:
    return round(float(text) * 1e9)


def textbook_easy(jobs: list[dict], cpus: int) -> dict[int, int]:
    """Start instant (ns) of each job under EASY: the first waiting job gets a reservation at the earliest
    estimated end that frees enough processors; a later job starts if it fits now and ends by then or takes
    only processors spare at the reservation. A job past its estimate may end at any moment: its end is now."""
    # At one instant the engine takes arrivals before ends (its queued events before its CPUs' visits): the same
    # here. Two ends at one nanosecond would need the engine's CPU order, which jobs.csv does not give; the test
    # checks that none coincide.
    events: list[tuple[int, int, int]] = [(job["arrival"], 0, i) for i, job in enumerate(jobs)]
    heapq.heapify(events)
    free, queue, running, start = cpus, [], [], {}

    def begin(i: int, now: int) -> None:
        nonlocal free
        free -= jobs[i]["tasks"]
        running.append(i)
        start[i] = now
        heapq.heappush(events, (now + jobs[i]["run"], 1, i))

    def estimated_end(i: int, now: int) -> int:
        return max(start[i] + jobs[i]["requested"], now)

    while events:
        now, kind, i = heapq.heappop(events)
        if kind == 0:
            queue.append(i)
        else:
            running.remove(i)
            free += jobs[i]["tasks"]
        while queue and jobs[queue[0]]["tasks"] <= free:
            begin(queue.pop(0), now)
        if not queue:
            continue
        head = jobs[queue[0]]["tasks"]
        shadow, spare = None, free
        for end, tasks in sorted((estimated_end(r, now), jobs[r]["tasks"]) for r in running):
            spare += tasks
            if spare >= head:
                shadow = end
                break
        if shadow is None:
            continue
        extra = free + sum(jobs[r]["tasks"] for r in running if estimated_end(r, now) <= shadow) - head
        k = 1
        while k < len(queue):
            j = queue[k]
            ends_before = now + jobs[j]["requested"] <= shadow
            if jobs[j]["tasks"] <= free and (ends_before or jobs[j]["tasks"] <= extra):
                if not ends_before:
                    extra -= jobs[j]["tasks"]
                queue.pop(k)
                begin(j, now)
            else:
                k += 1
    return start


def textbook_conservative(jobs: list[dict], cpus: int) -> dict[int, int]:
    """Start instant (ns) of each job under conservative backfilling: at every arrival and end, each waiting job
    in queue order is reserved the earliest of now and the estimated ends of what runs or is reserved at which
    the lowest processors free for its whole requested time suffice; it starts if that is now. A job at or past
    its estimate has left by the instant now, but holds its processors at now itself, the only instant a job
    starts at."""
    events: list[tuple[int, int, int]] = [(job["arrival"], 0, i) for i, job in enumerate(jobs)]
    heapq.heapify(events)
    queue: list[int] = []
    running: dict[int, int] = {}  # job -> processors held, as bits
    start: dict[int, int] = {}
    while events:
        now, kind, i = heapq.heappop(events)
        if kind == 0:
            queue.append(i)
        else:
            del running[i]
        held_now = 0
        for mask in running.values():
            held_now |= mask
        held = [(now, max(start[r] + jobs[r]["requested"], now), mask) for r, mask in running.items()]
        k = 0
        while k < len(queue):
            j = queue[k]
            tasks, requested = jobs[j]["tasks"], max(jobs[j]["requested"], 1)
            for instant in [None, *sorted({until for _, until, _ in held})]:
                t = now if instant is None else instant
                taken = held_now if instant is None else 0
                for since, until, mask in held:
                    if since < t + requested and until > t:
                        taken |= mask
                free = [c for c in range(cpus) if not taken >> c & 1][:tasks]
                if len(free) == tasks:
                    break
            else:
                raise AssertionError(f"job {j} fits at no instant")
            mask = sum(1 << c for c in free)
            held.append((t, t + requested, mask))
            if instant is None:
                queue.pop(k)
                running[j] = mask
                start[j] = now
                heapq.heappush(events, (now + jobs[j]["run"], 1, j))
            else:
                k += 1
    return start


def simulated_jobs(run_cli, out: Path, backfill: str) -> list[dict]:
    done = run_cli(
        "sim", "--trace", str(NASA), "--jobs", "200", "--nodes", str(NODES), "--mpl", "1", "--schemes", "GS",
        "--load", "0.9", "--backfill", backfill, "--quiet", "--out", str(out),
    )
    assert done.returncode == 0, done.stderr
    with open(out / "jobs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return [
        {
            "arrival": ns(r["arrival_s"]),
            "tasks": int(r["tasks"]),
            "start": ns(r["start_s"]),
            "run": ns(r["finish_s"]) - ns(r["start_s"]),
            "requested": ns(r["dedicated_s"]),
        }
        for r in sorted(rows, key=lambda r: (ns(r["arrival_s"]), int(r["job_number"])))
    ]


def assert_engine_starts_as_textbook(jobs: list[dict], textbook) -> None:
    """Every job starts when `textbook` says, and some job passed an earlier one (else nothing was tested)."""
    ends = [job["start"] + job["run"] for job in jobs]
    assert len(set(ends)) == len(ends), "two jobs end at one instant: their order would be the engine's CPU order"
    expected = textbook(jobs, NODES)
    mismatched = [(i, job["start"], expected[i]) for i, job in enumerate(jobs) if job["start"] != expected[i]]
    assert not mismatched, f"{len(mismatched)} of {len(jobs)} jobs start elsewhere (job, engine, textbook): {mismatched[:5]}"
    passed = sum(1 for a, b in zip(jobs, jobs[1:]) if b["start"] < a["start"])
    assert passed > 0, "no job started before one that arrived earlier: the case tests no backfilling"


def test_easy_on_one_row_starts_every_nasa_job_when_the_textbook_rule_does(run_cli, tmp_path):
    assert_engine_starts_as_textbook(simulated_jobs(run_cli, tmp_path / "easy", "easy"), textbook_easy)


def test_conservative_on_one_row_starts_every_nasa_job_when_the_textbook_rule_does(run_cli, tmp_path):
    jobs = simulated_jobs(run_cli, tmp_path / "conservative", "conservative")
    assert_engine_starts_as_textbook(jobs, textbook_conservative)
    easy = simulated_jobs(run_cli, tmp_path / "easy", "easy")
    assert [job["start"] for job in easy] != [job["start"] for job in jobs], "conservative and EASY start alike"


def test_strict_fcfs_starts_the_same_jobs_in_arrival_order(run_cli, tmp_path):
    jobs = simulated_jobs(run_cli, tmp_path / "fcfs", "none")
    starts = [job["start"] for job in jobs]
    assert starts == sorted(starts), "under strict FCFS no job starts before one that arrived earlier"
