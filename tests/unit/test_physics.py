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


def test_a_link_that_carried_more_than_its_capacity_over_its_busy_time_is_a_violation():
    """What SimGrid 3.32's selective bandwidth update did (launch.bandwidth_sharing): 8 x 64 KiB through a
    50 GB/s NIC in 1.31 us of traffic (400 GB/s); the same bytes in 10.49 us are possible, and so
    is a link busy longer than its bytes need (its flows slowed elsewhere)."""
    from orrery.run.results import LinkResult

    nic, moved = 50e9, 8 * 65536
    links = [
        LinkResult("n0-nic0-ib_UP", "nic", nic, moved, 1.31072e-6),  # 400 GB/s
        LinkResult("n0-nic1-ib_UP", "nic", nic, moved, moved / nic),  # exactly its capacity
        LinkResult("n0-nvl0_UP", "nvlink", 450e9, moved, 1e-3),  # slower than it could
        LinkResult("n0-nic2-ib_UP", "nic", nic, 8.0, 0.0),  # bytes in no time
    ]
    results = Results("completed", None, 1.0, [], {}, {"machine": "dgx-h100"}, links=links)
    assert physics.link_violations(results) == [
        "link n0-nic0-ib_UP carried 524288 B in 1.31072e-06 s of traffic, 400 GB/s, above its 50 GB/s",
        "link n0-nic2-ib_UP carried 8 B in 0 s of traffic, inf GB/s, above its 50 GB/s",
    ]
    h100 = machine.load("dgx-h100")
    assert physics.violations(results, h100, platform.Layout.for_machine(h100, 1)) == physics.link_violations(results)
