"""orrery-mpif90 (and `orrery mpif90`): Fortran MPI programs through SimGrid's smpif90. SMPI's
Fortran bindings (mpi_send_ ...) live in libsimgrid and call its own MPI_Send, not the
program's: Orrery's runtime never sees a Fortran program's MPI calls. The program runs, with
the right results, but the run has no timing of its own to report (docs/building.md)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HERE, ORRERY

from orrery.run import build

pytestmark = [
    pytest.mark.native,
    pytest.mark.skipif(
        shutil.which("smpif90") is None or shutil.which("gfortran") is None,
        reason="SimGrid's smpif90 or gfortran is not installed (scripts/setup.sh installs gfortran)",
    ),
]

BIN = Path(sys.executable).parent
RING = HERE / "native" / "programs" / "fortran" / "ring.f90"


@pytest.fixture(scope="module")
def ring(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("fortran")
    shutil.copy(RING, d)  # smpif90 writes its rewritten source beside the original
    subprocess.run([str(BIN / "orrery-mpif90"), "-o", "ring", "ring.f90"], cwd=d, check=True)
    return d / "ring"


def test_a_fortran_program_runs_on_the_simulated_ranks(ring, run_program):
    r = run_program(ring, options=("--gpus-per-node", "2"))
    assert sorted(line for line in r.stdout.splitlines() if line.startswith("rank ")) == [
        "rank 0 of 2 total 3 received 1.50",
        "rank 1 of 2 total 3 received 1.50",
    ]


def test_orrery_does_not_see_fortrans_mpi_calls(ring, run_program):
    """Neither MPI_Init nor any other call reaches Orrery's runtime: no rank is known to it, the
    run has no report, and `orrery run` says so rather than printing a makespan of nothing."""
    r = run_program(ring, options=("--gpus-per-node", "2"))
    assert r.returncode == 3
    assert r.results["status"] == "orrery_error" and r.results["ranks"] == []
    assert "simulated makespan" not in r.stdout


@pytest.mark.xfail(strict=True, reason="SMPI's Fortran bindings call SimGrid's C functions, past Orrery's MPI wrappers")
def test_fortran_mpi_calls_are_timed_like_c_ones(ring, run_program):
    r = run_program(ring, options=("--gpus-per-node", "2"))
    assert r.results["status"] == "completed"
    assert r.results["ranks"][0]["mpi"]["MPI_Send"] == {"count": 1, "bytes": 800, "time_s": pytest.approx(0, abs=1)}


def test_the_two_word_form_links_as_the_single_word_one(tmp_path):
    """`orrery mpif90 -show` prints the command smpif90 would run: Orrery's runtime and the entry
    point that lets the program run on its own."""
    shutil.copy(RING, tmp_path)
    proc = subprocess.run(
        [ORRERY, "mpif90", "-show", "-o", "ring", "ring.f90"], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    words = proc.stdout.split()
    assert "-lcudart" in words and f"-Wl,-e,{build.STANDALONE_ENTRY}" in words
    assert any(w.startswith("-L") and w.endswith("orrery/lib") for w in words)
