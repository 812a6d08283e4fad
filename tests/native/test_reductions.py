"""Reductions whose data MPI combines in rank order (interpose/mpi/smpi_reductions.cpp): an operation
that does not commute, composing affine maps, through every reduction, blocking, in place and
non-blocking, under each of SMPI's collective selectors; and MPI_MAX of negative numbers by the
scans, blocking and not (tests/native/programs/reductions.c checks every element against the
composition every rank can form).

SimGrid 3.32 gave wrong data there, silently: MPI_Scan and MPI_Exscan never applied such an
operation, every non-blocking reduction combined in reverse rank order, MPI_Iexscan started from
zeros (the maximum of negative numbers came out 0), and MVAPICH2's and Intel MPI's algorithms
reversed some allreduces and reduce-scatters. liborrery_smpi.so keeps SMPI's messages and forms each
result again from the ranks' inputs; ORRERY_SMPI_REDUCTIONS=simgrid leaves SMPI's data, which
shows the bug, and =report counts the results formed.

A struct of a double and an int (a derived type) by the non-blocking reductions, with an
operation that commutes, made SMPI combine nothing and crash; liborrery_smpi.so has SMPI run those
on the same bytes as MPI_BYTEs (the same messages) and forms the result.

The sizes are 16 ranks' communicators of 2 to 16 (4 a node, so within and across nodes), the counts
from 1 to 5000 elements (40 KB a rank: the Intel MPI cases go wrong from 100, the MVAPICH2 ones from 1000)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import mpicc_program, orrery

pytestmark = pytest.mark.native

NODES = 4  # of h100-ib200: 16 ranks
SIZES = (2, 3, 5, 8, 13, 16)
ELEMENTS = (1, 3, 100, 1000, 5000)
ROUNDS = ("maps", "maps in place", "maps non-blocking", "max", "struct non-blocking")
REPORT = re.compile(r"^orrery: reductions: (\d+) results formed again in rank order, (\d+) of them non-blocking$", re.M)


@pytest.fixture(scope="session")
def reductions(tmp_path_factory) -> Path:
    return mpicc_program(tmp_path_factory, "reductions")


def run(program: Path, out: Path, selector: str, mode: str | None, *rounds: str):
    return orrery(
        "run",
        "--machine",
        "h100-ib200",
        "--nodes",
        str(NODES),
        "--set",
        f"mpi.collective_selector={selector}",
        "--out",
        str(out),
        "--",
        str(program),
        ",".join(map(str, SIZES)),
        ",".join(map(str, ELEMENTS)),
        *rounds,
        # the non-blocking reductions by SMPI's requests, whose data this file's mend forms (in the
        # kernel, smpi_nbc.cpp forms those that commute: tests/native/test_nbc.py)
        env={"ORRERY_SMPI_REDUCTIONS": mode, "ORRERY_SMPI_NBC": "simgrid"},
    )


def formed() -> tuple[int, int]:
    """The results formed again (all, non-blocking), counted from the program by hand. For each
    communicator of n ranks and count, each of the three rounds of maps forms: every rank's
    allreduce, scan, reduce_scatter_block and reduce_scatter (4 n), two reduces' roots (2) and the
    exscans of ranks 1 to n - 1 (n - 1): 5 n + 1, one round of them non-blocking; MPI_MAX commutes,
    so of its round only MPI_Iexscan's n - 1, non-blocking; the struct round, 5 n + 1 again, all
    non-blocking (a derived type, which SMPI's end of a non-blocking reduction misreads)."""
    per_count = sum(4 * (5 * n + 1) + (n - 1) for n in SIZES), sum(2 * (5 * n + 1) + (n - 1) for n in SIZES)
    return per_count[0] * len(ELEMENTS), per_count[1] * len(ELEMENTS)


@pytest.mark.parametrize("selector", ["default", "ompi", "mpich", "mvapich2", "impi"])
def test_every_reduction_combines_in_rank_order_under_every_selector(reductions, tmp_path, selector):
    proc = run(reductions, tmp_path / "out", selector, "report", "struct")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "FAIL" not in proc.stdout, proc.stdout
    checked = set(re.findall(r"^checked n=(\d+) elements=(\d+) round=(.*)$", proc.stdout, re.M))
    assert checked == {(str(n), str(e), r) for n in SIZES for e in ELEMENTS for r in ROUNDS}
    assert [tuple(map(int, m)) for m in REPORT.findall(proc.stderr)] == [formed()]


TIMES = ("makespan_s", "ranks", "terms", "links")  # results.json's times, all but the run's outcome

#: (call, round) that SMPI 3.32's data got wrong on these sizes, under every selector: the scans
#: of maps, blocking or in place; every non-blocking reduction of maps; MPI_Iexscan's maxima
WRONG_EVERYWHERE = {
    *((call, r) for call in ("scan", "exscan") for r in ("maps", "maps in place")),
    *(
        (call, "maps non-blocking")
        for call in ("allreduce", "reduce", "scan", "exscan", "reduce_scatter_block", "reduce_scatter")
    ),
    ("max iexscan", "max"),
}


@pytest.mark.parametrize(
    "selector, also_wrong",
    [
        ("ompi", set()),
        ("mvapich2", {("allreduce", "maps"), ("allreduce", "maps in place")}),
        (
            "impi",
            {
                (c, r)
                for c in ("allreduce", "reduce_scatter", "reduce_scatter_block")
                for r in ("maps", "maps in place")
            },
        ),
    ],
)
def test_smpi_s_own_data_are_wrong_and_its_times_are_the_mended_run_s(reductions, tmp_path, selector, also_wrong):
    """The same run with SMPI's data: the program finds them wrong (and exits 1) in exactly the
    calls named above, and every time of results.json and report.tsv is the mended run's, bit for
    bit: the mend changes data, never a message."""
    mended = run(reductions, tmp_path / "mended", selector, None)
    theirs = run(reductions, tmp_path / "simgrid", selector, "simgrid")
    assert mended.returncode == 0 and "FAIL" not in mended.stdout, mended.stdout[-3000:] + mended.stderr[-3000:]
    assert theirs.returncode != 0 and "a rank returned 1 from main" in theirs.stderr
    wrong = set(re.findall(r"^FAIL (.+?) n=\d+ elements=\d+ rank=\d+ round=(.*)$", theirs.stdout, re.M))
    assert wrong == WRONG_EVERYWHERE | also_wrong
    a = json.loads((tmp_path / "mended" / "results.json").read_text())
    b = json.loads((tmp_path / "simgrid" / "results.json").read_text())
    assert {k: a[k] for k in TIMES} == {k: b[k] for k in TIMES}
    assert (tmp_path / "mended" / "report.tsv").read_bytes() == (tmp_path / "simgrid" / "report.tsv").read_bytes()


def test_smpi_s_own_non_blocking_reduction_of_a_derived_type_fails(reductions, tmp_path):
    """SMPI's end of a non-blocking reduction of a struct, an operation that commutes: the other
    ranks' data are not combined, then the run crashes (the mend's run is the test above's)."""
    theirs = run(reductions, tmp_path / "simgrid", "ompi", "simgrid", "struct")
    assert theirs.returncode != 0
    assert re.search(r"^FAIL allreduce n=2 elements=1 rank=\d+ round=struct non-blocking$", theirs.stdout, re.M)


@pytest.fixture(scope="session")
def reduction_freed(tmp_path_factory) -> Path:
    return mpicc_program(tmp_path_factory, "reduction_freed")


def test_a_freed_request_s_result_is_never_formed_nor_taken_for_a_later_one(reduction_freed, tmp_path):
    """MPI_Request_free on a pending reduction (reduction_freed.c): the call is left at once, so that
    the next non-blocking collective, whose request SMPI may put at the same address, is SMPI's own
    (its sum right), and of the three reductions only the blocking one's 4 results are formed."""
    proc = orrery(
        "run",
        "--gpus-per-node",
        "4",
        "--out",
        str(tmp_path / "out"),
        "--",
        str(reduction_freed),
        env={"ORRERY_SMPI_REDUCTIONS": "report"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "sum 6 must be 6" in proc.stdout
    assert [tuple(map(int, m)) for m in REPORT.findall(proc.stderr)] == [(4, 0)]
