import re
import tomllib
from importlib import resources

import pytest

from orrery import machines as machine
from orrery.errors import InputError

pytestmark = pytest.mark.unit


def raw(name="h100-ib200"):
    return tomllib.loads(resources.files("orrery.machines.builtin").joinpath(f"{name}.toml").read_text())


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


# FP32 lanes per SM (CUDA C++ Programming Guide, arithmetic instructions: 32-bit floating-point
# add, multiply, multiply-add results per clock per multiprocessor).
FP32_LANES = {"8.0": 64, "9.0": 128}


@pytest.mark.parametrize("name", machine.builtin_names())
def test_every_builtin_gpu_clock_agrees_with_its_data_sheet_rates(name):
    """The clocks a program reads (cudaDevAttrClockRate, cudaDevAttrMemoryClockRate) are cited on
    their own; the data sheet's peak rates, cited separately, follow from them: peak FP32 = SMs x
    lanes x 2 (a multiply-add) x clock, and the HBM bandwidth = 2 (double data rate) x memory clock
    x bus width / 8, both to the data sheets' rounding (2 %)."""
    g = machine.load(name).gpu
    assert g.clock_rate is not None and g.memory_clock_rate is not None
    assert g.peak_fp32 == pytest.approx(g.sm_count * FP32_LANES[g.compute_capability] * 2 * g.clock_rate, rel=0.02)
    assert g.hbm_bandwidth == pytest.approx(2 * g.memory_clock_rate * g.memory_bus_width / 8, rel=0.02)


def test_a_clock_needs_its_unit():
    with pytest.raises(InputError, match=r"--set gpu.clock_rate .*got 1980, expected a frequency with its unit"):
        machine.load("h100-ib200", machine.parse_overrides(["gpu.clock_rate=1980"]))


def test_override_is_parsed_with_units():
    m = machine.load("h100-ib200", machine.parse_overrides(["pcie.bandwidth=64GB/s", "node.gpus=2", "nic.per_node=2"]))
    assert (m.pcie.bandwidth, m.node.gpus) == (64e9, 2)


def test_override_of_unknown_key_is_named():
    with pytest.raises(InputError, match=r"--set: key 'pcie\.speed': got 1"):
        machine.load("h100-ib200", machine.parse_overrides(["pcie.speed=1"]))


def test_override_with_bad_unit_names_the_override():
    with pytest.raises(InputError, match=r"--set pcie.bandwidth .*got '5GB', expected a bandwidth"):
        machine.load("h100-ib200", machine.parse_overrides(["pcie.bandwidth=5GB"]))


def test_override_needs_key_and_value():
    with pytest.raises(InputError, match="KEY=VALUE"):
        machine.load("h100-ib200", machine.parse_overrides(["pcie.bandwidth"]))


def test_unknown_machine_lists_the_builtins():
    with pytest.raises(InputError, match="h100-ib200"):
        machine.load("nowhere")


def test_file_errors_name_file_key_and_value(tmp_path):
    text = resources.files("orrery.machines.builtin").joinpath("h100-ib200.toml").read_text()
    path = tmp_path / "m.toml"
    path.write_text(text.replace("sm_count = 132\n", ""))
    with pytest.raises(InputError, match=rf"{path}: key 'gpu.sm_count': got None, expected this key"):
        machine.load(str(path))
    path.write_text(text.replace("gpus = 4\n", 'gpus = 4\ncolour = "green"\n'))
    with pytest.raises(InputError, match=r"key 'node.colour': got 'green', expected no such key"):
        machine.load(str(path))
    path.write_text(text.replace('bandwidth = "53.8GB/s"', 'bandwidth = "53.8"'))
    with pytest.raises(
        InputError,
        match=r"key 'pcie.bandwidth': got '53.8', expected a bandwidth with its unit, "
        r"such as .* \(a plain number has no unit\)",
    ):
        machine.load(str(path))  # not 53.8 B/s
    path.write_text(text.replace('bandwidth = "53.8GB/s"', 'bandwidth = "53.8 GB"'))
    with pytest.raises(InputError, match=r"key 'pcie.bandwidth': got '53.8 GB', expected a bandwidth"):
        machine.load(str(path))
    path.write_text("[node\n")
    with pytest.raises(InputError, match="valid TOML"):
        machine.load(str(path))


def test_topology_specific_parameters_are_required():
    data = raw()
    data["nvlink"] = {"topology": "nvswitch", "link_bandwidth": "25GB/s", "latency": "1us"}
    with pytest.raises(
        InputError,
        match="^"
        + re.escape(
            "test: key 'nvlink.links_per_gpu': got None, expected a value: nvlink.topology = 'nvswitch' needs it"
        )
        + "$",
    ):
        machine.validate(data, "test")
    data = raw()
    data["host_link"] = {"kind": "nvlink-c2c"}
    with pytest.raises(InputError) as e:
        machine.validate(data, "test")
    assert str(e.value).splitlines() == [
        "test: 2 errors",
        "  test: key 'host_link.bandwidth': got None, expected a value: host_link.kind = 'nvlink-c2c' needs it",
        "  test: key 'host_link.latency': got None, expected a value: host_link.kind = 'nvlink-c2c' needs it",
    ]


def test_fat_tree_levels_are_checked():
    with pytest.raises(
        InputError,
        match=re.escape("key 'fabric.leaves_per_pod': got None, expected a value: fabric.levels = 3 needs it"),
    ):
        machine.load("h100-ib200", machine.parse_overrides(["fabric.levels=3"]))
    with pytest.raises(
        InputError,
        match=r"key 'fabric.levels': got 3, expected 2 with fabric.topology = 'dragonfly' "
        r"\(3 levels are for fat-tree and rail-optimized fabrics\)",
    ):
        machine.load(
            "h100-ib200",
            machine.parse_overrides(
                [
                    "fabric.levels=3",
                    "fabric.leaves_per_pod=2",
                    "fabric.topology='dragonfly'",
                    "fabric.routers_per_group=2",
                    "fabric.local_bandwidth='50GB/s'",
                    "fabric.global_bandwidth='10GB/s'",
                ]
            ),
        )
    with pytest.raises(InputError, match=r"key 'fabric.levels': got 4, expected 2 or 3"):
        machine.load("h100-ib200", machine.parse_overrides(["fabric.levels=4"]))
    three = machine.parse_overrides(["fabric.levels=3", "fabric.leaves_per_pod=2"])
    assert machine.load("h100-ib200", three).fabric.levels == 3


def test_override_may_set_a_parameter_the_file_leaves_out():
    m = machine.load("h100-ib200", machine.parse_overrides(["nvlink.topology=nvswitch", "nvlink.links_per_gpu=18"]))
    assert m.nvlink_pair_bandwidth == 18 * 25e9


def test_semantic_checks():
    data = raw()
    data["nic"]["per_node"] = 8
    with pytest.raises(InputError, match=r"^test: key 'nic.per_node': got 8, expected at most node.gpus \(4\)"):
        machine.validate(data, "test")
    data = raw()
    data["sources"]["gpu.sm_cont"] = "x"
    with pytest.raises(
        InputError,
        match=r"^test: key 'sources': got 'gpu.sm_cont', expected keys that name machine "
        r"parameters \(did you mean 'gpu.sm_count'\?\)$",
    ):
        machine.validate(data, "test")
    data = raw()
    data["node"]["socket_link_bandwidth"] = "64GB/s"
    with pytest.raises(
        InputError,
        match=r"key 'node.socket_link_latency': got None, expected a value with "
        r"node.socket_link_bandwidth \(set both or neither\)",
    ):
        machine.validate(data, "test")
    with pytest.raises(
        InputError,
        match=re.escape(
            "key 'node.socket_link_bandwidth': got 64000000000.0, expected no value "
            "with host_link.kind = 'nvlink-c2c': it is for GPUs on PCIe"
        ),
    ):
        machine.load(
            "gh200-slingshot",
            machine.parse_overrides(["node.socket_link_bandwidth='64GB/s'", "node.socket_link_latency='0.1us'"]),
        )


@pytest.mark.parametrize(
    "override, key, message",
    [
        (
            "copies.H2D=[{latency = '1us', bandwidth = '0GB/s'}]",
            "copies.H2D.0.bandwidth",
            "got '0GB/s', expected a positive bandwidth, such as 53.8GB/s, 200Gbps or 2.5e10B/s (a rate of 0 is none)",
        ),
        (
            "messages.host_inter=[{latency = '-1us', bandwidth = '1GB/s'}]",
            "messages.host_inter.0.latency",
            "got -1e-06, expected segment 1 a non-negative latency",
        ),
        (
            "gaps.host_intra=[{up_to = '1kB', latency = '1us', bandwidth = '1GB/s'}, {latency = '-2us', bandwidth = '1GB/s'}]",
            "gaps.host_intra.1.latency",
            "got -2e-06, expected segment 2 a latency of at least -1e-06 s, no negative time above 1000 B",
        ),
        (
            "collectives.alltoall=[{extra = '3 furlongs'}]",
            "collectives.alltoall.0.extra",
            "got '3 furlongs', expected a time with its unit, such as 2.5us, 1ms or 0.5s",
        ),
        (
            "collectives.alltoall=[{extra = '3us', steps = 'linear'}]",
            "collectives.alltoall.0.ranks",
            "got None, expected the rank count the extra was measured on (steps = 'linear')",
        ),
        (
            "collectives.alltoall=[{extra = '3us', steps = 'cubic', ranks = 8}]",
            "collectives.alltoall.0.steps",
            "got 'cubic', expected 'constant', 'log2' or 'linear'",
        ),
        (
            "gaps.device_inter=[{up_to = '4KiB', latency = '7us', bandwidth = '4GB/s'}]",
            "gaps.device_inter.0.up_to",
            "got 4096.0, expected no up_to on the last segment: it covers every larger size",
        ),
        (
            "copies.D2H=[{up_to = '2MB', latency = 0, bandwidth = '1GB/s'}, {up_to = '1MB', latency = 0, "
            "bandwidth = '1GB/s'}, {latency = 0, bandwidth = '1GB/s'}]",
            "copies.D2H",
            "got [2000000.0, 1000000.0], expected up_to on every segment but the last, increasing",
        ),
    ],
)
def test_measured_model_errors_name_the_override_key_and_value(override, key, message):
    with pytest.raises(InputError) as e:
        machine.load("h100-ib200", machine.parse_overrides([override]))
    assert str(e.value) == f"--set {override.split('=')[0]} (on built-in machine h100-ib200): key '{key}': {message}"


@pytest.mark.parametrize(
    "steps, at_16, at_64",
    [("constant", 1.0, 1.0), ("log2", 4 / 3, 6 / 3), ("linear", 15 / 7, 63 / 7)],
)
def test_a_correction_measured_on_8_ranks_scales_with_its_algorithm_s_steps(steps, at_16, at_64):
    """collectives.*: a 21 us extra measured on 8 ranks is a per-step cost times the steps of the
    algorithm's model: ceil(log2 P) (3 on 8 ranks), or P - 1 (7 on 8 ranks); a constant stays."""
    m = machine.load(
        "h100-ib200",
        machine.parse_overrides([f"collectives.alltoall=[{{extra = '21us', steps = '{steps}', ranks = 8}}]"]),
    )
    (seg,) = m.collectives.alltoall
    assert seg.extra_at(8) == pytest.approx(21e-6, rel=1e-12)
    assert seg.extra_at(16) == pytest.approx(21e-6 * at_16, rel=1e-12)
    assert seg.extra_at(64) == pytest.approx(21e-6 * at_64, rel=1e-12)
    assert seg.extra_at(1000) == pytest.approx(21e-6 * {"constant": 1, "log2": 10 / 3, "linear": 999 / 7}[steps])
