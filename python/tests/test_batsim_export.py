"""cosched sim's per-scheme files in Batsim's jobs.csv format, read by evalys
as it reads Batsim's own (docs/batsim.md).

The cosched binary is conftest's: $COSCHED_BIN, else the one built in target/.
"""

import csv
import subprocess
import warnings

import matplotlib

matplotlib.use("Agg")  # evalys draws with pyplot; no display here

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from evalys.jobset import JobSet  # noqa: E402

SCHEMES = ["Local", "GS"]
JOBS = 30
NODES, CPUS_PER_NODE = 4, 2
MACHINE_CPUS = NODES * CPUS_PER_NODE
# Twice the machine's capacity offered: jobs queue and share CPUs.
LOAD = 2.0
BATSIM_COLUMNS = [
    "job_id", "workload_name", "profile", "submission_time", "requested_number_of_resources",
    "requested_time", "success", "final_state", "starting_time", "execution_time", "finish_time",
    "waiting_time", "turnaround_time", "stretch", "allocated_resources", "consumed_energy", "metadata",
]
# Batsim prints times to the microsecond; cosched's jobs.csv to the nanosecond.
PRINTED_S = 0.5e-6 + 1e-12


@pytest.fixture(scope="module")
def sim_out(tmp_path_factory, cosched_bin):
    out = tmp_path_factory.mktemp("sim") / "out"
    command = [
        str(cosched_bin), "sim", "-q", "--jobs", str(JOBS), "--schemes", ",".join(SCHEMES),
        "--nodes", str(NODES), "--cpus-per-node", str(CPUS_PER_NODE), "--load", str(LOAD), "--out", str(out),
    ]
    subprocess.run(command, check=True, capture_output=True, text=True)
    return out


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def cosched_jobs(sim_out, scheme):
    """cosched's own records of one scheme, by job number."""
    return {int(r["job_number"]): r for r in rows(sim_out / "jobs.csv") if r["scheme"] == scheme}


def batsim_path(sim_out, scheme):
    return sim_out / "batsim" / f"{scheme}_jobs.csv"


def jobset(sim_out, scheme):
    return JobSet.from_csv(str(batsim_path(sim_out, scheme)), resource_bounds=(0, MACHINE_CPUS - 1))


def cpus_of(interval_set):
    """The CPUs of a Batsim interval set (`0-3 8`), read without evalys."""
    cpus = []
    for part in interval_set.split():
        first, _, last = part.partition("-")
        cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def jobs_running_at(df, t):
    return df[(df.starting_time <= t) & (df.finish_time > t)]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_each_scheme_has_a_file_with_batsims_columns_and_every_job(sim_out, scheme):
    with open(batsim_path(sim_out, scheme), newline="") as f:
        assert next(csv.reader(f)) == BATSIM_COLUMNS
    js = jobset(sim_out, scheme)
    assert len(js.df) == JOBS
    assert sorted(js.df.jobID.astype(int)) == sorted(cosched_jobs(sim_out, scheme))
    assert set(js.df.success) == {1} and set(js.df.final_state) == {"COMPLETED_SUCCESSFULLY"}


@pytest.mark.parametrize("scheme", SCHEMES)
def test_evalys_reads_the_cpus_cosched_wrote_one_per_task(sim_out, scheme):
    written = {int(r["job_id"]): cpus_of(r["allocated_resources"]) for r in rows(batsim_path(sim_out, scheme))}
    cosched = cosched_jobs(sim_out, scheme)
    for _, job in jobset(sim_out, scheme).df.iterrows():
        number = int(job.jobID)
        assert sorted(job.allocated_resources) == written[number]
        assert len(job.allocated_resources) == job.requested_number_of_resources == int(cosched[number]["tasks"])
        assert all(0 <= cpu < MACHINE_CPUS for cpu in written[number])


@pytest.mark.parametrize("scheme", SCHEMES)
def test_times_are_cosched_times_and_stretch_is_batsims(sim_out, scheme):
    cosched = cosched_jobs(sim_out, scheme)
    for _, job in jobset(sim_out, scheme).df.iterrows():
        own = cosched[int(job.jobID)]
        for batsim, ours in [
            ("submission_time", "arrival_s"), ("starting_time", "start_s"), ("finish_time", "finish_s"),
            ("waiting_time", "wait_s"), ("execution_time", "execution_s"), ("turnaround_time", "response_s"),
            ("requested_time", "dedicated_s"),
        ]:
            assert job[batsim] == pytest.approx(float(own[ours]), abs=2 * PRINTED_S), batsim
        assert job.stretch == pytest.approx(job.turnaround_time / job.execution_time, abs=1e-6)
        # cosched's slowdown is the turnaround over the dedicated run time, written as requested_time.
        dedicated_s = float(own["dedicated_s"])
        assert job.turnaround_time == pytest.approx(float(own["slowdown"]) * dedicated_s, abs=2 * PRINTED_S)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_evalys_utilisation_counts_a_shared_cpu_once_per_job(sim_out, scheme):
    js = jobset(sim_out, scheme)
    df = js.df
    cpu_seconds = (df.proc_alloc * df.execution_time).sum()
    assert js.utilisation.area.sum() == pytest.approx(cpu_seconds, rel=1e-9)
    span_s = df.finish_time.max() - df.starting_time.min()
    assert js.mean_utilisation() == pytest.approx(cpu_seconds / span_s, rel=1e-9)
    # Where two jobs hold one CPU at once, evalys's load is the tasks running, more than the CPUs held.
    shared_at = [t for t in between_events(df) if shares_a_cpu(jobs_running_at(df, t))]
    assert shared_at, "at this load some jobs share CPUs"
    for t in shared_at:
        running = jobs_running_at(df, t)
        held = set().union(*(set(cpus) for cpus in running.allocated_resources))
        assert js.utilisation.load.asof(t) == running.proc_alloc.sum() > len(held)


def between_events(df):
    """The midpoint of every stretch of time in which no job starts or finishes."""
    instants = sorted(set(df.starting_time) | set(df.finish_time))
    return [(a + b) / 2 for a, b in zip(instants, instants[1:]) if b - a > 1e-5]


def shares_a_cpu(running):
    held = [cpu for cpus in running.allocated_resources for cpu in cpus]
    return len(held) > len(set(held))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_evalys_queue_and_gantt_run_on_it(sim_out, scheme):
    js = jobset(sim_out, scheme)
    df = js.df
    queue = js.queue
    assert queue.load.iloc[-1] == 0
    waited = (df.requested_number_of_resources * df.waiting_time).sum()
    assert queue.area.sum() == pytest.approx(waited, rel=1e-9, abs=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Agg cannot show the window evalys opens
        js.gantt()
    # A rectangle per job and interval of its CPUs: shared CPUs get one per job, drawn over each other.
    axes = plt.gcf().axes[0]
    rectangles = [a for a in axes.get_children() if isinstance(a, matplotlib.patches.Rectangle) and a is not axes.patch]
    assert len(rectangles) == sum(len(list(cpus.intervals())) for cpus in df.allocated_resources)
    plt.close("all")
