"""CMake projects built for Orrery: the toolchain file the package installs (`orrery toolchain
cmake`) builds a C + C++ + CUDA project using FindMPI and FindCUDAToolkit (tests/native/programs/
cmake/, with position-independent code on, hence -fPIE and -pie) into a program that runs under
`orrery run` against Orrery's runtime, whose CUDA-aware MPI checks (mpi-ext.h) CMake's
check_include_files and check_symbol_exists pass; and the wrappers compile -fPIE as -fPIC and
drop -pie whoever asks for them, since SMPI loads a program as a shared object."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import HERE, needs_nvcc, orrery

import orrery as orrery_package
from orrery import _paths
from orrery.run import build

pytestmark = [pytest.mark.native, needs_nvcc]

PROJECT = HERE / "native" / "programs" / "cmake"
BIN = Path(sys.executable).parent  # the wrappers are installed beside Python
SCALE, FILL = "scale(double*, double, int)", "fill(double*, double, int)"
N = 1024  # doubles each rank copies in and out (main.cpp)


@pytest.fixture(scope="module")
def cmake_build(tmp_path_factory) -> Path:
    """The project configured and built with the installed toolchain file, outside the checkout."""
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed")
    d = tmp_path_factory.mktemp("cmake")
    toolchain = orrery("toolchain", "cmake", check=True).stdout.strip()
    for cmd in (
        ["cmake", f"-DCMAKE_TOOLCHAIN_FILE={toolchain}", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON", "-S", str(PROJECT),
         "-B", str(d)],
        ["cmake", "--build", str(d), "--verbose"],
    ):  # fmt: skip
        p = subprocess.run(cmd, capture_output=True, text=True)
        assert p.returncode == 0, f"{' '.join(cmd)}:\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    return d


def test_orrery_toolchain_cmake_prints_the_installed_toolchain_file():
    p = orrery("toolchain", "cmake", check=True)
    assert p.stdout == f"{Path(orrery_package.__file__).parent / 'cmake' / 'orrery.cmake'}\n"
    assert "CMAKE_TOOLCHAIN_FILE" in Path(p.stdout.strip()).read_text()


def test_cmake_compiles_cuda_with_orrery_nvcc_and_asks_for_pie(cmake_build):
    """The trap is there: CMake asks for -fPIE (POSITION_INDEPENDENT_CODE on an executable's sources)
    and compiles CUDA through orrery-nvcc, C and C++ through orrery-mpicc and orrery-mpicxx. (The
    flags are matched as whole arguments: the build's paths may hold "pie", as wt-mpiext does.)"""
    commands = {
        Path(c["file"]).name: shlex.split(c["command"])
        for c in json.loads((cmake_build / "compile_commands.json").read_text())
    }
    assert commands["scale.cu"][0] == str(BIN / "orrery-nvcc") and "-Xcompiler=-fPIE" in commands["scale.cu"]
    assert commands["main.cpp"][0] == str(BIN / "orrery-mpicxx") and "-fPIE" in commands["main.cpp"]
    assert commands["weights.c"][0] == str(BIN / "orrery-mpicc") and "-fPIE" in commands["weights.c"]
    cache = (cmake_build / "CMakeCache.txt").read_text()
    assert f"MPI_C_COMPILER:FILEPATH={BIN / 'orrery-mpicc'}\n" in cache
    assert f"CUDA_cudart_LIBRARY:FILEPATH={_paths.lib_dir() / 'libcudart.so'}\n" in cache


def test_cmake_finds_mpi_ext_h_and_links_its_query(cmake_build):
    """check_include_files("mpi.h;mpi-ext.h") and check_symbol_exists(MPIX_Query_cuda_support),
    which compiles and links a program taking its address, as CUDA-aware projects check."""
    cache = (cmake_build / "CMakeCache.txt").read_text()
    assert "HAVE_MPI_EXT_H:INTERNAL=1\n" in cache
    assert "HAVE_MPIX_QUERY_CUDA_SUPPORT:INTERNAL=1\n" in cache


def test_cmake_built_program_needs_orrerys_runtime_as_a_shared_object(cmake_build):
    program = cmake_build / "sample"
    dynamic = subprocess.run(["readelf", "-d", "-l", str(program)], capture_output=True, text=True, check=True).stdout
    assert "Shared library: [libcudart.so.13]" in dynamic
    # a shared object SMPI can dlopen, not a position-independent executable (DF_1_PIE), which
    # glibc refuses to load (the flag read from FLAGS_1's words, not from paths readelf prints)
    assert "Elf file type is DYN (Shared object file)" in dynamic
    flags_1 = [line.split("Flags:", 1)[1].split() for line in dynamic.splitlines() if "(FLAGS_1)" in line]
    assert all("PIE" not in words for words in flags_1)
    # linked against Orrery's runtime (NVIDIA's has no MPI_* symbols; Orrery's times the MPI calls)
    imported = subprocess.run(["nm", "-D", "--undefined-only", str(program)], capture_output=True, text=True).stdout
    assert {"cudaMalloc@libcudart.so.13", "MPI_Reduce@libcudart.so.13"} <= {
        line.split()[-1] for line in imported.splitlines()
    }
    # and it finds it where `orrery run` puts it
    env = {**os.environ, "LD_LIBRARY_PATH": str(_paths.lib_dir())}
    ldd = subprocess.run(["ldd", str(program)], capture_output=True, text=True, check=True, env=env).stdout
    runtime = next(line for line in ldd.splitlines() if "libcudart.so.13" in line)
    assert runtime.split("=>")[1].split()[0] == str(_paths.lib_dir() / "libcudart.so.13")


def test_cmake_built_program_runs_under_orrery(cmake_build, run_program):
    r = run_program(cmake_build / "sample", options=("--gpus-per-node", "3"))
    assert r.returncode == 0, r.stderr
    # weights.c's rank * rank + 1, summed over 3 ranks by main.cpp's MPI_Reduce; MPIX_Query_cuda_support's 1
    assert r.values() == {"ranks": 3, "weights": 1 + 2 + 5, "failures": 0, "cuda_aware": 1}
    ranks = r.results["ranks"]
    assert [rank["kernels"][SCALE]["count"] for rank in ranks] == [1, 2, 3]  # rank + 1 launches each
    assert [rank["kernels"][FILL]["count"] for rank in ranks] == [1, 1, 1]  # the static library's
    assert [(rank["copies"]["H2D"]["count"], rank["copies"]["H2D"]["bytes"]) for rank in ranks] == [(1, 8 * N)] * 3
    assert [(rank["copies"]["D2H"]["count"], rank["copies"]["D2H"]["bytes"]) for rank in ranks] == [(1, 8 * N)] * 3


# -fPIE, as CMake and Makefiles pass it, and what the wrappers run instead
PIE_FORMS = [
    (["-Xcompiler", "-fPIE"], ["-Xcompiler", "-fPIC"]),
    (["-Xcompiler=-fPIE"], ["-Xcompiler=-fPIC"]),
    (["--compiler-options=-O2,-fpie"], ["--compiler-options=-O2,-fpic"]),
    (["-Xcompiler", "-Wall,-fPIE,-g"], ["-Xcompiler", "-Wall,-fPIC,-g"]),
    (["--compiler-options", "-fPIE"], ["--compiler-options", "-fPIC"]),
]


@pytest.mark.parametrize(("given", "run"), PIE_FORMS)
def test_orrery_nvcc_compiles_fpie_as_fpic(monkeypatch, given, run):
    commands = []
    monkeypatch.setattr(build, "_run", lambda cmd: commands.append(cmd) or 0)
    assert build.nvcc([*given, "-c", "x.cu", "-o", "x.o"]) == 0
    (cmd,) = commands
    assert cmd[-(len(run) + 4) :] == [*run, "-c", "x.cu", "-o", "x.o"]
    # no -fPIE/-fpie left, alone or in a host-compiler list (whole words: the -I paths may hold
    # "pie", as a checkout in a worktree named wt-mpiext does)
    words = {w for a in cmd for w in a.replace("=", ",").split(",")}
    assert not words & {"-fPIE", "-fpie", "-pie", "--pie"}


def _smpi_commands(monkeypatch) -> list[list[str]]:
    commands: list[list[str]] = []

    def run(cmd, **kwargs):
        commands.append(cmd)
        return SimpleNamespace(returncode=0)

    monkeypatch.setattr(build, "subprocess", SimpleNamespace(run=run))
    return commands


def test_orrery_mpicc_compiles_fpie_as_fpic(monkeypatch):
    commands = _smpi_commands(monkeypatch)
    assert build.mpicc(["-O2", "-fPIE", "-c", "x.c"]) == 0
    assert build.mpicc(["-fpie", "-c", "y.cpp"], cxx=True) == 0
    # C++ also gets each rank its own template statics (build.PRIVATE_STATICS); both, Orrery's
    # mpi-ext.h (build.include_args)
    assert [cmd[1:] for cmd in commands] == [
        [*build.include_args(), "-O2", "-fPIC", "-c", "x.c"],
        [build.PRIVATE_STATICS, *build.include_args(), "-fpic", "-c", "y.cpp"],
    ]


def test_orrery_mpicxx_links_a_shared_object_when_asked_for_pie(monkeypatch):
    commands = _smpi_commands(monkeypatch)
    assert build.mpicc(["-pie", "x.o", "-o", "x"], cxx=True) == 0
    entry, cmd = commands  # the program's entry point (autotools' run tests), then the link
    assert str(Path(build.__file__).with_name("standalone_entry.c")) in entry
    at = cmd.index("x.o")
    assert "-pie" not in cmd and cmd[at : at + 3] == ["x.o", "-o", "x"]
