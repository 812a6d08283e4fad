"""What the input files' schemas share: quantity types with units, and one
translation of a pydantic validation error into Orrery's InputError (file,
key, value, what was expected). Used by machine.py and costs.py."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, ValidationError

from . import units
from .errors import InputError

Time = Annotated[float, BeforeValidator(lambda v: units.parse(v, "time"))]
SignedTime = Annotated[float, BeforeValidator(lambda v: units.parse(v, "time", signed=True))]
Size = Annotated[float, BeforeValidator(lambda v: units.parse(v, "size"))]
Bandwidth = Annotated[float, BeforeValidator(lambda v: units.parse(v, "bandwidth"))]
Flops = Annotated[float, BeforeValidator(lambda v: units.parse(v, "flops"))]


def input_error(e: ValidationError, source: str, unknown_key: str = "no such key (unknown parameter)",
                overridden: frozenset[str] | set[str] = frozenset()) -> InputError:
    """The first problem pydantic found, as an InputError naming source, key and value."""
    err = e.errors()[0]
    key = ".".join(str(p) for p in err["loc"]) or None
    given = next((k for k in overridden if key and (key == k or key.startswith(k + ".") or k.startswith(key + "."))),
                 None)
    if given:  # the value came from --set (a key, a list or table under it, or the section it is in)
        source = f"--set {given} (on {source})"
    if err["type"] == "missing":
        return InputError(source, key, None, "this key to be present")
    if err["type"] == "extra_forbidden":
        return InputError(source, key, err["input"], unknown_key)
    return InputError(source, key, err.get("input"), err["msg"].removeprefix("Value error, ").removeprefix("expected "))
