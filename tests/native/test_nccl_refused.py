"""Orrery's libnccl.so.2 (interpose/nccl/) wins over the NCCL a program was linked against (issue
18, item 6): its calls are simulated (issue 19; tests/native/test_nccl.py times them), and a call
it does not simulate stops the run naming it.

The real NCCL (the nvidia-nccl-cu13 wheel, about 300 MB) is too big for the tests' set-up, so the
programs here are built against a test double made by the test: a header with NCCL's types and
the calls used, and a libnccl.so.2 (soname as the real one's) whose every function does what the
real bootstrap does first, open a TCP socket on the host, and leaves a marker file. A program that
reached the double would leave the marker, print its line and end with a makespan."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ORRERY, Run, orrery

from orrery import _paths

pytestmark = pytest.mark.native

SHIM = Path(__file__).resolve().parents[2] / "interpose"
_spec = importlib.util.spec_from_file_location("gen_exports", SHIM / "gen_exports.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

REFUSAL = (
    "orrery: error: the program called {}, which Orrery does not simulate (actor 0): "
    "Orrery's NCCL simulates the calls docs/supported-calls.md lists, not this one"
)

DOUBLE_H = r"""
/* Test double of NCCL's nccl.h: the types and calls of NCCL 2.x that nccl_calls.cpp uses. */
#ifndef NCCL_H_
#define NCCL_H_
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef struct ncclComm* ncclComm_t;
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct { char internal[NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;
typedef enum { ncclSuccess = 0 } ncclResult_t;
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
#ifdef __cplusplus
}
#endif
#endif
"""

DOUBLE_C = r"""
/* Test double of the real libnccl.so.2: each call opens a listening TCP socket, as NCCL's
 * bootstrap does, and appends its name to the file NCCL_DOUBLE_MARKER names. */
#include "nccl.h"
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static void bootstrap(const char* call) {
  const char* marker = getenv("NCCL_DOUBLE_MARKER");
  FILE* f = marker ? fopen(marker, "a") : NULL;
  if (f) {
    fprintf(f, "%s\n", call);
    fclose(f);
  }
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(s, (struct sockaddr*)&a, sizeof a);
  listen(s, 1);
}
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  bootstrap("ncclGetUniqueId");
  memset(id, 1, sizeof *id);
  return ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  bootstrap("ncclCommInitRank");
  *comm = 0;
  return ncclSuccess;
}
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  bootstrap("ncclCommInitAll");
  for (int i = 0; i < ndev; i++)
    comm[i] = 0;
  return ncclSuccess;
}
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  bootstrap("ncclCommRegister");
  return ncclSuccess;
}
"""

PROGRAM = r"""
// The starts of NCCL programs (usage: nccl_calls MODE), then a sum over the ranks by MPI:
//   uniqueid  rank 0 makes the unique id and broadcasts it through MPI, each rank joins
//   initall   one process initialises a communicator over two GPUs
//   dlopen    NCCL loaded at run time by its soname, as frameworks do
//   register  a communicator, then a call Orrery's NCCL does not simulate (ncclCommRegister)
//   none      NCCL linked, never called: says which library its functions are in
#include "nccl.h"
#include <mpi.h>
#include <dlfcn.h>
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* mode = argc > 1 ? argv[1] : "";
  ncclUniqueId id;
  if (!strcmp(mode, "uniqueid")) {
    if (rank == 0)
      ncclGetUniqueId(&id);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    ncclCommInitRank(&comm, size, id, rank);
  } else if (!strcmp(mode, "register")) {
    ncclComm_t comms[2];
    ncclCommInitAll(comms, 2, nullptr);
    void* handle;
    ncclCommRegister(comms[0], nullptr, 0, &handle);
  } else if (!strcmp(mode, "initall")) {
    ncclComm_t comms[2];
    int devices[2] = {0, 1};
    ncclCommInitAll(comms, 2, devices);
  } else if (!strcmp(mode, "dlopen")) {
    void* nccl = dlopen("libnccl.so.2", RTLD_NOW);
    auto get_id = nccl ? (ncclResult_t(*)(ncclUniqueId*))dlsym(nccl, "ncclGetUniqueId") : nullptr;
    if (!get_id) {
      fprintf(stderr, "nccl_calls: no ncclGetUniqueId in libnccl.so.2\n");
      return 2;
    }
    get_id(&id);
  } else if (!strcmp(mode, "none")) {
    Dl_info where;
    if (dladdr((void*)&ncclGetUniqueId, &where))
      printf("nccl_calls: rank %d has NCCL from %s\n", rank, where.dli_fname);
  } else {
    fprintf(stderr, "nccl_calls: unknown mode %s\n", mode);
    return 2;
  }
  int mine = rank + 1, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("nccl_calls: rank %d %s sum %d\n", rank, mode, sum);
  MPI_Finalize();
  return 0;
}
"""


def dynamic_section(path: Path) -> str:
    return subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def nccl(tmp_path_factory) -> dict[str, Path]:
    """The program built against the test double and linked against it two ways: by
    the double's file with a DT_RPATH to its folder (which wins over LD_LIBRARY_PATH), and by
    `-L <double's folder> -lnccl`, the user's link line, with a RUNPATH there."""
    if shutil.which("smpicxx") is None or shutil.which("gcc") is None:
        pytest.skip("SimGrid's smpicxx and gcc are needed to build the programs")
    d = tmp_path_factory.mktemp("nccl")
    lib = d / "double"
    lib.mkdir()
    (lib / "nccl.h").write_text(DOUBLE_H)
    (lib / "nccl.c").write_text(DOUBLE_C)
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-Wl,-soname,libnccl.so.2", str(lib / "nccl.c"), "-o", str(lib / "libnccl.so.2")],
        check=True,
    )
    (lib / "libnccl.so").symlink_to("libnccl.so.2")
    (d / "nccl_calls.cpp").write_text(PROGRAM)
    src, inc = str(d / "nccl_calls.cpp"), f"-I{lib}"
    rpath = [f"-Wl,-rpath,{lib}", "-Wl,--disable-new-dtags"]
    orrery("mpicxx", inc, src, str(lib / "libnccl.so.2"), *rpath, "-o", str(d / "by_file"), check=True)
    orrery("mpicxx", inc, src, f"-L{lib}", "-lnccl", f"-Wl,-rpath,{lib}", "-o", str(d / "by_l"), check=True)
    # the programs are what the test says: each asks for libnccl.so.2 and would find the double first
    by_file, by_l = dynamic_section(d / "by_file"), dynamic_section(d / "by_l")
    assert "Shared library: [libnccl.so.2]" in by_file and f"(RPATH)              Library rpath: [{lib}]" in by_file
    assert "Shared library: [libnccl.so.2]" in by_l and f"Library runpath: [{lib}]" in by_l
    return {"by_file": d / "by_file", "by_l": d / "by_l"}


@pytest.fixture
def marker(tmp_path, monkeypatch) -> Path:
    """The file the double appends each call's name to: absent if the run never entered it."""
    path = tmp_path / "double-was-called.txt"
    monkeypatch.setenv("NCCL_DOUBLE_MARKER", str(path))
    return path


def assert_refused(r, call: str, marker: Path) -> None:
    """Stopped at `call` by rank 0, before the double was entered: the message, its status and
    exit code (as an unsupported CUDA call's), nothing on stdout (neither the program's line
    after the call nor a summary)."""
    assert r.returncode == 3, r.stderr
    assert r.stderr.splitlines()[-1] == REFUSAL.format(call)
    assert r.stdout == ""
    res = r.results
    assert res["status"] == "orrery_error"
    assert res["failure"]["message"] == REFUSAL.format(call).removeprefix("orrery: error: ")
    assert res["failure"]["ranks"] == [0]
    assert not marker.exists(), marker.read_text()


def test_orrery_s_nccl_exports_every_function_of_the_real_one_unversioned_through_libcudart():
    lib = _paths.lib_dir()
    real = gen.real_nccl(SHIM)
    out = subprocess.run(
        ["nm", "-D", "--defined-only", "--with-symbol-versions", str(lib / "libnccl.so.2")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # unversioned (no @), as the real library's
    assert sorted(line.split()[-1] for line in out.splitlines()) == sorted(real)
    assert len(real) == 193 and "ncclGetUniqueId" in real and "pncclAllReduce" in real
    rows = {c.symbol for c in gen.nccl_calls(SHIM)}
    assert {"ncclGetUniqueId", "ncclCommInitRank", "ncclAllReduce", "ncclGroupEnd", "ncclSend"} <= rows <= set(real)
    section = dynamic_section(lib / "libnccl.so.2")
    assert "Library soname: [libnccl.so.2]" in section and "Shared library: [libcudart.so.13]" in section
    # the link name `-lnccl` finds (the wheel installs it as a copy): what it links is libnccl.so.2
    assert "Library soname: [libnccl.so.2]" in dynamic_section(lib / "libnccl.so")
    cudart = subprocess.run(
        ["nm", "-D", "--defined-only", "--with-symbol-versions", str(lib / "libcudart.so.13")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "orrery_private_refuse@@ORRERY_PRIVATE" in cudart.split()


def strace_usable() -> str | None:
    strace = shutil.which("strace")
    if strace and subprocess.run([strace, "-o", "/dev/null", "true"], capture_output=True).returncode == 0:
        return strace
    return None  # not installed, or no ptrace in this container


def assert_simulated(r, mode: str, marker: Path, ranks: int) -> None:
    """Completed through Orrery's NCCL: the double never entered, every rank's line printed."""
    assert r.returncode == 0, r.stderr
    lines = sorted(line for line in r.stdout.splitlines() if line.startswith("nccl_calls:"))
    total = ranks * (ranks + 1) // 2
    assert lines == [f"nccl_calls: rank {k} {mode} sum {total}" for k in range(ranks)]
    assert r.results["status"] == "completed"
    assert not marker.exists(), marker.read_text()


def test_the_unique_id_through_mpi_makes_a_communicator_and_opens_no_socket(run_program, nccl, marker, tmp_path):
    strace = strace_usable()
    if strace is None:
        r = run_program(nccl["by_file"], "uniqueid", options=("--gpus-per-node", "2"))
    else:  # every socket any process of the run creates
        out, log = tmp_path / "traced", tmp_path / "strace.txt"
        cmd = [strace, "-f", "-qq", "-e", "trace=socket", "-o", str(log), ORRERY, "run", "--nodes", "1"]
        cmd += ["--gpus-per-node", "2", "--out", str(out), "--", str(nccl["by_file"]), "uniqueid"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        r = Run(proc.returncode, proc.stdout, proc.stderr, out)
    assert_simulated(r, "uniqueid", marker, 2)
    if strace:
        sockets = [line for line in log.read_text().splitlines() if "socket(" in line]
        assert not [s for s in sockets if "AF_INET" in s], sockets


def test_a_communicator_over_all_gpus_linked_with_l_nccl_is_orrery_s(run_program, nccl, marker):
    r = run_program(nccl["by_l"], "initall", options=("--gpus-per-node", "2", "--ranks-per-node", "1"))
    assert_simulated(r, "initall", marker, 1)


def test_nccl_opened_by_its_soname_at_run_time_is_orrery_s(run_program, nccl, marker):
    r = run_program(nccl["by_file"], "dlopen", options=("--gpus-per-node", "1"))
    assert_simulated(r, "dlopen", marker, 1)


def test_a_call_orrery_s_nccl_does_not_simulate_stops_the_run_naming_it(run_program, nccl, marker):
    r = run_program(nccl["by_file"], "register", options=("--gpus-per-node", "2", "--ranks-per-node", "1"))
    assert_refused(r, "ncclCommRegister", marker)


def test_a_program_linking_nccl_without_calling_it_runs_normally(run_program, nccl, marker):
    r = run_program(nccl["by_file"], "none", options=("--gpus-per-node", "2"))
    assert r.returncode == 0, r.stderr
    assert sorted(line for line in r.stdout.splitlines() if line.startswith("nccl_calls:")) == [
        # each rank's copy of the program (SimGrid dlopens one per rank) has Orrery's, not the RPATH's
        f"nccl_calls: rank 0 has NCCL from {_paths.lib_dir() / 'libnccl.so.2'}",
        "nccl_calls: rank 0 none sum 3",
        f"nccl_calls: rank 1 has NCCL from {_paths.lib_dir() / 'libnccl.so.2'}",
        "nccl_calls: rank 1 none sum 3",
    ]
    assert "orrery: simulated makespan" in r.stdout
    assert r.results["status"] == "completed" and r.results["failure"] is None
    assert not marker.exists()


@pytest.fixture
def nccl_tables(tmp_path) -> Path:
    """A copy of NCCL's table, its header and its symbol list, to add rows to."""
    (tmp_path / "nccl").mkdir()
    for name in ("nccl_api.def", "nccl_api.h", "nccl2_symbols.txt"):
        shutil.copy(SHIM / "nccl" / name, tmp_path / "nccl" / name)
    return tmp_path


def test_a_refused_row_gets_its_signature_and_leaves_the_stubs(nccl_tables, tmp_path):
    # the shape issue 19's rows take: a generated REFUSE row is written with its signature, and
    # the stubs and the version script still cover every other function once
    row = "ORR_NCCL(ncclCommDeregister, int, (void* handle), (handle), generated, REFUSE)\n"
    with (nccl_tables / "nccl" / "nccl_api.def").open("a") as f:
        f.write(row)
    out = tmp_path / "generated"
    gen.write_nccl_build(nccl_tables, out)
    stubs = (out / "nccl_stubs.cpp").read_text()
    assert (
        'ORR_NCCL_EXPORT int ncclCommDeregister(void* handle) { orrery_private_refuse("ncclCommDeregister", kRefusal); }\n'
        in stubs
    )
    assert " ncclCommDeregister(void)" not in stubs
    # one refusal per function without a simulated row
    simulated = [c for c in gen.nccl_calls(SHIM) if c.policy != "REFUSE"]
    assert stubs.count("orrery_private_refuse(") == 193 - len(simulated)
    exported = [line.strip().rstrip(";") for line in (out / "libnccl.map").read_text().splitlines()[2:-2]]
    assert sorted(exported) == sorted(gen.real_nccl(SHIM))
    if shutil.which("g++"):  # the row's declaration (nccl_api.h) and its body agree
        cmd = ["g++", "-std=c++17", "-fsyntax-only", f"-I{nccl_tables}", f"-I{SHIM}", str(out / "nccl_stubs.cpp")]
        subprocess.run(cmd, check=True)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            "ORR_NCCL(ncclSimulateEverything, int, (void), (), generated, REFUSE)",
            "nccl_api.def: ncclSimulateEverything is not a function libnccl.so.2 exports (nccl2_symbols.txt)",
        ),
        (
            "ORR_NCCL(ncclCommDeregister, int, (void* handle), (handle), generated, SIMULATE)",
            "nccl_api.def: ncclCommDeregister: a generated body can only refuse (policy REFUSE)",
        ),
        (
            "ORR_NCCL(ncclCommDeregister, int, (void* handle), (handle), collective, SIMULATE)",
            "nccl_api.def: ncclCommDeregister: family 'collective', expected one of communicators, groups, collectives, generated",
        ),
    ],
)
def test_a_nccl_row_the_build_would_get_wrong_stops_the_generator_naming_it(nccl_tables, tmp_path, row, message):
    with (nccl_tables / "nccl" / "nccl_api.def").open("a") as f:
        f.write(row + "\n")
    out = tmp_path / "generated"
    p = subprocess.run(
        [sys.executable, str(SHIM / "gen_exports.py"), "--nccl", str(nccl_tables), str(out)],
        capture_output=True,
        text=True,
    )
    assert (p.returncode, p.stderr) == (1, f"gen_exports.py: {message}\n")
    assert not out.exists()  # nothing half-written
