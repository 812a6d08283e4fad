"""Calibration: fit a machine's cost parameters on measured sweeps, then check the fit.

``orrery calibrate --machine NAME`` reads the measured sweeps that
``orrery validate`` knows for the machine (calibration/data/measured/,
unchanged), or the files given with ``--input`` (measurement CSV, OSU,
bandwidthTest, nccl-tests, BabelStream output: orrery.measurements), fits
each with a piecewise model of the time per transfer,

    t(size) = latency_k + size / bandwidth_k   on segment k,

whose breakpoint (eager -> rendezvous, copy-engine regimes, ...) is found from
the data, turns the fits into machine parameters (``overrides``), and writes
a versioned calibration file with its provenance: input files and their
SHA-256, fitted segments, residuals, overrides. It ends with the closed
loop: the microbenchmarks run again on the calibrated machine and every
sweep's error is reported, loudly where it misses the tolerance.
``orrery run --calibration FILE`` applies a calibration file's overrides.

What the fits become: copy sweeps -> ``copies.*`` (piecewise copy models);
osu_latency -> ``messages.*`` (piecewise one-way times per path); osu_bw
(with osu_latency or osu_bibw of the same path) -> per-message overheads
and the NIC's bandwidth; collective sweeps -> the MPI library's choice of
algorithms and, where it still misses, ``collectives.*`` corrections;
kernel timing tables (``--kernels``) -> a cost file; measured API costs
(calibration/bench/api_overheads, metric ``api_time``) -> ``overheads.*`` as
they are. Application timings
are fitted with the simulator in the loop by ``orrery fit`` (appfit.py).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy import optimize

from .. import machines, schema
from ..errors import InputError
from ..machines import platform
from . import measurements
from . import validate as validation

FORMAT_VERSION = 3  # 2: copies.* models among the overrides; 3: gaps.* and collectives.NAME_device/_host too
READABLE_VERSIONS = (1, 2, 3)  # version 1 files only hold scalar overrides, read alike
MEDIAN_TOLERANCE, P95_TOLERANCE = 0.05, 0.15  # per sweep, on |relative error|
FEW_POINTS = 3  # a sweep of an input file with fewer sizes is an error; nvbandwidth's one size is compared, not fitted
FITTED_METRICS = ("latency", "bandwidth", "bibw", "copy_bandwidth")  # the sweeps fitted latency + size / bandwidth
OUTLIER = 0.5  # a point this far (relative) from a sweep's fit is left out of it, and the sweep refitted
WINDOW = 64  # messages per iteration of osu_bw (and calibration/bench/osu_p2p bw)
NO_SIZE_TERM = 1e20  # a fitted bandwidth (bytes/s) this high means the segment has no size term (_fit_line)
GAP_GAIN = 0.01  # a gap is kept where it cuts a path's mean (median + p95) |error| by this much


@dataclass
class Segment:
    size_from: int
    size_to: int
    latency_s: float
    bandwidth_Bps: float


@dataclass
class Fit:
    sweep: str
    segments: list[Segment]
    median_rel_residual: float
    max_rel_residual: float
    outliers: list[int]  # sizes left out of the fit (OUTLIER), still compared in the closed loop


def _fit_line(sizes: np.ndarray, times: np.ndarray, after: float = 0.0) -> tuple[float, float, np.ndarray]:
    """t = a + s * c for the sizes above `after`, least squares on the relative error (scipy's
    non-negative least squares) with c >= 0 and a time no less than 0 at `after` itself,
    a + after * c >= 0: a segment that does not start at size 0 (after > 0) may have a negative
    latency a, where its time grows faster than its size (buffers falling out of a cache).
    Returns a, c and the relative residuals."""
    w = 1.0 / times

    def solve(origin: float) -> tuple[float, float]:  # t = a' + (s - origin) c with a', c >= 0
        design = np.vstack([np.ones_like(sizes), sizes - origin]).T * w[:, None]
        scale = np.abs(design).max(axis=0)  # columns of similar magnitude for the solver
        (a, c), _ = optimize.nnls(design / scale, times * w)
        c = max(float(c / scale[1]), 1e-30)
        return float(a / scale[0]) - c * origin, c

    a, c = solve(0.0)
    if a == 0.0 and after > 0:  # a >= 0 held the fit: the segment's own bound is a time >= 0 at `after`
        a, c = solve(float(after))
    return a, c, (a + c * sizes - times) / times


def _rms(residuals: np.ndarray) -> float:
    return float(np.sqrt(np.mean(residuals**2)))


def _best_partition(s: np.ndarray, t: np.ndarray, pieces: int, min_points: int):
    """The split of the sweep into `pieces` runs of at least `min_points` sizes with the
    smallest RMS relative residual: (rms, [(first, end, a, c), ...])."""
    n = len(s)
    memo: dict[tuple[int, int], tuple[float, list]] = {}

    def best(start: int, k: int):  # sum of squared residuals of s[start:] in k pieces
        if (start, k) in memo:
            return memo[start, k]
        result = (np.inf, [])
        after = 0.0 if start == 0 else s[start - 1]  # the segment covers the sizes above the last one's
        if k == 1:
            if n - start >= min_points:
                a, c, r = _fit_line(s[start:], t[start:], after)
                result = (float(np.sum(r**2)), [(start, n, a, c)])
        else:
            for end in range(start + min_points, n - min_points * (k - 1) + 1):
                a, c, r = _fit_line(s[start:end], t[start:end], after)
                rest, pieces_after = best(end, k - 1)
                total = float(np.sum(r**2)) + rest
                if total < result[0]:
                    result = (total, [(start, end, a, c), *pieces_after])
        memo[start, k] = result
        return result

    sse, parts = best(0, pieces)
    return float(np.sqrt(sse / n)), parts


def fit_piecewise(sizes: list[int], times: list[float], min_points: int = FEW_POINTS, gain: float = 0.2,
                  good_enough: float = 1e-3, max_segments: int = 4) -> list[Segment]:
    """The fewest segments (up to `max_segments`) such that one more would not cut the RMS
    relative residual by at least `gain`; a fit within `good_enough` RMS is kept as it is.
    Breakpoints are placed where they fit best (exhaustive search over the sizes)."""
    s, t = np.asarray(sizes, float), np.asarray(times, float)
    if len(s) < min_points:
        raise InputError("fit", None, f"{len(s)} points", f"at least {min_points} points for a fit")
    if np.any(np.diff(s) <= 0):
        raise InputError("fit", None, "sizes out of order", "strictly increasing message sizes")
    err, parts = _best_partition(s, t, 1, min_points)
    for pieces in range(2, max_segments + 1):
        if err <= good_enough or len(s) < pieces * min_points:
            break
        more_err, more = _best_partition(s, t, pieces, min_points)
        if more_err >= err * (1 - gain):
            break
        err, parts = more_err, more
    return [Segment(sizes[a], sizes[b - 1], lat, 1.0 / c) for a, b, lat, c in parts]


def fit_sweep(sizes: list[int], times: list[float]) -> tuple[list[Segment], list[int]]:
    """A sweep's piecewise fit, robust to a lone bad point: points further than OUTLIER from
    the first fit (e.g. Sigma2 Olivia's Cray MPICH 8 osu_bibw at 8 KiB, 4.5 times below its
    neighbours) are left out and the rest refitted. Returns the segments and the sizes left out."""
    segments = fit_piecewise(sizes, times)
    outliers = [s for s, t in zip(sizes, times) if abs(predict(segments, s) - t) / t > OUTLIER]
    if not outliers:
        return segments, []
    kept = [(s, t) for s, t in zip(sizes, times) if s not in outliers]
    segments = fit_piecewise([s for s, _ in kept], [t for _, t in kept])
    # the segments cover the whole sweep, left-out sizes included
    segments[0].size_from, segments[-1].size_to = sizes[0], sizes[-1]
    return segments, outliers


def predict(segments: list[Segment], size: int) -> float:
    seg = next((g for g in segments if size <= g.size_to), segments[-1])
    return seg.latency_s + size / seg.bandwidth_Bps


def _times(unit: str, points: list[tuple[int, float]], metric: str) -> tuple[list[int], list[float]]:
    """Seconds per transfer from a sweep's values in `unit`."""
    sizes = [s for s, _ in points]
    if unit == "us":
        return sizes, [v * 1e-6 for _, v in points]
    scale = {"GB/s": 1e9, "MB/s": 1e6}[unit]
    both = 2 if metric == "bibw" else 1
    return sizes, [both * s / (v * scale) for s, v in points]


def route_latency_between_nodes(m: machines.Machine) -> float:
    """Latency of the route between GPUs of two nodes under one leaf (orrery/platform.py)."""
    gpu_to_switch = m.host_link.latency if m.host_link.kind == "nvlink-c2c" else m.pcie.latency
    staging = 0.0 if m.gpudirect.rdma else m.pcie.latency + m.gpudirect.staging_chunk / m.pcie.bandwidth
    side = gpu_to_switch + m.pcie.latency + staging  # ... then the NIC's own PCIe link
    return 2 * side + 2 * m.nic.latency + m.fabric.switch_latency


def route_latency_within_node(m: machines.Machine, which: str) -> float:
    """Latency of the route between the first two ranks of a node (GPUs 0 and 1, as the
    microbenchmarks run): through their NICs and leaf switch (mpi.intra_node = "nic"), or
    NVLink between GPUs (without it, each GPU's PCIe link, both switches' uplinks when the two
    GPUs are behind different switches, and the link between their sockets when those differ),
    and shared memory between processes."""
    if m.mpi.intra_node == "nic":
        if which == "device":
            return route_latency_between_nodes(m)
        side = 2 * m.pcie.latency  # a process's way to its NIC: its DMA and the NIC's own PCIe link
        return 2 * side + 2 * m.nic.latency + m.fabric.switch_latency
    if which == "host":
        return 2 * platform.SHM_LATENCY
    if m.nvlink.topology != "none":
        return m.nvlink.latency
    apart = platform.switch_of_gpu(m, 0) != platform.switch_of_gpu(m, 1)
    sockets = platform.socket_of_gpu(m, 0) != platform.socket_of_gpu(m, 1)
    return (4 if apart else 2) * m.pcie.latency + (m.node.socket_link_latency if sockets else 0.0)


def route_latency(m: machines.Machine, path: str, which: str) -> float:
    """The route latency of a path ("inter-node" or "intra-node") for buffers `which`."""
    return route_latency_between_nodes(m) if path == "inter-node" else route_latency_within_node(m, which)


COPY_DIRECTIONS = {"H2D": "H2D", "D2H": "D2H", "D2D": "D2D", "peer": "peer"}


def piecewise_model(segments: list[Segment], host_time: float = 0.0) -> list[dict[str, float]]:
    """A machine's copies.*, messages.* or gaps.* model from fitted segments, less `host_time`
    (what the simulator charges on its own) from each latency, as far as it goes: no segment's
    time below 0 at the size it starts above (0 for the first; a later one's latency may be
    negative, machine.Segment)."""
    starts = [0.0] + [float(seg.size_to) for seg in segments[:-1]]
    model = [{"up_to": float(seg.size_to), "latency": max(seg.latency_s - host_time, -lo / seg.bandwidth_Bps if lo else 0.0),
              "bandwidth": seg.bandwidth_Bps} for seg, lo in zip(segments, starts)]
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
        model.append({"up_to": end, "latency": 2 * overhead + (3 if end >= eager else 1) * wire
                      + min(seg.latency_s, 0.0), "bandwidth": seg.bandwidth_Bps})
    model.append({"latency": 2 * overhead + 3 * wire + min(segments[-1].latency_s, 0.0),
                  "bandwidth": segments[-1].bandwidth_Bps})
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
    arriving L after it left, so b = (2 W o + L) / W. A lone message: T = 2 o + L."""
    W = WINDOW
    if g is not None and b is not None and T is not None:
        # all three: the least-squares fit (relative error) of the two windows that T then
        # predicts, g = ((W - 2) o + 2 T) / W and b = ((2 W - 2) o + T) / W
        rows = [((W - 2) / W / g, 2 * T / W / g), ((2 * W - 2) / W / b, T / W / b)]
        return sum(a * (1 - c) for a, c in rows) / sum(a * a for a, _ in rows)
    if g is not None and b is not None:
        return (2 * W * b - W * g) / (3 * W - 2)
    if g is not None:
        return (W * g - 2 * T) / (W - 2) if T is not None else (W * g - 2 * L) / (W + 2)
    return (W * b - T) / (2 * W - 2) if T is not None else (W * b - L) / (2 * W)


def _overrides(m: machines.Machine, fits: list[tuple[tuple[str, str, str], Fit]],
               windows: dict[str, Window] | None = None) -> dict[str, object]:
    """Machine parameters from the fits, by what each sweep measured (metric, path, buffers);
    the window models found on the way go into `windows`, by buffer kind."""
    out: dict[str, object] = {}
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
                out["pcie.bandwidth"] = max(out.get("pcie.bandwidth", 0.0), fastest_rate(fit.segments))
        elif metric == "latency" and path in ("intra-node", "inter-node"):
            which = "device" if buffers == "D D" else "host"
            # osu_latency's one-way time, per-message overheads included (the shim subtracts them)
            out[f"messages.{which}_{path.removesuffix('-node')}"] = piecewise_model(fit.segments)
    by_kind = dict(fits)
    for path in ("inter-node", "intra-node"):
        for buffers in ("D D", "H H"):
            which = "device" if buffers == "D D" else "host"
            bw, bibw, lone = (by_kind.get((metric, path, buffers)) for metric in ("bandwidth", "bibw", "latency"))
            if bw is None and bibw is None:
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
                        out["messages.host_intra"] = window_model(overhead, L, (bw or bibw).segments,
                                                                  m.mpi.eager_threshold_host)
                continue
            if which == "device":
                out["nic.bandwidth"] = (bw or bibw).segments[-1].bandwidth_Bps
            if bw and bibw and not lone:
                # the two windows also give the wire's latency L for a lone message (2 o + L),
                # the path's message model, and the candidates for its eager threshold
                wire = max(WINDOW * b - 2 * WINDOW * overhead, 0.0)
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


def _lone_time(overrides: dict, which: str, short: str, o: float, L: float, bandwidth: float, size: int) -> float:
    """A lone message's time on a path: its message model (messages.*) where the fit has one,
    else both overheads, the route's latency and the size at the path's bandwidth."""
    model = overrides.get(f"messages.{which}_{short}")
    if model is None:
        return 2 * o + L + size / bandwidth
    seg = next((g for g in model if "up_to" not in g or size <= g["up_to"]), model[-1])
    return seg["latency"] + size / seg["bandwidth"]


def _overhead_cap(lone: tuple[list[int], list[float]] | None, windows: dict[str, tuple[list[int], list[float]]],
                  L: float, bandwidth: float) -> float:
    """The largest per-message overhead o no measurement of a path contradicts: with its
    osu_latency (sizes, seconds), a lone message no slower than measured, 2 o + L + size /
    bandwidth <= T at every size; without it, no window size faster than the overhead alone
    gives (window_overhead at that size's time per message)."""
    if lone is not None:
        return max(min((t - L - s / bandwidth) / 2 for s, t in zip(*lone)), 0.0)
    return max(min(window_overhead(t if metric == "bandwidth" else None, t if metric == "bibw" else None, None, L)
                   for metric, (_, times) in windows.items() for t in times), 0.0)


def _pick_gaps(machine_name: str, m: machines.Machine, repo: Path, pairs, fits, overrides: dict) -> dict:
    """For each path with an osu_bw or osu_bibw window, whether a gap (gaps.*) reproduces its
    sweeps better than the per-message overhead alone, simulator in the loop. Candidates: no
    gap; a gap fitted (piecewise, breakpoints from the data) to what each window needs beside
    the fitted overhead, and beside the largest overhead no measurement contradicts
    (_overhead_cap). A gap is kept only where it cuts the mean of the path's sweeps' median
    and 95th-percentile |error| by at least GAP_GAIN. Updates `overrides`; returns the trials
    per path."""
    by_kind = dict(fits)
    result = {}
    for path in ("inter-node", "intra-node"):
        short = path.removesuffix("-node")
        for buffers in ("D D", "H H"):
            which = "device" if buffers == "D D" else "host"
            windows = {metric: by_kind[(metric, path, buffers)] for metric in ("bandwidth", "bibw")
                       if (metric, path, buffers) in by_kind}
            if not windows:
                continue
            suffix = "" if path == "inter-node" else "_intra"
            keys = (f"mpi.send_overhead_{which}{suffix}", f"mpi.recv_overhead_{which}{suffix}")
            o_fit = overrides[keys[0]]
            L = route_latency(m, path, which)
            bandwidth = next(iter(windows.values())).segments[-1].bandwidth_Bps
            measured = {metric: _times(sw.unit, pts, metric) for sw, pts in pairs
                        for metric, fit in windows.items() if sw.name == fit.sweep}
            lone = by_kind.get(("latency", path, buffers))
            lone_times = next((_times(sw.unit, pts, "latency") for sw, pts in pairs if lone and sw.name == lone.sweep),
                              None)
            cap = _overhead_cap(lone_times, measured, L, bandwidth)
            overheads = [o_fit] + ([cap] if cap < o_fit else [])
            sweeps = [(sw, pts) for sw, pts in pairs if sw.kind[1:] == (path, buffers)
                      and sw.kind[0] in ("latency", "bandwidth", "bibw")]
            candidates = {"none": {}}
            for o in overheads:
                for metric in windows:
                    sizes, times = measured[metric]
                    ack = _lone_time(overrides, which, short, o, L, bandwidth, 4)
                    # a gap no longer than the overhead changes nothing: the fit is held to at least o
                    need = [max(window_gap(metric, t, o, _lone_time(overrides, which, short, o, L, bandwidth, s), ack),
                                o, 1e-9) for s, t in zip(sizes, times)]
                    gap = piecewise_model(fit_sweep(sizes, need)[0])
                    name = f"{'osu_bw' if metric == 'bandwidth' else 'osu_bibw'}, o = {o * 1e6:.3f} us"
                    candidates[name] = {keys[0]: o, keys[1]: o, f"gaps.{which}_{short}": gap}
            validation.build_bench(repo)
            scores = {name: _score(machine_name, repo, {**overrides, **changes}, sweeps)
                      for name, changes in candidates.items()}
            best = min(scores, key=scores.get)
            if scores["none"] - scores[best] >= GAP_GAIN:
                overrides.update(candidates[best])
            result[f"{which}_{short}"] = scores
    return result


def _score(machine_name: str, repo: Path, overrides: dict, sweeps) -> float:
    """How well the machine with these overrides reproduces the sweeps, simulator in the loop:
    the mean over them of median + 95th-percentile |error| (build_bench first)."""
    machine = machines.load(machine_name, as_set(overrides), measured_models=False)
    results = [validation.compare(repo, machine, sw, pts) for sw, pts in sweeps]
    return float(np.mean([r.median_abs_error + r.p95_abs_error for r in results]))


SELECTORS = ("default", "ompi", "mpich", "mvapich2", "impi")


def _pick_collective_selector(machine_name: str, repo: Path, collectives, overrides: dict):
    """Each MPI library's choice of algorithms (SMPI's selectors) on the machine calibrated so
    far: the mean over the collective sweeps of the median |error| (raw), and of the median +
    95th percentile of what a correction cannot remove (the simulation slower than measured).
    The pick: the least uncorrectable error, then the least raw error (the least correction).
    Returns (raw, uncorrectable, chosen, each selector's results)."""
    validation.build_bench(repo)
    fixed = as_set(overrides)
    raw, left, results = {}, {}, {}
    for selector in SELECTORS:
        trial = machines.load(machine_name, fixed + [f"mpi.collective_selector={selector!r}"], measured_models=False)
        results[selector] = [validation.compare(repo, trial, sweep, points) for sweep, points in collectives]
        raw[selector] = float(np.mean([r.median_abs_error for r in results[selector]]))
        slow = [[max(s - m, 0.0) / m for s, m in zip(r.simulated, r.measured)] for r in results[selector]]
        left[selector] = float(np.mean([np.median(e) + validation.percentile(e, 0.95) for e in slow]))
    chosen = min(SELECTORS, key=lambda sel: (round(left[sel], 6), raw[sel]))
    return raw, left, chosen, results


def _pick_eager_threshold(machine_name: str, m: machines.Machine, repo: Path, pairs,
                          windows: dict[str, Window], overrides: dict) -> dict:
    """For each path with a window model, the eager -> rendezvous threshold among the osu_bw
    fit's breakpoints (and the description's value) that best reproduces osu_bw and osu_bibw
    (mean of their median and 95th-percentile |error|), simulator in the loop. Updates
    `overrides`; returns the trials per path."""
    result = {}
    for which, w in windows.items():
        sweeps = [(sw, pts) for sw, pts in pairs
                  if sw.kind[1:] == ("inter-node", w.buffers) and sw.kind[0] in ("bandwidth", "bibw")]
        threshold, model = f"mpi.eager_threshold_{which}", f"messages.{which}_inter"
        described = getattr(m.mpi, f"eager_threshold_{which}")
        candidates = sorted({float(seg.size_from) for seg in w.fit.segments[1:]} | {float(described)})
        validation.build_bench(repo)
        trials = {eager: {threshold: eager, model: window_model(w.overhead, w.wire, w.bandwidth, eager)}
                  for eager in candidates}
        scores = {str(int(e)): _score(machine_name, repo, {**overrides, **t}, sweeps) for e, t in trials.items()}
        overrides.update(trials[float(min(scores, key=scores.get))])
        result[which] = scores
    return result


def collective_corrections(result: validation.SweepResult) -> list[dict[str, float]]:
    """Per size range, the measured time of a collective beyond the simulated one (none where
    the simulation is slower: the simulator can only add time); ranges meet halfway
    (geometrically) between measured sizes, and neighbouring ranges with the same extra time
    are merged."""
    scale = validation.UNIT_SECONDS[result.unit]
    extras = [max(m - s, 0.0) * scale for m, s in zip(result.measured, result.simulated)]
    model: list[dict[str, float]] = []
    for i, (size, extra) in enumerate(zip(result.sizes, extras)):
        up_to = float(np.sqrt(size * result.sizes[i + 1])) if i + 1 < len(result.sizes) else None
        if model and model[-1]["extra"] == extra:
            model.pop()
        model.append({"up_to": up_to, "extra": extra})
    del model[-1]["up_to"]
    return model


def _series(machine_name: str, repo: Path, inputs: list[Path], p2p_path: str | None, sweep_set: str | None = None,
            collective_layout: tuple[int, int] | None = None):
    """(sweep, points in the sweep's unit, files) from input files, or the built-in sweeps."""
    if inputs:
        pairs, skipped = [], []
        for f in inputs:
            for series in measurements.load(f):
                if series.metric in ("latency", "bandwidth", "bibw") and not series.path:
                    if p2p_path is None:
                        raise InputError(str(f), None, series.benchmark,
                                         "--p2p-path intra-node or inter-node: OSU output does not say "
                                         "whether its two ranks shared a node")
                    series.path = p2p_path
                found = validation.sweep_for(series, collective_layout)
                if found and found[0].fit and series.metric in FITTED_METRICS and not series.one_size and \
                        len(series.sizes) < FEW_POINTS:
                    raise InputError(f"{f}:{series.lines[-1]}", "size",
                                     f"{len(series.sizes)} size(s) of {series.benchmark} ({series.metric})",
                                     f"at least {FEW_POINTS} sizes for a fit (latency + size / bandwidth): "
                                     "the series ends here")
                if found:
                    pairs.append(found)
                elif series.metric == "collective_latency" and measurements.collective_of(series.benchmark) is None:
                    skipped.append(f"{series.benchmark} ({f}): not a blocking MPI collective calibration/bench/"
                                   "coll_sweep runs (nccl-tests' are NCCL's; OSU's non-blocking and v-variants have "
                                   "no counterpart there): not fitted")
                elif series.metric == "kernel_bandwidth":
                    skipped.append(f"{series.benchmark} ({f}): a streaming kernel's memory bandwidth; kernel "
                                   "times come from cost files (--kernels timing tables, orrery fit): not fitted")
                else:
                    skipped.append(f"{series.benchmark} {series.metric} {series.path} ({f})")
        return pairs, [Path(f) for f in inputs], skipped
    if sweep_set is None and machine_name not in validation.SWEEPS and machine_name not in validation.SWEEP_SETS:
        raise InputError("--machine", None, machine_name,
                         f"a machine with measured sweeps ({', '.join(sorted(validation.SWEEPS))}), or --input files")
    pairs = [(sw, validation.measured_points(repo, sw)) for sw in validation.sweeps_for(machine_name, sweep_set)]
    data_dir = repo / "calibration" / "data" / "measured"
    files = sorted({data_dir / sw.file for sw, _ in pairs})
    return pairs, files, []


def calibrate(machine_name: str, repo: Path, inputs: list[Path] = (), p2p_path: str | None = None,
              sweep_set: str | None = None, collective_layout: tuple[int, int] | None = None) -> tuple[dict, list]:
    """The calibration file's content, and the (sweep, points) pairs the closed loop checks."""
    stack: dict[str, object] = dict(validation.set_description(machine_name, sweep_set))
    m = machines.load(machine_name, as_set(stack), measured_models=False)
    pairs, files, skipped = _series(machine_name, repo, list(inputs), p2p_path, sweep_set, collective_layout)
    if not pairs:
        raise InputError(", ".join(map(str, inputs)), None,
                         skipped[0] + (f" (and {len(skipped) - 1} more not fitted)" if len(skipped) > 1 else ""),
                         "a sweep calibration/bench can reproduce (OSU point-to-point or collective, copy sweeps, "
                         "the harness's CSV): nothing to fit or compare")
    fits = []
    collectives = []
    api: dict[str, float] = {}  # measured host costs of API calls: the machine's overheads, as they are
    for sweep, points in pairs:
        if not sweep.fit:
            continue
        if sweep.kind[0] == "api_time":
            (_, value), = points  # one figure, in us
            api[f"overheads.{sweep.kind[1]}"] = value * 1e-6
            continue
        if sweep.kind[0] == "collective_latency":
            collectives.append((sweep, points))
            continue
        if len(points) < FEW_POINTS:
            skipped.append(f"{sweep.name}: {len(points)} size(s), too few for a fit: compared in the closed loop")
            continue
        sizes, times = _times(sweep.unit, points, sweep.kind[0])
        try:
            segments, outliers = fit_sweep(sizes, times)
        except InputError as e:
            raise InputError(sweep.name, None, e.value, e.expected) from None
        residuals = [abs(predict(segments, s) - t) / t for s, t in zip(sizes, times) if s not in outliers]
        fits.append((sweep.kind, Fit(sweep.name, segments, float(np.median(residuals)), float(max(residuals)),
                                     outliers)))

    def shown(f: Path) -> str:
        try:
            return str(f.resolve().relative_to(repo.resolve()))
        except ValueError:
            return str(f)

    if api:  # the copy models' latencies exclude the (measured) host overheads
        m = machines.load(machine_name, as_set({**stack, **api}), measured_models=False)
    windows: dict[str, Window] = {}
    overrides = {**stack, **api, **_overrides(m, fits, windows)}
    eager_trials = _pick_eager_threshold(machine_name, m, repo, pairs, windows, overrides)
    gap_trials = _pick_gaps(machine_name, m, repo, pairs, fits, overrides)
    trials, uncorrectable, uncorrected = {}, {}, {}
    if collectives:
        trials, uncorrectable, chosen, results = _pick_collective_selector(machine_name, repo, collectives, overrides)
        overrides["mpi.collective_selector"] = chosen
        # where the point-to-point model with the best algorithms still misses a collective: one
        # correction per collective and kind of buffers
        for (sweep, _), result in zip(collectives, results[chosen]):
            if result.median_abs_error > MEDIAN_TOLERANCE or result.p95_abs_error > P95_TOLERANCE:
                which = "device" if sweep.kind[2] == "D" else "host"
                overrides[f"collectives.{sweep.kind[1]}_{which}"] = collective_corrections(result)
                uncorrected[sweep.name] = {"median_abs_error": result.median_abs_error,
                                           "p95_abs_error": result.p95_abs_error}
    cal = {
        "orrery_calibration": FORMAT_VERSION,
        "machine": m.name,
        "command": f"orrery calibrate --machine {machine_name}" + (f" --sweeps {sweep_set}" if sweep_set else "") +
                   "".join(f" --input {shown(f)}" for f in inputs) +
                   (f" --p2p-path {p2p_path}" if inputs and p2p_path else "") +
                   (f" --collective-layout {collective_layout[0]}x{collective_layout[1]}"
                    if inputs and collective_layout else ""),
        "inputs": [{"file": shown(f), "sha256": hashlib.sha256(f.read_bytes()).hexdigest()} for f in files],
        "fits": [asdict(f) for _, f in fits],
        "not_fitted": skipped,
        "eager_threshold_trials": eager_trials,
        "gap_trials": gap_trials,
        "collective_selector_trials": trials,
        "collective_selector_uncorrectable": uncorrectable,
        "collectives_before_correction": uncorrected,
        "overrides": overrides,
    }
    return cal, pairs


def toml_value(v: object) -> str:
    """A JSON value of a calibration file as a TOML value for `--set`."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, str):
        return json.dumps(v)
    return repr(v)


def as_set(overrides: dict[str, object]) -> list[str]:
    """Overrides in SI units (a calibration file's) as `--set KEY=VALUE` strings, each quantity
    with its unit written out (machine descriptions need units)."""
    return [f"{k}={toml_value(machines.with_units(k, v))}" for k, v in overrides.items()]


def load(path: str | Path, machine_name: str) -> list[str]:
    """A calibration file's overrides, as `--set` strings, checked against the machine it is for."""
    p = Path(path)
    expected = "a calibration file written by orrery calibrate"
    try:
        data = json.loads(schema.read_text(p, expected))
    except json.JSONDecodeError as e:
        raise InputError(str(p), None, "invalid JSON", f"{expected} (valid JSON: {e})") from None
    if not isinstance(data, dict):
        raise InputError(str(p), None, f"a JSON {type(data).__name__}", f"{expected}: a JSON object")
    if data.get("orrery_calibration") not in READABLE_VERSIONS:
        raise InputError(str(p), "orrery_calibration", data.get("orrery_calibration"),
                         f"version {' or '.join(map(str, READABLE_VERSIONS))}")
    if data.get("machine") != machine_name:
        raise InputError(str(p), "machine", data.get("machine"), f"a calibration of {machine_name}")
    overrides = data.get("overrides")
    if not isinstance(overrides, dict):
        raise InputError(str(p), "overrides", overrides, "a JSON object of machine parameters (KEY: value in SI units)")
    return as_set(overrides)


TERMS = {"copy_bandwidth": "copies", "latency": "point-to-point", "bandwidth": "point-to-point",
         "bibw": "point-to-point", "collective_latency": "collectives", "api_time": "API overheads"}


def term_errors(closed_loop: list[validation.SweepResult], kinds: list[tuple[str, str, str]]) -> dict:
    """Median and 95th percentile |error| over every point of each term (copies,
    point-to-point, collectives, API overheads): the simulation's terms, judged one by one."""
    points: dict[str, list[float]] = {}
    for r, kind in zip(closed_loop, kinds):
        points.setdefault(TERMS.get(kind[0], kind[0]), []).extend(abs(e) for e in r.errors)
    return {term: {"points": len(errs), "median_abs_error": float(np.median(errs)),
                   "p95_abs_error": validation.percentile(errs, 0.95)} for term, errs in points.items()}


def report(cal: dict, closed_loop: list[validation.SweepResult], kinds: list[tuple[str, str, str]] = ()) -> str:
    lines = [f"calibration of {cal['machine']} from " + ", ".join(i["file"] for i in cal["inputs"])]
    for fit in cal["fits"]:
        segs = "; ".join(f"{s['size_from']}-{s['size_to']} B: {s['latency_s'] * 1e6:.3f} us" +
                         (f" + size / {s['bandwidth_Bps'] / 1e9:.3f} GB/s" if s["bandwidth_Bps"] < NO_SIZE_TERM else
                          " (no size term)") for s in fit["segments"])
        lines.append(f"  fit {fit['sweep']}: {segs} (residual median {100 * fit['median_rel_residual']:.1f}%, "
                     f"max {100 * fit['max_rel_residual']:.1f}%)")
        if fit.get("outliers"):
            lines.append(f"    left out of the fit, more than {100 * OUTLIER:.0f}% off it (compared below): " +
                         ", ".join(f"{size} B" for size in fit["outliers"]))
    for which, scores in cal.get("eager_threshold_trials", {}).items():
        lines.append(f"  eager threshold, {which} buffers: mean of osu_bw and osu_bibw (median + 95th percentile "
                     "|error|) per candidate: " + ", ".join(f"{k} B {100 * v:.1f}%" for k, v in scores.items()))
    if cal.get("collective_selector_trials"):
        lines.append("  collective algorithms: median |error| of the collective sweeps per MPI library's choice: " +
                     ", ".join(f"{k} {100 * v:.1f}%" for k, v in cal["collective_selector_trials"].items()))
        lines.append("  ... and what a correction could not remove (simulated slower than measured; median + 95th "
                     "percentile): " + ", ".join(f"{k} {100 * v:.1f}%"
                                                 for k, v in cal.get("collective_selector_uncorrectable", {}).items()) +
                     f"; chosen: {cal['overrides'].get('mpi.collective_selector')} (the least uncorrectable error, "
                     "then the least correction)")
    for name, before in cal.get("collectives_before_correction", {}).items():
        lines.append(f"  collective correction for {name}: before it, median |error| "
                     f"{100 * before['median_abs_error']:.1f}%, 95th percentile {100 * before['p95_abs_error']:.1f}% "
                     "(the point-to-point model alone)")
    for item in cal.get("not_fitted", []):
        lines.append(f"  not fitted: {item}")
    lines.append("overrides:")
    lines += [f"  {k} = {toml_value(v)}" for k, v in cal["overrides"].items()]
    lines.append("closed loop (microbenchmarks on the calibrated machine vs measured):")
    lines.append(validation.report(closed_loop))
    if kinds:
        lines.append("per term (every point of its sweeps):")
        for term, t in term_errors(closed_loop, list(kinds)).items():
            lines.append(f"  {term:<16} {t['points']:>4} points: median {100 * t['median_abs_error']:.1f}%, "
                         f"95th percentile {100 * t['p95_abs_error']:.1f}%")
    for r in closed_loop:
        if r.median_abs_error > MEDIAN_TOLERANCE or r.p95_abs_error > P95_TOLERANCE:
            lines.append(f"NOT MATCHED: {r.name}: median {100 * r.median_abs_error:.1f}% "
                         f"(tolerance {100 * MEDIAN_TOLERANCE:.0f}%), 95th percentile {100 * r.p95_abs_error:.1f}% "
                         f"(tolerance {100 * P95_TOLERANCE:.0f}%)" + (f": {r.note}" if r.note else ""))
    return "\n".join(lines)


# ---- kernels: alpha + beta * threads from a timing table ----

KERNEL_COLUMNS = ("kernel", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "time", "unit")


def _cells(row: dict) -> str:
    """A CSV row as it was written (DictReader puts a long row's extra cells in a list)."""
    cells = [c for v in row.values() for c in (v if isinstance(v, list) else [v]) if c is not None]
    return ",".join(cells)


def fit_kernels(path: str | Path) -> tuple[str, dict[str, tuple[float, float, float, float]]]:
    """A kernel cost file (TOML text) fitted on a timing table, and per kernel
    (alpha, beta, median and max relative residual). Each kernel needs rows at
    two launch geometries at least."""
    import csv

    p = Path(path)
    text = schema.read_text(p, "a kernel timing table")
    reader = csv.DictReader(text.splitlines())
    if tuple(reader.fieldnames or ()) != KERNEL_COLUMNS:
        raise InputError(f"{p}:1", "header", ",".join(reader.fieldnames or ()), ",".join(KERNEL_COLUMNS))
    rows: dict[str, list[tuple[int, float, int]]] = {}
    for line, row in enumerate(reader, start=2):
        unit = (row["unit"] or "").strip()  # None: a short row
        if unit not in measurements.UNITS or measurements.UNITS[unit][1] != "s":
            raise InputError(f"{p}:{line}", "unit", unit, "a time unit: us, ms or s")
        try:
            threads = 1
            for c in KERNEL_COLUMNS[1:7]:
                threads *= int(row[c])
            seconds = float(row["time"]) * measurements.UNITS[unit][0]
        except (TypeError, ValueError):  # TypeError: a short row's missing cell
            raise InputError(f"{p}:{line}", "row", _cells(row),
                             "whole launch dimensions and a number") from None
        if threads <= 0 or not (math.isfinite(seconds) and seconds > 0):
            raise InputError(f"{p}:{line}", "row", _cells(row), "positive dimensions and time")
        rows.setdefault(row["kernel"], []).append((threads, seconds, line))
    if not rows:
        raise InputError(str(p), None, "a header without rows", "a kernel timing table with rows")
    fits = {}
    for kernel, points in rows.items():
        if len({t for t, _, _ in points}) < 2:
            raise InputError(f"{p}:{points[0][2]}", "kernel", kernel,
                             "rows at two launch geometries at least, to fit alpha + beta * threads")
        n = np.array([t for t, _, _ in points], float)
        t = np.array([s for _, s, _ in points])
        alpha, beta, res = _fit_line(n, t)
        fits[kernel] = (alpha, beta, float(np.median(np.abs(res))), float(np.max(np.abs(res))))
    digest = hashlib.sha256(text.encode()).hexdigest()
    lines = [f"# Kernel costs fitted by `orrery calibrate --kernels` from {p.name} (sha256 {digest})",
             "# time = alpha + beta * threads launched (grid x block), least squares on relative error"]
    for kernel, (alpha, beta, med, worst) in fits.items():
        lines += ["", f"# {len(rows[kernel])} rows; residual median {100 * med:.2f}%, max {100 * worst:.2f}%",
                  f"[kernels.{json.dumps(kernel)}]", f"alpha = {alpha!r}", f"beta = {beta!r}"]
    return "\n".join(lines) + "\n", fits
