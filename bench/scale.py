"""Scale benchmark: wall time and peak RSS of the Jacobi example under Orrery.

For 8, 64, 256 and 1024 simulated H100 (h100-ib200, 4 per node) it runs the
example with a full-size problem per GPU (16384 x 16384 floats, two arrays:
2 GiB of device memory per GPU) for a few iterations, and, in the same
invocation, the same MPI calls without CUDA under bare SMPI on the same
platform (bench/jacobi_mpi_only.c): the ratio is Orrery's overhead.

    .venv/bin/python bench/scale.py [--gpus 8 64 256 1024] [--iterations 10] [--machine NAME] [--set K=V ...]

Prints a Markdown table (paste it into bench/README.md). Wall times are of
this machine; run nothing else meanwhile.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
ORRERY = str(BIN / "orrery")
NX = 16384  # columns; each GPU holds NX x NX floats


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, float, str]:
    """Wall seconds and peak RSS (GiB) of a command and its children."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{' '.join(cmd[:6])}... failed:\n{out[-3000:]}")
    return wall, usage.ru_maxrss / 2**20, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, nargs="+", default=[8, 64, 256, 1024])
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--machine", default="h100-ib200", help="a built-in machine (default h100-ib200)")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a machine parameter in both runs, as orrery run --set (repeatable)",
    )
    a = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from orrery import machines as machine
    from orrery.machines import platform
    from orrery.run.launch import SMPI_CONFIG

    work = Path(tempfile.mkdtemp(prefix="orrery-bench-"))
    subprocess.run(
        ["make", "-s", "-C", str(REPO / "examples/jacobi"), f"NVCC={ORRERY} nvcc", f"MPICXX={ORRERY} mpicxx"],
        check=True,
    )
    bare = work / "jacobi_mpi_only"
    subprocess.run(["smpicc", "-O2", str(REPO / "bench/jacobi_mpi_only.c"), "-o", str(bare)], check=True)
    m = machine.load(a.machine, machine.parse_overrides(a.set))
    overrides = [x for kv in a.set for x in ("--set", kv)]
    print(
        "| simulated GPUs | iterations | Orrery wall (s) | Orrery peak RSS (GiB) | bare SMPI wall (s) "
        "| bare SMPI peak RSS (GiB) | wall ratio |"
    )
    print("|---|---|---|---|---|---|---|")
    for gpus in a.gpus:
        nodes = gpus // m.node.gpus
        args = ["-nx", str(NX), "-ny", str(NX * gpus), "-niter", str(a.iterations)]
        out = work / f"o{gpus}"
        w_orr, rss_orr, _ = timed(
            [
                ORRERY,
                "run",
                "--machine",
                a.machine,
                *overrides,
                "--nodes",
                str(nodes),
                "--costs",
                str(REPO / "examples/jacobi/costs.toml"),
                "--out",
                str(out),
                "--",
                str(REPO / "examples/jacobi/jacobi"),
                *args,
            ]
        )
        layout = platform.Layout.for_machine(m, nodes)
        cmd = [
            "smpirun",
            "-np",
            str(gpus),
            "-platform",
            str(out / "platform.xml"),
            "-hostfile",
            str(out / "hostfile"),
            *[f"--cfg={c}" for c in SMPI_CONFIG],
            f"--cfg=smpi/coll-selector:{m.mpi.collective_selector}",  # the same collective algorithms
            "--log=xbt_cfg.thres:warning",
            "--log=smpi_config.thres:warning",
            str(bare),
            *args,
        ]
        assert layout.ranks == gpus
        w_bare, rss_bare, _ = timed(cmd)
        print(
            f"| {gpus} | {a.iterations} | {w_orr:.2f} | {rss_orr:.2f} | {w_bare:.2f} | {rss_bare:.2f} "
            f"| {w_orr / w_bare:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
