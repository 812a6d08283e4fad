"""Compiler wrappers: build a program's own sources for Orrery, unchanged.

``orrery nvcc``, ``orrery mpicc`` and ``orrery mpicxx`` stand in for a
Makefile's compiler variables (``make NVCC="orrery nvcc" MPICXX="orrery mpicxx"``):

- CUDA sources are compiled by the real nvcc as position-independent code
  against the shared CUDA runtime, with SMPI's ``mpi.h`` on the include path;
- links go through SimGrid's ``smpicc``/``smpicxx`` (SMPI runs a program as a
  shared object, one copy per rank) against Orrery's stand-in libcudart.so.13.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .._paths import lib_dir
from ..errors import BuildError

NVCC_FLAGS = ["-cudart", "shared", "-Xcompiler", "-fPIC"]
#: Options that stop nvcc before a link (or only print): the command goes to nvcc as it is.
_NOT_LINKING = {
    "-c", "--compile", "-E", "--preprocess", "-M", "--generate-dependencies", "-MM",
    "--generate-nonsystem-dependencies", "--version", "-V", "--help", "-h", "-cuda", "--cuda",
    "-ptx", "--ptx", "-cubin", "--cubin", "-fatbin", "--fatbin", "-optix-ir", "--optix-ir",
    "-ltoir", "--ltoir", "-dc", "--device-c", "-dw", "--device-w", "-dlink", "--device-link",
    "-lib", "--lib", "-list-gpu-code", "--list-gpu-code", "-arch-ls", "--list-gpu-arch",
    "-code-ls", "-dryrun", "--dryrun",
}  # fmt: skip
#: Options whose value nvcc --help does not show (its line has no <...> or {...}).
_VALUE_NOT_IN_HELP = {"--dependency-output", "-MF"}
#: The runtime Orrery links is its own shared one: a program's choice of it is dropped.
_CUDART_CHOICE = {"-cudart", "--cudart"}
_CUDA_SUFFIXES = (".cu",)
_SOURCE_SUFFIXES = (".cu", ".c", ".cc", ".cpp", ".cxx", ".C")
# "--long VALUE   (-short)": a value is any text between the names (<file>, {a|b}, entry,...);
# an option without a short name repeats its long one
_HELP_LINE = re.compile(r"^(--[\w+-]+)((?: (?!\()\S+)*) {2,}(?:\((-[\w+-]+)\)|(--[\w+-]+))\s*$")


#: Position-independent code for an executable, and its shared-object form: SMPI loads a program as
#: a shared object (one copy per rank), whose code must be -fPIC (with -fPIE, the link fails with
#: "relocation R_X86_64_PC32 ... recompile with -fPIC"). CMake asks for -fPIE when
#: POSITION_INDEPENDENT_CODE is on.
_PIE_TO_PIC = {"-fPIE": "-fPIC", "-fpie": "-fpic"}
#: nvcc's options whose value goes to the host compiler (a comma-separated list).
_HOST_COMPILER_OPTIONS = ("-Xcompiler", "--compiler-options")
#: Link options asking for a position-independent executable: SMPI links a shared object instead.
_PIE_LINK = {"-pie", "--pie"}


def _tool(name: str, hint: str) -> str:
    path = shutil.which(name)
    if path is None and name == "nvcc" and Path("/usr/local/cuda/bin/nvcc").is_file():
        path = "/usr/local/cuda/bin/nvcc"
    if path is None:
        raise BuildError(f"{name} not found on PATH: {hint}")
    return path


@functools.cache
def nvcc_options(exe: str) -> dict[str, bool]:
    """Every option the installed nvcc knows, long and short names, and whether it takes a value
    (read from its own ``--help``, so that a new nvcc's options are known without a release of
    Orrery)."""
    text = subprocess.run([exe, "--help"], capture_output=True, text=True, check=False).stdout
    options: dict[str, bool] = {}
    for line in text.splitlines():
        m = _HELP_LINE.match(line)
        if m:
            long, value, short, same = m.groups()
            takes = bool(value) or long in _VALUE_NOT_IN_HELP
            options[long] = options[short or same] = takes
    if not options:
        raise BuildError(f"{exe} --help lists no options: is it NVIDIA's nvcc?")
    return options


def split_nvcc_args(args: list[str], options: dict[str, bool]) -> list[list[str]]:
    """An nvcc command line as its items: an option with its value (``-o x``, ``--std=c++17``,
    ``-Xcompiler -O3``) or an input file, as nvcc itself reads them."""
    items, i = [], 0
    while i < len(args):
        a = args[i]
        if options.get(a) and i + 1 < len(args):  # a value after a space
            items.append([a, args[i + 1]])
            i += 2
        else:  # a flag, a value after '=' or glued (-O3, -Ipath, -lm), or an input
            items.append([a])
            i += 1
    return items


def _name(item: list[str]) -> str:
    return item[0].split("=", 1)[0]


def smpi_include_dir() -> str:
    smpicc = _tool("smpicc", "install SimGrid with SMPI (see the README's set-up command)")
    # smpicc lives in <prefix>/bin; mpi.h in <prefix>/include/smpi
    return str(Path(smpicc).resolve().parent.parent / "include" / "smpi")


def _pic(value: str) -> str:
    """A host compiler option list (``-fPIE,-O2``) with -fPIE/-fpie as their shared-object forms."""
    return ",".join(_PIE_TO_PIC.get(v, v) for v in value.split(","))


def shared_object_args(args: list[str]) -> list[str]:
    """Compiler arguments for a shared object rather than a position-independent executable:
    -fPIE/-fpie become -fPIC/-fpic, also where nvcc passes them to the host compiler
    (``-Xcompiler -fPIE``, ``-Xcompiler=-fPIE``, ``--compiler-options=-O2,-fpie``), and a link's
    -pie is dropped (after SMPI's -shared, it would make an executable SMPI cannot load)."""
    out: list[str] = []
    for a in args:
        name, eq, value = a.partition("=")
        if out and out[-1] in _HOST_COMPILER_OPTIONS:
            out.append(_pic(a))
        elif a in _PIE_LINK:
            continue
        elif eq and name in _HOST_COMPILER_OPTIONS:
            out.append(f"{name}={_pic(value)}")
        else:
            out.append(_PIE_TO_PIC.get(a, a))
    return out


def _run(cmd: list[str]) -> int:
    return subprocess.run(cmd).returncode


def nvcc(args: list[str]) -> int:
    """nvcc for Orrery: compiles with the real nvcc against the shared runtime, as
    position-independent code with SMPI's mpi.h; a command that also links compiles its sources
    with nvcc and links the objects with smpicxx against Orrery's runtime."""
    exe = _tool("nvcc", "install the CUDA toolkit (only its compiler is needed, no GPU)")
    args = shared_object_args(args)
    items = [it for it in split_nvcc_args(args, nvcc_options(exe)) if _name(it) not in _CUDART_CHOICE]
    extra = [*NVCC_FLAGS, f"-I{smpi_include_dir()}"]
    if any(_name(it) in _NOT_LINKING for it in items):
        return _run([exe, *extra, *(a for it in items for a in it)])
    # A compile-and-link line: compile the sources with nvcc, link with smpicxx.
    all_cuda = any(it in (["-x", "cu"], ["--x", "cu"], ["-x=cu"], ["--x=cu"]) for it in items)
    source_suffixes = _SOURCE_SUFFIXES if all_cuda else _CUDA_SUFFIXES
    sources: list[str] = []
    compile_flags: list[str] = []
    link: list[str] = []
    for it in items:
        a, name = it[0], _name(it)
        if len(it) == 1 and not a.startswith("-"):
            (sources if a.endswith(source_suffixes) else link).append(a)
        elif name in ("-o", "--output-file"):
            link += ["-o", it[1] if len(it) == 2 else a.split("=", 1)[1]]
        elif name in ("-l", "--library", "-L", "--library-path"):
            value = it[1] if len(it) == 2 else a.split("=", 1)[1]
            flag = "-l" if name in ("-l", "--library") else "-L"
            link += [flag + v for v in value.split(",")]
        elif name in ("-Xlinker", "--linker-options"):
            value = it[1] if len(it) == 2 else a.split("=", 1)[1]
            link.append("-Wl," + value)
        elif a.startswith(("-l", "-L", "-Wl,")):
            link.append(a)
        else:
            compile_flags += it
    with tempfile.TemporaryDirectory(prefix="orrery-nvcc-") as tmp:
        objects = []
        for i, src in enumerate(sources):
            obj = str(Path(tmp) / f"{i}-{Path(src).stem}.o")
            rc = _run([exe, *extra, *compile_flags, "-c", src, "-o", obj])
            if rc:
                return rc
            objects.append(obj)
        return mpicc(objects + link, cxx=True)


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
    args = shared_object_args(args)
    linking = not any(a in ("-c", "-E", "-S", "-M", "-MM") for a in args)
    return subprocess.run([exe, *(link_args(args) if linking else args)], env=dict(os.environ)).returncode


def make(directory: str | os.PathLike, *targets: str) -> Path:
    """Build a program with its own Makefile and Orrery's wrappers (``make NVCC=orrery-nvcc
    MPICC=orrery-mpicc MPICXX=orrery-mpicxx``), as the README's demo does: what a notebook or
    script calls before simulating an example. Returns the folder; BuildError if make fails."""
    folder = Path(directory)
    bindir = Path(sys.executable).parent  # the single-word wrappers are installed beside Python
    wrappers = {"NVCC": "orrery-nvcc", "MPICC": "orrery-mpicc", "MPICXX": "orrery-mpicxx"}
    cmd = ["make", "-s", "-C", str(folder), *(f"{var}={bindir / exe}" for var, exe in wrappers.items()), *targets]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise BuildError(f"make in {folder} failed (exit {proc.returncode}): {(proc.stderr or proc.stdout).strip()}")
    return folder
