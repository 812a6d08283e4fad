"""CUDA graphs made by stream capture (programs/graphs.cu), on h100-ib200 with one GPU.

A capture records the operations enqueued on its streams instead of running them; each launch of
the graph runs them again, its host paying one launch overhead (L) for the whole graph, its nodes
ordered by what they depended on in the capture. Expected times are derived by hand as in
test_timing.py: L and S are the host overheads of a launch and a synchronisation, an H2D copy from
pinned memory crosses two PCIe links, a memset runs at the GPU's memset rate, kernels cost what the
cost file says. The error codes are CUDA's rules for what a capture refuses (the CUDA Programming
Guide, "Prohibited and Unhandled Operations"; the runtime API's cudaStreamBeginCapture,
cudaStreamEndCapture and cudaThreadExchangeStreamCaptureMode)."""

from __future__ import annotations

import pytest
from derivations import BRIEF, BUSY, REL, cost_options

from orrery.run.costs import DEFAULT_KERNEL_TIME

pytestmark = pytest.mark.native


@pytest.fixture
def graphs(run_program, programs, tmp_path):
    costs = cost_options(tmp_path)

    def run(*args: str):
        r = run_program(programs["graphs"], *args, options=("--gpus-per-node", "1", *costs))
        assert r.returncode == 0, r.stderr
        return r

    return run


def h2d(h100, n: int) -> float:
    return 2 * h100.pcie.latency + n / h100.pcie.bandwidth


def test_each_launch_replays_the_captured_work_for_one_launch_overhead(graphs, h100):
    n, launches = 1_000_000, 3
    r = graphs("replay", str(launches), str(n))
    v = r.values()
    L, S = h100.overheads.launch, h100.overheads.sync
    assert v["nodes"] == 3
    # the host paid the kernel's launch and the copies' issue at the capture: now one L a launch
    assert v["issued"] == pytest.approx(launches * L, rel=REL)
    # the first launch's nodes start after its L; the next launches' host time hides behind them
    once = BUSY + n / h100.gpu.memset_bandwidth + h2d(h100, n)
    assert v["elapsed"] == pytest.approx(L + launches * once + S, rel=REL)
    rank0 = r.results["ranks"][0]
    assert rank0["kernels"]["busy(float*)"]["count"] == launches
    assert rank0["kernels"]["busy(float*)"]["time_s"] == pytest.approx(launches * BUSY, rel=REL)
    for kind in ("H2D", "memset"):
        t = rank0["copies"][kind]
        assert (t["count"], t["bytes"]) == (launches, launches * n)


def test_the_branches_of_a_forked_capture_overlap_at_each_launch(graphs, h100):
    n = 8_000_000  # the copy (~150 us) outlasts the 100 us kernel on the other branch
    v = graphs("fork", str(n)).values()
    L, S = h100.overheads.launch, h100.overheads.sync
    assert h2d(h100, n) > BUSY
    assert v["nodes"] == 2
    assert v["elapsed"] == pytest.approx(L + h2d(h100, n) + S, rel=REL)  # the longer branch, not the sum


def test_a_graph_launched_into_a_capture_becomes_its_nodes(graphs, h100):
    v = graphs("nested").values()
    L, S = h100.overheads.launch, h100.overheads.sync
    assert v["nodes"] == 2  # the inner graph's busy, then brief
    assert v["elapsed"] == pytest.approx(L + BUSY + BRIEF + S, rel=REL)


def test_an_empty_graph_costs_its_launch(graphs, h100):
    v = graphs("empty").values()
    assert v["nodes"] == 0
    assert v["elapsed"] == pytest.approx(h100.overheads.launch + h100.overheads.sync, rel=REL)


def test_a_captured_kernel_without_a_cost_counts_once_per_launch(graphs, h100):
    launches = 4
    r = graphs("uncosted", str(launches))
    assert r.results["kernels_without_cost"] == {"plain(float*)": launches}  # not the capture's
    L, S = h100.overheads.launch, h100.overheads.sync
    assert r.values()["elapsed"] == pytest.approx(L + launches * DEFAULT_KERNEL_TIME + S, rel=REL)


# cudaError_t (driver_types.h): 401 cudaErrorIllegalState; 900-907 the stream-capture errors,
# Unsupported, Invalidated, Merge, Unmatched, Unjoined, Isolation, Implicit, CapturedEvent.
# cudaStreamCaptureStatus: 0 None, 1 Active, 2 Invalidated.
EXPECTED_ERRORS = {
    "status_capturing": 1,
    "sync_in_capture": 900,  # synchronising with a captured stream
    "status_invalidated": 2,  # ... invalidates its capture
    "end_invalidated": 901,
    "graph_after_invalidated": 1,  # and no graph comes out of it
    "status_after_end": 0,
    "end_not_capturing": 401,
    "begin_legacy": 900,  # the legacy stream cannot be captured
    "end_unjoined": 904,  # a forked stream that never joined the origin
    "status_forked_after_end": 0,  # ends its part of the capture all the same
    "wait_external": 905,  # a dependency on work outside the capture
    "end_external": 901,
    "legacy_launch": 906,  # the legacy stream would synchronise with a captured blocking stream
    "end_implicit": 901,
    "query_captured_event": 907,
    "end_after_query": 0,  # a refused query does not invalidate the capture
    "nodes_after_query": 0,  # an event record is no node
    "sync_event_after_end": 907,  # the event stays one recorded in a capture
    "sync_copy_in_capture": 906,  # cudaMemcpy: the legacy stream
    "end_after_sync_copy": 901,
    "pageable_copy_in_capture": 0,  # an asynchronous copy of pageable memory: a node (simpleCudaGraphs')
    "end_after_pageable_copy": 0,
    "malloc_global": 900,  # a potentially unsafe call under a global capture
    "end_after_malloc": 901,
    "malloc_relaxed": 0,
    "end_relaxed": 0,
    "exchanged_mode": 0,  # the thread's mode was global
    "malloc_thread_relaxed": 0,  # the thread's own mode relaxed
    "end_thread_relaxed": 0,
    "wait_other_capture": 902,  # two captures joined
    "end_merged": 901,
    "end_merged_other": 901,
    "end_from_fork": 903,  # ended on a stream that joined, not the origin
    "end_joined": 0,
    "nodes_joined": 2,
    "device_sync_after": 0,
    "info_status": 1,  # cudaStreamGetCaptureInfo: busy captured on s1, brief twice on s2 forked from it
    "info_deps": 1,  # s1's next node depends on busy
    "info_edge_zero": 1,  # a full dependency
    "info_graph_nodes": 3,  # the graph being recorded
    "info_same_id": 1,  # s2 joined the same capture
    "info_legacy": 906,  # the legacy stream beside a captured blocking stream
    "capturing_legacy": 906,
    "info_deps_joined": 2,  # busy, and s2's last brief
    "end_after_info": 0,
    "info_status_after": 0,
}


def test_what_a_capture_refuses_returns_cuda_s_error(graphs):
    assert graphs("errors").values() == EXPECTED_ERRORS
