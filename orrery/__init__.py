"""Orrery: predict how a CUDA + MPI program behaves on a GPU cluster you do not have.

Stages, one module each: machine (descriptions) -> platform (SimGrid platform)
-> build (compiler wrappers) -> run (the program under SMPI with the CUDA
stand-in) -> results (results.json and the summary). ``cli`` is the command line.
"""

__version__ = "0.1.0"
