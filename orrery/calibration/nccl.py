"""NCCL's machine keys ([nccl]) fitted on nccl-tests sweeps, simulator in the loop.

What is fitted: ``nccl.base_latency_<algo>_<proto>`` (what one NCCL call takes beyond its steps'
transfers, per algorithm and protocol), ``nccl.efficiency_<link>`` (the fraction of a route's
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
   k-th key: the shift of each size's time says which key (which algorithm and protocol NCCL
   ran that size with) it depends on, and how much (1 where the latency adds once per call);
3. efficiency probes: each efficiency key lowered by PROBE_FACTOR, one at a time: each size's
   time as ``a + b / efficiency``;
4. solve: the keys minimising the sum over the fit sweeps' points of |simulated - measured| /
   measured, with the time linear in each latency and each 1 / efficiency as the probes found
   (a linear programme: scipy's linprog), latencies 0 or more, efficiencies in (0, 1];
5. check: the solved keys simulated; the solve repeats from that base (the probes' slopes kept)
   while it lowers the mean |error|, at most ROUNDS times.

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
LATENCY_BOUND = 1e-3  # s: no base latency is fitted above this
EFFICIENCY_FLOOR = 0.05  # nor an efficiency below this
SENSITIVE = 0.002  # a probe that moves a time by less than this fraction: the time does not depend on it


def latency_keys(m: machines.Machine) -> list[str]:
    """The machine's base-latency keys (nccl.base_latency_<algo>_<proto>), in the schema's order."""
    return [f"nccl.{f}" for f in type(m.nccl).model_fields if f.startswith("base_latency_")]


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


def mean_abs_error(points: list[Point], times: dict[tuple[str, int], float]) -> float:
    return float(np.mean([abs(times[(p.sweep, p.size)] - p.measured) / p.measured for p in points]))


def fit(machine_name: str, repo: Path | None, pairs, overrides: dict) -> dict:
    """The [nccl] keys fitted on the NCCL sweeps of `pairs` marked fit, on the machine with
    `overrides` so far (updated with the fitted keys). Returns what the report shows: the
    probes' findings per size, each round's mean |error|, the keys fitted and those left."""
    fitted_pairs = [(sw, pts) for sw, pts in pairs if sw.fit and sw.kind[0] == "nccl_time"]
    validate.build_bench(repo, nccl=True)
    m = merge.candidate(machine_name, overrides)
    lat_keys = latency_keys(m)
    eff_keys = efficiency_keys(m, any(sw.nodes > 1 for sw, _ in fitted_pairs))
    start = {k: value(m, k) for k in all_keys(m)}
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
    used_eff = [k for k in eff_keys if any(k in (p.efficiency_slopes or {}) for p in points)]
    keys = dict(start)
    rounds: list[dict] = [{"keys": dict(keys), "mean_abs_error": mean_abs_error(points, base)}]
    times = base
    for _ in range(1 + ROUNDS):
        trial = _solve(points, times, keys, used_lat, used_eff)
        checked = simulate_all(repo, on(trial), fitted_pairs)
        error = mean_abs_error(points, checked)
        log.info("NCCL fit: solved keys give a mean |error| of %.2f%%", 100 * error)
        rounds.append({"keys": dict(trial), "mean_abs_error": error})
        if error >= rounds[-2]["mean_abs_error"]:
            break
        keys, times = trial, checked
    best = min(rounds, key=lambda r: r["mean_abs_error"])["keys"]
    changed = {k: best[k] for k in used_lat + used_eff}
    overrides.update(changed)
    return {
        "method": "simulator in the loop: probes of each key, then a weighted L1 solve (orrery/calibration/nccl.py)",
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
) -> dict[str, float]:
    """The keys minimising sum |t_i - m_i| / m_i, t_i linear in the latencies and the inverse
    efficiencies around `keys` (where `times` were simulated), with the probes' slopes."""
    from scipy.optimize import linprog

    n_var = len(used_lat) + len(used_eff)
    n = len(points)
    # variables: each latency's change, each efficiency's new inverse, then one bound z_i per point
    cost = np.concatenate([np.zeros(n_var), [1 / p.measured for p in points]])
    a_ub, b_ub = [], []
    for i, p in enumerate(points):
        row = np.zeros(n_var + n)
        if p.latency_key in used_lat:
            row[used_lat.index(p.latency_key)] = p.latency_slope
        offset = times[(p.sweep, p.size)] - p.measured
        for j, k in enumerate(used_eff):
            slope = (p.efficiency_slopes or {}).get(k, 0.0)
            row[len(used_lat) + j] = slope
            offset -= slope / keys[k]
        # t_i - m_i = row . x + offset;  |t_i - m_i| <= z_i
        z = np.zeros(n_var + n)
        z[n_var + i] = 1
        a_ub += [row - z, -row - z]
        b_ub += [-offset, offset]
    bounds: list[tuple[float, float | None]] = [(-keys[k], LATENCY_BOUND - keys[k]) for k in used_lat]
    bounds += [(1.0, 1 / EFFICIENCY_FLOOR) for _ in used_eff]
    bounds += [(0.0, None)] * n
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
