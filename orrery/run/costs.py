"""Kernel cost files: how long each kernel keeps its GPU busy in skeleton mode.

A cost file is TOML (``.toml``) or JSON (``.json``)::

    [default]
    time = "5us"                 # kernels the file does not name (optional)

    [kernels."jacobi_kernel"]    # key: a kernel's name (see below)
    alpha = "19us"               # device time = alpha + beta * threads launched
    beta = "6.8ps"               # threads launched = grid x block, all dimensions

    [kernels."void scale<float>(float*, float, int)"]
    time = "12us"                # a fixed time per launch

A key matches a kernel if it is its full demangled signature, its name without
the parameter list (``scale<float>``), or that name without template
arguments (``scale``); the most specific key wins. Kernels no key matches get
the default time and are listed in the run's report (``--strict`` makes them an
error). Times take units (``us``, ``ns``, ``ps``) or are plain seconds.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from ..errors import InputError
from ..schema import Seconds, input_error, read_text
from . import run_description

#: Device time of a kernel that no cost entry matches (a short memory-bound kernel): the run
#: description's default (interpose/core/run_description.json).
DEFAULT_KERNEL_TIME: float = run_description.default("default_kernel_s")


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    time: Seconds | None = None
    alpha: Seconds | None = None
    beta: Seconds | None = None

    @model_validator(mode="after")
    def _one_form(self) -> _Entry:
        if self.time is not None and (self.alpha is not None or self.beta is not None):
            raise ValueError("give either 'time' or 'alpha'/'beta', not both")
        if self.time is None and self.alpha is None and self.beta is None:
            raise ValueError("give 'time', or 'alpha' and/or 'beta'")
        return self


class _Default(BaseModel):
    model_config = ConfigDict(extra="forbid")
    time: Seconds


class _CostFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    default: _Default | None = None
    kernels: dict[str, _Entry] = {}


@dataclass(frozen=True)
class KernelCost:
    alpha_s: float
    beta_s_per_thread: float

    def seconds(self, threads: int) -> float:
        return self.alpha_s + self.beta_s_per_thread * threads


@dataclass(frozen=True)
class Costs:
    kernels: dict[str, KernelCost]
    default_s: float = DEFAULT_KERNEL_TIME


def load(path: str | Path | None) -> Costs:
    """Read and validate a cost file; None gives no costs (every kernel defaulted)."""
    if path is None:
        return Costs({})
    p = Path(path)
    if not p.is_file():
        raise InputError(str(p), None, str(p), "an existing cost file (--costs)")
    if p.suffix not in (".toml", ".json"):
        raise InputError(str(p), None, p.suffix, "a .toml or .json cost file")
    text = read_text(p, "a cost file")
    try:
        data = tomllib.loads(text) if p.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise InputError(str(p), None, "unparsable file", f"valid {p.suffix[1:].upper()} ({e})") from None
    if not isinstance(data, dict):
        raise InputError(
            str(p), None, f"a JSON {type(data).__name__}", "a cost file: a JSON object with default and kernels"
        )
    try:
        parsed = _CostFile.model_validate(data)
    except ValidationError as e:
        raise input_error(
            e, str(p), _CostFile, unknown_key="no such key (allowed: default.time, kernels.<name>.time/alpha/beta)"
        ) from None
    kernels = {
        name: KernelCost(e.time if e.time is not None else (e.alpha or 0.0), e.beta or 0.0)
        for name, e in parsed.kernels.items()
    }
    return Costs(kernels, parsed.default.time if parsed.default else DEFAULT_KERNEL_TIME)
