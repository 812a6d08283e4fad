"""CUDA IPC between two ranks of a node (programs/ipc.cu), each on its own GPU of h100-ib200.

Every rank runs in one process here, so a handle names the allocation or event itself: what the
other rank does with the opened memory is done on the owner's GPU (a copy to its own GPU is a peer
copy over NVLink), and a stream waiting for an opened event waits for the owner's stream. Times
derived by hand as in test_timing.py: M, L, S the copy, launch and synchronisation overheads."""

from __future__ import annotations

import pytest
from derivations import BRIEF, BUSY, REL, cost_options

pytestmark = pytest.mark.native


def _run(run_program, programs, tmp_path, *args):
    r = run_program(programs["ipc"], *args, options=("--gpus-per-node", "2", *cost_options(tmp_path)))
    assert r.returncode == 0, r.stderr
    return r


def test_opened_memory_is_the_owner_s_and_a_copy_from_it_is_a_peer_copy(run_program, programs, h100, tmp_path):
    n = 8 << 20
    r = _run(run_program, programs, tmp_path, "memory", str(n))
    v = r.values()
    M, S = h100.overheads.memcpy, h100.overheads.sync
    assert v["r1_copy"] == pytest.approx(M + h100.nvlink.latency + n / h100.nvlink_pair_bandwidth + S, rel=REL)
    assert r.results["ranks"][1]["copies"]["peer"]["bytes"] == n
    assert v["r0_get"] == v["r1_open"] == v["r0_free"] == v["r1_close"] == 0
    assert v["r0_get_inside"] == v["r1_open_no_flag"] == v["r0_open_own"] == v["r1_close_again"] == 1
    assert v["r1_open_after_free"] == 400  # cudaErrorInvalidResourceHandle: the owner freed it
    # freed by its owner while rank 1 had it open, it goes at rank 1's close
    assert v["r0_used_after_free"] == n
    assert v["r0_used_after_close"] == 0


def test_a_stream_waiting_for_an_opened_event_waits_for_the_owner_s_work(run_program, programs, h100, tmp_path):
    v = _run(run_program, programs, tmp_path, "event").values()
    # rank 0's busy ran from its launch's return; rank 1's brief, on its own GPU, after it
    assert v["r1_done_after_launch"] == pytest.approx(BUSY + BRIEF + h100.overheads.sync, rel=REL)
    assert v["r1_open"] == 0
    assert v["r0_get_timed"] == 400  # only an interprocess event has a handle
    assert v["r0_create_timed_ipc"] == 1  # interprocess events must disable timing
    assert v["r0_query_after_peer_destroy"] == 0  # rank 1's destroy left rank 0's event alive


def test_a_handle_from_another_node_does_not_open(run_program, programs):
    r = run_program(programs["ipc"], "remote", options=("--nodes", "2", "--gpus-per-node", "1"))
    assert r.returncode == 0, r.stderr
    assert r.values()["r1_open_remote"] == 400  # cudaErrorInvalidResourceHandle
