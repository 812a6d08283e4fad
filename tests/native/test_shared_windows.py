"""MPI-3 shared-memory windows (mpi.cpp, "shared-memory windows"): MPI_Win_allocate_shared lays the
node's segment out rank after rank, each part of the size its rank asked for, and
MPI_Win_shared_query answers each part. SMPI's own (3.32) sized the segment from the first rank's
size and gave every rank's window the segment's start, so that each query answered the first
rank's part. (programs/mpi_only.c, mode shared-window: local rank L allocates L + 1 doubles, each
set to 100 x its world rank + its index.)"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.native

PER_NODE = 3


def test_each_rank_s_part_is_its_own_size_after_the_one_before(run_program, mpi_only):
    r = run_program(mpi_only, "shared-window", options=("--gpus-per-node", str(PER_NODE)), nodes=2)
    assert r.returncode == 0, r.stderr
    v = r.values()
    for rank in range(2 * PER_NODE):
        node, local = divmod(rank, PER_NODE)
        for part in range(PER_NODE):
            owner = node * PER_NODE + part  # the world rank whose part it is
            doubles = part + 1
            assert v[f"rank {rank} part {part} bytes"] == 8 * doubles
            assert v[f"rank {rank} part {part} unit"] == 8
            assert v[f"rank {rank} part {part} sum"] == sum(100 * owner + j for j in range(doubles))
            # parts follow one another: local rank l's starts after parts 0 .. l - 1 (1 .. l doubles)
            assert v[f"rank {rank} part {part} at"] == 8 * (part * (part + 1) // 2 - local * (local + 1) // 2)
        assert v[f"rank {rank} any at"] == -8 * (local * (local + 1) // 2)  # MPI_PROC_NULL: part 0
    res = r.results
    assert res["status"] == "completed"
    for rank in res["ranks"]:
        calls = rank["mpi"]
        assert calls["MPI_Win_allocate_shared"]["count"] == 1 and calls["MPI_Win_free"]["count"] == 1
        assert calls["MPI_Win_shared_query"]["count"] == PER_NODE + 1
