"""Overlap: copy engines, stream ordering and priorities, non-blocking MPI beside kernels.

Expected times are derived by hand as in test_timing.py (same names: L, M, S
host overheads; X the time of one copy on PCIe; costs from the cost file).
"""

from __future__ import annotations

import pytest
from derivations import BRIEF, BUSY, REL, cost_options, gpudirect_message, run_ok

pytestmark = pytest.mark.native

N = 8_000_000


@pytest.fixture
def costs(tmp_path):
    return cost_options(tmp_path)


def pcie_copy(h100, n=N):
    return 2 * h100.pcie.latency + n / h100.pcie.bandwidth


def test_two_copies_in_the_same_direction_queue_for_one_engine(run_program, programs, h100):
    M, S, X = h100.overheads.memcpy, h100.overheads.sync, pcie_copy(h100)
    v = run_ok(run_program, programs, "copy-same", str(N)).values()
    assert v["first"] == pytest.approx(M + X + S, rel=REL)
    assert v["second"] == pytest.approx(M + 2 * X + S, rel=REL)  # started when the first freed the engine


def test_copies_in_opposite_directions_run_together(run_program, programs, h100):
    M, S, X = h100.overheads.memcpy, h100.overheads.sync, pcie_copy(h100)
    v = run_ok(run_program, programs, "copy-opposite", str(N)).values()
    assert v["first"] == pytest.approx(M + X + S, rel=REL)
    # issued M later on its own engine and its own direction of the full-duplex links, so it
    # ends at 2M + X; the host waits for it after the first synchronisation, if it must
    assert v["second"] == pytest.approx(max(M + X + S, 2 * M + X) + S, rel=REL)


def test_single_copy_engine_serialises_both_directions(run_program, programs, h100):
    M, S, X = h100.overheads.memcpy, h100.overheads.sync, pcie_copy(h100)
    v = run_ok(run_program, programs, "copy-opposite", str(N), options=("--set", "gpu.copy_engines=1")).values()
    assert v["second"] == pytest.approx(M + 2 * X + S, rel=REL)


def test_streams_joined_by_an_event(run_program, programs, h100, costs):
    L, S = h100.overheads.launch, h100.overheads.sync
    v = run_ok(run_program, programs, "event-join", options=costs).values()
    # brief (stream 2) waits for the event recorded after busy (stream 1)
    assert v["elapsed"] == pytest.approx(L + BUSY + BRIEF + S, rel=REL)


def test_legacy_stream_does_not_wait_for_a_non_blocking_stream(run_program, programs, h100, costs):
    L, S = h100.overheads.launch, h100.overheads.sync
    v = run_ok(run_program, programs, "legacy-nonblocking", options=costs).values()
    # brief starts at 2L beside busy, both at half speed (compare the legacy test in test_timing.py)
    assert v["elapsed"] == pytest.approx(2 * L + 2 * BRIEF + S, rel=REL)


def test_host_callback_runs_in_stream_order(run_program, programs, h100, costs):
    L, S = h100.overheads.launch, h100.overheads.sync
    v = run_ok(run_program, programs, "callback", options=costs).values()
    assert (v["runs_before"], v["runs_after"]) == (0, 1)
    assert v["elapsed"] == pytest.approx(L + BUSY + BRIEF + S, rel=REL)


def test_high_priority_kernel_takes_the_gpu(run_program, programs, h100, costs):
    L, S = h100.overheads.launch, h100.overheads.sync
    v = run_ok(run_program, programs, "priority", options=costs).values()
    # one priority level up = 1000 x the share: brief runs at 1000/1001 of the GPU
    assert v["brief_done"] == pytest.approx(2 * L + BRIEF * 1001 / 1000 + S, rel=REL)
    assert v["busy_done"] == pytest.approx(L + BUSY + BRIEF + S, rel=REL)  # the GPU never idles


def test_nonblocking_messages_progress_while_a_kernel_runs(run_program, programs, h100, costs):
    r = run_ok(
        run_program,
        programs,
        "isend-kernel",
        str(N),
        nodes=2,
        options=("--gpus-per-node", "1", "--ranks-per-node", "1", *costs),
    )
    L, S = h100.overheads.launch, h100.overheads.sync
    message = gpudirect_message(h100, N)
    assert message > BUSY
    # posted right after the launch, done while the kernel has long finished: nothing serialised;
    # the MPI library's per-message software times on each side (h100-ib200's, carried from a
    # measured Open MPI + UCX) are in the exchange
    o = h100.mpi.overhead("send", "device", False) + h100.mpi.overhead("recv", "device", False)
    assert r.values()["rank 0 elapsed"] == pytest.approx(L + o + message + S, rel=REL)
    rank0 = r.results["ranks"][0]
    assert rank0["comm_hidden_s"] == pytest.approx(BUSY, rel=REL)  # the kernel ran inside the exchange
    assert rank0["engines"]["compute"] == pytest.approx(BUSY, rel=REL)
    assert rank0["comm_exposed_s"] == pytest.approx(rank0["comm_s"] - BUSY, rel=REL)


def test_nonblocking_allreduce_progresses_while_a_kernel_runs(run_program, programs, h100, costs):
    opts = ("--gpus-per-node", "1", "--ranks-per-node", "1", *costs)
    L = h100.overheads.launch
    alone = run_ok(run_program, programs, "iallreduce", str(N), nodes=2, options=opts)
    beside = run_ok(run_program, programs, "iallreduce-kernel", str(N), nodes=2, options=opts)
    t_alone = alone.values()["rank 0 elapsed"]
    assert t_alone > L + BUSY  # the allreduce outlasts the kernel...
    # ...which therefore costs only its launch: the allreduce went on while it ran
    assert beside.values()["rank 0 elapsed"] == pytest.approx(L + t_alone, rel=REL)
    assert beside.results["ranks"][0]["comm_hidden_s"] == pytest.approx(BUSY, rel=REL)
