"""From fits to machine parameters: what each measured sweep's fit becomes.

Copy sweeps -> ``copies.*`` (piecewise copy models); osu_latency -> ``messages.*`` (piecewise
one-way times per path); osu_bw (with osu_latency or osu_bibw of the same path) -> per-message
overheads and the NIC's bandwidth, and the windows' message models; a window's time beyond the
overheads -> ``gaps.*``; a collective's time beyond the point-to-point model ->
``collectives.*`` corrections. The latencies of the routes a message crosses are the
platform's own (orrery.machines.platform.routes), subtracted where a fit includes them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import machines
from ..machines import platform
from . import sweeps
from .fit import Fit, Segment, predict
from .validate import SweepResult

WINDOW = 64  # messages per iteration of osu_bw (and calibration/bench/osu_p2p bw)
COPY_DIRECTIONS = {"H2D": "H2D", "D2H": "D2H", "D2D": "D2D", "peer": "peer"}


def route_latency(m: machines.Machine, path: str, which: str) -> float:
    """The latency of the route a message of the microbenchmarks crosses, as the machine's
    platform builds it: between the first GPUs of two nodes ("inter-node") or GPUs 0 and 1 of a
    node ("intra-node", as the microbenchmarks run), from device buffers (`which` "device": the
    GPUs, or their message endpoints where mpi.intra_node = "nic" sends them through the NICs) or
    host buffers (the ranks' processes in host memory)."""
    apart = path == "inter-node"
    layout = platform.Layout.for_machine(m, 2 if apart else 1, 1 if apart else 2)
    ends: Callable[[int, int], str]  # (node, GPU or local rank) -> host name
    if which == "host":
        ends = platform.rank_cpu_host
    else:
        ends = platform.mpi_endpoint_host if m.mpi.intra_node == "nic" else platform.gpu_host
    a, b = (ends(0, 0), ends(1, 0)) if apart else (ends(0, 0), ends(0, 1))
    return platform.routes(m, layout).latency(a, b)


def piecewise_model(segments: list[Segment], host_time: float = 0.0) -> list[dict[str, float]]:
    """A machine's copies.*, messages.* or gaps.* model from fitted segments, less `host_time`
    (what the simulator charges on its own) from each latency, as far as it goes: no segment's
    time below 0 at the size it starts above (0 for the first; a later one's latency may be
    negative, machine.Segment)."""
    starts = [0.0] + [float(seg.size_to) for seg in segments[:-1]]
    model = [
        {
            "up_to": float(seg.size_to),
            "latency": max(seg.latency_s - host_time, -lo / seg.bandwidth_Bps if lo else 0.0),
            "bandwidth": seg.bandwidth_Bps,
        }
        for seg, lo in zip(segments, starts)
    ]
    del model[-1]["up_to"]  # the last segment covers every larger size
    return model


def window_model(overhead: float, wire: float, rates: float | list[Segment], eager: float) -> list[dict[str, float]]:
    """A path's messages.* model from the osu_bw and osu_bibw windows: a lone message takes
    2 o + L + size / bandwidth, and at or above the eager threshold a rendezvous handshake
    (request to send, clear to send) adds 2 L before the data. The bandwidth is one rate, or
    per size range the rate of the windows' fitted segments (`rates`), with a segment's
    negative latency (time growing faster than the size) kept too."""
    segments = [Segment(0, 0, 0.0, rates)] if isinstance(rates, float | int) else rates
    ends = sorted({float(seg.size_to) for seg in segments[:-1]} | {float(eager) - 1})
    model = []
    for end in ends:
        seg = next((g for g in segments if end <= g.size_to), segments[-1])
        model.append(
            {
                "up_to": end,
                "latency": 2 * overhead + (3 if end >= eager else 1) * wire + min(seg.latency_s, 0.0),
                "bandwidth": seg.bandwidth_Bps,
            }
        )
    model.append(
        {"latency": 2 * overhead + 3 * wire + min(segments[-1].latency_s, 0.0), "bandwidth": segments[-1].bandwidth_Bps}
    )
    return model


def fastest_rate(segments: list[Segment]) -> float:
    """The least rate (bytes/s) a route must allow for fitted segments to keep their bandwidth:
    the fastest of the segments whose size term counts (at their largest size no shorter than
    their latency: a segment of small sizes with a slight slope says nothing of the route), else
    the fastest rate the fit reaches."""
    counted = [seg.bandwidth_Bps for seg in segments if seg.size_to / seg.bandwidth_Bps >= seg.latency_s]
    return max(counted) if counted else max(seg.size_to / predict(segments, seg.size_to) for seg in segments)


@dataclass
class Window:
    """A path's per-message overhead and wire latency from the osu_bw and osu_bibw windows."""

    buffers: str
    overhead: float
    wire: float
    bandwidth: float
    fit: Fit  # osu_bw's: its breakpoints are the candidate eager thresholds


def window_overhead(g: float | None, b: float | None, T: float | None, L: float) -> float:
    """A path's per-message software time o (either side) from the OSU windows measured on it:
    osu_bw's time per message g, osu_bibw's b, osu_latency's one-way time T; L, the route's
    latency, stands in for the wire's where neither T nor both windows pin it down.

    osu_bw: a window of W messages then a 4-byte acknowledgement takes W o + o + L + o + L,
    so g = ((W + 2) o + 2 L) / W. osu_bibw: each side posts W receives and W sends, the last
    arriving L after it left, so b = (2 W o + L) / W. A lone message: T = 2 o + L.

    A window whose fit starts at no time per message (its first segment's latency clamped to 0,
    which a noisy measurement of a fast path gives) is left out, as if not measured: the fit of
    all three weighs each window by its relative error, which such a time has none of. If neither
    window has a time per message, the lone message's T gives o, or nothing does (0)."""
    W = WINDOW
    measured = g is not None or b is not None
    g = g if g is not None and g > 0 else None
    b = b if b is not None and b > 0 else None
    if measured and g is None and b is None:
        return (T - L) / 2 if T is not None else 0.0
    if g is not None and b is not None and T is not None:
        # all three: the least-squares fit (relative error) of the two windows that T then
        # predicts, g = ((W - 2) o + 2 T) / W and b = ((2 W - 2) o + T) / W
        rows = [((W - 2) / W / g, 2 * T / W / g), ((2 * W - 2) / W / b, T / W / b)]
        return sum(a * (1 - c) for a, c in rows) / sum(a * a for a, _ in rows)
    if g is not None and b is not None:
        return (2 * W * b - W * g) / (3 * W - 2)
    if g is not None:
        return (W * g - 2 * T) / (W - 2) if T is not None else (W * g - 2 * L) / (W + 2)
    if b is None:
        raise ValueError("window_overhead needs osu_bw's or osu_bibw's time per message (g or b)")
    return (W * b - T) / (2 * W - 2) if T is not None else (W * b - L) / (2 * W)


def overrides(
    m: machines.Machine, fits: list[tuple[tuple[str, str, str], Fit]], windows: dict[str, Window] | None = None
) -> dict[str, object]:
    """Machine parameters from the fits, by what each sweep measured (metric, path, buffers);
    the window models found on the way go into `windows`, by buffer kind."""
    out: dict[str, object] = {}
    pcie_bandwidth = 0.0
    windows = {} if windows is None else windows
    for (metric, path, buffers), fit in fits:
        if metric == "copy_bandwidth" and path in COPY_DIRECTIONS:
            # a sweep of synchronous copies: the host overheads of issuing and of returning
            # from the synchronisation are charged on their own. Copies between device
            # buffers do not block the host: back to back, they queue on the GPU, which
            # the measured time per copy is
            host = m.overheads.memcpy + m.overheads.sync if path in ("H2D", "D2H") else 0.0
            out[f"copies.{COPY_DIRECTIONS[path]}"] = piecewise_model(fit.segments, host)
            if path in ("H2D", "D2H"):
                # the PCIe links must not be slower than any measured copy across them
                pcie_bandwidth = max(pcie_bandwidth, fastest_rate(fit.segments))
                out["pcie.bandwidth"] = pcie_bandwidth
        elif metric == "latency" and path in ("intra-node", "inter-node"):
            which = "device" if buffers == "D D" else "host"
            # osu_latency's one-way time, per-message overheads included (the shim subtracts them)
            out[f"messages.{which}_{path.removesuffix('-node')}"] = piecewise_model(fit.segments)
    by_kind = dict(fits)
    for path in ("inter-node", "intra-node"):
        for buffers in ("D D", "H H"):
            which = "device" if buffers == "D D" else "host"
            bw, bibw, lone = (by_kind.get((metric, path, buffers)) for metric in ("bandwidth", "bibw", "latency"))
            window = bw or bibw
            if window is None:
                continue
            g, b, T = (f.segments[0].latency_s if f else None for f in (bw, bibw, lone))
            L = route_latency(m, path, which)
            overhead = max(window_overhead(g, b, T, L), 0.0)
            # within a node the library may take another transport, with its own overheads
            suffix = "" if path == "inter-node" else "_intra"
            out[f"mpi.send_overhead_{which}{suffix}"] = overhead
            out[f"mpi.recv_overhead_{which}{suffix}"] = overhead
            if path == "intra-node":
                if which == "host" and m.mpi.intra_node == "direct":
                    # between the processes of a node the message is a copy through shared memory,
                    # the route's one link, as fast as the windows' fastest segment. Its rate
                    # depends on the size (buffers in cache or not), so without osu_latency a lone
                    # message takes the windows' model at the windows' rate for its size
                    out["node.host_memcpy_bandwidth"] = max(fastest_rate(f.segments) for f in (bw, bibw) if f)
                    if not lone:
                        out["messages.host_intra"] = window_model(
                            overhead, L, window.segments, m.mpi.eager_threshold_host
                        )
                continue
            if which == "device":
                out["nic.bandwidth"] = window.segments[-1].bandwidth_Bps
            if bw and bibw and not lone:
                # the two windows also give the wire's latency L for a lone message (2 o + L),
                # the path's message model, and the candidates for its eager threshold
                b_bibw = bibw.segments[0].latency_s  # b, osu_bibw's time per message
                wire = max(WINDOW * b_bibw - 2 * WINDOW * overhead, 0.0)
                rate, eager = bw.segments[-1].bandwidth_Bps, getattr(m.mpi, f"eager_threshold_{which}")
                out[f"messages.{which}_inter"] = window_model(overhead, wire, rate, eager)
                windows[which] = Window(buffers, overhead, wire, rate, bw)
    return out


def window_gap(metric: str, t: float, o: float, T: float, T_ack: float) -> float:
    """The gap g (machine key gaps.*: from the start of a rank's send to the start of its next)
    that gives a window of W messages its measured time per message t, with per-message
    overhead o either side and a lone message's time T (T_ack: osu_bw's 4-byte acknowledgement).

    osu_bw: the sender's sends start o, o + g, ..., o + (W - 1) g (g >= o); the last arrives
    T - 2 o later; the receiver's acknowledgement takes T_ack, its receive overhead included,
    less the o its send overhead adds: W t = (W - 1) g + T + T_ack - o. osu_bibw: each side posts
    W receives (W o), then sends W messages g apart, the last arriving T - 2 o after it left:
    W t = (W - 1) (o + g) + T."""
    W = WINDOW
    if metric == "bandwidth":
        return (W * t - T - T_ack + o) / (W - 1)
    return (W * t - T) / (W - 1) - o


def lone_time(overrides: dict, which: str, short: str, o: float, L: float, bandwidth: float, size: int) -> float:
    """A lone message's time on a path: its message model (messages.*) where the fit has one,
    else both overheads, the route's latency and the size at the path's bandwidth."""
    model = overrides.get(f"messages.{which}_{short}")
    if model is None:
        return 2 * o + L + size / bandwidth
    seg = next((g for g in model if "up_to" not in g or size <= g["up_to"]), model[-1])
    return seg["latency"] + size / seg["bandwidth"]


def overhead_cap(
    lone: tuple[list[int], list[float]] | None,
    windows: dict[str, tuple[list[int], list[float]]],
    L: float,
    bandwidth: float,
) -> float:
    """The largest per-message overhead o no measurement of a path contradicts: with its
    osu_latency (sizes, seconds), a lone message no slower than measured, 2 o + L + size /
    bandwidth <= T at every size; without it, no window size faster than the overhead alone
    gives (window_overhead at that size's time per message)."""
    if lone is not None:
        return max(min((t - L - s / bandwidth) / 2 for s, t in zip(*lone)), 0.0)
    return max(
        min(
            window_overhead(t if metric == "bandwidth" else None, t if metric == "bibw" else None, None, L)
            for metric, (_, times) in windows.items()
            for t in times
        ),
        0.0,
    )


#: How a collective's correction grows with the communicator's size P, from the algorithms MPI
#: libraries run at scale (CorrectionSegment.steps): one step per peer where every rank sends or
#: receives P - 1 blocks (pairwise and linear alltoall, ring and neighbour-exchange allgather, a
#: root's P - 1 blocks of gather and scatter); ceil(log2 P) steps for the trees and recursive
#: doubling or halving of broadcast, reduce, allreduce and reduce-scatter.
CORRECTION_STEPS = {
    "alltoall": "linear",
    "allgather": "linear",
    "gather": "linear",
    "scatter": "linear",
    "bcast": "log2",
    "reduce": "log2",
    "allreduce": "log2",
    "reduce_scatter": "log2",
    "reduce_scatter_block": "log2",
}


def collective_corrections(result: SweepResult, ranks: int, steps: str) -> list[dict[str, object]]:
    """Per size range, the measured time of a collective beyond the simulated one (none where
    the simulation is slower: the simulator can only add time) on `ranks` ranks, scaled to other
    communicator sizes by `steps` (CorrectionSegment); ranges meet halfway (geometrically)
    between measured sizes, and neighbouring ranges with the same extra time are merged."""
    extras = [sweeps.to_si(result.unit, max(m - s, 0.0)) for m, s in zip(result.measured, result.simulated)]
    model: list[dict[str, object]] = []
    for i, (size, extra) in enumerate(zip(result.sizes, extras)):
        if model and model[-1]["extra"] == extra:
            model.pop()
        # the last range covers every larger size
        bound = {"up_to": float(np.sqrt(size * result.sizes[i + 1]))} if i + 1 < len(result.sizes) else {}
        model.append({**bound, "extra": extra, **({} if steps == "constant" else {"steps": steps, "ranks": ranks})})
    return model
