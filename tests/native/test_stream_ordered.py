"""Stream-ordered allocation (programs/stream_ordered.cu): cudaMallocAsync and cudaFreeAsync cost
the host nothing and wait for nothing, the memory goes back when the stream reaches the free, and
the pools' handles, attributes and errors are CUDA's. Times derived by hand on h100-ib200 with one
GPU: M the host time of issuing a memset, S of returning from a synchronisation, a memset of N bytes
N / gpu.memset_bandwidth on the GPU."""

from __future__ import annotations

import pytest
from derivations import REL

pytestmark = pytest.mark.native


def _run(run_program, programs, *args):
    r = run_program(programs["stream_ordered"], *args, options=("--gpus-per-node", "1"))
    assert r.returncode == 0, r.stderr
    return r.values()


def test_a_stream_ordered_free_waits_for_nothing_and_gives_the_memory_back_in_stream_order(run_program, programs, h100):
    n = 64 << 20
    v = _run(run_program, programs, "timing", str(n))
    M, S = h100.overheads.memcpy, h100.overheads.sync
    memset = n / h100.gpu.memset_bandwidth
    assert v["async_returned"] == pytest.approx(M, rel=REL)  # the memset's issue alone
    assert v["used_before_sync"] == v["pool_used_before_sync"] == n  # the free waits for the memset
    assert v["synced"] == pytest.approx(M + memset + S, rel=REL)
    assert v["used_after_sync"] == v["pool_used_after_sync"] == 0
    assert v["pool_used_high"] == n
    # cudaFree, by contrast, waits for the device before it returns
    assert v["sync_free_returned"] == pytest.approx(M + memset + S, rel=REL)


def test_pools_handles_attributes_and_errors_are_cudas(run_program, programs):
    n = 1 << 20
    v = _run(run_program, programs, "pools", str(n))
    assert v["pools_supported"] == 1
    assert v["current_is_default"] == v["threshold_back"] == v["current_is_mine"] == 1
    assert v["set_threshold"] == v["create"] == v["from_pool"] == v["set_current"] == v["malloc_async"] == 0
    assert v["destroy_default"] == 1  # cudaErrorInvalidValue: a device's default pool stays
    assert (v["mine_used"], v["mine_used_2"]) == (n, 2 * n)  # the second from the current pool, mine
    assert v["free_a"] == v["free_b"] == 0
    assert v["free_a_again"] == v["cudafree_pending"] == v["freeasync_of_cudamalloc"] == 1
    assert v["mine_used_3"] == 0
    assert v["destroy_mine"] == 0 and v["current_is_default_again"] == 1


def test_a_stream_ordered_allocation_in_a_capture_stops_the_run_naming_it(run_program, programs):
    r = run_program(programs["stream_ordered"], "capture", options=("--gpus-per-node", "1"))
    assert r.returncode == 3
    assert "not reached" not in r.stdout
    assert (
        "orrery: error: cudaMallocAsync in a stream capture (a graph's memory allocation node), which Orrery does "
        "not simulate"
    ) in r.stderr
