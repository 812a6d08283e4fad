"""A pure-MPI program runs as any other, and results.json counts the bytes of every MPI call."""

from __future__ import annotations

import subprocess

import pytest
from conftest import HERE, orrery

pytestmark = pytest.mark.native


@pytest.fixture(scope="module")
def mpi_only(tmp_path_factory):
    """The pure-MPI program, a C file built with `orrery mpicc` (no nvcc, no CUDA call)."""
    dest = tmp_path_factory.mktemp("mpi_only") / "mpi_only"
    orrery("mpicc", str(HERE / "native" / "programs" / "mpi_only.c"), "-o", str(dest), check=True)
    return dest


def test_a_pure_mpi_program_has_a_normal_report(run_program, mpi_only):
    r = run_program(mpi_only, "bytes", options=("--gpus-per-node", "2"))
    assert r.returncode == 0, r.stderr
    res = r.results
    for rank in res["ranks"]:
        assert rank["kernel_s"] == 0 and rank["copies"] == {}
        assert rank["gpu_wait_s"] == 0 and rank["engines"] == {"compute": 0, "H2D": 0, "D2H": 0}
        assert rank["mpi_s"] > 0


def test_mpi_calls_count_their_bytes(run_program, mpi_only):
    """Bytes per call, by hand from mpi_only.c's calls (double 8 B, int 4 B, 2 ranks): point-to-
    point the message (MPI_Sendrecv both), collectives the rank's send buffer (MPI_Bcast the
    buffer at every rank; MPI_Scatter the root's whole send buffer, a block elsewhere; MPI_Gather
    in place at the root its block of the receive buffer)."""
    res = run_program(mpi_only, "bytes", options=("--gpus-per-node", "2")).results
    common = {"MPI_Sendrecv": (1, 10 * 8 + 20 * 8), "MPI_Irecv": (1, 7 * 4), "MPI_Isend": (1, 7 * 4),
              "MPI_Waitall": (1, 0), "MPI_Bcast": (1, 50 * 8), "MPI_Allreduce": (2, 2 * 30 * 8),
              "MPI_Allgather": (1, 5 * 4), "MPI_Alltoall": (1, 2 * 4 * 4), "MPI_Gather": (1, 9 * 4),
              "MPI_Barrier": (1, 0)}
    expected = [
        {**common, "MPI_Send": (2, 100 * 8 + 3 * 4), "MPI_Scatter": (1, 2 * 6 * 8)},
        {**common, "MPI_Recv": (2, 100 * 8 + 3 * 4), "MPI_Scatter": (1, 6 * 8)},
    ]
    for rank, want in zip(res["ranks"], expected):
        assert {k: (v["count"], v["bytes"]) for k, v in rank["mpi"].items()} == want


def test_a_program_without_orrery_s_runtime_is_refused(tmp_path):
    """A pure-MPI program linked by plain smpicc has no libcudart.so.13: nothing would time its MPI
    calls or write the report."""
    exe = tmp_path / "bare"
    subprocess.run(["smpicc", str(HERE / "native" / "programs" / "mpi_only.c"), "-o", str(exe)], check=True)
    p = orrery("run", "--out", str(tmp_path / "o"), "--", str(exe), "bytes")
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1].startswith(f"orrery: error: orrery run: got '{exe}'")
    assert "orrery mpicc" in p.stderr
    assert not (tmp_path / "o").exists()
