"""The choices calibration makes with the simulator in the loop.

Where a fit alone cannot tell (which eager -> rendezvous threshold of a path's candidates, whether
a gap between a rank's sends reproduces its windows better than the per-message overhead alone,
which MPI library's choice of collective algorithms), each candidate machine is simulated on the
measured sweeps it bears on and scored: the mean over them of median + 95th-percentile |error|.
Each candidate is a machine loaded with the overrides so far and its own (``merge.candidate``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import machines
from . import derive, merge, sweeps, validate
from .derive import Window, lone_time, overhead_cap, piecewise_model, route_latency, window_gap, window_model
from .fit import fit_sweep

GAP_GAIN = 0.01  # a gap is kept where it cuts a path's mean (median + p95) |error| by this much


def pick_gaps(machine_name: str, m: machines.Machine, repo: Path | None, pairs, fits, overrides: dict) -> dict:
    """For each path with an osu_bw or osu_bibw window, whether a gap (gaps.*) reproduces its
    sweeps better than the per-message overhead alone, simulator in the loop. Candidates: no
    gap; a gap fitted (piecewise, breakpoints from the data) to what each window needs beside
    the fitted overhead, and beside the largest overhead no measurement contradicts
    (overhead_cap). A gap is kept only where it cuts the mean of the path's sweeps' median
    and 95th-percentile |error| by at least GAP_GAIN. Updates `overrides`; returns the trials
    per path."""
    by_kind = dict(fits)
    result = {}
    for path in ("inter-node", "intra-node"):
        short = path.removesuffix("-node")
        for buffers in ("D D", "H H"):
            which = "device" if buffers == "D D" else "host"
            windows = {
                metric: by_kind[(metric, path, buffers)]
                for metric in ("bandwidth", "bibw")
                if (metric, path, buffers) in by_kind
            }
            if not windows:
                continue
            suffix = "" if path == "inter-node" else "_intra"
            keys = (f"mpi.send_overhead_{which}{suffix}", f"mpi.recv_overhead_{which}{suffix}")
            o_fit = overrides[keys[0]]
            L = route_latency(m, path, which)
            bandwidth = next(iter(windows.values())).segments[-1].bandwidth_Bps
            measured = {
                metric: sweeps.seconds_per_transfer(sw.unit, pts, metric)
                for sw, pts in pairs
                for metric, fit in windows.items()
                if sw.name == fit.sweep
            }
            lone = by_kind.get(("latency", path, buffers))
            lone_times = next(
                (
                    sweeps.seconds_per_transfer(sw.unit, pts, "latency")
                    for sw, pts in pairs
                    if lone and sw.name == lone.sweep
                ),
                None,
            )
            cap = overhead_cap(lone_times, measured, L, bandwidth)
            overheads = [o_fit] + ([cap] if cap < o_fit else [])
            related = [
                (sw, pts)
                for sw, pts in pairs
                if sw.kind[1:] == (path, buffers) and sw.kind[0] in ("latency", "bandwidth", "bibw")
            ]
            candidates: dict[str, dict[str, object]] = {"none": {}}
            for o in overheads:
                for metric in windows:
                    sizes, times = measured[metric]
                    ack = lone_time(overrides, which, short, o, L, bandwidth, 4)
                    # a gap no longer than the overhead changes nothing: the fit is held to at least o
                    need = [
                        max(
                            window_gap(metric, t, o, lone_time(overrides, which, short, o, L, bandwidth, s), ack),
                            o,
                            1e-9,
                        )
                        for s, t in zip(sizes, times)
                    ]
                    gap = piecewise_model(fit_sweep(sizes, need)[0])
                    name = f"{'osu_bw' if metric == 'bandwidth' else 'osu_bibw'}, o = {o * 1e6:.3f} us"
                    candidates[name] = {keys[0]: o, keys[1]: o, f"gaps.{which}_{short}": gap}
            validate.build_bench(repo)
            scores = {
                name: score(machine_name, repo, {**overrides, **changes}, related)
                for name, changes in candidates.items()
            }
            best = min(scores, key=scores.__getitem__)
            if scores["none"] - scores[best] >= GAP_GAIN:
                overrides.update(candidates[best])
            result[f"{which}_{short}"] = scores
    return result


def score(machine_name: str, repo: Path | None, overrides: dict, related) -> float:
    """How well the machine with these overrides reproduces the sweeps, simulator in the loop:
    the mean over them of median + 95th-percentile |error| (build_bench first)."""
    machine = merge.candidate(machine_name, overrides)
    results = [validate.compare(repo, machine, sw, pts) for sw, pts in related]
    return float(np.mean([r.median_abs_error + r.p95_abs_error for r in results]))


SELECTORS = ("default", "ompi", "mpich", "mvapich2", "impi")


def pick_collective_selector(machine_name: str, repo: Path | None, collectives, overrides: dict):
    """Each MPI library's choice of algorithms (SMPI's selectors) on the machine calibrated so
    far: the mean over the collective sweeps of the median |error| (raw), and of the median +
    95th percentile of what a correction cannot remove (the simulation slower than measured).
    The pick: the least uncorrectable error, then the least raw error (the least correction).
    Returns (raw, uncorrectable, chosen, each selector's results)."""
    validate.build_bench(repo)
    raw, left, results = {}, {}, {}
    for selector in SELECTORS:
        trial = merge.candidate(machine_name, {**overrides, "mpi.collective_selector": selector})
        results[selector] = [validate.compare(repo, trial, sweep, points) for sweep, points in collectives]
        raw[selector] = float(np.mean([r.median_abs_error for r in results[selector]]))
        slow = [[max(s - m, 0.0) / m for s, m in zip(r.simulated, r.measured)] for r in results[selector]]
        left[selector] = float(np.mean([np.median(e) + validate.percentile(e, 0.95) for e in slow]))
    chosen = min(SELECTORS, key=lambda sel: (round(left[sel], 6), raw[sel]))
    return raw, left, chosen, results


def collective_ranks(sweep: sweeps.Sweep) -> int:
    """The ranks of a collective sweep's communicator (its layout's processes)."""
    return sweep.nodes * (sweep.ranks_per_node or sweep.gpus_per_node)


def pick_correction_steps(machine_name: str, repo: Path | None, key: str, group, overrides: dict) -> dict:
    """The correction of one collective and kind of buffers (`key`, collectives.NAME_device or
    _host) from its sweeps `group` ((sweep, points, result with the chosen algorithms) each):
    the extra time per size range measured on the fewest ranks, and how it scales with the
    communicator's size (CorrectionSegment.steps). Sweeps on one rank count cannot tell: the
    algorithms' model (derive.CORRECTION_STEPS). Sweeps on several: each form simulated on
    all of them, the least mean (median + 95th percentile |error|) kept. Updates `overrides`;
    returns the form, the sweep it was fitted on and the trials."""
    sweep, _, result = min(group, key=lambda g: collective_ranks(g[0]))
    ranks = collective_ranks(sweep)
    counts = sorted({collective_ranks(sw) for sw, _, _ in group})
    model = derive.CORRECTION_STEPS.get(key.split(".", 1)[1].rsplit("_", 1)[0], "constant")
    candidates = {
        steps: derive.collective_corrections(result, ranks, steps)
        for steps in (("constant", "log2", "linear") if len(counts) > 1 else (model,))
    }
    trials = {}
    if len(candidates) > 1:
        validate.build_bench(repo)
        related = [(sw, pts) for sw, pts, _ in group]
        trials = {steps: score(machine_name, repo, {**overrides, key: c}, related) for steps, c in candidates.items()}
    steps = min(trials, key=trials.__getitem__) if trials else model
    overrides[key] = candidates[steps]
    return {"steps": steps, "ranks": ranks, "fitted_on": sweep.name, "rank_counts": counts, "trials": trials}


def pick_eager_threshold(
    machine_name: str, m: machines.Machine, repo: Path | None, pairs, windows: dict[str, Window], overrides: dict
) -> dict:
    """For each path with a window model, the eager -> rendezvous threshold among the osu_bw
    fit's breakpoints (and the description's value) that best reproduces osu_bw and osu_bibw
    (mean of their median and 95th-percentile |error|), simulator in the loop. Updates
    `overrides`; returns the trials per path."""
    result = {}
    for which, w in windows.items():
        related = [
            (sw, pts)
            for sw, pts in pairs
            if sw.kind[1:] == ("inter-node", w.buffers) and sw.kind[0] in ("bandwidth", "bibw")
        ]
        threshold, model = f"mpi.eager_threshold_{which}", f"messages.{which}_inter"
        described = getattr(m.mpi, f"eager_threshold_{which}")
        candidates = sorted({float(seg.size_from) for seg in w.fit.segments[1:]} | {float(described)})
        validate.build_bench(repo)
        trials = {
            eager: {threshold: eager, model: window_model(w.overhead, w.wire, w.bandwidth, eager)}
            for eager in candidates
        }
        scores = {str(int(e)): score(machine_name, repo, {**overrides, **t}, related) for e, t in trials.items()}
        overrides.update(trials[float(min(scores, key=scores.__getitem__))])
        result[which] = scores
    return result
