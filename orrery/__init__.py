"""Orrery: predict how a CUDA + MPI program behaves on a GPU cluster you do not have.

The package is laid out by pipeline stage:

- ``machines``: machine descriptions -> the SimGrid platform (``machines.platform``);
- ``run``: compiler wrappers, the program under SMPI with the CUDA stand-in, results;
- ``calibration``: measured sweeps, the microbenchmarks that reproduce them, fits.

``cli`` is the command line; ``errors``, ``units`` and ``schema`` are shared by every stage.
"""

__version__ = "0.1.0"
