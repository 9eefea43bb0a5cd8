"""cosched.workload: SWF traces as DataFrames, with the CLI's checks and results."""

from __future__ import annotations

from pathlib import Path

import pytest

import cosched
from cosched import workload


def test_generate_equals_the_cli_and_round_trips_through_swf(run_cli, tmp_path: Path) -> None:
    jobs = workload.generate(jobs=120, procs=64, load=0.7, seed=3)
    cli_file = tmp_path / "cli.swf"
    cli = run_cli("workload", "generate", "--jobs", "120", "--procs", "64", "--load", "0.7", "--seed", "3",
                  "--out", str(cli_file))
    assert cli.returncode == 0, cli.stderr
    written = tmp_path / "python.swf"
    workload.write(jobs, written)
    assert written.read_bytes() == cli_file.read_bytes()
    again = workload.read(tmp_path / "python.swf")
    assert again.equals(jobs)
    # The writer adds the header entries it computes (Version, MaxJobs, MaxRecords).
    assert set(jobs.attrs["swf_header"]) <= set(again.attrs["swf_header"])


def test_gzip_is_written_and_read(tmp_path: Path) -> None:
    jobs = workload.generate(jobs=30, seed=1)
    workload.write(jobs, tmp_path / "w.swf.gz")
    assert (tmp_path / "w.swf.gz").read_bytes()[:2] == b"\x1f\x8b"
    assert workload.read(tmp_path / "w.swf.gz").equals(jobs)


def test_summary_and_fit_match_the_cli(run_cli, tmp_path: Path) -> None:
    jobs = workload.generate(jobs=400, procs=32, seed=5)
    trace = tmp_path / "w.swf"
    workload.write(jobs, trace)
    inspect = run_cli("workload", "inspect", str(trace))
    assert inspect.returncode == 0, inspect.stderr
    assert workload.summary(jobs) + "\n" == inspect.stdout
    fitted = workload.fit(jobs)
    cli_params = tmp_path / "params.txt"
    fit = run_cli("workload", "fit", str(trace), "--out", str(cli_params))
    assert fit.returncode == 0, fit.stderr
    assert fitted.parameters == cli_params.read_text()
    fitted.save(tmp_path / "mine.txt")
    regenerated = workload.generate(model="hyper-erlang", params=tmp_path / "mine.txt", jobs=50, seed=2)
    assert len(regenerated) == 50


def test_a_simulation_replays_a_written_workload(tmp_path: Path) -> None:
    jobs = workload.generate(jobs=40, procs=32, load=0.5, seed=9, runtime_scale=0.01)
    workload.write(jobs, tmp_path / "w.swf")
    result = cosched.simulate(trace=tmp_path / "w.swf", schemes=["gs"], natural_load=True)
    assert int(result.summary["jobs_submitted"][0]) == 40


def test_a_bad_row_is_refused_with_its_number_and_nothing_is_written(tmp_path: Path) -> None:
    jobs = workload.generate(jobs=10, seed=1)
    jobs.loc[3, "run_time"] = -5
    with pytest.raises(cosched.CoschedError, match=r"row:4: .*run time"):
        workload.write(jobs, tmp_path / "bad.swf")
    assert not list(tmp_path.iterdir())


def test_a_missing_column_is_named() -> None:
    jobs = workload.generate(jobs=10, seed=1).drop(columns=["queue"])
    with pytest.raises(cosched.CoschedError, match="no column queue"):
        workload.summary(jobs)


def test_malformed_lines_raise_or_are_skipped_and_counted(tmp_path: Path) -> None:
    trace = tmp_path / "t.swf"
    trace.write_text("; MaxProcs: 8\n1 0 -1 10 4 -1 -1 4 -1 -1 1 -1 -1 -1 1 -1 -1 -1\nnot a job\n")
    with pytest.raises(cosched.CoschedError, match=f"{trace}:3:"):
        workload.read(trace)
    jobs = workload.read(trace, skip_bad_lines=True)
    assert len(jobs) == 1 and jobs.attrs["skipped_bad_lines"] == [3]


def test_bad_generate_settings_raise_the_cli_message() -> None:
    with pytest.raises(cosched.CoschedError, match="--params goes with --model hyper-erlang"):
        workload.generate(params="x.txt")
    with pytest.raises(cosched.CoschedError, match="invalid value 'poisson'"):
        workload.generate(model="poisson")
