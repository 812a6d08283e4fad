"""Validation: Orrery's microbenchmarks on a simulated machine against measured sweeps.

``orrery validate --machine NAME`` builds calibration/bench (the sources installed with the
package, or a checkout's with ``--repo``; in a temporary folder, so that nothing is written
beside them), runs each sweep that has a measured counterpart for that machine (the sweep
catalogue, orrery.calibration.sweeps) through the simulator, at the measured sizes, and lines
the two up: per size the measured and the simulated value and the relative error, per sweep the
median, 95th percentile and maximum of |error|. orrery.calibration.report writes the plots and
``validation.json``. Every figure comes from the measured CSV files (calibration/data/measured/,
unchanged) and the runs.

Not here: fitting the machine to the measurements (orrery.calibration.calibrate).
"""

from __future__ import annotations

import atexit
import csv
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .. import machines, progress
from ..errors import BuildError, OrreryError
from ..machines import platform
from ..run.costs import Costs
from ..run.launch import RunOptions, run
from . import measurements, merge, sweeps
from .sweeps import Sweep

log = logging.getLogger(__name__)


@dataclass
class SweepResult:
    name: str
    unit: str
    note: str
    sizes: list[int]
    measured: list[float]
    simulated: list[float]
    errors: list[float]  # (simulated - measured) / measured
    median_abs_error: float
    p95_abs_error: float
    max_abs_error: float


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def run_bench(repo: Path | None, m: machines.Machine, sweep: Sweep, sizes: list[int], out: Path) -> str:
    """The sweep's microbenchmark run on the simulated machine at these sizes: its output."""
    layout = platform.Layout.for_machine(m, sweep.nodes, sweep.gpus_per_node, sweep.ranks_per_node)
    bench = build_bench(repo, nccl=sweep.kind[0] == "nccl_time")
    program = [str(bench / sweep.program[0]), *sweep.program[1:], "-l", ",".join(map(str, sizes))]
    outcome = run(
        RunOptions(
            machine=m,
            layout=layout,
            program=program,
            out=out,
            costs=Costs({}),
            capture_output=True,
            env=dict(sweep.env),
        )
    )
    if outcome.exit_code:
        raise OrreryError(f"{sweep.program[0]} exited with status {outcome.exit_code} on {m.name}")
    assert outcome.stdout is not None  # capture_output=True
    return outcome.stdout


def simulate(repo: Path | None, m: machines.Machine, sweep: Sweep, sizes: list[int], out: Path) -> dict[int, float]:
    """The sweep's simulated values per size, in its unit."""
    stdout = run_bench(repo, m, sweep, sizes, out)
    values = {}
    if sweep.kind[0] == "nccl_time":  # nccl-tests' table, one placement's times
        table = measurements.nccl_tests_table(Path(sweep.program[0]), stdout)
        placed = table[sweep.kind[2]]
        return {size: sweeps.from_si(sweep.unit, t) for size, t in zip(placed.sizes, placed.values)}
    if sweep.kind[0] == "api_time":  # api_overheads prints the measurement CSV
        text = stdout[stdout.index("benchmark,metric") :]
        for row in csv.DictReader(text.splitlines()):
            if row["path"] == sweep.kind[1]:
                values[int(row["size_bytes"])] = float(row["value"])
        return values
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit():
            values[int(parts[0])] = float(parts[1])
    return values


def validate(
    machine_name: str,
    repo: Path | None = None,
    overrides: Mapping[str, object] = {},
    sweep_set: str | None = None,
    calibration: merge.Calibration | None = None,
) -> list[SweepResult]:
    """Every sweep of the machine (or of its sweep set) simulated and compared. `calibration`
    applies first, then the set's own description, then `overrides` (description values, as
    `--set` gives them): merge.machine."""
    found = sweeps.sweeps_for(machine_name, sweep_set)
    sweeps.check_sources(repo)
    stack = merge.described(sweeps.set_description(machine_name, sweep_set))
    m = merge.machine(machine_name, calibration, {**stack, **overrides})
    build_bench(repo)
    results = []
    for sweep in progress.bar(found, desc="validate", unit="sweep"):
        results.append(compare(repo, m, sweep, sweeps.measured_points(sweep, repo)))
        log.info("%s: %s", sweep.name, errors_line(results[-1]))
    return results


def errors_line(result: SweepResult) -> str:
    """A sweep's comparison in a few words, for the log."""
    return (
        f"{len(result.sizes)} sizes simulated, |error| median {100 * result.median_abs_error:.1f}%, "
        f"p95 {100 * result.p95_abs_error:.1f}%, max {100 * result.max_abs_error:.1f}%"
    )


_built: dict[Path, Path] = {}
_building = threading.Lock()


def nccl_home() -> Path | None:
    """Where NCCL's public header is for building nccl_sweep: $NCCL_HOME, else the one
    scripts/setup.sh keeps in the environment (.venv/nccl); None where neither has include/nccl.h."""
    for home in (os.environ.get("NCCL_HOME"), str(Path(sys.prefix) / "nccl")):
        if home and (Path(home) / "include" / "nccl.h").is_file():
            return Path(home)
    return None


def build_bench(repo: Path | None = None, nccl: bool = False) -> Path:
    """calibration/bench (installed with the package, or `repo`'s) built with Orrery's wrappers,
    once per process, in a temporary folder removed at exit (nothing is written beside the
    sources, which may be read-only); returns the folder with the programs. nccl_sweep is built
    too where NCCL's header is found (nccl_home), and `nccl` says it must be."""
    src = sweeps.bench_dir(repo).resolve()
    home = nccl_home()
    if nccl and home is None:
        raise BuildError(
            "calibration/bench/nccl_sweep needs NCCL's header (include/nccl.h): set NCCL_HOME to an NCCL "
            f"installation, or run scripts/setup.sh, which keeps the wheel's header in {Path(sys.prefix) / 'nccl'}"
        )
    with _building:
        if src not in _built:
            dest = Path(tempfile.mkdtemp(prefix="orrery-bench-"))
            atexit.register(shutil.rmtree, dest, ignore_errors=True)
            log.info("building the microbenchmarks of %s in %s", src, dest)
            for f in [*src.glob("*.cu"), *src.glob("*.h"), src / "Makefile"]:
                shutil.copy2(f, dest / f.name)
            orrery = str(Path(sys.executable).parent / "orrery")
            made = subprocess.run(
                [
                    "make",
                    "-s",
                    "-C",
                    str(dest),
                    f"NVCC={orrery} nvcc",
                    f"MPICXX={orrery} mpicxx",
                    *((f"NCCL_HOME={home}",) if home else ()),
                ],
                stdout=subprocess.DEVNULL,
                check=False,
            )
            if made.returncode:
                raise BuildError(
                    f"building {src}'s microbenchmarks in {dest} failed (make exited "
                    f"{made.returncode}; its errors are above)"
                )
            _built[src] = dest
        return _built[src]


def compare(repo: Path | None, m: machines.Machine, sweep: Sweep, points: list[tuple[int, float]]) -> SweepResult:
    """Simulate a sweep at its measured sizes and line the two up."""
    sizes = [s for s, _ in points]
    with tempfile.TemporaryDirectory(prefix="orrery-validate-") as runs:
        simulated = simulate(repo, m, sweep, sizes, Path(runs))
    return result(sweep, points, simulated)


def result(sweep: Sweep, points: list[tuple[int, float]], simulated: Mapping[int, float]) -> SweepResult:
    """A sweep's measured points and its simulated values (size -> value in its unit) lined up."""
    sizes = [s for s, _ in points]
    measured = [v for _, v in points]
    sim = [simulated[s] for s in sizes]
    errors = [(s - v) / v for s, v in zip(sim, measured)]
    abs_err = [abs(e) for e in errors]
    return SweepResult(
        sweep.name,
        sweep.unit,
        sweep.note,
        sizes,
        measured,
        sim,
        errors,
        statistics.median(abs_err),
        percentile(abs_err, 0.95),
        max(abs_err),
    )
