"""Stage 1: machines. A machine description (TOML, validated by ``description``) becomes the
SimGrid platform its run is simulated on (``platform``)."""

from .description import (
    MEASURED_MODELS,
    Machine,
    Segment,
    builtin_names,
    load,
    parameter_keys,
    parse_overrides,
    validate,
    with_units,
)

__all__ = [
    "MEASURED_MODELS",
    "Machine",
    "Segment",
    "builtin_names",
    "load",
    "parameter_keys",
    "parse_overrides",
    "validate",
    "with_units",
]
