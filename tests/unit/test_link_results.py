"""Link utilisation on the Python side: what each platform link is (platform.link_directions), how
the report's link rows become results.json's `links` (results.read_run), the summary's busiest
link, and the series' header the trace reads (docs/simulation.md, "Link utilisation")."""

from __future__ import annotations

from pathlib import Path

import pytest

from orrery import machines as machine
from orrery.errors import InputError, SimulationError
from orrery.machines import platform
from orrery.run import launch, results

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
HEADER = "\t".join(results.REPORT_COLUMNS) + "\n"


def kinds(name: str, nodes: int, *sets: str) -> dict[str, str]:
    m = machine.load(name, machine.parse_overrides(list(sets)))
    return {d: link.kind for d, link in platform.link_directions(m, platform.Layout.for_machine(m, nodes)).items()}


def test_every_link_direction_has_the_kind_of_what_the_platform_built_it_for():
    """Both directions of each link, by SimGrid's names (NAME_UP, NAME_DOWN), with the kind of the
    place platform.py builds it in: PCIe around the switches, NVLink between GPUs, the NIC's port
    to its leaf, the leaves' uplinks, host memory, a process's shared memory, a copy engine."""
    h100 = kinds("h100-ib200", 2, "fabric.nodes_per_leaf=1")
    expected = {
        "n0-up0": "pcie",
        "n0-gpu0-sw": "pcie",
        "n0-gpu0-pcie": "pcie",
        "n0-gpu0-nic0": "pcie",
        "n0-nic0-sw": "pcie",
        "n0-nic0-pcie": "pcie",
        "n0-nvl0-1": "nvlink",
        "n0-nic0-ib": "nic",
        "leaf1-up": "fabric-leaf",
        "n0-mem": "memory",
        "n0-cpu2-mem": "memory",
        "n1-cpu2-shm": "shared-memory",
        "n1-gpu3-ce-link": "copy-engine",
    }
    for name, kind in expected.items():
        assert (h100[name + "_UP"], h100[name + "_DOWN"]) == (kind, kind), name
    assert set(h100.values()) == set(expected.values())
    assert kinds("gh200-slingshot", 1)["n0-c2c0_UP"] == "nvlink-c2c"
    assert kinds("gh200-slingshot", 1)["n0-c2c0-io_DOWN"] == "nvlink-c2c"
    assert kinds("dgx-a100", 1)["n0-nvl5_UP"] == "nvlink"  # to the NVSwitch
    assert kinds("h100-pcie", 1)["n0-socket0-1_UP"] == "socket"
    staged = kinds("h100-ib200", 1, "gpudirect.rdma=false")
    assert (staged["n0-nic0-sw_UP"], staged["n0-cpu0-dma_UP"]) == ("staging", "pcie")
    pods = ("fabric.nodes_per_leaf=1", "fabric.levels=3", "fabric.leaves_per_pod=1")
    assert kinds("h100-ib200", 2, *pods)["spine1-up_UP"] == "fabric-spine"
    dragonfly = kinds(
        "h100-ib200",
        3,
        "fabric.topology='dragonfly'",
        "fabric.nodes_per_leaf=1",
        "fabric.routers_per_group=2",
        "fabric.local_bandwidth='50GB/s'",
        "fabric.global_bandwidth='10GB/s'",
    )
    assert (dragonfly["g0-r0-g0-r1_UP"], dragonfly["global-g0-g1_DOWN"]) == ("fabric-local", "fabric-global")


def test_link_directions_are_the_links_of_the_platform_xml():
    m = machine.load("h100-ib200")
    layout = platform.Layout.for_machine(m, 2)
    xml, directions = platform.generate(m, layout)
    assert xml == platform.platform_xml(m, layout) and directions == platform.link_directions(m, layout)
    declared = {line.split('id="')[1].split('"')[0] for line in xml.splitlines() if "<link " in line}
    assert set(directions) == {name + d for name in declared for d in ("_UP", "_DOWN")}
    assert all(directions[n + "_UP"].bandwidth == directions[n + "_DOWN"].bandwidth for n in declared)


def report(tmp_path: Path, links: str) -> None:
    rank = "".join(
        f"0\t{cat}\t{name}\t{count}\t0\t{t}\n"
        for cat, name, count, t in [
            ("rank", "host_api", 0, 0),
            ("rank", "gpu_wait", 0, 0),
            ("rank", "end", 0, 1e-5),
            ("rank", "finished", 1, 0),
            ("engine", "compute", 0, 0),
            ("engine", "H2D", 0, 0),
            ("engine", "D2H", 0, 0),
            ("overlap", "communication", 0, 0),
            ("overlap", "hidden", 0, 0),
            ("placement", "n0-gpu0", 0, 0),
            ("mixed", "placements", 0, 0),
        ]
    )
    status = "-1\tstatus\tcompleted\t0\t0\t1e-05\n"
    (tmp_path / "report.tsv").write_text(HEADER + "-1\trun\tmakespan\t0\t0\t1e-05\n" + status + rank + links)


def test_link_rows_become_links_with_the_platform_s_kind_and_capacity_busiest_by_bytes(tmp_path):
    """The shim's rows (rank -1, "link", direction, transfers, bytes, busy seconds) in any order:
    results.json's links, most bytes first, equal bytes by name; the kind and capacity are the
    platform's. Transfers that crossed a link are the shim's count, not a LinkResult field."""
    m = machine.load("h100-ib200")
    directions = platform.link_directions(m, platform.Layout.for_machine(m, 1))
    report(
        tmp_path,
        "-1\tlink\tn0-up0_UP\t1\t1000\t2e-08\n"
        "-1\tlink\tn0-mem_UP\t1\t1000\t2e-08\n"
        "-1\tlink\tn0-nvl0-1_DOWN\t2\t4000.5\t3e-08\n",
    )
    res = results.read_run(tmp_path, {}, 0, directions)
    assert res.links == [
        results.LinkResult("n0-nvl0-1_DOWN", "nvlink", m.nvlink_pair_bandwidth, 4000.5, 3e-08),
        results.LinkResult("n0-mem_UP", "memory", m.node.host_memory_bandwidth, 1000.0, 2e-08),
        results.LinkResult("n0-up0_UP", "pcie", m.pcie.bandwidth, 1000.0, 2e-08),
    ]
    assert results.Results.from_json(res.to_json()).links == res.links
    frame = res.to_frame("links")
    assert list(frame["link"]) == [link.name for link in res.links]
    assert list(frame["utilisation"]) == [results.utilisation(link, 1e-5) for link in res.links]


def test_a_link_row_the_platform_does_not_have_is_orrery_s_error(tmp_path):
    report(tmp_path, "-1\tlink\tn9-nowhere_UP\t1\t10\t1e-09\n")
    with pytest.raises(
        SimulationError, match="the report names a link 'n9-nowhere_UP' that the platform does not have"
    ):
        results.read_run(tmp_path, {}, 0, {})


def test_the_summary_names_the_link_that_used_most_of_its_capacity():
    """By utilisation (bytes / (capacity x makespan)), not bytes: a copy-engine link that carried
    the most at a capacity nothing reaches is not the bottleneck; 2 MB on a 50 GB/s link over a
    100 us run is 40 %, busy 60 us of it."""
    run = results.Results("completed", None, 100e-6, [], {}, {"machine": "m"})
    run.links = [
        results.LinkResult("n0-gpu0-ce-link_UP", "copy-engine", 1e18, 9e6, 1e-6),
        results.LinkResult("n0-nvl0-1_UP", "nvlink", 50e9, 2e6, 60e-6),
        results.LinkResult("n0-up0_UP", "pcie", 100e9, 2e6, 30e-6),
    ]
    assert results.busiest_link(run) == (run.links[1], pytest.approx(0.4))
    line = (
        "busiest link (by utilisation): n0-nvl0-1_UP (nvlink), 2.000 MB in 60.000 us busy (60.0% of the run), "
        "40.0% of its 50.000 GB/s over the run"
    )
    assert line in results.summary(run).splitlines()
    run.links = []
    assert results.busiest_link(run) is None and "busiest link" not in results.summary(run)


def test_a_series_needs_the_accounting(tmp_path):
    m = machine.load("h100-ib200")
    opts = launch.RunOptions(m, platform.Layout.for_machine(m, 1), ["x"], tmp_path, link_accounting=False)
    opts.link_series = True
    with pytest.raises(InputError) as e:
        launch.run(opts)
    assert str(e.value).startswith("link_series")
    assert not any(tmp_path.iterdir())


def test_the_series_header_is_the_trace_s_contract():
    """docs/simulation.md and the trace (orrery/run/trace.py) read link_series.tsv by this header."""
    source = (REPO / "interpose" / "core" / "links.cpp").read_text()
    assert '"time_s\\tlink\\tbytes_per_s\\n"' in source


def test_the_docs_list_every_kind_as_the_platform_describes_it():
    """docs/simulation.md's table of kinds is LINK_KINDS, row for row, in its order."""
    page = (REPO / "docs" / "simulation.md").read_text()
    rows = [line.split(" | ")[:2] for line in page.splitlines() if line.startswith("| `")]
    table = [(kind.strip("| `"), meaning) for kind, meaning in rows if kind.strip("| `") in platform.LINK_KINDS]
    assert table == list(platform.LINK_KINDS.items())
