"""Sweep specs: the TOML file ``orrery sweep SPEC`` reads, checked, and expanded into its points.

A spec names one program and how every point runs it; ``[grid]`` and ``[[points]]`` say what
changes from point to point (docs/sweeps.md has the whole format)::

    program = "jacobi"                         # paths are relative to the spec
    args = ["-nx", "{nx}", "-ny", "{nx}", "-niter", "20"]
    machine = "h100-ib200"
    costs = "costs.toml"
    set = { "nic.latency" = "2us" }            # machine overrides at every point

    [grid]                                     # every combination of these values
    nodes = [1, 2, 4]
    nx = [4096, 8192]                          # a program parameter: args names it as {nx}
    set = { "nic.bandwidth" = ["200Gb/s", "400Gb/s"] }

    [[points]]                                 # or (and) points one by one: each entry
    gpus_per_node = 1                          # is combined with every point of [grid]

Checking a spec finds every mistake that would spoil all its points (a misspelt key, a
placeholder without a value, a parameter no placeholder uses, a machine parameter that
does not exist), as InputErrors naming the spec, the key and the value. What can only be
wrong at some points (a value out of the machine's range, a bad unit) is the point's own
failure, found by execute.py. This module reads and expands specs; it runs nothing.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import json
import math
import operator
import string
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

from .. import machines
from ..errors import InputError, InputErrors
from ..run import limits
from ..schema import Problems, closest, input_error, read_text

#: The keys of the job's layout, what a series of points varies (table.py)
LAYOUT = ("nodes", "gpus_per_node", "ranks_per_node")
#: Keys [grid] and [[points]] may sweep besides the layout, program parameters and `set`
SWEPT_FILES = ("machine", "costs", "calibration")
#: Names a placeholder can use that are not program parameters: the layout, resolved
DERIVED = ("gpus", "ranks")
#: A spec that expands to more points than this is refused before anything is expanded
MAX_POINTS = 100_000
ID_LENGTH = 12  # hex digits of a point's id (48 bits: collisions are out of reach of any sweep)

_RESERVED = (*LAYOUT, *DERIVED, *SWEPT_FILES, "set")


def _param_value(v: object) -> object:
    """A program parameter's value: a string, a number, or a list of strings (whole arguments)."""
    ok = (
        isinstance(v, str)
        or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))
        or (isinstance(v, list) and all(isinstance(x, str) for x in v))
    )
    if not ok:
        raise ValueError("a string, a finite number, or a list of strings (arguments in place of the placeholder)")
    return v


def _set_value(v: object) -> object:
    """A machine override as a description writes it: a string (a quantity with its unit, a
    name), a number, a boolean, or a measured model's list of tables."""
    ok = (
        isinstance(v, (str, bool))
        or (isinstance(v, (int, float)) and math.isfinite(v))
        or (isinstance(v, list) and all(isinstance(x, dict) for x in v))
    )
    if not ok:
        raise ValueError("a value as the machine description writes it (e.g. '400Gb/s', 4, true, or a list of tables)")
    return v


def _flatten(v: object) -> object:
    """`set` tables with dotted keys, whether written `"nic.bandwidth" = ...` or as TOML's
    nested tables (`nic.bandwidth = ...` under [grid.set]). Values are never tables (a
    measured model is a list of tables), so flattening every table is unambiguous."""
    if not isinstance(v, dict):
        return v
    flat: dict[str, object] = {}
    for k, x in v.items():
        inner = _flatten(x)
        if isinstance(inner, dict):
            flat.update({f"{k}.{ik}": iv for ik, iv in inner.items()})
        else:
            flat[str(k)] = inner
    return flat


def _axis(v: object) -> object:
    if not isinstance(v, list):
        raise ValueError("a list of the values this key takes, e.g. [1, 2, 4]")
    if not v:
        raise ValueError("a list of at least one value")
    return v


Count = Annotated[int, Field(strict=True, ge=1)]
Text = Annotated[str, Field(strict=True, min_length=1)]
ParamValue = Annotated[object, BeforeValidator(_param_value)]
SetValue = Annotated[object, BeforeValidator(_set_value)]
Axis = BeforeValidator(_axis)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Ordered(BaseModel):
    """A table whose keys' order, as the spec writes them, is kept (a grid's product goes in it)."""

    model_config = ConfigDict(extra="allow")
    _order: list[str] = PrivateAttr(default_factory=list)
    set: dict[str, Any] = {}

    @model_validator(mode="wrap")
    @classmethod
    def _keep_order(cls, data: Any, handler: Any) -> Any:
        table = handler(data)
        table._order = list(data) if isinstance(data, dict) else []
        return table

    def values(self) -> list[tuple[str, Any]]:
        """(key, value) in the spec's order, `set` keys as `set.KEY`."""
        extra = self.__pydantic_extra__ or {}
        out: list[tuple[str, Any]] = []
        for key in self._order:
            if key == "set":
                out += [(f"set.{k}", v) for k, v in self.set.items()]
            elif key in extra:
                out.append((key, extra[key]))
            elif key in type(self).model_fields:
                out.append((key, getattr(self, key)))
        return out


class Grid(_Ordered):
    """[grid]: each key's list of values; the points are every combination of them. Keys other
    than the layout, machine, costs, calibration and set are program parameters."""

    __pydantic_extra__: dict[str, Annotated[list[ParamValue], Axis]] = Field(init=False)

    nodes: Annotated[list[Count], Axis] | None = None
    gpus_per_node: Annotated[list[Count], Axis] | None = None
    ranks_per_node: Annotated[list[Count], Axis] | None = None
    machine: Annotated[list[Text], Axis] | None = None
    costs: Annotated[list[Text], Axis] | None = None
    calibration: Annotated[list[Text], Axis] | None = None
    set: Annotated[dict[str, Annotated[list[SetValue], Axis]], BeforeValidator(_flatten)] = {}


class Point(_Ordered):
    """A [[points]] entry: one value per key."""

    __pydantic_extra__: dict[str, ParamValue] = Field(init=False)

    nodes: Count | None = None
    gpus_per_node: Count | None = None
    ranks_per_node: Count | None = None
    machine: Text | None = None
    costs: Text | None = None
    calibration: Text | None = None
    set: Annotated[dict[str, SetValue], BeforeValidator(_flatten)] = {}


def _limit(value: object) -> float | None:
    """A limit (orrery run --sim-time-limit, --wall-time-limit) in seconds."""
    return None if value is None else limits.parse(value)


class Spec(_Strict):
    program: Text
    args: list[StrictStr | StrictInt | StrictFloat] = []
    machine: Text = "h100-ib200"
    nodes: Count = 1
    gpus_per_node: Count | None = None
    ranks_per_node: Count | None = None
    mode: Literal["skeleton"] = "skeleton"
    costs: Text | None = None
    calibration: Text | None = None
    strict: Annotated[bool, Field(strict=True)] = False
    managed: Literal["refuse", "resident"] = "refuse"
    # seconds (the spec may give a unit: "2s", "30min"), None: no limit (orrery run's limits)
    sim_time_limit: Annotated[float | None, BeforeValidator(_limit)] = None
    wall_time_limit: Annotated[float | None, BeforeValidator(_limit)] = None
    set: Annotated[dict[str, SetValue], BeforeValidator(_flatten)] = {}
    parameters: dict[str, ParamValue] = {}
    grid: Grid = Grid()
    points: list[Point] = []

    @model_validator(mode="after")
    def _sizes(self) -> Spec:
        n = max(1, len(self.points)) * math.prod(len(values) for _, values in self.grid.values())
        if n > MAX_POINTS:
            raise Problems([("grid", f"{n} points", f"at most {MAX_POINTS} points in one sweep")])
        return self


# ---- placeholders: {name} or arithmetic on the point's parameters in an argument

_OPERATORS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_NODES = (ast.BinOp, ast.UnaryOp, ast.Name, ast.Load, *_OPERATORS)
MAX_EXPONENT = 64  # of `**` on whole numbers: a placeholder's value stays a number a program can read
PLACEHOLDER = (
    "literal text and placeholders: {name}, or arithmetic on parameters and numbers (+ - * / // % **), "
    "e.g. {4096 * ranks}; {{ and }} for braces"
)


@dataclass(frozen=True)
class Placeholder:
    """A `{...}` of an argument: its text, the expression and the names it uses."""

    text: str
    tree: ast.expr
    format_spec: str
    names: tuple[str, ...]

    def value(self, namespace: Mapping[str, object]) -> object:
        return _evaluate(self.tree, namespace)


def _evaluate(node: ast.expr, namespace: Mapping[str, object]) -> object:
    # a walk over the few node kinds _placeholder lets through: no call, attribute or subscript
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return namespace[node.id]
    if isinstance(node, ast.UnaryOp):
        return _OPERATORS[type(node.op)](_evaluate(node.operand, namespace))
    assert isinstance(node, ast.BinOp)
    left, right = _evaluate(node.left, namespace), _evaluate(node.right, namespace)
    if isinstance(node.op, ast.Pow) and isinstance(right, int) and abs(right) > MAX_EXPONENT:
        raise ValueError(f"an exponent of at most {MAX_EXPONENT}")
    return _OPERATORS[type(node.op)](left, right)


def _placeholder(text: str, format_spec: str, conversion: str | None) -> Placeholder:
    whole = "{" + text + (f"!{conversion}" if conversion else "") + (f":{format_spec}" if format_spec else "") + "}"
    if conversion is not None:
        raise ValueError(f"{whole} is not one")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise ValueError(f"{whole} is not one") from None
    for node in ast.walk(tree):
        number = isinstance(node, ast.Constant) and type(node.value) in (int, float)
        if not (number or isinstance(node, _NODES)):  # no call, attribute, subscript, string...
            raise ValueError(f"{whole} is not one")
    names = [node.id for node in ast.walk(tree) if isinstance(node, ast.Name)]
    return Placeholder(text, tree, format_spec, tuple(dict.fromkeys(names)))


def parse_argument(arg: str) -> list[str | Placeholder]:
    """An argument as literal text and placeholders ({{ and }} are literal braces); ValueError
    for a placeholder that is not one."""
    parts: list[str | Placeholder] = []
    for literal, field, format_spec, conversion in string.Formatter().parse(arg):
        if literal:
            parts.append(literal)
        if field is not None:
            if not field.strip():
                raise ValueError("{} is not one")
            parts.append(_placeholder(field, format_spec or "", conversion))
    return parts


def _render(value: object, format_spec: str) -> str:
    if format_spec:
        return format(value, format_spec)
    return repr(value) if isinstance(value, float) else str(value)


# ---- the expanded sweep


@dataclass(frozen=True)
class SweepPoint:
    """One point: ``id`` (stable: from its parameters), ``index`` (its place in the spec's
    order), ``parameters`` (the keys [grid] and its [[points]] entry give it, in the spec's
    order: layout keys, machine, costs, calibration, ``set.KEY``, program parameters), and what
    it runs with: every key resolved against the spec's defaults."""

    id: str
    index: int
    parameters: dict[str, object]
    machine: str  # as the spec writes it
    nodes: int
    gpus_per_node: int | None
    ranks_per_node: int | None
    costs: str | None  # as the spec writes them
    calibration: str | None
    set: dict[str, object]
    arguments: dict[str, object]  # every program parameter's value


@dataclass
class Sweep:
    """A checked spec and its points, in the spec's order."""

    source: Path
    spec: Spec
    program: Path
    points: list[SweepPoint]
    args: list[list[str | Placeholder]]  # per argument of `args`, parsed

    def path(self, value: str) -> Path:
        """A file the spec names, relative to the spec's folder."""
        return (self.source.parent / value).resolve()

    def machine_path(self, value: str) -> str:
        """A built-in machine's name, or the description file the spec names."""
        return value if value in machines.builtin_names() else str(self.path(value))

    def namespace(self, point: SweepPoint, gpus_per_node: int, ranks_per_node: int) -> dict[str, object]:
        """The names a placeholder may use at this point, with the layout resolved."""
        return {
            **point.arguments,
            "nodes": point.nodes,
            "gpus_per_node": gpus_per_node,
            "ranks_per_node": ranks_per_node,
            "gpus": point.nodes * gpus_per_node,
            "ranks": point.nodes * ranks_per_node,
        }

    def fill(self, namespace: Mapping[str, object]) -> list[str]:
        """The program's arguments at a point; InputError (key ``args.I``) for a placeholder
        that cannot be computed there."""
        out: list[str] = []
        for i, parts in enumerate(self.args):

            def refused(part: Placeholder, why: str, i: int = i) -> InputError:
                used = {n: namespace[n] for n in part.names}
                return InputError(str(self.source), f"args.{i}", f"{{{part.text}}} with {used}", why)

            values: list[object] = []
            for part in parts:
                try:
                    values.append(part if isinstance(part, str) else part.value(namespace))
                except (TypeError, ValueError, ZeroDivisionError, OverflowError) as e:
                    assert isinstance(part, Placeholder)
                    raise refused(part, f"a value to compute ({e})") from None
            whole = len(parts) == 1 and isinstance(parts[0], Placeholder) and not parts[0].format_spec
            if whole and isinstance(values[0], list):  # whole arguments in place of the placeholder
                out += values[0]
                continue
            text = []
            for part, value in zip(parts, values):
                if isinstance(part, str):
                    text.append(part)
                    continue
                if isinstance(value, list):
                    raise refused(part, "a list of arguments only as a whole argument, alone in its quotes")
                try:
                    text.append(_render(value, part.format_spec))
                except (TypeError, ValueError) as e:
                    raise refused(part, f"a value its format ':{part.format_spec}' takes ({e})") from None
            out.append("".join(text))
        return out


def point_id(parameters: Mapping[str, object]) -> str:
    """A point's stable id: the same parameters give the same id whatever else the spec holds
    and wherever the point is in it (resume finds its folder by it)."""
    text = json.dumps(parameters, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:ID_LENGTH]


def _check(spec: Spec, source: str) -> tuple[list[list[str | Placeholder]], list[InputError]]:
    """The parsed arguments, and every mistake that spoils the whole spec."""
    problems: list[InputError] = []
    args: list[list[str | Placeholder]] = []
    for i, arg in enumerate(spec.args):
        try:
            args.append(parse_argument(str(arg)) if isinstance(arg, str) else [str(arg)])
        except ValueError as e:
            problems.append(InputError(source, f"args.{i}", arg, f"{PLACEHOLDER} ({e})"))
            args.append([])
    used = {n for parts in args for p in parts if isinstance(p, Placeholder) for n in p.names}
    axes = spec.grid.values()
    grid_keys = [k for k, _ in axes]
    entries = [dict(p.values()) for p in spec.points]

    params: list[tuple[str, str, object]] = [(f"parameters.{k}", k, v) for k, v in spec.parameters.items()]
    params += [(f"grid.{k}", k, v) for k, v in axes if k not in LAYOUT + SWEPT_FILES and not k.startswith("set.")]
    params += [
        (f"points.{i}.{k}", k, v)
        for i, e in enumerate(entries)
        for k, v in e.items()
        if k not in LAYOUT + SWEPT_FILES and not k.startswith("set.")
    ]
    for where, name, value in params:
        if where.startswith("parameters.") and name in _RESERVED:
            problems.append(
                InputError(
                    source, where, value, f"a program parameter: {name} is not one (give it at the spec's top level)"
                )
            )
        elif name in DERIVED:
            problems.append(
                InputError(
                    source,
                    where,
                    value,
                    f"a key to sweep: {name} follows from nodes, gpus_per_node and ranks_per_node (sweep those)",
                )
            )
        elif not name.isidentifier():
            problems.append(InputError(source, where, value, "a program parameter named as a Python identifier"))
        elif name not in used:
            near = closest(name, [*LAYOUT, *SWEPT_FILES, "set", *sorted(used - set(_RESERVED))])
            hint = f" (did you mean '{near}'?)" if near else ""
            problems.append(
                InputError(
                    source,
                    where,
                    value,
                    "a key of the layout (nodes, gpus_per_node, ranks_per_node), machine, costs, calibration, "
                    f"set, or a program parameter that args uses as {{{name}}}{hint}",
                )
            )
    for where, keys in [
        ("set", list(spec.set)),
        ("grid.set", list(spec.grid.set)),
        *[(f"points.{i}.set", list(p.set)) for i, p in enumerate(spec.points)],
    ]:
        for key in keys:
            if key not in machines.parameter_keys():
                near = closest(key, machines.parameter_keys())
                hint = f" (did you mean '{near}'?)" if near else " (e.g. nic.bandwidth)"
                problems.append(InputError(source, f"{where}.{key}", key, f"a parameter of the machine{hint}"))
    for key, values in axes:
        for j, v in enumerate(values):
            if any(_same(v, w) for w in values[:j]):
                problems.append(InputError(source, f"grid.{key}.{j}", v, f"a value not already in grid.{key}"))
    for i, entry in enumerate(entries):
        for key in entry:
            if key in grid_keys:
                problems.append(
                    InputError(source, f"points.{i}.{key}", entry[key], f"a key [grid] does not also sweep ({key})")
                )
        for j in range(i):
            if _same(entry, entries[j]):
                problems.append(InputError(source, f"points.{i}", entry, f"a point unlike points.{j}"))
                break
    # every placeholder has a value at every point
    valued = set(spec.parameters) | set(grid_keys) | set(LAYOUT) | set(DERIVED)
    for i, parts in enumerate(args):
        for part in parts:
            if not isinstance(part, Placeholder):
                continue
            for name in part.names:
                if name in ("machine", "costs", "calibration", "set"):
                    problems.append(
                        InputError(
                            source,
                            f"args.{i}",
                            spec.args[i],
                            f"a placeholder of program parameters or {', '.join((*LAYOUT, *DERIVED))} "
                            f"({name} is not one)",
                        )
                    )
                    continue
                missing = [j for j, e in enumerate(entries) if name not in e] if entries else [None]
                if name not in valued and missing:
                    at = "" if missing == [None] else f" (points.{missing[0]} has none)"
                    problems.append(
                        InputError(
                            source,
                            f"args.{i}",
                            spec.args[i],
                            f"a placeholder with a value at every point: {name} in [parameters], [grid] or each "
                            f"[[points]] entry{at}",
                        )
                    )
    return args, problems


def _same(a: object, b: object) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _expand(spec: Spec) -> Iterator[tuple[dict[str, object], dict[str, object]]]:
    """(the point's parameters, its program parameters' values) in the spec's order: [[points]]
    entries in turn (one without keys when there are none), each with every combination of
    [grid]'s values, the last key of [grid] changing fastest."""
    axes = spec.grid.values()
    for entry in [dict(p.values()) for p in spec.points] or [{}]:
        for combination in itertools.product(*(values for _, values in axes)):
            chosen = dict(zip((k for k, _ in axes), combination))
            parameters = {**entry, **chosen}
            order = [*LAYOUT, *SWEPT_FILES]  # the table's columns: layout, files, set, program
            parameters = dict(
                sorted(
                    parameters.items(),
                    key=lambda kv: (
                        order.index(kv[0]) if kv[0] in order else len(order) + (0 if kv[0].startswith("set.") else 1)
                    ),
                )
            )
            arguments = {
                **spec.parameters,
                **{k: v for k, v in parameters.items() if k not in _RESERVED and not k.startswith("set.")},
            }
            yield parameters, arguments


def load(path: str | Path) -> Sweep:
    """A sweep spec, checked, and its points; InputError(s) naming the spec, key and value."""
    source = Path(path)
    try:
        data = tomllib.loads(read_text(source, "a sweep spec"))
    except tomllib.TOMLDecodeError as e:
        raise InputError(str(source), None, "invalid TOML", f"valid TOML ({e})") from None
    return _load(data, source)


#: What errors call a spec given as a mapping (from_mapping): its paths are relative to its folder
MAPPING_SOURCE = "<spec>"


def from_mapping(data: Mapping[str, Any], folder: str | Path = ".") -> Sweep:
    """A sweep spec given as the mapping its TOML would read as (a notebook's), its paths
    relative to `folder`; errors name it ``FOLDER/<spec>``."""
    return _load(dict(data), Path(folder).absolute() / MAPPING_SOURCE)


def _load(data: dict[str, Any], source: Path) -> Sweep:
    try:
        spec = Spec.model_validate(data)
    except ValidationError as e:
        raise input_error(e, str(source), Spec) from None
    args, problems = _check(spec, str(source))
    program = (source.parent / spec.program).resolve()
    if not program.is_file():
        problems.insert(
            0,
            InputError(
                str(source),
                "program",
                spec.program,
                "an existing program built with Orrery's wrappers (build it first)",
            ),
        )
    if problems:
        raise problems[0] if len(problems) == 1 else InputErrors(str(source), problems)
    points = []
    for index, (parameters, arguments) in enumerate(_expand(spec)):
        given: dict[str, Any] = parameters
        points.append(
            SweepPoint(
                id=point_id(parameters),
                index=index,
                parameters=parameters,
                machine=given.get("machine", spec.machine),
                nodes=given.get("nodes", spec.nodes),
                gpus_per_node=given.get("gpus_per_node", spec.gpus_per_node),
                ranks_per_node=given.get("ranks_per_node", spec.ranks_per_node),
                costs=given.get("costs", spec.costs),
                calibration=given.get("calibration", spec.calibration),
                set={**spec.set, **{k.removeprefix("set."): v for k, v in parameters.items() if k.startswith("set.")}},
                arguments=arguments,
            )
        )
    return Sweep(source, spec, program, points, args)
