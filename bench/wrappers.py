"""Compiler wrapper benchmark: what `orrery mpicc` adds to a compile.

A build runs the wrapper once per file, and a configure script dozens of times for its checks. This
compiles one small C file with SMPI's own `smpicc -c` (the baseline: what the wrapper runs) and
with `orrery mpicc -c`, alternately, and prints the median wall time of each and their ratio: the
difference is the wrapper's Python start-up and its look at the command line.

    .venv/bin/python bench/wrappers.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ORRERY = str(Path(sys.executable).parent / "orrery")
SOURCE = "int next(int x) { return x + 1; }\n"


def timed(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20, help="compiles of each, alternating (default 20)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="orrery-bench-") as d:
        work = Path(d)
        (work / "small.c").write_text(SOURCE)
        commands = {
            "smpicc -c (baseline)": ["smpicc", "-c", "small.c", "-o", "small.o"],
            "orrery mpicc -c": [ORRERY, "mpicc", "-c", "small.c", "-o", "small.o"],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(a.repeat):
            for name, cmd in commands.items():
                times[name].append(timed(cmd, work))
    base = statistics.median(times["smpicc -c (baseline)"])
    print("| command | median wall (s) | ratio to the baseline |")
    print("|---|---|---|")
    for name, t in times.items():
        m = statistics.median(t)
        print(f"| `{name}` | {m:.4f} | {m / base:.2f} |")


if __name__ == "__main__":
    main()
