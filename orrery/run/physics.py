"""A run's results checked against its platform's physical limits.

The last net under the simulator: a rank's host-to-device, device-to-host or peer
copies, taken together, can move their bytes no faster than the fastest route of
their kind on its node allows (a set of copies cannot beat the fastest of them, and
none can beat its route's narrowest link), and no link direction carries more bytes than
its capacity over the time it was busy. A run that breaks this has met a bug of Orrery
or SimGrid (issue 22: copies that started together went at 251 GB/s over a 53.8 GB/s
link; 2026-12-06: NCCL transfers at 400 GB/s through a 50 GB/s NIC); the run says so
instead of reporting the time as if it were true.
It is not a model of anything: the tests derive times, this only refuses the impossible.
"""

from __future__ import annotations

import math

from ..machines import platform
from ..machines.description import Machine
from .results import Results

#: how much faster than its bound a rate may be before it is impossible: the
#: simulation's own rounding (whole bytes, a 1e-12 s clock), far below any real effect
SLACK = 1e-6


def copy_bounds(machine: Machine, layout: platform.Layout) -> dict[str, float]:
    """The fastest rate (bytes/s) a copy of each kind can have on a node of the job: the
    narrowest link of the best route, over the node's GPUs (H2D, D2H) or pairs of GPUs
    (peer). Every node is built alike: one node's routes stand for all."""
    one = platform.Layout(1, layout.gpus_per_node, layout.ranks_per_node)
    routes = platform.routes(machine, one)
    gpus = range(layout.gpus_per_node)
    memory = {g: platform.socket_memory_host(0, platform.socket_of_gpu(machine, g)) for g in gpus}
    bounds = {
        "H2D": max(routes.bottleneck(memory[g], platform.gpu_host(0, g)) for g in gpus),
        "D2H": max(routes.bottleneck(platform.gpu_host(0, g), memory[g]) for g in gpus),
    }
    if layout.gpus_per_node > 1:
        bounds["peer"] = max(
            routes.bottleneck(platform.copy_engine_host(0, a), platform.copy_engine_host(0, b))
            for a in gpus
            for b in gpus
            if a != b
        )
    return bounds


def link_violations(results: Results) -> list[str]:
    """One line for each link direction that carried more bytes than its capacity allows over
    the time it was busy (every transfer counted: copies, MPI messages, NCCL's): what SimGrid
    3.32's selective bandwidth update did to flows whose latency ended together (launch.py)."""
    found = []
    for link in results.links:
        if link.bytes > link.capacity_Bps * link.busy_s * (1 + SLACK):
            found.append(
                f"link {link.name} carried {link.bytes:.17g} B in {link.busy_s:.6g} s of traffic, "
                f"{link.bytes / link.busy_s / 1e9 if link.busy_s > 0 else math.inf:.4g} GB/s, "
                f"above its {link.capacity_Bps / 1e9:.4g} GB/s"
            )
    return found


def violations(results: Results, machine: Machine, layout: platform.Layout) -> list[str]:
    """One line for each rank and kind of copy whose bytes moved faster than they can, and for
    each link that carried more than its capacity."""
    bounds = copy_bounds(machine, layout)
    found = []
    for rank in results.ranks:
        for kind, tally in sorted(rank.copies.items()):
            bound = bounds.get(kind)
            if bound is None or tally.bytes == 0:
                continue
            if tally.time_s <= 0 or tally.bytes / tally.time_s > bound * (1 + SLACK):
                rate = f"{tally.bytes / tally.time_s / 1e9:.4g} GB/s" if tally.time_s > 0 else "in no time"
                found.append(
                    f"rank {rank.rank}: {tally.count} {kind} copies moved {tally.bytes} B {rate}, "
                    f"faster than the {bound / 1e9:.4g} GB/s of the fastest {kind} route of its node"
                )
    return found + link_violations(results)
