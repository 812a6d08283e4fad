"""Validation: Orrery's microbenchmarks on a built-in machine against measured sweeps.

``orrery validate --machine NAME`` builds calibration/bench (in a temporary
folder: the repository may be read-only), runs each sweep
that has a measured counterpart for that machine through the simulator, at
the measured sizes, and lines the two up: per size the measured and the
simulated value and the relative error, per sweep the median, 95th
percentile and maximum of |error|, a plot (measured and simulated curves,
error per size) and ``validation.json``. Every figure comes from the
measured CSV files (calibration/data/measured/, unchanged) and the runs.

Not here: fitting the machine to the measurements (the calibration issue).
"""

from __future__ import annotations

import atexit
import csv
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import machines
from ..errors import BuildError, InputError, OrreryError
from ..machines import platform
from ..run.costs import Costs
from ..run.launch import RunOptions, run
from . import measurements


@dataclass(frozen=True)
class Sweep:
    """A measured sweep and the microbenchmark run that reproduces it."""

    name: str
    file: str                       # in calibration/data/measured/
    select: tuple[tuple[str, str], ...]  # (column, text it must contain; "=text": it must equal)
    size_column: str
    value_column: str
    unit: str                       # of the value column: "GB/s", "MB/s" or "us"
    program: tuple[str, ...]        # calibration/bench program and its arguments (sizes follow as -l)
    nodes: int = 1
    gpus_per_node: int = 1
    measured_scale: float = 1.0     # applied to measured values to compare like with like
    note: str = ""
    kind: tuple[str, str, str] = ("", "", "")  # metric, path, buffers: what the fits turn into parameters
    fit: bool = True                # False: compared after calibration, not a fit input (note says why)


_VP = (("system", "Voltage Park"),)
_H100_COPIES = [
    Sweep("H2D copy, bandwidthTest pinned (Voltage Park H100 SXM5)", "device_bandwidth.csv",
          _VP + (("test", "memcpy host->device"),), "transfer_bytes", "bandwidth_GBps", "GB/s",
          ("memcpy_sweep", "h2d", "-i", "5"), kind=("copy_bandwidth", "H2D", "pinned")),
    Sweep("D2H copy, bandwidthTest pinned (Voltage Park H100 SXM5)", "device_bandwidth.csv",
          _VP + (("test", "memcpy device->host"),), "transfer_bytes", "bandwidth_GBps", "GB/s",
          ("memcpy_sweep", "d2h", "-i", "5"), kind=("copy_bandwidth", "D2H", "pinned"),
          note="the measured D2H rate drops to 20.5 GB/s above 2 MB (NUMA placement, per the source)"),
    Sweep("D2D copy, bandwidthTest (Voltage Park H100 SXM5)", "device_bandwidth.csv",
          _VP + (("test", "memcpy device->device"),), "transfer_bytes", "bandwidth_GBps", "GB/s",
          ("memcpy_sweep", "d2d", "-i", "100"), measured_scale=0.5, kind=("copy_bandwidth", "D2D", "D D"),
          note="bandwidthTest counts read+write bytes: measured values halved"),
]
_METRIC_KIND = {"latency": "latency", "bw": "bandwidth", "bibw": "bibw"}  # OSU test -> fitted metric


def osu_run(test: str, path: str, buffers: str, iters: str) -> tuple[tuple[str, ...], dict[str, int]]:
    """The osu_p2p command and layout that reproduce an OSU test on a path with these buffers."""
    program = ("osu_p2p", test, *(("-d", "cuda") if "D" in buffers else ()), *buffers.split(), "-i", iters, "-x", "1")
    return program, ({"nodes": 2} if path == "inter-node" else {"gpus_per_node": 2})


def osu_sweep(name: str, select: tuple[tuple[str, str], ...], path: str, buffers: str, test: str,
              **extra) -> Sweep:
    """An osu_latency, osu_bw or osu_bibw sweep of p2p_mpi.csv (rows of `select` on this path,
    buffers and test), reproduced by osu_p2p: 5 iterations for latency, 3 for bandwidth."""
    program, layout = osu_run(test, path, buffers, "5" if test == "latency" else "3")
    value, unit = ("latency_us", "us") if test == "latency" else ("bandwidth_MBps", "MB/s")
    return Sweep(name, "p2p_mpi.csv", select + (("path", path), ("buffers", buffers), ("metric", f"={test}")),
                 "message_bytes", value, unit, program, kind=(_METRIC_KIND[test], path, buffers), **layout, **extra)


def osu_alltoall(where: str, select: tuple[tuple[str, str], ...], buffers: str, **extra) -> Sweep:
    """An osu_alltoall sweep of collectives.csv (8 ranks on 2 GH200 nodes; `buffers` "H" or "D"),
    reproduced by coll_sweep."""
    benchmark = "OSU osu_alltoall" + (" -d cuda" if buffers == "D" else "")
    return Sweep(f"osu_alltoall{' -d cuda' if buffers == 'D' else ''}, 8 ranks on 2 nodes ({where})",
                 "collectives.csv", select + (("benchmark", f"={benchmark}"),), "message_bytes", "time_us", "us",
                 ("coll_sweep", "alltoall", buffers, "-i", "3"), nodes=2, gpus_per_node=4,
                 kind=("collective_latency", "alltoall", buffers), **extra)


_SANTIS = (("system", "santis"),)
# Latency between nodes: Alps clariden (the same GH200 nodes and Slingshot-11), with the
# same MPI as the santis sweeps (Open MPI 5 container, libfabric CXI).
_CLARIDEN_LAT = (("system", "clariden"), ("raw_file", "osu-ompi_README@fe26e83"))
_GH200 = [
    osu_sweep("osu_bw D D inter-node (Alps santis GH200, Slingshot-11)", _SANTIS, "inter-node", "D D", "bw"),
    osu_sweep("osu_bibw D D inter-node (Alps santis GH200, Slingshot-11)", _SANTIS, "inter-node", "D D", "bibw"),
    osu_sweep("osu_bw H H inter-node (Alps santis GH200, Slingshot-11)", _SANTIS, "inter-node", "H H", "bw"),
    osu_sweep("osu_bibw H H inter-node (Alps santis GH200, Slingshot-11)", _SANTIS, "inter-node", "H H", "bibw"),
    osu_sweep("osu_bw D D intra-node (Alps santis GH200)", _SANTIS, "intra-node", "D D", "bw"),
    osu_sweep("osu_bw H H intra-node (Alps santis GH200)", _SANTIS, "intra-node", "H H", "bw"),
    osu_sweep("osu_latency D D inter-node (Alps clariden GH200, Open MPI 5)", _CLARIDEN_LAT, "inter-node", "D D",
              "latency", fit=False,
              note="compared, not fitted: clariden's 19.7 us for small device messages cannot be reconciled with "
                   "santis's osu_bw and osu_bibw windows, which imply ~3 us; fitted with clariden's own sweeps "
                   "(--sweeps clariden, calibration/gh200-clariden) it is matched"),
    osu_sweep("osu_latency H H inter-node (Alps clariden GH200, Open MPI 5)", _CLARIDEN_LAT, "inter-node", "H H",
              "latency"),
    osu_sweep("osu_latency D D intra-node (Alps santis GH200)", _SANTIS, "intra-node", "D D", "latency",
              note="the measured runs crossed the NIC (libfabric CXI), not NVLink: the machine's "
                   "mpi.intra_node = \"nic\" routes them so"),
    *(osu_alltoall("Alps santis GH200, Open MPI 5", _SANTIS, b) for b in ("D", "H")),
]
# Alps clariden with Open MPI 5 over libfabric CXI alone: its osu_bw runs (Open MPI 5.0.8rc1)
# and its osu_latency runs between nodes (the earlier Open MPI 5 container above).
_CLARIDEN_COLL = (("system", "clariden"),)
_CLARIDEN_BW = (("system", "clariden"), ("raw_file", "osu-ompi_README@cce0170"),
                ("mpi_or_lib", "Open MPI 5.0.8rc1 (container), libfabric CXI"))
_CLARIDEN = [
    osu_sweep("osu_bw D D inter-node (Alps clariden GH200, Open MPI 5.0.8 CXI)", _CLARIDEN_BW, "inter-node", "D D",
              "bw"),
    osu_sweep("osu_latency D D inter-node (Alps clariden GH200, Open MPI 5)", _CLARIDEN_LAT, "inter-node", "D D",
              "latency"),
    osu_sweep("osu_bw H H inter-node (Alps clariden GH200, Open MPI 5.0.8 CXI)", _CLARIDEN_BW, "inter-node", "H H",
              "bw"),
    osu_sweep("osu_latency H H inter-node (Alps clariden GH200, Open MPI 5)", _CLARIDEN_LAT, "inter-node", "H H",
              "latency"),
    osu_sweep("osu_latency D D intra-node (Alps clariden GH200, Open MPI 5.0.8 CXI)", _CLARIDEN_BW, "intra-node",
              "D D", "latency"),
    osu_sweep("osu_bw D D intra-node (Alps clariden GH200, Open MPI 5.0.8 CXI)", _CLARIDEN_BW, "intra-node", "D D",
              "bw"),
    osu_sweep("osu_bw H H intra-node (Alps clariden GH200, Open MPI 5.0.8 CXI)", _CLARIDEN_BW, "intra-node", "H H",
              "bw"),
    *(osu_alltoall("Alps clariden GH200, Open MPI 5.0.8 CXI", _CLARIDEN_COLL + (
        ("library", "=Open MPI 5.0.8rc1 (container), libfabric CXI"),), b)
      for b in ("D", "H")),
    # the earlier Open MPI 5 container's runs (its osu_latency is above): one correction per collective
    # and buffer kind is fitted, to the Open MPI 5.0.8 runs, and these are compared with it
    *(osu_alltoall("Alps clariden GH200, Open MPI 5", _CLARIDEN_COLL + (("raw_file", "osu-ompi_README@fe26e83"),), b,
                   fit=False, note="compared, not fitted: the earlier Open MPI 5 container's run; the correction "
                                   "is fitted to the Open MPI 5.0.8 one")
      for b in ("D", "H")),
]
# Alps clariden with Open MPI 5.0.8 over libfabric's LINKx provider (CXI between nodes, shared
# memory within a node): osu_bw between and within nodes, osu_latency within a node.
_LINKX = (("system", "clariden"), ("mpi_or_lib", "libfabric LINKx"))
_NO_LONE_MESSAGE = ("no osu_latency between nodes for this stack: a lone message takes the windows' model "
                    "(2 o + L + size / bandwidth, a rendezvous handshake above the eager threshold), not a "
                    "measured time")
_CLARIDEN_LINKX = [
    osu_sweep(f"osu_{test} {b} {path} (Alps clariden GH200, Open MPI 5.0.8 LINKx)", _LINKX, path, b, test, note=note)
    for test, path, b, note in (
        ("bw", "inter-node", "D D", _NO_LONE_MESSAGE), ("bw", "inter-node", "H H", _NO_LONE_MESSAGE),
        ("bw", "intra-node", "D D", "181 GB/s at 4 MiB, above the 150 GB/s of the description's 6 NVLink links "
                                    "per GPU pair"),
        ("bw", "intra-node", "H H", "shared memory: 69 GB/s at 256 KiB while the buffers stay in cache, 24 GB/s "
                                    "at 4 MiB; from 512 KiB the time per message grows faster than the size, a "
                                    "segment with a negative latency"),
        ("latency", "intra-node", "D D", "implausible as printed (about 3 us up to 2 MiB, over 700 GB/s), as the "
                                         "shared data's README says"))] + [
    osu_alltoall("Alps clariden GH200, Open MPI 5.0.8 LINKx", _CLARIDEN_COLL + (("library", "LINKx"),), b)
    for b in ("D", "H")]
# Alps clariden with MPICH 4.2.1 over libfabric CXI: osu_latency between nodes, osu_alltoall.
_CLARIDEN_MPICH = (("system", "clariden"), ("mpi_or_lib", "MPICH 4.2.1"))
_CLARIDEN_MPICH_SWEEPS = [
    osu_sweep(f"osu_latency {b} inter-node (Alps clariden GH200, MPICH 4.2.1 CXI)", _CLARIDEN_MPICH, "inter-node", b,
              "latency") for b in ("D D", "H H")] + [
    osu_alltoall("Alps clariden GH200, MPICH 4.2.1 CXI", _CLARIDEN_COLL + (("library", "MPICH 4.2.1"),), b)
    for b in ("D", "H")]


def _olivia(stack: str, select: tuple[tuple[str, str], ...], notes: dict[str, str] = {}) -> list[Sweep]:
    """Sigma2 Olivia (HPE Cray EX, GH200 nodes, Slingshot-11): osu_latency and osu_bibw between
    device buffers of two nodes, one MPI stack's runs."""
    where = (("system", "Olivia"),) + select
    return [osu_sweep(f"osu_{test} D D inter-node (Sigma2 Olivia GH200, {stack})", where, "inter-node", "D D", test,
                      note=notes.get(test, "")) for test in ("latency", "bibw")]


_UCX_WINDOW = ("from 256 B to 4 KiB a window of osu_bibw takes 7 us per message and direction, longer than "
               "osu_latency's whole one-way 3.8 us: a per-message overhead cannot give that (it would slow the "
               "lone message), a gap between a rank's sends (gaps.device_inter) does")
_OLIVIA = {
    "olivia-cray-mpich-8": _olivia("Cray MPICH 8.1.32", (("mpi_or_lib", "Cray MPICH 8.1.32"),), {
        "bibw": "its 8 KiB point, 4.5 times below its neighbours, is left out of the fit; the window's slower "
                "rate at 32 KiB is a gap between sends (gaps.device_inter)"}),
    "olivia-cray-mpich-9": _olivia("Cray MPICH 9.1.0", (("mpi_or_lib", "Cray MPICH 9.1.0"),)),
    "olivia-ompi-4-ucx": _olivia("Open MPI 4.1.6 + UCX 1.15", (("mpi_or_lib", "OpenMPI 4.1.6"),),
                                 {"latency": _UCX_WINDOW, "bibw": _UCX_WINDOW}),
    "olivia-ompi-5-ucx": _olivia("Open MPI 5.0.3 + UCX 1.16, srun",
                                 (("mpi_or_lib", "OpenMPI 5.0.3"), ("raw_file", "part2.md"))),
    "olivia-ompi-5-ucx-mpirun": _olivia("Open MPI 5.0.3 + UCX 1.16, mpirun",
                                        (("mpi_or_lib", "OpenMPI 5.0.3"), ("raw_file", "part2@2eb7040"))),
}
# The 2x EPYC 9354 + 2x H100 PCIe node (Open MPI 4.1.6 + UCX, UCX_RNDV_THRESH=1024): osu_bibw
# within the node, between the GPUs of the two sockets and between a GPU and host memory.
_H100_PCIE_NODE = (("gpu", "H100 PCIe"),)
_H100_PCIE = [
    osu_sweep("osu_bibw D D intra-node, GPUs on two sockets (2x H100 PCIe, Open MPI 4.1.6 + UCX)", _H100_PCIE_NODE,
              "intra-node", "D D", "bibw",
              note="above UCX's 1 KiB rendezvous threshold the rate jumps sixfold: windows of smaller messages "
                   "are slower by a gap between sends (gaps.device_intra), not a per-message overhead; the "
                   "rate levels at 15 GB/s each way, the link between the sockets (topology SYS) as PCIe "
                   "peer-to-peer traffic gets it (node.socket_link_bandwidth, set from this sweep's 64 MiB "
                   "point), against PCIe Gen5 x16's 53.8 GB/s"),
    osu_sweep("osu_bibw D H intra-node (2x H100 PCIe, Open MPI 4.1.6 + UCX)", _H100_PCIE_NODE, "intra-node", "D H",
              "bibw", fit=False,
              note="compared, not fitted: about 1.4 GB/s both ways at every size above 32 KiB, a thirtieth of "
                   "the PCIe rate the same node's D D sweep reaches; its source, openucx/ucx#9462, reports it as "
                   "a UCX performance bug"),
]
# An A100 pair joined by 4 NVLink 3 links (EESSI test system, Open MPI + UCX): osu_bw between
# the two GPUs, on dgx-a100 with its NVSwitch replaced by that pair's NV4 (SET_DESCRIPTION).
_A100_NV4 = [
    osu_sweep("osu_bw D D intra-node, A100 NV4 pair (EESSI test system, Open MPI)", (("gpu", "A100"),),
              "intra-node", "D D", "bw",
              note="no osu_latency of the path; from 128 B to 8 KiB the rate stalls (15.6 us per 8 KiB "
                   "message), a gap between sends (gaps.device_intra); the time per message jumps between "
                   "neighbouring sizes (1.7 us at 2 B, 1.0 us at 16 B; 1.0 us at 256 B, 2.9 us at 512 B), more "
                   "than the fit's four segments follow"),
]
SWEEPS: dict[str, list[Sweep]] = {"h100-pcie": _H100_PCIE, "h100-ib200": _H100_COPIES, "dgx-h100": _H100_COPIES, "gh200-slingshot": _GH200}
# Other sets of a machine's shared sweeps (--sweeps NAME): one system and MPI stack each.
SWEEP_SETS: dict[str, dict[str, list[Sweep]]] = {
    "dgx-a100": {"eessi-nv4": _A100_NV4},
    "gh200-slingshot": {"clariden": _CLARIDEN, "clariden-linkx": _CLARIDEN_LINKX, "clariden-mpich": _CLARIDEN_MPICH_SWEEPS,
                        **_OLIVIA}}


# What a set's MPI stack does differently from the machine's description, stated up front:
# the calibration starts from it and carries it, validation applies it.
SET_DESCRIPTION: dict[tuple[str, str], dict[str, object]] = {
    # LINKx: CXI between nodes, but shared memory and GPU IPC within a node
    ("gh200-slingshot", "clariden-linkx"): {"mpi.intra_node": "direct"},
    # a pair of A100 SXM4 joined by 4 NVLink 3 links, no NVSwitch
    ("dgx-a100", "eessi-nv4"): {"nvlink.topology": "mesh", "nvlink.links_per_pair": 4},
}


def set_description(machine_name: str, sweep_set: str | None) -> dict[str, object]:
    """A sweep set's changes to the machine's description (key -> value)."""
    return SET_DESCRIPTION.get((machine_name, sweep_set), {}) if sweep_set else {}


def sweeps_for(machine_name: str, sweep_set: str | None = None) -> list[Sweep]:
    """The measured sweeps of a built-in machine: its default set, or the set named by --sweeps."""
    if sweep_set is None:
        if machine_name in SWEEP_SETS and machine_name not in SWEEPS:
            raise InputError("--machine", None, machine_name,
                             f"--sweeps SET with it (it has no default sweeps): "
                             f"{', '.join(sorted(SWEEP_SETS[machine_name]))}")
        if machine_name not in SWEEPS:
            raise InputError("--machine", None, machine_name,
                             f"a machine with measured sweeps to compare against: {', '.join(sorted(SWEEPS))}")
        return SWEEPS[machine_name]
    sets = SWEEP_SETS.get(machine_name, {})
    if sweep_set not in sets:
        raise InputError("--sweeps", None, sweep_set,
                         f"a sweep set of {machine_name}: {', '.join(sorted(sets)) or 'it has none'}")
    return sets[sweep_set]


UNIT_SECONDS = {"us": 1e-6}  # time units of collective sweeps


@dataclass
class SweepResult:
    name: str
    unit: str
    note: str
    sizes: list[int]
    measured: list[float]
    simulated: list[float]
    errors: list[float]       # (simulated - measured) / measured
    median_abs_error: float
    p95_abs_error: float
    max_abs_error: float


def find_repo(start: Path) -> Path:
    for d in [start, *start.parents]:
        if (d / "calibration" / "bench" / "Makefile").is_file() and (d / "calibration" / "data" / "measured").is_dir():
            return d
    raise InputError("orrery validate", None, str(start),
                     "to run inside Orrery's repository (calibration/bench and calibration/data/measured), or --repo")


def selects(sweep: Sweep, row: dict[str, str]) -> bool:
    """Whether a measured row belongs to a sweep."""
    return all(row[col] == text[1:] if text.startswith("=") else text in row[col] for col, text in sweep.select)


def measured_points(repo: Path, sweep: Sweep) -> list[tuple[int, float]]:
    path = repo / "calibration" / "data" / "measured" / sweep.file
    with path.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if selects(sweep, r)]
    points: dict[int, float] = {}
    for r in rows:
        size = int(float(r[sweep.size_column]))
        points.setdefault(size, float(r[sweep.value_column]) * sweep.measured_scale)  # first run of a size
    if not points:
        raise OrreryError(f"{path}: no rows match the sweep '{sweep.name}' ({dict(sweep.select)})")
    return sorted(points.items())


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def simulate(repo: Path, m: machines.Machine, sweep: Sweep, sizes: list[int], out: Path) -> dict[int, float]:
    layout = platform.Layout.for_machine(m, sweep.nodes, sweep.gpus_per_node)
    program = [str(build_bench(repo) / sweep.program[0]), *sweep.program[1:],
               "-l", ",".join(map(str, sizes))]
    outcome = run(RunOptions(machine=m, layout=layout, program=program, out=out, costs=Costs({}),
                             capture_output=True))
    if outcome.exit_code:
        raise OrreryError(f"{sweep.program[0]} exited with status {outcome.exit_code} on {m.name}")
    values = {}
    if sweep.kind[0] == "api_time":  # api_overheads prints the measurement CSV
        text = outcome.stdout[outcome.stdout.index("benchmark,metric"):]
        for row in csv.DictReader(text.splitlines()):
            if row["path"] == sweep.kind[1]:
                values[int(row["size_bytes"])] = float(row["value"])
        return values
    for line in outcome.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit():
            values[int(parts[0])] = float(parts[1])
    return values


def validate(machine_name: str, repo: Path, overrides: list[str] = (), measured_models: bool = True,
             sweep_set: str | None = None, calibration: tuple[str, list[str]] | None = None) -> list[SweepResult]:
    """Every sweep of the machine (or of its sweep set) simulated and compared; `calibration`
    (a file and its overrides) applies before `overrides`, as in machine.load."""
    sweeps = sweeps_for(machine_name, sweep_set)
    from .calibrate import as_set  # calibrate builds on this module

    stack = as_set(set_description(machine_name, sweep_set))
    m = machines.load(machine_name, stack + list(overrides), measured_models=measured_models, calibration=calibration)
    build_bench(repo)
    return [compare(repo, m, sweep, measured_points(repo, sweep)) for sweep in sweeps]


_built: dict[Path, Path] = {}
_building = threading.Lock()


def build_bench(repo: Path) -> Path:
    """calibration/bench of `repo` built with Orrery's wrappers, once per process, in a temporary
    folder removed at exit (nothing is written into the repository, which may be read-only);
    returns the folder with the programs."""
    src = (repo / "calibration" / "bench").resolve()
    with _building:
        if src not in _built:
            dest = Path(tempfile.mkdtemp(prefix="orrery-bench-"))
            atexit.register(shutil.rmtree, dest, ignore_errors=True)
            for f in [*src.glob("*.cu"), *src.glob("*.h"), src / "Makefile"]:
                shutil.copy2(f, dest / f.name)
            orrery = str(Path(sys.executable).parent / "orrery")
            made = subprocess.run(["make", "-s", "-C", str(dest), f"NVCC={orrery} nvcc", f"MPICXX={orrery} mpicxx"],
                                  stdout=subprocess.DEVNULL, check=False)
            if made.returncode:
                raise BuildError(f"building {src}'s microbenchmarks in {dest} failed (make exited "
                                 f"{made.returncode}; its errors are above)")
            _built[src] = dest
        return _built[src]


def compare(repo: Path, m: machines.Machine, sweep: Sweep, points: list[tuple[int, float]]) -> SweepResult:
    """Simulate a sweep at its measured sizes and line the two up."""
    sizes = [s for s, _ in points]
    with tempfile.TemporaryDirectory(prefix="orrery-validate-") as runs:
        simulated = simulate(repo, m, sweep, sizes, Path(runs))
    measured = [v for _, v in points]
    sim = [simulated[s] for s in sizes]
    errors = [(s - v) / v for s, v in zip(sim, measured)]
    abs_err = [abs(e) for e in errors]
    return SweepResult(sweep.name, sweep.unit, sweep.note, sizes, measured, sim, errors,
                       statistics.median(abs_err), percentile(abs_err, 0.95), max(abs_err))


def collective_layout(series, layout: tuple[int, int] | None) -> dict[str, int]:
    """Nodes and GPUs (ranks) per node of a collective series: what its file says (the harness's
    CSV, coll_sweep's title), else `layout` (orrery calibrate --collective-layout NODESxGPUS)."""
    where = series.source + (f":{series.lines[0]}" if series.lines else "")
    if series.ranks is not None and series.nodes is not None:
        nodes, ranks = series.nodes, series.ranks
    elif layout is None:
        raise InputError(where, None, series.benchmark,
                         "--collective-layout NODESxGPUS (e.g. 2x4): the output does not say how many ranks ran "
                         "the collective on how many nodes")
    else:
        nodes, ranks = layout[0], layout[0] * layout[1]
        if series.ranks is not None and series.ranks != ranks:
            raise InputError(where, "ranks", series.ranks, f"{ranks} ranks, as --collective-layout "
                                                           f"{layout[0]}x{layout[1]} says")
    if nodes < 1 or ranks % nodes:
        raise InputError(where, "nodes", nodes, f"a number of nodes that divides the {ranks} ranks evenly")
    return {"nodes": nodes, "gpus_per_node": ranks // nodes}


def sweep_for(series, layout: tuple[int, int] | None = None) -> tuple[Sweep, list[tuple[int, float]]] | None:
    """The microbenchmark that reproduces a measured series (orrery.measurements.Series), with its
    points in the benchmark's unit; None where calibration/bench has no counterpart yet. A
    collective's layout is the file's, or `layout` (nodes, GPUs per node); coll_sweep's name for
    it is also its machine key (collectives.NAME_*)."""
    metric, path, buffers = series.metric, series.path, series.buffers
    if metric == "collective_latency":
        coll = measurements.collective_of(series.benchmark)
        if coll is None or buffers not in ("H", "D"):
            return None
        where = collective_layout(series, layout)
        kind = "device" if buffers == "D" else "host"
        sweep = Sweep(f"{series.benchmark}, {kind} buffers, {where['nodes'] * where['gpus_per_node']} ranks on "
                      f"{where['nodes']} nodes ({Path(series.source).name})", "", (), "", "", "us",
                      ("coll_sweep", coll, buffers, "-i", "3"), kind=(metric, coll, buffers), **where)
        return sweep, [(s, v * 1e6) for s, v in zip(series.sizes, series.values)]
    fit, note = True, ""
    if metric in ("latency", "bandwidth", "bibw") and path in ("intra-node", "inter-node") and \
            buffers in ("H H", "D D", "D H", "H D"):
        test = {"latency": "latency", "bandwidth": "bw", "bibw": "bibw"}[metric]
        args, layout = osu_run(test, path, buffers, "5")
        unit, scale = ("us", 1e6) if metric == "latency" else ("MB/s", 1e-6)
        if buffers in ("D H", "H D"):
            fit, note = False, ("compared, not fitted: a device buffer on one side and a host buffer on the "
                                "other; the message paths are fitted on D D and H H sweeps")
    elif metric == "api_time" and path in ("launch", "sync", "memcpy"):
        args, unit, scale, layout = ("api_overheads", "-i", "100"), "us", 1e6, {}
    elif metric == "copy_bandwidth" and path in ("H2D", "D2H", "D2D", "peer"):
        # copies between device buffers queue on the GPU: enough of them to amortise their issue
        iters = "5" if path in ("H2D", "D2H") else "100"
        args, unit, scale = ("memcpy_sweep", path.lower(), "-i", iters), "GB/s", 1e-9
        layout = {"gpus_per_node": 2} if path == "peer" else {}
    else:
        return None
    sweep = Sweep(f"{series.benchmark} {metric} {path} {buffers} ({Path(series.source).name})", "", (), "", "",
                  unit, args, note=note, kind=(metric, path, buffers), fit=fit, **layout)
    return sweep, [(s, v * scale) for s, v in zip(series.sizes, series.values)]


def report(results: list[SweepResult]) -> str:
    lines = []
    for r in results:
        lines.append(f"== {r.name} [{r.unit}]" + (f"  ({r.note})" if r.note else ""))
        lines.append(f"{'size (B)':>12} {'measured':>12} {'simulated':>12} {'error':>9}")
        for size, meas, sim, err in zip(r.sizes, r.measured, r.simulated, r.errors):
            lines.append(f"{size:>12} {meas:>12.4g} {sim:>12.4g} {100 * err:>8.1f}%")
        lines.append(f"   |error|: median {100 * r.median_abs_error:.1f}%, 95th percentile "
                     f"{100 * r.p95_abs_error:.1f}%, max {100 * r.max_abs_error:.1f}%")
    lines.append("")
    lines.append(f"{'sweep':<64} {'median':>8} {'p95':>8} {'max':>8}")
    for r in results:
        lines.append(f"{r.name:<64} {100 * r.median_abs_error:>7.1f}% {100 * r.p95_abs_error:>7.1f}% "
                     f"{100 * r.max_abs_error:>7.1f}%")
    return "\n".join(lines)


def plot(result: SweepResult):
    """Measured and simulated curves over message size, and the relative error: a matplotlib Figure."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 6))
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    top.plot(result.sizes, result.measured, "o-", label="measured")
    top.plot(result.sizes, result.simulated, "s--", label="simulated (Orrery)")
    top.set_xscale("log", base=2)
    top.set_yscale("log")
    top.set_ylabel(result.unit)
    top.set_title(result.name, fontsize=9)
    top.legend()
    bottom.plot(result.sizes, [100 * e for e in result.errors], "d-", color="tab:red")
    bottom.axhline(0, color="grey", linewidth=0.8)
    bottom.set_xlabel("size (bytes)")
    bottom.set_ylabel("error (%)")
    fig.tight_layout()
    return fig


def write(results: list[SweepResult], machine_name: str, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "validation.json").write_text(
        json.dumps({"machine": machine_name, "sweeps": [asdict(r) for r in results]}, indent=1) + "\n")
    paths = []
    for i, r in enumerate(results):
        path = out / f"sweep{i}.png"
        plot(r).savefig(path, dpi=90)
        paths.append(path)
    return paths
