"""orrery-mpif90 (and `orrery mpif90`): Fortran MPI programs through SimGrid's smpif90, their
MPI calls timed and counted by name as a C program's. SMPI's Fortran bindings (mpi_send_ ...)
convert their handles and call MPI_Send through libsimgrid's global scope, where `orrery run`
preloads Orrery's runtime before libsimgrid: the calls take the C wrappers' path, protocol and
request tracking included (docs/building.md#fortran)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HERE, ORRERY, orrery
from derivations import REL, wire

from orrery.machines import platform
from orrery.run import build

pytestmark = [
    pytest.mark.native,
    pytest.mark.skipif(
        shutil.which("smpif90") is None or shutil.which("gfortran") is None,
        reason="SimGrid's smpif90 or gfortran is not installed (scripts/setup.sh installs gfortran)",
    ),
]

BIN = Path(sys.executable).parent
FORTRAN = HERE / "native" / "programs" / "fortran"
# the MPI calls tracked by name that pair.f90 and its C twin pair.c make (MPI_Comm_rank has no row;
# the MPI_Sendrecv that SMPI's MPI_Sendrecv_replace makes is part of that call)
PAIR_CALLS = {"MPI_Irecv", "MPI_Isend", "MPI_Waitall", "MPI_Sendrecv_replace", "MPI_Allreduce"}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """ring.f90, pair.f90, abort.f90, answered.f90 and units.f90 built by orrery-mpif90, pair.c by
    orrery-mpicc."""
    d = tmp_path_factory.mktemp("fortran")
    programs = {
        "ring": "ring.f90",
        "pair_f": "pair.f90",
        "abort": "abort.f90",
        "answered": "answered.f90",
        "units": "units.f90",
        "pair_c": "pair.c",
    }
    for exe, src in programs.items():
        shutil.copy(FORTRAN / src, d)  # smpif90 writes its rewritten source beside the original
        wrapper = "orrery-mpicc" if src.endswith(".c") else "orrery-mpif90"
        subprocess.run([str(BIN / wrapper), "-o", exe, src], cwd=d, check=True)
    return {exe: d / exe for exe in programs}


def test_a_fortran_program_runs_on_the_simulated_ranks(built, run_program):
    r = run_program(built["ring"], options=("--gpus-per-node", "2"))
    # the program's lines, not those of the run's summary table
    assert sorted(line for line in r.stdout.splitlines() if " received " in line) == [
        "rank 0 of 2 total 3 received 1.50",
        "rank 1 of 2 total 3 received 1.50",
    ]


def test_a_fortran_run_completes_with_its_ranks_and_a_makespan(built, run_program):
    """MPI_Init and MPI_Finalize reach Orrery's runtime from Fortran: both ranks are known, finish,
    and the run's makespan is the later one's end. (Before: no rank was known, the run had no
    report and ended with exit status 3.)"""
    r = run_program(built["ring"], options=("--gpus-per-node", "2"))
    assert r.returncode == 0, r.stderr
    res = r.results
    assert res["status"] == "completed"
    assert [(x["rank"], x["finished"]) for x in res["ranks"]] == [(0, True), (1, True)]
    assert res["makespan_s"] == max(x["end_s"] for x in res["ranks"]) > 0
    assert "orrery: simulated makespan" in r.stdout


def test_fortran_mpi_calls_are_timed_like_c_ones(built, run_program, h100):
    """ring.f90 by hand: rank 0 sends 800 bytes (100 doubles) to rank 1 of its node, eagerly, so
    its MPI_Send takes its host send overhead within a node; rank 1's MPI_Recv, posted at 0, ends
    after rank 0's overhead, the message through shared memory (its latency on each side, the
    bytes and SMPI's envelope at the memory-copy rate) and its own receive overhead. Both then
    count one MPI_Allreduce of one integer; MPI_Comm_rank and MPI_Comm_size have no row."""
    res = run_program(built["ring"], options=("--gpus-per-node", "2")).results
    mpi = h100.mpi
    send, recv = mpi.overhead("send", "host", True), mpi.overhead("recv", "host", True)
    message = wire(2 * platform.SHM_LATENCY, 800, h100.node.host_memcpy_bandwidth, mpi.eager_threshold_host)
    rank0, rank1 = (x["mpi"] for x in res["ranks"])
    assert set(rank0) == {"MPI_Send", "MPI_Allreduce"} and set(rank1) == {"MPI_Recv", "MPI_Allreduce"}
    assert rank0["MPI_Send"] == {"count": 1, "bytes": 800, "time_s": pytest.approx(send, rel=REL)}
    assert rank1["MPI_Recv"] == {"count": 1, "bytes": 800, "time_s": pytest.approx(send + message + recv, rel=REL)}
    assert rank0["MPI_Allreduce"]["count"] == rank1["MPI_Allreduce"]["count"] == 1
    assert rank0["MPI_Allreduce"]["bytes"] == rank1["MPI_Allreduce"]["bytes"] == 4


def test_a_fortran_program_and_its_c_twin_have_the_same_mpi_entries(built, run_program):
    """pair.f90 and pair.c make the same calls (a non-blocking exchange completed by MPI_Waitall,
    an MPI_Sendrecv_replace, an MPI_Allreduce into another buffer and one with MPI_IN_PLACE): the same results, the same
    names, counts and bytes per rank, the same times, and the same communication time (a request
    tracked from its post to the MPI_Waitall that completes it)."""
    fortran, c = (run_program(built[p], options=("--gpus-per-node", "2")) for p in ("pair_f", "pair_c"))
    assert fortran.returncode == c.returncode == 0, fortran.stderr + c.stderr
    lines = [
        sorted(" ".join(line.split()) for line in r.stdout.splitlines() if " received " in line) for r in (fortran, c)
    ]
    assert (
        lines[0]
        == lines[1]
        == ["rank 0 received 2.0 total 6.0 in place 6.0", "rank 1 received 1.0 total 6.0 in place 6.0"]
    )
    for f_rank, c_rank in zip(fortran.results["ranks"], c.results["ranks"], strict=True):
        assert set(f_rank["mpi"]) == set(c_rank["mpi"]) == PAIR_CALLS
        # 1000 doubles each way; 10 doubles sent and 10 received in place; two reductions of 250 doubles
        bytes_of = {
            name: f_rank["mpi"][name]["bytes"] for name in ("MPI_Isend", "MPI_Sendrecv_replace", "MPI_Allreduce")
        }
        assert bytes_of == {"MPI_Isend": 8000, "MPI_Sendrecv_replace": 160, "MPI_Allreduce": 4000}
        for name in PAIR_CALLS:
            f, cc = f_rank["mpi"][name], c_rank["mpi"][name]
            assert (f["count"], f["bytes"]) == (cc["count"], cc["bytes"]), name
            assert f["time_s"] == pytest.approx(cc["time_s"], rel=REL), name
        assert f_rank["comm_s"] == pytest.approx(c_rank["comm_s"], rel=REL) and f_rank["comm_s"] > 0
        assert f_rank["end_s"] == pytest.approx(c_rank["end_s"], rel=REL)


def test_the_calls_orrery_answers_answer_fortran_too(built, run_program):
    """answered.f90 on 2 nodes of 2 ranks: MPI_THREAD_FUNNELED (1) provided and queried, every rank
    its main thread, and the processor name its node's (tests/native/test_mpi_answered.py for C)."""
    r = run_program(built["answered"], options=("--gpus-per-node", "2"), nodes=2)
    assert r.returncode == 0, r.stderr
    assert sorted(line for line in r.stdout.splitlines() if " provided " in line) == [
        f"rank {i} provided 1 queried 1 main T name n{i // 2}" for i in range(4)
    ]


@pytest.mark.parametrize("malloc", ["mimalloc", "system"])
def test_each_rank_has_its_own_fortran_units(built, tmp_path, malloc):
    """units.f90 on 4 ranks, in a folder of its own: every rank reads the whole deck on unit 11
    (sum 1 + ... + 100 = 5050) and writes its own file on unit 12, as separate processes would.
    With one libgfortran for all the ranks, they shared the unit's file position. Each rank's copy
    of libgfortran frees its units at the process's exit with the allocator it made them with:
    mimalloc (orrery run's) or glibc's (ORRERY_MALLOC=system)."""
    env = {"ORRERY_MALLOC": "system" if malloc == "system" else None}
    r = orrery("run", "--gpus-per-node", "4", "--out", "out", "--", str(built["units"]), cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert sorted(line for line in r.stdout.splitlines() if " read " in line) == [
        f"rank {i} read 5050" for i in range(4)
    ]
    for i in range(4):
        assert (tmp_path / f"rank{i}.txt").read_text() == f"rank {i} sum 5050\n"
    assert json.loads((tmp_path / "out" / "results.json").read_text())["status"] == "completed"


def test_mpi_abort_from_fortran_ends_the_job_with_its_error_code(built, run_program):
    """abort.f90: MPI_Init_thread makes both ranks known, and rank 1's MPI_Abort ends the job with
    code 7 as a C rank's does (SMPI's own MPI_Abort ignores the code and leaves the other rank
    waiting at its barrier)."""
    r = run_program(built["abort"], options=("--gpus-per-node", "2"))
    assert r.returncode == 7
    assert r.results["status"] == "aborted" and [x["rank"] for x in r.results["ranks"]] == [0, 1]
    assert "rank 1 called MPI_Abort with error code 7" in r.stderr


def test_the_two_word_form_links_as_the_single_word_one(tmp_path):
    """`orrery mpif90 -show` prints the command smpif90 would run: Orrery's runtime and the entry
    point that lets the program run on its own."""
    shutil.copy(FORTRAN / "ring.f90", tmp_path)
    proc = subprocess.run(
        [ORRERY, "mpif90", "-show", "-o", "ring", "ring.f90"], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    words = proc.stdout.split()
    assert "-lcudart" in words and f"-Wl,-e,{build.STANDALONE_ENTRY}" in words
    assert any(w.startswith("-L") and w.endswith("orrery/lib") for w in words)
