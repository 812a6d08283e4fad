"""NCCL's machine keys ([nccl]) fitted on nccl-tests sweeps, simulator in the loop.

What is fitted: ``nccl.base_latency_<algo>_<proto>`` (what one NCCL call takes beyond its steps'
transfers, per algorithm and protocol), ``nccl.step_latency_nvls`` (an NVLS step's latency on
NVLink, NCCL's 25 us), ``nccl.efficiency_<link>`` (the fraction of a route's
bandwidth NCCL's transfers get, per link class) and ``nccl.nvls_efficiency``, on the sweeps of
the set marked ``fit`` (orrery/calibration/catalogue/MACHINE.toml, ``metric = "nccl_time"``).
NCCL's choice of algorithm, protocol and channels is NCCL's own tuning model with NCCL's
constants, whatever these keys say (interpose/nccl/tuning.cpp), so the choice per size is fixed
and the keys only change how long each choice takes.

No model of the simulated time is assumed: it is measured, on the simulator, around the keys so
far. One round simulates every fit sweep (calibration/bench/nccl_sweep at the measured sizes,
out-of-place and in-place from one run):

1. base: the keys so far;
2. latency probe: each base latency raised by its own step, ``(k + 1) x PROBE_STEP`` for the
   k-th key: a size whose time moved by one key's step (to a quarter step) depends on that key,
   once per call: the algorithm and protocol NCCL ran that size with; a size whose time moved
   otherwise is left to the efficiencies;
3. step-latency probes: each step latency (``nccl.step_latency_nvls``, on an NVSwitch) raised by
   PROBE_STEP, one at a time: each size's time as ``a + slope x latency`` (an NVLS size depends on
   it as on its base latency, once per call); efficiency probes: each efficiency key lowered by
   PROBE_FACTOR, one at a time: each size's time as ``a + b / efficiency``;
4. solve: the keys minimising ``score`` (per fitted sweep, its mean |error|, a bound of its
   median, over the median's tolerance, and the mean of its worst 10 % of |errors|, a bound of
   its 95th percentile, over that one's; the worst of these: the targets are a median and a 95th
   percentile on every sweep), with the time linear in each latency and each 1 / efficiency as
   the probes found (a linear programme: scipy's linprog), latencies 0 or more, efficiencies in
   (0, 1]; a step latency's change costs STEP_TIE per second, so that of a base latency and a
   step latency that move the same sizes alike (NVLS's), the step latency keeps NCCL's value
   unless the base latency alone, at 0, cannot give the time;
5. check: the solved keys simulated; the solve repeats from that base (the probes' slopes kept)
   while it lowers the score, at most ROUNDS times;
6. refine: the score's figures bound the targets' from above (a mean for the median, a tail's
   mean for the 95th percentile), so the last steps are taken on the targets' own figures
   (``targets``), simulated: each efficiency times each of REFINE in turn, kept where the worst
   sweep comes closer to its targets.

Keys no fit sweep depends on keep their values, and the report says so. Not here: the MPI
fits (derive.py, search.py) and the closed loop (calibrate.closed_loop, validate.compare).
"""

from __future__ import annotations

import logging
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import machines
from . import measurements, merge, sweeps, validate
from .sweeps import Sweep

log = logging.getLogger(__name__)

PROBE_STEP = 2e-6  # s: the k-th base latency's probe raises it by (k + 1) x this
PROBE_FACTOR = 0.8  # an efficiency's probe multiplies it by this
ROUNDS = 3  # solves after the first, each from the last check's times
REFINE = (0.99, 0.995, 1.005, 1.01)  # the last steps: each efficiency times these, kept where the targets gain
LATENCY_BOUND = 1e-3  # s: no base latency is fitted above this
EFFICIENCY_FLOOR = 0.05  # nor an efficiency below this
TIE = 0.01  # the weight of the mean over the sweeps beside the worst sweep's score
TAIL = 0.9  # the score's tail: the worst 10 % of a sweep's sizes (about its 95th percentile's 2-3 of 31)
SENSITIVE = 0.002  # a probe that moves a time by less than this fraction: the time does not depend on it
STEP_TIE = 1e3  # per s: the cost of moving a step latency from NCCL's value (1e-3 per us), a tie-break


def latency_keys(m: machines.Machine) -> list[str]:
    """The machine's base-latency keys (nccl.base_latency_<algo>_<proto>), in the schema's order."""
    return [f"nccl.{f}" for f in type(m.nccl).model_fields if f.startswith("base_latency_")]


def step_keys(m: machines.Machine) -> list[str]:
    """The machine's step-latency keys sweeps on it can depend on: NVLS's
    (nccl.step_latency_nvls) only on an NVSwitch, where NCCL runs NVLS."""
    return ["nccl.step_latency_nvls"] if m.nvlink.topology == "nvswitch" else []


def efficiency_keys(m: machines.Machine, multi_node: bool) -> list[str]:
    """The machine's efficiency keys (per link class, and NVLS's) that sweeps on it can depend
    on: the network's only with sweeps across nodes, PCIe's only where no NVLink joins the GPUs,
    NVLS's only on an NVSwitch. A probe of any other would be a round of runs for nothing."""
    out = []
    for f in type(m.nccl).model_fields:
        if "efficiency" not in f:
            continue
        if (
            (f == "efficiency_net" and not multi_node)
            or (f == "efficiency_pcie" and m.nvlink.topology != "none")
            or (f == "efficiency_nvlink" and m.nvlink.topology == "none")
            or (f == "nvls_efficiency" and m.nvlink.topology != "nvswitch")
        ):
            continue
        out.append(f"nccl.{f}")
    return out


def all_keys(m: machines.Machine) -> list[str]:
    return [f"nccl.{f}" for f in type(m.nccl).model_fields]


def value(m: machines.Machine, key: str) -> float:
    return float(getattr(m.nccl, key.removeprefix("nccl.")))


@dataclass
class Point:
    sweep: str
    size: int
    measured: float  # s
    base: float = 0.0  # s, simulated with the keys so far
    latency_key: str = ""  # the base latency its time depends on ("" none found)
    latency_slope: float = 0.0  # d time / d latency
    # d time / d (1 / efficiency), per efficiency key
    efficiency_slopes: dict[str, float] | None = None
    # d time / d latency, per step-latency key its time depends on
    step_slopes: dict[str, float] | None = None

    def latency_slopes(self) -> dict[str, float]:
        """d time / d latency per latency key (its base latency's, then its step latencies')."""
        return {**({self.latency_key: self.latency_slope} if self.latency_key else {}), **(self.step_slopes or {})}


def _groups(pairs: list[tuple[Sweep, list[tuple[int, float]]]]) -> dict[tuple, list[tuple[Sweep, list[int]]]]:
    """Sweeps one run of nccl_sweep serves (the same program, layout and environment: its two
    placements), each with its sizes."""
    groups: dict[tuple, list[tuple[Sweep, list[int]]]] = {}
    for sweep, points in pairs:
        key = (sweep.program, sweep.nodes, sweep.gpus_per_node, sweep.ranks_per_node, sweep.env)
        groups.setdefault(key, []).append((sweep, [s for s, _ in points]))
    return groups


def simulate_all(
    repo: Path | None, m: machines.Machine, pairs: list[tuple[Sweep, list[tuple[int, float]]]]
) -> dict[tuple[str, int], float]:
    """(sweep name, size) -> simulated seconds, every sweep of `pairs` on machine `m`, one run
    per group of sweeps nccl_sweep prints together."""
    out: dict[tuple[str, int], float] = {}
    for members in _groups(pairs).values():
        sizes = sorted({s for _, sz in members for s in sz})
        with tempfile.TemporaryDirectory(prefix="orrery-nccl-") as runs:
            stdout = validate.run_bench(repo, m, members[0][0], sizes, Path(runs))
        table = measurements.nccl_tests_table(Path(members[0][0].program[0]), stdout)
        for sweep, sz in members:
            times = dict(zip(table[sweep.kind[2]].sizes, table[sweep.kind[2]].values))
            for s in sz:
                out[(sweep.name, s)] = times[s]
    return out


def tail_mean(errors: list[float]) -> float:
    """The mean of the worst (1 - TAIL) of `errors` (a fraction of the last one counted): the
    conditional value at risk, which bounds the (TAIL) percentile from above and, unlike it, can
    be minimised by a linear programme."""
    q = (1 - TAIL) * len(errors)
    return min(t + sum(max(0.0, e - t) for e in errors) / q for t in errors)


def score(points: list[Point], times: dict[tuple[str, int], float]) -> float:
    """What the fit minimises, aimed at the targets (a median and a 95th percentile of |error| on
    every sweep, sweeps.MEDIAN_TOLERANCE and P95_TOLERANCE): per fitted sweep its mean |error| over
    the median's tolerance and the mean of its worst (1 - TAIL) |errors| over the 95th
    percentile's (each bounds its figure from above: 1 or less, that target is met); the worst of
    them, plus TIE times their mean (of two fits whose worst sweeps are as good, the one better
    on the others)."""
    per_sweep: dict[str, list[float]] = {}
    for p in points:
        per_sweep.setdefault(p.sweep, []).append(abs(times[(p.sweep, p.size)] - p.measured) / p.measured)
    ratios = [
        r
        for e in per_sweep.values()
        for r in (float(np.mean(e)) / sweeps.MEDIAN_TOLERANCE, tail_mean(e) / sweeps.P95_TOLERANCE)
    ]
    return max(ratios) + TIE * float(np.mean(ratios))


def targets(points: list[Point], times: dict[tuple[str, int], float]) -> float:
    """How far the fitted sweeps are from the targets: the worst of every sweep's median |error|
    over sweeps.MEDIAN_TOLERANCE and 95th percentile over P95_TOLERANCE (1 or less: all met)."""
    per_sweep: dict[str, list[float]] = {}
    for p in points:
        per_sweep.setdefault(p.sweep, []).append(abs(times[(p.sweep, p.size)] - p.measured) / p.measured)
    return max(
        max(float(np.median(e)) / sweeps.MEDIAN_TOLERANCE, validate.percentile(e, 0.95) / sweeps.P95_TOLERANCE)
        for e in per_sweep.values()
    )


def fit(machine_name: str, repo: Path | None, pairs, overrides: dict) -> dict:
    """The [nccl] keys fitted on the NCCL sweeps of `pairs` marked fit, on the machine with
    `overrides` so far (updated with the fitted keys). Returns what the report shows: the
    probes' findings per size, each round's score and targets' figures, the keys fitted and
    those left."""
    fitted_pairs = [(sw, pts) for sw, pts in pairs if sw.fit and sw.kind[0] == "nccl_time"]
    validate.build_bench(repo, nccl=True)
    m = merge.candidate(machine_name, overrides)
    lat_keys = latency_keys(m)
    stp_keys = step_keys(m)
    eff_keys = efficiency_keys(m, any(sw.nodes > 1 for sw, _ in fitted_pairs))
    # from NCCL's constants (the schema's defaults), not the description's values, which may be an
    # earlier calibration's (sync_builtin): the same command gives the same keys, whatever the
    # built-in carries; keys the set's description or --set give stay theirs
    defaults = type(m.nccl)()
    start = {k: float(overrides.get(k, getattr(defaults, k.removeprefix("nccl.")))) for k in all_keys(m)}
    points = [Point(sw.name, s, sweeps.to_si(sw.unit, v)) for sw, pts in fitted_pairs for s, v in pts]

    def on(keys: dict[str, float]):
        return merge.candidate(machine_name, {**overrides, **keys})

    log.info("NCCL fit: base run of %d sweeps", len(fitted_pairs))
    base = simulate_all(repo, on(start), fitted_pairs)
    steps = {k: (i + 1) * PROBE_STEP for i, k in enumerate(lat_keys)}
    log.info("NCCL fit: latency probe")
    probe = simulate_all(repo, on({**start, **{k: start[k] + d for k, d in steps.items()}}), fitted_pairs)
    for p in points:
        p.base = base[(p.sweep, p.size)]
        shift = probe[(p.sweep, p.size)] - p.base
        nearest = min(lat_keys, key=lambda k: abs(shift - steps[k]))
        if abs(shift - steps[nearest]) < PROBE_STEP / 4:
            p.latency_key, p.latency_slope = nearest, 1.0
        p.efficiency_slopes = {}
        p.step_slopes = {}
    for k in stp_keys:
        log.info("NCCL fit: probe of %s", k)
        probed = simulate_all(repo, on({**start, k: start[k] + PROBE_STEP}), fitted_pairs)
        for p in points:
            shift = probed[(p.sweep, p.size)] - p.base
            assert p.step_slopes is not None
            if abs(shift) > PROBE_STEP / 4:
                p.step_slopes[k] = shift / PROBE_STEP
    for k in eff_keys:
        log.info("NCCL fit: probe of %s", k)
        lowered = start[k] * PROBE_FACTOR
        probed = simulate_all(repo, on({**start, k: lowered}), fitted_pairs)
        for p in points:
            delta = probed[(p.sweep, p.size)] - p.base
            assert p.efficiency_slopes is not None
            if abs(delta) > SENSITIVE * p.base:
                p.efficiency_slopes[k] = delta / (1 / lowered - 1 / start[k])
    used_lat = [k for k in lat_keys if any(p.latency_key == k for p in points)]
    used_lat += [k for k in stp_keys if any(k in (p.step_slopes or {}) for p in points)]
    used_eff = [k for k in eff_keys if any(k in (p.efficiency_slopes or {}) for p in points)]
    keys = dict(start)
    rounds: list[dict] = [{"keys": dict(keys), "score": score(points, base), "targets": targets(points, base)}]
    times = base
    for _ in range(1 + ROUNDS):
        trial = _solve(points, times, keys, used_lat, used_eff, start)
        checked = simulate_all(repo, on(trial), fitted_pairs)
        error = score(points, checked)
        log.info("NCCL fit: solved keys score %.3f", error)
        rounds.append({"keys": dict(trial), "score": error, "targets": targets(points, checked)})
        if error >= rounds[-2]["score"]:
            break
        keys, times = trial, checked
    best = min(rounds, key=lambda r: r["score"])
    # the linear programme's figures bound the targets' from above: the last steps are taken on
    # the targets' own figures, simulated, one efficiency at a time
    refined = dict(best["keys"])
    now = best["targets"]
    for k in used_eff:
        for factor in REFINE:
            trial = {**refined, k: round(min(1.0, refined[k] * factor), 4)}
            if trial == refined:
                continue
            found = targets(points, simulate_all(repo, on(trial), fitted_pairs))
            rounds.append({"keys": dict(trial), "targets": found, "refining": k})
            if found < now:
                refined, now = trial, found
    changed = {k: refined[k] for k in used_lat + used_eff}
    overrides.update(changed)
    return {
        "method": (
            "simulator in the loop: probes of each key, a linear programme on bounds of the targets, "
            "refining steps on the targets (orrery/calibration/nccl.py)"
        ),
        "fitted": changed,
        "left": {k: start[k] for k in all_keys(m) if k not in changed},
        "rounds": rounds,
        "choices": {f"{p.sweep} @ {p.size}": p.latency_key.removeprefix("nccl.base_latency_") or "?" for p in points},
    }


def _solve(
    points: list[Point],
    times: dict[tuple[str, int], float],
    keys: dict[str, float],
    used_lat: list[str],
    used_eff: list[str],
    start: dict[str, float] | None = None,
) -> dict[str, float]:
    """The keys minimising `score`, the time of each point linear in the latencies and the inverse
    efficiencies around `keys` (where `times` were simulated), with the probes' slopes: a linear
    programme (the tail's mean as Rockafellar and Uryasev's CVaR: t + sum max(0, e_i - t) / ((1 - q) n)),
    plus STEP_TIE times how far each step latency moves from its value in `start` (NCCL's; `keys`
    without it)."""
    from scipy.optimize import linprog

    n_var = len(used_lat) + len(used_eff)
    n = len(points)
    names = sorted({p.sweep for p in points})
    members = {name: [i for i, p in enumerate(points) if p.sweep == name] for name in names}
    # variables: each latency's change, each efficiency's new inverse, then |error| e_i per point,
    # the tail's threshold t_s per sweep, and each point's excess u_i over its sweep's threshold,
    # the worst sweep's score w, and last each step latency's distance d_k from its start
    z0, t0, u0 = n_var, n_var + n, n_var + n + len(names)
    worst = u0 + n
    steps = [j for j, k in enumerate(used_lat) if k.startswith("nccl.step_latency_")]
    width = worst + 1 + len(steps)
    cost = np.zeros(width)
    cost[worst] = 1.0
    a_ub, b_ub = [], []
    for d, j in enumerate(steps):
        k = used_lat[j]
        # |keys[k] + x_j - start[k]| <= d_k, at STEP_TIE per second
        moved = keys[k] - (start or keys)[k]
        cost[worst + 1 + d] = STEP_TIE
        for sign in (1.0, -1.0):
            row = np.zeros(width)
            row[j], row[worst + 1 + d] = sign, -1.0
            a_ub.append(row)
            b_ub.append(-sign * moved)
    for s, name in enumerate(names):
        size = len(members[name])
        # this sweep's mean |error| / MEDIAN_TOLERANCE and tail mean / P95_TOLERANCE, each <= w
        mean, tail = np.zeros(width), np.zeros(width)
        tail[t0 + s] = 1 / sweeps.P95_TOLERANCE
        for i in members[name]:
            mean[z0 + i] = 1 / (size * sweeps.MEDIAN_TOLERANCE)
            tail[u0 + i] = 1 / ((1 - TAIL) * size * sweeps.P95_TOLERANCE)
        for bound in (mean, tail):
            cost += TIE * bound / (2 * len(names))
            bound[worst] = -1
            a_ub.append(bound)
            b_ub.append(0.0)
    for i, p in enumerate(points):
        row = np.zeros(width)
        for k, slope in p.latency_slopes().items():
            if k in used_lat:
                row[used_lat.index(k)] = slope
        offset = times[(p.sweep, p.size)] - p.measured
        for j, k in enumerate(used_eff):
            slope = (p.efficiency_slopes or {}).get(k, 0.0)
            row[len(used_lat) + j] = slope
            offset -= slope / keys[k]
        row, offset = row / p.measured, offset / p.measured
        # (t_i - m_i) / m_i = row . x + offset;  |that| <= e_i;  e_i - t_s <= u_i
        z = np.zeros(width)
        z[z0 + i] = 1
        a_ub += [row - z, -row - z]
        b_ub += [-offset, offset]
        tail = np.zeros(width)
        tail[z0 + i], tail[t0 + names.index(p.sweep)], tail[u0 + i] = 1, -1, -1
        a_ub.append(tail)
        b_ub.append(0.0)
    bounds: list[tuple[float, float | None]] = [(-keys[k], LATENCY_BOUND - keys[k]) for k in used_lat]
    bounds += [(1.0, 1 / EFFICIENCY_FLOOR) for _ in used_eff]
    bounds += [(0.0, None)] * (width - n_var)
    solved = linprog(cost, A_ub=np.array(a_ub), b_ub=np.array(b_ub), bounds=bounds, method="highs")
    if not solved.success:
        raise RuntimeError(f"the NCCL fit's linear programme failed: {solved.message}")
    x = solved.x
    out = dict(keys)
    for j, k in enumerate(used_lat):
        out[k] = round(max(float(keys[k] + x[j]), 0.0), 9)  # to the nanosecond: the fit is not finer
    for j, k in enumerate(used_eff):
        out[k] = round(min(1.0, 1 / float(x[len(used_lat) + j])), 4)
    assert all(math.isfinite(v) for v in out.values())
    return out
