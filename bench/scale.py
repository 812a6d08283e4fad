"""Scale benchmark: the Jacobi example under Orrery against bare SMPI, and issue 21's targets.

One invocation measures every figure of issue 21 on this machine, each beside the bare-SMPI
baseline measured in the same invocation on the same generated platform:

1. rows (``--gpus``, ``--iterations``): examples/jacobi under ``orrery run`` on h100-ib200 (4 GPUs
   per node) with a full-size problem per GPU (16384 x 16384 floats, two arrays: 2 GiB of device
   memory per GPU), then bench/jacobi_mpi_only.c (the same halo ``MPI_Sendrecv``s and norm
   ``MPI_Allreduce`` from host buffers, no CUDA) under bare ``smpirun`` on the same platform:
   wall time, peak RSS, peak memory maps of ``smpimain``, simulated time, simulated events;
2. real time (``--realtime-gpus``, ``--realtime-iterations``): simulated seconds per wall second;
3. growth: the exponent of wall time against ranks x iterations over the rows (log-log fit),
   and against the events simulated (messages for the bare run);
4. events per wall second at ``--events-gpus``: kernels and copies from Orrery's results.json,
   MPI messages counted in the bare run of the same pattern (bench/probe.cpp);
5. fixed costs at ``--fixed-gpus``: platform generation, SimGrid start-up (bench/mpi_init_only.c
   under smpirun) and route set-up, as shares of that row's Orrery run.

    .venv/bin/python bench/scale.py [--gpus 64 256 1024 16384] [--iterations 100] [--machine NAME]
        [--set K=V ...] [--realtime-gpus 128] [--realtime-iterations 1000] [--events-gpus 1024]
        [--fixed-gpus 1024] [--force-flat] [--repeat 1]

Prints Markdown tables and a summary against the targets (paste them into bench/README.md).
Wall times are of this machine; run nothing else meanwhile. ``--repeat N`` runs each row's pair N
times, Orrery's and the bare run in turn (so that both meet the same spells of a noisy machine),
and gives each the median wall time, the range beside it, and each target's verdict on the
median ratio with the range of the N paired ratios. Rows that vm.max_map_count cannot
hold are skipped with the sysctl that lets them run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
ORRERY = str(BIN / "orrery")
NX = 16384  # columns; each GPU holds NX x NX floats
MAX_MAP_COUNT = Path("/proc/sys/vm/max_map_count")
FLAT_LIMIT = 1024  # GPUs: above this the flat platform's routing takes hours (--force-flat runs it)

# issue 21's targets
RATIO_TARGET = 1.15  # Orrery / bare SMPI wall at 64, 256 and 1024 GPUs
RATIO_GPUS = (64, 256, 1024)
REALTIME_TARGET = 1.0  # simulated seconds per wall second at 128 GPUs
BIG_GPUS, BIG_WALL_S, BIG_RSS_GIB = 16384, 600.0, 16.0
GROWTH_TARGET = 1.0  # exponent of wall time against ranks x iterations
EVENTS_TARGET = 330_000  # simulated events per wall second at 1024 GPUs
FIXED_TARGET = 0.10  # fixed costs' share of a 1024-GPU, 100-iteration run


# ---------------------------------------------------------------- measuring a command


def _children(pid: int) -> list[int]:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    kids: list[int] = []
    for t in tasks:
        with contextlib.suppress(OSError):
            kids += [int(k) for k in Path(f"/proc/{pid}/task/{t}/children").read_text().split()]
    return kids


def _smpimain(root: int) -> int | None:
    """The pid of the smpimain process below ``root`` (None: none yet)."""
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "smpimain":
                return pid
        except OSError:
            continue
        todo += _children(pid)
    return None


class MapSampler(threading.Thread):
    """The most memory maps (lines of /proc/PID/maps) smpimain below a process had while it ran.
    Reading the maps of a big run takes a while: it reads at most 1/20 of the time."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root, self.peak, self.done = root, 0, threading.Event()

    def run(self) -> None:
        period = 0.05
        while not self.done.wait(period):
            pid = _smpimain(self.root)
            if pid is None:
                continue
            t0 = time.perf_counter()
            try:
                with open(f"/proc/{pid}/maps", "rb") as f:
                    n = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
            except OSError:
                continue
            self.peak = max(self.peak, n)
            period = max(0.05, 20 * (time.perf_counter() - t0))


@dataclass
class Measured:
    wall_s: float
    rss_gib: float  # the largest of the command and its descendants (wait4)
    maps: int  # the most memory maps smpimain had (sampled)
    start: float = 0.0  # time.time() at the start, for the probe's instants
    output: str = field(default="", repr=False)


def timed(cmd: list[str], env: dict[str, str] | None = None) -> Measured:
    """Wall seconds, peak RSS (GiB) and peak memory maps of a command and its children."""
    start = time.time()
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, **(env or {})}
    )
    sampler = MapSampler(proc.pid)
    sampler.start()
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    sampler.done.set()
    sampler.join()
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{' '.join(cmd[:6])}... failed:\n{out[-3000:]}")
    return Measured(wall, usage.ru_maxrss / 2**20, sampler.peak, start, out)


# ---------------------------------------------------------------- the two runs


def structured_platform() -> bool:
    """Whether orrery run writes the structured platform (not the flat DijkstraCache zone)."""
    from orrery.run import launch

    return launch.platform_library().exists()


@dataclass
class Bench:
    machine: str
    overrides: list[str]  # --set K=V, for both runs
    collective_selector: str
    eager_threshold: int  # bytes: SMPI's detached sends, as orrery run sets them
    work: Path
    jacobi: Path
    bare: Path
    init_only: Path
    probe: Path

    def orrery(self, gpus: int, iterations: int, out: Path, gpus_per_node: int) -> Measured:
        return timed(
            [
                ORRERY,
                "run",
                "--machine",
                self.machine,
                *[x for kv in self.overrides for x in ("--set", kv)],
                "--nodes",
                str(gpus // gpus_per_node),
                "--costs",
                str(REPO / "examples/jacobi/costs.toml"),
                "--iterations",
                str(iterations),
                "--out",
                str(out),
                "--",
                str(self.jacobi),
                *jacobi_args(gpus, iterations),
            ]
        )

    def smpirun(self, out: Path, ranks: int, program: Path, args: list[str]) -> tuple[Measured, dict]:
        """A bare-SMPI run on the platform of the run folder ``out`` (its host file too): the
        measurement and what the probe wrote (probe.cpp). SMPI's launcher gets the probe and
        Orrery's liborrery_smpi.so, so that both runs send the same messages: without its k-nomial
        broadcast, SimGrid's first broadcast on a communicator runs a ring allgather over all the
        ranks (Comm::init_smp, P^2 messages: 130 000 more at 256 ranks), which Orrery's run never
        pays; its message pins cost the baseline what they cost Orrery (bench/README.md). It also
        runs with the allocator orrery run gives SMPI's launcher (launch.allocator: mimalloc) and
        makes SMPI's copies of the program where orrery run does (launch.program_copies: a folder
        on /dev/shm), so that the ratio is neither's. Its collectives go by SMPI's requests, rank by
        rank (ORRERY_SMPI_COLLS=simgrid): running their messages in SimGrid's kernel is Orrery's
        (smpi_colls.cpp), and the baseline is SMPI's way of running the same messages."""
        from orrery._paths import lib_dir
        from orrery.run.launch import allocator, platform_args, program_copies, smpi_config, smpirun_copies_to

        plat, env = platform_args(out)  # as orrery run gave SimGrid the platform of that folder
        probe_file = self.work / "probe.json"
        probe_file.unlink(missing_ok=True)
        preload = ":".join(
            p for p in (str(lib_dir() / "liborrery_smpi.so"), str(self.probe), allocator(os.environ)) if p
        )
        cmd = [
            "smpirun",
            "-np",
            str(ranks),
            *plat,
            "-hostfile",
            str(out / "hostfile"),
            *[f"--cfg={c}" for c in smpi_config()],
            f"--cfg=smpi/coll-selector:{self.collective_selector}",  # the same collective algorithms
            f"--cfg=smpi/send-is-detached-thresh:{self.eager_threshold}",  # the same eager sends
            "--log=xbt_cfg.thres:warning",
            "--log=smpi_config.thres:warning",
            str(program),
            *args,
        ]
        with program_copies(ranks, program, os.environ) as copies:
            run_env, wrapper = smpirun_copies_to(
                copies,
                {**env, "BENCH_PROBE": str(probe_file), "ORRERY_SMPI_COLLS": "simgrid"},
                f"env LD_PRELOAD={preload}",
            )
            m = timed([cmd[0], "-wrapper", wrapper, *cmd[1:]], run_env)
        probe = json.loads(probe_file.read_text())
        m.maps = max(m.maps, probe["maps"])  # counted at the simulation's end: every rank's maps exist
        return m, probe


def jacobi_args(gpus: int, iterations: int) -> list[str]:
    return ["-nx", str(NX), "-ny", str(NX * gpus), "-niter", str(iterations)]


@dataclass
class Simulated:
    makespan_s: float
    kernels: int  # launches
    copies: int  # copies and memsets
    mpi_calls: int


def simulated(out: Path) -> Simulated:
    """What the run in ``out`` simulated, from its results.json (orrery/run/results.py)."""
    res = json.loads((out / "results.json").read_text())
    count = {k: sum(t["count"] for r in res["ranks"] for t in r[k].values()) for k in ("kernels", "copies", "mpi")}
    return Simulated(res["makespan_s"], count["kernels"], count["copies"], count["mpi"])


# ---------------------------------------------------------------- the figures


def median_run(runs: list[Measured]) -> Measured:
    """The run of median wall time (the lower of the two middle ones for an even count), with the
    largest peak RSS and memory maps of all the runs."""
    mid = sorted(runs, key=lambda m: m.wall_s)[(len(runs) - 1) // 2]
    return Measured(mid.wall_s, max(m.rss_gib for m in runs), max(m.maps for m in runs), mid.start, mid.output)


@dataclass
class Row:
    gpus: int
    iterations: int
    orrery: Measured  # the median run (median_run)
    bare: Measured
    sim: Simulated
    probe: dict  # what the probe wrote in the bare run (probe.cpp)
    orrery_walls: list[float] = field(default_factory=list)  # every repeat's, in turn with the bare's
    bare_walls: list[float] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return self.orrery.wall_s / self.bare.wall_s

    def spread(self, walls: list[float]) -> str:
        """' (min-max)' of the repeats' wall times; nothing for one run."""
        return f" ({min(walls):.2f}-{max(walls):.2f})" if len(walls) > 1 else ""

    def ratio_spread(self) -> str:
        """The range of the paired ratios (each Orrery run over the bare run beside it)."""
        if len(self.orrery_walls) < 2:
            return ""
        paired = [o / b for o, b in zip(self.orrery_walls, self.bare_walls, strict=True)]
        return f", paired ratios {min(paired):.2f}-{max(paired):.2f} over {len(paired)} repeats"

    @property
    def messages(self) -> int:
        """The MPI pattern's messages, counted in the bare run."""
        return int(self.probe["messages"])

    @property
    def events(self) -> int:
        return self.sim.kernels + self.sim.copies + self.messages


def fmt_ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b > 0 else "-"


def per_rank(maps: int, ranks: int) -> str:
    return f"{maps / ranks:.1f}" if maps else "-"  # "-": the run ended before a sample


def met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def map_limit() -> int | None:
    try:
        return int(MAX_MAP_COUNT.read_text())
    except (OSError, ValueError):
        return None


def maps_needed(rows: list[Row], gpus: int) -> int | None:
    """The memory maps a run of ``gpus`` needs, from the largest row measured (its maps per
    rank, everything counted: a slight overestimate), None before any row."""
    if not rows:
        return None
    big = max(rows, key=lambda r: r.gpus)
    per_rank = max(big.orrery.maps, big.bare.maps) / big.gpus
    return math.ceil(per_rank * gpus)


def sysctl_for(need: int) -> str:
    value = 65536 * math.ceil(1.25 * need / 65536)  # a quarter to spare
    return f"sudo sysctl -w vm.max_map_count={value}"


def growth(points: list[tuple[float, float]]) -> float | None:
    """The slope of log(wall) against log(ranks x iterations): least squares (None: < 2 sizes)."""
    if len({x for x, _ in points}) < 2:
        return None
    fit = statistics.linear_regression([math.log(x) for x, _ in points], [math.log(y) for _, y in points])
    return fit.slope


def build(work: Path) -> tuple[Path, Path, Path, Path]:
    subprocess.run(
        ["make", "-s", "-C", str(REPO / "examples/jacobi"), f"NVCC={ORRERY} nvcc", f"MPICXX={ORRERY} mpicxx"],
        check=True,
    )
    bare, init_only = work / "jacobi_mpi_only", work / "mpi_init_only"
    subprocess.run(["smpicc", "-O2", str(REPO / "bench/jacobi_mpi_only.c"), "-o", str(bare)], check=True)
    subprocess.run(["smpicc", "-O2", str(REPO / "bench/mpi_init_only.c"), "-o", str(init_only)], check=True)
    return REPO / "examples/jacobi/jacobi", bare, init_only, build_probe(work)


def build_probe(work: Path) -> Path:
    """probe.cpp as the library the bare runs preload (Bench.smpirun)."""
    probe = work / "libbench_probe.so"
    cxx = os.environ.get("CXX", "c++")
    cmd = [cxx, "-O2", "-std=c++17", "-shared", "-fPIC", str(REPO / "bench/probe.cpp"), "-o", str(probe), "-lsimgrid"]
    subprocess.run(cmd, check=True)
    return probe


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, nargs="+", default=[64, 256, 1024, BIG_GPUS])
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--machine", default="h100-ib200", help="a built-in machine (default h100-ib200)")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a machine parameter in both runs, as orrery run --set (repeatable)",
    )
    ap.add_argument("--realtime-gpus", type=int, default=128, help="the real-time row's GPUs (0: none)")
    ap.add_argument("--realtime-iterations", type=int, default=1000)
    ap.add_argument("--events-gpus", type=int, default=1024, help="the row whose events per second are the target")
    ap.add_argument("--fixed-gpus", type=int, default=1024, help="measure the fixed costs at this row (0: not)")
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run each row's Orrery and bare runs this many times, in turn; figures are medians (default 1)",
    )
    ap.add_argument(
        "--force-flat",
        action="store_true",
        help=f"run rows above {FLAT_LIMIT} GPUs on the flat platform too (its routing takes hours there)",
    )
    a = ap.parse_args()
    if a.repeat < 1:
        raise SystemExit(f"bench/scale.py: --repeat: {a.repeat}, expected a count of at least 1")
    from orrery import machines
    from orrery.machines import platform
    from orrery.run import launch

    m = machines.load(a.machine, machines.parse_overrides(a.set))
    per_node = m.node.gpus
    for g in [*a.gpus, a.realtime_gpus]:
        if g and g % per_node:
            raise SystemExit(
                f"bench/scale.py: --gpus: {g} is not a whole number of {a.machine} nodes ({per_node} GPUs)"
            )
    work = Path(tempfile.mkdtemp(prefix="orrery-bench-"))
    jacobi, bare, init_only, probe = build(work)
    eager = int(max(m.mpi.eager_threshold_host, m.mpi.eager_threshold_device))
    b = Bench(a.machine, a.set, m.mpi.collective_selector, eager, work, jacobi, bare, init_only, probe)
    structured = structured_platform()
    limit = map_limit()
    print(
        f"platform: {'structured (platform.json)' if structured else 'flat (platform.xml, DijkstraCache)'}; "
        f"vm.max_map_count: {limit}; work folder: {work}\n"
    )

    # 1. the rows: Orrery against bare SMPI
    print(
        "| simulated GPUs | iterations | Orrery wall (s) | bare SMPI wall (s) | wall ratio | Orrery peak RSS (GiB) "
        "| bare peak RSS (GiB) | RSS ratio | Orrery maps per rank | bare maps per rank | simulated (s) "
        "| simulated s per wall s | events | events per wall s | bare messages per wall s |"
    )
    print("|" + "---|" * 15)
    rows: list[Row] = []
    skipped: list[str] = []

    def one_row(gpus: int, iterations: int) -> Row | None:
        if gpus > FLAT_LIMIT and not structured and not a.force_flat:
            skipped.append(f"{gpus} GPUs: the flat platform's routing takes hours at this size (--force-flat runs it)")
            return None
        need = maps_needed(rows, gpus)
        if limit is not None and need is not None and need > limit:
            skipped.append(
                f"{gpus} GPUs: needs about {need} memory maps (measured per rank at {max(r.gpus for r in rows)} "
                f"GPUs), vm.max_map_count is {limit}: `{sysctl_for(need)}`"
            )
            return None
        out = work / f"o{gpus}x{iterations}"
        orr_runs, bare_runs = [], []
        for _ in range(a.repeat):  # in turn: both meet the same spells of a noisy machine
            orr_runs.append(b.orrery(gpus, iterations, out, per_node))
            bare_one, probe_data = b.smpirun(out, gpus, b.bare, jacobi_args(gpus, iterations))
            bare_runs.append(bare_one)
        orr, bare_m = median_run(orr_runs), median_run(bare_runs)
        row = Row(
            gpus,
            iterations,
            orr,
            bare_m,
            simulated(out),
            probe_data,
            [m.wall_s for m in orr_runs],
            [m.wall_s for m in bare_runs],
        )
        print(
            f"| {gpus} | {iterations} | {orr.wall_s:.2f}{row.spread(row.orrery_walls)} "
            f"| {bare_m.wall_s:.2f}{row.spread(row.bare_walls)} | {fmt_ratio(orr.wall_s, bare_m.wall_s)} "
            f"| {orr.rss_gib:.2f} | {bare_m.rss_gib:.2f} | {fmt_ratio(orr.rss_gib, bare_m.rss_gib)} "
            f"| {per_rank(orr.maps, gpus)} | {per_rank(bare_m.maps, gpus)} | {row.sim.makespan_s:.4g} "
            f"| {row.sim.makespan_s / orr.wall_s:.3g} | {row.events} | {row.events / orr.wall_s:.0f} "
            f"| {row.messages / bare_m.wall_s:.0f} |",
            flush=True,
        )
        return row

    for gpus in a.gpus:
        if (row := one_row(gpus, a.iterations)) is not None:
            rows.append(row)
    realtime = one_row(a.realtime_gpus, a.realtime_iterations) if a.realtime_gpus else None
    for line in skipped:
        print(f"\nskipped: {line}")

    # 2. fixed costs
    fixed: dict[str, float] = {}  # the itemized fixed costs, seconds
    fixed_cost: dict[str, float] = {}  # Orrery's whole fixed cost ("intercept") and Python's start-up
    full = next((r for r in rows if r.gpus == a.fixed_gpus), None)
    if a.fixed_gpus and full is not None:
        layout = platform.Layout.for_machine(m, a.fixed_gpus // per_node)
        gen = []
        for _ in range(3):
            t0 = time.perf_counter()
            launch.write_platform(m, layout, work)  # the description and its links, as orrery run makes them
            gen.append(time.perf_counter() - t0)
        out1 = work / f"o{a.fixed_gpus}x1"
        orr1 = b.orrery(a.fixed_gpus, 1, out1, per_node)
        init, init_probe = b.smpirun(out1, a.fixed_gpus, b.init_only, [])
        _, bare1_probe = b.smpirun(out1, a.fixed_gpus, b.bare, jacobi_args(a.fixed_gpus, 1))

        def simulation(p: dict) -> float:  # platform built to simulation's end, in the launcher
            return p["simulation_end"] - p["platform_created"]

        fixed["platform generation (Python)"] = statistics.median(gen)
        fixed["SimGrid start-up: smpirun to launcher"] = init_probe["loaded"] - init.start
        fixed["SimGrid start-up: platform built"] = init_probe["platform_created"] - init_probe["loaded"]
        fixed["SimGrid start-up: ranks' MPI_Init, MPI_Finalize"] = simulation(init_probe)
        fixed["SimGrid start-up: exit"] = init.start + init.wall_s - init_probe["simulation_end"]
        per_iter = (simulation(full.probe) - simulation(bare1_probe)) / (full.iterations - 1)
        fixed["route set-up (bare pattern, first iteration's excess)"] = (
            simulation(bare1_probe) - simulation(init_probe) - per_iter
        )
        python = statistics.median(timed([ORRERY, "machine", "list"]).wall_s for _ in range(3))
        intercept = orr1.wall_s - (full.orrery.wall_s - orr1.wall_s) / (full.iterations - 1)
        fixed_cost.update(intercept=intercept, python=python)
        print(
            f"\nFixed costs at {a.fixed_gpus} GPUs, as shares of the Orrery run of {full.iterations} iterations "
            f"({full.orrery.wall_s:.2f} s) and of the bare one ({full.bare.wall_s:.2f} s):\n"
        )
        print("| fixed cost | seconds | share of Orrery's run | share of bare SMPI's run |")
        print("|---|---|---|---|")
        for name, s in fixed.items():
            print(f"| {name} | {s:.3f} | {100 * s / full.orrery.wall_s:.1f} % | {100 * s / full.bare.wall_s:.1f} % |")
        total = sum(fixed.values())
        print(
            f"| all of the above | {total:.3f} | {100 * total / full.orrery.wall_s:.1f} % | {100 * total / full.bare.wall_s:.1f} % |"
        )
        print(
            f"| Orrery's whole fixed cost: wall at 0 iterations, from 1 ({orr1.wall_s:.2f} s) and {full.iterations} "
            f"| {intercept:.3f} | {100 * intercept / full.orrery.wall_s:.1f} % | - |"
        )
        print(
            f"| of which Python start-up (`orrery machine list`) | {python:.3f} | {100 * python / full.orrery.wall_s:.1f} % | - |"
        )
        rest = intercept - python - fixed["platform generation (Python)"]
        rest -= sum(s for name, s in fixed.items() if name.startswith("SimGrid"))
        print(
            "| of which the rest: Orrery's routes (more sources than the bare pattern's), the shim's set-up, "
            f"first iteration | {rest:.3f} | {100 * rest / full.orrery.wall_s:.1f} % | - |"
        )

    # 3. the summary against the targets
    print("\nAgainst issue 21's targets (each beside its bare-SMPI baseline from this invocation):\n")
    for r in rows:
        if r.gpus in RATIO_GPUS:
            print(
                f"- Orrery / bare SMPI at {r.gpus} GPUs: {r.ratio:.2f} (target <= {RATIO_TARGET}): "
                f"{met(r.ratio <= RATIO_TARGET)}{r.ratio_spread()}"
            )
    if realtime is not None:
        speed = realtime.sim.makespan_s / realtime.orrery.wall_s
        print(
            f"- {realtime.gpus} GPUs, {realtime.iterations} iterations: {realtime.sim.makespan_s:.3f} simulated s in "
            f"{realtime.orrery.wall_s:.2f} s, {speed:.2f} simulated s per wall s (target >= {REALTIME_TARGET}): "
            f"{met(speed >= REALTIME_TARGET)}; bare SMPI took {realtime.bare.wall_s:.2f} s "
            f"(ratio {fmt_ratio(realtime.orrery.wall_s, realtime.bare.wall_s)}{realtime.ratio_spread()})"
        )
    for r in rows:
        if r.gpus == BIG_GPUS:
            ok = r.orrery.wall_s < BIG_WALL_S and r.orrery.rss_gib < BIG_RSS_GIB
            print(
                f"- {r.gpus} GPUs, {r.iterations} iterations: {r.orrery.wall_s:.1f} s, {r.orrery.rss_gib:.2f} GiB, "
                f"{r.orrery.maps} memory maps (targets < {BIG_WALL_S:.0f} s, < {BIG_RSS_GIB:.0f} GiB): {met(ok)}; "
                f"bare SMPI {r.bare.wall_s:.1f} s, {r.bare.rss_gib:.2f} GiB, {r.bare.maps} maps "
                f"(ratios {fmt_ratio(r.orrery.wall_s, r.bare.wall_s)}, {fmt_ratio(r.orrery.rss_gib, r.bare.rss_gib)})"
            )
    if rows:
        big = max(rows, key=lambda r: r.gpus)
        need = maps_needed(rows, BIG_GPUS)
        print(
            f"- memory maps: {big.orrery.maps / big.gpus:.1f} per rank under Orrery, {big.bare.maps / big.gpus:.1f} "
            f"bare (at {big.gpus} GPUs): {BIG_GPUS} GPUs need about {need}, vm.max_map_count is {limit}"
            + (f": raise it, `{sysctl_for(need)}`" if limit is not None and need is not None and need > limit else "")
        )
    orr_exp = growth([(r.gpus * r.iterations, r.orrery.wall_s) for r in rows])
    bare_exp = growth([(r.gpus * r.iterations, r.bare.wall_s) for r in rows])
    if orr_exp is not None and bare_exp is not None:
        sizes = f"{min(r.gpus for r in rows)} to {max(r.gpus for r in rows)} GPUs"
        print(
            f"- wall time against ranks x iterations, {sizes}: exponent {orr_exp:.2f} (target <= {GROWTH_TARGET}): "
            f"{met(orr_exp <= GROWTH_TARGET)}; bare SMPI {bare_exp:.2f}"
            + ("" if max(r.gpus for r in rows) >= BIG_GPUS else f" (the target's range reaches {BIG_GPUS} GPUs)")
        )
        # Against the events simulated (whose count per rank and iteration the collectives'
        # algorithms may change with the ranks), a slope of 1 is a constant cost per event.
        orr_ev = growth([(r.events, r.orrery.wall_s) for r in rows])
        bare_ev = growth([(r.messages, r.bare.wall_s) for r in rows])
        if orr_ev is not None and bare_ev is not None:
            print(
                f"- wall time against events simulated, {sizes}: exponent {orr_ev:.2f}; "
                f"bare SMPI against its messages {bare_ev:.2f}"
            )
    ev = next((r for r in rows if r.gpus == a.events_gpus), None)
    if ev is not None:
        rate = ev.events / ev.orrery.wall_s
        print(
            f"- simulated events per wall s at {ev.gpus} GPUs: {rate:.0f} (target >= {EVENTS_TARGET}): "
            f"{met(rate >= EVENTS_TARGET)}; {ev.sim.kernels} kernels, {ev.sim.copies} copies and memsets, "
            f"{ev.messages} MPI messages in {ev.orrery.wall_s:.2f} s; bare SMPI {ev.messages / ev.bare.wall_s:.0f} "
            f"messages per wall s (ratio {fmt_ratio(rate, ev.messages / ev.bare.wall_s)})"
        )
    if fixed and full is not None:
        # Orrery's route set-up is not separable from its other first-iteration work: the target is
        # judged on the upper bound (all of Orrery's fixed cost but Python's start-up), the lower
        # (the bare pattern's routes) beside it
        low = sum(fixed.values()) / full.orrery.wall_s
        high = (fixed_cost["intercept"] - fixed_cost["python"]) / full.orrery.wall_s
        print(
            f"- fixed costs at {full.gpus} GPUs (platform generation, SimGrid start-up, route set-up): at most "
            f"{100 * high:.1f} % of the {full.iterations}-iteration run (Orrery's whole fixed cost but Python's "
            f"start-up), at least {100 * low:.1f} % (with the bare pattern's routes) (target < "
            f"{100 * FIXED_TARGET:.0f} %): {met(high < FIXED_TARGET)}; of the bare run "
            f"{100 * sum(fixed.values()) / full.bare.wall_s:.1f} %"
        )


if __name__ == "__main__":
    main()
