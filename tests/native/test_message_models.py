"""Measured MPI message models (machine key ``messages.*``, written by ``orrery
calibrate`` from osu_latency sweeps): a lone message of s bytes takes the
latency + s / bandwidth of its path's segment from the send call to the
receive's return, the per-message overheads included. SMPI's messages carry
a 16-byte envelope (SMPI_ENVELOPE), counted in the size like any byte."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
from derivations import NO_DEVICE_OVERHEADS, REL, SMPI_ENVELOPE, run_ok

pytestmark = pytest.mark.native

OVERHEADS = (
    "--set",
    "mpi.send_overhead_device=1us",
    "--set",
    "mpi.recv_overhead_device=1.5us",
    "--set",
    "mpi.send_overhead_host=0.5us",
    "--set",
    "mpi.recv_overhead_host=0.25us",
)
TWO = "[{up_to = '4KiB', latency = '%s', bandwidth = '2GB/s'}, {latency = '%s', bandwidth = '%s'}]"
MODELS = (
    "--set",
    "messages.device_intra=" + TWO % ("6us", "9us", "20GB/s"),
    "--set",
    "messages.device_inter=" + TWO % ("12us", "15us", "10GB/s"),
    "--set",
    "messages.host_intra=" + TWO % ("1us", "2us", "8GB/s"),
    "--set",
    "messages.host_inter=" + TWO % ("3us", "4us", "12GB/s"),
)


def one_way(latency: float, bandwidth: float, n: int) -> float:
    return latency + (n + SMPI_ENVELOPE) / bandwidth


@pytest.mark.parametrize("n, small", [(1000, True), (1_000_000, False)])
def test_device_message_within_a_node_takes_its_measured_time(run_program, programs, n, small):
    opts = ("--gpus-per-node", "2", "--ranks-per-node", "2", *OVERHEADS, *MODELS)
    v = run_ok(run_program, programs, "send-recv", str(n), options=opts).values()
    # the receiver, waiting already, returns once the message is in: the measured one-way time
    expected = one_way(6e-6, 2e9, n) if small else one_way(9e-6, 20e9, n)
    assert v["rank 1 elapsed"] == pytest.approx(expected, rel=REL)


@pytest.mark.parametrize("n, small", [(1000, True), (1_000_000, False)])
def test_device_message_between_nodes_takes_its_measured_time(run_program, programs, n, small):
    opts = ("--gpus-per-node", "1", "--ranks-per-node", "1", *OVERHEADS, *MODELS)
    v = run_ok(run_program, programs, "send-recv", str(n), nodes=2, options=opts).values()
    expected = one_way(12e-6, 2e9, n) if small else one_way(15e-6, 10e9, n)
    assert v["rank 1 elapsed"] == pytest.approx(expected, rel=REL)


def test_host_messages_take_the_host_paths_measured_times(run_program, programs):
    n = 1_000_000
    within = run_ok(
        run_program, programs, "sendrecv-host", str(n), options=("--gpus-per-node", "2", *OVERHEADS, *MODELS)
    ).values()
    # each rank: send overhead, the exchange (both directions at once, full duplex), receive overhead
    assert within["rank 0 elapsed"] == pytest.approx(one_way(2e-6, 8e9, n), rel=REL)
    between = run_ok(
        run_program,
        programs,
        "sendrecv-host",
        str(n),
        nodes=2,
        options=("--gpus-per-node", "1", "--ranks-per-node", "1", *OVERHEADS, *MODELS),
    ).values()
    assert between["rank 0 elapsed"] == pytest.approx(one_way(4e-6, 12e9, n), rel=REL)


def test_a_segment_with_a_negative_latency_takes_its_time(run_program, programs):
    """A later segment's negative latency (a time growing faster than the size, as orrery
    calibrate fits shared memory falling out of cache) is kept: latency + s / bandwidth."""
    n = 1_000_000
    model = (
        "messages.host_intra=[{up_to = '256KiB', latency = '1us', bandwidth = '60GB/s'}, "
        "{latency = '-10us', bandwidth = '20GB/s'}]"
    )
    v = run_ok(
        run_program,
        programs,
        "sendrecv-host",
        str(n),
        options=("--gpus-per-node", "2", *OVERHEADS, "--set", model, "--set", "node.host_memcpy_bandwidth=100GB/s"),
    ).values()  # a route faster than the model
    assert v["rank 0 elapsed"] == pytest.approx(one_way(-10e-6, 20e9, n), rel=REL)


def test_copies_are_not_messages(run_program, programs, h100):
    """H2D and peer copies keep their own times when message models are set."""
    n = 4_000_000
    o = h100.overheads
    h2d = run_ok(run_program, programs, "h2d", str(n), options=MODELS).values()
    assert h2d["elapsed"] == pytest.approx(o.memcpy + 2 * h100.pcie.latency + n / h100.pcie.bandwidth + o.sync, rel=REL)
    peer = run_ok(
        run_program, programs, "peer", str(n), options=("--gpus-per-node", "2", "--ranks-per-node", "1", *MODELS)
    ).values()
    expected = o.memcpy + h100.nvlink.latency + n / h100.nvlink_pair_bandwidth + o.sync
    assert peer["peer"] == pytest.approx(expected, rel=REL)


def test_ranks_sharing_a_gpu_keep_the_device_memory_rate(run_program, programs, h100):
    """Two ranks on one GPU exchange through its memory (SimGrid's loopback at the device-to-device
    rate): no message model and no rendezvous handshake applies there, only the MPI library's
    per-message software time on each side (h100-ib200's mpi.*_overhead_device_intra)."""
    n = 1_000_000
    opts = ("--gpus-per-node", "1", "--ranks-per-node", "2", *MODELS)
    v = run_ok(run_program, programs, "send-recv", str(n), options=opts).values()
    g, mpi = h100.gpu, h100.mpi
    o = mpi.overhead("send", "device", True) + mpi.overhead("recv", "device", True)
    assert v["rank 1 elapsed"] == pytest.approx(o + g.d2d_latency + (n + SMPI_ENVELOPE) / g.d2d_bandwidth, rel=REL)


def test_ranks_that_select_the_same_gpu_exchange_through_its_memory(run_program, programs, h100):
    """Under --gpu-visibility node both ranks of a node start on device 0: their buffers are in
    GPU 0's memory, so a message between them stays there (issue 22: it crossed NVLink from the
    GPU rank 1 runs next to, 31 us for 4 MiB against 7 us)."""
    n = 4 << 20
    for layout in (
        ("--gpus-per-node", "1", "--ranks-per-node", "2"),
        ("--gpus-per-node", "2", "--ranks-per-node", "2", "--gpu-visibility", "node"),
    ):
        opts = (*layout, *MODELS, *NO_DEVICE_OVERHEADS)
        v = run_ok(run_program, programs, "send-recv-device0", str(n), options=opts).values()
        g = h100.gpu
        assert v["rank 1 elapsed"] == pytest.approx(g.d2d_latency + (n + SMPI_ENVELOPE) / g.d2d_bandwidth, rel=REL)


# Gaps (machine key gaps.*, LogGP's g and G): none after the 1-byte exchange that lines the
# ranks up, 10 us + s / 1 GB/s after a larger send.
GAPS = "[{up_to = '100B', latency = 0, bandwidth = '1TB/s'}, {latency = '10us', bandwidth = '1GB/s'}]"


@pytest.mark.parametrize(
    "where, key, send_overhead, spaced",
    [
        ("between nodes", "gaps.device_inter", "1us", "gap"),
        ("between nodes", "gaps.device_inter", "20us", "overhead"),  # a gap shorter than the overhead adds nothing
        ("between nodes", "gaps.device_intra", "1us", "overhead"),  # the other path's gap does not apply
        ("within a node", "gaps.device_intra", "1us", "gap"),
    ],
)
def test_a_rank_s_sends_on_a_path_are_spaced_by_its_gap(run_program, programs, where, key, send_overhead, spaced):
    """rank 0 issues 8 MPI_Isend of 1000 B back to back: each starts after its send overhead
    o, and no sooner than gap(1000 B) = 10 us + 1000 B / 1 GB/s = 11 us after the one before."""
    n = 1000
    layout = (
        ("--gpus-per-node", "1", "--ranks-per-node", "1")
        if where == "between nodes"
        else ("--gpus-per-node", "2", "--ranks-per-node", "2")
    )
    opts = (
        *layout,
        *NO_DEVICE_OVERHEADS,  # receives are not paced by a receive overhead either
        "--set",
        f"mpi.send_overhead_device={send_overhead}",
        "--set",
        f"mpi.send_overhead_device_intra={send_overhead}",
        "--set",
        f"{key}={GAPS}",
    )
    v = run_ok(
        run_program, programs, "window", str(n), nodes=2 if where == "between nodes" else 1, options=opts
    ).values()
    o = float(send_overhead.removesuffix("us")) * 1e-6
    interval = 10e-6 + n / 1e9 if spaced == "gap" else o
    assert v["rank 0 spacing"] == pytest.approx(7 * interval, rel=REL)
    assert v["rank 1 spacing"] == pytest.approx(0.0, abs=1e-15)  # receives are not paced


def test_a_lone_message_is_not_delayed_by_a_gap(run_program, programs):
    """After the 1-byte exchange (no gap at that size) a 1 MB message takes its measured
    one-way time: its own size's gap (1.01 ms) would only hold back a send after it."""
    n = 1_000_000
    opts = ("--gpus-per-node", "1", "--ranks-per-node", "1", *OVERHEADS, *MODELS, "--set", f"gaps.device_inter={GAPS}")
    v = run_ok(run_program, programs, "send-recv", str(n), nodes=2, options=opts).values()
    assert v["rank 1 elapsed"] == pytest.approx(one_way(15e-6, 10e9, n), rel=REL)


# Polls (machine key mpi.poll_time): each MPI_Test and MPI_Iprobe call, and each round of a
# blocking MPI_Probe, takes the poll time, then sees what has happened by then. SMPI's own
# 100 us per call (smpi/test, smpi/iprobe), which a message of a few microseconds waited 100 us
# for, is replaced by it. A lone 1000-byte host message within the node takes 5.5 us + 1016 B /
# 1 TB/s (no overheads); an empty one 5.5 us + 16 B / 1 TB/s.
LONE = (
    "--gpus-per-node",
    "2",
    "--set",
    "mpi.send_overhead_host_intra=0",
    "--set",
    "mpi.recv_overhead_host_intra=0",
    "--set",
    "messages.host_intra=[{latency = '5.5us', bandwidth = '1TB/s'}]",
    "--set",
    "node.host_memcpy_bandwidth=100GB/s",
)  # the route's 10 ns for 1016 B fit in the model's latency


@pytest.mark.parametrize("poll", [1e-6, None])
def test_a_polled_message_is_seen_at_the_first_poll_after_it(run_program, programs, poll):
    options = LONE + (("--set", f"mpi.poll_time={poll!r}s") if poll else ())
    v = run_ok(run_program, programs, "polls", "1000", options=options).values()
    P = poll or 1e-7  # the default poll time
    message, go = one_way(5.5e-6, 1e12, 1000), one_way(5.5e-6, 1e12, 0)
    # MPI_Test: the receive completes when the message is in, at `message`
    polls = math.ceil(message / P)
    assert v["test polls"] == polls and v["test elapsed"] == pytest.approx(polls * P, rel=REL)
    # MPI_Probe and MPI_Iprobe: rank 0 sends once the "go" message is in; SMPI matches a
    # message's envelope when it is sent, so a probe sees it from then on
    polls = math.ceil(go / P)
    assert v["probe elapsed"] == pytest.approx(polls * P, rel=REL) and v["probe count"] == 1000
    assert v["iprobe polls"] == polls and v["iprobe elapsed"] == pytest.approx(polls * P, rel=REL)


# MPI_Request_get_status polls a request without completing it: each call is one poll (as
# MPI_Test), and a request it finds complete is answered by the program's later wait, test or
# free with the same status. SMPI itself answers flag 1 for any pending request (3.32 and 4.1),
# which would make every poll count below 1 and every elapsed time 0.
def test_request_get_status_polls_and_leaves_the_request_to_its_wait(run_program, programs):
    n, P = 1000, 1e-6
    options = (*LONE, "--set", f"mpi.poll_time={P!r}s", "--trace")
    r = run_ok(run_program, programs, "request-status", str(n), options=options)
    v = r.values()
    message, go = one_way(5.5e-6, 1e12, n), one_way(5.5e-6, 1e12, 0)
    half = one_way(5.5e-6, 1e12, n // 2)
    # MPI_Wait after the polls: the status the polls saw, the handle freed, at no further cost
    polls = math.ceil(message / P)
    assert v["status polls"] == polls and v["status elapsed"] == pytest.approx(polls * P, rel=REL)
    assert v["again flag"] == 1 and v["again elapsed"] == v["status elapsed"]
    for call in ("status", "wait"):
        assert (v[f"{call} source"], v[f"{call} tag"], v[f"{call} count"]) == (0, 1, n)
    assert v["wait null"] == 1 and v["wait elapsed"] == v["status elapsed"]
    # MPI_Waitall over a settled receive (tag 2) and one whose message follows the "go"
    assert v["waitall elapsed"] == pytest.approx(go + message, rel=REL) and v["waitall null"] == 1
    assert [(v[f"waitall {i} tag"], v[f"waitall {i} count"]) for i in (0, 1)] == [(2, n), (3, n)]
    # a persistent receive, started twice: polled, waited, kept; its second message is n / 2
    for i, size, one in ((0, n, message), (1, n // 2, half)):
        polls = math.ceil((go + one) / P)
        assert v[f"persistent {i} polls"] == polls
        assert v[f"persistent {i} elapsed"] == pytest.approx(polls * P, rel=REL)
        assert (v[f"persistent {i} tag"], v[f"persistent {i} count"], v[f"persistent {i} kept"]) == (4, size, 1)
    assert v["inactive flag"] == 1 and v["inactive count"] == 0 and v["freed null"] == 1
    # MPI_Waitsome returns the settled receive after one poll of the other, which it does not
    # wait for; MPI_Testany finds that one pending, MPI_Waitany completes it once it is sent
    assert (v["waitsome out"], v["waitsome index"], v["waitsome tag"]) == (1, 0, 5)
    assert v["waitsome elapsed"] == pytest.approx(P, rel=REL)
    assert v["testany flag"] == 0
    assert (v["waitany index"], v["waitany tag"], v["waitany count"]) == (1, 6, n)
    # each call broken out by name in results.json: rank 1's polls, waits and tests
    mpi = r.results["ranks"][1]["mpi"]
    polled = ("status", "waitall", "persistent 0", "persistent 1", "waitsome")
    polls = sum(v[f"{k} polls"] for k in polled) + 2  # and "again" and "inactive"
    assert mpi["MPI_Request_get_status"]["count"] == polls
    counts = {c: mpi[c]["count"] for c in ("MPI_Wait", "MPI_Waitall", "MPI_Waitsome", "MPI_Testany", "MPI_Waitany")}
    assert counts == {"MPI_Wait": 3, "MPI_Waitall": 1, "MPI_Waitsome": 1, "MPI_Testany": 1, "MPI_Waitany": 1}
    # the trace pairs each of rank 0's 8 messages (the first exchange's, tags 1 to 6) with its
    # receive, whichever call completed it
    events = json.loads((r.out / "trace.json").read_text())["traceEvents"]
    arrows = Counter((e["name"], e["ph"]) for e in events if e.get("name") == "message 0 -> 1")
    assert arrows == {("message 0 -> 1", "s"): 8, ("message 0 -> 1", "f"): 8}
