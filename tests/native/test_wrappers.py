"""The compiler wrappers as a build system calls them: single-word executables (orrery-nvcc,
orrery-mpicc, orrery-mpicxx) and nvcc's own option syntax (values after a space or '=', phase
options that do not link, -x cu), read from the installed nvcc's --help."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HERE, needs_nvcc, orrery

from orrery import _paths
from orrery.run import build

pytestmark = [pytest.mark.native, needs_nvcc]

BIN = Path(sys.executable).parent
NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
DEVICE_QUERY = HERE / "native" / "programs" / "device_query.cu"

# From nvcc's documentation (CUDA 13 "NVCC command options"), written out here independently of
# the parser: options that take a value, and flags that take none.
TAKE_A_VALUE = ["-o", "--output-file", "-arch", "--gpu-architecture", "-gencode", "-maxrregcount", "-ccbin",
                "--compiler-bindir", "-Xcompiler", "-Xlinker", "-MF", "-x", "-std", "-I", "-L", "-l", "-D",
                "-O", "-rdc", "-default-stream", "-t", "-cudart"]  # fmt: skip
FLAGS = ["-c", "-cuda", "-ptx", "-E", "-M", "-g", "-G", "-lineinfo", "-use_fast_math", "-shared", "-dc",
         "-v", "--expt-relaxed-constexpr", "-extended-lambda", "-w"]  # fmt: skip


def test_nvcc_s_options_are_read_from_its_help():
    options = build.nvcc_options(NVCC)
    help_text = subprocess.run([NVCC, "--help"], capture_output=True, text=True).stdout
    longs = [line.split()[0] for line in help_text.splitlines() if line.startswith("--")]
    # every option line of the help is understood, long and short name
    assert set(longs) <= set(options)
    assert options["--entries"] and not options["--no-align-double"]  # a value without <...>; no short name
    assert {o: options[o] for o in TAKE_A_VALUE} == dict.fromkeys(TAKE_A_VALUE, True)
    assert {o: options[o] for o in FLAGS} == dict.fromkeys(FLAGS, False)


@pytest.mark.parametrize("option", TAKE_A_VALUE)
def test_a_value_after_a_space_stays_with_its_option(option):
    items = build.split_nvcc_args([option, "value.cu", "main.cu", "-c"], build.nvcc_options(NVCC))
    assert items == [[option, "value.cu"], ["main.cu"], ["-c"]]


def test_glued_and_equals_values_are_one_item():
    items = build.split_nvcc_args(["-O3", "-Ipath", "--std=c++17", "-lm", "x.cu"], build.nvcc_options(NVCC))
    assert items == [["-O3"], ["-Ipath"], ["--std=c++17"], ["-lm"], ["x.cu"]]


def _query(run_program, program: Path) -> dict[str, str]:
    r = run_program(program, options=("--gpus-per-node", "2"))
    assert r.returncode == 0, r.stderr
    return dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)


def test_single_word_wrappers_compile_and_link_in_one_command(tmp_path, run_program, h100):
    """orrery-nvcc with values after spaces (the command that failed with "Unsupported gpu
    architecture '-c'") builds a program that runs on the simulated machine."""
    exe = tmp_path / "query"
    p = subprocess.run(
        [str(BIN / "orrery-nvcc"), "-arch", "sm_90", "-maxrregcount", "32", "-std", "c++17", "-o", str(exe),
         str(DEVICE_QUERY)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    out = _query(run_program, exe)
    assert out["name"] == h100.gpu.model and out["count"] == "2"


def test_nvcc_s_own_l_options_are_no_libraries_and_host_options_reach_the_link(tmp_path, run_program):
    """NVIDIA's multi-gpu-programming-models build with `nvcc -Xcompiler -fopenmp -lineinfo -ldl
    jacobi.cu -o jacobi`: -lineinfo is nvcc's (line information), not a library "ineinfo"; -ldl is a
    library; -Xcompiler -fopenmp goes to the host compiler's link too, which then links OpenMP."""
    src = tmp_path / "omp.cu"
    src.write_text(
        "#include <mpi.h>\n#include <dlfcn.h>\n#include <cstdio>\n"
        "int main(int c, char** v) { MPI_Init(&c, &v); int n = 0;\n"
        "#pragma omp parallel num_threads(3) reduction(+ : n)\n  n += 1;\n"
        'printf("threads %d, dl %d\\n", n, dlopen(nullptr, RTLD_LAZY) != nullptr);\n'
        "MPI_Finalize(); }\n"
    )
    exe = tmp_path / "omp"
    cmd = [str(BIN / "orrery-nvcc"), "-Xcompiler", "-fopenmp", "-lineinfo", "-ldl", str(src), "-o", str(exe)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    r = run_program(exe, options=("--gpus-per-node", "1"))
    assert r.returncode == 0, r.stderr
    assert "threads 3, dl 1" in r.stdout.splitlines()


def test_x_cu_compiles_any_source_as_cuda(tmp_path, run_program, h100):
    src = tmp_path / "query.cpp"
    src.write_text(DEVICE_QUERY.read_text())
    exe = tmp_path / "query"
    p = subprocess.run([str(BIN / "orrery-nvcc"), "-x", "cu", "-o", str(exe), str(src)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert _query(run_program, exe)["sms"] == str(h100.gpu.sm_count)


def test_separate_compile_and_link_with_single_word_wrappers(tmp_path, run_program, h100):
    obj, exe = tmp_path / "q.o", tmp_path / "query"
    for cmd in (
        [str(BIN / "orrery-nvcc"), "-ccbin", "g++", "-c", str(DEVICE_QUERY), "-o", str(obj)],
        [str(BIN / "orrery-mpicxx"), str(obj), "-o", str(exe)],
    ):
        p = subprocess.run(cmd, capture_output=True, text=True)
        assert p.returncode == 0, (cmd, p.stderr)
    assert _query(run_program, exe)["name"] == h100.gpu.model


def test_a_makefile_that_runs_the_compilers_by_name_builds_with_the_toolchain_path(tmp_path, run_program, h100):
    """CloverLeaf's and OSU's recipes run `nvcc` itself, not $(NVCC): with `orrery toolchain
    path` first on PATH, the Makefile builds unchanged through Orrery's wrappers (a program the
    real nvcc and MPICH's mpicxx built would not run: orrery run refuses a static CUDA runtime),
    and orrery-nvcc still finds the real nvcc behind the folder's own `nvcc`."""
    folder = orrery(
        "toolchain", "path", check=True, env={"PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    ).stdout.strip()
    assert sorted(p.name for p in Path(folder).iterdir()) == [
        "mpiCC", "mpic++", "mpicc", "mpicxx", "mpif90", "mpifort", "nvcc"
    ]  # fmt: skip
    shutil.copy(DEVICE_QUERY, tmp_path / "query.cu")
    (tmp_path / "twice.c").write_text("int twice(int x) { return 2 * x; }\n")
    (tmp_path / "Makefile").write_text(
        "query: query.o twice.o\n\tmpicxx -o query query.o twice.o\n"
        "query.o: query.cu\n\tnvcc -arch=sm_90 -c query.cu -o query.o\n"
        "twice.o: twice.c\n\tmpicc -c twice.c -o twice.o\n"
    )
    path = os.pathsep.join([folder, str(BIN), os.environ["PATH"]])  # as a user's: `orrery` found on it
    p = subprocess.run(["make"], cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PATH": path})
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines()[0] == "nvcc -arch=sm_90 -c query.cu -o query.o"
    assert _query(run_program, tmp_path / "query")["name"] == h100.gpu.model
    version = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, env={**os.environ, "PATH": path})
    assert version.stdout.splitlines()[-1].startswith("Build cuda_"), version.stderr


def test_a_host_compiler_of_the_toolchain_path_is_dropped_as_orrery_s_wrappers_are(monkeypatch):
    """`nvcc -ccbin mpicxx` (TeaLeaf's rule) with `orrery toolchain path` first on PATH names
    Orrery's mpicxx: orrery-nvcc drops it, as it drops -ccbin orrery-mpicxx, rather than start a
    wrapper for each of nvcc's host steps. Another mpicxx (MPICH's, beside orrery) is kept."""
    ccbin = ["-ccbin", "mpicxx"]
    monkeypatch.setenv("PATH", os.pathsep.join([str(_paths.compiler_dir()), str(BIN), "/usr/bin"]))
    assert build._smpi_host_compiler(ccbin) and build._smpi_host_compiler(["--compiler-bindir=mpicxx"])
    monkeypatch.setenv("PATH", os.pathsep.join([str(BIN), "/usr/bin"]))
    assert not build._smpi_host_compiler(ccbin)
    assert build._smpi_host_compiler(["-ccbin", "orrery-mpicxx"])


def test_the_toolchain_path_needs_the_wrappers_on_path(tmp_path):
    """The folder's scripts run orrery-nvcc, ... from PATH: without them there, the command says so
    rather than give a folder whose compilers fail with 'not found'."""
    p = orrery("toolchain", "path", env={"PATH": "/usr/bin:/bin"})
    assert p.returncode == 3 and p.stdout == ""
    assert p.stderr.startswith("orrery: error: orrery-nvcc, orrery-mpicc, orrery-mpicxx, orrery-mpif90 not on PATH")


def test_a_phase_option_that_does_not_link_goes_to_nvcc_as_it_is(tmp_path):
    """-cuda (the .cu.cpp.ii output) stops before a link: nvcc writes its file, and no link is tried."""
    out = tmp_path / "query.cu.cpp.ii"
    p = orrery("nvcc", "-cuda", str(DEVICE_QUERY), "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert "cudaGetDeviceProperties" in out.read_text()


def test_mpicc_single_word_wrapper_links_a_c_program(tmp_path, run_program):
    src = tmp_path / "hello.c"
    src.write_text(
        '#include <mpi.h>\n#include <stdio.h>\nint main(int c, char** v) { MPI_Init(&c, &v); int n;\n'
        'MPI_Comm_size(MPI_COMM_WORLD, &n); printf("size %d\\n", n); MPI_Finalize(); return 0; }\n'
    )  # fmt: skip
    exe = tmp_path / "hello"
    p = subprocess.run([str(BIN / "orrery-mpicc"), str(src), "-o", str(exe)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    r = run_program(exe, options=("--gpus-per-node", "3"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines().count("size 3") == 3


def test_a_real_mpi_s_libraries_on_the_link_line_give_way_to_smpi(tmp_path):
    """nccl-tests' MPI=1 link names `-L$(MPI_HOME)/lib -lmpi`: a fake libmpi.so there, whose
    MPI_Comm_size answers 99, must not be linked; SMPI's MPI answers."""
    mpi_home = tmp_path / "mpi"
    (mpi_home / "lib").mkdir(parents=True)
    fake = tmp_path / "fake.c"
    fake.write_text("int MPI_Comm_size(void* c, int* n) { *n = 99; return 0; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", str(fake), "-o", str(mpi_home / "lib" / "libmpi.so")], check=True)
    assert build.link_args(["-L/x/lib", "-lmpi", "-lnccl", "-lmpich"])[:6] == [
        f"-L{_paths.lib_dir()}",
        *("-Wl,--push-state,--no-as-needed", "-lorrery_alloc", "-Wl,--pop-state"),  # first: test_launcher.py
        "-L/x/lib",
        "-lnccl",
    ]
    src = tmp_path / "size.c"
    src.write_text(
        '#include <mpi.h>\n#include <stdio.h>\nint main(int c, char** v) { MPI_Init(&c, &v); int n;\n'
        'MPI_Comm_size(MPI_COMM_WORLD, &n); printf("size %d\\n", n); MPI_Finalize(); return 0; }\n'
    )  # fmt: skip
    exe = tmp_path / "size"
    p = subprocess.run(
        [str(BIN / "orrery-mpicc"), str(src), "-o", str(exe), f"-L{mpi_home / 'lib'}", "-lmpi"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    needed = subprocess.run(["readelf", "-d", str(exe)], capture_output=True, text=True, check=True).stdout
    assert "libmpi.so" not in needed and "libsimgrid" in needed


def test_a_compile_and_link_line_compiles_host_sources_with_cuda_s_headers(tmp_path, run_program, h100):
    """As the real nvcc does (NVIDIA's jacobiCudaGraphs: `nvcc jacobi.cu main.cpp`), a .cpp file on
    a compile-and-link line is host code compiled with the CUDA toolkit's headers on its path and
    nvcc's macros: it includes cuda_runtime.h (smpicxx, which compiled it before, found neither)."""
    shutil.copy(DEVICE_QUERY, tmp_path / "query.cu")
    (tmp_path / "host.cpp").write_text(
        "#include <cuda_runtime.h>\n"
        "#ifndef __NVCC__\n#error not compiled by nvcc\n#endif\n"
        "int host_devices() { int n = 0; cudaGetDeviceCount(&n); return n; }\n"
    )
    exe = tmp_path / "query"
    cmd = [
        str(BIN / "orrery-nvcc"),
        "-arch=sm_90",
        str(tmp_path / "query.cu"),
        str(tmp_path / "host.cpp"),
        "-o",
        str(exe),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert _query(run_program, exe)["name"] == h100.gpu.model
