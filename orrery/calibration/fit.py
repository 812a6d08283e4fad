"""Piecewise fits of measured sweeps: the time per transfer as latency_k + size / bandwidth_k.

Each segment's breakpoint (eager -> rendezvous, copy-engine regimes, ...) is found from the data
(an exhaustive search over the sizes), least squares on the relative error; a lone point far off
the first fit is left out and the sweep refitted. Kernel timing tables are fitted the same way,
alpha + beta * threads (``fit_kernels``, ``orrery calibrate --kernels``).
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

import numpy as np
from scipy import optimize

from .. import schema
from ..errors import InputError
from . import measurements

FEW_POINTS = 3  # a sweep of an input file with fewer sizes is an error; nvbandwidth's one size is compared, not fitted
OUTLIER = 0.5  # a point this far (relative) from a sweep's fit is left out of it, and the sweep refitted
NO_SIZE_TERM = 1e20  # a fitted bandwidth (bytes/s) this high means the segment has no size term (fit_line)


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


def fit_line(sizes: np.ndarray, times: np.ndarray, after: float = 0.0) -> tuple[float, float, np.ndarray]:
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


_Piece: TypeAlias = tuple[int, int, float, float]  # first, end (indices into the sizes), a, c (fit_line)


def _best_partition(s: np.ndarray, t: np.ndarray, pieces: int, min_points: int) -> tuple[float, list[_Piece]]:
    """The split of the sweep into `pieces` runs of at least `min_points` sizes with the
    smallest RMS relative residual: (rms, [(first, end, a, c), ...])."""
    n = len(s)
    memo: dict[tuple[int, int], tuple[float, list[_Piece]]] = {}

    def best(start: int, k: int) -> tuple[float, list[_Piece]]:  # sum of squared residuals of s[start:] in k pieces
        if (start, k) in memo:
            return memo[start, k]
        result: tuple[float, list[_Piece]] = (np.inf, [])
        after = 0.0 if start == 0 else s[start - 1]  # the segment covers the sizes above the last one's
        if k == 1:
            if n - start >= min_points:
                a, c, r = fit_line(s[start:], t[start:], after)
                result = (float(np.sum(r**2)), [(start, n, a, c)])
        else:
            for end in range(start + min_points, n - min_points * (k - 1) + 1):
                a, c, r = fit_line(s[start:end], t[start:end], after)
                rest, pieces_after = best(end, k - 1)
                total = float(np.sum(r**2)) + rest
                if total < result[0]:
                    result = (total, [(start, end, a, c), *pieces_after])
        memo[start, k] = result
        return result

    sse, parts = best(0, pieces)
    return float(np.sqrt(sse / n)), parts


def fit_piecewise(
    sizes: list[int],
    times: list[float],
    min_points: int = FEW_POINTS,
    gain: float = 0.2,
    good_enough: float = 1e-3,
    max_segments: int = 4,
) -> list[Segment]:
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
    neighbours) are left out and the rest refitted. Only a few points are: where more than a
    quarter of the sweep is that far off, or fewer than FEW_POINTS would remain (a noisy sweep,
    e.g. one measured on a loaded machine, or a gap held to its floor at most sizes), the first
    fit stands on every point and the closed loop shows its error. Returns the segments and the
    sizes left out."""
    segments = fit_piecewise(sizes, times)
    outliers = [s for s, t in zip(sizes, times) if abs(predict(segments, s) - t) / t > OUTLIER]
    if not outliers or 4 * len(outliers) > len(sizes) or len(sizes) - len(outliers) < FEW_POINTS:
        return segments, []
    kept = [(s, t) for s, t in zip(sizes, times) if s not in outliers]
    segments = fit_piecewise([s for s, _ in kept], [t for _, t in kept])
    # the segments cover the whole sweep, left-out sizes included
    segments[0].size_from, segments[-1].size_to = sizes[0], sizes[-1]
    return segments, outliers


def predict(segments: list[Segment], size: int) -> float:
    seg = next((g for g in segments if size <= g.size_to), segments[-1])
    return seg.latency_s + size / seg.bandwidth_Bps


KERNEL_COLUMNS = ("kernel", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "time", "unit")


def _cells(row: dict) -> str:
    """A CSV row as it was written (DictReader puts a long row's extra cells in a list)."""
    cells = [c for v in row.values() for c in (v if isinstance(v, list) else [v]) if c is not None]
    return ",".join(cells)


def fit_kernels(path: str | Path) -> tuple[str, dict[str, tuple[float, float, float, float]]]:
    """A kernel cost file (TOML text) fitted on a timing table, and per kernel
    (alpha, beta, median and max relative residual). Each kernel needs rows at
    two launch geometries at least."""
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
            raise InputError(f"{p}:{line}", "row", _cells(row), "whole launch dimensions and a number") from None
        if threads <= 0 or not (math.isfinite(seconds) and seconds > 0):
            raise InputError(f"{p}:{line}", "row", _cells(row), "positive dimensions and time")
        rows.setdefault(row["kernel"], []).append((threads, seconds, line))
    if not rows:
        raise InputError(str(p), None, "a header without rows", "a kernel timing table with rows")
    fits = {}
    for kernel, points in rows.items():
        if len({t for t, _, _ in points}) < 2:
            raise InputError(
                f"{p}:{points[0][2]}",
                "kernel",
                kernel,
                "rows at two launch geometries at least, to fit alpha + beta * threads",
            )
        n = np.array([t for t, _, _ in points], float)
        t = np.array([s for _, s, _ in points])
        alpha, beta, res = fit_line(n, t)
        fits[kernel] = (alpha, beta, float(np.median(np.abs(res))), float(np.max(np.abs(res))))
    digest = hashlib.sha256(text.encode()).hexdigest()
    lines = [
        f"# Kernel costs fitted by `orrery calibrate --kernels` from {p.name} (sha256 {digest})",
        "# time = alpha + beta * threads launched (grid x block), least squares on relative error",
    ]
    for kernel, (alpha, beta, med, worst) in fits.items():
        lines += [
            "",
            f"# {len(rows[kernel])} rows; residual median {100 * med:.2f}%, max {100 * worst:.2f}%",
            f"[kernels.{json.dumps(kernel)}]",
            f"alpha = {alpha!r}",
            f"beta = {beta!r}",
        ]
    return "\n".join(lines) + "\n", fits
