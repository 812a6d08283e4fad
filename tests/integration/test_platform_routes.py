"""Every class of route, compared between a job's two platforms (issue 21): the flat one
(platform_xml: one DijkstraCache zone, routes by fewest links) and the structured one that
`orrery run` gives SimGrid (platform.json through liborrery_platform.so), both as SimGrid
computes them (orrery-routes, interpose/platform/routes_tool.cpp), on every built-in machine and
layouts that exercise each kind of endpoint and each place of one relative to another; and the
flat platform's routes against orrery.machines.platform.routes, the routes Orrery's reports and
physical bounds use.

One orrery-routes process per platform answers every ordered pair of its hosts (a few thousand
at most): the layouts are small (up to five nodes), so that every pair is compared, ties
between equally short paths included."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orrery import machines
from orrery._paths import lib_dir
from orrery.machines import platform
from orrery.machines.description import Machine
from orrery.run import launch

TOOL = lib_dir() / "orrery-routes"
LOOPBACK = "__loopback__"  # SimGrid's link from a host to itself


@dataclass(frozen=True)
class Variant:
    """A layout of a machine: its nodes, the overrides it needs, GPUs and ranks per node (of the
    machine's GPUs G), and the classes of route it is there to exercise (Endpoint kinds and
    places, see route_class)."""

    nodes: int
    overrides: dict[str, object] = field(default_factory=dict)
    gpus: Callable[[int], int] | None = None
    ranks: Callable[[int], int] | None = None
    exercises: frozenset[str] = frozenset()
    pcie_only: bool = False  # node.socket_link_* are for GPUs on PCIe


TWO_PER_LEAF = {"fabric.nodes_per_leaf": 2}  # nodes 0 and 1 under one leaf, node 2 under another
VARIANTS = {
    "1-node": Variant(
        1, exercises=frozenset({"gpu", "copy-engine", "memory", "rank", "self", "same GPU", "same node"})
    ),
    "1-leaf": Variant(2, exercises=frozenset({"same leaf"})),
    "fat-tree": Variant(3, {"fabric.topology": "fat-tree", **TWO_PER_LEAF}, exercises=frozenset({"other leaf"})),
    "rail-optimized": Variant(
        3, {"fabric.topology": "rail-optimized", **TWO_PER_LEAF}, exercises=frozenset({"same leaf", "other leaf"})
    ),
    # leaves 0 and 1 in pod 0, leaf 2 in pod 1
    "3-level": Variant(
        3,
        {"fabric.levels": 3, "fabric.leaves_per_pod": 2, "fabric.nodes_per_leaf": 1},
        exercises=frozenset({"other leaf", "other pod"}),
    ),
    "3-level-rails": Variant(
        3,
        {
            "fabric.topology": "rail-optimized",
            "fabric.levels": 3,
            "fabric.leaves_per_pod": 2,
            "fabric.nodes_per_leaf": 1,
        },
        exercises=frozenset({"other leaf", "other pod"}),
    ),
    # groups g0 (routers r0, r1), g1 (r0, r1), g2 (r0, and r1 only for its global link to g1)
    "dragonfly": Variant(
        5,
        {
            "fabric.topology": "dragonfly",
            "fabric.nodes_per_leaf": 1,
            "fabric.routers_per_group": 2,
            "fabric.local_bandwidth": "100GB/s",
            "fabric.global_bandwidth": "50GB/s",
        },
        exercises=frozenset({"same group", "other group"}),
    ),
    "fewer-gpus": Variant(2, {"fabric.nodes_per_leaf": 1}, gpus=lambda g: max(1, g // 2)),
    "more-ranks": Variant(2, {"fabric.nodes_per_leaf": 1}, ranks=lambda g: 2 * g, exercises=frozenset({"rank"})),
    "intra-node-nic": Variant(3, {"mpi.intra_node": "nic", **TWO_PER_LEAF}, exercises=frozenset({"message"})),
    "no-rdma": Variant(3, {"gpudirect.rdma": False, **TWO_PER_LEAF}),
    "rdma-limit": Variant(3, {"gpudirect.rdma_limit": "1MiB", **TWO_PER_LEAF}, exercises=frozenset({"staged"})),
    "sockets": Variant(
        2,
        {"node.socket_link_bandwidth": "30GB/s", "node.socket_link_latency": "0.1us", "fabric.nodes_per_leaf": 1},
        exercises=frozenset({"other socket"}),
        pcie_only=True,
    ),
}


def load(name: str, variant: Variant) -> tuple[Machine, platform.Layout]:
    m = machines.load(name, variant.overrides)
    g = m.node.gpus
    gpus = variant.gpus(g) if variant.gpus else None
    ranks = variant.ranks(g) if variant.ranks else None
    return m, platform.Layout.for_machine(m, variant.nodes, gpus, ranks)


CASES = [
    (name, label)
    for name in machines.builtin_names()
    for label, variant in VARIANTS.items()
    if not variant.pcie_only or machines.load(name).host_link.kind == "pcie"
]


@dataclass(frozen=True)
class Endpoint:
    """A host of the platform and what it is: its kind, node, GPU (of a GPU's own hosts), the
    NIC of its rail (rails: a GPU's and a rank's) and its socket."""

    name: str
    kind: str  # gpu, copy-engine, message, staged (a GPU's); memory (a socket's); rank (a process)
    node: int
    gpu: int | None
    rail: int | None
    socket: int


def endpoints(m: Machine, layout: platform.Layout) -> list[Endpoint]:
    """Every host of a job's platform, by the names platform.py gives them."""
    out = []
    G = layout.gpus_per_node
    for n in range(layout.nodes):
        for s in range(m.node.sockets_modelled):
            out.append(Endpoint(platform.socket_memory_host(n, s), "memory", n, None, None, s))
        for g in range(G):
            rail, socket = platform.nic_of_gpu(m, g), platform.socket_of_gpu(m, g)
            out.append(Endpoint(platform.gpu_host(n, g), "gpu", n, g, rail, socket))
            out.append(Endpoint(platform.copy_engine_host(n, g), "copy-engine", n, g, rail, socket))
            if m.mpi.intra_node == "nic":
                out.append(Endpoint(platform.mpi_endpoint_host(n, g), "message", n, g, rail, socket))
            if platform.stages_above_rdma_limit(m):
                out.append(Endpoint(platform.staged_endpoint_host(n, g), "staged", n, g, rail, socket))
        for local in range(layout.ranks_per_node):
            g = local % G
            rail, socket = platform.nic_of_gpu(m, g), platform.socket_of_gpu(m, g)
            out.append(Endpoint(platform.rank_cpu_host(n, local), "rank", n, None, rail, socket))
    return out


def place(m: Machine, a: Endpoint, b: Endpoint) -> str:
    """Where b is from a: the same host, GPU or node, or across the fabric."""
    f = m.fabric
    if a.name == b.name:
        return "self"
    if a.node == b.node:
        return "same GPU" if a.gpu is not None and a.gpu == b.gpu else "same node"
    la, lb = platform.leaf_of_node(m, a.node), platform.leaf_of_node(m, b.node)
    if la == lb:
        return "same leaf"
    if f.topology == "dragonfly":
        assert f.routers_per_group is not None
        return "same group" if la // f.routers_per_group == lb // f.routers_per_group else "other group"
    if f.levels == 3:
        return "other leaf" if platform.pod_of_leaf(m, la) == platform.pod_of_leaf(m, lb) else "other pod"
    return "other leaf"


def route_class(m: Machine, a: Endpoint, b: Endpoint) -> tuple[str, str, str, str, str]:
    """(a's kind, b's kind, b's place, same rail or another, same socket or another)."""
    rail = "-" if a.rail is None or b.rail is None else "same rail" if a.rail == b.rail else "other rail"
    socket = "-" if a.node != b.node or m.node.sockets_modelled == 1 else "same socket"
    if socket != "-" and a.socket != b.socket:
        socket = "other socket"
    return a.kind, b.kind, place(m, a, b), rail, socket


Route = tuple[str, tuple[str, ...]]  # the latency as printed (%.17g), the links in order


def routes_of(platform_file: Path, pairs: Path, env: dict[str, str] | None = None) -> list[str]:
    """Every pair's route on a platform (the pairs: a file of lines "SRC DST"), from one
    orrery-routes process: its lines, one a pair (through files, not pipes: a pipe's thousands
    of small reads and writes cost more than the routes)."""
    out = pairs.with_name(f"{platform_file.stem}.routes")
    with pairs.open() as stdin, out.open("w") as stdout:
        proc = subprocess.run(
            [str(TOOL), str(platform_file)],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
    assert proc.returncode == 0, f"orrery-routes {platform_file} failed ({proc.returncode}): {proc.stderr}"
    lines = out.read_text().splitlines()
    asked = pairs.read_text().count("\n")
    assert len(lines) == asked, f"orrery-routes {platform_file}: {len(lines)} lines for {asked} pairs"
    return lines


def parse(line: str) -> Route:
    _, _, latency, *links = line.split(" ")
    return latency, tuple(links)


@dataclass
class Job:
    name: str
    machine: Machine
    layout: platform.Layout
    endpoints: list[Endpoint]
    hosts: list[str]  # the flat platform's hosts, as it declares them
    pairs: list[tuple[str, str]]
    flat: list[str]  # orrery-routes' line of each pair
    structured: list[str]
    classes: dict[tuple[str, str, str, str, str], list[int]]  # every class's pairs (their places in pairs)

    def route(self, i: int) -> Route:
        """Pair i's route on the flat platform."""
        line = self.flat[i]
        assert line.startswith("{} {} ".format(*self.pairs[i])), (self.pairs[i], line)
        return parse(line)


def classes(m: Machine, hosts: list[Endpoint]) -> dict[tuple[str, str, str, str, str], list[int]]:
    """Every class of route between the hosts, with its pairs (their places in the list of every
    ordered pair, source by source)."""
    out: dict[tuple[str, str, str, str, str], list[int]] = {}
    for i, (a, b) in enumerate((a, b) for a in hosts for b in hosts):
        out.setdefault(route_class(m, a, b), []).append(i)
    return out


def job_of(name: str, label: str, d: Path) -> Job:
    """A layout's platforms in folder d, flat and structured, and every pair's route on each."""
    m, layout = load(name, VARIANTS[label])
    ends = endpoints(m, layout)
    pairs = [(a.name, b.name) for a in ends for b in ends]
    xml = d / "flat.xml"  # beside the run folder's platform, which write_platform replaces
    xml.write_text(platform.platform_xml(m, layout))
    hosts = [h.attrib["id"] for h in ET.parse(xml).iter("host")]
    (d / "run").mkdir()
    launch.write_platform(m, layout, d / "run")
    args, env = launch.platform_args(d / "run")
    assert args[1].endswith("liborrery_platform.so"), args
    asked = d / "pairs.txt"
    asked.write_text("".join(f"{a} {b}\n" for a, b in pairs))
    flat, structured = routes_of(xml, asked), routes_of(Path(args[1]), asked, env)
    return Job(f"{name} {label}", m, layout, ends, hosts, pairs, flat, structured, classes(m, ends))


def check_classes(job: Job, label: str) -> None:
    """Every host of the platform is one of the endpoints named here, and the layout has the
    classes of route it is there for (overrides that did nothing would leave them out)."""
    assert sorted(job.hosts) == sorted(e.name for e in job.endpoints)
    found = {part for cls in job.classes for part in cls}
    assert VARIANTS[label].exercises <= found, f"{job.name}: no {sorted(VARIANTS[label].exercises - found)} route"
    if label == "fewer-gpus":
        assert job.layout.gpus_per_node < job.machine.node.gpus
    if job.layout.nodes > 1 and job.machine.nic.per_node > 1:
        assert "other rail" in found


def check_structured_is_flat(job: Job) -> None:
    """Every pair of hosts: the same links in the same order, and the same latency to the last
    bit, on the structured platform as on the flat one."""
    if job.structured == job.flat:
        return
    ends = {e.name: e for e in job.endpoints}
    wrong = [
        f"{a} -> {b} ({', '.join(route_class(job.machine, ends[a], ends[b]))}):\n  structured {s}\n  flat       {f}"
        for (a, b), s, f in zip(job.pairs, job.structured, job.flat)
        if s != f
    ]
    raise AssertionError(f"{job.name}: {len(wrong)} of {len(job.pairs)} routes differ, e.g.\n" + "\n".join(wrong[:5]))


def check_latency_is_links(job: Job, links: dict[str, platform.Link]) -> None:
    """What orrery-routes prints (one pair of each class): a host to itself crosses SimGrid's
    loopback; every other route crosses links of the platform (a route to a GPU's staged endpoint
    from its own node may cross one twice: out to the NIC and back over the staging edge), and
    its latency is theirs summed."""
    for i in (pairs[0] for pairs in job.classes.values()):
        (a, b), (latency, route) = job.pairs[i], job.route(i)
        if a == b:
            assert route == (LOOPBACK,), (a, route)
            continue
        assert route and LOOPBACK not in route, (a, b, route)
        assert float(latency) == pytest.approx(sum(links[name].latency for name in route), rel=1e-12), (a, b)


def strip(direction: str) -> str:
    return direction.removesuffix("_UP").removesuffix("_DOWN")


def check_orrerys_routes(job: Job, links: dict[str, platform.Link]) -> None:
    """orrery.machines.platform.routes, which the reports and the physical bounds use, gives
    SimGrid's route between one pair of each class (ties between equally short paths broken as
    SimGrid breaks them): the same links, latency and bottleneck."""
    routes = platform.routes(job.machine, job.layout)
    wrong = []
    for cls, pairs in sorted(job.classes.items()):
        if cls[2] == "self":
            continue  # SimGrid's loopback, not a link of the platform
        (a, b), (latency, route) = job.pairs[pairs[0]], job.route(pairs[0])
        mine = routes.between(a, b)
        if Counter(link.name for link in mine) != Counter(strip(name) for name in route):
            wrong.append(f"{a} -> {b} ({', '.join(cls)}): SimGrid {list(route)}, Orrery {[x.name for x in mine]}")
            continue
        assert routes.latency(a, b) == pytest.approx(float(latency), rel=1e-12), (a, b)
        assert routes.bottleneck(a, b) == min(links[name].bandwidth for name in route), (a, b)
    assert not wrong, f"{job.name}: {len(wrong)} routes differ, e.g.\n" + "\n".join(wrong[:5])


@pytest.mark.parametrize(("name", "label"), CASES, ids=[f"{name}-{label}" for name, label in CASES])
def test_platform_routes(name, label, tmp_path):
    """A layout of a machine: its route classes are there, its structured platform routes every
    pair of hosts as the flat one, and Orrery's own routes are SimGrid's (one check each, on one
    orrery-routes run per platform)."""
    job = job_of(name, label, tmp_path)
    links = platform.link_directions(job.machine, job.layout)
    check_classes(job, label)
    check_structured_is_flat(job)
    check_latency_is_links(job, links)
    check_orrerys_routes(job, links)


@pytest.fixture(scope="module")
def small_platform(tmp_path_factory) -> Path:
    m, layout = load("h100-ib200", VARIANTS["1-node"])
    xml = tmp_path_factory.mktemp("small") / "platform.xml"
    xml.write_text(platform.platform_xml(m, layout))
    return xml


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("n0-gpu0 n9-gpu0\n", "orrery-routes: stdin line 2: host 'n9-gpu0' is not in {xml}"),
        ("n0-gpu0\n", "orrery-routes: stdin line 2: 'n0-gpu0' (expected \"SRC DST\", two host names)"),
        ("n0-gpu0 n0-gpu1 n0-cpu\n", "orrery-routes: stdin line 2: 'n0-gpu0 n0-gpu1 n0-cpu' (expected"),
    ],
)
def test_routes_tool_refuses_a_bad_line(small_platform, line, message):
    proc = subprocess.run(
        [str(TOOL), str(small_platform)], input="n0-gpu0 n0-gpu1\n" + line, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stdout.count("\n") == 1  # the good line's route, then the error
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(message.format(xml=small_platform))


def test_routes_tool_refuses_a_missing_platform(tmp_path):
    proc = subprocess.run([str(TOOL), str(tmp_path / "none.xml")], input="", capture_output=True, text=True)
    assert proc.returncode == 2
    assert (
        proc.stderr
        == f"orrery-routes: platform '{tmp_path / 'none.xml'}': no such file (expected a SimGrid platform, .xml or .so)\n"
    )


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: d.update(format="orrery-platform/0"), 'format "orrery-platform/0", expected "orrery-platform/1"'),
        (lambda d: d["node"]["order"].pop(0), "a vertex of the node has no place in its order"),
        (lambda d: d["attach"].pop(), "attach has 1 nodes, expected 2"),
    ],
)
def test_a_bad_platform_description_stops_the_plugin_in_one_line(damage, message, tmp_path):
    """liborrery_platform.so reads only what orrery/machines/platform.py writes; a description it
    cannot build from stops SimGrid with one line naming the file (exit 3, Orrery's own error)."""
    m, layout = load("h100-ib200", VARIANTS["1-leaf"])
    desc, _ = platform.description(m, layout)
    damage(desc)
    path = tmp_path / "platform.json"
    path.write_text(json.dumps(desc))
    proc = subprocess.run(
        [str(TOOL), str(launch.platform_library())],
        input="",
        capture_output=True,
        text=True,
        env={**os.environ, "ORRERY_PLATFORM": str(path)},
    )
    assert (proc.returncode, proc.stderr) == (3, f"orrery: platform: {path}: {message}\n")
