"""Measure a real cluster for Orrery: point-to-point, copy and collective sweeps.

Run with as many ranks as the sweep needs (2 for point-to-point) on the
cluster you want Orrery to calibrate against:

    mpiexec -n 2 python orrery_harness.py --out measurements.csv [--sizes 1:4194304] [--iters 100]
    mpiexec -n 2 python orrery_harness.py --out m.csv --kernel mymodule:step   # time a user kernel too

Host buffers are numpy arrays; device buffers are CuPy arrays and need a GPU.
Without CuPy or a GPU the device sweeps are skipped and the harness says so
(on stderr and in the `notes` of its host rows): it never fakes a device
measurement with host memory. Device-buffer MPI sweeps also need a CUDA-aware
MPI: the harness asks the library (MPIX_Query_cuda_support, in MPICH and Open
MPI) and, when it says no or cannot say, skips them and says so, unless
`--cuda-aware yes` vouches for it. Copies and kernels need no MPI.

API costs (kernel launch, synchronisation, a copy's issue) are measured by the
C program calibration/bench/api_overheads, which prints rows of the same CSV:
timed from Python, each call also pays the interpreter (on an H200 host, a
launch measured 7.4 us from CuPy against 4.1 us from C; calibration/data/h200-harness).

Output: one row per measurement in Orrery's measurement CSV (COLUMNS below,
documented in calibration/README.md), written by rank 0.
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import importlib
import socket
import sys
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI

COLUMNS = ("benchmark", "metric", "path", "buffers", "size_bytes", "value", "unit", "ranks", "nodes", "notes")
WINDOW = 64  # messages in flight per bandwidth iteration, as in OSU


def find_gpu() -> tuple[object | None, str]:
    """CuPy and a reason: (cupy, "") when a GPU is usable, else (None, why not)."""
    try:
        import cupy
    except ImportError:
        return None, "CuPy is not installed"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CUDA driver missing or failing: a GPU-less machine
        return None, f"no usable CUDA device ({e})"
    if count == 0:
        return None, "no CUDA device"
    return cupy, ""


def query_cuda_aware() -> tuple[bool, str]:
    """Whether the MPI library mpi4py loaded takes device pointers, and why not if not.
    MPICH and Open MPI both answer MPIX_Query_cuda_support() at run time."""
    libs = sorted(
        {
            line.split()[-1]
            for line in Path("/proc/self/maps").read_text().splitlines()
            if "libmpi" in line.rsplit("/", 1)[-1]
        }
        if sys.platform.startswith("linux")
        else set()
    )
    for path in libs:
        try:
            query = ctypes.CDLL(path).MPIX_Query_cuda_support
        except (OSError, AttributeError):
            continue
        if query():
            return True, ""
        return False, f"the MPI library ({path}) is not CUDA-aware (MPIX_Query_cuda_support() = 0)"
    return False, "the MPI library does not say whether it is CUDA-aware (no MPIX_Query_cuda_support)"


def sizes_from(spec: str) -> list[int]:
    lo, _, hi = spec.partition(":")
    lo_i, hi_i = int(lo), int(hi or lo)
    if lo_i < 1 or hi_i < lo_i:
        raise SystemExit(f"--sizes {spec}: expected MIN:MAX with 1 <= MIN <= MAX")
    out, s = [], lo_i
    while s <= hi_i:
        out.append(s)
        s *= 2
    return out


class Harness:
    def __init__(self, comm, sizes, iters, warmup):
        self.comm, self.sizes, self.iters, self.warmup = comm, sizes, iters, warmup
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        hosts = comm.allgather(socket.gethostname())
        self.nodes = len(set(hosts))
        self.same_node = len(set(hosts[:2])) == 1
        self.rows: list[dict] = []

    def add(self, benchmark, metric, path, buffers, size, value, unit, notes=""):
        if self.rank == 0:
            self.rows.append(
                {
                    "benchmark": benchmark,
                    "metric": metric,
                    "path": path,
                    "buffers": buffers,
                    "size_bytes": size,
                    "value": f"{value:.6g}",
                    "unit": unit,
                    "ranks": self.size,
                    "nodes": self.nodes,
                    "notes": notes,
                }
            )

    def p2p(self, alloc, sync, buffers, notes):
        path = "intra-node" if self.same_node else "inter-node"
        if self.rank > 1:  # point-to-point uses ranks 0 and 1; the others wait
            for _ in range(3 * len(self.sizes)):
                self.comm.Barrier()
            return
        peer = 1 - self.rank
        for n in self.sizes:
            sbuf, rbuf = alloc(n * WINDOW), alloc(n * WINDOW)
            for metric in ("latency", "bandwidth", "bibw"):
                self.comm.Barrier()
                for it in range(self.iters + self.warmup):
                    if it == self.warmup:
                        sync()
                        start = time.perf_counter()
                    if metric == "latency":
                        if self.rank == 0:
                            self.comm.Send(sbuf[:n], dest=peer)
                            self.comm.Recv(rbuf[:n], source=peer)
                        else:
                            self.comm.Recv(rbuf[:n], source=peer)
                            self.comm.Send(sbuf[:n], dest=peer)
                    elif metric == "bandwidth":
                        if self.rank == 0:
                            reqs = [self.comm.Isend(sbuf[w * n : (w + 1) * n], dest=peer) for w in range(WINDOW)]
                            MPI.Request.Waitall(reqs)
                            self.comm.Recv(rbuf[:1], source=peer)
                        else:
                            reqs = [self.comm.Irecv(rbuf[w * n : (w + 1) * n], source=peer) for w in range(WINDOW)]
                            MPI.Request.Waitall(reqs)
                            self.comm.Send(sbuf[:1], dest=peer)
                    else:
                        reqs = [self.comm.Irecv(rbuf[w * n : (w + 1) * n], source=peer) for w in range(WINDOW)]
                        reqs += [self.comm.Isend(sbuf[w * n : (w + 1) * n], dest=peer) for w in range(WINDOW)]
                        MPI.Request.Waitall(reqs)
                sync()
                elapsed = time.perf_counter() - start
                if metric == "latency":
                    self.add("pingpong", "latency", path, buffers, n, elapsed * 1e6 / (2 * self.iters), "us", notes)
                else:
                    factor = 2 if metric == "bibw" else 1
                    self.add(
                        f"window{WINDOW}",
                        metric,
                        path,
                        buffers,
                        n,
                        n * WINDOW * self.iters * factor / elapsed / 1e6,
                        "MB/s",
                        notes,
                    )

    def _collective_ops(self, count, f_s, f_r):
        """Each collective on `count` floats, as OSU sizes it: what a rank contributes, or for a
        reduce-scatter the whole vector, shared among the ranks as osu_reduce_scatter does (one
        element each to the first ranks when there are fewer elements than ranks)."""
        n = self.size
        shares = [(1 if r < count else 0) if count < n else count // n + (1 if r < count % n else 0) for r in range(n)]
        return {
            "allreduce": lambda: self.comm.Allreduce(f_s[:count], f_r[:count]),
            "allgather": lambda: self.comm.Allgather(f_s[:count], f_r[: count * n]),
            "alltoall": lambda: self.comm.Alltoall(f_s[: count * n], f_r[: count * n]),
            "bcast": lambda: self.comm.Bcast(f_s[:count], root=0),
            "reduce_scatter": lambda: self.comm.Reduce_scatter(f_s[: sum(shares)], f_r[: shares[self.rank]], shares),
        }

    def collectives(self, alloc, sync, buffers, notes):
        for n in self.sizes:
            if n < 4:  # one float at least: smaller sizes would repeat the 4-byte row
                continue
            count = n // 4
            sbuf, rbuf = alloc(4 * count * self.size), alloc(4 * count * self.size)
            for name, op in self._collective_ops(count, sbuf.view(np.float32), rbuf.view(np.float32)).items():
                self.comm.Barrier()
                for it in range(self.iters + self.warmup):
                    if it == self.warmup:
                        sync()
                        start = time.perf_counter()
                    op()
                sync()
                mine = (time.perf_counter() - start) * 1e6 / self.iters
                avg = self.comm.reduce(mine, op=MPI.SUM, root=0)
                if self.rank == 0:
                    self.add(
                        name,
                        "collective_latency",
                        f"{self.size} ranks",
                        buffers,
                        4 * count,
                        avg / self.size,
                        "us",
                        notes,
                    )

    def copies(self, cupy):
        """As CUDA's bandwidthTest: back-to-back cudaMemcpyAsync on one stream between pinned
        host memory and the device (or two device buffers), timed by CUDA events. Copies
        shorter than Python's cost of issuing one (a few microseconds) time the issuing."""
        if self.rank != 0:
            return
        runtime = cupy.cuda.runtime
        stream = cupy.cuda.Stream(non_blocking=True)
        for n in self.sizes:
            host = cupy.cuda.alloc_pinned_memory(n)
            d, d2 = cupy.empty(n, dtype=cupy.uint8), cupy.empty(n, dtype=cupy.uint8)
            for kind, dst, src, direction in (
                ("H2D", d.data.ptr, host.ptr, runtime.memcpyHostToDevice),
                ("D2H", host.ptr, d.data.ptr, runtime.memcpyDeviceToHost),
                ("D2D", d2.data.ptr, d.data.ptr, runtime.memcpyDeviceToDevice),
            ):
                start, stop = cupy.cuda.Event(), cupy.cuda.Event()
                for _ in range(self.warmup):
                    runtime.memcpyAsync(dst, src, n, direction, stream.ptr)
                start.record(stream)
                for _ in range(self.iters):
                    runtime.memcpyAsync(dst, src, n, direction, stream.ptr)
                stop.record(stream)
                stop.synchronize()
                seconds = cupy.cuda.get_elapsed_time(start, stop) / 1e3 / self.iters
                self.add(
                    "memcpy",
                    "copy_bandwidth",
                    kind,
                    "pinned" if kind != "D2D" else "D D",
                    n,
                    n / seconds / 1e9,
                    "GB/s",
                    "cudaMemcpyAsync back to back, CUDA events",
                )

    def kernel(self, cupy, spec: str):
        module, _, name = spec.partition(":")
        fn = getattr(importlib.import_module(module), name)
        if self.rank != 0:
            return
        for n in self.sizes:
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            fn(n)
            start.record()
            for _ in range(self.iters):
                fn(n)
            stop.record()
            stop.synchronize()
            self.add(
                f"kernel {spec}",
                "kernel_time",
                "GPU",
                "D",
                n,
                cupy.cuda.get_elapsed_time(start, stop) / 1e3 / self.iters,
                "s",
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="measurement CSV to write (rank 0)")
    ap.add_argument("--sizes", default="1:4194304", help="MIN:MAX message sizes in bytes, doubling")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--kernel", help="MODULE:CALLABLE taking a size, timed on the GPU with CUDA events")
    ap.add_argument(
        "--cuda-aware",
        choices=("auto", "yes", "no"),
        default="auto",
        help="whether MPI takes device buffers (auto: ask the library)",
    )
    a = ap.parse_args(argv)
    comm = MPI.COMM_WORLD
    if comm.Get_size() < 2:
        print("orrery_harness: run with at least 2 ranks (mpiexec -n 2 ...)", file=sys.stderr)
        return 2
    h = Harness(comm, sizes_from(a.sizes), a.iters, a.warmup)
    cupy, why = find_gpu()
    host_notes = "" if cupy else f"device sweeps skipped: {why}"
    if h.rank == 0 and not cupy:
        print(f"orrery_harness: {host_notes}", file=sys.stderr)
    h.p2p(lambda n: np.zeros(n, dtype=np.uint8), lambda: None, "H H", host_notes)
    h.collectives(lambda n: np.zeros(n, dtype=np.uint8), lambda: None, "H", host_notes)
    if cupy:
        aware, why_not = (
            (True, "")
            if a.cuda_aware == "yes"
            else (False, "--cuda-aware no")
            if a.cuda_aware == "no"
            else query_cuda_aware()
        )
        if aware:
            sync = cupy.cuda.runtime.deviceSynchronize
            h.p2p(lambda n: cupy.zeros(n, dtype=cupy.uint8), sync, "D D", "")
            h.collectives(lambda n: cupy.zeros(n, dtype=cupy.uint8), sync, "D", "")
        elif h.rank == 0:
            print(f"orrery_harness: device-buffer MPI sweeps skipped: {why_not}", file=sys.stderr)
        h.copies(cupy)
        if a.kernel:
            h.kernel(cupy, a.kernel)
    elif a.kernel and h.rank == 0:
        print(f"orrery_harness: --kernel skipped: {why}", file=sys.stderr)
    if h.rank == 0:
        with open(a.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            w.writeheader()
            w.writerows(h.rows)
        print(f"orrery_harness: {len(h.rows)} measurements in {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
