"""Calibration: fit a machine's cost parameters on measured sweeps, then check the fit.

``orrery calibrate --machine NAME`` reads the measured sweeps that
``orrery validate`` knows for the machine (the sweep catalogue, sweeps.py, over
calibration/data/measured/, unchanged), or the files given with ``--input``
(measurement CSV, OSU, bandwidthTest, nccl-tests, BabelStream output:
measurements.py), fits each with a piecewise model of the time per transfer
(fit.py),

    t(size) = latency_k + size / bandwidth_k   on segment k,

whose breakpoint (eager -> rendezvous, copy-engine regimes, ...) is found from
the data, turns the fits into machine parameters (derive.py), makes the choices
a fit cannot with the simulator in the loop (search.py), and writes
a versioned calibration file with its provenance: input files and their
SHA-256, fitted segments, residuals, overrides. It ends with the closed
loop: the microbenchmarks run again on the calibrated machine and every
sweep's error is reported, loudly where it misses the tolerance (``write``,
report.py).
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
Calibration files are read back and merged into a machine by merge.py.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from .. import progress
from ..errors import InputError
from . import derive, fit, measurements, merge, nccl, report, search, sweeps, validate

log = logging.getLogger(__name__)
FITTED_METRICS = ("latency", "bandwidth", "bibw", "copy_bandwidth")  # the sweeps fitted latency + size / bandwidth


def series(
    machine_name: str,
    repo: Path | None,
    inputs: list[Path],
    p2p_path: str | None,
    sweep_set: str | None = None,
    collective_layout: tuple[int, int] | None = None,
):
    """(sweep, points in the sweep's unit, files) from input files, or the built-in sweeps."""
    if inputs:
        pairs, skipped = [], []
        for f in inputs:
            for series in measurements.load(f):
                if series.metric in ("latency", "bandwidth", "bibw") and not series.path:
                    if p2p_path is None:
                        raise InputError(
                            str(f),
                            None,
                            series.benchmark,
                            "--p2p-path intra-node or inter-node: OSU output does not say "
                            "whether its two ranks shared a node",
                        )
                    series.path = p2p_path
                found = sweeps.sweep_for(series, collective_layout)
                if (
                    found
                    and found[0].fit
                    and series.metric in FITTED_METRICS
                    and not series.one_size
                    and len(series.sizes) < fit.FEW_POINTS
                ):
                    raise InputError(
                        f"{f}:{series.lines[-1]}",
                        "size",
                        f"{len(series.sizes)} size(s) of {series.benchmark} ({series.metric})",
                        f"at least {fit.FEW_POINTS} sizes for a fit (latency + size / bandwidth): the series ends here",
                    )
                if found:
                    pairs.append(found)
                elif series.metric == "collective_latency" and measurements.collective_of(series.benchmark) is None:
                    skipped.append(
                        f"{series.benchmark} ({f}): not a blocking MPI collective calibration/bench/"
                        "coll_sweep runs (nccl-tests' are NCCL's; OSU's non-blocking and v-variants have "
                        "no counterpart there): not fitted"
                    )
                elif series.metric == "kernel_bandwidth":
                    skipped.append(
                        f"{series.benchmark} ({f}): a streaming kernel's memory bandwidth; kernel "
                        "times come from cost files (--kernels timing tables, orrery fit): not fitted"
                    )
                else:
                    skipped.append(f"{series.benchmark} {series.metric} {series.path} ({f})")
        return pairs, [Path(f) for f in inputs], skipped
    if sweep_set is None and machine_name not in sweeps.catalogue():
        raise InputError(
            "--machine",
            None,
            machine_name,
            f"a machine with measured sweeps ({', '.join(sweeps.machines_with_defaults())}), or --input files",
        )
    pairs = [(sw, sweeps.measured_points(sw, repo)) for sw in sweeps.sweeps_for(machine_name, sweep_set)]
    files = sorted({sweeps.measured_dir(repo) / sw.file for sw, _ in pairs})
    return pairs, files, []


def calibrate(
    machine_name: str,
    repo: Path | None,
    inputs: Sequence[Path] = (),
    p2p_path: str | None = None,
    sweep_set: str | None = None,
    collective_layout: tuple[int, int] | None = None,
) -> tuple[dict, list]:
    """The calibration file's content, and the (sweep, points) pairs the closed loop checks."""
    sweeps.check_sources(repo)
    stack: dict[str, object] = sweeps.set_description(machine_name, sweep_set)
    m = merge.candidate(machine_name, stack)
    pairs, files, skipped = series(machine_name, repo, list(inputs), p2p_path, sweep_set, collective_layout)
    if not pairs:
        raise InputError(
            ", ".join(map(str, inputs)),
            None,
            skipped[0] + (f" (and {len(skipped) - 1} more not fitted)" if len(skipped) > 1 else ""),
            "a sweep calibration/bench can reproduce (OSU point-to-point or collective, copy sweeps, "
            "the harness's CSV): nothing to fit or compare",
        )
    fits = []
    collectives = []
    nccl_sweeps = []  # fitted by nccl.fit, after the MPI choices
    api: dict[str, float] = {}  # measured host costs of API calls: the machine's overheads, as they are
    for sweep, points in pairs:
        if not sweep.fit:
            continue
        if sweep.kind[0] == "api_time":
            ((_, value),) = points  # one figure
            api[f"overheads.{sweep.kind[1]}"] = sweeps.to_si(sweep.unit, value)
            continue
        if sweep.kind[0] == "collective_latency":
            collectives.append((sweep, points))
            continue
        if sweep.kind[0] == "nccl_time":
            nccl_sweeps.append((sweep, points))
            continue
        if len(points) < fit.FEW_POINTS:
            skipped.append(f"{sweep.name}: {len(points)} size(s), too few for a fit: compared in the closed loop")
            continue
        sizes, times = sweeps.seconds_per_transfer(sweep.unit, points, sweep.kind[0])
        try:
            segments, outliers = fit.fit_sweep(sizes, times)
        except InputError as e:
            raise InputError(sweep.name, None, e.value, e.expected) from None
        residuals = [abs(fit.predict(segments, s) - t) / t for s, t in zip(sizes, times) if s not in outliers]
        fits.append(
            (sweep.kind, fit.Fit(sweep.name, segments, float(np.median(residuals)), float(max(residuals)), outliers))
        )
        log.info(
            "fitted %s: %d segment(s), residual median %.2f%%, max %.2f%%",
            sweep.name,
            len(segments),
            100 * fits[-1][1].median_rel_residual,
            100 * fits[-1][1].max_rel_residual,
        )

    def shown(f: Path) -> str:
        """A file as the calibration names it: the shared measurements by their place in the
        repository (installed or not), others relative to --repo or the current folder."""
        if f.resolve().parent == sweeps.measured_dir(repo).resolve():
            return f"{sweeps.MEASURED}/{f.name}"
        try:
            return str(f.resolve().relative_to((repo or Path.cwd()).resolve()))
        except ValueError:
            return str(f)

    if api:  # the copy models' latencies exclude the (measured) host overheads
        m = merge.candidate(machine_name, {**stack, **api})
    windows: dict[str, derive.Window] = {}
    overrides = {**stack, **api, **derive.overrides(m, fits, windows)}
    trials, uncorrectable, uncorrected = {}, {}, {}
    # the choices the fits cannot make, each simulating candidate machines on the sweeps
    with progress.counting(total=3 if collectives else 2, desc="calibrate", unit="choice") as choices:
        choices.set_postfix_str("eager thresholds")
        log.info("choosing the eager -> rendezvous thresholds, simulator in the loop")
        eager_trials = search.pick_eager_threshold(machine_name, m, repo, pairs, windows, overrides)
        choices.update()
        choices.set_postfix_str("gaps")
        log.info("choosing the gaps between a rank's messages, simulator in the loop")
        gap_trials = search.pick_gaps(machine_name, m, repo, pairs, fits, overrides)
        choices.update()
        if collectives:
            choices.set_postfix_str("collective algorithms")
            log.info("choosing the MPI library's collective algorithms on %d sweeps", len(collectives))
            trials, uncorrectable, chosen, results = search.pick_collective_selector(
                machine_name, repo, collectives, overrides
            )
            choices.update()
    correction_steps: dict[str, dict] = {}
    if collectives:
        log.info("collective algorithms: %s", chosen)
        overrides["mpi.collective_selector"] = chosen
        # where the point-to-point model with the best algorithms still misses a collective: one
        # correction per collective and kind of buffers, scaled with the rank count
        groups: dict[str, list] = {}
        for (sweep, points), result in zip(collectives, results[chosen]):
            which = "device" if sweep.kind[2] == "D" else "host"
            groups.setdefault(f"collectives.{sweep.kind[1]}_{which}", []).append((sweep, points, result))
        for key, group in groups.items():
            missed = [
                (sweep, result)
                for sweep, _, result in group
                if result.median_abs_error > sweeps.MEDIAN_TOLERANCE or result.p95_abs_error > sweeps.P95_TOLERANCE
            ]
            if not missed:
                continue
            for sweep, result in missed:
                uncorrected[sweep.name] = {
                    "median_abs_error": result.median_abs_error,
                    "p95_abs_error": result.p95_abs_error,
                }
            correction_steps[key] = search.pick_correction_steps(machine_name, repo, key, group, overrides)
    nccl_fit = {}
    if nccl_sweeps:
        log.info("fitting NCCL's keys on %d sweeps, simulator in the loop", len(nccl_sweeps))
        nccl_fit = nccl.fit(machine_name, repo, nccl_sweeps, overrides)
    cal = {
        "orrery_calibration": merge.FORMAT_VERSION,
        "machine": m.name,
        "command": f"orrery calibrate --machine {machine_name}"
        + (f" --sweeps {sweep_set}" if sweep_set else "")
        + "".join(f" --input {shown(f)}" for f in inputs)
        + (f" --p2p-path {p2p_path}" if inputs and p2p_path else "")
        + (
            f" --collective-layout {collective_layout[0]}x{collective_layout[1]}"
            if inputs and collective_layout
            else ""
        ),
        "inputs": [{"file": shown(f), "sha256": hashlib.sha256(f.read_bytes()).hexdigest()} for f in files],
        "fits": [asdict(f) for _, f in fits],
        "not_fitted": skipped,
        "eager_threshold_trials": eager_trials,
        "gap_trials": gap_trials,
        "collective_selector_trials": trials,
        "collective_selector_uncorrectable": uncorrectable,
        "collectives_before_correction": uncorrected,
        **({"collective_correction_steps": correction_steps} if correction_steps else {}),
        **({"nccl_fit": nccl_fit} if nccl_fit else {}),
        "overrides": overrides,
    }
    return cal, pairs


def closed_loop(machine_name: str, cal: dict, pairs, repo: Path | None = None) -> list[validate.SweepResult]:
    """The closed loop: every sweep of the calibration simulated again on the calibrated machine."""
    calibrated = merge.candidate(machine_name, cal["overrides"])
    # NCCL sweeps together: one run of nccl_sweep gives both placements
    ncclruns = [(sw, pts) for sw, pts in pairs if sw.kind[0] == "nccl_time"]
    nccl_times = nccl.simulate_all(repo, calibrated, ncclruns) if ncclruns else {}
    results = []
    for sweep, points in progress.bar(pairs, desc="closed loop", unit="sweep"):
        if sweep.kind[0] == "nccl_time":
            simulated = {s: sweeps.from_si(sweep.unit, nccl_times[(sweep.name, s)]) for s, _ in points}
            results.append(validate.result(sweep, points, simulated))
        else:
            results.append(validate.compare(repo, calibrated, sweep, points))
        log.info("closed loop, %s: %s", sweep.name, validate.errors_line(results[-1]))
    return results


def write(
    out: Path, machine_name: str, cal: dict, pairs, repo: Path | None = None, kernels: tuple[str, dict] | None = None
) -> str:
    """A calibration's files in `out`: calibration.json first, then the closed loop
    (closed-loop/: validation.json and its plots), report.txt and, with fitted `kernels`
    (fit.fit_kernels), costs.toml. Returns the report."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "calibration.json").write_text(json.dumps(cal, indent=1) + "\n")
    closed = closed_loop(machine_name, cal, pairs, repo)
    report.write_validation(closed, machine_name, out / "closed-loop")
    text = report.calibration_report(cal, closed, [sweep.kind for sweep, _ in pairs])
    if kernels:
        costs_text, fits = kernels
        (out / "costs.toml").write_text(costs_text)
        text += (
            "\nkernels (alpha + beta * threads), cost file in "
            + str(out / "costs.toml")
            + ":\n"
            + "\n".join(
                f"  {k}: alpha {f[0] * 1e6:.3f} us, beta {f[1] * 1e12:.4f} ps/thread, residual median {100 * f[2]:.2f}%, "
                f"max {100 * f[3]:.2f}%"
                for k, f in fits.items()
            )
        )
    (out / "report.txt").write_text(text + "\n")
    return text
