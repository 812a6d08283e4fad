"""What running SMPI's small collectives in the kernel saves (interpose/mpi/smpi_colls.cpp).

The Jacobi example (examples/jacobi: a 4-byte MPI_Allreduce of the norm at every iteration,
besides its halo exchange) under ``orrery run``, each ``--gpus`` on each ``--machine``, with the
collectives' messages run in SimGrid's kernel (the default) and by SMPI's requests rank by rank
(``ORRERY_SMPI_COLLS=simgrid``, the baseline), ``--repeat`` times alternately: the median wall
times and their ratio, which algorithms the kernel took (``ORRERY_SMPI_COLLS=report``), and whether
the two runs' results.json are the same bytes (they must be).

    .venv/bin/python -P bench/colls.py [--machine h100-ib200 dgx-a100] [--gpus 64 128 1024]
        [--iterations 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # bench/scale.py: the Jacobi runs and their timing

REPORT = re.compile(r"^orrery: collectives: (.*)$", re.M)
TAKEN = re.compile(r"([a-zA-Z ]+?) (\d+) in the kernel, (\d+) by SMPI's requests")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--machine", nargs="+", default=["h100-ib200", "dgx-a100"])
    ap.add_argument("--gpus", type=int, nargs="+", default=[64, 128, 1024])
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each, alternating (default 3)")
    a = ap.parse_args()
    from orrery import machines

    work = Path(tempfile.mkdtemp(prefix="orrery-bench-colls-"))
    jacobi = scale.build(work)[0]
    print(
        "| machine | simulated GPUs | iterations | in the kernel (s) | by SMPI's requests (s) | ratio "
        "| taken per rank and iteration | same results.json |"
    )
    print("|" + "---|" * 8)
    for name in a.machine:
        per_node = machines.load(name, {}).node.gpus
        b = scale.Bench(name, [], "", 0, work, jacobi, jacobi, jacobi, jacobi)
        for gpus in a.gpus:
            walls: dict[str, list[float]] = {"": [], "simgrid": []}
            outs = {mode: work / f"{name}-{gpus}-{mode or 'kernel'}" for mode in walls}
            taken = ""
            for _ in range(a.repeat):
                for mode in walls:
                    os.environ["ORRERY_SMPI_COLLS"] = mode or "report"
                    m = b.orrery(gpus, a.iterations, outs[mode], per_node)
                    walls[mode].append(m.wall_s)
                    if not mode and (found := REPORT.search(m.output)):
                        taken = ", ".join(
                            f"{alg.strip()} {int(k) / gpus / a.iterations:.3g}"
                            for alg, k, _ in TAKEN.findall(found[1])
                            if int(k)
                        )
            os.environ.pop("ORRERY_SMPI_COLLS", None)
            kernel, requests = statistics.median(walls[""]), statistics.median(walls["simgrid"])
            same = (outs[""] / "results.json").read_bytes() == (outs["simgrid"] / "results.json").read_bytes()
            print(
                f"| {name} | {gpus} | {a.iterations} | {kernel:.2f} | {requests:.2f} | {kernel / requests:.2f} "
                f"| {taken} | {'yes' if same else 'NO'} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
