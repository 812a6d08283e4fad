"""Calibration files read back, and merged with a machine's description and its overrides.

A calibration file (``orrery calibrate``'s calibration.json) holds its machine's parameters in
SI units; a machine is loaded with them as a layer of its own, between the description and the
``--set`` overrides (orrery.machines.load), so that a problem with one of its values is blamed
on the file. The same merge serves ``orrery run``, ``orrery validate``, the closed loop and
every candidate machine scored during a calibration.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .. import machines, schema
from ..errors import InputError

FORMAT_VERSION = 3  # 2: copies.* models among the overrides; 3: gaps.* and collectives.NAME_device/_host too
READABLE_VERSIONS = (1, 2, 3)  # version 1 files only hold scalar overrides, read alike


@dataclass(frozen=True)
class Calibration:
    """A calibration file's overrides (key -> value in SI units), and the file."""

    file: str
    overrides: dict[str, object] = field(default_factory=dict)

    def as_set(self) -> list[str]:
        """The overrides as `--set` strings, as results.json records what a run was given."""
        return as_set(self.overrides)


def described(overrides: Mapping[str, object]) -> dict[str, object]:
    """Overrides in SI units (a calibration's) as a description writes them, each quantity with
    its unit (machine descriptions need units): what machines.load takes."""
    return {k: machines.with_units(k, v) for k, v in overrides.items()}


def machine(
    name: str, calibration: Calibration | None = None, overrides: Mapping[str, object] = {}
) -> machines.Machine:
    """A machine with a calibration's parameters, then `overrides` (description values, as
    `--set` gives them). A calibration brings its own measured models (copies, messages, gaps,
    collectives): the description's are left out under it."""
    layer = (calibration.file, described(calibration.overrides)) if calibration else None
    return machines.load(name, overrides, measured_models=calibration is None, calibration=layer)


def candidate(name: str, overrides: Mapping[str, object]) -> machines.Machine:
    """The machine a calibration starts from (no measured models of its own) with these
    overrides, in SI units: a candidate scored during calibration, or the calibrated machine."""
    return machines.load(name, described(overrides), measured_models=False)


def toml_value(v: object) -> str:
    """A JSON value of a calibration file as a TOML value (for `--set` and descriptions)."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, str):
        return json.dumps(v)
    return repr(v)


def as_set(overrides: Mapping[str, object]) -> list[str]:
    """Overrides in SI units (a calibration file's) as `--set KEY=VALUE` strings, each quantity
    with its unit written out (machine descriptions need units)."""
    return [f"{k}={toml_value(v)}" for k, v in described(overrides).items()]


def read(path: str | Path, machine_name: str) -> Calibration:
    """A calibration file, checked against the machine it is for."""
    p = Path(path)
    expected = "a calibration file written by orrery calibrate"
    try:
        data = json.loads(schema.read_text(p, expected))
    except json.JSONDecodeError as e:
        raise InputError(str(p), None, "invalid JSON", f"{expected} (valid JSON: {e})") from None
    if not isinstance(data, dict):
        raise InputError(str(p), None, f"a JSON {type(data).__name__}", f"{expected}: a JSON object")
    if data.get("orrery_calibration") not in READABLE_VERSIONS:
        raise InputError(
            str(p),
            "orrery_calibration",
            data.get("orrery_calibration"),
            f"version {' or '.join(map(str, READABLE_VERSIONS))}",
        )
    if data.get("machine") != machine_name:
        raise InputError(str(p), "machine", data.get("machine"), f"a calibration of {machine_name}")
    overrides = data.get("overrides")
    if not isinstance(overrides, dict):
        raise InputError(str(p), "overrides", overrides, "a JSON object of machine parameters (KEY: value in SI units)")
    return Calibration(str(path), overrides)
