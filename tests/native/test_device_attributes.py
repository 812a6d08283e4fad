"""cudaDeviceGetAttribute and cuDeviceGetAttribute: what deviceQuery and programs like it ask.

Each answer is checked against where it comes from: the machine description's keys, or the
limits a real H100 SXM5 reports, as the public deviceQuery that dgx-h100's sources cite prints
them (thamada/nvidia-smi, nvsim/H100SXMx8_deviceQuery.py, commit 03fbe6e)."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from orrery import machines

pytestmark = pytest.mark.native

# cudaDevAttr values (driver_types.h, CUDA 13.0), with the numbers the driver shares.
CLOCK, MEMORY_CLOCK, BUS_WIDTH, L2, SMS = 13, 36, 37, 38, 16
SHARED_PER_SM, SHARED_OPTIN, RESERVED_SHARED = 81, 97, 111

# A real H100 SXM5's deviceQuery (the source above): the attribute and the value it printed.
DEVICE_QUERY = {
    14: 512,  # Texture alignment: 512 bytes
    15: 1,  # Concurrent copy and kernel execution: Yes
    17: 0,  # Run time limit on kernels: No
    20: 0,  # Compute Mode: Default
    21: 131072,  # Maximum Texture Dimension Size 1D=(131072)
    22: 131072,  # 2D=(131072, 65536)
    23: 65536,
    24: 16384,  # 3D=(16384, 16384, 16384)
    25: 16384,
    26: 16384,
    42: 32768,  # Maximum Layered 1D Texture Size 1D=(32768), 2048 layers
    43: 2048,
    27: 32768,  # Maximum Layered 2D Texture Size 2D=(32768, 32768), 2048 layers
    28: 32768,
    29: 2048,
    9: 65536,  # Total amount of constant memory
    12: 65536,  # Total number of registers available per block
    10: 32,  # Warp size
    1: 1024,  # Maximum number of threads per block
    2: 1024,  # Max dimension size of a thread block (1024, 1024, 64)
    3: 1024,
    4: 64,
    5: 2147483647,  # Max dimension size of a grid size (2147483647, 65535, 65535)
    6: 65535,
    7: 65535,
    11: 2147483647,  # Maximum memory pitch
    18: 0,  # Integrated GPU sharing Host Memory: No
    19: 1,  # Support host page-locked memory mapping: Yes
    32: 1,  # Device has ECC support: Enabled
    41: 1,  # Device supports Unified Addressing (UVA): Yes
    83: 1,  # Device supports Managed Memory: Yes
    90: 1,  # Device supports Compute Preemption: Yes
    95: 1,  # Supports Cooperative Kernel Launch: Yes
}


def _query(run_program, programs, *ids, machine="dgx-h100"):
    r = run_program(
        programs["driver_attributes"], *map(str, ids), options=("--machine", machine, "--ranks-per-node", "1")
    )
    return r


def _answers(r) -> dict[int, int]:
    """The runtime's answer per attribute, checking that the driver gave the same and neither failed."""
    out = {}
    for line in r.stdout.splitlines():
        if re.fullmatch(r"\d+ -?\d+ -?\d+ \d+ \d+", line):
            attr, runtime, driver, e, d = map(int, line.split())
            assert (e, d) == (0, 0), line
            assert runtime == driver, f"attribute {attr}: runtime {runtime}, driver {driver}"
            out[attr] = runtime
    return out


def test_the_attributes_deviceQuery_prints_are_a_real_h100s(run_program, programs):
    r = _query(run_program, programs, *DEVICE_QUERY)
    assert r.returncode == 0, r.stderr
    assert _answers(r) == DEVICE_QUERY


@pytest.mark.parametrize("name", ["dgx-h100", "dgx-a100", "h100-pcie", "gh200-slingshot"])
def test_the_clocks_and_memory_figures_come_from_the_machine_description(run_program, programs, name):
    g = machines.load(name).gpu
    assert g.clock_rate is not None and g.memory_clock_rate is not None
    ids = (CLOCK, MEMORY_CLOCK, BUS_WIDTH, L2, SMS, SHARED_PER_SM, SHARED_OPTIN, RESERVED_SHARED)
    r = _query(run_program, programs, *ids, machine=name)
    assert r.returncode == 0, r.stderr
    got = _answers(r)
    assert got[CLOCK] == g.clock_rate / 1e3  # kHz, as CUDA reports it
    assert got[MEMORY_CLOCK] == g.memory_clock_rate / 1e3
    assert got[BUS_WIDTH] == g.memory_bus_width
    assert got[L2] == g.l2_cache
    assert got[SMS] == g.sm_count
    assert got[SHARED_PER_SM] == g.shared_per_sm
    assert got[SHARED_OPTIN] == g.shared_per_block_optin
    assert got[RESERVED_SHARED] == g.shared_per_sm - g.shared_per_block_optin == 1024


def test_device_properties_hold_the_same_limits_as_the_attributes(run_program, programs):
    r = _query(run_program, programs, 21, 22, 23, 24, 25, 26, 42, 43, 27, 28, 29, 30, 90, 111, 81, 11)
    assert r.returncode == 0, r.stderr
    a = _answers(r)
    prop = {line.split()[1]: line.split()[2:] for line in r.stdout.splitlines() if line.startswith("prop ")}
    assert prop["maxTexture1D"] == [str(a[21])]
    assert prop["maxTexture2D"] == [str(a[22]), str(a[23])]
    assert prop["maxTexture3D"] == [str(a[24]), str(a[25]), str(a[26])]
    assert prop["maxTexture1DLayered"] == [str(a[42]), str(a[43])]
    assert prop["maxTexture2DLayered"] == [str(a[27]), str(a[28]), str(a[29])]
    assert prop["surfaceAlignment"] == [str(a[30])] == ["512"]
    assert prop["computePreemptionSupported"] == [str(a[90])]
    assert prop["reservedSharedMemPerBlock"] == [str(a[111])]
    assert prop["sharedMemPerMultiprocessor"] == [str(a[81])]
    assert prop["memPitch"] == [str(a[11])]


def test_an_attribute_orrery_does_not_answer_stops_the_run_naming_it(run_program, programs):
    r = _query(run_program, programs, 55)
    assert r.returncode == 3, r.stderr
    assert (
        "orrery: error: cudaDeviceGetAttribute: attribute 55 (cudaDevAttrMaxSurface1DWidth) is not described "
        "by Orrery's machine model (docs/supported-calls.md lists the attributes it answers)\n"
    ) in r.stderr
    r = _query(run_program, programs, "d96")  # the driver's query, with the driver's name
    assert r.returncode == 3, r.stderr
    assert (
        "orrery: error: cuDeviceGetAttribute: attribute 96 (CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH) "
        "is not described by Orrery's machine model"
    ) in r.stderr


def test_a_machine_without_clock_rate_stops_a_program_that_asks_naming_the_key(run_program, programs, tmp_path):
    text = (resources.files("orrery.machines.builtin") / "h100-ib200.toml").read_text()
    lines = [line for line in text.splitlines() if not line.startswith(("clock_rate", '"gpu.clock_rate"'))]
    assert len(lines) == len(text.splitlines()) - 2
    toml = tmp_path / "no-clock.toml"
    toml.write_text("\n".join(lines) + "\n")
    r = _query(run_program, programs, MEMORY_CLOCK, machine=str(toml))
    assert r.returncode == 0, r.stderr
    assert _answers(r) == {MEMORY_CLOCK: 2619000}
    r = _query(run_program, programs, CLOCK, machine=str(toml))
    assert r.returncode == 3, r.stderr
    assert (
        "orrery: error: cudaDeviceGetAttribute: attribute 13 (cudaDevAttrClockRate) needs the machine key "
        "gpu.clock_rate, which this machine does not set"
    ) in r.stderr
