"""The machine schema reference (docs/machine-schema.md), written from the pydantic models of
description.py so that it cannot drift from what `orrery machine validate` accepts.

    python -m orrery.machines.schema_doc > docs/machine-schema.md

Every key's type and unit, default and meaning come from its field (the meaning from the
field's description, which a field must have: a model changed without one stops the generator);
tests/unit/test_docs.py checks that the committed page is what this writes now.
"""

from __future__ import annotations

import sys
import typing
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from .. import units
from ..schema import Quantity, SignedTime, unwrap
from .description import Machine, _Measured, _Section

COMMAND = "python -m orrery.machines.schema_doc > docs/machine-schema.md"

#: What marks a quantity that may be negative: SignedTime's own validator.
_SIGNED = typing.get_args(SignedTime)[1:]

_KIND_NAMES = {
    "time": "time",
    "size": "size",
    "bandwidth": "bandwidth",
    "flops": "compute rate",
    "frequency": "frequency",
}


class MissingDescription(Exception):
    """A field of the schema without a description: the reference would have a blank row."""


def _constraints(meta: list) -> list:
    """The annotated_types bounds among a field's metadata (pydantic's FieldInfo carries its own)."""
    found = []
    for m in meta:
        if isinstance(m, FieldInfo):
            found += _constraints(m.metadata)
        elif isinstance(
            m, (annotated_types.Ge, annotated_types.Gt, annotated_types.Le, annotated_types.Lt, annotated_types.MinLen)
        ):
            found.append(m)
    return found


def _bounds(meta: list) -> str:
    """The tightest bounds of a number, in words ("1 to 256", "> 0", ">= 1")."""
    # annotated_types' bounds are typed as comparison protocols; here they are numbers
    lo: Any = None
    hi: Any = None
    lo_strict = False
    for c in _constraints(meta):
        if isinstance(c, annotated_types.Ge) and (lo is None or c.ge > lo):
            lo, lo_strict = c.ge, False
        elif isinstance(c, annotated_types.Gt) and (lo is None or c.gt >= lo):
            lo, lo_strict = c.gt, True
        elif isinstance(c, annotated_types.Le) and (hi is None or c.le < hi):
            hi = c.le
    if lo is not None and hi is not None and not lo_strict:
        return f"{_number(lo)} to {_number(hi)}"
    parts = ([f"{'>' if lo_strict else '>='} {_number(lo)}"] if lo is not None else []) + (
        [f"<= {_number(hi)}"] if hi is not None else []
    )
    return ", ".join(parts)


def _number(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def _literal(value: object) -> str:
    return f'`"{value}"`' if isinstance(value, str) else f"`{value}`"


def type_text(annotation: object, metadata: list) -> str:
    """A field's type in words: the quantity with its unit, the choices, the count's range."""
    tp, meta = unwrap(annotation)
    meta = list(metadata) + meta
    kind = next((m.kind for m in meta if isinstance(m, Quantity)), None)
    if kind:
        text = _KIND_NAMES[kind]
        if any(m is v for m in meta for v in _SIGNED):
            return text + ", may be negative"
        bounds = _bounds(meta)
        return text + (f", {bounds}" if bounds else "")
    if typing.get_origin(tp) is Literal:
        return "one of " + ", ".join(_literal(v) for v in typing.get_args(tp))
    if typing.get_origin(tp) is list:
        item, _ = unwrap(typing.get_args(tp)[0])
        return f"list of [{item.__name__}](#{item.__name__.lower()}) tables, by increasing size"
    if typing.get_origin(tp) is dict:
        return "table of text, by key"
    if tp is bool:
        return "`true` or `false`"
    if tp is int:
        bounds = _bounds(meta)
        return "whole number" + (f", {bounds}" if bounds else "")
    if tp is float:
        bounds = _bounds(meta)
        return "plain number" + (f", {bounds}" if bounds else "")
    if tp is str:
        pattern = next((p for m in meta for p in _patterns(m)), None)
        if pattern:
            return f"text matching `{pattern}`"
        return "text" + (", not blank" if any(callable(getattr(m, "func", None)) for m in meta) else "")
    raise TypeError(f"no words for the type {annotation!r}")


def _patterns(m: object) -> list[str]:
    """The regular expressions a field's metadata holds (pydantic keeps them in its own types)."""
    if isinstance(m, FieldInfo):
        return [p for c in m.metadata for p in _patterns(c)]
    pattern = getattr(m, "pattern", None)
    return [pattern] if isinstance(pattern, str) else []


def default_text(info: FieldInfo, annotation: object) -> str:
    if info.is_required():
        return "required"
    value = info.default
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "none"
    if isinstance(value, dict) and not value:
        return "empty"
    _, meta = unwrap(annotation)
    kind = next((m.kind for m in [*info.metadata, *meta] if isinstance(m, Quantity)), None)
    if kind:
        return f"`{value!r}{units.BASE_UNIT[kind]}`"
    return _literal(value)


def _description(model: type[BaseModel], name: str, info: FieldInfo) -> str:
    if not info.description:
        raise MissingDescription(f"{model.__name__}.{name} has no description (Field(description=...))")
    return " ".join(info.description.split())


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def field_table(model: type[BaseModel]) -> list[str]:
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for name, info in model.model_fields.items():
        lines.append(
            f"| `{name}` | {_cell(type_text(info.annotation, info.metadata))} | "
            f"{_cell(default_text(info, info.annotation))} | {_cell(_description(model, name, info))} |"
        )
    return lines


def _doc(model: type) -> str:
    doc = model.__doc__ or ""
    return " ".join(doc.split()) if doc and model.__doc__ != BaseModel.__doc__ else ""


def segment_models() -> list[type[BaseModel]]:
    """The models of the measured sections' list items, in the order they first appear."""
    found: list[type[BaseModel]] = []
    for info in Machine.model_fields.values():
        section = info.annotation
        if isinstance(section, type) and issubclass(section, _Measured):
            for field in section.model_fields.values():
                tp, _ = unwrap(field.annotation)
                item, _ = unwrap(typing.get_args(tp)[0])
                if item not in found:
                    found.append(item)
    return found


def markdown() -> str:
    """The whole reference page."""
    out = [
        "# Machine description schema",
        "",
        f"Generated from the pydantic models in `orrery/machines/description.py` by `{COMMAND}`:",
        "edit the models' field descriptions, not this page (`tests/unit/test_docs.py` checks that it is",
        "current). What the sections describe, the built-in machines and `--set` are in",
        "[machines.md](machines.md).",
        "",
        "A machine is a TOML file of the sections below. Quantities take units ("
        + "; ".join(f"{_KIND_NAMES[k]}: {units.EXAMPLES[k]}" for k in _KIND_NAMES)
        + ")"
        + ". A plain number is an error (only `0` may go without a unit). Any key can be overridden with "
        "`--set SECTION.KEY=VALUE`, checked as the file is.",
        "",
        "## Top level",
        "",
        "| key | type | default | meaning |",
        "|---|---|---|---|",
    ]
    sections = []
    for name, info in Machine.model_fields.items():
        section = info.annotation
        if isinstance(section, type) and issubclass(section, _Section):
            sections.append((name, section, info))
            what = f"[section](#{name})"
        else:
            what = _cell(type_text(info.annotation, info.metadata))
        out.append(
            f"| `{name}` | {what} | {_cell(default_text(info, info.annotation))} | "
            f"{_cell(_description(Machine, name, info))} |"
        )
    for name, section, info in sections:
        out += ["", f"## {name}", "", _doc(section) or _description(Machine, name, info), "", *field_table(section)]
    for model in segment_models():
        out += ["", f"## {model.__name__}", ""]
        if _doc(model):
            out += [_doc(model), ""]
        out += field_table(model)
    return "\n".join(out) + "\n"


def main() -> int:
    sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
