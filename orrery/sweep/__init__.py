"""Stage: sweeps. A program run over a grid (or a list) of layouts, program arguments, machine
overrides and machines; a table with one row per point and scaling figures.

``orrery sweep SPEC`` is :func:`run`::

    import orrery.sweep
    result = orrery.sweep.run("examples/jacobi/sweep.toml", out="orrery-sweep")
    result.table                # pandas, one row per point, in the spec's order
    result.completed            # every point completed

The parts: ``spec`` reads and expands the spec (TOML), ``execute`` runs the points (a local
pool or a Dask cluster) and resumes, ``table`` makes the table, ``plots`` the figures. The
format, the options and what resuming does: docs/sweeps.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from .execute import Outcome, Prepared
    from .spec import Sweep

# nothing is imported until it is used: a point's own process (worker.py) imports this package
__all__ = ["SweepResult", "clear", "load", "plan", "run"]


def load(spec: str | os.PathLike | Mapping[str, Any], folder: str | os.PathLike = ".") -> Sweep:
    """A sweep spec, checked, and its points (spec.py); InputError(s) naming the spec, key and
    value. `spec` is a TOML file, or the mapping such a file reads as (a notebook's own spec),
    whose paths are relative to `folder`."""
    from . import spec as specs

    if isinstance(spec, Mapping):
        return specs.from_mapping(spec, Path(folder))
    return specs.load(Path(spec))


@dataclass
class SweepResult:
    """What a sweep gave: its table (table.py), each point's outcome, the files written."""

    sweep: Sweep
    table: pd.DataFrame
    outcomes: list[Outcome]
    files: list[Path]

    @property
    def completed(self) -> bool:
        return all(o.status == "completed" for o in self.outcomes)


def clear(out: str | os.PathLike) -> None:
    """Remove the table and figures of an earlier sweep from `out` (a sweep that is refused or
    interrupted leaves none looking current); the points' folders stay, to resume from."""
    from . import plots, table

    folder = Path(out)
    for name in (table.CSV, table.PARQUET):
        (folder / name).unlink(missing_ok=True)
        (folder / (name + ".part")).unlink(missing_ok=True)
    for name in plots.PLOTS:
        for ext in ("png", "svg"):
            (folder / "plots" / f"{name}.{ext}").unlink(missing_ok=True)


def plan(sweep: Sweep, out: str | os.PathLike) -> list[tuple[Prepared, str]]:
    """Each point and what a sweep into `out` would do with it: 'run', 'finished earlier'
    (its folder holds its results for the same inputs), or 'bad input' (not run)."""
    from . import execute

    prepared = execute.prepare(sweep, Path(out))
    return [
        (p, "bad input" if p.task is None else "finished earlier" if execute.finished(p) else "run") for p in prepared
    ]


def run(
    spec_or_path: Sweep | str | os.PathLike | Mapping[str, Any],
    out: str | os.PathLike = "orrery-sweep",
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    force: bool = False,
    retry_failed: bool = False,
    plots: bool = True,
    progress: bool | None = None,
) -> SweepResult:
    """Run every point of a sweep that is not finished in `out` (``force``: every point;
    ``retry_failed``: also those that finished without completing), on ``workers`` local
    processes at once (default: the CPUs this process may use) or on the Dask scheduler at
    ``scheduler``; write OUT/sweep.csv, OUT/sweep.parquet and (``plots``) OUT/plots/. A point
    that fails is recorded with its error; the others go on. ``progress``: a progress bar on
    stderr (default: when stderr is a terminal)."""
    from . import execute, table
    from . import plots as figures
    from .spec import Sweep

    sweep = spec_or_path if isinstance(spec_or_path, Sweep) else load(spec_or_path)  # a mapping: paths from "."
    folder = Path(out)
    client = execute.connect(scheduler) if scheduler else None
    try:
        clear(folder)
        prepared = execute.prepare(sweep, folder)
        outcomes = execute.execute(
            prepared, workers=workers, client=client, force=force, retry_failed=retry_failed, progress=progress
        )
    finally:
        if client is not None:
            client.close()
    frame = table.frame(sweep, prepared, outcomes)
    folder.mkdir(parents=True, exist_ok=True)
    files = table.write(frame, folder)
    if plots:
        files += figures.write(frame, folder / "plots")
    return SweepResult(sweep, frame, outcomes, files)
