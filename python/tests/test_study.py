"""cosched.study and cosched.dask.study: the CLI's study, in-process and on a Dask cluster, byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest
from distributed import Client, LocalCluster

import cosched
import cosched.dask

# 2 replications x 2 schemes x 4 workloads = 16 short runs.
E2 = {"jobs": 20, "replications": 2, "schemes": ["gs", "sb"]}
E2_FLAGS = ["--jobs", "20", "--replications", "2", "--schemes", "gs,sb"]
# E1 over four loads: its leave-out rule applies after a scheme saturates (Local delivers less at 0.4
# than at 0.2 on seed 3).
E1 = {"jobs": 40, "seed": 3, "replications": 1, "schemes": ["gs", "local"], "loads": [0.2, 0.4, 0.8, 1.6],
      "capacity_jobs": 20}
E1_FLAGS = ["--jobs", "40", "--seed", "3", "--replications", "1", "--schemes", "gs,local", "--loads",
            "0.2,0.4,0.8,1.6", "--capacity-jobs", "20"]


@pytest.fixture(scope="module")
def two_workers():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            yield client


@pytest.fixture(scope="module")
def e2_here() -> cosched.StudyResult:
    return cosched.study("e2", **E2)


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_study_here_equals_the_cli(e2_here, run_cli, tmp_path: Path) -> None:
    cli = run_cli("study", "e2", *E2_FLAGS, "--quiet", "--out", str(tmp_path / "cli"))
    assert cli.returncode == 0, cli.stderr
    assert e2_here.runs_csv == (tmp_path / "cli" / "runs.csv").read_text()
    assert e2_here.points_csv == (tmp_path / "cli" / "points.csv").read_text()
    assert e2_here.table == (tmp_path / "cli" / "table.md").read_text()
    assert len(e2_here.runs) == 16 and set(e2_here.runs["scheme"]) == {"GS", "SB"}


def test_study_tables_are_typed_by_their_columns_not_their_values(e2_here) -> None:
    runs, points = e2_here.runs, e2_here.points
    assert str(runs["saturated"].dtype) == "boolean" and str(runs["seed"].dtype) == "Int64"
    # Every load of this design is a whole 0.x, and every replication count 2: the declared kinds hold anyway.
    assert str(runs["load"].dtype) == "Float64" and str(points["replications"].dtype) == "Int64"
    assert str(points["scheme"].dtype) == "string"
    assert {str(t) for t in [*runs.dtypes, *points.dtypes]} <= {"Int64", "Float64", "string", "boolean"}
    # The same numbers as the CSV's text, bit for bit.
    import io
    import pandas as pd
    plain = pd.read_csv(io.StringIO(e2_here.runs_csv), float_precision="round_trip")
    assert (plain["mean_response_s"].to_numpy() == runs["mean_response_s"].to_numpy(dtype=float)).all()


def test_dask_with_two_workers_equals_one_process(e2_here, two_workers) -> None:
    on_dask = cosched.dask.study("e2", client=two_workers, **E2)
    assert on_dask.runs_csv == e2_here.runs_csv
    assert on_dask.points_csv == e2_here.points_csv
    assert on_dask.runs.equals(e2_here.runs)
    grouped = cosched.dask.study("e2", client=two_workers, runs_per_task=5, **E2)
    assert grouped.runs_csv == e2_here.runs_csv


def test_dask_writes_the_folder_the_cli_writes(two_workers, run_cli, tmp_path: Path) -> None:
    cosched.dask.study("e1", client=two_workers, out=tmp_path / "dask", **E1)
    cli = run_cli("study", "e1", *E1_FLAGS, "--quiet", "--out", str(tmp_path / "cli"))
    assert cli.returncode == 0, cli.stderr
    assert files_of(tmp_path / "dask") == files_of(tmp_path / "cli")


def test_e1_on_dask_leaves_out_what_the_climb_leaves_out(two_workers) -> None:
    here = cosched.study("e1", **E1)
    assert cosched.dask.study("e1", client=two_workers, **E1).runs_csv == here.runs_csv
    full_grid = len(E1["schemes"]) * len(E1["loads"])
    climb = here.runs[here.runs["group"] != "capacity"]
    assert len(climb) < full_grid, "nothing saturated: the rule went untested"


def test_a_local_cluster_is_started_when_no_client_is_given(e2_here) -> None:
    assert cosched.dask.study("e2", **E2).runs_csv == e2_here.runs_csv


@pytest.mark.parametrize(
    ("experiment", "settings", "message"),
    [
        ("e9", {}, "unknown experiment 'e9'"),
        ("e2", {"replications": 0}, "--replications must be 1 to 100, got 0"),
        ("e2", {"schemes": ["warp"]}, "unknown scheme 'warp'"),
        ("e2", {"shard": "1/2"}, "shards are cosched.dask's to cut"),
    ],
)
def test_bad_settings_are_refused_before_any_run(experiment: str, settings: dict, message: str) -> None:
    for run in (cosched.study, cosched.dask.study):
        with pytest.raises(cosched.CoschedError, match=message):
            run(experiment, **settings)


def test_ctrl_c_stops_a_long_study(ctrl_c_soon: None) -> None:
    with pytest.raises(KeyboardInterrupt):
        # The study's defaults: minutes of runs, which the interrupt ends within a progress report.
        cosched.study("e2")
