"""Every path of every built-in machine, and the links paths share.

Expected times from each machine's description: a transfer alone on its
route takes the sum of its links' latencies plus bytes / its narrowest link
(see test_timing.py for the host overheads L, M, S).
"""

from __future__ import annotations

import pytest
from derivations import (
    NO_DEVICE_OVERHEADS,
    NO_SHM_OVERHEADS,
    REL,
    SMPI_ENVELOPE,
    gpudirect_latency,
    gpudirect_message,
    run_ok,
    staged_message,
    wire,
)

from orrery import machines as machine
from orrery.machines import platform

pytestmark = pytest.mark.native

N = 4_194_304


def host_path(m):
    """Latency and bandwidth from host memory to a GPU."""
    if m.host_link.kind == "nvlink-c2c":
        return m.host_link.latency, min(m.host_link.bandwidth, m.node.host_memory_bandwidth)
    return 2 * m.pcie.latency, min(m.pcie.bandwidth, m.node.host_memory_bandwidth)


def peer_path(m):
    """Latency and bandwidth of a peer copy from GPU 0 to GPU 1 of a node, peer access enabled:
    NVLink, else PCIe through their switch (or both switches' uplinks) and, on a machine that
    models its sockets (its built-in puts one card on each), the link between the sockets; a
    measured model (copies.peer, the DGX built-ins') instead, its latency raised to the route's."""
    if m.nvlink.topology != "none":
        latency, bandwidth = m.nvlink.latency, m.nvlink_pair_bandwidth
    else:
        same_switch = m.pcie.gpus_per_switch > 1
        latency, bandwidth = (2 if same_switch else 4) * m.pcie.latency, m.pcie.bandwidth
        if m.node.socket_link_bandwidth is not None:
            latency, bandwidth = latency + m.node.socket_link_latency, min(bandwidth, m.node.socket_link_bandwidth)
    if m.copies.peer:
        (seg,) = m.copies.peer
        return max(seg.latency, latency), seg.bandwidth
    return latency, bandwidth


@pytest.mark.parametrize("name", machine.builtin_names())
def test_host_to_device_and_peer_copies_follow_each_machine(run_program, programs, name, tmp_path):
    m = machine.load(name)
    M, S = m.overheads.memcpy, m.overheads.sync
    r = run_ok(
        run_program,
        programs,
        "api",
        str(N),
        options=("--machine", name, "--gpus-per-node", "2", "--ranks-per-node", "1"),
    )
    v = r.values()
    lat, bw = host_path(m)
    assert v["default_h2d"] == pytest.approx(M + lat + N / bw + S, rel=REL)
    lat, bw = peer_path(m)
    assert v["peer"] == pytest.approx(M + lat + N / bw + S, rel=REL)
    assert v["d2d"] == pytest.approx(M + m.gpu.d2d_latency + N / m.gpu.d2d_bandwidth + S, rel=REL)


def test_two_gpus_behind_one_pcie_switch_share_its_uplink(run_program, programs):
    m = machine.load("dgx-h100")  # GPUs 0 and 1 share PCIe switch 0; GPU 2 is on switch 1
    M, S, p = m.overheads.memcpy, m.overheads.sync, m.pcie
    opts = ("--machine", "dgx-h100", "--gpus-per-node", "4", "--ranks-per-node", "1")
    shared = run_ok(run_program, programs, "h2d-two-gpus", str(N), "0", "1", options=opts).values()
    apart = run_ok(run_program, programs, "h2d-two-gpus", str(N), "0", "2", options=opts).values()
    # The host issues copy A at M and copy B at 2M, then waits for A, then for B.
    pl, bw = p.latency, p.bandwidth
    # shared: A runs alone for M, then A and B share the uplink at bw/2 each until A
    # ends; B finishes its last M * bw bytes alone. The uplink never idles in between.
    a_end = 2 * M + pl * 2 + 2 * (N - M * bw) / bw
    b_end = a_end + M
    assert b_end == pytest.approx(M + 2 * pl + 2 * N / bw, rel=REL)  # 2N bytes through one link
    assert shared["elapsed"] == pytest.approx(max(a_end + S, b_end) + S, rel=REL)
    # apart: each at full rate on its own switch
    a_end, b_end = M + 2 * pl + N / bw, 2 * M + 2 * pl + N / bw
    assert apart["elapsed"] == pytest.approx(max(a_end + S, b_end) + S, rel=REL)


def test_each_socket_s_gpu_copies_from_its_own_socket_s_memory(run_program, programs):
    """h100-pcie models its two sockets, one card on each: copies to GPU 0 and GPU 1 at once
    each run at the full PCIe rate from their own socket's memory (neither crosses the 15 GB/s
    link between the sockets), as on their own switches."""
    m = machine.load("h100-pcie")
    M, S, pl, bw = m.overheads.memcpy, m.overheads.sync, m.pcie.latency, m.pcie.bandwidth
    assert bw > m.node.socket_link_bandwidth
    opts = ("--machine", "h100-pcie", "--gpus-per-node", "2", "--ranks-per-node", "1")
    both = run_ok(run_program, programs, "h2d-two-gpus", str(N), "0", "1", options=opts).values()
    a_end, b_end = M + 2 * pl + N / bw, 2 * M + 2 * pl + N / bw
    assert both["elapsed"] == pytest.approx(max(a_end + S, b_end) + S, rel=REL)


def test_two_gpus_on_one_nic_share_it_and_rails_do_not(run_program, programs):
    m = machine.load("dgx-h100")  # GPUs 0 and 1 on PCIe switch 0, with NICs 0 and 1 (rails)
    n = 64_000_000
    opts = ("--machine", "dgx-h100", "--gpus-per-node", "2", "--ranks-per-node", "2", *NO_DEVICE_OVERHEADS)
    rails = run_ok(run_program, programs, "sendrecv-far", str(n), nodes=2, options=opts).values()
    shared = run_ok(
        run_program, programs, "sendrecv-far", str(n), nodes=2, options=(*opts, "--set", "nic.per_node=4")
    ).values()  # GPUs 0 and 1 both use NIC 0
    p, nic, f = m.pcie, m.nic, m.fabric
    # GPU -> port -> switch -> NIC -> rail switch -> NIC -> switch -> port -> GPU
    latency = 4 * p.latency + 2 * nic.latency + f.switch_latency
    eager = m.mpi.eager_threshold_device  # 64 MB messages: rendezvous
    for rank in (0, 1):
        assert rails[f"rank {rank} elapsed"] == pytest.approx(
            wire(latency, n, min(p.bandwidth, nic.bandwidth), eager), rel=REL
        )
        # both exchanges cross NIC 0 in each direction: half of its 400 Gb/s each
        assert shared[f"rank {rank} elapsed"] == pytest.approx(wire(latency, n, nic.bandwidth / 2, eager), rel=REL)


def staged_within_a_node_through_the_nic(run_program, programs, n: int) -> float:
    """Rank 0's time for an n-byte exchange between two GPUs of one node whose messages leave
    through their NICs (mpi.intra_node = "nic"), staged through host memory (no GPUDirect
    RDMA): the route of two nodes under one leaf."""
    v = run_ok(
        run_program,
        programs,
        "sendrecv",
        str(n),
        options=(
            "--gpus-per-node",
            "2",
            "--set",
            "gpudirect.rdma=false",
            "--set",
            'mpi.intra_node="nic"',
            *NO_DEVICE_OVERHEADS,
        ),
    )
    return v.values()["rank 0 elapsed"]


def test_without_gpudirect_rdma_messages_detour_through_the_root_complex(run_program, programs, h100):
    n = 8_000_000
    opts = ("--gpus-per-node", "1", "--ranks-per-node", "1", *NO_DEVICE_OVERHEADS)
    on = run_ok(run_program, programs, "sendrecv", str(n), nodes=2, options=opts).values()
    off = run_ok(
        run_program, programs, "sendrecv", str(n), nodes=2, options=(*opts, "--set", "gpudirect.rdma=false")
    ).values()
    assert on["rank 0 elapsed"] == pytest.approx(gpudirect_message(h100, n), rel=REL)
    expected = staged_message(h100, n)  # two more PCIe hops each side, the pipeline's fill and drain
    assert off["rank 0 elapsed"] == pytest.approx(expected, rel=REL)
    # through the NIC within a node (mpi.intra_node = "nic"): the same time
    assert staged_within_a_node_through_the_nic(run_program, programs, n) == pytest.approx(expected, rel=REL)


def test_staged_message_smaller_than_a_chunk_fills_the_pipeline_with_itself(run_program, programs, h100):
    n = 100_000  # below the 512 KiB chunk
    opts = ("--gpus-per-node", "1", "--ranks-per-node", "1", "--set", "gpudirect.rdma=false", *NO_DEVICE_OVERHEADS)
    off = run_ok(run_program, programs, "sendrecv", str(n), nodes=2, options=opts).values()
    assert n + SMPI_ENVELOPE < h100.gpudirect.staging_chunk and n >= h100.mpi.eager_threshold_device
    expected = staged_message(h100, n)  # the fill and drain are the whole message's copy
    assert off["rank 0 elapsed"] == pytest.approx(expected, rel=REL)
    # through the NIC within a node (mpi.intra_node = "nic"): the same time
    assert staged_within_a_node_through_the_nic(run_program, programs, n) == pytest.approx(expected, rel=REL)


def test_staging_pipeline_rate_is_a_chunk_per_copy(run_program, programs, h100):
    """With a per-copy overhead large enough, the staging pipeline, not the NIC, is the bottleneck."""
    n = 8_000_000
    slow = ("--set", "overheads.memcpy=20us")
    opts = (
        "--gpus-per-node",
        "1",
        "--ranks-per-node",
        "1",
        "--set",
        "gpudirect.rdma=false",
        *slow,
        *NO_DEVICE_OVERHEADS,
    )
    off = run_ok(run_program, programs, "sendrecv", str(n), nodes=2, options=opts).values()
    o, chunk, p, nic, f = 20e-6, h100.gpudirect.staging_chunk, h100.pcie, h100.nic, h100.fabric
    stage = o + chunk / p.bandwidth
    control = 6 * p.latency + 2 * nic.latency + f.switch_latency
    latency = control + 2 * stage + 2 * control  # fill and drain, rendezvous handshake
    assert off["rank 0 elapsed"] == pytest.approx(latency + (n + SMPI_ENVELOPE) / (chunk / stage), rel=REL)


def test_eager_and_rendezvous_follow_the_device_path_threshold(run_program, programs, h100):
    n = 32_768
    opts = ("--gpus-per-node", "2", "--ranks-per-node", "2", *NO_DEVICE_OVERHEADS)
    transfer = h100.nvlink.latency + (n + SMPI_ENVELOPE) / h100.nvlink_pair_bandwidth
    eager = run_ok(run_program, programs, "send-recv", str(n), options=opts).values()
    # below the 64 KiB threshold the send returns at once; the receiver gets the data
    assert (eager["rank 0 elapsed"], eager["rank 1 elapsed"]) == (0, pytest.approx(transfer, rel=REL))
    rdv = run_ok(
        run_program, programs, "send-recv", str(n), options=(*opts, "--set", "mpi.eager_threshold_device=16KiB")
    ).values()
    # at or above it a request to send and a clear to send cross NVLink first, and the sender
    # waits until the receiver has the data
    handshake = 2 * h100.nvlink.latency
    assert rdv["rank 0 elapsed"] == pytest.approx(handshake + transfer, rel=REL)
    assert rdv["rank 1 elapsed"] == pytest.approx(handshake + transfer, rel=REL)
    # a host-buffer threshold does not apply to device buffers
    host = run_ok(
        run_program, programs, "send-recv", str(n), options=(*opts, "--set", "mpi.eager_threshold_host=16KiB")
    ).values()
    assert host["rank 0 elapsed"] == 0


def test_per_message_software_overheads_of_the_device_path(run_program, programs, h100):
    n = 8_000_000
    device = ("mpi.send_overhead_device_intra=2us", "mpi.recv_overhead_device_intra=3us")
    opts = ("--gpus-per-node", "2", *(a for s in device for a in ("--set", s)))
    v = run_ok(run_program, programs, "sendrecv", str(n), options=opts).values()
    transfer = wire(h100.nvlink.latency, n, h100.nvlink_pair_bandwidth, h100.mpi.eager_threshold_device)
    # each rank: its send overhead, then the exchange, then its receive overhead
    assert v["rank 0 elapsed"] == pytest.approx(2e-6 + transfer + 3e-6, rel=REL)
    host_only = run_ok(
        run_program,
        programs,
        "sendrecv",
        str(n),
        options=("--gpus-per-node", "2", "--set", "mpi.send_overhead_host=2us", *NO_DEVICE_OVERHEADS),
    ).values()
    assert host_only["rank 0 elapsed"] == pytest.approx(transfer, rel=REL)  # device buffers: not charged


def test_per_message_overheads_within_a_node_apply_to_messages_within_a_node_only(run_program, programs, h100):
    n = 8_000_000
    intra = ("--set", "mpi.send_overhead_device_intra=2us", "--set", "mpi.recv_overhead_device_intra=3us")
    v = run_ok(run_program, programs, "sendrecv", str(n), options=("--gpus-per-node", "2", *intra)).values()
    transfer = wire(h100.nvlink.latency, n, h100.nvlink_pair_bandwidth, h100.mpi.eager_threshold_device)
    assert v["rank 0 elapsed"] == pytest.approx(2e-6 + transfer + 3e-6, rel=REL)
    # between nodes the path-less overheads apply (h100-ib200's, carried from a measured Open MPI
    # + UCX: calibration/gh200-olivia-ompi-5-ucx-mpirun), not those within a node
    between = run_ok(
        run_program,
        programs,
        "sendrecv",
        str(n),
        nodes=2,
        options=("--gpus-per-node", "1", "--ranks-per-node", "1", *intra),
    ).values()
    send, recv = h100.mpi.overhead("send", "device", False), h100.mpi.overhead("recv", "device", False)
    assert send > 0 and recv > 0
    assert between["rank 0 elapsed"] == pytest.approx(send + gpudirect_message(h100, n) + recv, rel=REL)


def test_messages_within_a_node_through_the_nic(run_program, programs, h100):
    """mpi.intra_node = "nic" (a library with only a network provider): two GPUs of a node on
    rails 0 and 1 exchange through their NICs and leaf switch, exactly as two GPUs of two
    nodes under one leaf; host buffers likewise leave through the NIC, not shared memory."""
    n = 8_000_000
    nic = ("--gpus-per-node", "2", "--set", 'mpi.intra_node="nic"', *NO_SHM_OVERHEADS, *NO_DEVICE_OVERHEADS)
    device = run_ok(run_program, programs, "sendrecv", str(n), options=nic).values()
    assert device["rank 0 elapsed"] == pytest.approx(gpudirect_message(h100, n), rel=REL)
    host = run_ok(run_program, programs, "sendrecv-host", str(n), options=nic).values()
    p, f = h100.pcie, h100.fabric
    latency = 4 * p.latency + 2 * h100.nic.latency + f.switch_latency
    assert host["rank 0 elapsed"] == pytest.approx(
        wire(latency, n, min(p.bandwidth, h100.nic.bandwidth), h100.mpi.eager_threshold_host), rel=REL
    )
    # (peer copies still cross NVLink: gh200-slingshot, "nic" as shipped, passes
    # test_host_to_device_and_peer_copies_follow_each_machine)


def test_three_level_fat_tree_a_message_between_pods_crosses_five_switches(run_program, programs, h100):
    """Nodes 0 and 1 on leaves of their own: in one pod the message crosses leaf, pod spine,
    leaf; in two pods leaf, pod spine, core, pod spine, leaf (a switch latency each)."""
    n = 8_000_000
    opts = (
        "--gpus-per-node",
        "1",
        "--ranks-per-node",
        "1",
        "--set",
        "fabric.nodes_per_leaf=1",
        "--set",
        "fabric.levels=3",
        *NO_DEVICE_OVERHEADS,
    )
    p, nic, f = h100.pcie, h100.nic, h100.fabric
    for leaves_per_pod, switches in ((2, 3), (1, 5)):
        v = run_ok(
            run_program,
            programs,
            "sendrecv",
            str(n),
            nodes=2,
            options=(*opts, "--set", f"fabric.leaves_per_pod={leaves_per_pod}"),
        ).values()
        latency = 4 * p.latency + 2 * nic.latency + switches * f.switch_latency
        expected = wire(latency, n, min(p.bandwidth, nic.bandwidth), h100.mpi.eager_threshold_device)
        assert v["rank 0 elapsed"] == pytest.approx(expected, rel=REL), leaves_per_pod


def test_host_buffer_messages_take_host_routes(run_program, programs, h100):
    n = 8_000_000
    within = run_ok(
        run_program, programs, "sendrecv-host", str(n), options=("--gpus-per-node", "2", *NO_SHM_OVERHEADS)
    ).values()
    # within a node: through shared memory (each rank's copy at the host memcpy rate, a token
    # latency on each side), not NVLink
    assert within["rank 0 elapsed"] == pytest.approx(host_message(h100, n, 1), rel=REL)
    assert within["rank 1 data"] == 1
    # non-blocking calls on host buffers: the ranks stand at their processes while those are pending
    assert within["rank 0 nonblocking"] == pytest.approx(within["rank 0 elapsed"], rel=REL)
    between = run_ok(
        run_program,
        programs,
        "sendrecv-host",
        str(n),
        nodes=2,
        options=("--gpus-per-node", "1", "--ranks-per-node", "1"),
    ).values()
    # between nodes: memory -> the rank's rail NIC (one PCIe hop and the NIC's link) -> fabric -> ...
    p, nic, f = h100.pcie, h100.nic, h100.fabric
    latency = 4 * p.latency + 2 * nic.latency + f.switch_latency
    assert between["rank 0 elapsed"] == pytest.approx(
        wire(latency, n, min(p.bandwidth, nic.bandwidth), h100.mpi.eager_threshold_host), rel=REL
    )


def _dragonfly(nodes_per_router: int, routers_per_group: int, global_bandwidth: str) -> tuple[str, ...]:
    sets = (
        "fabric.topology='dragonfly'",
        f"fabric.nodes_per_leaf={nodes_per_router}",
        f"fabric.routers_per_group={routers_per_group}",
        "fabric.local_bandwidth='50GB/s'",
        f"fabric.global_bandwidth='{global_bandwidth}'",
    )
    return (
        "--gpus-per-node",
        "1",
        "--ranks-per-node",
        "1",
        *(a for s in sets for a in ("--set", s)),
        *NO_DEVICE_OVERHEADS,
    )


def test_dragonfly_minimal_route_crosses_local_then_global_links(run_program, programs, h100):
    """4 nodes, one per router, two routers per group: ranks 0 <-> 2 and 1 <-> 3 cross groups.
    0 -> 2 goes local (g0-r0 -> g0-r1), then global (g0-r1 -> g1-r0); 1 -> 3 goes global, then
    local (g1-r0 -> g1-r1): two switch-to-switch hops each. The fabric is fast here, so each
    message runs at its NIC's rate."""
    n = 8_000_000
    v = run_ok(run_program, programs, "sendrecv-far", str(n), nodes=4, options=_dragonfly(1, 2, "1000GB/s")).values()
    latency = gpudirect_latency(h100) + 2 * h100.fabric.switch_latency
    expected = wire(latency, n, min(h100.pcie.bandwidth, h100.nic.bandwidth), h100.mpi.eager_threshold_device)
    for rank in range(4):
        assert v[f"rank {rank} elapsed"] == pytest.approx(expected, rel=REL)


def test_dragonfly_global_link_is_shared(run_program, programs, h100):
    """Two nodes per router, one router per group: nodes 0, 1 on g0-r0 and 2, 3 on g1-r0.
    Exchanges 0 <-> 2 and 1 <-> 3 both cross the one global link, 10 GB/s each way: half each."""
    n = 8_000_000
    v = run_ok(run_program, programs, "sendrecv-far", str(n), nodes=4, options=_dragonfly(2, 1, "10GB/s")).values()
    latency = gpudirect_latency(h100) + h100.fabric.switch_latency
    for rank in range(4):
        assert v[f"rank {rank} elapsed"] == pytest.approx(
            wire(latency, n, 10e9 / 2, h100.mpi.eager_threshold_device), rel=REL
        )


def host_message(m, n: int, nodes: int) -> float:
    """An n-byte host-buffer message alone: within a node through shared memory, between nodes
    from memory through the NICs (the routes alone: the tests run with NO_SHM_OVERHEADS)."""
    p, nic, f = m.pcie, m.nic, m.fabric
    if nodes == 1:
        return wire(2 * platform.SHM_LATENCY, n, m.node.host_memcpy_bandwidth, m.mpi.eager_threshold_host)
    return wire(
        4 * p.latency + 2 * nic.latency + f.switch_latency,
        n,
        min(p.bandwidth, nic.bandwidth),
        m.mpi.eager_threshold_host,
    )


@pytest.mark.parametrize("nodes", [1, 2])
def test_a_rank_waiting_on_host_and_device_receives_gets_each_message_by_its_own_route(
    run_program, programs, h100, nodes
):
    """Rank 0 waits on a host and a device receive at once; rank 1 sends into them after both
    are posted. Each receive's end is pinned where its buffer is, so the host message ends
    at rank 0's process and the device message at its GPU: within a node through shared
    memory and NVLink, between nodes through the NICs from memory and staged through host
    memory (GPUDirect RDMA off, so that the two routes differ)."""
    n = 1_000_000
    layout = (
        ("--gpus-per-node", "2", *NO_SHM_OVERHEADS, *NO_DEVICE_OVERHEADS)
        if nodes == 1
        else ("--gpus-per-node", "1", "--ranks-per-node", "1", "--set", "gpudirect.rdma=false", *NO_DEVICE_OVERHEADS)
    )
    r = run_ok(run_program, programs, "mixed-wait", str(n), nodes=nodes, options=layout)
    v = r.values()
    assert v["rank 1 host"] == pytest.approx(host_message(h100, n, nodes), rel=REL)
    device = (
        wire(h100.nvlink.latency, n, h100.nvlink_pair_bandwidth, h100.mpi.eager_threshold_device)
        if nodes == 1
        else staged_message(h100, n)
    )
    assert v["rank 1 device"] == pytest.approx(device, rel=REL)
    assert [x["mixed_placement_calls"] for x in r.results["ranks"]] == [0, 0]


def test_persistent_requests_are_pinned_at_each_start(run_program, programs, h100):
    """The same exchange as above with persistent requests (MPI_Recv_init, MPI_Send_init,
    MPI_Ssend_init, MPI_Startall, MPI_Start), started twice: each start pins its message's
    end where its buffer is, so both rounds take the host and the device routes."""
    n = 1_000_000
    r = run_ok(
        run_program,
        programs,
        "mixed-persistent",
        str(n),
        options=("--gpus-per-node", "2", *NO_SHM_OVERHEADS, *NO_DEVICE_OVERHEADS),
    )
    v = r.values()
    device = wire(h100.nvlink.latency, n, h100.nvlink_pair_bandwidth, h100.mpi.eager_threshold_device)
    for round in (0, 1):
        assert v[f"rank 1 host {round}"] == pytest.approx(host_message(h100, n, 1), rel=REL)
        assert v[f"rank 1 device {round}"] == pytest.approx(device, rel=REL)
    assert r.results["ranks"][1]["mpi"]["MPI_Start"]["count"] == 4
    assert r.results["ranks"][0]["mpi"]["MPI_Startall"]["count"] == 2


@pytest.mark.parametrize("nodes", [1, 2])
def test_a_collective_s_messages_keep_the_route_of_the_call_that_posted_them(run_program, programs, h100, nodes):
    """Rank 1 enters two host-buffer broadcasts from rank 0 only after rank 0 has moved on to
    device memory (a device send, then waiting next to its GPU): a non-blocking one, and a
    blocking one whose eager message rank 0 sent before leaving the call. Each message starts
    as rank 1 posts its receive, from rank 0's process, where the broadcast was posted: the
    host route, not the GPU's."""
    n = 1_000_000
    layout = (
        ("--gpus-per-node", "2", *NO_SHM_OVERHEADS)
        if nodes == 1
        else ("--gpus-per-node", "1", "--ranks-per-node", "1", "--set", "gpudirect.rdma=false")
    )
    v = run_ok(run_program, programs, "collective-late", str(n), nodes=nodes, options=layout).values()
    assert v["rank 1 ibcast"] == pytest.approx(host_message(h100, n, nodes), rel=REL)
    assert v["rank 1 bcast"] == pytest.approx(host_message(h100, 4096, nodes), rel=REL)


def test_ready_and_buffered_sends_follow_the_host_path(run_program, programs, h100):
    """Rank 1 stands next to its GPU between calls; its ready and buffered sends of host data
    still leave from its process (shared memory within the node). The 1 MB ready send is at or
    above the eager threshold, so, as a standard send, it is synchronous: it returns as its
    message arrives. The buffered one returns at once; its message arrives as long after."""
    n = 1_000_000
    assert n >= h100.mpi.eager_threshold_host
    v = run_ok(
        run_program, programs, "send-modes", str(n), options=("--gpus-per-node", "2", *NO_SHM_OVERHEADS)
    ).values()
    alone = host_message(h100, n, 1)
    assert v["rank 1 rsend returned"] - v["rank 1 rsend sent"] == pytest.approx(alone, rel=REL)
    assert v["rank 0 rsend arrived"] - v["rank 1 rsend sent"] == pytest.approx(alone, rel=REL)
    assert v["rank 1 bsend returned"] == pytest.approx(v["rank 1 bsend sent"], abs=1e-15)
    assert v["rank 0 bsend arrived"] - v["rank 1 bsend sent"] == pytest.approx(alone, rel=REL)


def test_only_collectives_over_both_kinds_of_buffers_are_counted_and_warned(run_program, programs):
    """Every message is pinned where its rank posted it: point-to-point calls stand at each
    buffer as they post it, whatever else is pending, and none is counted. A collective's
    messages all leave from where the call stands: an allreduce from a host into a device
    buffer sends its host data along the GPU's route. Each such call is counted, and the run
    says so: never silent."""
    r = run_ok(run_program, programs, "mixed", "4096", options=("--gpus-per-node", "2"))
    assert [x["mixed_placement_calls"] for x in r.results["ranks"]] == [1, 1]
    assert "warning: 2 MPI calls on 2 ranks had collectives over host and device buffers" in r.stdout
    for mode in ("sendrecv-host", "isend"):
        pure = run_ok(run_program, programs, mode, "4096", options=("--gpus-per-node", "2"))
        assert [x["mixed_placement_calls"] for x in pure.results["ranks"]] == [0, 0]
        assert "warning" not in pure.stdout


@pytest.mark.parametrize("nodes", [1, 2])
def test_a_host_message_posted_with_device_data_pending_takes_the_host_route(run_program, programs, h100, nodes):
    """Rank 0 has a device receive pending when it posts a host-buffer send whose receive is
    posted already: the message starts during the post, so it leaves from rank 0's process, not
    its GPU. Within a node through shared memory (not NVLink), between nodes from memory through
    the NICs (not staged through host memory, as a device message without GPUDirect RDMA is)."""
    n = 1_000_000
    layout = (
        ("--gpus-per-node", "2", *NO_SHM_OVERHEADS)
        if nodes == 1
        else ("--gpus-per-node", "1", "--ranks-per-node", "1", "--set", "gpudirect.rdma=false")
    )
    v = run_ok(run_program, programs, "mixed-post", str(n), nodes=nodes, options=layout).values()
    assert v["rank 1 arrived"] - v["rank 0 sent"] == pytest.approx(host_message(h100, n, nodes), rel=REL)
