"""Fit the Jacobi example's kernel cost on measured single-GPU runs, simulator in the loop.

Source: calibration/data/measured/jacobi_scaling.csv (copied unchanged from
the shared measurements): single-H100 runs of a CUDA-aware MPI Jacobi solver
on MareNostrum 5, 100 000 iterations, `make cub` build, Table 6.1 of
J. Torres, "Supercomputing for AI", ch. 6. The measured time per iteration
includes everything the solver does besides its kernel (norm reset and
read-back, halo exchange with itself, norm allreduce), so:

1. simulate each measured grid with a known kernel cost c0 and read the
   simulated per-iteration time s; the rest of an iteration costs s - c0
   (valid for any kernel longer than a copy's host overhead, as here);
2. the kernel's own time per iteration is measured - (s - c0);
3. fit alpha + beta * threads (grid x block of our launch geometry) by least
   squares on the relative error (the target is a bound on each grid's
   relative error) and write examples/jacobi/costs.toml with the residuals.

Run: .venv/bin/python calibration/fit_jacobi.py   (needs nvcc; ~10 s)
"""

from __future__ import annotations

import csv
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "calibration" / "data" / "measured" / "jacobi_scaling.csv"
EXAMPLE = REPO / "examples" / "jacobi"
ORRERY = str(Path(sys.executable).parent / "orrery")
C0 = 100e-6          # known kernel cost of the calibration simulations
SIM_ITERATIONS = 20  # iterations simulated per grid (the per-iteration time is constant)


def measured_rows() -> list[dict]:
    with DATA.open(newline="") as f:
        rows = [r for r in csv.DictReader(f)
                if r["gpus"] == "1" and r["build"] == "make cub" and "Table 6.1" in r["notes"]]
    if len(rows) < 2:
        sys.exit(f"{DATA}: expected at least two single-GPU 'make cub' Table 6.1 rows, found {len(rows)}")
    return sorted(rows, key=lambda r: int(r["grid_nx"]))


def threads_launched(nx: int, ny: int) -> int:
    """Threads of one jacobi_kernel launch on one GPU: examples/jacobi uses 32 x 32 blocks."""
    chunk = ny - 2
    return ((nx + 31) // 32) * ((chunk + 31) // 32) * 32 * 32


def simulated_iteration(nx: int, ny: int, tmp: Path) -> float:
    costs = tmp / "c0.json"
    costs.write_text(json.dumps({"kernels": {"jacobi_kernel": {"time": C0}}}))
    out = subprocess.run(
        [ORRERY, "run", "--nodes", "1", "--gpus-per-node", "1", "--costs", str(costs), "--out", str(tmp / "o"),
         "--", str(EXAMPLE / "jacobi"), "-nx", str(nx), "-ny", str(ny), "-niter", str(SIM_ITERATIONS)],
        capture_output=True, text=True, check=True).stdout
    seconds = float(next(line for line in out.splitlines() if line.startswith("time:")).split()[1])
    return seconds / SIM_ITERATIONS


def main() -> None:
    subprocess.run(["make", "-s", "-C", str(EXAMPLE), f"NVCC={ORRERY} nvcc", f"MPICXX={ORRERY} mpicxx"],
                   check=True)
    rows = measured_rows()
    with tempfile.TemporaryDirectory() as d:
        points = []
        for r in rows:
            nx, ny = int(r["grid_nx"]), int(r["grid_ny"])
            measured = float(r["time_s"]) / int(r["iterations"])
            rest = simulated_iteration(nx, ny, Path(d)) - C0
            points.append((nx, ny, threads_launched(nx, ny), measured, rest))
    n = np.array([p[2] for p in points], dtype=float)
    kernel = np.array([p[3] - p[4] for p in points])
    measured = np.array([p[3] for p in points])
    weights = 1.0 / measured  # relative error
    design = np.vstack([np.ones_like(n), n]).T
    (alpha, beta), *_ = np.linalg.lstsq(design * weights[:, None], kernel * weights, rcond=None)
    lines = [
        "# Kernel costs of examples/jacobi on one H100 (h100-ib200), fitted by calibration/fit_jacobi.py",
        "# from calibration/data/measured/jacobi_scaling.csv (sha256 "
        f"{hashlib.sha256(DATA.read_bytes()).hexdigest()[:16]}...), single-GPU 'make cub' rows of",
        "# Table 6.1 (J. Torres, Supercomputing for AI, ch. 6; MareNostrum 5, 100 000 iterations).",
        "# jacobi_kernel time = alpha + beta * threads launched, least squares on relative error; per grid",
        "# (measured vs this fit + the simulated rest of an iteration):",
    ]
    for (nx, ny, threads, measured, rest), k in zip(points, kernel):
        predicted = rest + alpha + beta * threads
        lines.append(f"#   {nx} x {ny}: {threads} threads, measured {measured * 1e6:.2f} us/iteration, "
                     f"predicted {predicted * 1e6:.2f} us ({(predicted - measured) / measured * 100:+.2f}%)")
    lines += [
        "",
        "# alpha also absorbs whatever fixed cost per iteration the simulation does not model on its own",
        "# (the measured code's own synchronisation and launch latencies): a variant that launches the",
        "# kernel several times per iteration (jacobi -overlap) pays it at every launch.",
        "[kernels.jacobi_kernel]",
        f"alpha = {float(alpha)!r}",
        f"beta = {float(beta)!r}",
        "",
        "# Not measured: the one-off boundary initialisation, given the default short-kernel time.",
        "[kernels.initialize_boundaries]",
        'time = "5us"',
        "",
    ]
    (EXAMPLE / "costs.toml").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
