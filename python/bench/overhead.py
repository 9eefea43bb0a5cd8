"""What simulating from Python costs over the CLI, for the same run.

Alternates the two, several times: the CLI (`cosched sim FLAGS --quiet --out DIR`, a process of its own, writing
its files and charts) against `cosched.simulate(FLAGS)` in this already-started Python (building its DataFrames).
Prints each pair's Python / CLI ratio of wall time and of CPU time (user + system: the CLI's from its rusage as a
child, Python's from this process's), their medians, and the cost of `import cosched` apart. Use the release
binary: the package is built in the release profile.

    python3 python/bench/overhead.py --cli target/release/cosched --pairs 7 -- --jobs 300
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cli", default="target/release/cosched", help="the cosched binary to compare with")
    parser.add_argument("--pairs", type=int, default=7, help="CLI/Python pairs, alternated")
    parser.add_argument("flags", nargs="*", help="cosched sim's flags (after --); default: its defaults")
    options = parser.parse_args()

    started = time.perf_counter()
    import cosched  # noqa: PLC0415  (timed on purpose)

    import_s = time.perf_counter() - started
    flags = [*options.flags, "--quiet"]
    ratios, cpu_ratios, cli_times, python_times = [], [], [], []
    with tempfile.TemporaryDirectory() as scratch:
        for pair in range(options.pairs):
            out = Path(scratch) / f"out-{pair}"
            cpu_before = cpu_s(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            subprocess.run([options.cli, "sim", *flags, "--out", str(out)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            cli_s = time.perf_counter() - started
            cli_cpu_s = cpu_s(resource.RUSAGE_CHILDREN) - cpu_before
            cpu_before = cpu_s(resource.RUSAGE_SELF)
            started = time.perf_counter()
            result = cosched.simulate(args=flags)
            python_s = time.perf_counter() - started
            python_cpu_s = cpu_s(resource.RUSAGE_SELF) - cpu_before
            if result.summary_csv != (out / "summary.csv").read_text():
                sys.exit("the two runs differ: not the same simulation")
            cli_times.append(cli_s)
            python_times.append(python_s)
            ratios.append(python_s / cli_s)
            cpu_ratios.append(python_cpu_s / cli_cpu_s)
            print(f"pair {pair + 1}: wall CLI {cli_s:.3f} s, Python {python_s:.3f} s, ratio {python_s / cli_s:.3f}; "
                  f"CPU CLI {cli_cpu_s:.3f} s, Python {python_cpu_s:.3f} s, ratio {python_cpu_s / cli_cpu_s:.3f}")
    for what, values in (("wall", ratios), ("CPU", cpu_ratios)):
        print(f"median Python / CLI, {what} time: {statistics.median(values):.3f} "
              f"(min {min(values):.3f}, max {max(values):.3f}) over {len(values)} pairs")
    print(f"CLI median {statistics.median(cli_times):.2f} s wall; import cosched once: {import_s:.2f} s")


def cpu_s(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main()
