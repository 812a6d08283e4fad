"""Orrery's Python API: run a program on a simulated machine and look at the results.

``simulate()`` is what ``orrery run`` does, as a function that returns a typed
:class:`~orrery.run.results.Results`; ``load()`` reads the results of an earlier run
back from its folder. Notebooks, sweeps and reports are built on these two::

    import orrery
    res = orrery.simulate("./jacobi", ["-niter", "10"], machine="h100-ib200", nodes=2)
    res.makespan_s                 # simulated seconds
    res.to_frame()                 # one row per rank (pandas)
    res.to_frame("kernels")        # one row per (rank, kernel)

Errors are Orrery's own types (:mod:`orrery.errors`): bad input raises
:class:`~orrery.errors.InputError` before anything runs; a program that fails
(exits early, aborts, crashes, deadlocks) raises :class:`RunFailed`, whose
``results`` say how and when, unless ``check=False``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import OrreryError

if TYPE_CHECKING:
    from .run.results import Results


class RunFailed(OrreryError):
    """The simulated program did not complete (results.json ``status`` is not ``completed``):
    ``results`` holds what the run did up to its end and ``results.failure`` what ended it."""

    def __init__(self, results: Results):
        self.results = results
        what = results.failure.message if results.failure else "no report"
        super().__init__(f"the run ended ({results.status}): {what}")


def _overrides(values: Mapping[str, object] | Sequence[str] | None) -> tuple[dict[str, object], list[str]]:
    """Machine overrides as machines.load takes them and as results.json records them."""
    from . import machines
    from .calibration import merge

    if values is None:
        return {}, []
    if isinstance(values, Mapping):
        return dict(values), [f"{k}={v if isinstance(v, str) else merge.toml_value(v)}" for k, v in values.items()]
    if isinstance(values, str):
        raise TypeError("set: a mapping of key -> value, or a list of 'KEY=VALUE' strings, not one string")
    texts = list(values)
    return machines.parse_overrides(texts), texts


def simulate(
    program: str | os.PathLike,
    args: Sequence[str] = (),
    *,
    machine: str | os.PathLike = "h100-ib200",
    nodes: int = 1,
    gpus_per_node: int | None = None,
    ranks_per_node: int | None = None,
    mode: str = "skeleton",
    costs: str | os.PathLike | None = None,
    calibration: str | os.PathLike | None = None,
    set: Mapping[str, object] | Sequence[str] | None = None,
    out: str | os.PathLike | None = None,
    strict: bool = False,
    d2h_fill: str | None = None,
    gpu_visibility: str | None = None,
    managed: str | None = None,
    sim_time_limit: float | str | None = None,
    wall_time_limit: float | str | None = None,
    fold_pinned: bool = True,
    trace: bool = False,
    trace_ranks: str | Sequence[int] | None = None,
    trace_window: str | Sequence[object] | None = None,
    trace_links: int | None = None,
    capture_output: bool = True,
    check: bool = True,
    iterations: int | None = None,
) -> Results:
    """Run ``program args...`` (built with Orrery's wrappers) on a simulated machine.

    ``machine`` is a built-in name or a description file; ``nodes``, ``gpus_per_node`` and
    ``ranks_per_node`` lay the job out (defaults: every GPU of a node, one rank per GPU);
    ``costs`` is a kernel cost file, ``calibration`` a file ``orrery calibrate`` wrote for the
    machine; ``set`` overrides machine parameters, as a mapping (``{"network.bandwidth":
    "400Gb/s"}``) or ``--set`` strings. ``out`` is the run's folder (results.json, the platform,
    the run description; default: a new temporary folder, ``Results.out``). The program's
    standard output is kept in ``Results.stdout`` unless ``capture_output=False`` lets it
    through. A program that does not complete raises :class:`RunFailed` unless ``check=False``.
    ``trace=True`` also writes a timeline trace, ``out``/trace.json, that ui.perfetto.dev opens
    (docs/trace.md), even for a run that fails; ``trace_ranks`` (``"0-3,8"`` or a list of ranks)
    and ``trace_window`` (``"1ms:2ms"``, or a (begin, end) pair of seconds or times with units,
    either None) keep it to some ranks and a window of simulated time, ``trace_links`` the number
    of links given a counter track; any of them implies ``trace``. ``iterations``: the
    program's iterations (as its own arguments say), which the terms of ``Results.terms`` are
    divided by for their per-iteration figures (docs/running.md, "The terms"). ``sim_time_limit``
    and ``wall_time_limit`` (seconds, or times with units: ``"2s"``, ``"30min"``) stop a run that
    passes that much simulated or wall-clock time, its status ``sim_time_limit`` or
    ``wall_time_limit`` (docs/running.md, "Limits"). The other options are
    ``orrery run``'s (docs/running.md)."""
    from . import machines
    from .calibration import merge
    from .machines import platform
    from .run import costs as cost_files
    from .run import limits, run_description
    from .run import trace as traces
    from .run.launch import RunOptions, run
    from .run.results import check_iterations

    check_iterations(iterations, "iterations")
    overrides, recorded = _overrides(set)
    cal = merge.read(os.fspath(calibration), machines.load(str(machine)).name) if calibration else None
    m = merge.machine(str(machine), cal, overrides)
    layout = platform.Layout.for_machine(m, nodes, gpus_per_node, ranks_per_node)
    traced = trace or any(v is not None for v in (trace_ranks, trace_window, trace_links))
    trace_options = traces.options(layout.ranks, trace_ranks, trace_window, trace_links) if traced else None
    folder = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="orrery-run-"))
    opts = RunOptions(
        machine=m,
        layout=layout,
        program=[os.fspath(program), *map(str, args)],
        out=folder,
        costs=cost_files.load(os.fspath(costs) if costs else None),
        mode=mode,
        strict=strict,
        d2h_fill=d2h_fill or run_description.default("d2h_fill"),
        fold_pinned=fold_pinned,
        gpu_visibility=gpu_visibility or run_description.default("gpu_visibility"),
        managed=managed or run_description.default("managed"),
        sim_time_limit_s=limits.seconds(sim_time_limit, "--sim-time-limit"),
        wall_time_limit_s=limits.seconds(wall_time_limit, "--wall-time-limit"),
        overrides=tuple((cal.as_set() if cal else []) + recorded),
        capture_output=capture_output,
        trace=trace_options,
        iterations=iterations,
    )
    outcome = run(opts)
    res = outcome.results
    res.out, res.stdout = folder.resolve(), outcome.stdout
    if check and res.status != "completed":
        raise RunFailed(res)
    return res


def load(run_dir: str | os.PathLike) -> Results:
    """The results of an earlier run, from its folder (or its results.json)."""
    from .run.results import Results

    p = Path(run_dir)
    return Results.read(p / "results.json" if p.is_dir() else p)
