"""autotools with Orrery's wrappers: ``./configure CC=orrery-mpicc CXX=orrery-mpicxx NVCC=orrery-nvcc``
on a small project written for these tests (programs/autotools: run tests on MPI programs,
AC_COMPUTE_INT's conftest.val, -lcudart and -lcuda link checks, CUDA-aware MPI checks of
mpi-ext.h, a libtool shared library, a .cu file built with $(NVCC)), then its program under
`orrery run`; and what a wrapper-built program
does when started on its own, which is what configure's run tests rely on."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HERE, needs_nvcc

from orrery.run import build
from orrery.run.standalone import MACHINE

pytestmark = [
    pytest.mark.native,
    needs_nvcc,
    pytest.mark.skipif(
        shutil.which("autoreconf") is None or shutil.which("libtoolize") is None,
        reason="autoconf, automake and libtool are not installed (scripts/setup.sh installs them)",
    ),
]

BIN = Path(sys.executable).parent
WRAPPERS = [f"CC={BIN / 'orrery-mpicc'}", f"CXX={BIN / 'orrery-mpicxx'}", f"NVCC={BIN / 'orrery-nvcc'}"]
PROJECT = HERE / "native" / "programs" / "autotools"
STANDALONE_LINE = f"runs as one simulated rank on one GPU of {MACHINE}; `orrery run` simulates a cluster"


def _run(cmd: list[str], cwd: Path, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{' '.join(cmd)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> dict:
    """The project configured and built once, outside the checkout: its folder and configure's output.
    configure is generated here (autoreconf), not committed: its generated files are large and
    tied to the autotools versions that made them."""
    d = tmp_path_factory.mktemp("autotools") / "project"
    shutil.copytree(PROJECT, d)
    (d / "m4").mkdir()
    _run(["autoreconf", "-i"], d)
    configure = _run(["./configure", *WRAPPERS], d)
    _run(["make", "-s"], d)
    return {"dir": d, "configure": configure}


def _config(project: dict) -> str:
    return (project["dir"] / "config.h").read_text()


def test_configure_runs_an_mpi_program_as_one_rank(project):
    # size 1, rank 0, and MPI_Allreduce's sum over that one rank of 40 + size
    assert '#define WORLD_SEEN_BY_CONFIGURE "1:0:41"' in _config(project)


def test_configure_sees_a_run_test_fail(project):
    assert "#define FAILURE_SEEN 1" in _config(project)


def test_compute_int_runs_on_the_simulated_gpu(project, h100):
    """AC_COMPUTE_INT writes conftest.val from a program asking the GPU for its multiprocessors:
    the simulated H100's, which no host without that GPU would answer."""
    assert f"#define SM_COUNT_SEEN_BY_CONFIGURE {h100.gpu.sm_count}\n" in _config(project)


def test_cudart_link_check_finds_orrerys_runtime(project):
    assert "#define HAVE_LIBCUDART 1" in _config(project)


def test_cuda_driver_link_check_finds_orrerys_driver(project):
    """AC_CHECK_LIB([cuda], [cuInit]), as OSU's configure checks -lcuda: this machine has no CUDA
    driver, so only Orrery's libcuda.so (the wrappers' -L) can satisfy it."""
    assert "#define HAVE_LIBCUDA 1" in _config(project)


def test_configure_finds_mpi_ext_h_and_a_cuda_aware_mpi(project):
    """The header (Orrery's, after SMPI's on the wrappers' include path), MPIX_Query_cuda_support
    linked, and its answer to a run test that also checks MPIX_CUDA_AWARE_SUPPORT."""
    config = _config(project)
    assert "#define HAVE_MPI_EXT_H 1\n" in config
    assert "#define HAVE_MPIX_QUERY_CUDA_SUPPORT 1\n" in config
    assert '#define CUDA_AWARE_SEEN_BY_CONFIGURE "1"\n' in config


def test_configure_prints_nothing_of_orrerys_on_stdout(project):
    """Orrery's line about each run test goes to stderr, which configure keeps in config.log."""
    configure = project["configure"]
    assert "orrery:" not in configure.stdout and "simulated" not in configure.stdout
    assert configure.stderr == ""
    log = (project["dir"] / "config.log").read_text()
    # the run tests: whether configure cross-compiles, the MPI world, the failing program,
    # AC_COMPUTE_INT's (which runs its program once) and the CUDA-aware query
    assert log.count(f"orrery: conftest {STANDALONE_LINE}") == 5


def _entry(elf: Path) -> int:
    return struct.unpack_from("<Q", elf.read_bytes(), 24)[0]  # e_entry of an ELF64 header


def test_libtool_links_a_library_without_the_entry_point_and_the_program_with_it(project):
    d = project["dir"]
    assert _entry(d / ".libs" / "libscale.so") == 0
    symbols = subprocess.run(["nm", str(d / "ranks")], capture_output=True, text=True, check=True).stdout
    address = next(int(line.split()[0], 16) for line in symbols.splitlines() if line.endswith(build.STANDALONE_ENTRY))
    assert _entry(d / "ranks") == address


def test_the_program_runs_under_orrery_run(project, run_program, h100):
    """Two ranks: the libtool library's value, MPI's sum, the kernels built by $(NVCC) (rank r
    launches r + 2 of them), and what configure found, compiled into the program."""
    r = run_program(project["dir"] / "ranks", options=("--gpus-per-node", "2"))
    assert r.returncode == 0, r.stderr
    sms = h100.gpu.sm_count
    assert sorted(line for line in r.stdout.splitlines() if ": device" in line) == [
        f"rank 0 of 2: device 0 scaled 10 total 30 configure 1:0:41 sms {sms}",
        f"rank 1 of 2: device 0 scaled 20 total 30 configure 1:0:41 sms {sms}",
    ]
    ranks = r.results["ranks"]
    assert [sum(k["count"] for k in rk["kernels"].values()) for rk in ranks] == [2, 3]
    assert [list(rk["kernels"]) for rk in ranks] == [["double_it(double*, int)"]] * 2
    assert [rk["mpi"]["MPI_Allreduce"]["count"] for rk in ranks] == [1, 1]


def test_the_program_runs_on_its_own_as_one_rank(project, tmp_path, h100):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    p = subprocess.run([str(project["dir"] / "ranks")], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"rank 0 of 1: device 0 scaled 10 total 10 configure 1:0:41 sms {h100.gpu.sm_count}\n"
    assert p.stderr.splitlines()[0] == f"orrery: ranks {STANDALONE_LINE}"
    assert list(tmp_path.iterdir()) == []  # the run's temporary folder is removed


# -- a program started on its own, without configure -------------------------------------------

STATUS_PROGRAM = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char** argv) {
  if (argc > 1 && argv[1][0] == 'p') {  /* no MPI at all, and no newline at the end */
    printf("plain %s", argv[argc - 1]);
    return atoi(argv[2]);
  }
  MPI_Init(&argc, &argv);
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  printf("ranks %d args %d last '%s'\n", size, argc - 1, argv[argc - 1]);
  MPI_Finalize();
  return argc > 2 ? atoi(argv[2]) : 0;
}
"""


@pytest.fixture(scope="module")
def status_program(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("standalone")
    (d / "status.c").write_text(STATUS_PROGRAM)
    subprocess.run([str(BIN / "orrery-mpicc"), "-o", str(d / "status"), str(d / "status.c")], check=True)
    return d / "status"


@pytest.mark.parametrize(
    ("args", "stdout", "status"),
    [
        ([], "ranks 1 args 0 last '{exe}'\n", 0),
        (["mpi", "7", "a=b"], "ranks 1 args 3 last 'a=b'\n", 7),
        (["plain", "5", "x.y"], "plain x.y", 5),
        (["plain", "0", "z"], "plain z", 0),
    ],
)
def test_stdout_and_status_are_the_programs_own(status_program, args, stdout, status, tmp_path):
    """smpirun prints its command line and "Execution failed" on stdout after a non-zero status:
    not on the program's stdout; a program without any MPI call keeps its status too."""
    p = subprocess.run([str(status_program), *args], capture_output=True, cwd=tmp_path)
    assert (p.stdout.decode(), p.returncode) == (stdout.format(exe=status_program.resolve()), status)
    assert p.stderr.decode().splitlines()[0] == f"orrery: status {STANDALONE_LINE}"


def test_the_program_still_runs_unchanged_under_orrery_run(status_program, run_program):
    r = run_program(status_program, "mpi", "0", options=("--gpus-per-node", "3"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:3] == ["ranks 3 args 2 last '0'"] * 3


@pytest.mark.parametrize(
    ("args", "program"),
    [
        (["-o", "p", "main.o", "-lm"], True),
        (["main.c", "kernels.o", "libx.a", "-o", "p"], True),
        (["-o", "p", "main.f90"], True),
        (["-shared", "-o", "libx.so", "x.o"], False),
        (["-o", ".libs/libx.so.0", "-Wl,-shared", "x.o"], False),
        (["-c", "main.c"], False),
        (["-E", "main.c"], False),
        (["-S", "main.c"], False),
        (["-M", "main.c"], False),
        (["-v"], False),  # libtool's and configure's probes: no input, nothing linked
        (["-print-search-dirs"], False),
        (["-print-prog-name=ld"], False),
        (["-o", "p", "main.o", "-Wl,-e,start"], False),  # the program's own entry point
    ],
)
def test_only_links_of_programs_get_the_entry_point(args, program):
    assert build.makes_program(args) is program


@pytest.mark.parametrize("probe", [["-v"], ["-print-search-dirs"], ["-print-prog-name=ld"], ["-dumpmachine"]])
def test_libtools_probes_answer_as_the_c_compiler_does(probe, tmp_path):
    """libtool reads these answers from stdout: the wrapper adds nothing to them, and leaves
    nothing behind (smpicc alone links an empty a.out for them)."""
    ours = subprocess.run([str(BIN / "orrery-mpicc"), *probe], capture_output=True, text=True, cwd=tmp_path)
    cc = subprocess.run(["cc", *probe], capture_output=True, text=True)
    assert (ours.returncode, ours.stdout) == (cc.returncode, cc.stdout)
    assert list(tmp_path.iterdir()) == []


def test_a_library_linked_by_orrery_nvcc_gets_no_entry_point(tmp_path):
    """nvcc's -shared is a link option: the library is linked as one, not as a program."""
    (tmp_path / "k.cu").write_text('__global__ void k() {}\nextern "C" void go() { k<<<1, 1>>>(); }\n')
    nvcc = str(BIN / "orrery-nvcc")
    subprocess.run([nvcc, "-c", "-o", "k.o", "k.cu"], cwd=tmp_path, check=True)
    subprocess.run([nvcc, "-shared", "-o", "libk.so", "k.o"], cwd=tmp_path, check=True)
    symbols = subprocess.run(["nm", "libk.so"], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert _entry(tmp_path / "libk.so") == 0 and build.STANDALONE_ENTRY not in symbols


@pytest.mark.parametrize("nvcc", ["orrery-nvcc", "nvcc"])
def test_osus_kernel_rule_builds(tmp_path, nvcc):
    """OSU's Makefiles compile a .cu with ``$(NVCC) -cuda -ccbin $(CXX)`` into a preprocessed
    .cpp that ``$(CXX) -c`` compiles: smpicxx can be neither nvcc's host compiler nor the compiler
    of that file (its forced header turns malloc into a macro before CUDA's headers). With
    NVCC=orrery-nvcc the -ccbin is dropped; with the real nvcc (OSU's Makefile.am sets NVCC =
    nvcc), orrery-mpicxx knows it is nvcc's host compiler."""
    (tmp_path / "k.cu").write_text("#include <mpi.h>\n__global__ void scale_kernel(float* x) { x[0] *= 2; }\n")
    cxx = str(BIN / "orrery-mpicxx")
    exe = str(BIN / nvcc) if nvcc.startswith("orrery") else (shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc")
    p = subprocess.run(
        [exe, "-cuda", "-ccbin", cxx, "--output-file", "k.cpp", "k.cu"], cwd=tmp_path, capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr
    subprocess.run([cxx, "-c", "-o", "k.o", "k.cpp"], cwd=tmp_path, check=True)
    symbols = subprocess.run(["nm", "-C", "k.o"], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert "scale_kernel(float*)" in symbols
