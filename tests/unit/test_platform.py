import re
import xml.etree.ElementTree as ET

import pytest

from orrery import machines as machine
from orrery.errors import InputError
from orrery.machines import platform

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def h100():
    return machine.load("h100-ib200")


def routes(xml):
    root = ET.fromstring(xml.split("\n", 2)[2])
    links = {link.get("id"): link for link in root.iter("link")}
    edges = {}
    for r in root.iter("route"):
        ctns = r.findall("link_ctn")
        if len(ctns) == 1:  # a link between neighbours
            edges[(r.get("src"), r.get("dst"))] = links[ctns[0].get("id")]
        else:  # an edge over several links: their names and directions
            edges[(r.get("src"), r.get("dst"))] = [(c.get("id"), c.get("direction")) for c in ctns]
    return root, edges


def test_hosts_routers_and_links_of_a_two_node_job(h100):
    root, edges = routes(platform.platform_xml(h100, platform.Layout.for_machine(h100, 2)))
    hosts = sorted(h.get("id") for h in root.iter("host"))
    assert hosts == sorted(
        [f"n{n}-cpu" for n in range(2)]
        + [f"n{n}-gpu{g}" for n in range(2) for g in range(4)]
        + [f"n{n}-cpu{r}" for n in range(2) for r in range(4)]  # each rank's process
        + [f"n{n}-gpu{g}-ce" for n in range(2) for g in range(4)]
    )  # peer copies' ends
    # a GPU's copy-engine host is a leaf beside it (peer copies never look like MPI messages)
    assert edges[("n0-gpu1-ce", "n0-gpu1")].get("latency") == "0.0s"
    # a rank's process: shared memory through the root complex, and its rail's NIC
    assert edges[("n1-cpu2", "n1-cpu2-mem")].get("bandwidth") == f"{h100.node.host_memcpy_bandwidth!r}Bps"
    assert ("n1-cpu2-mem", "n1-root") in edges
    # between nodes, the NIC reads the process's memory by DMA through the PCIe switch's uplink, the
    # links the GPU's host copies cross (issue 22: no private way around them)
    assert edges[("n1-cpu2", "n1-nic2")] == [
        ("n1-mem", "UP"),
        ("n1-up2", "UP"),
        ("n1-nic2-sw", "UP"),
        ("n1-nic2-pcie", "UP"),
    ]
    # NVLink mesh: 6 pairs per node, each at links_per_pair x link_bandwidth
    gpu = re.compile(r"^n0-gpu\d+$")
    nvl = [e for e in edges if gpu.match(e[0]) and gpu.match(e[1])]
    assert len(nvl) == 6
    assert edges[("n0-gpu1", "n0-gpu3")].get("bandwidth") == f"{150e9!r}Bps"
    # each GPU under its own PCIe switch, with its rail's NIC
    assert edges[("n1-gpu2-port", "n1-gpu2")].get("bandwidth") == f"{53.8e9!r}Bps"
    assert edges[("n1-gpu2-port", "n1-gpu2")].get("latency") == f"{h100.pcie.latency!r}s"
    assert edges[("n1-pcie2", "n1-gpu2-port")].get("latency") == "0.0s"  # inside the switch
    assert ("n1-pcie2", "n1-nic2-port") in edges and ("n1-gpu2-port", "n1-nic2-port") in edges
    lat = h100.nic.latency + h100.fabric.switch_latency / 2  # half of the leaf switch on each side
    assert edges[("n1-nic2", "leaf0")].get("latency") == f"{lat!r}s"
    assert all(
        link.get("sharing_policy") == "SPLITDUPLEX"
        for link in root.iter("link")
        if link.get("id") != "n0-mem" and link.get("id") != "n1-mem"
    )


def test_gpu_places_list_every_gpu_of_the_job_and_the_platform_none_of_orrerys_values(h100):
    layout = platform.Layout.for_machine(h100, 2, 2)
    places = platform.gpu_places(h100, layout)
    assert [(p["host"], p["node"], p["index"]) for p in places] == [
        ("n0-gpu0", 0, 0),
        ("n0-gpu1", 0, 1),
        ("n1-gpu0", 1, 0),
        ("n1-gpu1", 1, 1),
    ]
    assert places[3]["copy_engine"] == "n1-gpu1-ce" and places[3]["message_end"] is None
    assert [p["pci_bus_id"] for p in places[:2]] == [0x18, 0x38]
    root, _ = routes(platform.platform_xml(h100, layout))
    hosts = {h.get("id") for h in root.iter("host")}
    assert {p["host"] for p in places} | {p["copy_engine"] for p in places} <= hosts
    assert not list(root.iter("prop"))  # the shim's values are in the run description, not the platform


def test_no_nvlink_topology_has_no_gpu_to_gpu_links(h100):
    m = machine.load("h100-ib200", machine.parse_overrides(["nvlink.topology=none"]))
    _, edges = routes(platform.platform_xml(m, platform.Layout.for_machine(m, 1)))
    gpu = re.compile(r"^n\d+-gpu\d+$")
    assert not [e for e in edges if gpu.match(e[0]) and gpu.match(e[1])]


def test_rank_placement_round_robins_local_ranks_over_gpus():
    layout = platform.Layout(nodes=2, gpus_per_node=2, ranks_per_node=3)
    assert platform.rank_hosts(layout) == ["n0-gpu0", "n0-gpu1", "n0-gpu0", "n1-gpu0", "n1-gpu1", "n1-gpu0"]


@pytest.mark.parametrize(
    "nodes, gpus, ranks, match",
    [
        (0, None, None, "--nodes"),
        (1, 5, None, "--gpus-per-node: got 5, expected between 1 and 4"),
        (1, 2, 0, "--ranks-per-node"),
    ],
)
def test_bad_layouts(h100, nodes, gpus, ranks, match):
    with pytest.raises(InputError, match=match):
        platform.Layout.for_machine(h100, nodes, gpus, ranks)


def test_nvswitch_pcie_sharing_and_rails_of_dgx_h100():
    m = machine.load("dgx-h100")
    _, edges = routes(platform.platform_xml(m, platform.Layout.for_machine(m, 2)))
    # every GPU has one link to the node's NVSwitch, at 18 links x 25 GB/s, half the GPU-GPU latency
    link = edges[("n0-gpu5", "n0-nvswitch")]
    assert (link.get("bandwidth"), link.get("latency")) == (f"{450e9!r}Bps", f"{m.nvlink.latency / 2!r}s")
    # GPUs 4 and 5 share PCIe switch 2, with their rails' NICs 4 and 5
    assert ("n0-pcie2", "n0-gpu4-port") in edges and ("n0-pcie2", "n0-gpu5-port") in edges
    assert ("n0-pcie2", "n0-nic4-port") in edges and ("n0-pcie2", "n0-nic5-port") in edges
    assert ("n0-gpu5-port", "n0-nic5-port") in edges and ("n0-gpu5-port", "n0-nic4-port") not in edges
    # rail-optimised: NIC i of every node on rail switch i, rail switches meet at the spine
    assert ("n1-nic3", "rail3-0") in edges
    assert edges[("rail3-0", "spine")].get("bandwidth") == f"{2 * 50e9!r}Bps"  # 2 nodes x one 400 Gb/s NIC


def test_fat_tree_leaves_and_oversubscribed_uplinks():
    m = machine.load("h100-ib200", machine.parse_overrides(["fabric.nodes_per_leaf=2", "fabric.oversubscription=2.0"]))
    _, edges = routes(platform.platform_xml(m, platform.Layout.for_machine(m, 5)))
    assert ("n3-nic0", "leaf1") in edges and ("n4-nic0", "leaf2") in edges
    # leaf 2 holds one node: 4 NICs x 25 GB/s down, half of it up
    up = edges[("leaf2", "spine")]
    assert (up.get("bandwidth"), up.get("latency")) == (f"{4 * 25e9 / 2!r}Bps", f"{m.fabric.switch_latency!r}s")


def test_three_level_fat_tree_groups_leaves_in_pods_under_a_core():
    m = machine.load(
        "h100-ib200",
        machine.parse_overrides(
            ["fabric.nodes_per_leaf=1", "fabric.oversubscription=2.0", "fabric.levels=3", "fabric.leaves_per_pod=2"]
        ),
    )
    root, edges = routes(platform.platform_xml(m, platform.Layout.for_machine(m, 5)))
    # 5 leaves, pods of 2: spines 0 and 1 hold two leaves, spine 2 one
    assert {r.get("id") for r in root.iter("router") if r.get("id").startswith(("spine", "core"))} == {
        "spine0",
        "spine1",
        "spine2",
        "core",
    }
    assert ("leaf1", "spine0") in edges and ("leaf2", "spine1") in edges and ("leaf4", "spine2") in edges
    leaf_up = 4 * 25e9 / 2  # a node's 4 NICs x 25 GB/s, halved
    assert edges[("leaf3", "spine1")].get("bandwidth") == f"{leaf_up!r}Bps"
    # a pod spine's uplink: its leaves' uplinks, halved again
    assert edges[("spine1", "core")].get("bandwidth") == f"{2 * leaf_up / 2!r}Bps"
    assert edges[("spine2", "core")].get("bandwidth") == f"{leaf_up / 2!r}Bps"
    assert edges[("spine2", "core")].get("latency") == f"{m.fabric.switch_latency!r}s"
    # a job within one pod needs no core
    root, _ = routes(platform.platform_xml(m, platform.Layout.for_machine(m, 2)))
    assert "core" not in {r.get("id") for r in root.iter("router")}


def test_grace_hopper_reaches_host_memory_over_c2c():
    m = machine.load("gh200-slingshot")
    _, edges = routes(platform.platform_xml(m, platform.Layout.for_machine(m, 1)))
    assert edges[("n0-root", "n0-gpu2")].get("bandwidth") == f"{450e9!r}Bps"
    assert ("n0-gpu2", "n0-pcie2") in edges  # its own superchip's PCIe: its NIC
    assert ("n0-gpu2-port", "n0-gpu2") not in edges


def test_messages_within_a_node_through_the_nic_start_at_endpoints_whose_one_way_out_is_the_nic():
    """mpi.intra_node = "nic" (GH200 with Open MPI over libfabric CXI): a GPU's device-buffer
    messages start at n-gpuG-mpi and a process's at n-cpuL, each with one edge to its rail's
    NIC over the links of its way there, and nothing else: no NVLink, no shared memory."""
    m = machine.load("gh200-slingshot")
    assert m.mpi.intra_node == "nic"
    root, edges = routes(platform.platform_xml(m, platform.Layout.for_machine(m, 1)))
    assert edges[("n0-gpu2-mpi", "n0-nic2")] == [("n0-c2c2-io", "UP"), ("n0-nic2-sw", "UP"), ("n0-nic2-pcie", "UP")]
    assert edges[("n0-cpu1", "n0-nic1")] == [
        ("n0-mem", "UP"),
        ("n0-up1", "UP"),
        ("n0-nic1-sw", "UP"),
        ("n0-nic1-pcie", "UP"),
    ]
    for end in ("n0-gpu2-mpi", "n0-cpu1"):
        assert [e for e in edges if end in e] == [(end, f"n0-nic{end[6]}")]
    assert not any(link.get("id").endswith("-shm") for link in root.iter("link"))
    assert platform.gpu_places(m, platform.Layout.for_machine(m, 1))[2]["message_end"] == "n0-gpu2-mpi"
    # the default, direct: no message endpoints, NVLink between GPUs, shared memory between processes
    direct = machine.load("gh200-slingshot", machine.parse_overrides(['mpi.intra_node="direct"']))
    root, edges = routes(platform.platform_xml(direct, platform.Layout.for_machine(direct, 1)))
    assert not any(h.get("id").endswith("-mpi") for h in root.iter("host"))
    assert ("n0-cpu1", "n0-cpu1-mem") in edges and ("n0-gpu0", "n0-gpu1") in edges


def test_modelled_sockets_have_their_own_root_complex_memory_and_devices():
    """h100-pcie sets node.socket_link_*: socket 1 gets root complex n0-root1 and memory n0-cpu-s1,
    PCIe switch 1 (GPU 1) hangs off it, GPU 1 copies to and from its memory, rank 1's process
    sits on it, and the sockets' link joins the two roots. Without the keys, one root complex."""
    m = machine.load("h100-pcie")
    root, edges = routes(platform.platform_xml(m, platform.Layout.for_machine(m, 1)))
    link = edges[("n0-root", "n0-root1")]
    assert link.get("bandwidth") == f"{m.node.socket_link_bandwidth!r}Bps"
    assert link.get("latency") == f"{m.node.socket_link_latency!r}s"
    assert ("n0-root", "n0-pcie0") in edges and ("n0-root1", "n0-pcie1") in edges
    assert ("n0-cpu-s1", "n0-root1") in edges and ("n0-cpu", "n0-root") in edges
    assert ("n0-cpu1-mem", "n0-root1") in edges and ("n0-cpu0-mem", "n0-root") in edges
    places = platform.gpu_places(m, platform.Layout.for_machine(m, 1))
    assert [p["cpu"] for p in places] == ["n0-cpu", "n0-cpu-s1"]
    # without GPUDirect RDMA, a NIC's staging goes through its own socket's root complex
    staged = machine.load("h100-pcie", machine.parse_overrides(["gpudirect.rdma=false", "nic.per_node=2"]))
    _, edges = routes(platform.platform_xml(staged, platform.Layout.for_machine(staged, 1)))
    assert ("n0-root", "n0-nic0-port") in edges and ("n0-root1", "n0-nic1-port") in edges
    # the links the shim scales as staging (run description staging.links) are those very links
    assert platform.staging_links(staged, platform.Layout.for_machine(staged, 1)) == ["n0-nic0-sw", "n0-nic1-sw"]
    assert edges[("n0-root", "n0-nic0-port")].get("id") == "n0-nic0-sw"
    one = machine.load("h100-ib200")
    root, _ = routes(platform.platform_xml(one, platform.Layout.for_machine(one, 1)))
    assert one.node.cpu_sockets == 2 and {r.get("id") for r in root.iter("router")} >= {"n0-root"}
    assert not any(r.get("id").startswith("n0-root1") for r in root.iter("router"))


def test_without_gpudirect_rdma_nics_hang_off_the_root_complex(h100):
    m = machine.load("h100-ib200", machine.parse_overrides(["gpudirect.rdma=false"]))
    _, edges = routes(platform.platform_xml(m, platform.Layout.for_machine(m, 1)))
    assert ("n0-root", "n0-nic1-port") in edges and ("n0-pcie1", "n0-nic1-port") not in edges
    assert ("n0-gpu1-port", "n0-nic1-port") not in edges


def test_above_the_rdma_limit_a_gpu_has_a_staged_endpoint_through_host_memory(h100):
    """gpudirect.rdma_limit: besides the GPUDirect RDMA routes, each GPU gets a staged endpoint
    (a leaf) whose one edge to its rail's NIC goes out of the GPU to the root complex and through
    the NIC's staging link, at the staging pipeline's rate and with one chunk's copy as latency:
    the way a machine without RDMA takes. Without the key there is neither (the hosts of
    test_hosts_routers_and_links_of_a_two_node_job)."""
    m = machine.load("h100-ib200", machine.parse_overrides(["gpudirect.rdma_limit='1MiB'"]))
    layout = platform.Layout.for_machine(m, 1)
    root, edges = routes(platform.platform_xml(m, layout))
    assert ("n0-pcie1", "n0-nic1-port") in edges  # GPUDirect RDMA stays for the rest
    assert edges[("n0-gpu1-staged", "n0-nic1")] == [
        ("n0-gpu1-pcie", "DOWN"),
        ("n0-gpu1-sw", "DOWN"),
        ("n0-up1", "DOWN"),
        ("n0-nic1-stage", "UP"),
        ("n0-nic1-pcie", "UP"),
    ]
    stage = next(link for link in root.iter("link") if link.get("id") == "n0-nic1-stage")
    assert stage.get("bandwidth") == f"{platform.staging_bandwidth(m)!r}Bps"
    assert stage.get("latency") == f"{m.overheads.memcpy + m.gpudirect.staging_chunk / m.pcie.bandwidth!r}s"
    assert not [key for key in edges if "n0-nic1-stage" in str(edges[key]) and key[0] != "n0-gpu1-staged"]
    assert platform.staging_links(m, layout) == [f"n0-nic{i}-stage" for i in range(4)]
    assert [p["staged_end"] for p in platform.gpu_places(m, layout)] == [f"n0-gpu{g}-staged" for g in range(4)]
    assert all(p["staged_end"] is None for p in platform.gpu_places(h100, layout))


def dragonfly(**more):
    sets = {
        "fabric.topology": "'dragonfly'",
        "fabric.nodes_per_leaf": "1",
        "fabric.routers_per_group": "2",
        "fabric.local_bandwidth": "'50GB/s'",
        "fabric.global_bandwidth": "'10GB/s'",
        **more,
    }
    return machine.load("h100-ib200", machine.parse_overrides([f"{k}={v}" for k, v in sets.items()]))


def test_dragonfly_groups_local_all_to_all_and_one_global_link_per_group_pair():
    m = dragonfly(**{"fabric.routers_per_group": "3"})
    root, edges = routes(platform.platform_xml(m, platform.Layout.for_machine(m, 7, 1, 1)))
    routers = sorted(r.get("id") for r in root.iter("router") if r.get("id").startswith("g"))
    # 7 nodes, one per router: groups 0 and 1 full, group 2 has router 6 and the carrier of its
    # global links to groups 0 and 1 (routers 2*3 + 0 % 3 and 2*3 + 1 % 3: g2-r0 and g2-r1)
    assert routers == ["g0-r0", "g0-r1", "g0-r2", "g1-r0", "g1-r1", "g1-r2", "g2-r0", "g2-r1"]
    local = [e for e in edges if e[0].startswith("g") and e[1].startswith("g")]
    assert ("g0-r0", "g0-r1") in local and ("g0-r1", "g0-r2") in local and ("g2-r0", "g2-r1") in local
    assert sum(1 for a, c in local if a[:2] == c[:2]) == 3 + 3 + 1  # all-to-all inside each group
    # one global link per pair of groups: group a's router (b mod 3) to group b's router (a mod 3)
    globals_ = {
        e: link for e, link in edges.items() if not isinstance(link, list) and link.get("id").startswith("global")
    }
    assert set(globals_) == {("g0-r1", "g1-r0"), ("g0-r2", "g2-r0"), ("g1-r2", "g2-r1")}
    assert all(link.get("bandwidth") == f"{10e9!r}Bps" for link in globals_.values())
    assert edges[("n4-nic0", "g1-r1")].get("latency") == f"{m.nic.latency + m.fabric.switch_latency / 2!r}s"


def test_dragonfly_needs_its_group_parameters():
    with pytest.raises(
        InputError,
        match=re.escape(
            "key 'fabric.global_bandwidth': got None, expected a value: fabric.topology = 'dragonfly' needs it"
        ),
    ):
        machine.load(
            "h100-ib200",
            machine.parse_overrides(
                ["fabric.topology='dragonfly'", "fabric.routers_per_group=4", "fabric.local_bandwidth='50GB/s'"]
            ),
        )


@pytest.mark.parametrize("name", ["h100-ib200", "dgx-h100", "gh200-slingshot"])
def test_the_structured_description_has_the_flat_platform_s_links_and_grows_linearly(name):
    """platform.json describes the flat platform's links exactly (the results name them), and
    grows with the nodes only by their attachments and the fabric's switches: one node's part is
    the same at 2 and 4096 nodes, and nothing in it is per pair of nodes."""
    m = machine.load(name)
    small, large = platform.Layout.for_machine(m, 2), platform.Layout.for_machine(m, 4096 // m.node.gpus * 4)
    desc, directions = platform.description(m, small)
    assert directions == platform.link_directions(m, small)
    big, big_directions = platform.description(m, large)
    assert big["node"] == desc["node"]
    assert len(big["attach"]) == large.nodes and {len(row) for row in big["attach"]} == {m.nic.per_node}
    switches = {
        platform.fabric_switch(m, platform.leaf_of_node(m, n), nic)
        for n in range(large.nodes)
        for nic in range(m.nic.per_node)
    }
    assert len(big["fabric"]["netpoints"]) == len(switches) + 1  # the leaves (or rail switches) and the spine
    assert len(big_directions) == 2 * (large.nodes * len(desc["node"]["links"]) + len(big["fabric"]["links"]))
