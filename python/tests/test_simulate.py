"""cosched.simulate: the CLI's run in-process, its files as DataFrames."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pandas as pd
import pytest

import cosched
from cosched import _native

SMALL = {"schemes": ["local", "gs", "sb"], "jobs": 40, "seed": 7}


def test_the_dataframes_hold_what_the_cli_writes(run_cli, tmp_path: Path) -> None:
    result = cosched.simulate(**SMALL)
    out = tmp_path / "out"
    cli = run_cli("sim", "--schemes", "local,gs,sb", "--jobs", "40", "--seed", "7", "--quiet", "--out", str(out))
    assert cli.returncode == 0, cli.stderr
    assert result.summary_csv == (out / "summary.csv").read_text()
    assert result.jobs_csv == (out / "jobs.csv").read_text()
    assert list(result.summary["scheme"]) == ["Local", "GS", "SB"]
    assert len(result.jobs) == result.summary["jobs_completed"].sum()
    assert result.document["configs"][0]["nodes"] == 32
    assert result.document["command"].startswith("cosched sim ")
    for scheme in ("Local", "GS", "SB"):
        assert result.batsim_csv[scheme] == (out / "batsim" / f"{scheme}_jobs.csv").read_text()
    gs = result.batsim("GS")
    assert list(gs["job_id"]) == list(result.jobs.query("scheme == 'GS'")["job_number"])
    assert gs["allocated_resources"].map(type).eq(str).all()
    with pytest.raises(cosched.CoschedError, match="no scheme 'PB'"):
        result.batsim("PB")


def test_arrival_jitter_reaches_python_as_the_cli_writes_it(run_cli, tmp_path: Path) -> None:
    flags = ["--schemes", "local,gs", "--jobs", "40", "--nodes", "8", "--runtime-scale", "0.0005", "--seed", "3"]
    result = cosched.simulate(args=[*flags, "--jitter-draws", "2"])
    jitter = result.document["arrival_jitter"]
    assert jitter["jitter"] == {"draws": 2, "jitter_s": 0.05}
    assert [run["scheme"] for run in jitter["runs"]] == ["Local", "GS"]
    assert all(len(run["draws"]) == 2 for run in jitter["runs"])
    out = tmp_path / "out"
    cli = run_cli("sim", *flags, "--jitter-draws", "2", "--quiet", "--out", str(out))
    assert cli.returncode == 0, cli.stderr
    assert json.loads((out / "summary.json").read_text())["arrival_jitter"] == jitter
    table = result.jitter
    assert list(table["scheme"]) == ["Local", "Local", "GS", "GS"] and str(table["draw"].dtype) == "Int64"
    moved = table["mean_response_s"] / table["given_mean_response_s"] - 1
    assert ((moved - table["response_move"]).abs() < 1e-8).all()
    assert (out / "jitter.csv").read_text().splitlines()[0] == ",".join(table.columns)
    plain = cosched.simulate(args=flags)
    assert "arrival_jitter" not in plain.document and plain.jitter is None


def test_tables_are_typed_by_their_columns_not_their_values() -> None:
    result = cosched.simulate(**SMALL)
    summary, jobs = result.summary, result.jobs
    kinds = {"jobs_completed": "Int64", "mean_response_s": "Float64", "scheme": "string", "saturated": "boolean"}
    assert {name: str(summary[name].dtype) for name in kinds} == kinds
    # `tasks` and the whole-second `dedicated_s` could read as the same type from their values; they are not.
    assert (str(jobs["tasks"].dtype), str(jobs["dedicated_s"].dtype), str(jobs["job_type"].dtype)) == (
        "Int64", "Float64", "string")
    assert {str(t) for t in [*summary.dtypes, *jobs.dtypes]} <= {"Int64", "Float64", "string", "boolean"}
    # A table without rows keeps its columns' types.
    texts = _native.simulate(["--schemes", "local", "--jobs", "5", "--quiet"])
    empty = cosched._frame(texts.jobs_csv.splitlines()[0] + "\n", texts.jobs_kinds)
    assert empty.empty and list(empty.dtypes) == list(jobs.dtypes)


def test_the_same_seed_gives_the_same_results_and_another_seed_others() -> None:
    first, again = cosched.simulate(**SMALL), cosched.simulate(**SMALL)
    assert first.jobs_csv == again.jobs_csv and first.summary_csv == again.summary_csv
    other = cosched.simulate(**{**SMALL, "seed": 8})
    assert other.jobs_csv != first.jobs_csv


def test_columns_have_numeric_types() -> None:
    jobs = cosched.simulate(**SMALL).jobs
    assert pd.api.types.is_float_dtype(jobs["response_s"])
    assert pd.api.types.is_integer_dtype(jobs["job_number"])
    assert (jobs["response_s"] >= jobs["execution_s"]).all()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"nodez": 3}, "unexpected argument '--nodez'"),
        ({"schemes": ["gang-ish"]}, "unknown scheme 'gang-ish'"),
        ({"load": -1}, "--load must be positive, got -1"),
        ({"quanta_ms": [1, 2]}, "--quanta-ms needs 6 values"),
        ({"trace": "/nonexistent/trace.swf"}, "/nonexistent/trace.swf"),
        ({"out": "somewhere"}, "writes nothing"),
    ],
)
def test_bad_settings_raise_the_cli_message(settings: dict, message: str) -> None:
    with pytest.raises(cosched.CoschedError, match=message.replace("(", r"\(")) as raised:
        cosched.simulate(**settings)
    assert isinstance(raised.value, ValueError)


def test_a_bad_trace_line_is_named(tmp_path: Path, run_cli) -> None:
    trace = tmp_path / "bad.swf"
    trace.write_text("1 0 -1 10 4 -1 -1 4 -1 -1 1 -1 -1 -1 1 -1 -1 -1\n2 5 -1 ten 4\n")
    with pytest.raises(cosched.CoschedError) as raised:
        cosched.simulate(trace=trace)
    cli = run_cli("sim", "--trace", str(trace), "--out", str(tmp_path / "o"))
    assert cli.returncode != 0
    assert f"{trace}:2:" in str(raised.value)
    assert str(raised.value) in cli.stderr


def test_the_help_lists_every_flag_of_the_cli(run_cli) -> None:
    doc = cosched.simulate.__doc__ or ""
    for name, _help, _default, _takes in _native.flag_table("sim"):
        if name not in ("out", "quiet"):  # simulate() writes nothing; progress= replaces --quiet
            assert name.replace("-", "_") in doc
    assert "runtime_scale=" in doc and "fast=False" in doc and "\n    out=" not in doc


def test_python_threads_run_while_a_simulation_does() -> None:
    """The GIL is released while simulating: another Python thread counts on meanwhile."""
    count, started, done = [0], threading.Event(), threading.Event()

    def counter() -> None:
        started.set()
        while not done.is_set():
            count[0] += 1

    thread = threading.Thread(target=counter)
    thread.start()
    started.wait()
    before = count[0]
    _native.simulate(["--jobs=150", "--schemes=sb", "--quiet"])
    during = count[0] - before
    done.set()
    thread.join()
    # Holding the GIL in native code would stop the counter entirely.
    assert during > 1000, f"the counter moved {during} times during the simulation"


def test_ctrl_c_stops_a_long_simulation(ctrl_c_soon: None) -> None:
    with pytest.raises(KeyboardInterrupt):
        # Minutes of simulation (beyond the work bound a run starts without being told): only the
        # interrupt ends it within the test.
        cosched.simulate(jobs=3000, schemes=["pb-sb"], runtime_scale=1, allow_long_run=True)
