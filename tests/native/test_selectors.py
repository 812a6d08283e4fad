"""Every collective of MPI under each of SMPI's collective selectors (`mpi.collective_selector`:
SMPI's own choices, Open MPI's, MPICH's, MVAPICH2's, Intel MPI's), on communicators of several
sizes and messages from 4 bytes to 300 KB: each run completes and every result is what it must be
(tests/native/programs/every_collective.c checks each sum, maximum and block against values every
rank knows). The sizes are those where SMPI 3.32's code aborted under its own selectors before
liborrery_smpi.so mended it (interpose/mpi/smpi_colls.cpp): Open MPI's and MPICH's pairwise
alltoall on a number of ranks that is not a power of two (3, 5, 13, 65), Intel MPI's Rabenseifner
allreduce there too (12, 13 ranks), and Intel MPI's topology-aware ring broadcast on nodes of one
rank, which every node is to SMPI in an Orrery run (each rank stands on its GPU's own host: any
small broadcast from 5 ranks). Each collective runs from separate buffers, then in place, then
(those that gather or scatter, for an even count) with e MPI_INTs on one side and e / 2 pairs of
ints on the other, which most of SMPI's allgather algorithms and its Bruck alltoall got wrong (the
blocks, or the heap)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import mpicc_program, orrery

pytestmark = pytest.mark.native

MAX_BYTES = 1_000_000  # each size's n blocks of a count at most this
ELEMENTS = (1, 2, 3, 75, 750, 10000, 75000)  # ints a block (the even ones also with two types)
NODES = 17  # of h100-ib200: 68 ranks, 4 a node
SIZES = (2, 3, 5, 12, 13, 65, 68)  # the communicators: the first n ranks


@pytest.fixture(scope="session")
def every_collective(tmp_path_factory) -> Path:
    return mpicc_program(tmp_path_factory, "every_collective")


@pytest.mark.parametrize("selector", ["default", "ompi", "mpich", "mvapich2", "impi"])
def test_every_collective_under_every_selector_completes_with_what_it_must(every_collective, tmp_path, selector):
    proc = orrery(
        "run",
        "--machine",
        "h100-ib200",
        "--nodes",
        str(NODES),
        "--set",
        f"mpi.collective_selector={selector}",
        "--out",
        str(tmp_path / "out"),
        "--",
        str(every_collective),
        str(MAX_BYTES),
        ",".join(map(str, SIZES)),
        ",".join(map(str, ELEMENTS)),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "FAIL" not in proc.stdout, proc.stdout
    checked = set(re.findall(r"^checked n=(\d+) ints=(\d+) calls=(\d+)(.*)$", proc.stdout, re.M))
    expected = {
        (str(n), str(e), *calls)
        for n in SIZES
        for e in ELEMENTS
        if 4 * e * n <= MAX_BYTES
        for calls in (("14", ""), ("14", " in place"), *([("7", " two types")] if e % 2 == 0 else []))
    }
    assert checked == expected
