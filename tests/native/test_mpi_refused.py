"""The MPI calls SimGrid 3.32's SMPI does not implement stop the run naming the call and the rank
(interpose/mpi/smpi_unimplemented.cpp), where SMPI's own ended the process and `orrery run`
reported a crash ("rank 0 was killed by signal 6"); MPI_Pcontrol, which SMPI ended the process on
too, does nothing and returns MPI_SUCCESS; MPI_Win_sync, which SMPI answered with a warning that it
is not implemented, is the memory fence it is where the ranks share one process's memory, without
the warning (docs/supported-calls.md, "Refused by name")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import mpicc_program, orrery

pytestmark = pytest.mark.native


@pytest.fixture(scope="session")
def mpi_refused(tmp_path_factory) -> Path:
    return mpicc_program(tmp_path_factory, "mpi_refused")


@pytest.mark.parametrize(
    "call, name",
    [
        ("neighbor_alltoall", "MPI_Neighbor_alltoall"),
        ("mprobe", "MPI_Mprobe"),
        ("dist_graph_create_adjacent", "MPI_Dist_graph_create_adjacent"),
        ("comm_idup", "MPI_Comm_idup"),
        ("get_elements", "MPI_Get_elements"),
        ("intercomm_create", "MPI_Intercomm_create"),
    ],
)
def test_a_call_smpi_does_not_implement_stops_the_run_naming_it_and_the_rank(mpi_refused, tmp_path, call, name):
    out = tmp_path / "out"
    proc = orrery("run", "--gpus-per-node", "4", "--out", str(out), "--", str(mpi_refused), call)
    message = (
        f"the program called {name}, which Orrery does not simulate (actor 3): "
        "SimGrid 3.32's SMPI does not implement it (docs/supported-calls.md)"
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == f"orrery: error: {message}"
    assert "returned from" not in proc.stdout
    results = json.loads((out / "results.json").read_text())
    assert results["status"] == "orrery_error"
    assert results["failure"]["message"] == message and results["failure"]["ranks"] == [3]


@pytest.mark.parametrize("call, name", [("file_open", "MPI_File_open"), ("file_delete", "MPI_File_delete")])
def test_mpi_io_stops_the_run_naming_the_call_for_want_of_storage(mpi_refused, tmp_path, call, name):
    """SMPI implements MPI-IO on a host's disk, which Orrery's platform has not: its MPI_File_open
    ended the process ("Trying to open file on a diskless host"), reported as a crash."""
    out = tmp_path / "out"
    proc = orrery("run", "--gpus-per-node", "4", "--out", str(out), "--", str(mpi_refused), call, cwd=tmp_path)
    message = (
        f"the program called {name}, which Orrery does not simulate (actor 3): MPI-IO reads and writes storage, "
        "which Orrery's machines do not describe (docs/supported-calls.md)"
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == f"orrery: error: {message}"
    assert "Backtrace" not in proc.stderr and not (tmp_path / "refused.dat").exists()
    results = json.loads((out / "results.json").read_text())
    assert (results["status"], results["failure"]["message"], results["failure"]["ranks"]) == (
        "orrery_error",
        message,
        [3],
    )


def test_pcontrol_does_nothing_and_returns_success(mpi_refused, tmp_path):
    proc = orrery("run", "--gpus-per-node", "4", "--out", str(tmp_path / "out"), "--", str(mpi_refused), "pcontrol")
    assert proc.returncode == 0, proc.stderr
    assert sorted(line for line in proc.stdout.splitlines() if " pcontrol " in line) == [
        f"rank {r} pcontrol 0 0" for r in range(4)
    ]


def test_win_sync_orders_a_shared_window_s_stores_without_smpi_s_warning(mpi_refused, tmp_path):
    proc = orrery("run", "--gpus-per-node", "4", "--out", str(tmp_path / "out"), "--", str(mpi_refused), "win_sync")
    assert proc.returncode == 0, proc.stderr
    assert sorted(line for line in proc.stdout.splitlines() if " win_sync " in line) == [
        f"rank {r} win_sync 0 0 reads {10 * ((r + 1) % 4 + 1)}" for r in range(4)
    ]
    assert "Not yet implemented" not in proc.stderr
