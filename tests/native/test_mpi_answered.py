"""The MPI calls the shim answers itself, SMPI's answers being wrong on Orrery's platform
(mpi.cpp, family `answered`; programs/mpi_only.c, modes thread, thread-other and processor).

Thread support: every rank's MPI calls come from its main thread, as MPI_THREAD_FUNNELED has them,
so MPI_Init_thread provides what a program requires up to FUNNELED, MPI_Query_thread answers the
same and MPI_Is_thread_main is true on every rank. SMPI (3.32) provides MPI_THREAD_SINGLE whatever
is required and answers MPI_Is_thread_main true on the first rank alone: a program that requires
FUNNELED, as CUDA + MPI programs commonly do, would stop. A call from a thread of the program's
own stops the run naming it.

The processor name: the rank's node's, as gethostname's. SMPI names the simulated host the rank
stands on, its GPU's, a name of its own for every rank."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.native

SINGLE, FUNNELED, SERIALIZED, MULTIPLE = 0, 1, 2, 3  # MPI_THREAD_*, as SMPI's smpi.h numbers them
RANKS = 3


@pytest.mark.parametrize(
    "required, provided",
    [(SINGLE, SINGLE), (FUNNELED, FUNNELED), (SERIALIZED, FUNNELED), (MULTIPLE, FUNNELED)],
)
def test_init_thread_provides_up_to_funneled_and_every_rank_is_its_main_thread(
    run_program, mpi_only, required, provided
):
    r = run_program(mpi_only, "thread", str(required), options=("--gpus-per-node", str(RANKS)))
    assert r.returncode == 0, r.stderr
    v = r.values()
    for rank in range(RANKS):
        assert (v[f"rank {rank} provided"], v[f"rank {rank} queried"], v[f"rank {rank} main"]) == (
            provided,
            provided,
            1,
        )


def test_a_program_that_calls_mpi_init_queries_a_single_thread(run_program, mpi_only):
    r = run_program(mpi_only, "thread", options=("--gpus-per-node", "2"))  # no level: MPI_Init
    assert r.returncode == 0, r.stderr
    v = r.values()
    assert [(v[f"rank {i} queried"], v[f"rank {i} main"]) for i in range(2)] == [(SINGLE, 1), (SINGLE, 1)]


def test_an_mpi_call_from_a_thread_of_the_program_s_own_stops_the_run_naming_it(run_program, mpi_only):
    r = run_program(mpi_only, "thread-other", options=("--gpus-per-node", "2"))
    assert r.returncode == 3
    assert r.results["status"] == "orrery_error"
    lines = r.stderr.strip().splitlines()
    assert lines[-1].startswith(
        "orrery: error: MPI_Query_thread called outside of any simulated rank, from a thread of the program's own"
    )


def test_the_processor_name_is_the_node_s_so_that_a_local_rank_from_it_picks_each_gpu(run_program, mpi_only):
    # 2 nodes of 3 ranks: each rank's name is its node's (as gethostname's), length included, and
    # the local rank a program counts from the gathered names is its place on its node
    r = run_program(mpi_only, "processor", options=("--gpus-per-node", str(RANKS)), nodes=2)
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(" ", 2)[1:] for line in r.stdout.splitlines() if " processor " in line)
    assert lines == {str(i): f"processor n{i // RANKS} 2" for i in range(2 * RANKS)}
    v = r.values()
    assert [v[f"rank {i} local"] for i in range(2 * RANKS)] == [0, 1, 2, 0, 1, 2]
