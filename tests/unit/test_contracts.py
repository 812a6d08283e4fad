"""Names the shim and the Python package share outside the run description's schema: keep them equal."""

import re
from pathlib import Path

import pytest

from orrery import machines as machine

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
SHIM = REPO / "interpose"


def test_every_collective_the_shim_corrects_has_its_machine_keys():
    """The shim looks a collective's correction up in the run description by its lower-case name,
    alone or with _device or _host (engine's collective_correction): each must be a machine key."""
    colls = re.findall(r"^ORR_MPI_COLL\((\w+),", (SHIM / "mpi" / "mpi_api.def").read_text(), re.MULTILINE)
    assert colls
    keys = {f"{c.lower()}{kind}" for c in colls for kind in ("", "_device", "_host")}
    assert keys == set(machine.description.Collectives.model_fields)
