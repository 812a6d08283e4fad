"""A run's limits: ``orrery run --sim-time-limit`` (simulated time) and ``--wall-time-limit``
(the wall clock), as the CLI, the API and a sweep spec give them.

A limit is a time with its unit (``2.5s``, ``500ms``, ``30min``, ``2h``) or a plain number of
seconds; minutes and hours are taken here only, for limits, where a wall-clock limit of hours is
what a user writes (machine descriptions' times stay in seconds and below)."""

from __future__ import annotations

import re

from .. import units
from ..errors import InputError

_LONG = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(min|h)\s*$")
_LONG_SCALE = {"min": 60.0, "h": 3600.0}
EXPECTED = "a positive time such as 500ms, 2.5s, 30min or 2h (a plain number: seconds)"


def parse(value: object) -> float:
    """The limit `value` in seconds; a bad one raises ValueError saying what was expected."""
    if isinstance(value, str) and (m := _LONG.match(value)):
        result = float(m.group(1)) * _LONG_SCALE[m.group(2)]
    else:
        try:
            result = units.parse(value, "time")
        except ValueError:
            raise ValueError(EXPECTED) from None
    if not 0 < result < float("inf"):
        raise ValueError(EXPECTED)
    return result


def seconds(value: object, flag: str) -> float | None:
    """The limit `value` in seconds (None: none); a bad one raises InputError naming `flag`."""
    if value is None:
        return None
    try:
        return parse(value)
    except ValueError:
        raise InputError(flag, None, value, EXPECTED) from None
