"""Link accounting benchmark: what counting every link's bytes and busy time costs.

For 64 and 256 simulated H100 (h100-ib200, 4 per node) it runs the Jacobi example with a
full-size problem per GPU (as bench/scale.py does) three ways, alternately, several times:
without link accounting (the run description's ``link_accounting = false``: the baseline),
with it (the default), and with it and ``link_series.tsv`` (what ``--trace`` turns into
counter tracks). Each run is ``launch.run`` in this process, timed in CPU seconds (user +
system), which other work on a shared machine disturbs less than wall time: the simulation's
(smpirun and SMPI, the shim's accounting included) and this process's own (platform
generation, reading the report, writing results.json). Prints a Markdown table of the
medians and their ratios to the baseline's, and the median wall times.

    .venv/bin/python bench/links.py [--gpus 64 256] [--iterations 10] [--repeat 3]
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

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
ORRERY = str(BIN / "orrery")
NX = 16384  # columns; each GPU holds NX x NX floats
VARIANTS = {  # RunOptions fields of each variant
    "no accounting": {"link_accounting": False},
    "accounting": {},
    "accounting + series": {"link_series": True},
}


def cpu() -> tuple[float, float]:
    """User + system seconds of the finished children (the simulation) and of this process."""
    children, own = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    return children.ru_utime + children.ru_stime, own.ru_utime + own.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each variant, alternating (default 3)")
    a = ap.parse_args()
    from orrery import machines
    from orrery.machines import platform
    from orrery.run import costs as cost_files
    from orrery.run import launch

    subprocess.run(
        ["make", "-s", "-C", str(REPO / "examples/jacobi"), f"NVCC={ORRERY} nvcc", f"MPICXX={ORRERY} mpicxx"],
        check=True,
    )
    m = machines.load("h100-ib200", {})
    costs = cost_files.load(REPO / "examples/jacobi/costs.toml")
    work = Path(tempfile.mkdtemp(prefix="orrery-bench-links-"))
    with_ = list(VARIANTS)[1:]
    heads = [
        "simulated GPUs",
        "iterations",
        "link directions used",
        "series rows",
        *(f"simulation CPU (s): {v}" for v in VARIANTS),
        *(f"simulation: {v} / baseline" for v in with_),
        *(f"Python CPU (s): {v}" for v in VARIANTS),
        *(f"wall (s): {v}" for v in VARIANTS),
    ]
    print("| " + " | ".join(heads) + " |")
    print("|---" * len(heads) + "|")
    for gpus in a.gpus:
        layout = platform.Layout.for_machine(m, gpus // m.node.gpus)
        program = [str(REPO / "examples/jacobi/jacobi"), "-nx", str(NX), "-ny", str(NX * gpus), "-niter"]
        program.append(str(a.iterations))
        times: dict[str, list[tuple[float, float, float]]] = {v: [] for v in VARIANTS}  # simulation, Python, wall
        used, rows = 0, 0
        for _ in range(a.repeat):
            for variant, fields in VARIANTS.items():
                out = work / f"g{gpus}"
                opts = launch.RunOptions(m, layout, program, out, costs=costs, capture_output=True, **fields)
                (sim0, own0), t0 = cpu(), time.perf_counter()
                outcome = launch.run(opts)
                (sim1, own1), t1 = cpu(), time.perf_counter()
                times[variant].append((sim1 - sim0, own1 - own0, t1 - t0))
                if outcome.exit_code:
                    raise SystemExit(f"{variant} at {gpus} GPUs: the run ended {outcome.results.status}")
                if fields.get("link_series"):
                    used = len(outcome.results.links)
                    rows = len((out / "link_series.tsv").read_text().splitlines()) - 1
        med = {v: [statistics.median(t[i] for t in ts) for i in range(3)] for v, ts in times.items()}
        base = med["no accounting"][0]
        cells = [str(gpus), str(a.iterations), str(used), str(rows)]
        cells += [f"{med[v][0]:.2f}" for v in VARIANTS]
        cells += [f"{med[v][0] / base:.3f}" for v in with_]
        cells += [f"{med[v][1]:.2f}" for v in VARIANTS]
        cells += [f"{med[v][2]:.2f}" for v in VARIANTS]
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
