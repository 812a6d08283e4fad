"""Application-level fitting, simulator in the loop: ``orrery fit SPEC``.

A user who can only time a program as a whole (the single-GPU Jacobi rows of
the shared measurements: no kernel timed on its own) fits the unknown
parameters of its cost file by simulating the program: scipy's
least-squares optimiser moves the parameters, every evaluation runs the
program under Orrery once per measured run, until the simulated figures match
the measured ones (least squares on the relative error). The spec (TOML,
paths relative to it)::

    program = "jacobi"                  # built with Orrery's wrappers
    machine = "h100-ib200"              # built-in or .toml; options: `--set` strings
    nodes = 1
    gpus_per_node = 1
    figure = '^time:\\s+(\\S+)'         # the simulated figure: first group of the first
                                        # matching stdout line, in seconds
    costs = '''                         # the cost file, {name} = a fitted parameter
    [kernels.jacobi_kernel]
    alpha = {alpha}
    beta = {beta}
    '''

    [parameters.alpha]                  # initial value and bounds (units allowed)
    initial = "10us"
    min = "0s"

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

The output: fit.json (parameters, per-run measured and simulated figures and
residuals, number of optimiser evaluations and of simulations, inputs and
their SHA-256) and costs.toml (the cost file with the fitted values).
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
from typing import TYPE_CHECKING, Annotated, TypeAlias

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from scipy import optimize

from .. import machines, progress, units
from ..errors import InputError
from ..machines import platform
from ..run import costs as cost_files
from ..run import launch as runner
from ..schema import Problems, Seconds, input_error, quantity, read_text

log = logging.getLogger(__name__)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# a plain number, or a time with its unit ("10us"); finite. mypy takes a type alias from a type
# expression only, not from a function's result: it sees what the field holds
if TYPE_CHECKING:
    Value: TypeAlias = float
else:
    Value = quantity("time", signed=True, plain=True)
Count = Annotated[int, Field(strict=True, ge=1)]


class Parameter(_Strict):
    initial: Value
    min: Value | None = None
    max: Value | None = None

    @model_validator(mode="after")
    def _within(self) -> Parameter:
        lo, hi = self.min, self.max
        if lo is not None and hi is not None and lo >= hi:
            raise Problems([("min", lo, f"less than max ({hi!r})")])
        if (lo is not None and self.initial < lo) or (hi is not None and self.initial > hi):
            raise Problems([("initial", self.initial, f"a value within min and max ({lo!r} to {hi!r})")])
        return self

    def values(self) -> tuple[float, float, float]:
        lo = -np.inf if self.min is None else self.min
        hi = np.inf if self.max is None else self.max
        return self.initial, lo, hi


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
    costs: str
    parameters: dict[str, Parameter] = Field(min_length=1)
    measured: Measured | None = None
    runs: list[Run] = Field(min_length=1)


@dataclass
class Problem:
    spec: Spec
    source: Path
    program: Path
    machine: machines.Machine
    layout: platform.Layout
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
    used = set(re.findall(r"(?<!\{)\{(\w+)\}(?!\})", spec.costs))
    if used != set(names):
        raise InputError(str(source), "costs", sorted(used), f"exactly the fitted parameters {names} as {{name}}")
    try:  # the cost file, filled in, must be a valid one
        with tempfile.TemporaryDirectory() as tmp:
            trial = Path(tmp) / "costs.toml"
            trial.write_text(spec.costs.format(**{n: repr(spec.parameters[n].initial) for n in names}))
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
    program = (source.parent / spec.program).resolve()
    machine = machines.load(
        spec.machine if spec.machine in machines.builtin_names() else str((source.parent / spec.machine).resolve()),
        machines.parse_overrides(spec.options),
    )
    try:
        layout = platform.Layout.for_machine(machine, spec.nodes, spec.gpus_per_node, spec.ranks_per_node)
    except InputError as e:  # named by the spec's key, not the run's flag
        key = {"--nodes": "nodes", "--gpus-per-node": "gpus_per_node", "--ranks-per-node": "ranks_per_node"}
        raise InputError(str(source), key.get(e.source, e.source), e.value, e.expected) from None
    measured, files = _measured_rows(spec, source)
    return Problem(spec, source, program, machine, layout, names, measured, [source, *files])


def cost_text(problem: Problem, values: dict[str, float]) -> str:
    return problem.spec.costs.format(**{k: repr(float(v)) for k, v in values.items()})


def simulate(problem: Problem, values: dict[str, float], workdir: Path) -> list[float]:
    """The simulated figure of every run, with these parameter values."""
    text = cost_text(problem, values)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    cost_path = workdir / f"costs-{digest}.toml"
    cost_path.write_text(text)
    table = cost_files.load(cost_path)
    pattern = re.compile(problem.spec.figure, re.M)

    def one(i: int) -> float:
        run = problem.spec.runs[i]
        out = runner.run(
            runner.RunOptions(
                problem.machine,
                problem.layout,
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
    return {
        "orrery_fit": 1,
        "spec": str(problem.source),
        "inputs": [{"file": str(f), "sha256": hashlib.sha256(f.read_bytes()).hexdigest()} for f in problem.inputs],
        "parameters": values,
        "runs": [
            {"args": r.args, "measured": m, "simulated": s, "relative_error": e}
            for r, m, s, e in zip(problem.spec.runs, problem.measured, simulated, rel)
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
    lines.append(f"{'run':<48} {'measured':>14} {'simulated':>14} {'error':>8}")
    for r in result["runs"]:
        lines.append(
            f"{' '.join(r['args']):<48} {r['measured']:>14.6g} {r['simulated']:>14.6g} "
            f"{100 * r['relative_error']:>7.2f}%"
        )
    lines.append(f"max |relative error| {100 * result['max_abs_relative_error']:.2f}%")
    return "\n".join(lines)


def fitted_costs(problem: Problem, result: dict) -> str:
    header = [
        f"# Fitted by `orrery fit {problem.source}` (simulator in the loop, {result['simulations']} simulations) from:"
    ]
    header += [f"#   {i['file']} (sha256 {i['sha256'][:16]}...)" for i in result["inputs"]]
    header += ["# per run: measured vs simulated with these values"]
    header += [
        f"#   {' '.join(r['args'])}: {r['measured']:.6g} vs {r['simulated']:.6g} ({100 * r['relative_error']:+.2f}%)"
        for r in result["runs"]
    ]
    return "\n".join(header) + "\n" + cost_text(problem, result["parameters"]).lstrip("\n")


def write(problem: Problem, result: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "fit.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "costs.toml").write_text(fitted_costs(problem, result))
