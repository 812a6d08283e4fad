"""Quantities with units, as machine descriptions and cost files write them.

Accepted: compute rates (``67TFLOP/s``), clock frequencies (``1980MHz``, ``1.98GHz``), times (``6.8ps``, ``2.5us``, ``1.2 ms``, ``3s``), sizes (``80GiB``, ``50MB``,
``4096B``), bandwidths (``53.8GB/s``, ``200Gbps``, ``25 GiB/s``). Decimal prefixes
are powers of 1000 and binary prefixes (Ki, Mi, Gi, Ti) powers of 1024, as in
vendor data sheets; ``b`` (bit) is an eighth of ``B`` (byte). A plain number
(SI base units: seconds, bytes, bytes per second) only where the caller allows
it (cost files' seconds); elsewhere only 0 may go without a unit, so that a
``bandwidth = 53.8`` meant as GB/s is not taken for 53.8 B/s. Every value is
finite; bandwidths and compute rates are positive (a rate of 0 is no rate).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, DecimalException

# Decimal arithmetic so that "53.8GB/s" is exactly 53.8e9, not 53.8 * 1e9 rounded twice.
_PREFIX = {
    "": Decimal(1),
    "p": Decimal("1e-12"),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "µ": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "K": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
}
_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
_QUANTITY = re.compile(rf"^\s*{_NUMBER}\s*([A-Za-zµ/]*)\s*$")

KINDS = {
    "time": "a time such as 2.5us, 1ms or 0.5 (seconds)",
    "size": "a size such as 80GiB, 50MB or 4096 (bytes)",
    "bandwidth": "a bandwidth such as 53.8GB/s, 200Gbps or 2.5e10 (bytes/s)",
    "flops": "a compute rate such as 67TFLOP/s or 6.7e13 (floating-point operations/s)",
    "frequency": "a frequency such as 1980MHz, 1.98GHz or 1.98e9 (Hz)",
}
EXAMPLES = {
    "time": "2.5us, 1ms or 0.5s",
    "size": "80GiB, 50MB or 4096B",
    "bandwidth": "53.8GB/s, 200Gbps or 2.5e10B/s",
    "flops": "67TFLOP/s or 6.7e13FLOP/s",
    "frequency": "1980MHz, 1.98GHz or 1.98e9Hz",
}
WITH_UNIT = {
    kind: f"a {'compute rate' if kind == 'flops' else kind} with its unit, such as {EXAMPLES[kind]}"
    for kind in EXAMPLES
}
#: The SI base unit of each kind, as parse() reads it: a number in SI units written back with it.
BASE_UNIT = {"time": "s", "size": "B", "bandwidth": "B/s", "flops": "FLOP/s", "frequency": "Hz"}
POSITIVE = ("bandwidth", "flops", "frequency")


def _unit_scale(kind: str, unit: str) -> Decimal | None:
    if unit == "":
        return Decimal(1)
    for prefix, scale in sorted(_PREFIX.items(), key=lambda kv: -len(kv[0])):
        if not unit.startswith(prefix):
            continue
        rest = unit[len(prefix) :]
        if kind == "time" and rest == "s" and prefix in ("", "p", "n", "u", "µ", "m"):
            return scale
        if kind == "size" and rest in ("B", "b") and prefix not in ("p", "n", "u", "µ", "m"):
            return scale / (8 if rest == "b" else 1)
        if kind == "bandwidth" and prefix not in ("p", "n", "u", "µ", "m"):
            if rest in ("B/s", "Bps"):
                return scale
            if rest in ("b/s", "bps"):
                return scale / 8
        if (
            kind == "flops"
            and rest in ("FLOP/s", "FLOPS", "flop/s", "flops")
            and prefix not in ("p", "n", "u", "µ", "m")
        ):
            return scale
        if kind == "frequency" and rest == "Hz" and prefix in ("", "k", "M", "G"):
            return scale
    return None


def parse(value: object, kind: str, signed: bool = False, plain: bool = True) -> float:
    """Return `value` in SI base units; raise ValueError naming what was expected. A negative
    value is refused unless `signed`, a plain number other than 0 unless `plain`, a value that
    is not finite (nan, inf, or beyond a float's range once scaled) always."""
    if kind not in KINDS:
        raise ValueError(f"unknown quantity kind {kind!r}")
    expected = KINDS[kind] if plain else WITH_UNIT[kind]
    if isinstance(value, bool):
        raise ValueError(f"expected {expected}")
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"expected a finite {kind}, such as {EXAMPLES[kind]}")
        if not plain and value != 0:
            raise ValueError(f"expected {expected} (a plain number has no unit)")
        number, scale = Decimal(repr(value)), Decimal(1)
    elif isinstance(value, str):
        m = _QUANTITY.match(value)
        unit_scale = _unit_scale(kind, m.group(2)) if m else None
        if m is None or unit_scale is None:
            raise ValueError(f"expected {expected}")
        scale = unit_scale
        if not plain and m.group(2) == "" and Decimal(m.group(1)) != 0:
            raise ValueError(f"expected {expected} (a plain number has no unit)")
        number = Decimal(m.group(1))
    else:
        raise ValueError(f"expected {expected}")
    if number <= 0 and kind in POSITIVE:
        raise ValueError(f"expected a positive {kind}, such as {EXAMPLES[kind]} (a rate of 0 is none)")
    if number < 0 and not signed:
        raise ValueError(f"expected a non-negative {kind}")
    try:
        result = float(number * scale)
    except DecimalException:  # an exponent beyond Decimal's own range
        result = math.inf
    if not math.isfinite(result):
        raise ValueError(f"expected a finite {kind}: {value} is beyond a float's range (1.8e308 in SI units)")
    return result
