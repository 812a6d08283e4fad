"""The Jacobi example's time per iteration by term, at 1, 2, 4, 8 and 32 H100: README's table.

    .venv/bin/python examples/jacobi/terms.py [--gpus 1,2,4,8,32] [--niter 10] [--nx 16384 --ny 16384] [--mean]

Builds the example with Orrery's wrappers (or takes --jacobi PROGRAM, built so) and runs it on two machines: the built-in h100-ib200
as it is now (calibrated), and h100-ib200-uncalibrated.toml beside this script, a copy of the
built-in as it was before its MPI stack was calibrated (every MPI software cost zero). Each
point is run twice, with NITER and 2 x NITER iterations: a term per iteration is the difference
of the two runs' divided by NITER, so that the set-up before the loop (memsets of the grid, the
boundary kernel, the first barrier) drops out and the terms add up to the loop's own time per
iteration, what the program prints and what one compares with a measured run. The rank shown is
the critical one (the last to finish the longer run), or with --mean the mean over ranks. Prints
three Markdown tables: calibrated, uncalibrated, and the change (calibrated - uncalibrated).
One GPU gives the kernel term alone; what grows beyond it at N GPUs is the communication.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import orrery
from orrery.run.results import TERM_HEADINGS, TERMS, Results, Terms

HERE = Path(__file__).resolve().parent
ORRERY = str(Path(sys.executable).parent / "orrery")
GPUS_PER_NODE = 4  # h100-ib200
MACHINES = {"calibrated": "h100-ib200", "uncalibrated": str(HERE / "h100-ib200-uncalibrated.toml")}


def run(jacobi: Path, machine: str, gpus: int, niter: int, nx: int, ny: int, out: Path) -> Results:
    nodes = max(1, gpus // GPUS_PER_NODE)
    return orrery.simulate(
        jacobi,
        ["-nx", str(nx), "-ny", str(ny), "-niter", str(niter)],
        machine=machine,
        nodes=nodes,
        gpus_per_node=min(gpus, GPUS_PER_NODE),
        costs=HERE / "costs.toml",
        strict=True,
        out=out,
        iterations=niter,
    )


def per_iteration(short: Results, long: Results, niter: int, mean: bool) -> Terms:
    """The loop's terms per iteration: the longer run's less the shorter's, over the iterations
    between them (of the critical rank of the longer run, or the mean over ranks)."""
    assert short.terms and long.terms  # both runs completed (simulate raises otherwise)
    if mean:
        a, b = short.terms.mean, long.terms.mean
    else:
        rank = long.terms.critical_rank
        a, b = short.ranks[rank].terms, long.ranks[rank].terms
    return Terms(**{name: (getattr(b, name) - getattr(a, name)) / niter for name in TERMS})


def table(rows: dict[int, Terms]) -> list[str]:
    heads = ["GPUs", *TERM_HEADINGS, "total"]
    lines = ["| " + " | ".join(heads) + " |", "|" + "|".join("---:" for _ in heads) + "|"]
    for gpus, t in rows.items():
        # rounded first, so that a difference of -0.001 us reads 0.00, not -0.00
        cells = [f"{round(s * 1e6, 2) + 0.0:.2f}" for s in (*(getattr(t, name) for name in TERMS), t.total_s())]
        lines.append(f"| {gpus} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> dict[str, dict[int, Terms]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", default="1,2,4,8,32", help="GPU counts, comma-separated (whole nodes beyond 4)")
    ap.add_argument("--niter", type=int, default=10, help="iterations of the shorter run (the longer: twice)")
    ap.add_argument("--nx", type=int, default=16384)
    ap.add_argument("--ny", type=int, default=16384)
    ap.add_argument("--mean", action="store_true", help="the mean over ranks instead of the critical rank")
    ap.add_argument("--jacobi", type=Path, help="the example built with Orrery's wrappers (default: make it here)")
    a = ap.parse_args(argv)
    counts = [int(g) for g in a.gpus.split(",")]
    for g in counts:
        if g < 1 or (g > GPUS_PER_NODE and g % GPUS_PER_NODE):
            ap.error(f"--gpus: got {g}, expected 1 to {GPUS_PER_NODE} or whole nodes of {GPUS_PER_NODE}")
    if a.jacobi is None:
        subprocess.run(["make", "-s", "-C", str(HERE), f"NVCC={ORRERY} nvcc", f"MPICXX={ORRERY} mpicxx"], check=True)
    jacobi = a.jacobi or HERE / "jacobi"
    found: dict[str, dict[int, Terms]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, machine in MACHINES.items():
            found[label] = {}
            for g in counts:
                short = run(jacobi, machine, g, a.niter, a.nx, a.ny, Path(tmp) / f"{label}-{g}-short")
                long = run(jacobi, machine, g, 2 * a.niter, a.nx, a.ny, Path(tmp) / f"{label}-{g}-long")
                found[label][g] = per_iteration(short, long, a.niter, a.mean)
    who = "mean over ranks" if a.mean else "critical rank"
    print(f"Jacobi {a.nx} x {a.ny}, time per iteration by term (us, {who}), h100-ib200 ({GPUS_PER_NODE} GPUs a node)")
    for label in MACHINES:
        print(f"\n{label} ({MACHINES[label] if label == 'calibrated' else Path(MACHINES[label]).name}):\n")
        print("\n".join(table(found[label])))
    change = {
        g: Terms(**{n: getattr(found["calibrated"][g], n) - getattr(found["uncalibrated"][g], n) for n in TERMS})
        for g in counts
    }
    print("\nchange (calibrated - uncalibrated):\n")
    print("\n".join(table(change)))
    found["change"] = change
    return found


if __name__ == "__main__":
    main()
