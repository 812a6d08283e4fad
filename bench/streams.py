"""What a stream operation costs the simulation, against what a message costs bare SMPI.

Issue 21's wall ratio (Orrery / bare SMPI on the same MPI pattern) is, at every size measured, about
the ratio of events: Orrery simulates each rank's GPU work besides its messages (bench/README.md).
This prints that cost per event on its own. For each ``--ranks`` (h100-ib200, 4 GPUs per node):

- Orrery: ``stream_ops.cu`` under ``orrery run``, each rank launching a kernel and a memset (with
  ``--ops kernel-copy``: a copy of one float to pinned host memory) on a stream of its own and
  waiting for them, ``--iterations`` times: two GPU operations and one stream synchronisation per
  rank and iteration, and no message (with ``--ops join``: the second operation is a kernel on a
  second stream, which waits for an event recorded behind the first);
- bare SMPI: ``messages_only.c`` under ``smpirun`` on the platform of that Orrery run, as
  bench/scale.py runs its baseline (Orrery's ``liborrery_smpi.so``, allocator and copies of the
  program): ranks in pairs exchanging one float with ``MPI_Sendrecv``, two messages per pair and
  iteration.

Each is run at ``--iterations`` and at 0 (start-up alone), ``--repeat`` times alternately; the
medians' difference over the operations is the cost of one: per GPU operation (its share of an
iteration, the synchronisation included) and per bare message, in wall microseconds, and their
ratio.

    .venv/bin/python -P bench/streams.py [--ranks 64 256] [--iterations 2000] [--repeat 3]
        [--ops kernel-memset|kernel-copy|join]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # bench/scale.py: the same runs, timing and baseline

GPU_OPS = 2  # per rank and iteration: a kernel and a memset or copy (and the synchronisation after them)


def build(work: Path) -> tuple[Path, Path]:
    orrery, repo = scale.ORRERY, scale.REPO
    obj, prog, bare = work / "stream_ops.o", work / "stream_ops", work / "messages_only"
    subprocess.run([orrery, "nvcc", "-arch=sm_90", "-c", str(repo / "bench/stream_ops.cu"), "-o", str(obj)], check=True)
    subprocess.run([orrery, "mpicxx", str(obj), "-o", str(prog)], check=True)
    subprocess.run(["smpicc", "-O2", str(repo / "bench/messages_only.c"), "-o", str(bare)], check=True)
    return prog, bare


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each, alternating (default 3)")
    ap.add_argument(
        "--ops",
        choices=["kernel-memset", "kernel-copy", "join"],
        default="kernel-memset",
        help="each iteration's two GPU operations (default kernel-memset)",
    )
    a = ap.parse_args()
    from orrery import machines

    m = machines.load("h100-ib200", {})
    for r in a.ranks:
        if r % m.node.gpus or r % 2:
            raise SystemExit(f"bench/streams.py: --ranks: {r} is not a whole number of nodes of {m.node.gpus} GPUs")
    work = Path(tempfile.mkdtemp(prefix="orrery-bench-streams-"))
    program, bare = build(work)
    eager = int(max(m.mpi.eager_threshold_host, m.mpi.eager_threshold_device))
    # only Bench.smpirun is used: its Jacobi and start-up programs stand for this benchmark's two
    b = scale.Bench(
        "h100-ib200", [], m.mpi.collective_selector, eager, work, program, bare, bare, scale.build_probe(work)
    )

    def orrery(ranks: int, iterations: int) -> float:
        out = work / f"o{ranks}x{iterations}"
        cmd = [scale.ORRERY, "run", "--machine", "h100-ib200", "--nodes", str(ranks // m.node.gpus)]
        args = [str(iterations), *{"kernel-copy": ["copy"], "join": ["join"]}.get(a.ops, [])]
        return scale.timed([*cmd, "--out", str(out), "--", str(program), *args]).wall_s

    def smpi(ranks: int, iterations: int) -> float:
        return b.smpirun(work / f"o{ranks}x0", ranks, bare, [str(iterations)])[0].wall_s

    print(f"work folder: {work}; GPU operations: {a.ops}\n")
    heads = [
        "ranks",
        "iterations",
        "Orrery wall (s)",
        "Orrery start-up (s)",
        "bare wall (s)",
        "bare start-up (s)",
        "Orrery us per GPU operation",
        "bare us per message",
        "GPU operation / message",
    ]
    print("| " + " | ".join(heads) + " |")
    print("|---" * len(heads) + "|")
    for ranks in a.ranks:
        runs: dict[str, list[float]] = {"orrery": [], "orrery0": [], "bare": [], "bare0": []}
        orrery(ranks, 0)  # the folder whose platform the bare runs take
        for _ in range(a.repeat):
            runs["orrery"].append(orrery(ranks, a.iterations))
            runs["orrery0"].append(orrery(ranks, 0))
            runs["bare"].append(smpi(ranks, a.iterations))
            runs["bare0"].append(smpi(ranks, 0))
        med = {k: statistics.median(v) for k, v in runs.items()}
        per_op = (med["orrery"] - med["orrery0"]) / (ranks * a.iterations * GPU_OPS) * 1e6
        per_message = (med["bare"] - med["bare0"]) / (ranks * a.iterations) * 1e6  # each rank sends one
        print(
            f"| {ranks} | {a.iterations} | {med['orrery']:.2f} | {med['orrery0']:.2f} | {med['bare']:.2f} "
            f"| {med['bare0']:.2f} | {per_op:.2f} | {per_message:.2f} | {per_op / per_message:.2f} |"
        )


if __name__ == "__main__":
    main()
