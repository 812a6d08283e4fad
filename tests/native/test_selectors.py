"""Every collective of MPI under each of SMPI's collective selectors (`mpi.collective_selector`:
SMPI's own choices, Open MPI's, MPICH's, MVAPICH2's, Intel MPI's), on communicators of several
sizes and messages from 4 bytes to 300 KB: each run completes and every result is what it must be
(tests/native/programs/every_collective.c checks each sum, maximum and block against values every
rank knows). The sizes are those where SMPI 3.32's code aborted under its own selectors before
liborrery_smpi.so mended it (interpose/mpi/smpi_colls.cpp): Open MPI's and MPICH's pairwise
alltoall on a number of ranks that is not a power of two (3, 5, 13, 65), Intel MPI's Rabenseifner
allreduce there too (12, 13 ranks), and Intel MPI's topology-aware ring broadcast on nodes of one
rank (5, 8 ranks)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import HERE, built_once, orrery, session_dir

pytestmark = pytest.mark.native

MAX_BYTES = 1_000_000  # each size's n blocks of a count at most this
ELEMENTS = (1, 3, 75, 750, 10000, 75000)  # ints a block


@pytest.fixture(scope="session")
def every_collective(tmp_path_factory) -> Path:
    def make(d: Path) -> None:
        d.mkdir()
        source = HERE / "native" / "programs" / "every_collective.c"
        orrery("mpicc", str(source), "-o", str(d / "every_collective"), check=True)

    return built_once(session_dir(tmp_path_factory, "built") / "every_collective", make) / "every_collective"


@pytest.mark.parametrize(
    "selector, layout, sizes",
    [
        (selector, ("--nodes", "17"), (2, 3, 5, 12, 13, 65, 68))  # 4 ranks a node: 68
        for selector in ("default", "ompi", "mpich", "mvapich2", "impi")
    ]
    + [("impi", ("--nodes", "8", "--gpus-per-node", "1"), (2, 3, 5, 8))],  # one rank a node
)
def test_every_collective_under_every_selector_completes_with_what_it_must(
    every_collective, tmp_path, selector, layout, sizes
):
    proc = orrery(
        "run",
        "--machine",
        "h100-ib200",
        *layout,
        "--set",
        f"mpi.collective_selector={selector}",
        "--out",
        str(tmp_path / "out"),
        "--",
        str(every_collective),
        str(MAX_BYTES),
        ",".join(map(str, sizes)),
        ",".join(map(str, ELEMENTS)),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "FAIL" not in proc.stdout, proc.stdout
    checked = set(re.findall(r"^checked n=(\d+) ints=(\d+) calls=14( in place)?$", proc.stdout, re.M))
    expected = {
        (str(n), str(e), in_place)
        for n in sizes
        for e in ELEMENTS
        if 4 * e * n <= MAX_BYTES
        for in_place in ("", " in place")
    }
    assert checked == expected
