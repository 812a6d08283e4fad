"""What benchmarks such as nccl-tests ask of the host (docs/nccl.md, "The real nccl-tests"): the host's
clocks read the simulated time, a loop polling cudaStreamQuery or cudaEventQuery advances it and
sees the completion when it happens, and each rank's host name is its node's.

Times derived from h100-ib200's overheads: launch 2.5 us, sync 1 us (the poll's spin)."""

from __future__ import annotations

import json

import pytest
from conftest import needs_nvcc
from derivations import BRIEF, BUSY, cost_options

pytestmark = [pytest.mark.native, needs_nvcc]


@pytest.fixture
def costs(tmp_path) -> tuple[str, str]:
    return cost_options(tmp_path)


def _program_lines(run) -> list[str]:
    """The program's output lines, before Orrery's summary (its first line "orrery: ...")."""
    assert run.returncode == 0, run.stderr
    return [line for line in run.stdout.split("\norrery: ", 1)[0].splitlines() if not line.startswith("orrery:")]


def _values(run) -> dict[str, float]:
    """The program's "name value" lines."""
    return {k: float(v) for k, v in (line.split() for line in _program_lines(run))}


def test_every_wall_clock_of_the_host_reads_the_simulated_time(run_program, programs, tmp_path, h100):
    # a kernel of 2 s: the simulated time passes a second, the simulator's CPU time does not
    path = tmp_path / "costs.json"
    path.write_text(json.dumps({"kernels": {"busy": {"time": "2s"}}}))
    r = run_program(programs["host_clock"], "clocks", options=("--gpus-per-node", "1", "--costs", str(path)))
    v = _values(r)
    o = h100.overheads
    # cudaDeviceSynchronize's return, the launch, the kernel, cudaStreamSynchronize's return
    expected = o.sync + o.launch + 2.0 + o.sync
    assert v["wtime"] == pytest.approx(expected, rel=1e-9)
    for clock in ("steady", "monotonic", "realtime"):  # to the nanosecond
        assert v[clock] == pytest.approx(expected, abs=1e-9), clock
    assert v["gettimeofday"] == pytest.approx(expected, abs=1e-6)
    assert v["cputime_below_1s"] == 1  # a CPU-time clock stays the process's own (2 s if simulated)


@pytest.mark.parametrize("mode", ["poll-stream", "poll-event"])
def test_a_polling_loop_advances_the_clock_and_sees_the_completion_when_it_happens(
    run_program, programs, costs, h100, mode
):
    v = _values(run_program(programs["host_clock"], mode, options=("--gpus-per-node", "1", *costs)))
    o = h100.overheads
    assert v["launched"] == pytest.approx(o.launch, abs=1e-9)
    # each poll that finds the kernel running spins one sync overhead, or less where the kernel
    # ends first: the loop ends as the kernel does
    assert v["done"] == pytest.approx(o.launch + BUSY, abs=1e-9)
    # a poll answers the stream's state as its spin ends: the 100th spin ends as the kernel does and
    # finds it complete, so 99 polls (of 1 us in 100 us) answered "not ready"
    assert v["polls"] == round(BUSY / o.sync) - 1


def test_streams_polled_in_turn_are_each_seen_done_within_one_spin(run_program, programs, costs, h100):
    v = _values(
        run_program(
            programs["host_clock"], "poll-two", options=("--gpus-per-node", "2", "--ranks-per-node", "1", *costs)
        )
    )
    o = h100.overheads
    assert v["done0"] == pytest.approx(o.launch + BUSY, abs=1e-9)  # the last polled: seen as it ends
    brief_end = 2 * o.launch + BRIEF  # launched second
    assert brief_end - 1e-9 <= v["done1"] <= brief_end + o.sync + 1e-9


def test_each_rank_s_host_name_is_its_node_s(run_program, programs):
    r = run_program(programs["host_clock"], "hostname", options=("--gpus-per-node", "2"), nodes=2)
    assert r.returncode == 0, r.stderr
    # too small a buffer: -1, as glibc's gethostname (ENAMETOOLONG)
    assert sorted(line for line in r.stdout.splitlines() if line.startswith("rank ") and " host " in line) == [
        "rank 0 host n0 small_rc -1",
        "rank 1 host n0 small_rc -1",
        "rank 2 host n1 small_rc -1",
        "rank 3 host n1 small_rc -1",
    ]


def _rank_lines(run) -> list[str]:
    assert run.returncode == 0, run.stderr
    return sorted(line for line in _program_lines(run) if line.startswith("rank "))


def test_each_rank_parses_its_own_options_with_getopt(run_program, programs):
    # libc's optind is one variable for every rank: without a place per rank, ranks 1.. saw none
    r = run_program(programs["host_clock"], "getopt", "-x", "5", "--name", "a", options=("--gpus-per-node", "3"))
    assert _rank_lines(r) == [f"rank {i} x 5 name a" for i in range(3)]


def test_each_rank_has_its_own_static_variables_of_templates(run_program, programs):
    # g++'s GNU unique symbols would bind every rank's copy to one variable: 1, 2, 3 (orrery-nvcc
    # and orrery-mpicxx compile with -fno-gnu-unique)
    r = run_program(programs["host_clock"], "statics", options=("--gpus-per-node", "3"))
    assert _rank_lines(r) == [f"rank {i} calls 1" for i in range(3)]
