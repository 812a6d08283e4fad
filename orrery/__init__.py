"""Orrery: predict how a CUDA + MPI program behaves on a GPU cluster you do not have.

The Python API (orrery.api)::

    import orrery
    res = orrery.simulate("./jacobi", ["-niter", "10"], machine="h100-ib200", nodes=2)
    res.to_frame()                 # per rank, a pandas DataFrame
    orrery.load("orrery-out")      # an earlier run's results

The package is laid out by pipeline stage:

- ``machines``: machine descriptions -> the SimGrid platform (``machines.platform``);
- ``run``: compiler wrappers, the program under SMPI with the CUDA stand-in, results;
- ``calibration``: measured sweeps, the microbenchmarks that reproduce them, fits;
- ``sweep``: a program over a grid of layouts, arguments and machines, its table and plots.

``api`` is the Python entry point and ``cli`` the command line, both over the stages;
``errors``, ``units`` and ``schema`` are shared by every stage.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["RunFailed", "load", "simulate"]

# the API's module imports nothing heavy until it is called: `import orrery` (the CLI's start) stays light
from .api import RunFailed, load, simulate
