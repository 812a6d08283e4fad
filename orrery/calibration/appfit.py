"""Application-level fitting, simulator in the loop: ``orrery fit SPEC``.

A user who can only time a program as a whole (the single-GPU Jacobi rows of
the shared measurements: no kernel timed on its own; the same program at a few
GPU counts: no message timed on its own) fits the unknown parameters of its
cost file, or of its machine, by simulating the program: scipy's
least-squares optimiser moves the parameters, every evaluation runs the
program under Orrery once per measured run, until the simulated figures match
the measured ones (least squares on the relative error). The spec (TOML,
paths relative to it)::

    program = "jacobi"                  # built with Orrery's wrappers
    machine = "h100-ib200"              # built-in or .toml; options: `--set` strings
    nodes = 1                           # the layout of every run (a run may give its own)
    gpus_per_node = 1
    figure = '^time:\\s+(\\S+)'         # the simulated figure: first group of the first
                                        # matching stdout line, in seconds
    costs = '''                         # the cost file, {name} = a fitted cost parameter
    [kernels.jacobi_kernel]             # (optional: none if only machine parameters are fitted)
    alpha = {alpha}
    beta = {beta}
    '''

    [parameters.alpha]                  # a cost parameter: initial value and bounds
    initial = "10us"                    # (a time with its unit, or a plain number)
    min = "0s"

    [parameters."mpi.send_overhead_device_intra"]  # a machine parameter: its dotted key,
    initial = "1us"                     # its value as `--set KEY=VALUE` takes it (with its
    max = "50us"                        # unit; not 0); min is 0 unless given

    [parameters.device_overhead]        # or any name, setting these machine keys (each to the
    set = ["mpi.send_overhead_device", "mpi.recv_overhead_device"]   # same value, one kind)
    initial = "1us"

    [measured]                          # where measured figures come from (optional)
    file = "../../calibration/data/measured/jacobi_scaling.csv"
    value = "time_s"                    # column, in `unit`
    unit = "s"
    per = "iterations"                  # divided by this column

    [[runs]]
    args = ["-nx", "8192", "-ny", "8192", "-niter", "20"]
    per = 20                            # the simulated figure is divided by this
    row = { gpus = "1", grid_nx = "8192", build = "make cub" }  # the one CSV row
    # or: measured = "478us"
    nodes = 2                           # this run's layout (optional: the spec's)
    gpus_per_node = 4

The output: fit.json (parameters, the machine keys they set, per-run layout,
measured and simulated figures and residuals, number of optimiser evaluations
and of simulations, inputs and their SHA-256), costs.toml (the cost file with
the fitted values) where the spec has one, and, where machine parameters are
fitted, calibration.json: the fitted machine as a calibration file
(orrery.calibration.merge), which ``orrery run --machine NAME --calibration
calibration.json`` (and validate, sweep) reads.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import math
import os
import re
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import numpy as np
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)
from scipy import optimize

from .. import machines, progress, schema, units
from ..errors import InputError
from ..machines import platform
from ..run import costs as cost_files
from ..run import launch as runner
from ..schema import Problems, Seconds, input_error, read_text
from . import merge

log = logging.getLogger(__name__)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


Count = Annotated[int, Field(strict=True, ge=1)]
# a parameter's value as the spec writes it: read by Parameter once it knows what it sets
Given = StrictFloat | StrictInt | StrictStr


def machine_kind(key: str) -> str:
    """The kind of quantity (units.KINDS) of a machine key a parameter may set, or ValueError
    saying why the key cannot be fitted."""
    known = machines.parameter_keys()
    if key not in known:
        near = schema.closest(key, known)
        raise ValueError(
            "a machine parameter" + (f" (did you mean '{near}'?)" if near else " (e.g. mpi.send_overhead_device)")
        )
    _, meta = schema.unwrap(schema.type_at(machines.Machine, tuple(key.split("."))))
    kind = next((m.kind for m in meta if isinstance(m, schema.Quantity)), None)
    if kind is None:
        raise ValueError(
            "a machine parameter that is a quantity with a unit (a time, size, bandwidth or rate): "
            "a count, a choice or a measured model is not fitted"
        )
    return kind


class Parameter(_Strict):
    """A fitted parameter: a cost parameter (a {name} of the cost file; a time, a plain number
    is in seconds) or, with `set`, a machine parameter (each key of `set` takes its value, a
    quantity with its unit as a description and `--set` write it; min 0 unless given)."""

    initial: Given
    min: Given | None = None
    max: Given | None = None
    set: list[str] = []

    @model_validator(mode="after")
    def _read(self) -> Parameter:
        problems: list[tuple[str, object, str]] = []
        kinds = set()
        for key in self.set:
            try:
                kinds.add(machine_kind(key))
            except ValueError as e:
                problems.append(("set", key, str(e)))
        if len(set(self.set)) != len(self.set):
            problems.append(("set", self.set, "each machine key once"))
        if len(kinds) > 1:
            problems.append(("set", self.set, f"machine keys of one kind of quantity (these are {sorted(kinds)})"))
        if problems:
            raise Problems(problems)
        kind = kinds.pop() if kinds else "time"
        read: dict[str, float | None] = {}
        for name, given in (("initial", self.initial), ("min", self.min), ("max", self.max)):
            try:  # a cost file's parameter: a plain number is seconds; a machine's: as a description
                read[name] = (
                    None if given is None else units.parse(given, kind, signed=not self.set, plain=not self.set)
                )
            except ValueError as e:
                problems.append((name, given, str(e).removeprefix("expected ")))
        if problems:
            raise Problems(problems)
        initial, lo, hi = read["initial"], read["min"], read["max"]
        assert initial is not None  # a required key
        if self.set and lo is None:  # a machine's quantities are never negative (a rate never 0:
            lo = 0.0  # the optimiser keeps strictly within its bounds)
        if self.set and initial == 0:  # (its unit, seconds or bytes, is no scale for a machine key)
            raise Problems([("initial", self.initial, "a value other than 0: each parameter moves relative to it")])
        if lo is not None and hi is not None and lo >= hi:
            raise Problems([("min", lo, f"less than max ({hi!r})")])
        if (lo is not None and initial < lo) or (hi is not None and initial > hi):
            raise Problems([("initial", initial, f"a value within min and max ({lo!r} to {hi!r})")])
        self.initial, self.min, self.max = initial, lo, hi
        return self

    def values(self) -> tuple[float, float, float]:
        """Initial value and bounds, in SI units (once validated, each a float)."""
        lo = -np.inf if self.min is None else float(self.min)
        hi = np.inf if self.max is None else float(self.max)
        return float(self.initial), lo, hi


def _time_unit(unit: str) -> str:
    units.parse(f"1{unit}", "time")  # raises with what was expected
    return unit


class Measured(_Strict):
    file: str
    value: str
    unit: Annotated[str, AfterValidator(_time_unit)] = "s"
    per: str | None = None


class Run(_Strict):
    args: list[str]
    nodes: Count | None = None  # the run's own layout: unset, the spec's
    gpus_per_node: Count | None = None
    ranks_per_node: Count | None = None
    per: Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)] = 1.0
    measured: Annotated[Seconds, Field(gt=0)] | None = None  # a run time: 0 is no measurement
    row: dict[str, str] | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Run:
        if (self.measured is None) == (self.row is None):
            raise ValueError("each run needs either measured (a value) or row (a row of [measured].file)")
        return self


class Spec(_Strict):
    program: Annotated[str, Field(min_length=1)]
    machine: Annotated[str, Field(min_length=1)]
    options: list[str] = []
    nodes: Count = 1
    gpus_per_node: Count | None = None
    ranks_per_node: Count | None = None
    figure: str
    costs: str | None = None
    parameters: dict[str, Parameter] = Field(min_length=1)
    measured: Measured | None = None
    runs: list[Run] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _dotted_names_set_their_key(cls, data: object) -> object:
        """`[parameters."mpi.send_overhead_device"]` is short for a parameter of that name with
        set = ["mpi.send_overhead_device"]."""
        if isinstance(data, dict) and isinstance(data.get("parameters"), dict):
            data = {
                **data,
                "parameters": {
                    name: {**p, "set": [name]} if "." in name and isinstance(p, dict) and "set" not in p else p
                    for name, p in data["parameters"].items()
                },
            }
        return data

    def cost_names(self) -> list[str]:
        return sorted(n for n, p in self.parameters.items() if not p.set)

    def machine_names(self) -> list[str]:
        return sorted(n for n, p in self.parameters.items() if p.set)


@dataclass
class Problem:
    spec: Spec
    source: Path
    program: Path
    machine_name: str  # a built-in's name, or the description's path
    machine: machines.Machine  # with its options, without the machine parameters
    layouts: list[platform.Layout]  # per run
    names: list[str]
    measured: list[float]
    inputs: list[Path] = field(default_factory=list)
    simulations: int = 0


def _measured_rows(spec: Spec, source: Path) -> tuple[list[float], list[Path]]:
    values, files = [], []
    table: list[dict] = []
    if spec.measured:
        path = Path(os.path.normpath(source.parent / spec.measured.file))
        try:
            table = list(csv.DictReader(io.StringIO(read_text(path, "a CSV file of measured run times"), newline="")))
        except InputError as e:
            raise InputError(str(source), "measured.file", spec.measured.file, f"{e.expected} ({e.value})") from None
        files.append(path)
    for i, run in enumerate(spec.runs):
        key = f"runs[{i}]"
        if run.measured is not None:
            values.append(run.measured)
            continue
        if not spec.measured:
            raise InputError(str(source), f"{key}.row", run.row, "a [measured] table naming the file the row is in")
        assert run.row is not None  # Run._one_source: a run without `measured` has a row
        rows = [r for r in table if all(want in (r.get(col) or "") for col, want in run.row.items())]
        if len(rows) != 1:
            raise InputError(
                str(source),
                f"{key}.row",
                run.row,
                f"exactly one row of {spec.measured.file} containing these values (found {len(rows)})",
            )
        row, m = rows[0], spec.measured
        try:
            value = float(row[m.value]) * units.parse(f"1{m.unit}", "time")
            if m.per:
                value /= float(row[m.per])
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
            raise InputError(
                f"{spec.measured.file}",
                f"{m.value}/{m.per}",
                row.get(m.value),
                f"numeric columns in the row selected by {key} ({e!r})",
            ) from None
        if not (math.isfinite(value) and value > 0):
            raise InputError(
                f"{spec.measured.file}",
                m.value,
                row.get(m.value),
                f"a positive finite run time in the row selected by {key} (per {m.per}: {row.get(m.per)!r})"
                if m.per
                else f"a positive finite run time in the row selected by {key}",
            )
        values.append(value)
    return values, files


def load(path: str | Path) -> Problem:
    source = Path(path)
    try:
        data = tomllib.loads(read_text(source, "a fit spec"))
    except tomllib.TOMLDecodeError as e:
        raise InputError(str(source), None, "invalid TOML", f"valid TOML ({e})") from None
    try:
        spec = Spec.model_validate(data)
    except ValidationError as e:
        raise input_error(e, str(source), Spec) from None
    try:
        groups = re.compile(spec.figure, re.M).groups
    except re.error as e:
        raise InputError(str(source), "figure", spec.figure, f"a regular expression ({e})") from None
    if groups < 1:
        raise InputError(
            str(source),
            "figure",
            spec.figure,
            "a regular expression with a group, (...), around the simulated figure (a number)",
        )
    names = sorted(spec.parameters)
    _check_costs(spec, source)
    program = (source.parent / spec.program).resolve()
    options = machines.parse_overrides(spec.options)
    set_by: dict[str, str] = {}
    for name in spec.machine_names():
        for key in spec.parameters[name].set:
            if key in set_by:
                raise InputError(
                    str(source), f"parameters.{name}.set", key, f"a key no other parameter sets ({set_by[key]} does)"
                )
            if key in options:
                raise InputError(str(source), f"parameters.{name}.set", key, "a key options does not set too")
            set_by[key] = name
    machine_name = (
        spec.machine if spec.machine in machines.builtin_names() else str((source.parent / spec.machine).resolve())
    )
    problem = Problem(
        spec, source, program, machine_name, machines.load(machine_name, options), [], names, [], [source]
    )
    _check_machine_values(problem)
    flags = {"--nodes": "nodes", "--gpus-per-node": "gpus_per_node", "--ranks-per-node": "ranks_per_node"}
    for i, run in enumerate(spec.runs):
        nodes = spec.nodes if run.nodes is None else run.nodes
        gpus = spec.gpus_per_node if run.gpus_per_node is None else run.gpus_per_node
        ranks = spec.ranks_per_node if run.ranks_per_node is None else run.ranks_per_node
        try:
            problem.layouts.append(platform.Layout.for_machine(problem.machine, nodes, gpus, ranks))
        except InputError as e:  # named by the spec's key (the run's where the run sets it), not the flag
            k = flags.get(e.source, e.source)
            raise InputError(
                str(source), f"runs[{i}].{k}" if getattr(run, k, None) is not None else k, e.value, e.expected
            ) from None
    problem.measured, files = _measured_rows(spec, source)
    problem.inputs += files
    return problem


def _check_costs(spec: Spec, source: Path) -> None:
    """The cost file's placeholders are the cost parameters, and filled in it is a valid one."""
    names, machine_names = spec.cost_names(), spec.machine_names()
    if spec.costs is None:
        if names:
            raise InputError(
                str(source), "costs", None, f"a cost file with the cost parameters {names} as {{name}} placeholders"
            )
        return
    used = set(re.findall(r"(?<!\{)\{([\w.]+)\}(?!\})", spec.costs))
    if used != set(names):
        raise InputError(
            str(source),
            "costs",
            sorted(used),
            f"exactly the fitted parameters {names} as {{name}}"
            + (f" (not the machine parameters, which set machine keys: {machine_names})" if machine_names else ""),
        )
    try:  # the cost file, filled in, must be a valid one
        with tempfile.TemporaryDirectory() as tmp:
            trial = Path(tmp) / "costs.toml"
            trial.write_text(spec.costs.format(**{n: repr(spec.parameters[n].values()[0]) for n in names}))
            cost_files.load(trial)
    except (KeyError, ValueError, IndexError) as e:
        raise InputError(
            str(source),
            "costs",
            str(e),
            "a cost file whose only braces are {name} placeholders (write a literal brace as {{ or }})",
        ) from None
    except InputError as e:
        raise InputError(str(source), "costs", e.value, f"a valid cost file once filled in ({e.expected})") from None


def _check_machine_values(problem: Problem) -> None:
    """Every machine parameter's initial value and bounds make a valid machine (a key's own
    limits: a positive rate, a latency above 0), so that no evaluation meets one."""
    spec = problem.spec
    for name in spec.machine_names():
        initial, lo, hi = spec.parameters[name].values()
        for which, value in (("initial", initial), ("min", lo), ("max", hi)):
            if not math.isfinite(value) or (which == "min" and spec.parameters[name].min is None):
                continue  # an unbounded side, or the default 0 (kept clear of by the optimiser)
            try:
                machine_at(problem, {name: value})
            except InputError as e:
                raise InputError(
                    str(problem.source),
                    f"parameters.{name}.{which}",
                    machines.with_units(spec.parameters[name].set[0], value),
                    f"a value the machine takes for {', '.join(spec.parameters[name].set)} ({e.expected})",
                ) from None


def machine_overrides(problem: Problem, values: dict[str, float]) -> dict[str, float]:
    """The machine keys the machine parameters among `values` set, in SI units."""
    return {
        key: float(values[name])
        for name in problem.spec.machine_names()
        if name in values
        for key in problem.spec.parameters[name].set
    }


def machine_at(problem: Problem, values: dict[str, float]) -> machines.Machine:
    """The spec's machine, its options, then the machine parameters among `values` (SI units)."""
    fitted = machine_overrides(problem, values)
    if not fitted:
        return problem.machine
    options = machines.parse_overrides(problem.spec.options)
    return machines.load(problem.machine_name, {**options, **merge.described(fitted)})


def cost_text(problem: Problem, values: dict[str, float]) -> str | None:
    costs = problem.spec.costs
    if costs is None:
        return None
    return costs.format(**{k: repr(float(v)) for k, v in values.items() if k in problem.spec.cost_names()})


def simulate(problem: Problem, values: dict[str, float], workdir: Path) -> list[float]:
    """The simulated figure of every run, with these parameter values."""
    text = cost_text(problem, values)
    machine = machine_at(problem, values)
    digest = hashlib.sha256(json.dumps([text, sorted(values.items())]).encode()).hexdigest()[:16]
    table = cost_files.load(None)
    if text is not None:
        cost_path = workdir / f"costs-{digest}.toml"
        cost_path.write_text(text)
        table = cost_files.load(cost_path)
    pattern = re.compile(problem.spec.figure, re.M)

    def one(i: int) -> float:
        run = problem.spec.runs[i]
        out = runner.run(
            runner.RunOptions(
                machine,
                problem.layouts[i],
                [str(problem.program), *run.args],
                workdir / f"run-{digest}-{i}",
                costs=table,
                capture_output=True,
            )
        )
        if out.exit_code != 0:
            raise InputError(
                str(problem.source),
                f"runs[{i}]",
                " ".join(run.args),
                f"a run that succeeds (exit code {out.exit_code}; stdout ends: {(out.stdout or '')[-300:]})",
            )
        m = pattern.search(out.stdout or "")
        if not m:
            raise InputError(
                str(problem.source),
                "figure",
                problem.spec.figure,
                f"a pattern the output of runs[{i}] matches (it printed: {(out.stdout or '')[-300:]})",
            )
        try:
            figure = float(m.group(1))
            if not math.isfinite(figure):
                raise ValueError(figure)
        except (TypeError, ValueError):  # TypeError: the group took no part in the match
            raise InputError(
                str(problem.source),
                "figure",
                problem.spec.figure,
                f"a pattern whose first group is a finite number in the output of runs[{i}] (it matched "
                f"{m.group(0)!r}, group 1 {m.group(1)!r})",
            ) from None
        return figure / run.per

    with ThreadPoolExecutor() as pool:
        figures = list(pool.map(one, range(len(problem.spec.runs))))
    problem.simulations += len(figures)
    return figures


def fit(problem: Problem, workdir: Path | None = None) -> dict:
    """Fit the parameters; the fit.json content."""
    if not problem.program.is_file():
        raise InputError(
            str(problem.source),
            "program",
            problem.spec.program,
            "an existing program built with Orrery's wrappers (build it first)",
        )
    initial, lo, hi = (np.array(v) for v in zip(*(problem.spec.parameters[n].values() for n in problem.names)))
    scale = np.where(initial != 0, np.abs(initial), 1.0)  # the optimiser works on values of order 1
    measured = np.array(problem.measured)
    evaluations = []

    with (
        tempfile.TemporaryDirectory() as tmp,
        progress.counting(desc="fit", unit="evaluation") as bar,
    ):
        work = Path(workdir or tmp)

        def residuals(u: np.ndarray) -> np.ndarray:
            values = dict(zip(problem.names, u * scale))
            simulated = np.array(simulate(problem, values, work))
            evaluations.append((values, simulated))
            rel = (simulated - measured) / measured
            worst = float(np.max(np.abs(rel)))
            bar.update()
            bar.set_postfix_str(f"max |error| {100 * worst:.2f}%")
            log.info(
                "evaluation %d (%d run%s): %s: max |relative error| %.2f%%",
                len(evaluations),
                len(simulated),
                "" if len(simulated) == 1 else "s",
                ", ".join(f"{k} = {float(v)!r}" for k, v in values.items()),
                100 * worst,
            )
            return rel

        result = optimize.least_squares(
            residuals,
            np.ones_like(initial),
            bounds=(lo / scale, hi / scale),
            x_scale=1.0,
            diff_step=1e-3,
            xtol=1e-8,
            ftol=1e-8,
        )
        values = dict(zip(problem.names, (result.x * scale).tolist()))
        log.info("optimiser done (%s): the fitted parameters' own runs", result.message)
        simulated = simulate(problem, values, work)  # the fitted parameters' own figures
    rel = [(s - m) / m for s, m in zip(simulated, measured)]
    fitted_machine = machine_overrides(problem, values)
    return {
        "orrery_fit": 2,  # 2: machine parameters (machine_parameters, calibration.json) and per-run layouts
        "spec": str(problem.source),
        "inputs": [{"file": str(f), "sha256": hashlib.sha256(f.read_bytes()).hexdigest()} for f in problem.inputs],
        "machine": problem.machine.name,
        "parameters": values,
        "machine_parameters": fitted_machine,
        "runs": [
            {
                "args": r.args,
                "layout": {
                    "nodes": lay.nodes,
                    "gpus_per_node": lay.gpus_per_node,
                    "ranks_per_node": lay.ranks_per_node,
                },
                "measured": m,
                "simulated": s,
                "relative_error": e,
            }
            for r, lay, m, s, e in zip(problem.spec.runs, problem.layouts, problem.measured, simulated, rel)
        ],
        "max_abs_relative_error": max(abs(e) for e in rel),
        "optimizer": {
            "method": "scipy.optimize.least_squares (trf)",
            "evaluations": int(result.nfev),
            "status": result.message,
        },
        "simulations": problem.simulations,
    }


def report(result: dict) -> str:
    lines = [
        f"fit of {result['spec']}: {result['simulations']} simulations, "
        f"{result['optimizer']['evaluations']} optimiser evaluations ({result['optimizer']['status']})",
        "parameters:",
    ]
    lines += [f"  {k} = {v!r}" for k, v in result["parameters"].items()]
    if result["machine_parameters"]:
        lines.append(f"machine keys ({result['machine']}, SI units):")
        lines += [f"  {k} = {v!r}" for k, v in result["machine_parameters"].items()]
    layouts = {(r["layout"]["nodes"], r["layout"]["gpus_per_node"]) for r in result["runs"]}
    width = 48 - 8 * (len(layouts) > 1)
    lines.append(
        f"{'run':<{width}}{' layout' if len(layouts) > 1 else ''} {'measured':>14} {'simulated':>14} {'error':>8}"
    )
    for r in result["runs"]:
        shown = f" {r['layout']['nodes']}x{r['layout']['gpus_per_node']:<5}" if len(layouts) > 1 else ""
        lines.append(
            f"{' '.join(r['args']):<{width}}{shown} {r['measured']:>14.6g} {r['simulated']:>14.6g} "
            f"{100 * r['relative_error']:>7.2f}%"
        )
    lines.append(f"max |relative error| {100 * result['max_abs_relative_error']:.2f}%")
    return "\n".join(lines)


def _header(problem: Problem, result: dict) -> list[str]:
    header = [
        f"Fitted by `orrery fit {problem.source}` (simulator in the loop, {result['simulations']} simulations) from:"
    ]
    header += [f"  {i['file']} (sha256 {i['sha256'][:16]}...)" for i in result["inputs"]]
    header += ["per run: measured vs simulated with these values"]
    header += [
        f"  {' '.join(r['args'])}: {r['measured']:.6g} vs {r['simulated']:.6g} ({100 * r['relative_error']:+.2f}%)"
        for r in result["runs"]
    ]
    return header


def fitted_costs(problem: Problem, result: dict) -> str | None:
    """The cost file with the fitted values, or None where the spec has no cost file."""
    text = cost_text(problem, result["parameters"])
    if text is None:
        return None
    return "\n".join(f"# {line}" for line in _header(problem, result)) + "\n" + text.lstrip("\n")


def calibration(problem: Problem, result: dict) -> dict | None:
    """The fitted machine as a calibration file (merge.read reads it; `orrery run --calibration`),
    or None where no machine parameter is fitted. Under a calibration a machine's description
    loses its measured models (a calibration brings its own): the spec's machine's are copied
    in, with the spec's options, so that the file gives exactly the machine the fit ran."""
    if not result["machine_parameters"]:
        return None
    m = machine_at(problem, result["parameters"])
    keys = [
        *(f"{section}.{f}" for section in machines.MEASURED_MODELS for f, v in getattr(m, section) if v is not None),
        *machines.parse_overrides(problem.spec.options),
        *result["machine_parameters"],
    ]
    overrides = {}
    for key in dict.fromkeys(keys):
        section, _, name = key.partition(".")
        overrides[key] = getattr(m, section).model_dump(mode="json")[name]  # SI units, as calibrate writes them
    return {
        "orrery_calibration": merge.FORMAT_VERSION,
        "machine": m.name,
        "command": f"orrery fit {problem.source}",
        "inputs": result["inputs"],
        "fit": {k: result[k] for k in ("parameters", "runs", "max_abs_relative_error")},
        "overrides": overrides,
    }


def write(problem: Problem, result: dict, out: Path) -> list[Path]:
    """fit.json, costs.toml where the spec has a cost file, calibration.json where it fits machine
    parameters; an earlier fit's costs.toml or calibration.json this one does not write is
    removed, so that none is taken for this fit's. The files written."""
    out.mkdir(parents=True, exist_ok=True)
    cal = calibration(problem, result)
    files = {
        "fit.json": json.dumps(result, indent=1) + "\n",
        "costs.toml": fitted_costs(problem, result),
        "calibration.json": None if cal is None else json.dumps(cal, indent=1) + "\n",
    }
    written = []
    for name, text in files.items():
        if text is None:
            (out / name).unlink(missing_ok=True)
        else:
            (out / name).write_text(text)
            written.append(out / name)
    return written
