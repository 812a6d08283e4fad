"""Measured MPI message models (machine key ``messages.*``, written by ``orrery
calibrate`` from osu_latency sweeps): a lone message of s bytes takes the
latency + s / bandwidth of its path's segment from the send call to the
receive's return, the per-message overheads included. SMPI's messages carry
a 16-byte envelope (SMPI_ENVELOPE), counted in the size like any byte."""

from __future__ import annotations

import pytest
from derivations import REL, SMPI_ENVELOPE, run_ok

pytestmark = pytest.mark.native

OVERHEADS = ("--set", "mpi.send_overhead_device=1us", "--set", "mpi.recv_overhead_device=1.5us",
             "--set", "mpi.send_overhead_host=0.5us", "--set", "mpi.recv_overhead_host=0.25us")
TWO = "[{up_to = '4KiB', latency = '%s', bandwidth = '2GB/s'}, {latency = '%s', bandwidth = '%s'}]"
MODELS = ("--set", "messages.device_intra=" + TWO % ("6us", "9us", "20GB/s"),
          "--set", "messages.device_inter=" + TWO % ("12us", "15us", "10GB/s"),
          "--set", "messages.host_intra=" + TWO % ("1us", "2us", "8GB/s"),
          "--set", "messages.host_inter=" + TWO % ("3us", "4us", "12GB/s"))


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
    within = run_ok(run_program, programs, "sendrecv-host", str(n),
                    options=("--gpus-per-node", "2", *OVERHEADS, *MODELS)).values()
    # each rank: send overhead, the exchange (both directions at once, full duplex), receive overhead
    assert within["rank 0 elapsed"] == pytest.approx(one_way(2e-6, 8e9, n), rel=REL)
    between = run_ok(run_program, programs, "sendrecv-host", str(n), nodes=2,
                     options=("--gpus-per-node", "1", "--ranks-per-node", "1", *OVERHEADS, *MODELS)).values()
    assert between["rank 0 elapsed"] == pytest.approx(one_way(4e-6, 12e9, n), rel=REL)


def test_copies_are_not_messages(run_program, programs, h100):
    """H2D and peer copies keep their own times when message models are set."""
    n = 4_000_000
    o = h100.overheads
    h2d = run_ok(run_program, programs, "h2d", str(n), options=MODELS).values()
    assert h2d["elapsed"] == pytest.approx(o.memcpy + 2 * h100.pcie.latency + n / h100.pcie.bandwidth + o.sync,
                                           rel=REL)
    peer = run_ok(run_program, programs, "peer", str(n), options=("--gpus-per-node", "2", "--ranks-per-node", "1", *MODELS)).values()
    expected = o.memcpy + h100.nvlink.latency + n / h100.nvlink_pair_bandwidth + o.sync
    assert peer["peer"] == pytest.approx(expected, rel=REL)


def test_ranks_sharing_a_gpu_keep_the_device_memory_rate(run_program, programs, h100):
    """Two ranks on one GPU exchange through its memory (SimGrid's loopback at the device-to-device
    rate): no message model and no rendezvous handshake applies there."""
    n = 1_000_000
    opts = ("--gpus-per-node", "1", "--ranks-per-node", "2", *MODELS)
    v = run_ok(run_program, programs, "send-recv", str(n), options=opts).values()
    g = h100.gpu
    assert v["rank 1 elapsed"] == pytest.approx(g.d2d_latency + (n + SMPI_ENVELOPE) / g.d2d_bandwidth, rel=REL)
