"""Stage 2: run. The program built with the compiler wrappers (``build``) runs under SMPI with the
CUDA stand-in (``launch``), its kernels priced by a cost file (``costs``); what it left becomes
results.json and the summary (``results``), checked against what the platform allows (``physics``)."""

from .launch import FILL_POLICIES, GPU_VISIBILITY, RunOptions, run

__all__ = ["FILL_POLICIES", "GPU_VISIBILITY", "RunOptions", "run"]
