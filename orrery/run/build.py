"""Compiler wrappers: build a program's own sources for Orrery, unchanged.

``orrery nvcc``, ``orrery mpicc`` and ``orrery mpicxx`` stand in for a
Makefile's compiler variables (``make NVCC="orrery nvcc" MPICXX="orrery mpicxx"``):

- CUDA sources are compiled by the real nvcc as position-independent code
  against the shared CUDA runtime, with SMPI's ``mpi.h`` on the include path,
  and after it Orrery's ``mpi-ext.h`` (Open MPI's CUDA-aware checks, which SMPI
  lacks: include_args), as C and C++ sources are;
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
from collections.abc import Callable
from pathlib import Path

from .._paths import compiler_dir, include_dir, lib_dir
from ..errors import BuildError, OrreryError

#: Each rank's copy of the program keeps its own static variables of inline functions and templates
#: (nccl-tests' Allreduce<T>'s mutex and counters): g++ makes them STB_GNU_UNIQUE symbols, which the
#: dynamic loader binds to one definition across every copy SMPI loads, so ranks would share them
#: (a mutex one rank holds across an MPI call then deadlocks the next rank, on the one OS thread).
PRIVATE_STATICS = "-fno-gnu-unique"
NVCC_FLAGS = ["-cudart", "shared", "-Xcompiler", f"-fPIC,{PRIVATE_STATICS}"]
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
    """The real `name` on PATH: never Orrery's own under that name (`orrery toolchain path`'s
    folder, which a build puts first on PATH), which would run the wrapper again."""
    ours = compiler_dir().resolve()
    search = os.pathsep.join(d for d in os.environ.get("PATH", os.defpath).split(os.pathsep) if not _is(d, ours))
    path = shutil.which(name, path=search)
    if path is None and name == "nvcc" and Path("/usr/local/cuda/bin/nvcc").is_file():
        path = "/usr/local/cuda/bin/nvcc"
    if path is None:
        raise BuildError(f"{name} not found on PATH: {hint}")
    return path


def _is(folder: str, resolved: Path) -> bool:
    try:
        return Path(folder or ".").resolve() == resolved
    except OSError:
        return False


def ptxas() -> str | None:
    """The CUDA toolkit's PTX compiler beside its nvcc, or None without one: the driver's JIT in
    `orrery run` (a module loaded from PTX, interpose/cudart/module.cpp, ORRERY_PTXAS)."""
    try:
        found = Path(_tool("nvcc", "")).resolve().parent / "ptxas"
    except BuildError:
        return None
    return str(found) if found.is_file() and os.access(found, os.X_OK) else None


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


#: Host compilers orrery-nvcc drops (``-ccbin $(CXX)`` with CXX=orrery-mpicxx, as OSU's Makefiles
#: write): smpicxx force-includes a header that turns malloc into a macro, which CUDA's headers do
#: not survive, and the wrappers would only hand nvcc's host steps to the plain compiler again
#: (_called_by_nvcc, for the real nvcc), at a Python start-up each. nvcc keeps its own host
#: compiler; SMPI's mpi.h is on its include path already.
_SMPI_HOST_COMPILERS = {"orrery-mpicxx", "orrery-mpicc", "orrery", "smpicxx", "smpicc"}


def _smpi_host_compiler(item: list[str]) -> bool:
    """Whether an nvcc option names one of Orrery's or SMPI's wrappers as the host compiler: by
    name, or a compiler of `orrery toolchain path`'s folder (`-ccbin mpicxx` with it on PATH, as
    TeaLeaf's Makefile writes)."""
    if _name(item) not in ("-ccbin", "--compiler-bindir"):
        return False
    value = item[1] if len(item) == 2 else item[0].split("=", 1)[-1]
    if not value.split():
        return False
    compiler = value.split()[0]
    if Path(compiler).name in _SMPI_HOST_COMPILERS:
        return True
    found = shutil.which(compiler)
    return found is not None and Path(found).resolve().parent == compiler_dir().resolve()


def smpi_include_dir() -> str:
    smpicc = _tool("smpicc", "install SimGrid with SMPI (see the README's set-up command)")
    # smpicc lives in <prefix>/bin; mpi.h in <prefix>/include/smpi
    return str(Path(smpicc).resolve().parent.parent / "include" / "smpi")


def include_args() -> list[str]:
    """The include folder Orrery adds after SMPI's and before the program's own flags: it holds
    only ``mpi-ext.h`` (``MPIX_CUDA_AWARE_SUPPORT``, ``MPIX_Query_cuda_support``), which SMPI
    has not, so the program's own -I folders still give it every other header. Not for Fortran
    (orrery-mpif90): the header is C."""
    return [f"-I{include_dir()}"]


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
    options = nvcc_options(exe)
    items = [
        it for it in split_nvcc_args(args, options) if _name(it) not in _CUDART_CHOICE and not _smpi_host_compiler(it)
    ]
    extra = [*NVCC_FLAGS, f"-I{smpi_include_dir()}", *include_args()]
    if any(_name(it) in _NOT_LINKING for it in items):
        return _run([exe, *extra, *(a for it in items for a in it)])
    # A compile-and-link line: compile the sources with nvcc, link with smpicxx. Every source, as
    # the real nvcc does: a .cpp file is host code, compiled with the CUDA toolkit's headers on its
    # path and nvcc's macros (jacobiCudaGraphs' main.cpp includes cuda_runtime.h).
    source_suffixes = _SOURCE_SUFFIXES
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
        elif name in options and name not in ("-shared", "--shared"):  # nvcc's own: -lineinfo is no library
            compile_flags += it
            if name in _HOST_COMPILER_OPTIONS:  # nvcc hands them to the host compiler's link too
                value = it[1] if len(it) == 2 else a.split("=", 1)[1]
                link += value.split(",")
        elif a.startswith(("-l", "-L", "-Wl,")) or name in ("-shared", "--shared"):
            link.append("-shared" if name == "--shared" else a)  # a library gets no entry point
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
        inputs = [a for a in link if a.endswith((".o", ".a")) and not a.startswith("-")]
        if _relocatable(items) or any(_holds_relocatable_device_code(a) for a in inputs):
            # nvcc's link of relocatable device code links the device code first (nvcc -dlink),
            # whether the link line says -rdc=true or its objects were compiled with -dc
            # (Quicksilver's CUDA build); smpicxx, which links the host code here, does not: its
            # object goes in with the rest.
            device_link = str(Path(tmp) / "device-link.o")
            rc = _run([exe, *extra, *compile_flags, "-dlink", *objects, *inputs, "-o", device_link])
            if rc:
                return rc
            objects.append(device_link)
        return mpicc(objects + link, cxx=True)


def _holds_relocatable_device_code(path: str) -> bool:
    """Whether an object or archive holds relocatable device code (nvcc -dc, -rdc=true): its host
    code registers it through a __cudaRegisterLinkedBinary_ function, which only nvcc's device
    link defines."""
    try:
        return b"__cudaRegisterLinkedBinary_" in Path(path).read_bytes()
    except OSError:
        return False


def _relocatable(items: list[list[str]]) -> bool:
    """Whether a compile-and-link line asks for relocatable device code (-rdc=true, -rdc true,
    --relocatable-device-code=true)."""
    for it in items:
        if _name(it) in ("-rdc", "--relocatable-device-code"):
            value = it[1] if len(it) == 2 else it[0].split("=", 1)[1] if "=" in it[0] else ""
            if value.lower() == "true":
                return True
    return False


# A real cluster's link line names the real CUDA runtime; Orrery's stands in for it.
REAL_RUNTIME = {"-lcudart", "-lcudart_static"}
#: A real MPI's libraries (Open MPI, MPICH, Intel MPI, IBM Spectrum MPI; C, C++ and Fortran), as
#: a Makefile names them (nccl-tests: ``-L$(MPI_HOME)/lib -lmpi``): SMPI's compilers link SimGrid's
#: MPI, and a real libmpi.so beside it would answer the program's MPI calls outside the simulation.
REAL_MPI = {"-lmpi", "-lmpi_cxx", "-lmpicxx", "-lmpich", "-lmpichcxx", "-lmpi_ibm", "-lmpifort", "-lmpi_mpifh",
            "-lmpi_usempif08", "-lmpi_usempi_ignore_tkr", "-lmpichf90"}  # fmt: skip


#: The library every program links first (liborrery_alloc.so): in SMPI's copies of the program,
#: which SMPI loads with RTLD_DEEPBIND, malloc and free are then the process's allocator's, not
#: glibc's, for code SMPI's compilers did not build too (launch.links_alloc).
ALLOC = "orrery_alloc"


def link_args(args: list[str]) -> list[str]:
    """A program's own link arguments, linked against Orrery's runtime: its directory is
    searched first (before a ``-L$CUDA_HOME/lib64`` or ``-L$NCCL_HOME/lib`` the Makefile names,
    so that ``-lnccl`` and ``-lcuda`` find Orrery's stand-ins) and ``-lcudart`` or
    ``-lcudart_static`` become Orrery's shared runtime; a real MPI's libraries (REAL_MPI) are
    dropped, SMPI's compilers linking SimGrid's. The runtime is linked even into a program that
    makes no CUDA call: it also times the program's MPI calls and writes the run's report, and a
    linker dropping it as unneeded (--as-needed) would leave a pure-MPI program with neither.
    ALLOC, the allocator's entry points for SMPI's copies of the program, comes first, before
    any library the program names (interpose/mpi/smpi_alloc.cpp says why)."""
    return [
        f"-L{lib_dir()}",
        "-Wl,--push-state,--no-as-needed",
        f"-l{ALLOC}",
        "-Wl,--pop-state",
        *(a for a in args if a not in REAL_RUNTIME and a not in REAL_MPI),
        "-Wl,--push-state,--no-as-needed",
        "-lcudart",
        "-Wl,--pop-state",
    ]


def mpicc(args: list[str], cxx: bool = False) -> int:
    exe = _tool("smpicxx" if cxx else "smpicc", "install SimGrid with SMPI (see the README's set-up command)")
    return _smpi_compiler(exe, args)


def mpicxx(args: list[str]) -> int:
    return mpicc(args, cxx=True)


def mpif90(args: list[str]) -> int:
    """mpif90 for Orrery: SimGrid's smpif90 (gfortran with SMPI's Fortran bindings), linked as
    ``mpicc`` links. SMPI's Fortran bindings convert their arguments and call MPI_Send and the
    others through libsimgrid's global scope, where ``orrery run`` loads Orrery's runtime first
    (launch.STAND_INS): a Fortran program's MPI calls are timed and counted by name as a C
    program's (docs/building.md, Fortran)."""
    exe = _tool("smpif90", "install SimGrid with SMPI and gfortran (see the README's set-up command)")
    return _smpi_compiler(exe, args)


#: The compilers SMPI's wrappers call (Debian's smpicc, smpicxx and smpif90 name them).
_SMPI_BASE_COMPILERS = {"smpicc": "cc", "smpicxx": "c++", "smpif90": "gfortran"}


def _preprocessed(arg: str) -> bool:
    """Whether a source is preprocessed already (its first line a line marker, ``# 0 "kernel.cu"``),
    as ``nvcc -cuda`` writes it for a later ``$(CXX) -c`` (OSU's Makefiles): SMPI's compilers'
    forced header would come before the headers it holds, and redefine them."""
    if arg.startswith("-") or not arg.endswith(_LINK_INPUTS) or not os.path.isfile(arg):
        return False
    with open(arg, "rb") as f:
        return re.match(rb'# \d+ "', f.read(64)) is not None


def _called_by_nvcc(args: list[str]) -> bool:
    """Whether the real nvcc runs this wrapper as its host compiler (``nvcc -ccbin orrery-mpicxx``,
    OSU's ``$(NVCC) -cuda -ccbin $(CXX)`` with NVCC the real nvcc): every host step nvcc runs
    defines ``__CUDA_ARCH_LIST__``. SMPI's forced header must stay out of those steps (it turns
    malloc into a macro before CUDA's headers); SMPI's mpi.h stays on the include path."""
    return any(a.startswith("-D__CUDA_ARCH_LIST__") for a in args)


def _smpi_compiler(exe: str, args: list[str]) -> int:
    """One of SMPI's compilers on a wrapper's command line: a link gets Orrery's runtime
    (link_args) and, when it makes a program, the entry point that lets the program run on its own
    (standalone_args)."""
    args = shared_object_args(args)
    cxx = [PRIVATE_STATICS] if Path(exe).name == "smpicxx" else []
    # smpicc and smpicxx put SMPI's include folder before their arguments: Orrery's comes next
    # (include_args), before the program's own flags; smpif90's Fortran gets none
    include = [] if Path(exe).name == "smpif90" else include_args()
    if _called_by_nvcc(args):
        base = _tool(_SMPI_BASE_COMPILERS[Path(exe).name], "install gcc")
        return _run([base, "-fPIC", *cxx, f"-I{smpi_include_dir()}", *include, *args])
    if args and all(a.startswith("-") and a != "-" for a in args):
        # A query without input (libtool's and configure's -v, -print-search-dirs, -dumpmachine):
        # smpicc would also link an empty a.out in the current folder; compile-only, it answers alone.
        return _run([exe, "-c", *args])
    linking = not any(a in ("-c", "-E", "-S", "-M", "-MM") for a in args)
    if not linking:
        if "-c" in args and any(_preprocessed(a) for a in args):
            return _run([_tool(_SMPI_BASE_COMPILERS[Path(exe).name], "install gcc"), "-fPIC", *cxx, *args])
        return _run([exe, *cxx, *include, *args])
    with tempfile.TemporaryDirectory(prefix="orrery-link-") as tmp:  # (a link may compile sources too)
        return _run([exe, *cxx, *include, *link_args(args), *standalone_args(args, Path(tmp))])


#: The compiler wrappers by name: ``orrery NAME`` (cli.py) and the single-word ``orrery-NAME``.
WRAPPERS: dict[str, Callable[[list[str]], int]] = {"nvcc": nvcc, "mpicc": mpicc, "mpicxx": mpicxx, "mpif90": mpif90}


def wrapper_main(name: str, args: list[str] | None = None) -> int:
    """A wrapper's command line: the compiler's exit status, or 2 and one line on stderr for
    Orrery's own errors (a missing compiler, an installation without its libraries)."""
    try:
        return WRAPPERS[name](sys.argv[1:] if args is None else args)
    except OrreryError as e:
        print(f"orrery: error: {e}", file=sys.stderr)
        return 2


# ``orrery-nvcc``, ``orrery-mpicc``, ``orrery-mpicxx``, ``orrery-mpif90`` (pyproject.toml): the
# wrappers as single-word executables, for build rules that split ``"orrery nvcc"`` (``-ccbin
# $(CXX)``, configure's CC, CMake's compilers). Here rather than in cli.py, whose imports would
# cost each compiler call a second: configure calls the compiler a hundred times.
def nvcc_main() -> int:
    return wrapper_main("nvcc")


def mpicc_main() -> int:
    return wrapper_main("mpicc")


def mpicxx_main() -> int:
    return wrapper_main("mpicxx")


def mpif90_main() -> int:
    return wrapper_main("mpif90")


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


# -- Programs that run on their own (configure's test programs) ------------------------------------

#: The ELF entry point of a program the wrappers link (standalone_entry.c).
STANDALONE_ENTRY = "orrery_standalone_entry"
#: Options after which the compiler makes no program (it compiles, preprocesses, prints or makes a
#: library): no entry point is added.
_NO_PROGRAM = {"-c", "-E", "-S", "-M", "-MM", "-shared", "--shared", "-Wl,-shared", "-Wl,--shared", "-r",
               "-Wl,-r", "--version", "-dumpversion", "-dumpfullversion", "-dumpmachine", "-dumpspecs",
               "--help", "-###"}  # fmt: skip
#: The inputs of a link (a name on the command line that ends so is a file the link reads).
_LINK_INPUTS = (".c", ".cc", ".cpp", ".cxx", ".C", ".c++", ".i", ".ii", ".s", ".S", ".o", ".a", ".so", ".lo",
                ".f", ".F", ".for", ".f90", ".F90", ".f95", ".F95", ".f03", ".F03", ".f08", ".F08")  # fmt: skip
#: Compiler flags of the entry point: it runs before anything is relocated or loaded (no libc, no
#: stack protector, no calls the compiler would add for a loop: memcpy, strlen).
_ENTRY_FLAGS = ["-O2", "-fPIC", "-ffreestanding", "-fno-stack-protector", "-fno-tree-loop-distribute-patterns",
                "-fno-sanitize=all", "-fno-profile-arcs", "-fvisibility=hidden"]  # fmt: skip


def makes_program(args: list[str]) -> bool:
    """Whether a compiler command line links a program (not an object, a library, or a query
    such as libtool's ``-v`` and ``-print-search-dirs``, which have no input)."""
    if any(a in _NO_PROGRAM or a.startswith(("-print-", "--print-")) for a in args):
        return False
    if any(a == "-e" or a.startswith(("-Wl,-e,", "-Wl,--entry", "--entry")) for a in args):
        return False  # the program names its own entry point
    return any(not a.startswith("-") and a.endswith(_LINK_INPUTS) for a in args)


def standalone_args(args: list[str], folder: Path) -> list[str]:
    """What a link adds so that the program also runs when started on its own, as one simulated
    rank through Orrery (orrery/run/standalone.py): an entry point, compiled into ``folder`` for
    this Python (the one that runs Orrery). Nothing for a link that makes no program."""
    if not makes_program(args):
        return []
    cc = _tool("cc", "install a C compiler (gcc)")
    source = Path(__file__).with_name("standalone_entry.c")
    obj = folder / "orrery_standalone_entry.o"
    python = ",".join(str(b) for b in [*os.fsencode(sys.executable), 0])
    proc = subprocess.run(
        [cc, *_ENTRY_FLAGS, f"-DORRERY_PYTHON={python}", "-c", str(source), "-o", str(obj)],
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        raise BuildError(f"compiling Orrery's entry point {source} failed: {proc.stderr.strip()}")
    return [str(obj), f"-Wl,-e,{STANDALONE_ENTRY}"]
