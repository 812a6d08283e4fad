"""Reports of validation and calibration: text, plots, validation.json.

``validation_report`` is what ``orrery validate`` prints (per size and per sweep), ``plot`` a
sweep's measured and simulated curves (a matplotlib Figure), ``write_validation`` the plots and
``validation.json``; ``calibration_report`` is a calibration's report.txt: its fits, the
simulator-in-the-loop trials, its overrides and the closed loop, per sweep and per term.

Validations of several machines (and variants of them: as shipped, with a calibration) side
by side: ``error_points`` lines every measured size up as a pandas table with the term of the
simulation it judges, ``term_table`` gives each term's median, 95th percentile and maximum
|error| per machine (a term with no measurement for a machine is a row saying so), and
``sweep_figures`` a figure per sweep with each variant's simulated curve.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError
from .fit import NO_SIZE_TERM, OUTLIER
from .merge import toml_value
from .sweeps import MEDIAN_TOLERANCE, P95_TOLERANCE, sweeps_for
from .validate import SweepResult, percentile

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure


def validation_report(results: list[SweepResult]) -> str:
    lines = []
    for r in results:
        lines.append(f"== {r.name} [{r.unit}]" + (f"  ({r.note})" if r.note else ""))
        lines.append(f"{'size (B)':>12} {'measured':>12} {'simulated':>12} {'error':>9}")
        for size, meas, sim, err in zip(r.sizes, r.measured, r.simulated, r.errors):
            lines.append(f"{size:>12} {meas:>12.4g} {sim:>12.4g} {100 * err:>8.1f}%")
        lines.append(
            f"   |error|: median {100 * r.median_abs_error:.1f}%, 95th percentile "
            f"{100 * r.p95_abs_error:.1f}%, max {100 * r.max_abs_error:.1f}%"
        )
    lines.append("")
    lines.append(f"{'sweep':<64} {'median':>8} {'p95':>8} {'max':>8}")
    for r in results:
        lines.append(
            f"{r.name:<64} {100 * r.median_abs_error:>7.1f}% {100 * r.p95_abs_error:>7.1f}% "
            f"{100 * r.max_abs_error:>7.1f}%"
        )
    return "\n".join(lines)


def plot(result: SweepResult):
    """Measured and simulated curves over message size, and the relative error: a matplotlib Figure."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 6))
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    top.plot(result.sizes, result.measured, "o-", label="measured")
    top.plot(result.sizes, result.simulated, "s--", label="simulated (Orrery)")
    top.set_xscale("log", base=2)
    top.set_yscale("log")
    top.set_ylabel(result.unit)
    top.set_title(result.name, fontsize=9)
    top.legend()
    bottom.plot(result.sizes, [100 * e for e in result.errors], "d-", color="tab:red")
    bottom.axhline(0, color="grey", linewidth=0.8)
    bottom.set_xlabel("size (bytes)")
    bottom.set_ylabel("error (%)")
    fig.tight_layout()
    return fig


def write_validation(results: list[SweepResult], machine_name: str, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "validation.json").write_text(
        json.dumps({"machine": machine_name, "sweeps": [asdict(r) for r in results]}, indent=1) + "\n"
    )
    paths = []
    for i, r in enumerate(results):
        path = out / f"sweep{i}.png"
        plot(r).savefig(path, dpi=90)
        paths.append(path)
    return paths


TERMS = {
    "copy_bandwidth": "copies",
    "latency": "point-to-point",
    "bandwidth": "point-to-point",
    "bibw": "point-to-point",
    "collective_latency": "collectives",
    "api_time": "API overheads",
    "nccl_time": "NCCL collectives",
}


def term_errors(closed_loop: list[SweepResult], kinds: list[tuple[str, str, str]]) -> dict:
    """Median and 95th percentile |error| over every point of each term (copies,
    point-to-point, collectives, API overheads): the simulation's terms, judged one by one."""
    points: dict[str, list[float]] = {}
    for r, kind in zip(closed_loop, kinds):
        points.setdefault(TERMS.get(kind[0], kind[0]), []).extend(abs(e) for e in r.errors)
    return {
        term: {"points": len(errs), "median_abs_error": float(np.median(errs)), "p95_abs_error": percentile(errs, 0.95)}
        for term, errs in points.items()
    }


def calibration_report(cal: dict, closed_loop: list[SweepResult], kinds: Sequence[tuple[str, str, str]] = ()) -> str:
    lines = [f"calibration of {cal['machine']} from " + ", ".join(i["file"] for i in cal["inputs"])]
    for fit in cal["fits"]:
        segs = "; ".join(
            f"{s['size_from']}-{s['size_to']} B: {s['latency_s'] * 1e6:.3f} us"
            + (
                f" + size / {s['bandwidth_Bps'] / 1e9:.3f} GB/s"
                if s["bandwidth_Bps"] < NO_SIZE_TERM
                else " (no size term)"
            )
            for s in fit["segments"]
        )
        lines.append(
            f"  fit {fit['sweep']}: {segs} (residual median {100 * fit['median_rel_residual']:.1f}%, "
            f"max {100 * fit['max_rel_residual']:.1f}%)"
        )
        if fit.get("outliers"):
            lines.append(
                f"    left out of the fit, more than {100 * OUTLIER:.0f}% off it (compared below): "
                + ", ".join(f"{size} B" for size in fit["outliers"])
            )
    for which, scores in cal.get("eager_threshold_trials", {}).items():
        lines.append(
            f"  eager threshold, {which} buffers: mean of osu_bw and osu_bibw (median + 95th percentile "
            "|error|) per candidate: " + ", ".join(f"{k} B {100 * v:.1f}%" for k, v in scores.items())
        )
    if cal.get("collective_selector_trials"):
        lines.append(
            "  collective algorithms: median |error| of the collective sweeps per MPI library's choice: "
            + ", ".join(f"{k} {100 * v:.1f}%" for k, v in cal["collective_selector_trials"].items())
        )
        lines.append(
            "  ... and what a correction could not remove (simulated slower than measured; median + 95th "
            "percentile): "
            + ", ".join(f"{k} {100 * v:.1f}%" for k, v in cal.get("collective_selector_uncorrectable", {}).items())
            + f"; chosen: {cal['overrides'].get('mpi.collective_selector')} (the least uncorrectable error, "
            "then the least correction)"
        )
    for name, before in cal.get("collectives_before_correction", {}).items():
        lines.append(
            f"  collective correction for {name}: before it, median |error| "
            f"{100 * before['median_abs_error']:.1f}%, 95th percentile {100 * before['p95_abs_error']:.1f}% "
            "(the point-to-point model alone)"
        )
    for key, form in cal.get("collective_correction_steps", {}).items():
        law = {
            "constant": "the same at every rank count",
            "log2": f"x ceil(log2 P) / {math.ceil(math.log2(form['ranks']))} on P ranks",
            "linear": f"x (P - 1) / {form['ranks'] - 1} on P ranks",
        }[form["steps"]]
        lines.append(
            f"  {key}: the extra time per size range measured on {form['ranks']} ranks ({form['fitted_on']}), "
            f"steps = {form['steps']}: {law}; "
            + (
                "trials on the sweeps' rank counts "
                + ", ".join(map(str, form["rank_counts"]))
                + " (median + 95th percentile |error|): "
                + ", ".join(f"{k} {100 * v:.1f}%" for k, v in form["trials"].items())
                if form["trials"]
                else "one rank count measured: the form is the algorithms' model (a step per peer for alltoall, "
                "allgather, gather, scatter; ceil(log2 P) for the others), checked there by the closed loop"
            )
        )
    if cal.get("nccl_fit"):
        lines += nccl_fit_lines(cal["nccl_fit"])
    for item in cal.get("not_fitted", []):
        lines.append(f"  not fitted: {item}")
    lines.append("overrides:")
    lines += [f"  {k} = {toml_value(v)}" for k, v in cal["overrides"].items()]
    lines.append("closed loop (microbenchmarks on the calibrated machine vs measured):")
    lines.append(validation_report(closed_loop))
    if kinds:
        lines.append("per term (every point of its sweeps):")
        for term, t in term_errors(closed_loop, list(kinds)).items():
            lines.append(
                f"  {term:<16} {t['points']:>4} points: median {100 * t['median_abs_error']:.1f}%, "
                f"95th percentile {100 * t['p95_abs_error']:.1f}%"
            )
    for r in closed_loop:
        if r.median_abs_error > MEDIAN_TOLERANCE or r.p95_abs_error > P95_TOLERANCE:
            lines.append(
                f"NOT MATCHED: {r.name}: median {100 * r.median_abs_error:.1f}% "
                f"(tolerance {100 * MEDIAN_TOLERANCE:.0f}%), 95th percentile {100 * r.p95_abs_error:.1f}% "
                f"(tolerance {100 * P95_TOLERANCE:.0f}%)" + (f": {r.note}" if r.note else "")
            )
    return "\n".join(lines)


def nccl_fit_lines(found: dict) -> list[str]:
    """What orrery.calibration.nccl.fit found: per fitted sweep the algorithm and protocol each
    range of sizes ran with (from the latency probe), each round's mean |error|, the keys fitted
    and those no fitted sweep depends on."""
    lines = [f"  NCCL keys, {found['method']}:"]
    by_sweep: dict[str, list[tuple[int, str]]] = {}
    for where, choice in found["choices"].items():
        sweep, size = where.rsplit(" @ ", 1)
        by_sweep.setdefault(sweep, []).append((int(size), choice))
    for sweep, sizes in by_sweep.items():
        runs: list[list] = []
        for size, choice in sorted(sizes):
            if runs and runs[-1][2] == choice:
                runs[-1][1] = size
            else:
                runs.append([size, size, choice])
        lines.append(f"    {sweep}: " + ", ".join(f"{a}-{b} B {c}" if a != b else f"{a} B {c}" for a, b, c in runs))
    lines.append(
        "    score (the worst of each fitted sweep's mean |error| / 5 % and mean of its worst 10 % / 15 %; 1 or less: "
        "within the targets) per round "
        "(start, then each solve): " + ", ".join(f"{r['score']:.3f}" for r in found["rounds"] if "score" in r)
    )
    lines.append(
        "    the targets' own figures (the worst of each fitted sweep's median / 5 % and 95th percentile / "
        "15 %) per round, then per refining step: "
        + ", ".join(
            f"{r['targets']:.3f}" + (f" ({r['refining']} = {r['keys'][r['refining']]})" if "refining" in r else "")
            for r in found["rounds"]
        )
    )
    lines.append("    fitted: " + ", ".join(f"{k} = {toml_value(v)}" for k, v in found["fitted"].items()))
    if found["left"]:
        lines.append(
            "    left at NCCL's constants (no fitted sweep depends on them, or could): "
            + ", ".join(f"{k} = {toml_value(v)}" for k, v in found["left"].items())
        )
    return lines


#: The term of the simulation a sweep judges, by its metric: finer than TERMS (point-to-point
#: latency and bandwidth apart), for validations of several machines side by side.
TERM_OF_METRIC = {
    "copy_bandwidth": "copies",
    "latency": "point-to-point latency",
    "bandwidth": "point-to-point bandwidth",
    "bibw": "point-to-point bandwidth",
    "collective_latency": "collectives",
    "api_time": "API overheads",
}
#: Every term, in the order the tables give them.
TERM_NAMES = tuple(dict.fromkeys(TERM_OF_METRIC.values()))
#: term_table's figures of a term, none where no sweep measures it
TERM_FIGURES = ("median_abs_error", "p95_abs_error", "max_abs_error", "worst_sweep", "worst_size", "worst_error")
POINT_COLUMNS = ("variant", "machine", "term", "sweep", "fit_input", "unit", "size", "measured", "simulated", "error")


def error_points(
    validations: Mapping[str, Mapping[str, Sequence[SweepResult]]], sweep_sets: Mapping[str, str] = {}
) -> pd.DataFrame:
    """Every measured size of validations (orrery.calibration.validate.validate's results) as
    one table. `validations`: variant (e.g. "as shipped", "calibrated") -> built-in machine ->
    its sweeps' results; `sweep_sets`: machine -> the set of sweeps its validations ran
    (validate's `sweep_set`; default the machine's default set), whose catalogue entries give
    each sweep's term and whether it is fitted (a sweep may be fitted in one set and only
    compared in another). Columns: variant, machine, term (TERM_OF_METRIC), sweep, fit_input
    (whether `orrery calibrate` fits the sweep, or only compares it), unit, size, measured,
    simulated, error ((simulated - measured) / measured, as validate computes it); rows in the
    mappings' and the sweeps' order."""
    import pandas as pd

    rows = []
    for variant, machines in validations.items():
        for machine, results in machines.items():
            known = {s.name: s for s in sweeps_for(machine, sweep_sets.get(machine))}
            for r in results:
                if r.name not in known:
                    raise InputError(
                        "error_points",
                        "sweep",
                        r.name,
                        f"a sweep of {machine}'s {sweep_sets.get(machine, 'default')} set (orrery validate's)",
                    )
                sweep = known[r.name]
                term = TERM_OF_METRIC.get(sweep.kind[0], sweep.kind[0])
                for size, meas, sim, err in zip(r.sizes, r.measured, r.simulated, r.errors):
                    rows.append((variant, machine, term, r.name, sweep.fit, r.unit, size, meas, sim, err))
    return pd.DataFrame(rows, columns=list(POINT_COLUMNS))


def term_table(points: pd.DataFrame) -> pd.DataFrame:
    """Per variant, machine and term (every one of TERM_NAMES) of `points` (error_points): how
    many sweeps and points judge it, the median, 95th percentile (validate.percentile) and
    maximum |error| over all of them, and its worst point (its sweep, size and signed error). A
    term no sweep of the machine measures is a row of 0 sweeps and points without figures, so
    that a table of terms says what was not measured rather than leaving it out."""
    import pandas as pd

    rows = []
    for (variant, machine), group in points.groupby(["variant", "machine"], sort=False):
        for term in TERM_NAMES:
            these = group[group["term"] == term]
            errors = [abs(e) for e in these["error"]]
            if not errors:
                rows.append((variant, machine, term, 0, 0, *([None] * len(TERM_FIGURES))))
                continue
            worst = these.iloc[max(range(len(errors)), key=errors.__getitem__)]
            rows.append(
                (
                    variant,
                    machine,
                    term,
                    these["sweep"].nunique(),
                    len(errors),
                    float(np.median(errors)),
                    percentile(errors, 0.95),
                    max(errors),
                    worst["sweep"],
                    int(worst["size"]),
                    float(worst["error"]),
                )
            )
    columns = ["variant", "machine", "term", "sweeps", "points", *TERM_FIGURES]
    table = pd.DataFrame(rows, columns=columns)
    return table.astype(
        dict.fromkeys(("median_abs_error", "p95_abs_error", "max_abs_error", "worst_error"), "Float64")
        | {"worst_size": "Int64"}
    )


def sweep_figures(validations: Mapping[str, Mapping[str, Sequence[SweepResult]]], machine: str) -> list[Figure]:
    """A figure per sweep of `machine` (validations as error_points takes them), in its
    variants' order of sweeps: its measured curve and each variant's simulated one (top),
    each variant's relative error per size (bottom). Every variant that validated the
    machine must have compared the same sweeps at the same sizes against the same measurements."""
    from matplotlib.figure import Figure

    runs = {variant: list(machines[machine]) for variant, machines in validations.items() if machine in machines}
    if not runs:
        known = sorted({m for machines in validations.values() for m in machines})
        raise InputError("sweep_figures", "machine", machine, f"a machine of the validations: {', '.join(known)}")
    first = next(iter(runs.values()))
    figures = []
    for i, ref in enumerate(first):
        same = [rs[i] for rs in runs.values() if len(rs) > i]
        if len(same) != len(runs) or any(
            (r.name, r.sizes, r.measured) != (ref.name, ref.sizes, ref.measured) for r in same
        ):
            raise InputError("sweep_figures", "validations", machine, f"the same sweeps of {machine} in every variant")
        fig = Figure(figsize=(7, 5.5), layout="constrained")
        top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [2, 1]})
        top.plot(ref.sizes, ref.measured, "o-", color="black", label="measured")
        for k, (variant, r) in enumerate(zip(runs, same)):
            colour = f"C{k + 1}"
            top.plot(r.sizes, r.simulated, "s--", color=colour, ms=4, label=f"simulated, {variant}")
            bottom.plot(r.sizes, [100 * e for e in r.errors], "d-", color=colour, ms=4)
        top.set_xscale("log", base=2)
        top.set_yscale("log")
        top.set_ylabel(ref.unit)
        top.set_title(f"{machine}: {ref.name}", fontsize=9, wrap=True)
        top.legend(fontsize="small")
        bottom.axhline(0, color="grey", linewidth=0.8)
        bottom.set_xlabel("size (bytes)")
        bottom.set_ylabel("error (%)")
        figures.append(fig)
    return figures
