"""Platform generation: a Machine and a job layout become a SimGrid platform.

Every GPU is a SimGrid host (``n3-gpu1``) that executes its kernels; every
node has a CPU host (``n3-cpu``), the other end of host<->device copies. The
platform is routed by shortest path (fewest links) over these links; ``description`` gives it by
parts, one node's graph that every node repeats, the fabric's, and where each node meets the
fabric (platform.json, which liborrery_platform.so routes by that structure,
interpose/platform/), and ``platform_xml`` as the same graph in one flat SimGrid zone
(``orrery machine export``)::

  n-cpu --mem-- n-root --up{s}-- n-pcie{s} --gpu{g}-sw-- n-gpu{g}-port --gpu{g}-pcie-- n-gpu{g}
                                 n-pcie{s} --nic{i}-sw-- n-nic{i}-port --nic{i}-pcie-- n-nic{i}
                                 n-gpu{g}-port --gpu{g}-nic{i}-- n-nic{i}-port    (GPU g's rail)
  n-nic{i} --nic{i}-ib-- leaf{l} (fat-tree) or rail{i}-{l} (rail-optimized) --up-- spine
  n-nic{i} --nic{i}-ib-- g{group}-r{k} (dragonfly) --local-- routers of its group; --global-- other groups
  n-gpu{a} --nvl{a}-{b}-- n-gpu{b}            NVLink mesh
  n-gpu{g} --nvl{g}-- n-nvswitch              NVSwitch
  n-root --c2c{g}-- n-gpu{g}                  NVLink-C2C to host memory (Grace Hopper)
  n-root --socket0-1-- n-root1                 CPU sockets, with node.socket_link_* set

Every link is full duplex: SimGrid names its directions NAME_UP (left to right as drawn here)
and NAME_DOWN, and each link says what it models (Link.kind, LINK_KINDS), which is how the
results name the links that carried traffic (link_directions; docs/simulation.md, "Link
utilisation").

With ``node.socket_link_bandwidth`` and ``node.socket_link_latency`` set, each
CPU socket has its own root complex (``n3-root``, ``n3-root1``, ...) and host
memory (``n3-cpu``, ``n3-cpu-s1``, ...), the PCIe switches spread over the
sockets in order, and traffic between devices or memory of two sockets
crosses the link between them; a GPU's copies go to its own socket's memory
and a rank's process sits on its GPU's socket. Unset, a node has one root
complex.

A PCIe switch (pcie.gpus_per_switch GPUs) is a core router with one port per
device; the x16 links are between port and device, the links inside the
switch cost no time. NIC i sits on the switch of the GPUs of its rail (GPU g
uses NIC g * nics / gpus), with a direct port-to-port link to them: routes are
shortest in hops, so each GPU's traffic keeps to its own NIC. Without GPUDirect
RDMA the NICs hang off the root complex and a device buffer is staged through
host memory in chunks (gpudirect.staging_chunk), each chunk a copy with its
issue overhead (overheads.memcpy): the pipeline moves a chunk per stage, and
its fill and drain, one chunk's copy on each side (or the whole message's, if
smaller: the shim scales the latency per message), add to the route's latency. A fat-tree leaf (or rail switch) serves
``nodes_per_leaf`` nodes; leaves meet at a spine through uplinks of their
nodes' NIC bandwidth divided by the oversubscription. With three levels
(``fabric.levels = 3``) the leaves of a pod (``leaves_per_pod``) meet at their
pod's spine (``spine{p}``) and the pod spines at the core, each uplink
carrying what comes up to its switch divided by the oversubscription. Crossing a switch costs
``switch_latency``, spread over the links around it.

MPI ranks run on their GPU's host, so a device-buffer message between two
GPUs of a node crosses NVLink and one between nodes crosses PCIe, the NIC and
the fabric. With ``mpi.intra_node = "nic"`` (an MPI library with only a
network provider, e.g. libfabric CXI) every message leaves through the NIC,
within the node too: device-buffer messages start at a message endpoint
(``n3-gpu1-mpi``) and host-buffer messages at the process endpoint, each with
a single edge to its rail's NIC over the links of the GPU's (or process's) way
there, so two ranks of a node meet at their leaf switch, or inside their NIC
if they share it. For the blocking MPI calls on host buffers, a rank moves to its
process's host endpoint (``n3-cpu2`` for local rank 2): host memory within the
node, its rail's NIC beyond, one edge over its socket's memory and the links the
GPUs' host copies cross (the PCIe switch uplink: a NIC reads host buffers by DMA
through it). The platform holds only what SimGrid needs: the shim reads what each GPU is,
and where, from the run description (orrery/run/run_description.py; gpu_places below).

A device-to-device copy is work of its GPU (d2d_latency + bytes / d2d_bandwidth,
sharing the GPU with its kernels); messages between ranks that share a GPU
take SimGrid's loopback, which run.py sets to the same device-memory figures.
"""

from __future__ import annotations

import heapq
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass

from ..errors import InputError
from .description import Machine, required

# Limits of a layout: the platform grows by about 14 MB of XML per 1000 nodes
# of 4 GPUs, and SMPI runs every rank as an actor of one process; beyond them a run would
# not finish in any useful time (an unbounded --nodes never returned).
MAX_NODES = 4096
MAX_RANKS_PER_NODE = 1024
MAX_RANKS = 16384

#: Host speed of every simulated host: 1 simulated second of work = 1e12 flops.
HOST_SPEED = 1e12


@dataclass(frozen=True)
class Layout:
    """How a job is laid out on a machine."""

    nodes: int
    gpus_per_node: int
    ranks_per_node: int

    @property
    def ranks(self) -> int:
        return self.nodes * self.ranks_per_node

    @classmethod
    def for_machine(
        cls, machine: Machine, nodes: int, gpus_per_node: int | None = None, ranks_per_node: int | None = None
    ) -> Layout:
        g = machine.node.gpus if gpus_per_node is None else gpus_per_node
        if not 1 <= nodes <= MAX_NODES:
            raise InputError("--nodes", None, nodes, f"a number of nodes from 1 to {MAX_NODES} (Orrery's limit)")
        if not 1 <= g <= machine.node.gpus:
            raise InputError(
                "--gpus-per-node", None, g, f"between 1 and {machine.node.gpus} (GPUs per node of {machine.name})"
            )
        r = g if ranks_per_node is None else ranks_per_node
        if not 1 <= r <= MAX_RANKS_PER_NODE:
            raise InputError(
                "--ranks-per-node",
                None,
                r,
                f"a number of ranks per node from 1 to {MAX_RANKS_PER_NODE} (Orrery's limit)",
            )
        if nodes * r > MAX_RANKS:
            raise InputError(
                "--nodes",
                None,
                nodes,
                f"at most {MAX_RANKS // r} nodes of {r} ranks: {MAX_RANKS} ranks in all (Orrery's limit)",
            )
        return cls(nodes, g, r)


def cpu_host(node: int) -> str:
    return f"n{node}-cpu"


def gpu_host(node: int, gpu: int) -> str:
    return f"n{node}-gpu{gpu}"


def rank_hosts(layout: Layout) -> list[str]:
    """The GPU host each rank runs on: local rank l of a node next to GPU l mod G."""
    return [
        gpu_host(r // layout.ranks_per_node, (r % layout.ranks_per_node) % layout.gpus_per_node)
        for r in range(layout.ranks)
    ]


def copy_engine_host(node: int, gpu: int) -> str:
    """Where a GPU's peer copies start and end: a leaf beside the GPU, so that SimGrid's
    network factors for MPI messages (between GPU hosts) never apply to copies."""
    return f"n{node}-gpu{gpu}-ce"


def mpi_endpoint_host(node: int, gpu: int) -> str:
    """With mpi.intra_node = "nic": where a GPU's device-buffer messages start and end."""
    return f"n{node}-gpu{gpu}-mpi"


def staged_endpoint_host(node: int, gpu: int) -> str:
    """With gpudirect.rdma_limit: where a GPU's device-buffer messages above the limit start and
    end, staged through host memory to its rail's NIC."""
    return f"n{node}-gpu{gpu}-staged"


def stages_above_rdma_limit(machine: Machine) -> bool:
    """GPUDirect RDMA up to a size, staging above it (gpudirect.rdma_limit)."""
    return machine.gpudirect.rdma and machine.gpudirect.rdma_limit is not None


def rank_cpu_host(node: int, local_rank: int) -> str:
    """Where a rank's host-buffer messages start and end: its process in host memory."""
    return f"n{node}-cpu{local_rank}"


def rank_cpu_hosts(layout: Layout) -> list[str]:
    return [rank_cpu_host(r // layout.ranks_per_node, r % layout.ranks_per_node) for r in range(layout.ranks)]


def root_complex(node: int, socket: int) -> str:
    """A socket's PCIe root complex (a router; one per node unless node.socket_link_* are set)."""
    return f"n{node}-root" if socket == 0 else f"n{node}-root{socket}"


def socket_memory_host(node: int, socket: int) -> str:
    """A socket's host memory: the other end of the host<->device copies of its GPUs."""
    return cpu_host(node) if socket == 0 else f"n{node}-cpu-s{socket}"


def socket_of_switch(machine: Machine, switch: int) -> int:
    """The socket whose root complex a PCIe switch hangs off: the switches spread over the
    modelled sockets in order (all on socket 0 with one root complex)."""
    switches = -(-machine.node.gpus // machine.pcie.gpus_per_switch)
    return switch * machine.node.sockets_modelled // switches


def socket_of_nic(machine: Machine, nic: int) -> int:
    """The socket whose root complex a NIC's PCIe switch hangs off (the switch of its rail's first GPU)."""
    return socket_of_switch(
        machine, switch_of_gpu(machine, next(g for g in range(machine.node.gpus) if nic_of_gpu(machine, g) == nic))
    )


def memory_link(node: int, socket: int) -> str:
    """The link between a socket's host memory and its root complex."""
    return f"n{node}-mem" if socket == 0 else f"n{node}-mem-s{socket}"


def socket_of_gpu(machine: Machine, gpu: int) -> int:
    return socket_of_switch(machine, switch_of_gpu(machine, gpu))


def nic_of_gpu(machine: Machine, gpu: int) -> int:
    """The NIC a GPU shares its PCIe switch with (rails: GPU g <-> NIC g)."""
    return gpu * machine.nic.per_node // machine.node.gpus


def gpu_places(machine: Machine, layout: Layout) -> list[dict[str, object]]:
    """Every GPU of the job and the hosts around it, as the run description lists them
    (orrery/run/run_description.py): the shim reads a GPU's place from there, never from its
    host's name."""
    via_nic = machine.mpi.intra_node == "nic"
    return [
        {
            "host": gpu_host(node, gpu),
            "node": node,
            "index": gpu,
            "cpu": socket_memory_host(node, socket_of_gpu(machine, gpu)),
            "copy_engine": copy_engine_host(node, gpu),
            "message_end": mpi_endpoint_host(node, gpu) if via_nic else None,
            "staged_end": staged_endpoint_host(node, gpu) if stages_above_rdma_limit(machine) else None,
            "pci_bus_id": 0x18 + 0x20 * gpu,
        }
        for node in range(layout.nodes)
        for gpu in range(layout.gpus_per_node)
    ]


def staging_links(machine: Machine, layout: Layout) -> list[str]:
    """Without GPUDirect RDMA (or above gpudirect.rdma_limit): the links between a root complex
    and its NICs that stage device-buffer messages through host memory (the shim scales their
    latency per message)."""
    nics = sorted({nic_of_gpu(machine, g) for g in range(layout.gpus_per_node)})
    suffix = "stage" if stages_above_rdma_limit(machine) else "sw"
    return [f"n{n}-nic{i}-{suffix}" for n in range(layout.nodes) for i in nics]


# A token latency on the way into shared memory, so that a measured latency (messages.host_intra)
# can scale it: SimGrid's latency factors multiply a route's latency, and nothing times zero is zero.
SHM_LATENCY = 1e-9
INF = float("inf")
COPY_ENGINE_LINK = 1e18  # bytes/s: a link that costs nothing next to any real one


def staging_stage(machine: Machine) -> float:
    """Without GPUDirect RDMA: one stage of the staging pipeline, a chunk's copy."""
    return machine.overheads.memcpy + machine.gpudirect.staging_chunk / machine.pcie.bandwidth


def staging_bandwidth(machine: Machine) -> float:
    """The staging pipeline's rate: a chunk per stage."""
    return machine.gpudirect.staging_chunk / staging_stage(machine)


#: What a platform link models (Link.kind), as the results name it (docs/simulation.md's table).
LINK_KINDS = {
    "pcie": "PCIe: a switch's uplink to its root complex, a device's port on its switch, a GPU's or "
    "NIC's x16 link, peer-to-peer between a GPU and its rail's NIC, a NIC's DMA from host memory",
    "staging": "without GPUDirect RDMA: a NIC's link to its root complex, at the staging pipeline's rate (above "
    "gpudirect.rdma_limit: the same, crossed only by a GPU's staged endpoint)",
    "nvlink": "NVLink between two GPUs, or between a GPU and its node's NVSwitch",
    "nvlink-c2c": "NVLink-C2C between a Grace Hopper GPU and its CPU, and on to its PCIe switch",
    "memory": "host memory: a socket's memory to its root complex, a rank's process to its socket's",
    "shared-memory": "a rank's process into shared memory (host-buffer MPI messages within a node)",
    "socket": "between two CPU sockets",
    "copy-engine": "between a GPU and its copy-engine host, the ends of peer copies (it costs no time)",
    "nic": "a NIC's port to its leaf switch, rail switch or dragonfly router",
    "fabric-leaf": "a leaf (or rail) switch's uplinks to its spine",
    "fabric-spine": "three fabric levels: a pod spine's uplinks to the core",
    "fabric-local": "dragonfly: between two routers of a group",
    "fabric-global": "dragonfly: between two groups",
}


@dataclass(frozen=True)
class Link:
    """A platform link as declared: each direction of it carries ``bandwidth`` (bytes/s); ``kind``
    is what it models (one of LINK_KINDS)."""

    name: str
    bandwidth: float
    latency: float
    kind: str


class Routes:
    """The routes of a job's platform, as SimGrid finds them (fewest links): what a transfer
    between two hosts crosses, for reports and for the tests' physical bounds."""

    def __init__(self, builder: _Builder):
        self._builder = builder

    def between(self, src: str, dst: str) -> list[Link]:
        return [self._builder.link_specs[name] for name, _ in self._builder.shortest(src, dst)]

    def latency(self, src: str, dst: str) -> float:
        return sum(link.latency for link in self.between(src, dst))

    def bottleneck(self, src: str, dst: str) -> float:
        """The least bandwidth on the route: no transfer alone between src and dst is faster."""
        return min((link.bandwidth for link in self.between(src, dst)), default=INF)


class _Builder:
    def __init__(self, zone: ET.Element):
        self.zone = zone
        self.links: list[ET.Element] = []
        self.routes: list[ET.Element] = []
        self.edges: dict[str, list[tuple[str, list[tuple[str, str]]]]] = {}  # netpoint -> (neighbour, links)
        self.declared: list[tuple[str, str, list[tuple[str, str]]]] = []  # every edge (a, b, links), in order
        self.netpoints: list[tuple[str, str]] = []  # ("host" | "router", name), in order
        # SimGrid's graph id of a netpoint: its place in the order netpoints first appear in the routes
        self.graph_id: dict[str, int] = {}
        self.link_specs: dict[str, Link] = {}

    def host(self, name: str) -> None:
        ET.SubElement(self.zone, "host", id=name, speed=f"{HOST_SPEED!r}f")
        self.netpoints.append(("host", name))

    def router(self, name: str) -> None:
        ET.SubElement(self.zone, "router", id=name)
        self.netpoints.append(("router", name))

    def link(self, name: str, a: str | None, b: str | None, bandwidth: float, latency: float, kind: str) -> None:
        """A full-duplex link (each direction at full rate) between two neighbours, or, without
        them, one that only multi-link edges (path) use; ``kind`` says what it models."""
        assert kind in LINK_KINDS, kind
        self.links.append(
            ET.Element(
                "link",
                {
                    "id": name,
                    "bandwidth": f"{bandwidth!r}Bps",
                    "latency": f"{latency!r}s",
                    "sharing_policy": "SPLITDUPLEX",
                },
            )
        )
        self.link_specs[name] = Link(name, bandwidth, latency, kind)
        if a is not None and b is not None:
            self.path(a, b, [(name, "UP")])

    def path(self, a: str, b: str, links: list[tuple[str, str]]) -> None:
        """One edge of the routing graph from a to b through several links, each crossed UP
        (from the end its link was declared with first) or DOWN. SimGrid's shortest routes
        count an edge's links, so such an edge costs what its links would cost one by one."""
        route = ET.Element("route", src=a, dst=b, symmetrical="YES")
        for name, direction in links:
            ET.SubElement(route, "link_ctn", id=name, direction=direction)
        self.routes.append(route)
        back = [(name, "DOWN" if d == "UP" else "UP") for name, d in reversed(links)]
        self.declared.append((a, b, links))
        for end in (a, b):
            self.graph_id.setdefault(end, len(self.graph_id))
        self.edges.setdefault(a, []).append((b, links))
        self.edges.setdefault(b, []).append((a, back))

    def shortest(self, a: str, b: str) -> list[tuple[str, str]]:
        """The links of the route from a to b with the fewest links, as SimGrid's routing finds
        it among the edges declared so far: of equally short paths, the one its search settles
        first, popping vertices by (links so far, graph id) and keeping a vertex's first
        predecessor at its final cost (DijkstraZone, SimGrid 3.32)."""
        best: dict[str, tuple[int, list[tuple[str, str]]]] = {a: (0, [])}
        queue = [(0, self.graph_id.get(a, -1), a)]
        while queue:
            cost, _, here = heapq.heappop(queue)
            if here == b:
                return best[b][1]
            if cost > best[here][0]:
                continue
            for there, links in self.edges.get(here, []):
                if there not in best or cost + len(links) < best[there][0]:
                    best[there] = (cost + len(links), best[here][1] + links)
                    heapq.heappush(queue, (cost + len(links), self.graph_id[there], there))
        raise ValueError(f"no route from {a} to {b}")

    def finish(self) -> None:
        self.zone.extend(self.links)
        self.zone.extend(self.routes)


def switch_of_gpu(machine: Machine, gpu: int) -> int:
    return gpu // machine.pcie.gpus_per_switch


def leaf_of_node(machine: Machine, node: int) -> int:
    return node // machine.fabric.nodes_per_leaf


def pod_of_leaf(machine: Machine, leaf: int) -> int:
    """A three-level fat-tree: the pod (leaves under one pod spine) a leaf belongs to."""
    return leaf // required(machine.fabric.leaves_per_pod, "fabric.leaves_per_pod")


def spine_switch(pod: int | None) -> str:
    """The spine a leaf's uplinks reach: the one spine of two levels, or its pod's of three."""
    return "spine" if pod is None else f"spine{pod}"


def dragonfly_router(machine: Machine, router: int) -> str:
    """Router `router` (a node's leaf index), named by its group and place in it."""
    group, place = divmod(router, required(machine.fabric.routers_per_group, "fabric.routers_per_group"))
    return f"g{group}-r{place}"


def _dragonfly_links(b: _Builder, m: Machine, routers: list[int]) -> None:
    """Local links between every two routers of a group; one global link between every two
    groups, from router (b mod R) of group a to router (a mod R) of group b, so that each
    router carries the global links of a share of the other groups. Crossing a link costs a
    switch's latency."""
    f, R = m.fabric, required(m.fabric.routers_per_group, "fabric.routers_per_group")
    groups = sorted({r // R for r in routers})
    # the routers that carry global links belong to the fabric even where no job node is
    carriers = {ga * R + gb % R for ga in groups for gb in groups if ga != gb}
    for r in sorted(carriers - set(routers)):
        b.router(dragonfly_router(m, r))
    every = sorted(set(routers) | carriers)
    for g in groups:
        members = [r for r in every if r // R == g]
        for i, a in enumerate(members):
            for c in members[i + 1 :]:
                b.link(
                    f"{dragonfly_router(m, a)}-{dragonfly_router(m, c)}",
                    dragonfly_router(m, a),
                    dragonfly_router(m, c),
                    required(f.local_bandwidth, "fabric.local_bandwidth"),
                    f.switch_latency,
                    "fabric-local",
                )
    for i, ga in enumerate(groups):
        for gb in groups[i + 1 :]:
            a, c = ga * R + gb % R, gb * R + ga % R
            b.link(
                f"global-g{ga}-g{gb}",
                dragonfly_router(m, a),
                dragonfly_router(m, c),
                required(f.global_bandwidth, "fabric.global_bandwidth"),
                f.switch_latency,
                "fabric-global",
            )


def platform_xml(machine: Machine, layout: Layout) -> str:
    """The SimGrid platform (XML, readable by SimGrid 3.32 and 4.x) of a job."""
    return generate(machine, layout)[0]


def generate(machine: Machine, layout: Layout) -> tuple[str, dict[str, Link]]:
    """The platform of a job, built once: its XML (platform_xml) and its link directions
    (link_directions)."""
    root, builder = _build(machine, layout)
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    xml = "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n" + body + "\n"
    return xml, _directions(builder)


#: The version of platform.json (description) that interpose/platform/platform.cpp reads.
DESCRIPTION_FORMAT = "orrery-platform/1"


def _of_node(name: str, node: int) -> str:
    """A node's own name for a name of the template (node 0's): "n0-gpu1" of node 7 is "n7-gpu1"."""
    return f"n{node}-{name[3:]}"


def description(machine: Machine, layout: Layout) -> tuple[dict[str, object], dict[str, Link]]:
    """The structured platform of a job (platform.json, which liborrery_platform.so reads,
    interpose/platform/) and its link directions (link_directions).

    It is the flat platform (platform_xml) by parts: node 0's netpoints, links and routing edges,
    which every node repeats under its own names; the fabric's switches, links and edges; and the
    switch each node's NICs meet. ``order`` gives every vertex's place in the flat platform's
    declaration order, which settles SimGrid's routes between equally short paths
    (interpose/platform/routing.hpp)."""
    _, b = _build(machine, layout, range(1))

    def local(name: str) -> bool:
        return name.startswith("n0-")

    node_points = [[kind, name] for kind, name in b.netpoints if local(name)]
    fabric_points = [[kind, name] for kind, name in b.netpoints if not local(name)]
    index = {name: i for i, (_, name) in enumerate(node_points)}
    fabric_index = {name: i for i, (_, name) in enumerate(fabric_points)}
    node_edges: list[object] = []
    fabric_edges: list[object] = []
    nics: list[list[str]] = []  # [router, its link to the fabric]
    nic_ids: list[int] = []
    order: list[int | str] = []  # the flat declaration order of a node's vertices, "@i" where exit i's switch is
    seen: set[str] = set()
    for a, c, links in b.declared:
        hops = [[name, direction] for name, direction in links]
        if local(a) and local(c):
            node_edges.append([a, c, hops])
        elif not local(a) and not local(c):
            fabric_edges.append([a, c, hops])
        else:  # a NIC's link to its switch, declared from the NIC
            assert local(a) and len(links) == 1 and links[0][1] == "UP", (a, c, links)
            nic = int(a.removeprefix("n0-nic"))
            assert c == fabric_switch(machine, leaf_of_node(machine, 0), nic), (a, c)
            nics.append([a, links[0][0]])
            nic_ids.append(nic)
        for x in (a, c):
            if local(x) and x not in seen:
                seen.add(x)
                order.append(index[x])
        if local(a) != local(c):
            order.append(f"@{len(nics) - 1}")
    assert len(seen) == len(node_points), "a netpoint of the node is on no route"
    attach = [
        [fabric_index[fabric_switch(machine, leaf_of_node(machine, n), nic)] for nic in nic_ids]
        for n in range(layout.nodes)
    ]
    slot = {entry: i for i, entry in enumerate(order) if isinstance(entry, str)}
    fabric_order: list[list[int] | None] = [None] * len(fabric_points)
    for n, row in enumerate(attach):
        for exit_, switch in enumerate(row):
            if fabric_order[switch] is None:
                fabric_order[switch] = [n, slot[f"@{exit_}"]]
    later = 0
    for a, c, _ in b.declared:
        for x in (a, c):
            if not local(x) and fabric_order[fabric_index[x]] is None:
                fabric_order[fabric_index[x]] = [layout.nodes, later]
                later += 1
    assert all(key is not None for key in fabric_order), "a switch of the fabric is on no route"
    node_links = [link for name, link in b.link_specs.items() if local(name)]
    fabric_links = [link for name, link in b.link_specs.items() if not local(name)]
    desc: dict[str, object] = {
        "format": DESCRIPTION_FORMAT,
        "zone": machine.name,
        "host_speed": HOST_SPEED,
        "nodes": layout.nodes,
        "node": {
            "netpoints": node_points,
            "links": [[link.name, link.bandwidth, link.latency] for link in node_links],
            "edges": node_edges,
            "nics": nics,
            "order": order,
        },
        "fabric": {
            "netpoints": fabric_points,
            "links": [[link.name, link.bandwidth, link.latency] for link in fabric_links],
            "edges": fabric_edges,
            "order": fabric_order,
        },
        "attach": attach,
    }
    directions = {
        _of_node(link.name, n) + direction: Link(_of_node(link.name, n), link.bandwidth, link.latency, link.kind)
        for n in range(layout.nodes)
        for link in node_links
        for direction in DIRECTIONS
    }
    directions.update({link.name + direction: link for link in fabric_links for direction in DIRECTIONS})
    return desc, directions


def routes(machine: Machine, layout: Layout) -> Routes:
    """The routes of the platform ``platform_xml`` writes for the same job."""
    return Routes(_build(machine, layout)[1])


#: SimGrid's two links of a full-duplex (SPLITDUPLEX) link NAME: NAME_UP carries what goes from
#: the end the link is declared with first (``link(name, a, b, ...)``: from a to b), NAME_DOWN back.
DIRECTIONS = ("_UP", "_DOWN")


def link_directions(machine: Machine, layout: Layout) -> dict[str, Link]:
    """Every direction of every link of the platform ``platform_xml`` writes for the same job, by
    its SimGrid name (``n0-nic0-ib_UP``): what the results name the links that carried traffic."""
    return _directions(_build(machine, layout)[1])


def _directions(builder: _Builder) -> dict[str, Link]:
    return {link.name + direction: link for link in builder.link_specs.values() for direction in DIRECTIONS}


def fabric_switch(machine: Machine, leaf: int, nic: int | None) -> str:
    """The switch a node's NIC ``nic`` meets the fabric at: its leaf, its rail's switch of that
    leaf (rail-optimized) or its group's router (dragonfly)."""
    f = machine.fabric
    if f.topology == "dragonfly":
        return dragonfly_router(machine, leaf)
    return f"rail{nic}-{leaf}" if f.topology == "rail-optimized" else f"leaf{leaf}"


def _build(machine: Machine, layout: Layout, nodes: range | None = None) -> tuple[ET.Element, _Builder]:
    """The platform of a job: every node of ``nodes`` (all of the layout's by default) and the
    whole fabric the layout's nodes meet at."""
    root = ET.Element("platform", version="4.1")
    zone = ET.SubElement(root, "zone", id=machine.name, routing="DijkstraCache")
    b = _Builder(zone)
    m, G = machine, layout.gpus_per_node
    via_nic = m.mpi.intra_node == "nic"
    f, sw_lat = m.fabric, m.fabric.switch_latency
    nics = sorted({nic_of_gpu(m, g) for g in range(G)})
    switches = sorted({switch_of_gpu(m, g) for g in range(G)})
    rails: list[int | None] = list(nics) if f.topology == "rail-optimized" else [None]
    leaves = sorted({leaf_of_node(m, n) for n in range(layout.nodes)})

    def leaf_switch(leaf: int, nic: int | None) -> str:
        return fabric_switch(m, leaf, nic)

    sockets = m.node.sockets_modelled
    for n in range(layout.nodes) if nodes is None else nodes:
        dma_ends: list[tuple[str, int, int]] = []  # (process endpoint, its socket, its rail's NIC)
        rootc = root_complex(n, 0)
        b.host(cpu_host(n))
        for socket in range(1, sockets):
            b.host(socket_memory_host(n, socket))
        for g in range(G):
            b.host(gpu_host(n, g))
            b.host(copy_engine_host(n, g))
            b.link(
                f"{copy_engine_host(n, g)}-link",
                copy_engine_host(n, g),
                gpu_host(n, g),
                COPY_ENGINE_LINK,
                0.0,
                "copy-engine",
            )
        b.router(rootc)
        for socket in range(1, sockets):
            b.router(root_complex(n, socket))
        for local in range(layout.ranks_per_node):
            # A rank's process in host memory: host-buffer messages within the node are copies
            # through shared memory (two of them meet at the root complex), and between nodes
            # go from memory to the NIC of the rank's GPU's rail. Each side is two hops long, so
            # that no shortest route of other traffic passes through a process (routes are
            # shortest in hops, and hosts may be on the way).
            endpoint = rank_cpu_host(n, local)
            rank_nic = nic_of_gpu(m, local % G)
            home = root_complex(n, socket_of_gpu(m, local % G))  # the rank binds to its GPU's socket
            b.host(endpoint)
            dma_ends.append((endpoint, socket_of_gpu(m, local % G), rank_nic))
            if via_nic:
                continue  # mpi.intra_node = "nic": its only way out is its rail's NIC, even within the node
            b.router(f"{endpoint}-mem")
            b.link(
                f"{endpoint}-shm",
                endpoint,
                f"{endpoint}-mem",
                m.node.host_memcpy_bandwidth,
                SHM_LATENCY,
                "shared-memory",
            )
            b.link(f"{endpoint}-mem", f"{endpoint}-mem", home, m.node.host_memory_bandwidth, 0.0, "memory")
        for socket in range(sockets):
            b.link(
                memory_link(n, socket),
                socket_memory_host(n, socket),
                root_complex(n, socket),
                m.node.host_memory_bandwidth,
                0.0,
                "memory",
            )
        for a in range(sockets):
            for c in range(a + 1, sockets):
                b.link(
                    f"n{n}-socket{a}-{c}",
                    root_complex(n, a),
                    root_complex(n, c),
                    required(m.node.socket_link_bandwidth, "node.socket_link_bandwidth"),
                    required(m.node.socket_link_latency, "node.socket_link_latency"),
                    "socket",
                )
        for s in switches:
            b.router(f"n{n}-pcie{s}")
            b.link(
                f"n{n}-up{s}",
                root_complex(n, socket_of_switch(m, s)),
                f"n{n}-pcie{s}",
                m.pcie.bandwidth,
                m.pcie.latency,
                "pcie",
            )
        for g in range(G):
            if m.host_link.kind == "nvlink-c2c":
                c2c_bandwidth = required(m.host_link.bandwidth, "host_link.bandwidth")
                c2c_latency = required(m.host_link.latency, "host_link.latency")
                b.link(f"n{n}-c2c{g}", rootc, gpu_host(n, g), c2c_bandwidth, c2c_latency, "nvlink-c2c")
                # Grace Hopper: the GPU reaches its own superchip's PCIe (and NIC) through C2C
                b.link(
                    f"n{n}-c2c{g}-io",
                    gpu_host(n, g),
                    f"n{n}-pcie{switch_of_gpu(m, g)}",
                    c2c_bandwidth,
                    c2c_latency,
                    "nvlink-c2c",
                )
            else:
                port = f"n{n}-gpu{g}-port"
                b.router(port)
                b.link(f"n{n}-gpu{g}-pcie", port, gpu_host(n, g), m.pcie.bandwidth, m.pcie.latency, "pcie")
                b.link(f"n{n}-gpu{g}-sw", f"n{n}-pcie{switch_of_gpu(m, g)}", port, m.pcie.bandwidth, 0.0, "pcie")
        for i in nics:
            nic, port = f"n{n}-nic{i}", f"n{n}-nic{i}-port"
            b.router(nic)
            b.router(port)
            b.link(f"{nic}-pcie", port, nic, m.pcie.bandwidth, m.pcie.latency, "pcie")
            rail_gpus = [g for g in range(G) if nic_of_gpu(m, g) == i]
            if m.gpudirect.rdma:
                b.link(f"{nic}-sw", f"n{n}-pcie{switch_of_gpu(m, rail_gpus[0])}", port, m.pcie.bandwidth, 0.0, "pcie")
                # Peer-to-peer inside the switch between a GPU and its rail's NIC: one hop
                # shorter than through the switch core, so traffic keeps to its rail.
                for g in rail_gpus:
                    if m.host_link.kind == "pcie" and switch_of_gpu(m, g) == switch_of_gpu(m, rail_gpus[0]):
                        b.link(f"n{n}-gpu{g}-nic{i}", f"n{n}-gpu{g}-port", port, m.pcie.bandwidth, 0.0, "pcie")
            else:
                # Staging through host memory, pipelined in chunks: each chunk is a copy
                # (its issue overhead, then the chunk over PCIe), so the pipeline moves a
                # chunk per stage, and the first chunk's copy out of the GPU (or the last
                # one's into it) is not overlapped: the link's latency, for a whole chunk
                # (the shim scales it to a smaller message).
                b.link(
                    f"{nic}-sw",
                    root_complex(n, socket_of_nic(m, i)),
                    port,
                    staging_bandwidth(m),
                    staging_stage(m),
                    "staging",
                )
            b.link(
                f"{nic}-ib", nic, leaf_switch(leaf_of_node(m, n), i), m.nic.bandwidth, m.nic.latency + sw_lat / 2, "nic"
            )
        for endpoint, socket, rank_nic in dma_ends:
            # Between nodes, the NIC reads (or writes) the process's buffer in host memory by DMA:
            # one edge from the process to its rail's NIC over its socket's memory and, with
            # GPUDirect RDMA, the links the GPU's copies cross (the PCIe switch's uplink, shared
            # with them); without it, the NIC hangs off the root complex by a link of its own
            # (the staging link is for device buffers only)
            nic, rootc = f"n{n}-nic{rank_nic}", root_complex(n, socket)
            memory = [(memory_link(n, socket), "UP")]
            if m.gpudirect.rdma:
                b.path(endpoint, nic, memory + b.shortest(rootc, nic))
            else:
                b.link(f"{endpoint}-dma", None, None, m.pcie.bandwidth, m.pcie.latency, "pcie")
                b.path(
                    endpoint,
                    nic,
                    memory
                    + b.shortest(rootc, root_complex(n, socket_of_nic(m, rank_nic)))
                    + [(f"{endpoint}-dma", "UP"), (f"{nic}-pcie", "UP")],
                )
        if m.nvlink.topology == "mesh":
            for a in range(G):
                for c in range(a + 1, G):
                    b.link(
                        f"n{n}-nvl{a}-{c}",
                        gpu_host(n, a),
                        gpu_host(n, c),
                        m.nvlink_pair_bandwidth,
                        required(m.nvlink.latency, "nvlink.latency"),
                        "nvlink",
                    )
        elif m.nvlink.topology == "nvswitch" and G > 1:
            b.router(f"n{n}-nvswitch")
            for g in range(G):
                b.link(
                    f"n{n}-nvl{g}",
                    gpu_host(n, g),
                    f"n{n}-nvswitch",
                    m.nvlink_pair_bandwidth,
                    required(m.nvlink.latency, "nvlink.latency") / 2,
                    "nvlink",
                )
        if stages_above_rdma_limit(m):
            # gpudirect.rdma_limit: a GPU's device-buffer messages above the limit start at its staged
            # endpoint, whose one edge goes as without RDMA: out of the GPU to the root complex, then
            # the staging pipeline (a link only this edge crosses, so no other route takes it) to the
            # NIC of its rail
            for i in nics:
                nic = f"n{n}-nic{i}"
                b.link(f"{nic}-stage", None, None, staging_bandwidth(m), staging_stage(m), "staging")
            for g in range(G):
                nic = f"n{n}-nic{nic_of_gpu(m, g)}"
                rootc_of_nic = root_complex(n, socket_of_nic(m, nic_of_gpu(m, g)))
                b.host(staged_endpoint_host(n, g))
                b.path(
                    staged_endpoint_host(n, g),
                    nic,
                    [*b.shortest(gpu_host(n, g), rootc_of_nic), (f"{nic}-stage", "UP"), (f"{nic}-pcie", "UP")],
                )
        if via_nic:
            # mpi.intra_node = "nic": a GPU's device-buffer messages start at its message
            # endpoint, whose one edge is the GPU's own way to its rail's NIC: no NVLink, no
            # peer-to-peer, not even to the GPUs of its node
            for g in range(G):
                nic = f"n{n}-nic{nic_of_gpu(m, g)}"
                b.host(mpi_endpoint_host(n, g))
                b.path(mpi_endpoint_host(n, g), nic, b.shortest(gpu_host(n, g), nic))
    for leaf in leaves:
        for rail in rails:
            b.router(leaf_switch(leaf, rail))
    if f.topology == "dragonfly":
        _dragonfly_links(b, m, leaves)
    elif len(leaves) > 1 or len(rails) > 1:
        # each level's uplinks carry what comes up to it, divided by the oversubscription
        pods = sorted({pod_of_leaf(m, leaf) for leaf in leaves}) if f.levels == 3 else [None]
        spine_up: dict[int | None, float] = {}
        for pod in pods:
            b.router(spine_switch(pod))
        under = Counter(leaf_of_node(m, n) for n in range(layout.nodes))
        for leaf in leaves:
            nodes_here = under[leaf]
            pod = pod_of_leaf(m, leaf) if f.levels == 3 else None
            for rail in rails:
                nics_up = nodes_here * (len(nics) if rail is None else 1)
                up = nics_up * m.nic.bandwidth / f.oversubscription
                b.link(
                    f"{leaf_switch(leaf, rail)}-up",
                    leaf_switch(leaf, rail),
                    spine_switch(pod),
                    up,
                    sw_lat,
                    "fabric-leaf",
                )
                spine_up[pod] = spine_up.get(pod, 0.0) + up
        if len(pods) > 1:
            b.router("core")
            for pod in pods:
                b.link(
                    f"{spine_switch(pod)}-up",
                    spine_switch(pod),
                    "core",
                    spine_up[pod] / f.oversubscription,
                    sw_lat,
                    "fabric-spine",
                )
    b.finish()
    return root, b
