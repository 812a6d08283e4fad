"""orrery.physics: copies faster than their platform allows are found, named and never passed
off as results (issue 22: copies that started together went at 251 GB/s over 53.8 GB/s PCIe)."""

from __future__ import annotations

import pytest

from orrery import machines as machine
from orrery.machines import platform
from orrery.run import physics
from orrery.run.results import RankResult, Results, Tally, summary

pytestmark = pytest.mark.unit
MiB = 1 << 20


def _rank(rank: int, copies: dict[str, Tally]) -> RankResult:
    return RankResult(
        rank=rank,
        host=f"n0-gpu{rank}",
        finished=True,
        end_s=1.0,
        host_s=0.0,
        host_api_s=0.0,
        gpu_wait_s=0.0,
        mpi_s=0.0,
        idle_s=0.0,
        kernel_s=0.0,
        engines={},
        comm_s=0.0,
        comm_hidden_s=0.0,
        comm_exposed_s=0.0,
        hidden_fraction=0.0,
        mixed_placement_calls=0,
        copies=copies,
    )


def test_a_copy_kind_s_bound_is_its_fastest_route_s_narrowest_link():
    h100 = machine.load("h100-ib200")
    bounds = physics.copy_bounds(h100, platform.Layout.for_machine(h100, 2))
    assert bounds == {"H2D": h100.pcie.bandwidth, "D2H": h100.pcie.bandwidth, "peer": h100.nvlink_pair_bandwidth}
    one_gpu = physics.copy_bounds(h100, platform.Layout.for_machine(h100, 1, 1))
    assert "peer" not in one_gpu


def test_copies_faster_than_their_route_are_violations_and_the_summary_says_so():
    h100 = machine.load("h100-ib200")
    layout = platform.Layout.for_machine(h100, 1)
    n = 64 * MiB
    ranks = [
        _rank(0, {"H2D": Tally(1, n / 53.8e9 + 1e-6, n)}),  # its lone time: possible
        _rank(1, {"H2D": Tally(1, 0.267e-3, n)}),  # 251 GB/s over 53.8 GB/s
        _rank(2, {"peer": Tally(3, 1.0e-6, 3 * n), "D2H": Tally(0, 0.0, 0)}),  # 64 MiB in 0.3 us
        _rank(3, {"H2D": Tally(1, 0.0, 8)}),  # bytes in no time
    ]
    results = Results("completed", None, 1.0, ranks, {}, {"machine": "h100-ib200"})
    found = physics.violations(results, h100, layout)
    assert found == [
        "rank 1: 1 H2D copies moved 67108864 B 251.3 GB/s, faster than the 53.8 GB/s of the fastest H2D route "
        "of its node",
        "rank 2: 3 peer copies moved 201326592 B 2.013e+05 GB/s, faster than the 150 GB/s of the fastest peer "
        "route of its node",
        "rank 3: 1 H2D copies moved 8 B in no time, faster than the 53.8 GB/s of the fastest H2D route of its node",
    ]
    results.physics_violations = found
    warnings = [line for line in summary(results).splitlines() if line.startswith("warning: physically")]
    assert len(warnings) == 3 and warnings[0].endswith(found[0])
