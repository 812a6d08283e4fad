"""Running a wrapped program on a simulated machine under SimGrid's SMPI.

``run()`` writes the platform, host file and the run description (run.json,
run_description.py: the shim's one input from Orrery) to the output folder, runs the program with ``smpirun`` (its stdout and stderr pass
through), turns the shim's report into ``results.json`` (its ``status`` says
how the run ended) and returns the exit code ``orrery run`` gives for it: the
program's own where it has one (results.py, STATUSES). Inputs are validated
before anything is written.
"""

from __future__ import annotations

import contextlib
import ctypes.util
import functools
import gc
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__, interrupts
from .._paths import lib_dir
from ..errors import InputError, SimulationError
from ..machines import platform
from ..machines.description import Machine
from . import build, limits, physics, results, run_description
from .costs import Costs
from .trace import EVENTS_FILE, TRACE_FILE, TraceOptions
from .trace import write as write_trace

#: SimGrid's exit status, which the launcher_status script between smpirun and smpimain writes
#: (smpirun, seeing a non-zero one, printed smpimain's command line on the program's stdout).
STATUS_FILE = "simulator.status"
LAUNCHER_STATUS = Path(__file__).with_name("launcher_status")

#: What a run writes in its output folder: cleared before a run's inputs are checked (cli.py), so
#: that a rejected run leaves nothing of an earlier one looking current, and after a run stopped
#: from outside, so that it leaves nothing half-written.
RUN_OUTPUTS = (
    "results.json",
    "results.json.part",
    "report.tsv",
    "report.tsv.crash",
    "orrery.cfg",
    "error.txt",
    "platform.json",  # the platform (PLATFORM_FILE, or FLAT_PLATFORM_FILE)
    "platform.json.part",
    "platform.xml",
    "platform.xml.part",
    "hostfile",
    "run.json",
    "machine.json",
    TRACE_FILE,  # --trace (trace.py)
    TRACE_FILE + ".part",
    EVENTS_FILE,
    "link_series.tsv",  # RunOptions.link_series, and a trace's link counters
    "link_series.tsv.part",
    STATUS_FILE,
)

#: Seconds past a run's wall-time limit before orrery run stops it from outside: the shim stops it
#: at the deadline where SimGrid's clock advances, not where the program's own code loops.
WALL_GRACE_S = 5.0

#: Seconds a stopped simulation has to end on SIGTERM (SimGrid has no handler for it: it exits at
#: once) before SIGKILL ends it.
STOP_GRACE_S = 5.0

FILL_POLICIES = run_description.choices("FillPolicy")
GPU_VISIBILITY = run_description.choices("GpuVisibility")
MANAGED_POLICIES = run_description.choices("ManagedPolicy")

#: SMPI settings that make the simulated times those of the platform alone:
#: no injection of the host's own CPU time, no TCP window or cross-traffic
#: corrections (CM02: a transfer alone takes latency + size / bandwidth).
#: TCP-gamma bounds each flow by gamma / (2 latency): a huge gamma bounds nothing (gamma 0
#: bounds every flow by 0, and SimGrid 3.32 then mis-shares a link that flows start on at the
#: same instant: four copies to four GPUs at once went at 53.8, 251, 251 and 53.8 GB/s, issue 22).
#: How SimGrid updates the bandwidth shares: bandwidth_sharing().
SMPI_CONFIG = (
    "smpi/simulate-computation:no",
    "network/model:CM02",
    "network/TCP-gamma:1e20",
    "network/crosstraffic:0",
    "smpi/host-speed:1e12f",
    "smpi/wtime:0",  # MPI_Wtime itself costs no simulated time
    "surf/precision:1e-12",  # smpirun sets 1e-9 s, too coarse for microsecond events
)


def bandwidth_sharing() -> tuple[str, ...]:
    """SimGrid's update of the bandwidth shares. The lazy one with its selective update: SimGrid
    solves again only the links whose flows changed and finds the next event in a heap. SimGrid
    3.32's selective update left out every link of a changed flow but its first when that first was
    already marked: flows whose latencies ended together then went at their lone rate through a
    shared link (NCCL's all-to-all on 2 dgx-h100 nodes: eight 64 KiB transfers at 50 GB/s each
    through one 50 GB/s NIC; 8 copies at once on dgx-a100). liborrery_smpi.so marks every link of
    the flow (interpose/mpi/smpi_lmm.cpp), built with SimGrid 3.32 only (CMakeLists.txt, which
    records the version it built against in lib/simgrid-version). Without it (SimGrid 4.x, whose
    layout the stand-in does not know), every link is solved at every event, which gives the same
    times at a cost that grows with the flows in flight (a quarter of a 4096-GPU run:
    bench/README.md)."""
    if simgrid_version().split(".")[0] == "3":
        return ("network/optim:Lazy",)
    return ("network/optim:Full", "network/maxmin-selective-update:no")


def simgrid_version() -> str:
    """The SimGrid version Orrery's libraries were built against ("3.32")."""
    return (lib_dir() / "simgrid-version").read_text().strip()


def smpi_config() -> tuple[str, ...]:
    """Every SimGrid setting of SMPI_CONFIG and bandwidth_sharing(): what orrery run gives smpirun
    (and bench/scale.py its bare runs), one --cfg each."""
    return (*SMPI_CONFIG, *bandwidth_sharing())


# SimGrid's own informational chatter (configuration echo) is not the program's output.
SMPI_LOG = ("xbt_cfg.thres:warning", "smpi_config.thres:warning", "smpi.thres:warning")


@dataclass
class RunOptions:
    machine: Machine
    layout: platform.Layout
    program: list[str]
    out: Path
    costs: Costs = field(default_factory=lambda: Costs({}))
    mode: str = "skeleton"
    # the run description's fields, with its defaults (interpose/core/run_description.json)
    strict: bool = run_description.default("strict")
    d2h_fill: str = run_description.default("d2h_fill")
    fold_pinned: bool = run_description.default("fold_pinned")
    gpu_visibility: str = run_description.default("gpu_visibility")
    # managed memory: refused, or taken as resident on its device (docs/skeleton-mode.md)
    managed: str = run_description.default("managed")
    # seconds of simulated time, of wall-clock time, after which the run stops (None: no limit)
    sim_time_limit_s: float | None = run_description.default("sim_time_limit_s")
    wall_time_limit_s: float | None = None
    fold_threshold: int = run_description.default("fold_threshold")
    fold_blocksize: int = run_description.default("fold_blocksize")
    fold_device_blocksize: int = run_description.default("fold_device_blocksize")
    # count what each link direction carries (results.json links); off only for bench/links.py's baseline
    link_accounting: bool = run_description.default("link_accounting")
    # write link_series.tsv in --out: every change of a link direction's rate (docs/simulation.md)
    link_series: bool = run_description.default("link_series")
    overrides: tuple[str, ...] = ()
    capture_output: bool = False  # keep the program's stdout in RunOutcome instead of passing it through
    trace: TraceOptions | None = None  # record a timeline trace (trace.json, docs/trace.md)
    # the program's iterations, which results.json's terms are divided by (None: not given)
    iterations: int | None = None
    # the program's environment beyond this process's (e.g. NCCL_ALGO for a calibration sweep
    # measured with it)
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class RunOutcome:
    exit_code: int
    results: results.Results
    stdout: str | None = None


def program_file(program: str) -> Path | None:
    """The file a program name means, as given or found on PATH (None: neither)."""
    if Path(program).is_file():
        return Path(program)
    found = shutil.which(program)
    return Path(found) if found else None


#: The environment variables that switch a piece of the simulation's process, and the values each
#: takes besides unset (orrery run checks them before the run starts):
#: - ORRERY_SMPI_DETACHED: who keeps SMPI's detached comms (interpose/mpi/smpi_detached.cpp); unset:
#:   liborrery_smpi.so, in a hash table; "simgrid": SimGrid's own list; "report": the former, with a
#:   line of counts on stderr at the end;
#: - ORRERY_SMPI_TIMERS: whether SMPI reads its CPU timer at every MPI call where nothing uses the
#:   reading (interpose/mpi/smpi_timers.cpp); unset: left out; "simgrid": read; "report": left out,
#:   with a line of counts on stderr at the end;
#: - ORRERY_SMPI_LMM: who marks the links of a flow that changed for SimGrid's selective bandwidth
#:   update (interpose/mpi/smpi_lmm.cpp); unset: liborrery_smpi.so, every link; "simgrid": SimGrid
#:   3.32's own function, which leaves some out (flows then mis-shared: for tests that show it);
#: - ORRERY_SMPI_COLLS: who runs SMPI's small-message collective algorithms
#:   (interpose/mpi/smpi_colls.cpp); unset: liborrery_smpi.so, in the kernel; "simgrid": SMPI's
#:   requests, rank by rank; "report": the former, with a line of counts on stderr at the end;
#: - ORRERY_SMPI_REDUCTIONS: who forms the data of reductions whose operation does not commute
#:   (interpose/mpi/smpi_reductions.cpp); unset: liborrery_smpi.so, in rank order; "simgrid": SMPI
#:   3.32, whose data are wrong there (for tests that show it); "report": the former, with a line of
#:   counts on stderr at the end;
#: - ORRERY_SMPI_NBC: who runs MPI_Iallreduce, MPI_Ireduce, MPI_Ibcast, MPI_Ibarrier and
#:   MPI_Iallgather (interpose/mpi/smpi_nbc.cpp); unset: liborrery_smpi.so, in the kernel, by the
#:   blocking call's algorithm where smpi_colls.cpp runs it; "simgrid": SMPI's linear requests,
#:   whose times are not the library's (for tests that show it); "report": the former, with a line
#:   of counts on stderr at the end;
#: - ORRERY_HOST_TIME: "report": a line on stderr at the end, how many host times (API and MPI
#:   software overheads) the ranks spent ahead of SimGrid's clock and in how many sleeps they waited
#:   them out (interpose/core/streams.cpp, "the host's time"); unset: no line;
#: - ORRERY_MALLOC: "system" keeps glibc's allocator (ALLOCATOR below).
SWITCHES = {
    "ORRERY_SMPI_DETACHED": ("simgrid", "report"),
    "ORRERY_SMPI_TIMERS": ("simgrid", "report"),
    "ORRERY_SMPI_LMM": ("simgrid",),
    "ORRERY_SMPI_COLLS": ("simgrid", "report"),
    "ORRERY_SMPI_REDUCTIONS": ("simgrid", "report"),
    "ORRERY_SMPI_NBC": ("simgrid", "report"),
    "ORRERY_HOST_TIME": ("report",),
    "ORRERY_MALLOC": ("system",),
}


def _check(opts: RunOptions, env: Mapping[str, str]) -> tuple[Path, bool, tuple[str, ...]]:
    """The program to run, whether it links liborrery_alloc.so (links_alloc) and the libraries
    each rank gets a copy of (private_libraries), once checked."""
    for variable, values in SWITCHES.items():
        value = env.get(variable, "")
        if value not in ("", *values):
            expected = " or ".join(f"'{v}'" for v in values) + ", or unset"
            raise InputError(f"environment variable {variable}", None, value, expected)
    ptxas = env.get("ORRERY_PTXAS", "")
    if ptxas and not (os.path.isfile(ptxas) and os.access(ptxas, os.X_OK)):
        raise InputError(
            "environment variable ORRERY_PTXAS",
            None,
            ptxas,
            "the CUDA toolkit's ptxas (an executable), or empty for none",
        )
    if opts.mode != "skeleton":
        raise InputError("--mode", None, opts.mode, "skeleton (Twin mode is not implemented yet)")
    if opts.d2h_fill not in FILL_POLICIES:
        raise InputError("--d2h-fill", None, opts.d2h_fill, f"one of {', '.join(FILL_POLICIES)}")
    if opts.gpu_visibility not in GPU_VISIBILITY:
        raise InputError("--gpu-visibility", None, opts.gpu_visibility, f"one of {', '.join(GPU_VISIBILITY)}")
    if opts.managed not in MANAGED_POLICIES:
        raise InputError("--managed", None, opts.managed, f"one of {', '.join(MANAGED_POLICIES)}")
    for flag, limit in (("--sim-time-limit", opts.sim_time_limit_s), ("--wall-time-limit", opts.wall_time_limit_s)):
        if limit is not None and not 0 < limit < math.inf:
            raise InputError(flag, None, limit, limits.EXPECTED)
    if opts.link_series and not opts.link_accounting:
        raise InputError("link_series", None, True, "link_accounting on: the series comes from the accounting")
    if not opts.program or not opts.program[0]:
        raise InputError("orrery run", None, "", "a program after '--'")
    exe = program_file(opts.program[0])
    if exe is None:
        raise InputError("orrery run", None, opts.program[0], "an existing program built with Orrery's wrappers")
    head = exe.read_bytes()
    if b"libcudart.so.13" not in head and b"__cudaRegisterFatBinary" in head:
        raise InputError(
            "orrery run",
            None,
            str(exe),
            "a program whose CUDA calls reach Orrery's runtime; it carries its own copy of the CUDA runtime "
            "(statically linked: nvcc's default), so they would not be simulated: build it with orrery-nvcc",
        )
    if b"libsimgrid.so" not in head and b"libcudart.so.13" not in head:
        raise InputError(
            "orrery run",
            None,
            str(exe),
            "a program linked for SimGrid's SMPI: build it with `orrery mpicc`/`orrery mpicxx` (or smpicc/smpicxx)",
        )
    if b"libcudart.so.13" not in head:  # Orrery's runtime times its MPI calls and writes the report
        raise InputError(
            "orrery run",
            None,
            str(exe),
            "a program linked against Orrery's libcudart.so.13, even one without CUDA calls: "
            "link it with `orrery mpicc`/`orrery mpicxx`",
        )
    if shutil.which("smpirun") is None:
        raise SimulationError("SimGrid's smpirun is not on PATH: run the set-up command of the README")
    return exe.resolve(), links_alloc(head), private_libraries(head)


def _link_series(opts: RunOptions) -> bool:
    """Whether the shim writes link_series.tsv: asked for, or for a trace's link counters."""
    return opts.link_series or (opts.trace is not None and opts.trace.links > 0 and opts.link_accounting)


def _description(opts: RunOptions, out: Path, exe: Path) -> str:
    options = {
        "program": str(exe),
        "strict": opts.strict,
        "default_kernel_s": opts.costs.default_s,
        "d2h_fill": opts.d2h_fill,
        "gpu_visibility": opts.gpu_visibility,
        "managed": opts.managed,
        "sim_time_limit_s": opts.sim_time_limit_s,
        "fold_threshold": opts.fold_threshold,
        "fold_pinned": opts.fold_pinned,
        "fold_blocksize": opts.fold_blocksize,
        "fold_device_blocksize": opts.fold_device_blocksize,
        "trace": opts.trace.description(out) if opts.trace else None,
        "link_accounting": opts.link_accounting,
        "link_series": _link_series(opts),
    }
    kernels = {name: (c.alpha_s, c.beta_s_per_thread) for name, c in opts.costs.kernels.items()}
    return run_description.to_json(
        run_description.describe(opts.machine, opts.layout, report=out / "report.tsv", options=options, kernels=kernels)
    )


#: Stand-ins loaded into SMPI's launcher before the program, beside liborrery_smpi.so: the loader
#: reuses a library already loaded under the soname a program asks for, so the program gets
#: Orrery's NCCL whatever it was linked against (an RPATH to a real NCCL, which wins over
#: LD_LIBRARY_PATH, or a dlopen of "libnccl.so.2"), in every rank's copy of it, and Orrery's NVML
#: (libnvidia-ml.so.1, which monitoring code often opens with dlopen). libcudart.so.13
#: comes first, before libsimgrid in the launcher's global scope, where SimGrid's own references to
#: MPI_* resolve: SMPI's Fortran bindings (mpi_send_ calls MPI_Send) then reach the runtime's
#: wrappers, so a Fortran program's calls are timed as a C program's (interpose/mpi/mpi.cpp).
STAND_INS = ("libcudart.so.13", "libnccl.so.2", "libnvidia-ml.so.1")


#: The memory allocator SMPI's launcher runs with (ORRERY_MALLOC unset): mimalloc, where it is
#: installed (Debian's libmimalloc2.0, which scripts/setup.sh installs). SimGrid allocates and
#: frees an object or more per simulated event (activities, lmm variables and elements, list
#: nodes); with mimalloc a 1024-GPU run of the Jacobi example takes a fifth less wall time, a
#: 4096-GPU one a third less, with the same results bit for bit (bench/README.md).
#: ORRERY_MALLOC=system keeps glibc's (for a program that relies on glibc's malloc itself).
#: Only into a program that links liborrery_alloc.so (links_alloc): without it, the code of SMPI's
#: copies of the program that SMPI's compilers did not build would free with glibc's free what the
#: process's allocator gave (interpose/mpi/smpi_alloc.cpp).
ALLOCATOR = "mimalloc"


#: Libraries each rank gets a copy of, as it gets a copy of the program (SMPI's
#: smpi/privatize-libs), where the program links them: their state is per process under a real
#: MPI, one for every rank in SMPI's single process otherwise. libgfortran's table of open units:
#: ranks opening the same unit number (CloverLeaf's input deck, read by every rank on one unit)
#: shared one file position and the run stopped at its first MPI_Abort.
PRIVATE_LIBRARIES = re.compile(rb"\0(libgfortran\.so\.[0-9]+)\0")


def private_libraries(program: bytes) -> tuple[str, ...]:
    """The libraries a program (its file's bytes: the names its dynamic section lists) links that
    each rank gets a copy of (PRIVATE_LIBRARIES)."""
    return tuple(sorted({m.decode() for m in PRIVATE_LIBRARIES.findall(program)}))


@functools.cache
def library_size(name: str) -> int:
    """The size in bytes of the library soname `name` in the dynamic loader's cache (`ldconfig
    -p`), the largest where it lists several (architectures); 0 where it is not there."""
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    try:
        listing = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return 0
    sizes = [0]
    for line in listing.splitlines():
        entry, _, path = line.strip().partition(" => ")
        if entry.split(" (")[0] == name:
            with contextlib.suppress(OSError):
                sizes.append(Path(path).stat().st_size)
    return max(sizes)


def links_alloc(program: bytes) -> bool:
    """Whether a program (its file's bytes) links liborrery_alloc.so, as the wrappers link every
    program (build.link_args; a program built before they did does not)."""
    return f"lib{build.ALLOC}.so".encode() in program


def allocator(env: Mapping[str, str], links_alloc: bool = True) -> str | None:
    """The allocator library to preload into SMPI's launcher for a run with environment `env` of a
    program that links liborrery_alloc.so or not: ALLOCATOR's library as the loader's cache names
    it (libmimalloc.so.2), None for glibc's own (ORRERY_MALLOC=system, no such library, or a
    program without liborrery_alloc.so)."""
    if env.get("ORRERY_MALLOC", "") == "system" or not links_alloc:
        return None
    return ctypes.util.find_library(ALLOCATOR)


def _preload(lib: Path, env: Mapping[str, str] = os.environ, links_alloc: bool = True) -> str:
    """smpirun's -wrapper that gives SMPI's launcher, not the script around it, the library that
    pins every message's ends where its rank posted it (interpose/mpi/smpi_pins.cpp) and the
    stand-ins that must win over the program's own libraries (STAND_INS), then the user's own
    preloads, then the allocator (allocator()): an allocator the user preloads comes first and wins."""
    ours = [str(lib / "liborrery_smpi.so"), *(str(lib / name) for name in STAND_INS)]
    preload = [*ours, *env.get("LD_PRELOAD", "").split(), allocator(env, links_alloc) or ""]
    if any(" " in p for p in ours):  # smpirun splits the wrapper on spaces
        raise SimulationError(
            f"Orrery is installed under a path with a space ({lib}): SMPI's launcher "
            "cannot preload its libraries from there; install it elsewhere"
        )
    return "env LD_PRELOAD=" + os.pathsep.join(p for p in preload if p)


#: The job's platform in a run's folder: the structured description liborrery_platform.so reads,
#: or, where SimGrid is 4.x and the plugin is not built (CMakeLists.txt), the same platform as flat XML.
PLATFORM_FILE = "platform.json"
FLAT_PLATFORM_FILE = "platform.xml"


def platform_library() -> Path:
    """The platform SimGrid loads (smpirun -platform): Orrery's plugin (interpose/platform/), which
    builds the job's platform from the run folder's description (ORRERY_PLATFORM)."""
    return lib_dir() / "liborrery_platform.so"


def platform_args(out: Path) -> tuple[list[str], dict[str, str]]:
    """smpirun's platform arguments, and the environment they need, for the platform a run wrote in
    folder ``out``: what `orrery run` gives SimGrid, for other runs on the same platform (bench/)."""
    out = Path(out).resolve()
    if (out / PLATFORM_FILE).exists():
        return ["-platform", str(platform_library())], {"ORRERY_PLATFORM": str(out / PLATFORM_FILE)}
    return ["-platform", str(out / FLAT_PLATFORM_FILE)], {}


def write_platform(machine: Machine, layout: platform.Layout, out: Path) -> dict[str, platform.Link]:
    """The job's platform in folder ``out`` (PLATFORM_FILE, or FLAT_PLATFORM_FILE without the
    plugin), and its links' directions; the other one, an earlier run's, is removed."""
    for name in (PLATFORM_FILE, FLAT_PLATFORM_FILE):
        (out / name).unlink(missing_ok=True)
    if platform_library().exists():
        desc, links = platform.description(machine, layout)
        text, name = json.dumps(desc, separators=(",", ":")) + "\n", PLATFORM_FILE
    else:
        text, links = platform.generate(machine, layout)
        name = FLAT_PLATFORM_FILE
    tmp = out / (name + ".part")
    tmp.write_text(text)
    tmp.replace(out / name)
    return links


#: Memory maps a rank of the Jacobi example takes at full size (bench/README.md, "Memory maps": 9.2
#: at 1024 GPUs): SimGrid's stack of its actor and its guard page (its streams make no actor of
#: their own until one needs it), SMPI's copy of the program, and one map per folded device
#: allocation. A rough guide to a run's needs, no limit.
MAPS_PER_RANK = 10


#: Where SMPI writes, for every rank, the copy of the program it loads (smpi/privatization:dlopen;
#: smpirun -tmpdir, else TMPDIR, else /tmp): a tmpfs, in a folder of the run's own. On a disk
#: file system the copies cost an inode each, created and deleted at every start-up, and ext4's
#: inode allocation then scans the recently deleted ones: SimGrid's start-up of 1024 ranks took
#: 0.9 s in /tmp against 0.26 s in /dev/shm, a 1-iteration Jacobi run on 1024 GPUs 2.5 s against
#: 1.8 s (bench/README.md). The copies stay in memory while the run lasts (unlinked, but mapped):
#: the tmpfs is used only where it has room for SHM_HEADROOM times all of them.
SHM = Path("/dev/shm")
SHM_HEADROOM = 4


@contextlib.contextmanager
def program_copies(ranks: int, size: int, env: Mapping[str, str], shm: Path = SHM) -> Iterator[str | None]:
    """The folder where SMPI writes its `ranks` copies of the program and its private libraries,
    `size` bytes a rank: a private one on the tmpfs `shm`, removed after the run, when the user has
    not chosen one (TMPDIR) and `shm` has room (SHM_HEADROOM times the copies); else None
    (smpirun's default)."""
    need = ranks * size
    try:
        room = os.statvfs(shm)
        fits = os.access(shm, os.W_OK) and room.f_bavail * room.f_frsize >= SHM_HEADROOM * need
    except OSError:
        fits = False
    if env.get("TMPDIR") or not fits:
        yield None
        return
    folder = tempfile.mkdtemp(prefix="orrery-smpi-", dir=shm)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def smpirun_copies_to(folder: str | None, env: dict[str, str], wrapper: str) -> tuple[dict[str, str], str]:
    """smpirun's environment and -wrapper for SMPI's copies of the program in `folder` (None:
    smpirun's default). SimGrid 3.32's smpirun -tmpdir takes the program's place (it shifts one
    argument, not two): the folder goes through TMPDIR, which smpirun reads (`mktemp -u`), and
    the wrapper takes it out again, so that the program's environment is the user's."""
    if folder is None:
        return env, wrapper
    return {**env, "TMPDIR": folder}, "env -u TMPDIR " + wrapper.removeprefix("env ")


def map_count_warning(ranks: int, limit_file: Path = Path("/proc/sys/vm/max_map_count")) -> str | None:
    """The warning for a run whose ranks may need more memory maps than the kernel allows a process."""
    try:
        limit = int(limit_file.read_text())
    except (OSError, ValueError):
        return None
    need = ranks * MAPS_PER_RANK
    if need <= limit:
        return None
    return (
        f"orrery: warning: {ranks} ranks may need about {need} memory maps ({MAPS_PER_RANK} a rank for the "
        f"Jacobi example: SimGrid's stacks, SMPI's copy of the program, folded device memory), more than "
        f"vm.max_map_count ({limit}); should the run stop for want of them, raise it: "
        f"sysctl -w vm.max_map_count={-(-2 * need // 65536) * 65536}"
    )


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector off while a run's inputs and results are built: hundreds of
    thousands of dicts, lists and dataclasses, none in a cycle, which set it off again and again
    (a third of reading a 4096-GPU run's report, bench/README.md). It is put back as it was."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _simulate(
    cmd: list[str], env: Mapping[str, str], capture_output: bool, deadline: float | None = None
) -> tuple[subprocess.CompletedProcess, bool]:
    """smpirun's run of `cmd`, in a session of its own, and whether it ran past `deadline`
    (time.monotonic()), where its session was ended: SimGrid (smpimain, which the smpirun
    script starts) and the program end with the command however it ends. Stopped from outside
    (KeyboardInterrupt, interrupts.Interrupted), the session is ended (_stop_session) and the
    interrupt goes on once none of it is left. Its own session also keeps a terminal's Ctrl-C from
    SimGrid, which would print every actor's state."""
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE if capture_output else None,
        text=True if capture_output else None,
        start_new_session=True,
    )
    overran = False
    try:
        try:
            stdout, _ = proc.communicate(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            overran = True
            with interrupts.held():
                _stop_session(proc)
            stdout, _ = proc.communicate()  # what it printed until then
    except BaseException:
        with interrupts.held():
            _stop_session(proc)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout), overran


def _stop_session(proc: subprocess.Popen) -> None:
    """Every process of `proc`'s session (its process group) ended: the smpirun script at once
    (SIGKILL: its trap would pass a SIGTERM on to smpimain and complain on the terminal when
    smpimain had it already), then smpimain and the program SIGTERM, SIGKILL after STOP_GRACE_S."""
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.wait()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        deadline = time.monotonic() + STOP_GRACE_S
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        while _running_in_group(proc.pid):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        else:
            return


def _running_in_group(pgid: int) -> bool:
    """Whether a process of group `pgid` still runs: a zombie does not (smpimain, orphaned when
    smpirun ends first, waits for a reaper the container's init may never be)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()  # after the command's name
        except OSError:  # ended meanwhile
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def run(opts: RunOptions) -> RunOutcome:
    env = {**os.environ, **opts.env}  # the program's environment beyond this process's
    exe, linked, private = _check(opts, env)
    lib = lib_dir()
    wrapper = _preload(lib, env, linked)  # before anything is written
    out = opts.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    clear_outputs(out)  # an earlier run's, which this one must not leave looking current
    deadline = time.monotonic() + opts.wall_time_limit_s if opts.wall_time_limit_s is not None else None
    try:
        return _run_in(opts, env, out, exe, private, wrapper, lib, deadline)
    except KeyboardInterrupt:  # stopped from outside (interrupts.py): nothing half-written stays
        with interrupts.held():
            clear_outputs(out)
        raise


def clear_outputs(out: Path) -> None:
    """Every file a run writes in `out` removed (RUN_OUTPUTS; none where `out` is no folder)."""
    if out.is_dir():
        for name in RUN_OUTPUTS:
            (out / name).unlink(missing_ok=True)


def _run_in(
    opts: RunOptions,
    env: dict[str, str],
    out: Path,
    exe: Path,
    private: tuple[str, ...],
    wrapper: str,
    lib: Path,
    deadline: float | None,
) -> RunOutcome:
    with _no_cycle_collection():
        links = write_platform(opts.machine, opts.layout, out)
        (out / "hostfile").write_text("\n".join(platform.rank_hosts(opts.layout)) + "\n")
        (out / "run.json").write_text(_description(opts, out, exe))
        (out / "machine.json").write_text(opts.machine.model_dump_json(indent=1) + "\n")

    platform_cmd, platform_env = platform_args(out)
    warning = map_count_warning(opts.layout.ranks)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    cmd = [
        "smpirun",
        "-np",
        str(opts.layout.ranks),
        *platform_cmd,
        "-hostfile",
        str(out / "hostfile"),
    ]
    cmd += [f"--cfg={c}" for c in smpi_config()]
    # Every send is eager in SMPI up to the largest eager threshold; the shim
    # turns sends above their own path's threshold into synchronous ones.
    mpi = opts.machine.mpi
    cmd += [
        f"--cfg=smpi/send-is-detached-thresh:{int(max(mpi.eager_threshold_host, mpi.eager_threshold_device))}",
        f"--cfg=smpi/coll-selector:{mpi.collective_selector}",
    ]
    # SMPI charges each MPI_Test and MPI_Iprobe (and each poll of MPI_Probe) 100 us by default,
    # growing with every failed call: the machine's poll time instead, the same for every call
    # (SMPI's test time; the shim sleeps the run description's mpi.poll_time_s in the probes,
    # interpose/mpi/mpi.cpp)
    cmd += [f"--cfg=smpi/test:{mpi.poll_time!r}", "--cfg=smpi/iprobe:0", "--cfg=smpi/grow-injected-times:no"]
    cmd += [  # ranks sharing a GPU exchange messages through its memory
        f"--cfg=network/loopback-bw:{opts.machine.gpu.d2d_bandwidth!r}",
        f"--cfg=network/loopback-lat:{opts.machine.gpu.d2d_latency!r}",
    ]
    if private:
        cmd.append(f"--cfg=smpi/privatize-libs:{';'.join(private)}")
    cmd += [f"--log={c}" for c in SMPI_LOG]
    cmd += [str(exe), *opts.program[1:]]
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(lib), env.get("LD_LIBRARY_PATH")) if p)
    env.update(platform_env)
    env["ORRERY_RUN"] = str(out / "run.json")
    env["ORRERY_ERROR_FILE"] = str(out / "error.txt")
    env["ORRERY_STATUS_FILE"] = str(out / STATUS_FILE)
    if "ORRERY_PTXAS" not in env and (compiler := build.ptxas()):  # the driver's JIT of PTX modules
        env["ORRERY_PTXAS"] = compiler
    if deadline is not None:  # time.monotonic()'s clock, CLOCK_MONOTONIC, which the shim reads too
        env["ORRERY_WALL_DEADLINE"] = repr(deadline)
    size = exe.stat().st_size + sum(library_size(name) for name in private)
    with program_copies(opts.layout.ranks, size, env) as copies:
        env, launcher = smpirun_copies_to(copies, env, wrapper)
        proc, overran = _simulate(
            [cmd[0], "-wrapper", f"{LAUNCHER_STATUS} {launcher}", *cmd[1:]],
            env,
            opts.capture_output,
            None if deadline is None else deadline + WALL_GRACE_S,
        )
    status = out / STATUS_FILE
    with contextlib.suppress(OSError, ValueError):  # none: smpirun ended before smpimain did
        proc.returncode = int(status.read_text())
    status.unlink(missing_ok=True)

    run_info = {
        "orrery_version": __version__,
        "machine": opts.machine.name,
        "mode": opts.mode,
        "nodes": opts.layout.nodes,
        "gpus_per_node": opts.layout.gpus_per_node,
        "ranks_per_node": opts.layout.ranks_per_node,
        "ranks": opts.layout.ranks,
        "program": [Path(opts.program[0]).name, *opts.program[1:]],
        "overrides": list(opts.overrides),
        "iterations": opts.iterations,
        "managed": opts.managed,
        "sim_time_limit_s": opts.sim_time_limit_s,
        "wall_time_limit_s": opts.wall_time_limit_s,
    }
    # a run that ended without its report leaves its series unfinished: never left looking current
    (out / "link_series.tsv.part").unlink(missing_ok=True)
    with _no_cycle_collection():
        res = results.read_run(out, run_info, proc.returncode, links, WALL_GRACE_S if overran else None)
        res.physics_violations = physics.violations(res, opts.machine, opts.layout)
        tmp = out / "results.json.part"
        tmp.write_text(res.to_json())
    tmp.replace(out / "results.json")
    if opts.trace:  # a run that failed too: its trace up to the failure
        write_trace(out, opts.trace)
        if not opts.link_series:  # the series was for the trace's counters only
            (out / "link_series.tsv").unlink(missing_ok=True)
    if res.status == "orrery_error":
        raise SimulationError(res.failure.message if res.failure else "the simulation stopped on an error of its own")
    return RunOutcome(res.run["exit_code"], res, proc.stdout)
