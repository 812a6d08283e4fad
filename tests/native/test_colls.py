"""SMPI's small-message collective algorithms run in the simulation's kernel by liborrery_smpi.so
(interpose/mpi/smpi_colls.cpp): allreduce by recursive doubling, Open MPI's binomial reduce,
SMPI's default (linear) reduce, the NTSB, k-nomial and binomial-tree broadcasts, Open MPI's
barriers (recursive doubling, Bruck, linear, tree) and the recursive-doubling allgather.

The oracle is SMPI's own code for the same algorithms (ORRERY_SMPI_COLLS=simgrid): for generated
sequences of MPI_Allreduce, MPI_Reduce and MPI_Bcast (tests/native/programs/colls.c: random
types, counts, operations, roots, in place, a split communicator, a strided datatype, a
non-commutative user operation, barriers, ranks entering at different times), on the selectors and rank
counts that make SMPI pick each algorithm, every rank's return time (every bit) and the data it
got are SMPI's, and results.json and the report are the same bytes. Ranks that return at the same
instant may print in another order: the lines are compared as sets.

The same library mends SMPI algorithms that abort where SMPI's selectors take them: Open MPI's
reduce on one rank, and the pairwise alltoall on a number of ranks that is not a power of two
(tests/native/test_selectors.py checks every collective under every selector)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import mpicc_program, orrery

pytestmark = pytest.mark.native

REPORT = re.compile(r"^orrery: collectives: (.*)$", re.M)
COUNT = re.compile(r"([a-zA-Z ]+?) (\d+) in the kernel, (\d+) by SMPI's requests")


@pytest.fixture(scope="session")
def colls(tmp_path_factory) -> Path:
    """tests/native/programs/colls.c built with `orrery mpicc`, once per session."""
    return mpicc_program(tmp_path_factory, "colls")


def counts(stderr: str) -> dict[str, tuple[int, int]]:
    """(in the kernel, by SMPI's requests) per algorithm, from a run with ORRERY_SMPI_COLLS=report."""
    found = REPORT.findall(stderr)
    assert len(found) == 1, stderr
    return {name.strip(): (int(k), int(r)) for name, k, r in COUNT.findall(found[0])}


def run(program: Path, out: Path, options: tuple[str, ...], *args: str, colls: str | None):
    return orrery("run", "--out", str(out), *options, "--", str(program), *args, env={"ORRERY_SMPI_COLLS": colls})


def lines(stdout: str) -> list[str]:
    return sorted(line for line in stdout.splitlines() if not line.startswith("orrery: results in"))


@pytest.mark.parametrize(
    "options, seed, taken",
    [
        # Open MPI's choices at 72 ranks: recursive doubling, binomial reduce, k-nomial broadcast, Bruck's
        # barrier; on the split's 24: recursive doubling's barrier
        (
            ("--machine", "h100-ib200", "--nodes", "18"),
            7,
            ("allreduce rdb", "reduce binomial", "bcast knomial", "barrier bruck", "barrier rdb"),
        ),
        # a power of two of ranks: Open MPI's small allgather by recursive doubling
        (("--machine", "h100-ib200", "--nodes", "16"), 23, ("allgather rdb", "allreduce rdb")),
        # from 128 ranks Open MPI's small broadcast is NTSB's binary tree
        (("--machine", "h100-ib200", "--nodes", "33"), 11, ("reduce binomial", "bcast NTSB")),
        # from 256 ranks its barrier is a tree
        (("--machine", "h100-ib200", "--nodes", "65"), 2, ("barrier tree", "bcast knomial")),
        # SMPI's default: a linear reduce, a binomial-tree broadcast (and the allreduce of both), a linear barrier
        (("--machine", "dgx-a100", "--nodes", "3"), 5, ("reduce default", "bcast binomial", "barrier linear")),
        # 3 ranks: recursive doubling with a remainder of 1 over 2, and the split's communicators of one rank
        (("--machine", "h100-ib200", "--nodes", "1", "--gpus-per-node", "3"), 17, ("allreduce rdb",)),
        # MPICH's small allreduce: recursive doubling on 12 ranks (a remainder of 4 over 8); Bruck's barrier
        (
            ("--machine", "h100-ib200", "--nodes", "3", "--set", "mpi.collective_selector=mpich"),
            3,
            ("allreduce rdb", "barrier bruck"),
        ),
    ],
    ids=["ompi-72", "ompi-64", "ompi-132", "ompi-260", "default-24", "ompi-3", "mpich-12"],
)
def test_collectives_in_the_kernel_return_smpi_s_times_and_data_bit_for_bit(colls, tmp_path, options, seed, taken):
    ours = run(colls, tmp_path / "ours", options, "mix", str(seed), "40", colls="report")
    theirs = run(colls, tmp_path / "smpi", options, "mix", str(seed), "40", colls="simgrid")
    assert ours.returncode == theirs.returncode == 0, ours.stderr + theirs.stderr
    assert lines(ours.stdout) == lines(theirs.stdout)
    for f in ("results.json", "report.tsv"):
        assert (tmp_path / "ours" / f).read_bytes() == (tmp_path / "smpi" / f).read_bytes(), f
    assert not REPORT.search(theirs.stderr)
    took = counts(ours.stderr)
    assert set(took) == {
        "allreduce rdb",
        "reduce binomial",
        "reduce default",
        "bcast NTSB",
        "bcast knomial",
        "bcast binomial",
        "barrier rdb",
        "barrier bruck",
        "barrier linear",
        "barrier tree",
        "allgather rdb",
    }
    for name in taken:
        assert took[name][0] > 0, (name, took)
    # every rank prints a line per call: 40 calls' worth, whatever ran them
    per_node = int(options[options.index("--gpus-per-node") + 1]) if "--gpus-per-node" in options else None
    ranks = int(options[options.index("--nodes") + 1]) * (per_node or (8 if "dgx-a100" in options else 4))
    assert sum(line.startswith("call ") for line in lines(ours.stdout)) == 40 * ranks


def test_what_only_smpi_s_code_does_goes_to_its_requests(colls, tmp_path):
    """On 72 ranks, a reduction of 8000 bytes (Open MPI's binomial reduce then takes 1 KiB
    segments: from 2 KiB on, above 0.6016 / 1024 x 8000 + 1.35 = 6.05 ranks), an allreduce of a
    derived datatype (recursive doubling) and a broadcast of 128 KiB (k-nomial, above the kernel's
    64 KiB per rank) go to SMPI's requests, one call per rank each; the results are SMPI's own."""
    options = ("--machine", "h100-ib200", "--nodes", "18")
    ours = run(colls, tmp_path / "ours", options, "beyond", colls="report")
    theirs = run(colls, tmp_path / "smpi", options, "beyond", colls="simgrid")
    assert ours.returncode == theirs.returncode == 0, ours.stderr + theirs.stderr
    assert lines(ours.stdout) == lines(theirs.stdout)
    assert (tmp_path / "ours" / "results.json").read_bytes() == (tmp_path / "smpi" / "results.json").read_bytes()
    took = counts(ours.stderr)
    assert took["reduce binomial"] == (0, 72) and took["allreduce rdb"] == (0, 72)
    assert took["bcast knomial"] == (0, 72)


def test_a_rank_missing_from_a_collective_in_the_kernel_is_a_deadlock_naming_every_call(colls, tmp_path):
    """Seven of 8 ranks in a recursive-doubling MPI_Allreduce (Open MPI's choice on 8 ranks), the
    eighth in an MPI_Recv nobody sends: a deadlock, reported as with SMPI's own algorithm. SimGrid
    lists the seven in the kernel's simcall (with SMPI's algorithm, waiting for a message); the
    run ends without the report line, whose place is at the exit."""
    options = ("--machine", "h100-ib200", "--nodes", "2")
    ours = run(colls, tmp_path / "ours", options, "deadlock", colls="report")
    theirs = run(colls, tmp_path / "smpi", options, "deadlock", colls="simgrid")
    assert ours.returncode == theirs.returncode != 0
    assert (tmp_path / "ours" / "results.json").read_bytes() == (tmp_path / "smpi" / "results.json").read_bytes()
    res = json.loads((tmp_path / "ours" / "results.json").read_text())
    assert res["status"] == "deadlock"
    assert [(b["rank"], b["call"]) for b in res["failure"]["blocked"]] == [(r, "MPI_Allreduce") for r in range(7)] + [
        (7, "MPI_Recv")
    ]
    assert ours.stderr.count("simcall RUN_BLOCKING") == 7 and "RUN_BLOCKING" not in theirs.stderr
    assert "after" not in ours.stdout


def test_the_same_collectives_in_the_kernel_twice_give_the_same_bytes(colls, tmp_path):
    """Determinism: two runs of one generated sequence print the same lines in the same order
    (ranks that return at one instant included) and write the same results.json and report."""
    options = ("--machine", "h100-ib200", "--nodes", "18")
    first = run(colls, tmp_path / "a", options, "mix", "7", "40", colls=None)
    second = run(colls, tmp_path / "b", options, "mix", "7", "40", colls=None)
    assert first.returncode == second.returncode == 0, first.stderr
    assert first.stdout.replace(str(tmp_path / "a"), "OUT") == second.stdout.replace(str(tmp_path / "b"), "OUT")
    for f in ("results.json", "report.tsv"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f


@pytest.mark.parametrize("colls_mode", [None, "simgrid"])
def test_an_open_mpi_reduce_on_one_rank_copies_its_data_as_open_mpi_s_coll_self_does(colls, tmp_path, colls_mode):
    """SMPI 3.32's Open MPI reduce (binary, pipeline, chain trees) aborted on a communicator of one
    rank; Open MPI copies the send buffer (nothing in place) and sends nothing. Sums by hand: the
    elements are 1.5, 2.5, ..., n + 0.5, whose sum is n^2 / 2 + n."""
    out = tmp_path / "out"
    proc = run(
        colls, out, ("--machine", "h100-ib200", "--nodes", "1", "--gpus-per-node", "2"), "self", colls=colls_mode
    )
    assert proc.returncode == 0, proc.stderr
    for rank in (0, 1):
        for n in (1, 4, 100):
            assert f"rank {rank} reduce {n} last {n + 0.5:g} sum {n * n / 2 + n:g}" in proc.stdout
            assert f"rank {rank} in-place {n} last {n + 0.5:g}" in proc.stdout
    assert json.loads((out / "results.json").read_text())["makespan_s"] == 0


def test_an_in_place_allgather_takes_the_correction_of_its_block(colls, tmp_path):
    """In place, an allgather's send count and type mean nothing (0 and MPI_DATATYPE_NULL here): the
    collective correction is chosen by the receive block, 8 bytes, whose range adds 3 us, not the 5 us
    of the range below 4 bytes that a size of 0 would take."""
    layout = ("--machine", "h100-ib200", "--nodes", "1", "--gpus-per-node", "2")
    fix = ("--set", "collectives.allgather=[{up_to = '4B', extra = '5us'}, {extra = '3us'}]")
    plain = run(colls, tmp_path / "plain", layout, "in-place-allgather", colls=None)
    fixed = run(colls, tmp_path / "fixed", (*layout, *fix), "in-place-allgather", colls=None)
    assert plain.returncode == fixed.returncode == 0, plain.stderr + fixed.stderr
    assert "MPI_DATATYPE_NULL" not in plain.stderr  # nothing asked of the send type
    for rank in (0, 1):
        key = f"rank {rank} allgather "
        took = [
            float(next(ln for ln in p.stdout.splitlines() if ln.startswith(key))[len(key) :]) for p in (plain, fixed)
        ]
        assert took[1] == pytest.approx(took[0] + 3e-6, rel=1e-9), rank


NO_INTRA_OVERHEADS = ("--set", "mpi.send_overhead_host_intra=0us", "--set", "mpi.recv_overhead_host_intra=0us")


@pytest.mark.parametrize(
    "layout, block, pairwise",
    [
        # Open MPI's choice on 3 ranks: pairwise for MPI_Alltoallv at any size, and for MPI_Alltoall
        # from 512 KiB a block
        (("--nodes", "3", "--gpus-per-node", "1"), 600000, ("alltoall", "alltoallv")),
        # 6 ranks, 3 a node (the steps within a node and between nodes differ): MPI_Alltoall pairwise,
        # MPI_Alltoallv linear
        (("--nodes", "2", "--gpus-per-node", "3", *NO_INTRA_OVERHEADS), 600000, ("alltoall",)),
        # MPICH's choice on an odd number of ranks from 32 KiB a block
        (("--nodes", "3", "--gpus-per-node", "1", "--set", "mpi.collective_selector=mpich"), 40000, ("alltoall",)),
        # a power of two: SMPI's own pairwise exchange (by exclusive-or) for MPI_Alltoallv
        (("--nodes", "2", "--gpus-per-node", "1"), 600000, ("alltoallv",)),
    ],
)
def test_a_pairwise_alltoall_on_any_number_of_ranks_is_open_mpi_s_exchange(colls, tmp_path, layout, block, pairwise):
    """SMPI 3.32's pairwise alltoall pairs ranks by exclusive-or and threw on a number of ranks that
    is not a power of two (the run aborted), where its Open MPI, MPICH and Intel MPI selectors take
    it. Open MPI's pairwise exchange takes any number: at step s, a sendrecv to rank + s, from
    rank - s. Every rank gets every block from its sender, and each pairwise collective takes the
    time of that exchange written out with MPI_Sendrecv in the same program (to rounding of the
    clock's absolute value: the runs start at other instants). Ranks send from host memory, with no
    per-message overhead between nodes (h100-ib200) nor, set so, within one."""
    proc = run(colls, tmp_path / "out", ("--machine", "h100-ib200", *layout), "pairwise", str(block), colls=None)
    assert proc.returncode == 0, proc.stderr
    took: dict[tuple[int, str], float] = {}
    for m in re.finditer(r"^rank (\d+) (\S+) ok (\d) took (\S+)$", proc.stdout, re.M):
        assert m[3] == "1", m[0]  # every block from its sender
        took[int(m[1]), m[2]] = float.fromhex(m[4])
    ranks = {r for r, _ in took}
    assert len(took) == 3 * len(ranks) and len(ranks) >= 2, proc.stdout
    for rank in ranks:
        for name in pairwise:
            assert took[rank, name] == pytest.approx(took[rank, "by-hand"], rel=1e-12, abs=0), (rank, name)
