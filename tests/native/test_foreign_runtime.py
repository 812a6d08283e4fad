"""Prebuilt code with its own CUDA runtime: nvcc links the runtime statically by default, so a
kernel library built with plain `nvcc -shared`, or a program linked with libcudart_static.a,
makes CUDA calls Orrery never sees. The run must stop naming the file, before any simulated
time, instead of reporting a makespan without those kernels."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HERE, needs_nvcc, orrery

pytestmark = [pytest.mark.native, needs_nvcc]

BIN = Path(sys.executable).parent
NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
SRC = HERE / "native" / "programs" / "foreign"


def _static_runtime() -> Path:
    """libcudart_static.a where nvcc itself finds its libraries (its -dryrun's LIBRARIES line)."""
    out = subprocess.run([NVCC, "-dryrun", "-o", "x", "x.cu"], capture_output=True, text=True).stderr
    line = next(line for line in out.splitlines() if "LIBRARIES=" in line)
    dirs = [Path(a.strip('"')[2:]) for a in line.split("=", 1)[1].split() if a.strip('"').startswith("-L")]
    return next(d / "libcudart_static.a" for d in dirs if (d / "libcudart_static.a").is_file())


ADVICE = "so its CUDA calls would not be simulated; rebuild it with orrery-nvcc, or with nvcc -cudart shared"


def _sh(*cmd: str | Path) -> None:
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    assert p.returncode == 0, (cmd, p.stderr)


@pytest.fixture(scope="module")
def prebuilt(tmp_path_factory) -> Path:
    """The kernel library built as users prebuild it (plain nvcc: static runtime), a stripped
    copy, one built against the shared runtime, and the program linking each."""
    d = tmp_path_factory.mktemp("foreign")
    for name, flags in (("static", []), ("shared", ["-cudart", "shared"])):
        lib = d / name / "libkernels.so"
        lib.parent.mkdir()
        _sh(NVCC, "-shared", "-Xcompiler", "-fPIC", *flags, "-o", lib, SRC / "kernels.cu")
        _sh(BIN / "orrery-mpicxx", SRC / "main.cpp", "-o", lib.parent / "app", f"-L{lib.parent}", "-lkernels",
            f"-Wl,-rpath,{lib.parent}")  # fmt: skip
    (d / "stripped").mkdir()
    shutil.copy(d / "static" / "libkernels.so", d / "stripped" / "libkernels.so")
    _sh("strip", "--strip-all", d / "stripped" / "libkernels.so")
    _sh(BIN / "orrery-mpicxx", SRC / "main.cpp", "-o", d / "stripped" / "app", f"-L{d / 'stripped'}", "-lkernels",
        f"-Wl,-rpath,{d / 'stripped'}")  # fmt: skip
    return d


def _stopped(run, who: Path, why: str) -> None:
    assert run.returncode == 3, run.stderr
    expected = f"orrery: error: {who} carries its own copy of the CUDA runtime ({why}: nvcc links it statically by default), {ADVICE}"
    assert run.stderr.splitlines()[-1] == expected
    assert "cuda status" not in run.stdout  # stopped at MPI_Init, before the library's first call
    res = run.results
    assert res["status"] == "orrery_error" and res["failure"]["time_s"] == 0
    assert "simulated makespan" not in run.stdout


def test_a_prebuilt_library_with_a_static_runtime_stops_the_run_naming_it(prebuilt, run_program):
    lib = prebuilt / "static" / "libkernels.so"
    _stopped(run_program(prebuilt / "static" / "app"), lib, "cudaMalloc is defined in it")


def test_a_stripped_library_is_known_by_its_kernels_without_an_imported_runtime(prebuilt, run_program):
    lib = prebuilt / "stripped" / "libkernels.so"
    _stopped(
        run_program(prebuilt / "stripped" / "app"), lib, "it has kernels but imports no runtime to register them with"
    )


def test_the_same_library_on_the_shared_runtime_is_simulated(prebuilt, run_program):
    r = run_program(prebuilt / "shared" / "app", options=("--gpus-per-node", "2"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines().count("cuda status 0") == 2
    assert [{k: v["count"] for k, v in rank["kernels"].items()} for rank in r.results["ranks"]] == [
        {"fill(double*)": 1}
    ] * 2


@pytest.mark.parametrize("tmpdir", [None, "scratch"], ids=["default", "user-tmpdir"])
def test_a_program_linked_with_the_static_runtime_archive_is_named(tmp_path, run_program, monkeypatch, tmpdir):
    """The archive given as a file on the link line (the wrapper drops only -lcudart_static):
    the program's own copy, which SMPI runs renamed per rank from the folder of its copies (a
    folder of the run's on /dev/shm, or the user's TMPDIR), is named by the file built."""
    if tmpdir:
        (tmp_path / tmpdir).mkdir()
        monkeypatch.setenv("TMPDIR", str(tmp_path / tmpdir))
    else:
        monkeypatch.delenv("TMPDIR", raising=False)
    obj, app = tmp_path / "kernels.o", tmp_path / "app"
    _sh(BIN / "orrery-nvcc", "-c", SRC / "kernels.cu", "-o", obj)
    _sh(BIN / "orrery-mpicxx", SRC / "main.cpp", obj, _static_runtime(), "-o", app)
    _stopped(run_program(app), f"the program {app}", "cudaMalloc is defined in it")


def test_a_program_without_orrery_s_runtime_but_with_its_own_is_refused_before_the_run(tmp_path):
    obj, app = tmp_path / "kernels.o", tmp_path / "app"
    _sh(NVCC, "-Xcompiler", "-fPIC", "-c", SRC / "kernels.cu", "-o", obj)
    _sh("smpicxx", SRC / "main.cpp", obj, _static_runtime(), "-o", app)
    p = orrery("run", "--out", str(tmp_path / "o"), "--", str(app))
    assert p.returncode == 2 and not (tmp_path / "o").exists()
    assert p.stderr == (
        f"orrery: error: orrery run: got '{app}', expected a program whose CUDA calls reach Orrery's runtime; "
        "it carries its own copy of the CUDA runtime (statically linked: nvcc's default), so they would not be "
        "simulated: build it with orrery-nvcc\n"
    )
