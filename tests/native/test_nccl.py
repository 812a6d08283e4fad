"""NCCL simulated (issue 19): a program written for the tests (programs/nccl_calls.cu, built against
NCCL's real header) on dgx-h100, its NCCL times derived by hand from the model docs/nccl.md states:
a collective takes its base latency (nccl.base_latency_<algo>_<proto>), then its schedule's
transfers, each after the data it forwards, waiting NCCL's per-step latency of its link class
(NCCL's hwLatencies: Ring/Simple 3.4 us on NVLink and 14 us on the network, Ring/LL 0.6 us on
NVLink) or its route's own latency if longer, and moving its bytes (x2 for LL) divided by the link's
efficiency at the route's bottleneck bandwidth. NCCL_ALGO / NCCL_PROTO / NCCL_*_NCHANNELS pin the
choice, as a user would, so that the derivations need not redo NCCL's tuning (test_nccl_tuning.py
checks the choices)."""

from __future__ import annotations

import json
import math

import pytest
from conftest import orrery

from orrery import machines

pytestmark = pytest.mark.native

US = 1e-6
RING_SIMPLE_NVLINK, RING_SIMPLE_NET, RING_LL_NVLINK = 3.4 * US, 14.0 * US, 0.6 * US  # NCCL tuning.cc hwLatencies


@pytest.fixture(scope="module")
def dgx():
    return machines.load("dgx-h100")


def nvlink_step(m, data: float, step_latency: float, wire: float = 1.0) -> float:
    """One transfer between two GPUs of a node: the step's latency (at least the route's: two
    NVLink hops through the NVSwitch), then the bytes at the GPU's NVLink bandwidth."""
    route = m.nvlink.latency
    moved = math.ceil(data * wire / m.nccl.efficiency_nvlink)
    return max(step_latency, route) + moved / m.nvlink_pair_bandwidth


def net_step(m, data: float) -> float:
    moved = math.ceil(data / m.nccl.efficiency_net)
    return RING_SIMPLE_NET + moved / min(m.nic.bandwidth, m.pcie.bandwidth)


def nccl_entry(run, rank: int, name: str):
    assert run.returncode == 0, run.stderr
    entries = run.results["ranks"][rank]["nccl"]
    assert list(entries) == [name], entries
    return entries[name]


def pinned(monkeypatch, algo: str, proto: str, channels: int | None = None) -> None:
    monkeypatch.setenv("NCCL_ALGO", algo)
    monkeypatch.setenv("NCCL_PROTO", proto)
    if channels:
        monkeypatch.setenv("NCCL_MIN_NCHANNELS", str(channels))
        monkeypatch.setenv("NCCL_MAX_NCHANNELS", str(channels))


def one_node(gpus: int) -> tuple[str, ...]:
    return ("--machine", "dgx-h100", "--gpus-per-node", str(gpus), "--ranks-per-node", str(gpus))


def test_ring_allreduce_is_its_base_latency_and_2n_minus_2_steps_of_a_chunk(run_program, programs, dgx, monkeypatch):
    pinned(monkeypatch, "Ring", "Simple")
    size = 4 << 20
    r = run_program(programs["nccl_calls"], "coll", "allreduce", str(size), options=one_node(4))
    expected = dgx.nccl.base_latency_ring_simple + 6 * nvlink_step(dgx, size / 4, RING_SIMPLE_NVLINK)
    for rank in range(4):
        t = nccl_entry(r, rank, "ncclAllReduce Ring/Simple")
        assert (t["count"], t["bytes"]) == (1, size)
        assert t["time_s"] == pytest.approx(expected, rel=1e-9)


def test_ll_puts_a_flag_beside_every_8_bytes_and_its_step_is_the_route_s_latency(
    run_program, programs, dgx, monkeypatch
):
    pinned(monkeypatch, "Ring", "LL")
    size = 64 << 10
    r = run_program(programs["nccl_calls"], "coll", "allgather", str(size), options=one_node(4))
    # allgather: n - 1 steps, each of one rank's share; LL's 0.6 us step is below the route's 1 us
    expected = dgx.nccl.base_latency_ring_ll + 3 * nvlink_step(dgx, size, RING_LL_NVLINK, wire=2.0)
    t = nccl_entry(r, 0, "ncclAllGather Ring/LL")
    assert t["time_s"] == pytest.approx(expected, rel=1e-9)


def test_broadcast_streams_along_the_chain_each_hop_starting_once_a_512_kib_chunk_landed(
    run_program, programs, dgx, monkeypatch
):
    pinned(monkeypatch, "Ring", "Simple", channels=1)
    size = 2 << 20
    r = run_program(programs["nccl_calls"], "coll", "broadcast", str(size), options=one_node(4))
    # 3 hops: each starts its bytes its step latency after its upstream's first chunk (Simple: one
    # channel step, 512 KiB) arrived; the last one then moves the whole buffer
    chunk = (512 << 10) / dgx.nvlink_pair_bandwidth
    whole = math.ceil(size / dgx.nccl.efficiency_nvlink) / dgx.nvlink_pair_bandwidth
    expected = dgx.nccl.base_latency_ring_simple + 3 * RING_SIMPLE_NVLINK + 2 * chunk + whole
    for rank in range(4):
        assert nccl_entry(r, rank, "ncclBroadcast Ring/Simple")["time_s"] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("step", [None, 7 * US])
def test_an_nvls_allreduce_waits_one_nvls_step_latency_its_machine_key(run_program, programs, dgx, monkeypatch, step):
    """NVLS: each GPU's NVLink carries S (1 + 1/n) at nvls_efficiency, every GPU at once, after one
    NVLS step latency: the machine's nccl.step_latency_nvls (NCCL's 25 us, hwLatencies of NVLS on
    NVLink, unless fitted), or what --set gives it."""
    pinned(monkeypatch, "NVLS", "Simple")
    size, n = 1 << 20, 4
    options = one_node(n) + (("--set", f"nccl.step_latency_nvls={step / US}us") if step is not None else ())
    r = run_program(programs["nccl_calls"], "coll", "allreduce", str(size), options=options)
    latency = dgx.nccl.step_latency_nvls if step is None else step
    moved = math.ceil(size * (1 + 1 / n) / dgx.nccl.nvls_efficiency)
    expected = dgx.nccl.base_latency_nvls_simple + max(latency, dgx.nvlink.latency) + moved / dgx.nvlink_pair_bandwidth
    for rank in range(n):
        assert nccl_entry(r, rank, "ncclAllReduce NVLS/Simple")["time_s"] == pytest.approx(expected, rel=1e-9)


def ring_finish(durations: list[float], steps: int) -> float:
    """When the last transfer of a ring arrives: position p's step s starts once its own step s-1
    and its predecessor's step s-1 (the data it forwards) are done; each takes durations[p]."""
    n = len(durations)
    done = [0.0] * n
    for _ in range(steps):
        done = [max(done[p], done[(p - 1) % n]) + durations[p] for p in range(n)]
    return max(done)


def test_a_ring_across_two_nodes_waits_for_its_network_hops(run_program, programs, dgx, monkeypatch):
    pinned(monkeypatch, "Ring", "Simple", channels=1)
    size = 1 << 20
    options = ("--machine", "dgx-h100", "--gpus-per-node", "2", "--ranks-per-node", "2")
    r = run_program(programs["nccl_calls"], "coll", "allreduce", str(size), options=options, nodes=2)
    # one channel's ring: 0 -> 1 (NVLink) -> 3 (network) -> 2 (NVLink) -> 0 (network), the second
    # node entered through the GPU of the first node's exit rail
    chunk = size / 4
    hops = [nvlink_step(dgx, chunk, RING_SIMPLE_NVLINK), net_step(dgx, chunk)] * 2
    expected = dgx.nccl.base_latency_ring_simple + ring_finish(hops, 6)
    assert nccl_entry(r, 0, "ncclAllReduce Ring/Simple")["time_s"] == pytest.approx(expected, rel=1e-9)


NVLS_TREE_SIMPLE_NET = 20.9 * US  # NCCL tuning.cc hwLatencies: NVLSTree/Simple on the network


@pytest.mark.parametrize("nodes", [4, 8, 16])
def test_nvls_tree_crosses_nodes_up_and_down_a_tree_whose_depth_grows_as_log2_nodes(
    run_program, programs, dgx, monkeypatch, nodes
):
    """NVLSTree: NVLS within each node and, between nodes, each GPU's share reduced with the same
    GPU of the other nodes (its rail) up NCCL's double binary tree and broadcast back down, half
    the share on each tree; the trees' depth is ceil(log2 nodes) (2, 3 and 4 here), not a ring's
    2 (nodes - 1) steps (6, 14 and 30: 24 of them 20.9 us apart at 16 nodes). 2 GPUs per node, 64
    bytes: each tree edge carries b = 64 / 2 GPUs / 2 trees = 16 bytes. Along the deepest path
    (D edges up, D down) an edge waits NCCL's step latency L beyond its route's latency r (leaf
    edges from the start; the others once the first chunk of what they forward has landed, r +
    b / B after their upstream began), then moves its bytes in r + b / B (B: the route's narrowest
    link, NIC or PCIe): the last edge ends at (L - r) + (2D - 1)(r + b/B + L - r) + r + b/B =
    2D (L + b/B), r cancelling. Within the nodes NVLS takes its 25 us step and 16 x 1.5 bytes at
    once, which the trees outlast. Siblings send to their parent at the same instant and share its
    NIC for their 16 bytes: a few 1e-10 s of the time, within the 1 ns asked."""
    pinned(monkeypatch, "NVLSTree", "Simple")
    size = 64
    options = ("--machine", "dgx-h100", "--gpus-per-node", "2", "--ranks-per-node", "2")
    r = run_program(programs["nccl_calls"], "coll", "allreduce", str(size), options=options, nodes=nodes)
    depth = math.ceil(math.log2(nodes))
    b = size / 2 / 2
    bandwidth = min(dgx.nic.bandwidth, dgx.pcie.bandwidth)
    assert math.ceil(b / dgx.nccl.efficiency_net) == b  # moves its bytes as they are
    expected = dgx.nccl.base_latency_nvls_tree_simple + 2 * depth * (NVLS_TREE_SIMPLE_NET + b / bandwidth)
    assert dgx.nccl.step_latency_nvls < expected / 2
    for rank in range(2 * nodes):
        t = nccl_entry(r, rank, "ncclAllReduce NVLSTree/Simple")
        assert (t["count"], t["bytes"]) == (1, size)
        assert t["time_s"] == pytest.approx(expected, abs=1e-9)


def test_a_tree_allreduce_loads_each_node_s_nic_as_nccl_s_double_binary_tree_does(run_program, programs, monkeypatch):
    """Tree/Simple allreduce of S = 1 MiB on 8 nodes of one GPU: half the data up and down each of
    NCCL's two trees between the nodes. The first, in order from position 0: 0-4, 4-2, 4-6, 2-1,
    2-3, 6-5, 6-7; the second its mirror (p to 7 - p): 7-3, 3-5, 3-1, 5-6, 5-4, 1-2, 1-0. A node's
    NIC carries, each way, S/2 for every edge it has in either tree: nodes 0 and 7 one edge in
    each (S), the others three in one and one in the other (2 S). One tree of all the data (a
    heap: node 1 under 0, with 3 and 4 under it) loaded nodes 1 and 2 with 3 S."""
    pinned(monkeypatch, "Tree", "Simple")
    size = 1 << 20
    options = ("--machine", "dgx-h100", "--gpus-per-node", "1", "--ranks-per-node", "1")
    r = run_program(programs["nccl_calls"], "coll", "allreduce", str(size), options=options, nodes=8)
    assert r.returncode == 0, r.stderr
    assert r.results["physics_violations"] == []
    links = {link["name"]: link for link in r.results["links"]}
    edges = {0: 2, 1: 4, 2: 4, 3: 4, 4: 4, 5: 4, 6: 4, 7: 2}
    for node, count in edges.items():
        for direction in ("UP", "DOWN"):
            carried = links[f"n{node}-nic0-ib_{direction}"]["bytes"]
            assert count * size / 2 <= carried < count * size / 2 + 1024  # and the MPI bootstrap's messages


def test_an_all_to_all_s_transfers_that_start_together_share_every_link_they_cross(run_program, programs, dgx):
    """ncclAlltoAll of 1 MiB per rank on 2 dgx-h100 nodes: 64 KiB from every GPU to every other,
    the 128 between the nodes through the 16 NICs, 8 through each NIC in each direction, all at
    once. No link carries more than its capacity over the time it is busy, so each NIC is busy at
    least 8 x 64 KiB / 50 GB/s = 10.5 us. SimGrid 3.32's selective bandwidth update, Orrery's
    setting until 2026-12-06, left some of these links out of the sharing when the transfers'
    latencies ended together: eight transfers at 50 GB/s each through one NIC, busy 1.3 us."""
    size = 1 << 20
    options = ("--machine", "dgx-h100", "--gpus-per-node", "8", "--ranks-per-node", "8")
    r = run_program(programs["nccl_calls"], "coll", "alltoall", str(size), options=options, nodes=2)
    assert r.returncode == 0, r.stderr
    assert r.results["physics_violations"] == []
    links = {link["name"]: link for link in r.results["links"]}
    share = size // 16
    for node in range(2):
        for nic in range(8):
            for direction in ("UP", "DOWN"):
                link = links[f"n{node}-nic{nic}-ib_{direction}"]
                assert 8 * share <= link["bytes"] < 8 * share + 1024  # and the MPI bootstrap's messages
                assert link["busy_s"] >= 8 * share / dgx.nic.bandwidth * (1 - 1e-9)
    for link in links.values():
        assert link["bytes"] <= link["capacity_Bps"] * link["busy_s"] * (1 + 1e-9)


def test_simgrid_s_own_selective_update_mis_shares_that_all_to_all_and_the_run_says_so(programs, dgx, tmp_path):
    """The same all-to-all with SimGrid 3.32's own marking of a changed flow's links for its
    selective update (ORRERY_SMPI_LMM=simgrid): of each flow whose latency ended, it marks only the
    first link, and none when that one was marked already (interpose/mpi/smpi_lmm.cpp). Some of
    the transfers then go at their lone rate through the links they share (PCIe, NICs): each such
    link carries more than its capacity over the time it is busy, and the run's physics check
    names every one. The test above passes with liborrery_smpi.so's marking, under the same lazy
    update (launch.bandwidth_sharing)."""
    size = 1 << 20
    out = tmp_path / "simgrid"
    options = ("--machine", "dgx-h100", "--gpus-per-node", "8", "--ranks-per-node", "8", "--nodes", "2")
    proc = orrery(
        "run",
        *options,
        "--out",
        str(out),
        "--",
        str(programs["nccl_calls"]),
        "coll",
        "alltoall",
        str(size),
        env={"ORRERY_SMPI_LMM": "simgrid"},
    )
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    links = {link["name"]: link for link in results["links"]}
    over = {n for n, link in links.items() if link["bytes"] > link["capacity_Bps"] * link["busy_s"] * (1 + 1e-9)}
    # among them NICs' network links, each shared by 8 transfers that started together
    assert any(n.startswith(f"n{node}-nic") and n.endswith(("-ib_UP", "-ib_DOWN")) for n in over for node in (0, 1))
    named = " ".join(results["physics_violations"])
    assert all(n in named for n in over), results["physics_violations"]


def test_grouped_sends_and_receives_all_travel_at_once(run_program, programs, dgx):
    size = 1 << 20
    r = run_program(programs["nccl_calls"], "ring", str(size), options=one_node(4))
    # every rank sends to the next while receiving from the previous: no deadlock, no contention
    expected = nvlink_step(dgx, size, RING_SIMPLE_NVLINK)
    assert r.returncode == 0, r.stderr
    for rank in range(4):
        entries = r.results["ranks"][rank]["nccl"]
        assert sorted(entries) == ["ncclRecv p2p/Simple", "ncclSend p2p/Simple"]
        for e in entries.values():
            assert (e["count"], e["bytes"]) == (1, size)
            assert e["time_s"] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("ranks", [2, 8])
def test_ranks_that_create_a_communicator_at_the_same_time_all_join_it(run_program, programs, ranks):
    """nccl-tests' order: the id broadcast, a barrier, then every rank's init at once. Making the id's
    communicator takes a simcall, in which the other ranks ran: two once made one each (a deadlock,
    or a crash on the one dropped)."""
    r = run_program(programs["nccl_calls"], "together", options=one_node(ranks))
    assert r.returncode == 0, r.stderr
    lines = sorted(line for line in r.stdout.splitlines() if ": rank " in line)
    assert lines == sorted(f"rank {i}: rank {i} of {ranks}" for i in range(ranks))


@pytest.mark.parametrize("what", ["allreduce", "ring"])
def test_nccl_calls_captured_in_a_graph_run_at_each_launch_and_pair_across_ranks(
    run_program, programs, dgx, monkeypatch, what
):
    """A CUDA graph that captured an NCCL call runs it at each launch, as nccl-tests' -G and
    NVIDIA's nccl_graphs Jacobi do: every member's n-th launch pairs with the others' (NCCL numbers
    the launches of a captured collective, not the capture); the calls outside the graph after it
    pair as well. Each is alone on its stream, so each takes the time of one."""
    pinned(monkeypatch, "Ring", "Simple")
    size, launches = 1 << 20, 3
    r = run_program(programs["nccl_calls"], "graph", what, str(size), str(launches), options=one_node(4))
    assert r.returncode == 0, r.stderr
    if what == "allreduce":
        once = {
            "ncclAllReduce Ring/Simple": dgx.nccl.base_latency_ring_simple
            + 6 * nvlink_step(dgx, size / 4, RING_SIMPLE_NVLINK)
        }
    else:
        once = dict.fromkeys(["ncclRecv p2p/Simple", "ncclSend p2p/Simple"], nvlink_step(dgx, size, RING_SIMPLE_NVLINK))
    for rank in range(4):
        entries = r.results["ranks"][rank]["nccl"]
        assert sorted(entries) == sorted(once)
        for name, t in once.items():
            assert (entries[name]["count"], entries[name]["bytes"]) == (launches + 1, (launches + 1) * size)
            assert entries[name]["time_s"] == pytest.approx((launches + 1) * t, rel=1e-9)


def test_an_allreduce_waits_for_the_kernel_before_it_on_its_stream(run_program, programs, tmp_path, monkeypatch):
    pinned(monkeypatch, "Ring", "Simple")
    r = run_program(programs["nccl_calls"], "ordered", str(1 << 20), options=(*one_node(2), "--trace"))
    assert r.returncode == 0, r.stderr
    events = json.loads((r.out / "trace.json").read_text())["traceEvents"]
    slices = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "nccl")]
    assert sorted({e["pid"] for e in slices}) == [1, 2]  # a process per rank (docs/trace.md)
    for pid in (1, 2):
        mine = [e for e in slices if e["pid"] == pid]
        kinds = [(e["cat"], e["name"]) for e in sorted(mine, key=lambda e: e["ts"])]
        assert kinds == [("kernel", "busy()"), ("nccl", "ncclAllReduce")]
        kernel, nccl = sorted(mine, key=lambda e: e["ts"])
        assert nccl["ts"] >= kernel["ts"] + kernel["dur"]


def test_one_process_drives_eight_gpus_as_nccl_tests_g_8_does(run_program, programs):
    options = ("--machine", "dgx-h100", "--gpus-per-node", "8", "--ranks-per-node", "1")
    r = run_program(programs["nccl_calls"], "single", "8", str(1 << 20), options=options)
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if line.startswith("comm ")]
    assert lines == [f"comm {i}: device {i} rank {i} of 8" for i in range(8)]
    (name, entry), *rest = r.results["ranks"][0]["nccl"].items()
    assert not rest and name.startswith("ncclAllReduce ") and entry["count"] == 8


def test_split_by_parity_ranks_by_key(run_program, programs):
    r = run_program(programs["nccl_calls"], "split", options=one_node(4))
    assert r.returncode == 0, r.stderr
    lines = sorted(line for line in r.stdout.splitlines() if ": rank " in line)
    assert lines == [
        "rank 0: rank 0 of 2 in color 0",
        "rank 1: rank 0 of 2 in color 1",
        "rank 2: rank 1 of 2 in color 0",
        "rank 3: rank 1 of 2 in color 1",
    ]


def test_a_bad_nccl_algo_stops_the_run_with_one_line(run_program, programs, monkeypatch):
    monkeypatch.setenv("NCCL_ALGO", "rings")
    r = run_program(programs["nccl_calls"], "coll", "allreduce", "8", options=one_node(2))
    assert r.returncode == 3
    assert r.stderr.splitlines()[-1].startswith('orrery: error: NCCL_ALGO="rings": unknown algorithm "rings"')


def test_the_nccl_frame_lists_each_rank_s_operations(run_program, programs, monkeypatch):
    pinned(monkeypatch, "Ring", "Simple")
    r = run_program(programs["nccl_calls"], "coll", "reducescatter", "4096", "3", options=one_node(2))
    assert r.returncode == 0, r.stderr
    from orrery import load

    frame = load(r.out).to_frame("nccl")
    assert list(frame.columns) == ["rank", "operation", "count", "time_s", "bytes"]
    assert frame[["rank", "operation", "count", "bytes"]].values.tolist() == [
        [0, "ncclReduceScatter Ring/Simple", 3, 3 * 4096],
        [1, "ncclReduceScatter Ring/Simple", 3, 3 * 4096],
    ]
    assert "ncclReduceScatter Ring/Simple" in r.stdout  # the summary's NCCL lines


def test_the_report_breaks_nccl_time_out_by_operation_and_algorithm(run_program, programs, tmp_path, monkeypatch):
    pinned(monkeypatch, "Ring", "Simple")
    r = run_program(programs["nccl_calls"], "coll", "allreduce", "65536", "2", options=one_node(2))
    assert r.returncode == 0, r.stderr
    from orrery import load, report

    res = load(r.out)
    rep = report.build(res)
    per_rank = [res.ranks[k].nccl["ncclAllReduce Ring/Simple"] for k in range(2)]
    assert rep.nccl[["operation", "algorithm", "count", "bytes"]].values.tolist() == [
        ["ncclAllReduce", "Ring/Simple", 4, 65536]
    ]
    assert rep.nccl["total_s"].iloc[0] == pytest.approx(math.fsum(t.time_s for t in per_rank), rel=1e-12)
    written = report.write(rep, tmp_path / "rep", formats=("svg",))
    assert (tmp_path / "rep" / "nccl_operations.csv") in written
    body = (tmp_path / "rep" / "report.md").read_text()
    assert "## NCCL operations" in body and "| ncclAllReduce | Ring/Simple |" in body.replace("  ", " ")
