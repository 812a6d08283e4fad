"""Where Orrery's installed pieces are: the shim built by the package's build, the headers the
wrappers add to a program's include path, the CMake toolchain file, the folder of compilers
named as the real ones."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from .errors import OrreryError


def lib_dir() -> Path:
    """The folder holding the stand-ins libcudart.so.13 and libnccl.so.2 and liborrery_smpi.so
    (installed with the package)."""
    d = Path(str(resources.files("orrery") / "lib"))
    for name in ("libcudart.so.13", "libnccl.so.2", "liborrery_smpi.so"):
        if not (d / name).is_file():
            raise OrreryError(
                f"Orrery's {name} is missing from {d}: install the package "
                "(pip install .) rather than running it from the source tree"
            )
    return d


def include_dir() -> Path:
    """The folder of the headers Orrery adds to SMPI's for the programs the wrappers build:
    ``mpi-ext.h``, Open MPI's CUDA-aware MPI checks (installed with the package, from
    interpose/mpi/)."""
    d = Path(str(resources.files("orrery") / "include"))
    if not (d / "mpi-ext.h").is_file():
        raise OrreryError(
            f"Orrery's mpi-ext.h is missing from {d}: install the package "
            "(pip install .) rather than running it from the source tree"
        )
    return d


def cmake_toolchain() -> Path:
    """The CMake toolchain file that builds a project for Orrery (installed with the package)."""
    return Path(str(resources.files("orrery") / "cmake" / "orrery.cmake"))


def compiler_dir() -> Path:
    """The folder of Orrery's wrappers under the real compilers' names (nvcc, mpicc, mpicxx,
    mpic++, mpiCC, mpif90, mpifort: small scripts that run orrery-nvcc, ...), for a build whose
    recipes run the compilers by name: put first on PATH (installed with the package)."""
    return Path(str(resources.files("orrery") / "compilers"))
