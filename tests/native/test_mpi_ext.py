"""Open MPI's CUDA-aware checks (mpi-ext.h), which SMPI lacks: the wrappers put Orrery's
header on the include path after SMPI's and before the program's own flags, its macros say
CUDA-aware and not ROCm-aware, and libcudart.so.13's MPIX_Query_cuda_support answers 1 (and
MPIX_Query_rocm_support 0) to a C program built with orrery mpicc and to a CUDA-aware program
built with orrery nvcc as NVIDIA's multi-gpu-programming-models writes one
(programs/mpi_ext.c, programs/mpi_ext.cu); and the workaround docs/building.md gives for SMPI's
own MPI_CALL macro."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
from conftest import HERE, built_once, needs_nvcc, orrery, session_dir

from orrery import _paths
from orrery.run import build

pytestmark = pytest.mark.native

PROGRAMS = HERE / "native" / "programs"
RANKS = 3
N = 4096  # doubles each rank of mpi_ext.cu sends and receives


@pytest.fixture(scope="session")
def mpi_ext_c(tmp_path_factory) -> Path:
    """programs/mpi_ext.c built with `orrery mpicc`, once per session."""

    def make(d: Path) -> None:
        d.mkdir()
        orrery("mpicc", str(PROGRAMS / "mpi_ext.c"), "-o", str(d / "mpi_ext"), check=True)

    return built_once(session_dir(tmp_path_factory, "built") / "mpi_ext_c", make) / "mpi_ext"


def test_the_header_is_installed_with_the_package_as_in_the_source_tree():
    installed = _paths.include_dir() / "mpi-ext.h"
    assert installed.read_text() == (HERE.parent / "interpose" / "mpi" / "mpi-ext.h").read_text()


def test_a_c_program_sees_cuda_aware_mpi_at_compile_time_and_at_run_time(mpi_ext_c, run_program):
    r = run_program(mpi_ext_c, options=("--gpus-per-node", str(RANKS)))
    assert r.returncode == 0, r.stderr
    assert sorted(line for line in r.stdout.splitlines() if line.startswith("checks ")) == [
        f"checks of rank {rank}: ext 1 cuda ext 1 compile 1 query 1 rocm compile 0 query 0" for rank in range(RANKS)
    ]
    # the queries take no simulated time and are no MPI call of SMPI's: nothing by name
    assert all(rank["mpi"] == {} for rank in r.results["ranks"])


def test_the_queries_are_libcudart_s_own(mpi_ext_c):
    """The program imports them from Orrery's runtime, under its version, as it does MPI_Init."""
    imported = subprocess.run(["nm", "-D", "--undefined-only", str(mpi_ext_c)], capture_output=True, text=True)
    names = {line.split()[-1] for line in imported.stdout.splitlines()}
    assert {"MPIX_Query_cuda_support@libcudart.so.13", "MPIX_Query_rocm_support@libcudart.so.13"} <= names


def test_a_cuda_aware_program_passes_device_buffers_to_mpi(programs, run_program):
    """mpi_ext.cu passes its device buffers to MPI_Sendrecv only if its compile-time guard and
    MPIX_Query_cuda_support both say CUDA-aware; else host buffers."""
    r = run_program(programs["mpi_ext"], options=("--gpus-per-node", str(RANKS)))
    assert r.returncode == 0, r.stderr
    assert sorted(line for line in r.stdout.splitlines() if line.startswith("checks ")) == [
        f"checks of rank {rank}: compile 1 query 1 rocm 0 buffers device" for rank in range(RANKS)
    ]
    for rank in r.results["ranks"]:
        assert {k: (v["count"], v["bytes"]) for k, v in rank["mpi"].items()} == {"MPI_Sendrecv": (1, 2 * N * 8)}


def _include_folders(cmd: list[str]) -> list[str]:
    return [a[2:] for a in cmd if a.startswith("-I")]


def test_orrery_mpicc_puts_the_header_after_smpis_and_before_the_programs_own(tmp_path):
    """smpicc -show prints the compiler command it would run: SMPI's folder, Orrery's, then the
    program's -I."""
    p = orrery("mpicc", "-show", f"-I{tmp_path}", "-c", "x.c", cwd=tmp_path, check=True)
    folders = _include_folders(shlex.split(p.stdout))
    ours, smpi = str(_paths.include_dir()), build.smpi_include_dir()
    assert folders.index(smpi) < folders.index(ours) < folders.index(str(tmp_path))
    assert folders.count(ours) == 1


@needs_nvcc
def test_orrery_nvcc_puts_the_header_after_smpis_and_before_the_programs_own(monkeypatch, tmp_path):
    commands: list[list[str]] = []
    monkeypatch.setattr(build, "_run", lambda cmd: commands.append(cmd) or 0)
    assert build.nvcc([f"-I{tmp_path}", "-c", "x.cu", "-o", "x.o"]) == 0
    (cmd,) = commands
    assert _include_folders(cmd) == [build.smpi_include_dir(), str(_paths.include_dir()), str(tmp_path)]


def test_orrery_mpif90_adds_no_c_header(monkeypatch):
    commands: list[list[str]] = []
    monkeypatch.setattr(build, "_run", lambda cmd: commands.append(cmd) or 0)
    assert build.mpif90(["-c", "x.f90"]) == 0
    assert commands == [[build._tool("smpif90", ""), "-c", "x.f90"]]


def test_a_program_s_own_mpi_header_folder_still_gives_its_other_headers(tmp_path):
    """Orrery's folder holds mpi-ext.h alone: a header of the program's that SMPI has not is
    still the program's."""
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "config.h").write_text("#define FROM_THE_PROGRAM 7\n")
    (tmp_path / "x.c").write_text(
        "#include <mpi.h>\n#include <mpi-ext.h>\n#include <config.h>\n"
        "int v[FROM_THE_PROGRAM == 7 && MPIX_CUDA_AWARE_SUPPORT ? 1 : -1];\n"
    )
    orrery("mpicc", f"-I{tmp_path / 'inc'}", "-c", "x.c", "-o", "x.o", cwd=tmp_path, check=True)
    assert (tmp_path / "x.o").is_file()


# A program's own error-checking macro named as SMPI's (multi-gpu-programming-models' MPI_CALL)
OWN_MPI_CALL = """#include <mpi.h>
{undef}#define MPI_CALL(call) (call)
int barrier(void) {{ return MPI_CALL(MPI_Barrier(MPI_COMM_WORLD)); }}
"""


@pytest.mark.parametrize(("undef", "builds"), [("", False), ("#undef MPI_CALL\n", True)])
def test_a_programs_own_mpi_call_macro_needs_smpis_undefined(tmp_path, undef, builds):
    """SMPI's smpi.h defines MPI_CALL for its own declarations: redefining it is a warning (an
    error under -Werror) unless the program undefines SMPI's first, as docs/building.md says."""
    (tmp_path / "own.c").write_text(OWN_MPI_CALL.format(undef=undef))
    p = orrery("mpicc", "-Werror", "-c", "own.c", "-o", "own.o", cwd=tmp_path)
    assert (p.returncode == 0) is builds, p.stderr
    assert ('"MPI_CALL" redefined' in p.stderr) is not builds
