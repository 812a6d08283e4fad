"""The [nccl] machine section: NCCL's published constants as defaults, a source for each key in
every built-in, and the run description's nccl field as NCCL's topology would see the node."""

from __future__ import annotations

import pytest

from orrery import machines as machine
from orrery.run import run_description

BUILTINS = ["dgx-h100", "h100-ib200", "dgx-a100", "gh200-slingshot", "h100-pcie"]
# NVIDIA/nccl src/graph/tuning.cc @5067397c, ncclTunerConstantsDefaults.baseLatencies (us)
NCCL_BASE_US = {
    "tree_ll": 6.8,
    "tree_ll128": 14.0,
    "tree_simple": 8.4,
    "ring_ll": 6.6,
    "ring_ll128": 14.0,
    "ring_simple": 8.4,
    "nvls_simple": 0.0,
    "nvls_tree_simple": 0.0,
    "pat_simple": 8.0,
}


@pytest.mark.parametrize("name", BUILTINS)
def test_every_builtin_has_nccls_defaults_with_sources(name):
    m = machine.load(name)
    keys = {f"nccl.{k}" for k in type(m.nccl).model_fields}
    assert keys <= set(m.sources)
    # NCCL's hwLatencies for NVLS on NVLink (tuning.cc @5067397c): 25 us
    assert m.nccl.step_latency_nvls == 25e-6 or m.sources["nccl.step_latency_nvls"].startswith("fitted")
    if name == "dgx-h100":
        # it ships the keys fitted on the shared nccl-tests sweeps instead: calibration/dgx-h100-nccl,
        # checked by tests/unit/test_nccl_calibration.py
        return
    assert m.nccl.base_latencies() == pytest.approx({k: v * 1e-6 for k, v in NCCL_BASE_US.items()})
    assert (m.nccl.efficiency_nvlink, m.nccl.efficiency_pcie, m.nccl.efficiency_net) == (1.0, 1.0, 1.0)
    assert m.nccl.nvls_efficiency == 0.85


def test_the_run_description_tells_the_shim_what_nccl_sees_of_a_dgx_h100():
    n = run_description.nccl_model(machine.load("dgx-h100", machine.parse_overrides(["nccl.base_latency_ring_ll=7us"])))
    assert n["base_latency_s"]["ring_ll"] == pytest.approx(7e-6)
    assert n["nvls_step_latency_s"] == 25e-6
    n = run_description.nccl_model(machine.load("dgx-h100", machine.parse_overrides(["nccl.step_latency_nvls=9us"])))
    assert n["nvls_step_latency_s"] == pytest.approx(9e-6)
    assert (n["sm"], n["intra_nvlink"], n["nvswitch"]) == (90, True, True)
    assert n["intra_bandwidth"] == pytest.approx(18 * 20.6e9)  # 18 NVLinks x NCCL's SM90_NVLINK_BW
    # a 400 Gb/s NIC per GPU, at most PCIe Gen5 x16 as NCCL counts it: 16 x 240 / 80 = 48 GB/s
    assert n["inter_bandwidth"] == pytest.approx(48e9)


def test_without_nvlink_nccl_sees_the_pcie_link():
    n = run_description.nccl_model(machine.load("h100-pcie"))
    assert (n["intra_nvlink"], n["nvswitch"], n["intra_bandwidth"]) == (False, False, pytest.approx(48e9))
    assert n["inter_bandwidth"] == pytest.approx(48e9 / 2)  # one NIC shared by the node's 2 GPUs
