"""Stage 2: run. The program built with the compiler wrappers (``build``) runs under SMPI with the
CUDA stand-in (``launch``), its kernels priced by a cost file (``costs``); what it left becomes
results.json and the summary (``results``), checked against what the platform allows (``physics``)."""

from typing import Any

__all__ = ["FILL_POLICIES", "GPU_VISIBILITY", "RunOptions", "run"]


def __getattr__(name: str) -> Any:
    # The launcher's names, imported when first used: the compiler wrappers (build), which a
    # configure script starts a hundred times, do not pay for the launcher's imports (pydantic).
    if name in __all__:
        from . import launch

        return getattr(launch, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
