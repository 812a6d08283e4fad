"""What the input files' schemas share: quantity types with units, reading a named
file as text, and one translation of a pydantic validation error into Orrery's
InputError (file, key, value, what was expected), every problem of the input at
once. Used by machine.py, costs.py, appfit.py and the other readers."""

from __future__ import annotations

import difflib
import math
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, TypeAlias

from pydantic import BaseModel, BeforeValidator, ValidationError

from . import units
from .errors import InputError, InputErrors


class Quantity(NamedTuple):
    """Marks a schema field as a quantity of this kind (units.KINDS), so that a number in SI
    units can be written back with its unit (with_units)."""

    kind: str


def quantity(kind: str, signed: bool = False, plain: bool = False):
    return Annotated[float, BeforeValidator(lambda v: units.parse(v, kind, signed=signed, plain=plain)), Quantity(kind)]


if TYPE_CHECKING:  # to a type checker a quantity is the float it holds (quantity() builds it at run time)
    Time: TypeAlias = float
    SignedTime: TypeAlias = float
    Size: TypeAlias = float
    Bandwidth: TypeAlias = float
    Flops: TypeAlias = float
    Frequency: TypeAlias = float
    Seconds: TypeAlias = float
else:
    # Machine descriptions: a quantity needs its unit (only 0 may go without one).
    Time = quantity("time")
    SignedTime = quantity("time", signed=True)
    Size = quantity("size")
    Bandwidth = quantity("bandwidth")
    Flops = quantity("flops")
    Frequency = quantity("frequency")
    # Cost files and fit specs, which `orrery fit` fills in with plain numbers: seconds without a unit.
    Seconds = quantity("time", plain=True)


class Problems(ValueError):
    """What a model validator found wrong across its fields, every problem at once: per problem
    the key (relative to the model that raises it), the value and what was expected."""

    def __init__(self, problems: list[tuple[str, object, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{k}: got {v!r}, expected {x}" for k, v, x in problems))


def read_text(path: Path, what: str) -> str:
    """The text of a file a user named, or an InputError naming it: unreadable, or not UTF-8
    (a binary file, another encoding)."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InputError(
            str(path),
            None,
            f"byte 0x{e.object[e.start]:02x} at offset {e.start}",
            f"{what} in UTF-8 text (this is binary or in another encoding)",
        ) from None
    except OSError as e:
        raise InputError(str(path), None, str(path), f"{what} that can be read ({e.strerror})") from None


def unwrap(tp: Any) -> tuple[Any, list]:
    """A type without its Annotated wrappers and None alternative, and the metadata gathered on
    the way (the error messages here and the schema reference, machines/schema_doc.py, read it)."""
    meta: list = []
    while True:
        if typing.get_origin(tp) is Annotated:
            tp, *more = typing.get_args(tp)
            meta += more
        elif typing.get_origin(tp) in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp, meta
            tp = args[0]
        else:
            return tp, meta


def field_type(model: type[BaseModel], name: str) -> object | None:
    """A field's full annotation, its metadata (pydantic lifts it off) put back."""
    info = model.model_fields.get(name)
    if info is None:
        return None
    return Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation


def type_at(tp: object, loc: tuple) -> object | None:
    """The annotation of the value at `loc` (keys and list indices) under type `tp`."""
    for part in loc:
        tp, _ = unwrap(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            tp = field_type(tp, str(part))
        elif typing.get_origin(tp) is list:
            tp = typing.get_args(tp)[0]
        elif typing.get_origin(tp) is dict:
            tp = typing.get_args(tp)[1]
        else:
            return None
        if tp is None:
            return None
    return tp


def known_keys(tp: object) -> list[str]:
    """The keys a table of this type may have (its model's fields), or none."""
    tp, _ = unwrap(tp)
    return list(tp.model_fields) if isinstance(tp, type) and issubclass(tp, BaseModel) else []


def closest(name: str, known: list[str], cutoff: float = 0.6) -> str | None:
    """The known name closest to a misspelt one (difflib's ratio, `cutoff` or more), or None."""
    found = difflib.get_close_matches(name, known, n=1, cutoff=cutoff)
    return found[0] if found else None


def with_units(tp: object, value: object) -> object:
    """A value in SI units (a calibration file's numbers) with the unit of its quantity written
    out, so that it is checked as a description's own value is; other values (and numbers that
    are not finite, for validation to refuse) as they are."""
    base, meta = unwrap(tp)
    kind = next((m.kind for m in meta if isinstance(m, Quantity)), None)
    if kind and isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return f"{value!r}{units.BASE_UNIT[kind]}"
    if isinstance(value, list) and typing.get_origin(base) is list:
        return [with_units(typing.get_args(base)[0], v) for v in value]
    if isinstance(value, dict) and isinstance(base, type) and issubclass(base, BaseModel):
        return {k: with_units(field_type(base, k), v) if k in base.model_fields else v for k, v in value.items()}
    return value


def _key(loc: tuple) -> str | None:
    return ".".join(str(p) for p in loc) or None


def input_error(
    e: ValidationError,
    source: str,
    model: type[BaseModel] | None = None,
    unknown_key: str = "no such key",
    overridden: Mapping[str, str] | None = None,
) -> InputError:
    """Every problem pydantic found, as InputErrors naming source, key and value (one
    InputError where there is one). `model`, the schema validated against, lets an unknown key
    name the closest known one. `overridden` maps each key set from outside the file to where
    it came from: "--set", or a calibration file (whose key is then `overrides.KEY`)."""
    found: list[InputError] = []
    seen: set[tuple] = set()
    missing = [tuple(err["loc"]) for err in e.errors() if err["type"] == "missing"]
    for err in e.errors():
        loc = tuple(err["loc"])
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, Problems):
            items = [(loc + tuple(k.split(".")), v, x) for k, v, x in cause.problems]
        elif err["type"] == "missing":
            items = [(loc, None, "this key to be present")]
        elif err["type"] == "extra_forbidden":
            # a misspelt key leaves its own key missing from the same table: that one first
            lacking = [str(m[-1]) for m in missing if m[:-1] == loc[:-1]]
            near = closest(str(loc[-1]), lacking, cutoff=0.3) or (
                closest(str(loc[-1]), known_keys(type_at(model, loc[:-1]))) if model else None
            )
            hint = f" (did you mean '{_key((*loc[:-1], near))}'?)" if near else ""
            items = [(loc, err["input"], unknown_key + hint)]
        else:
            msg = err["msg"].removeprefix("Value error, ").removeprefix("expected ").removeprefix("Input should be ")
            items = [(loc, err.get("input"), msg)]
        for where, value, expected in items:
            if where in seen:  # one problem per key (a union's alternatives each report it)
                continue
            seen.add(where)
            found.append(_blamed(source, _key(where), value, expected, overridden or {}))
    return found[0] if len(found) == 1 else InputErrors(source, found)


def _blamed(source: str, key: str | None, value: object, expected: str, overridden: Mapping[str, str]) -> InputError:
    """The InputError of a key, blamed on the override that set it (the key itself, a list or
    table under it, or the section it is in), else on the file."""
    given = next(
        (k for k in overridden if key and (key == k or key.startswith(k + ".") or k.startswith(key + "."))), None
    )
    if given is None:
        return InputError(source, key, value, expected)
    if overridden[given] == "--set":
        return InputError(f"--set {given} (on {source})", key, value, expected)
    return InputError(overridden[given], f"overrides.{key}", value, f"{expected} (a calibration of {source})")
