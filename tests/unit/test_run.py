"""How `orrery run` launches SMPI (orrery/run.py)."""

from pathlib import Path

import pytest

from orrery.errors import SimulationError
from orrery.run import launch as running

pytestmark = pytest.mark.unit


def test_the_pinning_library_is_preloaded_into_smpi_s_launcher_only(monkeypatch, tmp_path):
    """orrery run hands smpirun a wrapper that preloads liborrery_smpi.so, then Orrery's runtime
    (before libsimgrid, so that SMPI's Fortran bindings call its MPI wrappers) and NCCL's stand-in
    (which must win over the program's own NCCL) into SMPI's launcher, ahead of any LD_PRELOAD of
    the user's; an install path with a space, which smpirun would split, stops the run with its
    reason before anything is written."""
    ours = "/opt/orrery/lib/liborrery_smpi.so:/opt/orrery/lib/libcudart.so.13:/opt/orrery/lib/libnccl.so.2"
    monkeypatch.setenv("LD_PRELOAD", "/opt/a.so /opt/b.so")
    assert running._preload(Path("/opt/orrery/lib")) == f"env LD_PRELOAD={ours}:/opt/a.so:/opt/b.so"
    monkeypatch.delenv("LD_PRELOAD")
    assert running._preload(Path("/opt/orrery/lib")) == f"env LD_PRELOAD={ours}"
    with pytest.raises(SimulationError, match=r"installed under a path with a space \(/opt/my orrery/lib\)"):
        running._preload(Path("/opt/my orrery/lib"))
