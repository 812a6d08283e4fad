import tomllib
from importlib import resources

import pytest

from orrery import machine
from orrery.errors import InputError

pytestmark = pytest.mark.unit


def raw(name="h100-ib200"):
    return tomllib.loads(resources.files("orrery.machines").joinpath(f"{name}.toml").read_text())


def test_builtin_h100_ib200_values():
    m = machine.load("h100-ib200")
    assert m.node.gpus == 4
    assert m.gpu.sm_count == 132
    assert m.pcie.bandwidth == 53.8e9
    assert m.nic.bandwidth == 25e9
    assert m.nvlink_pair_bandwidth == 6 * 25e9


@pytest.mark.parametrize("name", machine.builtin_names())
def test_every_builtin_parameter_has_a_source(name):
    m = machine.load(name)
    assert set(m.parameters()) == set(m.sources)


def test_override_is_parsed_with_units():
    m = machine.load("h100-ib200", ["pcie.bandwidth=64GB/s", "node.gpus=2", "nic.per_node=2"])
    assert (m.pcie.bandwidth, m.node.gpus) == (64e9, 2)


def test_override_of_unknown_key_is_named():
    with pytest.raises(InputError, match=r"--set: key 'pcie\.speed': got 1"):
        machine.load("h100-ib200", ["pcie.speed=1"])


def test_override_with_bad_unit_names_the_override():
    with pytest.raises(InputError, match=r"--set pcie.bandwidth .*got '5GB', expected a bandwidth"):
        machine.load("h100-ib200", ["pcie.bandwidth=5GB"])


def test_override_needs_key_and_value():
    with pytest.raises(InputError, match="KEY=VALUE"):
        machine.load("h100-ib200", ["pcie.bandwidth"])


def test_unknown_machine_lists_the_builtins():
    with pytest.raises(InputError, match="h100-ib200"):
        machine.load("nowhere")


def test_file_errors_name_file_key_and_value(tmp_path):
    text = resources.files("orrery.machines").joinpath("h100-ib200.toml").read_text()
    path = tmp_path / "m.toml"
    path.write_text(text.replace("sm_count = 132\n", ""))
    with pytest.raises(InputError, match=rf"{path}: key 'gpu.sm_count': got None, expected this key"):
        machine.load(str(path))
    path.write_text(text.replace("gpus = 4\n", 'gpus = 4\ncolour = "green"\n'))
    with pytest.raises(InputError, match=r"key 'node.colour': got 'green', expected no such key"):
        machine.load(str(path))
    path.write_text(text.replace('bandwidth = "53.8GB/s"', 'bandwidth = "53.8"'))
    machine.load(str(path))  # a plain number is bytes/s
    path.write_text(text.replace('bandwidth = "53.8GB/s"', 'bandwidth = "53.8 GB"'))
    with pytest.raises(InputError, match=r"key 'pcie.bandwidth': got '53.8 GB', expected a bandwidth"):
        machine.load(str(path))
    path.write_text("[node\n")
    with pytest.raises(InputError, match="valid TOML"):
        machine.load(str(path))


def test_topology_specific_parameters_are_required():
    data = raw()
    data["nvlink"] = {"topology": "nvswitch", "link_bandwidth": "25GB/s", "latency": "1us"}
    with pytest.raises(InputError, match="nvlink.links_per_gpu is required for nvlink.topology = 'nvswitch'"):
        machine.validate(data, "test")
    data = raw()
    data["host_link"] = {"kind": "nvlink-c2c"}
    with pytest.raises(InputError, match="host_link.bandwidth and host_link.latency are required"):
        machine.validate(data, "test")


def test_fat_tree_levels_are_checked():
    with pytest.raises(InputError, match="fabric.leaves_per_pod is required for fabric.levels = 3"):
        machine.load("h100-ib200", ["fabric.levels=3"])
    with pytest.raises(InputError, match="fabric.levels = 3 is for fat-tree and rail-optimized fabrics, not dragonfly"):
        machine.load("h100-ib200", ["fabric.levels=3", "fabric.leaves_per_pod=2", "fabric.topology='dragonfly'",
                                    "fabric.routers_per_group=2", "fabric.local_bandwidth='50GB/s'",
                                    "fabric.global_bandwidth='10GB/s'"])
    with pytest.raises(InputError, match=r"key 'fabric.levels': got 4, expected Input should be 2 or 3"):
        machine.load("h100-ib200", ["fabric.levels=4"])
    assert machine.load("h100-ib200", ["fabric.levels=3", "fabric.leaves_per_pod=2"]).fabric.levels == 3


def test_override_may_set_a_parameter_the_file_leaves_out():
    m = machine.load("h100-ib200", ["nvlink.topology=nvswitch", "nvlink.links_per_gpu=18"])
    assert m.nvlink_pair_bandwidth == 18 * 25e9


def test_semantic_checks():
    data = raw()
    data["nic"]["per_node"] = 8
    with pytest.raises(InputError, match=r"nic.per_node \(8\) must not exceed node.gpus \(4\)"):
        machine.validate(data, "test")
    data = raw()
    data["sources"]["gpu.colour"] = "x"
    with pytest.raises(InputError, match="sources names 'gpu.colour'"):
        machine.validate(data, "test")
    data = raw()
    data["node"]["socket_link_bandwidth"] = "64GB/s"
    with pytest.raises(InputError, match="node.socket_link_bandwidth and node.socket_link_latency go together"):
        machine.validate(data, "test")
    with pytest.raises(InputError, match="node.socket_link_bandwidth is for GPUs on PCIe"):
        machine.load("gh200-slingshot", ["node.socket_link_bandwidth='64GB/s'", "node.socket_link_latency='0.1us'"])


@pytest.mark.parametrize("override, key, expected", [
    ("copies.H2D=[{latency = '1us', bandwidth = '0GB/s'}]", "copies.H2D.0.bandwidth", "greater than 0"),
    ("messages.host_inter=[{latency = '-1us', bandwidth = '1GB/s'}]", "messages.host_inter",
     "segment 1 a non-negative latency (got -1e-06 s)"),
    ("gaps.host_intra=[{up_to = '1kB', latency = '1us', bandwidth = '1GB/s'}, {latency = '-2us', bandwidth = '1GB/s'}]",
     "gaps.host_intra", "segment 2 a latency of at least -1e-06 s, no negative time above 1000 B (got -2e-06 s)"),
    ("collectives.alltoall=[{extra = '3 furlongs'}]", "collectives.alltoall.0.extra", "a time such as"),
    ("gaps.device_inter=[{up_to = '4KiB', latency = '7us', bandwidth = '4GB/s'}]", "gaps.device_inter",
     "the last segment covers every larger size and has no up_to"),
    ("copies.D2H=[{up_to = '2MB', latency = 0, bandwidth = 1e9}, {up_to = '1MB', latency = 0, bandwidth = 1e9}, "
     "{latency = 0, bandwidth = 1e9}]", "copies", "every segment but the last needs up_to, increasing"),
])
def test_measured_model_errors_name_the_override_key_and_value(override, key, expected):
    with pytest.raises(InputError) as e:
        machine.load("h100-ib200", [override])
    assert str(e.value).startswith(f"--set {override.split('=')[0]} (on built-in machine h100-ib200)")
    assert key in str(e.value) and expected in str(e.value)
