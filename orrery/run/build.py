"""Compiler wrappers: build a program's own sources for Orrery, unchanged.

``orrery nvcc``, ``orrery mpicc`` and ``orrery mpicxx`` stand in for a
Makefile's compiler variables (``make NVCC="orrery nvcc" MPICXX="orrery mpicxx"``):

- CUDA sources are compiled by the real nvcc as position-independent code
  against the shared CUDA runtime, with SMPI's ``mpi.h`` on the include path;
- links go through SimGrid's ``smpicc``/``smpicxx`` (SMPI runs a program as a
  shared object, one copy per rank) against Orrery's stand-in libcudart.so.13.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .._paths import lib_dir
from ..errors import BuildError

NVCC_FLAGS = ["-cudart", "shared", "-Xcompiler", "-fPIC"]
_COMPILE_ONLY = {
    "-c",
    "--compile",
    "-E",
    "--preprocess",
    "-M",
    "-MM",
    "--version",
    "-V",
    "--help",
    "-h",
    "-ptx",
    "--ptx",
    "-cubin",
    "--cubin",
    "-fatbin",
    "--fatbin",
    "-dc",
    "--device-c",
}
_CUDA_SUFFIXES = (".cu",)


def _tool(name: str, hint: str) -> str:
    path = shutil.which(name)
    if path is None and name == "nvcc" and Path("/usr/local/cuda/bin/nvcc").is_file():
        path = "/usr/local/cuda/bin/nvcc"
    if path is None:
        raise BuildError(f"{name} not found on PATH: {hint}")
    return path


def smpi_include_dir() -> str:
    smpicc = _tool("smpicc", "install SimGrid with SMPI (see the README's set-up command)")
    # smpicc lives in <prefix>/bin; mpi.h in <prefix>/include/smpi
    return str(Path(smpicc).resolve().parent.parent / "include" / "smpi")


def _run(cmd: list[str]) -> int:
    return subprocess.run(cmd).returncode


def nvcc(args: list[str]) -> int:
    exe = _tool("nvcc", "install the CUDA toolkit (only its compiler is needed, no GPU)")
    extra = [*NVCC_FLAGS, f"-I{smpi_include_dir()}"]
    if any(a in _COMPILE_ONLY for a in args):
        return _run([exe, *extra, *args])
    # A compile-and-link line: compile the .cu sources with nvcc, link with smpicxx.
    sources = [a for a in args if a.endswith(_CUDA_SUFFIXES)]
    compile_flags, link_args, skip = [], [], False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a in sources:
            continue
        if a == "-o":
            link_args += [a, args[i + 1]]
            skip = True
        elif a.startswith(("-l", "-L", "-Wl,")) or not a.startswith("-"):
            link_args.append(a)
        else:
            compile_flags.append(a)
    with tempfile.TemporaryDirectory(prefix="orrery-nvcc-") as tmp:
        objects = []
        for i, src in enumerate(sources):
            obj = str(Path(tmp) / f"{i}-{Path(src).stem}.o")
            rc = _run([exe, *extra, *compile_flags, "-c", src, "-o", obj])
            if rc:
                return rc
            objects.append(obj)
        return mpicc(objects + link_args, cxx=True)


# A real cluster's link line names the real CUDA runtime; Orrery's stands in for it.
REAL_RUNTIME = {"-lcudart", "-lcudart_static"}


def link_args(args: list[str]) -> list[str]:
    """A program's own link arguments, linked against Orrery's runtime: its directory is
    searched first (before a ``-L$CUDA_HOME/lib64`` the Makefile names) and ``-lcudart``
    or ``-lcudart_static`` become Orrery's shared runtime. The runtime is linked even into a
    program that makes no CUDA call: it also times the program's MPI calls and writes the run's
    report, and a linker dropping it as unneeded (--as-needed) would leave a pure-MPI program
    with neither."""
    return [
        f"-L{lib_dir()}",
        *(a for a in args if a not in REAL_RUNTIME),
        "-Wl,--push-state,--no-as-needed",
        "-lcudart",
        "-Wl,--pop-state",
    ]


def mpicc(args: list[str], cxx: bool = False) -> int:
    exe = _tool("smpicxx" if cxx else "smpicc", "install SimGrid with SMPI (see the README's set-up command)")
    linking = not any(a in ("-c", "-E", "-S", "-M", "-MM") for a in args)
    return subprocess.run([exe, *(link_args(args) if linking else args)], env=dict(os.environ)).returncode
