"""Quantities with units, as machine descriptions and cost files write them.

Accepted: compute rates (``67TFLOP/s``), times (``6.8ps``, ``2.5us``, ``1.2 ms``, ``3s``), sizes (``80GiB``, ``50MB``,
``4096B``), bandwidths (``53.8GB/s``, ``200Gbps``, ``25 GiB/s``) and plain
numbers in SI base units (seconds, bytes, bytes per second). Decimal prefixes
are powers of 1000 and binary prefixes (Ki, Mi, Gi, Ti) powers of 1024, as in
vendor data sheets; ``b`` (bit) is an eighth of ``B`` (byte).
"""

from __future__ import annotations

import re
from decimal import Decimal

# Decimal arithmetic so that "53.8GB/s" is exactly 53.8e9, not 53.8 * 1e9 rounded twice.
_PREFIX = {
    "": Decimal(1), "p": Decimal("1e-12"), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "µ": Decimal("1e-6"),
    "m": Decimal("1e-3"), "k": Decimal("1e3"), "K": Decimal("1e3"), "M": Decimal("1e6"),
    "G": Decimal("1e9"), "T": Decimal("1e12"), "P": Decimal("1e15"),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
}
_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
_QUANTITY = re.compile(rf"^\s*{_NUMBER}\s*([A-Za-zµ/]*)\s*$")

KINDS = {
    "time": "a time such as 2.5us, 1ms or 0.5 (seconds)",
    "size": "a size such as 80GiB, 50MB or 4096 (bytes)",
    "bandwidth": "a bandwidth such as 53.8GB/s, 200Gbps or 2.5e10 (bytes/s)",
    "flops": "a compute rate such as 67TFLOP/s or 6.7e13 (floating-point operations/s)",
}


def _unit_scale(kind: str, unit: str) -> Decimal | None:
    if unit == "":
        return Decimal(1)
    for prefix, scale in sorted(_PREFIX.items(), key=lambda kv: -len(kv[0])):
        if not unit.startswith(prefix):
            continue
        rest = unit[len(prefix):]
        if kind == "time" and rest == "s" and prefix in ("", "p", "n", "u", "µ", "m"):
            return scale
        if kind == "size" and rest in ("B", "b") and prefix not in ("p", "n", "u", "µ", "m"):
            return scale / (8 if rest == "b" else 1)
        if kind == "bandwidth" and prefix not in ("p", "n", "u", "µ", "m"):
            if rest in ("B/s", "Bps"):
                return scale
            if rest in ("b/s", "bps"):
                return scale / 8
        if kind == "flops" and rest in ("FLOP/s", "FLOPS", "flop/s", "flops") and prefix not in ("p", "n", "u", "µ", "m"):
            return scale
    return None


def parse(value: object, kind: str, signed: bool = False) -> float:
    """Return `value` in SI base units; raise ValueError naming what was expected. A negative
    value is refused unless `signed`."""
    if kind not in KINDS:
        raise ValueError(f"unknown quantity kind {kind!r}")
    if isinstance(value, bool):
        raise ValueError(f"expected {KINDS[kind]}")
    if isinstance(value, (int, float)):
        number, scale = Decimal(repr(value)), Decimal(1)
    elif isinstance(value, str):
        m = _QUANTITY.match(value)
        scale = _unit_scale(kind, m.group(2)) if m else None
        if m is None or scale is None:
            raise ValueError(f"expected {KINDS[kind]}")
        number = Decimal(m.group(1))
    else:
        raise ValueError(f"expected {KINDS[kind]}")
    if number < 0 and not signed:
        raise ValueError(f"expected a non-negative {kind}")
    return float(number * scale)
