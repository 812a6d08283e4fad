import xml.etree.ElementTree as ET

import pytest

from orrery import machine, platform
from orrery.errors import InputError

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def h100():
    return machine.load("h100-ib200")


def routes(xml):
    root = ET.fromstring(xml.split("\n", 2)[2])
    links = {l.get("id"): l for l in root.iter("link")}
    edges = {}
    for r in root.iter("route"):
        (ctn,) = r.findall("link_ctn")
        edges[(r.get("src"), r.get("dst"))] = links[ctn.get("id")]
    return root, edges


def test_hosts_routers_and_links_of_a_two_node_job(h100):
    root, edges = routes(platform.platform_xml(h100, platform.Layout.for_machine(h100, 2)))
    hosts = sorted(h.get("id") for h in root.iter("host"))
    assert hosts == sorted([f"n{n}-cpu" for n in range(2)] + [f"n{n}-gpu{g}" for n in range(2) for g in range(4)])
    # NVLink mesh: 6 pairs per node, each at links_per_pair x link_bandwidth
    nvl = [e for e in edges if e[0].startswith("n0-gpu") and e[1].startswith("n0-gpu")]
    assert len(nvl) == 6
    assert edges[("n0-gpu1", "n0-gpu3")].get("bandwidth") == f"{150e9!r}Bps"
    # each GPU under its own PCIe switch, with its rail's NIC
    assert edges[("n1-pcie2", "n1-gpu2")].get("bandwidth") == f"{53.8e9!r}Bps"
    assert ("n1-pcie2", "n1-nic2") in edges
    lat = h100.nic.latency + h100.fabric.hops * h100.fabric.switch_latency / 2
    assert edges[("n1-nic2", "fabric")].get("latency") == f"{lat!r}s"
    assert all(link.get("sharing_policy") == "SPLITDUPLEX" for link in root.iter("link")
               if link.get("id") != "n0-mem" and link.get("id") != "n1-mem")


def test_gpu_hosts_carry_their_description(h100):
    root, _ = routes(platform.platform_xml(h100, platform.Layout.for_machine(h100, 1, 2)))
    gpu = next(h for h in root.iter("host") if h.get("id") == "n0-gpu1")
    props = {p.get("id"): p.get("value") for p in gpu.iter("prop")}
    assert props["orrery:gpus"] == "n0-gpu0,n0-gpu1"
    assert props["orrery:index"] == "1"
    assert props["orrery:sm_count"] == "132"
    assert float(props["orrery:launch_overhead_s"]) == h100.overheads.launch


def test_no_nvlink_topology_has_no_gpu_to_gpu_links(h100):
    m = machine.load("h100-ib200", ["nvlink.topology=none"])
    _, edges = routes(platform.platform_xml(m, platform.Layout.for_machine(m, 1)))
    assert not [e for e in edges if "gpu" in e[0] and "gpu" in e[1]]


def test_rank_placement_round_robins_local_ranks_over_gpus():
    layout = platform.Layout(nodes=2, gpus_per_node=2, ranks_per_node=3)
    assert platform.rank_hosts(layout) == ["n0-gpu0", "n0-gpu1", "n0-gpu0", "n1-gpu0", "n1-gpu1", "n1-gpu0"]


@pytest.mark.parametrize("nodes, gpus, ranks, match", [
    (0, None, None, "--nodes"),
    (1, 5, None, "--gpus-per-node: got 5, expected between 1 and 4"),
    (1, 2, 0, "--ranks-per-node"),
])
def test_bad_layouts(h100, nodes, gpus, ranks, match):
    with pytest.raises(InputError, match=match):
        platform.Layout.for_machine(h100, nodes, gpus, ranks)
