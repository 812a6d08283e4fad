"""Shared fixtures: the installed `orrery` command, programs built with its wrappers."""

from __future__ import annotations

import contextlib
import csv
import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).parent
REPO = HERE.parent
ORRERY = str(Path(sys.executable).parent / "orrery")


def nvcc_available() -> bool:
    return shutil.which("nvcc") is not None or Path("/usr/local/cuda/bin/nvcc").is_file()


def real_nvcc() -> str:
    """The CUDA toolkit's own nvcc (not Orrery's wrapper), for what a test compiles without Orrery."""
    return shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"


needs_nvcc = pytest.mark.skipif(not nvcc_available(), reason="nvcc (CUDA toolkit compiler) is not installed")


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    out: Path

    @property
    def results(self) -> dict:
        return json.loads((self.out / "results.json").read_text())

    def values(self) -> dict[str, float]:
        """The program's "name value" output lines."""
        vals = {}
        for line in self.stdout.splitlines():
            parts = line.rsplit(" ", 1)
            if len(parts) == 2:
                with contextlib.suppress(ValueError):
                    vals[parts[0]] = float(parts[1])
        return vals


def orrery(
    *args: str, cwd: Path | None = None, check: bool = False, env: Mapping[str, str | None] | None = None
) -> subprocess.CompletedProcess:
    """The orrery CLI; `env` changes this process's environment for it (None: a variable unset)."""
    environment = None
    if env is not None:
        environment = {k: v for k, v in os.environ.items() if k not in env}
        environment.update({k: v for k, v in env.items() if v is not None})
    proc = subprocess.run([ORRERY, *args], capture_output=True, text=True, cwd=cwd, env=environment)
    if check and proc.returncode:
        raise AssertionError(f"orrery {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def assert_same_run(a: subprocess.CompletedProcess, out_a: Path, b: subprocess.CompletedProcess, out_b: Path) -> None:
    """Two `orrery run`s that succeeded with the same output, results.json and report byte for
    byte (Orrery's summary names each run's folder)."""
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    assert a.stdout.replace(str(out_a), "OUT") == b.stdout.replace(str(out_b), "OUT")
    for f in ("results.json", "report.tsv"):
        assert (out_a / f).read_bytes() == (out_b / f).read_bytes(), f


def assert_same_calibration(produced, committed, path: str = "") -> None:
    """A calibration as committed: the same keys, strings and structure, every number to 1e-9.
    A run is bit-identical to another with the same libraries (the h100-pcie calibration test runs twice);
    a committed file was made with the numpy and scipy of its day, whose least squares may differ
    from today's in the last digits."""
    if isinstance(committed, dict):
        assert isinstance(produced, dict) and sorted(produced) == sorted(committed), path
        for key in committed:
            assert_same_calibration(produced[key], committed[key], f"{path}.{key}")
    elif isinstance(committed, list):
        assert isinstance(produced, list) and len(produced) == len(committed), path
        for i, (a, b) in enumerate(zip(produced, committed)):
            assert_same_calibration(a, b, f"{path}[{i}]")
    elif isinstance(committed, float) and not isinstance(committed, bool):
        assert produced == pytest.approx(committed, rel=1e-9, abs=1e-300), path
    else:
        assert produced == committed, path


#: NCCL's public header (the nvidia-nccl-cu13 wheel's), extracted by scripts/setup.sh
NCCL_INCLUDE = HERE.parent / ".venv" / "nccl" / "include"
#: NVML's public header (the nvidia-nvml-dev-cu12 wheel's), extracted by scripts/setup.sh
NVML_INCLUDE = HERE.parent / ".venv" / "nvml" / "include"


def build(source: Path, dest: Path, obj: Path | None = None) -> Path:
    """Compile a .cu program with `orrery nvcc` and link it with `orrery mpicxx` (the driver API's
    programs, driver_*.cu, with `-lcuda`, as programs using it are linked; NCCL's, nccl_*.cu, with
    `-lnccl`; NVML's, nvml_*.cu, with `-lnvidia-ml`)."""
    obj = obj or dest.with_suffix(".o")
    # NCCL programs, nccl_*.cu, against NCCL's real header (scripts/setup.sh puts it there), with -lnccl
    nccl = source.stem.startswith("nccl_")
    nvml = source.stem.startswith("nvml_")  # NVML's, against its real header, with -lnvidia-ml
    include = [f"-I{NCCL_INCLUDE}"] if nccl else [f"-I{NVML_INCLUDE}"] if nvml else []
    orrery("nvcc", "-std=c++17", *include, "-c", str(source), "-o", str(obj), check=True)
    libs = ["-lcuda"] if source.stem.startswith("driver_") else ["-lnccl"] if nccl else []
    libs += ["-lnvidia-ml"] if nvml else []
    orrery("mpicxx", str(obj), "-o", str(dest), *libs, check=True)
    return dest


def session_dir(tmp_path_factory, name: str) -> Path:
    """A folder of this test session that its pytest-xdist workers share (their common temporary
    folder), or the session's own without xdist: what is built there is built once per session."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    d = root / name
    d.mkdir(exist_ok=True)
    return d


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (flock) across the session's workers."""
    with path.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def built_once(dest: Path, make: Callable[[Path], None]) -> Path:
    """`dest`, made by `make(tmp)` into a temporary name and renamed, under a lock: the first worker
    to ask builds it, the others wait for that one build instead of making their own."""
    with locked(dest.with_name(dest.name + ".lock")):
        if not dest.exists():
            tmp = dest.with_name(dest.name + ".part")
            shutil.rmtree(tmp, ignore_errors=True) if tmp.is_dir() else tmp.unlink(missing_ok=True)
            make(tmp)
            tmp.rename(dest)
    return dest


class Programs(Mapping[str, Path]):
    """tests/native/programs/*.cu by name, each built on first use, once per session for all workers."""

    def __init__(self, root: Path):
        self.root = root
        self.sources = {src.stem: src for src in sorted((HERE / "native" / "programs").glob("*.cu"))}

    def __getitem__(self, name: str) -> Path:
        src = self.sources[name]
        return built_once(self.root / name, lambda tmp: build(src, tmp, obj=self.root / f"{name}.o"))

    def __iter__(self) -> Iterator[str]:
        return iter(self.sources)

    def __len__(self) -> int:
        return len(self.sources)


@pytest.fixture(scope="session")
def programs(tmp_path_factory) -> Mapping[str, Path]:
    if not nvcc_available():
        pytest.skip("nvcc (CUDA toolkit compiler) is not installed")
    return Programs(session_dir(tmp_path_factory, "programs"))


def bench_sources(d: Path) -> Path:
    """calibration/bench's sources (what the package installs) copied into `d`."""
    src = REPO / "calibration" / "bench"
    for f in [*src.glob("*.cu"), *src.glob("*.h"), src / "Makefile"]:
        shutil.copy(f, d / f.name)
    return d


@pytest.fixture(scope="session")
def bench(tmp_path_factory) -> Path:
    """calibration/bench built once per session with Orrery's wrappers, outside the checkout (in
    one folder per build: two makes in one folder would race)."""
    if not nvcc_available():
        pytest.skip("nvcc (CUDA toolkit compiler) is not installed")

    def make(d: Path) -> None:
        d.mkdir()
        bench_sources(d)
        subprocess.run(["make", "-s", f"NVCC={ORRERY} nvcc", f"MPICXX={ORRERY} mpicxx"], cwd=d, check=True)

    return built_once(session_dir(tmp_path_factory, "built") / "bench", make)


def mpicc_program(tmp_path_factory, name: str) -> Path:
    """tests/native/programs/<name>.c built with `orrery mpicc` (no nvcc), once per session for all
    workers."""

    def make(d: Path) -> None:
        d.mkdir()
        orrery("mpicc", str(HERE / "native" / "programs" / f"{name}.c"), "-o", str(d / name), check=True)

    return built_once(session_dir(tmp_path_factory, "built") / name, make) / name


@pytest.fixture(scope="session")
def mpi_only(tmp_path_factory) -> Path:
    """tests/native/programs/mpi_only.c, the pure-MPI program (no CUDA call), once per session."""
    return mpicc_program(tmp_path_factory, "mpi_only")


@pytest.fixture(scope="session")
def jacobi(tmp_path_factory) -> Path:
    """examples/jacobi built with its own Makefile and the wrappers, once per session, outside the
    checkout."""
    if not nvcc_available():
        pytest.skip("nvcc (CUDA toolkit compiler) is not installed")

    def make(d: Path) -> None:
        d.mkdir()
        for f in ("jacobi.cu", "Makefile"):
            shutil.copy(REPO / "examples" / "jacobi" / f, d / f)
        subprocess.run(["make", "-s", f"NVCC={ORRERY} nvcc", f"MPICXX={ORRERY} mpicxx"], cwd=d, check=True)

    return built_once(session_dir(tmp_path_factory, "built") / "jacobi", make) / "jacobi"


def voltage_park_copies(test: str, scale: float = 1.0) -> dict[int, float]:
    """The Voltage Park H100 bandwidthTest rows of the shared measurements (size -> GB/s x scale),
    read here independently of orrery.calibration."""
    points: dict[int, float] = {}
    with (REPO / "calibration/data/measured/device_bandwidth.csv").open(newline="") as f:
        for r in csv.DictReader(f):
            if "Voltage Park" in r["system"] and r["test"] == test:
                points.setdefault(int(r["transfer_bytes"]), float(r["bandwidth_GBps"]) * scale)
    return points


@pytest.fixture
def run_program(tmp_path):
    counter = iter(range(1000))

    def _run(program: Path, *program_args: str, options: tuple[str, ...] = (), nodes: int = 1) -> Run:
        out = tmp_path / f"out{next(counter)}"
        proc = orrery("run", "--nodes", str(nodes), "--out", str(out), *options, "--", str(program), *program_args)
        return Run(proc.returncode, proc.stdout, proc.stderr, out)

    return _run


@pytest.fixture(scope="session")
def h100():
    from orrery import machines as machine

    return machine.load("h100-ib200")


def pytest_report_header(config):
    import orrery

    return f"orrery from {Path(orrery.__file__).parent} (CI={os.environ.get('CI', '')})"
