"""Link utilisation (interpose/core/links.cpp, results.json `links`): the bytes each link direction
carried and its busy time, derived by hand from the machine's parameters for lone transfers and
two that share a link; invariants, the rate series and determinism on a mix of transfers."""

from __future__ import annotations

import collections
import itertools
import json

import pytest
from derivations import SMPI_ENVELOPE

from orrery.machines import platform
from orrery.run import launch

pytestmark = pytest.mark.native

N = 1 << 20
REL = 1e-9
US = 1e-6


def links_of(run) -> dict[str, dict]:
    assert run.returncode == 0, run.stderr
    return {link["name"]: link for link in run.results["links"]}


def test_a_lone_copy_carries_its_bytes_on_its_pcie_path_alone_busy_for_its_transfer_time(run_program, programs, h100):
    """An H2D copy of N bytes from pinned memory (h100-ib200: its own PCIe switch per GPU) crosses
    host memory, the switch's uplink, the GPU's port and its x16 link, towards the GPU (each
    link's UP direction, declared from the host side): each carries exactly N bytes and is busy
    for N / PCIe bandwidth, not for the route's latency (1 us, two PCIe hops), while nothing
    moves. No other link carries anything."""
    r = run_program(programs["links"], "h2d", str(N), options=("--gpus-per-node", "1"))
    links = links_of(r)
    pcie, memory = h100.pcie.bandwidth, h100.node.host_memory_bandwidth
    expected = {  # name: (kind, capacity)
        "n0-gpu0-pcie_UP": ("pcie", pcie),
        "n0-gpu0-sw_UP": ("pcie", pcie),
        "n0-mem_UP": ("memory", memory),
        "n0-up0_UP": ("pcie", pcie),
    }
    assert list(links) == sorted(expected)  # equal bytes: by name
    transfer = N / pcie
    for name, (kind, capacity) in expected.items():
        assert (links[name]["kind"], links[name]["capacity_Bps"], links[name]["bytes"]) == (kind, capacity, N)
        assert links[name]["busy_s"] == pytest.approx(transfer, rel=REL)
    copy = r.results["ranks"][0]["copies"]["H2D"]["time_s"]
    assert copy == pytest.approx(2 * h100.pcie.latency + transfer, rel=REL)
    # the summary names the link used most of its capacity: three PCIe links at N over the
    # makespan (the copy's issue, latency and transfer, and the synchronisation), first by name
    makespan = h100.overheads.memcpy + 2 * h100.pcie.latency + transfer + h100.overheads.sync
    assert r.results["makespan_s"] == pytest.approx(makespan, rel=REL)
    share = f"{100 * transfer / makespan:.1f}%"
    line = (
        f"busiest link (by utilisation): n0-gpu0-pcie_UP (pcie), {N / 1e6:.3f} MB in {transfer / US:.3f} us "
        f"busy ({share} of the run), {share} of its {pcie / 1e9:.3f} GB/s over the run"
    )
    assert line in r.stdout.splitlines()
    assert not (r.out / "link_series.tsv").exists()  # only when asked for


def test_a_device_message_between_nodes_loads_each_link_of_its_gpudirect_route(run_program, programs, h100):
    """An MPI message of N bytes from GPU memory on node 0 to GPU memory on node 1, the nodes under
    two leaves (fabric.nodes_per_leaf = 1): GPU -> x16 link -> the switch's peer-to-peer port to
    the rail's NIC -> NIC -> leaf 0 -> spine -> leaf 1 -> NIC -> ... -> GPU. Each link carries
    the message and SMPI's envelope, busy for that at the narrowest link (the 200 Gb/s NIC; the
    leaves' uplinks carry one NIC's bandwidth each); the rendezvous handshake (N is above the
    eager threshold) is latency, moving nothing."""
    options = ("--gpus-per-node", "1", "--set", "fabric.nodes_per_leaf=1")
    links = links_of(run_program(programs["links"], "send", str(N), options=options, nodes=2))
    pcie, nic = h100.pcie.bandwidth, h100.nic.bandwidth
    expected = {
        "n0-gpu0-pcie_DOWN": ("pcie", pcie),  # declared from the switch's side: out of the GPU is DOWN
        "n0-gpu0-nic0_UP": ("pcie", pcie),
        "n0-nic0-pcie_UP": ("pcie", pcie),
        "n0-nic0-ib_UP": ("nic", nic),
        "leaf0-up_UP": ("fabric-leaf", nic),
        "leaf1-up_DOWN": ("fabric-leaf", nic),
        "n1-nic0-ib_DOWN": ("nic", nic),
        "n1-nic0-pcie_DOWN": ("pcie", pcie),
        "n1-gpu0-nic0_DOWN": ("pcie", pcie),
        "n1-gpu0-pcie_UP": ("pcie", pcie),
    }
    assert sorted(links) == sorted(expected)
    carried = N + SMPI_ENVELOPE
    for name, (kind, capacity) in expected.items():
        assert (links[name]["kind"], links[name]["capacity_Bps"], links[name]["bytes"]) == (kind, capacity, carried)
        assert links[name]["busy_s"] == pytest.approx(carried / nic, rel=REL)


def test_two_copies_sharing_a_switch_uplink_add_their_bytes_and_its_busy_time_is_the_union(run_program, programs, h100):
    """Two GPUs behind one PCIe switch (pcie.gpus_per_switch = 2), one rank copying N bytes to
    each, the second issued one copy overhead (o) after the first: the shared uplink and host
    memory carry 2N, at the full PCIe rate B whenever either copy moves, so they are busy 2N / B,
    the union. Each GPU's own links carry N: the first copy alone for o, then both at B / 2 until
    it ends at 2N / B - o; the second then alone for o: each busy 2N / B - o, whose sum is more
    than the uplink's busy time by 2N / B - 2o."""
    options = ("--gpus-per-node", "2", "--ranks-per-node", "1", "--set", "pcie.gpus_per_switch=2")
    links = links_of(run_program(programs["links"], "two-h2d", str(N), options=options))
    b, o = h100.pcie.bandwidth, h100.overheads.memcpy
    shared = {"n0-mem_UP", "n0-up0_UP"}
    own = {f"n0-gpu{g}-{link}_UP" for g in (0, 1) for link in ("sw", "pcie")}
    assert set(links) == shared | own
    assert list(links)[:2] == sorted(shared)  # the most bytes first
    for name in shared:
        assert links[name]["bytes"] == 2 * N
        assert links[name]["busy_s"] == pytest.approx(2 * N / b, rel=REL)
    for name in own:
        assert links[name]["bytes"] == N
        assert links[name]["busy_s"] == pytest.approx(2 * N / b - o, rel=REL)
    assert links["n0-up0_UP"]["busy_s"] < links["n0-gpu0-pcie_UP"]["busy_s"] + links["n0-gpu1-pcie_UP"]["busy_s"]


def test_a_run_that_ends_mid_transfer_counts_what_moved_until_then(programs, h100, tmp_path):
    """An H2D copy of N bytes on a non-blocking stream, then a synchronous D2H copy of 4 kB, then
    MPI_Abort: the run ends with the big copy on its way. It started moving at o (its issue) + L
    (its route's latency), the abort comes at 2o + L + 4 kB / B + the synchronisation: the big
    copy's links carried B (o + sync) + 4 kB by then and were busy all that time, the small one's
    (the other direction) 4 kB. The series' last rate of the big copy's links is its rate, held
    until the run's end."""
    opts = launch.RunOptions(
        machine=h100,
        layout=platform.Layout.for_machine(h100, 1, 1),
        program=[str(programs["links"]), "abort-mid-copy", str(N)],
        out=tmp_path,
        link_series=True,
        capture_output=True,
    )
    res = launch.run(opts).results
    assert res.status == "aborted"
    b, o, sync, small = h100.pcie.bandwidth, h100.overheads.memcpy, h100.overheads.sync, 4096
    assert res.makespan_s == pytest.approx(2 * o + 2 * h100.pcie.latency + small / b + sync, rel=REL)
    links = {link.name: link for link in res.links}
    path = ("n0-mem", "n0-up0", "n0-gpu0-sw", "n0-gpu0-pcie")
    assert set(links) == {f"{name}{d}" for name in path for d in ("_UP", "_DOWN")}
    for name in path:
        big, back = links[name + "_UP"], links[name + "_DOWN"]
        assert big.bytes == pytest.approx(b * (o + sync) + small, rel=REL)
        assert big.busy_s == pytest.approx(o + sync + small / b, rel=REL)
        assert (back.bytes, back.busy_s) == (small, pytest.approx(small / b, rel=REL))
    last = {}
    for line in (tmp_path / "link_series.tsv").read_text().splitlines()[1:]:
        t, name, rate = line.split("\t")
        last[name] = (float(t), float(rate))
    assert last["n0-gpu0-pcie_UP"][1] == b and last["n0-gpu0-pcie_DOWN"][1] == 0


def mix(programs, h100, out):
    """Four ranks on 2 nodes x 2 GPUs: copies both ways, a device ring exchange (NVLink within a
    node, NICs between), a host allreduce (shared memory within a node, NIC DMA between)."""
    opts = launch.RunOptions(
        machine=h100,
        layout=platform.Layout.for_machine(h100, 2, 2),
        program=[str(programs["links"]), "mix", str(N)],
        out=out,
        link_series=True,
        capture_output=True,
    )
    outcome = launch.run(opts)
    assert outcome.exit_code == 0
    return outcome.results


def test_links_obey_their_capacity_and_the_series_integrates_to_their_figures_the_same_every_run(
    programs, h100, tmp_path
):
    """On a mix of every kind of transfer: no link carries more than its capacity over its busy
    time, nor is busy longer than the run; link_series.tsv, a step function per link direction
    (each rate holds until the link's next row), integrates to each link's bytes and busy time and
    ends at 0 for a completed run; two runs write identical results and series."""
    res = mix(programs, h100, tmp_path / "a")
    assert {link.kind for link in res.links} == {"memory", "pcie", "nvlink", "nic", "shared-memory"}
    assert [(-x.bytes, x.name) for x in res.links] == sorted((-x.bytes, x.name) for x in res.links)
    span = res.makespan_s
    for link in res.links:
        assert link.bytes <= link.capacity_Bps * link.busy_s * (1 + REL)
        assert 0 < link.busy_s <= span
    lines = (tmp_path / "a" / "link_series.tsv").read_text().splitlines()
    assert lines[0] == "time_s\tlink\tbytes_per_s"
    series = collections.defaultdict(list)
    for line in lines[1:]:
        t, name, rate = line.split("\t")
        series[name].append((float(t), float(rate)))
    assert sorted(series) == sorted(link.name for link in res.links)
    for link in res.links:
        steps = series[link.name]
        assert [t for t, _ in steps] == sorted(t for t, _ in steps) and steps[-1][1] == 0
        spans = [(t1, t2, rate) for (t1, rate), (t2, _) in itertools.pairwise(steps)]
        assert sum(rate * (t2 - t1) for t1, t2, rate in spans) == pytest.approx(link.bytes, rel=REL)
        assert sum(t2 - t1 for t1, t2, rate in spans if rate > 0) == pytest.approx(link.busy_s, rel=REL)
        assert max(rate for _, _, rate in spans) <= link.capacity_Bps * (1 + REL)
    again = mix(programs, h100, tmp_path / "b")
    assert again.links == res.links
    for name in ("results.json", "link_series.tsv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert json.loads((tmp_path / "a" / "results.json").read_text())["links"][0]["name"] == res.links[0].name


@pytest.mark.parametrize(
    ("name", "program", "args", "nodes", "gpus"),
    [
        ("h100-ib200", "links", ("mix", str(N)), 2, 2),  # copies, NVLink, NICs, shared memory, NIC DMA
        ("dgx-h100", "nccl_calls", ("coll", "allreduce", str(64 * N)), 2, 8),  # NCCL's rings on the rails
    ],
)
def test_the_structured_platform_gives_the_flat_platform_s_run_byte_for_byte(
    name, program, args, nodes, gpus, programs, tmp_path, monkeypatch
):
    """The platform SimGrid loads from platform.json (liborrery_platform.so) and the same platform
    as one flat XML zone (what orrery run writes without the plugin) give identical results and
    link series: the same routes, latencies, links and their order."""
    from orrery import machines

    m = machines.load(name)

    def run(out):
        opts = launch.RunOptions(
            machine=m,
            layout=platform.Layout.for_machine(m, nodes, gpus),
            program=[str(programs[program]), *args],
            out=out,
            link_series=True,
            capture_output=True,
        )
        assert launch.run(opts).exit_code == 0

    run(tmp_path / "structured")
    monkeypatch.setattr(launch, "platform_library", lambda: tmp_path / "absent.so")
    run(tmp_path / "flat")
    assert (tmp_path / "structured" / "platform.json").exists() and (tmp_path / "flat" / "platform.xml").exists()
    for file in ("results.json", "link_series.tsv"):
        assert (tmp_path / "structured" / file).read_bytes() == (tmp_path / "flat" / file).read_bytes()
