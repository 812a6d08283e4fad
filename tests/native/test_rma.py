"""One-sided MPI (tests/native/programs/rma.cu): each message goes from its origin buffer to the
target window (back for a get), each end where its memory is, and its time is point-to-point
communication, broken out by call. Before, SMPI's one-sided messages went from GPU to GPU
whatever their buffers (a put between host buffers of two ranks of a node crossed NVLink at
450 GB/s on dgx-h100, against shared memory's 10 GB/s) and their time counted as the program's
host code."""

from __future__ import annotations

import math

import pytest
from derivations import REL, gpudirect_latency, wire
from test_paths import host_message

pytestmark = pytest.mark.native

N = 1_000_000


def expected(m, mode: str, nodes: int) -> float:
    """One put (or get) of N bytes alone, to its flush: within a node through shared memory (host
    windows) or NVLink (device windows), between nodes through the NICs, from host memory or by
    GPUDirect RDMA; at or above the eager threshold behind the rendezvous handshake."""
    if mode == "host":
        return host_message(m, N, nodes)
    if nodes == 1:
        return wire(m.nvlink.latency, N, m.nvlink_pair_bandwidth, m.mpi.eager_threshold_device)
    return wire(gpudirect_latency(m), N, min(m.pcie.bandwidth, m.nic.bandwidth), m.mpi.eager_threshold_device)


@pytest.mark.parametrize("mode", ["host", "device"])
@pytest.mark.parametrize("nodes", [1, 2])
def test_a_put_and_a_get_take_their_buffers_routes(run_program, programs, h100, mode, nodes):
    layout = ("--gpus-per-node", "2" if nodes == 1 else "1")
    r = run_program(programs["rma"], mode, str(N), nodes=nodes, options=layout)
    assert r.returncode == 0, r.stderr
    v = r.values()
    t = expected(h100, mode, nodes)
    assert v["put"] == pytest.approx(t, rel=REL) and v["get"] == pytest.approx(t, rel=REL)
    rank = r.results["ranks"][0]
    calls = {name: (c["count"], c["bytes"]) for name, c in rank["mpi"].items()}
    assert calls["MPI_Put"] == (1, N) and calls["MPI_Get"] == (1, N) and calls["MPI_Win_flush"] == (2, 0)
    # the flushes wait for the data: point-to-point communication, not the program's host code
    assert rank["mpi"]["MPI_Win_flush"]["time_s"] == pytest.approx(v["put"] + v["get"], rel=REL)
    assert rank["terms"]["exposed_p2p_s"] == pytest.approx(v["put"] + v["get"], rel=REL)
    assert rank["terms"]["host_s"] < v["put"]  # (it held both before)


def test_a_host_window_is_not_reached_over_nvlink(run_program, programs):
    """dgx-h100, 2 ranks of a node, host buffers: the put and the get cross host memory (each
    direction of each rank's memory link carries one of them), and the NVLink links only the
    barriers' control messages; the put takes at least N bytes at the host copy rate."""
    from orrery import machines

    m = machines.load("dgx-h100")
    r = run_program(programs["rma"], "host", str(N), options=("--machine", "dgx-h100", "--gpus-per-node", "2"))
    assert r.returncode == 0, r.stderr
    assert r.values()["put"] >= N / m.node.host_memcpy_bandwidth
    links = {link["name"]: link["bytes"] for link in r.results["links"]}
    for name, sent in links.items():
        if name.startswith("n0-nvl"):
            assert sent < 1000, name
        else:
            assert math.isclose(sent, N + 16, rel_tol=1e-12), name  # payload and SMPI's envelope


def test_puts_of_all_ranks_at_once_each_take_their_buffers_route(run_program, programs):
    """Four ranks of a dgx-h100 node put into the next one's host window at the same instant:
    each message still goes through host memory (the pairing of each put's two sides holds while
    the other ranks post theirs), NVLink carrying only the barriers' control messages."""
    r = run_program(programs["rma"], "ring", str(N), options=("--machine", "dgx-h100", "--gpus-per-node", "4"))
    assert r.returncode == 0, r.stderr
    v = r.values()
    assert sorted(k for k in v if k.startswith("put.")) == [f"put.{i}" for i in range(4)]
    for rank in r.results["ranks"]:
        assert rank["mpi"]["MPI_Put"]["count"] == 1 and rank["mpi"]["MPI_Put"]["bytes"] == N
    nvlink = sum(link["bytes"] for link in r.results["links"] if link["name"].startswith("n0-nvl"))
    assert 0 < nvlink < 4000
    memory = sum(link["bytes"] for link in r.results["links"] if "-mem_" in link["name"])
    assert memory >= 4 * 2 * N  # each put leaves one rank's memory and enters another's
