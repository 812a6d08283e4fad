"""SMPI's detached comms (its eager messages, the shim's copies to and from the host) and the
executions the shim's streams start in the maestro (a ready kernel or memset at the head of an
idle stream: core/streams.cpp) are kept by liborrery_smpi.so in a hash table, not in SimGrid
3.32's list of the maestro's, which their ends scan whole (interpose/mpi/smpi_detached.cpp):
every one of them is taken while in flight and released at its end, and the simulation is
SimGrid's own, bit for bit, with SimGrid keeping them (ORRERY_SMPI_DETACHED=simgrid).

The counts come from the programs by hand: mpi_only's "eager N" mode sends N messages of 64 B
(below every eager threshold) and one of 4 MiB (above), all N in flight at once while the
receiver waits for the large one; timing's "h2d" makes one host-to-device copy, "copy-kinds" an
H2D, a D2H and a D2D copy, of which the D2D is work of the GPU (no comm)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, assert_same_run, orrery

pytestmark = pytest.mark.native

REPORT = re.compile(
    r"^orrery: detached comms: (\d+) taken from SimGrid's list, at most (\d+) at once, (\d+) left in flight$", re.M
)


EXECUTIONS = re.compile(
    r"^orrery: streams' executions: (\d+) taken from SimGrid's list, at most (\d+) at once, (\d+) left in flight$",
    re.M,
)


def run(program: Path, *args: str, out: Path, detached: str | None, options: tuple[str, ...] = ()):
    return orrery("run", "--out", str(out), *options, "--", str(program), *args, env={"ORRERY_SMPI_DETACHED": detached})


def counts(program: Path, *args: str, out: Path, options: tuple[str, ...] = ()) -> tuple[int, int, int]:
    """(taken, most at once, left in flight) from a run with ORRERY_SMPI_DETACHED=report."""
    proc = run(program, *args, out=out, detached="report", options=options)
    assert proc.returncode == 0, proc.stderr
    found = REPORT.findall(proc.stderr)
    assert len(found) == 1, proc.stderr
    taken, most, left = (int(x) for x in found[0])
    return taken, most, left


def test_every_eager_message_is_held_beside_simgrid_while_in_flight(mpi_only, tmp_path):
    opts = ("--gpus-per-node", "2")
    base = counts(mpi_only, "eager", "0", out=tmp_path / "a", options=opts)
    burst = counts(mpi_only, "eager", "40", out=tmp_path / "b", options=opts)
    assert burst[0] - base[0] == 40  # the 40 eager messages; the 4 MiB one is not detached
    assert burst[1] == 40  # all in flight at once: SimGrid's list would have held 40
    assert base[2] == burst[2] == 0  # each released at its end


@pytest.mark.parametrize(
    "mode, expected",
    [
        # busy starts at once in its idle stream; brief, enqueued behind it, starts as it ends
        ("one-stream", (2, 1, 0)),
        # busy and brief in two streams at once
        ("two-streams", (2, 2, 0)),
        # records around busy: each completes at once as the stream reaches it (the first as it
        # is made, so that busy starts in an idle stream; the second as busy ends)
        ("events", (1, 1, 0)),
        # busy in s1; s2 waits for it through an event, without its actor, and starts brief as
        # busy ends: one at a time
        ("event-join", (2, 1, 0)),
        # an H2D, a D2H and a D2D copy, one after the other: only the D2D is an execution (the
        # others are comms, counted with the detached comms)
        ("copy-kinds", (1, 1, 0)),
    ],
)
def test_the_streams_executions_started_in_the_maestro_are_held_too(programs, tmp_path, mode, expected):
    proc = run(programs["timing"], mode, out=tmp_path / "out", detached="report", options=("--gpus-per-node", "1"))
    assert proc.returncode == 0, proc.stderr
    found = EXECUTIONS.findall(proc.stderr)
    assert len(found) == 1, proc.stderr
    assert tuple(int(x) for x in found[0]) == expected


def test_the_shim_s_copies_detached_in_their_own_actor_are_held_too(programs, tmp_path):
    opts = ("--gpus-per-node", "1")
    assert counts(programs["timing"], "h2d", out=tmp_path / "a", options=opts) == (1, 1, 0)
    assert counts(programs["timing"], "copy-kinds", out=tmp_path / "b", options=opts) == (2, 1, 0)


@pytest.mark.parametrize(
    "case",
    [
        ("mpi_only", ("eager", "40"), ("--gpus-per-node", "2")),
        ("mpi_only", ("bytes",), ("--gpus-per-node", "2")),
        (
            "jacobi",
            ("-nx", "256", "-ny", "2048", "-niter", "3"),
            (
                "--nodes",
                "2",
                "--gpus-per-node",
                "4",
                "--costs",
                str(REPO / "examples/jacobi/costs.toml"),
            ),
        ),
    ],
    ids=["eager", "bytes", "jacobi"],
)
def test_the_run_is_the_one_simgrid_s_own_bookkeeping_gives_bit_for_bit(case, mpi_only, jacobi, tmp_path):
    name, args, opts = case
    program = {"mpi_only": mpi_only, "jacobi": jacobi}[name]
    ours = run(program, *args, out=tmp_path / "ours", detached="report", options=opts)
    theirs = run(program, *args, out=tmp_path / "simgrid", detached="simgrid", options=opts)
    assert_same_run(ours, tmp_path / "ours", theirs, tmp_path / "simgrid")
    assert int(REPORT.findall(ours.stderr)[0][0]) > 0 and not REPORT.search(theirs.stderr)


@pytest.mark.parametrize(
    "variable, value, expected",
    [
        ("ORRERY_SMPI_DETACHED", "list", "'simgrid' or 'report', or unset"),
        ("ORRERY_SMPI_TIMERS", "off", "'simgrid' or 'report', or unset"),
        ("ORRERY_SMPI_LMM", "report", "'simgrid', or unset"),
        ("ORRERY_SMPI_COLLS", "kernel", "'simgrid' or 'report', or unset"),
        ("ORRERY_SMPI_REDUCTIONS", "smpi", "'simgrid' or 'report', or unset"),
        ("ORRERY_SMPI_NBC", "linear", "'simgrid' or 'report', or unset"),
    ],
)
def test_a_wrong_liborrery_smpi_variable_stops_the_run_in_one_line(mpi_only, tmp_path, variable, value, expected):
    """liborrery_smpi.so's variables (this file's, test_timers.py's, test_nccl.py's
    ORRERY_SMPI_LMM, test_colls.py's ORRERY_SMPI_COLLS, test_reductions.py's
    ORRERY_SMPI_REDUCTIONS and test_nbc.py's ORRERY_SMPI_NBC) are checked before the run starts."""
    out = tmp_path / "out"
    proc = orrery("run", "--out", str(out), "--", str(mpi_only), "eager", "1", env={variable: value})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"orrery: error: environment variable {variable}: got '{value}', expected {expected}"
    ]
    assert not out.exists()


IN_PLACE_REDUCE_SCATTER = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char** argv) {
  static int b[3 * 10000];
  MPI_Init(&argc, &argv);
  int rank, counts[3] = {10000, 10000, 10000}, ok = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (int i = 0; i < 3 * 10000; i++)
    b[i] = rank + 1;
  MPI_Reduce_scatter(MPI_IN_PLACE, b, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  for (int i = 0; i < 10000; i++)
    ok &= b[i] == 6;
  printf("rank %d sums %s\n", rank, ok ? "right" : "wrong");
  MPI_Finalize();
  return 0;
}
"""


def test_the_maestro_s_list_is_found_without_calling_into_what_only_looked_like_it(tmp_path):
    """The first detached comm of this run (SMPI's own, bare: an in-place MPI_Reduce_scatter of
    10 000 ints on 3 ranks, Open MPI's selector, liborrery_smpi.so preloaded as bench/scale.py's
    bare runs have it) ended a list in an object that was not an actor: asked whether it was the
    maestro, it crashed the run (SIGSEGV). The list is now looked for in the maestro alone, at the
    first detach that runs there. Each rank's sum is 1 + 2 + 3, and the comms were taken."""
    from orrery import _paths

    src, exe = tmp_path / "rs.c", tmp_path / "rs"
    src.write_text(IN_PLACE_REDUCE_SCATTER)
    subprocess.run(["smpicc", str(src), "-o", str(exe)], check=True, capture_output=True)
    hosts = [f"h{i}" for i in range(3)]
    (tmp_path / "hosts").write_text("\n".join(hosts) + "\n")
    (tmp_path / "p.xml").write_text(
        '<?xml version="1.0"?>\n<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
        '<platform version="4.1"><cluster id="c" prefix="h" suffix="" radical="0-2" speed="1Gf" '
        'bw="10GBps" lat="1us"/></platform>\n'
    )
    preload = f"env LD_PRELOAD={_paths.lib_dir() / 'liborrery_smpi.so'} ORRERY_SMPI_DETACHED=report"
    smpirun = ["smpirun", "-wrapper", preload, "-np", "3", "-platform", "p.xml", "-hostfile", "hosts"]
    proc = subprocess.run(
        [*smpirun, "--cfg=smpi/coll-selector:ompi", "--log=root.thres:critical", str(exe)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(proc.stdout.split("\n")[:3]) == [f"rank {r} sums right" for r in range(3)]
    taken, _, left = map(int, REPORT.search(proc.stderr).groups())
    assert taken > 0 and left == 0
