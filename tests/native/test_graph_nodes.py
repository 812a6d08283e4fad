"""CUDA graphs made node by node (programs/graph_nodes.cu), on h100-ib200 with one GPU.

A node holds the operation the runtime's call would enqueue; each launch of the graph costs its
host one launch overhead (L) and runs the nodes in the order their dependencies say, nodes with no
path between them at once (on branches of their own). Expected times are derived by hand as in
test_graphs.py: L and S the host overheads of a launch and a synchronisation, an H2D or D2H copy
from pinned memory crossing two PCIe links, a memset at the GPU's memset rate, kernels what the
cost file says (busy 100 us, brief 20 us)."""

from __future__ import annotations

import pytest
from derivations import BRIEF, BUSY, cost_options

pytestmark = pytest.mark.native


@pytest.fixture
def nodes(run_program, programs, tmp_path):
    costs = cost_options(tmp_path)

    def run(*args: str, ok: bool = True):
        r = run_program(programs["graph_nodes"], *args, options=("--gpus-per-node", "1", *costs))
        if ok:
            assert r.returncode == 0, r.stderr
        return r

    return run


def pcie_copy(h100, n: int) -> float:
    return 2 * h100.pcie.latency + n / h100.pcie.bandwidth


def test_nodes_run_as_their_dependencies_say_whatever_order_they_were_added_in(nodes, h100):
    """brief was added first, its edges last: each launch still runs busy, then busy and the copy
    at once (no path between them), then brief, then the memset. Three launches: the first's nodes
    start after its L, the next launches' host time hides behind the GPU's work."""
    n, launches = 8_000_000, 3
    assert pcie_copy(h100, n) > BUSY  # the copy's branch is the longer one
    v = nodes("diamond", str(launches), str(n)).values()
    L = h100.overheads.launch
    assert v["nodes"] == 5
    once = BUSY + pcie_copy(h100, n) + BRIEF + n / h100.gpu.memset_bandwidth
    # between events recorded before the launches and after them
    assert v["elapsed"] == pytest.approx(L + launches * once, rel=1e-6)  # (cudaEventElapsedTime's float)
    assert v["elapsed"] < L + launches * (once + BUSY)  # not run one after the other


def test_node_types_are_cuda_s(nodes):
    r = nodes("diamond", "1", "4096")
    # kernel, kernel, kernel, memcpy, memset (cudaGraphNodeType)
    assert "types 0 0 0 1 2" in r.stdout


def test_a_kernel_node_updated_in_the_executable_graph_runs_its_new_kernel(nodes, h100):
    """Each launch timed between events around it: its L, then its kernel."""
    r = nodes("update")
    v = r.values()
    L = h100.overheads.launch
    assert "params_func_is_busy 1 grid 1 block 1" in r.stdout
    assert v["first"] == pytest.approx(L + BUSY, rel=1e-6)  # (cudaEventElapsedTime's float)
    assert v["updated"] == pytest.approx(L + BRIEF, rel=1e-6)
    assert v["reinstantiated"] == pytest.approx(L + BRIEF, rel=1e-6)


def test_an_executable_graph_updated_from_a_capture_of_the_same_shape_runs_its_nodes(nodes, h100):
    """A capture of busy, then of brief put into the executable graph: its next launch runs brief.
    Captures of another shape (two kernels; a memset for the kernel) are refused with
    cudaErrorGraphExecUpdateFailure (910) and the reason (topology changed 2, node type changed 3),
    and leave the graph as it was."""
    r = nodes("exec_update")
    v = r.values()
    L = h100.overheads.launch
    assert v["first"] == pytest.approx(L + BUSY, rel=1e-6)  # (cudaEventElapsedTime's float)
    assert "update 0 0" in r.stdout
    assert v["updated"] == pytest.approx(L + BRIEF, rel=1e-6)
    assert "update_two 910 2" in r.stdout and "update_memset 910 3" in r.stdout
    assert v["still"] == pytest.approx(L + BRIEF, rel=1e-6)


def test_a_child_graph_runs_inside_its_node_and_host_nodes_run_once_a_launch(nodes, h100):
    v = nodes("child").values()
    L = h100.overheads.launch
    assert v["child_type"] == 4  # cudaGraphNodeTypeGraph
    once = BUSY + BRIEF + pcie_copy(h100, 1 << 20)  # the host node takes no time
    assert v["elapsed"] == pytest.approx(L + 2 * once, rel=1e-6)  # (cudaEventElapsedTime's float)
    assert v["host_calls"] == 2


def test_bad_nodes_and_graphs_get_cuda_s_errors(nodes):
    v = {k: n for k, n in nodes("errors").values().items() if not k.startswith(("rank ", "mean "))}
    assert v == {
        "block_too_big": 9,  # cudaErrorInvalidConfiguration
        "dependency_elsewhere": 1,  # cudaErrorInvalidValue
        "dependency_twice": 1,
        "copy_unknown_device": 1,
        "memset_element_3": 1,
        "edge_again": 1,
        "cycle_added": 0,  # an edge back: found when the graph is instantiated
        "instantiate_cycle": 1,
    }


def test_a_memcpy_node_of_a_cuda_array_stops_the_run_naming_it(nodes):
    r = nodes("array", ok=False)
    assert r.returncode == 3
    assert r.stderr.splitlines()[-1].startswith(
        "orrery: error: the program called cudaGraphAddMemcpyNode of a CUDA array, which Orrery does not simulate"
    )
    assert "not reached" not in r.stdout
